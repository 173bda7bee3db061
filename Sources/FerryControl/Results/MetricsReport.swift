/// `metrics`' result: counters and gauges since the daemon started, plus the same in the
/// Prometheus text exposition format.
public struct MetricsReport: Sendable, Codable {
    public var values: [String: Double]
    public var prometheus: String

    public init(values: [String: Double], prometheus: String) {
        self.values = values
        self.prometheus = prometheus
    }
}
