import Foundation

/// A `multipart/form-data` body written to a file by ``MultipartForm/writeBodyFile(in:)``, with the
/// two headers that must go with it.
///
/// Send it with `URLSession.upload(for:fromFile:)` — the only upload form a background session
/// accepts — after setting both headers on the request:
///
/// ```swift
/// request.setValue(body.contentType, forHTTPHeaderField: "Content-Type")
/// request.setValue(String(body.contentLength), forHTTPHeaderField: "Content-Length")
/// ```
///
/// The file is yours: it stays until ``remove()`` (a background session reads it until the upload
/// task completes, possibly after the app was relaunched, so remove it when the task finishes).
public struct MultipartBodyFile: Sendable, Hashable {
    /// Where the body is (created mode 0600, never through an existing file or symlink).
    public let url: URL
    /// The request's `Content-Type`: `multipart/form-data; boundary=…`.
    public let contentType: String
    /// The file's exact length in bytes: the request's `Content-Length`.
    public let contentLength: Int64

    /// Deletes the body file.
    public func remove() throws {
        try FileManager.default.removeItem(at: url)
    }
}
