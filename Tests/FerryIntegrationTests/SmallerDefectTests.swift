import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// The smaller items of the hostile black-box run.
@Suite("Smaller defects of the black-box run", .serialized)
struct SmallerDefectTests {
    @Test("check-config says when a spool directory does not exist and cannot be created")
    func uncreatableSpoolDirectory() async throws {
        let directory = try TemporaryDirectory("ferry-uncreatable")
        let blocker = directory.url("a-file")
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: blocker))
        let config = directory.url("ferry.toml")
        try [
            "state_directory = \"\(directory.url("state"))\"",
            "[[spool]]", "name = \"in\"", "directory = \"\(blocker)/spool\"", "url = \"http://127.0.0.1:9/upload\"",
        ].joined(separator: "\n").write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await runFerryd(["check-config", "--config", config], in: directory)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("spool[0].directory") && result.stderr.contains("cannot be created") && result.stderr.contains("is not a directory"),
                "\(result.stderr)")
    }

    @Test("Temporary copies left by a crash during a move across filesystems are removed at the next start")
    func interruptedMovesCleanedUp() async throws {
        try await withDaemonHarness(spools: [TestSpool(options: ["after_upload = \"move\""])]) { harness in
            let sent = try harness.directory.makeDirectory("spool-test/.sent/sub")
            let partial = sent + "/.ferry-move-1234.partial"
            try Data("half a copy".utf8).write(to: URL(fileURLWithPath: partial))
            let kept = sent + "/delivered-earlier.txt"
            try Data("a file moved earlier".utf8).write(to: URL(fileURLWithPath: kept))
            try await harness.start()
            #expect(!fileExists(partial), "the partial copy is gone")
            #expect(fileExists(kept), "nothing else is touched")
            #expect(harness.daemon?.log.contains("removed_partial_moves=1") == true, "\(harness.daemon?.log ?? "")")
        }
    }

    @Test("health is degraded while a file cannot be dealt with after its upload, and when a spool directory is gone")
    func healthReportsStuckDispositionsAndMissingSpools() async throws {
        try await withDaemonHarness(plan: { _ in .respond(status: 400, body: "rejected") }) { harness in
            // A .failed that others may write is refused (FailedDirectoryTests), so the disposition stays pending.
            let failed = try harness.directory.makeDirectory("spool-test/.failed")
            chmod(failed, 0o777)
            try await harness.start(environment: ["FERRY_STUCK_DISPOSITION_AFTER": "1"])
            try harness.drop("report.txt", Array("A's report".utf8))
            try await waitUntil("health to report the stuck file") {
                let health = try await harness.ctl("health", "--json").json()
                return (health["problems"] as? [String])?.contains { $0.contains("to be deleted or moved") } == true
                    && health["status"] as? String == "degraded"
            }
        }
        try await withDaemonHarness { harness in
            try await harness.start()
            try FileManager.default.removeItem(atPath: harness.spoolPath())
            try await waitUntil("health to name the missing spool directory") {
                let health = try await harness.ctl("health", "--json").json()
                return (health["problems"] as? [String])?.contains { $0.contains("does not exist") } == true
            }
        }
    }
}
