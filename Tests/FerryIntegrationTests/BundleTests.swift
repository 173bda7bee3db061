import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Reads a failed file's or bundle's `<name>.error.json`.
func errorReport(_ path: String) throws -> [String: Any] {
    let bytes = try #require(FileManager.default.contents(atPath: path), "no \(path)")
    return try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any], "\(path) is not a JSON object")
}

/// Runs `executable` with `arguments`, output discarded; returns its exit status.
func runProcess(_ executable: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// Whether `filename` as a parser handed it back is `name`: python-multipart returns the parameter
/// as sent (a double quote as `%22`, the browsers' escaping); Werkzeug and Ferry's receiver reverse it.
func isSentName(_ filename: String?, of name: String) -> Bool {
    filename == name || filename == name.replacingOccurrences(of: "\"", with: "%22")
}

/// `bundles = true` (issue 21): a directory renamed into the spool is one job, sent as one
/// multipart request with each of its files as a part, and disposed of as a whole.
@Suite("Bundles: several files, one request", .serialized)
struct BundleTests {
    /// Three files whose names need care in a `filename=` parameter (a double quote, a semicolon, a
    /// space, a backslash, non-ASCII and an emoji), listed out of order: their byte order is
    /// Z (0x5A) < b (0x62) < é (0xC3), not the order a locale would sort them in.
    static let trickyFiles: [TestBundleFile] = [
        TestBundleFile("émoji 📎 résumé.pdf", pseudoRandomBytes(70_000, seed: 2101) + Array("\r\n--\r\n".utf8)),
        TestBundleFile("Zeta \"quoted\"; name=x.txt", pseudoRandomBytes((1 << 20) + 3, seed: 2102) + Array("\r\n--".utf8)),
        TestBundleFile("back\\slash.bin", Array("--\r\nsmall\r\n".utf8)),
    ]

    /// The bundle's sidecar: a title with quotes and emoji, a spool field overridden, a repeated field.
    static let trickySidecar = """
        title = "Q3 \\"report\\" ☃ 📎"
        source = "the bundle's own"
        tags = ["first", "second; with \\"quotes\\""]
        """

    static let trickySpool = TestSpool(
        options: ["bundles = true", "bundle_file_field = \"files[]\""],
        fields: ["source = \"scanner 7\"", "job = \"{id}\"", "note = \"spool ☃\""])

    /// A producer's `mkdir` under umask 022 in the shared (setgid, group-writable) spool makes a
    /// directory ferryd may upload but never delete or move: it is not sent at all. Root can write
    /// anywhere, so the test makes the directory immutable (`chattr +i`), which root cannot write either.
    @Test("A bundle directory ferryd could not delete or move afterwards is not sent, and the log says why; once writable it is")
    func unwritableBundle() async throws {
        // The bundle must be made immutable before it settles: with 200 ms, a `chattr` slow to start
        // on a loaded machine let it be queued and sent first (the test then failed, once).
        let spool = TestSpool(options: ["bundles = true", "settle = \"2s\""])
        try await withDaemonHarness(spools: [spool], topLevel: ["rescan_interval = \"1s\""]) { harness in
            try await harness.start()
            let bundle = harness.spoolPath() + "/doc-0042"
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: false)
            try Data(pseudoRandomBytes(3000, seed: 2120)).write(to: URL(fileURLWithPath: bundle + "/page-1.tif"))
            let immutable = try runProcess("/usr/bin/chattr", ["+i", bundle])
            try #require(immutable == 0, "chattr +i (ext4, root) is needed for this test")
            defer { _ = try? runProcess("/usr/bin/chattr", ["-i", bundle]) }
            try await waitUntil("the refusal in the log\n\(harness.daemon?.log ?? "")") {
                harness.daemon?.log.contains("not sending a bundle ferryd could not delete or move afterwards") == true
            }
            #expect(try await jobs(harness).isEmpty, "not queued")
            #expect(harness.receiver.requests.isEmpty)
            _ = try runProcess("/usr/bin/chattr", ["-i", bundle])
            _ = try await waitForState(harness, .done)
            try await waitUntil("the bundle to be deleted") { !fileExists(bundle) }
            #expect(harness.receiver.requests.count == 1)
        }
    }

    /// `cp -p`, `tar x`, `unzip` give each file its old mtime once it is written: a bundle made in
    /// place can look unchanged for ages between two of its files. It settles only by being watched.
    @Test("A bundle made in place whose files and directory carry old times is taken only after settle unchanged: a file added a second later is in the request")
    func oldTimesInPlace() async throws {
        let spool = TestSpool(options: ["bundles = true", "settle = \"3s\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let bundle = harness.spoolPath() + "/scan-7"
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: false)
            let old = Date(timeIntervalSince1970: 1_600_000_000)
            try Data("page one".utf8).write(to: URL(fileURLWithPath: bundle + "/page-1.txt"))
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: bundle + "/page-1.txt")
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: bundle)
            // The producer pauses (four of the watcher's looks), then writes the next file, as `tar x` would.
            try await Task.sleep(for: .seconds(1))
            try Data("page two".utf8).write(to: URL(fileURLWithPath: bundle + "/page-2.txt"))
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: bundle + "/page-2.txt")
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: bundle)
            _ = try await waitForState(harness, .done)
            try await waitUntil("the bundle to be deleted") { !fileExists(bundle) }
            #expect(harness.receiver.requests.count == 1)
            #expect(harness.receiver.requests.first?.files.compactMap(\.filename).sorted() == ["page-1.txt", "page-2.txt"])
        }
    }

    /// A producer's `mkdir` under umask 077: ferryd (not root) cannot list the bundle.
    @Test("A bundle directory ferryd cannot read is not sent, and the log says why; once readable it is",
          .enabled(if: getuid() == 0, "runs ferryd as nobody through setpriv, which needs root"))
    func unreadableBundle() async throws {
        let spool = TestSpool(options: ["bundles = true", "settle = \"200ms\""])
        try await withDaemonHarness(spools: [spool], topLevel: ["rescan_interval = \"1s\""]) { harness in
            let child = try await startFerrydAsNobody(harness)
            do {
                // Made by root with mode 0700, then renamed in.
                let staged = harness.directory.url("doc-0077")
                try FileManager.default.createDirectory(atPath: staged, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                try Data("private page".utf8).write(to: URL(fileURLWithPath: staged + "/page.txt"))
                let bundle = harness.spoolPath() + "/doc-0077"
                #expect(rename(staged, bundle) == 0)
                try await waitUntil("the refusal in the log\n\(child.log)") { child.log.contains("not sending a bundle ferryd cannot read") }
                #expect(try await jobs(harness).isEmpty, "not queued")
                #expect(child.log.components(separatedBy: "not sending a bundle ferryd cannot read").count == 2, "said once, not at every rescan")
                for path in [bundle, bundle + "/page.txt"] { chown(path, 65534, 65534) }
                try await waitForDisposed(harness, count: 1, log: child.log)
                #expect(harness.receiver.acceptedRequests.first?.files.compactMap(\.filename) == ["page.txt"])
            } catch {
                await stopChild(child)
                throw error
            }
            await stopChild(child)
        }
    }

    @Test("A bundle of three tricky names arrives as ONE request with three parts in byte order of names, byte-exact, with the spool's and the bundle's fields; then it is deleted",
          arguments: [PythonReceiver.Parser.werkzeug, .pythonMultipart])
    func oneRequest(parser: PythonReceiver.Parser) async throws {
        let directory = try TemporaryDirectory()
        let server = try await PythonReceiver(parser: parser, directory: directory.url("python"))
        try await withDaemonHarness(spools: [Self.trickySpool], url: server.url + "/upload") { harness in
            try await harness.start()
            let bundle = harness.spoolPath() + "/batch 2024 ✓"
            try dropBundle(at: bundle, files: Self.trickyFiles, sidecar: Self.trickySidecar)
            try await waitUntil("a request at the \(parser.rawValue) server\n\(harness.daemon?.log ?? "")") { !server.requests.isEmpty }
            try await harness.waitForQuiet()
            try await waitUntil("the bundle directory to be deleted") { !fileExists(bundle) }

            #expect(server.requests.count == 1, "one request for the whole bundle, got \(server.requests.count)")
            let request = try #require(server.requests.first)
            #expect(request.status == 201, "\(parser.rawValue) rejected the body: \(request.error ?? "")")
            let expected = TestBundleFile.inByteOrder(Self.trickyFiles)
            #expect(request.files.count == 3, "\(request.files.map { $0.filename ?? "nil" })")
            #expect(request.files.map(\.index) == Array(0..<request.files.count))
            for (file, want) in zip(request.files, expected) {
                #expect(file.field == "files[]")
                #expect(isSentName(file.filename, of: want.name), "part \(file.index) is \(file.filename ?? "nil"), expected \(want.name)")
                #expect(file.size == want.bytes.count, "\(want.name)")
                #expect(file.sha256 == sha256Hex(want.bytes), "\(want.name)")
            }
            #expect(!request.files.contains { $0.filename?.contains("fields.toml") == true }, "the sidecar is not a file part")

            // Spool fields, the bundle's own winning at their place, a repeated field in order.
            let job = try #require(try await jobs(harness).first)
            #expect(request.idempotencyKey == job.id.rawValue)
            #expect(request.fieldLists["job"] == [job.id.rawValue], "{id} is the bundle's job id")
            #expect(request.fieldLists["note"] == ["spool ☃"])
            #expect(request.fieldLists["source"] == ["the bundle's own"], "per-bundle values replace the spool's")
            #expect(request.fieldLists["title"] == ["Q3 \"report\" ☃ 📎"])
            #expect(request.fieldLists["tags"] == ["first", "second; with \"quotes\""])

            #expect(try await jobs(harness).map(\.state) == [.done])
            #expect(!fileExists(bundle), "after_upload = delete removes the directory with its files")
            #expect(try FileManager.default.contentsOfDirectory(atPath: harness.spoolPath()).filter { !$0.hasPrefix(".") }.isEmpty)
        }
    }

    @Test("after_upload = \"move\": the delivered bundle is in sent_directory as a directory, with its files and sidecar; the fields go in merge order")
    func movedAsDirectory() async throws {
        var spool = Self.trickySpool
        spool.options.append("after_upload = \"move\"")
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let bundle = harness.spoolPath() + "/batch"
            try dropBundle(at: bundle, files: Self.trickyFiles, sidecar: Self.trickySidecar)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let sent = harness.spoolPath() + "/.sent/batch"
            try await waitUntil("the bundle to be moved") { isDirectory(sent) && !fileExists(bundle) }

            var expected = Dictionary(uniqueKeysWithValues: Self.trickyFiles.map { ($0.name, $0.bytes) })
            expected[".fields.toml"] = Array(Self.trickySidecar.utf8)
            let moved = try regularFiles(under: sent)
            #expect(Set(moved.keys) == Set(expected.keys))
            for (name, bytes) in expected { #expect(moved[name] == bytes, "\(name) moved byte-identical") }

            let request = try #require(harness.receiver.acceptedRequests.first)
            #expect(harness.receiver.requests.count == 1)
            #expect(request.files.map(\.filename) == TestBundleFile.inByteOrder(Self.trickyFiles).map(\.name))
            #expect(request.files.map(\.sha256) == TestBundleFile.inByteOrder(Self.trickyFiles).map { sha256Hex($0.bytes) })
            #expect(Set(request.files.map(\.fieldName)) == ["files[]"])
            // Spool fields, the bundle's value for `source` at its place, then the bundle's others.
            let key = try #require(request.idempotencyKey)
            // ([spool.fields] go in key order, as the README says, whatever their order in ferry.toml.)
            #expect(request.fields.map(\.name) == ["job", "note", "source", "title", "tags", "tags"])
            #expect(request.fields.map(\.value) == [
                key, "spool ☃", "the bundle's own", "Q3 \"report\" ☃ 📎", "first", "second; with \"quotes\"",
            ])
            #expect(try await jobs(harness).first?.disposition == .moved)
        }
    }

    @Test("A bundle changed while its request is sent goes again as a new job: every file's new bytes, a new Idempotency-Key; the first request carried the old bytes of every file or never completed")
    func changedDuringUpload() async throws {
        let gate = ReceiverGate()
        let spool = TestSpool(options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool], plan: { info in
            info.index == 0 ? .stallUntil(afterBytes: 256 * 1024, gate: gate) : .store()
        }) { harness in
            defer { gate.open() }
            try await harness.start()
            // 24 MiB: far more than the socket buffers hold while the server holds the request.
            let files = [
                TestBundleFile("a.bin", pseudoRandomBytes(8 << 20, seed: 2111)),
                TestBundleFile("b.bin", pseudoRandomBytes(8 << 20, seed: 2112)),
                TestBundleFile("c.bin", pseudoRandomBytes(8 << 20, seed: 2113)),
            ]
            let bundle = harness.spoolPath() + "/album"
            try dropBundle(at: bundle, files: files)
            try await waitUntil("the bundle's upload to be under way\n\(harness.daemon?.log ?? "")") {
                (harness.receiver.requests.first?.bodyBytes ?? 0) >= 256 * 1024
            }
            let firstKey = try #require(harness.receiver.requests.first?.idempotencyKey)

            // The producer rewrites one file in place while the server holds the request. The body is a
            // snapshot: if it was complete before the change, the server gets the old bundle whole and the
            // new version is a new job; if not, its last bytes are withheld and the job is superseded.
            let newer = pseudoRandomBytes((3 << 20) + 11, seed: 2114)
            try rewriteInPlace(bundle + "/b.bin", newer)
            gate.open()
            var seen: [Job] = []
            try await waitUntil("a new job to be done (jobs: \(seen.map { "\($0.id) \($0.state.rawValue) \($0.disposition.map { "\($0)" } ?? "-") \($0.lastError ?? "")" }))\n\(harness.daemon?.log ?? "")", timeout: .seconds(60)) {
                seen = try await jobs(harness)
                return seen.contains { $0.state == .done && $0.id.rawValue != firstKey }
            }
            try await harness.waitForQuiet()

            let listed = try #require(try await harness.ctl("list", "--json").json()["jobs"] as? [[String: Any]])
            #expect(listed.count == 2, "\(listed)")
            let first = try #require(listed.first { $0["id"] as? String == firstKey }, "\(listed)")
            #expect(["superseded", "done"].contains(first["state"] as? String), "\(first)")
            let firstJob = try #require(seen.first { $0.id.rawValue == firstKey })
            if firstJob.state == .done { #expect(firstJob.disposition == .left, "a changed bundle is never deleted") }
            let second = try #require(listed.first { $0["id"] as? String != firstKey }, "\(listed)")
            #expect(second["state"] as? String == "done", "\(second)")

            let last = try #require(harness.receiver.requests.last { $0.complete }, "no complete request")
            #expect(last.idempotencyKey != firstKey)
            #expect(last.idempotencyKey == second["id"] as? String)
            #expect(last.files.map(\.filename) == ["a.bin", "b.bin", "c.bin"])
            #expect(last.files.map(\.sha256) == [sha256Hex(files[0].bytes), sha256Hex(newer), sha256Hex(files[2].bytes)], "the new bytes of every file")
            for request in harness.receiver.acceptedRequests where request.idempotencyKey == firstKey {
                #expect(request.files.map(\.sha256) == files.map { sha256Hex($0.bytes) }, "the first job delivers its own snapshot, never a mix")
            }
            try await waitUntil("the bundle to be deleted") { !fileExists(bundle) }
        }
    }

    @Test("A bundle the server rejects (400) lands whole in failed_directory as a directory, with <name>.error.json beside it")
    func rejectedByTheServer() async throws {
        let spool = TestSpool(options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool], plan: { _ in .respond(status: 400, body: "{\"error\":\"not this batch\"}") }) { harness in
            try await harness.start()
            let files = [TestBundleFile("one.txt", Array("first".utf8)), TestBundleFile("two.bin", pseudoRandomBytes(300_000, seed: 2121))]
            let sidecar = "title = \"rejected batch\"\n"
            try dropBundle(at: harness.spoolPath() + "/batch", files: files, sidecar: sidecar)
            try await harness.waitForQuiet()
            let failed = harness.spoolPath() + "/.failed/batch"
            try await waitUntil("the bundle in the failed directory") { fileExists(failed + ".error.json") }
            #expect(isDirectory(failed))
            #expect(!fileExists(harness.spoolPath() + "/batch"))
            var expected = Dictionary(uniqueKeysWithValues: files.map { ($0.name, $0.bytes) })
            expected[".fields.toml"] = Array(sidecar.utf8)
            #expect(try regularFiles(under: failed) == expected, "every file, its sidecar too, byte-identical")
            let report = try errorReport(failed + ".error.json")
            #expect(report["status"] as? Int == 400)
            #expect((report["reason"] as? String)?.contains("400") == true, "\(report)")
            #expect(harness.receiver.requests.count == 1)
            #expect(try await jobs(harness).map(\.state) == [.failed])
        }
    }

    @Test("A bundle containing a subdirectory is refused unsent: whole in failed_directory, the reason naming the subdirectory")
    func nestedDirectoryRefused() async throws {
        let spool = TestSpool(options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let files = [
                TestBundleFile("a.txt", Array("a".utf8)), TestBundleFile("b.txt", Array("b".utf8)),
                TestBundleFile("inner dir/c.txt", Array("nested".utf8)),
            ]
            try dropBundle(at: harness.spoolPath() + "/nested", files: files)
            let failed = harness.spoolPath() + "/.failed/nested"
            try await waitUntil("the bundle in the failed directory\n\(harness.daemon?.log ?? "")") { fileExists(failed + ".error.json") }
            try await waitUntil("the bundle to leave the spool") { !fileExists(harness.spoolPath() + "/nested") }
            #expect(isDirectory(failed) && isDirectory(failed + "/inner dir"))
            #expect(try regularFiles(under: failed) == Dictionary(uniqueKeysWithValues: files.map { ($0.name, $0.bytes) }))
            let reason = try #require(try errorReport(failed + ".error.json")["reason"] as? String)
            #expect(reason.contains("director") && reason.contains("inner dir"), "\(reason)")
            #expect(harness.receiver.requests.isEmpty, "nothing of a refused bundle is sent")
        }
    }

    @Test("A bundle of more than max_bundle_files files is refused unsent: whole in failed_directory, the reason naming the limit")
    func tooManyFilesRefused() async throws {
        let spool = TestSpool(options: ["bundles = true", "max_bundle_files = 3"])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let files = (1...4).map { TestBundleFile("page-00\($0).png", pseudoRandomBytes(1000 * $0, seed: UInt64(2130 + $0))) }
            try dropBundle(at: harness.spoolPath() + "/scan", files: files)
            let failed = harness.spoolPath() + "/.failed/scan"
            try await waitUntil("the bundle in the failed directory\n\(harness.daemon?.log ?? "")") { fileExists(failed + ".error.json") }
            try await waitUntil("the bundle to leave the spool") { !fileExists(harness.spoolPath() + "/scan") }
            #expect(isDirectory(failed))
            #expect(try regularFiles(under: failed) == Dictionary(uniqueKeysWithValues: files.map { ($0.name, $0.bytes) }))
            let reason = try #require(try errorReport(failed + ".error.json")["reason"] as? String)
            #expect(reason.contains("max_bundle_files") && reason.contains("3") && reason.contains("4"), "\(reason)")
            #expect(harness.receiver.requests.isEmpty, "nothing of a refused bundle is sent")

            // Within the limit, the same spool sends a bundle.
            try dropBundle(at: harness.spoolPath() + "/fits", files: Array(files.prefix(3)))
            try await harness.waitForAccepted(1)
            #expect(harness.receiver.acceptedRequests.first?.files.count == 3)
        }
    }

    @Test("kill -9 during a bundle's upload: after the restart it is delivered whole, once, under the same key; no shorter body is ever complete")
    func killDuringUpload() async throws {
        let spool = TestSpool(options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool], plan: { info in info.index == 0 ? .stall(afterBytes: 1 << 20) : .store() }) { harness in
            try await harness.start()
            let files = [
                TestBundleFile("part-1.bin", pseudoRandomBytes(8 << 20, seed: 2141)),
                TestBundleFile("part-2.bin", pseudoRandomBytes(8 << 20, seed: 2142)),
                TestBundleFile("part-3.bin", pseudoRandomBytes(8 << 20, seed: 2143)),
            ]
            let bundle = harness.spoolPath() + "/video"
            try dropBundle(at: bundle, files: files)
            try await waitUntil("the bundle's upload to be under way\n\(harness.daemon?.log ?? "")") {
                (harness.receiver.requests.first?.bodyBytes ?? 0) >= 1 << 20
            }
            try await harness.kill9()
            #expect(try regularFiles(under: bundle) == Dictionary(uniqueKeysWithValues: files.map { ($0.name, $0.bytes) }),
                    "the bundle survives the crash whole")
            #expect(try await jobs(harness).map(\.state) == [.uploading])

            try await harness.start()
            try await harness.waitForAccepted(1, timeout: .seconds(60))
            try await harness.waitForQuiet()
            try await waitUntil("the bundle to be deleted") { !fileExists(bundle) }

            let accepted = harness.receiver.acceptedRequests
            #expect(accepted.count == 1, "delivered exactly once")
            let delivered = try #require(accepted.first)
            #expect(delivered.files.map(\.filename) == files.map(\.name))
            #expect(delivered.files.map(\.sha256) == files.map { sha256Hex($0.bytes) })
            #expect(delivered.idempotencyKey == harness.receiver.requests[0].idempotencyKey, "the same job, resumed")
            for request in harness.receiver.requests where request.complete {
                #expect(request.files.count == 3, "request \(request.index) completed with \(request.files.count) parts")
            }
            let job = try #require(try await jobs(harness).first)
            #expect(try await jobs(harness).count == 1)
            #expect(job.state == .done && job.attempts == 1)
        }
    }

    @Test("Killed between the server's 2xx and its record: the bundle is sent again whole, under the same key, then deleted")
    func crashBeforeTheRecord() async throws {
        let spool = TestSpool(options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start(environment: ["FERRY_FAULT_POINT": "delivered-before-record"])
            let files = [TestBundleFile("report.pdf", pseudoRandomBytes(400_000, seed: 2151)), TestBundleFile("report.csv", Array("a,b\n".utf8))]
            let bundle = harness.spoolPath() + "/report"
            try dropBundle(at: bundle, files: files)
            try await waitUntil("ferryd to die at its fault point\n\(harness.daemon?.log ?? "")") { !(harness.daemon?.child.isRunning ?? false) }
            #expect(harness.receiver.acceptedRequests.count == 1)
            #expect(try regularFiles(under: bundle).count == 2, "the 2xx was not on record: the bundle stays whole")
            try await harness.start()
            try await harness.waitForAccepted(2)
            try await harness.waitForQuiet()
            try await waitUntil("the bundle to be deleted") { !fileExists(bundle) }
            let accepted = harness.receiver.acceptedRequests
            #expect(accepted.count == 2 && accepted[0].idempotencyKey == accepted[1].idempotencyKey)
            for request in accepted {
                #expect(request.files.map(\.filename) == ["report.csv", "report.pdf"])
                #expect(request.files.map(\.sha256) == [sha256Hex(files[1].bytes), sha256Hex(files[0].bytes)])
            }
            #expect(try await jobs(harness).map(\.state) == [.done])
        }
    }

    @Test("Killed after the 2xx is on record but before the disposal: the restart deletes the bundle without sending it again")
    func crashBeforeTheDisposal() async throws {
        let spool = TestSpool(options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start(environment: ["FERRY_FAULT_POINT": "delivered-before-disposal"])
            let bundle = harness.spoolPath() + "/report"
            try dropBundle(at: bundle, files: [TestBundleFile("a.txt", Array("a".utf8)), TestBundleFile("b.txt", Array("b".utf8))])
            try await waitUntil("ferryd to die at its fault point\n\(harness.daemon?.log ?? "")") { !(harness.daemon?.child.isRunning ?? false) }
            #expect(isDirectory(bundle))
            #expect(try await jobs(harness).first?.state == .done)
            try await harness.start()
            try await waitUntil("the bundle to be deleted") { !fileExists(bundle) }
            try await harness.waitForQuiet()
            #expect(harness.receiver.requests.count == 1, "not sent again")
            #expect(try await jobs(harness).first?.disposition == .deleted)
        }
    }

    @Test("ferryctl show --json lists a bundle's files with sizes and its total size; ferryctl list shows it with / appended")
    func shownByFerryctl() async throws {
        let spool = TestSpool(options: ["bundles = true", "after_upload = \"keep\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let files = [
                TestBundleFile("page-010.png", pseudoRandomBytes(30_000, seed: 2161)),
                TestBundleFile("page-001.png", pseudoRandomBytes(1000, seed: 2162)),
                TestBundleFile("page-002.png", pseudoRandomBytes(2000, seed: 2163)),
            ]
            try dropBundle(at: harness.spoolPath() + "/scans", files: files)
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let inOrder = TestBundleFile.inByteOrder(files)
            let total = files.reduce(0) { $0 + $1.bytes.count }

            func checkBundle(_ bundle: [String: Any]?, in what: String) {
                let listedFiles = bundle?["files"] as? [[String: Any]]
                #expect(listedFiles?.map { $0["name"] as? String } == inOrder.map(\.name), "\(what): \(bundle ?? [:])")
                #expect(listedFiles?.map { $0["size"] as? Int } == inOrder.map(\.bytes.count), "\(what): \(bundle ?? [:])")
                #expect(bundle?["total_size"] as? Int == total, "\(what): \(bundle ?? [:])")
            }

            let listed = try #require(try await harness.ctl("list", "--json").json()["jobs"] as? [[String: Any]])
            #expect(listed.count == 1)
            let summary = try #require(listed.first)
            checkBundle(summary["bundle"] as? [String: Any], in: "list --json")
            let id = try #require(summary["id"] as? String)

            let shown = try await harness.ctl("show", id, "--json")
            #expect(shown.status == 0, "\(shown)")
            let detail = try shown.json()
            let bundle = (detail["bundle"] as? [String: Any]) ?? ((detail["job"] as? [String: Any])?["bundle"] as? [String: Any])
            checkBundle(bundle, in: "show --json")

            let text = try await harness.ctl("list")
            #expect(text.status == 0 && text.stdout.contains("scans/"), "\(text)")
            let shownText = try await harness.ctl("show", id)
            #expect(shownText.status == 0, "\(shownText)")
            for file in files { #expect(shownText.stdout.contains(file.name), "\(shownText)") }

            // A file beside the bundle is a job of its own, and carries no bundle.
            try harness.drop("single.txt", Array("one".utf8))
            try await harness.waitForAccepted(2)
            try await harness.waitForQuiet()
            let all = try #require(try await harness.ctl("list", "--json").json()["jobs"] as? [[String: Any]])
            let plain = all.first { $0["id"] as? String != id }
            #expect(plain?["file"] as? String == "single.txt")
            #expect(plain != nil && plain?["bundle"] == nil, "no bundle on a file's job: \(all)")
        }
    }
}
