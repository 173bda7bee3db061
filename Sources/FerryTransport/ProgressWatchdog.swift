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
/// not hold an upload slot for ever): ``run()`` returns then, and ``fired`` turns true.
final class ProgressWatchdog: Sendable {
    private let timeout: Duration
    private let last = Mutex(ContinuousClock.now)
    private let answerDue = Mutex<ContinuousClock.Instant?>(nil)
    private let didFire = Mutex(false)

    init(timeout: Duration) { self.timeout = timeout }

    /// Something moved: a body chunk was taken or a response byte arrived.
    func progressed() { last.withLock { $0 = .now } }

    /// The answer's status line arrived: the rest of it is due within `timeout`.
    func answerStarted() {
        answerDue.withLock { due in
            if due == nil { due = .now + timeout }
        }
    }

    /// Whether the watchdog fired because the answer took too long after its status line.
    var answerOverdue: Bool { fired && answerDue.withLock { $0.map { ContinuousClock.now >= $0 } ?? false } }

    var fired: Bool { didFire.withLock { $0 } }

    /// Returns when progress has stalled for `timeout`; throws if cancelled first.
    func run() async throws {
        while true {
            let idle = last.withLock { $0 } + timeout
            let deadline = answerDue.withLock { $0 }.map { min($0, idle) } ?? idle
            if ContinuousClock.now >= deadline {
                didFire.withLock { $0 = true }
                return
            }
            try await Task.sleep(until: min(deadline, .now + .milliseconds(500)), clock: .continuous)
        }
    }
}
