import FerryDelivery
import FerryQueue
import FerryS3
import Testing

/// The S3 upload machine learning by reading the file back whether what the server holds is ours,
/// when the answer that would have said so was lost: scripted answers, no network, no files.
@Suite("S3 upload machine: reading back")
struct S3UploadMachineReadBackTests {
    typealias Machine = S3UploadMachineTests
    static let mib = Machine.mib
    static let known = ResumableUpload(url: Machine.url, offset: 5 * mib, endpointKey: "E")
    static let md5Of2 = String(repeating: "2", count: 32)

    struct PartCase: Sendable, CustomTestStringConvertible {
        var name: String
        /// Part 2 as the server lists it (no checksum: no server measured lists them).
        var listedETag: String
        /// What reading back the file's range of part 2 gives.
        var readBack: S3UploadMachine.Response
        var requests: [String]
        /// Part 2 as recorded after the listing, if kept.
        var kept: UploadPart?
        var testDescription: String { name }
    }

    static let partCases: [PartCase] = [
        .init(name: "the part's ETag is our bytes' MD5: kept with the checksum read, not sent again",
              listedETag: "\"\(md5Of2)\"", readBack: .digested(md5: md5Of2, checksum: "CCCCCC=="),
              requests: ["list", "read 5..<10 MiB", "part 3", "complete [1, 2, 3]"],
              kept: UploadPart(number: 2, size: 5 * mib, etag: "\"\(md5Of2)\"", checksum: "CCCCCC==")),
        .init(name: "the same MD5 in upper case, unquoted",
              listedETag: "ABCDEF0123456789ABCDEF0123456789", readBack: .digested(md5: "abcdef0123456789abcdef0123456789", checksum: "CCCCCC=="),
              requests: ["list", "read 5..<10 MiB", "part 3", "complete [1, 2, 3]"],
              kept: UploadPart(number: 2, size: 5 * mib, etag: "ABCDEF0123456789ABCDEF0123456789", checksum: "CCCCCC==")),
        .init(name: "another MD5, or an ETag that only looks like one (SSE-KMS, SSE-C): sent again",
              listedETag: "\"\(md5Of2)\"", readBack: .digested(md5: String(repeating: "3", count: 32), checksum: "CCCCCC=="),
              requests: ["list", "read 5..<10 MiB", "part 2", "part 3", "complete [1, 2, 3]"], kept: nil),
        .init(name: "an ETag that is not 32 hex digits: not read back, sent again",
              listedETag: "\"kms-5f2c\"", readBack: .failed("not asked"),
              requests: ["list", "part 2", "part 3", "complete [1, 2, 3]"], kept: nil),
    ]

    @Test("a listed part the record does not have (its answer was lost)", arguments: partCases)
    func listedPart(_ test: PartCase) {
        var asked: [S3UploadMachine.Action] = []
        let (actions, _) = Machine.run(Machine.threeParts, known: Self.known, parts: [Machine.part(1)]) { action, step in
            switch action {
            case .listParts: return .partsListed([Machine.part(1, checksum: nil), Machine.part(2, etag: test.listedETag, checksum: nil)], next: nil)
            case .digest:
                asked.append(action)
                return test.readBack
            default: return Machine.happy(action, step)
            }
        }
        #expect(Machine.requests(actions) == test.requests)
        #expect(asked.allSatisfy { $0 == .digest(offset: 5 * Self.mib, length: 5 * Self.mib, withChecksum: true) })
        let listing = actions.first { if case .record(.upload) = $0 { true } else { false } }
        let recorded: [UploadPart] = if case .record(.upload(_, let parts))? = listing { parts } else { [] }
        #expect(recorded.first { $0.number == 2 } == test.kept)
        #expect(Machine.report(actions) == .answered(ServerAnswer(status: 200)))
    }

    @Test("the file changed, or cannot be read, while a part is read back: the attempt ends that way")
    func readBackFails() {
        for (readBack, expected) in [(S3UploadMachine.Response.sourceChanged, AttemptReport.sourceChanged(nil)),
                                     (.failed("EIO"), .noAnswer("EIO"))] {
            let (actions, _) = Machine.run(Machine.threeParts, known: Self.known, parts: [Machine.part(1)]) { action, step in
                switch action {
                case .listParts: .partsListed([Machine.part(1), Machine.part(2, checksum: nil)], next: nil)
                case .digest: readBack
                default: Machine.happy(action, step)
                }
            }
            #expect(Machine.requests(actions) == ["list", "read 5..<10 MiB"])
            #expect(Machine.report(actions) == expected)
        }
    }

    @Test("a listing that repeats a part, or a page, reads each unknown part back once")
    func repeatedListing() {
        let known = ResumableUpload(url: Machine.url, offset: 0, endpointKey: "E")
        let twice = Array(repeating: Machine.part(2, checksum: nil), count: 50)
        let (actions, _) = Machine.run(Machine.threeParts, known: known, parts: []) { action, step in
            switch action {
            // A server that ignores the marker: the same page, truncated, every time.
            case .listParts: .partsListed(twice + [Machine.part(1)], next: 2)
            case .digest: .digested(md5: Self.md5Of2, checksum: "DDDDDD==")
            default: Machine.happy(action, step)
            }
        }
        #expect(Machine.requests(actions).filter { $0.hasPrefix("read") } == ["read 5..<10 MiB"])
        #expect(Machine.requests(actions).suffix(2) == ["part 3", "complete [1, 2, 3]"])
    }

    @Test("more unknown parts than could have been in flight: only the first concurrencyLimit are read back")
    func readBackLimit() {
        let many = S3UploadMachine.Settings(length: 20 * 5 * Self.mib, partSize: 5 * Self.mib, multipartThreshold: 5 * Self.mib, endpointKey: "E")
        let known = ResumableUpload(url: Machine.url, offset: 0, endpointKey: "E")
        let listed = (1...20).map { UploadPart(number: $0, size: 5 * Self.mib, etag: "\"\(String(repeating: "a", count: 32))\"", checksum: nil) }
        let (actions, _) = Machine.run(many, known: known, parts: []) { action, step in
            switch action {
            case .listParts: .partsListed(listed, next: nil)
            case .digest: .digested(md5: String(repeating: "0", count: 32), checksum: "DDDDDD==")
            default: Machine.happy(action, step)
            }
        }
        #expect(Machine.requests(actions).filter { $0.hasPrefix("read") }.count == S3UploadMachine.concurrencyLimit)
    }

    @Test("two listed parts unknown: both read back, in order, then one recording of the listing")
    func twoParts() {
        let known = ResumableUpload(url: Machine.url, offset: 0, endpointKey: "E")
        let (actions, machine) = Machine.run(Machine.threeParts, known: known, parts: []) { action, step in
            switch action {
            case .listParts: .partsListed([Machine.part(2, checksum: nil), Machine.part(1, checksum: nil)], next: nil)
            case .digest(let offset, _, _): .digested(md5: String(repeating: String(offset / (5 * Self.mib) + 1), count: 32), checksum: "DDDDDD==")
            default: Machine.happy(action, step)
            }
        }
        #expect(Machine.requests(actions) == ["list", "read 0..<5 MiB", "read 5..<10 MiB", "part 3", "complete [1, 2, 3]"])
        #expect(actions.filter { if case .record(.upload) = $0 { true } else { false } }.count == 1)
        #expect(machine.takeNoticesCopy().contains(.partsRecognised(count: 2)))
    }

    struct ObjectCase: Sendable, CustomTestStringConvertible {
        var name: String
        /// The ETag HEAD gives the object, after the upload vanished with every part confirmed.
        var headETag: String
        var readBack: S3UploadMachine.Response?
        var requests: [String]
        var done: Bool
        var testDescription: String { name }
    }

    static let objectCases: [ObjectCase] = [
        .init(name: "the object's ETag is the MD5 of the whole file (rclone serve s3): done",
              headETag: "\"\(String(repeating: "f", count: 32))\"", readBack: .digested(md5: String(repeating: "f", count: 32), checksum: nil),
              requests: ["list", "head", "read 0..<12 MiB"], done: true),
        .init(name: "an MD5 that is not the file's: someone else's object, start over",
              headETag: "\"\(String(repeating: "f", count: 32))\"", readBack: .digested(md5: String(repeating: "e", count: 32), checksum: nil),
              requests: ["list", "head", "read 0..<12 MiB", "mark", "create", "part 1", "part 2", "part 3", "complete [1, 2, 3]"], done: true),
        .init(name: "an ETag that is neither the parts' nor an MD5: start over without reading",
              headETag: "\"someone-else\"", readBack: nil,
              requests: ["list", "head", "mark", "create", "part 1", "part 2", "part 3", "complete [1, 2, 3]"], done: true),
        .init(name: "the file changed while read back: superseded",
              headETag: "\"\(String(repeating: "f", count: 32))\"", readBack: .sourceChanged,
              requests: ["list", "head", "read 0..<12 MiB"], done: false),
    ]

    @Test("every part confirmed, the upload gone, and HEAD's ETag not the parts' (the completion's answer was lost)",
          arguments: objectCases)
    func object(_ test: ObjectCase) {
        let parts = [Machine.part(1), Machine.part(2), Machine.part(3, size: 2 * Self.mib)]
        let known = ResumableUpload(url: Machine.url, offset: 12 * Self.mib, endpointKey: "E")
        var heads = 0
        let (actions, machine) = Machine.run(Machine.threeParts, known: known, parts: parts) { action, step in
            switch action {
            case .listParts: return Machine.s3Error(404, "NoSuchUpload")
            case .headObject:
                heads += 1
                return .object(etag: test.headETag, checksum: nil)
            case .digest(let offset, let length, let withChecksum):
                #expect(offset == 0 && length == 12 * Self.mib && !withChecksum, "the whole file, its MD5 only")
                return test.readBack ?? .failed("not asked")
            default: return Machine.happy(action, step)
            }
        }
        #expect(Machine.requests(actions) == test.requests)
        #expect(heads == 1)
        if test.done {
            #expect(Machine.report(actions) == .answered(ServerAnswer(status: 200)))
        } else {
            #expect(Machine.report(actions) == .sourceChanged(nil))
        }
        if test.requests.count == 3, test.done {
            #expect(machine.objectETag == test.headETag)
            #expect(machine.takeNoticesCopy().contains(.completedEarlier))
        }
    }
}
