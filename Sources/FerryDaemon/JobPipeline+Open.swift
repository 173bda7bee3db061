import FerryConfig
import FerryDelivery
import FerryQueue
import FerrySpool
import FerrySystem
import Foundation
import SystemPackage

/// Step 1 of the data path: open the job's source, without following symlinks, and check it is the
/// version queued.
extension JobPipeline {
    /// What opening a job's source gave.
    enum Opened: Sendable {
        /// The file, with the version of its field sidecar if it has one.
        case source(SourceFile, fieldSidecar: FileVersion?)
        /// A bundle, its files open.
        case bundle(BundleSource)
        /// The source cannot be sent now: why, as a report (and the version of the field sidecar
        /// that made it so, if one did).
        case unusable(AttemptReport, fieldSidecar: FileVersion?)

        /// The version of the file's field sidecar that was read.
        var fieldSidecar: FileVersion? {
            switch self {
            case .source(_, let version), .unusable(_, let version): version
            case .bundle: nil
            }
        }
    }

    /// Opens the job's source (on the ``BlockingIO`` pool).
    func open(_ job: Job, in spool: SpoolRuntime) async -> Opened {
        do {
            return try await io.run { _ in
                job.kind == .bundle
                    ? Self.openBundle(job, files: spool.files, spool: spool.configuration)
                    : Self.open(job, files: spool.files, prefetchLimit: spool.sender.prefetchLimit, spool: spool.configuration)
            }
        } catch {
            return .unusable(.stopped, fieldSidecar: nil)
        }
    }

    /// With `prefetchLimit`, a file up to that size is also read whole (one hop for open and read);
    /// if it changed meanwhile, it is left unread and the sender finds the change. In a spool that
    /// reads field sidecars (multipart), the file's sidecar is read in the same call (the sender
    /// parses it, and refuses the file if it is malformed: it is never sent with other fields than
    /// its producer gave); its version is recorded, so it is disposed of with the file.
    static func open(_ job: Job, files: SpoolFiles, prefetchLimit: Int64 = 0, spool: SpoolConfiguration? = nil) -> Opened {
        do throws(SourceOpenError) {
            let descriptor: FileDescriptor
            let status: FileStatus
            var sidecar: (bytes: [UInt8], version: FileVersion)?
            if let spool, spool.uploadProtocol == .multipart {
                let read: SpoolFiles.FieldSidecarRead
                (descriptor, status, read) = try files.openWithFieldSidecar(job.relativePath, sidecarLimit: FieldSidecar.sizeLimit)
                switch read {
                case .none: break
                case .read(let bytes, let version): sidecar = (bytes, version)
                case .unusable(let reason):
                    try? descriptor.close()
                    return .unusable(.refused(reason), fieldSidecar: nil)
                }
            } else {
                (descriptor, status) = try files.open(job.relativePath)
            }
            var source = SourceFile(descriptor: descriptor, status: status)
            guard status.version == job.identity else {
                source.close()
                return .unusable(.sourceChanged(status.version), fieldSidecar: sidecar?.version)
            }
            if status.size <= prefetchLimit, let bytes = try? source.bytes(), source.isUnchanged {
                source.prefetched = bytes
            }
            source.fieldSidecar = sidecar?.bytes
            return .source(source, fieldSidecar: sidecar?.version)
        } catch {
            return .unusable(report(for: error, what: "file"), fieldSidecar: nil)
        }
    }

    /// Opens a bundle: reads what it holds, checks it is the version queued and may be sent, and
    /// opens each of its files (checked against the listing).
    static func openBundle(_ job: Job, files: SpoolFiles, spool: SpoolConfiguration) -> Opened {
        let opened: SpoolFiles.OpenedBundle
        do {
            opened = try files.openBundle(job.relativePath)
        } catch {
            return .unusable(report(for: error, what: "bundle"), fieldSidecar: nil)
        }
        let listing = opened.listing
        guard listing.status.version == job.identity else { return .unusable(.sourceChanged(listing.status.version), fieldSidecar: nil) }
        guard spool.bundles else {
            return .unusable(.refused("the spool no longer takes bundles (bundles = true was removed from its configuration)"), fieldSidecar: nil)
        }
        if let refusal = listing.refusal(maxFiles: spool.maxBundleFiles) { return .unusable(.refused(refusal), fieldSidecar: nil) }
        var sidecar: [UInt8]?
        if let entry = listing.sidecar {
            guard let bytes = opened.directory.readPrefix(entry.name, limit: FieldSidecar.sizeLimit + 1) else {
                return .unusable(.localFailure("cannot read the bundle's \(displayName(entry.name))"), fieldSidecar: nil)
            }
            sidecar = bytes
        }
        var members: [BundleSource.Member] = []
        for entry in listing.files {
            do {
                let (descriptor, status) = try opened.directory.openForReading(entry.name)
                let source = SourceFile(descriptor: descriptor, status: status)
                members.append(BundleSource.Member(name: entry.name, source: source))
                guard status.kind == .regular, status.version == entry.status.version else {
                    members.forEach { $0.source.close() }
                    return .unusable(.sourceChanged(nil), fieldSidecar: nil)
                }
            } catch {
                members.forEach { $0.source.close() }
                switch error.code {
                case ENOENT, ELOOP: return .unusable(.sourceChanged(nil), fieldSidecar: nil)
                case EACCES, EPERM:
                    return .unusable(.sourceGone("ferryd may not read \(displayName(entry.name)) in the bundle (permission denied)"), fieldSidecar: nil)
                default: return .unusable(.localFailure("cannot open \(displayName(entry.name)) in the bundle: \(error)"), fieldSidecar: nil)
                }
            }
        }
        return .bundle(BundleSource(directory: opened.directory, listing: listing, members: members, fieldSidecar: sidecar))
    }

    /// Why a source could not be opened, as a report.
    private static func report(for error: SourceOpenError, what: String) -> AttemptReport {
        switch error {
        case .missing: .sourceGone("the \(what) disappeared before it was uploaded")
        case .symlink: .sourceGone("the \(what) was replaced by a symlink, which Ferry never follows")
        case .notRegularFile(let kind): .sourceGone("the \(what) was replaced by a \(kind.rawValue) entry\(what == "file" ? ", not a regular file" : "")")
        case .permissionDenied: .sourceGone("ferryd may not read the \(what) (permission denied)")
        case .other(let error): .localFailure("cannot open the \(what): \(error)")
        }
    }

    /// The files of a bundle job's bundle as it is now (for the job that supersedes it).
    func currentBundleFiles(_ job: Job, spool: SpoolRuntime?) async -> [BundleFile] {
        guard let spool else { return [] }
        let files = spool.files
        return (try? await io.run { _ in
            (try? files.openBundle(job.relativePath))?.listing.bundleFiles ?? []
        }) ?? []
    }
}

extension Job {
    /// The last component of the path, as raw bytes.
    var baseNameBytes: [UInt8] {
        relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? relativePath
    }
}
