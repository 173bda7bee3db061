/// A `protocol = "s3"` spool's own settings: where objects go, how they are signed, how files are
/// cut into parts.
public struct S3Settings: Sendable, Equatable {
    /// How the bucket is addressed.
    public enum Addressing: String, Sendable, CaseIterable {
        /// `https://endpoint/bucket/key` (MinIO, Ceph, SeaweedFS, local servers).
        case path
        /// `https://bucket.endpoint/key` (AWS's own).
        case virtual
    }

    /// The checksum sent with every part and object (`checksum`), or none.
    public enum Checksum: String, Sendable, CaseIterable {
        case crc32c, sha256, none
    }

    public var bucket: String
    /// The object key: `{relative_path}`, `{filename}`, `{id}`, `{mtime}`, `{sha256}`, `{size}`
    /// and literal text such as a `prefix/`.
    public var key: ValueTemplate
    public var region: String
    public var addressing: Addressing
    /// The credentials (the secret and the token are never logged or shown).
    public var accessKeyID: ValueTemplate
    public var secretAccessKey: ValueTemplate
    public var sessionToken: ValueTemplate?
    /// The size of every part but the last (grown for files that would need more than 10,000).
    public var partSize: Int64
    /// Files at least this long are sent as multipart uploads; smaller ones with one PutObject.
    public var multipartThreshold: Int64
    public var checksum: Checksum
    /// `x-amz-storage-class`, if set.
    public var storageClass: String?
    /// Parts written at once (`part_concurrency`, default 1; as many more may await their answers).
    /// A part being written is what a cut connection or a kill -9 may cost, so 1 bounds that to one
    /// part; more uses more connections at once, for servers that are faster that way.
    public var partConcurrency: Int

    /// S3's limits: parts per upload, and the smallest and largest part.
    public static let maximumParts: Int64 = 10_000
    public static let minimumPartSize: Int64 = 5 << 20
    public static let maximumPartSize: Int64 = 5 << 30
    /// The largest object S3 stores (5 TiB).
    public static let maximumObjectSize: Int64 = 5 << 40
    /// The most `part_concurrency` allows.
    public static let maximumPartConcurrency = 8

    public init(
        bucket: String, key: ValueTemplate, region: String = "us-east-1", addressing: Addressing = .path,
        accessKeyID: ValueTemplate, secretAccessKey: ValueTemplate, sessionToken: ValueTemplate? = nil,
        partSize: Int64 = 16 << 20, multipartThreshold: Int64? = nil, checksum: Checksum = .crc32c, storageClass: String? = nil,
        partConcurrency: Int = 1
    ) {
        self.bucket = bucket
        self.key = key
        self.region = region
        self.addressing = addressing
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.partSize = partSize
        self.multipartThreshold = multipartThreshold ?? partSize
        self.checksum = checksum
        self.storageClass = storageClass
        self.partConcurrency = partConcurrency
    }

    /// The part size for a file of `length` bytes: `partSize`, grown to whole MiB so the file
    /// needs at most 10,000 parts.
    public func partSize(forLength length: Int64) -> Int64 {
        let needed = (length + Self.maximumParts - 1) / Self.maximumParts
        guard needed > partSize else { return partSize }
        let mebibyte: Int64 = 1 << 20
        return (needed + mebibyte - 1) / mebibyte * mebibyte
    }
}
