import FerryDelivery
import Foundation
import Testing

@Suite("Retry rules")
struct RetryRulesTests {
    @Test("2xx succeeds; 408 423 425 429 500 502 503 504 retry; everything else is permanent")
    func statusTable() {
        for status in [200, 201, 202, 204, 299] { #expect(RetryRules.verdict(status: status, retryAfter: nil) == .success) }
        for status in [408, 423, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524, 529, 530] { #expect(RetryRules.verdict(status: status, retryAfter: nil) == .retry(notBefore: nil)) }
        for status in [301, 302, 307, 308, 400, 401, 403, 404, 405, 409, 410, 411, 413, 415, 422, 451, 501, 505] {
            #expect(RetryRules.verdict(status: status, retryAfter: nil) == .permanent, "\(status)")
        }
    }

    @Test("Retry-After in seconds and as an HTTP-date")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // Wed, 21 Oct 2015 07:28:00 GMT
        #expect(RetryRules.parseRetryAfter("120", now: now) == .seconds(120))
        #expect(RetryRules.parseRetryAfter(" 0 ", now: now) == .zero)
        #expect(RetryRules.parseRetryAfter("Wed, 21 Oct 2015 07:29:00 GMT", now: now) == .seconds(60))
        #expect(RetryRules.parseRetryAfter("Wednesday, 21-Oct-15 07:29:30 GMT", now: now) == .seconds(90))
        #expect(RetryRules.parseRetryAfter("Wed Oct 21 07:30:00 2015", now: now) == .seconds(120))
        #expect(RetryRules.parseRetryAfter("Wed, 21 Oct 2015 07:00:00 GMT", now: now) == .zero)
        #expect(RetryRules.parseRetryAfter("soon", now: now) == nil)
        #expect(RetryRules.parseRetryAfter("-5", now: now) == nil)
        #expect(RetryRules.verdict(status: 503, retryAfter: "7", now: now) == .retry(notBefore: .seconds(7)))
    }

    @Test("Backoff: full jitter under min(max_delay, initial·2ⁿ)")
    func backoff() {
        let backoff = Backoff(initialDelay: .seconds(1), maxDelay: .seconds(300))
        #expect(backoff.ceiling(forRetry: 0) == .seconds(1))
        #expect(backoff.ceiling(forRetry: 1) == .seconds(2))
        #expect(backoff.ceiling(forRetry: 5) == .seconds(32))
        #expect(backoff.ceiling(forRetry: 9) == .seconds(300))
        #expect(backoff.ceiling(forRetry: 10_000) == .seconds(300))
        var generator = SystemRandomNumberGenerator()
        var sawLow = false, sawHigh = false
        for _ in 0..<2000 {
            let delay = backoff.delay(forRetry: 3, using: &generator)
            #expect(delay >= .zero && delay <= .seconds(8))
            if delay < .seconds(2) { sawLow = true }
            if delay > .seconds(6) { sawHigh = true }
        }
        #expect(sawLow && sawHigh, "jitter should spread over the whole range")
    }
}
