import Foundation

/// An S3 error: the HTTP status and what S3's `<Error>` document says (`Code`, `Message`). S3 is
/// classified by its code, not only its status: a `RequestTimeout` comes as a 400 and is worth a
/// retry, an `InternalError` inside a 200 to CompleteMultipartUpload is no success, and a 403 is a
/// wrong key, a wrong region or a wrong clock, each with its own advice.
public struct S3ErrorAnswer: Sendable, Equatable {
    public var status: Int
    /// S3's error code (`SlowDown`, `NoSuchUpload`, …), when the answer carried one.
    public var code: String?
    public var message: String?
    public var body: [UInt8]
    public var contentType: String?
    public var retryAfter: String?

    public init(status: Int, code: String?, message: String?, body: [UInt8] = [], contentType: String? = nil, retryAfter: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        self.contentType = contentType
        self.retryAfter = retryAfter
    }

    /// Codes that mean the part's checksum did not match what arrived: the part is sent again.
    public static let checksumCodes: Set<String> = ["BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch"]

    /// Codes worth a retry whatever the status. `RequestTimeTooSkewed` is this machine's clock, not
    /// the file: a box that booted with a wrong time is set right by NTP once its link is up, and
    /// its files wait (with the advice to check the time) instead of going to the failed directory.
    public static let retryableCodes: Set<String> = [
        "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "OperationAborted", "Throttling",
        "ThrottlingException", "RequestThrottled", "RequestLimitExceeded", "TooManyRequestsException", "RequestTimeTooSkewed",
    ]

    /// What to check (for `RequestTimeTooSkewed`, while it is retried; for the others, which will
    /// not pass by retrying, why the file failed).
    public static let advice: [String: String] = [
        "RequestTimeTooSkewed": "this machine's clock differs from the server's by more than 15 minutes: check the time (timedatectl, NTP)",
        "SignatureDoesNotMatch": "the signature does not match: check secret_access_key, and that region is the bucket's region",
        "InvalidAccessKeyId": "the server does not know this access key: check access_key_id",
        "AuthorizationHeaderMalformed": "the server refused the credential scope: check region",
        "ExpiredToken": "the session token has expired: renew session_token",
        "TokenRefreshRequired": "the session token has expired: renew session_token",
        "InvalidToken": "the session token is not valid: check session_token",
        "AccessDenied": "these credentials may not write here: check the key's policy (s3:PutObject, s3:AbortMultipartUpload, s3:ListMultipartUploadParts) and the bucket policy",
        "NoSuchBucket": "the bucket does not exist: create it, or check bucket, url and addressing",
        "EntityTooSmall": "a part other than the last is smaller than the server accepts: raise part_size",
        "EntityTooLarge": "the object is larger than the server accepts",
        "PermanentRedirect": "the bucket is served at another endpoint: check url, region and addressing",
        "InvalidBucketName": "the bucket name is not valid for this server: check bucket and addressing",
        "KeyTooLongError": "the object key is longer than 1,024 bytes: shorten key",
        "InvalidStorageClass": "the server does not offer this storage_class",
    ]

    /// What the answer means for the job.
    public var verdict: AttemptVerdict? {
        guard let code else { return (200..<300).contains(status) ? .permanent : nil }
        if Self.retryableCodes.contains(code) || Self.checksumCodes.contains(code) { return .retry(notBefore: nil) }
        if Self.advice[code] != nil { return .permanent }
        // An <Error> in a 2xx with a code not known here: not a success, and possibly passing.
        return (200..<300).contains(status) ? .retry(notBefore: nil) : nil
    }

    /// The answer as the decider takes it, with the code and message in its message and the
    /// advice for the code.
    public func answer(during: String) -> ServerAnswer {
        var hint = ""
        if let code {
            hint = "S3 \(code)"
            if let message, !message.isEmpty { hint += ": " + Self.clean(message) }
            if let advice = Self.advice[code] ?? Self.checksumUnsupportedAdvice(code: code, message: message) { hint += " — " + advice }
        } else if (200..<300).contains(status) {
            hint = "the answer was not the document S3 sends"
        }
        return ServerAnswer(
            status: status, body: body, contentType: contentType, retryAfter: retryAfter, during: during,
            hint: hint.isEmpty ? nil : hint, verdict: verdict)
    }

    /// A server without S3's additional checksums (Backblaze B2 refuses `x-amz-checksum-*` with
    /// 400 `InvalidArgument`, naming the header) needs `checksum = "none"`.
    static func checksumUnsupportedAdvice(code: String, message: String?) -> String? {
        guard ["InvalidArgument", "NotImplemented", "InvalidRequest"].contains(code),
              let message, message.lowercased().contains("x-amz-checksum") || message.lowercased().contains("x-amz-sdk-checksum") else { return nil }
        return "this server does not take S3's additional checksums: set checksum = \"none\""
    }

    /// A server's message as one line of at most 300 characters.
    static func clean(_ text: String) -> String {
        let line = String(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : Character($0) })
            .trimmingCharacters(in: .whitespaces)
        return line.count > 300 ? String(line.prefix(300)) + "…" : line
    }
}
