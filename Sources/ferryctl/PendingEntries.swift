import FerrySystem
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What `enqueue` has written into a spool that is not (yet) a placed file or bundle: a hidden
/// temporary file or directory, or a sidecar whose file is not renamed in yet. A SIGINT handler
/// removes them all (``removeAllAfterInterrupt()``).
///
/// Entries are created, and the final renames done, under the same lock the handler takes, so an
/// interrupt either comes before a file is placed (and its sidecar goes too) or after (and both stay):
/// never a file without the sidecar written for it, nor a file created in a directory being removed.
enum PendingEntries {
    /// One entry: `name` in `parent`; a directory is removed with the files in it.
    struct Entry: Sendable {
        let parent: DirectoryHandle
        let name: [UInt8]
        let isDirectory: Bool

        func isSame(as other: Entry) -> Bool { parent === other.parent && name == other.name }
    }

    private struct State {
        var entries: [Entry] = []
        var interrupted = false
    }

    private static let state = Mutex(State())

    private static let interruptedError = PlacementError("interrupted")

    /// Runs `create`, which makes `entry`, and records it; nothing is made once interrupted.
    static func create(_ entry: Entry, _ create: () throws(PlacementError) -> Void) throws(PlacementError) {
        try state.withLock { (state: inout State) throws(PlacementError) in
            guard !state.interrupted else { throw interruptedError }
            try create()
            state.entries.append(entry)
        }
    }

    /// Runs `body` (which makes something inside a recorded directory, or renames a recorded entry
    /// into place), then records `adding` and forgets `removing`; nothing is done once interrupted.
    static func update(adding: [Entry] = [], removing: [Entry] = [], _ body: () throws(PlacementError) -> Void) throws(PlacementError) {
        try state.withLock { (state: inout State) throws(PlacementError) in
            guard !state.interrupted else { throw interruptedError }
            try body()
            state.entries.removeAll { entry in removing.contains { $0.isSame(as: entry) } }
            state.entries += adding
        }
    }

    /// Removes `entry` from the disk (after a failure) and forgets it.
    static func remove(_ entry: Entry) {
        state.withLock { state in
            state.entries.removeAll { $0.isSame(as: entry) }
            delete(entry)
        }
    }

    /// For the SIGINT handler: removes every recorded entry and refuses to create or place anything
    /// from now on.
    static func removeAllAfterInterrupt() {
        state.withLock { state in
            state.interrupted = true
            for entry in state.entries { delete(entry) }
            state.entries = []
        }
    }

    private static func delete(_ entry: Entry) {
        if entry.isDirectory {
            if let directory = try? entry.parent.openSubdirectory([entry.name]), let names = try? directory.entryNames() {
                for name in names { try? directory.unlink(name) }
            }
            _ = entry.name.withCString { unlinkat(entry.parent.descriptor, $0, AT_REMOVEDIR) }
        } else {
            try? entry.parent.unlink(entry.name)
        }
    }
}
