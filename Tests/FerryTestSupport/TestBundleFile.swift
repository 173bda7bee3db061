import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One file of a test bundle: its path inside the bundle directory (`a/b` makes a subdirectory) and
/// its bytes.
public struct TestBundleFile: Sendable {
    public var name: String
    public var bytes: [UInt8]

    public init(_ name: String, _ bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }

    /// `files` in the byte order of their names, the order a bundle's parts are sent in.
    public static func inByteOrder(_ files: [TestBundleFile]) -> [TestBundleFile] {
        files.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    }
}

/// Builds a bundle as the producer contract says: a directory made under a dot-name beside `path`,
/// filled (with `sidecar` as its `.fields.toml`, if given), then renamed to `path` in one step.
public func dropBundle(at path: String, files: [TestBundleFile], sidecar: String? = nil) throws {
    let parent = (path as NSString).deletingLastPathComponent
    let building = parent + "/.building-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: building, withIntermediateDirectories: false)
    for file in files {
        let target = building + "/" + file.name
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(file.bytes).write(to: URL(fileURLWithPath: target))
    }
    if let sidecar {
        try Data(sidecar.utf8).write(to: URL(fileURLWithPath: building + "/.fields.toml"))
    }
    guard rename(building, path) == 0 else {
        throw TestFailure("rename of the bundle into \(path) failed: \(String(cString: strerror(errno)))")
    }
}

/// Every regular file below `path`, by its path relative to `path`, with its bytes (dot-files
/// included, directories entered).
public func regularFiles(under path: String) throws -> [String: [UInt8]] {
    var found: [String: [UInt8]] = [:]
    guard let walker = FileManager.default.enumerator(atPath: path) else { throw TestFailure("cannot list \(path)") }
    while let relative = walker.nextObject() as? String {
        var st = stat()
        guard lstat(path + "/" + relative, &st) == 0 else { throw TestFailure("lstat \(path)/\(relative): \(String(cString: strerror(errno)))") }
        if st.st_mode & S_IFMT == S_IFREG {
            found[relative] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/" + relative)))
        }
    }
    return found
}

/// Whether `path` is a directory (not a symlink to one).
public func isDirectory(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
}

/// Rewrites the file at `path` in place (truncate, then write), as a producer that edits a file
/// it already handed over does: same inode, new size and mtime.
public func rewriteInPlace(_ path: String, _ bytes: [UInt8]) throws {
    let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
    guard fd >= 0 else { throw TestFailure("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written > 0 else { throw TestFailure("write \(path): \(String(cString: strerror(errno)))") }
        offset += written
    }
}
