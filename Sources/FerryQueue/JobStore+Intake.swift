import Foundation
import GRDB

/// Files found in the spools become jobs.
extension JobStore {
    /// A file found in a spool, not yet known to be queued.
    public struct DiscoveredFile: Sendable, Hashable {
        public var spool: String
        public var relativePath: [UInt8]
        public var identity: FileIdentity
        /// For a bundle, its files (in the order they are sent); `nil` for a file.
        public var bundleFiles: [BundleFile]?
        /// When the file was seen; `nil` when not known (a file named by an operator).
        public var observedAt: Date?
        public init(spool: String, relativePath: [UInt8], identity: FileIdentity, bundleFiles: [BundleFile]? = nil, observedAt: Date? = nil) {
            self.spool = spool
            self.relativePath = relativePath
            self.identity = identity
            self.bundleFiles = bundleFiles
            self.observedAt = observedAt
        }
    }

    /// Queues each file that is not already queued or already handled, in one transaction, and
    /// returns the new jobs. A file is already handled when the latest job for its path is still
    /// active, still being disposed of, or was deliberately left in place (`keep`, or changed during
    /// its upload) with this very identity, or when this very identity was deleted or moved after
    /// the file was seen.
    public func enqueue(
        _ files: [DiscoveredFile], now: Date, notBefore: Date? = nil, makeBoundary: @escaping @Sendable () -> String
    ) async throws -> [Job] {
        guard !files.isEmpty else { return [] }
        return try await write { db in
            var created: [Job] = []
            let latest = try db.cachedStatement(sql: """
                SELECT state, device, inode, size, mtime_ns, disposition, disposed_at
                FROM job WHERE spool = ? AND relative_path = ? ORDER BY seq DESC LIMIT 1
                """)
            let active = try db.cachedStatement(sql: """
                SELECT 1 FROM job WHERE spool = ? AND relative_path = ?
                AND \(JobPredicate.active) LIMIT 1
                """)
            for file in files {
                latest.setUncheckedArguments([file.spool, Data(file.relativePath)])
                if let row = try Row.fetchOne(latest) {
                    let state: JobState = row["state"]
                    if !state.isFinal { continue }
                    let identity = FileIdentity(
                        device: UInt64(bitPattern: row["device"]), inode: UInt64(bitPattern: row["inode"]),
                        size: row["size"], modificationTime: row["mtime_ns"])
                    // Its file not dealt with yet (a delete or move in progress, or pending): this
                    // version is the job's own. Another version is a new file, renamed in while the
                    // old one was being deleted or moved: queued now, not at the next rescan.
                    if row["disposed_at"] as Double? == nil && identity == file.identity { continue }
                    // An older job may be active while the newest is final: `retry` reopened it after
                    // a newer version was delivered. The file is that job's (and a second active job
                    // for the path would break the unique index, failing the whole batch).
                    active.setUncheckedArguments([file.spool, Data(file.relativePath)])
                    if try Row.fetchOne(active) != nil { continue }
                    let disposition = (row["disposition"] as String?).flatMap(Disposition.init(rawValue:))
                    let leftInPlace = disposition == .kept || disposition == .left
                    if leftInPlace && identity == file.identity { continue }
                    // Seen (by a rescan) before this very version was delivered and deleted or moved:
                    // it is not in the spool any more. Seen after, it was put back: queued again.
                    if identity == file.identity, let observed = file.observedAt, let disposedAt = row["disposed_at"] as Double?,
                       disposition == .deleted || disposition == .moved || disposition == .missing,
                       disposedAt >= observed.timeIntervalSince1970 { continue }
                }
                var job = Job(
                    id: JobID.generate(milliseconds: UInt64(max(0, now.timeIntervalSince1970 * 1000))),
                    spool: file.spool, relativePath: file.relativePath, identity: file.identity,
                    boundary: makeBoundary(), now: now)
                if let notBefore { job.nextAttemptAt = notBefore }
                if file.bundleFiles != nil { job.kind = .bundle }
                try job.insertRow(db)
                try Self.insertBundleMembers(db, of: job, file.bundleFiles ?? [])
                try JobEvent.record(db, job, kind: .queued, at: now)
                created.append(job)
            }
            return created
        }
    }

    /// Records a bundle job's files.
    static func insertBundleMembers(_ db: Database, of job: Job, _ files: [BundleFile]) throws {
        guard let sequence = job.sequence else { return }
        for (position, file) in files.enumerated() {
            try BundleMember(jobSequence: sequence, position: position, name: file.name, size: file.size).insert(db)
        }
    }

    /// A bundle job's files as they were queued, in the order they are sent (empty for a file).
    public func bundleMembers(of job: Job) async throws -> [BundleMember] {
        guard job.kind == .bundle, let sequence = job.sequence else { return [] }
        return try await read { db in
            try BundleMember.filter(Column("job_seq") == sequence).order(Column("position")).fetchAll(db)
        }
    }
}
