import FerryPortable
import Foundation

/// One header of a server's final answer, kept with the job (the spool's `result_headers`).
public struct ResponseHeader: Sendable, Hashable, Codable {
    /// The name, lowercased.
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name.lowercased()
        self.value = value
    }

    /// At most this many headers, and this many bytes of each value, are kept.
    public static let countLimit = 64
    public static let valueLimit = 8192

    /// The headers as stored: a JSON array of `[name, value]` pairs. Written here rather than by
    /// `JSONSerialization` (1.2 % of ferryd's CPU in a drain, on every success): it holds strings
    /// only, each a ``QuotedString``; ``decoded(_:)`` reads it with `JSONSerialization`.
    static func encoded(_ headers: [ResponseHeader]) -> String? {
        guard !headers.isEmpty else { return nil }
        let pairs = headers.prefix(countLimit).map { header in
            "[" + QuotedString.basic(header.name) + "," + QuotedString.basic(String(header.value.utf8.prefix(valueLimit)) ?? "") + "]"
        }
        return "[" + pairs.joined(separator: ",") + "]"
    }

    /// Reads what ``encoded(_:)`` wrote; anything else reads as no headers.
    static func decoded(_ text: String?) -> [ResponseHeader] {
        guard let data = text?.data(using: .utf8),
              let pairs = try? JSONSerialization.jsonObject(with: data) as? [[String]] else { return [] }
        return pairs.compactMap { $0.count == 2 ? ResponseHeader(name: $0[0], value: $0[1]) : nil }
    }
}

extension Array where Element == ResponseHeader {
    /// The headers by name, a repeated header's values joined with ", " (RFC 9110 §5.3), as the
    /// control protocol, result files and sidecars show them; `nil` when there are none.
    public var byName: [String: String]? {
        guard !isEmpty else { return nil }
        return reduce(into: [:]) { result, header in
            result[header.name] = result[header.name].map { $0 + ", " + header.value } ?? header.value
        }
    }

    /// The first value of header `name` (case-insensitive).
    public func value(_ name: String) -> String? {
        let lowered = name.lowercased()
        return first { $0.name == lowered }?.value
    }
}
