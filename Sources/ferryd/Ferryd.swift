import ArgumentParser
import CFerrySystem
import FerryConfig
import FerryDaemon
import FerrySystem
import Foundation
import Logging
import ServiceLifecycle

/// ferryd's entry point: makes NIO's event loops the tasks' executor (``EventLoopExecutor``)
/// before anything runs, then parses the command line.
@main
enum FerrydMain {
    @MainActor
    static func main() async {
        if ProcessInfo.processInfo.environment["FERRY_DISPATCH_EXECUTOR"] == nil {
            EventLoopExecutor.install()
        }
        await Ferryd.main()
    }
}

struct Ferryd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferryd",
        abstract: "Ferry's upload daemon: watches spool directories and uploads every file that lands in them.",
        discussion: """
            Files renamed into a spool (or written in place and left to settle) are queued in \
            SQLite, sent as multipart/form-data with retries, exponential backoff and jitter, and \
            removed, kept or moved only after the server accepted them and that was recorded. A \
            file that cannot be delivered is moved to the spool's failed directory with a \
            NAME.error.json beside it that says why. Try it with `ferryd demo`; steer a running \
            daemon with ferryctl.

            FILES
              /etc/ferry/ferry.toml    the configuration (--config)
              /var/lib/ferry           state_directory: queue.sqlite, request bodies
              /run/ferry/control.sock  control_socket, for ferryctl

            ENVIRONMENT
              NOTIFY_SOCKET            systemd Type=notify: READY, STATUS, RELOADING,
                                       STOPPING are sent there
              WATCHDOG_USEC            WATCHDOG=1 is sent every half of it
              LISTEN_FDS, LISTEN_PID   socket activation: fd 3 is the control socket
              CREDENTIALS_DIRECTORY    where ${credential:NAME} reads secrets
              JOURNAL_STREAM           set by systemd: when it names stderr, each record
                                       goes to journald natively, its metadata as
                                       FERRY_* fields (journalctl FERRY_JOB=…)
              FERRY_DISPATCH_EXECUTOR  when set, tasks run on libdispatch's pool
                                       rather than NIO's event loops (to compare)

            SIGNALS
              SIGTERM, SIGINT  stop: no new uploads; those in flight get
                               shutdown_timeout to finish, the rest stay queued
              SIGHUP           re-read the configuration; an invalid file is
                               logged and the running configuration stays

            EXIT STATUS
              0   stopped on request      73  state directory unusable or full
              70  internal error          74  queue database damaged (never replaced)
              75  already running         78  invalid configuration (file:line: key)
            """,
        version: FerryVersion.current,
        subcommands: [Run.self, CheckConfig.self, Demo.self],
        defaultSubcommand: Run.self)
}

/// Options shared by the commands that read a configuration file.
struct ConfigOption: ParsableArguments {
    @Option(name: .shortAndLong, help: ArgumentHelp("The configuration file.", valueName: "path"), completion: .file(extensions: ["toml"]))
    var config: String = FerryConfiguration.defaultPath
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the daemon (the default command).")

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let configuration = try loadConfiguration(options.config)
        try await runDaemon(configuration, journal: true)
    }
}

struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the configuration file, resolving its secrets, and exit.",
        discussion: "Exits 0 if the file is valid, 78 (EX_CONFIG) with one line per problem otherwise.")

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let configuration = try loadConfiguration(options.config)
        print("\(options.config): OK (\(configuration.spools.count) spool\(configuration.spools.count == 1 ? "" : "s"): \(configuration.spools.map(\.name).joined(separator: ", ")))")
    }
}

/// Loads a configuration or exits with code 78 and every problem on stderr.
func loadConfiguration(_ path: String) throws -> FerryConfiguration {
    do {
        return try ConfigurationLoader.fromProcessEnvironment().load(path: path)
    } catch {
        FileHandle.standardError.write(Data("ferryd: invalid configuration\n\(error)\n".utf8))
        throw ExitCode(DaemonError.configuration(error).exitCode)
    }
}

/// Runs the daemon until SIGTERM or SIGINT, exiting with a code that says why it stopped early.
/// With `journal`, records go to journald natively when stderr is the journal; otherwise (and
/// always for `ferryd demo`) they are logfmt lines on stderr.
func runDaemon(_ configuration: FerryConfiguration, journal: Bool = false, onReady: @escaping @Sendable () -> Void = {}) async throws {
    // A SIGHUP before the reload handler is in place (during recovery) would end the process, which
    // systemd counts as a clean exit and does not restart: ignored until then.
    signal(SIGHUP, SIG_IGN)
    // Transfer buffers go back to the kernel when freed, so memory does not grow with file size.
    cferry_tune_malloc()
    // A bundle holds its files open while its body is built (up to max_bundle_files each).
    _ = cferry_raise_open_files_limit()
    let level = configuration.logLevel
    if journal, let socket = JournalLogHandler.socketForStderr(environment: ProcessInfo.processInfo.environment) {
        LoggingSystem.bootstrap { JournalLogHandler(label: $0, level: level, socket: socket) }
    } else {
        LoggingSystem.bootstrap { LogfmtLogHandler(label: $0, level: level) }
    }
    FerryDaemon.bootstrapMetrics()
    let logger = Logger(label: "ferryd")
    let notifier = SystemdNotifier.fromProcessEnvironment(logger: logger)
    // Most of an idle ferryd's resident set is the executable's code pages. Those run only while
    // starting (arguments, configuration; then recovery and the first scans) need not stay.
    _ = cferry_release_text_pages()
    let daemon = FerryDaemon(configuration: configuration, logger: logger, notifier: notifier) {
        _ = cferry_release_text_pages()
        onReady()
    }
    let group = ServiceGroup(configuration: .init(
        services: [.init(service: daemon)],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger))
    do {
        try await group.run()
    } catch let error as DaemonError {
        logger.critical("cannot run", metadata: ["error": "\(error)"])
        notifier.send(["STATUS=cannot run: " + SystemdNotifier.oneLine(error.description), "EXIT_STATUS=\(error.exitCode)"])
        throw ExitCode(error.exitCode)
    } catch {
        // Not one the daemon classified: still said to the log and to systemd, with EX_SOFTWARE.
        let unclassified = DaemonError.other("\(error)")
        logger.critical("cannot run", metadata: ["error": "\(error)"])
        notifier.send(["STATUS=cannot run: " + SystemdNotifier.oneLine(unclassified.description), "EXIT_STATUS=\(unclassified.exitCode)"])
        throw ExitCode(unclassified.exitCode)
    }
}
