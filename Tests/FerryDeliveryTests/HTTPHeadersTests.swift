import FerryDelivery
import Testing

@Suite("Header look-ups")
struct HTTPHeadersTests {
    @Test("Field names match without regard to ASCII case, and only then", arguments: [
        ("Content-Type", "content-type", true), ("RETRY-AFTER", "Retry-After", true), ("etag", "ETag", true),
        ("", "", true), ("Location", "Locations", false), ("Location", "Locatio", false), ("", "a", false),
        // Only letters fold: '@' (0x40) and '`' (0x60), '[' (0x5B) and '{' (0x7B) differ by 0x20 too.
        ("x-@", "x-`", false), ("x-[", "x-{", false), ("x-^", "x-~", false),
        // Outside ASCII, bytes must be equal (a field name is a token; nothing there folds).
        ("x-é", "x-É", false), ("x-é", "x-é", true),
    ] as [(String, String, Bool)])
    func sameName(one: String, other: String, same: Bool) {
        #expect(HTTPHeaders.sameName(one, other) == same)
        #expect(HTTPHeaders.sameName(other, one) == same)
    }

    @Test("A value is found by name in any case, trimmed of spaces; the first of repeated fields wins")
    func value() {
        let headers = [(name: "retry-after", value: " 120 "), (name: "Content-Type", value: "text/plain"), (name: "RETRY-AFTER", value: "5")]
        #expect(HTTPHeaders.value("Retry-After", in: headers) == "120")
        #expect(HTTPHeaders.value("content-type", in: headers) == "text/plain")
        #expect(HTTPHeaders.value("Location", in: headers) == nil)
    }
}
