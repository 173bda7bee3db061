import FerryPortable
import FerryMultipart
import Foundation
import MultipartKit
import NIOCore
import SystemPackage
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A scratch directory for body files, removed at the end of each test.
final class Scratch {
    let path: String
    init() {
        var template = Array("/tmp/ferry-multipart.XXXXXX".utf8CString)
        path = String(cString: mkdtemp(&template)!)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `bytes` to a new file and returns it open for reading.
    func source(_ bytes: [UInt8], name: String = "source") throws -> SystemPackage.FileDescriptor {
        let file = path + "/" + name
        _ = FileManager.default.createFile(atPath: file, contents: Data(bytes))
        return try SystemPackage.FileDescriptor.open(FilePath(file), .readOnly)
    }
}

/// The body browsers send for a form with the field `description` = "a photo" and the file `x.txt`
/// (text/plain, "hello") under boundary `BOUNDARY`: no preamble, CRLF everywhere, the close delimiter.
let goldenPhotoForm = "--BOUNDARY\r\n"
    + "Content-Disposition: form-data; name=\"description\"\r\n"
    + "\r\n"
    + "a photo\r\n"
    + "--BOUNDARY\r\n"
    + "Content-Disposition: form-data; name=\"file\"; filename=\"x.txt\"\r\n"
    + "Content-Type: text/plain\r\n"
    + "\r\n"
    + "hello\r\n"
    + "--BOUNDARY--\r\n"

/// Encodes `parts` with `boundary` into a file and returns the file's bytes.
func encode(_ parts: [FerryMultipart.MultipartPart], boundary: String = "BOUNDARY", copier: FileCopier = .automatic, in scratch: Scratch) throws -> (body: MultipartBody, bytes: [UInt8]) {
    let body = try MultipartBody(boundary: try MultipartBoundary(boundary), parts: parts)
    let path = scratch.path + "/body-\(UUID().uuidString)"
    let written = try body.writeFile(at: FilePath(path), copier: copier)
    let bytes = [UInt8](FileManager.default.contents(atPath: path)!)
    #expect(written == Int64(bytes.count))
    return (body, bytes)
}

/// One part as an independent parser (multipart-kit) saw it.
struct ParsedPart: Equatable {
    var headers: [String: String]
    var body: [UInt8]
}

/// Parses with vapor/multipart-kit, feeding the body in uneven chunks.
func parseWithMultipartKit(_ bytes: [UInt8], boundary: String) throws -> [ParsedPart] {
    let parser = MultipartKit.MultipartParser(boundary: boundary)
    var parts: [ParsedPart] = []
    var current = ParsedPart(headers: [:], body: [])
    parser.onHeader = { name, value in current.headers[name.lowercased()] = value }
    parser.onBody = { buffer in current.body += buffer.readBytes(length: buffer.readableBytes) ?? [] }
    parser.onPartComplete = {
        parts.append(current)
        current = ParsedPart(headers: [:], body: [])
    }
    var offset = 0
    var step = 1
    while offset < bytes.count {
        let end = min(bytes.count, offset + step)
        try parser.execute(Array(bytes[offset..<end]))
        offset = end
        step = step * 3 + 7
    }
    return parts
}

@Suite("Multipart body framing (RFC 7578)")
struct MultipartBodyTests {
    @Test("Content-Type is exactly multipart/form-data; boundary=B, with no charset")
    func contentType() throws {
        let body = try MultipartBody(boundary: try MultipartBoundary("abc-123"), parts: [])
        #expect(body.contentType == "multipart/form-data; boundary=abc-123")
    }

    @Test("The body is byte-for-byte what browsers send: no preamble, CRLF, close delimiter")
    func goldenBytes() throws {
        let scratch = Scratch()
        let source = try scratch.source(Array("hello".utf8))
        defer { try? source.close() }
        let (body, bytes) = try encode([
            .field(name: "description", value: "a photo"),
            .file(name: "file", filename: "x.txt", contentType: "text/plain", descriptor: source, length: 5),
        ], in: scratch)
        let expected = goldenPhotoForm
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
        #expect(body.contentLength == Int64(expected.utf8.count))
    }

    @Test("Framing: first bytes are the delimiter, last are the close delimiter, every line break is CRLF")
    func framing() throws {
        let scratch = Scratch()
        let source = try scratch.source([])
        defer { try? source.close() }
        let (_, bytes) = try encode([
            .field(name: "a", value: "1"), .field(name: "b", value: ""),
            .file(name: "f", filename: "empty.bin", contentType: "application/octet-stream", descriptor: source, length: 0),
        ], boundary: "b0und", in: scratch)
        #expect(bytes.starts(with: Array("--b0und\r\n".utf8)))
        #expect(Array(bytes.suffix(9)) == Array("--b0und--\r\n".utf8).suffix(9))
        #expect(String(decoding: bytes, as: UTF8.self).hasSuffix("\r\n--b0und--\r\n"))
        for (index, byte) in bytes.enumerated() where byte == 0x0A {
            #expect(index > 0 && bytes[index - 1] == 0x0D, "bare LF at \(index)")
        }
    }

    @Test("Content-Length is exact for files of many sizes", arguments: [0, 1, 2, 4095, 65_536, 1_048_579])
    func exactLength(size: Int) throws {
        let scratch = Scratch()
        let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let source = try scratch.source(content)
        defer { try? source.close() }
        let (body, bytes) = try encode([
            .field(name: "n", value: "ünïcödé ✓"),
            .file(name: "file", filename: "data.bin", contentType: "application/octet-stream", descriptor: source, length: Int64(size)),
        ], boundary: MultipartBoundary.random().value, in: scratch)
        #expect(body.contentLength == Int64(bytes.count))
    }

    @Test("Text fields carry no Content-Type; file parts carry one")
    func partContentTypes() throws {
        let scratch = Scratch()
        let source = try scratch.source([1, 2, 3])
        defer { try? source.close() }
        let (_, bytes) = try encode([
            .field(name: "title", value: "x"),
            .file(name: "file", filename: "a.png", contentType: MediaType.forFilename("a.png"), descriptor: source, length: 3),
        ], in: scratch)
        let parts = try parseWithMultipartKit(bytes, boundary: "BOUNDARY")
        #expect(parts.count == 2)
        #expect(parts[0].headers["content-type"] == nil)
        #expect(parts[1].headers["content-type"] == "image/png")
    }

    @Test("A content type with CR or LF is refused, not sent")
    func headerInjectionRefused() throws {
        let scratch = Scratch()
        let source = try scratch.source([])
        defer { try? source.close() }
        #expect(throws: FerryMultipart.MultipartError.self) {
            _ = try MultipartBody(boundary: try MultipartBoundary("B"), parts: [
                .file(name: "f", filename: "x", contentType: "text/plain\r\nX-Evil: 1", descriptor: source, length: 0),
            ])
        }
    }

    @Test("Rebuilding with the stored boundary gives a byte-identical body")
    func rebuildIsIdentical() throws {
        let scratch = Scratch()
        let content = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }
        let source = try scratch.source(content)
        defer { try? source.close() }
        let boundary = MultipartBoundary.random().value
        let parts: [FerryMultipart.MultipartPart] = [
            .field(name: "id", value: "01J0000"),
            .file(name: "file", filename: "photo.jpg", contentType: "image/jpeg", descriptor: source, length: 10_000),
        ]
        let first = try encode(parts, boundary: boundary, in: scratch).bytes
        let second = try encode(parts, boundary: boundary, copier: .readWrite, in: scratch).bytes
        #expect(first == second)
    }

    @Test("copy_file_range and read/write fallback produce the same bytes")
    func copiersAgree() throws {
        let scratch = Scratch()
        let content = (0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 ^ ($0 >> 8)) }
        let source = try scratch.source(content)
        defer { try? source.close() }
        let parts: [FerryMultipart.MultipartPart] = [
            .file(name: "file", filename: "big.bin", contentType: "application/octet-stream", descriptor: source, length: Int64(content.count)),
        ]
        let kernel = try encode(parts, copier: .automatic, in: scratch).bytes
        let userspace = try encode(parts, copier: .readWrite, in: scratch).bytes
        #expect(kernel == userspace)
        let parsed = try parseWithMultipartKit(kernel, boundary: "BOUNDARY")
        #expect(parsed.first?.body == content)
    }

    @Test("A source shorter than planned is reported, and no partial body is left behind")
    func truncatedSource() throws {
        let scratch = Scratch()
        let source = try scratch.source([1, 2, 3])
        defer { try? source.close() }
        for copier in [FileCopier.automatic, .readWrite] {
            let body = try MultipartBody(boundary: try MultipartBoundary("B"), parts: [
                .file(name: "f", filename: "x", contentType: "application/octet-stream", descriptor: source, length: 10),
            ])
            let path = scratch.path + "/short-\(copier)"
            #expect(throws: FerryMultipart.MultipartError.sourceChanged(expected: 10, actual: 3)) {
                try body.writeFile(at: FilePath(path), copier: copier)
            }
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("Body files are created mode 0600 and never through an existing file or symlink")
    func bodyFileSafety() throws {
        let scratch = Scratch()
        let body = try MultipartBody(boundary: try MultipartBoundary("B"), parts: [.field(name: "a", value: "b")])
        let path = scratch.path + "/body"
        try body.writeFile(at: FilePath(path))
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)

        // An existing file is not overwritten.
        #expect(throws: FerryMultipart.MultipartError.self) { try body.writeFile(at: FilePath(path)) }
        // A symlink planted at the path is not followed.
        let target = scratch.path + "/target"
        _ = FileManager.default.createFile(atPath: target, contents: Data("keep".utf8))
        let link = scratch.path + "/link"
        symlink(target, link)
        #expect(throws: FerryMultipart.MultipartError.self) { try body.writeFile(at: FilePath(link)) }
        #expect(FileManager.default.contents(atPath: target) == Data("keep".utf8))
    }
}

@Suite("Field name and file name escaping (WHATWG)")
struct EscapingTests {
    @Test("\", CR, LF and the other controls but tab are percent-encoded; a backslash is doubled only where a quoted-pair reader would misread it", arguments: [
        ("plain.txt", "plain.txt"),
        ("quote\"d.txt", "quote%22d.txt"),
        ("line\nfeed", "line%0Afeed"),
        ("carriage\rreturn", "carriage%0Dreturn"),
        ("semi;colon; name=x", "semi;colon; name=x"),
        ("back\\slash", "back\\slash"),
        // A backslash a quoted-pair reader would take for an escape is doubled: last, or before a tspecial.
        ("ends in\\", "ends in\\\\"),
        ("two\\\\back", "two\\\\\\back"),
        ("a\\;b\\=c\\/d", "a\\\\;b\\\\=c\\\\/d"),
        ("a\\\"b", "a\\%22b"),
        ("already%22escaped", "already%22escaped"),
        ("spaces  and\ttab", "spaces  and\ttab"),
        ("ünïcödé 日本 😀.jpg", "ünïcödé 日本 😀.jpg"),
        ("'single'", "'single'"),
        // Other controls, which Go's textproto and busboy refuse raw in a header: %XX too.
        ("scan\u{1B}.pdf", "scan%1B.pdf"),
        ("a\u{01}b\u{7F}c\u{1F}d\u{0B}e\u{08}", "a%01b%7Fc%1Fd%0Be%08"),
    ])
    func escape(input: String, expected: String) {
        #expect(FerryMultipart.MultipartPart.escapeParameter(input) == Array(expected.utf8))
    }

    @Test("Every ASCII byte in a name escapes to bytes Go's textproto and busboy accept in a header (tab, 0x20–0x7E, UTF-8)")
    func escapedBytesAreHeaderBytes() {
        for scalar in (0...0x7F).compactMap(Unicode.Scalar.init) {
            let escaped = FerryMultipart.MultipartPart.escapeParameter("a\(Character(scalar))b")
            #expect(escaped.allSatisfy { $0 == 0x09 || (0x20...0x7E).contains($0) || $0 >= 0x80 }, "byte \(scalar.value)")
        }
    }

    @Test("Escaped names survive an independent parser, raw UTF-8 and no filename*")
    func roundTripNames() throws {
        let scratch = Scratch()
        let source = try scratch.source(Array("x".utf8))
        defer { try? source.close() }
        let filename = "a \"quoted\"; name=évil\r\n.txt"
        let (_, bytes) = try encode([
            .field(name: "fi\"eld", value: "v"),
            .file(name: "file", filename: filename, contentType: "text/plain", descriptor: source, length: 1),
        ], in: scratch)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!text.contains("filename*"))
        #expect(text.contains("filename=\"a %22quoted%22; name=évil%0D%0A.txt\""))
        let parts = try parseWithMultipartKit(bytes, boundary: "BOUNDARY")
        #expect(parts.count == 2)
        #expect(parts[0].headers["content-disposition"] == "form-data; name=\"fi%22eld\"")
        #expect(parts[1].headers["content-disposition"] == "form-data; name=\"file\"; filename=\"a %22quoted%22; name=évil%0D%0A.txt\"")
    }
}

@Suite("Boundaries")
struct BoundaryTests {
    @Test("Random boundaries are valid, long enough for 128+ bits, and distinct")
    func randomBoundaries() {
        var seen = Set<String>()
        for _ in 0..<1000 {
            let boundary = MultipartBoundary.random().value
            #expect(MultipartBoundary.isValid(boundary))
            #expect((1...70).contains(boundary.utf8.count))
            let random = boundary.dropFirst("ferry-".count)
            // 62 symbols per character: 32 characters carry 190 bits.
            #expect(Double(random.count) * log2(62.0) >= 128)
            #expect(random.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
            seen.insert(boundary)
        }
        #expect(seen.count == 1000)
    }

    @Test("Invalid boundaries are refused", arguments: ["", String(repeating: "a", count: 71), "has space", "quote\"", "plus+", "colon:", "é"])
    func invalid(boundary: String) {
        #expect(throws: FerryMultipart.MultipartError.self) { try MultipartBoundary(boundary) }
    }

    @Test("Boundaries of 1 and 70 characters are accepted")
    func limits() throws {
        _ = try MultipartBoundary("a")
        _ = try MultipartBoundary(String(repeating: "Z", count: 70))
    }
}

@Suite("Media types by extension")
struct MediaTypeTests {
    @Test("Common types are recognised, case-insensitively", arguments: [
        ("photo.jpg", "image/jpeg"), ("PHOTO.JPEG", "image/jpeg"), ("a.png", "image/png"), ("a.heic", "image/heic"),
        ("clip.mp4", "video/mp4"), ("clip.MOV", "video/quicktime"), ("song.mp3", "audio/mpeg"), ("a.flac", "audio/flac"),
        ("doc.pdf", "application/pdf"), ("a.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("a.zip", "application/zip"), ("a.tar.gz", "application/gzip"), ("notes.txt", "text/plain"), ("data.csv", "text/csv"),
        ("a.json", "application/json"),
    ])
    func known(name: String, type: String) {
        #expect(MediaType.forFilename(name) == type)
    }

    @Test("Anything else is application/octet-stream", arguments: ["noextension", ".bashrc", "weird.xyz123", "trailing.", ""])
    func unknown(name: String) {
        #expect(MediaType.forFilename(name) == "application/octet-stream")
    }
}

@Suite("Round trips through multipart-kit")
struct RoundTripTests {
    @Test("Hostile file contents come back byte-identical", arguments: 0..<12)
    func hostileContents(seed: Int) throws {
        let scratch = Scratch()
        let boundary = MultipartBoundary.random().value
        // Content full of near-delimiters: CRLF, "--", the boundary's prefix, and the boundary with a wrong last char.
        var content: [UInt8] = []
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
        let pieces: [[UInt8]] = [
            Array("\r\n".utf8), Array("--".utf8), Array("\r\n--".utf8), Array("\r\n--\(boundary.prefix(10))".utf8),
            Array("\r\n--\(boundary.dropLast())X".utf8), Array("--\(boundary.dropLast())".utf8), [0], [0xFF, 0xFE], Array("\n\n".utf8),
        ]
        for _ in 0..<(seed * 97 + 5) {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            if state % 3 == 0 {
                content += pieces[Int((state >> 33) % UInt64(pieces.count))]
            } else {
                content += (0..<Int((state >> 40) % 64)).map { UInt8(truncatingIfNeeded: state >> (UInt64($0) % 56)) }
            }
        }
        if seed % 2 == 0 { content += Array("\r\n".utf8) }  // a file ending in CRLF
        // The one thing no boundary-delimited format can carry is its own delimiter; a random boundary makes
        // that impossible in practice. The generator can complete it by chance, so break any occurrence.
        let delimiter = Data("\r\n--\(boundary)".utf8)
        var data = Data(content)
        while let range = data.range(of: delimiter) { data[range.upperBound - 1] ^= 0x20 }
        content = [UInt8](data)
        try #require(!String(decoding: content, as: UTF8.self).contains("\r\n--\(boundary)"), "fixture: the content must not hold the delimiter")
        let source = try scratch.source(content)
        defer { try? source.close() }
        let (_, bytes) = try encode([
            .field(name: "caption", value: "line one\r\nline two"),
            .file(name: "file", filename: "payload.bin", contentType: "application/octet-stream", descriptor: source, length: Int64(content.count)),
        ], boundary: boundary, in: scratch)
        let parts = try parseWithMultipartKit(bytes, boundary: boundary)
        #expect(parts.count == 2)
        #expect(parts[0].body == Array("line one\r\nline two".utf8))
        #expect(parts[1].body == content)
    }

    @Test("A zero-byte file is a part with an empty body")
    func zeroBytes() throws {
        let scratch = Scratch()
        let source = try scratch.source([])
        defer { try? source.close() }
        let (_, bytes) = try encode([
            .file(name: "file", filename: "empty.txt", contentType: "text/plain", descriptor: source, length: 0),
        ], in: scratch)
        let parts = try parseWithMultipartKit(bytes, boundary: "BOUNDARY")
        #expect(parts.count == 1)
        #expect(parts[0].body.isEmpty)
        #expect(parts[0].headers["content-disposition"] == "form-data; name=\"file\"; filename=\"empty.txt\"")
    }
}
