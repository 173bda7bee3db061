import Foundation
import GRDB

/// One part of a multipart upload (S3) that the server confirmed: its number (from 1), its size,
/// the ETag the server gave it and the checksum it verified. A row of `upload_part`, kept with the
/// job's ``ResumableUpload`` until the upload is completed or forgotten.
public struct UploadPart: Sendable, Hashable, Codable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "upload_part"

    public var number: Int
    public var size: Int64
    public var etag: String
    /// The part's checksum as the server has it (base64), if the upload uses one.
    public var checksum: String?

    public init(number: Int, size: Int64, etag: String, checksum: String? = nil) {
        self.number = number
        self.size = size
        self.etag = etag
        self.checksum = checksum
    }

    public init(row: Row) {
        number = row["number"]
        size = row["size"]
        etag = row["etag"]
        checksum = row["checksum"]
    }

    public func encode(to container: inout PersistenceContainer) {
        container["number"] = number
        container["size"] = size
        container["etag"] = etag
        container["checksum"] = checksum
    }
}

extension JobStore {
    /// The parts of the job's multipart upload the server confirmed, by number.
    public func uploadParts(of job: Job) async throws -> [UploadPart] {
        try await read { db in
            try UploadPart.fetchAll(db, sql: "SELECT * FROM upload_part WHERE job_seq = ? ORDER BY number", arguments: [job.sequence])
        }
    }

    /// Records the job's resumable upload and replaces its parts with `parts`, in one transaction
    /// (`nil`: the upload is gone, and its parts with it). Durable on return.
    public func recordUpload(_ job: Job, _ upload: ResumableUpload?, parts: [UploadPart], now: Date) async throws {
        try await write { db in
            try Self.storeUpload(db, job, upload, now: now)
            try db.execute(sql: "DELETE FROM upload_part WHERE job_seq = ?", arguments: [job.sequence])
            guard upload != nil else { return }
            for part in parts { try Self.insert(db, part, of: job) }
        }
    }

    /// Records one more confirmed part and the upload's new confirmed byte count, in one
    /// transaction. Durable on return.
    public func recordPart(_ job: Job, _ part: UploadPart, upload: ResumableUpload, now: Date) async throws {
        try await write { db in
            try Self.storeUpload(db, job, upload, now: now)
            try Self.insert(db, part, of: job)
        }
    }

    private static func insert(_ db: Database, _ part: UploadPart, of job: Job) throws {
        try db.execute(
            sql: "INSERT OR REPLACE INTO upload_part (job_seq, number, size, etag, checksum) VALUES (?, ?, ?, ?, ?)",
            arguments: [job.sequence, part.number, part.size, part.etag, part.checksum])
    }
}
