/// Bundles: a directory in a multipart spool sent as one request with each of its files as a file
/// part (`bundles`, `bundle_file_field`, `max_bundle_files`).
extension SpoolConfiguration {
    /// The keys read here.
    static let bundleKeys: Set<String> = ["bundles", "bundle_file_field", "max_bundle_files"]

    /// The values `max_bundle_files` may take.
    static let maxBundleFilesRange = 1...10_000

    /// What ``bundleKeys`` set.
    struct BundleSettings {
        var bundles = false
        /// `bundle_file_field` as configured; `nil`: the spool's `file_field`.
        var bundleFileField: String?
        var maxBundleFiles = 100
    }

    /// Applies what ``readBundles(_:uploadProtocol:recursive:digest:fields:)`` read.
    mutating func apply(_ settings: BundleSettings) {
        bundles = settings.bundles
        if let field = settings.bundleFileField { bundleFileField = field }
        maxBundleFiles = settings.maxBundleFiles
    }

    /// Reads the keys of ``bundleKeys`` and refuses the settings a bundle cannot honour: another
    /// protocol than multipart, `recursive`, `digest`, a `{sha256}` field, a field named like the
    /// bundle's file parts. Problems go to the reader's context.
    static func readBundles(
        _ reader: TableReader, uploadProtocol: UploadProtocol, recursive: Bool, digest: DigestAlgorithm?,
        fields: [NamedValue]
    ) -> BundleSettings {
        let context = reader.context
        var settings = BundleSettings()
        settings.bundles = reader.bool("bundles") ?? false
        let bundlesPath = reader.path.appending("bundles")
        if settings.bundles {
            if uploadProtocol != .multipart {
                let article = uploadProtocol == .s3 ? "an" : "a"
                context.report(bundlesPath, "bundles = true needs protocol = \"multipart\": \(article) \(uploadProtocol.rawValue) upload carries one file per request")
            }
            if recursive {
                context.report(bundlesPath, "bundles = true cannot be used with recursive = true: in a recursive spool a directory is a subdirectory to watch, not a bundle")
            }
            if digest != nil {
                context.report(bundlesPath, "bundles = true cannot be used with digest: Repr-Digest describes one file; a bundle has several")
            }
            for field in fields where field.value.placeholders.contains(.sha256) {
                context.report(reader.path.appending("fields").appending(field.name), "{sha256} cannot be used with bundles = true: a bundle has no single SHA-256")
            }
        }

        // With a `bundles` of the wrong type (already reported), the other two are not refused again.
        let bundlesReadable = reader.table["bundles"].map { $0.type == .bool } ?? true
        if let field = reader.string("bundle_file_field") {
            let path = reader.path.appending("bundle_file_field")
            if !settings.bundles {
                if bundlesReadable { context.report(path, "bundle_file_field has no effect without bundles = true") }
            } else if context.checkFileFieldName(field, at: path) {
                settings.bundleFileField = field
                for named in fields where named.name == field {
                    context.report(reader.path.appending("fields").appending(named.name), "field \"\(named.name)\" has the same name as bundle_file_field")
                }
            }
        }

        if let count = reader.int("max_bundle_files", in: maxBundleFilesRange) {
            if settings.bundles {
                settings.maxBundleFiles = count
            } else if bundlesReadable {
                context.report(reader.path.appending("max_bundle_files"), "max_bundle_files has no effect without bundles = true")
            }
        }
        return settings
    }
}
