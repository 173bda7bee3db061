import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Per-file fields (issue 21): `<name>.fields.toml` dropped before its file supplies that request's
/// fields, merged over `[spool.fields]`; it is never uploaded itself and goes where its file goes.
@Suite("Fields per file: the .fields.toml sidecar, end to end", .serialized)
struct FieldSidecarDeliveryTests {
    /// A heron whose alt text has quotes and an emoji, and overrides the spool's `visibility`.
    static let heronSidecar = """
        description = "A \\"quoted\\" heron 🐦 at dawn"
        visibility = "unlisted"
        """
    /// A gull with non-ASCII alt text and a repeated field.
    static let gullSidecar = """
        description = "Zweite Aufnahme: Möwe 🌊"
        tags = ["birds", "sea \\"side\\""]
        """
    static let spool = TestSpool(fields: ["source = \"camera 2\"", "visibility = \"public\""])

    /// Drops the two photographs, each after its sidecar (the producer contract), and one without.
    func dropPhotos(_ harness: DaemonHarness) throws -> [String: [UInt8]] {
        let photos = [
            "heron.jpg": pseudoRandomBytes(400_000, seed: 2201),
            "gull.jpg": pseudoRandomBytes(20_000, seed: 2202),
            "plain.jpg": pseudoRandomBytes(5000, seed: 2203),
        ]
        try harness.drop("heron.jpg.fields.toml", Array(Self.heronSidecar.utf8))
        try harness.drop("heron.jpg", photos["heron.jpg"]!)
        try harness.drop("gull.jpg.fields.toml", Array(Self.gullSidecar.utf8))
        try harness.drop("gull.jpg", photos["gull.jpg"]!)
        try harness.drop("plain.jpg", photos["plain.jpg"]!)
        return photos
    }

    @Test("Each file's fields (alt text with quotes and emoji, an override, a repeated field) arrive on its own request; sidecars are not uploaded and are deleted with their files",
          arguments: [PythonReceiver.Parser.werkzeug, .pythonMultipart])
    func perFileFields(parser: PythonReceiver.Parser) async throws {
        let directory = try TemporaryDirectory()
        let server = try await PythonReceiver(parser: parser, directory: directory.url("python"))
        try await withDaemonHarness(spools: [Self.spool], url: server.url + "/upload") { harness in
            try await harness.start()
            let photos = try dropPhotos(harness)
            try await waitUntil("3 requests at the \(parser.rawValue) server\n\(harness.daemon?.log ?? "")") { server.requests.count >= 3 }
            try await harness.waitForQuiet()
            try await waitUntil("the spool to be empty") {
                try FileManager.default.contentsOfDirectory(atPath: harness.spoolPath()).filter { !$0.hasPrefix(".") }.isEmpty
            }

            let requests = server.requests
            #expect(requests.count == 3, "one request per photograph, none for a sidecar: \(requests.map { $0.files.map(\.filename) })")
            #expect(try await jobs(harness).count == 3, "a sidecar is never a job")
            func request(for name: String) throws -> PythonReceivedRequest {
                try #require(requests.first { $0.files.first?.filename == name }, "no request for \(name)")
            }
            for request in requests {
                #expect(request.status == 201, "\(parser.rawValue) rejected a body: \(request.error ?? "")")
                #expect(request.files.count == 1)
                let file = try #require(request.files.first)
                #expect(file.field == "file")
                let bytes = try #require(photos[file.filename ?? ""], "unexpected file part \(file.filename ?? "nil")")
                #expect(file.sha256 == sha256Hex(bytes))
            }

            let heron = try request(for: "heron.jpg")
            #expect(heron.fieldLists["description"] == ["A \"quoted\" heron 🐦 at dawn"])
            #expect(heron.fieldLists["visibility"] == ["unlisted"], "the file's value replaces the spool's, not added to it")
            #expect(heron.fieldLists["source"] == ["camera 2"])
            #expect(heron.fieldLists["tags"] == nil)

            let gull = try request(for: "gull.jpg")
            #expect(gull.fieldLists["description"] == ["Zweite Aufnahme: Möwe 🌊"])
            #expect(gull.fieldLists["tags"] == ["birds", "sea \"side\""], "a repeated field, in order")
            #expect(gull.fieldLists["visibility"] == ["public"])
            #expect(gull.fieldLists["source"] == ["camera 2"])

            let plain = try request(for: "plain.jpg")
            #expect(plain.fieldLists == ["source": ["camera 2"], "visibility": ["public"]], "no other file's fields leak into it")

            for name in ["heron.jpg", "heron.jpg.fields.toml", "gull.jpg", "gull.jpg.fields.toml", "plain.jpg"] {
                #expect(!fileExists(harness.spoolPath() + "/" + name), "\(name) is deleted with its file")
            }
        }
    }

    @Test("Killed after the delivered file is deleted, before its sidecar: the restart deletes the sidecar, and the next file of that name does not get its fields")
    func crashBetweenFileAndSidecar() async throws {
        try await withDaemonHarness(spools: [Self.spool]) { harness in
            try await harness.start(environment: ["FERRY_FAULT_POINT": "deleted-before-field-sidecar"])
            try harness.drop("heron.jpg.fields.toml", Array(Self.heronSidecar.utf8))
            let photo = try harness.drop("heron.jpg", pseudoRandomBytes(5000, seed: 2210))
            try await PromiseTests().waitForCrash(harness)
            #expect(!fileExists(photo))
            #expect(fileExists(photo + ".fields.toml"), "the crash came between the two")
            try await harness.start()
            try await waitUntil("the sidecar to be deleted") { !fileExists(photo + ".fields.toml") }
            try await harness.waitForQuiet()
            // The next heron.jpg, dropped without a sidecar, has the spool's fields only.
            try harness.drop("heron.jpg", pseudoRandomBytes(6000, seed: 2211))
            _ = try await waitForState(harness, .done, count: 2)
            let last = try #require(harness.receiver.acceptedRequests.last)
            #expect(last.fields.first { $0.name == "description" } == nil, "the old sidecar's fields: \(last.fields)")
            #expect(last.fields.first { $0.name == "visibility" }?.value == "public")
        }
    }

    @Test("after_upload = \"move\": each sidecar is moved beside its file; the fields go in merge order")
    func sidecarsMoved() async throws {
        var spool = Self.spool
        spool.options.append("after_upload = \"move\"")
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let photos = try dropPhotos(harness)
            try await harness.waitForAccepted(3)
            try await harness.waitForQuiet()
            let sent = harness.spoolPath() + "/.sent"
            try await waitUntil("the files and sidecars to be moved") {
                ["heron.jpg", "heron.jpg.fields.toml", "gull.jpg", "gull.jpg.fields.toml", "plain.jpg"].allSatisfy { fileExists(sent + "/" + $0) }
            }
            let moved = try regularFiles(under: sent)
            #expect(Set(moved.keys) == ["heron.jpg", "heron.jpg.fields.toml", "gull.jpg", "gull.jpg.fields.toml", "plain.jpg"])
            #expect(moved["heron.jpg.fields.toml"] == Array(Self.heronSidecar.utf8))
            #expect(moved["gull.jpg.fields.toml"] == Array(Self.gullSidecar.utf8))
            for (name, bytes) in photos { #expect(moved[name] == bytes) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: harness.spoolPath()).filter { !$0.hasPrefix(".") }.isEmpty)

            #expect(harness.receiver.requests.count == 3)
            let heron = try #require(harness.receiver.acceptedRequests.first { $0.files.first?.filename == "heron.jpg" })
            // The spool's fields (in key order), the file's value at its place, then the file's others.
            #expect(heron.fields.map(\.name) == ["source", "visibility", "description"])
            #expect(heron.fields.map(\.value) == ["camera 2", "unlisted", "A \"quoted\" heron 🐦 at dawn"])
            let gull = try #require(harness.receiver.acceptedRequests.first { $0.files.first?.filename == "gull.jpg" })
            #expect(gull.fields.map(\.name) == ["source", "visibility", "description", "tags", "tags"])
            #expect(gull.fields.map(\.value) == ["camera 2", "public", "Zweite Aufnahme: Möwe 🌊", "birds", "sea \"side\""])
            #expect(!harness.receiver.requests.contains { $0.files.contains { $0.filename.hasSuffix(".fields.toml") } })
        }
    }

    @Test("A sidecar in a subdirectory whose name is not UTF-8 is moved beside its file, and the job is disposed of")
    func sidecarMovedUnderNonUTF8Directory() async throws {
        var spool = Self.spool
        spool.options += ["after_upload = \"move\"", "recursive = true"]
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let directory: [UInt8] = Array((harness.spoolPath() + "/caf").utf8) + [0xE9]
            func write(_ path: [UInt8], _ bytes: [UInt8]) throws {
                let temporary = directory + Array("/.incoming".utf8)
                let fd = (temporary + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) } }
                guard fd >= 0 else { throw TestFailure("open: \(errno)") }
                _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                close(fd)
                let renamed = (temporary + [0]).withUnsafeBufferPointer { old in (path + [0]).withUnsafeBufferPointer { new in
                    old.withMemoryRebound(to: CChar.self) { o in new.withMemoryRebound(to: CChar.self) { rename(o.baseAddress!, $0.baseAddress!) } } } }
                guard renamed == 0 else { throw TestFailure("rename: \(errno)") }
            }
            let made = (directory + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o755) } }
            #expect(made == 0)
            try write(directory + Array("/photo.jpg.fields.toml".utf8), Array(Self.heronSidecar.utf8))
            try write(directory + Array("/photo.jpg".utf8), pseudoRandomBytes(3000, seed: 2204))
            try await harness.waitForAccepted(1)
            try await waitUntil("the job to be disposed of\n\(harness.daemon?.log ?? "")") {
                try await jobs(harness).first?.disposedAt != nil
            }
            let sent = Array((harness.spoolPath() + "/.sent/caf").utf8) + [0xE9]
            for name in ["/photo.jpg", "/photo.jpg.fields.toml"] {
                var st = stat()
                let found = (sent + Array(name.utf8) + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { lstat($0.baseAddress!, &st) } }
                #expect(found == 0, "\(name) is in the sent directory")
            }
            #expect(harness.receiver.acceptedRequests.first?.fields.map(\.name) == ["source", "visibility", "description"])
        }
    }

    @Test("A malformed sidecar (bad TOML; a ${env:…} reference) keeps its file unsent: both go to failed_directory, the .error.json says why, with the line")
    func malformedSidecarRejected() async throws {
        try await withDaemonHarness(spools: [Self.spool]) { harness in
            try await harness.start()
            let badTOML = "title = \"fine\"\nalt = \"unterminated\n"
            let secret = "title = \"fine\"\nalt = \"${env:HOME}\"\n"
            let broken = pseudoRandomBytes(3000, seed: 2211)
            let nosy = pseudoRandomBytes(4000, seed: 2212)
            try harness.drop("broken.jpg.fields.toml", Array(badTOML.utf8))
            try harness.drop("broken.jpg", broken)
            try harness.drop("nosy.jpg.fields.toml", Array(secret.utf8))
            try harness.drop("nosy.jpg", nosy)
            try harness.drop("fine.jpg", Array("fine".utf8))

            let failed = harness.spoolPath() + "/.failed/"
            try await waitUntil("both files in the failed directory\n\(harness.daemon?.log ?? "")") {
                fileExists(failed + "broken.jpg.error.json") && fileExists(failed + "nosy.jpg.error.json")
            }
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()

            #expect(harness.receiver.requests.map { $0.files.map(\.filename) } == [["fine.jpg"]], "only the file without a bad sidecar is sent")
            #expect(FileManager.default.contents(atPath: failed + "broken.jpg").map { [UInt8]($0) } == broken)
            #expect(FileManager.default.contents(atPath: failed + "broken.jpg.fields.toml").map { [UInt8]($0) } == Array(badTOML.utf8),
                    "the sidecar goes aside with its file")
            #expect(FileManager.default.contents(atPath: failed + "nosy.jpg").map { [UInt8]($0) } == nosy)
            #expect(FileManager.default.contents(atPath: failed + "nosy.jpg.fields.toml").map { [UInt8]($0) } == Array(secret.utf8))
            for name in ["broken.jpg", "broken.jpg.fields.toml", "nosy.jpg", "nosy.jpg.fields.toml"] {
                #expect(!fileExists(harness.spoolPath() + "/" + name))
            }

            let brokenReason = try #require(try errorReport(failed + "broken.jpg.error.json")["reason"] as? String)
            #expect(brokenReason.contains("fields.toml") && brokenReason.contains("line 2"), "\(brokenReason)")
            let nosyReason = try #require(try errorReport(failed + "nosy.jpg.error.json")["reason"] as? String)
            #expect(nosyReason.contains("${") && nosyReason.contains("ferry.toml") && nosyReason.contains("line 2"), "\(nosyReason)")
            if let home = ProcessInfo.processInfo.environment["HOME"], home.count > 1 {
                #expect(!nosyReason.contains("\"\(home)\""), "the reference is never resolved: \(nosyReason)")
            }
        }
    }
}
