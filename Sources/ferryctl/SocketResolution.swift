import ArgumentParser
import FerryConfig
import FerryControl
import Foundation

/// Decides which control socket to connect to: `--socket`, else `$FERRY_CONTROL_SOCKET`, else
/// `control_socket` in the configuration file, else the protocol's default path.
enum SocketResolution {
    /// The configuration file read when neither `--config` nor `$FERRY_CONFIG` names one.
    static let defaultConfigPath = FerryConfiguration.defaultPath
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
            do {
                return try ConfigurationLoader.controlSocket(inFile: config)
            } catch {
                throw ValidationError(error.description)
            }
        }
        // The default file is optional: ferryctl may run where ferryd's configuration is not readable.
        return (try? ConfigurationLoader.controlSocket(inFile: defaultConfigPath)) ?? fallbackPath
    }
}
