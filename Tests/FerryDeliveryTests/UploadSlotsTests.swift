import FerryDelivery
import FerryQueue
import Testing

/// Which spools may start uploads, in which groups (pure).
@Suite("Upload slots: windows, per-spool limits, priority (pure)")
struct UploadSlotsTests {
    typealias Spool = UploadSlots.Spool

    static func names(_ groups: [[JobStore.SpoolSlots]]) -> [[String]] { groups.map { $0.map(\.spool) } }

    @Test("priority groups, highest first; held spools and full ones start nothing")
    func groups() {
        let spools = [
            Spool(name: "bulk", priority: 0), Spool(name: "urgent", priority: 10, cap: 2, inFlight: 1),
            Spool(name: "logs", priority: 0), Spool(name: "night", priority: 5, held: true),
            Spool(name: "full", priority: 10, cap: 1, inFlight: 1), Spool(name: "neg", priority: -1),
        ]
        #expect(Self.names(UploadSlots.groups(spools)) == [["urgent"], ["bulk", "logs"], ["neg"]])
        #expect(UploadSlots.groups(spools).first?.first?.available == 1, "its own limit less those in flight")
        #expect(UploadSlots.groups(spools)[1].allSatisfy { $0.available == Int.max })
        #expect(UploadSlots.waiting(spools) == ["night", "full"])
    }

    @Test("one spool with no settings: one group, no limit of its own (today's behaviour)")
    func single() {
        #expect(Self.names(UploadSlots.groups([Spool(name: "only", inFlight: 7)])) == [["only"]])
        #expect(UploadSlots.waiting([Spool(name: "only", inFlight: 7)]).isEmpty)
    }
}
