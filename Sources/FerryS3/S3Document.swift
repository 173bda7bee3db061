import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// An XML document S3 answered with, as a tree of elements (namespaces ignored: S3 puts its
/// elements in `http://s3.amazonaws.com/doc/2006-03-01/`, some compatible servers in none).
/// Parsed with Foundation's `XMLParser` (libxml2), with external entities off.
public struct S3Document: Sendable {
    /// One element: its local name, its text, its children.
    public struct Element: Sendable {
        public var name: String
        public var text: String
        public var children: [Element]

        /// The first child named `name`.
        public func child(_ name: String) -> Element? { children.first { $0.name == name } }
        /// Every child named `name`.
        public func children(_ name: String) -> [Element] { children.filter { $0.name == name } }
        /// The text of the first child named `name`, trimmed.
        public func value(_ name: String) -> String? { child(name)?.text.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    public var root: Element

    /// `nil` if `bytes` is not well-formed XML. Whitespace before the document is skipped: S3 sends
    /// some while a CompleteMultipartUpload is processed, after its `200 OK` and before the
    /// document, and an XML declaration after whitespace is not well-formed.
    public init?(_ bytes: [UInt8]) {
        let start = bytes.firstIndex { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } ?? bytes.endIndex
        guard start < bytes.endIndex else { return nil }
        let parser = XMLParser(data: Data(bytes[start...]))
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = true
        let builder = TreeBuilder()
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else { return nil }
        self.root = root
    }

    private final class TreeBuilder: NSObject, XMLParserDelegate {
        var stack: [Element] = []
        var root: Element?

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            stack.append(Element(name: name, text: "", children: []))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text += string
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            guard let element = stack.popLast() else { return }
            if stack.isEmpty { root = element } else { stack[stack.count - 1].children.append(element) }
        }
    }
}

/// The documents Ferry reads from S3.
extension S3Document {
    /// `<Error><Code>…</Code><Message>…</Message></Error>`: code and message, if this is one.
    public var error: (code: String, message: String?)? {
        guard root.name == "Error", let code = root.value("Code"), !code.isEmpty else { return nil }
        return (code, root.value("Message"))
    }

    /// CreateMultipartUpload's `UploadId`.
    public var uploadID: String? {
        guard root.name.hasPrefix("InitiateMultipartUpload") else { return nil }
        return root.value("UploadId").flatMap { $0.isEmpty ? nil : $0 }
    }

    /// One page of ListParts: the parts (number, size, ETag, the checksum of `algorithm`), and the
    /// marker of the next page when the list is truncated.
    public func listedParts(checksum algorithm: S3ChecksumAlgorithm?) -> (parts: [ListedPart], next: Int?)? {
        guard root.name.hasPrefix("ListParts") else { return nil }
        var parts: [ListedPart] = []
        for element in root.children("Part") {
            guard let number = element.value("PartNumber").flatMap(Int.init), let size = element.value("Size").flatMap(Int64.init),
                  let etag = element.value("ETag") else { continue }
            parts.append(ListedPart(number: number, size: size, etag: etag, checksum: algorithm.flatMap { element.value($0.elementName) }))
        }
        let truncated = root.value("IsTruncated")?.lowercased() == "true"
        let next = truncated ? (root.value("NextPartNumberMarker").flatMap(Int.init) ?? parts.map(\.number).max()) : nil
        return (parts, next)
    }

    /// One page of ListMultipartUploads: the `UploadId`s of the uploads of exactly `key` (a prefix
    /// listing also gives longer keys).
    public func listedUploads(ofKey key: String) -> [String]? {
        guard root.name.hasPrefix("ListMultipartUploads") else { return nil }
        return root.children("Upload").compactMap { upload in
            guard upload.child("Key")?.text == key, let id = upload.value("UploadId"), !id.isEmpty else { return nil }
            return id
        }
    }

    /// CompleteMultipartUpload's result: the object's ETag and checksum.
    public func completedObject(checksum algorithm: S3ChecksumAlgorithm?) -> (etag: String?, checksum: String?)? {
        // moto names it CompleteMultipartUploadResponse.
        guard root.name.hasPrefix("CompleteMultipartUpload") else { return nil }
        return (root.value("ETag"), algorithm.flatMap { root.value($0.elementName) })
    }

    /// A part as ListParts gives it.
    public struct ListedPart: Sendable, Equatable {
        public var number: Int
        public var size: Int64
        public var etag: String
        public var checksum: String?

        public init(number: Int, size: Int64, etag: String, checksum: String?) {
            self.number = number
            self.size = size
            self.etag = etag
            self.checksum = checksum
        }
    }

    /// The body of CompleteMultipartUpload: every part's number, ETag and checksum, in order.
    public static func completion(_ parts: [(number: Int, etag: String, checksum: String?)], checksum algorithm: S3ChecksumAlgorithm?) -> [UInt8] {
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(escape(part.etag))</ETag>"
            if let algorithm, let checksum = part.checksum {
                xml += "<\(algorithm.elementName)>\(escape(checksum))</\(algorithm.elementName)>"
            }
            xml += "</Part>"
        }
        xml += "</CompleteMultipartUpload>"
        return Array(xml.utf8)
    }

    /// XML character escaping for text content; `quote` and `apostrophe` for other encoders'
    /// choices (Go's `encoding/xml` writes `&#34;` and `&#39;`).
    public static func escape(_ text: String, quote: String = "&quot;", apostrophe: String = "&apos;") -> String {
        var out = ""
        for char in text {
            switch char {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += quote
            case "'": out += apostrophe
            default: out.append(char)
            }
        }
        return out
    }
}
