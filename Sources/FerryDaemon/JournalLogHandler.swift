import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Sends each record to journald natively (``JournalEntry`` over ``JournalSocket``), with its
/// metadata as fields: `journalctl -u ferryd FERRY_JOB=01J…` shows one job's story and
/// `journalctl -u ferryd -p warning` its problems. Used when stderr is the journal
/// (``streamIsJournal(environment:descriptor:)``); elsewhere ferryd logs logfmt (``LogfmtLogHandler``).
///
/// A record journald does not take is written to stderr as a logfmt line instead (with
/// `journal_error=` saying why), so nothing is lost silently.
public struct JournalLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let identifier: String
    private let socket: JournalSocket

    /// A handler for logger `label`, sending on `socket`, with `SYSLOG_IDENTIFIER=identifier`.
    public init(label: String, level: Logger.Level, socket: JournalSocket, identifier: String = "ferryd") {
        self.label = label
        self.logLevel = level
        self.socket = socket
        self.identifier = identifier
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
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let entry = JournalEntry(
            level: event.level, message: event.message.description, label: label, identifier: identifier,
            metadata: merged, file: event.file, function: event.function, line: event.line)
        do {
            try socket.send(entry.encoded())
        } catch {
            var fallback = LogfmtLogHandler(label: label, level: logLevel, timestamps: false)
            fallback.metadata = merged
            fallback[metadataKey: "journal_error"] = "\(error)"
            var unsent = event
            unsent.metadata = nil
            fallback.log(event: unsent)
        }
    }

    /// Whether `descriptor` (stderr) is the stream journald gave this process: `JOURNAL_STREAM`
    /// (`<device>:<inode>`, set by systemd) names the same device and inode as fstat(2) of it. A
    /// variable inherited by a process whose stderr was redirected does not match.
    public static func streamIsJournal(environment: [String: String], descriptor: Int32 = 2) -> Bool {
        guard let stream = environment["JOURNAL_STREAM"].flatMap(parseStream) else { return false }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        return UInt64(status.st_dev) == stream.device && UInt64(status.st_ino) == stream.inode
    }

    /// `JOURNAL_STREAM`'s device and inode, both decimal; nil when it is not two numbers.
    static func parseStream(_ value: String) -> (device: UInt64, inode: UInt64)? {
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        return (device, inode)
    }

    /// journald's socket: ``JournalSocket/defaultPath``; debug builds take
    /// `FERRY_TEST_JOURNAL_SOCKET` instead, so tests can run their own journald.
    public static func socketPath(environment: [String: String]) -> String {
        #if DEBUG
        if let path = environment["FERRY_TEST_JOURNAL_SOCKET"], !path.isEmpty { return path }
        #endif
        return JournalSocket.defaultPath
    }

    /// The socket to log to when stderr is the journal and journald's socket exists; nil otherwise
    /// (then ferryd logs logfmt to stderr).
    public static func socketForStderr(environment: [String: String]) -> JournalSocket? {
        guard streamIsJournal(environment: environment) else { return nil }
        let path = socketPath(environment: environment)
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return try? JournalSocket(path: path)
    }
}
