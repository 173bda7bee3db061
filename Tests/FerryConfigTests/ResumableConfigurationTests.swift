import FerryConfig
import Testing

@Suite("protocol = \"resumable\" configuration")
struct ResumableConfigurationTests {
    static let spool = """
        [[spool]]
        name = "media"
        directory = "/srv/spool"
        url = "https://media.example/api/v2/media"
        protocol = "resumable"
        """

    @Test("defaults: POST, the newest interop version, appends as large as the server allows")
    func defaults() throws {
        let configuration = try loader().parse(Self.spool, path: "/etc/ferry/ferry.toml")
        let spool = try #require(configuration.spools.first)
        #expect(spool.uploadProtocol == .resumable)
        #expect(spool.method == "POST")
        #expect(spool.resumableInterop == .latest && ResumableInteropVersion.latest.rawValue == 9)
        #expect(spool.chunkSize == nil)
        let set = try loader().parse(Self.spool + "\ninterop_version = 6\nmethod = \"put\"\nchunk_size = \"8MiB\"", path: "/etc/ferry/ferry.toml")
        #expect(set.spools.first?.resumableInterop == .v6)
        #expect(set.spools.first?.method == "PUT")
        #expect(set.spools.first?.chunkSize == 8 << 20)
        let named = try loader().parse(Self.spool.replacingOccurrences(of: "/media\"", with: "/files/{filename}\"") + "\nmethod = \"PUT\"", path: "/etc/ferry/ferry.toml")
        #expect(named.spools.first?.url.placeholders == [.filename], "the URL may name the file")
    }

    @Test("mistakes name the file, line and key, and say what to write", arguments: [
        ("interop_version = 7", "spool[0].interop_version: interop_version 7 is not one Ferry speaks; use 6 or 9"),
        ("interop_version = \"6\"", "spool[0].interop_version:"),
        ("method = \"PATCH\"", "method must be \"POST\" or \"PUT\""),
        ("chunk_size = 100", "too small"),
        ("file_field = \"f\"", "file_field applies only to protocol \"multipart\" (this spool uses \"resumable\")"),
        ("bucket = \"b\"", "bucket applies only to protocol \"s3\" (this spool uses \"resumable\")"),
        ("[spool.fields]\na = \"b\"", "fields are not sent by protocol \"resumable\""),
        ("[spool.headers]\nUpload-Complete = \"?1\"", "part of the resumable upload protocol"),
        ("[spool.headers]\nupload-draft-interop-version = \"6\"", "part of the resumable upload protocol"),
    ])
    func mistakes(line: String, expected: String) {
        let found = issues(Self.spool + "\n" + line).map(\.description)
        #expect(found.contains { $0.hasPrefix("/etc/ferry/ferry.toml:") && $0.contains(expected) }, "\(found)")
    }

    @Test("interop_version in a spool of another protocol is refused")
    func elsewhere() {
        let found = issues(Self.spool.replacingOccurrences(of: "\"resumable\"", with: "\"tus\"") + "\ninterop_version = 6").map(\.description)
        #expect(found == ["/etc/ferry/ferry.toml:6: spool[0].interop_version: interop_version applies only to protocol \"resumable\" (this spool uses \"tus\")"])
    }
}
