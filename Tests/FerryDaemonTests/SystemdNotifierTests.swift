@testable import FerryDaemon
import FerryQueue
import FerryTestSupport
import Foundation
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("SystemdNotifier: the sd_notify protocol")
struct SystemdNotifierTests {
    let logger = Logger(label: "test")

    @Test("NOTIFY_SOCKET: an absolute path is NUL-terminated, @name is abstract (leading NUL), anything else is refused")
    func socketAddresses() {
        #expect(SystemdNotifier.socketAddress("/run/systemd/notify") == Array("/run/systemd/notify".utf8) + [0])
        #expect(SystemdNotifier.socketAddress("@ferry/notify") == [0] + Array("ferry/notify".utf8))
        #expect(SystemdNotifier.socketAddress("relative/notify") == nil)
        #expect(SystemdNotifier.socketAddress("vsock:2:1234") == nil)
        #expect(SystemdNotifier.socketAddress("") == nil)
        #expect(SystemdNotifier.socketAddress("@") == nil)
        #expect(SystemdNotifier.socketAddress("/" + String(repeating: "a", count: 107)) == nil, "109 bytes with the NUL: too long for sun_path")
        #expect(SystemdNotifier.socketAddress("/" + String(repeating: "a", count: 106)) != nil, "108 bytes with the NUL: just fits")
    }

    @Test("The watchdog applies only with a socket, a positive WATCHDOG_USEC and (if set) our WATCHDOG_PID; pings at half")
    func watchdogInterval() {
        func interval(_ environment: [String: String]) -> Duration? {
            SystemdNotifier(environment: environment, pid: 42, logger: logger).watchdogInterval
        }
        let socket = ["NOTIFY_SOCKET": "/run/notify"]
        #expect(interval(socket.merging(["WATCHDOG_USEC": "30000000"]) { $1 }) == .seconds(15))
        #expect(interval(socket.merging(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "42"]) { $1 }) == .seconds(15))
        #expect(interval(socket.merging(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "43"]) { $1 }) == nil)
        #expect(interval(socket.merging(["WATCHDOG_USEC": "0"]) { $1 }) == nil)
        #expect(interval(socket.merging(["WATCHDOG_USEC": "soon"]) { $1 }) == nil)
        #expect(interval(["WATCHDOG_USEC": "30000000"]) == nil, "no socket to ping")
        #expect(SystemdNotifier(environment: [:], logger: logger).isEnabled == false)
    }

    @Test("Status text stays on one line and within 200 characters")
    func oneLine() {
        #expect(SystemdNotifier.oneLine("a\nb\r\nc") == "a b c")
        #expect(SystemdNotifier.oneLine(String(repeating: "x", count: 500)).count == 200)
    }

    @Test("Messages arrive as datagrams; READY/RELOADING are ignored out of phase; an unchanged STATUS is not resent")
    func phases() async throws {
        let directory = try TemporaryDirectory()
        let socket = try NotifySocket(path: directory.url("notify.sock"))
        defer { socket.close() }
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path], logger: logger)
        notifier.reloading()                       // still starting: ignored
        notifier.status("scanning")
        notifier.status("scanning")                // unchanged: not sent again
        notifier.ready(status: "0 queued")
        notifier.reloading()
        notifier.ready(status: "1 queued")
        notifier.stopping(status: "stopping")
        notifier.ready(status: "late")             // after STOPPING: ignored
        notifier.reloading()                       // likewise
        notifier.send(["X=last"])
        try await socket.waitFor("the last message") { $0["X"] == "last" }
        let received = socket.messages.map(\.description)
        #expect(received == [
            "STATUS=scanning", "READY=1\\nSTATUS=0 queued",
            received.first { $0.hasPrefix("RELOADING=1") } ?? "RELOADING missing",
            "READY=1\\nSTATUS=1 queued", "STOPPING=1\\nSTATUS=stopping", "X=last",
        ])
        #expect(socket.messages[2]["MONOTONIC_USEC"].flatMap(UInt64.init) != nil)
    }

    @Test("An abstract NOTIFY_SOCKET (@name) is reached")
    func abstractSocket() throws {
        let name = "ferry-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = [UInt8(0)] + Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sa_family_t>.size + path.count))
            }
        }
        try #require(bound == 0)
        SystemdNotifier(environment: ["NOTIFY_SOCKET": "@" + name], logger: logger).send(["READY=1"])
        var buffer = [UInt8](repeating: 0, count: 64)
        // The datagram was queued before send returned: a non-blocking read finds it.
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        #expect(count > 0 && String(decoding: buffer[..<max(0, count)], as: UTF8.self) == "READY=1")
    }

    @Test("The STATUS line: queued, uploading, retrying, failed across spools; held and paused only when there are any")
    func summary() {
        let counts: [String: [JobState: Int]] = ["a": [.queued: 2, .failed: 1, .done: 9], "b": [.queued: 1, .uploading: 1, .held: 3]]
        #expect(StatusReporter.summary(counts: counts, paused: []) == "3 queued, 1 uploading, 0 retrying, 1 failed, 3 held")
        #expect(StatusReporter.summary(counts: [:], paused: ["*"]) == "0 queued, 0 uploading, 0 retrying, 0 failed; paused")
        #expect(StatusReporter.summary(counts: [:], paused: ["b", "a"]) == "0 queued, 0 uploading, 0 retrying, 0 failed; paused: a,b")
    }
}
