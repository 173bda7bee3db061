import FerryDelivery
import FerryQueue
import FerryS3
import FerrySystem
import Foundation

/// One file to deliver to S3: where the object goes, how requests are signed, the file, and what
/// is known of an earlier attempt's multipart upload.
public struct S3Transfer: Sendable {
    /// The object's address (URL, `Host`, signed path).
    public var object: S3ObjectAddress
    public var signer: SigV4Signer
    /// The checksum sent with every part and the object; `nil`: none.
    public var checksum: S3ChecksumAlgorithm?
    /// Headers of the object (`x-amz-meta-*`, `x-amz-storage-class`, configured ones): sent, and
    /// signed, on PutObject and CreateMultipartUpload. Asked for only when needed (a `{sha256}`
    /// in a field reads the whole file).
    public var objectHeaders: @Sendable () async throws -> [(name: String, value: String)]
    public var contentType: String
    /// The file, opened safely: every body is read through its descriptor and checked against its version.
    public var source: SourceFile
    public var settings: S3UploadMachine.Settings
    /// The upload of an earlier attempt and its recorded parts.
    public var known: ResumableUpload?
    public var knownParts: [UploadPart]
    /// The time requests are signed at (tests skew it).
    public var clock: @Sendable () -> Date
    /// Configured headers S3 wants on the upload's other requests too, not only on its creation
    /// (``repeatsOnEveryRequest(_:)``): sent, and signed, on UploadPart, ListParts,
    /// CompleteMultipartUpload and HeadObject as well.
    public var uploadHeaders: [(name: String, value: String)] = []

    /// SSE-C's `x-amz-server-side-encryption-customer-*` (every part of an object encrypted with a
    /// customer key must carry the key), `x-amz-request-payer` and `x-amz-expected-bucket-owner`.
    /// Not SSE-S3/SSE-KMS's `x-amz-server-side-encryption`, which S3 refuses on UploadPart.
    public static func repeatsOnEveryRequest(_ name: String) -> Bool {
        let lower = name.lowercased()
        return lower.hasPrefix("x-amz-server-side-encryption-customer-") || lower == "x-amz-request-payer"
            || lower == "x-amz-expected-bucket-owner"
    }

    public init(
        object: S3ObjectAddress, signer: SigV4Signer, checksum: S3ChecksumAlgorithm?,
        objectHeaders: @escaping @Sendable () async throws -> [(name: String, value: String)], contentType: String, source: SourceFile,
        settings: S3UploadMachine.Settings, known: ResumableUpload?, knownParts: [UploadPart], clock: @escaping @Sendable () -> Date
    ) {
        self.object = object
        self.signer = signer
        self.checksum = checksum
        self.objectHeaders = objectHeaders
        self.contentType = contentType
        self.source = source
        self.settings = settings
        self.known = known
        self.knownParts = knownParts
        self.clock = clock
    }
}
