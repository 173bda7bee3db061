import FerryDelivery
import FerryQueue
import Testing

/// Drives an ``S3UploadMachine`` through a multipart upload with scripted events for its parts
/// in flight: which part is written whole or answered next is the script's choice. Pure: no
/// network, no files.
struct S3PartsScript {
    static let url = "http://s3.test/b/k?uploadId=U1"

    /// An event the shell may report while parts are in flight.
    enum Event: Equatable, CustomStringConvertible {
        case written(Int), answered(Int)
        var description: String {
            switch self {
            case .written(let number): "written \(number)"
            case .answered(let number): "answered \(number)"
            }
        }
    }

    /// What one run did: the requests and events in order, the records, the report, and the most
    /// parts unanswered and being written at once.
    struct Trace {
        var log: [String] = []
        var recordedParts: [Int] = []
        var report: AttemptReport?
        var mostInFlight = 0
        var mostWriting = 0

        /// The requests alone (create, parts, completion).
        var requests: [String] { log.filter { !$0.hasPrefix("written ") && !$0.hasPrefix("answered ") } }
    }

    /// Runs the machine to its end; `choose` picks the next event among those possible (a part
    /// being written may be written whole or answered early; a part written whole may be answered),
    /// `answer` gives each part's answer.
    static func run(
        _ settings: S3UploadMachine.Settings, choose: ([Event]) -> Int,
        answer: (Int) -> S3UploadMachine.Response = { .stored(etag: "\"e\($0)\"", checksum: nil) }
    ) -> Trace {
        var machine = S3UploadMachine(settings: settings, known: nil, parts: [])
        var trace = Trace()
        var inFlight: [Int] = []
        var writing: Set<Int> = []
        var action = machine.start()
        for _ in 0..<5_000 {
            switch action {
            case .finish(let report):
                trace.report = report
                return trace
            case .create:
                trace.log.append("create")
                action = machine.created(.uploadCreated(url: url))
            case .record(let record):
                if case .part(let part, _, let confirmed) = record {
                    trace.recordedParts.append(part.number)
                    #expect(confirmed == trace.recordedParts.count, "the count of confirmed parts, whatever their order")
                }
                action = machine.recorded()
            case .uploadPart(_, let number, _, _):
                trace.log.append("part \(number)")
                inFlight.append(number)
                writing.insert(number)
                trace.mostInFlight = max(trace.mostInFlight, inFlight.count)
                trace.mostWriting = max(trace.mostWriting, writing.count)
                action = machine.partStarted()
            case .awaitPart:
                let possible = inFlight.flatMap { writing.contains($0) ? [Event.written($0), .answered($0)] : [.answered($0)] }
                let event = possible[choose(possible)]
                trace.log.append(event.description)
                switch event {
                case .written(let number):
                    writing.remove(number)
                    action = machine.partWritten(number)
                case .answered(let number):
                    inFlight.removeAll { $0 == number }
                    writing.remove(number)
                    action = machine.storedPart(number, answer(number))
                }
            case .complete(_, let parts):
                trace.log.append("complete \(parts.map(\.number))")
                action = machine.completed(.object(etag: "\"x\"", checksum: nil))
            case .putObject, .listParts, .headObject, .abandonUnrecorded, .digest:
                Issue.record("unexpected \(action)")
                return trace
            }
        }
        Issue.record("the machine did not finish")
        return trace
    }
}
