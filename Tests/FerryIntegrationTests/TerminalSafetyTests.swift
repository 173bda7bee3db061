import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// What a producer names a file and what a server answers reach the operator's terminal through
/// `ferryctl`: neither may move the cursor, clear the screen or set the window title.
@Suite("Terminal safety of ferryctl's human output", .serialized)
struct TerminalSafetyTests {
    /// Whether `text` holds a control character other than a newline (C0, DEL, C1), or a
    /// bidirectional override or isolate.
    static func hasControl(_ text: String) -> Bool {
        text.unicodeScalars.contains {
            ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value)
                || (0x2066...0x2069).contains($0.value)
        }
    }

    @Test("File names and response bodies are shown with control characters escaped; --json stays exact")
    func controlCharactersEscaped() async throws {
        let name = "a\u{1B}[31mred\r\nX-Injected: yes\u{07}\u{9B}.txt"
        let answer = "\u{1B}]0;owned\u{07}\u{1B}[2Jcleared, invoice\u{202E}fdp.exe"
        try await withDaemonHarness(plan: { _ in
            .respond(status: 400, headers: [HeaderField(name: "Content-Type", value: "text/plain")], body: answer)
        }) { harness in
            try await harness.start()
            try harness.drop(name, Array("payload".utf8))
            try await waitUntil("the job to fail") { try await jobs(harness).first?.state == .failed }
            let id = try #require(try await jobs(harness).first?.id.rawValue)
            let list = try await harness.ctl("list", "--state", "failed")
            let show = try await harness.ctl("show", id)
            for result in [list, show] {
                #expect(result.status == 0, "\(result)")
                #expect(!Self.hasControl(result.stdout), "raw control characters reached the terminal:\n\(result.stdout)")
                #expect(!Self.hasControl(result.stderr))
            }
            #expect(list.stdout.contains(#"a\u001b[31mred\u000d\u000aX-Injected: yes\u0007\u009b.txt"#), "\(list.stdout)")
            #expect(show.stdout.contains(#"\u001b]0;owned\u0007\u001b[2Jcleared, invoice\u202efdp.exe"#), "\(show.stdout)")
            let exact = try await harness.ctl("show", id, "--json").json()
            let job = try #require(exact["job"] as? [String: Any])
            #expect(job["file"] as? String == name, "--json keeps the name exact")

            // enqueue answers with each file's name.
            let outside = try TemporaryDirectory()
            let copied = outside.url("b\u{1B}]0;owned\u{07}copied.txt")
            #expect(FileManager.default.createFile(atPath: copied, contents: Data("copied".utf8)))
            let enqueued = try await harness.ctl("enqueue", copied, "--spool", "test")
            #expect(enqueued.status == 0, "\(enqueued)")
            #expect(!Self.hasControl(enqueued.stdout), "raw control characters reached the terminal:\n\(enqueued.stdout)")
            #expect(enqueued.stdout.contains(#"b\u001b]0;owned\u0007copied.txt"#), "\(enqueued.stdout)")
        }
    }
}
