/// A configured name and value: a form field or a header.
public struct NamedValue: Sendable, Equatable {
    public var name: String
    public var value: ValueTemplate
    public init(name: String, value: ValueTemplate) {
        self.name = name
        self.value = value
    }
}
