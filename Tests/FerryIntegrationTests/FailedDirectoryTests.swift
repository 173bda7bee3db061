import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The failed directory is Ferry's: another producer of a shared spool must not be able to delete,
/// replace or forge a rejected file there.
@Suite("The failed directory belongs to ferryd", .serialized)
struct FailedDirectoryTests {
    /// Drops a file the server rejects into a spool whose `.failed` was made `mode` (and given to
    /// `owner`) before ferryd started, and checks the file is not moved into it.
    func refusesFailedDirectory(mode: mode_t, owner: UInt32?, reason: String) async throws {
        try await withDaemonHarness(plan: { _ in .respond(status: 400, body: "rejected") }) { harness in
            let failed = try harness.directory.makeDirectory("spool-test/.failed")
            chmod(failed, mode)
            if let owner { chown(failed, owner, UInt32.max) }
            try await harness.start()
            try harness.drop("report.txt", Array("A's report".utf8))
            try await waitUntil("the job to fail") { try await jobs(harness).first?.state == .failed }
            try await harness.daemon?.waitForLog("cannot dispose")
            #expect(fileExists(harness.spoolPath() + "/report.txt"), "the rejected file stays where its owner put it")
            #expect(!fileExists(failed + "/report.txt"))
            let log = harness.daemon?.log ?? ""
            #expect(log.contains(reason), "\(log)")
        }
    }

    @Test("A .failed writable by others is refused: the rejected file stays in the spool, and the log says why")
    func failedDirectoryWritableByOthers() async throws {
        try await refusesFailedDirectory(mode: 0o777, owner: nil, reason: "writable by its group or by others")
    }

    @Test("A .failed made by another user is refused", .enabled(if: getuid() == 0, "giving a directory to nobody needs root"))
    func failedDirectoryOfAnotherUser() async throws {
        try await refusesFailedDirectory(mode: 0o755, owner: 65534, reason: "belongs to uid 65534")
    }

    @Test("A .failed that cannot be written (a read-only mount) leaves the rejected file under its own name, and it moves once it can",
          .enabled(if: getuid() == 0, "a read-only bind mount needs root"))
    func failedDirectoryReadOnly() async throws {
        try await withDaemonHarness(plan: { _ in .respond(status: 422, body: "rejected") }) { harness in
            let failed = try harness.directory.makeDirectory("spool-test/.failed")
            for arguments in [["--bind", failed, failed], ["-o", "remount,bind,ro", failed]] {
                let child = try ChildProcess(executable: "/bin/mount", arguments: arguments, logPath: harness.directory.url("mount.log"))
                let status = try await child.waitForExit()
                try #require(status == 0, "mount \(arguments): \(child.log)")
            }
            defer { unmount(failed) }
            try await harness.start()
            try harness.drop("rej.txt", Array("rejected twice".utf8))
            try await waitUntil("the job to fail") { try await jobs(harness).first?.state == .failed }
            try await harness.daemon?.waitForLog("cannot dispose")
            #expect(fileExists(harness.spoolPath() + "/rej.txt"), "in plain sight, not under a claim name")
            let names = try FileManager.default.contentsOfDirectory(atPath: harness.spoolPath())
            #expect(!names.contains { $0.hasPrefix(".ferry-claim-") }, "\(names)")
            unmount(failed)
            // The chore that finishes pending dispositions runs every minute; a restart runs it at once.
            await harness.shutdown()
            try await harness.start()
            try await waitUntil("the file to be moved aside") { fileExists(failed + "/rej.txt") && fileExists(failed + "/rej.txt.error.json") }
            #expect(!fileExists(harness.spoolPath() + "/rej.txt"))
        }
    }

    @Test("retry of a job whose file in .failed was replaced queues the new content as a new job, with a new Idempotency-Key")
    func retryChecksTheVersion() async throws {
        try await withDaemonHarness(plan: { info in info.index == 0 ? .respond(status: 400, body: "rejected") : .store() }) { harness in
            try await harness.start()
            try harness.drop("invoice.txt", Array("the real invoice".utf8))
            try await waitUntil("the file to be moved aside") { fileExists(harness.spoolPath() + "/.failed/invoice.txt") }
            try await harness.waitForQuiet()
            let failed = try #require(try await jobs(harness).first)
            // Someone replaces the file while it is aside.
            let aside = harness.spoolPath() + "/.failed/invoice.txt"
            unlink(aside)
            try dropFile(Array("a forged invoice".utf8), at: aside)
            let retried = try await harness.ctl("retry", failed.id.rawValue)
            #expect(retried.status == 0, "\(retried)")
            try await harness.waitForAccepted(1)
            let accepted = try #require(harness.receiver.acceptedRequests.first)
            #expect(accepted.idempotencyKey != failed.id.rawValue, "new content never goes out under the failed job's key")
            let all = try await jobs(harness)
            #expect(all.count == 2)
            #expect(all.first { $0.id == failed.id }?.state == .failed, "the failed job keeps its history")
            #expect(harness.daemon?.log.contains("not the version that failed") == true)
        }
    }

    /// Waits until ferryd has killed itself at its armed fault point.
    func waitForCrash(_ harness: DaemonHarness) async throws {
        try await waitUntil("ferryd to die at its fault point\n\(harness.daemon?.log ?? "")") { !(harness.daemon?.child.isRunning ?? false) }
    }

    /// Starts ferryd armed at `faultPoint`, has scan.pdf refused and moved aside, and retries it:
    /// ferryd dies inside the retry. Returns the failed job and the file's path in `.failed`.
    func retryCutAt(_ faultPoint: String, _ harness: DaemonHarness) async throws -> (failed: Job, aside: String) {
        try await harness.start(environment: ["FERRY_FAULT_POINT": faultPoint])
        try harness.drop("scan.pdf", Array("page one".utf8))
        let aside = harness.spoolPath() + "/.failed/scan.pdf"
        try await waitUntil("the file to be moved aside") { fileExists(aside) }
        try await harness.waitForQuiet()
        let failed = try #require(try await jobs(harness).first)
        _ = try await harness.ctl("retry", failed.id.rawValue)
        try await waitForCrash(harness)
        return (failed, aside)
    }

    @Test("A retry cut by kill -9 (after the job is reopened, or after its file is back in the spool) is finished at the next start: the same job is sent, with its Idempotency-Key",
          arguments: ["retry-reopened", "retry-brought-back"])
    func retryCutByACrash(faultPoint: String) async throws {
        try await withDaemonHarness(plan: { info in info.index == 0 ? .respond(status: 400, body: "rejected") : .store() }) { harness in
            let (failed, aside) = try await retryCutAt(faultPoint, harness)
            #expect(try await jobs(harness).first?.state == .held, "the retry's first step is on record")
            #expect(fileExists(aside) != (faultPoint == "retry-brought-back"))
            try await harness.start()
            try await harness.waitForAccepted(1)
            try await waitUntil("the job to be done") { try await jobs(harness).first?.state == .done }
            let accepted = try #require(harness.receiver.acceptedRequests.first)
            #expect(accepted.idempotencyKey == failed.id.rawValue, "the same job, recognisably")
            #expect(try await jobs(harness).count == 1)
            #expect(!fileExists(aside) && !fileExists(aside + ".error.json"))
            #expect(!fileExists(harness.spoolPath() + "/scan.pdf"))
            #expect(harness.daemon?.log.contains("a retry interrupted by a stop is finished") == true)
        }
    }

    @Test("A retry cut by kill -9 after its file was renamed back (its .error.json still in .failed) is finished at the next start, the report removed; a different file there keeps it")
    func retryCutAfterRename() async throws {
        try await withDaemonHarness(plan: { info in info.index == 0 ? .respond(status: 400, body: "rejected") : .store() }) { harness in
            let (failed, aside) = try await retryCutAt("retry-reopened", harness)
            // As the bring-back's rename leaves it, cut before the report's removal.
            #expect(rename(aside, harness.spoolPath() + "/scan.pdf") == 0)
            #expect(fileExists(aside + ".error.json"))
            try await harness.start()
            try await waitUntil("the job to be done") { try await jobs(harness).first?.state == .done }
            #expect(harness.receiver.acceptedRequests.first?.idempotencyKey == failed.id.rawValue)
            #expect(!fileExists(aside + ".error.json"), "the job's report went with the finished retry")
        }
        try await withDaemonHarness(plan: { _ in .respond(status: 400, body: "rejected") }) { harness in
            let (_, aside) = try await retryCutAt("retry-reopened", harness)
            // Another file took the name meanwhile: not the version that failed.
            unlink(aside)
            try harness.drop("scan.pdf", Array("another scan".utf8))
            try await harness.start()
            try await harness.daemon?.waitForLog("not the version that failed")
            #expect(fileExists(aside + ".error.json"), "the failed job's report stays")
        }
    }

    @Test("A retry cut by kill -9 whose file is gone from both places returns the job to failed at the next start")
    func retryCutByACrashFileGone() async throws {
        try await withDaemonHarness(plan: { _ in .respond(status: 400, body: "rejected") }) { harness in
            let (_, aside) = try await retryCutAt("retry-reopened", harness)
            unlink(aside)
            try await harness.start()
            try await harness.daemon?.waitForLog("a retry interrupted by a stop is undone")
            #expect(try await jobs(harness).first?.state == .failed)
            #expect(harness.receiver.requests.count == 1, "nothing sent again")
        }
    }
}
