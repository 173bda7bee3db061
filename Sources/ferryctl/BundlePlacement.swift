import FerryConfig
import FerrySystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Puts a local directory into a spool as a bundle (one job, one request with every file), the
/// producer contract for directories: its regular files are copied into a hidden temporary
/// directory in the spool (`.ferry-enqueue-…`), each flushed to disk, with the bundle's sidecar
/// (`.fields.toml`) when fields are given; then the directory is flushed and renamed into place,
/// never replacing an entry already there.
enum BundlePlacement {
    /// Checks the directory at `source` and copies it into `spool` under its base name.
    /// - Parameter sidecar: the bundle's fields (from `--field`), written as `.fields.toml` inside it.
    /// - Returns: the name it has in the spool.
    static func place(_ source: String, in spool: DirectoryHandle, sidecar: [UInt8]?) throws(PlacementError) -> String {
        let name = SpoolPlacement.baseName(source)
        try SpoolPlacement.checkName(name)
        let directory: DirectoryHandle
        do {
            directory = try DirectoryHandle.open(source)
        } catch {
            throw PlacementError("cannot open the directory: \(systemErrorMessage(error.code))")
        }
        let files = try contents(of: directory, withFields: sidecar != nil)
        // Refuse early, rather than copy many files only to find the name taken.
        if spool.status(of: Array(name.utf8)) != nil { throw SpoolPlacement.nameTaken(name) }

        let temporary = PendingEntries.Entry(
            parent: spool, name: Array(".ferry-enqueue-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))".utf8), isDirectory: true)
        try PendingEntries.create(temporary) { () throws(PlacementError) in
            guard temporary.name.withCString({ mkdirat(spool.descriptor, $0, 0o755) }) == 0 else {
                throw PlacementError("cannot create a directory in \(spool.path): \(systemErrorMessage(errno))")
            }
        }
        do throws(PlacementError) {
            let copy: DirectoryHandle
            do {
                copy = try spool.openSubdirectory([temporary.name])
            } catch {
                throw PlacementError("cannot open \(error.path): \(systemErrorMessage(error.code))")
            }
            for file in files { try copyFile(file, from: directory, into: copy) }
            if let sidecar {
                let output = try createFile(Array(FieldSidecar.bundleSidecarName.utf8), in: copy)
                try SpoolPlacement.fill(output, with: sidecar)
            }
            copy.sync()
            try PendingEntries.update(removing: [temporary]) { () throws(PlacementError) in
                try SpoolPlacement.rename(temporary.name, to: name, in: spool)
            }
        } catch {
            PendingEntries.remove(temporary)
            throw error
        }
        spool.sync()
        return name
    }

    /// The names of the files to copy from `directory`, after checking that it holds only regular
    /// files, at least one besides its sidecar, and a valid sidecar if it has one.
    /// - Parameter withFields: whether `--field` gives the bundle's sidecar (so it must not have one).
    static func contents(of directory: DirectoryHandle, withFields: Bool) throws(PlacementError) -> [[UInt8]] {
        let names: [[UInt8]]
        do {
            names = try directory.entryNames().sorted { $0.lexicographicallyPrecedes($1) }
        } catch {
            throw PlacementError("cannot read the directory: \(systemErrorMessage(error.code))")
        }
        let sidecarName = Array(FieldSidecar.bundleSidecarName.utf8)
        for name in names {
            let shown = displayName(name)
            guard let status = directory.status(of: name) else {
                throw PlacementError("cannot stat \(shown) in it: \(systemErrorMessage(errno))")
            }
            switch status.kind {
            case .regular: break
            case .directory:
                throw PlacementError("holds a subdirectory, \(shown); a bundle is a directory of files only (nested directories are not sent)")
            case .symlink:
                throw PlacementError("holds a symlink, \(shown); a bundle is a directory of regular files only (copy the file in instead)")
            default:
                throw PlacementError("holds \(shown), which is not a regular file; a bundle is a directory of regular files only")
            }
        }
        if names.contains(sidecarName) {
            if withFields {
                throw PlacementError("""
                    already holds \(FieldSidecar.bundleSidecarName); give the bundle's fields either with --field or in that file, not both
                    """)
            }
            try checkSidecar(in: directory)
        }
        let files = names.filter { $0 != sidecarName }
        guard !files.isEmpty else { throw PlacementError("holds no file; a bundle needs at least one") }
        return names
    }

    /// Refuses a bundle sidecar that ferryd would reject (read as ``FieldSidecar/parse(_:fileField:)`` reads it).
    private static func checkSidecar(in directory: DirectoryHandle) throws(PlacementError) {
        let name = Array(FieldSidecar.bundleSidecarName.utf8)
        guard let bytes = directory.readPrefix(name, limit: FieldSidecar.sizeLimit + 1) else {
            throw PlacementError("cannot read its \(FieldSidecar.bundleSidecarName): \(systemErrorMessage(errno))")
        }
        guard bytes.count <= FieldSidecar.sizeLimit else {
            throw PlacementError("its \(FieldSidecar.bundleSidecarName) is larger than \(FieldSidecar.sizeLimit) bytes")
        }
        do {
            // The spool's bundle file field is not known here; ferryd refuses a field of that name itself.
            _ = try FieldSidecar.parse(bytes, fileField: "")
        } catch {
            throw PlacementError("its \(FieldSidecar.bundleSidecarName) is not valid: \(error.description)")
        }
    }

    /// Copies regular file `name` from `source` into `target` under the same name, flushed to disk.
    private static func copyFile(_ name: [UInt8], from source: DirectoryHandle, into target: DirectoryHandle) throws(PlacementError) {
        let input: Int32
        let kind: FileStatus.Kind
        do {
            let (file, status) = try source.openForReading(name)
            (input, kind) = (file.rawValue, status.kind)
        } catch {
            throw PlacementError("cannot open \(displayName(name)) in it: \(systemErrorMessage(error.code))")
        }
        defer { close(input) }
        // It was a regular file when checked; it must still be one.
        guard kind == .regular else { throw PlacementError("\(displayName(name)) in it is no longer a regular file") }
        let output = try createFile(name, in: target)
        do {
            try SpoolPlacement.fill(output, from: input)
        } catch {
            throw PlacementError("\(displayName(name)): \(error.description)")
        }
    }

    /// Creates `name` in the temporary directory `target` (under the lock, so an interrupt never
    /// finds the directory half-emptied).
    private static func createFile(_ name: [UInt8], in target: DirectoryHandle) throws(PlacementError) -> SpoolPlacement.TemporaryFile {
        var descriptor: Int32 = -1
        try PendingEntries.update { () throws(PlacementError) in
            descriptor = name.withCString { openat(target.descriptor, $0, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o644) }
            guard descriptor >= 0 else {
                throw PlacementError("cannot create \(displayName(name)) in \(target.path): \(systemErrorMessage(errno))")
            }
        }
        return SpoolPlacement.TemporaryFile(entry: PendingEntries.Entry(parent: target, name: name, isDirectory: false), descriptor: descriptor)
    }
}
