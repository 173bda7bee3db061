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

/// True the first time ``first()`` is called, false after.
final class Once: Sendable {
    private let fired = Mutex(false)
    func first() -> Bool { fired.withLock { fired in defer { fired = true }; return !fired } }
}

/// The future of a body's last write, once the body is being written.
final class PendingWrites: Sendable {
    private let storage = Mutex<EventLoopFuture<Void>?>(nil)
    var future: EventLoopFuture<Void>? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

/// The file at a request's `bodyPath` is not the expected version.
struct SourceChanged: Error {}

/// Counts bytes from the body stream's task and reads them from another.
final class ByteCounter: Sendable {
    private let storage = Mutex<Int64>(0)
    func add(_ count: Int64) -> Int64 { storage.withLock { $0 += count; return $0 } }
    var value: Int64 { storage.withLock { $0 } }
}

