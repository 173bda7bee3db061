import Foundation

/// The control protocol's framing: one JSON object per line (NDJSON) in each direction, over a
/// stream Unix socket. Every request carries the protocol version `v`, a client-chosen `id` that
/// the reply echoes, a command name and its arguments:
///
///     → {"v":1,"id":7,"cmd":"list","args":{"state":"failed"}}
///     ← {"v":1,"id":7,"ok":true,"result":{…}}
///     ← {"v":1,"id":7,"ok":false,"error":{"code":"not_found","message":"…"}}
///
/// Streaming commands (`watch`) answer with one reply, then one `{"v":1,"id":7,"event":{…}}` line
/// per event. `docs/control-protocol.md` is the reference for other clients.
public enum ControlProtocol {
    /// The protocol version this build speaks.
    public static let version = 1
    /// The longest request line a daemon accepts, newline excluded.
    public static let maximumRequestLength = 64 * 1024
    /// The longest reply line a client accepts.
    public static let maximumReplyLength = 32 * 1024 * 1024
    /// Where `ferryctl` and `ferryd` look for the socket when nothing else says.
    public static let defaultSocketPath = "/run/ferry/control.sock"
}

/// Any JSON value; used for request ids (echoed verbatim) and for command arguments before they are
/// decoded into their command's type.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    /// A whole number that fits 64 bits, kept exactly (an id of 2^53 + 1 is echoed as sent).
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value):
            if value.rounded() == value, abs(value) < 9_007_199_254_740_992 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Decodes this value as `T` (a command's arguments).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try ControlJSON.decoder.decode(T.self, from: ControlJSON.encoder.encode(self))
    }

    /// The keys of this object (other than those given as `null`) that `T` has no field for: `T`
    /// decoded from it and encoded again keeps only the keys it knows. Empty for a non-object.
    public func keysUnknown<T: Codable>(to type: T.Type) throws -> [String] {
        guard case .object(let given) = self else { return [] }
        guard case .object(let known) = try ControlJSON.decoder.decode(JSONValue.self, from: ControlJSON.encoder.encode(decode(T.self))) else {
            return []
        }
        return given.filter { $0.value != .null && known[$0.key] == nil }.keys.sorted()
    }

    /// A short account of the kind of value this is, for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A request line, as sent by a client.
public struct ControlRequest: Sendable, Codable {
    /// The protocol version the client speaks.
    public var v: Int
    /// Echoed in the reply; any JSON value (usually a number).
    public var id: JSONValue?
    /// The command name, e.g. `"status"`.
    public var cmd: String
    /// The command's arguments; absent means none.
    public var args: JSONValue?

    public init<Arguments: Encodable>(id: Int, command: ControlCommand, arguments: Arguments) throws {
        v = ControlProtocol.version
        self.id = .number(Double(id))
        cmd = command.rawValue
        args = try ControlJSON.decoder.decode(JSONValue.self, from: ControlJSON.encoder.encode(arguments))
    }

    public init(v: Int = ControlProtocol.version, id: JSONValue?, cmd: String, args: JSONValue? = nil) {
        self.v = v
        self.id = id
        self.cmd = cmd
        self.args = args
    }
}

/// What went wrong with a request, in a form a program can branch on (`code`) and a person can act
/// on (`message`).
public struct ControlError: Error, Sendable, Codable, Hashable, CustomStringConvertible {
    /// Stable, machine-readable error codes.
    public enum Code: String, Sendable, Codable, CaseIterable {
        /// The line is not a JSON object, or a required field is missing or has the wrong type.
        case badRequest = "bad_request"
        /// The request line is longer than 64 KiB.
        case requestTooLarge = "request_too_large"
        /// `v` is not a version this daemon speaks.
        case unsupportedVersion = "unsupported_version"
        /// `cmd` is not a command this daemon knows.
        case unknownCommand = "unknown_command"
        /// An argument is missing or invalid.
        case invalidArgument = "invalid_argument"
        /// No job (or spool) by that name.
        case notFound = "not_found"
        /// The job is in a state that does not allow the action (e.g. retrying a job that is done).
        case conflict
        /// The peer may not run this command (see the access rules).
        case permissionDenied = "permission_denied"
        /// Too many control connections are open.
        case busy
        /// `wait` reached its timeout.
        case timeout
        /// `reload` found the new configuration invalid; the old one stays.
        case invalidConfiguration = "invalid_configuration"
        /// The daemon is shutting down.
        case unavailable
        /// Something failed inside the daemon (e.g. the queue database could not be read).
        case `internal`
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let raw = try container.decode(String.self, forKey: .code)
        // A newer daemon may send codes this client does not know; keep the message.
        code = Code(rawValue: raw) ?? .internal
        message = try container.decode(String.self, forKey: .message)
    }
}

/// A reply line, as sent by the daemon: either `result` (`ok` true) or `error` (`ok` false), or, for
/// streaming commands after their first reply, an `event`.
public struct ControlReply: Sendable, Codable {
    public var v: Int
    public var id: JSONValue?
    public var ok: Bool?
    public var result: JSONValue?
    public var error: ControlError?
    public var event: JSONValue?

    public init(id: JSONValue?, result: JSONValue) {
        v = ControlProtocol.version
        self.id = id
        ok = true
        self.result = result
    }

    public init(id: JSONValue?, error: ControlError) {
        v = ControlProtocol.version
        self.id = id
        ok = false
        self.error = error
    }

    public init(id: JSONValue?, event: JSONValue) {
        v = ControlProtocol.version
        self.id = id
        self.event = event
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(v, forKey: .v)
        try container.encode(id ?? .null, forKey: .id)
        try container.encodeIfPresent(ok, forKey: .ok)
        try container.encodeIfPresent(result, forKey: .result)
        try container.encodeIfPresent(error, forKey: .error)
        try container.encodeIfPresent(event, forKey: .event)
    }
}

/// The JSON coders both ends use: snake_case keys are spelled out in each type's `CodingKeys`;
/// dates are RFC 3339 strings in UTC with milliseconds.
public enum ControlJSON {
    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.format(date))
        }
        return encoder
    }

    public static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = Timestamp.parse(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an RFC 3339 time: \(text)")
            }
            return date
        }
        return decoder
    }

    /// Encodes `value` as a JSON value (to put in a reply's `result` or `event`).
    public static func value<T: Encodable>(_ value: T) throws -> JSONValue {
        try decoder.decode(JSONValue.self, from: encoder.encode(value))
    }

    /// One line of output: `value` encoded, followed by a newline.
    public static func line<T: Encodable>(_ value: T) throws -> Data {
        var data = try encoder.encode(value)
        data.append(0x0A)
        return data
    }
}

/// RFC 3339 timestamps (UTC, milliseconds), e.g. `2026-11-22T10:15:30.250Z`.
public enum Timestamp {
    public static func format(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }

    /// Parses RFC 3339 with or without fractional seconds.
    public static func parse(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }
}
