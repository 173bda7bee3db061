import Logging

/// One log record in journald's native protocol (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/),
/// built from what a swift-log call carries; pure, so the encoding is tested without a journal.
///
/// The fields: `MESSAGE`, `PRIORITY` (syslog's numbers, from the level), `SYSLOG_IDENTIFIER`,
/// `CODE_FILE`, `CODE_LINE` and `CODE_FUNC` (the log call's site), `FERRY_LOGGER` (the logger's
/// label) and one `FERRY_<KEY>` per metadata key (`job` → `FERRY_JOB`), so
/// `journalctl FERRY_JOB=01J…` finds one job's records and `journalctl -p warning` its problems.
/// Callers never pass secrets as metadata; nothing here adds any.
public struct JournalEntry: Sendable, Equatable {
    /// A field: a name journald accepts and the value's bytes.
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: [UInt8]

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = Array(value.utf8)
        }
    }

    /// The fields in the order they are sent.
    public var fields: [Field]

    /// The prefix of the fields made from metadata keys.
    public static let metadataPrefix = "FERRY_"

    /// The longest field name journald accepts.
    public static let maximumNameLength = 64

    /// The entry for one log call. `metadata` is the logger's merged with the call's.
    public init(
        level: Logger.Level, message: String, label: String, identifier: String, metadata: Logger.Metadata,
        file: String, function: String, line: UInt
    ) {
        fields = [
            Field("MESSAGE", message),
            Field("PRIORITY", String(Self.priority(level))),
            Field("SYSLOG_IDENTIFIER", identifier),
            Field("CODE_FILE", file),
            Field("CODE_LINE", String(line)),
            Field("CODE_FUNC", function),
            Field("FERRY_LOGGER", label),
        ]
        for key in metadata.keys.sorted() {
            fields.append(Field(Self.fieldName(forMetadataKey: key), LogfmtLogHandler.render(metadata[key]!)))
        }
    }

    /// syslog's priority for a swift-log level: `trace` and `debug` 7, `info` 6, `notice` 5,
    /// `warning` 4, `error` 3, `critical` 2.
    public static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// `FERRY_` and the key in capitals, anything but A–Z, 0–9 and `_` made `_` (one per Unicode
    /// scalar), cut to 64 characters: a name journald keeps (it drops fields with invalid names).
    public static func fieldName(forMetadataKey key: String) -> String {
        var name = Array(metadataPrefix.utf8)
        for scalar in key.unicodeScalars {
            guard name.count < maximumNameLength else { break }
            switch scalar.value {
            case 0x61...0x7A: name.append(UInt8(scalar.value - 0x20))   // a–z
            case 0x41...0x5A, 0x30...0x39, 0x5F: name.append(UInt8(scalar.value))
            default: name.append(UInt8(ascii: "_"))
            }
        }
        return String(decoding: name, as: UTF8.self)
    }

    /// The datagram: `NAME=value\n` per field, or, for a value holding a newline, `NAME\n`, the
    /// value's length as a 64-bit little-endian integer, the value and `\n`.
    public func encoded() -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.count + 10 })
        for field in fields {
            bytes += field.name.utf8
            if field.value.contains(UInt8(ascii: "\n")) {
                bytes.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(field.value.count).littleEndian) { bytes += $0 }
            } else {
                bytes.append(UInt8(ascii: "="))
            }
            bytes += field.value
            bytes.append(UInt8(ascii: "\n"))
        }
        return bytes
    }
}
