import CFerrySystem
import Foundation
import Synchronization
import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// One inotify event: which watch, what happened, and the entry's name (empty for the watched directory itself).
struct InotifyEvent: Sendable {
    var watch: Int32
    var mask: UInt32
    var name: [UInt8]

    func has(_ flag: UInt32) -> Bool { mask & flag != 0 }
}

/// Reads an inotify descriptor on a thread of its own and hands each batch of events to a callback.
///
/// The thread blocks in `poll(2)` on the inotify descriptor and on a wake-up pipe, so ``stop()``
/// ends it promptly.
final class InotifyListener: @unchecked Sendable {
    /// The inotify descriptor, for adding and removing watches (both thread-safe in the kernel).
    let descriptor: Int32
    private let wakePipe: (read: Int32, write: Int32)
    private var thread: Thread?
    /// The read buffer. Holding it is what makes a read and the hand-over of its events one step,
    /// so ``drain(_:)`` can guarantee every event queued before it was handed over before it returns.
    private let reading = Mutex([UInt8](repeating: 0, count: 64 * 1024))
    /// Signalled by the thread as it ends, so the descriptors are closed only after it stopped using them.
    private let finished = DispatchSemaphore(value: 0)

    init() throws(SystemError) {
        let fd = cferry_inotify_init()
        guard fd >= 0 else { throw .current("inotify_init1", "(inotify)") }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            let error = SystemError.current("pipe", "(inotify wake-up)")
            close(fd)
            throw error
        }
        for end in pipeFDs {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        descriptor = fd
        wakePipe = (pipeFDs[0], pipeFDs[1])
    }

    deinit {
        close(descriptor)
        close(wakePipe.read)
        close(wakePipe.write)
    }

    static let directoryMask: UInt32 =
        CFERRY_IN_MOVED_TO | CFERRY_IN_CLOSE_WRITE | CFERRY_IN_CREATE | CFERRY_IN_DELETE_SELF
        | CFERRY_IN_MOVE_SELF | CFERRY_IN_ONLYDIR | CFERRY_IN_DONT_FOLLOW | CFERRY_IN_EXCL_UNLINK

    /// Watches the directory at `path` and returns the watch descriptor. Unless `followSymlink`,
    /// a symlink at `path` is refused.
    func watch(_ path: [UInt8], followSymlink: Bool = false) throws(SystemError) -> Int32 {
        let mask = followSymlink ? Self.directoryMask & ~CFERRY_IN_DONT_FOLLOW : Self.directoryMask
        // Raw bytes: a directory whose name is not UTF-8 is watched under its own name.
        let wd = path.withCString { cferry_inotify_add_watch(descriptor, $0, mask) }
        guard wd >= 0 else { throw .current("watch", String(decoding: path, as: UTF8.self)) }
        return wd
    }

    func unwatch(_ wd: Int32) {
        _ = cferry_inotify_rm_watch(descriptor, wd)
    }

    /// Starts the reading thread; `onEvents` is called on it with each batch read, and `onFailure`
    /// once if the thread ends on an error (`poll` or `read` failing for good) rather than `stop()`.
    func start(onEvents: @escaping @Sendable ([InotifyEvent]) -> Void, onFailure: @escaping @Sendable (SystemError) -> Void = { _ in }) {
        let fd = descriptor
        let wake = wakePipe.read
        let finished = self.finished
        let thread = Thread { [self] in
            defer { finished.signal() }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            while true {
                fds[0].revents = 0
                fds[1].revents = 0
                let ready = poll(&fds, 2, -1)
                if ready < 0 {
                    if errno == EINTR { continue }
                    return onFailure(.current("poll", "the inotify descriptor"))
                }
                if fds[1].revents != 0 { return }
                let failure = self.reading.withLock { buffer -> SystemError? in
                    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if count < 0 { return errno == EINTR || errno == EAGAIN ? nil : .current("read", "the inotify descriptor") }
                    let events = Self.parse(buffer[0..<count])
                    if !events.isEmpty { onEvents(events) }
                    return nil
                }
                if let failure { return onFailure(failure) }
            }
        }
        thread.name = "ferry-inotify"
        self.thread = thread
        thread.start()
    }

    /// Reads every event queued so far and hands it to `onEvents` before returning (a barrier:
    /// anything done to the watched directories before this call is reported by the time it returns).
    func drain(_ onEvents: ([InotifyEvent]) -> Void) {
        let fd = descriptor
        reading.withLock { buffer in
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count <= 0 { return }
                let events = Self.parse(buffer[0..<count])
                if !events.isEmpty { onEvents(events) }
            }
        }
    }

    /// Wakes the thread and waits for it to end.
    func stop() {
        guard thread != nil else { return }
        var byte: UInt8 = 1
        _ = write(wakePipe.write, &byte, 1)
        finished.wait()
        thread = nil
    }

    /// Splits a `read(2)` of an inotify descriptor into events.
    static func parse(_ bytes: ArraySlice<UInt8>) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        let header = MemoryLayout<inotify_event>.size
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset + header <= raw.count {
                let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = offset + header
                let nameBytes = raw[nameStart..<min(nameStart + length, raw.count)]
                events.append(InotifyEvent(watch: wd, mask: mask, name: Array(nameBytes.prefix(while: { $0 != 0 }))))
                offset = nameStart + length
            }
        }
        return events
    }
}
