import FerryDelivery
import FerryQueue

/// How a transfer that keeps a resumable upload (tus, the resumable upload draft) ended: the report
/// for ``AttemptDecider``, the bytes sent, and the upload as it stands (already recorded).
public struct ResumableTransferResult: Sendable {
    public var report: AttemptReport
    public var bytesSent: Int64
    public var upload: ResumableUpload?
    /// Whether the confirmed offset moved forward.
    public var progressed: Bool
    /// Whether the answer that ends the transfer came before its request's whole body was sent (a
    /// file sent whole to a server that is not resumable, which answered early).
    public var answeredEarly = false
}
