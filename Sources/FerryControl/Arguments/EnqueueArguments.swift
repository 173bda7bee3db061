/// `enqueue`: files already placed in the spool directory (by the client, under a temporary name,
/// fsynced and renamed into place) to queue right away.
public struct EnqueueArguments: Sendable, Codable {
    public var spool: String
    /// Paths relative to the spool directory.
    public var files: [String]

    public init(spool: String, files: [String]) {
        self.spool = spool
        self.files = files
    }
}
