import ArgumentParser
import FerryControl
import FerrySystem
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `ferryctl enqueue FILE... --spool NAME [--field KEY=VALUE ...]`: copy local files (or
/// directories, as bundles) into a spool and queue them at once, with fields of their own.
struct Enqueue: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy files into a spool and queue them right away.",
        discussion: """
            Each file is copied under a hidden temporary name, flushed to disk and renamed into \
            place, so ferryd never sees a partial file; a file of the same name already in the \
            spool is never replaced. Needs write access to the spool directory. Exits 1 if any \
            file could not be queued.

            --field key=value (repeatable; split at the first "=") gives the file fields of its \
            own, sent with the spool's [spool.fields] and winning over them; a key given twice is \
            a repeated field, in the order given. Values may use the placeholders of \
            [spool.fields] ({filename}, {size}, {sha256}, ...; {{ and }} for braces) and line \
            breaks, but not NUL nor a secret reference (${...}); a key may not hold CR, LF or NUL. \
            The fields are written to \
            <name>.fields.toml in the spool (atomically, before the file is renamed in); a sidecar \
            of that name left there without its file is replaced. Without --field, a sidecar the \
            producer wrote beforehand applies. Multipart spools only.

            A directory is enqueued as a bundle: its files go in one request. The spool needs \
            bundles = true, and the directory may hold only regular files (no subdirectories, \
            symlinks or special files). Its files are copied into a hidden temporary directory in \
            the spool, each flushed to disk, with the fields as .fields.toml inside it, and the \
            directory is then renamed into place, never replacing an entry already there.

            On Ctrl-C, the partial copy (file, sidecar or directory) is removed.
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(
        help: ArgumentHelp("The files to upload (regular files), or directories to upload as bundles.", valueName: "file"),
        completion: .file())
    var files: [String]

    @Option(help: ArgumentHelp("The spool to put them in.", valueName: "name"), completion: DaemonCompletions.spoolNames)
    var spool: String

    @Option(
        name: .customLong("field"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp("A form field for each of these files (repeatable), e.g. --field 'alt=A red kite'.", valueName: "key=value"))
    var fieldArguments: [String] = []

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("name at least one file") }
        var seen: Set<String> = []
        for file in files {
            let name = SpoolPlacement.baseName(file)
            if !seen.insert(name).inserted { throw ValidationError("two of the files are named \(name); a spool holds one file per name") }
        }
        _ = try FieldArguments.sidecar(for: fieldArguments)
    }

    func execute(_ daemon: Daemon) async throws {
        let (_, status) = try await daemon.request(.status, NoArguments(), as: StatusReport.self)
        guard let target = status.spools.first(where: { $0.name == spool }) else {
            let names = status.spools.map(\.name).joined(separator: ", ")
            Terminal.error("no spool named \"\(spool)\"; " + (names.isEmpty ? "ferryd has no spools" : "the spools are \(names)"))
            throw ExitStatus.failed.code
        }
        let sidecar = try FieldArguments.sidecar(for: fieldArguments)
        if sidecar != nil, let uploadProtocol = target.uploadProtocol, uploadProtocol != "multipart" {
            Terminal.error("""
                spool "\(spool)" uploads with protocol = "\(uploadProtocol)", which sends no form fields: \
                --field works only in a spool with protocol = "multipart"
                """)
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
            PendingEntries.removeAllAfterInterrupt()
            Terminal.out("\n")
            Terminal.terminate(.interrupted)
        }
        for (index, file) in files.enumerated() {
            do throws(PlacementError) {
                placed.append((index, try place(file, into: target, directory: directory, sidecar: sidecar)))
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

    /// Copies `file` (a regular file, or a directory as a bundle) into the spool.
    /// - Returns: the name it has there.
    private func place(_ file: String, into target: SpoolStatus, directory: DirectoryHandle, sidecar: [UInt8]?) throws(PlacementError) -> String {
        var status = stat()
        guard stat(file, &status) == 0, FileStatus(status).kind == .directory else {
            // A daemon that does not say its protocol predates sidecars: keep clear of their names all the same.
            let hasSidecars = (target.uploadProtocol ?? "multipart") == "multipart"
            return try SpoolPlacement.place(file, in: directory, sidecar: sidecar, hasSidecars: hasSidecars)
        }
        guard target.bundles else {
            throw PlacementError("""
                is a directory, and spool "\(target.name)" does not take bundles: set bundles = true in its [[spool]] \
                section to send a directory's files in one request
                """)
        }
        return try BundlePlacement.place(file, in: directory, sidecar: sidecar)
    }
}
