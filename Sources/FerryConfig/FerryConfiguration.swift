import Logging

/// The daemon's whole configuration, as read from `ferry.toml`.
public struct FerryConfiguration: Sendable {
    /// Where the configuration was read from (for messages).
    public var path: String
    /// Holds the SQLite database and the temporary request bodies.
    public var stateDirectory: String
    /// The control socket's path.
    public var controlSocket: String
    /// How many uploads may run at once, across all spools.
    public var maxConcurrentUploads: Int
    /// The least severe log level written.
    public var logLevel: Logger.Level
    /// How long a shutdown waits for uploads in flight before aborting them (they stay queued).
    public var shutdownTimeout: Duration
    /// How often every spool is rescanned in full, in case an inotify event was missed.
    public var rescanInterval: Duration
    /// The watched spool directories.
    public var spools: [SpoolConfiguration]
    /// Who may use the control socket, and how.
    public var control: ControlAccess
    /// Where `GET /metrics` is served over HTTP (`metrics_listen`); `nil` (the default): not served.
    public var metricsListen: ListenAddress?
    /// How many hooks may run at once, across all spools (`max_concurrent_hooks`).
    public var maxConcurrentHooks = FerryConfiguration.defaultMaxConcurrentHooks
    /// The bandwidth all uploads share (`bandwidth_limit`); each spool's own limit is within it.
    public var bandwidthLimit = BandwidthLimit.off
    /// When the shared limit changes (`bandwidth_schedule`); replaces `bandwidth_limit`.
    public var bandwidthSchedule: BandwidthSchedule?
    /// How long a finished job whose file is gone from the spool is remembered (`job_retention`):
    /// `show`, `list` and `watch` know it, and `retry` can bring back its failed file, until then.
    public var jobRetention = FerryConfiguration.defaultJobRetention
    /// `job_retention` when not set: 30 days.
    public static let defaultJobRetention = Duration.seconds(30 * 86_400)
    /// Hooks running at once when `max_concurrent_hooks` is not set.
    public static let defaultMaxConcurrentHooks = 2

    /// The default configuration file.
    public static let defaultPath = "/etc/ferry/ferry.toml"
    /// The control socket when the configuration does not set `control_socket`.
    public static let defaultControlSocket = "/run/ferry/control.sock"

    public init(
        path: String, stateDirectory: String, controlSocket: String, maxConcurrentUploads: Int,
        logLevel: Logger.Level, shutdownTimeout: Duration, rescanInterval: Duration,
        spools: [SpoolConfiguration], control: ControlAccess = ControlAccess(), metricsListen: ListenAddress? = nil
    ) {
        self.control = control
        self.metricsListen = metricsListen
        self.path = path
        self.stateDirectory = stateDirectory
        self.controlSocket = controlSocket
        self.maxConcurrentUploads = maxConcurrentUploads
        self.logLevel = logLevel
        self.shutdownTimeout = shutdownTimeout
        self.rescanInterval = rescanInterval
        self.spools = spools
    }

    /// The spool called `name`.
    public func spool(named name: String) -> SpoolConfiguration? {
        spools.first { $0.name == name }
    }
}
