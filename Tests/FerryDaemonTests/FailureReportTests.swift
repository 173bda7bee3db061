import FerryConfig
@testable import FerryDaemon
import FerryQueue
import Foundation
import Testing

/// The `.error.json` sidecar's content, without a daemon.
@Suite("Failure report (.error.json)")
struct FailureReportTests {
    @Test("a job with more attempts than are listed: the last 1,000, and how many in all; the job id is within the part a restart reads")
    func attemptsCapped() throws {
        let configuration = try ConfigurationLoader(secrets: SecretSources(environment: [:], credentialsDirectory: nil)).parse("""
            [[spool]]
            name = "media"
            directory = "/srv/media"
            url = "https://media.example/upload"
            """, path: "/x.toml")
        let spool = try #require(configuration.spools.first)
        var job = Job(id: JobID.generate(milliseconds: 1_800_000_000_000), spool: "media", relativePath: Array("clip.mp4".utf8),
                      identity: FileIdentity(device: 1, inode: 2, size: 3, modificationTime: 4), boundary: "b", now: Date())
        job.state = .failed
        job.lastError = "not delivered within max_age"
        let attempts = (1...1500).map {
            Attempt(jobSequence: 1, number: $0, startedAt: Date(), duration: 0.5, httpStatus: 503,
                    error: "the server was busy for a long while, said so at length, and asked for patience", bytesSent: 100, outcome: .retry)
        }
        let report = FailureReport(job: job, spool: spool, attempts: attempts)
        #expect(report.attempts.count == 1000 && report.attempts.first?.number == 501 && report.attempts.last?.number == 1500)
        #expect(report.attemptsTotal == 1500)
        let encoded = report.encoded()
        let document = try #require(try JSONSerialization.jsonObject(with: Data(encoded)) as? [String: Any])
        #expect(document["attempts_total"] as? Int == 1500 && document["job"] as? String == job.id.rawValue)
        #expect(encoded.count < 1 << 20, "\(encoded.count) bytes")
        #expect(FailureReport(job: job, spool: spool, attempts: Array(attempts.prefix(3))).attemptsTotal == nil)
    }
}
