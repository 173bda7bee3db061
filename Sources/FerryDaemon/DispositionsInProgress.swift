import FerryQueue
import Synchronization

/// The jobs whose file is being deleted or moved right now. A job's disposition can be started from
/// three places (its pipeline, the chores that finish pending ones, an operator's cancel) and an
/// operator's `retry` brings a file back from the failed directory: two of these at once on one
/// job would race for its file and its sidecar. Whoever finds the job taken leaves it (the chores
/// try again later; `retry` answers that the file is being moved).
final class DispositionsInProgress: Sendable {
    private let jobs = Mutex<Set<String>>([])

    /// Takes `job`; false when something else has it.
    func begin(_ job: JobID) -> Bool {
        jobs.withLock { $0.insert(job.rawValue).inserted }
    }

    /// Gives `job` back.
    func end(_ job: JobID) {
        jobs.withLock { _ = $0.remove(job.rawValue) }
    }
}
