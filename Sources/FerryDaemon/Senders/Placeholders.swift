import FerryConfig
import FerryQueue
import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// Fills in a template's placeholders (`{filename}`, `{relative_path}`, `{size}`, `{mtime}`,
/// `{sha256}`, `{id}`) for one job: the one renderer for form fields, tus metadata and put URLs.
struct Placeholders {
    /// Where the value goes.
    enum Use: Sendable {
        /// A form field or metadata value: names as UTF-8 text (invalid bytes become U+FFFD).
        case text
        /// A URL: names percent-encoded from their raw bytes (RFC 3986 unreserved characters kept,
        /// and `/` in `{relative_path}`).
        case url
    }

    let job: Job
    let size: Int64
    let modificationTime: Int64
    /// The file's SHA-256, hex, when a template uses `{sha256}` (see ``needsDigest(_:)``).
    let sha256: String

    init(job: Job, size: Int64, modificationTime: Int64, sha256: String = "") {
        self.job = job
        self.size = size
        self.modificationTime = modificationTime
        self.sha256 = sha256
    }

    /// Whether any of `templates` uses `{sha256}`, which means reading the whole file first.
    static func needsDigest(_ templates: [ValueTemplate]) -> Bool {
        templates.contains { $0.placeholders.contains(.sha256) }
    }

    func render(_ template: ValueTemplate, for use: Use) -> String {
        let name = job.relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? job.relativePath
        return template.render { placeholder in
            switch (placeholder, use) {
            case (.filename, .text): String(decoding: name, as: UTF8.self)
            case (.filename, .url): Self.percentEncoded(name)
            case (.relativePath, .text): String(decoding: job.relativePath, as: UTF8.self)
            case (.relativePath, .url): Self.percentEncoded(job.relativePath, keepingSlashes: true)
            case (.size, _): String(size)
            case (.mtime, .text): Self.rfc3339(nanoseconds: modificationTime)
            case (.mtime, .url): Self.percentEncoded(Array(Self.rfc3339(nanoseconds: modificationTime).utf8))
            case (.sha256, _): sha256
            case (.id, _): job.id.rawValue
            }
        }
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters (and `/` if asked).
    static func percentEncoded(_ bytes: [UInt8], keepingSlashes: Bool = false) -> String {
        PercentEncoding.encode(bytes, keepingSlashes: keepingSlashes)
    }

    /// `2026-11-22T09:30:00Z`.
    static func rfc3339(nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

extension Endpoint {
    /// The endpoint, or, when the spool's URL names the file (`put`, `resumable`), the URL with those
    /// names filled in for `job`, percent-encoded.
    func url(for job: Job, template: ValueTemplate) -> String {
        guard !template.placeholders.isEmpty else { return url }
        let placeholders = Placeholders(job: job, size: job.identity.size, modificationTime: job.identity.modificationTime)
        return Self.withoutUserInfo(placeholders.render(template, for: .url))
    }
}
