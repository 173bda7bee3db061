import ArgumentParser
import FerryReceiver
import Foundation
import UnixSignals

@main
struct FerryReceiverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-receiver",
        abstract: "A loopback HTTP server that stores multipart uploads, with planned faults (for trying Ferry, benchmarks and torture runs).",
        discussion: """
            Prints `listening on http://HOST:PORT` (or https://) once it accepts connections, then serves until \
            SIGINT or SIGTERM. Each file part is stored under its file name (or only hashed, --hash-only) and, \
            with --manifest, logged as one JSON line before the answer is sent.

            FAULTS
              --fault KIND[:OPTION[,OPTION...]]@WHEN
              (or KIND[:OPTIONS]=WHEN: then the last `=` separates)

              WHEN: a probability (0.05 or 5%), #N[,M...] (0-based request
              numbers) or every=N. Schedules are checked first; then one draw
              per request (from --seed) picks at most one probability rule, so
              their probabilities add up (at most 1). Other requests are stored.

              KIND and its options:
                NNN               answer status NNN after reading the whole
                                  body; nothing is stored
                  retry-after=S       with Retry-After: S (seconds)
                  retry-after=date:S  Retry-After as an HTTP-date S s ahead
                  early               answer before the body, then close
                reset             TCP RST mid-body (SO_LINGER 0 + close); at=
                disconnect        close (FIN) mid-body, no answer; at=
                stall             stop reading mid-body for good; at=
                                  (at=0: before the body)
                stall-after-body  read the whole body, never answer;
                                  store: store the file first
                close             read the whole body, close, no answer;
                                  store: store the file first
                slow              read at rate=BYTES/s (default 256k), then
                                  store and answer 201
                partial           read at= of the body, answer status=2xx
                                  (default 200) and close; nothing is
                                  stored: the server took a truncated body
              at= is bytes (65536, 64k, 8m), a share of Content-Length (50%)
              or random (the default: uniform in 1%..99%).

            EXAMPLES
              ferry-receiver --directory r --hash-only --manifest r.jsonl \\
                --seed 7 --fault 500@0.05 --fault 503:retry-after=1@0.05 \\
                --fault reset@0.05 --fault slow:rate=512k@0.02 \\
                --fault partial@0.01 --fault close:store@0.02
              ferry-receiver --directory r --fault 503@#0,1 \\
                --fault reset:at=50%@every=10

            RECORDS
              --manifest FILE: one line per stored file, appended before the
              answer is sent (a restarted receiver appends to the same file):
                {"time":UNIX_SECONDS,"request":N,"filename":"a.bin",
                 "size":N,"sha256":"...","idempotency_key":"...",
                 "status":201}
              status is null for a file stored by a fault that never answered.
              --requests FILE: one line per request, when its fault is chosen:
                {"time":UNIX_SECONDS,"request":N,"method":"POST","uri":"...",
                 "idempotency_key":"...","content_length":N,"fault":"reset"}
              fault is null for a request stored normally.
            """)

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port (0: any free port).")
    var port = 0

    @Option(help: ArgumentHelp("Where received files are stored.", valueName: "path"))
    var directory: String

    @Flag(help: "Parse uploads but store and hash nothing (a fast sink for benchmarks).")
    var discard = false

    @Flag(help: "Hash each file part (size and SHA-256 recorded) without writing it to disk.")
    var hashOnly = false

    @Option(name: .customLong("fault"), help: ArgumentHelp("A fault rule, KIND[:OPTIONS]@WHEN (see FAULTS below); repeatable.", valueName: "rule"))
    var faults: [String] = []

    @Option(help: "The seed for the fault draws (the same seed and request order give the same faults).")
    var seed: UInt64 = 1

    @Option(help: ArgumentHelp("Append one JSON line per stored file to this file.", valueName: "file.jsonl"))
    var manifest: String?

    @Option(help: ArgumentHelp("Append one JSON line per request (with its fault) to this file.", valueName: "file.jsonl"))
    var requests: String?

    @Option(help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key).", valueName: "pem"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("The PEM private key for --tls-cert.", valueName: "pem"))
    var tlsKey: String?

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if discard && manifest != nil { throw ValidationError("--discard hashes nothing, so it cannot write a --manifest") }
        do { _ = try FaultPlan(specifications: faults, seed: seed) } catch { throw ValidationError("--fault \(error)") }
    }

    func run() async throws {
        let plan = try FaultPlan(specifications: faults, seed: seed)
        let requestLog = try requests.map { try ReceiverManifest.Appender(path: $0) }
        let tls = try tlsCert.map { try Receiver.tlsConfiguration(certificate: $0, key: tlsKey!) }
        let receiver = try await Receiver.start(
            host: host, port: port, directory: directory,
            plan: plan.rules.isEmpty && requestLog == nil ? nil : plan.plan { info, fault in
                guard let requestLog else { return }
                func json(_ text: String?) -> String { text.map(ReceiverManifest.jsonString) ?? "null" }
                requestLog.append("{\"time\":\(String(format: "%.3f", Date().timeIntervalSince1970)),\"request\":\(info.index),"
                    + "\"method\":\(json(info.method)),\"uri\":\(json(info.uri)),\"idempotency_key\":\(json(info.header("Idempotency-Key"))),"
                    + "\"content_length\":\(info.header("Content-Length").flatMap { Int64($0) }.map(String.init) ?? "null"),\"fault\":\(json(fault))}\n")
            },
            discard: discard, keepFiles: !hashOnly, manifest: manifest, tls: tls)
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        FileHandle.standardOutput.write(Data("listening on \(tls == nil ? "http" : "https")://\(host):\(receiver.port)\n".utf8))
        for await _ in signals { break }
        try await receiver.stop()
    }
}
