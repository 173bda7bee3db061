extension ConfigurationLoader {
    /// `protocol = "tus"`: tus 1.0 resumable uploads, created with `POST` and sent with `PATCH`
    /// requests of at most `chunk_size` bytes (default: the whole remainder); the fields are sent
    /// as `Upload-Metadata`, and the tus headers are Ferry's to set.
    struct TusKeys: UploadProtocolKeys {
        static let keys: Set<String> = ["chunk_size"]

        /// Headers of the tus protocol (refused in a tus spool's headers: they would contradict Ferry's).
        static let protocolHeaders: Set<String> = [
            "tus-resumable", "upload-offset", "upload-length", "upload-metadata", "upload-checksum", "upload-concat",
            "upload-defer-length", "x-http-method-override",
        ]
        /// `Upload-Metadata` keys Ferry sends itself (the file's name and type).
        static let reservedMetadataKeys: Set<String> = ["filename", "filetype"]

        var method: String { "POST" }
        let chunkSize: Int64?

        init(reading reader: TableReader) {
            if reader.string("method") != nil {
                reader.context.report(reader.path.appending("method"), "method does not apply to protocol \"tus\" (it creates uploads with POST and sends them with PATCH); remove it")
            }
            chunkSize = reader.size("chunk_size", minimum: 64 * 1024)
        }

        /// A field becomes an `Upload-Metadata` key.
        func checkField(named name: String, at path: KeyPath, context: LoadContext) {
            if !ConfigurationLoader.isValidTusMetadataKey(name) {
                context.report(path, "\"\(name)\" cannot be a tus Upload-Metadata key (use ASCII without spaces or commas)")
            } else if Self.reservedMetadataKeys.contains(name) {
                context.report(path, "\"\(name)\" is sent by Ferry itself in Upload-Metadata (the file's name and type)")
            }
        }

        func checkHeader(named name: String, at path: KeyPath, context: LoadContext) {
            if Self.protocolHeaders.contains(name.lowercased()) {
                context.report(path, "header \(name) is part of the tus protocol, which Ferry speaks itself; remove it")
            }
        }
    }

    /// Whether `key` can be a key of tus `Upload-Metadata`: not empty, printable ASCII without
    /// spaces or commas (the header separates pairs with commas and key from value with a space).
    public static func isValidTusMetadataKey(_ key: String) -> Bool {
        !key.isEmpty && key.unicodeScalars.allSatisfy { $0.isASCII && $0.value > 0x20 && $0.value < 0x7F && $0 != "," }
    }
}
