import ArgumentParser
import FerryConfig
import FerryReceiver
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Try Ferry: watch ./ferry-demo/spool and upload to a receiver on 127.0.0.1.",
        discussion: """
            Starts a loopback HTTP receiver that stores what it gets in ./ferry-demo/received, and runs
            the daemon on the embedded configuration below with a temporary state directory. Drop a
            file into ./ferry-demo/spool and watch it travel; sent files are moved to ./ferry-demo/sent.
            """)

    @Option(help: ArgumentHelp("The demo's folder.", valueName: "path"), completion: .directory)
    var directory = "ferry-demo"

    @Option(help: "The receiver's port on 127.0.0.1 (0: any free port).")
    var port = 0

    /// The embedded configuration; `@…@` names are filled in at start.
    static let template = """
        state_directory = "@STATE@"
        control_socket = "@STATE@/control.sock"
        max_concurrent_uploads = 4
        log_level = "info"
        shutdown_timeout = "10s"

        [[spool]]
        name = "demo"
        directory = "@BASE@/spool"
        url = "@URL@"
        file_field = "file"
        settle = "1s"
        after_upload = "move"
        sent_directory = "@BASE@/sent"
        failed_directory = "@BASE@/failed"
          [spool.fields]
          description = "Uploaded {filename} ({size} bytes) by the Ferry demo"
          [spool.retry]
          initial_delay = "500ms"
          max_delay = "10s"
        """

    func run() async throws {
        let base = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        for sub in ["spool", "received", "sent"] {
            try FileManager.default.createDirectory(atPath: "\(base)/\(sub)", withIntermediateDirectories: true)
        }
        var template = Array("/tmp/ferry-demo-state.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ValidationError("cannot create a temporary state directory") }
        let state = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: state) }

        let receiver = try await Receiver.start(port: port, directory: "\(base)/received")
        let text = Self.template
            .replacingOccurrences(of: "@STATE@", with: state)
            .replacingOccurrences(of: "@BASE@", with: base)
            .replacingOccurrences(of: "@URL@", with: receiver.url(path: "/upload"))
        let configuration = try ConfigurationLoader(secrets: .init(environment: [:], credentialsDirectory: nil))
            .parse(text, path: "(ferryd demo)")
        let relativeSpool = directory.hasPrefix("/") ? "\(base)/spool" : "\(directory)/spool"
        try await runDaemon(configuration) {
            FileHandle.standardOutput.write(Data("""

                Ferry demo is running.
                  spool:    \(base)/spool
                  receiver: \(receiver.url(path: "/upload"))  →  \(base)/received
                  sent:     \(base)/sent

                Drop a file in and watch it travel, for example:
                  cp /etc/os-release \(relativeSpool)/

                Press Ctrl-C to stop.


                """.utf8))
        }
        try? await receiver.stop()
    }
}
