import CFerrySystem
import Foundation
import Testing

/// `cferry_release_text_pages`, which ferryd calls once its configuration is read and again at
/// READY, run in this test process: the code mapping it drops is this executable's own.
@Suite("Releasing the executable's code pages")
struct TextPagesTests {
    /// One mapping of /proc/self/smaps: its address range, permissions and counters in kB.
    struct Mapping {
        var range: Range<UInt>
        var permissions: String
        var kB: [String: Int] = [:]
    }

    static func mappings() throws -> [Mapping] {
        var result: [Mapping] = []
        for line in try String(contentsOfFile: "/proc/self/smaps", encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), !first.hasSuffix(":"), fields.count >= 5 {
                let bounds = first.split(separator: "-").compactMap { UInt($0, radix: 16) }
                if bounds.count == 2 { result.append(Mapping(range: bounds[0]..<bounds[1], permissions: String(fields[1]))) }
            } else if fields.count >= 2, fields[0].hasSuffix(":"), let value = Int(fields[1]), !result.isEmpty {
                result[result.count - 1].kB[String(fields[0].dropLast())] = value
            }
        }
        return result
    }

    static func codeMapping() throws -> Mapping {
        let address = UInt(bitPattern: unsafeBitCast(cferry_release_text_pages as @convention(c) () -> Int, to: UnsafeRawPointer.self))
        return try #require(try mappings().first { $0.range.contains(address) })
    }

    @Test("Drops the resident pages of the code mapping; code runs on; a mapping with a private copy of a page is left alone")
    func releasesCode() throws {
        let before = try Self.codeMapping()
        #expect(before.permissions == "r-xp", "the mapping that holds the code is read-only and executable")
        // Private_Dirty may count page-cache pages not yet written back (a binary just linked), which
        // are still the file's; Anonymous counts private copies, which dropping would lose.
        #expect(before.kB["Anonymous"] == 0, "no page of the code is a private copy")
        let beforeRss = try #require(before.kB["Rss"])

        let released = cferry_release_text_pages()
        let after = try Self.codeMapping()

        #expect(released == Int(before.range.count), "the whole mapping was advised")
        let afterRss = try #require(after.kB["Rss"])
        #expect(afterRss < beforeRss, "resident code pages: \(beforeRss) kB before, \(afterRss) kB after")
        // The dropped pages come back on use: a second call still finds and drops the mapping.
        #expect(cferry_release_text_pages() == released)

        // A page made a private copy, as a debugger's breakpoint would: write one byte of the code
        // back to itself through /proc/self/mem (the same byte, so the code is unchanged).
        let address = after.range.lowerBound + UInt(after.range.count / 2)
        let mem = open("/proc/self/mem", O_RDWR)
        try #require(mem >= 0, "open /proc/self/mem: errno \(errno)")
        defer { close(mem) }
        var byte: UInt8 = 0
        try #require(pread(mem, &byte, 1, off_t(address)) == 1)
        try #require(pwrite(mem, &byte, 1, off_t(address)) == 1, "pwrite /proc/self/mem: errno \(errno)")
        let copied = try Self.codeMapping()
        #expect((copied.kB["Anonymous"] ?? 0) > 0, "the written page is now a private copy")
        #expect(cferry_release_text_pages() == -1, "not dropped: the private copy would be replaced by the file's page")
    }
}
