import FerryDelivery
import Synchronization

/// The parts of one S3 upload whose requests run at once: their events (body written whole,
/// answered) in one stream for the loop that drives ``S3UploadMachine``, the bytes sent of the file
/// in all (the confirmed parts, plus what each part in flight has written), and the body bytes of
/// every ended request. Each request is known by the ``Request`` its start returned, so a late
/// report of a request that ended (a part sent again has a new one) changes nothing.
final class S3PartsInFlight: Sendable {
    /// What happened to a part's request.
    enum Event: Sendable, Equatable {
        /// Its body has been written whole.
        case written(number: Int)
        /// It ended.
        case answered(number: Int, response: S3UploadMachine.Response)
    }

    /// One part's request.
    struct Request: Sendable, Hashable {
        let id: Int
        let number: Int
    }

    private struct State {
        var confirmed: Int64
        /// Bytes written by each request running, by id.
        var written: [Int: Int64] = [:]
        var nextID = 0
        /// The body bytes of the requests that ended.
        var ended: Int64 = 0
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

    /// Part `number`'s request starts.
    func start(_ number: Int) -> Request {
        state.withLock {
            $0.nextID += 1
            $0.written[$0.nextID] = 0
            return Request(id: $0.nextID, number: number)
        }
    }

    /// The request has written `count` bytes of its body; with `whole`, the body's length when
    /// `count` counts bytes the kernel has taken (not bytes still queued in the process, as over
    /// TLS), so that reaching it means the body has been written whole.
    func progressed(_ request: Request, count: Int64, whole: Int64?) {
        let total: Int64? = state.withLock {
            guard $0.written[request.id] != nil else { return nil }
            $0.written[request.id] = count
            return $0.total
        }
        guard let total else { return }
        report(total)
        if let whole, count == whole { sink.yield(.written(number: request.number)) }
    }

    /// The request ended with `response`, having sent `bytesSent` of its body.
    func answered(_ request: Request, response: S3UploadMachine.Response, bytesSent: Int64) {
        state.withLock {
            $0.written[request.id] = nil
            $0.ended += bytesSent
        }
        sink.yield(.answered(number: request.number, response: response))
    }

    /// The confirmed parts now hold `bytes` of the file.
    func confirmed(_ bytes: Int64) {
        state.withLock { $0.confirmed = bytes }
    }

    /// The body bytes of every request that ended, answered or not.
    var bytesSent: Int64 { state.withLock { $0.ended } }

    /// No more events will be read: the stream ends after those already given.
    func finish() { sink.finish() }
}
