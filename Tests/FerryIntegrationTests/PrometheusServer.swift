import FerryTestSupport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#endif

/// A real Prometheus (Debian's `prometheus` package) on 127.0.0.1 that scrapes one target every
/// second under the job name `ferry` and evaluates `ruleFiles` every second, its storage in a
/// temporary directory. Use through ``withPrometheus(scraping:ruleFiles:_:)``, which stops it and
/// removes its directory whether the test passes or not.
final class PrometheusServer: @unchecked Sendable {
    let port: Int
    let directory: TemporaryDirectory
    let child: ChildProcess

    /// Starts Prometheus and waits until it answers `GET /-/ready` with 200.
    init(scraping target: String, ruleFiles: [String]) async throws {
        let executable = try installedProgram("prometheus")
        directory = try TemporaryDirectory("ferry-prometheus")
        port = try freeLoopbackPort()
        let configuration = """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1s
            rule_files:
            \(ruleFiles.map { "  - \"\($0)\"" }.joined(separator: "\n"))
            scrape_configs:
              - job_name: ferry
                static_configs:
                  - targets: ["\(target)"]
            """
        let configPath = directory.url("prometheus.yml")
        try configuration.write(toFile: configPath, atomically: true, encoding: .utf8)
        child = try ChildProcess(
            executable: executable,
            arguments: [
                "--config.file=\(configPath)", "--storage.tsdb.path=\(try directory.makeDirectory("data"))",
                "--web.listen-address=127.0.0.1:\(port)",
            ],
            logPath: directory.url("prometheus.log"))
        let child = child
        let port = port
        try await waitUntil("Prometheus to be ready on 127.0.0.1:\(port)\n--- its log ---\n\(child.log)") {
            guard child.isRunning else {
                throw TestFailure("prometheus exited (status \(child.terminationStatus)) before it was ready:\n\(child.log)")
            }
            return (try? await Self.fetch(port: port, path: "/-/ready").status) == 200
        }
    }

    /// Its log (standard error) so far.
    var log: String { child.log }

    /// SIGTERM, then SIGKILL if it has not exited within 30 s.
    func stop() async {
        guard child.isRunning else { return }
        child.send(SIGTERM)
        if (try? await child.waitForExit(timeout: .seconds(30))) == nil {
            child.send(SIGKILL)
            _ = try? await child.waitForExit()
        }
    }

    /// `GET path?query` on the HTTP API; returns the answer's `data` when its `status` is `success`.
    func api(_ path: String, _ query: [(String, String)] = []) async throws -> Any {
        let encoded = query.map { "\(Self.formEncode($0.0))=\(Self.formEncode($0.1))" }.joined(separator: "&")
        let (status, body) = try await Self.fetch(port: port, path: path + (encoded.isEmpty ? "" : "?" + encoded))
        let text = String(decoding: body, as: UTF8.self)
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            throw TestFailure("GET \(path) \(query): HTTP \(status), not a JSON object: \(text)")
        }
        guard status == 200, object["status"] as? String == "success", let data = object["data"] else {
            throw TestFailure("GET \(path) \(query): HTTP \(status): \(text)")
        }
        return data
    }

    /// An instant query's result vector: each element's labels and value.
    func query(_ expression: String) async throws -> [(labels: [String: String], value: Double)] {
        guard let data = try await api("/api/v1/query", [("query", expression)]) as? [String: Any],
              let results = data["result"] as? [[String: Any]] else {
            throw TestFailure("query \(expression): no result vector")
        }
        if let type = data["resultType"] as? String, type != "vector" {
            throw TestFailure("query \(expression): a \(type), not a vector")
        }
        return results.map { result in
            let labels = result["metric"] as? [String: String] ?? [:]
            let pair = result["value"] as? [Any] ?? []
            let value = (pair.last as? String).flatMap(Double.init) ?? .nan
            return (labels, value)
        }
    }

    /// `application/x-www-form-urlencoded` for one key or value (Prometheus reads `+` as a space).
    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.unicodeScalars.map { scalar in
            allowed.contains(scalar) && scalar.isASCII
                ? String(scalar) : String(scalar).utf8.map { String(format: "%%%02X", $0) }.joined()
        }.joined()
    }

    /// One `GET http://127.0.0.1:port/path`: the status and body.
    static func fetch(port: Int, path: String) async throws -> (status: Int, body: Data) {
        guard let url = URL(string: "http://127.0.0.1:\(port)\(path)") else { throw TestFailure("bad URL path \(path)") }
        var request = URLRequest(url: url)
        request.timeoutInterval = 10
        let (body, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, body)
    }
}

/// Runs `body` with a Prometheus scraping `target`, stopping it (and removing its storage) afterwards.
func withPrometheus<T>(
    scraping target: String, ruleFiles: [String], _ body: (PrometheusServer) async throws -> T
) async throws -> T {
    let server = try await PrometheusServer(scraping: target, ruleFiles: ruleFiles)
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// The path of `name` on the PATH (or in /usr/sbin, /usr/bin), or an error saying how to install it.
func installedProgram(_ name: String) throws -> String {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin"] {
        let candidate = directory + "/" + name
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw TestFailure("\(name) is not installed: run scripts/install-deps.sh --test (it installs Debian's prometheus package, which has prometheus and promtool)")
}
