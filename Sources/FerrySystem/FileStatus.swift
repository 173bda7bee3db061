import CFerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// What `fstatat(2)` says about a directory entry, reduced to what Ferry decides on.
public struct FileStatus: Sendable, Hashable {
    /// The kind of a directory entry.
    public enum Kind: String, Sendable {
        case regular, directory, symlink
        /// FIFOs, sockets and device nodes: never uploaded.
        case special
    }

    public var kind: Kind
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// Modification time, nanoseconds since the Unix epoch.
    public var modificationTime: Int64
    public var linkCount: UInt64
    /// The full `st_mode` (type and permission bits).
    public var mode: UInt32
    /// The owner's user id.
    public var owner: UInt32

    public init(_ st: stat) {
        var st = st
        let rawMode = st.st_mode
        if cferry_is_regular(rawMode) != 0 {
            kind = .regular
        } else if cferry_is_directory(rawMode) != 0 {
            kind = .directory
        } else if cferry_is_symlink(rawMode) != 0 {
            kind = .symlink
        } else {
            kind = .special
        }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modificationTime = cferry_stat_mtime_ns(&st)
        linkCount = UInt64(st.st_nlink)
        mode = UInt32(st.st_mode)
        owner = UInt32(st.st_uid)
    }

    /// Which version of which file this is.
    public var version: FileVersion {
        FileVersion(device: device, inode: inode, size: size, modificationTime: modificationTime)
    }

    /// Whether `other` is the same version of the same file: same inode, size and mtime.
    public func isSameVersion(as other: FileStatus) -> Bool { version == other.version }
}

/// One version of one file: the same inode with the same size and modification time. A job
/// uploads one version (its ``FileIdentity``, the same type); a source is deleted or moved only if
/// it is still that version.
public struct FileVersion: Sendable, Hashable, Codable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    /// Modification time in nanoseconds since the Unix epoch.
    public var modificationTime: Int64

    public init(device: UInt64, inode: UInt64, size: Int64, modificationTime: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modificationTime = modificationTime
    }

    /// Which file, whatever its version: device and inode.
    public struct Inode: Sendable, Hashable {
        public var device: UInt64
        public var inode: UInt64
    }

    public var inodeIdentity: Inode { Inode(device: device, inode: inode) }
}
