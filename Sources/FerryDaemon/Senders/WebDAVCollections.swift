import FerrySystem

/// The collections (folders) a `put` of a file in a subdirectory of the spool goes into, when the
/// spool's URL ends with `{relative_path}`: a WebDAV server (nginx, Apache mod_dav, Nextcloud's
/// sabre/dav, WsgiDAV) answers a PUT into a collection that does not exist 409 Conflict (some 404),
/// and they are made with MKCOL, from the top.
enum WebDAVCollections {
    /// `https://dav.example/files/reports/a/` and `…/reports/a/b/` for `a/b/c.txt` put at
    /// `https://dav.example/files/reports/a/b/c.txt`; empty for a file at the spool's top, and for
    /// a URL whose path does not end with the file's relative path (those folders are not the
    /// spool's to make).
    static func parents(of url: String, relativePath: [UInt8]) -> [String] {
        let directories = relativePath.split(separator: UInt8(ascii: "/")).dropLast().map { PercentEncoding.encode(Array($0)) }
        guard !directories.isEmpty else { return [] }
        let withoutQuery = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let encoded = PercentEncoding.encode(relativePath, keepingSlashes: true)
        guard withoutQuery.hasSuffix("/" + encoded) else { return [] }
        var collection = String(withoutQuery.dropLast(encoded.count))
        return directories.map { directory in
            collection += directory + "/"
            return collection
        }
    }

    /// Whether an answer to MKCOL leaves the collection there: made (201, or another 2xx), or
    /// there already (405 Method Not Allowed, as RFC 4918 says; 301 from a server that redirects
    /// to it).
    static func exists(afterMKCOL status: Int) -> Bool {
        (200..<300).contains(status) || status == 405 || status == 301
    }
}
