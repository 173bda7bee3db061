import FerryPortable
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Writes one line per event to stderr as `key=value` pairs (logfmt), which journald stores and
/// `journalctl` greps well: `level=info msg="uploaded" job=01J… spool=media file="a.jpg" status=201`.
///
/// A timestamp leads each line unless stderr is the journal (`$JOURNAL_STREAM` names it), which
/// stamps its own. Where stderr is the journal, ferryd logs through ``JournalLogHandler`` instead.
/// Callers never pass secrets (header values, URL queries) as metadata.
public struct LogfmtLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let timestamps: Bool

    private static let lock = Mutex(())
    private static let stderrIsJournal = JournalLogHandler.streamIsJournal(environment: ProcessInfo.processInfo.environment)

    /// `timestamps` nil: a timestamp on each line unless stderr is the journal.
    public init(label: String, level: Logger.Level, timestamps: Bool? = nil) {
        self.label = label
        self.logLevel = level
        self.timestamps = timestamps ?? !Self.stderrIsJournal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set {
            // A job's logger gets three keys (job, spool, file), one at a time: room for them at once.
            if metadata.isEmpty { metadata.reserveCapacity(4) }
            metadata[key] = newValue
        }
    }

    public func log(event: LogEvent) {
        var bytes = Array(line(for: event).utf8)
        Self.lock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let count = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return }
                offset += count
            }
        }
    }

    /// The line `event` is written as, with its newline.
    func line(for event: LogEvent) -> String {
        var line = ""
        line.reserveCapacity(192)
        if timestamps {
            line += Self.timestamp() + " "
        }
        line += "level=\(event.level.rawValue) msg=\(Self.quote(event.message.description))"
        // The logger's and the event's pairs in key order, the event's winning: without merging
        // into a new dictionary (hashing, resizing, freeing), a third of a line's CPU in a profile.
        var pairs: [(key: String, value: Logger.Metadata.Value)] = []
        pairs.reserveCapacity(metadata.count + (event.metadata?.count ?? 0))
        if let extra = event.metadata {
            for pair in metadata where extra[pair.key] == nil { pairs.append(pair) }
            for pair in extra { pairs.append(pair) }
        } else {
            for pair in metadata { pairs.append(pair) }
        }
        pairs.sort { $0.key < $1.key }
        for pair in pairs {
            line += " \(pair.key)=\(Self.quote(Self.render(pair.value)))"
        }
        line += "\n"
        return line
    }

    static func render(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): text
        case .stringConvertible(let value): value.description
        case .array(let values): values.map(render).joined(separator: ",")
        case .dictionary(let values): values.keys.sorted().map { "\($0):\(render(values[$0]!))" }.joined(separator: ",")
        }
    }

    /// Quotes a value when it has spaces, quotes, `=` or control characters; escapes inside quotes.
    static func quote(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.value > 0x20 && scalar != "\"" && scalar != "=" && scalar != "\\" && scalar.value != 0x7F
        }
        return plain ? text : QuotedString.basic(text)
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // Digits by hand: `String(format:)` cost about 1 % of ferryd's CPU with a line per small file.
        var text = [UInt8]()
        text.reserveCapacity(24)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4); text.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2); text.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2); text.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2); text.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2); text.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2); text.append(UInt8(ascii: "."))
        digits(Int(now.tv_nsec / 1_000_000), 3); text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }
}
