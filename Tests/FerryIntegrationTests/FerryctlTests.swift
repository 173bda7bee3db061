import FerryReceiver
import FerryTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A switch the receiver's plan reads: whether the `strict` spool's endpoint rejects uploads.
private final class Switch: Sendable {
    private let value = Atomic<Bool>(true)
    var isOn: Bool { value.load(ordering: .relaxed) }
    func turnOff() { value.store(false, ordering: .relaxed) }
}

private func jobs(_ result: FerryctlResult) throws -> [[String: Any]] {
    try #require(try result.json()["jobs"] as? [[String: Any]])
}

@Suite("ferryctl against a real daemon", .serialized)
struct FerryctlTests {
    @Test("Every subcommand, in human and --json output, through a session of failures, retries, holds, cancels and reloads")
    func session() async throws {
        let rejecting = Switch()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.uri.contains("strict") && rejecting.isOn
                ? .respond(status: 400, headers: [HeaderField(name: "Content-Type", value: "application/json")], body: #"{"error":"nope"}"#)
                : .store()
        }
        try await withDaemonHarness(spools: [TestSpool(), TestSpool(name: "strict")], plan: plan) { harness in
            try await harness.start()
            let version = try await harness.ctl("version")
            #expect(version.status == 0 && version.stdout.contains("0.1.0"))
            #expect(try await harness.ctl("health").status == 0)
            #expect(try await harness.ctl("health", "--json").json()["status"] as? String == "ok")

            // A failure shows up in wait, list and show.
            try harness.drop("good1.txt", Array("good one".utf8))
            try harness.drop("good2.txt", Array("good two".utf8))
            try harness.drop("bad.txt", Array("rejected".utf8), spool: "strict")
            let firstWait = try await harness.ctl("wait", "--timeout", "30s", "--json")
            #expect(firstWait.status == 1, "\(firstWait)")
            let failed = try #require(try firstWait.json()["failed"] as? [[String: Any]])
            #expect(failed.map { $0["file"] as? String } == ["bad.txt"])
            // Until new work starts, the batch's failure is still reported.
            let again = try await harness.ctl("wait", "--timeout", "30s")
            #expect(again.status == 1 && again.stdout.contains("queue drained") && again.stdout.contains("bad.txt"), "\(again)")
            #expect(Set(harness.receiver.acceptedRequests.flatMap { $0.files.map(\.filename) }) == ["good1.txt", "good2.txt"])

            let humanList = try await harness.ctl("list")
            #expect(humanList.status == 0 && humanList.stdout.contains("bad.txt") && humanList.stdout.contains("failed"), "\(humanList)")
            let failedJobs = try jobs(try await harness.ctl("list", "--json", "--state", "failed"))
            #expect(failedJobs.count == 1)
            let badID = try #require(failedJobs.first?["id"] as? String)
            #expect(try jobs(try await harness.ctl("list", "--json", "--spool", "test", "--since", "1h")).count == 2)

            let humanShow = try await harness.ctl("show", badID)
            #expect(humanShow.status == 0 && humanShow.stdout.contains("400") && humanShow.stdout.contains("nope"), "\(humanShow)")
            let shown = try await harness.ctl("show", String(badID.prefix(20)), "--json").json()
            #expect(shown["location"] as? String == "failed")
            #expect((shown["response"] as? [String: Any])?["status"] as? Int == 400)
            #expect((shown["attempts"] as? [[String: Any]])?.count == 1)
            #expect(fileExists(harness.spoolPath("strict") + "/.failed/bad.txt"))

            // Retry a failed job: its file comes back from the failed directory and is delivered.
            rejecting.turnOff()
            let retried = try await harness.ctl("retry", badID)
            #expect(retried.status == 0 && retried.stdout.contains("queued"), "\(retried)")
            #expect(try await harness.ctl("wait", "--timeout", "30s").status == 0)
            #expect(try await harness.ctl("show", badID, "--json").json()["location"] as? String == "deleted")
            #expect(!fileExists(harness.spoolPath("strict") + "/.failed/bad.txt"))
            #expect(!fileExists(harness.spoolPath("strict") + "/.failed/bad.txt.error.json"))
            #expect(try await harness.ctl("retry", badID).status == 1)
            #expect(try await harness.ctl("retry").status == 64)
            // Durations no clock can hold are usage errors, not a crash (exit 132).
            let longWait = try await harness.ctl("wait", "--timeout", "1e16")
            #expect(longWait.status == 64, "\(longWait)")
            let longInterval = try await harness.ctl("status", "--watch", "--interval", "1e16")
            #expect(longInterval.status == 64, "\(longInterval)")

            // Pause, hold, release, cancel, retry the cancelled job, resume.
            let paused = try await harness.ctl("pause")
            #expect(paused.status == 0 && paused.stdout.contains("test"), "\(paused)")
            try harness.drop("parked.txt", Array("parked".utf8))
            try await waitUntil("parked.txt to be queued") {
                (try? jobs(try await harness.ctl("list", "--json", "--state", "queued")).count) == 1
            }
            let status = try await harness.ctl("status")
            #expect(status.status == 0 && status.stdout.contains("paused"), "\(status)")
            let statusJSON = try await harness.ctl("status", "--json").json()
            let spools = try #require(statusJSON["spools"] as? [[String: Any]])
            #expect(spools.allSatisfy { $0["paused"] as? Bool == true })
            let parkedID = try #require(try jobs(try await harness.ctl("list", "--json", "--state", "queued")).first?["id"] as? String)
            #expect(try await harness.ctl("hold", parkedID).stdout.contains("held"))
            #expect(try await harness.ctl("release", parkedID, "--json").json()["results"] != nil)
            #expect(try await harness.ctl("hold", "--all-queued").status == 0)
            #expect(try jobs(try await harness.ctl("list", "--json", "--state", "held")).count == 1)
            #expect(try await harness.ctl("release", badID).status == 1)
            let cancelled = try await harness.ctl("cancel", parkedID)
            #expect(cancelled.status == 0 && cancelled.stdout.contains("cancelled"), "\(cancelled)")
            let sidecar = try String(contentsOfFile: harness.spoolPath() + "/.failed/parked.txt.error.json", encoding: .utf8)
            #expect(sidecar.contains("cancelled"))
            #expect(try await harness.ctl("retry", parkedID).status == 0)
            #expect(fileExists(harness.spoolPath() + "/parked.txt"))
            #expect(try await harness.ctl("resume", "--json").json()["paused"] as? [Any] != nil)
            #expect(try await harness.ctl("wait", "--timeout", "30s").status == 0)
            #expect(harness.receiver.acceptedRequests.flatMap { $0.files.map(\.filename) }.contains("parked.txt"))

            // enqueue: files from elsewhere, handed over the safe way.
            let outside = try harness.directory.makeDirectory("outside")
            try Data("handed over".utf8).write(to: URL(fileURLWithPath: outside + "/handed.txt"))
            try Data("handed over too".utf8).write(to: URL(fileURLWithPath: outside + "/handed2.txt"))
            let enqueued = try await harness.ctl("enqueue", outside + "/handed.txt", "--spool", "test")
            #expect(enqueued.status == 0, "\(enqueued)")
            let enqueuedJSON = try await harness.ctl("enqueue", outside + "/handed2.txt", "--spool", "test", "--json").json()
            #expect(((enqueuedJSON["results"] as? [[String: Any]])?.first?["job"] as? String)?.count == 26)
            #expect(try await harness.ctl("enqueue", outside + "/handed.txt", "--spool", "nosuch").status != 0)
            #expect(try await harness.ctl("wait", "--timeout", "30s").status == 0)
            let received = harness.receiver.acceptedRequests.flatMap { $0.files.map(\.filename) }
            #expect(received.contains("handed.txt") && received.contains("handed2.txt"))
            #expect(fileExists(outside + "/handed.txt"))

            // watch replays from the start and shows every delivery.
            let watchLog = harness.directory.url("watch.log")
            let watch = try ChildProcess(executable: try BuiltProducts.path("ferryctl"),
                                         arguments: ["--socket", harness.controlSocket, "watch", "--json", "--since", "0"], logPath: watchLog)
            let done = try await watch.readStdoutLine { $0.contains("\"event\":\"done\"") }
            #expect(done.contains("good1.txt") || done.contains("good2.txt") || done.contains("bad.txt"))
            watch.send(SIGINT)
            #expect(try await watch.waitForExit() == 0)
            let humanWatch = try ChildProcess(executable: try BuiltProducts.path("ferryctl"),
                                              arguments: ["--socket", harness.controlSocket, "watch", "--since", "0"], logPath: watchLog)
            _ = try await humanWatch.readStdoutLine { $0.contains("done") }
            humanWatch.send(SIGINT)
            _ = try await humanWatch.waitForExit()

            let metrics = try await harness.ctl("metrics")
            #expect(metrics.status == 0 && metrics.stdout.contains("ferry_jobs{spool=\"test\",state=\"done\"}"), "\(metrics)")
            #expect(try await harness.ctl("metrics", "--json").json()["values"] != nil)

            // reload applies a valid change and refuses an invalid file, keeping the old configuration.
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            try ("max_concurrent_uploads = 2\n" + original).write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let reloaded = try await harness.ctl("reload")
            #expect(reloaded.status == 0 && reloaded.stdout.contains("max_concurrent_uploads"), "\(reloaded)")
            #expect(try await harness.ctl("status", "--json").json()["max_concurrent_uploads"] as? Int == 2)
            try ("bogus_key = 1\n" + original).write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let refused = try await harness.ctl("reload")
            #expect(refused.status == 1 && refused.stderr.contains("bogus_key"), "\(refused)")
            #expect(try await harness.ctl("status", "--json").json()["max_concurrent_uploads"] as? Int == 2)
            #expect(try await harness.ctl("health").status == 0)

            // Errors: unknown job, unreachable daemon.
            #expect(try await harness.ctl("show", "01NOSUCHJOB").status == 1)
            let unreachable = try await runFerryctl(["status"], socket: harness.directory.url("nothing.sock"))
            #expect(unreachable.status == 69 && unreachable.stderr.split(separator: "\n").count == 1, "\(unreachable)")
        }
    }

    @Test("wait counts files renamed or written into the spool just before it was called")
    func waitDrains() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            for index in 0..<20 { try harness.drop("file-\(index).txt", Array("content \(index)".utf8)) }
            // Written in place (not renamed): it is settling when wait starts.
            try Data("in place".utf8).write(to: URL(fileURLWithPath: harness.spoolPath() + "/in-place.txt"))
            let result = try await harness.ctl("wait", "--timeout", "60s")
            #expect(result.status == 0, "\(result)")
            #expect(harness.receiver.acceptedRequests.count == 21)
            let paused = try await harness.ctl("pause", "test")
            #expect(paused.status == 0)
            try harness.drop("stuck.txt", Array("stuck".utf8))
            let timedOut = try await harness.ctl("wait", "--timeout", "1s")
            #expect(timedOut.status == 75, "\(timedOut)")
        }
    }

    @Test("hold and cancel stop an upload in flight; the held job uploads after release, the cancelled file is moved aside")
    func interveneInFlight() async throws {
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.index == 0 || info.index == 2 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store()
        }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            try harness.drop("big.bin", pseudoRandomBytes(4 << 20, seed: 9))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let uploads = try #require(try await harness.ctl("status", "--json").json()["uploads"] as? [[String: Any]])
            let id = try #require(uploads.first?["job"] as? String)
            #expect((uploads.first?["bytes_sent"] as? Int ?? 0) > 0)
            #expect(try await harness.ctl("show", id, "--json").json()["progress"] != nil)
            let held = try await harness.ctl("hold", id)
            #expect(held.status == 0 && held.stdout.contains("held"), "\(held)")
            let attempts = try #require(try await harness.ctl("show", id, "--json").json()["attempts"] as? [[String: Any]])
            #expect(attempts.last?["outcome"] as? String == "interrupted")
            #expect(try await harness.ctl("release", id).status == 0)
            try await harness.waitForAccepted(1)

            try harness.drop("cancel-me.bin", pseudoRandomBytes(4 << 20, seed: 10))
            try await waitUntil("the second upload to be under way") { harness.receiver.requests.count >= 3 && harness.receiver.requests[2].bodyBytes >= 64 * 1024 }
            let second = try #require(try jobs(try await harness.ctl("list", "--json", "--state", "uploading")).first?["id"] as? String)
            let cancelled = try await harness.ctl("cancel", second)
            #expect(cancelled.status == 0, "\(cancelled)")
            try await waitUntil("the cancelled file to be moved aside") {
                fileExists(harness.spoolPath() + "/.failed/cancel-me.bin") && fileExists(harness.spoolPath() + "/.failed/cancel-me.bin.error.json")
            }
            #expect(try await harness.ctl("show", second, "--json").json()["location"] as? String == "failed")
            gate.open()
        }
    }

    @Test("Another user may read but not act; with control_read_only_for_others = false, not even connect",
          .enabled(if: getuid() == 0, "runs ferryctl as nobody through setpriv, which needs root"))
    func accessByPeerCredentials() async throws {
        for readOnly in [true, false] {
            try await withDaemonHarness(topLevel: ["control_read_only_for_others = \(readOnly)"], controlSocket: "run/control.sock") { harness in
                chmod(harness.directory.path, 0o755)
                try await harness.start()
                // The build directory may not be reachable by nobody (a private temp clone): use a copy.
                let ferryctl = harness.directory.url("ferryctl")
                try await copyBuiltExecutable("ferryctl", to: ferryctl)
                var st = stat()
                #expect(stat(harness.controlSocket, &st) == 0)
                #expect(st.st_mode & 0o777 == (readOnly ? 0o666 : 0o660))
                try harness.drop("seen.txt", Array("seen".utf8))
                try await harness.waitForQuiet()
                let status = try await harness.ctl("status", "--json", asUser: "nobody", executable: ferryctl)
                let hold = try await harness.ctl("hold", "--all-queued", asUser: "nobody", executable: ferryctl)
                if readOnly {
                    #expect(status.status == 0, "\(status)")
                    let listed = try jobs(try await harness.ctl("list", "--json", asUser: "nobody", executable: ferryctl))
                    let id = try #require(listed.first?["id"] as? String)
                    let shown = try await harness.ctl("show", id, "--json", asUser: "nobody", executable: ferryctl).json()
                    #expect((shown["response"] as? [String: Any])?["body_hidden"] as? Bool == true)
                    #expect((shown["response"] as? [String: Any])?["headers"] == nil, "nor the answer's headers")
                    #expect((listed.first?["response"] as? [String: Any])?["headers"] == nil)
                    #expect(hold.status == 77 && hold.stderr.contains("permission denied"), "\(hold)")
                } else {
                    #expect(status.status == 77, "\(status)")
                    #expect(hold.status == 77, "\(hold)")
                }
                // Root may act.
                #expect(try await harness.ctl("hold", "--all-queued", executable: ferryctl).status == 0)
            }
        }
    }

    @Test("ferryctl --config finds the socket where ferryd made it: a path with .. through a symlink, relative or absolute")
    func configSocketAgreesWithFerryd() async throws {
        // control_socket = "<dir>/link/../ctl.sock", link → <dir>/elsewhere/inner: ferryd resolves the
        // path by its text (<dir>/ctl.sock), the kernel would follow the link (<dir>/elsewhere/ctl.sock).
        try await withDaemonHarness(controlSocket: "link/../ctl.sock") { harness in
            _ = try harness.directory.makeDirectory("elsewhere/inner")
            #expect(symlink(harness.directory.url("elsewhere/inner"), harness.directory.url("link")) == 0)
            try await harness.start()
            #expect(fileExists(harness.directory.url("ctl.sock")))
            let status = try await runFerryctl(["status", "--json"], socket: nil, environment: ["FERRY_CONFIG": harness.configPath])
            #expect(status.status == 0, "\(status)")
            #expect((try? status.json())?["config_path"] as? String == harness.configPath)
        }
        // control_socket = "../ctl.sock" in <dir>/conf/ferry.toml, conf → <dir>/real/conf: relative to
        // the directory the file was named in (<dir>), not to where the link leads (<dir>/real).
        try await withDaemonHarness { harness in
            _ = try harness.directory.makeDirectory("real/conf")
            #expect(symlink(harness.directory.url("real/conf"), harness.directory.url("conf")) == 0)
            let text = try String(contentsOfFile: harness.configPath, encoding: .utf8)
                .replacingOccurrences(of: "control_socket = \"\(harness.controlSocket)\"", with: "control_socket = \"../ctl.sock\"")
            #expect(text.contains("control_socket = \"../ctl.sock\""))
            let config = harness.directory.url("conf/ferry.toml")
            try text.write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await Ferryd.start(configPath: config, logPath: harness.logPath)
            #expect(fileExists(harness.directory.url("ctl.sock")))
            let status = try await runFerryctl(["status", "--json", "--config", config], socket: nil)
            #expect(status.status == 0, "\(status)")
            #expect((try? status.json())?["config_path"] as? String == config)
            try await daemon.stop()
        }
    }

    @Test("Socket activation: ferryd serves the socket passed as fd 3 (LISTEN_FDS/LISTEN_PID) and creates none")
    func socketActivation() async throws {
        try await withDaemonHarness { harness in
            let socketPath = harness.directory.url("activated.sock")
            // What systemd does: bind and listen, then exec the service with the socket as fd 3.
            let launcher = """
                import os, socket, sys
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(sys.argv[1]); s.listen(16)
                if s.fileno() != 3: os.dup2(s.fileno(), 3)
                os.set_inheritable(3, True)
                os.environ["LISTEN_FDS"] = "1"; os.environ["LISTEN_PID"] = str(os.getpid())
                os.execv(sys.argv[2], sys.argv[2:])
                """
            let child = try ChildProcess(executable: "/usr/bin/python3",
                                         arguments: ["-c", launcher, socketPath, try BuiltProducts.path("ferryd"), "--config", harness.configPath],
                                         logPath: harness.logPath)
            try await waitUntil("ferryd to start on the passed socket\n\(child.log)") { child.log.contains("msg=ready") }
            let client = try RawControlSocket(path: socketPath)
            let health = try client.request(#"{"v":1,"id":1,"cmd":"health"}"#)
            #expect(health["ok"] as? Bool == true)
            #expect(child.log.contains("control socket passed by systemd"))
            #expect(!fileExists(harness.controlSocket))
            child.send(SIGTERM)
            #expect(try await child.waitForExit() == 0)
            #expect(fileExists(socketPath), "a socket systemd owns is not removed")
        }
    }
}
