/// One file of a bundle.
public struct BundleFileInfo: Sendable, Codable, Hashable {
    /// Its name in the bundle (bytes that are not UTF-8 appear as `\xNN`).
    public var name: String
    public var size: Int64

    public init(name: String, size: Int64) {
        self.name = name
        self.size = size
    }
}
