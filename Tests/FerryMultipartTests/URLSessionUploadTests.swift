@testable import FerryMultipart
import FerryTestSupport
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A file in `directory` holding `bytes`, as a file URL.
private func makeFile(_ bytes: [UInt8], named name: String, in directory: String) throws -> URL {
    let url = URL(fileURLWithPath: directory).appendingPathComponent(name, isDirectory: false)
    try Data(bytes).write(to: url)
    return url
}

/// `count` pseudo-random bytes with runs that look like multipart framing (CRLF, `--`, a delimiter).
private func hostileBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var bytes = pseudoRandomBytes(count, seed: seed)
    let framing = Array("\r\n--ferry-\r\n\r\n--".utf8)
    for offset in stride(from: 0, to: max(0, count - framing.count), by: 65_521) {
        bytes.replaceSubrange(offset..<(offset + framing.count), with: framing)
    }
    return bytes
}

/// The bytes of the file at `url`.
private func contents(of url: URL) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: url))
}

/// A header of a request the Python receiver recorded, by name in any case.
private func header(_ name: String, of request: PythonReceivedRequest) -> String? {
    request.headers.first { $0.key.lowercased() == name.lowercased() }?.value
}

@Suite("MultipartForm sent with URLSession (FoundationNetworking) to independent parsers", .serialized)
struct URLSessionUploadTests {
    /// A name with every character a careless encoder gets wrong: quotes, a backslash, a semicolon
    /// and `name=`, a percent sign, non-ASCII letters and an emoji.
    static let trickyName = "naïve \"quoted\" back\\slash; name=x 100% 🚀.png"
    static let description = "a \"quoted\" value\non two lines; with ünïcödé ✓"

    @Test("upload(for:fromFile:) delivers the file byte-exact with its tricky name and fields, Content-Length exact",
          arguments: [PythonReceiver.Parser.werkzeug, .pythonMultipart])
    func uploadBodyFile(parser: PythonReceiver.Parser) async throws {
        let directory = try TemporaryDirectory("ferry-urlsession")
        let server = try await PythonReceiver(parser: parser, directory: directory.url("python"))
        let content = hostileBytes((3 << 20) + 17, seed: 7)
        // The name on disk is the tricky one: the filename sent is the URL's last path component.
        let fileURL = try makeFile(content, named: Self.trickyName, in: directory.path)
        let form = try MultipartForm(
            fields: ["description": Self.description, "tag": "x"],
            files: [MultipartFormFile(field: "file", url: fileURL)])
        #expect(form.files[0].filename == Self.trickyName)
        let body = try form.writeBodyFile(in: URL(fileURLWithPath: directory.path))
        defer { try? body.remove() }
        #expect(body.contentLength == form.contentLength)
        #expect(Int64(try contents(of: body.url).count) == body.contentLength)

        var request = URLRequest(url: try #require(URL(string: server.url + "/upload")))
        request.httpMethod = "POST"
        request.setValue(body.contentType, forHTTPHeaderField: "Content-Type")
        request.setValue(String(body.contentLength), forHTTPHeaderField: "Content-Length")
        let (_, response) = try await URLSession.shared.upload(for: request, fromFile: body.url)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)

        let received = try #require(server.requests.first, "the \(parser.rawValue) server recorded no request")
        #expect(server.requests.count == 1)
        #expect(received.status == 201, "\(parser.rawValue) rejected the body: \(received.error ?? "")")
        #expect(header("Content-Length", of: received) == String(body.contentLength))
        #expect(header("Transfer-Encoding", of: received) == nil)
        #expect(header("Content-Type", of: received) == body.contentType)
        try Self.checkReceived(received, file: content, parser: parser)
    }

    @Test("upload(for:from:) with the in-memory body delivers the same", arguments: [
        PythonReceiver.Parser.werkzeug, .pythonMultipart,
    ])
    func uploadBytes(parser: PythonReceiver.Parser) async throws {
        let directory = try TemporaryDirectory("ferry-urlsession")
        let server = try await PythonReceiver(parser: parser, directory: directory.url("python"))
        let content = hostileBytes(200_003, seed: 8)
        let fileURL = try makeFile(content, named: "source.bin", in: directory.path)
        let form = try MultipartForm(
            fields: ["description": Self.description, "tag": "x"],
            files: [MultipartFormFile(field: "file", url: fileURL, filename: Self.trickyName)])
        let data = try form.data()
        #expect(Int64(data.count) == form.contentLength)

        var request = URLRequest(url: try #require(URL(string: server.url + "/upload")))
        request.httpMethod = "POST"
        request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        let (_, response) = try await URLSession.shared.upload(for: request, from: data)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)

        let received = try #require(server.requests.first, "the \(parser.rawValue) server recorded no request")
        #expect(header("Content-Length", of: received) == String(form.contentLength))
        try Self.checkReceived(received, file: content, parser: parser)
    }

    /// The one file part and both fields arrived as sent.
    static func checkReceived(_ received: PythonReceivedRequest, file content: [UInt8], parser: PythonReceiver.Parser) throws {
        #expect(received.fields["description"] == description)
        #expect(received.fields["tag"] == "x")
        #expect(received.files.count == 1)
        let file = try #require(received.files.first)
        #expect(file.field == "file")
        // Werkzeug reverses the browsers' escaping of `"`; python-multipart hands the parameter back
        // as sent (%22 intact). Either way, nothing else in the name may change.
        let expectedName = parser == .werkzeug ? trickyName : trickyName.replacingOccurrences(of: "\"", with: "%22")
        #expect(file.filename == expectedName)
        #expect(file.size == content.count)
        #expect(file.sha256 == sha256Hex(content))
    }
}

@Suite("MultipartForm: the body file, the bytes and the errors")
struct MultipartFormTests {
    @Test("contentLength is the written file's size, and bytes() is the file's bytes", arguments: [0, 1, 4095, 65_536, (1 << 20) + 3])
    func lengthAndBytesAgree(size: Int) throws {
        let directory = try TemporaryDirectory("ferry-form")
        let first = try makeFile(hostileBytes(size, seed: UInt64(size)), named: "first.jpg", in: directory.path)
        let second = try makeFile(Array("second file\r\n".utf8), named: "notes", in: directory.path)
        let form = try MultipartForm(
            fieldList: [(name: "a", value: ""), (name: "a", value: "repeated"), (name: "ü \"q\"", value: "x\r\ny")],
            files: [MultipartFormFile(field: "photo", url: first), MultipartFormFile(field: "notes", url: second, contentType: "text/plain")])
        #expect(form.fileLengths == [Int64(size), 13])
        let body = try form.writeBodyFile(in: URL(fileURLWithPath: directory.path))
        defer { try? body.remove() }
        let written = try contents(of: body.url)
        #expect(Int64(written.count) == form.contentLength)
        #expect(body.contentLength == form.contentLength)
        #expect(try form.bytes() == written)
        #expect(try form.data() == Data(written))

        let parsed = try parseWithMultipartKit(written, boundary: form.boundary.value)
        #expect(parsed.count == 5)
        #expect(parsed.last?.body == Array("second file\r\n".utf8))
        #expect(parsed[3].headers["content-type"] == "image/jpeg")
        #expect(parsed[2].headers["content-disposition"] == "form-data; name=\"ü %22q%22\"")
    }

    @Test("The form's body is exactly what MultipartBody writes: one encoder")
    func goldenBytes() throws {
        let directory = try TemporaryDirectory("ferry-form")
        let file = try makeFile(Array("hello".utf8), named: "x.txt", in: directory.path)
        let form = try MultipartForm(fields: ["description": "a photo"], files: [.init(field: "file", url: file)],
                                     boundary: try MultipartBoundary("BOUNDARY"))
        let expected = goldenPhotoForm
        #expect(String(decoding: try form.bytes(), as: UTF8.self) == expected)
        #expect(form.contentLength == Int64(expected.utf8.count))
        #expect(form.contentType == "multipart/form-data; boundary=BOUNDARY")
    }

    @Test("The portable read/write copier gives the same body file as the automatic one")
    func portableCopierAgrees() throws {
        let directory = try TemporaryDirectory("ferry-form")
        let content = hostileBytes((3 << 20) + 5, seed: 11)
        let file = try makeFile(content, named: "big.bin", in: directory.path)
        let form = try MultipartForm(fields: ["k": "v"], files: [.init(field: "file", url: file)])
        let output = URL(fileURLWithPath: directory.path)
        let automatic = try form.writeBodyFile(in: output, copier: .automatic)
        let portable = try form.writeBodyFile(in: output, copier: .readWrite)
        #expect(automatic.url != portable.url)
        #expect(try contents(of: automatic.url) == contents(of: portable.url))
        #expect(try contents(of: portable.url) == form.bytes(limit: 8 << 20))
    }

    @Test("Across filesystems, where copy_file_range refuses (EXDEV), the copy falls back to read/write")
    func crossFilesystemFallback() throws {
        // /dev/shm is tmpfs and the temporary directory another filesystem: the kernel refuses the
        // in-kernel copy between them and the copier finishes with reads and writes.
        let shared = try TemporaryDirectory("ferry-form")
        try #require(FileManager.default.fileExists(atPath: "/dev/shm"), "this test needs /dev/shm (tmpfs)")
        let memory = try TemporaryDirectoryOn("/dev/shm")
        let content = hostileBytes((2 << 20) + 9, seed: 12)
        let file = try makeFile(content, named: "in-memory.bin", in: memory.path)
        let form = try MultipartForm(files: [.init(field: "file", url: file)])
        let body = try form.writeBodyFile(in: URL(fileURLWithPath: shared.path))
        let parsed = try parseWithMultipartKit(try contents(of: body.url), boundary: form.boundary.value)
        #expect(parsed.first?.body == content)
        #expect(Int64(try contents(of: body.url).count) == body.contentLength)
    }

    @Test("Bad input is refused before anything is written, with a message saying what to do")
    func refusedInput() throws {
        let directory = try TemporaryDirectory("ferry-form")
        let file = try makeFile([1, 2, 3], named: "f.bin", in: directory.path)
        let cases: [(String, () throws(MultipartError) -> MultipartForm, MultipartError, String)] = [
            ("missing file", { () throws(MultipartError) in try MultipartForm(files: [.init(field: "f", url: URL(fileURLWithPath: directory.url("gone")))]) },
             .fileNotFound(path: directory.url("gone")), "no file at"),
            ("directory", { () throws(MultipartError) in try MultipartForm(files: [.init(field: "f", url: URL(fileURLWithPath: directory.path))]) },
             .notARegularFile(path: directory.path), "only regular files can be sent"),
            ("web URL", { () throws(MultipartError) in try MultipartForm(files: [.init(field: "f", url: URL(string: "https://example.com/a.png")!)]) },
             .notAFileURL("https://example.com/a.png"), "URL(fileURLWithPath:)"),
            ("CR LF in a field name", { () throws(MultipartError) in try MultipartForm(fields: ["a\r\nX-Evil: 1": "v"]) },
             .invalidFieldName("a\r\nX-Evil: 1"), "exactly as the server's API documents"),
            ("LF in a file's field name", { () throws(MultipartError) in try MultipartForm(files: [.init(field: "f\n", url: file)]) },
             .invalidFieldName("f\n"), "CR, LF or NUL"),
            ("CR LF in a content type", { () throws(MultipartError) in try MultipartForm(files: [.init(field: "f", url: file, contentType: "text/plain\r\nX: 1")]) },
             .invalidHeaderValue(what: "the content type of part \"f\""), "cannot appear in a part header"),
        ]
        for (what, make, expected, advice) in cases {
            do {
                _ = try make()
                Issue.record("\(what): accepted")
            } catch {
                #expect(error == expected, "\(what)")
                #expect(error.description.contains(advice), "\(what): \(error)")
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["f.bin"])
    }

    @Test("bytes() refuses a body over its limit and points to the body file")
    func memoryLimit() throws {
        let directory = try TemporaryDirectory("ferry-form")
        let file = try makeFile([UInt8](repeating: 7, count: 1000), named: "f.bin", in: directory.path)
        let form = try MultipartForm(files: [.init(field: "f", url: file)])
        #expect(throws: MultipartError.tooLargeForMemory(contentLength: form.contentLength, limit: 999)) {
            try form.bytes(limit: 999)
        }
        #expect(MultipartError.tooLargeForMemory(contentLength: 1, limit: 0).description.contains("writeBodyFile(in:)"))
        #expect(try form.bytes(limit: form.contentLength).count == Int(form.contentLength))
    }

    @Test("A file that changed after the form was made is reported, and no body file is left", arguments: [999, 1001])
    func changedFile(newLength: Int) throws {
        let directory = try TemporaryDirectory("ferry-form")
        let file = try makeFile([UInt8](repeating: 7, count: 1000), named: "f.bin", in: directory.path)
        let form = try MultipartForm(files: [.init(field: "f", url: file)])
        try Data([UInt8](repeating: 8, count: newLength)).write(to: file)
        let output = try directory.makeDirectory("out")
        #expect(throws: MultipartError.sourceChanged(expected: 1000, actual: Int64(newLength))) {
            try form.writeBodyFile(in: URL(fileURLWithPath: output))
        }
        #expect(throws: MultipartError.sourceChanged(expected: 1000, actual: Int64(newLength))) { try form.bytes() }
        #expect(try FileManager.default.contentsOfDirectory(atPath: output).isEmpty)
        try FileManager.default.removeItem(at: file)
        #expect(throws: MultipartError.fileNotFound(path: file.path)) { try form.bytes() }
    }
}

/// A fresh directory under `base` (such as /dev/shm), removed with everything in it when released.
private final class TemporaryDirectoryOn {
    let path: String
    init(_ base: String) throws {
        var template = Array("\(base)/ferry-form.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp in \(base) failed (errno \(errno))") }
        path = String(cString: made)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
