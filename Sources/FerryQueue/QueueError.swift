import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#endif

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
                return .cannotOpen(path: path, reason: accessProblem(path) ?? error.message ?? "\(error.resultCode)")
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

    /// Why the database file (or its directory) cannot be opened for reading and writing by this
    /// process, said so that the fix is plain; `nil` if it can be, as far as `open(2)` tells.
    static func accessProblem(_ path: String) -> String? {
        for (target, flags) in [(path, O_RDWR | O_CLOEXEC), ((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)] {
            let descriptor = open(target, flags)
            if descriptor >= 0 {
                close(descriptor)
                continue
            }
            let code = errno
            if code == ENOENT && target == path { continue }
            var st = stat()
            let owner = stat(target, &st) == 0 ? " (owner uid \(st.st_uid), mode \(String(st.st_mode & 0o7777, radix: 8)))" : ""
            let what = target == path ? "the file" : "its directory"
            if code == EACCES || code == EPERM || code == EROFS {
                return "\(what) \(target)\(owner) cannot be opened for \(target == path ? "reading and writing" : "reading") by uid \(geteuid()): "
                    + "\(String(cString: strerror(code))); give ferryd's user access to the state directory and the files in it"
            }
            return "\(what) \(target): \(String(cString: strerror(code)))"
        }
        return nil
    }
}
