@testable import FerryDaemon
import Logging
import Testing

@Suite("logfmt values")
struct LogfmtLogHandlerTests {
    @Test("A value is bare unless it has a space, a quote, '=', a backslash or a control character; then it is quoted and escaped", arguments: [
        ("upload", "upload"), ("/spool/a.jpg", "/spool/a.jpg"), ("ünïcødé", "ünïcødé"),
        ("", "\"\""), ("two words", "\"two words\""), ("a=b", "\"a=b\""), ("say \"hi\"", "\"say \\\"hi\\\"\""),
        ("C:\\path", "\"C:\\\\path\""), ("line\r\nforged=1", "\"line\\r\\nforged=1\""), ("tab\t", "\"tab\\t\""),
        ("bell\u{07}", "\"bell\\u0007\""), ("back\u{08}", "\"back\\b\""), ("del\u{7F}", "\"del\\u007F\""),
    ] as [(String, String)])
    func quote(value: String, logged: String) {
        #expect(LogfmtLogHandler.quote(value) == logged)
    }

    @Test("A line: level, message, then the logger's and the event's pairs in key order, the event's value winning")
    func line() {
        var handler = LogfmtLogHandler(label: "test", level: .info, timestamps: false)
        handler[metadataKey: "spool"] = "media"
        handler[metadataKey: "job"] = "01J"
        handler[metadataKey: "file"] = "a b.jpg"
        let event = LogEvent(
            level: .info, message: "uploaded", metadata: ["status": "201", "file": "c.jpg"],
            source: "test", file: #fileID, function: #function, line: #line)
        #expect(handler.line(for: event) == "level=info msg=uploaded file=c.jpg job=01J spool=media status=201\n")
        let bare = LogEvent(level: .warning, message: "two words", metadata: nil, source: "test", file: #fileID, function: #function, line: #line)
        #expect(handler.line(for: bare) == "level=warning msg=\"two words\" file=\"a b.jpg\" job=01J spool=media\n")
    }
}
