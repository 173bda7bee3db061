extension ConfigurationLoader {
    /// `protocol = "multipart"`: a form with the configured fields, then the file part named
    /// `file_field`, sent with `method` (`POST` by default, or `PUT`).
    struct MultipartKeys: UploadProtocolKeys {
        static let keys: Set<String> = ["method", "file_field"]

        let method: String
        let fileField: String

        init(reading reader: TableReader) {
            method = Self.readMethod(reader, default: "POST")
            fileField = reader.string("file_field") ?? "file"
            _ = reader.context.checkFileFieldName(fileField, at: reader.path.appending("file_field"))
        }

        /// A field may not have the file part's name.
        func checkField(named name: String, at path: KeyPath, context: LoadContext) {
            if name == fileField {
                context.report(path, "field \"\(name)\" has the same name as file_field")
            }
        }
    }
}
