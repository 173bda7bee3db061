/// A file of a bundle as found, before its job exists.
public struct BundleFile: Sendable, Hashable {
    public var name: [UInt8]
    public var size: Int64
    public init(name: [UInt8], size: Int64) {
        self.name = name
        self.size = size
    }
}
