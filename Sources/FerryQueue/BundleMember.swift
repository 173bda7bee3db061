import FerrySystem
import Foundation
import GRDB

/// One file of a bundle job, as it was when the bundle was queued: a row of `bundle_member`.
/// What `ferryctl list` and `show` report; the bundle is checked against its version
/// (``Job/identity``) before it is sent, not against these rows.
public struct BundleMember: Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "bundle_member"

    public var jobSequence: Int64
    /// The file's place in the request (0 first: byte order of names).
    public var position: Int
    /// The file's name in the bundle, as raw bytes.
    public var name: [UInt8]
    public var size: Int64

    public init(jobSequence: Int64, position: Int, name: [UInt8], size: Int64) {
        self.jobSequence = jobSequence
        self.position = position
        self.name = name
        self.size = size
    }

    /// The name as text for messages; bytes that are not UTF-8 appear as `\xNN`.
    public var shownName: String { displayName(name) }

    public init(row: Row) throws {
        jobSequence = row["job_seq"]
        position = row["position"]
        name = [UInt8](row["name"] as Data)
        size = row["size"]
    }

    public func encode(to container: inout PersistenceContainer) throws {
        container["job_seq"] = jobSequence
        container["position"] = position
        container["name"] = Data(name)
        container["size"] = size
    }
}
