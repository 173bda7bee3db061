import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Unbuffered writes to stdout and stderr, and what is known about the terminal.
///
/// Every write is one or more `write(2)` calls, so output from different threads (the SIGINT
/// handler) and the two streams never interleave inside a line, and nothing waits in a buffer.
enum Terminal {
    /// Whether stdout is a terminal (progress bars, redrawing in place).
    static let isInteractive = isatty(1) == 1

    /// Writes `text` to stdout. A closed pipe (`ferryctl list | head`) ends the process quietly.
    static func out(_ text: String) {
        if !write(text, to: 1) { terminate(.ok) }
    }

    /// Writes `line` and a newline to stdout.
    static func line(_ line: String = "") {
        out(line + "\n")
    }

    /// Writes `ferryctl: <message>` to stderr, its control characters escaped (a message may quote
    /// a file name or a server's words); lines of its own stay lines.
    static func error(_ message: String) {
        let lines = message.split(separator: "\n", omittingEmptySubsequences: false).map { Format.printable(String($0)) }
        _ = write("ferryctl: " + lines.joined(separator: "\n") + "\n", to: 2)
    }

    /// The terminal's width in columns (80 when it cannot be told).
    static var width: Int {
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let columns = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init), columns > 0 { return columns }
        return 80
    }

    /// Ends the process at once with `status` (from a signal handler, where throwing is not possible).
    static func terminate(_ status: ExitStatus) -> Never {
        Glibc.exit(status.rawValue)
    }

    /// Writes all of `text` to `descriptor`; `false` if the descriptor is gone.
    private static func write(_ text: String, to descriptor: Int32) -> Bool {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { raw in
            var done = 0
            while done < raw.count {
                let count = Glibc.write(descriptor, raw.baseAddress! + done, raw.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                done += count
            }
            return true
        }
    }
}

/// Runs an action when SIGINT arrives, instead of the default of dying on the spot.
final class InterruptHandler {
    private let source: any DispatchSourceSignal

    /// Installs `action` for SIGINT until `cancel()`; `action` runs on a background queue and
    /// usually ends the process.
    init(_ action: @escaping @Sendable () -> Void) {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler(handler: action)
        source.resume()
    }

    /// Removes the handler and restores the default SIGINT behaviour.
    func cancel() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
