import ArgumentParser
import FerryReceiver
import Foundation
import UnixSignals

@main
struct FerryReceiverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-receiver",
        abstract: "A loopback HTTP server that stores multipart uploads (for trying Ferry and for benchmarks).",
        discussion: "Prints `listening on http://HOST:PORT` once it accepts connections, then serves until SIGINT or SIGTERM.")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port (0: any free port).")
    var port = 0

    @Option(help: ArgumentHelp("Where received files are stored.", valueName: "path"))
    var directory: String

    @Flag(help: "Parse uploads but store and hash nothing (a fast sink for benchmarks).")
    var discard = false

    func run() async throws {
        let receiver = try await Receiver.start(host: host, port: port, directory: directory, discard: discard)
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        FileHandle.standardOutput.write(Data("listening on http://\(host):\(receiver.port)\n".utf8))
        for await _ in signals { break }
        try await receiver.stop()
    }
}
