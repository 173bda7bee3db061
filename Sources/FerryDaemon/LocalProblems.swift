import FerryControl
import Foundation
import Synchronization

/// The local problem, per spool, that holds its files back (the state directory is full, a read
/// fails), for `ferryctl status`. Two kinds count: jobs whose upload could not be prepared, each
/// from its first local failure until it is next prepared (or ends) without one; and files the
/// queue could not take, until it takes the spool's files again. The spool's problem lasts while
/// either does. In memory only: it describes the present, not history.
final class LocalProblems: Sendable {
    private struct Entry {
        var problem: SpoolProblem
        var jobs: Set<String> = []
        var intake = false
        var isOver: Bool { jobs.isEmpty && !intake }
    }

    /// Jobs with a local problem try again within 30 s and the intake within seconds; a problem not
    /// heard of for this long is over (its jobs were held or cancelled meanwhile).
    static let staleAfter: TimeInterval = 120

    private let entries = Mutex<[String: Entry]>([:])

    /// Records that `job` of `spool` could not be prepared, for `message`.
    func report(spool: String, job: String, _ message: String) {
        update(spool, message) { $0.jobs.insert(job) }
    }

    /// Records that the queue could not take files found in `spool`.
    func reportIntake(spool: String, _ message: String) {
        update(spool, message) { $0.intake = true }
    }

    /// Records that `job` was prepared (or ended) without a local problem. Returns the spool's
    /// problem when this ended it.
    @discardableResult
    func resolved(spool: String, job: String) -> SpoolProblem? {
        resolve(spool) { $0.jobs.remove(job) != nil }
    }

    /// Records that the queue took files from `spool` again.
    @discardableResult
    func resolvedIntake(spool: String) -> SpoolProblem? {
        resolve(spool) { entry in
            defer { entry.intake = false }
            return entry.intake
        }
    }

    /// The spool's current problem, if any.
    subscript(spool: String) -> SpoolProblem? {
        entries.withLock { all in
            guard let entry = all[spool] else { return nil }
            if Date().timeIntervalSince(entry.problem.lastSeenAt) > Self.staleAfter {
                all[spool] = nil
                return nil
            }
            return entry.problem
        }
    }

    private func update(_ spool: String, _ message: String, _ change: (inout Entry) -> Void) {
        let now = Date()
        entries.withLock { all in
            var entry = all[spool] ?? Entry(problem: SpoolProblem(message: message, since: now, lastSeenAt: now, jobs: 0))
            change(&entry)
            entry.problem.message = message
            entry.problem.lastSeenAt = now
            entry.problem.jobs = entry.jobs.count
            all[spool] = entry
        }
    }

    private func resolve(_ spool: String, _ change: (inout Entry) -> Bool) -> SpoolProblem? {
        entries.withLock { all in
            guard var entry = all[spool], change(&entry) else { return nil }
            entry.problem.jobs = entry.jobs.count
            all[spool] = entry.isOver ? nil : entry
            return entry.isOver ? entry.problem : nil
        }
    }
}
