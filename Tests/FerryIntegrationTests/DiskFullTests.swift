import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Mounts a tmpfs of `megabytes` at `path` (root only), or fails saying why.
func mountTmpfs(_ path: String, megabytes: Int, in directory: TemporaryDirectory) async throws {
    let child = try ChildProcess(executable: "/bin/mount", arguments: ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", path],
                                 logPath: directory.url("mount.log"))
    let status = try await child.waitForExit()
    guard status == 0 else {
        throw TestFailure("""
            this test needs a small tmpfs for state_directory, and `mount -t tmpfs` failed (exit \(status)): \(child.log)
            run the tests as root (or in a container allowed to mount), as make test does
            """)
    }
}

/// Unmounts `path`; lazily if something still holds it open.
func unmount(_ path: String) {
    if umount(path) != 0 { umount2(path, Int32(MNT_DETACH)) }
}

/// Free bytes on the filesystem holding `path`.
func freeBytes(_ path: String) -> Int64 {
    var info = statvfs()
    guard statvfs(path, &info) == 0 else { return -1 }
    return Int64(info.f_bavail) * Int64(info.f_frsize)
}

@Suite("A full state directory", .serialized)
struct DiskFullTests {
    @Test("Body builds fail with ENOSPC: the job waits without using attempts, status says why, and it is delivered when space returns")
    func stateDirectoryFull() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        try await withSmallStateDirectory { harness, state in try await fillAndRecover(harness, state: state) }
    }

    @Test("Files dropped while the state directory is completely full are queued seconds after space returns, not at the next rescan")
    func queueFull() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        try await withSmallStateDirectory(topLevel: ["rescan_interval = \"1h\""]) { harness, state in
            try await harness.start()
            let filler = state + "/filler"
            let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            #expect(fd >= 0)
            let chunk = [UInt8](repeating: 0x46, count: 1 << 16)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            #expect(errno == ENOSPC)
            close(fd)
            let contents = (0..<5).map { Array("file \($0)".utf8) }
            for (index, bytes) in contents.enumerated() { try harness.drop("f\(index).txt", bytes) }
            try await harness.daemon?.waitForLog("cannot queue files; they stay in the spool")
            let report = try await harness.ctl("status", "--json").json()
            let problem = try #require((report["spools"] as? [[String: Any]])?.first?["problem"] as? [String: Any], "\(report)")
            #expect((problem["message"] as? String)?.hasPrefix("cannot queue files:") == true, "\(problem)")
            let human = try await harness.ctl("status")
            #expect(human.stdout.contains("problem in test: cannot queue files:") && human.stdout.contains("files wait in the spool"), "\(human)")
            for index in contents.indices { #expect(fileExists(harness.spoolPath() + "/f\(index).txt")) }

            #expect(unlink(filler) == 0)
            try await harness.waitForAccepted(contents.count, timeout: .seconds(20))
            let received = Set(harness.receiver.acceptedRequests.compactMap { $0.files.first.map { [$0.filename, $0.sha256] } })
            #expect(received == Set(contents.enumerated().map { ["f\($0.offset).txt", sha256Hex($0.element)] }))
            try await harness.waitForQuiet()
            #expect((try await harness.ctl("status", "--json").json()["spools"] as? [[String: Any]])?.first?["problem"] == nil)
        }
    }

    @Test("A 2xx that arrives while the queue cannot be written is recorded once space returns; the file is sent once and then deleted")
    func successWhileFull() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        // A raw PUT builds no body file, so the disk stays full after the answer.
        try await successWhileFull(TestSpool(options: ["protocol = \"put\""])) { harness, source, filler in
            try await harness.daemon?.waitForLog("cannot record a job's outcome in the queue; retrying")
            #expect(fileExists(source), "the file stays until its success is on record")
            let health = try await harness.ctl("health", "--json").json()
            #expect(health["status"] as? String == "degraded", "\(health)")
            #expect((health["problems"] as? [String])?.contains { $0.contains("cannot record an upload's outcome in the queue") } == true, "\(health)")
            #expect(unlink(filler) == 0)
            try await waitUntil("health to be ok again") { try await harness.ctl("health", "--json").json()["status"] as? String == "ok" }
        }
    }

    @Test("A multipart body file is removed as soon as the answer is in, so a 2xx is recorded on a state directory the body had filled")
    func bodyFreesTheSpace() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        try await successWhileFull(TestSpool()) { harness, _, _ in
            try await harness.waitForQuiet()
            #expect(harness.daemon?.log.contains("cannot record a job's outcome") == false, "the body's space was enough for the record")
        }
    }

    @Test("After kill -9 on a full state directory, start-up removes the leftover body before it writes, and comes up")
    func restartOnFullDisk() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.index == 0 ? .stall(afterBytes: 64 * 1024) : .store() }
        try await withSmallStateDirectory(plan: plan) { harness, state in
            try await harness.start()
            let bytes = pseudoRandomBytes(4 << 20, seed: 34)
            let source = try harness.drop("scan.tiff", bytes)
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            try await harness.kill9()
            let filler = state + "/filler"
            let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            let chunk = [UInt8](repeating: 0x46, count: 1 << 16)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            close(fd)
            // Recovery writes (the interrupted upload goes back to the queue): the body's space lets it.
            try await harness.start()
            try await harness.daemon?.waitForLog("recovered from the previous run")
            #expect(harness.daemon?.log.contains("removed_bodies=1") == true, "\(harness.daemon?.log ?? "")")
            #expect(fileExists(source))
            #expect(unlink(filler) == 0)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(bytes))
            #expect(!fileExists(source))
        }
    }

    @Test("A tus upload whose new offset cannot be recorded (the state directory full) is retried, not left uploading: it is delivered once space returns, without a restart")
    func tusOffsetWhileFull() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        let directory = try TemporaryDirectory("ferry-tus")
        let server = try await TusServer.start(filesDirectory: directory.url("files"))
        // 1 MiB appends at 1 MiB/s: an offset is recorded about every second.
        let spool = TestSpool(options: ["protocol = \"tus\"", "chunk_size = \"1MiB\"", "bandwidth_limit = \"1MiB/s\""],
                              retry: ["initial_delay = \"200ms\"", "max_delay = \"1s\""])
        do {
            try await withDaemonHarness(spools: [spool], url: server.url + "/") { harness in
                let state = try harness.directory.makeDirectory("state")
                try await mountTmpfs(state, megabytes: 16, in: harness.directory)
                defer { unmount(state) }
                do {
                    try await harness.start()
                    let bytes = pseudoRandomBytes(8 << 20, seed: 35)
                    let source = try harness.drop("footage.mov", bytes)
                    try await waitUntil("an offset recorded", timeout: .seconds(60)) {
                        (try await jobs(harness).first?.upload?.offset ?? 0) >= 1 << 20
                    }
                    let filler = state + "/filler"
                    let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
                    let chunk = [UInt8](repeating: 0x46, count: 1 << 16)
                    while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
                    close(fd)
                    // The new offset is not recorded: the attempt ends as a local failure, whose own record
                    // waits for space (before, the sender's error left the job `uploading` until a restart).
                    try await harness.daemon?.waitForLog("cannot record a job's outcome in the queue; retrying")
                    #expect(unlink(filler) == 0)
                    try await waitUntil("the file delivered", timeout: .seconds(60)) { try await jobs(harness).first?.state == .done }
                    try await harness.waitForQuiet()
                    let stats = try await server.stats()
                    #expect(stats.completed.map(\.sha256) == [sha256Hex(bytes)])
                    // The upload made before the disk filled goes on: one creation, no byte sent twice.
                    #expect(stats.counts["POST"] == 1, "\(stats.counts)")
                    #expect(stats.patchBytes == bytes.count, "\(stats.patchBytes) PATCH bytes for \(bytes.count)")
                    #expect(!fileExists(source))
                    #expect(harness.daemon?.log.contains("cannot record the job's state in the queue database") == false)
                    #expect(harness.daemon?.log.contains("cannot record the upload's progress in the queue") == true)
                    await harness.shutdown()
                } catch {
                    await harness.shutdown()
                    throw TestFailure("\(error)\n--- tus server ---\n\(server.log)\n--- ferryd ---\n\(harness.daemon?.log ?? "")")
                }
            }
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    @Test("SIGTERM while the record of an operator's cancel waits for space: ferryd still stops soon after shutdown_timeout, and the file stays")
    func stopWhileCancelRecordWaits() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store() }
        // put: no request body file in the state directory, whose removal would free the space.
        try await withSmallStateDirectory(
            spools: [TestSpool(options: ["protocol = \"put\""])], topLevel: ["shutdown_timeout = \"1s\""], plan: plan
        ) { harness, state in
            try await harness.start()
            let source = try harness.drop("report.pdf", pseudoRandomBytes(2 << 20, seed: 36))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let id = try #require(try await jobs(harness).first).id.rawValue
            let filler = state + "/filler"
            let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            let chunk = [UInt8](repeating: 0x46, count: 1 << 16)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            close(fd)
            // The cancel stops the upload; its record cannot be written, and is retried past the cancel.
            _ = try await harness.ctl("cancel", id)
            try await harness.daemon?.waitForLog("cannot record a job's outcome in the queue; retrying")
            let stopping = ContinuousClock.now
            let status = try await harness.daemon?.stop(timeout: .seconds(60))
            let elapsed = ContinuousClock.now - stopping
            #expect(status == 0)
            #expect(elapsed < .seconds(10), "exit took \(elapsed) with shutdown_timeout = 1s")
            #expect(fileExists(source), "the file stays in the spool until a cancel is on record")
            gate.open()
            #expect(unlink(filler) == 0)
        }
    }

    @Test("A state directory too full to create the queue stops ferryd with exit 73 and what to do")
    func fullAtFirstStart() async throws {
        guard getuid() == 0 else {
            Issue.record("this test mounts a tmpfs for state_directory and needs root (make test runs as root in CI)")
            return
        }
        try await withSmallStateDirectory { harness, state in
            let filler = state + "/filler"
            let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            let chunk = [UInt8](repeating: 0x46, count: 1 << 16)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            close(fd)
            let child = try ChildProcess(executable: try BuiltProducts.path("ferryd"), arguments: ["--config", harness.configPath],
                                         logPath: harness.logPath)
            let status = try await child.waitForExit()
            #expect(status == 73, "\(child.log)")
            #expect(child.log.contains("is full; free space there"), "\(child.log)")
        }
    }

    /// A 2 MiB upload whose answer waits until the state directory is full; `afterAnswer` runs once the
    /// server has accepted it, given the spool file and the filler that fills the disk.
    private func successWhileFull(
        _ spool: TestSpool, afterAnswer: (DaemonHarness, String, String) async throws -> Void
    ) async throws {
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store() }
        try await withSmallStateDirectory(spools: [spool], plan: plan) { harness, state in
            try await harness.start()
            let bytes = pseudoRandomBytes(2 << 20, seed: 33)
            let source = try harness.drop("report.pdf", bytes)
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            // Any body is on disk already; now nothing more fits, not even the queue's next commit.
            let filler = state + "/filler"
            let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            let chunk = [UInt8](repeating: 0x46, count: 1 << 16)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
            close(fd)
            gate.open()
            try await harness.waitForAccepted(1)
            try await afterAnswer(harness, source, filler)
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .done && job.attempts == 1 && job.disposition == .deleted)
            #expect(!fileExists(source))
            #expect(harness.receiver.requests.count == 1, "sent once")
            #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(bytes))
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: state + "/bodies")) ?? ["?"]).isEmpty)
        }
    }

    /// Runs `body` with a harness whose state directory is a 16 MiB tmpfs, unmounted afterwards.
    private func withSmallStateDirectory(
        spools: [TestSpool] = [TestSpool()], topLevel: [String] = [], plan: (@Sendable (RequestInfo) -> ReceiverAction)? = nil,
        _ body: (DaemonHarness, String) async throws -> Void
    ) async throws {
        try await withDaemonHarness(spools: spools, topLevel: topLevel, plan: plan) { harness in
            let state = try harness.directory.makeDirectory("state")
            try await mountTmpfs(state, megabytes: 16, in: harness.directory)
            do {
                try await body(harness, state)
            } catch {
                await harness.shutdown()
                unmount(state)
                throw error
            }
            await harness.shutdown()
            unmount(state)
        }
    }

    private func fillAndRecover(_ harness: DaemonHarness, state: String) async throws {
        try await harness.start()
        // Leave 1 MiB: room for the queue's writes and small bodies, not for a 4 MiB one.
        let filler = state + "/filler"
        let fillerSize = freeBytes(state) - (1 << 20)
        #expect(fillerSize > 0)
        let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        #expect(fd >= 0)
        #expect(posix_fallocate(fd, 0, off_t(fillerSize)) == 0)
        close(fd)

        let big = pseudoRandomBytes(4 << 20, seed: 31)
        let small = pseudoRandomBytes(100_000, seed: 32)
        try harness.drop("big.bin", big)
        try await harness.daemon?.waitForLog("No space left on device")
        try harness.drop("small.bin", small)
        try await harness.waitForAccepted(1)
        #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(small), "a body that fits still goes out")

        // The big one waits: queued, no attempt used, its body gone, the spool file in place.
        try await harness.daemon?.waitForLog("cannot prepare the upload; will try again")
        let waiting = try #require(try await jobs(harness).first { $0.displayPath == "big.bin" })
        #expect(waiting.state == .queued || waiting.state == .uploading)
        #expect(waiting.attempts == 0)
        #expect(fileExists(harness.spoolPath() + "/big.bin"))
        // status shows the problem, in JSON and for people.
        let report = try await harness.ctl("status", "--json").json()
        let spool = try #require((report["spools"] as? [[String: Any]])?.first)
        let problem = try #require(spool["problem"] as? [String: Any], "status --json has no problem for the spool: \(report)")
        #expect((problem["message"] as? String)?.contains("No space left on device") == true)
        #expect(problem["jobs"] as? Int == 1)
        #expect(problem["since"] is String && problem["last_seen_at"] is String)
        let human = try await harness.ctl("status")
        #expect(human.stdout.contains("problem in test: cannot build the request body:") && human.stdout.contains("No space left on device")
                && human.stdout.contains("1 job waiting, tried again until max_age"), "\(human)")
        let bodies = try FileManager.default.contentsOfDirectory(atPath: state + "/bodies")
        #expect(bodies.isEmpty, "a failed build leaves no partial body: \(bodies)")
        // It keeps trying (every 0.5–1 s with this spool's max_delay); health says degraded meanwhile.
        try await waitUntil("three tries in the full disk\n\(harness.daemon?.log ?? "")") {
            (harness.daemon?.log.components(separatedBy: "cannot prepare the upload; will try again").count ?? 0) > 3
        }
        let health = try await harness.ctl("health", "--json").json()
        #expect(health["status"] as? String == "degraded", "\(health)")
        #expect((health["problems"] as? [String])?.contains { $0.contains("No space left on device") } == true, "\(health)")

        // Space returns: the big file goes out whole, and the problem is gone.
        #expect(unlink(filler) == 0)
        try await harness.waitForAccepted(2, timeout: .seconds(20))
        try await harness.waitForQuiet()
        let delivered = try #require(harness.receiver.acceptedRequests.last?.files.first)
        #expect(delivered.filename == "big.bin" && delivered.sha256 == sha256Hex(big))
        let done = try #require(try await jobs(harness).first { $0.displayPath == "big.bin" })
        #expect(done.state == .done && done.attempts == 1, "the local failures did not use up attempts")
        let rows = try await attempts(harness, done)
        #expect(rows.filter { $0.outcome == .interrupted }.count == 1, "one row for the episode of local trouble, not one per try: \(rows.map(\.outcome))")
        #expect(harness.receiver.requests.count == 2, "nothing was sent twice or half")
        let after = try await harness.ctl("status", "--json").json()
        #expect((after["spools"] as? [[String: Any]])?.first?["problem"] == nil, "the problem clears once a body is built")
        try await harness.daemon?.waitForLog("uploads can be prepared again")
        #expect(!fileExists(harness.spoolPath() + "/big.bin") && !fileExists(harness.spoolPath() + "/small.bin"))
    }
}

