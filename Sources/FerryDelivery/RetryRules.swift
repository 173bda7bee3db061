import FerryConfig
import Foundation

/// What an attempt's result means for the job.
public enum AttemptVerdict: Sendable, Equatable {
    /// 2xx: the server has the file.
    case success
    /// A failure that may go away: retry, no sooner than `notBefore` if the server said so.
    case retry(notBefore: Duration?)
    /// A failure that will not go away by retrying the same request.
    case permanent
}

/// Ferry's retry rules, kept apart from the transport so they read as a table and test as one.
public enum RetryRules {
    /// Statuses that mean "try again later" unless a spool's `[spool.retry] statuses` says otherwise
    /// (``RetryPolicy/defaultRetryStatuses``).
    public static let retryableStatuses: Set<Int> = RetryPolicy.defaultRetryStatuses

    /// The verdict for an HTTP response; `retryable`: the statuses that mean "try again later".
    public static func verdict(
        status: Int, retryAfter: String?, now: Date = Date(), retryable: Set<Int> = retryableStatuses
    ) -> AttemptVerdict {
        if (200..<300).contains(status) { return .success }
        if retryable.contains(status) {
            return .retry(notBefore: retryAfter.flatMap { parseRetryAfter($0, now: now) })
        }
        return .permanent
    }

    /// The delay a `Retry-After` value asks for: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
    /// A date in the past means no delay; an unparseable value is ignored.
    public static func parseRetryAfter(_ value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
            guard let seconds = Int64(text) else { return .seconds(Int64.max / 1_000_000_000_000) }
            return .seconds(seconds)
        }
        guard let date = parseHTTPDate(text) else { return nil }
        let seconds = date.timeIntervalSince(now)
        return seconds > 0 ? .milliseconds(Int64(seconds * 1000)) : .zero
    }

    /// Parses the three HTTP-date forms: IMF-fixdate, RFC 850 and asctime.
    public static func parseHTTPDate(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}

