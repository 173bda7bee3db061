import ArgumentParser
import FerryControl

/// `ferryctl limit [--spool N] RATE|off`: a bandwidth limit now, until the next reload or restart.
struct Limit: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Set a bandwidth limit at once, until the next reload or restart.",
        discussion: "RATE is like \"4MiB/s\", \"500kB/s\", \"10Mbit/s\", or \"off\". Without --spool, the limit all spools share.")

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("Limit this spool only (within the shared limit).", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?

    @Argument(help: ArgumentHelp("The rate, or off.", valueName: "rate"))
    var rate: String

    func execute(_ daemon: Daemon) async throws {
        let (raw, state) = try await daemon.request(.limit, LimitArguments(spool: spool, rate: rate), as: BandwidthState.self)
        if daemon.json {
            try daemon.printJSON(raw)
        } else {
            Terminal.out("\(state.scope == "*" ? "all spools" : "spool \(state.scope)"): \(state.limit) (until the next reload or restart)\n")
        }
    }
}
