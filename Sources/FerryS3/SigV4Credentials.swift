/// The keys requests are signed with (`access_key_id`, `secret_access_key`, `session_token`). The
/// secret and the token never appear in a description, a log line or an error.
public struct SigV4Credentials: Sendable, Equatable, CustomStringConvertible {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// Temporary credentials' token, sent as `X-Amz-Security-Token`.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    public var description: String { "SigV4Credentials(accessKeyID: \(accessKeyID), secretAccessKey: ***\(sessionToken == nil ? "" : ", sessionToken: ***"))" }
}
