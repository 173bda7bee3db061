import Foundation

extension ConfigurationLoader {
    /// `protocol = "s3"`: objects in an S3-compatible bucket, signed with AWS Signature Version 4;
    /// files from `multipart_threshold` on go as multipart uploads whose confirmed parts are kept in
    /// the queue. `url` is the endpoint; the fields become `x-amz-meta-*` metadata.
    struct S3Keys: UploadProtocolKeys {
        static let keys: Set<String> = [
            "bucket", "key", "region", "addressing", "access_key_id", "secret_access_key", "session_token", "part_size",
            "multipart_threshold", "checksum", "storage_class", "part_concurrency",
        ]

        /// Headers Ferry sets on S3 requests itself.
        static let protocolHeaders: Set<String> = [
            "authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "x-amz-storage-class",
            "x-amz-checksum-algorithm", "x-amz-sdk-checksum-algorithm", "x-amz-checksum-type", "content-md5",
        ]

        var method: String { "PUT" }
        let s3: S3Settings?

        init(reading reader: TableReader) {
            let context = reader.context
            if reader.string("method") != nil {
                context.report(reader.path.appending("method"), "method does not apply to protocol \"s3\" (it speaks S3's own requests); remove it")
            }
            let addressingText = reader.string("addressing")
            var addressing: S3Settings.Addressing?
            if let addressingText {
                addressing = S3Settings.Addressing(rawValue: addressingText)
                if addressing == nil {
                    context.report(reader.path.appending("addressing"), "addressing must be \"path\" or \"virtual\", not \"\(addressingText)\"")
                }
            }
            let bucket = reader.string("bucket", required: true)
            let key = Self.readKey(reader)
            let region = reader.string("region") ?? "us-east-1"
            if region.isEmpty || !region.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }) {
                context.report(reader.path.appending("region"), "\"\(region)\" is not a region name such as \"us-east-1\" or \"eu-west-1\"")
            }
            let accessKeyID = Self.readCredential(reader, "access_key_id", required: true)
            let secretAccessKey = Self.readCredential(reader, "secret_access_key", required: true)
            let sessionToken = Self.readCredential(reader, "session_token", required: false)
            let partSize = reader.size("part_size", minimum: S3Settings.minimumPartSize) ?? 16 << 20
            if partSize > S3Settings.maximumPartSize {
                context.report(reader.path.appending("part_size"), "\(partSize) bytes is more than S3's largest part (5 GiB)")
            }
            let threshold = reader.size("multipart_threshold", minimum: S3Settings.minimumPartSize)
            if let threshold, threshold > S3Settings.maximumPartSize {
                context.report(reader.path.appending("multipart_threshold"), """
                    \(threshold) bytes is more than S3 takes in one PutObject (5 GiB): a file that size would be refused \
                    (EntityTooLarge); use at most "5GiB"
                    """)
            }
            let partConcurrency = reader.int("part_concurrency", in: 1...S3Settings.maximumPartConcurrency) ?? 1
            var checksum = S3Settings.Checksum.crc32c
            if let text = reader.string("checksum") {
                if let value = S3Settings.Checksum(rawValue: text.lowercased()) {
                    checksum = value
                } else {
                    context.report(reader.path.appending("checksum"), "checksum must be \"crc32c\", \"sha256\" or \"none\", not \"\(text)\"")
                }
            }
            let storageClass = reader.string("storage_class")
            if let storageClass, storageClass.isEmpty || !storageClass.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") }) {
                context.report(reader.path.appending("storage_class"), "\"\(storageClass)\" is not a storage class such as \"STANDARD\" or \"STANDARD_IA\"")
            }
            // The URL is read by the spool; its host decides the default addressing.
            let url = Self.resolvedURL(reader)
            let host = url.flatMap { URLComponents(string: $0)?.host?.lowercased() } ?? ""
            // A bucket with dots cannot be a TLS host name under AWS's wildcard certificates
            // (*.s3.region.amazonaws.com covers one label): such a bucket is reached by path, as the SDKs do.
            let https = url?.lowercased().hasPrefix("https:") ?? false
            let dotted = bucket?.contains(".") ?? false
            let resolvedAddressing = addressing ?? (host.hasSuffix(".amazonaws.com") && !(https && dotted) ? .virtual : .path)
            if addressing == .virtual, https, dotted, host.hasSuffix(".amazonaws.com") {
                context.report(reader.path.appending("addressing"), """
                    bucket "\(bucket ?? "")" has dots, which AWS's TLS certificates do not cover as a virtual \
                    host (bucket.host): use addressing = "path"
                    """)
            }
            if let bucket { Self.checkBucket(bucket, addressing: resolvedAddressing, reader: reader) }
            Self.checkEndpoint(url, reader: reader)
            guard let bucket, let key, let accessKeyID, let secretAccessKey else {
                s3 = nil
                return
            }
            s3 = S3Settings(
                bucket: bucket, key: key, region: region, addressing: resolvedAddressing, accessKeyID: accessKeyID,
                secretAccessKey: secretAccessKey, sessionToken: sessionToken, partSize: partSize, multipartThreshold: threshold,
                checksum: checksum, storageClass: storageClass, partConcurrency: partConcurrency)
        }

        /// A field becomes `x-amz-meta-<name>`: a lowercase header token.
        func checkField(named name: String, at path: KeyPath, context: LoadContext) {
            if !SpoolConfiguration.isToken(name) || name.lowercased() != name {
                context.report(path, "\"\(name)\" cannot be S3 metadata (x-amz-meta-\(name)); use lowercase letters, digits and '-'")
            }
        }

        func checkHeader(named name: String, at path: KeyPath, context: LoadContext) {
            let lower = name.lowercased()
            if Self.protocolHeaders.contains(lower) || lower.hasPrefix("x-amz-checksum-") {
                context.report(path, "header \(name) is part of S3's signing and checksums, which Ferry does itself; remove it")
            } else if lower.hasPrefix("x-amz-meta-") {
                context.report(path, "header \(name) is object metadata: set it in [spool.fields] as \"\(lower.dropFirst("x-amz-meta-".count))\"")
            }
        }

        /// `key`: a template of the object key; `{relative_path}` by default.
        private static func readKey(_ reader: TableReader) -> ValueTemplate? {
            let text = reader.string("key") ?? "{relative_path}"
            guard let key = reader.template(text, key: "key", allowPlaceholders: true) else { return nil }
            if key.containsSecret {
                reader.context.report(reader.path.appending("key"), "the object key cannot hold a secret (keys are listed and logged)")
            } else if key.segments.isEmpty {
                reader.context.report(reader.path.appending("key"), "the object key must not be empty; \"{relative_path}\" keeps the spool's names")
            } else if text.hasPrefix("/") {
                reader.context.report(reader.path.appending("key"), "the object key must not start with '/' (write \"prefix/{relative_path}\")")
            } else if key.placeholders.isEmpty {
                reader.context.report(reader.path.appending("key"), "\"\(text)\" names no file ({relative_path}, {filename}, {id}, …): every file would overwrite the same object")
            }
            return key
        }

        private static func readCredential(_ reader: TableReader, _ key: String, required: Bool) -> ValueTemplate? {
            guard let text = reader.string(key, required: required) else { return nil }
            guard let template = reader.template(text, key: key, allowPlaceholders: false) else { return nil }
            if template.text.isEmpty {
                reader.context.report(reader.path.appending(key), "\(key) is empty\(template.containsSecret ? " (after resolving secrets)" : "")")
                return nil
            }
            if template.text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value > 0x7E }) {
                reader.context.report(reader.path.appending(key), "\(key) contains spaces or characters no AWS credential has\(template.containsSecret ? " (after resolving secrets; check for a trailing newline in the file)" : "")")
                return nil
            }
            return template
        }

        /// Bucket names: 3–63 characters; for virtual addressing also a DNS label sequence.
        private static func checkBucket(_ bucket: String, addressing: S3Settings.Addressing, reader: TableReader) {
            let path = reader.path.appending("bucket")
            let strict = bucket.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == ".") }
            let loose = bucket.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }
            if bucket.count < 3 || bucket.count > 63 || !loose {
                reader.context.report(path, "\"\(bucket)\" is not a bucket name (3 to 63 letters, digits, '.', '-')")
            } else if addressing == .virtual && !strict {
                reader.context.report(path, "\"\(bucket)\" cannot be a host name for addressing = \"virtual\"; use lowercase letters, digits, '.', '-', or addressing = \"path\"")
            }
        }

        /// The URL as sent, its `${…}` secrets resolved (a secret's problems are the spool's to report).
        private static func resolvedURL(_ reader: TableReader) -> String? {
            guard let raw = reader.string("url") else { return nil }
            return (try? reader.context.templates.parse(raw, allowPlaceholders: false).get())?.text ?? raw
        }

        /// `url` is the endpoint: a scheme and host, no path, query or user.
        private static func checkEndpoint(_ url: String?, reader: TableReader) {
            guard let url, let components = URLComponents(string: url) else { return }
            if !(components.path.isEmpty || components.path == "/") || components.query != nil || components.user != nil {
                reader.context.report(reader.path.appending("url"), "for protocol \"s3\", url is the endpoint only (such as \"https://s3.eu-west-1.amazonaws.com\" or \"http://127.0.0.1:9000\"): no path, query or user; the bucket and key have keys of their own")
            }
        }
    }
}
