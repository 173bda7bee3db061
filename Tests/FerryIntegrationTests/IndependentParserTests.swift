import FerryTestSupport
import Foundation
import Testing

@Suite("Bodies parsed by independent servers", .serialized)
struct IndependentParserTests {
    static let names = ["plain.bin", "quote\"d.txt", "semi;colon; name=x.jpg", "ünïcödé 日本.png", "with space.pdf", "back\\slash.txt", "empty.dat",
                        "ends in backslash\\", "two\\\\back\\;slash.txt"]

    @Test("Werkzeug and python-multipart receive every file byte-identical, with its fields", arguments: [
        PythonReceiver.Parser.werkzeug, .pythonMultipart,
    ])
    func parse(parser: PythonReceiver.Parser) async throws {
        let directory = try TemporaryDirectory()
        let server = try await PythonReceiver(parser: parser, directory: directory.url("python"))
        let spool = TestSpool(fields: ["description = \"Uploaded {filename}\"", "note = \"naïve ☃ \\\"quoted\\\"\""])
        try await withDaemonHarness(spools: [spool], url: server.url + "/upload") { harness in
            try await harness.start()
            var expected: [String: [UInt8]] = [:]
            for (index, name) in Self.names.enumerated() {
                // Binary contents with CRLFs and dashes, and one empty file.
                var bytes = pseudoRandomBytes(index == 0 ? 2 << 20 : 1000 * index, seed: UInt64(100 + index))
                if name == "empty.dat" { bytes = [] } else { bytes += Array("\r\n--\r\n".utf8) }
                expected[name] = bytes
                try harness.drop(name, bytes)
            }
            try await waitUntil("\(Self.names.count) requests at the \(parser.rawValue) server") {
                server.requests.count >= Self.names.count
            }
            try await harness.waitForQuiet()
            for request in server.requests {
                #expect(request.status == 201, "\(parser.rawValue) rejected a body: \(request.error ?? "")")
                #expect(request.files.count == 1)
                let file = try #require(request.files.first)
                #expect(file.field == "file")
                // python-multipart hands back the parameter as sent (%22 intact); Werkzeug reverses the
                // browsers' escaping. Either way it must be the file's name.
                let name = try #require(Self.names.first { $0 == file.filename || $0.replacingOccurrences(of: "\"", with: "%22") == file.filename },
                                        "unexpected filename \(file.filename ?? "nil")")
                let bytes = try #require(expected[name])
                #expect(file.size == bytes.count)
                #expect(file.sha256 == sha256Hex(bytes))
                #expect(request.fields["description"] == "Uploaded \(name)")
                #expect(request.fields["note"] == "naïve ☃ \"quoted\"")
            }
            #expect(Set(server.requests.compactMap { $0.files.first?.filename }).count == Self.names.count)
        }
    }
}
