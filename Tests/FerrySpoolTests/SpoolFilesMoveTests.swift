import FerrySystem
import Foundation
import Testing

@testable import FerrySpool

/// Moving a delivered or refused file aside never runs out of names: after `name.9999.ext` comes a
/// name of the job's own, and a long name's sidecars never collide. A real directory on disk.
@Suite("Spool files: moves that never run out of names", .serialized)
struct SpoolFilesMoveTests {
    /// A spool and a destination below a fresh temporary directory, removed afterwards.
    struct Directories {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-move-\(UUID().uuidString)").path
        var spool: String { root + "/spool" }
        var destination: String { root + "/sent" }

        init() throws {
            for path in [spool, destination] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }

        func write(_ path: String, _ text: String) {
            #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        }

        /// Moves `name` from the spool, as a disposition does.
        func move(_ name: String, token: String, sidecar: String? = nil) throws -> SpoolFiles.Outcome {
            let files = SpoolFiles(directory: spool)
            let (descriptor, status) = try files.open(Array(name.utf8))
            try descriptor.close()
            return try files.move(
                Array(name.utf8), ifSameVersionAs: status, to: .init(directory: destination, sidecar: sidecar.map { Array($0.utf8) }), token: token)
        }
    }

    @Test("a claim or move made as a hard link then an unlink and cut by a crash: the retried delete or move leaves one name, no copy")
    func interruptedLinkThenUnlink() throws {
        let directories = try Directories()
        defer { directories.remove() }
        let files = SpoolFiles(directory: directories.spool)
        // The claim's link was made, the unlink of the name was not: both names in the spool.
        directories.write(directories.spool + "/a.jpg", "a")
        #expect(link(directories.spool + "/a.jpg", directories.spool + "/.ferry-claim-01JOBA") == 0)
        let (a, aStatus) = try files.open(Array("a.jpg".utf8))
        try a.close()
        #expect(try files.remove(Array("a.jpg".utf8), ifSameVersionAs: aStatus, token: "01JOBA") == .done(finalPath: nil))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.spool).isEmpty, "neither name is left to be sent again")
        // The move's sidecar and its link into the destination were made, the unlink of the claim
        // name was not. Another job's link to the same file (its own sidecar beside it) is not this move.
        directories.write(directories.spool + "/.ferry-claim-01JOBB", "b")
        #expect(link(directories.spool + "/.ferry-claim-01JOBB", directories.destination + "/b.jpg") == 0)
        directories.write(directories.destination + "/b.jpg.error.json", #"{"job":"01JOBB"}"#)
        directories.write(directories.spool + "/.ferry-claim-01JOBC", "c")
        #expect(link(directories.spool + "/.ferry-claim-01JOBC", directories.destination + "/c.jpg") == 0)
        directories.write(directories.destination + "/c.jpg.error.json", #"{"job":"01JOBX"}"#)
        let (c, cStatus) = try files.open(Array(".ferry-claim-01JOBC".utf8))
        try c.close()
        let other = try files.move(
            Array("c.jpg".utf8), ifSameVersionAs: cStatus, to: .init(directory: directories.destination, sidecar: Array(#"{"job":"01JOBC"}"#.utf8)),
            token: "01JOBC")
        #expect(other == .done(finalPath: Array((directories.destination + "/c.1.jpg").utf8)), "its own name, its own sidecar")
        let (b, bStatus) = try files.open(Array(".ferry-claim-01JOBB".utf8))
        try b.close()
        let outcome = try files.move(
            Array("b.jpg".utf8), ifSameVersionAs: bStatus, to: .init(directory: directories.destination, sidecar: Array(#"{"job":"01JOBB"}"#.utf8)),
            token: "01JOBB")
        #expect(outcome == .done(finalPath: Array((directories.destination + "/b.jpg").utf8)))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.spool).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.destination).sorted()
            == ["b.jpg", "b.jpg.error.json", "c.1.jpg", "c.1.jpg.error.json", "c.jpg", "c.jpg.error.json"], "no b.1.jpg")
    }

    @Test("releaseClaim (after_upload became keep after a cut delete): the claimed file goes back under its own name only; a name taken keeps the claim; a link leftover loses the claim name")
    func releaseClaim() throws {
        let directories = try Directories()
        defer { directories.remove() }
        let files = SpoolFiles(directory: directories.spool)
        func claimed(_ name: String, _ token: String, _ text: String) throws -> FileStatus {
            directories.write(directories.spool + "/" + name, text)
            let (descriptor, status) = try files.open(Array(name.utf8))
            try descriptor.close()
            #expect(rename(directories.spool + "/" + name, directories.spool + "/.ferry-claim-" + token) == 0)
            return status
        }
        let a = try claimed("a.jpg", "01JOBA", "a")
        #expect(try files.releaseClaim(of: Array("a.jpg".utf8), expected: a, token: "01JOBA") == nil)
        let b = try claimed("b.jpg", "01JOBB", "b")
        directories.write(directories.spool + "/b.jpg", "a newer b")
        #expect(try files.releaseClaim(of: Array("b.jpg".utf8), expected: b, token: "01JOBB") == Array(".ferry-claim-01JOBB".utf8),
                "not as b.1.jpg, which would be sent again")
        let c = try claimed("c.jpg", "01JOBC", "c")
        #expect(link(directories.spool + "/.ferry-claim-01JOBC", directories.spool + "/c.jpg") == 0)
        #expect(try files.releaseClaim(of: Array("c.jpg".utf8), expected: c, token: "01JOBC") == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.spool).sorted()
            == [".ferry-claim-01JOBB", "a.jpg", "b.jpg", "c.jpg"])
    }

    @Test("bringBack cut between its link and its unlink (the file in the spool and in the failed directory) finishes: one name, the sidecar gone")
    func bringBackLinkLeftover() throws {
        let directories = try Directories()
        defer { directories.remove() }
        let files = SpoolFiles(directory: directories.spool)
        directories.write(directories.destination + "/d.jpg", "d")
        directories.write(directories.destination + "/d.jpg.error.json", #"{"job":"01JOBD"}"#)
        #expect(link(directories.destination + "/d.jpg", directories.spool + "/d.jpg") == 0)
        let placed = try files.bringBack(from: Array((directories.destination + "/d.jpg").utf8), to: Array("d.jpg".utf8), token: "01JOBD")
        #expect(placed.size == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.destination).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.spool) == ["d.jpg"])
        // Another file at the name is not this one: the name stays taken.
        directories.write(directories.destination + "/e.jpg", "e")
        directories.write(directories.spool + "/e.jpg", "another e")
        #expect(throws: SpoolFiles.ReturnError.self) {
            try files.bringBack(from: Array((directories.destination + "/e.jpg").utf8), to: Array("e.jpg".utf8), token: "01JOBE")
        }
    }

    @Test("removeFailureReport removes the job's own .error.json beside a moved file, never another job's")
    func failureReportRemoved() throws {
        let directories = try Directories()
        defer { directories.remove() }
        let files = SpoolFiles(directory: directories.spool)
        directories.write(directories.destination + "/f.jpg.error.json", #"{"job":"01JOBF"}"#)
        directories.write(directories.destination + "/g.jpg.error.json", #"{"job":"01OTHER"}"#)
        files.removeFailureReport(of: Array((directories.destination + "/f.jpg").utf8), token: "01JOBF")
        files.removeFailureReport(of: Array((directories.destination + "/g.jpg").utf8), token: "01JOBG")
        files.removeFailureReport(of: Array((directories.destination + "/none.jpg").utf8), token: "01JOBN")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.destination) == ["g.jpg.error.json"])
    }

    @Test("with name and name.1 … name.9999 taken, the file is moved under a name of its job's own")
    func namesExhausted() throws {
        let directories = try Directories()
        defer { directories.remove() }
        directories.write(directories.destination + "/snapshot.jpg", "old")
        for index in 1..<10_000 { directories.write(directories.destination + "/snapshot.\(index).jpg", "old") }
        directories.write(directories.spool + "/snapshot.jpg", "new")
        let outcome = try directories.move("snapshot.jpg", token: "01JOB")
        #expect(outcome == .done(finalPath: Array((directories.destination + "/snapshot.01JOB.jpg").utf8)))
        #expect(FileManager.default.contents(atPath: directories.destination + "/snapshot.01JOB.jpg") == Data("new".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.spool).isEmpty, "nothing left under a claim name")
    }

    @Test("files of one long name moved with sidecars: each gets its own sidecar, though shortened sidecar names collide")
    func longNamesWithSidecars() throws {
        let directories = try Directories()
        defer { directories.remove() }
        let name = String(repeating: "y", count: 246) + ".bin"
        for token in ["01JOBA", "01JOBB", "01JOBC"] {
            directories.write(directories.spool + "/" + name, token)
            let outcome = try directories.move(name, token: token, sidecar: #"{"job":"\#(token)"}"#)
            guard case .done(let path?) = outcome else { Issue.record("\(token): \(outcome)"); continue }
            let moved = String(decoding: path, as: UTF8.self)
            #expect(FileManager.default.contents(atPath: moved) == Data(token.utf8))
            let sidecar = String(decoding: SpoolFiles.sidecarName(for: Array((moved as NSString).lastPathComponent.utf8)), as: UTF8.self)
            #expect(FileManager.default.contents(atPath: directories.destination + "/" + sidecar).map { String(decoding: $0, as: UTF8.self) }
                == #"{"job":"\#(token)"}"#, "\(token)'s sidecar")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.spool).isEmpty, "nothing left under a claim name")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directories.destination).count == 6)
    }

    @Test("a field sidecar moved beside its file never replaces a file there (a failed directory two spools share); the same bytes again are already in place")
    func fieldSidecarNeverReplaces() throws {
        let directories = try Directories()
        defer { directories.remove() }
        // Another spool's refused file, named as this file's sidecar would be.
        directories.write(directories.destination + "/scan.pdf.fields.toml", "another spool's file")
        directories.write(directories.spool + "/scan.pdf", "page")
        directories.write(directories.spool + "/scan.pdf.fields.toml", "alt = \"a scan\"\n")
        let files = SpoolFiles(directory: directories.spool)
        let sidecar = try #require(DirectoryHandle.open(directories.spool).status(of: Array("scan.pdf.fields.toml".utf8)))
        // The file goes under a name whose sidecar's name is free, and its sidecar beside it.
        guard case .done(let moved?) = try directories.move("scan.pdf", token: "01JOBS") else { Issue.record("not moved"); return }
        #expect(String(decoding: moved, as: UTF8.self) == directories.destination + "/scan.1.pdf")
        try files.disposeOfFieldSidecar(of: Array("scan.pdf".utf8), expected: sidecar.version, movedTo: moved)
        #expect(FileManager.default.contents(atPath: directories.destination + "/scan.pdf.fields.toml") == Data("another spool's file".utf8))
        #expect(FileManager.default.contents(atPath: directories.destination + "/scan.1.pdf.fields.toml") == Data("alt = \"a scan\"\n".utf8))
        #expect(!FileManager.default.fileExists(atPath: directories.spool + "/scan.pdf.fields.toml"))
        // A crash after the rename, before its record: the next run finds the file under the name
        // the move took, past the one it skipped.
        let found = try files.move(Array("scan.pdf".utf8), ifSameVersionAs: try #require(DirectoryHandle.open(directories.destination).status(of: Array("scan.1.pdf".utf8))),
                                   to: .init(directory: directories.destination), token: "01JOBS")
        #expect(found == .done(finalPath: moved))
        // A name taken anyway (a race): never replaced; the same bytes again (a run cut short after
        // writing them) are ours.
        directories.write(directories.spool + "/other.pdf.fields.toml", "alt = \"other\"\n")
        directories.write(directories.destination + "/other.pdf.fields.toml", "not ours")
        let other = try #require(DirectoryHandle.open(directories.spool).status(of: Array("other.pdf.fields.toml".utf8)))
        let otherMoved = Array((directories.destination + "/other.pdf").utf8)
        try files.disposeOfFieldSidecar(of: Array("other.pdf".utf8), expected: other.version, movedTo: otherMoved)
        #expect(FileManager.default.contents(atPath: directories.destination + "/other.pdf.fields.toml") == Data("not ours".utf8))
        #expect(FileManager.default.contents(atPath: directories.destination + "/other.pdf.1.fields.toml") == Data("alt = \"other\"\n".utf8))
        directories.write(directories.spool + "/other.pdf.fields.toml", "alt = \"other\"\n")
        let again = try #require(DirectoryHandle.open(directories.spool).status(of: Array("other.pdf.fields.toml".utf8)))
        try files.disposeOfFieldSidecar(of: Array("other.pdf".utf8), expected: again.version, movedTo: otherMoved)
        #expect(!FileManager.default.fileExists(atPath: directories.destination + "/other.pdf.2.fields.toml"))
    }
}
