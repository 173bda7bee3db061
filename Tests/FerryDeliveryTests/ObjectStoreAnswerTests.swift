import FerryDelivery
import Foundation
import Testing

/// Answers of object stores to plain requests (pre-signed `put` URLs, pre-signed POST forms), read
/// by S3's error codes (pure: answers in, verdicts out).
@Suite("Object-store answers to plain requests")
struct ObjectStoreAnswerTests {
    static func error(_ code: String) -> [UInt8] {
        Array("""
            <?xml version="1.0" encoding="UTF-8"?>
            <Error><Code>\(code)</Code><Message>m</Message><RequestId>r</RequestId></Error>
            """.utf8)
    }

    @Test("a retryable S3 code is retried whatever the status; other answers keep the status's verdict", arguments: [
        (400, error("RequestTimeout"), AttemptVerdict.retry(notBefore: nil)),
        (503, error("SlowDown"), .retry(notBefore: nil)),
        (400, error("InvalidArgument"), .permanent),
        (403, error("SignatureDoesNotMatch"), .permanent),
        (400, Array("<html>Request Timeout</html>".utf8), .permanent),
        (400, Array(#"{"code":"RequestTimeout"}"#.utf8), .permanent),
        (400, [], .permanent),
        (201, error("RequestTimeout"), .success),
    ])
    func verdict(status: Int, body: [UInt8], expected: AttemptVerdict) {
        let answer = ObjectStoreAnswer.reading(ServerAnswer(status: status, headers: [], body: body))
        #expect(answer.verdict(now: Date()) == expected)
        if expected != .permanent, status >= 400 { #expect(answer.hint?.hasPrefix("S3 ") == true) }
    }
}
