/// What a spool does with the server's answer and the job's outcome: the headers kept, the result
/// files, the hooks, and the end-to-end digest (`result_headers`, `result_directory`,
/// `[spool.hooks]`, `hook_max_attempts`, `digest`).
extension SpoolConfiguration {
    /// The response headers always kept with a job's answer; `result_headers` adds to them.
    public static let keptResponseHeaders = ["location", "etag", "content-type", "content-location"]

    /// The keys read here.
    static let afterDeliveryKeys: Set<String> = ["result_headers", "result_directory", "hooks", "hook_max_attempts", "digest"]

    /// What ``afterDeliveryKeys`` set.
    struct AfterDelivery {
        var resultHeaders = SpoolConfiguration.keptResponseHeaders
        var resultDirectory: String?
        var hooks = HookSettings()
        var digest: DigestAlgorithm?
    }

    /// Applies what ``readAfterDelivery(_:uploadProtocol:)`` read.
    mutating func apply(_ settings: AfterDelivery) {
        resultHeaders = settings.resultHeaders
        resultDirectory = settings.resultDirectory
        hooks = settings.hooks
        digest = settings.digest
    }

    /// Reads the keys of ``afterDeliveryKeys``; problems go to the reader's context.
    static func readAfterDelivery(_ reader: TableReader, uploadProtocol: UploadProtocol) -> AfterDelivery {
        let context = reader.context
        var resultHeaders = keptResponseHeaders
        var digest: DigestAlgorithm?
        if let value = reader.table["result_headers"] {
            let path = reader.path.appending("result_headers")
            if let array = value.array {
                for element in array {
                    guard let name = element.string, Self.isToken(name) else {
                        context.report(path, "\(element.string.map { "\"\($0)\"" } ?? "an element") is not a header name; write names such as [\"X-Request-Id\"]")
                        continue
                    }
                    if !resultHeaders.contains(name.lowercased()) { resultHeaders.append(name.lowercased()) }
                }
            } else {
                context.report(path, "expected an array of header names such as [\"X-Request-Id\"]")
            }
        }
        let resultDirectory = reader.path("result_directory")
        let maxAttempts = reader.int("hook_max_attempts", in: 1...1000) ?? HookSettings.defaultMaxAttempts
        let hooks = reader.table("hooks").map {
            HookSettings(reading: TableReader(table: $0, path: reader.path.appending("hooks"), context: context), maxAttempts: maxAttempts)
        } ?? HookSettings(maxAttempts: maxAttempts)
        if let text = reader.string("digest") {
            if let algorithm = DigestAlgorithm(rawValue: text.lowercased()) {
                switch uploadProtocol {
                case .s3:
                    context.report(reader.path.appending("digest"), "digest does not apply to protocol \"s3\": S3 checks every part with its own checksum (the key checksum: \"crc32c\", \"sha256\" or \"none\")")
                case .resumable:
                    context.report(reader.path.appending("digest"), "digest is not supported with protocol \"resumable\" yet; use \"multipart\", \"put\" or \"tus\"")
                default:
                    digest = algorithm
                }
            } else {
                context.report(reader.path.appending("digest"), "digest must be \"sha-256\" or \"sha-512\", not \"\(text)\"")
            }
        }
        return AfterDelivery(resultHeaders: resultHeaders, resultDirectory: resultDirectory, hooks: hooks, digest: digest)
    }
}
