import GRDB

/// Why the queue database could not be used.
public enum QueueError: Error, Sendable, CustomStringConvertible {
    /// The database file could not be opened or created.
    case cannotOpen(path: String, reason: String)
    /// The database is damaged. Ferry stops rather than start an empty queue over it.
    case corrupt(path: String, details: String)
    /// The database was written by a newer Ferry whose schema this one does not know.
    case newerSchema(path: String, migration: String)
    /// The filesystem holding the database is full (or over its quota).
    case full(path: String)
    /// Any other SQLite failure.
    case database(String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let reason):
            return "cannot open the queue database \(path): \(reason)"
        case .corrupt(let path, let details):
            return "the queue database \(path) is damaged (\(details)); Ferry will not start over it. "
                + "Stop ferryd, move the file aside (with its -wal and -shm files) and start again to begin an empty queue; files still in the spools are queued anew"
        case .newerSchema(let path, let migration):
            return "the queue database \(path) was written by a newer Ferry (it has migration \"\(migration)\"); upgrade ferryd"
        case .full(let path):
            return "the filesystem holding the queue database \(path) is full; free space there (files wait in the spools meanwhile, and nothing is lost)"
        case .database(let message):
            return "queue database error: \(message)"
        }
    }

    /// Classifies a GRDB error raised while opening, checking or recovering `path`.
    public static func classify(_ error: any Error, path: String) -> QueueError {
        if let error = error as? QueueError { return error }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                return .corrupt(path: path, details: error.message ?? "\(error.resultCode)")
            case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_AUTH:
                return .cannotOpen(path: path, reason: error.message ?? "\(error.resultCode)")
            case .SQLITE_FULL:
                return .full(path: path)
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return .cannotOpen(path: path, reason: "the database is locked by another process")
            default:
                return .database("\(path): \(error.message ?? "\(error.resultCode)")")
            }
        }
        return .database("\(path): \(error)")
    }
}
