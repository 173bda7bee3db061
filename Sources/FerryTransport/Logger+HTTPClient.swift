import Logging

extension Logger {
    /// The logger to hand AsyncHTTPClient for one request: this one when it logs debug messages
    /// (AsyncHTTPClient logs nothing above debug), else none. Given a logger, AsyncHTTPClient copies
    /// it with a request id in its metadata for every request, whether it logs or not: 1 % of
    /// ferryd's CPU on small files.
    var forHTTPClient: Logger? { logLevel <= .debug ? self : nil }
}
