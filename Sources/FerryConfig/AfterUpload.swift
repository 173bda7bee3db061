/// What to do with a file once the server has accepted it.
public enum AfterUpload: String, Sendable, CaseIterable {
    /// Remove the file from the spool.
    case delete
    /// Leave it where it is; it is not uploaded again unless it changes.
    case keep
    /// Move it to `sent_directory`.
    case move
}
