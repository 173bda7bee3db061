#if canImport(Glibc)
import Glibc
#endif

/// A TCP address to listen on, such as `metrics_listen`: a numeric IPv4 or IPv6 address (or
/// `localhost`, taken as 127.0.0.1) and a port.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// The numeric address, without brackets: `127.0.0.1`, `::1`.
    public var host: String
    /// 1–65535.
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `HOST:PORT`, with an IPv6 address in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Reads `HOST:PORT` (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`); the failure says what is wrong.
    public static func parse(_ text: String) -> Result<ListenAddress, ListenAddressError> {
        let usage = "expected \"HOST:PORT\" such as \"127.0.0.1:9464\", \"[::1]:9464\" or \"localhost:9464\", got \"\(text)\""
        let host: String
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return .failure(ListenAddressError(message: usage))
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else {
                return .failure(ListenAddressError(message: "\"\(host)\" is not an IPv6 address; \(usage)"))
            }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty else {
                let hint = parts.count > 2 ? " (write an IPv6 address in brackets: \"[::1]:9464\")" : ""
                return .failure(ListenAddressError(message: usage + hint))
            }
            portText = parts[1]
            if parts[0].lowercased() == "localhost" {
                host = "127.0.0.1"
            } else {
                host = String(parts[0])
                var address = in_addr()
                guard inet_pton(AF_INET, host, &address) == 1 else {
                    return .failure(ListenAddressError(message:
                        "\"\(host)\" is not an IPv4 address (use a numeric address, \"[IPv6]\" or localhost); \(usage)"))
                }
            }
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(portText), (1...65535).contains(port) else {
            return .failure(ListenAddressError(message: "the port must be a number from 1 to 65535; \(usage)"))
        }
        return .success(ListenAddress(host: host, port: port))
    }
}

/// Why a `HOST:PORT` value cannot be used.
public struct ListenAddressError: Error, Sendable, Equatable {
    public var message: String
}
