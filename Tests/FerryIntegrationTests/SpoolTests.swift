import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Spool watching", .serialized)
struct SpoolTests {
    @Test("Symlinks are never followed: not uploaded, not deleted, their target untouched")
    func symlinks() async throws {
        try await withDaemonHarness { harness in
            let outside = try harness.directory.makeDirectory("outside")
            let secret = outside + "/secret.txt"
            try "do not upload".write(toFile: secret, atomically: true, encoding: .utf8)
            // One link present at start (found by the scan), one created while running (found by inotify).
            symlink(secret, harness.spoolPath() + "/at-start.txt")
            try await harness.start()
            symlink(secret, harness.spoolPath() + "/while-running.txt")
            symlink(outside, harness.spoolPath() + "/linked-dir")
            // A real file dropped after the links proves the daemon has seen the links' events.
            try harness.drop("sentinel.txt", Array("ok".utf8))
            try await harness.waitForAccepted(1)
            try await harness.daemon?.waitForLog("while-running.txt")
            #expect(harness.receiver.requests.count == 1)
            #expect(harness.receiver.requests.first?.files.first?.filename == "sentinel.txt")
            #expect(fileExists(harness.spoolPath() + "/at-start.txt"))
            #expect(fileExists(harness.spoolPath() + "/while-running.txt"))
            #expect(try String(contentsOfFile: secret, encoding: .utf8) == "do not upload")
            let log = harness.daemon?.log ?? ""
            #expect(log.contains("skipping a symlink (symlinks are never followed)"))
            #expect(log.contains("file=at-start.txt"))
        }
    }

    @Test("Dot-files, .tmp and .part in any case, backups, Office owner files, FIFOs and subdirectories are ignored")
    func ignored() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let spool = harness.spoolPath()
            let temporary = [".hidden", "upload.tmp", "upload.part", "notes.txt~", "~DF1234.TMP", "scan.Part", "~$report.docx"]
            for name in temporary {
                _ = FileManager.default.createFile(atPath: spool + "/" + name, contents: Data("x".utf8))
            }
            try FileManager.default.createDirectory(atPath: spool + "/sub", withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: spool + "/sub/inner.txt", contents: Data("x".utf8))
            mkfifo(spool + "/pipe", 0o644)
            try harness.drop("sentinel.txt", Array("ok".utf8))
            try await harness.waitForAccepted(1)
            try await harness.daemon?.waitForLog("file=pipe")
            #expect(harness.receiver.requests.count == 1)
            for name in temporary + ["sub/inner.txt", "pipe"] {
                #expect(fileExists(spool + "/" + name), "\(name) must be left alone")
            }
            #expect(harness.daemon?.log.contains("skipping not a regular file") == true)
        }
    }

    @Test("A file written in place is taken only once it has settled, whole")
    func settle() async throws {
        let spool = TestSpool(options: ["settle = \"3s\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let path = harness.spoolPath() + "/growing.log"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            #expect(fd >= 0)
            var written: [UInt8] = []
            // A slow writer: a chunk every 250 ms for 4 s, longer than `settle` in all but never idle for it
            // (a pause of the test process shorter than 3 s changes nothing).
            for index in 0..<16 {
                let chunk = pseudoRandomBytes(64 * 1024, seed: UInt64(index))
                _ = chunk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                written += chunk
                try await Task.sleep(for: .milliseconds(250))  // the scenario: a slow producer, not synchronisation
            }
            close(fd)
            // Settling counts from the last change: the file's mtime, not when the test got round to closing it.
            let lastWrite = try #require(try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
            try await harness.waitForAccepted(1)
            let request = try #require(harness.receiver.acceptedRequests.first)
            #expect(request.files.first?.sha256 == sha256Hex(written), "the whole file, not a prefix")
            #expect(request.receivedAt.timeIntervalSince(lastWrite) >= 2.9, "taken before it settled (3 s after its last write)")
            #expect(harness.receiver.requests.count == 1)
        }
    }

    @Test("Recursive spools take subdirectories, including ones made later, and keep the structure when moving")
    func recursive() async throws {
        let spool = TestSpool(options: ["recursive = true", "after_upload = \"move\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            let spoolPath = harness.spoolPath()
            try FileManager.default.createDirectory(atPath: spoolPath + "/early/deep", withIntermediateDirectories: true)
            try dropFile(Array("a".utf8), at: spoolPath + "/early/deep/a.txt")
            try await harness.start()
            try FileManager.default.createDirectory(atPath: spoolPath + "/late", withIntermediateDirectories: true)
            try dropFile(Array("b".utf8), at: spoolPath + "/late/b.txt")
            try await harness.waitForAccepted(2)
            try await harness.waitForQuiet()
            #expect(fileExists(spoolPath + "/.sent/early/deep/a.txt"))
            #expect(fileExists(spoolPath + "/.sent/late/b.txt"))
            let paths = Set(try await jobs(harness).map(\.displayPath))
            #expect(paths == ["early/deep/a.txt", "late/b.txt"])
        }
    }

    @Test("after_upload = keep leaves the file and never uploads it again, even after a restart")
    func keep() async throws {
        let spool = TestSpool(options: ["after_upload = \"keep\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            try harness.drop("report.csv", Array("a,b\n".utf8))
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            #expect(fileExists(harness.spoolPath() + "/report.csv"))
            _ = try await harness.daemon?.stop()
            try await harness.start()  // `ready` comes after the first full scan
            try harness.drop("sentinel.csv", Array("s".utf8))
            try await harness.waitForAccepted(2)
            #expect(harness.receiver.requests.count == 2)
            // A changed file is a new version and is uploaded again.
            try harness.drop("report.csv", Array("a,b\n1,2\n".utf8))
            try await harness.waitForAccepted(3)
            #expect(harness.receiver.acceptedRequests.last?.files.first?.sha256 == sha256Hex(Array("a,b\n1,2\n".utf8)))
        }
    }

    @Test("after_upload = move puts the file in sent_directory without replacing an older one")
    func move() async throws {
        let spool = TestSpool(options: ["after_upload = \"move\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            try harness.drop("scan.pdf", Array("first".utf8))
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            try harness.drop("scan.pdf", Array("second".utf8))
            try await harness.waitForAccepted(2)
            try await waitUntil("the second file to be moved") { fileExists(harness.spoolPath() + "/.sent/scan.1.pdf") }
            #expect(try String(contentsOfFile: harness.spoolPath() + "/.sent/scan.pdf", encoding: .utf8) == "first")
            #expect(try String(contentsOfFile: harness.spoolPath() + "/.sent/scan.1.pdf", encoding: .utf8) == "second")
        }
    }

    @Test("A spool directory that does not exist yet is created")
    func missingSpool() async throws {
        try await withDaemonHarness { harness in
            try FileManager.default.removeItem(atPath: harness.spoolPath())
            try await harness.start()
            #expect(fileExists(harness.spoolPath()))
            try harness.drop("late.txt", Array("x".utf8))
            try await harness.waitForAccepted(1)
        }
    }
}

@Suite("Spool safety", .serialized)
struct SpoolSafetyTests {
    @Test("A .failed symlink planted by a producer is never followed; the file stays in plain sight")
    func plantedFailedDirectory() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .respond(status: 400, body: "no") }
        try await withDaemonHarness(plan: plan) { harness in
            let outside = try harness.directory.makeDirectory("elsewhere")
            symlink(outside, harness.spoolPath() + "/.failed")
            try await harness.start()
            try harness.drop("report.pdf", Array("pdf".utf8))
            try await harness.daemon?.waitForLog("cannot dispose of the file; will try again")
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty, "nothing written through the symlink")
            #expect(fileExists(harness.spoolPath() + "/report.pdf"), "the file is left where the user can see it")
            #expect(harness.daemon?.log.contains(".failed: it is a symlink, which Ferry never follows") == true, "\(harness.daemon?.log ?? "")")
        }
    }

    @Test("A file waiting for a retry keeps no copy of itself in the state directory")
    func retryingHoldsNoBody() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .respond(status: 503, headers: [HeaderField(name: "Retry-After", value: "3600")]) }
        let spool = TestSpool(retry: ["initial_delay = \"1s\"", "max_delay = \"1h\"", "max_age = \"2h\""])
        try await withDaemonHarness(spools: [spool], plan: plan) { harness in
            try await harness.start()
            try harness.drop("big.bin", pseudoRandomBytes(2 << 20, seed: 1))
            try await waitUntil("the job to be waiting for its retry") {
                try await jobs(harness).first?.state == .retrying
            }
            let bodies = try FileManager.default.contentsOfDirectory(atPath: harness.directory.url("state/bodies"))
            #expect(bodies.isEmpty, "left in bodies/: \(bodies)")
        }
    }
}
