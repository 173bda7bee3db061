import FerrySystem
import FerryTestSupport
import Foundation
import SystemPackage
import Testing

/// How a sender reads a spool file: whole or by range, and what a file that shrank gives.
@Suite("Source file reads")
struct SourceFileTests {
    func open(_ path: String) throws -> SourceFile {
        let descriptor = try FileDescriptor.open(FilePath(path), .readOnly)
        var st = stat()
        #expect(fstat(descriptor.rawValue, &st) == 0)
        return SourceFile(descriptor: descriptor, status: FileStatus(st))
    }

    @Test("bytes: the whole file, a range, an empty file")
    func bytes() throws {
        let directory = try TemporaryDirectory("ferry-source")
        let content = pseudoRandomBytes(300_001, seed: 7)
        try Data(content).write(to: URL(fileURLWithPath: directory.url("file")))
        let source = try open(directory.url("file"))
        defer { source.close() }
        #expect(try source.bytes() == content)
        #expect(try source.bytes(of: 1_000..<70_000) == Array(content[1_000..<70_000]))
        #expect(try source.bytes(of: 5..<5) == [])
        try Data().write(to: URL(fileURLWithPath: directory.url("empty")))
        let empty = try open(directory.url("empty"))
        defer { empty.close() }
        #expect(try empty.bytes() == [])
    }

    @Test("a file that ends before the range is a changed file, not short bytes")
    func shrunk() throws {
        let directory = try TemporaryDirectory("ferry-source")
        try Data(pseudoRandomBytes(10_000, seed: 8)).write(to: URL(fileURLWithPath: directory.url("file")))
        let source = try open(directory.url("file"))
        defer { source.close() }
        #expect(truncate(directory.url("file"), 4_000) == 0)
        #expect(!source.isUnchanged)
        #expect { try source.bytes() } throws: { error in
            guard case SourceReadError.changed = error else { return false }
            return true
        }
        #expect(try source.bytes(of: 0..<4_000).count == 4_000)
    }
}
