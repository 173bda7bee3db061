@testable import FerryConfig
import Testing

/// The bytes of `text`.
private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Each field as `name=value`, placeholders shown as `<name>` so they differ from literal braces.
private func shown(_ fields: [NamedValue]) -> [String] {
    fields.map { "\($0.name)=\($0.value.render { "<\($0.rawValue)>" })" }
}

/// A literal field.
private func field(_ name: String, _ value: String) -> NamedValue {
    NamedValue(name: name, value: .literal(value))
}

@Suite("Field sidecars: per-file fields in <name>.fields.toml")
struct FieldSidecarTests {
    @Test("good sidecars give their fields in the order of the text", arguments: [
        ("alt = \"A cat on a mat\"", ["alt=A cat on a mat"]),
        ("", []),
        ("# only a comment\n\n", []),
        ("tags = [\"cat\", \"mat\", \"cat\"]", ["tags=cat", "tags=mat", "tags=cat"]),
        ("alt = \"She said \\\"hi\\\" 🐈‍⬛ — café\"", ["alt=She said \"hi\" 🐈‍⬛ — café"]),
        ("path = 'C:\\dir\\\"x\"'", ["path=C:\\dir\\\"x\""]),
        ("title = \"{filename} ({size} bytes, {mtime}, {sha256}, {relative_path}, {id})\"",
         ["title=<filename> (<size> bytes, <mtime>, <sha256>, <relative_path>, <id>)"]),
        ("json = \"{{\\\"name\\\": \\\"{filename}\\\"}}\"", ["json={\"name\": \"<filename>\"}"]),
        ("literal = \"{{filename}}\"", ["literal={filename}"]),
        ("dollar = \"costs $5 or {{$}}\"", ["dollar=costs $5 or {$}"]),
        ("zeta = \"1\"\nalpha = \"2\"\nmid = [\"3\", \"4\"]\nbeta = \"5\"", ["zeta=1", "alpha=2", "mid=3", "mid=4", "beta=5"]),
        ("\"files[]\" = \"x\"\n\"description du média\" = \"y\"\n'a.b' = \"z\"", ["files[]=x", "description du média=y", "a.b=z"]),
        ("b = \"\"\"\\\n  one \\\n  two\"\"\"\na = 'x = y'\nc = '''lit'''", ["b=one two", "a=x = y", "c=lit"]),
        ("tab = \"a\\tb\"\nempty = \"\"", ["tab=a\tb", "empty="]),
        ("b = \"1\"\r\na = \"2\"\r\n", ["b=1", "a=2"]),
        ("list = [\n  \"one\",  # first\n  \"two = 2\",\n]\nafter = \"x\"", ["list=one", "list=two = 2", "after=x"]),
        ("bell = \"ring\\u0007\"", ["bell=ring\u{07}"]),
        // Line breaks in a value are the text's own (Mastodon's alt text, a caption): a part's body.
        ("alt = \"Two boats.\\nOne sail.\"\nnote = \"a\\r\\nb\"\nlong = \"\"\"\nfirst\nsecond\"\"\"\ntags = [\"x\\ny\"]",
         ["alt=Two boats.\nOne sail.", "note=a\r\nb", "long=first\nsecond", "tags=x\ny"]),
        ("\"a\\\"b\" = \"1\"\n\"caf\\u00e9\" = \"2\"\n\"\\U0001F408\" = \"3\"\na = \"4\"", ["a\"b=1", "café=2", "🐈=3", "a=4"]),
    ])
    func good(_ text: String, _ expected: [String]) throws {
        #expect(shown(try FieldSidecar.parse(bytes(text), fileField: "file")) == expected)
    }

    @Test("placeholders become placeholders; nothing is a secret")
    func templates() throws {
        let fields = try FieldSidecar.parse(bytes("alt = \"{filename}: {{x}}\""), fileField: "file")
        #expect(fields == [NamedValue(name: "alt", value: ValueTemplate(segments: [.placeholder(.filename), .literal(": {x}")], containsSecret: false))])
    }

    @Test("each refusal says where and why", arguments: [
        ("alt = \"x\"\nbroken = \n", "line 2: TOML syntax error: "),
        ("a = \"x\"\nb = \"y\"\nc = \"unterminated\n", "line 3: TOML syntax error: "),
        ("a = \"x\"\na = \"y\"", "line 2: TOML syntax error: "),
        ("n = 3", "line 1, key \"n\": expected a string or an array of strings, got an integer"),
        ("ok = \"x\"\nf = 1.5", "line 2, key \"f\": expected a string or an array of strings, got a floating-point number"),
        ("b = true", "line 1, key \"b\": expected a string or an array of strings, got a boolean"),
        ("d = 1979-05-27", "line 1, key \"d\": expected a string or an array of strings, got a date"),
        ("t = {a = \"x\"}", "line 1, key \"t\": expected a string or an array of strings, got a table (a sidecar has top-level keys only: write name = \"value\")"),
        ("a.b = \"x\"", "line 1, key \"a\": expected a string or an array of strings, got a table"),
        ("ok = \"x\"\n[t]\na = \"x\"", "line 2, key \"t\": expected a string or an array of strings, got a table"),
        ("a = [1, 2]", "line 1, key \"a\": expected an array of strings, but element 0 is an integer"),
        ("a = [\"x\", false]", "line 1, key \"a\": expected an array of strings, but element 1 is a boolean"),
        ("a = [[\"x\"]]", "line 1, key \"a\": expected an array of strings, but element 0 is an array"),
        ("a = []", "line 1, key \"a\": an empty array gives the field no value; leave the key out, or give it at least one value"),
        ("\"a\\rb\" = \"x\"", "line 1, key \"a\\rb\": the field name contains a carriage return (CR); field names may not contain CR, LF or NUL"),
        ("ok = \"x\"\n\"a\\nb\" = \"x\"", "line 2, key \"a\\nb\": the field name contains a line feed (LF); field names may not contain CR, LF or NUL"),
        ("\"a\\u0000b\" = \"x\"", "line 1: a NUL character (\\u0000) is not allowed in a field name or value"),
        ("\"\" = \"x\"", "line 1, key \"\": the field name must not be empty"),
        ("a = \"ok\"\nb = \"x\\u0000y\"", "line 2: a NUL character (\\u0000) is not allowed in a field name or value"),
        ("auth = \"Bearer ${env:HOME}\"", "line 1, key \"auth\": secret references (${…}) may only appear in ferry.toml"),
        ("auth = \"${credential:token}\"", "line 1, key \"auth\": secret references (${…}) may only appear in ferry.toml"),
        ("auth = \"${file:/etc/shadow\"", "line 1, key \"auth\": secret references (${…}) may only appear in ferry.toml"),
        ("a = [\"x\", \"${env:HOME}\"]", "line 1, key \"a\": element 1 of the value: secret references (${…}) may only appear in ferry.toml"),
        ("a = \"{nope}\"", "line 1, key \"a\": unknown placeholder \"{nope}\""),
        ("a = \"x}\"", "line 1, key \"a\": a lone \"}\" (write \"}}\" for a literal brace)"),
        ("a = \"{filename\"", "line 1, key \"a\": \"{\" starts a placeholder but there is no closing \"}\""),
        ("file = \"x\"", "line 1, key \"file\": \"file\" is the name of the file part; a field may not take it"),
        ("ok = \"x\"\nfile = [\"a\", \"b\"]", "line 2, key \"file\": \"file\" is the name of the file part; a field may not take it"),
    ])
    func refusals(_ text: String, _ expected: String) {
        #expect(throws: FieldSidecarError.self) { try FieldSidecar.parse(bytes(text), fileField: "file") }
        do {
            _ = try FieldSidecar.parse(bytes(text), fileField: "file")
        } catch {
            #expect(error.description.hasPrefix(expected), "\(error.description)")
        }
    }

    @Test("the first problem in the text is the one reported, whatever TOMLKit's key order")
    func firstProblemInTextOrder() {
        #expect(throws: FieldSidecarError(line: 2, key: "zeta", message: "expected a string or an array of strings, got an integer")) {
            try FieldSidecar.parse(bytes("ok = \"x\"\nzeta = 1\nalpha = 2"), fileField: "file")
        }
    }

    @Test("a bundle's file field is refused as a name; the spool's single-file field is then free")
    func bundleFileField() throws {
        #expect(throws: FieldSidecarError(line: 1, key: "files[]", message: "\"files[]\" is the name of the file part; a field may not take it")) {
            try FieldSidecar.parse(bytes("\"files[]\" = \"x\""), fileField: "files[]")
        }
        #expect(shown(try FieldSidecar.parse(bytes("file = \"x\""), fileField: "files[]")) == ["file=x"])
    }

    @Test("bytes that are not a sidecar: too large, not UTF-8, a raw NUL")
    func badBytes() throws {
        let largest = bytes("a = \"x\"\n") + Array(repeating: UInt8(ascii: "#"), count: FieldSidecar.sizeLimit - 8)
        #expect(largest.count == 65_536)
        #expect(shown(try FieldSidecar.parse(largest, fileField: "file")) == ["a=x"])
        #expect(throws: FieldSidecarError(message: "the sidecar is 65537 bytes; the most is 65536 (64 KiB)")) {
            try FieldSidecar.parse(largest + [0x0A], fileField: "file")
        }
        #expect(throws: FieldSidecarError(message: "the sidecar is not UTF-8 text")) {
            try FieldSidecar.parse(bytes("a = \"") + [0xFF, 0xFE] + bytes("\""), fileField: "file")
        }
        #expect(throws: FieldSidecarError(line: 2, message: "the sidecar contains a NUL byte")) {
            try FieldSidecar.parse(bytes("a = \"x\"\n# ") + [0] + bytes("\nb = 1"), fileField: "file")
        }
    }

    @Test("at most 1000 fields, an array's values counted one by one")
    func fieldLimit() throws {
        let thousand = (1...1000).map { "k\($0) = \"v\"" }.joined(separator: "\n")
        #expect(try FieldSidecar.parse(bytes(thousand), fileField: "file").count == 1000)
        #expect(throws: FieldSidecarError(line: 1001, key: "k1001", message: "the sidecar gives more than 1000 fields")) {
            try FieldSidecar.parse(bytes(thousand + "\nk1001 = \"v\""), fileField: "file")
        }
        let array = "a = [" + Array(repeating: "\"v\"", count: 1001).joined(separator: ", ") + "]"
        #expect(throws: FieldSidecarError(line: 1, key: "a", message: "the sidecar gives more than 1000 fields")) {
            try FieldSidecar.parse(bytes(array), fileField: "file")
        }
    }

    @Test("merged: the spool's order, a name the sidecar gives replaced at its place by all its values, then the sidecar's others", arguments: [
        ([field("a", "1"), field("b", "2"), field("c", "3")], [field("b", "B")], ["a=1", "b=B", "c=3"]),
        ([field("a", "1"), field("b", "2"), field("c", "3")], [field("d", "D"), field("b", "B1"), field("b", "B2")],
         ["a=1", "b=B1", "b=B2", "c=3", "d=D"]),
        ([field("a", "1"), field("b", "2")], [field("x", "X"), field("a", "A")], ["a=A", "b=2", "x=X"]),
        ([field("a", "1"), field("b", "2")], [], ["a=1", "b=2"]),
        ([], [field("z", "Z"), field("a", "A"), field("z", "Z2")], ["z=Z", "a=A", "z=Z2"]),
        ([field("a", "1"), field("b", "2"), field("a", "3")], [field("a", "A")], ["a=A", "b=2"]),
        ([field("alt", "default")], [field("alt", "")], ["alt="]),
        ([field("A", "1")], [field("a", "2")], ["A=1", "a=2"]),
    ])
    func merged(_ spool: [NamedValue], _ file: [NamedValue], _ expected: [String]) {
        #expect(shown(FieldSidecar.merged(spool: spool, file: file)) == expected)
    }

    @Test("merged keeps placeholders and secrets of the spool as they are")
    func mergedTemplates() throws {
        let secret = NamedValue(name: "token", value: ValueTemplate(segments: [.literal("s3cret")], containsSecret: true))
        let file = try FieldSidecar.parse(bytes("alt = \"{filename}\""), fileField: "file")
        #expect(FieldSidecar.merged(spool: [secret], file: file) == [secret] + file)
    }

    @Test("encode: one line per name, repeated names as arrays in first-appearance order, values as given")
    func encode() {
        let text = FieldSidecar.encode([
            ("alt", "A \"cat\" \\ 🐈"), ("tags", "a"), ("files[]", "x"), ("tags", "b"), ("title", "{filename}"),
            ("bell", "\u{07}\u{08}\t\u{0C}\u{1B}\u{7F}"), ("a b", ""),
        ])
        #expect(String(decoding: text, as: UTF8.self) == """
            alt = "A \\"cat\\" \\\\ 🐈"
            tags = ["a", "b"]
            "files[]" = "x"
            title = "{filename}"
            bell = "\\u0007\\b\\t\\f\\u001B\\u007F"
            "a b" = ""

            """)
        #expect(FieldSidecar.encode([]) == [])
    }

    @Test("encode then parse gives the fields back", arguments: [
        [("alt", "She said \"hi\" 🐈‍⬛")],
        [("path", "C:\\dir\\"), ("path", "\\\\server\\share"), ("quote", "\"")],
        [("bell", "\u{07}"), ("controls", "\u{01}\u{08}\t\u{0B}\u{0C}\u{1B}\u{1F}\u{7F}"), ("unicode", "é e\u{301} 日本 \u{FEFF}\u{10FFFF}")],
        [("files[]", "x"), ("a b", "y"), ("é", "z"), ("a\"b", "q"), ("a\\b", "r"), ("🐈", "s"), ("-", "t"), ("1", "u"), ("a.b", "v")],
        [("tags", "a"), ("tags", "b"), ("tags", "c")],
        [("title", "{filename} of {size} bytes"), ("empty", "")],
        [("z", "1"), ("a", "2"), ("m", "3"), ("a", "4")],
    ] as [[(String, String)]])
    func roundTrip(_ fields: [(String, String)]) throws {
        let parsed = try FieldSidecar.parse(FieldSidecar.encode(fields.map { (name: $0.0, value: $0.1) }), fileField: "file")
        // Repeated names come back together, at their first appearance: what the sidecar means.
        var expected: [String] = []
        for (name, _) in fields where !expected.contains(where: { $0.hasPrefix(name + "\u{0}") }) {
            expected += fields.filter { $0.0 == name }.map { "\($0.0)\u{0}\($0.1)" }
        }
        #expect(parsed.map { "\($0.name)\u{0}\($0.value.render { "{\($0.rawValue)}" })" } == expected)
    }

    @Test("encode writes what parse would refuse; parse says why")
    func encodeThenRefuse() {
        #expect(throws: FieldSidecarError(line: 1, key: "a\nb", message: "the field name contains a line feed (LF); field names may not contain CR, LF or NUL")) {
            try FieldSidecar.parse(FieldSidecar.encode([(name: "a\nb", value: "x")]), fileField: "file")
        }
        #expect(throws: FieldSidecarError(line: 1, message: "a NUL character (\\u0000) is not allowed in a field name or value")) {
            try FieldSidecar.parse(FieldSidecar.encode([(name: "alt", value: "a\u{0}b")]), fileField: "file")
        }
        #expect(throws: FieldSidecarError(line: 1, key: "token", message: "secret references (${…}) may only appear in ferry.toml")) {
            try FieldSidecar.parse(FieldSidecar.encode([(name: "token", value: "${env:TOKEN}")]), fileField: "file")
        }
    }

    @Test("sidecar names", arguments: [
        ("a.jpg.fields.toml", true), ("x.fields.toml", true), (".x.fields.toml", true),
        (".fields.toml", false), ("fields.toml", false), ("a.fields.tom", false), ("a.fields.toml.part", false),
        ("a.FIELDS.TOML", false), ("", false),
    ])
    func sidecarNames(_ name: String, _ isSidecar: Bool) {
        #expect(FieldSidecar.isSidecarName(bytes(name)) == isSidecar)
    }

    @Test("a sidecar's name is the file's name and the suffix, bytes as they are")
    func nameForFile() {
        #expect(FieldSidecar.name(for: bytes("a.jpg")) == bytes("a.jpg.fields.toml"))
        let notUTF8: [UInt8] = [0x66, 0xFF, 0x2E, 0x6A]
        #expect(FieldSidecar.name(for: notUTF8) == notUTF8 + bytes(".fields.toml"))
        #expect(FieldSidecar.isSidecarName(FieldSidecar.name(for: notUTF8)))
        #expect(FieldSidecar.bundleSidecarName == ".fields.toml" && FieldSidecar.suffix == ".fields.toml")
    }

    @Test("error descriptions", arguments: [
        (FieldSidecarError(line: 3, key: "alt", message: "m"), "line 3, key \"alt\": m"),
        (FieldSidecarError(key: "alt", message: "m"), "key \"alt\": m"),
        (FieldSidecarError(line: 2, message: "m"), "line 2: m"),
        (FieldSidecarError(message: "m"), "m"),
        (FieldSidecarError(line: 1, key: "a\"b\nc", message: "m"), "line 1, key \"a\\\"b\\nc\": m"),
    ])
    func descriptions(_ error: FieldSidecarError, _ expected: String) {
        #expect(error.description == expected)
    }

    @Test("the template parser refuses secret references without reading them; ferry.toml still resolves them")
    func secretsNeverResolved() throws {
        let sources = SecretSources(environment: ["TOKEN": "t"], credentialsDirectory: "/run/credentials",
                                    readFile: { path throws(SecretSources.SecretReadError) in
            Issue.record("read \(path)")
            return "secret"
        })
        let parser = TemplateParser(secrets: sources)
        for text in ["${env:TOKEN}", "x ${file:/etc/secret}", "${credential:token}", "${"] {
            guard case .failure(let failure) = parser.parse(text, allowPlaceholders: true, allowSecrets: false) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(failure.message == "secret references (${…}) may only appear in ferry.toml")
        }
        let resolved = try parser.parse("Bearer ${env:TOKEN}", allowPlaceholders: false).get()
        #expect(resolved.text == "Bearer t" && resolved.containsSecret)
    }
}
