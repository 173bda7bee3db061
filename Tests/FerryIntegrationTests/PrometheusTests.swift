import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// contrib/: the Prometheus rules (checked and unit-tested with promtool, loaded into a real
/// Prometheus) and the Grafana dashboard (every query run against a real Prometheus scraping a
/// real ferryd), and the check that both use only metrics, labels and label values ferryd exports.
@Suite("Prometheus", .serialized)
struct PrometheusTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let rulesPath = root + "/contrib/prometheus/ferry.rules.yml"
    static let rulesTestPath = root + "/contrib/prometheus/ferry.rules.test.yml"
    static let dashboardPath = root + "/contrib/grafana/ferry.json"

    @Test("promtool check rules accepts contrib/prometheus/ferry.rules.yml")
    func checkRules() async throws {
        let (status, output) = try await Self.promtool(["check", "rules", Self.rulesPath])
        #expect(status == 0, "\(output)")
        #expect(output.contains("SUCCESS: 10 rules found"), "\(output)")
    }

    @Test("promtool test rules passes ferry.rules.test.yml: each alert fires, and stays quiet in its look-alike case")
    func unitTestRules() async throws {
        let (status, output) = try await Self.promtool(["test", "rules", Self.rulesTestPath])
        #expect(status == 0, "\(output)")
        #expect(output.contains("SUCCESS"), "\(output)")
    }

    @Test("PromQL selectors are read from expressions: metric names, matchers; recording rules, strings and by() left out",
          arguments: [
              (#"sum by (spool) (rate(ferry_uploads_total{job=~"$job", outcome="failed"}[5m]))"#,
               [#"ferry_uploads_total{job=~"$job",outcome="failed"}"#]),
              (#"time() - (ferry_last_success_timestamp_seconds > 0)"#, ["ferry_last_success_timestamp_seconds"]),
              (#"sum(spool:ferry_uploads:rate5m) + ferry_jobs{state!~'done|failed'} offset 15m"#, [#"ferry_jobs{state!~"done|failed"}"#]),
              (#"histogram_quantile(0.95, sum by (le) (rate(ferry_attempt_duration_seconds_bucket{spool=~"a|b\"c"}[$__rate_interval])))"#,
               [#"ferry_attempt_duration_seconds_bucket{spool=~"a|b"c"}"#]),
              (#"absent(up{job="ferry"}) or label_replace(vector(1), "x", "ferry_jobs", "", "")"#, []),
              (#"ferry_uploads_in_flight{ } * 1e3 + ferry_bytes_sent_total"#, ["ferry_uploads_in_flight", "ferry_bytes_sent_total"]),
          ])
    func selectors(expression: String, expected: [String]) {
        #expect(PromQLSelector.selectors(in: expression, prefix: "ferry_").map(\.description) == expected)
    }

    @Test("contrib/grafana/ferry.json is an importable dashboard: schemaVersion 39, the DS_PROMETHEUS data source, job/instance/spool variables, every panel a Prometheus query")
    func dashboardShape() throws {
        let dashboard = try Self.dashboard()
        #expect(dashboard["schemaVersion"] as? Int == 39)
        #expect(dashboard["title"] as? String == "Ferry")
        #expect((dashboard["uid"] as? String)?.isEmpty == false)
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        let byName = Dictionary(variables.map { ($0["name"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byName["DS_PROMETHEUS"]?["type"] as? String == "datasource")
        #expect(byName["DS_PROMETHEUS"]?["query"] as? String == "prometheus")
        #expect((byName["spool"]?["definition"] as? String)?.hasPrefix("label_values(ferry_jobs{") == true)
        #expect((byName["spool"]?["definition"] as? String)?.hasSuffix(", spool)") == true)
        for name in ["job", "instance", "spool"] {
            #expect(byName[name]?["type"] as? String == "query", "\(name)")
            #expect(byName[name]?["includeAll"] as? Bool == true && byName[name]?["allValue"] as? String == ".*", "\(name)")
            #expect((byName[name]?["datasource"] as? [String: Any])?["uid"] as? String == "${DS_PROMETHEUS}", "\(name)")
        }

        let panels = dashboard["panels"] as? [[String: Any]] ?? []
        let ids = panels.compactMap { $0["id"] as? Int }
        #expect(ids.count == panels.count && Set(ids).count == ids.count, "every panel has its own id")
        var titles: Set<String> = []
        for panel in panels {
            let title = panel["title"] as? String ?? ""
            titles.insert(title)
            let grid = panel["gridPos"] as? [String: Int] ?? [:]
            #expect((grid["x"] ?? -1) >= 0 && (grid["x"] ?? 0) + (grid["w"] ?? 99) <= 24 && (grid["h"] ?? 0) > 0, "\(title): \(grid)")
            guard panel["type"] as? String != "row" else { continue }
            #expect((panel["datasource"] as? [String: Any])?["uid"] as? String == "${DS_PROMETHEUS}", "\(title)")
            let targets = panel["targets"] as? [[String: Any]] ?? []
            #expect(!targets.isEmpty, "\(title) has no query")
            for target in targets {
                #expect((target["datasource"] as? [String: Any])?["uid"] as? String == "${DS_PROMETHEUS}", "\(title)")
                #expect((target["expr"] as? String)?.contains("ferry_") == true, "\(title): \(target)")
            }
        }
        let wanted = ["Queue by state", "Jobs by state", "Upload attempts per second", "Bytes per second", "Attempt duration",
                      "Oldest waiting job by spool", "Failures by spool", "Uploads in flight", "Bandwidth limit"]
        #expect(Set(wanted).isSubset(of: titles), "missing panels: \(Set(wanted).subtracting(titles))")
    }

    @Test("A real Prometheus scrapes ferryd while it delivers: ferry_uploads_total and ferry_jobs show the deliveries, the rules load healthy and FerryFailedJobs fires for a rejected file, every dashboard query runs, and the rules and dashboard use only what ferryd exports")
    func realPrometheus() async throws {
        let metricsPort = try freeLoopbackPort()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.uri.contains("strict") ? .respond(status: 400, body: "rejected") : .store()
        }
        try await withDaemonHarness(
            spools: [TestSpool(), TestSpool(name: "strict")],
            topLevel: ["metrics_listen = \"127.0.0.1:\(metricsPort)\"", "bandwidth_limit = \"1GiB/s\""], plan: plan
        ) { harness in
            try await harness.start()
            try await withPrometheus(scraping: "127.0.0.1:\(metricsPort)", ruleFiles: [Self.rulesPath]) { prometheus in
                // Prometheus sees ferryd before any file arrives, so it sees the counters rise.
                try await Self.waitFor(prometheus, "ferryd scraped with every job at 0") {
                    let up = try await prometheus.query(#"up{job="ferry"}"#)
                    let done = try await prometheus.query(#"ferry_jobs{job="ferry", spool="test", state="done"}"#)
                    return up.first?.value == 1 && done.first?.value == 0
                }

                for index in 1...3 { try harness.drop("file\(index).bin", pseudoRandomBytes(50_000 * index, seed: UInt64(index))) }
                try harness.drop("refused.txt", Array("the receiver answers 400".utf8), spool: "strict")
                #expect(try await harness.ctl("wait", "--timeout", "30s").status == 1, "wait reports the failed job")
                #expect(harness.receiver.acceptedRequests.count == 3)

                // The deliveries, through Prometheus's HTTP API.
                var uploads: [(labels: [String: String], value: Double)] = []
                try await Self.waitFor(prometheus, "ferry_uploads_total to show 3 deliveries and 1 failure: \(uploads)") {
                    uploads = try await prometheus.query("ferry_uploads_total")
                    return Self.value(uploads, ["spool": "test", "outcome": "delivered"]) == 3
                        && Self.value(uploads, ["spool": "strict", "outcome": "failed"]) == 1
                }
                #expect(uploads.allSatisfy { $0.labels["job"] == "ferry" && $0.labels["instance"] == "127.0.0.1:\(metricsPort)" })
                #expect(Self.value(uploads, ["spool": "test", "outcome": "retry"]) == 0)
                var jobs: [(labels: [String: String], value: Double)] = []
                try await Self.waitFor(prometheus, "ferry_jobs to show 3 done and 1 failed: \(jobs)") {
                    jobs = try await prometheus.query("ferry_jobs")
                    return Self.value(jobs, ["spool": "test", "state": "done"]) == 3
                        && Self.value(jobs, ["spool": "strict", "state": "failed"]) == 1
                }
                #expect(Self.value(jobs, ["spool": "test", "state": "queued"]) == 0)
                #expect(Set(jobs.compactMap { $0.labels["state"] }) == ["queued", "uploading", "retrying", "held", "done", "failed", "cancelled", "superseded"])

                // The rules: both groups loaded, every rule evaluated without error.
                var groups: [[String: Any]] = []
                try await Self.waitFor(prometheus, "every rule evaluated: \(groups)") {
                    groups = (try await prometheus.api("/api/v1/rules") as? [String: Any])?["groups"] as? [[String: Any]] ?? []
                    let rules = groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
                    if let broken = rules.first(where: { $0["health"] as? String == "err" }) {
                        throw TestFailure("rule \(broken["name"] ?? "?") failed: \(broken["lastError"] ?? "?")")
                    }
                    return rules.count == 10 && rules.allSatisfy { $0["health"] as? String == "ok" }
                }
                #expect(Set(groups.compactMap { $0["name"] as? String }) == ["ferry.rules", "ferry.alerts"])
                let rules = groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
                #expect(Set(rules.filter { $0["type"] as? String == "alerting" }.compactMap { $0["name"] as? String })
                    == ["FerryDown", "FerryTargetMissing", "FerrySpoolStalled", "FerryOldestJobTooOld", "FerryServerUnreachable", "FerryFailedJobs"])

                // The rejected file fires FerryFailedJobs for its spool, and nothing else fires.
                var alerts: [[String: Any]] = []
                try await Self.waitFor(prometheus, "FerryFailedJobs to fire for spool strict: \(alerts)") {
                    alerts = (try await prometheus.api("/api/v1/alerts") as? [String: Any])?["alerts"] as? [[String: Any]] ?? []
                    return alerts.contains { ($0["labels"] as? [String: String])?["alertname"] == "FerryFailedJobs" && $0["state"] as? String == "firing" }
                }
                let labels = alerts.compactMap { $0["labels"] as? [String: String] }
                #expect(labels.count == 1, "\(alerts)")
                #expect(labels.first?["spool"] == "strict" && labels.first?["severity"] == "warning" && labels.first?["job"] == "ferry", "\(alerts)")
                let summary = (alerts.first?["annotations"] as? [String: String])?["summary"]
                #expect(summary == "Ferry gave up on files in spool strict on 127.0.0.1:\(metricsPort)", "\(alerts)")

                // The recording rules record.
                try await Self.waitFor(prometheus, "the recording rules to have samples") {
                    let rate = try await prometheus.query(#"spool:ferry_uploads:rate5m{spool="test", outcome="delivered"}"#)
                    let p95 = try await prometheus.query(#"spool_quantile:ferry_attempt_duration_seconds:histogram_quantile{spool="test", quantile="0.95"}"#)
                    return (rate.first?.value ?? 0) > 0 && (p95.first?.value ?? 0) > 0
                }

                // Only what ferryd exports: names, labels, and literal label values.
                let dashboard = try Self.dashboard()
                let expressions = Self.dashboardExpressions(dashboard)
                #expect(expressions.count >= 20)
                let scrape = try httpRequest(port: metricsPort, path: "/metrics")
                #expect(scrape.status == 200)
                let exported = Self.exportedSeries(scrape.body)
                #expect(exported["ferry_attempt_duration_seconds_bucket"]?["le"]?.contains("+Inf") == true, "\(exported.keys.sorted())")
                let ruleQueries = rules.compactMap { $0["query"] as? String }
                #expect(ruleQueries.count == 10)
                var used: Set<String> = []
                var problems: [String] = []
                for expression in ruleQueries + expressions {
                    for selector in PromQLSelector.selectors(in: expression, prefix: "ferry_") {
                        used.insert(selector.metric)
                        problems += Self.problems(selector, exported).map { "\($0), in: \(expression)" }
                    }
                }
                try #require(problems.isEmpty, "\n\(problems.joined(separator: "\n"))")
                #expect(used.isSuperset(of: ["ferry_jobs", "ferry_uploads_total", "ferry_upload_bytes_total", "ferry_attempt_duration_seconds_bucket",
                                            "ferry_oldest_job_age_seconds", "ferry_last_success_timestamp_seconds", "ferry_bytes_sent_total",
                                            "ferry_uploads_in_flight", "ferry_bandwidth_limit_bytes_per_second"]), "\(used)")

                // Every dashboard query runs and returns series; every variable finds its values.
                for expression in expressions {
                    let runnable = Self.substituteGrafanaVariables(expression)
                    try await Self.waitFor(prometheus, "dashboard query to return series: \(runnable)") {
                        try await !prometheus.query(runnable).isEmpty
                    }
                }
                let variableValues = try await Self.variableValues(dashboard, prometheus)
                #expect(variableValues["job"] == ["ferry"])
                #expect(variableValues["instance"] == ["127.0.0.1:\(metricsPort)"])
                #expect(variableValues["spool"] == ["strict", "test"])
            }
        }
    }

    // MARK: Helpers

    /// Runs promtool with `arguments`; its exit status and output (stdout, then stderr).
    static func promtool(_ arguments: [String]) async throws -> (Int32, String) {
        let logs = try TemporaryDirectory("promtool")
        let status = try await runToCompletion(
            [try installedProgram("promtool")] + arguments, environment: ProcessInfo.processInfo.environment,
            stdoutPath: logs.url("out"), stderrPath: logs.url("err"), timeout: .seconds(120))
        let output = try String(contentsOfFile: logs.url("out"), encoding: .utf8) + String(contentsOfFile: logs.url("err"), encoding: .utf8)
        return (status, output)
    }

    /// Waits for `condition`, a Prometheus query, with a deadline; the failure carries Prometheus's log.
    static func waitFor(_ prometheus: PrometheusServer, _ what: @autoclosure () -> String, _ condition: () async throws -> Bool) async throws {
        do {
            try await waitUntil(what(), timeout: .seconds(60), condition)
        } catch {
            throw TestFailure("\(error)\n--- prometheus log ---\n\(prometheus.log)")
        }
    }

    /// The value of the one series with `labels` (among others) in `vector`.
    static func value(_ vector: [(labels: [String: String], value: Double)], _ labels: [String: String]) -> Double? {
        let matching = vector.filter { series in labels.allSatisfy { series.labels[$0.key] == $0.value } }
        return matching.count == 1 ? matching[0].value : nil
    }

    /// contrib/grafana/ferry.json, parsed.
    static func dashboard() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: dashboardPath))
        guard let dashboard = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw TestFailure("\(dashboardPath) is not a JSON object")
        }
        return dashboard
    }

    /// Every panel query's `expr`.
    static func dashboardExpressions(_ dashboard: [String: Any]) -> [String] {
        let panels = dashboard["panels"] as? [[String: Any]] ?? []
        return panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
    }

    /// An expression as Grafana sends it with every variable at "All": `$job` and the like become
    /// `.*`, `$__rate_interval` a minute (at least four scrapes at 1 s).
    static func substituteGrafanaVariables(_ expression: String) -> String {
        expression.replacingOccurrences(of: "$__rate_interval", with: "1m")
            .replacingOccurrences(of: "$job", with: ".*").replacingOccurrences(of: "$instance", with: ".*")
            .replacingOccurrences(of: "$spool", with: ".*")
    }

    /// Each query variable's values: `label_values(SELECTOR, LABEL)` asked of `/api/v1/label/LABEL/values`.
    static func variableValues(_ dashboard: [String: Any], _ prometheus: PrometheusServer) async throws -> [String: [String]] {
        var values: [String: [String]] = [:]
        let variables = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        for variable in variables where variable["type"] as? String == "query" {
            let definition = variable["definition"] as? String ?? ""
            guard let match = definition.wholeMatch(of: /label_values\((.+), *([a-z_]+)\)/) else {
                throw TestFailure("variable \(variable["name"] ?? "?"): not label_values(SELECTOR, LABEL): \(definition)")
            }
            let selector = substituteGrafanaVariables(String(match.1))
            let found = try await prometheus.api("/api/v1/label/\(match.2)/values", [("match[]", selector)]) as? [String] ?? []
            values[variable["name"] as? String ?? ""] = found.sorted()
        }
        return values
    }

    /// A scrape's series names (a histogram's `_bucket`, `_sum`, `_count` too, as `# TYPE` implies
    /// them), each with its labels and the values they take.
    static func exportedSeries(_ text: String) -> [String: [String: Set<String>]] {
        var series: [String: [String: Set<String>]] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let words = line.split(separator: " ")
                guard words.count == 4 else { continue }
                let name = String(words[2])
                series[name, default: [:]] = series[name] ?? [:]
                if words[3] == "histogram" || words[3] == "summary" {
                    for suffix in ["_sum", "_count"] + (words[3] == "histogram" ? ["_bucket"] : []) {
                        series[name + suffix, default: [:]] = series[name + suffix] ?? [:]
                    }
                }
            } else if !line.hasPrefix("#") {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                var labels = series[name] ?? [:]
                for match in line.matches(of: /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/) {
                    labels[String(match.1), default: []].insert(String(match.2))
                }
                series[name] = labels
            }
        }
        return series
    }

    /// What in `selector` ferryd does not export: an unknown metric, a label it does not have, or
    /// a literal value (of `=`, or a plain alternative of `=~`) the label never takes.
    static func problems(_ selector: PromQLSelector, _ exported: [String: [String: Set<String>]]) -> [String] {
        guard let labels = exported[selector.metric] else { return ["ferryd exports no metric \(selector.metric)"] }
        var problems: [String] = []
        for matcher in selector.matchers where !["job", "instance"].contains(matcher.label) {
            guard let values = labels[matcher.label] else {
                problems.append("\(selector.metric) has no label \(matcher.label) (it has \(labels.keys.sorted()))")
                continue
            }
            guard !matcher.value.contains("$") else { continue }
            let literals: [String]
            switch matcher.op {
            case "=", "!=": literals = [matcher.value]
            case _ where matcher.value.wholeMatch(of: /[a-z_]+(\|[a-z_]+)*/) != nil:
                literals = matcher.value.split(separator: "|").map(String.init)
            default: literals = []
            }
            for literal in literals where !values.contains(literal) && !["spool"].contains(matcher.label) {
                problems.append("\(selector.metric){\(matcher.label)} never is \"\(literal)\" (it is one of \(values.sorted()))")
            }
        }
        return problems
    }
}
