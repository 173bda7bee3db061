import FerrySystem
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A file's field sidecar, `<name>.fields.toml` beside it: read with the file, disposed of with it.
extension SpoolFiles {
    /// What reading a file's field sidecar gave.
    public enum FieldSidecarRead: Sendable, Equatable {
        /// The file has none.
        case none
        /// Its bytes (at most the limit asked for, plus one to tell a longer file) and its version.
        case read([UInt8], FileVersion)
        /// There is one, but it cannot be used: why, in words.
        case unusable(String)
    }

    /// The sidecar's name for a file's name.
    static func fieldSidecarName(for name: [UInt8]) -> [UInt8] { name + BundleListing.sidecarName }

    /// The sidecar's path for a file's path below the spool.
    static func fieldSidecarPath(for relativePath: [UInt8]) -> [UInt8] { relativePath + BundleListing.sidecarName }

    /// Opens a file for reading, as ``open(_:)``, and reads its field sidecar through the same
    /// directory handle (up to `sidecarLimit + 1` bytes, without following a symlink).
    public func openWithFieldSidecar(
        _ relativePath: [UInt8], sidecarLimit: Int
    ) throws(SourceOpenError) -> (FileDescriptor, FileStatus, FieldSidecarRead) {
        do {
            let root = try DirectoryHandle.open(directory)
            let (parent, name) = try root.openParent(of: relativePath)
            let sidecar = Self.readFieldSidecar(Self.fieldSidecarName(for: name), in: parent, limit: sidecarLimit)
            let (descriptor, status) = try parent.openForReading(name)
            guard status.kind == .regular else {
                try? descriptor.close()
                throw SourceOpenError.notRegularFile(status.kind)
            }
            return (descriptor, status, sidecar)
        } catch {
            throw openError(error)
        }
    }

    /// Reads the sidecar `name` in `parent`.
    static func readFieldSidecar(_ name: [UInt8], in parent: DirectoryHandle, limit: Int) -> FieldSidecarRead {
        let descriptor: FileDescriptor
        let status: FileStatus
        do {
            (descriptor, status) = try parent.openForReading(name)
        } catch {
            switch error.code {
            case ENOENT, ENAMETOOLONG: return .none
            case ELOOP: return .unusable("its field sidecar \(displayName(name)) is a symlink, which Ferry never follows")
            default: return .unusable("cannot read its field sidecar \(displayName(name)): \(error)")
            }
        }
        defer { try? descriptor.close() }
        guard status.kind == .regular else { return .unusable("its field sidecar \(displayName(name)) is not a regular file") }
        var buffer = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count < buffer.count {
            let read = buffer.withUnsafeMutableBytes { pread(descriptor.rawValue, $0.baseAddress! + count, $0.count - count, off_t(count)) }
            if read < 0 && errno == EINTR { continue }
            guard read >= 0 else { return .unusable("cannot read its field sidecar \(displayName(name)): \(SystemError.current("read", parent.childPath(name)))") }
            if read == 0 { break }
            count += read
        }
        return .read(Array(buffer[0..<count]), status.version)
    }

    /// Deals with the field sidecar of a file that was deleted (`movedTo == nil`) or moved to
    /// `movedTo` (an absolute raw path): the sidecar is deleted, or moved beside the file as
    /// `<final name>.fields.toml`, if it is still `expected` (a newer one, for a newer file of
    /// that name, is left alone). Idempotent.
    public func disposeOfFieldSidecar(of relativePath: [UInt8], expected: FileVersion, movedTo: [UInt8]?) throws(SystemError) {
        let path = Self.fieldSidecarPath(for: relativePath)
        let root = try DirectoryHandle.open(directory)
        guard let (parent, name) = try? root.openParent(of: path), let status = parent.status(of: name),
              status.kind == .regular, status.version == expected else { return }
        if let movedTo {
            let finalName = movedTo.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? movedTo
            let destination = try DirectoryHandle.open(rawPath: Array(movedTo.dropLast(finalName.count)))
            guard let bytes = parent.readPrefix(name, limit: Int(status.size) + 1), bytes.count == Int(status.size) else {
                throw SystemError(operation: "read", path: parent.childPath(name), code: EIO)
            }
            // Never over a file there: in a failed directory two spools share, a file of the other
            // spool may have this name. Taken by our own bytes (a run cut short after writing them):
            // done; by others: `<final name>.1.fields.toml`, and so on.
            var candidate = Self.fieldSidecarName(for: finalName)
            for number in 1...1000 {
                if try destination.writeFileNoReplace(candidate, bytes: bytes, mode: mode_t(status.mode & 0o777)) { break }
                if destination.readPrefix(candidate, limit: bytes.count + 1) == bytes { break }
                guard number < 1000 else { throw SystemError(operation: "create", path: destination.childPath(candidate), code: EEXIST) }
                candidate = Self.fieldSidecarName(for: finalName + Array(".\(number)".utf8))
            }
            destination.sync()
        }
        do {
            try parent.unlink(name)
        } catch where error.code == ENOENT {}
        parent.sync()
    }
}
