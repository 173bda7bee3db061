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
    /// Whether a directory in the spool is one job of several files (`bundles = true`); `false` when
    /// a daemon that predates bundles leaves it out.
    public var bundles: Bool
    /// How the spool's files travel (`protocol`: `multipart`, `put`, `tus`, `s3`, `resumable`);
    /// absent from daemons that predate it, and for a spool known only from the queue.
    public var uploadProtocol: String?
    /// The server's wait holding the spool's uploads back, while it lasts; absent when none.
    public var serverWait: SpoolServerWait?

    enum CodingKeys: String, CodingKey {
        case name, directory, paused, counts, settling, problem, bundles
        case windowOpen = "window_open", windowChange = "window_change", uploadProtocol = "protocol", serverWait = "server_wait"
    }

    public init(
        name: String, directory: String, paused: Bool, counts: [String: Int], settling: Int, problem: SpoolProblem? = nil,
        bundles: Bool = false, uploadProtocol: String? = nil
    ) {
        self.name = name
        self.directory = directory
        self.paused = paused
        self.counts = counts
        self.settling = settling
        self.problem = problem
        self.bundles = bundles
        self.uploadProtocol = uploadProtocol
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        directory = try container.decode(String.self, forKey: .directory)
        paused = try container.decode(Bool.self, forKey: .paused)
        counts = try container.decode([String: Int].self, forKey: .counts)
        settling = try container.decode(Int.self, forKey: .settling)
        problem = try container.decodeIfPresent(SpoolProblem.self, forKey: .problem)
        windowOpen = try container.decodeIfPresent(Bool.self, forKey: .windowOpen)
        windowChange = try container.decodeIfPresent(Date.self, forKey: .windowChange)
        bundles = try container.decodeIfPresent(Bool.self, forKey: .bundles) ?? false
        uploadProtocol = try container.decodeIfPresent(String.self, forKey: .uploadProtocol)
        serverWait = try container.decodeIfPresent(SpoolServerWait.self, forKey: .serverWait)
    }
}
