import FerryQueue
import Synchronization

/// One claimed job's place in the upload slots. The scheduler claims a few jobs more than there
/// are slots and makes their tickets in the order it claimed them (each takes a place in line at
/// the ``UploadGate``); each one's pipeline opens its file and then ``enter()``s: it waits for a
/// slot. Once the send is over the pipeline calls ``release()``, which gives
/// the slot and the claim back at once (recording the job's fate and disposing of its file then
/// overlap the next job's send).
///
/// A job whose spool may not start uploads by the time it would get a slot (paused, outside its
/// upload window) does not send: it goes back to the queue, not counted.
final class SlotTicket: Sendable {
    let job: Job
    let gate: UploadGate
    /// The job's place in line, taken when it was claimed.
    let place: UploadGate.Place
    let activity: ActiveJobs
    /// Why the job's spool may not start uploads now, or `nil` if it may.
    let heldReason: @Sendable (_ spool: String) -> String?
    /// Called once, when the ticket is released: the scheduler counts the claim as over.
    let onRelease: @Sendable () -> Void

    private let state = Mutex((entered: false, released: false))

    /// Takes the job's place in line: call it in the order the jobs were claimed.
    init(job: Job, priority: Int, gate: UploadGate, activity: ActiveJobs,
         heldReason: @escaping @Sendable (String) -> String?, onRelease: @escaping @Sendable () -> Void) {
        self.job = job
        self.gate = gate
        self.place = gate.reserve(priority: priority, tag: job.spool)
        self.activity = activity
        self.heldReason = heldReason
        self.onRelease = onRelease
    }

    /// Waits for a slot. Throws if the job is stopped (hold, cancel, shutdown) or its spool may not
    /// start uploads any more: the job does not send.
    func enter() async throws {
        activity.waitingForSlot(job, true)
        do {
            try await gate.enter(place)
        } catch {
            if let reason = heldReason(job.spool) { activity.requeue(job, reason: reason) }
            throw error
        }
        if let reason = heldReason(job.spool) {
            gate.leave(tag: job.spool)
            activity.requeue(job, reason: reason)
            throw UploadGate.Refused()
        }
        state.withLock { $0.entered = true }
        activity.waitingForSlot(job, false)
    }

    /// Gives the slot (if the job got one) and the claim back; only the first call counts.
    func release() {
        let (first, entered) = state.withLock { state in
            defer { state.released = true }
            return (!state.released, state.entered)
        }
        guard first else { return }
        if entered { gate.leave(tag: job.spool) } else { gate.withdraw(place) }
        onRelease()
    }
}
