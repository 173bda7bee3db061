@testable import FerryDaemon
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
}
