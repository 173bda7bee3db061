import FerrySystem

/// Why a multipart body could not be described or written.
public enum MultipartError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A boundary with characters other than letters, digits and `-`, or not 1–70 long.
    case invalidBoundary(String)
    /// A part header value (a field name or a content type) contains CR, LF or NUL.
    case invalidHeaderValue(what: String)
    /// The source file did not have the length the body was planned for: it changed while being copied.
    case sourceChanged(expected: Int64, actual: Int64)
    /// A system call failed while writing the body.
    case io(operation: String, path: String, errno: Int32)
    /// Writing stopped because the caller asked (shutdown).
    case cancelled

    public var description: String {
        switch self {
        case .invalidBoundary(let value):
            return "invalid multipart boundary \"\(value)\": it must be 1-70 letters, digits or '-'"
        case .invalidHeaderValue(let what):
            return "\(what) contains a CR, LF or NUL character, which cannot appear in a part header"
        case .sourceChanged(let expected, let actual):
            return "the source file changed while it was being copied (expected \(expected) bytes, found \(actual))"
        case .io(let operation, let path, let code):
            return "\(operation) \(path): \(systemErrorMessage(code))"
        case .cancelled:
            return "stopped by shutdown"
        }
    }
}


/// How file bytes are copied into a body (defined in FerrySystem, shared with the spool's moves).
public typealias FileCopier = FerrySystem.FileCopier
