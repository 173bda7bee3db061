import ArgumentParser
import FerryControl

/// `ferryctl pause [SPOOL]`: stop starting uploads, in one spool or all of them.
struct Pause: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pause a spool (or all): no new uploads start; files keep being queued.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The spool; all spools when omitted.", valueName: "spool"), completion: DaemonCompletions.spoolNames)
    var spool: String?

    func execute(_ daemon: Daemon) async throws {
        try await PauseStateView.request(.pause, spool: spool, daemon: daemon)
    }
}

/// `ferryctl resume [SPOOL]`: undo `pause`.
struct Resume: DaemonCommand {
    static let configuration = CommandConfiguration(abstract: "Resume a paused spool (or all).")

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The spool; all spools when omitted.", valueName: "spool"), completion: DaemonCompletions.spoolNames)
    var spool: String?

    func execute(_ daemon: Daemon) async throws {
        try await PauseStateView.request(.resume, spool: spool, daemon: daemon)
    }
}

/// Sends `pause` or `resume` and prints which spools are paused now.
enum PauseStateView {
    static func request(_ command: ControlCommand, spool: String?, daemon: Daemon) async throws {
        let (raw, state) = try await daemon.request(command, PauseArguments(spool: spool), as: PauseState.self)
        if daemon.json { try daemon.printJSON(raw) } else { Terminal.out(render(state)) }
    }

    static func render(_ state: PauseState) -> String {
        state.paused.isEmpty ? "no spool is paused\n" : "paused: \(state.paused.joined(separator: ", "))\n"
    }
}
