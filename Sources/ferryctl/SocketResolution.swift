import ArgumentParser
import FerryControl
import Foundation
import TOMLKit

/// Decides which control socket to connect to: `--socket`, else `$FERRY_CONTROL_SOCKET`, else
/// `control_socket` in the configuration file, else the protocol's default path.
enum SocketResolution {
    /// The configuration file read when neither `--config` nor `$FERRY_CONFIG` names one.
    static let defaultConfigPath = "/etc/ferry/ferry.toml"
    /// The socket used when nothing names one.
    static let fallbackPath = ControlProtocol.defaultSocketPath

    /// The socket path for `options`, reading the environment and the configuration file.
    /// - Throws: `ValidationError` when a configuration file named explicitly cannot be read or parsed.
    static func socketPath(
        for options: GlobalOptions, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> String {
        if let socket = options.socket, !socket.isEmpty { return socket }
        if let socket = environment["FERRY_CONTROL_SOCKET"], !socket.isEmpty { return socket }
        if let config = options.config ?? environment["FERRY_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) {
            return try controlSocket(inConfig: config, explicit: true) ?? fallbackPath
        }
        return (try? controlSocket(inConfig: defaultConfigPath, explicit: false)) ?? fallbackPath
    }

    /// The top-level `control_socket` of the configuration file at `path`, made absolute against
    /// the file's directory (as ferryd does), or `nil` if the file does not set it.
    /// A missing file is ignored unless `explicit`; any other problem with an explicit file is a usage error.
    static func controlSocket(inConfig path: String, explicit: Bool) throws -> String? {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            guard explicit else { return nil }
            throw ValidationError("cannot read the configuration file \(path): \(readProblem(path))")
        }
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            guard explicit else { return nil }
            throw ValidationError("the configuration file \(path) is not valid TOML: \(error.description) (line \(error.source.begin.line))")
        } catch {
            guard explicit else { return nil }
            throw ValidationError("the configuration file \(path) is not valid TOML: \(error)")
        }
        guard let value = table["control_socket"] else { return nil }
        guard let socket = value.string, !socket.isEmpty else {
            guard explicit else { return nil }
            throw ValidationError("control_socket in \(path) must be a non-empty string")
        }
        return absolute(socket, relativeTo: path)
    }

    /// `path` made absolute against the directory of `file` (which may itself be relative).
    static func absolute(_ path: String, relativeTo file: String) -> String {
        if path.hasPrefix("/") { return path }
        let directory = (file as NSString).deletingLastPathComponent
        let base = directory.isEmpty ? "." : directory
        return ((base as NSString).appendingPathComponent(path) as NSString).standardizingPath
    }

    /// Why the file at `path` cannot be read, in words.
    private static func readProblem(_ path: String) -> String {
        var status = stat()
        if stat(path, &status) != 0 { return String(cString: strerror(errno)) }
        if status.st_mode & S_IFMT == S_IFDIR { return "it is a directory" }
        if access(path, R_OK) != 0 { return String(cString: strerror(errno)) }
        return "it is not UTF-8 text"
    }
}
