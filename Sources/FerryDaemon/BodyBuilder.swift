import Crypto
import FerryConfig
import FerryMultipart
import FerryQueue
import FerrySystem
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A request body on disk, built for one version of a job's file.
struct BuiltBody: Sendable {
    var path: String
    var contentLength: Int64
    var contentType: String
    /// The version of the source the body was copied from.
    var identity: FileIdentity
    /// Set when the body is the spool file itself (put, tus), held open until the transfer ends.
    var source: SourceFile? = nil
}

/// Turns a job into its `multipart/form-data` body file under `state_directory/bodies` (mode 0600):
/// the configured text fields first, with placeholders filled in, then the file part.
struct BodyBuilder: Sendable {
    let directory: String

    func path(for job: Job) -> String { "\(directory)/\(job.id.rawValue).body" }

    /// Builds the body from `source`, which must be the open file of version `status`.
    /// `progress` is told of the body file as soon as it exists (its path, length and type) and
    /// then of each advance of the bytes written, so that a sender can follow the build.
    func build(
        job: Job, source: FileDescriptor, status: FileStatus, spool: SpoolConfiguration, isCancelled: () -> Bool = { false },
        progress: (BuiltBody, Int64) -> Void = { _, _ in }
    ) throws(MultipartError) -> BuiltBody {
        let filename = job.baseName
        let identity = FileIdentity(status)
        var parts: [MultipartPart] = []
        if !spool.fields.isEmpty {
            let needsDigest = spool.fields.contains { $0.value.placeholders.contains(.sha256) }
            let digest = needsDigest ? try Self.sha256(of: source, length: status.size, path: job.displayPath, isCancelled: isCancelled) : ""
            for field in spool.fields {
                parts.append(.field(name: field.name, value: Self.render(field.value, job: job, status: status, digest: { digest })))
            }
        }
        parts.append(.file(
            name: spool.fileField, filename: filename,
            contentType: spool.fileContentType ?? MediaType.forFilename(filename),
            descriptor: source, length: status.size))
        let body = try MultipartBody(boundary: try MultipartBoundary(job.boundary), parts: parts)
        let path = path(for: job)
        unlink(path)  // a body of an earlier version, if any
        let built = BuiltBody(path: path, contentLength: body.contentLength, contentType: body.contentType, identity: identity)
        let written = try body.writeFile(at: FilePath(path), isCancelled: isCancelled, progress: { progress(built, $0) })
        precondition(written == body.contentLength, "multipart body length mismatch")
        return built
    }

    /// A field's value for one file, placeholders filled in. `digest` is asked only if `{sha256}` is used.
    static func render(_ template: ValueTemplate, job: Job, status: FileStatus, digest: () -> String) -> String {
        let needsDigest = template.placeholders.contains(.sha256)
        let sha256 = needsDigest ? digest() : ""
        return template.render { placeholder in
            switch placeholder {
            case .filename: job.baseName
            case .size: String(status.size)
            case .mtime: rfc3339(nanoseconds: status.modificationTime)
            case .sha256: sha256
            case .relativePath: job.displayPath
            case .id: job.id.rawValue
            }
        }
    }

    /// Removes a job's body file, if there is one.
    func remove(for job: Job) {
        unlink(path(for: job))
    }

    static func sha256(of source: FileDescriptor, length: Int64, path: String, isCancelled: () -> Bool) throws(MultipartError) -> String {
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while offset < length {
            if isCancelled() { throw .cancelled }
            let want = Int(min(Int64(buffer.count), length - offset))
            let count = buffer.withUnsafeMutableBytes { pread(source.rawValue, $0.baseAddress, want, off_t(offset)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(operation: "read", path: path, errno: errno)
            }
            if count == 0 { throw .sourceChanged(expected: length, actual: offset) }
            buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            offset += Int64(count)
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// `2026-11-22T09:30:00Z`.
    static func rfc3339(nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}

extension FileIdentity {
    init(_ status: FileStatus) {
        self.init(device: status.device, inode: status.inode, size: status.size, modificationTime: status.modificationTime)
    }
}

extension FileStatus {
    /// Whether this is the version of the file that `identity` names.
    func matches(_ identity: FileIdentity) -> Bool {
        device == identity.device && inode == identity.inode && size == identity.size && modificationTime == identity.modificationTime
    }
}

extension Job {
    /// The file's base name as sent in `filename=` (invalid UTF-8 replaced by U+FFFD).
    var baseName: String {
        let name = relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? relativePath
        return String(decoding: name, as: UTF8.self)
    }
}
