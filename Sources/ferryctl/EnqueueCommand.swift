import ArgumentParser
import FerryControl
import FerrySystem
import Foundation

/// `ferryctl enqueue FILE... --spool NAME`: copy local files into a spool and queue them at once.
struct Enqueue: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy files into a spool and queue them right away.",
        discussion: """
            Each file is copied under a hidden temporary name, flushed to disk and renamed into \
            place, so ferryd never sees a partial file; a file of the same name already in the \
            spool is never replaced. Needs write access to the spool directory. Exits 1 if any \
            file could not be queued.
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The files to upload (regular files).", valueName: "file"), completion: .file())
    var files: [String]

    @Option(help: ArgumentHelp("The spool to put them in.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one file") }
        var seen: Set<String> = []
        for file in files {
            let name = SpoolPlacement.baseName(file)
            if !seen.insert(name).inserted { throw ValidationError("two of the files are named \(name); a spool holds one file per name") }
        }
    }

    func execute(_ daemon: Daemon) async throws {
        let (_, status) = try await daemon.request(.status, NoArguments(), as: StatusReport.self)
        guard let target = status.spools.first(where: { $0.name == spool }) else {
            let names = status.spools.map(\.name).joined(separator: ", ")
            Terminal.error("no spool named \"\(spool)\"; " + (names.isEmpty ? "ferryd has no spools" : "the spools are \(names)"))
            throw ExitStatus.failed.code
        }
        let directory: DirectoryHandle
        do {
            directory = try DirectoryHandle.open(target.directory)
        } catch {
            Terminal.error("cannot open the spool directory: \(error)")
            throw ExitStatus.failed.code
        }

        // Outcomes in the order the files were given; placed files get theirs from the daemon.
        var outcomes: [ActionOutcome?] = []
        var placed: [(index: Int, name: String)] = []
        let interrupt = InterruptHandler {
            SpoolPlacement.removeTemporaryFile()
            Terminal.out("\n")
            Terminal.terminate(.interrupted)
        }
        for (index, file) in files.enumerated() {
            do {
                placed.append((index, try SpoolPlacement.place(file, in: directory)))
                outcomes.append(nil)
            } catch {
                outcomes.append(ActionOutcome(id: file, ok: false, error: ControlError(.invalidArgument, error.description)))
            }
        }
        interrupt.cancel()

        if !placed.isEmpty {
            let results: ActionResults
            do {
                results = try await daemon.request(
                    .enqueue, EnqueueArguments(spool: spool, files: placed.map(\.name)), as: ActionResults.self).result
            } catch let error as ControlClientError {
                Terminal.error(error.description)
                Terminal.error("the files are in \(target.directory) all the same; ferryd will find them on its own")
                throw ExitStatus(for: error).code
            }
            for (index, name) in placed {
                outcomes[index] = results.results.first(where: { $0.id == name })
                    ?? ActionOutcome(id: name, ok: false, error: ControlError(.internal, "ferryd did not report on this file"))
            }
        }
        let all = ActionResults(results: outcomes.compactMap { $0 })
        if daemon.json {
            try daemon.printJSON(ControlJSON.value(all))
        } else {
            Terminal.out(ActionResultsView.render(all, emptyMessage: "nothing to enqueue"))
        }
        if all.results.contains(where: { !$0.ok }) { throw ExitStatus.failed.code }
    }
}
