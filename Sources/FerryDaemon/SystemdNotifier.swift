import CFerrySystem
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager how ferryd is doing, over `$NOTIFY_SOCKET`: the sd_notify(3) protocol,
/// written out so that ferryd needs no libsystemd. Each message is one datagram of newline-separated
/// `KEY=value` assignments (`READY=1`, `RELOADING=1`, `STOPPING=1`, `STATUS=…`, `WATCHDOG=1`).
///
/// When ferryd is not started by systemd (no `NOTIFY_SOCKET`), every call does nothing. The
/// variables are read once and removed from the environment, as `sd_notify(unset_environment: 1)`
/// does, so nothing ferryd might start later could talk to systemd in its name.
public final class SystemdNotifier: Sendable {
    /// The notification socket's address (`sun_path` bytes; a leading NUL for the abstract namespace).
    private let address: [UInt8]?
    /// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, or nil when no watchdog is set for this process.
    public let watchdogInterval: Duration?
    private let nextWatchdog = Mutex<ContinuousClock.Instant>(.now)
    /// Where the service is in its life, as told to systemd, and the status line it shows.
    private struct State {
        enum Phase { case starting, running, stopping }
        var phase = Phase.starting
        var status: String?
    }
    private let state = Mutex(State())
    private let failureLogged = Atomic<Bool>(false)
    private let logger: Logger

    /// A notifier for the variables in `environment` (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`),
    /// as seen by process `pid`.
    public init(environment: [String: String], pid: Int32 = getpid(), logger: Logger) {
        self.logger = logger
        address = environment["NOTIFY_SOCKET"].flatMap(Self.socketAddress)
        let watchdogApplies = environment["WATCHDOG_PID"].map { Int32($0) == pid } ?? true
        if address != nil, watchdogApplies, let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0 {
            watchdogInterval = .microseconds(Int64(clamping: usec / 2))
        } else {
            watchdogInterval = nil
        }
    }

    /// Reads this process's variables, then removes them from the environment.
    public static func fromProcessEnvironment(logger: Logger) -> SystemdNotifier {
        let notifier = SystemdNotifier(environment: ProcessInfo.processInfo.environment, logger: logger)
        for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { unsetenv(name) }
        return notifier
    }

    /// Whether a service manager listens.
    public var isEnabled: Bool { address != nil }

    /// Start-up is complete (recovery and the first scan of every spool are done), or a reload
    /// begun with ``reloading()`` has ended, applied or not. Ignored once shutdown has begun.
    public func ready(status: String) {
        state.withLock { state in
            guard state.phase != .stopping else { return }
            state.phase = .running
            state.status = status
            send(["READY=1", "STATUS=" + Self.oneLine(status)])
        }
    }

    /// A configuration reload begins. Only while running: not during start-up or shutdown.
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        state.withLock { state in
            guard state.phase == .running else { return }
            state.status = "reloading the configuration"
            // MONOTONIC_USEC lets systemd ≥ 253 match this message to the reload it asked for.
            send(["RELOADING=1", "MONOTONIC_USEC=\(microseconds)", "STATUS=reloading the configuration"])
        }
    }

    /// Shutdown has begun; later ``ready(status:)`` and ``reloading()`` calls are ignored.
    public func stopping(status: String) {
        state.withLock { state in
            state.phase = .stopping
            state.status = status
            send(["STOPPING=1", "STATUS=" + Self.oneLine(status)])
        }
    }

    /// Sets the one-line status `systemctl status` shows; sends nothing when it has not changed.
    public func status(_ line: String) {
        guard isEnabled else { return }
        state.withLock { state in
            guard state.status != line else { return }
            state.status = line
            send(["STATUS=" + Self.oneLine(line)])
        }
    }

    /// When the next `WATCHDOG=1` is due (nil: no watchdog): the scheduler wakes by then.
    public var nextWatchdogDue: ContinuousClock.Instant? {
        watchdogInterval == nil ? nil : nextWatchdog.withLock { $0 }
    }

    /// Sends `WATCHDOG=1` when half the watchdog period has passed since the last one. Called from
    /// the scheduler's loop, so a loop that stops turning stops the pings and systemd restarts ferryd.
    public func watchdogIfDue() {
        guard let interval = watchdogInterval else { return }
        let due = nextWatchdog.withLock { next -> Bool in
            let now = ContinuousClock.now
            guard now >= next else { return false }
            next = now + interval
            return true
        }
        if due { send(["WATCHDOG=1"]) }
    }

    /// Sends one message. A failure is logged once (systemd may have gone away; ferryd keeps working).
    public func send(_ assignments: [String]) {
        guard let address else { return }
        let message = Array(assignments.joined(separator: "\n").utf8)
        let descriptor = cferry_unix_datagram_socket()
        guard descriptor >= 0 else { return logFailure("socket", errno) }
        defer { close(descriptor) }
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { path in
            path.copyBytes(from: address)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + address.count)
        let sent = withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeBytes { bytes in
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        if sent < 0 { logFailure("sendto", errno) }
    }

    private func logFailure(_ call: String, _ code: Int32) {
        guard !failureLogged.exchange(true, ordering: .relaxed) else { return }
        logger.warning("cannot notify the service manager (NOTIFY_SOCKET); later failures are not logged", metadata: [
            "call": "\(call)", "error": "\(String(cString: strerror(code)))",
        ])
    }

    /// The `sun_path` bytes for `NOTIFY_SOCKET`: an absolute path (NUL-terminated) or `@name` (abstract).
    static func socketAddress(_ value: String) -> [UInt8]? {
        var bytes = Array(value.utf8)
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        switch bytes.first {
        case UInt8(ascii: "/"):
            bytes.append(0)
        case UInt8(ascii: "@"):
            bytes[0] = 0
        default:
            return nil   // vsock: and other forms are not for a daemon on the host
        }
        return bytes.count <= capacity && bytes.count > 1 ? bytes : nil
    }

    /// Status text must stay on one line: newlines would start new assignments.
    public static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 }.prefix(200))
    }
}
