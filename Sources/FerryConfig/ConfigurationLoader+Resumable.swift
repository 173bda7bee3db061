extension ConfigurationLoader {
    /// `protocol = "resumable"`: the IETF draft "Resumable Uploads for HTTP". The upload is created with
    /// `method` (`POST` by default, or `PUT`) at the URL, which may name the file; appends of at most
    /// `chunk_size` bytes (default: the whole remainder, or what the server's `Upload-Limit` allows)
    /// follow with `PATCH`. `interop_version` names the draft revision the server speaks.
    struct ResumableKeys: UploadProtocolKeys {
        static let keys: Set<String> = ["method", "chunk_size", "interop_version"]
        static var urlNamesFile: Bool { true }

        /// Headers of the draft (refused in the spool's headers: they would contradict Ferry's).
        static let protocolHeaders: Set<String> = [
            "upload-complete", "upload-incomplete", "upload-offset", "upload-length", "upload-limit",
            "upload-draft-interop-version", "x-http-method-override",
        ]

        let method: String
        let chunkSize: Int64?
        let resumableInterop: ResumableInteropVersion?

        init(reading reader: TableReader) {
            method = Self.readMethod(reader, default: "POST")
            chunkSize = reader.size("chunk_size", minimum: 64 * 1024)
            let supported = ResumableInteropVersion.allCases.map { String($0.rawValue) }.joined(separator: " or ")
            if let number = reader.int("interop_version", in: 0...Int(Int32.max)) {
                resumableInterop = ResumableInteropVersion(rawValue: number)
                if resumableInterop == nil {
                    reader.context.report(reader.path.appending("interop_version"), """
                        interop_version \(number) is not one Ferry speaks; use \(supported) (6: Apple's URLSession \
                        and swift-nio-extras' NIOResumableUpload; \(ResumableInteropVersion.latest.rawValue): the newest draft)
                        """)
                }
            } else {
                resumableInterop = .latest
            }
            if reader.table["fields"] != nil {
                reader.context.report(reader.path.appending("fields"), "fields are not sent by protocol \"resumable\" (the body is the file alone); use headers, or protocol \"multipart\" or \"tus\"")
            }
        }

        func checkHeader(named name: String, at path: KeyPath, context: LoadContext) {
            if Self.protocolHeaders.contains(name.lowercased()) {
                context.report(path, "header \(name) is part of the resumable upload protocol, which Ferry speaks itself; remove it")
            }
        }
    }
}
