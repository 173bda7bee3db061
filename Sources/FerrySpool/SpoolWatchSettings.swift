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
    /// Whether a directory in the spool is a bundle (one job for all its files) rather than ignored.
    public var bundles: Bool
    /// Whether `<name>.fields.toml` files are field sidecars (never queued themselves).
    public var fieldSidecars: Bool

    public init(
        name: String, directory: String, recursive: Bool, settle: Duration, rescanInterval: Duration,
        excludedDirectories: [String] = [], bundles: Bool = false, fieldSidecars: Bool = false
    ) {
        self.bundles = bundles
        self.fieldSidecars = fieldSidecars
        self.name = name
        self.directory = directory
        self.recursive = recursive
        self.settle = settle
        self.rescanInterval = rescanInterval
        self.excludedDirectories = excludedDirectories
    }
}
