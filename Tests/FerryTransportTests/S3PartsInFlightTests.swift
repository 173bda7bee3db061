import FerryDelivery
@testable import FerryTransport
import Synchronization
import Testing

/// The stream an S3 upload's parts in flight report through: a part is reported written whole
/// only when its count is of bytes the kernel took and reaches its length, a request that ended
/// reports nothing more (a part sent again is a new request), and every ended request's bytes count.
@Suite("S3 parts in flight: events and bytes")
struct S3PartsInFlightTests {
    static let stored = S3UploadMachine.Response.stored(etag: "\"e\"", checksum: nil)

    /// The events given so far (the stream is finished first, so this does not wait).
    static func events(_ parts: S3PartsInFlight) async -> [S3PartsInFlight.Event] {
        parts.finish()
        var all: [S3PartsInFlight.Event] = []
        for await event in parts.events { all.append(event) }
        return all
    }

    @Test("written whole once the count reaches the length, and only when the count is of bytes the kernel took")
    func writtenWhole() async {
        let reported = Mutex<[Int64]>([])
        let parts = S3PartsInFlight(confirmed: 100) { total in reported.withLock { $0.append(total) } }
        let first = parts.start(1), second = parts.start(2)
        parts.progressed(first, count: 40, whole: 50)
        parts.progressed(second, count: 50, whole: nil)  // over TLS: never reported written
        parts.progressed(first, count: 50, whole: 50)
        parts.answered(first, response: Self.stored, bytesSent: 50)
        #expect(await Self.events(parts) == [.written(number: 1), .answered(number: 1, response: Self.stored)])
        #expect(reported.withLock { $0 } == [140, 190, 200], "the confirmed bytes plus what each request has written")
        #expect(parts.bytesSent == 50)
    }

    @Test("a request that ended reports nothing more, even for a part sent again")
    func lateReports() async {
        let reported = Mutex<[Int64]>([])
        let parts = S3PartsInFlight(confirmed: 0) { total in reported.withLock { $0.append(total) } }
        let refused = parts.start(3)
        parts.progressed(refused, count: 10, whole: 30)
        parts.answered(refused, response: .error(S3ErrorAnswer(status: 400, code: "BadDigest", message: "bad")), bytesSent: 10)
        let again = parts.start(3)
        // The first request's last write completes after its answer: neither its bytes nor a
        // "written whole" may count for the part sent again.
        parts.progressed(refused, count: 30, whole: 30)
        parts.progressed(again, count: 5, whole: 30)
        parts.answered(again, response: Self.stored, bytesSent: 30)
        let events = await Self.events(parts)
        #expect(events.count == 2 && !events.contains(.written(number: 3)), "\(events)")
        #expect(reported.withLock { $0 } == [10, 5])
        #expect(parts.bytesSent == 40, "both requests' bytes count")
    }
}
