import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// Reloads an operator gets wrong, or makes while uploads are under way (a real ferryd, receiver
/// and `ferryctl reload`).
@Suite("Reload")
struct ReloadTests {
    @Test("A reload that moves state_directory and points a spool at the one in use is refused; the queue stays where it is, unsent")
    func spoolOntoStateDirectory() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let state = harness.directory.url("state")
            #expect(FileManager.default.fileExists(atPath: state + "/queue.sqlite"))
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            let moved = original.replacingOccurrences(of: "state_directory = \"\(state)\"", with: "state_directory = \"\(state)2\"")
                + "\n\n[[spool]]\nname = \"old\"\ndirectory = \"\(state)\"\nurl = \"\(harness.receiver.url(path: "/upload/old"))\"\n"
            try moved.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let refused = try await harness.ctl("reload")
            #expect(refused.status != 0, "\(refused)")
            #expect(refused.stderr.contains("spool[1].directory") && refused.stderr.contains("state directory in use"), "\(refused)")
            // The daemon still answers, with its queue in place and nothing of it sent.
            let status = try await harness.ctl("status")
            #expect(status.status == 0, "\(status)")
            #expect(FileManager.default.fileExists(atPath: state + "/queue.sqlite"))
            #expect(harness.receiver.requests.isEmpty)
        }
    }

    @Test("A setting read only at start-up is reported while the file differs from what runs, and no longer once it is put back")
    func restartRequiredAgainstRunning() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            try original.replacingOccurrences(of: "log_level = \"debug\"", with: "log_level = \"info\"")
                .write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let changed = try await harness.ctl("reload")
            #expect(changed.status == 0 && changed.stderr.contains("log_level (takes effect only when ferryd restarts)"), "\(changed)")
            let again = try await harness.ctl("reload")
            #expect(again.status == 0 && again.stderr.contains("log_level"), "still not in effect: \(again)")
            try original.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let back = try await harness.ctl("reload")
            #expect(back.status == 0 && !back.stderr.contains("log_level"), "\(back)")
        }
    }

    @Test("Jobs claimed ahead of a spool that a reload removes go back to the queue unsent; they go once the spool is back")
    func removedSpoolWaitingJobs() async throws {
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store()
        }
        try await withDaemonHarness(spools: [TestSpool(name: "test"), TestSpool(name: "keep")], topLevel: ["max_concurrent_uploads = 1"], plan: plan) { harness in
            defer { gate.open() }
            try await harness.start()
            _ = try harness.drop("first.bin", pseudoRandomBytes(1 << 20, seed: 71))
            try await waitUntil("the first upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            for name in ["second.bin", "third.bin"] { _ = try harness.drop(name, pseudoRandomBytes(4096, seed: 72)) }
            try await waitUntil("the two others to be claimed ahead") {
                try await jobs(harness).filter { $0.state == .uploading }.count == 3
            }
            let original = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            let sections = original.components(separatedBy: "\n[[spool]]\n")
            let withoutTest = ([sections[0]] + sections.dropFirst().filter { !$0.hasPrefix("name = \"test\"") }).joined(separator: "\n[[spool]]\n")
            try withoutTest.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let removed = try await harness.ctl("reload")
            #expect(removed.status == 0 && removed.stdout.contains("spool test removed"), "\(removed)")
            try await waitUntil("the jobs claimed ahead to be queued again") {
                try await jobs(harness).filter { $0.state == .queued }.map(\.displayPath).sorted() == ["second.bin", "third.bin"]
            }
            // The upload under way finishes; the others stay in the spool, unsent.
            gate.open()
            try await waitUntil("the first file to be delivered") { try await jobs(harness).contains { $0.displayPath == "first.bin" && $0.state == .done } }
            #expect(harness.receiver.requests.count == 1)
            #expect(FileManager.default.fileExists(atPath: harness.spoolPath() + "/second.bin"))
            #expect(FileManager.default.fileExists(atPath: harness.spoolPath() + "/third.bin"))
            try original.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            let back = try await harness.ctl("reload")
            #expect(back.status == 0, "\(back)")
            try await harness.waitForAccepted(3)
        }
    }
}
