import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Found by scripts/torture.py --tls: SIGTERM while uploading to an HTTPS server that stopped
/// reading took shutdown_timeout + 5 s, because closing the TLS connection waited NIOSSL's default
/// 5 s for a close_notify the stalled server never sends.
@Suite("Shutdown over TLS", .serialized)
struct ShutdownTLSTests {
    @Test("SIGTERM with an upload stuck on a stalled HTTPS server exits soon after shutdown_timeout")
    func stalledTLSServer() async throws {
        let pki = try TemporaryDirectory("ferry-pki")
        let certificates = try TestCertificates(in: pki.url("pki"))
        let tlsReceiver = try await Receiver.start(
            directory: pki.url("received"), plan: { info in info.index == 0 ? .stall(afterBytes: 1 << 20) : .store() },
            tls: try certificates.serverConfiguration())
        let spool = TestSpool(options: ["ca_file = \"\(certificates.caFile)\"", "no_progress_timeout = \"60s\""])
        try await withDaemonHarness(spools: [spool], topLevel: ["shutdown_timeout = \"1s\""], url: tlsReceiver.url(path: "/upload")) { harness in
            try await harness.start()
            let bytes = pseudoRandomBytes(16 << 20, seed: 21)
            try harness.drop("stuck.bin", bytes)
            try await waitUntil("the upload to be under way") { (tlsReceiver.requests.first?.bodyBytes ?? 0) >= 1 << 20 }
            let started = ContinuousClock.now
            let status = try await harness.daemon?.stop()
            let elapsed = ContinuousClock.now - started
            #expect(status == 0)
            #expect(elapsed < .seconds(5), "exit took \(elapsed) with shutdown_timeout = 1s")
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .queued)
            #expect(fileExists(harness.spoolPath() + "/stuck.bin"))
        }
        try await tlsReceiver.stop()
    }
}
