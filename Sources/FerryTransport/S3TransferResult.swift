import FerryDelivery
import FerryQueue

/// How an S3 transfer ended.
public struct S3TransferResult: Sendable {
    public var report: AttemptReport
    public var bytesSent: Int64
    /// The multipart upload as it stands (already recorded); `nil` once the object is complete.
    public var upload: ResumableUpload?
    public var progressed: Bool
    /// The stored object's ETag and version, on success.
    public var etag: String?
    public var versionID: String?
}
