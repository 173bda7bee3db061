import FerryDelivery
import Synchronization

/// The parts of one S3 upload whose requests run at once: their events (body written whole,
/// answered) in one stream for the loop that drives ``S3UploadMachine``, and the bytes sent of
/// the file in all (the confirmed parts, plus what each part in flight has written).
final class S3PartsInFlight: Sendable {
    /// What happened to a part's request.
    enum Event: Sendable {
        /// Its body has been written whole.
        case written(number: Int)
        /// It ended.
        case answered(number: Int, response: S3UploadMachine.Response, bytesSent: Int64)
    }

    private struct State {
        var confirmed: Int64
        /// Bytes written by each part in flight, by number.
        var written: [Int: Int64] = [:]
        var total: Int64 { confirmed + written.values.reduce(0, +) }
    }

    private let state: Mutex<State>
    /// The events, for one loop to read.
    let events: AsyncStream<Event>
    private let sink: AsyncStream<Event>.Continuation
    private let report: @Sendable (Int64) -> Void

    /// `confirmed`: the bytes of the parts already confirmed; `report` hears the bytes sent in all.
    init(confirmed: Int64, report: @escaping @Sendable (Int64) -> Void) {
        state = Mutex(State(confirmed: confirmed))
        (events, sink) = AsyncStream.makeStream(of: Event.self)
        self.report = report
    }

    /// Part `number`'s request has written `count` bytes of its body, of `length`.
    func progressed(_ number: Int, count: Int64, of length: Int64) {
        report(state.withLock {
            $0.written[number] = count
            return $0.total
        })
        if count == length { sink.yield(.written(number: number)) }
    }

    /// Part `number`'s request ended with `response`.
    func answered(_ number: Int, response: S3UploadMachine.Response, bytesSent: Int64) {
        state.withLock { $0.written[number] = nil }
        sink.yield(.answered(number: number, response: response, bytesSent: bytesSent))
    }

    /// The confirmed parts now hold `bytes` of the file.
    func confirmed(_ bytes: Int64) {
        state.withLock { $0.confirmed = bytes }
    }

    /// No more events will be read: the stream ends after those already given.
    func finish() { sink.finish() }
}
