@testable import FerryDelivery
import Foundation
import Testing

/// A 429 without Retry-After is read by its rate limit's reset time: Mastodon's media limit says
/// when its window resets only in X-RateLimit-Reset.
@Suite("Rate limit reset")
struct RateLimitResetTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("each form of the reset gives the wait it means", arguments: [
        ("X-RateLimit-Reset", "2027-01-15T08:10:00.000Z", 600.0 as Double?),   // Mastodon: ISO 8601 with milliseconds
        ("X-RateLimit-Reset", "2027-01-15T08:10:00Z", 600),
        ("x-ratelimit-reset", "1800000090", 90),                               // Unix seconds
        ("X-RateLimit-Reset", "1800000090000", 90),                            // Unix milliseconds
        ("RateLimit-Reset", "45", 45),                                        // seconds from now
        ("X-RateLimit-Reset", "soon", nil),
        ("X-RateLimit-Reset", "", nil),
        ("X-Other", "45", nil),
    ])
    func forms(name: String, value: String, seconds: Double?) {
        // 1_800_000_000 is 2027-01-15T08:00:00Z.
        let answer = ServerAnswer(status: 429, headers: [(name: name, value: value)], body: [])
        let wait = answer.retryAfter.flatMap { RetryRules.parseRetryAfter($0, now: Self.now) }
        #expect(wait.map { Double($0.components.seconds) } == seconds, "\(answer.retryAfter ?? "nil")")
    }

    @Test("Retry-After wins over the reset; only a 429 is read by its reset")
    func precedence() {
        let both = ServerAnswer(status: 429, headers: [(name: "Retry-After", value: "5"), (name: "X-RateLimit-Reset", value: "45")], body: [])
        #expect(both.retryAfter == "5")
        let unavailable = ServerAnswer(status: 503, headers: [(name: "X-RateLimit-Reset", value: "45")], body: [])
        #expect(unavailable.retryAfter == nil)
        #expect(RateLimitReset.httpDate(Self.now.addingTimeInterval(0.2)) == "Fri, 15 Jan 2027 08:00:01 GMT")
    }
}
