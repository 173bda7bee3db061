@testable import FerryDelivery
import FerryQueue
import Testing

/// A refusal is kept (show, the failed file's sidecar, hooks) without the secrets a server echoes:
/// AWS's SignatureDoesNotMatch carries the canonical request, with every signed header's value.
@Suite("Answer redaction")
struct AnswerRedactionTests {
    static let token = "FQoGZXIvYXdzEJr//////////wEaDNjSESSIONTOKEN+abc/def=="
    static let sseKey = "MzJieXRlc2VjcmV0a2V5Zm9yc3NlY3VzdG9tZXJrZXk="

    /// AWS's answer to a request signed with the wrong secret key (the shape of AWS's documented
    /// `SignatureDoesNotMatch`), echoing the signed headers.
    static let signatureDoesNotMatch = """
        <?xml version="1.0" encoding="UTF-8"?>
        <Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message><AWSAccessKeyId>AKIAEXAMPLE</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256
        20261129T000000Z
        20261129/eu-west-1/s3/aws4_request
        5f1d</StringToSign><SignatureProvided>a1b2c3d4e5f6</SignatureProvided><StringToSignBytes>41 57 53 34</StringToSignBytes><CanonicalRequest>PUT
        /photos/a.jpg

        host:bucket.s3.amazonaws.com
        x-amz-security-token:\(token)
        x-amz-server-side-encryption-customer-key:\(sseKey)

        host;x-amz-security-token;x-amz-server-side-encryption-customer-key
        UNSIGNED-PAYLOAD</CanonicalRequest><CanonicalRequestBytes>50 55 54</CanonicalRequestBytes><RequestId>4442587FB7D0A2F9</RequestId><HostId>hostid</HostId></Error>
        """

    @Test("S3's signing elements are emptied and the secrets replaced; the code, message and request id stay")
    func signatureDoesNotMatch() {
        let redaction = AnswerRedaction(secrets: [Self.token, Self.sseKey, "short"])
        let answer = ServerAnswer(status: 403, body: Array(Self.signatureDoesNotMatch.utf8), contentType: "application/xml")
        let kept = String(decoding: redaction.redacted(answer).body, as: UTF8.self)
        for gone in [Self.token, Self.sseKey, "a1b2c3d4e5f6", "x-amz-security-token:", "41 57 53 34", "20261129/eu-west-1"] {
            #expect(!kept.contains(gone), "\(gone) is still in \(kept)")
        }
        for staying in ["<Code>SignatureDoesNotMatch</Code>", "Check your key and signing method.", "<RequestId>4442587FB7D0A2F9</RequestId>",
                        "<CanonicalRequest>***</CanonicalRequest>", "<SignatureProvided>***</SignatureProvided>"] {
            #expect(kept.contains(staying), "\(staying) is missing from \(kept)")
        }
    }

    @Test("A secret echoed anywhere, raw or percent-encoded, in the body, a header or the hint, is replaced", arguments: [
        ("{\"error\":\"token s3cr3t-t0ken-42 is not valid\"}", "{\"error\":\"token *** is not valid\"}"),
        ("GET /x?token=s3cr3t%2Bt0ken%2F42&y=1", "GET /x?token=***&y=1"),
        ("s3cr3t-t0ken-42s3cr3t-t0ken-42", "******"),
        ("nothing to hide", "nothing to hide"),
        ("", ""),
    ])
    func echoed(body: String, expected: String) {
        let redaction = AnswerRedaction(secrets: ["s3cr3t-t0ken-42", "s3cr3t+t0ken/42"])
        let answer = ServerAnswer(
            status: 401, body: Array(body.utf8), hint: "said \(body)", headers: [ResponseHeader(name: "www-authenticate", value: body)])
        let kept = redaction.redacted(answer)
        #expect(String(decoding: kept.body, as: UTF8.self) == expected)
        #expect(kept.headers.first?.value == expected)
        #expect(kept.hint == "said \(expected)")
    }

    /// An S3-style secret key with `/` and `+`, and a password with characters JSON and XML escape.
    static let slashKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY+z"
    static let oddPassword = "p\"ass<wörd>&'\\x"

    @Test("A secret echoed JSON-escaped, XML-escaped or percent-encoded in lower case is replaced", arguments: [
        // PHP's json_encode escapes every slash.
        ("{\"error\":\"bad key wJalrXUtnFEMI\\/K7MDENG\\/bPxRfiCYEXAMPLEKEY+z\"}", "{\"error\":\"bad key ***\"}"),
        // Python's json.dumps: quotes and backslashes escaped, non-ASCII as \\u.
        ("{\"detail\": \"p\\\"ass<w\\u00f6rd>&'\\\\x refused\"}", "{\"detail\": \"*** refused\"}"),
        // The same without ensure_ascii.
        ("{\"detail\": \"p\\\"ass<wörd>&'\\\\x\"}", "{\"detail\": \"***\"}"),
        ("<Message>p&quot;ass&lt;wörd&gt;&amp;&apos;\\x</Message>", "<Message>***</Message>"),
        ("<p>p&quot;ass&lt;wörd&gt;&amp;&#39;\\x</p>", "<p>***</p>"),
        // Go's encoding/xml (MinIO's errors).
        ("<Message>p&#34;ass&lt;wörd&gt;&amp;&#39;\\x</Message>", "<Message>***</Message>"),
        // .NET's System.Text.Json: + as \u002B, non-ASCII in upper-case hex.
        ("{\"key\":\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\\u002Bz\"}", "{\"key\":\"***\"}"),
        ("{\"p\":\"p\\u0022ass\\u003Cw\\u00F6rd\\u003E\\u0026\\u0027\\\\x\"}", "{\"p\":\"***\"}"),
        ("GET /?k=wJalrXUtnFEMI%2fK7MDENG%2fbPxRfiCYEXAMPLEKEY%2bz", "GET /?k=***"),
        ("GET /?k=wJalrXUtnFEMI%2FK7MDENG%2FbPxRfiCYEXAMPLEKEY%2Bz", "GET /?k=***"),
    ])
    func escapedEchoes(body: String, expected: String) {
        let redaction = AnswerRedaction(secrets: [Self.slashKey, Self.oddPassword])
        let kept = redaction.redacted(ServerAnswer(status: 400, body: Array(body.utf8)))
        #expect(String(decoding: kept.body, as: UTF8.self) == expected)
    }

    @Test("The escaped forms, as encoders write them")
    func escapedForms() {
        #expect(AnswerRedaction.jsonEscaped("a/\"\\\n\u{1}é😀", slash: true, asciiOnly: true) == #"a\/\"\\\n\u0001\u00e9\ud83d\ude00"#)
        #expect(AnswerRedaction.jsonEscaped("a/é", slash: false, asciiOnly: false) == "a/é")
        #expect(AnswerRedaction.jsonEscaped("a+b/é\"", slash: false, asciiOnly: true, upperHex: true, htmlSafe: true) == #"a\u002Bb/\u00E9\u0022"#)
        #expect(AnswerRedaction.lowercasedHex("AB%2F%C3%A9CD") == "AB%2f%c3%a9CD")
        #expect(AnswerRedaction.echoedForms(of: "plain-secret-value") == ["plain-secret-value"])
    }

    @Test("A success is the producer's answer: handed on unchanged")
    func successUnchanged() {
        let redaction = AnswerRedaction(secrets: ["s3cr3t-t0ken-42"])
        let answer = ServerAnswer(status: 201, body: Array("{\"echo\":\"s3cr3t-t0ken-42\"}".utf8))
        #expect(redaction.redacted(answer) == answer)
    }

    @Test("An element cut off by the 64 KiB limit loses the rest; secrets shorter than 6 bytes are not looked for; binary bodies keep their other bytes")
    func edges() {
        let redaction = AnswerRedaction(secrets: ["abc", "s3cr3t-t0ken-42", "1048576"])
        #expect(redaction.secrets.count == 1, "too short, and a number, are not looked for")
        let cut = Array("<Error><CanonicalRequest>PUT /a\nx-amz-security-token:zzz".utf8)
        #expect(String(decoding: redaction.redacted(cut), as: UTF8.self) == "<Error><CanonicalRequest>***")
        let binary: [UInt8] = [0xFF, 0x00] + Array("s3cr3t-t0ken-42".utf8) + [0xFE]
        #expect(redaction.redacted(binary) == [0xFF, 0x00] + Array("***".utf8) + [0xFE])
        #expect(AnswerRedaction.percentEncoded("a+b/c d~") == "a%2Bb%2Fc%20d~")
    }
}
