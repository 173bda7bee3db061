import AsyncHTTPClient
import FerrySystem
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import _NIOFileSystem

#if canImport(Glibc)
import Glibc
#endif

/// Fires when nothing has moved for `timeout`: ``run()`` returns then, and ``fired`` turns true.
final class ProgressWatchdog: Sendable {
    private let timeout: Duration
    private let last = Mutex(ContinuousClock.now)
    private let didFire = Mutex(false)

    init(timeout: Duration) { self.timeout = timeout }

    /// Something moved: a body chunk was taken or a response byte arrived.
    func progressed() { last.withLock { $0 = .now } }

    var fired: Bool { didFire.withLock { $0 } }

    /// Returns when progress has stalled for `timeout`; throws if cancelled first.
    func run() async throws {
        while true {
            let deadline = last.withLock { $0 } + timeout
            if ContinuousClock.now >= deadline {
                didFire.withLock { $0 = true }
                return
            }
            try await Task.sleep(until: min(deadline, .now + .milliseconds(500)), clock: .continuous)
        }
    }
}
