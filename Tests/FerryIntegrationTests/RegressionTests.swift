import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Creates a file whose name is raw bytes (not necessarily UTF-8) under `directory`, by rename.
func dropRawName(_ name: [UInt8], _ bytes: [UInt8], in directory: String) throws {
    let temporary = directory + "/.incoming-raw"
    try Data(bytes).write(to: URL(fileURLWithPath: temporary))
    let target = Array(directory.utf8) + [UInt8(ascii: "/")] + name + [0]
    let result = target.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { rename(temporary, $0.baseAddress!) }
    }
    guard result == 0 else { throw TestFailure("rename failed: \(String(cString: strerror(errno)))") }
}

/// The raw names in `directory`.
func rawNames(_ directory: String) -> [[UInt8]] {
    guard let dir = opendir(directory) else { return [] }
    defer { closedir(dir) }
    var names: [[UInt8]] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
        if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
    }
    return names
}

@Suite("Regressions found by review and black-box testing", .serialized)
struct RegressionTests {
    @Test("Content that changed after an attempt goes out as a new job with a new Idempotency-Key")
    func changedContentGetsNewKey() async throws {
        // Retry-After 3 s: the new version is dropped well before the retry, even on a loaded machine.
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.index == 0 ? .respond(status: 503, headers: [HeaderField(name: "Retry-After", value: "3")]) : .store()
        }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            let first = Array("version 1".utf8)
            let second = Array("version 2, corrected".utf8)
            try harness.drop("report.csv", first)
            try await waitUntil("the first attempt to be answered") { harness.receiver.requests.first?.status == 503 }
            try harness.drop("report.csv", second)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let accepted = try #require(harness.receiver.acceptedRequests.first)
            #expect(accepted.files.first?.sha256 == sha256Hex(second))
            #expect(accepted.idempotencyKey != harness.receiver.requests[0].idempotencyKey)
            let all = try await jobs(harness)
            #expect(Set(all.map(\.state)) == [.superseded, .done])
            let old = try #require(all.first { $0.state == .superseded })
            let new = try #require(all.first { $0.state == .done })
            #expect(old.lastError?.contains(new.id.rawValue) == true)
            #expect(accepted.idempotencyKey == new.id.rawValue)
        }
    }

    @Test("A sidecar never replaces a file already in the failed directory")
    func sidecarNeverOverwrites() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .respond(status: 400) }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            try harness.drop("report.error.json", Array("PRECIOUS".utf8))
            try await harness.waitForQuiet()
            try harness.drop("report", Array("other".utf8))
            try await waitUntil("both files to be moved aside") {
                let all = try await jobs(harness)
                return all.count == 2 && all.allSatisfy { $0.disposedAt != nil }
            }
            let failed = harness.spoolPath() + "/.failed"
            #expect(try String(contentsOfFile: failed + "/report.error.json", encoding: .utf8) == "PRECIOUS")
            #expect(try String(contentsOfFile: failed + "/report.1", encoding: .utf8) == "other")
            #expect(fileExists(failed + "/report.1.error.json"))
            #expect(fileExists(failed + "/report.error.json.error.json"))
        }
    }

    @Test("Names that are not UTF-8, or 250 bytes long, are delivered and moved aside without collisions")
    func rawAndLongNames() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .respond(status: 400) }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            let long = Array(String(repeating: "y", count: 246).utf8) + Array(".bin".utf8)
            let names: [[UInt8]] = [[0xFF] + Array(".bin".utf8), [0xFE] + Array(".bin".utf8), Array("\u{FFFD}.bin".utf8), long]
            for (index, name) in names.enumerated() {
                try dropRawName(name, Array("file \(index)".utf8), in: harness.spoolPath())
            }
            try await waitUntil("\(names.count) files moved aside") {
                let all = try await jobs(harness)
                return all.count == names.count && all.allSatisfy { $0.disposedAt != nil }
            }
            let failed = rawNames(harness.spoolPath() + "/.failed")
            for name in names {
                #expect(failed.contains(name), "\(name) was not moved")
                let sidecar = name.count + 11 > 255 ? Array(name.prefix(244)) + Array(".error.json".utf8) : name + Array(".error.json".utf8)
                #expect(failed.contains(sidecar), "no sidecar for \(name)")
            }
            for job in try await jobs(harness) {
                #expect(job.disposition == .moved)
                let path = try #require(job.finalPath)
                var st = stat()
                let exists = (path + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { lstat($0.baseAddress!, &st) } } == 0
                #expect(exists, "final_path points at a file that exists")
            }
            // logfmt quotes the value and escapes its backslash.
            #expect(harness.daemon?.log.contains(#"file="\\xFF.bin""#) == true)
        }
    }

    @Test("A subdirectory whose name is not UTF-8 is watched: a file renamed into it is sent at once, not at the next rescan")
    func nonUTF8SubdirectoryWatched() async throws {
        try await withDaemonHarness(spools: [TestSpool(options: ["recursive = true"])], topLevel: ["rescan_interval = \"1h\""]) { harness in
            try await harness.start()
            let directory: [UInt8] = [0x64, 0xFF]  // "d\xFF"
            let made = (Array(harness.spoolPath().utf8) + [UInt8(ascii: "/")] + directory + [0]).withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o755) }
            }
            #expect(made == 0)
            // The first file is found by the look at the new directory; the second only by its watch.
            try dropRawName(directory + Array("/first.bin".utf8), Array("one".utf8), in: harness.spoolPath())
            try await harness.waitForAccepted(1)
            try dropRawName(directory + Array("/second.bin".utf8), Array("two".utf8), in: harness.spoolPath())
            try await harness.waitForAccepted(2)
            #expect(harness.daemon?.log.contains("cannot watch a subdirectory") == false)
        }
    }

    @Test("A directory tree moved out of a recursive spool leaves no inotify watches behind (they count against max_user_watches)")
    func movedOutTreeUnwatched() async throws {
        try await withDaemonHarness(spools: [TestSpool(options: ["recursive = true"])], topLevel: ["rescan_interval = \"1h\""]) { harness in
            try await harness.start()
            let pid = try #require(harness.daemon?.child.pid)
            /// The inotify watches ferryd holds, from its descriptors' fdinfo.
            func watchCount() -> Int {
                let fdinfo = "/proc/\(pid)/fdinfo"
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: fdinfo)) ?? []
                return entries.reduce(0) { count, fd in
                    let text = (try? String(contentsOfFile: fdinfo + "/" + fd, encoding: .utf8)) ?? ""
                    return count + text.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
                }
            }
            let before = watchCount()
            try FileManager.default.createDirectory(atPath: harness.spoolPath() + "/a/b/c", withIntermediateDirectories: true)
            try harness.drop("a/b/c/deep.bin", Array("deep".utf8))
            try await harness.waitForAccepted(1)
            try await waitUntil("three more watches (have \(watchCount()), had \(before))") { watchCount() == before + 3 }
            try FileManager.default.moveItem(atPath: harness.spoolPath() + "/a", toPath: harness.directory.url("archived"))
            try await waitUntil("the watches of the moved tree to go (have \(watchCount()), had \(before))") { watchCount() == before }
        }
    }

    @Test("A spool directory that is itself a symlink is watched")
    func symlinkedSpoolRoot() async throws {
        try await withDaemonHarness(topLevel: ["rescan_interval = \"1h\""]) { harness in
            let real = try harness.directory.makeDirectory("real-spool")
            try FileManager.default.removeItem(atPath: harness.spoolPath())
            symlink(real, harness.spoolPath())
            try await harness.start()
            try dropFile(Array("x".utf8), at: real + "/via-symlink.txt")
            try await harness.waitForAccepted(1, timeout: .seconds(20))
            #expect(harness.daemon?.log.contains("cannot watch") == false)
        }
    }

    @Test("In a recursive spool, renamed and re-created subdirectories stay watched")
    func recursiveRename() async throws {
        let spool = TestSpool(options: ["recursive = true"])
        try await withDaemonHarness(spools: [spool], topLevel: ["rescan_interval = \"1h\""]) { harness in
            let root = harness.spoolPath()
            try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
            try await harness.start()
            #expect(rename(root + "/sub", root + "/sub2") == 0)
            try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
            try dropFile(Array("a".utf8), at: root + "/sub2/a.txt")
            try dropFile(Array("c".utf8), at: root + "/sub/c.txt")
            try await harness.waitForAccepted(2, timeout: .seconds(20))
            let paths = Set(try await jobs(harness).map(\.displayPath))
            #expect(paths == ["sub2/a.txt", "sub/c.txt"])
        }
    }

    @Test("SIGHUP reloads the configuration and does not stop the daemon")
    func hangup() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            try ("max_concurrent_uploads = 3\n" + original).write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            harness.daemon?.child.send(SIGHUP)
            try await harness.daemon?.waitForLog("msg=\"configuration reloaded\"")
            #expect(harness.daemon?.log.contains("max_concurrent_uploads = 3") == true)
            try harness.drop("after-hup.txt", Array("x".utf8))
            try await harness.waitForAccepted(1)
        }
    }

    @Test("user:password in the URL becomes HTTP Basic authentication")
    func urlCredentials() async throws {
        try await withDaemonHarness { harness in
            let plain = harness.receiver.url(path: "/upload/test")
            let withCredentials = plain.replacingOccurrences(of: "http://", with: "http://alice:s%3Acret@")
            let config = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            try config.replacingOccurrences(of: plain, with: withCredentials).write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            try await harness.start()
            try harness.drop("a.txt", Array("x".utf8))
            try await harness.waitForAccepted(1)
            let request = try #require(harness.receiver.acceptedRequests.first)
            #expect(request.header("Authorization") == "Basic " + Data("alice:s:cret".utf8).base64EncodedString())
            #expect(harness.daemon?.log.contains("s:cret") == false)
            #expect(harness.daemon?.log.contains("s%3Acret") == false)
        }
    }
}
