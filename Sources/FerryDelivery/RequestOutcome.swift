/// What one request of a multi-request upload (tus, the resumable upload draft) got, as its state
/// machine is told.
public enum RequestOutcome: Sendable {
    case answer(status: Int, headers: [(name: String, value: String)], body: [UInt8], bytesSent: Int64)
    /// No usable answer.
    case failed(String, bytesSent: Int64)
    /// No connection could be made (``AttemptReport/unreachable(_:)``); no byte was sent.
    case unreachable(String)
    /// The file is no longer the version being sent.
    case sourceChanged(bytesSent: Int64)
    case cancelled(bytesSent: Int64)

    /// For a request without an answer: the report that ends the attempt, and the body bytes it
    /// handed over; `nil` for an answer.
    public var ending: (report: AttemptReport, bytesSent: Int64)? {
        switch self {
        case .answer: nil
        case .failed(let message, let bytes): (.noAnswer(message), bytes)
        case .unreachable(let message): (.unreachable(message), 0)
        case .sourceChanged(let bytes): (.sourceChanged(nil), bytes)
        case .cancelled(let bytes): (.stopped, bytes)
        }
    }
}
