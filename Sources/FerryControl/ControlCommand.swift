/// The commands of protocol version 1, and who may run them.
public enum ControlCommand: String, Sendable, Codable, CaseIterable {
    case status, list, show, watch, health, metrics
    case retry, hold, release, cancel, pause, resume, wait, enqueue, reload
    /// Runs a job's hooks that gave up (or one of them) again.
    case retryHook = "retry-hook"
    /// Sets a bandwidth limit until the next reload or restart.
    case limit

    /// Commands that only look: any peer allowed to connect may run them (unless
    /// `control_read_only_for_others = false`). The others change the queue or the daemon and need
    /// root, the daemon's own user, or a member of `control_group`.
    public var isReadOnly: Bool {
        switch self {
        case .status, .list, .show, .watch, .health, .metrics: true
        default: false
        }
    }

    /// The type of the command's `args`.
    public var argumentsType: any Codable.Type {
        switch self {
        case .status, .health, .metrics, .reload: NoArguments.self
        case .list: ListArguments.self
        case .show: ShowArguments.self
        case .watch: WatchArguments.self
        case .retry, .hold, .release, .cancel: JobActionArguments.self
        case .pause, .resume: PauseArguments.self
        case .wait: WaitArguments.self
        case .enqueue: EnqueueArguments.self
        case .retryHook: RetryHookArguments.self
        case .limit: LimitArguments.self
        }
    }

    /// Commands that stream events after their first reply, or may take long to answer; the idle
    /// timeout does not apply while they run.
    public var isLongRunning: Bool { self == .watch || self == .wait }
}
