import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The README's "What Ferry promises", each through the real ferryd, including the crash windows
/// (hit on purpose with `FERRY_FAULT_POINT`, which debug builds honour).
@Suite("What Ferry promises, end to end", .serialized)
struct PromiseTests {
    /// Waits until ferryd has killed itself at its armed fault point.
    func waitForCrash(_ harness: DaemonHarness) async throws {
        try await waitUntil("ferryd to die at its fault point\n\(harness.daemon?.log ?? "")") { !(harness.daemon?.child.isRunning ?? false) }
    }

    @Test("Killed between the server's 2xx and its commit: the file is sent again after the restart, with the same Idempotency-Key, then deleted")
    func crashBeforeTheRecord() async throws {
        try await withDaemonHarness { harness in
            try await harness.start(environment: ["FERRY_FAULT_POINT": "delivered-before-record"])
            let source = try harness.drop("report.csv", Array("a,b\n".utf8))
            try await waitForCrash(harness)
            #expect(harness.receiver.acceptedRequests.count == 1)
            #expect(fileExists(source), "the 2xx was not on record: the file stays")
            try await harness.start()
            try await harness.waitForAccepted(2)
            try await harness.waitForQuiet()
            let accepted = harness.receiver.acceptedRequests
            #expect(accepted.count == 2 && accepted[0].idempotencyKey == accepted[1].idempotencyKey, "at-least-once, recognisably the same")
            #expect(!fileExists(source))
            #expect(try await jobs(harness).map(\.state) == [.done])
        }
    }

    @Test("Killed after the 2xx is on record but before the file is deleted: the restart deletes it without uploading again")
    func crashBeforeTheDisposal() async throws {
        try await withDaemonHarness { harness in
            try await harness.start(environment: ["FERRY_FAULT_POINT": "delivered-before-disposal"])
            let source = try harness.drop("report.csv", Array("a,b\n".utf8))
            try await waitForCrash(harness)
            #expect(fileExists(source))
            #expect(try await jobs(harness).first?.state == .done)
            try await harness.start()
            try await waitUntil("the file to be deleted") { !fileExists(source) }
            try await harness.waitForQuiet()
            #expect(harness.receiver.requests.count == 1, "not uploaded again")
            #expect(try await jobs(harness).first?.disposition == .deleted)
        }
    }

    @Test("A delete cut by kill -9 after its claim, then after_upload changed to keep: the restart puts the file back under its name, and does not send it again")
    func claimReleasedWhenKeepFollows() async throws {
        try await withDaemonHarness { harness in
            try await harness.start(environment: ["FERRY_FAULT_POINT": "delivered-before-disposal"])
            let source = try harness.drop("page-1.tiff", Array("scanned".utf8))
            try await waitForCrash(harness)
            let job = try #require(try await jobs(harness).first)
            // Where the delete's claim puts the file before it unlinks it.
            try #require(rename(source, harness.spoolPath() + "/.ferry-claim-\(job.id.rawValue)") == 0)
            let config = try String(contentsOfFile: harness.configPath, encoding: .utf8)
            try config.replacingOccurrences(of: "settle = \"300ms\"", with: "settle = \"300ms\"\nafter_upload = \"keep\"")
                .write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            try await harness.start()
            try await waitUntil("the file to be back under its name") { fileExists(source) }
            try await harness.waitForQuiet()
            #expect(try await jobs(harness).first?.disposition == .kept)
            let names = try FileManager.default.contentsOfDirectory(atPath: harness.spoolPath())
            #expect(!names.contains { $0.hasPrefix(".ferry-claim-") }, "\(names)")
            // A start scans the spool: the file kept is not taken for a new one.
            _ = try await harness.daemon?.stop()
            try await harness.start()
            try await harness.waitForQuiet()
            #expect(try await jobs(harness).count == 1)
            #expect(harness.receiver.requests.count == 1, "not uploaded again")
        }
    }

    @Test("SIGTERM starts no new upload: the one in flight finishes, the queued one waits for the next start")
    func sigtermStartsNothingNew() async throws {
        let gate = ReceiverGate()
        try await withDaemonHarness(topLevel: ["max_concurrent_uploads = 1", "shutdown_timeout = \"30s\""], plan: { info in
            info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store()
        }) { harness in
            try await harness.start()
            let first = try harness.drop("first.bin", pseudoRandomBytes(1 << 20, seed: 94))
            try await waitUntil("the first upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let second = try harness.drop("second.bin", pseudoRandomBytes(1000, seed: 95))
            try await waitUntil("the second file to be queued") { try await jobs(harness).count == 2 }
            harness.daemon?.child.send(SIGTERM)
            try await harness.daemon?.waitForLog("shutting down")
            gate.open()
            let status = try await harness.daemon?.child.waitForExit()
            #expect(status == 0)
            #expect(harness.receiver.requests.count == 1, "no upload started after SIGTERM")
            #expect(!fileExists(first) && fileExists(second))
            #expect(try await jobs(harness).first { $0.relativePath == Array("second.bin".utf8) }?.state == .queued)
        }
    }

    @Test("max_age ends a job the server keeps refusing; the file goes aside with the reason")
    func maxAgeGivesUp() async throws {
        let spool = TestSpool(retry: ["initial_delay = \"100ms\"", "max_delay = \"300ms\"", "max_age = \"2s\""])
        try await withDaemonHarness(spools: [spool], plan: { _ in .respond(status: 503) }) { harness in
            try await harness.start()
            try harness.drop("late.txt", Array("late".utf8))
            try await waitUntil("the job to fail", timeout: .seconds(20)) { try await jobs(harness).first?.state == .failed }
            let job = try #require(try await jobs(harness).first)
            #expect(job.lastError?.hasPrefix("gave up: not delivered within max_age (2s)") == true, "\(job.lastError ?? "")")
            #expect(job.attempts >= 2)
            try await waitUntil("the file to be moved aside") { fileExists(harness.spoolPath() + "/.failed/late.txt.error.json") }
        }
    }

    @Test("A Retry-After reaching past max_age ends the job at once")
    func retryAfterPastMaxAge() async throws {
        let spool = TestSpool(retry: ["initial_delay = \"100ms\"", "max_delay = \"1s\"", "max_age = \"1h\""])
        try await withDaemonHarness(spools: [spool], plan: { _ in
            .respond(status: 503, headers: [HeaderField(name: "Retry-After", value: "7200")])
        }) { harness in
            try await harness.start()
            try harness.drop("x.txt", Array("x".utf8))
            try await waitUntil("the job to fail") { try await jobs(harness).first?.state == .failed }
            let job = try #require(try await jobs(harness).first)
            #expect(job.attempts == 1 && harness.receiver.requests.count == 1)
            #expect(job.lastError?.contains("the server asked to retry after 2h, past max_age") == true, "\(job.lastError ?? "")")
        }
    }

    @Test("put: a file that changes during its upload is superseded; its new version is a new job with a new key")
    func putSupersededDuringUpload() async throws {
        let gate = ReceiverGate()
        // A region of the old version already handed to sendfile(2) can never be sent once the file is
        // shorter: the watchdog's patrol sees the change once nothing has moved for a second and ends
        // the request, long before no_progress_timeout (60 s here; the wait below is 30 s).
        let spool = TestSpool(options: ["protocol = \"put\"", "no_progress_timeout = \"60s\""], urlPath: "/dav/{filename}")
        try await withDaemonHarness(spools: [spool], plan: { info in
            info.index == 0 ? .stallUntil(afterBytes: 256 * 1024, gate: gate) : .store()
        }) { harness in
            try await harness.start()
            let path = try harness.drop("video.bin", pseudoRandomBytes(48 << 20, seed: 96))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 256 * 1024 }
            // The producer rewrites the file in place, shorter (48 MiB do not fit in the socket buffers, so most
            // of the old version is still to be sent).
            try rewriteInPlace(path, with: pseudoRandomBytes(100_000, seed: 97), truncating: true)
            gate.open()
            try await waitUntil("the new version to be delivered\n\(harness.daemon?.log ?? "")", timeout: .seconds(30)) {
                try await jobs(harness).contains { $0.state == .done }
            }
            let all = try await jobs(harness)
            #expect(Set(all.map(\.state)) == [.superseded, .done], "\(all.map(\.state))")
            let done = try #require(all.first { $0.state == .done })
            let old = try #require(all.first { $0.state == .superseded })
            #expect(done.id != old.id && done.identity.size == 100_000)
            let stored = harness.receiver.requests.last
            #expect(stored?.idempotencyKey == done.id.rawValue && stored?.bodyBytes == 100_000)
        }
    }

    @Test("put over HTTPS: a file cut short during its upload is superseded (not retried as a network error); its new version is delivered")
    func putSupersededDuringTLSUpload() async throws {
        let pki = try TemporaryDirectory("ferry-pki")
        let certificates = try TestCertificates(in: pki.url("pki"))
        let gate = ReceiverGate()
        let tlsReceiver = try await Receiver.start(
            directory: pki.url("received"), plan: { info in info.index == 0 ? .stallUntil(afterBytes: 256 * 1024, gate: gate) : .store() },
            tls: try certificates.serverConfiguration())
        let spool = TestSpool(
            options: ["protocol = \"put\"", "ca_file = \"\(certificates.caFile)\""], retry: ["initial_delay = \"100ms\"", "max_delay = \"1s\"", "max_attempts = 1"],
            urlPath: "/dav/{filename}")
        try await withDaemonHarness(spools: [spool], url: tlsReceiver.url(path: "/dav/{filename}")) { harness in
            try await harness.start()
            let path = try harness.drop("video.bin", pseudoRandomBytes(48 << 20, seed: 98))
            try await waitUntil("the upload to be under way") { (tlsReceiver.requests.first?.bodyBytes ?? 0) >= 256 * 1024 }
            try rewriteInPlace(path, with: pseudoRandomBytes(100_000, seed: 99), truncating: true)
            gate.open()
            try await waitUntil("the new version to be delivered\n\(harness.daemon?.log ?? "")", timeout: .seconds(30)) {
                try await jobs(harness).contains { $0.state == .done }
            }
            let all = try await jobs(harness)
            // With max_attempts = 1, a network error would have failed the job instead.
            #expect(Set(all.map(\.state)) == [.superseded, .done], "\(all.map(\.state)) \(all.map { $0.lastError ?? "" })")
            let done = try #require(all.first { $0.state == .done })
            #expect(done.identity.size == 100_000)
            #expect(tlsReceiver.requests.last?.bodyBytes == 100_000)
        }
        try await tlsReceiver.stop()
    }

    @Test("put: a file rewritten in place (same size) while the server holds its upload is not recorded delivered; its new version is")
    func putRewrittenInPlaceDuringUpload() async throws {
        let gate = ReceiverGate()
        // The file fits in one sendfile(2) region, handed to the kernel before the rewrite; the
        // kernel reads the file as it sends, so once the gate opens the server reads on, gets a body
        // that may mix the two versions and answers 201: no delivery of either.
        let spool = TestSpool(options: ["protocol = \"put\""], urlPath: "/dav/{filename}")
        try await withDaemonHarness(spools: [spool], plan: { info in
            info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store()
        }) { harness in
            try await harness.start()
            let size = 200_000
            let path = try harness.drop("scan.bin", pseudoRandomBytes(size, seed: 101))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let newer = pseudoRandomBytes(size, seed: 102)
            try rewriteInPlace(path, with: newer)
            gate.open()
            try await waitUntil("the new version to be delivered\n\(harness.daemon?.log ?? "")", timeout: .seconds(60)) {
                try await jobs(harness).contains { $0.state == .done }
            }
            let all = try await jobs(harness)
            #expect(Set(all.map(\.state)) == [.superseded, .done], "\(all.map(\.state))")
            let done = try #require(all.first { $0.state == .done })
            let stored = try #require(harness.receiver.acceptedRequests.last)
            #expect(stored.idempotencyKey == done.id.rawValue)
            #expect(stored.files.first?.sha256 == sha256Hex(newer), "the delivered body is the new version")
            #expect(harness.receiver.requests.first?.status == 201, "the server did answer 2xx to the mixed body")
            #expect(harness.daemon?.log.contains("the server may hold a mix of its two versions") == true)
        }
    }

    @Test("no_progress_timeout aborts an upload the server stopped reading; the retry delivers")
    func noProgressTimeout() async throws {
        let spool = TestSpool(options: ["no_progress_timeout = \"2s\""])
        try await withDaemonHarness(spools: [spool], plan: { info in info.index == 0 ? .stall(afterBytes: 64 * 1024) : .store() }) { harness in
            try await harness.start()
            try harness.drop("big.bin", pseudoRandomBytes(8 << 20, seed: 98))
            try await harness.waitForAccepted(1, timeout: .seconds(30))
            // The receiver stores the body before ferryd has its answer: wait for the outcome's record.
            let job = try #require(try await waitForState(harness, .done, timeout: .seconds(30)).first)
            let history = try await attempts(harness, job)
            #expect(history.map(\.outcome) == [.retry, .success])
            #expect(history.first?.error?.contains("no progress") == true, "\(history.first?.error ?? "")")
            #expect((history.first?.duration ?? 0) >= 1.9 && (history.first?.duration ?? 99) < 10)
        }
    }

    @Test("408, 425, 429 (Retry-After as an HTTP-date), 502 and 504 are retried end to end, the date honoured")
    func retryableStatusesEndToEnd() async throws {
        let spool = TestSpool(retry: ["initial_delay = \"50ms\"", "max_delay = \"100ms\""])
        try await withDaemonHarness(spools: [spool], plan: { info in
            switch info.index {
            case 0: return .respond(status: 408)
            case 1: return .respond(status: 425)
            case 2:
                let formatter = DateFormatter()
                formatter.locale = Locale(identifier: "en_US_POSIX")
                formatter.timeZone = TimeZone(identifier: "GMT")
                formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
                return .respond(status: 429, headers: [HeaderField(name: "Retry-After", value: formatter.string(from: Date().addingTimeInterval(3)))])
            case 3: return .respond(status: 502)
            case 4: return .respond(status: 504)
            default: return .store()
            }
        }) { harness in
            try await harness.start()
            try harness.drop("r.txt", Array("r".utf8))
            // The receiver stores the body before ferryd has its answer: wait for the outcome's record.
            let job = try #require(try await waitForState(harness, .done, timeout: .seconds(30)).first)
            let history = try await attempts(harness, job)
            #expect(history.compactMap(\.httpStatus) == [408, 425, 429, 502, 504, 201])
            #expect(history.map(\.outcome) == [.retry, .retry, .retry, .retry, .retry, .success])
            // The HTTP-date asked for about 3 s (whole seconds: at least 2 s after the 429's answer).
            let gap = history[3].startedAt.timeIntervalSince(history[2].startedAt + history[2].duration)
            #expect(gap >= 2.0, "retried \(gap) s after the 429")
        }
    }
}
