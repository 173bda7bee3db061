import GRDB

/// What became of a source file after its job reached a final state: the `disposition` column of
/// the `job` table holds the raw value.
public enum Disposition: String, Sendable, Codable, CaseIterable, DatabaseValueConvertible {
    /// Deleted from the spool (`after_upload = "delete"`).
    case deleted
    /// Moved to the sent directory (`move`) or, for a failed job, to the failed directory.
    case moved
    /// Left in place on purpose (`keep`).
    case kept
    /// Left in place because it changed after it was uploaded; the new version is queued anew.
    case left
    /// Already gone when Ferry came to dispose of it.
    case missing
}
