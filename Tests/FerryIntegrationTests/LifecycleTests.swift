import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs `ferryd ARGUMENTS` to completion and returns its exit status and stderr.
func runFerryd(_ arguments: [String], in directory: TemporaryDirectory) async throws -> (status: Int32, stdout: String, stderr: String) {
    let child = try ChildProcess(executable: try BuiltProducts.path("ferryd"), arguments: arguments,
                                 logPath: directory.url("run-\(UUID().uuidString).log"))
    let status = try await child.waitForExit()
    let out = child.remainingStdout()
    return (status, out, child.log)
}

@Suite("Daemon lifecycle", .serialized)
struct LifecycleTests {
    @Test("SIGTERM lets an upload in flight finish within shutdown_timeout")
    func gracefulFinish() async throws {
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .stallUntil(afterBytes: 1 << 20, gate: gate) }
        try await withDaemonHarness(topLevel: ["shutdown_timeout = \"30s\""], plan: plan) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(8 << 20, seed: 5)
            let source = try harness.drop("big.bin", bytes)
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 1 << 20 }
            harness.daemon?.child.send(SIGTERM)
            try await harness.daemon?.waitForLog("shutting down: waiting for uploads in flight")
            #expect(harness.daemon?.child.isRunning == true, "it must wait for the upload")
            gate.open()
            let status = try await harness.daemon?.child.waitForExit()
            #expect(status == 0)
            // A clean stop writes the WAL back: queue.sqlite alone is the whole queue.
            var wal = stat()
            #expect(stat(harness.directory.url("state/queue.sqlite-wal"), &wal) != 0 || wal.st_size == 0, "\(wal.st_size) bytes left in the WAL")
            #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(bytes))
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done)
            #expect(job.disposedAt != nil)
            #expect(!fileExists(source))
        }
    }

    @Test("SIGTERM with a stuck upload exits after shutdown_timeout and leaves the job queued")
    func gracefulTimeout() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.index == 0 ? .stall(afterBytes: 1 << 20) : .store() }
        try await withDaemonHarness(topLevel: ["shutdown_timeout = \"1s\""], plan: plan) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(8 << 20, seed: 6)
            try harness.drop("stuck.bin", bytes)
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 1 << 20 }
            let started = ContinuousClock.now
            let status = try await harness.daemon?.stop()
            #expect(status == 0)
            #expect(ContinuousClock.now - started < .seconds(10))
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .queued, "an aborted upload goes back to the queue, not stuck in uploading")
            #expect(job.attempts == 0)
            #expect(fileExists(harness.spoolPath() + "/stuck.bin"))
            // And it goes through on the next start.
            try await harness.start()
            try await harness.waitForAccepted(1)
            #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(bytes))
        }
    }

    @Test("A second ferryd on the same state directory refuses to start")
    func singleInstance() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let second = try ChildProcess(executable: try BuiltProducts.path("ferryd"), arguments: ["--config", harness.configPath],
                                          logPath: harness.directory.url("second.log"))
            let status = try await second.waitForExit()
            #expect(status == 75)
            #expect(second.log.contains("another ferryd (pid \(harness.daemon!.child.pid)) is using the state directory"))
            #expect(harness.daemon?.child.isRunning == true)
        }
    }

    @Test("A damaged queue database stops the daemon with a clear error and is left as it was")
    func corruptDatabase() async throws {
        try await withDaemonHarness { harness in
            let state = try harness.directory.makeDirectory("state")
            let garbage = Data(repeating: 0x5A, count: 16384)
            _ = FileManager.default.createFile(atPath: state + "/queue.sqlite", contents: garbage)
            let child = try ChildProcess(executable: try BuiltProducts.path("ferryd"), arguments: ["--config", harness.configPath],
                                         logPath: harness.logPath)
            let status = try await child.waitForExit()
            #expect(status == 74)
            #expect(child.log.contains("is damaged"))
            #expect(FileManager.default.contents(atPath: state + "/queue.sqlite") == garbage)
        }
    }

    @Test("Orphaned bodies are removed at start; bodies are 0600 in a 0700 state directory")
    func bodies() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.index == 0 ? .stall(afterBytes: 64 * 1024) : .store() }
        try await withDaemonHarness(topLevel: ["shutdown_timeout = \"1s\""], plan: plan) { harness in
            let bodies = try harness.directory.makeDirectory("state/bodies")
            _ = FileManager.default.createFile(atPath: bodies + "/01JORPHAN.body", contents: Data("stale".utf8))
            try await harness.start()
            #expect(!fileExists(bodies + "/01JORPHAN.body"))
            try harness.drop("photo.jpg", pseudoRandomBytes(4 << 20, seed: 9))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let names = try FileManager.default.contentsOfDirectory(atPath: bodies)
            #expect(names.count == 1)
            var st = stat()
            #expect(stat(bodies + "/" + names[0], &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600)
            #expect(stat(harness.directory.url("state"), &st) == 0)
            #expect(st.st_mode & 0o777 == 0o700)
            #expect(stat(harness.directory.url("state/queue.sqlite"), &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600, "the queue is readable by the daemon's user only")
        }
    }

    @Test("check-config accepts a good file and names file, line and key for a bad one")
    func checkConfig() async throws {
        let directory = try TemporaryDirectory()
        let good = directory.url("good.toml")
        try """
            [[spool]]
            name = "media"
            directory = "\(directory.path)/spool"
            url = "https://example.org/upload"
            """.write(toFile: good, atomically: true, encoding: .utf8)
        let ok = try await runFerryd(["check-config", "--config", good], in: directory)
        #expect(ok.status == 0)

        let bad = directory.url("bad.toml")
        try """
            [[spool]]
            name = "media"
            directory = "\(directory.path)/spool"
            url = "https://example.org/upload"
            setle = "2s"
            """.write(toFile: bad, atomically: true, encoding: .utf8)
        let failed = try await runFerryd(["check-config", "--config", bad], in: directory)
        #expect(failed.status == 78)
        #expect(failed.stderr.contains("\(bad):5: spool[0].setle: unknown key \"setle\" (did you mean \"settle\"?)"))

        let missing = try await runFerryd(["check-config", "--config", directory.url("nope.toml")], in: directory)
        #expect(missing.status == 78)
        #expect(missing.stderr.contains("cannot read the configuration file: No such file or directory"))

        // The daemon itself refuses the bad file the same way.
        let daemon = try await runFerryd(["--config", bad], in: directory)
        #expect(daemon.status == 78)
    }
}
