import Foundation

/// What came of one request.
public enum UploadResult: Sendable {
    /// The server answered. `body` holds at most the first 64 KiB of the response.
    case response(status: Int, headers: [(name: String, value: String)], body: [UInt8], bytesSent: Int64)
    /// No answer: the connection failed, timed out or was reset. Always worth retrying.
    case failed(TransportFailure, bytesSent: Int64)
    /// The request was cancelled (shutdown); it says nothing about the server.
    case cancelled(bytesSent: Int64)
}

/// Why a request got no answer.
public struct TransportFailure: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: String, Sendable {
        /// No connection could be made: refused, no route to the host, a failed DNS lookup, or
        /// the connect timeout. The server, or the way to it, is down: not this request's fault.
        case connect
        case timeout, tls, connectionClosed, io, other
        /// The file sent from the spool is no longer the version the request was for.
        case sourceChanged
    }
    public var kind: Kind
    public var message: String

    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// Whether no connection could be made to the server (``Kind/connect``).
    public var isUnreachable: Bool { kind == .connect }
}
