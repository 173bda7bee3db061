import FerryConfig

/// How one run of a hook (or the writing of a result file) ended.
public enum HookEnding: Sendable, Equatable {
    /// The program exited with this status (0: success).
    case exited(Int32)
    /// The program was killed by this signal (not by Ferry).
    case signalled(Int32)
    /// It ran longer than the spool's hook `timeout` and was killed with its process group.
    case timedOut(Duration)
    /// It could not be started (no such program, not executable), or the result file could not be
    /// written: why, in words.
    case failed(String)
    /// The result file was written (or was already there, from an earlier run of the same job).
    case written

    /// Whether the run succeeded.
    public var succeeded: Bool { self == .exited(0) || self == .written }

    /// The exit status, if the program exited.
    public var exitStatus: Int? { if case .exited(let code) = self { Int(code) } else { nil } }

    /// Why the run failed, in words; `nil` if it did not (or it just exited non-zero: see ``exitStatus``).
    public var problem: String? {
        switch self {
        case .exited(let code) where code != 0: "exited with status \(code)"
        case .exited, .written: nil
        case .signalled(let signal): "killed by signal \(signal)"
        case .timedOut(let limit): "timed out after \(DurationParser.format(limit)); killed with its process group"
        case .failed(let reason): reason
        }
    }
}
