import Crypto
import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySystem
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A multipart request body on disk, built for one version of a job's file.
struct BuiltBody: Sendable {
    var path: String
    var contentLength: Int64
    var contentType: String
    /// The digests sent with it (the spool's `digest`), computed before the body file is written.
    var digests: SentDigests?
}

/// Turns a job into its `multipart/form-data` body file under `state_directory/bodies` (mode 0600):
/// the configured text fields first, with placeholders filled in, then the file part.
struct BodyBuilder: Sendable {
    let directory: String

    func path(for job: Job) -> String { "\(directory)/\(job.id.rawValue).body" }

    /// Builds the body from `source`. `progress` is told of the body file as soon as it exists (its
    /// path, length and type) and then of each advance of the bytes written, so that a sender can
    /// follow the build. `fields`: the request's fields (the spool's, merged with the file's
    /// sidecar); `nil`: the spool's. Blocking: runs on the ``BlockingIO`` pool.
    func build(
        job: Job, source: SourceFile, spool: SpoolConfiguration, fields: [NamedValue]? = nil, isCancelled: @escaping () -> Bool = { false },
        progress: (BuiltBody, Int64) -> Void = { _, _ in }
    ) throws(MultipartError) -> BuiltBody {
        let body = try Self.body(job: job, source: source, spool: spool, fields: fields, isCancelled: isCancelled)
        var digests: SentDigests?
        if let algorithm = spool.digest {
            // One read of the file before the copy: the digests go in the request's headers.
            do throws(SourceReadError) {
                digests = try DigestReader.form(body, source: source, algorithm: algorithm, isCancelled: isCancelled)
            } catch {
                throw Self.multipartError(error, source: source, path: job.displayPath)
            }
        }
        return try write(body, for: job, digests: digests, isCancelled: isCancelled, progress: progress)
    }

    /// Builds a bundle's body: the fields, then each file of the bundle, in name order.
    func build(
        job: Job, bundle: BundleSource, spool: SpoolConfiguration, fields: [NamedValue], isCancelled: @escaping () -> Bool = { false },
        progress: (BuiltBody, Int64) -> Void = { _, _ in }
    ) throws(MultipartError) -> BuiltBody {
        try write(Self.body(job: job, bundle: bundle, spool: spool, fields: fields), for: job, digests: nil, isCancelled: isCancelled, progress: progress)
    }

    /// Writes `body` to the job's body file.
    private func write(
        _ body: MultipartBody, for job: Job, digests: SentDigests?, isCancelled: @escaping () -> Bool, progress: (BuiltBody, Int64) -> Void
    ) throws(MultipartError) -> BuiltBody {
        let path = path(for: job)
        unlink(path)  // a body of an earlier version, if any
        let built = BuiltBody(path: path, contentLength: body.contentLength, contentType: body.contentType, digests: digests)
        let written = try body.writeFile(at: FilePath(path), isCancelled: isCancelled, progress: { progress(built, $0) })
        precondition(written == body.contentLength, "multipart body length mismatch")
        return built
    }

    /// The job's form, with the file part reading from `source`: the text fields first (`fields`,
    /// or the spool's), placeholders filled in, then the file. Blocking when a field needs the
    /// file's digest.
    static func body(
        job: Job, source: SourceFile, spool: SpoolConfiguration, fields: [NamedValue]? = nil, isCancelled: @escaping () -> Bool = { false }
    ) throws(MultipartError) -> MultipartBody {
        let filename = job.baseName
        let fields = fields ?? spool.fields
        var parts: [MultipartPart] = []
        if !fields.isEmpty {
            var sha256 = ""
            if Placeholders.needsDigest(fields.map(\.value)) {
                if let prefetched = source.prefetched {
                    sha256 = SHA256.hash(data: prefetched).hex  // a small file, read when it was opened
                } else {
                    do {
                        sha256 = try source.digest(SHA256.self, isCancelled: isCancelled).hex
                    } catch {
                        throw multipartError(error, source: source, path: job.displayPath)
                    }
                }
            }
            let placeholders = Placeholders(
                job: job, size: source.status.size, modificationTime: source.status.modificationTime, sha256: sha256)
            for field in fields {
                parts.append(.field(name: field.name, value: placeholders.render(field.value, for: .text)))
            }
        }
        parts.append(.file(
            name: spool.fileField, filename: filename,
            contentType: spool.fileContentType ?? MediaType.forFilename(filename),
            descriptor: source.descriptor, length: source.status.size))
        return try MultipartBody(boundary: try MultipartBoundary(job.boundary), parts: parts)
    }

    /// A bundle's form: the fields (`{filename}` is the bundle's name, `{size}` its files' total,
    /// `{mtime}` its newest), then one part per file under `bundle_file_field`, each with its own
    /// name and type, as a browser sends a `<input type=file multiple>`.
    static func body(job: Job, bundle: BundleSource, spool: SpoolConfiguration, fields: [NamedValue]) throws(MultipartError) -> MultipartBody {
        let placeholders = Placeholders(job: job, size: bundle.size, modificationTime: bundle.listing.status.modificationTime)
        var parts: [MultipartPart] = fields.map { .field(name: $0.name, value: placeholders.render($0.value, for: .text)) }
        for member in bundle.members {
            let filename = String(decoding: member.name, as: UTF8.self)
            parts.append(.file(
                name: spool.bundleFileField, filename: filename,
                contentType: spool.fileContentType ?? MediaType.forFilename(filename),
                descriptor: member.source.descriptor, length: member.source.status.size))
        }
        return try MultipartBody(boundary: try MultipartBoundary(job.boundary), parts: parts)
    }

    /// A failed read of the source, as the body builder reports it.
    static func multipartError(_ error: SourceReadError, source: SourceFile, path: String) -> MultipartError {
        switch error {
        case .cancelled: .cancelled
        case .changed: .sourceChanged(expected: source.status.size, actual: -1)
        case .io(let error): .io(operation: error.operation, path: path, errno: error.code)
        }
    }

    /// Removes a job's body file, if there is one.
    func remove(for job: Job) {
        unlink(path(for: job))
    }
}

extension Job {
    /// The file's base name as sent in `filename=` (invalid UTF-8 replaced by U+FFFD).
    var baseName: String {
        let name = relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? relativePath
        return String(decoding: name, as: UTF8.self)
    }
}
