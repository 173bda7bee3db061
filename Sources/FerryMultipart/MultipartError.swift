import SystemPackage

/// Why a multipart form or body could not be described or written.
public enum MultipartError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A boundary with characters other than letters, digits and `-`, or not 1–70 long.
    case invalidBoundary(String)
    /// A part header value (a content type, or a file name with NUL) contains CR, LF or NUL.
    case invalidHeaderValue(what: String)
    /// A form field name containing CR, LF or NUL (``MultipartForm`` refuses these rather than
    /// escaping them: a field name comes from the server's API, and servers decode an escaped line
    /// break differently).
    case invalidFieldName(String)
    /// A file URL that is not a `file:` URL.
    case notAFileURL(String)
    /// No file (or no directory on the way to it) at the path.
    case fileNotFound(path: String)
    /// The path names a directory, device, pipe or socket: only regular files have a length known up front.
    case notARegularFile(path: String)
    /// The body is longer than the limit given for building it in memory.
    case tooLargeForMemory(contentLength: Int64, limit: Int64)
    /// The source file did not have the length the body was planned for: it changed after the form
    /// was made, or while it was being copied.
    case sourceChanged(expected: Int64, actual: Int64)
    /// A system call failed while reading a file or writing the body.
    case io(operation: String, path: String, errno: Int32)
    /// Writing stopped because the caller asked (shutdown).
    case cancelled

    public var description: String {
        switch self {
        case .invalidBoundary(let value):
            return "invalid multipart boundary \"\(value)\": it must be 1-70 letters, digits or '-'"
        case .invalidHeaderValue(let what):
            return "\(what) contains a CR, LF or NUL character, which cannot appear in a part header"
        case .invalidFieldName(let name):
            return "the form field name \(name.debugDescription) contains a CR, LF or NUL character: "
                + "use the field name exactly as the server's API documents it"
        case .notAFileURL(let url):
            return "\(url) is not a file URL: give the file's location on disk, e.g. URL(fileURLWithPath:)"
        case .fileNotFound(let path):
            return "no file at \(path): check the path, and that the file still exists when the form is made"
        case .notARegularFile(let path):
            return "\(path) is not a regular file (a directory, device, pipe or socket): "
                + "only regular files can be sent, as the body's length must be known before it is sent"
        case .tooLargeForMemory(let length, let limit):
            return "the body would be \(length) bytes, over the \(limit)-byte limit for building it in memory: "
                + "write it to a file with writeBodyFile(in:) and send it with URLSession.upload(for:fromFile:), "
                + "or pass a larger limit"
        case .sourceChanged(let expected, let actual):
            return "the source file changed after the form was made or while it was being copied "
                + "(expected \(expected) bytes, found \(actual)): make the form again once the file is complete"
        case .io(let operation, let path, let code):
            return "\(operation) \(path): \(Errno(rawValue: code).description)"
        case .cancelled:
            return "stopped by shutdown"
        }
    }
}
