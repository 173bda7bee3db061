import Foundation
import Testing
@testable import FerryConfig

/// The configuration reference is the one source of README.md's tables and ferry.toml(5): it must
/// name exactly the keys the loader reads, and README.md must hold what it renders.
@Suite("Configuration reference")
struct ConfigurationReferenceTests {
    static let readmePath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("README.md").path

    /// The keys the reference documents in `table`, with the sub-tables a spool reads as keys.
    static func documented(_ table: ConfigurationKeyReference.Table) -> Set<String> {
        var names = Set(ConfigurationReference.keys.filter { $0.table == table }.flatMap(\.names))
        if table == .spool {
            if ConfigurationReference.keys.contains(where: { $0.table == .spoolRetry }) { names.insert("retry") }
            if ConfigurationReference.keys.contains(where: { $0.table == .spoolHooks }) { names.insert("hooks") }
        }
        return names
    }

    @Test("the reference documents exactly the keys the loader reads", arguments: [
        (ConfigurationKeyReference.Table.topLevel, FerryConfiguration.keys.subtracting(["spool"])),
        (.spool, SpoolConfiguration.keys),
        (.spoolRetry, RetryPolicy.keys),
        (.spoolHooks, HookSettings.keys),
    ])
    func sameKeys(table: ConfigurationKeyReference.Table, loaderKeys: Set<String>) {
        let documented = Self.documented(table)
        #expect(loaderKeys.subtracting(documented).sorted() == [], "read but not documented in [\(table.rawValue)]")
        #expect(documented.subtracting(loaderKeys).sorted() == [], "documented but not read in [\(table.rawValue)]")
    }

    @Test("no key is documented twice")
    func noDuplicates() {
        var seen = Set<String>()
        for row in ConfigurationReference.keys {
            for name in row.names { #expect(seen.insert("\(row.table.rawValue).\(name)").inserted, "\(name) twice") }
        }
    }

    @Test("README.md holds the rendered reference (fix: swift run ferry-docs readme)")
    func readmeMatches() throws {
        let readme = try String(contentsOfFile: Self.readmePath, encoding: .utf8)
        let updated = try #require(ConfigurationReference.updatingReadme(readme), "README.md lost its markers")
        #expect(updated == readme)
    }

    @Test("the manual page lists every key, escaped for roff")
    func manualPage() {
        let page = ConfigurationReference.manualPage(date: "2026-11-25", version: "9.9.9")
        #expect(page.hasPrefix(#".TH FERRY.TOML 5 "2026-11-25" "Ferry 9.9.9""#))
        for row in ConfigurationReference.keys {
            for name in row.names {
                let shown = row.isSubTable ? "[\(row.table.rawValue).\(name)]" : name
                #expect(page.contains(#"\fB"# + shown + #"\fR"#), "\(name) missing")
            }
        }
        let ascii = page.unicodeScalars.allSatisfy { $0.isASCII }
        #expect(ascii)
        for line in page.split(separator: "\n") where !line.hasPrefix(".") {
            #expect(!line.hasPrefix("'"), "a text line that roff would take for a request: \(line)")
        }
    }

    @Test("inline Markdown becomes roff", arguments: [
        ("plain", "plain"),
        ("`--config`", #"\fB\-\-config\fR"#),
        ("see [Sharing the link](#sharing-the-link)", "see Sharing the link (in the README)"),
        ("[`etc/ferry/ferry.toml`](etc/ferry/ferry.toml) is", #"\fBetc/ferry/ferry.toml\fR (in Ferry's sources) is"#),
        ("[RFC 9530](https://www.rfc-editor.org/rfc/rfc9530)", "RFC 9530"),
        (#"a \ b"#, #"a \e b"#),
        ("1–256 …", #"1\[u2013]256 \[u2026]"#),
        ("**bold** text", #"\fBbold\fR text"#),
        ("a `[unclosed", "a `[unclosed"),
        ("😀", #"\[u1F600]"#),
    ])
    func inline(markdown: String, roff: String) {
        #expect(Roff.inline(markdown) == roff)
    }

    @Test("a paragraph starting with a dot is not taken for a request")
    func leadingDot() {
        #expect(Roff.paragraph(".sent is\nwhere") == #"\&.sent is where"#)
    }
}
