#if canImport(Glibc)
import Glibc
#endif

/// The C library's message for an `errno` value, e.g. "No space left on device".
public func systemErrorMessage(_ code: Int32) -> String {
    String(cString: strerror(code))
}

/// A failed system call on a path: what was done, to which path, and the `errno` it returned.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var code: Int32
    /// Replaces the C library's message when Ferry can say more precisely what is wrong.
    public var detail: String?

    public init(operation: String, path: String, code: Int32, detail: String? = nil) {
        self.operation = operation
        self.path = path
        self.code = code
        self.detail = detail
    }

    /// The same failure with the current `errno`.
    public static func current(_ operation: String, _ path: String) -> SystemError {
        SystemError(operation: operation, path: path, code: errno)
    }

    public var description: String { "\(operation) \(path): \(detail ?? systemErrorMessage(code))" }
}
