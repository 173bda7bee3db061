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

    @Test("read hands a range over in pieces of at most readPieceSize, in order, whatever the range's alignment",
          arguments: [0..<1, 0..<(2 * SourceFile.readPieceSize), 17..<(SourceFile.readPieceSize + 18), 12_345..<(3 * SourceFile.readPieceSize + 1)])
    func pieces(range: Range<Int>) throws {
        let directory = try TemporaryDirectory("ferry-source")
        let content = pseudoRandomBytes(3 * SourceFile.readPieceSize + 1, seed: 9)
        try Data(content).write(to: URL(fileURLWithPath: directory.url("file")))
        let source = try open(directory.url("file"))
        defer { source.close() }
        var read: [UInt8] = []
        var largest = 0
        try source.read(Int64(range.lowerBound)..<Int64(range.upperBound)) { piece in
            largest = max(largest, piece.count)
            read.append(contentsOf: piece)
        }
        #expect(read == Array(content[range]))
        #expect(largest <= SourceFile.readPieceSize)
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
