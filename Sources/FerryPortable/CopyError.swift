/// Why a copy stopped.
public enum CopyError: Error, Sendable, Equatable {
    /// The source ended after `actual` of the `expected` bytes: it was truncated while being copied.
    case sourceShort(expected: Int64, actual: Int64)
    /// The caller asked to stop (shutdown).
    case cancelled
    /// Reading the source (`reading == true`) or writing the output failed with `errno`.
    case io(reading: Bool, errno: Int32)
}
