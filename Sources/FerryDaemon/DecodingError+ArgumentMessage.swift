import Foundation

extension DecodingError {
    /// What is wrong with a control command's arguments, in the request's own terms: the argument's
    /// name and the kind of JSON value it must be.
    var argumentMessage: String {
        switch self {
        case .keyNotFound(let key, _):
            "missing \"\(key.stringValue)\""
        case .typeMismatch(let type, let context) where Self.jsonKind(of: type) != nil:
            (context.codingPath.last.map { "\"\($0.stringValue)\" " } ?? "") + "must be " + Self.jsonKind(of: type)!
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            (context.codingPath.last.map { "\"\($0.stringValue)\": " } ?? "") + context.debugDescription
        @unknown default:
            "\(self)"
        }
    }

    /// What a value of `type` looks like in JSON, for the types arguments use.
    private static func jsonKind(of type: Any.Type) -> String? {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Bool.Type: "true or false"
        case is Double.Type: "a number"
        default: nil
        }
    }
}
