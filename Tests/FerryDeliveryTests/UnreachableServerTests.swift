import FerryDelivery
import FerryQueue
import Foundation
import Testing

/// A spool's server that cannot be reached holds the spool, one backoff per wait in a row: pure,
/// a table of reports at times and what the spool's wait becomes.
@Suite("Unreachable server")
struct UnreachableServerTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let backoff = Backoff(initialDelay: .seconds(1), maxDelay: .seconds(10))
    static let refused = AttemptReport.unreachable("connection to h:1 failed: Connection refused")

    /// One step: a report `at` seconds after the start; the wait's end returned (seconds after the
    /// start, nil: none started or moved), then the run's length and the wait at that moment.
    struct Step: Sendable {
        var report: AttemptReport
        var at: Double
        /// When the attempt started (default: just before `at`).
        var started: Double?
        var returned: Double?
        var failures: Int
        var waitsUntil: Double?

        init(report: AttemptReport, at: Double, started: Double? = nil, returned: Double?, failures: Int, waitsUntil: Double?) {
            self.report = report
            self.at = at
            self.started = started
            self.returned = returned
            self.failures = failures
            self.waitsUntil = waitsUntil
        }
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var steps: [Step]
        var testDescription: String { name }
    }

    static let answer = AttemptReport.answered(ServerAnswer(status: 500))
    static let cut = AttemptReport.noAnswer("127.0.0.1:1 closed the connection before answering")

    /// With the highest jitter each wait is its ceiling: 1, 2, 4, 8, then 10 s (max_delay).
    static let rows: [Row] = [
        Row(name: "a failure starts a wait of the first ceiling", steps: [
            Step(report: refused, at: 0, returned: 1, failures: 1, waitsUntil: 1),
        ]),
        Row(name: "failures of attempts under way fall into the wait without lengthening it", steps: [
            Step(report: refused, at: 0, returned: 1, failures: 1, waitsUntil: 1),
            Step(report: refused, at: 0.01, returned: nil, failures: 1, waitsUntil: 1),
            Step(report: refused, at: 0.5, returned: nil, failures: 1, waitsUntil: 1),
        ]),
        Row(name: "each wait in a row doubles, up to max_delay", steps: [
            Step(report: refused, at: 0, returned: 1, failures: 1, waitsUntil: 1),
            Step(report: refused, at: 1, returned: 3, failures: 2, waitsUntil: 3),
            Step(report: refused, at: 3, returned: 7, failures: 3, waitsUntil: 7),
            Step(report: refused, at: 7, returned: 15, failures: 4, waitsUntil: 15),
            Step(report: refused, at: 15, returned: 25, failures: 5, waitsUntil: 25),
            Step(report: refused, at: 30, returned: 40, failures: 6, waitsUntil: 40),
        ]),
        Row(name: "any answer, even a 500, ends the run and the wait", steps: [
            Step(report: refused, at: 0, returned: 1, failures: 1, waitsUntil: 1),
            Step(report: refused, at: 1, returned: 3, failures: 2, waitsUntil: 3),
            Step(report: answer, at: 1.5, returned: nil, failures: 0, waitsUntil: nil),
            Step(report: refused, at: 2, returned: 3, failures: 1, waitsUntil: 3),
        ]),
        Row(name: "a cut mid-transfer, a timeout or a local problem says nothing about reaching the server", steps: [
            Step(report: refused, at: 0, returned: 1, failures: 1, waitsUntil: 1),
            Step(report: cut, at: 0.2, returned: nil, failures: 1, waitsUntil: 1),
            Step(report: .localFailure("EIO"), at: 0.3, returned: nil, failures: 1, waitsUntil: 1),
            Step(report: .stopped, at: 0.4, returned: nil, failures: 1, waitsUntil: 1),
            Step(report: cut, at: 2, returned: nil, failures: 1, waitsUntil: nil),
            Step(report: refused, at: 2, returned: 4, failures: 2, waitsUntil: 4),
        ]),
        Row(name: "an answer to an attempt begun before the last failure (a long upload) does not end the run", steps: [
            Step(report: refused, at: 10, returned: 11, failures: 1, waitsUntil: 11),
            Step(report: answer, at: 10.5, started: 2, returned: nil, failures: 1, waitsUntil: 11),
            Step(report: refused, at: 11, returned: 13, failures: 2, waitsUntil: 13),
            Step(report: answer, at: 13.5, started: 13.2, returned: nil, failures: 0, waitsUntil: nil),
        ]),
        Row(name: "a wait that is over is no wait", steps: [
            Step(report: refused, at: 0, returned: 1, failures: 1, waitsUntil: 1),
            Step(report: cut, at: 1, returned: nil, failures: 1, waitsUntil: nil),
        ]),
    ]

    @Test("the spool's wait after each report", arguments: rows)
    func table(row: Row) {
        var server = UnreachableServer()
        var random = FixedRandom(value: FixedRandom.highest)
        for (index, step) in row.steps.enumerated() {
            let now = Self.start.addingTimeInterval(step.at)
            let started = Self.start.addingTimeInterval(step.started ?? step.at - 0.001)
            let returned = server.note(step.report, startedAt: started, now: now, backoff: Self.backoff, random: &random)
            let seconds = { (date: Date?) in date.map { ($0.timeIntervalSince(Self.start) * 100).rounded() / 100 } }
            #expect(seconds(returned) == step.returned, "step \(index)")
            #expect(server.failures == step.failures, "step \(index)")
            #expect(seconds(server.wait(at: now)) == step.waitsUntil, "step \(index)")
        }
    }

    @Test("a wait is never longer than 30 s, whatever max_delay says")
    func longestWait() {
        var server = UnreachableServer()
        var random = FixedRandom(value: FixedRandom.highest)
        let backoff = Backoff(initialDelay: .seconds(1), maxDelay: .seconds(300))
        var now = Self.start
        var waits: [Double] = []
        for _ in 0..<9 {
            let until = server.note(Self.refused, startedAt: now, now: now, backoff: backoff, random: &random)
            waits.append((until.map { $0.timeIntervalSince(now) } ?? -1).rounded())
            now = until ?? now
        }
        #expect(waits == [1, 2, 4, 8, 16, 30, 30, 30, 30])
    }

    @Test("with the lowest jitter a wait is over at once, and the run still counts")
    func lowestJitter() {
        var server = UnreachableServer()
        var random = FixedRandom(value: 0)
        #expect(server.note(Self.refused, startedAt: Self.start, now: Self.start, backoff: Self.backoff, random: &random) == Self.start)
        #expect(server.wait(at: Self.start) == nil)
        #expect(server.failures == 1)
        #expect(server.reason == "connection to h:1 failed: Connection refused")
    }
}
