import FerryConfig
@testable import FerryDaemon
import FerryQueue
import Testing

@Suite("Placeholders: one renderer for form fields, tus metadata and put URLs")
struct PlaceholdersTests {
    static let job = Job(
        id: JobID(rawValue: "01JPLACEHOLDER000000000000"), spool: "s", relativePath: Array("dir/a b#".utf8) + [0xFF] + Array(".jpg".utf8),
        identity: FileIdentity(device: 1, inode: 2, size: 42, modificationTime: 1_795_340_400_000_000_000), boundary: "b",
        now: .now)

    static func template(_ placeholders: [ValueTemplate.Placeholder]) -> ValueTemplate {
        ValueTemplate(segments: placeholders.flatMap { [.placeholder($0), .literal("|")] }, containsSecret: false)
    }

    @Test("text: names as UTF-8 with U+FFFD for a bad byte, in {filename} and {relative_path} alike")
    func text() {
        let placeholders = Placeholders(job: Self.job, size: 42, modificationTime: Self.job.identity.modificationTime, sha256: "abc")
        let rendered = placeholders.render(Self.template([.filename, .relativePath, .size, .mtime, .sha256, .id]), for: .text)
        #expect(rendered == "a b#\u{FFFD}.jpg|dir/a b#\u{FFFD}.jpg|42|2026-11-22T09:40:00Z|abc|01JPLACEHOLDER000000000000|")
    }

    @Test("url: raw bytes percent-encoded, slashes kept only in {relative_path}")
    func url() {
        let placeholders = Placeholders(job: Self.job, size: 42, modificationTime: Self.job.identity.modificationTime)
        let rendered = placeholders.render(Self.template([.filename, .relativePath, .mtime]), for: .url)
        #expect(rendered == "a%20b%23%FF.jpg|dir/a%20b%23%FF.jpg|2026-11-22T09%3A40%3A00Z|")
    }

    @Test("needsDigest only when {sha256} is used")
    func digest() {
        #expect(Placeholders.needsDigest([Self.template([.sha256])]))
        #expect(!Placeholders.needsDigest([Self.template([.filename, .size]), .literal("x")]))
    }
}
