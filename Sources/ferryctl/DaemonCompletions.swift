import ArgumentParser
import FerryControl
import Foundation

/// Shell completions that ask the running daemon: job ids (`show`, `retry`, `hold`, `release`,
/// `cancel`, `retry-hook`) and spool names (`--spool`, `pause`, `resume`). The shell runs
/// `ferryctl` again for them, so each answers within ``deadline`` and prints nothing when ferryd is
/// not running, not reachable or not ours to ask.
enum DaemonCompletions {
    /// The most a completion waits for ferryd.
    static let deadline: Double = 1
    /// The newest jobs offered.
    static let jobLimit = 200

    /// Ids of the jobs in `states` (all states when empty), newest first.
    static func jobIDs(_ states: [JobStateName] = []) -> CompletionKind {
        .custom { words, _, prefix in
            let arguments = ListArguments(states: states.isEmpty ? nil : states, limit: jobLimit)
            let list = await ask(words, .list, arguments, as: JobList.self)
            return (list?.jobs ?? []).map(\.id).filter { $0.hasPrefix(prefix) }
        }
    }

    /// The names of the daemon's spools.
    static var spoolNames: CompletionKind {
        .custom { words, _, prefix in
            let status = await ask(words, .status, NoArguments(), as: StatusReport.self)
            return (status?.spools ?? []).map(\.name).filter { $0.hasPrefix(prefix) }
        }
    }

    /// One request to the daemon the command line names (`--socket`, `--config`, else the
    /// environment and defaults), or `nil` on any failure.
    static func ask<Arguments: Encodable & Sendable, Result: Decodable & Sendable>(
        _ words: [String], _ command: ControlCommand, _ arguments: Arguments, as type: Result.Type
    ) async -> Result? {
        guard let options = try? GlobalOptions.parse(globalOptions(in: words)),
              let path = try? SocketResolution.socketPath(for: options) else { return nil }
        return try? await Deadline.run(deadline) {
            try await ControlClient.withConnection(path: path) { connection in
                try await connection.call(command, arguments, as: Result.self)
            }
        }
    }

    /// The `--socket` and `--config` options among a command line's words (`--socket PATH` or
    /// `--socket=PATH`); the rest is left out, so a half-typed command still finds its daemon.
    static func globalOptions(in words: [String]) -> [String] {
        var found: [String] = []
        var index = 0
        while index < words.count {
            let word = words[index]
            for name in ["--socket", "--config"] {
                if word == name, index + 1 < words.count {
                    found += [name, words[index + 1]]
                    index += 1
                } else if word.hasPrefix(name + "=") {
                    found.append(word)
                }
            }
            index += 1
        }
        return found
    }
}
