import FerryConfig
import FerryQueue
import Foundation

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

/// What becomes of a hook run once it ended: done, due again after full-jitter backoff (the
/// spool's `[spool.retry]` delays), or given up after `hook_max_attempts`. Pure: the time and the
/// randomness are passed in.
public enum HookRunDecider {
    public static func next<Random: RandomNumberGenerator>(
        _ run: HookRun, ended ending: HookEnding, output: String?, policy: RetryPolicy, maxAttempts: Int, now: Date,
        random: inout Random
    ) -> HookRun {
        var run = run
        run.attempts += 1
        run.updatedAt = now
        run.lastExit = ending.exitStatus
        run.lastError = ending.problem
        run.lastOutput = output
        if ending.succeeded {
            run.state = .succeeded
        } else if run.attempts >= maxAttempts {
            run.state = .gaveUp
        } else {
            let delay = Backoff(initialDelay: policy.initialDelay, maxDelay: policy.maxDelay).delay(forRetry: run.attempts - 1, using: &random)
            run.state = .pending
            run.nextAt = now.addingTimeInterval(delay.timeInterval)
        }
        return run
    }
}
