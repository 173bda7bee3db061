import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// Claiming a file before it is deleted or moved (renaming it to `.ferry-claim-<token>` and
/// checking it is the version that was sent), and putting a claimed file back.
extension SpoolFiles {
    /// The result of claiming a file.
    enum Claim {
        case claimed(DirectoryHandle, [UInt8])
        case missing(DirectoryHandle?)
        case changed
    }

    /// Renames the file to its private claim name and checks it is `expected`. A claim left by an
    /// interrupted earlier run is picked up again.
    func claim(_ relativePath: [UInt8], expected: FileStatus, token: String, bundle: Bool) throws(SystemError) -> Claim {
        let root = try DirectoryHandle.open(directory)
        let parent: DirectoryHandle
        let name: [UInt8]
        do {
            (parent, name) = try root.openParent(of: relativePath)
        } catch where error.code == ENOENT || error.code == ENOTDIR || error.code == ELOOP {
            // A directory on the way is gone, or was replaced by a file or a symlink (ELOOP): the
            // file is no longer in the spool, and what the path leads to now is not Ferry's to touch.
            return .missing(nil)
        }
        let claimed = Self.claimName(token)
        if let earlier = parent.status(of: claimed) {
            // A bundle claimed by this job is this job's, checked when it was claimed: an interrupted
            // delete may have emptied it partly.
            if bundle ? earlier.kind == .directory : earlier.isSameVersion(as: expected) {
                // A claim made as a hard link then an unlink (a filesystem without RENAME_NOREPLACE)
                // and cut by a crash left the file under both names: the name goes too, or a rescan
                // would take the file as put back and send it again.
                if !bundle, let other = parent.status(of: name), other.kind == .regular,
                   other.version.inodeIdentity == earlier.version.inodeIdentity {
                    do { try parent.unlink(name) } catch where error.code == ENOENT {}
                }
                return .claimed(parent, claimed)
            }
            try restore(claimed, in: parent, as: name)
        }
        guard let current = parent.status(of: name) else {
            if errno == ENOENT { return .missing(parent) }
            throw .current("stat", parent.childPath(name))
        }
        guard current.kind == (bundle ? .directory : .regular), Self.version(of: name, in: parent, current, bundle: bundle) == expected.version
        else { return .changed }
        do {
            try parent.renameNoReplace(name, to: parent, as: claimed)
        } catch where error.code == ENOENT {
            return .missing(parent)
        }
        // Between the check and the rename a newer version may have been renamed over the name.
        guard let taken = parent.status(of: claimed), Self.version(of: claimed, in: parent, taken, bundle: bundle) == expected.version else {
            try restore(claimed, in: parent, as: name)
            return .changed
        }
        return .claimed(parent, claimed)
    }

    /// Puts the file this job claimed (`token`) for a delete or move that a stop cut back under its
    /// name, when the spool's `after_upload` no longer deletes or moves it (changed to `keep`
    /// before the restart): left under `.ferry-claim-<token>`, it would be hidden from its owner.
    /// Only a regular file of the `expected` version, and only under its own name: a file that
    /// holds the name now is another version, queued on its own, and the delivered one under
    /// another name would be taken for a new file and sent again. Returns the claim's path,
    /// relative to the spool, when it stays (a bundle's too: an interrupted delete may have
    /// emptied it partly).
    public func releaseClaim(of relativePath: [UInt8], expected: FileStatus, token: String) throws(SystemError) -> [UInt8]? {
        let parent: DirectoryHandle
        let name: [UInt8]
        do {
            (parent, name) = try DirectoryHandle.open(directory).openParent(of: relativePath)
        } catch where error.code == ENOENT || error.code == ENOTDIR || error.code == ELOOP {
            return nil
        }
        let claimed = Self.claimName(token)
        guard let earlier = parent.status(of: claimed) else { return nil }
        let claimPath = Array(relativePath.dropLast(name.count)) + claimed
        guard earlier.kind == .regular, earlier.isSameVersion(as: expected) else { return claimPath }
        // A claim made as a hard link then an unlink and cut by a crash: the name holds the file.
        if let there = parent.status(of: name), there.kind == .regular, there.version.inodeIdentity == earlier.version.inodeIdentity {
            do { try parent.unlink(claimed) } catch where error.code == ENOENT {}
            return nil
        }
        do {
            try parent.renameNoReplace(claimed, to: parent, as: name)
        } catch where error.code == EEXIST {
            return claimPath
        }
        return nil
    }

    /// Puts a claimed file that turned out to be another version back under its name (or, if that
    /// name is taken again, a free `name.N.ext`), where the watcher finds it and queues it.
    func restore(_ claimed: [UInt8], in parent: DirectoryHandle, as name: [UInt8]) throws(SystemError) {
        let mine = parent.status(of: claimed).flatMap { $0.kind == .regular ? $0.version.inodeIdentity : nil }
        for candidate in Self.candidateNames(for: name, token: Self.token(ofClaim: claimed)) {
            // A restore made as a hard link then an unlink and cut by a crash: the file is back
            // already; its claim name goes (else it came back twice, as name and name.1.ext).
            if let mine, let there = parent.status(of: candidate), there.kind == .regular, there.version.inodeIdentity == mine {
                do { try parent.unlink(claimed) } catch where error.code == ENOENT {}
                return
            }
            do {
                try parent.renameNoReplace(claimed, to: parent, as: candidate)
                return
            } catch where error.code == EEXIST {
                continue
            }
        }
    }
}
