import Crypto
import FerryS3
import Foundation
import Testing

/// The signer against AWS's published Signature Version 4 test suite (Fixtures/sigv4, see its
/// README): for every case, the canonical request, the string to sign and the Authorization header.
@Suite("SigV4 signer: AWS's test suite")
struct SigV4SignerTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/sigv4")
    static let credentials = SigV4Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    static let sessionToken = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="

    static var cases: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixtures.path)) ?? [])
            .filter { FileManager.default.fileExists(atPath: fixtures.appendingPathComponent("\($0)/\($0).req").path) }
            .sorted()
    }

    @Test("the suite is there")
    func suitePresent() {
        #expect(Self.cases.count >= 30)
    }

    @Test("each case signs as AWS's files say", arguments: cases)
    func signs(_ name: String) throws {
        let directory = Self.fixtures.appendingPathComponent(name)
        func file(_ ext: String) throws -> String {
            try String(contentsOf: directory.appendingPathComponent("\(name).\(ext)"), encoding: .utf8)
        }
        let request = try ParsedRequest(try file("req"))
        var headers = request.headers
        var credentials = Self.credentials
        if name == "post-sts-header-after" {
            // The token travels, unsigned, after signing: the signature is the vanilla one.
            credentials.sessionToken = nil
        }
        if name == "post-sts-header-before", !headers.contains(where: { $0.name.lowercased() == "x-amz-security-token" }) {
            headers.append(("X-Amz-Security-Token", Self.sessionToken))
        }
        if name == "get-vanilla-with-session-token" {
            // This case's token is in its canonical request only (aws-c-auth's suite).
            headers.append(("X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"))
        }
        let signer = SigV4Signer(credentials: credentials, region: "us-east-1", service: "service", pathRule: .normalized)
        let date = try #require(request.date)
        let signature = signer.sign(
            SigV4Signer.Request(method: request.method, path: request.path, query: request.query, headers: headers,
                                payloadHash: SHA256.hash(data: Data(request.body.utf8)).map { String(format: "%02x", $0) }.joined()),
            at: date)
        #expect(signature.canonicalRequest == (try file("creq")), "canonical request of \(name)")
        #expect(signature.stringToSign == (try file("sts")), "string to sign of \(name)")
        #expect(signature.authorization == (try file("authz")), "Authorization of \(name)")
    }

    @Test("dates are formatted in UTC whatever the zone")
    func amzDate() {
        #expect(SigV4Signer.amzDate(Date(timeIntervalSince1970: 1_440_938_160)) == "20150830T123600Z")
        #expect(SigV4Signer.amzDate(Date(timeIntervalSince1970: 0)) == "19700101T000000Z")
        let cases: [(TimeInterval, String)] = [
            (951_782_400, "20000229T000000Z"),  // a leap day of a 400-year leap year
            (4_107_542_399, "21000228T235959Z"),  // 2100 is not a leap year
            (4_107_542_400, "21000301T000000Z"),
            (1_798_761_599.999, "20261231T235959Z"),  // fractions are cut, not rounded
            (-1, "19691231T235959Z"),
            (-2_208_988_800, "19000101T000000Z"),
            (253_402_300_799, "99991231T235959Z"),
        ]
        for (seconds, expected) in cases {
            #expect(SigV4Signer.amzDate(Date(timeIntervalSince1970: seconds)) == expected, "\(seconds)")
        }
    }

    @Test("dates agree with Foundation's Gregorian calendar in UTC, day by day from 1900 to 2200")
    func amzDateAgreesWithCalendar() {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var mismatches: [String] = []
        for day in Int64(-25_567)...Int64(84_000) {
            let seconds = day * 86_400 + ((day * 7_919) % 86_400 + 86_400) % 86_400  // a different second of each day
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
            let expected = String(format: "%04d%02d%02dT%02d%02d%02dZ", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!, parts.second!)
            if SigV4Signer.amzDate(date) != expected { mismatches.append("\(seconds): \(SigV4Signer.amzDate(date)) ≠ \(expected)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test("credentials never show the secret or the token")
    func redacted() {
        let credentials = SigV4Credentials(accessKeyID: "AKID", secretAccessKey: "s3cr3t-value", sessionToken: "t0ken-value")
        let text = "\(credentials) \(String(describing: credentials)) \(String(reflecting: credentials))"
        #expect(!text.contains("s3cr3t-value"))
        #expect(!text.contains("t0ken-value"))
    }
}

/// A `.req` file of the suite: request line, headers (continuation lines folded in), body.
struct ParsedRequest {
    var method: String
    var path: String
    var query: String
    var headers: [(name: String, value: String)] = []
    var body = ""

    init(_ text: String) throws {
        var lines = text.components(separatedBy: "\n")
        let first = lines.removeFirst()
        guard let space = first.firstIndex(of: " "), let version = first.range(of: " HTTP/", options: .backwards) else {
            throw ParseError()
        }
        method = String(first[..<space])
        let target = String(first[first.index(after: space)..<version.lowerBound])
        if let mark = target.firstIndex(of: "?") {
            path = String(target[..<mark])
            query = String(target[target.index(after: mark)...])
        } else {
            path = target
            query = ""
        }
        while !lines.isEmpty {
            let line = lines.removeFirst()
            if line.isEmpty {
                body = lines.joined(separator: "\n")
                break
            }
            if line.first == " " || line.first == "\t", !headers.isEmpty {
                headers[headers.count - 1].value += "\n" + line
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { throw ParseError() }
            headers.append((String(line[..<colon]), String(line[line.index(after: colon)...])))
        }
    }

    var date: Date? {
        guard let text = headers.first(where: { $0.name.lowercased() == "x-amz-date" })?.value else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return formatter.date(from: text)
    }

    struct ParseError: Error {}
}
