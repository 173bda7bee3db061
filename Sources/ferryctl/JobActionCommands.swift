import ArgumentParser
import FerryControl

/// What the four job actions (`retry`, `hold`, `release`, `cancel`) share: either job ids or a
/// bulk flag, optionally narrowed to one spool, and one result line per job.
protocol JobActionCommand: DaemonCommand {
    static var command: ControlCommand { get }
    /// The bulk flag's name, e.g. "--all-failed".
    static var bulkFlag: String { get }
    var ids: [String] { get }
    var all: Bool { get }
    var spool: String? { get }
}

extension JobActionCommand {
    func validate() throws {
        if ids.isEmpty && !all { throw ValidationError("name the jobs, or use \(Self.bulkFlag)") }
        if !ids.isEmpty && all { throw ValidationError("name the jobs or use \(Self.bulkFlag), not both") }
        if spool != nil && !all { throw ValidationError("--spool only applies with \(Self.bulkFlag)") }
    }

    func execute(_ daemon: Daemon) async throws {
        let arguments = all ? JobActionArguments(all: true, spool: spool) : JobActionArguments(ids: ids)
        let (raw, results) = try await daemon.request(Self.command, arguments, as: ActionResults.self)
        if daemon.json {
            try daemon.printJSON(raw)
        } else {
            Terminal.out(ActionResultsView.render(results, emptyMessage: "no job matched"))
        }
        if results.results.contains(where: { !$0.ok }) { throw ExitStatus.failed.code }
    }
}

/// The human rendering of ``ActionResults``: one line per job or file.
enum ActionResultsView {
    static func render(_ results: ActionResults, emptyMessage: String) -> String {
        guard !results.results.isEmpty else { return emptyMessage + "\n" }
        return results.results.map { outcome in
            if outcome.ok {
                var line = Format.printable(outcome.id)
                if let job = outcome.job { line += " → job \(job)" }
                if let state = outcome.state { line += " " + state.rawValue }
                return line + "\n"
            }
            return "\(Format.printable(outcome.id)): \(Format.printable(outcome.error?.message ?? "failed"))\n"
        }.joined()
    }
}

/// `ferryctl retry`: queue failed (or retrying) jobs again, now.
struct Retry: JobActionCommand {
    static let configuration = CommandConfiguration(abstract: "Queue failed jobs again, to be sent now.")
    static let command = ControlCommand.retry
    static let bulkFlag = "--all-failed"

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Job ids (or unambiguous prefixes).", valueName: "id"), completion: DaemonCompletions.jobIDs([.failed, .retrying]))
    var ids: [String] = []
    @Flag(name: .customLong("all-failed"), help: "Every failed job.")
    var all = false
    @Option(help: ArgumentHelp("With --all-failed: only this spool's jobs.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?
}

/// `ferryctl hold`: keep jobs from being sent until released.
struct Hold: JobActionCommand {
    static let configuration = CommandConfiguration(abstract: "Hold jobs: they are not sent until released.")
    static let command = ControlCommand.hold
    static let bulkFlag = "--all-queued"

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Job ids (or unambiguous prefixes).", valueName: "id"), completion: DaemonCompletions.jobIDs([.queued, .retrying]))
    var ids: [String] = []
    @Flag(name: .customLong("all-queued"), help: "Every queued or retrying job.")
    var all = false
    @Option(help: ArgumentHelp("With --all-queued: only this spool's jobs.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?
}

/// `ferryctl release`: let held jobs be sent again.
struct Release: JobActionCommand {
    static let configuration = CommandConfiguration(abstract: "Release held jobs, so they are sent again.")
    static let command = ControlCommand.release
    static let bulkFlag = "--all-held"

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Job ids (or unambiguous prefixes).", valueName: "id"), completion: DaemonCompletions.jobIDs([.held]))
    var ids: [String] = []
    @Flag(name: .customLong("all-held"), help: "Every held job.")
    var all = false
    @Option(help: ArgumentHelp("With --all-held: only this spool's jobs.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?
}

/// `ferryctl cancel`: give up on held jobs for good.
struct Cancel: JobActionCommand {
    static let configuration = CommandConfiguration(abstract: "Cancel jobs: they are never sent.")
    static let command = ControlCommand.cancel
    static let bulkFlag = "--all-held"

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Job ids (or unambiguous prefixes).", valueName: "id"), completion: DaemonCompletions.jobIDs([.held, .queued, .retrying]))
    var ids: [String] = []
    @Flag(name: .customLong("all-held"), help: "Every held job.")
    var all = false
    @Option(help: ArgumentHelp("With --all-held: only this spool's jobs.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?
}
