import FerrySystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's state directory: the queue database, the temporary bodies, and a lock file that
/// keeps a second `ferryd` from using the same state at once.
struct StateDirectory: ~Copyable {
    let path: String
    private let lockDescriptor: Int32

    var databasePath: String { path + "/queue.sqlite" }
    var bodiesPath: String { path + "/bodies" }

    /// Creates the directories (mode 0700: bodies hold the files' bytes) and takes the lock.
    init(path: String) throws(DaemonError) {
        self.path = path
        do {
            try makeDirectories(path, mode: 0o700)
            try makeDirectories(path + "/bodies", mode: 0o700)
        } catch {
            throw .stateDirectory("\(error)")
        }
        // Bodies are copies of the files being sent: only the daemon's user may list or read them,
        // however the directories were created (systemd's StateDirectory= makes them 0755).
        for directory in [path, path + "/bodies"] where chmod(directory, 0o700) != 0 {
            throw .stateDirectory("cannot make \(directory) private (chmod 0700): \(systemErrorMessage(errno))")
        }
        let lockPath = path + "/ferryd.lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .stateDirectory("cannot open \(lockPath): \(systemErrorMessage(errno))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var holder = ""
            if let bytes = FileManager.default.contents(atPath: lockPath), let pid = String(data: bytes, encoding: .utf8) {
                holder = " (pid \(pid.trimmingCharacters(in: .whitespacesAndNewlines)))"
            }
            close(fd)
            throw .alreadyRunning("another ferryd\(holder) is using the state directory \(path); stop it first, or give this one its own state_directory")
        }
        ftruncate(fd, 0)
        let pid = "\(getpid())\n"
        _ = pid.withCString { write(fd, $0, strlen($0)) }
        lockDescriptor = fd
    }

    deinit { close(lockDescriptor) }

    /// Makes the queue database files readable by the daemon's user only.
    func protectDatabase() {
        for suffix in ["", "-wal", "-shm"] { chmod(databasePath + suffix, 0o600) }
    }

    /// Removes every temporary body: none is in use when the daemon starts, and each is rebuilt on demand.
    func removeOrphanedBodies() -> Int {
        guard let handle = try? DirectoryHandle.open(bodiesPath), let names = try? handle.entryNames() else { return 0 }
        var removed = 0
        for name in names where (try? handle.unlink(name)) != nil { removed += 1 }
        return removed
    }
}
