import AsyncHTTPClient
import FerrySystem
import Foundation
import Logging
import NIOCore
import _NIOFileSystem
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Fires when nothing has moved for `timeout`, or when the rest of an answer has not arrived
/// `timeout` after its status line (a server trickling its answer a byte at a time moves, but must
/// not hold an upload slot for ever). One request's record: the ``WatchdogPatrol`` of its
/// ``Uploader`` checks ``deadline`` and fires it; ``fired`` turns true.
final class ProgressWatchdog: Sendable {
    /// How long nothing must have moved before ``sourceChanged`` is asked.
    static let sourceCheckAfter = Duration.seconds(1)

    let timeout: Duration
    /// For a body sent by `sendfile(2)` from the spool file itself: whether that file is no longer
    /// the version being sent. A file cut short under a region already handed to the kernel never
    /// completes the region (`sendfile` returns 0, and the event loop tries again at once, at full
    /// CPU): the patrol asks this once nothing has moved for ``sourceCheckAfter`` and fires early,
    /// rather than spinning until `timeout`.
    private let sourceChanged: (@Sendable () -> Bool)?
    /// Whether a started answer must end within `timeout` of its status line (not for an answer
    /// that may trickle: ``UploadRequest/answerMayTrickle``).
    private let limitsAnswer: Bool
    private let last = Mutex(ContinuousClock.now)
    private let answerDue = Mutex<ContinuousClock.Instant?>(nil)
    private let didFire = Mutex(false)

    init(timeout: Duration, limitsAnswer: Bool = true, sourceChanged: (@Sendable () -> Bool)? = nil) {
        self.timeout = timeout
        self.limitsAnswer = limitsAnswer
        self.sourceChanged = sourceChanged
    }

    /// Something moved: a body chunk was taken or a response byte arrived.
    func progressed() { last.withLock { $0 = .now } }

    /// The request waits `duration` for bandwidth (its own choice, not a stall): the watchdog
    /// counts from the end of that wait. Without this, a wait longer than the timeout under a low
    /// `bandwidth_limit` aborted the attempt, and every retry waited longer still.
    func willWait(_ duration: Duration) {
        let end = ContinuousClock.now + duration
        last.withLock { $0 = max($0, end) }
    }

    /// The answer's status line arrived: the rest of it is due within `timeout`.
    func answerStarted() {
        guard limitsAnswer else { return }
        answerDue.withLock { due in
            if due == nil { due = .now + timeout }
        }
    }

    /// When the watchdog fires unless something moves first: `timeout` after the last progress, or
    /// when the rest of a started answer is due, whichever is earlier.
    var deadline: ContinuousClock.Instant {
        let idle = last.withLock { $0 } + timeout
        return answerDue.withLock { $0 }.map { min($0, idle) } ?? idle
    }

    /// Whether nothing has moved for ``sourceCheckAfter`` and the file being sent changed under
    /// the request, which can then never end by itself (asked by the patrol, at most twice a second).
    func stuckOnChangedSource(at now: ContinuousClock.Instant) -> Bool {
        guard let sourceChanged, mayAskSource(at: now) else { return false }
        return sourceChanged()
    }

    /// Whether ``stuckOnChangedSource(at:)`` would ask the file system (nothing moved for a second).
    func mayAskSource(at now: ContinuousClock.Instant) -> Bool {
        sourceChanged != nil && now - last.withLock({ $0 }) >= Self.sourceCheckAfter
    }

    /// Marks the watchdog fired (by its patrol, once its deadline passed).
    func fire() { didFire.withLock { $0 = true } }

    /// Whether the watchdog fired because the answer took too long after its status line.
    var answerOverdue: Bool { fired && answerDue.withLock { $0.map { ContinuousClock.now >= $0 } ?? false } }

    var fired: Bool { didFire.withLock { $0 } }
}
