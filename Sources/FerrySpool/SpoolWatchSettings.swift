/// What a ``SpoolWatcher`` watches and how.
public struct SpoolWatchSettings: Sendable {
    /// The spool's name (for logs).
    public var name: String
    /// The spool directory.
    public var directory: String
    /// Whether subdirectories are watched too.
    public var recursive: Bool
    /// A file written in place is ready once its size and mtime have not changed for this long.
    public var settle: Duration
    /// How often the whole spool is rescanned, in case an event was missed.
    public var rescanInterval: Duration
    /// Directories never entered, whatever path leads to them (the sent and failed directories and
    /// the state directory): known by their device and inode, so a symlink cannot smuggle them in.
    public var excludedDirectories: [String]

    public init(
        name: String, directory: String, recursive: Bool, settle: Duration, rescanInterval: Duration,
        excludedDirectories: [String] = []
    ) {
        self.name = name
        self.directory = directory
        self.recursive = recursive
        self.settle = settle
        self.rescanInterval = rescanInterval
        self.excludedDirectories = excludedDirectories
    }
}
