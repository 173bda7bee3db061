import ArgumentParser
import FerryControl

/// `ferryctl retry-hook ID`: run a job's hooks that gave up again.
struct RetryHook: DaemonCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry-hook",
        abstract: "Run a job's hooks that gave up again (after hook_max_attempts failed runs).",
        discussion: "Hooks run at least once: make them idempotent (the job id, in FERRY_JOB_ID, tells one job from another).")

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The job id, or an unambiguous prefix of it.", valueName: "id"), completion: DaemonCompletions.jobIDs([.done, .failed, .cancelled]))
    var id: String

    @Option(help: ArgumentHelp("Only this one: delivered, failed or result.", valueName: "hook"))
    var hook: String?

    func execute(_ daemon: Daemon) async throws {
        let (raw, result) = try await daemon.request(.retryHook, RetryHookArguments(id: id, hook: hook), as: RetryHookResult.self)
        if daemon.json {
            try daemon.printJSON(raw)
        } else {
            Terminal.out("\(result.job): \(result.hooks.map { $0 == "result" ? "result file" : "on_\($0)" }.joined(separator: ", ")) to run again\n")
        }
    }
}
