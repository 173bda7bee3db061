import Crypto
import FerrySystem
import Foundation

/// AWS Signature Version 4 (docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html),
/// for the `Authorization` header. Pure: the time is passed in, so tests sign at a fixed instant
/// (AWS's published test suite, and botocore's signer on the same requests).
///
/// The caller chooses the headers to sign by passing them; ``sign(_:at:)`` signs every one of them
/// (S3 requests sign `Host`, `Content-Type` and the `x-amz-*` headers; `User-Agent` and
/// `Content-Length` travel unsigned).
public struct SigV4Signer: Sendable {
    /// How the path becomes the canonical URI.
    public enum PathRule: Sendable {
        /// S3: the path exactly as sent (already percent-encoded once), no dot-segment removal.
        case asSent
        /// Every other service: dot segments removed, then each segment percent-encoded (the
        /// path is taken as raw text; AWS calls this "encoded twice" for an encoded path).
        case normalized
    }

    /// One request to sign.
    public struct Request: Sendable {
        public var method: String
        /// The path, as sent (`/bucket/a%20b`), or raw text for ``PathRule/normalized``.
        public var path: String
        /// The query string as sent, without `?` (`partNumber=1&uploadId=x`, `uploads`).
        public var query: String
        /// The headers to sign (names in any case); `Host` among them.
        public var headers: [(name: String, value: String)]
        /// The payload's SHA-256 in lowercase hex, or `UNSIGNED-PAYLOAD`.
        public var payloadHash: String

        public init(method: String, path: String, query: String, headers: [(name: String, value: String)], payloadHash: String) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    /// The signature and what it was computed from (the intermediate texts are for tests and
    /// debugging; they hold no secret).
    public struct Signature: Sendable {
        public var authorization: String
        public var canonicalRequest: String
        public var stringToSign: String
        public var signedHeaders: String
    }

    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// The SHA-256 of nothing: the payload hash of a request without a body.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public let credentials: SigV4Credentials
    public let region: String
    public let service: String
    public let pathRule: PathRule

    public init(credentials: SigV4Credentials, region: String, service: String = "s3", pathRule: PathRule = .asSent) {
        self.credentials = credentials
        self.region = region
        self.service = service
        self.pathRule = pathRule
    }

    /// `20150830T123600Z`: the date in UTC, whole seconds. Computed by arithmetic on days since
    /// 1970 (proleptic Gregorian, as `Calendar` would), since a `TimeZone` by identifier loads ICU's
    /// zone data into every S3 sender for one fixed answer (measured: 1.8 MiB of resident pages).
    public static func amzDate(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let (days, secondOfDay) = Self.floorDivision(seconds, 86_400)
        // Days to a civil date (H. Hinnant's `civil_from_days`): eras of 400 years from 0000-03-01.
        let shifted = days + 719_468
        let era = Self.floorDivision(shifted, 146_097).quotient
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(year, 4) + pad(month, 2) + pad(day, 2) + "T"
            + pad(secondOfDay / 3_600, 2) + pad(secondOfDay / 60 % 60, 2) + pad(secondOfDay % 60, 2) + "Z"
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
        return (quotient, value - quotient * divisor)
    }

    /// Signs `request`, whose headers must already hold `X-Amz-Date` (``amzDate(_:)`` of `date`).
    public func sign(_ request: Request, at date: Date) -> Signature {
        let amzDate = Self.amzDate(date)
        let day = String(amzDate.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let (canonicalHeaders, signedHeaders) = Self.canonicalHeaders(request.headers)
        let canonicalRequest = [
            request.method, canonicalURI(request.path), Self.canonicalQuery(request.query), canonicalHeaders, signedHeaders,
            request.payloadHash,
        ].joined(separator: "\n")
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, Self.hex(SHA256.hash(data: Data(canonicalRequest.utf8)))].joined(separator: "\n")
        var key = SymmetricKey(data: Data(("AWS4" + credentials.secretAccessKey).utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
        return Signature(
            authorization: "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)",
            canonicalRequest: canonicalRequest, stringToSign: stringToSign, signedHeaders: signedHeaders)
    }

    /// The headers S3 wants on a request to sign at `date` (`X-Amz-Date`, `X-Amz-Content-SHA256`,
    /// and `X-Amz-Security-Token` with temporary credentials), added to `headers`; then the
    /// `Authorization` header. Returns every header, signed ones first.
    public func signedHeaders(
        method: String, path: String, query: String, headers: [(name: String, value: String)], payloadHash: String, at date: Date
    ) -> [(name: String, value: String)] {
        var all = headers
        all.append(("X-Amz-Date", Self.amzDate(date)))
        all.append(("X-Amz-Content-SHA256", payloadHash))
        if let token = credentials.sessionToken { all.append(("X-Amz-Security-Token", token)) }
        let signature = sign(Request(method: method, path: path, query: query, headers: all, payloadHash: payloadHash), at: date)
        all.append(("Authorization", signature.authorization))
        return all
    }

    /// ``signedHeaders(method:path:query:headers:payloadHash:at:)`` for a URL ``S3ObjectAddress``
    /// made, with its `Host`; `nil` if it is not such a URL.
    public func signedHeaders(
        method: String, url: String, headers: [(name: String, value: String)], payloadHash: String, at date: Date
    ) -> [(name: String, value: String)]? {
        guard let (address, query) = S3ObjectAddress.parse(url) else { return nil }
        return signedHeaders(
            method: method, path: address.path, query: query, headers: [("Host", address.host)] + headers, payloadHash: payloadHash, at: date)
    }

    // MARK: Canonical forms

    func canonicalURI(_ path: String) -> String {
        let path = path.isEmpty ? "/" : path
        switch pathRule {
        case .asSent:
            return path
        case .normalized:
            var segments: [Substring] = []
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            for (index, segment) in parts.enumerated() {
                switch segment {
                case ".": if index == parts.count - 1 { segments.append("") }
                case "..":
                    if segments.count > 1 { segments.removeLast() }
                    if index == parts.count - 1 { segments.append("") }
                case "" where index != 0 && index != parts.count - 1: continue
                default: segments.append(segment)
                }
            }
            var text = segments.map { Self.encode(String($0)) }.joined(separator: "/")
            if !text.hasPrefix("/") { text = "/" + text }
            return text
        }
    }

    /// Each name and value decoded, then encoded AWS's way, sorted by name then value; a name
    /// without `=` gets an empty value (`uploads` → `uploads=`).
    static func canonicalQuery(_ query: String) -> String {
        guard !query.isEmpty else { return "" }
        let pairs = query.split(separator: "&", omittingEmptySubsequences: true).map { item -> (String, String) in
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decode(String(parts[0]))
            let value = parts.count > 1 ? decode(String(parts[1])) : ""
            return (encode(name), encode(value))
        }
        return pairs.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// Lowercase names, sorted; values trimmed with inner runs of spaces folded to one; repeated
    /// names joined with commas in the order given.
    static func canonicalHeaders(_ headers: [(name: String, value: String)]) -> (text: String, signed: String) {
        var values: [String: [String]] = [:]
        for header in headers {
            let folded = header.value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
                .joined(separator: " ")
            values[header.name.lowercased(), default: []].append(folded)
        }
        let names = values.keys.sorted()
        let text = names.map { "\($0):\(values[$0]!.joined(separator: ","))\n" }.joined()
        return (text, names.joined(separator: ";"))
    }

    /// AWS's URI encoding: every byte but `A-Z a-z 0-9 - _ . ~` as `%XX` (uppercase hex).
    public static func encode(_ text: String, keepingSlashes: Bool = false) -> String {
        PercentEncoding.encode(text.utf8, keepingSlashes: keepingSlashes)
    }

    /// Percent-decoding that leaves a malformed escape as it is.
    static func decode(_ text: String) -> String {
        text.removingPercentEncoding ?? text
    }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        for byte in digest { bytes += [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]] }
        return String(decoding: bytes, as: UTF8.self)
    }
}
