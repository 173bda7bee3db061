import Foundation

/// A file to send in a ``MultipartForm``: which form field it goes in, where it is on disk, and the
/// name and media type the server is told.
public struct MultipartFormFile: Sendable, Hashable {
    /// The form field name (`name=` in the part's `Content-Disposition`), e.g. `"file"`.
    public var field: String
    /// The file on disk (a `file:` URL). Its bytes are sent unaltered.
    public var url: URL
    /// The name the server is told (`filename=`); by default the URL's last path component.
    /// Any characters may appear: `"`, CR and LF are escaped as browsers do (`%22`, `%0D`, `%0A`),
    /// everything else, including non-ASCII, is sent as UTF-8.
    public var filename: String
    /// The part's `Content-Type`; by default chosen from the file name's extension (``MediaType``).
    public var contentType: String

    /// A file part.
    /// - Parameters:
    ///   - field: the form field the server expects the file in.
    ///   - url: the file's location on disk.
    ///   - filename: the name to send; `nil` for `url.lastPathComponent`.
    ///   - contentType: the media type to send; `nil` to choose it from `filename`'s extension.
    public init(field: String, url: URL, filename: String? = nil, contentType: String? = nil) {
        self.field = field
        self.url = url
        let name = filename ?? url.lastPathComponent
        self.filename = name
        self.contentType = contentType ?? MediaType.forFilename(name)
    }

    /// The file's path in the file system's representation.
    /// - Throws: ``MultipartError/notAFileURL(_:)`` for a URL that is not a `file:` URL.
    func path() throws(MultipartError) -> String {
        guard url.isFileURL,
              let path = url.withUnsafeFileSystemRepresentation({ $0.map { String(cString: $0) } })
        else { throw .notAFileURL(url.absoluteString) }
        return path
    }
}
