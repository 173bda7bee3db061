import ArgumentParser
import FerryControl
import Foundation

/// `ferryctl watch`: job events as they happen, until interrupted.
struct Watch: DaemonCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print job events as they happen, until interrupted (Ctrl-C).",
        discussion: """
            On a terminal, uploads in flight are shown on a status line that is rewritten in place. \
            --json prints every event, progress samples included, as one JSON object per line. \
            Exits 69 if ferryd closes the stream (e.g. it stops).
            """)

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("First replay the events after this event id (from an earlier watch).", valueName: "id"))
    var since: Int64?

    @Flag(name: .customLong("no-progress"), help: "Leave out upload progress samples.")
    var noProgress = false

    func execute(_ daemon: Daemon) async throws {
        let statusLine = Terminal.isInteractive && !daemon.json
        // Progress is only shown on a terminal (or as JSON); do not have the daemon send it otherwise.
        let wantsProgress = !noProgress && (daemon.json || statusLine)
        let arguments = WatchArguments(since: since, progress: wantsProgress)
        let interrupt = InterruptHandler {
            if statusLine { Terminal.out(WatchView.clearLine) }
            Terminal.terminate(.ok)
        }
        defer { interrupt.cancel() }
        try await daemon.withConnection { connection in
            let startRaw = try await connection.call(.watch, arguments)
            let start = try Daemon.decode(startRaw, as: WatchStart.self, what: "the watch reply")
            if let missed = start.missed {
                Terminal.error("missed events \(missed.from)–\(missed.to); use `ferryctl list` to catch up")
            }
            var showingStatusLine = false
            while let raw = try await connection.nextEvent() {
                if daemon.json {
                    try Daemon.printJSONLine(raw)
                    continue
                }
                // An event this client cannot read (from a newer daemon) is skipped, not fatal.
                guard let event = try? Daemon.decode(raw, as: WatchEvent.self, what: "an event") else { continue }
                if event.type == .progress {
                    guard statusLine else { continue }
                    let text = WatchView.progressLine(event.uploads ?? [], width: Terminal.width)
                    Terminal.out(WatchView.clearLine + text)
                    showingStatusLine = !text.isEmpty
                    continue
                }
                Terminal.out((showingStatusLine ? WatchView.clearLine : "") + WatchView.eventLine(event) + "\n")
                showingStatusLine = false
            }
            if showingStatusLine { Terminal.out(WatchView.clearLine) }
        }
        Terminal.error("ferryd closed the event stream")
        throw ExitStatus.unavailable.code
    }
}

/// The human rendering of watch events.
enum WatchView {
    /// Carriage return and erase to the end of the line.
    static let clearLine = "\r\u{1B}[K"

    /// One job event: "10:15:30  retry       01JD…  scans/a.jpg  → retrying  attempt 2  HTTP 503  Service Unavailable".
    static func eventLine(_ event: WatchEvent) -> String {
        let name = event.event?.rawValue ?? event.type.rawValue
        var parts = [Format.clock(event.at), name.padding(toLength: max(10, name.count), withPad: " ", startingAt: 0)]
        if let job = event.job { parts.append(job) }
        switch (event.spool, event.file) {
        case (let spool?, let file?): parts.append(Format.printable("\(spool)/\(file)"))
        case (let spool?, nil): parts.append(Format.printable(spool))
        case (nil, let file?): parts.append(Format.printable(file))
        case (nil, nil): break
        }
        if let state = event.state, state.rawValue != name { parts.append("→ \(state.rawValue)") }
        if let attempt = event.attempt, event.event == .started || event.event == .retry { parts.append("attempt \(attempt)") }
        if let status = event.status { parts.append("HTTP \(status)") }
        if let location = event.location { parts.append("Location: \(Format.printable(location))") }
        if let message = event.message, !message.isEmpty { parts.append(Format.shortened(message, to: 200)) }
        return parts.joined(separator: "  ")
    }

    /// The uploads in flight on one line no wider than `width`: "uploading: a.jpg 45% 3.4 MB/s · b.bin 2% 1.0 MB/s".
    static func progressLine(_ uploads: [UploadProgress], width: Int) -> String {
        guard !uploads.isEmpty else { return "" }
        let text = "uploading: " + uploads.map { upload in
            "\(upload.file) \(Format.percent(upload.bytesSent, of: upload.bytesTotal)) \(Format.rate(upload.bytesPerSecond))"
        }.joined(separator: " · ")
        // One column short of the width, so the cursor never wraps to a new line.
        return Format.shortened(text, to: max(10, width - 1))
    }
}
