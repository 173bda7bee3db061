@testable import FerryDaemon
import Testing

/// Which folders a `put` makes with MKCOL before it puts a file again (pure: URLs in, URLs out).
@Suite("WebDAV collections for a put into a subfolder")
struct WebDAVCollectionsTests {
    @Test("the relative path's folders below the spool's URL, from the top; none at the top, none when the URL does not end with the path", arguments: [
        ("https://dav.example/files/reports/a/b/c.txt", "a/b/c.txt", ["https://dav.example/files/reports/a/", "https://dav.example/files/reports/a/b/"]),
        ("https://dav.example/files/reports/2026/x%20y%2B1.csv?sig=abc", "2026/x y+1.csv", ["https://dav.example/files/reports/2026/"]),
        ("https://dav.example/files/r/%C3%BC%20x/f", "ü x/f", ["https://dav.example/files/r/%C3%BC%20x/"]),
        ("https://dav.example/files/reports/top.txt", "top.txt", []),
        ("https://dav.example/in/a/b/c.txt.upload", "a/b/c.txt", []),
        ("https://dav.example/by-id/01J/c.txt", "a/b/c.txt", []),
    ])
    func parents(url: String, relativePath: String, expected: [String]) {
        #expect(WebDAVCollections.parents(of: url, relativePath: Array(relativePath.utf8)) == expected)
    }

    @Test("MKCOL made it, or it was there (405, 301); anything else is not a folder", arguments: [
        (201, true), (200, true), (204, true), (405, true), (301, true), (409, false), (403, false), (507, false), (415, false),
    ])
    func exists(status: Int, expected: Bool) {
        #expect(WebDAVCollections.exists(afterMKCOL: status) == expected)
    }
}
