import Foundation
import Synchronization

/// A header field as received.
public struct HeaderField: Sendable, Codable, Hashable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A text field from a multipart body.
public struct ReceivedField: Sendable, Codable, Hashable {
    public var name: String
    public var value: String
}

/// A file part from a multipart body (or a whole non-multipart body), as stored.
public struct ReceivedFile: Sendable, Codable, Hashable {
    /// The part's `name` parameter (empty for a raw body).
    public var fieldName: String
    /// The `filename` parameter exactly as sent (browsers' escaping intact, e.g. `%22`).
    public var filenameParameter: String
    /// The file name with the browsers' `%22`/`%0D`/`%0A` escaping reversed (and a doubled backslash read as one).
    public var filename: String
    /// The part's `Content-Type`, if it had one.
    public var contentType: String?
    /// Bytes received.
    public var size: Int64
    /// SHA-256 of the bytes, lowercase hex.
    public var sha256: String
    /// Where the bytes were stored, when they were kept.
    public var storedPath: String?
}

/// One request the receiver saw, complete or not.
public struct ReceivedRequest: Sendable, Codable {
    /// 0 for the first request since the receiver started.
    public var index: Int
    public var method: String
    public var uri: String
    public var headers: [HeaderField]
    public var fields: [ReceivedField] = []
    public var files: [ReceivedFile] = []
    /// Body bytes read so far.
    public var bodyBytes: Int64 = 0
    /// Whether the whole body arrived (and, for multipart, parsed).
    public var complete = false
    /// The status the receiver answered with, if it answered.
    public var status: Int?
    /// What went wrong, if anything.
    public var error: String?
    /// When the request head arrived.
    public var receivedAt = Date()
    /// When the receiver answered (or gave up on) the request.
    public var finishedAt: Date?

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The `Idempotency-Key` header.
    public var idempotencyKey: String? { header("Idempotency-Key") }

    /// The value of text field `name`.
    public func field(_ name: String) -> String? {
        fields.first { $0.name == name }?.value
    }
}

/// What the receiver does with one request: store it, or misbehave in a planned way.
public enum ReceiverAction: Sendable {
    /// Read and parse the body, store the files, answer `status` with a JSON summary.
    case store(status: Int = 201)
    /// Read the whole body, store nothing, answer with this status, headers and body.
    case respond(status: Int, headers: [HeaderField] = [], body: String = "")
    /// Answer at once, without reading the body, then close the connection.
    case respondEarly(status: Int, headers: [HeaderField] = [], body: String = "")
    /// Read `afterBytes` of the body, then stop reading: the client's upload stalls.
    case stall(afterBytes: Int64)
    /// Like ``stall(afterBytes:)``, then read on (and store) once `gate` opens.
    case stallUntil(afterBytes: Int64, gate: ReceiverGate)
    /// Read `afterBytes` of the body, then close the connection without an answer.
    case disconnect(afterBytes: Int64)
    /// Read `afterBytes` of the body, then reset the connection: `SO_LINGER` 0 and close, so the
    /// client gets a TCP RST rather than an orderly FIN.
    case reset(afterBytes: Int64)
    /// Read the body at about `bytesPerSecond` (reads are paced, so the client's writes block), then
    /// store it and answer `status`.
    case slowRead(bytesPerSecond: Int, status: Int = 201)
    /// Read the whole body (and store it when `store`: a server that did its work but whose answer
    /// never comes), then never answer; the connection stays open until the client gives up.
    case stallAfterBody(store: Bool)
    /// Read the whole body (and store it when `store`), then close the connection without an answer.
    case closeAfterBody(store: Bool)
    /// Read `afterBytes` of the body, then answer `status` (a 2xx: a server that accepts a truncated
    /// body) and close. Nothing is stored: the file never arrived whole.
    case acceptPartial(afterBytes: Int64, status: Int = 200)
    /// Read `afterBytes` of the body, answer `status` at once (a 2xx: a server that decided without
    /// the rest), then, half a second later, read the rest of the body and drop it, keeping the
    /// connection, as Node's http server does for a request its handler did not read. Nothing is stored.
    case answerThenDrain(afterBytes: Int64, status: Int = 200)
    /// Read the whole body, store nothing, then answer `status` with a chunked body of one byte every
    /// `interval`, never ending: a server that trickles its answer.
    case trickleAnswer(status: Int, interval: Duration)
}

extension ReceiverAction {
    /// Whether the body is parsed and stored.
    var stores: Bool {
        switch self {
        case .store, .stallUntil, .slowRead: true
        case .stallAfterBody(let store), .closeAfterBody(let store): store
        default: false
        }
    }

    /// The body byte count at which the action cuts the request short, if it does.
    var cutOff: Int64? {
        switch self {
        case .stall(let after), .disconnect(let after), .reset(let after), .acceptPartial(let after, _), .answerThenDrain(let after, _): after
        default: nil
        }
    }
}

/// What a plan sees of a request before deciding what to do with it.
public struct RequestInfo: Sendable {
    public var index: Int
    public var method: String
    public var uri: String
    public var headers: [HeaderField]

    public init(index: Int, method: String, uri: String, headers: [HeaderField]) {
        self.index = index
        self.method = method
        self.uri = uri
        self.headers = headers
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Holds stalled requests until ``open()`` is called.
public final class ReceiverGate: Sendable {
    private let state = Mutex<(isOpen: Bool, waiters: [@Sendable () -> Void])>((false, []))

    public init() {}

    /// Releases every request waiting at this gate, and any that reach it later.
    public func open() {
        let waiters = state.withLock { state -> [@Sendable () -> Void] in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter() }
    }

    func whenOpen(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.isOpen { return true }
            state.waiters.append(action)
            return false
        }
        if now { action() }
    }
}
