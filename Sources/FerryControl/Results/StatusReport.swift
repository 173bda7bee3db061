import Foundation

/// `status`'s result.
public struct StatusReport: Sendable, Codable {
    public var version: String
    public var pid: Int32
    public var startedAt: Date
    public var uptimeSeconds: Double
    public var configPath: String
    public var maxConcurrentUploads: Int
    public var spools: [SpoolStatus]
    /// Request body bytes sent per second, averaged over the last minute.
    public var bytesPerSecond: Double
    public var uploads: [UploadProgress]
    /// The bandwidth limits in force: the shared one (`*`) and each spool's.
    public var bandwidth: [BandwidthState]?

    enum CodingKeys: String, CodingKey {
        case version, pid, spools, uploads, bandwidth
        case startedAt = "started_at", uptimeSeconds = "uptime_seconds", configPath = "config_path",
             maxConcurrentUploads = "max_concurrent_uploads", bytesPerSecond = "bytes_per_second"
    }

    public init(version: String, pid: Int32, startedAt: Date, uptimeSeconds: Double, configPath: String,
                maxConcurrentUploads: Int, spools: [SpoolStatus], bytesPerSecond: Double, uploads: [UploadProgress],
                bandwidth: [BandwidthState]? = nil) {
        self.bandwidth = bandwidth
        self.version = version
        self.pid = pid
        self.startedAt = startedAt
        self.uptimeSeconds = uptimeSeconds
        self.configPath = configPath
        self.maxConcurrentUploads = maxConcurrentUploads
        self.spools = spools
        self.bytesPerSecond = bytesPerSecond
        self.uploads = uploads
    }
}
