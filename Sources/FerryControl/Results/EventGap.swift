/// A range of event ids no longer kept.
public struct EventGap: Sendable, Codable, Hashable {
    public var from: Int64
    public var to: Int64
    public init(from: Int64, to: Int64) {
        self.from = from
        self.to = to
    }
}
