/// `show`: one job. `id` may be a full job id or an unambiguous prefix of one.
public struct ShowArguments: Sendable, Codable {
    public var id: String
    public init(id: String) { self.id = id }
}
