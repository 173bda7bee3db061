/// A closed set of names the protocol sends as JSON strings (an upload's phase, an attempt's
/// outcome, a file's location…): an enum whose raw values are the names on the wire.
///
/// The daemon only ever sends the known cases. A client reading a newer daemon's reply may meet a
/// name it does not know; decoding keeps it as `unrecognized(name)` rather than failing the whole
/// reply (fields that were plain strings before never failed there), and encoding writes it back
/// unchanged.
public protocol ControlVocabulary: RawRepresentable, CaseIterable, Codable, Hashable, Sendable, CustomStringConvertible
where RawValue == String, AllCases == [Self] {
    /// A name this build does not know, as it was received.
    static func unrecognized(_ name: String) -> Self
}

extension ControlVocabulary {
    /// The case named `rawValue`, or `unrecognized(rawValue)`.
    public init(rawValue: String) {
        self = Self.named(rawValue)
    }

    /// The case named `name`, or `unrecognized(name)`.
    public static func named(_ name: String) -> Self {
        allCases.first { $0.rawValue == name } ?? .unrecognized(name)
    }

    public init(from decoder: Decoder) throws {
        self = Self.named(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The name on the wire.
    public var description: String { rawValue }
}
