import Foundation

/// Where an object lives and how requests name it: the URL, the `Host` header and the path as
/// signed. Path-style puts the bucket in the path (`http://127.0.0.1:9000/bucket/key`),
/// virtual-hosted style in the host (`https://bucket.s3.eu-west-1.amazonaws.com/key`). The key is
/// percent-encoded once, `/` kept, exactly as it is sent and signed.
public struct S3ObjectAddress: Sendable, Equatable {
    /// `http` or `https`.
    public var scheme: String
    /// The `Host` header: the host, and the port when it is not the scheme's default.
    public var host: String
    /// The object's path, encoded (`/bucket/dir/a%20b.jpg`).
    public var path: String
    /// The bucket's root path (`/bucket/`, or `/` virtual-hosted) and the key, when this address
    /// was made from them (not by ``parse(_:)``): what ListMultipartUploads needs.
    public private(set) var bucketPath: String?
    public private(set) var key: String?

    /// The object `key` in `bucket` at `endpoint` (`https://s3.eu-west-1.amazonaws.com`, with an
    /// optional path prefix for servers mounted under one); `nil` if the endpoint is not a URL.
    public init?(endpoint: String, bucket: String, key: String, virtualHosted: Bool) {
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty else { return nil }
        self.scheme = scheme
        let defaultPort = scheme == "https" ? 443 : 80
        let port = components.port.flatMap { $0 == defaultPort ? nil : ":\($0)" } ?? ""
        let hostText = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        var base = components.percentEncodedPath
        while base.hasSuffix("/") { base.removeLast() }
        let encodedKey = SigV4Signer.encode(key, keepingSlashes: true)
        if virtualHosted {
            self.host = "\(bucket).\(hostText)\(port)"
            bucketPath = "\(base)/"
        } else {
            self.host = "\(hostText)\(port)"
            bucketPath = "\(base)/\(SigV4Signer.encode(bucket))/"
        }
        path = (bucketPath ?? "/") + encodedKey
        self.key = key
    }

    /// Addresses are the same when they name the same URL.
    public static func == (lhs: S3ObjectAddress, rhs: S3ObjectAddress) -> Bool {
        lhs.scheme == rhs.scheme && lhs.host == rhs.host && lhs.path == rhs.path
    }

    init(scheme: String, host: String, path: String) {
        self.scheme = scheme
        self.host = host
        self.path = path
    }

    /// The bucket's root (for requests on the bucket itself).
    public var url: String { "\(scheme)://\(host)\(path)" }

    /// The URL with a query (`uploads`, `partNumber=1&uploadId=…`).
    public func url(query: String) -> String { query.isEmpty ? url : "\(url)?\(query)" }

    /// The mark recorded before CreateMultipartUpload is sent (the object's URL with `?uploads`,
    /// the request's own): an upload may exist that no answer told us of.
    public var creationMarker: String { url(query: "uploads") }

    /// Whether `url` (a recorded upload's) is a ``creationMarker`` rather than an upload.
    public static func isCreationMarker(_ url: String) -> Bool { parse(url)?.query == "uploads" }

    /// ListMultipartUploads of this object's key (`GET /bucket/?uploads&prefix=KEY`); `nil` for an
    /// address made by ``parse(_:)``.
    public var uploadsListingURL: String? {
        guard let bucketPath, let key else { return nil }
        return "\(scheme)://\(host)\(bucketPath)?uploads&prefix=\(SigV4Signer.encode(key))"
    }

    /// The key of this address (one ``parse(_:)`` made) in `bucket`'s root, decoded; `nil` when it is
    /// not in that bucket.
    public func key(inBucket bucket: S3ObjectAddress) -> String? {
        guard isInBucket(bucket) else { return nil }
        return String(path.dropFirst(bucket.path.count)).removingPercentEncoding
    }

    /// A multipart upload's URL: the object's, with `?uploadId=`.
    public func uploadURL(uploadID: String) -> String { url(query: "uploadId=" + SigV4Signer.encode(uploadID)) }

    /// Whether this address is in the bucket whose root is `bucket` (an address made with an empty
    /// key): the same scheme and host, and a path under the bucket's. An upload recorded under other
    /// settings is aborted only when this holds, so signed requests go only to the configured endpoint.
    public func isInBucket(_ bucket: S3ObjectAddress) -> Bool {
        scheme == bucket.scheme && host.lowercased() == bucket.host.lowercased() && path.hasPrefix(bucket.path)
    }

    /// Splits a URL this type made back into its address and query.
    public static func parse(_ url: String) -> (address: S3ObjectAddress, query: String)? {
        guard let schemeEnd = url.range(of: "://") else { return nil }
        let scheme = String(url[..<schemeEnd.lowerBound])
        let rest = url[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let host = String(rest[..<slash])
        let pathAndQuery = rest[slash...]
        let parts = pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return (S3ObjectAddress(scheme: scheme, host: host, path: String(parts[0])), parts.count > 1 ? String(parts[1]) : "")
    }
}
