import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

extension SpoolFiles {
    /// Why a file moved aside cannot be brought back.
    public enum ReturnError: Error, Sendable, CustomStringConvertible {
        /// The file is no longer where Ferry put it.
        case missing(String)
        /// The spool already has a file with that name.
        case nameTaken(String)
        /// The failed directory is on another filesystem.
        case crossDevice(String)
        case system(SystemError)

        public var description: String {
            switch self {
            case .missing(let path): "the file is no longer at \(path)"
            case .nameTaken(let name): "the spool already has a file named \(name); move it away or wait for it to be uploaded"
            case .crossDevice(let path): "\(path) is on another filesystem than the spool; move it back by hand"
            case .system(let error): "\(error)"
            }
        }
    }

    /// Brings a file that Ferry moved aside (to `movedPath`, an absolute path in the failed
    /// directory) back into the spool as `relativePath`, never replacing a file there, and removes
    /// its `.error.json` sidecar if it is this job's (it contains `token`). Returns the file's
    /// status at its place in the spool.
    /// A bundle (`bundle`) comes back as the directory it is, and a file's field sidecar
    /// (`<name>.fields.toml`, moved beside it) comes back before it.
    public func bringBack(from movedPath: [UInt8], to relativePath: [UInt8], token: String, bundle: Bool = false) throws(ReturnError) -> FileStatus {
        let sourceName = movedPath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? []
        let parts = relativePath.split(separator: UInt8(ascii: "/")).map(Array.init)
        guard !sourceName.isEmpty, let name = parts.last else { throw .missing(displayName(movedPath)) }
        let sourceDirectory = Array(movedPath.dropLast(sourceName.count + 1))
        let source: DirectoryHandle
        let destination: DirectoryHandle
        do {
            source = try DirectoryHandle.open(rawPath: sourceDirectory.isEmpty ? Array("/".utf8) : sourceDirectory)
            destination = try DirectoryHandle.open(directory).openOrCreateSubdirectory(Array(parts.dropLast()))
        } catch {
            throw .system(error)
        }
        guard let status = source.status(of: sourceName), status.kind == (bundle ? .directory : .regular) else { throw .missing(displayName(movedPath)) }
        if let there = destination.status(of: name) {
            // A bring-back made as a hard link then an unlink and cut by a crash: the file is back
            // already (the same inode under both names); its name in the failed directory goes.
            guard !bundle, there.kind == .regular, there.version.inodeIdentity == status.version.inodeIdentity else {
                throw .nameTaken(displayName(relativePath))
            }
            do { try source.unlink(sourceName) } catch where error.code == ENOENT {} catch { throw .system(error) }
            source.sync()
            removeSidecar(of: sourceName, in: source, token: token)
            return there
        }
        let fieldSidecar = Self.fieldSidecarName(for: sourceName)
        if !bundle, source.status(of: fieldSidecar)?.kind == .regular, destination.status(of: Self.fieldSidecarName(for: name)) == nil {
            try? source.renameNoReplace(fieldSidecar, to: destination, as: Self.fieldSidecarName(for: name))
        }
        do {
            try source.renameNoReplace(sourceName, to: destination, as: name)
        } catch {
            switch error.code {
            case EEXIST: throw .nameTaken(displayName(relativePath))
            case EXDEV: throw .crossDevice(displayName(movedPath))
            default: throw .system(error)
            }
        }
        destination.sync()
        source.sync()
        removeSidecar(of: sourceName, in: source, token: token)
        guard var placed = destination.status(of: name) else { throw .missing(displayName(relativePath)) }
        if bundle, let listing = try? BundleListing.read(name, in: destination) { placed = listing.status }
        return placed
    }

    /// Removes the `.error.json` beside `movedPath` (an absolute path in the failed directory) if
    /// it is this job's (it contains `token`): for a file found back in the spool already, once the
    /// caller knows it is the version that failed (a bring-back cut by a stop after its rename).
    public func removeFailureReport(of movedPath: [UInt8], token: String) {
        let name = movedPath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? []
        guard !name.isEmpty, let directory = try? DirectoryHandle.open(rawPath: Array(movedPath.dropLast(name.count + 1))) else { return }
        removeSidecar(of: name, in: directory, token: token)
    }

    /// Removes `name`'s `.error.json` sidecar in `directory` if it is this job's (it contains `token`).
    private func removeSidecar(of name: [UInt8], in directory: DirectoryHandle, token: String) {
        let sidecar = Self.sidecarName(for: name)
        if let text = directory.readPrefix(sidecar, limit: Self.sidecarReadLimit), Self.contains(text, Array(token.utf8)) {
            try? directory.unlink(sidecar)
        }
    }
}
