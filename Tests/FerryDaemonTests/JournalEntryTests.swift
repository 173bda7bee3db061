@testable import FerryDaemon
import Foundation
import Logging
import Testing

@Suite("JournalEntry: log records in journald's native protocol")
struct JournalEntryTests {
    /// The bytes of the binary form of a field: `NAME\n`, the length as 64-bit little endian, the value, `\n`.
    static func binaryField(_ name: String, _ value: [UInt8]) -> [UInt8] {
        var length = [UInt8]()
        var count = UInt64(value.count)
        for _ in 0..<8 {
            length.append(UInt8(count & 0xFF))
            count >>= 8
        }
        return Array(name.utf8) + [0x0A] + length + value + [0x0A]
    }

    static func entry(
        _ level: Logger.Level = .info, message: String = "uploaded", metadata: Logger.Metadata = [:]
    ) -> JournalEntry {
        JournalEntry(
            level: level, message: message, label: "ferryd", identifier: "ferryd", metadata: metadata,
            file: "FerryDaemon/JobPipeline.swift", function: "run()", line: 42)
    }

    /// The fields every entry has, after `MESSAGE` and `PRIORITY`.
    static let fixedFields = "SYSLOG_IDENTIFIER=ferryd\nCODE_FILE=FerryDaemon/JobPipeline.swift\nCODE_LINE=42\nCODE_FUNC=run()\nFERRY_LOGGER=ferryd\n"

    @Test("PRIORITY is syslog's number for every level", arguments: [
        (Logger.Level.trace, 7), (.debug, 7), (.info, 6), (.notice, 5), (.warning, 4), (.error, 3), (.critical, 2),
    ])
    func priorities(level: Logger.Level, priority: Int) {
        #expect(JournalEntry.priority(level) == priority)
        let fields = Self.entry(level).fields
        #expect(fields.first { $0.name == "PRIORITY" }?.value == Array(String(priority).utf8))
    }

    @Test("Metadata keys become FERRY_ names journald accepts: capitals, digits and _ only, at most 64 characters", arguments: [
        ("job", "FERRY_JOB"),
        ("retry_in_ms", "FERRY_RETRY_IN_MS"),
        ("new-job", "FERRY_NEW_JOB"),
        ("Spool.Name", "FERRY_SPOOL_NAME"),
        ("9lives", "FERRY_9LIVES"),
        ("_private", "FERRY__PRIVATE"),
        ("café", "FERRY_CAF_"),
        ("日本", "FERRY___"),
        ("a b=c\n", "FERRY_A_B_C_"),
        ("", "FERRY_"),
        (String(repeating: "k", count: 100), "FERRY_" + String(repeating: "K", count: 58)),
        (String(repeating: "é", count: 100), "FERRY_" + String(repeating: "_", count: 58)),
    ])
    func fieldNames(key: String, name: String) {
        let made = JournalEntry.fieldName(forMetadataKey: key)
        #expect(made == name)
        #expect(made.utf8.count <= 64)
        #expect(made.utf8.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F })
    }

    @Test("Without metadata: the fixed fields, one NAME=value line each")
    func emptyMetadata() {
        let expected = "MESSAGE=ready\nPRIORITY=5\n" + Self.fixedFields
        #expect(Self.entry(.notice, message: "ready").encoded() == Array(expected.utf8))
    }

    @Test("Metadata follows, sorted by key; arrays and dictionaries render as in the logfmt log")
    func metadataFields() {
        let entry = Self.entry(metadata: [
            "spool": "media", "job": "01J0000000000000000000000", "file": "a b.jpg", "status": .stringConvertible(201),
            "hooks": .array(["script", "result"]), "headers": .dictionary(["b": "2", "a": "1"]), "empty": "",
        ])
        let expected = "MESSAGE=uploaded\nPRIORITY=6\n" + Self.fixedFields
            + "FERRY_EMPTY=\nFERRY_FILE=a b.jpg\nFERRY_HEADERS=a:1,b:2\nFERRY_HOOKS=script,result\n"
            + "FERRY_JOB=01J0000000000000000000000\nFERRY_SPOOL=media\nFERRY_STATUS=201\n"
        #expect(String(decoding: entry.encoded(), as: UTF8.self) == expected)
    }

    @Test("A value with a newline goes in the binary form, with its exact length; others stay NAME=value", arguments: [
        "line one\nline two",
        "\n",
        "ends with a newline\n",
        "carriage\r\nreturn",
    ])
    func binaryForm(text: String) {
        let entry = Self.entry(message: text, metadata: ["reason": .string(text)])
        let expected = Self.binaryField("MESSAGE", Array(text.utf8)) + Array("PRIORITY=6\n\(Self.fixedFields)".utf8)
            + Self.binaryField("FERRY_REASON", Array(text.utf8))
        #expect(entry.encoded() == expected)
    }

    @Test("A value without a newline but with = or other control bytes stays in the text form, unchanged")
    func textFormKeepsBytes() {
        let text = "a=b\tc\r\u{1}"
        let entry = Self.entry(message: text)
        #expect(entry.encoded().starts(with: Array("MESSAGE=\(text)\nPRIORITY".utf8)))
    }

    @Test("Unicode goes as UTF-8 bytes, in either form; lengths count bytes, not characters")
    func unicode() {
        let single = "photo – été 📷.jpg"
        let multi = "première ligne\n二行目 📷"
        let entry = Self.entry(message: single, metadata: ["file": .string(single), "reason": .string(multi)])
        let expected = Array("MESSAGE=\(single)\nPRIORITY=6\n\(Self.fixedFields)FERRY_FILE=\(single)\n".utf8)
            + Self.binaryField("FERRY_REASON", Array(multi.utf8))
        #expect(entry.encoded() == expected)
        let reason = Array(Array("FERRY_REASON\n".utf8) + [30, 0, 0, 0, 0, 0, 0, 0])
        #expect(entry.encoded().firstRange(of: reason) != nil, "the length is 30 UTF-8 bytes (20 characters)")
    }

    @Test("Two keys that make the same name both go: journald keeps a field's several values")
    func collidingKeys() {
        let entry = Self.entry(metadata: ["file": "a", "File": "b"])
        #expect(entry.fields.filter { $0.name == "FERRY_FILE" }.map(\.value) == [Array("b".utf8), Array("a".utf8)])
    }
}
