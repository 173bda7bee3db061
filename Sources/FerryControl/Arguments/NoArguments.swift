/// Arguments of commands that take none.
public struct NoArguments: Sendable, Codable {
    public init() {}
}
