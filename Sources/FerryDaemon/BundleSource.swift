import FerryDelivery
import FerryQueue
import FerrySpool
import FerrySystem

/// A bundle opened for sending: each of its files opened without following symlinks and checked
/// against the listing that matched the job's version, and its field sidecar's bytes.
struct BundleSource: Sendable {
    /// One file part.
    struct Member: Sendable {
        /// The file's name in the bundle (its `filename=`), as raw bytes.
        var name: [UInt8]
        var source: SourceFile
    }

    /// The bundle directory, to look at it again once the body is built.
    let directory: DirectoryHandle
    /// What it held when opened (its ``BundleListing/status`` is the job's version).
    let listing: BundleListing
    /// The file parts, in name order.
    let members: [Member]
    /// The bundle's `.fields.toml`, if it holds one.
    let fieldSidecar: [UInt8]?

    /// The total size of the files.
    var size: Int64 { members.reduce(0) { $0 + $1.source.status.size } }

    /// The report to give if the bundle is no longer the job's version (a file written, added,
    /// removed or renamed); `nil` if it is.
    func change(from job: Job) -> AttemptReport? {
        for member in members where !member.source.isUnchanged {
            return .sourceChanged((try? BundleListing.read(directory))?.status.version)
        }
        guard let now = try? BundleListing.read(directory) else { return .sourceChanged(nil) }
        return now.status.version == job.identity ? nil : .sourceChanged(now.status.version)
    }

    func close() {
        for member in members { member.source.close() }
    }
}
