import ArgumentParser
import FerryControl
import Foundation

/// `ferryctl status`: the daemon, its spools and the uploads in flight; `--watch` keeps it current.
struct Status: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the daemon, its spools and the uploads in flight.",
        discussion: "With --watch, asks again every --interval until interrupted (Ctrl-C).")

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Keep showing the status, refreshed every --interval.")
    var watch = false

    @Option(help: ArgumentHelp("Seconds between refreshes with --watch.", valueName: "seconds"))
    var interval: Double = 1

    func validate() throws {
        guard interval.isFinite, interval >= 0.1, interval <= 86_400 else {
            throw ValidationError("--interval must be between 0.1 seconds and a day (86400)")
        }
    }

    func execute(_ daemon: Daemon) async throws {
        guard watch else {
            let (raw, report) = try await daemon.request(.status, NoArguments(), as: StatusReport.self)
            if daemon.json { try daemon.printJSON(raw) } else { Terminal.out(StatusView.render(report, interactive: Terminal.isInteractive)) }
            return
        }
        let redraw = Terminal.isInteractive && !daemon.json
        let interrupt = InterruptHandler {
            if redraw { Terminal.out("\n") }
            Terminal.terminate(.ok)
        }
        defer { interrupt.cancel() }
        while true {
            let (raw, report) = try await daemon.request(.status, NoArguments(), as: StatusReport.self)
            if daemon.json {
                try Daemon.printJSONLine(raw)
            } else if redraw {
                // Home, clear, then the whole frame in one write, so it does not flicker.
                Terminal.out("\u{1B}[H\u{1B}[2J" + StatusView.render(report, interactive: true))
            } else {
                Terminal.out(StatusView.render(report, interactive: false) + "\n")
            }
            try await Task.sleep(for: .milliseconds(Int64(interval * 1000)))
        }
    }
}

/// The human rendering of a ``StatusReport``.
enum StatusView {
    /// The counts shown for each spool, in order.
    static let countedStates: [JobStateName] = [.queued, .uploading, .retrying, .held, .failed, .done]

    static func render(_ report: StatusReport, interactive: Bool) -> String {
        var output = "ferryd \(report.version) (pid \(report.pid)), up \(Format.duration(report.uptimeSeconds))\n"
        var header = KeyValueBlock()
        header.append("config", report.configPath)
        header.append("throughput", "\(Format.rate(report.bytesPerSecond)) (last minute)")
        header.append("uploads", "\(report.uploads.count)/\(report.maxConcurrentUploads) upload slots busy")
        let limits = (report.bandwidth ?? []).filter { $0.bytesPerSecond != nil || $0.source != "config" }
        if !limits.isEmpty {
            header.append("bandwidth", limits.map { "\($0.scope == "*" ? "all spools" : $0.scope) \($0.limit) (\($0.source))" }.joined(separator: ", "))
        }
        output += header.render() + "\n"
        output += spools(report.spools) + "\n"
        output += problems(report.spools)
        output += uploads(report.uploads, interactive: interactive)
        return output
    }

    /// One paragraph per spool held back by a local problem or an unreachable server (nothing when
    /// there is none).
    static func problems(_ spools: [SpoolStatus], now: Date = Date()) -> String {
        let troubled = spools.compactMap { spool in spool.problem.map { (spool.name, $0) } }
        let unreachable = spools.compactMap { spool in spool.serverWait.flatMap { $0.reason == .unreachable ? (spool.name, $0) : nil } }
        guard !troubled.isEmpty || !unreachable.isEmpty else { return "" }
        var output = ""
        for (name, wait) in unreachable {
            output += "server of \(name) unreachable: \(Format.shortened(wait.message ?? "", to: 160))\n"
            output += "  \(Format.count(wait.tries ?? 1, "try", "tries")) in a row failed; the spool's next try \(Format.timeWithRelative(wait.until, now: now))\n"
        }
        for (name, problem) in troubled {
            output += "problem in \(name): \(Format.shortened(problem.message, to: 160))\n"
            output += "  since \(Format.timeWithRelative(problem.since, now: now))"
                + (problem.jobs > 0 ? "; \(Format.count(problem.jobs, "job")) waiting, tried again until max_age"
                    : "; files wait in the spool and are looked for again every 5s")
                + "\n"
        }
        return output + "\n"
    }

    static func spools(_ spools: [SpoolStatus]) -> String {
        guard !spools.isEmpty else { return "no spools configured\n" }
        var table = TextTable([.init("name")] + countedStates.map { .init($0.rawValue, rightAligned: true) }
            + [.init("settling", rightAligned: true), .init("")])
        for spool in spools {
            var note = spool.paused ? "paused" : ""
            if let wait = spool.serverWait {
                let what = switch wait.reason {
                case .unreachable: "server unreachable, next try"
                case .asked: "server asked to wait, until"
                case .unrecognized(let name): "server wait (\(name)), until"
                }
                note += (note.isEmpty ? "" : "; ") + "\(what) \(Format.relative(wait.until, now: Date()))"
            }
            if let open = spool.windowOpen {
                let change = spool.windowChange.map { " \(open ? "closes" : "opens") \(Format.relative($0, now: Date()))" } ?? ""
                note += (note.isEmpty ? "" : "; ") + (open ? "window open" : "window closed") + change
            }
            table.append([spool.name] + countedStates.map { String(spool.counts[$0.rawValue] ?? 0) } + [String(spool.settling), note])
        }
        return table.render()
    }

    static func uploads(_ uploads: [UploadProgress], interactive: Bool) -> String {
        guard !uploads.isEmpty else { return "no uploads in progress\n" }
        var table = TextTable([
            .init("file"), .init("spool"), .init("phase"), .init("sent", rightAligned: true),
            .init("%", rightAligned: true), .init("confirmed", rightAligned: true), .init("rate", rightAligned: true), .init(""),
        ])
        for upload in uploads {
            table.append([
                Format.shortened(upload.file, to: 48), upload.spool, upload.phase.rawValue,
                "\(Format.bytes(upload.bytesSent)) / \(Format.bytes(upload.bytesTotal))",
                Format.percent(upload.bytesSent, of: upload.bytesTotal), (upload.confirmedBytes.map(Format.bytes) ?? "-")
                    + (upload.partsConfirmed.flatMap { confirmed in upload.partsTotal.map { " (\(confirmed)/\($0) parts)" } } ?? ""),
                Format.rate(upload.bytesPerSecond),
                interactive ? Format.progressBar(upload.bytesSent, of: upload.bytesTotal) : "",
            ])
        }
        return table.render()
    }
}
