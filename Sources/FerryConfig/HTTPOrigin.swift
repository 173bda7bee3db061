import Foundation

/// The origin of an http(s) URL (RFC 6454): scheme, host and port. Configured headers, which may
/// carry credentials, are sent only to the spool's own origin and those it names in
/// `send_headers_to`, never to whatever host a server's `Location` points at.
public struct HTTPOrigin: Sendable, Hashable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int

    /// The origin of `url`, or `nil` if it is not an absolute http(s) URL with a host.
    public init?(url: String) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host?.lowercased(), !host.isEmpty else { return nil }
        self.scheme = scheme
        self.host = host
        port = components.port ?? (scheme == "https" ? 443 : 80)
    }

    /// `https://uploads.example:443`.
    public var description: String { "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    /// `headers` if `url` is on one of the `trusted` origins, else none of them.
    public static func headers(
        _ headers: [(name: String, value: String)], for url: String, trusted: Set<HTTPOrigin>
    ) -> [(name: String, value: String)] {
        guard let origin = HTTPOrigin(url: url), trusted.contains(origin) else { return [] }
        return headers
    }
}
