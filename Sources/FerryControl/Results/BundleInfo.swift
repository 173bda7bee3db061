/// A bundle job's files (`list` and `show`): a directory sent as one request.
public struct BundleInfo: Sendable, Codable, Hashable {
    /// The files, in the order they are sent.
    public var files: [BundleFileInfo]
    /// Their total size in bytes.
    public var totalSize: Int64

    enum CodingKeys: String, CodingKey {
        case files
        case totalSize = "total_size"
    }

    public init(files: [BundleFileInfo], totalSize: Int64) {
        self.files = files
        self.totalSize = totalSize
    }
}
