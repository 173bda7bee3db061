import GRDB

/// What a job sends: one file, or a bundle (a directory whose files go in one request).
public enum JobSourceKind: String, Sendable, Codable, DatabaseValueConvertible {
    /// A regular file.
    case file
    /// A directory in a `bundles = true` spool: its regular files, as one multipart request
    /// (see ``BundleMember``).
    case bundle
}
