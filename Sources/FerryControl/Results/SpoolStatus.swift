import Foundation

/// One spool in `status`.
public struct SpoolStatus: Sendable, Codable, Hashable {
    public var name: String
    public var directory: String
    public var paused: Bool
    /// Jobs by state (every state present, zero included).
    public var counts: [String: Int]
    /// Files seen in the spool that are still being written (waiting for `settle`).
    public var settling: Int
    /// A local problem holding the spool's uploads back (the state directory is full, a file cannot
    /// be read), while it lasts; absent when there is none (so clients that predate it are unaffected).
    public var problem: SpoolProblem?
    /// With an `upload_window`: whether it is open now.
    public var windowOpen: Bool?
    /// With an `upload_window`: when it next opens (or closes, while open).
    public var windowChange: Date?

    enum CodingKeys: String, CodingKey {
        case name, directory, paused, counts, settling, problem
        case windowOpen = "window_open", windowChange = "window_change"
    }

    public init(name: String, directory: String, paused: Bool, counts: [String: Int], settling: Int, problem: SpoolProblem? = nil) {
        self.name = name
        self.directory = directory
        self.paused = paused
        self.counts = counts
        self.settling = settling
        self.problem = problem
    }
}
