import ArgumentParser
import FerryControl

/// `ferryctl wait`: block until the queue is drained, e.g. at the end of a batch script.
struct Wait: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait until nothing is queued, uploading, retrying or settling.",
        discussion: """
            Exits 0 when the queue drained with no failures, 1 if jobs failed or were cancelled \
            meanwhile (they are listed), 75 when --timeout is reached. Held jobs do not keep it waiting.
            """)

    /// How much longer than its own timeout the client waits for the daemon's answer.
    static let replyMargin: Double = 10

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("Give up after this long: 30s, 5m, 1h, or seconds.", valueName: "duration"))
    var timeout: String?

    @Option(help: ArgumentHelp("Only this spool.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String?

    func validate() throws {
        if let timeout {
            guard let seconds = ArgumentValues.duration(timeout, bareSeconds: true) else {
                throw ValidationError("--timeout \"\(timeout)\" is not a duration (30s, 5m, 1h, or seconds)")
            }
            guard seconds <= WaitArguments.maximumTimeoutSeconds else {
                throw ValidationError("--timeout must be at most a year (\(Int(WaitArguments.maximumTimeoutSeconds)) seconds)")
            }
        }
    }

    func execute(_ daemon: Daemon) async throws {
        let seconds = timeout.flatMap { ArgumentValues.duration($0, bareSeconds: true) }
        let (raw, result) = try await daemon.request(
            .wait, WaitArguments(timeoutSeconds: seconds, spool: spool), as: WaitResult.self,
            timeout: seconds.map { $0 + Self.replyMargin })
        if daemon.json {
            try daemon.printJSON(raw)
        } else {
            Terminal.out(render(result))
        }
        if !result.failed.isEmpty { throw ExitStatus.failed.code }
    }

    func render(_ result: WaitResult) -> String {
        var output = "queue drained in \(Format.preciseDuration(result.waitedSeconds))\n"
        if !result.failed.isEmpty {
            output += "failed or cancelled while waiting: \(Format.count(result.failed.count, "job"))\n"
            output += JobListView.render(JobList(jobs: result.failed, more: false))
        }
        if result.held > 0 { output += "\(Format.count(result.held, "job")) on hold\n" }
        return output
    }
}
