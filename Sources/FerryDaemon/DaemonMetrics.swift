import CoreMetrics
import FerryControl
import FerryDelivery
import FerryQueue
import Foundation
import Prometheus

/// How an upload attempt ended, as `ferry_uploads_total{outcome}` and `ferry_upload_bytes_total{outcome}`
/// count it. One attempt is one request (or the try to send one); work that ends before a request
/// is made (the file vanished or changed, the body could not be built) is not an attempt here.

/// Ferry's metrics, in the Prometheus text format, for `ferryctl metrics` and `GET /metrics`.
///
/// Events are recorded as they happen with swift-metrics types (`Counter`, `Timer`) through a
/// `PrometheusMetricsFactory` over ``registry``: uploads and bytes by spool and outcome, and the
/// attempt duration histogram. State is read at scrape time, so it survives restarts and costs
/// nothing between scrapes: jobs by state, the oldest waiting job, the last delivery (all from
/// the queue database), uptime, bytes handed to connections, uploads in flight.
final class DaemonMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    /// Upper bounds of the attempt duration histogram's buckets.
    static let attemptDurationBuckets: [Duration] = [
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(120), .seconds(300), .seconds(600),
    ]

    static let uploads = "ferry_uploads_total"
    static let uploadBytes = "ferry_upload_bytes_total"
    static let attemptDuration = "ferry_attempt_duration_seconds"

    /// HELP texts of the families recorded through swift-metrics (whose factory has no place for them).
    static let help: [String: String] = [
        uploads: "Upload attempts by spool and outcome (delivered, retry, failed, interrupted) since ferryd started.",
        uploadBytes: "Request body bytes sent by upload attempts, by spool and outcome, since ferryd started.",
        attemptDuration: "Duration of upload attempts (building the body, sending it, the answer) in seconds.",
    ]

    /// The factory ferryd bootstraps swift-metrics with, and the one these metrics are recorded through.
    static func makeFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[attemptDuration] = attemptDurationBuckets
        return factory
    }

    /// - Parameter registry: where the counters live; the default registry is the one
    ///   ``FerryDaemon/bootstrapMetrics()`` gives swift-metrics, so other libraries' metrics appear too.
    init(registry: PrometheusCollectorRegistry = PrometheusMetricsFactory.defaultRegistry) {
        self.registry = registry
        factory = Self.makeFactory(registry: registry)
    }

    // MARK: Recording

    /// Records one upload attempt's end.
    func attemptEnded(spool: String, outcome: AttemptOutcome, bytesSent: Int64, duration: TimeInterval) {
        let dimensions = [("spool", spool), ("outcome", outcome.rawValue)]
        CoreMetrics.Counter(label: Self.uploads, dimensions: dimensions, factory: factory).increment()
        CoreMetrics.Counter(label: Self.uploadBytes, dimensions: dimensions, factory: factory).increment(by: max(0, bytesSent))
        CoreMetrics.Timer(label: Self.attemptDuration, dimensions: [("spool", spool)], factory: factory)
            .recordNanoseconds(Int64(max(0, duration) * 1e9))
    }

    /// Creates each spool's series at zero, so a spool with no upload yet reads 0 rather than nothing.
    func register(spools: [String]) {
        for spool in spools {
            for outcome in AttemptOutcome.allCases {
                let dimensions = [("spool", spool), ("outcome", outcome.rawValue)]
                _ = CoreMetrics.Counter(label: Self.uploads, dimensions: dimensions, factory: factory)
                _ = CoreMetrics.Counter(label: Self.uploadBytes, dimensions: dimensions, factory: factory)
            }
            _ = CoreMetrics.Timer(label: Self.attemptDuration, dimensions: [("spool", spool)], factory: factory)
        }
    }

    // MARK: Scraping

    /// Everything, read now: the text both `ferryctl metrics` and `GET /metrics` return.
    /// - Parameter spools: the configured spools (the database may name more: spools removed since).
    func report(
        store: JobStore, spools configured: [String], startedAt: Date, bytesSent: Int64, inFlight: Int, bandwidth: [BandwidthState] = [],
        unreachableTries: [String: Int] = [:]
    ) async throws -> MetricsReport {
        let now = Date()
        let counts = try await store.counts()
        var spools = configured
        for name in counts.keys.sorted() where !spools.contains(name) { spools.append(name) }
        let times = try await store.spoolTimes(spools)
        register(spools: configured)

        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: [(String, String)], value: String)]) {
            text += "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n"
            for sample in samples {
                text += name + Self.render(sample.labels) + " " + sample.value + "\n"
            }
        }
        family("ferry_uptime_seconds", "gauge", "Seconds since ferryd started.",
               [([], Self.number(now.timeIntervalSince(startedAt)))])
        family("ferry_bytes_sent_total", "counter", "Request body bytes handed to connections since ferryd started.",
               [([], String(bytesSent))])
        family("ferry_uploads_in_flight", "gauge", "Uploads holding an upload slot (max_concurrent_uploads): sending, or making their request.",
               [([], String(inFlight))])
        family("ferry_jobs", "gauge", "Jobs in the queue database by spool and state.", spools.flatMap { spool in
            JobState.allCases.map { state in ([("spool", spool), ("state", state.rawValue)], String(counts[spool]?[state] ?? 0)) }
        })
        family("ferry_oldest_job_age_seconds", "gauge",
               "Age of the oldest job waiting to be delivered (queued, uploading or retrying; not held), by its max_age clock; 0 when none waits.",
               spools.map { spool in
                   ([("spool", spool)], Self.number(times[spool]?.oldestWaiting.map { max(0, now.timeIntervalSince($0)) } ?? 0))
               })
        family("ferry_last_success_timestamp_seconds", "gauge",
               "Unix time of the last delivery (2xx) from the spool, from the queue database; 0 if none yet.",
               spools.map { spool in ([("spool", spool)], Self.number(times[spool]?.lastSuccess?.timeIntervalSince1970 ?? 0)) })
        family("ferry_server_unreachable_tries", "gauge",
               "Tries in a row that found the spool's server unreachable (refused, no route, DNS, connect timeout); its uploads wait for the next; 0 when the server was last reached.",
               spools.map { spool in ([("spool", spool)], String(unreachableTries[spool] ?? 0)) })
        family("ferry_bandwidth_limit_bytes_per_second", "gauge",
               "The bandwidth limit in force, in bytes per second: spool=\"*\" for the one all spools share; 0 when there is none.",
               bandwidth.map { ([("spool", $0.scope)], String($0.bytesPerSecond ?? 0)) })
        text += Self.withHelp(registry.emitToString())
        return MetricsReport(values: Self.values(in: text), prometheus: text)
    }

    // MARK: Text format

    /// The registry's families in name order, each series' lines together, with HELP lines added.
    static func withHelp(_ emitted: String) -> String {
        var blocks: [(name: String, lines: [String])] = []
        for line in emitted.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let name = line.split(separator: " ").dropFirst(2).first.map(String.init) ?? ""
                blocks.append((name, [String(line)]))
            } else if line.hasPrefix("#") {
                continue
            } else if !blocks.isEmpty {
                blocks[blocks.count - 1].lines.append(String(line))
            }
        }
        var text = ""
        for block in blocks.sorted(by: { $0.name < $1.name }) {
            if let help = help[block.name] { text += "# HELP \(block.name) \(escapeHelp(help))\n" }
            text += block.lines[0] + "\n"
            let samples = block.lines.dropFirst().enumerated().sorted { a, b in
                let (keyA, keyB) = (seriesKey(a.element), seriesKey(b.element))
                return keyA != keyB ? keyA < keyB : a.offset < b.offset
            }
            for sample in samples { text += sample.element + "\n" }
        }
        return text
    }

    /// A sample line's labels without `le`, so a histogram's lines stay together.
    private static func seriesKey(_ line: String) -> String {
        guard let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}") else { return "" }
        return line[line.index(after: open)..<close].split(separator: ",").filter { !$0.hasPrefix("le=") }.joined(separator: ",")
    }

    /// Every sample, `name{labels}` → value, for `ferryctl metrics --json`.
    static func values(in text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let value = line[line.index(after: space)...]
            values[String(line[..<space])] = Double(value) ?? (value == "+Inf" ? .infinity : value == "-Inf" ? -.infinity : .nan)
        }
        return values
    }

    static func render(_ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return "" }
        return "{" + labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
    }

    static func escapeLabel(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    static func escapeHelp(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// A value as Prometheus reads it: integers without a fraction, others with up to millisecond precision.
    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(format: "%.3f", value)
    }
}

extension FerryDaemon {
    /// Points swift-metrics at the registry ferryd's metrics are read from. Call once per process,
    /// before the daemon starts.
    public static func bootstrapMetrics() {
        MetricsSystem.bootstrap(DaemonMetrics.makeFactory(registry: PrometheusMetricsFactory.defaultRegistry))
    }
}
