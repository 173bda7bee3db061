import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The names in `directory`, except what ferryd itself makes there (`.failed`, `.sent`).
private func spoolEntries(_ directory: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0 != ".failed" && $0 != ".sent" }.sorted()
}

/// Writes `files` (name, text) into a new directory `path`.
private func makeDirectory(_ path: String, files: [(String, String)]) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: path + "/" + name)) }
}

@Suite("ferryctl enqueue: --field sidecars and bundles, against a real daemon", .serialized)
struct EnqueueFieldsTests {
    @Test("--field values (quotes, emoji, '=' inside, a repeated key, a placeholder, line breaks) arrive on the file's own request, over the spool's fields")
    func fieldsArrive() async throws {
        let spool = TestSpool(fields: ["kind = \"photo\"", "source = \"ferry\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let outside = try harness.directory.makeDirectory("outside")
            try Data("a kite".utf8).write(to: URL(fileURLWithPath: outside + "/kite.jpg"))
            try Data("an orphan's file".utf8).write(to: URL(fileURLWithPath: outside + "/orphan.txt"))
            try Data("no fields".utf8).write(to: URL(fileURLWithPath: outside + "/plain.txt"))
            // Paused, so what enqueue leaves in the spool can be looked at before it is sent.
            #expect(try await harness.ctl("pause", "test").status == 0)
            // A sidecar left behind without its file: enqueue --field replaces it.
            try harness.drop("orphan.txt.fields.toml", Array("alt = \"stale\"\nstale = \"yes\"\n".utf8))

            let alt = "He said \"hi\" 👋🏽 — naïve \\ backslash"
            // Alt text with its own line breaks (a part's body: they go as they are).
            let description = "Two boats at dawn.\nThe left one, red.\r\n\nEnd"
            let enqueued = try await harness.ctl(
                "enqueue", outside + "/kite.jpg", "--spool", "test",
                "--field", "alt=" + alt, "--field", "note=a=b==c", "--field", "tag=one", "--field", "caption=Photo of {filename}",
                "--field", "tag=two", "--field", "source=override", "--field", "empty=", "--field", "description=" + description)
            #expect(enqueued.status == 0, "\(enqueued)")
            let orphan = try await harness.ctl("enqueue", outside + "/orphan.txt", "--spool", "test", "--field", "alt=fresh")
            #expect(orphan.status == 0, "\(orphan)")
            let plain = try await harness.ctl("enqueue", outside + "/plain.txt", "--spool", "test")
            #expect(plain.status == 0, "\(plain)")
            // Each file with its sidecar, and nothing of enqueue's own left (no hidden temporary file).
            #expect(try spoolEntries(harness.spoolPath()) == [
                "kite.jpg", "kite.jpg.fields.toml", "orphan.txt", "orphan.txt.fields.toml", "plain.txt",
            ])
            let orphanSidecar = try String(contentsOfFile: harness.spoolPath() + "/orphan.txt.fields.toml", encoding: .utf8)
            #expect(orphanSidecar.contains("fresh") && !orphanSidecar.contains("stale"), "\(orphanSidecar)")

            #expect(try await harness.ctl("resume", "test").status == 0)
            try await harness.waitForAccepted(3)
            try await harness.waitForQuiet()
            let requests = harness.receiver.acceptedRequests
            func fields(of name: String) throws -> [ReceivedField] {
                try #require(requests.first { $0.files.map(\.filename) == [name] }, "no request for \(name)").fields
            }
            // The spool's fields in order, one the file gives replaced at its place; then the file's own.
            #expect(try fields(of: "kite.jpg").map { [$0.name, $0.value] } == [
                ["kind", "photo"], ["source", "override"], ["alt", alt], ["note", "a=b==c"], ["tag", "one"], ["tag", "two"],
                ["caption", "Photo of kite.jpg"], ["empty", ""], ["description", description],
            ])
            #expect(try fields(of: "orphan.txt").map { [$0.name, $0.value] } == [["kind", "photo"], ["source", "ferry"], ["alt", "fresh"]])
            #expect(try fields(of: "plain.txt").map { [$0.name, $0.value] } == [["kind", "photo"], ["source", "ferry"]])
            // No sidecar was uploaded as a file, and each went with its file (after_upload = delete).
            #expect(!requests.flatMap { $0.files.map(\.filename) }.contains { $0.hasSuffix(".fields.toml") })
            #expect(try spoolEntries(harness.spoolPath()) == [])
        }
    }

    @Test("A bad --field, a name taken, a directory for a spool without bundles, --field for a put spool: refused, nothing placed")
    func refusals() async throws {
        let spools = [TestSpool(), TestSpool(name: "raw", options: ["protocol = \"put\""], urlPath: "/dav/{filename}")]
        try await withDaemonHarness(spools: spools) { harness in
            try await harness.start()
            #expect(try await harness.ctl("pause").status == 0)
            let outside = try harness.directory.makeDirectory("outside")
            try Data("photo".utf8).write(to: URL(fileURLWithPath: outside + "/photo.jpg"))

            let bad: [(field: String, says: String)] = [
                ("alt={nosuch}", "{nosuch}"),
                ("line\nkey=a name is in the part's header", "LF"),
                ("carriage\rkey=x", "CR"),
                ("alt=${env:HOME}", "secret"),
                ("=no key", "key"),
                ("no-equals-sign", "key=value"),
            ]
            for (field, says) in bad {
                let refused = try await harness.ctl("enqueue", outside + "/photo.jpg", "--spool", "test", "--field", "ok=fine", "--field", field)
                #expect(refused.status == 64 && refused.stderr.contains(says), "\(field): \(refused)")
            }
            #expect(try spoolEntries(harness.spoolPath()) == [])

            // The name is taken: refused, and the sidecar is not left behind.
            try harness.drop("photo.jpg", Array("already here".utf8))
            let taken = try await harness.ctl("enqueue", outside + "/photo.jpg", "--spool", "test", "--field", "alt=x")
            #expect(taken.status == 1 && taken.stdout.contains("already has"), "\(taken)")
            #expect(try spoolEntries(harness.spoolPath()) == ["photo.jpg"])
            #expect(try String(contentsOfFile: harness.spoolPath() + "/photo.jpg", encoding: .utf8) == "already here")

            // A directory, in a spool without bundles = true.
            try makeDirectory(outside + "/album", files: [("one.jpg", "1"), ("two.jpg", "2")])
            let directory = try await harness.ctl("enqueue", outside + "/album", "--spool", "test")
            #expect(directory.status == 1, "\(directory)")
            #expect(directory.stdout.contains("spool \"test\"") && directory.stdout.contains("bundles = true"), "\(directory)")
            #expect(try spoolEntries(harness.spoolPath()) == ["photo.jpg"])

            // A sidecar means nothing to a put spool (it would be uploaded as a file): --field is refused there.
            let put = try await harness.ctl("enqueue", outside + "/photo.jpg", "--spool", "raw", "--field", "alt=x")
            #expect(put.status == 1 && put.stderr.contains("protocol = \"put\""), "\(put)")
            #expect(try spoolEntries(harness.spoolPath("raw")) == [])
            // A file whose name marks a sidecar is not a file to upload.
            try Data("alt = \"x\"\n".utf8).write(to: URL(fileURLWithPath: outside + "/photo.jpg.fields.toml"))
            let sidecarName = try await harness.ctl("enqueue", outside + "/photo.jpg.fields.toml", "--spool", "test")
            #expect(sidecarName.status == 1 && sidecarName.stdout.contains(".fields.toml"), "\(sidecarName)")
            #expect(try spoolEntries(harness.spoolPath()) == ["photo.jpg"])
            // In a put spool the name means nothing: it is a file like any other.
            let asFile = try await harness.ctl("enqueue", outside + "/photo.jpg.fields.toml", "--spool", "raw")
            #expect(asFile.status == 0, "\(asFile)")
            #expect(try spoolEntries(harness.spoolPath("raw")) == ["photo.jpg.fields.toml"])
        }
    }

    @Test("A directory is a bundle: refused with a subdirectory, a symlink, no file or two sets of fields; else one request with every file")
    func bundles() async throws {
        let spool = TestSpool(name: "album", options: ["bundles = true", "bundle_file_field = \"files[]\""], fields: ["source = \"ferry\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let outside = try harness.directory.makeDirectory("outside")
            let spoolPath = harness.spoolPath("album")

            try makeDirectory(outside + "/nested", files: [("one.jpg", "1")])
            try makeDirectory(outside + "/nested/inner", files: [("two.jpg", "2")])
            try makeDirectory(outside + "/linked", files: [("one.jpg", "1")])
            #expect(symlink("/etc/hostname", outside + "/linked/link.txt") == 0)
            try makeDirectory(outside + "/empty", files: [])
            try makeDirectory(outside + "/twice", files: [("one.jpg", "1"), (".fields.toml", "alt = \"in the file\"\n")])
            try makeDirectory(outside + "/badsidecar", files: [("one.jpg", "1"), (".fields.toml", "alt = 3\n")])
            let refusals: [(directory: String, fields: [String], says: String)] = [
                ("nested", [], "subdirectory"), ("linked", [], "symlink"), ("empty", [], "no file"),
                ("twice", ["--field", "alt=x"], "--field"), ("badsidecar", [], "alt"),
            ]
            for (directory, fields, says) in refusals {
                let arguments = ["enqueue", outside + "/" + directory, "--spool", "album"] + fields
                let refused = try await runFerryctl(arguments, socket: harness.controlSocket)
                #expect(refused.status == 1 && refused.stdout.contains(says), "\(directory): \(refused)")
            }
            // Nothing placed, not even a temporary directory.
            #expect(try spoolEntries(spoolPath) == [])

            let files = [("b.txt", "bee"), ("a.jpg", "ay"), ("c d.bin", "see dee")]
            try makeDirectory(outside + "/trip", files: files)
            let alt = "Three \"files\" 📷 = one request"
            let enqueued = try await harness.ctl("enqueue", outside + "/trip/", "--spool", "album", "--field", "alt=" + alt, "--json")
            #expect(enqueued.status == 0, "\(enqueued)")
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            let requests = harness.receiver.acceptedRequests
            #expect(requests.count == 1)
            let request = try #require(requests.first)
            #expect(request.files.map(\.filename) == ["a.jpg", "b.txt", "c d.bin"])
            #expect(request.files.allSatisfy { $0.fieldName == "files[]" })
            #expect(request.files.map(\.sha256) == ["ay", "bee", "see dee"].map { sha256Hex(Array($0.utf8)) })
            #expect(request.fields.map { [$0.name, $0.value] } == [["source", "ferry"], ["alt", alt]])
            #expect(try spoolEntries(spoolPath) == [])
            #expect(fileExists(outside + "/trip/a.jpg"), "the source directory is left as it was")
        }
    }

    @Test("Ctrl-C during enqueue removes the partial copy: a bundle's temporary directory, a file's temporary file")
    func interruptCleansUp() async throws {
        let spool = TestSpool(name: "album", options: ["bundles = true"])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let outside = try harness.directory.makeDirectory("outside")
            let spoolPath = harness.spoolPath("album")
            // Sparse: nothing on disk here, but seconds of copying, so the copy is under way when interrupted.
            try makeDirectory(outside + "/big", files: [("small.txt", "small"), ("huge.bin", "")])
            try Data().write(to: URL(fileURLWithPath: outside + "/huge.bin"))
            #expect(truncate(outside + "/big/huge.bin", 4 << 30) == 0)
            #expect(truncate(outside + "/huge.bin", 4 << 30) == 0)
            for (source, temporaryPrefix) in [(outside + "/big", ".ferry-enqueue-"), (outside + "/huge.bin", ".ferryctl-")] {
                let child = try ChildProcess(
                    executable: try BuiltProducts.path("ferryctl"),
                    arguments: ["--socket", harness.controlSocket, "enqueue", source, "--spool", "album", "--field", "alt=x"],
                    logPath: harness.directory.url("enqueue.log"))
                defer { if child.isRunning { child.send(SIGKILL) } }
                try await waitUntil("enqueue to start copying \(source)") {
                    try spoolEntries(spoolPath).contains { $0.hasPrefix(temporaryPrefix) }
                }
                child.send(SIGINT)
                #expect(try await child.waitForExit() == 130)
                #expect(try spoolEntries(spoolPath) == [], "\(source)")
            }
        }
    }
}
