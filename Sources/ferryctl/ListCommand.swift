import ArgumentParser
import FerryControl
import Foundation

/// `ferryctl list`: jobs, newest first.
struct List: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "List jobs, newest first.",
        discussion: "States: \(JobStateName.allCases.map(\.rawValue).joined(separator: ", ")).")

    @OptionGroup var global: GlobalOptions

    @Option(name: .long, help: ArgumentHelp(
        "Only jobs in this state (repeat it, or separate states with commas).", valueName: "state"))
    var state: [String] = []

    @Option(help: ArgumentHelp("Only jobs of this spool.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?

    @Option(help: ArgumentHelp("At most this many jobs (the daemon's default is 50, its most 1000).", valueName: "n"))
    var limit: Int?

    @Option(help: ArgumentHelp(
        "Only jobs created since then: a time ago (30s, 10m, 2h, 1d) or an RFC 3339 time.", valueName: "time"))
    var since: String?

    func validate() throws {
        _ = try ArgumentValues.states(state)
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
        if let since, ArgumentValues.time(since) == nil {
            throw ValidationError("--since \"\(since)\" is neither a duration (30s, 10m, 2h, 1d) nor an RFC 3339 time")
        }
    }

    func execute(_ daemon: Daemon) async throws {
        let states = try ArgumentValues.states(state)
        let arguments = ListArguments(
            states: states.isEmpty ? nil : states, spool: spool, limit: limit, since: since.flatMap { ArgumentValues.time($0) })
        let (raw, list) = try await daemon.request(.list, arguments, as: JobList.self)
        if daemon.json { try daemon.printJSON(raw) } else { Terminal.out(JobListView.render(list)) }
    }
}

/// The human rendering of a ``JobList``.
enum JobListView {
    static func render(_ list: JobList, now: Date = Date()) -> String {
        guard !list.jobs.isEmpty else { return "no jobs\n" }
        var table = TextTable([
            .init("id"), .init("state"), .init("spool"), .init("size", rightAligned: true), .init("age"),
            .init("attempts", rightAligned: true), .init("file"), .init(""),
        ])
        for job in list.jobs {
            let showsError = job.state == .failed || job.state == .retrying
            table.append([
                job.id, job.state.rawValue, job.spool, Format.bytes(job.size), Format.relative(job.createdAt, now: now),
                String(job.attempts), job.bundle.map { "\(job.file)/ (\($0.files.count) files)" } ?? job.file, showsError ? job.lastError.map { Format.shortened($0, to: 60) } ?? "" : "",
            ])
        }
        var output = table.render()
        if list.more { output += "(more jobs match; use --limit)\n" }
        return output
    }
}
