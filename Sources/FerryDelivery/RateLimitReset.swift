import Foundation

/// When a rate-limited server's window resets, for a 429 that carries no `Retry-After`: Mastodon's
/// `X-RateLimit-Reset` (an ISO 8601 time, e.g. `2026-11-29T01:00:00.000Z`), GitHub's and many
/// others' (Unix seconds), the IETF draft's `RateLimit-Reset` (seconds from now). Read as the
/// `Retry-After` value it stands for, so the one rule (``RetryRules/parseRetryAfter(_:now:)``,
/// never before it, capped at a day) applies.
public enum RateLimitReset {
    /// The headers read, in this order.
    public static let headerNames = ["X-RateLimit-Reset", "RateLimit-Reset"]
    /// A number at least this large is a Unix time, not seconds from now (2001-09-09).
    static let unixTimeFloor: Int64 = 1_000_000_000

    /// The reset as a `Retry-After` value (seconds, or an IMF-fixdate), `nil` when no header can be read.
    public static func retryAfter(in headers: [(name: String, value: String)]) -> String? {
        for name in headerNames {
            if let value = HTTPHeaders.value(name, in: headers), let retryAfter = retryAfter(value) { return retryAfter }
        }
        return nil
    }

    static func retryAfter(_ value: String) -> String? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
            guard let number = Int64(text) else { return nil }
            if number >= unixTimeFloor * 1000 {
                // Milliseconds since 1970 (some APIs).
                return httpDate(Date(timeIntervalSince1970: TimeInterval(number) / 1000))
            }
            return number >= unixTimeFloor ? httpDate(Date(timeIntervalSince1970: TimeInterval(number))) : text
        }
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = iso.date(from: text) { return httpDate(date) }
        iso.formatOptions = [.withInternetDateTime]
        return iso.date(from: text).map(httpDate)
    }

    /// `date` as an IMF-fixdate (`Sun, 29 Nov 2026 01:00:00 GMT`), rounded up to the second.
    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.up)))
    }
}
