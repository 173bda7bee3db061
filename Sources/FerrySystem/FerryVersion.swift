/// Ferry's version, sent in `User-Agent: ferry/<version>` and printed by `--version`.
public enum FerryVersion {
    public static let current = "0.1.0"
    /// The `User-Agent` header value.
    public static var userAgent: String { "ferry/\(current)" }
}
