import FerryQueue
import FerryS3

/// What ferryd keeps of a server's refusal, without the secrets the server may have echoed.
///
/// A refusal's body and headers are kept with the job (`ferryctl show`), in the failed file's
/// sidecar and on a hook's standard input. Servers echo what they were sent: AWS answers a
/// `SignatureDoesNotMatch` with the `<CanonicalRequest>` it computed, which holds every signed
/// header's value (a session token, an SSE-C key) and a pre-signed URL's query; an API may quote
/// the token it refused. So before an answer is kept, the signing elements of an S3 `<Error>`
/// document are emptied, and every secret the spool sends (``init(secrets:)``, from the
/// configuration) is replaced by `***`, as are the forms an echo takes on the way: percent-encoded
/// (either case of hex), JSON-escaped (`\/`, `\"`, `\uXXXX`, as PHP's `json_encode` and Python's
/// `json.dumps` write) and XML-escaped (`&amp;`, `&#39;`). Pure: bytes in, bytes out.
public struct AnswerRedaction: Sendable, Equatable {
    /// What stands in for a removed value.
    public static let mark: [UInt8] = Array("***".utf8)
    /// The elements of an S3 `<Error>` document that carry what was signed, or the signature.
    public static let signingElements = [
        "StringToSign", "StringToSignBytes", "CanonicalRequest", "CanonicalRequestBytes", "SignatureProvided",
    ]
    /// Values shorter than this are not looked for: replacing them would garble answers more than
    /// it would protect (no credential is that short).
    public static let shortest = 6

    /// The byte strings replaced, longest first (so a secret containing another is replaced whole).
    public let secrets: [[UInt8]]

    /// - Parameter secrets: the spool's secret values as sent (header values, form fields, S3
    ///   keys and tokens, a URL's password and query values).
    public init(secrets: [String]) {
        var forms = Set<[UInt8]>()
        // A number is no credential, and replacing it would garble answers (a size, a count).
        for secret in secrets where secret.utf8.count >= Self.shortest && !secret.allSatisfy({ $0.isASCII && $0.isNumber }) {
            for form in Self.echoedForms(of: secret) { forms.insert(Array(form.utf8)) }
        }
        self.secrets = forms.sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
    }

    /// Nothing to redact.
    public static let none = AnswerRedaction(secrets: [])

    /// `answer` without secrets; an answer that is a success is handed to the producer unchanged.
    public func redacted(_ answer: ServerAnswer) -> ServerAnswer {
        guard !answer.isSuccess else { return answer }
        var answer = answer
        answer.body = redacted(answer.body)
        answer.headers = answer.headers.map { ResponseHeader(name: $0.name, value: redacted($0.value)) }
        answer.hint = answer.hint.map(redacted)
        return answer
    }

    /// `text` with every secret replaced.
    public func redacted(_ text: String) -> String {
        let bytes = Array(text.utf8)
        let cleaned = redacted(bytes)
        return cleaned == bytes ? text : String(decoding: cleaned, as: UTF8.self)
    }

    /// `bytes` with the signing elements emptied and every secret replaced.
    public func redacted(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        for element in Self.signingElements {
            bytes = Self.emptying(element: element, in: bytes)
        }
        for secret in secrets {
            bytes = Self.replacing(secret, in: bytes)
        }
        return bytes
    }

    /// `bytes` with the content of every `<name>…</name>` replaced by the mark.
    static func emptying(element name: String, in bytes: [UInt8]) -> [UInt8] {
        let open = Array("<\(name)>".utf8), close = Array("</\(name)>".utf8)
        guard let first = firstRange(of: open, in: bytes, from: 0) else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var position = 0
        var start: Int? = first
        while let opening = start {
            let contentStart = opening + open.count
            guard let closing = firstRange(of: close, in: bytes, from: contentStart) else {
                // Cut off before its end (an answer kept only in part): the rest goes.
                out += bytes[position..<contentStart] + mark
                return out
            }
            out += bytes[position..<contentStart] + mark + close
            position = closing + close.count
            start = firstRange(of: open, in: bytes, from: position)
        }
        out += bytes[position...]
        return out
    }

    /// `bytes` with every occurrence of `needle` replaced by the mark.
    static func replacing(_ needle: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        guard var found = firstRange(of: needle, in: bytes, from: 0) else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var position = 0
        while true {
            out += bytes[position..<found] + mark
            position = found + needle.count
            guard let next = firstRange(of: needle, in: bytes, from: position) else { break }
            found = next
        }
        out += bytes[position...]
        return out
    }

    /// Where `needle` first starts in `bytes` at or after `from`.
    static func firstRange(of needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        guard let head = needle.first, !needle.isEmpty, bytes.count - from >= needle.count else { return nil }
        var index = from
        let last = bytes.count - needle.count
        while index <= last {
            if bytes[index] == head, bytes[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// `secret` and the forms a server's echo may give it: percent-encoded with upper- and lower-case
    /// hex; JSON-escaped with and without `\/`, with `\uXXXX` for non-ASCII in either case of hex,
    /// and as .NET's default encoder writes it (also `"+<>&'` as `\u`, upper case); XML-escaped
    /// with named entities or, as Go's `encoding/xml` writes, `&#34;` and `&#39;`.
    static func echoedForms(of secret: String) -> Set<String> {
        let percent = percentEncoded(secret)
        var forms: Set<String> = [
            secret, percent, lowercasedHex(percent),
            S3Document.escape(secret, quote: "&quot;", apostrophe: "&apos;"), S3Document.escape(secret, quote: "&quot;", apostrophe: "&#39;"),
            S3Document.escape(secret, quote: "&#34;", apostrophe: "&#39;"),
            jsonEscaped(secret, slash: false, asciiOnly: true, upperHex: true, htmlSafe: true),
        ]
        for slash in [false, true] {
            for ascii in [false, true] {
                for upper in [false, true] { forms.insert(jsonEscaped(secret, slash: slash, asciiOnly: ascii, upperHex: upper)) }
            }
        }
        return forms
    }

    /// `text` as a JSON string's content: `"` and `\\` escaped, control characters as `\uXXXX`
    /// (or `\n`, `\t`…), `/` as `\/` when `slash`, non-ASCII as UTF-16 `\uXXXX` when `asciiOnly`
    /// (hex in upper case when `upperHex`), and `"+<>&'` and the backquote as `\uXXXX` when
    /// `htmlSafe` (.NET's `JavaScriptEncoder.Default`).
    static func jsonEscaped(_ text: String, slash: Bool, asciiOnly: Bool, upperHex: Bool = false, htmlSafe: Bool = false) -> String {
        var out = ""
        func escape(_ scalar: Unicode.Scalar) {
            for unit in String(scalar).utf16 { out += "\\u" + String(unit, radix: 16, uppercase: upperHex).leftPadded(to: 4) }
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case _ where htmlSafe && Self.htmlSensitive.contains(scalar): escape(scalar)
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "/" where slash: out += "\\/"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || (asciiOnly && scalar.value > 0x7E): escape(scalar)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// What .NET's default JSON encoder writes as `\uXXXX` besides non-ASCII.
    static let htmlSensitive: Set<Unicode.Scalar> = ["\"", "+", "<", ">", "&", "'", "`"]

    /// A percent-encoded string with its hex digits in lower case (`%2f`), as some servers echo it.
    static func lowercasedHex(_ encoded: String) -> String {
        var out = "", afterPercent = 0
        for character in encoded {
            if character == "%" { afterPercent = 2; out.append(character); continue }
            out.append(afterPercent > 0 ? Character(character.lowercased()) : character)
            afterPercent = max(afterPercent - 1, 0)
        }
        return out
    }

    /// `text` as RFC 3986 percent-encodes it (unreserved characters kept), as a query value
    /// appears in a canonical request or an echoed URL.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
