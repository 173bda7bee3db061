import ArgumentParser
import FerrySystem

/// `ferryctl`: the command-line client of a running ferryd, over its control socket.
@main
struct Ferryctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferryctl",
        abstract: "Talk to a running ferryd over its control socket.",
        discussion: """
            The socket is --socket, else $FERRY_CONTROL_SOCKET, else control_socket in the \
            configuration file (--config, else $FERRY_CONFIG, else /etc/ferry/ferry.toml), \
            else \(SocketResolution.fallbackPath). --json prints each result as JSON on stdout.

            Access: root, ferryd's own user and members of control_group (ferry-admin when \
            installed as a service) may run every command; other users may only read (status, \
            list, show, watch, health, metrics), or not connect at all, as the socket's mode and \
            control_read_only_for_others decide.

            See also: ferryd --help; docs/control-protocol.md for the protocol ferryctl speaks.

            Exit status:
            \(ExitStatus.helpText)
            """,
        version: FerryVersion.current,
        subcommands: [
            Status.self, List.self, Show.self, Watch.self, Wait.self,
            Retry.self, Hold.self, Release.self, Cancel.self, RetryHook.self, Pause.self, Resume.self, Limit.self,
            Enqueue.self, Reload.self, Health.self, Metrics.self, Version.self,
        ])

    @OptionGroup var global: GlobalOptions
}

/// Options every subcommand accepts, before or after its own arguments.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The control socket of ferryd.", valueName: "path"), completion: .file())
    var socket: String?

    @Option(help: ArgumentHelp("The ferryd configuration file to read control_socket from.", valueName: "path"), completion: .file(extensions: ["toml"]))
    var config: String?

    @Flag(help: "Print results as JSON (one document, or one line per event for streams).")
    var json = false
}

/// The exit statuses of `ferryctl` (the sysexits.h values where one fits).
enum ExitStatus: Int32, CaseIterable {
    /// The command did what was asked.
    case ok = 0
    /// The command failed: an error reply (e.g. `not_found`, `conflict`), an item of a bulk action
    /// failed, `wait` saw failed jobs, or `health` is not ok.
    case failed = 1
    /// The command line is wrong (EX_USAGE).
    case usage = 64
    /// ferryd cannot be reached, is shutting down or busy, or answered something unreadable (EX_UNAVAILABLE).
    case unavailable = 69
    /// ferryd did not answer in time, or `wait` reached its --timeout (EX_TEMPFAIL).
    case timeout = 75
    /// This user may not connect to the socket or run the command (EX_NOPERM).
    case permissionDenied = 77
    /// `enqueue` was interrupted (SIGINT); the partial copy was removed.
    case interrupted = 130

    /// One line for the help text.
    var summary: String {
        switch self {
        case .ok: "ok"
        case .failed: "failed: an error reply, a failed item, failed jobs (wait), health not ok"
        case .usage: "usage error"
        case .unavailable: "ferryd not reachable, shutting down or busy, or an unreadable answer"
        case .timeout: "timeout: no answer in time, or wait --timeout reached"
        case .permissionDenied: "permission denied"
        case .interrupted: "enqueue interrupted (Ctrl-C); no partial file is left behind"
        }
    }

    /// The exit statuses, one per line, for the root command's help.
    static var helpText: String {
        allCases.map { status in
            let code = String(status.rawValue)
            return "  " + code + String(repeating: " ", count: max(1, 5 - code.count)) + status.summary
        }.joined(separator: "\n")
    }

    /// The `ExitCode` to throw.
    var code: ExitCode { ExitCode(rawValue) }
}
