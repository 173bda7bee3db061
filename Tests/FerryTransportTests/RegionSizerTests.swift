@testable import FerryTransport
import Testing

/// The `sendfile` region lengths on fast and slow links (pure: lengths and durations in, lengths out).
@Suite("sendfile regions sized for the link")
struct RegionSizerTests {
    static let kib: Int64 = 1024

    @Test("regions start at 32 KiB and double while quick, up to the ceiling")
    func growsOnAFastLink() {
        var sizer = RegionSizer(ceiling: 256 * Self.kib, noProgressTimeout: .seconds(60))
        var lengths: [Int64] = []
        for _ in 0..<5 {
            lengths.append(sizer.length)
            sizer.wrote(sizer.length, in: .milliseconds(2))
        }
        let expected: [Int64] = [32, 64, 128, 256, 256].map { $0 * Self.kib }
        #expect(lengths == expected)
    }

    @Test("a region slower than an eighth of no_progress_timeout halves the next, down to 16 KiB; between the bounds they stay")
    func shrinksOnASlowLink() {
        var sizer = RegionSizer(ceiling: 256 * Self.kib, noProgressTimeout: .seconds(60))
        for _ in 0..<3 { sizer.wrote(sizer.length, in: .milliseconds(1)) }
        #expect(sizer.length == 256 * Self.kib)
        // A link of 2 KB/s: 256 KiB would take two minutes; each region is written in its own time.
        var lengths: [Int64] = []
        for _ in 0..<6 {
            let seconds = Double(sizer.length) / 2000
            sizer.wrote(sizer.length, in: .seconds(seconds))
            lengths.append(sizer.length)
        }
        let expected: [Int64] = [128, 64, 32, 16, 16, 16].map { $0 * Self.kib }
        #expect(lengths == expected)
        // 16 KiB at 2 KB/s is 8 s, more than 7.5 s: stays at the smallest; a 3 s region neither grows nor shrinks.
        var steady = RegionSizer(ceiling: 256 * Self.kib, noProgressTimeout: .seconds(60))
        steady.wrote(32 * Self.kib, in: .seconds(3))
        #expect(steady.length == 32 * Self.kib)
    }

    @Test("a short last region does not grow the next; a ceiling below the first region (a bandwidth limit) is kept")
    func boundaries() {
        var sizer = RegionSizer(ceiling: 256 * Self.kib, noProgressTimeout: .seconds(60))
        sizer.wrote(1000, in: .milliseconds(1))
        #expect(sizer.length == 32 * Self.kib)
        var limited = RegionSizer(ceiling: 4096, noProgressTimeout: .seconds(60))
        #expect(limited.length == 4096)
        limited.wrote(4096, in: .seconds(30))
        #expect(limited.length == 4096)
        limited.wrote(4096, in: .milliseconds(1))
        #expect(limited.length == 4096)
    }
}
