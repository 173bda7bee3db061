import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ferryd under a service manager: sd_notify over a real `NOTIFY_SOCKET` datagram socket owned by the
/// test, and socket activation through Debian's `systemd-socket-activate`.
@Suite("systemd: notify, watchdog, reload, socket activation", .serialized)
struct SystemdTests {
    /// Whether `line` is the queue summary ferryd sends as STATUS (`3 queued, 1 uploading, 0 retrying, 2 failed`).
    static func isSummary(_ line: String?) -> Bool {
        line?.contains(/^\d+ queued, \d+ uploading, \d+ retrying, \d+ failed/) == true
    }

    @Test("READY=1 comes only after recovery and the first spool scan; STATUS tracks the queue; STOPPING=1 on SIGTERM")
    func readyAfterRecovery() async throws {
        let gate = ReceiverGate()
        let stallFirst = Atomic<Bool>(true)
        // The 1 MiB file stalls in the first run and is stored in the second; the small one is refused.
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { request in
            if let length = request.header("Content-Length").flatMap(Int.init), length < 100_000 { return .respond(status: 400) }
            return stallFirst.load(ordering: .relaxed) ? .stallUntil(afterBytes: 1 << 16, gate: gate) : .store()
        }
        try await withDaemonHarness(plan: plan) { harness in
            // A first run is killed mid-upload: its job is left `uploading` for recovery to requeue.
            try await harness.start()
            try harness.drop("interrupted.bin", pseudoRandomBytes(1 << 20, seed: 1))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 1 << 16 }
            try await harness.kill9()
            stallFirst.store(false, ordering: .relaxed)
            gate.open()
            // A file dropped while ferryd is down is found by the first scan.
            // It was written a while ago, so the scan takes it at once rather than letting it settle.
            let whileDown = try harness.drop("while-down.bin", pseudoRandomBytes(4096, seed: 2))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: whileDown)

            let logPath = harness.directory.url("second-run.log")
            // The reader reads ferryd's log the moment each message arrives.
            let notify = try NotifySocket(path: harness.directory.url("notify.sock")) {
                (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            }
            defer { notify.close() }
            let daemon = try Ferryd(configPath: harness.configPath, logPath: logPath, environment: ["NOTIFY_SOCKET": notify.path])
            let ready = try await notify.waitFor("READY=1") { $0["READY"] == "1" }
            // What ferryd had logged when READY arrived: recovery and the scan were done.
            let logAtReady = try #require(notify.messages[ready].snapshot)
            #expect(logAtReady.contains("msg=\"recovered from the previous run\"") && logAtReady.contains("requeued_uploads=1"), "\(logAtReady)")
            #expect(logAtReady.contains("msg=queued") && logAtReady.contains("file=while-down.bin"), "\(logAtReady)")
            let messages = notify.messages
            let recovering = try #require(messages.firstIndex { $0["STATUS"] == "recovering the queue" })
            let scanning = try #require(messages.firstIndex { $0["STATUS"] == "scanning 1 spool" })
            #expect(recovering < scanning && scanning < ready)
            let readyStatus = try #require(messages[ready]["STATUS"])
            #expect(Self.isSummary(readyStatus), "READY's STATUS: \(readyStatus)")
            #expect(!messages[..<ready].contains { $0["STOPPING"] != nil || $0["RELOADING"] != nil })

            try await harness.waitForAccepted(1)
            // The status line follows the queue (brought up to date every 5 s when it changed).
            try await notify.waitFor("a STATUS with the queue drained and the refused file counted", from: ready, timeout: .seconds(20)) {
                $0["STATUS"]?.hasPrefix("0 queued, 0 uploading, 0 retrying, 1 failed") == true
            }
            daemon.child.send(SIGTERM)
            let stopping = try await notify.waitFor("STOPPING=1", from: ready) { $0["STOPPING"] == "1" }
            #expect(notify.messages[stopping]["STATUS"]?.hasPrefix("stopping") == true)
            #expect(try await daemon.child.waitForExit() == 0)
        }
    }

    @Test("WATCHDOG=1 at half of WATCHDOG_USEC from the scheduler's loop, idle or busy; none for another WATCHDOG_PID")
    func watchdogPings() async throws {
        try await withDaemonHarness { harness in
            let notify = try NotifySocket(path: harness.directory.url("notify.sock"))
            defer { notify.close() }
            // WATCHDOG_USEC = 2 s: pings are due every second.
            try await harness.start(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000000"])
            let ready = try await notify.waitFor("READY=1") { $0["READY"] == "1" }
            // Keep it busy for part of the window.
            for index in 0..<20 { try harness.drop("busy-\(index).bin", pseudoRandomBytes(64 << 10, seed: UInt64(index))) }
            try await waitUntil("6 watchdog pings", timeout: .seconds(30)) {
                notify.messages.filter { $0["WATCHDOG"] == "1" }.count >= 6
            }
            let pings = notify.messages.enumerated().filter { $0.element["WATCHDOG"] == "1" }
            #expect(pings.allSatisfy { $0.offset > ready }, "the watchdog is fed from the scheduler, which runs after READY")
            let arrivals = pings.map(\.element.arrived)
            // Never late for systemd's 2 s timeout; not flooding either (one per turn would be far more
            // often). Arrivals are timed by the test's reader, which a loaded machine may hold up and
            // then read two pings at once: the count over the whole span is what shows the rate.
            let gaps = zip(arrivals, arrivals.dropFirst()).map { $1 - $0 }
            #expect(gaps.allSatisfy { $0 < .milliseconds(2500) }, "gaps \(gaps)")
            if let first = arrivals.first, let last = arrivals.last, arrivals.count > 1 {
                let perPing = (last - first) / (arrivals.count - 1)
                #expect(perPing > .milliseconds(600) && perPing < .milliseconds(1500), "\(arrivals.count) pings, one every \(perPing)")
            }
            try await harness.waitForAccepted(20)
        }
        // WATCHDOG_PID names another process: the watchdog is not ferryd's to feed.
        try await withDaemonHarness { harness in
            let notify = try NotifySocket(path: harness.directory.url("notify.sock"))
            defer { notify.close() }
            try await harness.start(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"])
            let ready = try await notify.waitFor("READY=1") { $0["READY"] == "1" }
            try harness.drop("one.bin", [1, 2, 3])
            try await harness.waitForAccepted(1)
            // The scheduler has turned since READY (it claimed the file), and a turn is where a ping would go.
            // A reload's messages are sent after that turn; once they are in, so would be any ping.
            harness.daemon?.child.send(SIGHUP)
            let reloading = try await notify.waitFor("RELOADING=1", from: ready + 1) { $0["RELOADING"] == "1" }
            try await notify.waitFor("READY=1 after the reload", from: reloading + 1) { $0["READY"] == "1" }
            #expect(!notify.messages.contains { $0["WATCHDOG"] != nil })
        }
    }

    @Test("SIGHUP: RELOADING=1 (with MONOTONIC_USEC) then READY=1; a broken file keeps the old configuration and the daemon running")
    func reloadNotifications() async throws {
        try await withDaemonHarness { harness in
            let notify = try NotifySocket(path: harness.directory.url("notify.sock"))
            defer { notify.close() }
            try await harness.start(environment: ["NOTIFY_SOCKET": notify.path])
            let daemon = try #require(harness.daemon)
            let ready = try await notify.waitFor("READY=1") { $0["READY"] == "1" }
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)

            // A valid change.
            try ("max_concurrent_uploads = 2\n" + original).write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            daemon.child.send(SIGHUP)
            let reloading = try await notify.waitFor("RELOADING=1", from: ready + 1) { $0["RELOADING"] == "1" }
            #expect(notify.messages[reloading]["MONOTONIC_USEC"].flatMap(UInt64.init) != nil)
            let reloaded = try await notify.waitFor("READY=1 after the reload", from: reloading + 1) { $0["READY"] == "1" }
            #expect(Self.isSummary(notify.messages[reloaded]["STATUS"]))
            try await daemon.waitForLog("msg=\"configuration reloaded\"")
            #expect(try await harness.ctl("status", "--json").json()["max_concurrent_uploads"] as? Int == 2)

            // A broken file: a typo'd key.
            try ("max_concurent_uploads = 3\n" + original).write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            daemon.child.send(SIGHUP)
            let reloadingAgain = try await notify.waitFor("RELOADING=1 again", from: reloaded + 1) { $0["RELOADING"] == "1" }
            let rejected = try await notify.waitFor("READY=1 after the rejected reload", from: reloadingAgain + 1) { $0["READY"] == "1" }
            #expect(notify.messages[rejected]["STATUS"]?.contains("rejected") == true)
            try await daemon.waitForLog("configuration reload rejected")
            #expect(daemon.log.contains("max_concurent_uploads"), "the log names the bad key")
            #expect(daemon.child.isRunning)
            #expect(try await harness.ctl("status", "--json").json()["max_concurrent_uploads"] as? Int == 2, "the previous configuration stays")
            try harness.drop("after.bin", [9, 9, 9])
            try await harness.waitForAccepted(1)

            daemon.child.send(SIGTERM)
            try await notify.waitFor("STOPPING=1", from: rejected) { $0["STOPPING"] == "1" }
            #expect(try await daemon.child.waitForExit() == 0)
        }
    }

    @Test("The units pass systemd-analyze verify, and systemd-analyze security scores them below 2.0 (scripts/check-units.sh)")
    func unitFiles() async throws {
        let directory = try TemporaryDirectory("check-units")
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let status = try await runToCompletion(
            ["/bin/bash", root + "/scripts/check-units.sh"], environment: ProcessInfo.processInfo.environment,
            stdoutPath: directory.url("out"), stderrPath: directory.url("err"), timeout: .seconds(120))
        let output = try String(contentsOfFile: directory.url("out"), encoding: .utf8) + String(contentsOfFile: directory.url("err"), encoding: .utf8)
        #expect(status == 0, "\(output)")
        let score = try #require(output.firstMatch(of: /overall exposure: (\d+\.\d+)/)?.1).description
        #expect(Double(score).map { $0 < 2.0 } == true, "\(output)")
    }

    @Test("Socket activation through systemd-socket-activate: the first ferryctl connection starts ferryd, which serves it")
    func systemdSocketActivate() async throws {
        let activate = "/usr/bin/systemd-socket-activate"
        guard FileManager.default.isExecutableFile(atPath: activate) else {
            throw TestFailure("\(activate) is missing: install Debian's systemd package (scripts/install-deps.sh --test does)")
        }
        try await withDaemonHarness { harness in
            let socketPath = harness.directory.url("activated.sock")
            let child = try ChildProcess(
                executable: activate,
                arguments: ["--listen=\(socketPath)", try BuiltProducts.path("ferryd"), "--config", harness.configPath],
                logPath: harness.logPath)
            defer { if child.isRunning { child.send(SIGKILL) } }
            try await waitUntil("systemd-socket-activate to listen\n\(child.log)") { fileExists(socketPath) }
            #expect(!child.log.contains("msg=ready"), "ferryd starts on the first connection, not before")
            // This connection is what starts ferryd; it is answered once ferryd is up.
            let status = try await runFerryctl(["status"], socket: socketPath)
            #expect(status.status == 0, "ferryctl status: \(status.stderr)\n\(child.log)")
            #expect(status.stdout.contains("test"), "\(status.stdout)")
            #expect(child.log.contains("control socket passed by systemd"))
            #expect(!fileExists(harness.controlSocket), "ferryd creates no socket of its own when one is passed")
            try harness.drop("activated.bin", [1, 2, 3, 4])
            let waited = try await runFerryctl(["wait", "--timeout", "30s"], socket: socketPath)
            #expect(waited.status == 0, "\(waited.stderr)")
            #expect(harness.receiver.acceptedRequests.count == 1)
            child.send(SIGTERM)
            #expect(try await child.waitForExit() == 0)
        }
    }
}
