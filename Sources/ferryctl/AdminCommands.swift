import ArgumentParser
import FerryControl
import FerrySystem

/// `ferryctl reload`: have ferryd re-read its configuration.
struct Reload: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Have ferryd re-read its configuration file.",
        discussion: "An invalid file is refused and the running configuration stays (exit 1).")

    @OptionGroup var global: GlobalOptions

    func execute(_ daemon: Daemon) async throws {
        let (raw, result) = try await daemon.request(.reload, NoArguments(), as: ReloadResult.self)
        if daemon.json {
            try daemon.printJSON(raw)
            return
        }
        Terminal.line(result.applied.isEmpty ? "configuration reloaded (no changes applied)" : "configuration reloaded")
        for change in result.applied { Terminal.line("  \(change)") }
        for change in result.restartRequired {
            Terminal.error("warning: \(change) (takes effect only when ferryd restarts)")
        }
    }
}

/// `ferryctl health`: whether the daemon is working; for monitoring.
struct Health: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check that ferryd is working (exit 1 unless it says ok).")

    @OptionGroup var global: GlobalOptions

    func execute(_ daemon: Daemon) async throws {
        let (raw, report) = try await daemon.request(.health, NoArguments(), as: HealthReport.self)
        if daemon.json {
            try daemon.printJSON(raw)
        } else {
            Terminal.line("\(report.status): ferryd \(report.version), up \(Format.duration(report.uptimeSeconds))")
            for problem in report.problems { Terminal.line("  \(Format.printable(problem))") }
        }
        if report.status != .ok { throw ExitStatus.failed.code }
    }
}

/// `ferryctl metrics`: counters and gauges in the Prometheus text format.
struct Metrics: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print ferryd's counters and gauges (Prometheus text format; --json for JSON).")

    @OptionGroup var global: GlobalOptions

    func execute(_ daemon: Daemon) async throws {
        let (raw, report) = try await daemon.request(.metrics, NoArguments(), as: MetricsReport.self)
        if daemon.json {
            try daemon.printJSON(raw)
        } else {
            Terminal.out(report.prometheus.hasSuffix("\n") || report.prometheus.isEmpty ? report.prometheus : report.prometheus + "\n")
        }
    }
}

/// `ferryctl version`: this client's version (no daemon needed).
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print ferryctl's version.")

    @OptionGroup var global: GlobalOptions

    func run() {
        Terminal.line(global.json ? "{\"version\":\"\(FerryVersion.current)\"}" : "ferryctl \(FerryVersion.current)")
    }
}
