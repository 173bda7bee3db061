extension ConfigurationLoader {
    /// `protocol = "put"`: the file's bytes as the whole request body, sent with `method` (`PUT` by
    /// default, or `POST`); the URL may name the file (`{filename}`, `{relative_path}`), as WebDAV
    /// and object stores expect. No form, so no fields.
    struct PutKeys: UploadProtocolKeys {
        static let keys: Set<String> = ["method"]
        static var urlNamesFile: Bool { true }

        let method: String

        init(reading reader: TableReader) {
            method = Self.readMethod(reader, default: "PUT")
            if reader.table["fields"] != nil {
                reader.context.report(reader.path.appending("fields"), "fields are not sent by protocol \"put\" (the body is the file alone); use headers, or protocol \"multipart\" or \"tus\" (tus sends them as Upload-Metadata)")
            }
        }
    }
}
