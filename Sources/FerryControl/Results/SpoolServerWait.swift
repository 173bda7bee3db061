import Foundation

/// Why a spool starts no upload until a time because of its server: it asked to wait (a 429 or 503
/// with `Retry-After`, a rate limit's reset), or it cannot be reached.
public struct SpoolServerWait: Sendable, Codable, Hashable {
    /// Why the spool waits.
    public enum Reason: ControlVocabulary {
        /// The server asked to (Retry-After, a rate limit's reset time).
        case asked
        /// Connections to the server could not be made (refused, no route, DNS, connect timeout).
        case unreachable
        /// A name this build does not know (from a newer daemon).
        case unrecognized(String)

        public static let allCases: [Reason] = [.asked, .unreachable]

        public var rawValue: String {
            switch self {
            case .asked: "asked"
            case .unreachable: "unreachable"
            case .unrecognized(let name): name
            }
        }
    }

    public var reason: Reason
    /// When the spool's uploads start again.
    public var until: Date
    /// For `unreachable`: the last failure (`connection to host:port failed: … Connection refused`).
    public var message: String?
    /// For `unreachable`: the tries in a row that failed, each after the previous wait.
    public var tries: Int?

    public init(reason: Reason, until: Date, message: String? = nil, tries: Int? = nil) {
        self.reason = reason
        self.until = until
        self.message = message
        self.tries = tries
    }
}
