import FerryConfig
import FerryQueue

/// Why the daemon cannot start or keep running. Each case maps to a distinct exit code.
public enum DaemonError: Error, Sendable, CustomStringConvertible {
    /// The configuration is invalid.
    case configuration(ConfigurationError)
    /// The state directory cannot be created or used.
    case stateDirectory(String)
    /// Another ferryd holds the state directory's lock.
    case alreadyRunning(String)
    /// The queue database cannot be opened, or is damaged.
    case queue(QueueError)
    /// Anything else that stops the daemon.
    case other(String)

    public var description: String {
        switch self {
        case .configuration(let error): "invalid configuration:\n\(error)"
        case .stateDirectory(let message): "state directory: \(message)"
        case .alreadyRunning(let message): message
        case .queue(let error): error.description
        case .other(let message): message
        }
    }

    /// The process exit code (sysexits.h): 78 configuration, 73 cannot create, 75 temporary
    /// (already running), 74 I/O (database), 70 software.
    public var exitCode: Int32 {
        switch self {
        case .configuration: 78
        case .stateDirectory: 73
        case .alreadyRunning: 75
        case .queue(.full): 73
        case .queue: 74
        case .other: 70
        }
    }
}
