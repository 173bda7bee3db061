import FerryConfig
import FerryQueue
import Foundation

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
