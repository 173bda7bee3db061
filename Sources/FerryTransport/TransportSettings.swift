import Foundation

/// How an ``Uploader`` connects: TLS trust and timeouts. One uploader (and so one connection pool)
/// exists per distinct setting.
public struct TransportSettings: Sendable, Hashable {
    /// A PEM file of CA certificates to trust instead of the system's; verification stays on.
    public var caFile: String?
    /// The longest a connection (TCP and TLS handshake) may take.
    public var connectTimeout: Duration
    /// An upload that neither sends nor receives a byte for this long is aborted.
    public var noProgressTimeout: Duration

    public init(caFile: String? = nil, connectTimeout: Duration = .seconds(10), noProgressTimeout: Duration = .seconds(60)) {
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.noProgressTimeout = noProgressTimeout
    }
}
