import FerryConfig
import FerryDelivery
import FerryQueue
import FerryS3
import Foundation
import Testing

/// The S3 upload machine, driven by scripted answers: no network, no files.
@Suite("S3 upload machine")
struct S3UploadMachineTests {
    static let mib: Int64 = 1 << 20
    static let url = "http://s3.test/b/k?uploadId=U1"
    /// The settings' default creation marker.
    static let marker = "http://s3.test/b/k?uploads"

    /// Three parts of 5 MiB, 5 MiB and 2 MiB, CRC32C checksums.
    static let threeParts = S3UploadMachine.Settings(length: 12 * mib, partSize: 5 * mib, multipartThreshold: 5 * mib, endpointKey: "E")

    static func part(_ number: Int, size: Int64 = 5 * mib, etag: String? = nil, checksum: String? = "AAAAAA==") -> UploadPart {
        UploadPart(number: number, size: size, etag: etag ?? "\"\(String(repeating: String(number), count: 32))\"", checksum: checksum)
    }

    /// Drives the machine: each action is answered by `answer` (a part's answer is asked when it
    /// starts and delivered when the machine waits, in the order the parts started); records are
    /// acknowledged. Returns the actions in order (without the waits) and the machine.
    static func run(
        _ settings: S3UploadMachine.Settings, known: ResumableUpload? = nil, parts: [UploadPart] = [],
        answer: (S3UploadMachine.Action, Int) -> S3UploadMachine.Response
    ) -> (actions: [S3UploadMachine.Action], machine: S3UploadMachine) {
        var machine = S3UploadMachine(settings: settings, known: known, parts: parts)
        var actions: [S3UploadMachine.Action] = []
        var answers: [(Int, S3UploadMachine.Response)] = []
        var action = machine.start()
        var step = 0
        while true {
            if action != .awaitPart { actions.append(action) }
            step += 1
            precondition(step < 400, "the machine did not finish")
            switch action {
            case .finish: return (actions, machine)
            case .record: action = machine.recorded()
            case .putObject: action = machine.stored(answer(action, step))
            case .uploadPart(_, let number, _, _):
                answers.append((number, answer(action, step)))
                action = machine.partStarted()
            case .awaitPart:
                precondition(!answers.isEmpty, "the machine waits for a part not in flight")
                let (number, response) = answers.removeFirst()
                action = machine.storedPart(number, response)
            case .create: action = machine.created(answer(action, step))
            case .listParts: action = machine.listed(answer(action, step))
            case .complete: action = machine.completed(answer(action, step))
            case .headObject: action = machine.headed(answer(action, step))
            case .abandonUnrecorded: action = machine.abandoned(answer(action, step))
            case .digest: action = machine.digested(answer(action, step))
            }
        }
    }

    /// The requests among the actions, as short names (`create`, `part 1`, `list`, `complete`, …).
    static func requests(_ actions: [S3UploadMachine.Action]) -> [String] {
        actions.compactMap {
            switch $0 {
            case .putObject: "put"
            case .create: "create"
            case .listParts(_, let marker): marker.map { "list after \($0)" } ?? "list"
            case .uploadPart(_, let number, _, _): "part \(number)"
            case .complete(_, let parts): "complete \(parts.map(\.number))"
            case .headObject: "head"
            case .abandonUnrecorded: "abandon"
            case .digest(let offset, let length, _): "read \(offset / mib)..<\((offset + length) / mib) MiB"
            case .record(.upload(nil, _)): "forget"
            case .record(.upload(let upload?, _)) where S3ObjectAddress.isCreationMarker(upload.url): "mark"
            case .record, .finish, .awaitPart: nil
            }
        }
    }

    static func report(_ actions: [S3UploadMachine.Action]) -> AttemptReport? {
        if case .finish(let report) = actions.last { return report }
        return nil
    }

    static func s3Error(_ status: Int, _ code: String) -> S3UploadMachine.Response {
        .error(S3ErrorAnswer(status: status, code: code, message: "\(code) happened"))
    }

    /// A server that stores every part and completes.
    static func happy(_ action: S3UploadMachine.Action, _ step: Int) -> S3UploadMachine.Response {
        switch action {
        case .create: .uploadCreated(url: url)
        case .uploadPart(_, let number, _, _): .stored(etag: "\"\(String(repeating: String(number), count: 32))\"", checksum: "AAAAAA==")
        case .putObject: .stored(etag: "\"e\"", checksum: nil)
        case .complete: .object(etag: "\"x-3\"", checksum: nil)
        // Read back, the file's bytes are none of the scripted ETags.
        case .digest: .digested(md5: String(repeating: "0", count: 32), checksum: "BBBBBB==")
        default: .failed("unexpected")
        }
    }

    @Test("a file below multipart_threshold is one PutObject")
    func smallFile() {
        let (actions, machine) = Self.run(.init(length: 1000, partSize: 5 * Self.mib, multipartThreshold: 5 * Self.mib), answer: Self.happy)
        #expect(Self.requests(actions) == ["put"])
        #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
        #expect(machine.objectETag == "\"e\"")
    }

    @Test("a new multipart upload: a creation marker recorded before the creation, the upload before the first part, each part recorded, then completion")
    func newUpload() {
        let (actions, machine) = Self.run(Self.threeParts, answer: Self.happy)
        #expect(Self.requests(actions) == ["mark", "create", "part 1", "part 2", "part 3", "complete [1, 2, 3]"])
        #expect(actions[0] == .record(.upload(ResumableUpload(url: Self.marker, offset: 0, endpointKey: "E"), parts: [])))
        #expect(actions[2] == .record(.upload(ResumableUpload(url: Self.url, offset: 0, endpointKey: "E"), parts: [])))
        #expect(actions[4] == .record(.part(Self.part(1), upload: ResumableUpload(url: Self.url, offset: 5 * Self.mib, endpointKey: "E"), confirmedParts: 1)))
        guard case .uploadPart(_, 3, let offset, let length) = actions[7] else { Issue.record("part 3 expected, got \(actions[7])"); return }
        #expect(offset == 10 * Self.mib && length == 2 * Self.mib)
        #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
        #expect(machine.upload == nil, "a completed upload is forgotten")
        #expect(machine.progressed)
    }

    @Test("a resumed upload sends only the parts the server does not list")
    func resume() {
        let known = ResumableUpload(url: Self.url, offset: 5 * Self.mib, endpointKey: "E")
        let (actions, _) = Self.run(Self.threeParts, known: known, parts: [Self.part(1)]) { action, step in
            switch action {
            // Part 2 arrived before the crash, but its answer was lost: the server lists it.
            case .listParts: .partsListed([Self.part(1, checksum: nil), Self.part(2)], next: nil)
            default: Self.happy(action, step)
            }
        }
        #expect(Self.requests(actions) == ["list", "part 3", "complete [1, 2, 3]"])
        // The listing is recorded, keeping part 1's recorded checksum (the server listed none).
        #expect(actions[1] == .record(.upload(ResumableUpload(url: Self.url, offset: 10 * Self.mib, endpointKey: "E"),
                                              parts: [Self.part(1), Self.part(2)])))
    }

    @Test("a listed part whose checksum is not known (its answer was lost, the listing has none) and whose ETag is not our bytes' MD5 is sent again")
    func unknownChecksum() {
        let known = ResumableUpload(url: Self.url, offset: 5 * Self.mib, endpointKey: "E")
        let (actions, _) = Self.run(Self.threeParts, known: known, parts: [Self.part(1)]) { action, step in
            switch action {
            case .listParts: .partsListed([Self.part(1, checksum: nil), Self.part(2, checksum: nil)], next: nil)
            default: Self.happy(action, step)
            }
        }
        #expect(Self.requests(actions) == ["list", "read 5..<10 MiB", "part 2", "part 3", "complete [1, 2, 3]"])
        let unchecked = S3UploadMachine.Settings(length: 12 * Self.mib, partSize: 5 * Self.mib, multipartThreshold: 5 * Self.mib, checksum: nil)
        let (plain, _) = Self.run(unchecked, known: known, parts: [Self.part(1, checksum: nil)]) { action, step in
            switch action {
            case .listParts: .partsListed([Self.part(1, checksum: nil), Self.part(2, checksum: nil)], next: nil)
            default: Self.happy(action, step)
            }
        }
        #expect(Self.requests(plain) == ["list", "part 3", "complete [1, 2, 3]"], "without checksums the listing is enough")
    }

    @Test("ListParts pages are followed; a listed part of the wrong size is sent again")
    func listingPages() {
        let known = ResumableUpload(url: Self.url, offset: 0, endpointKey: "E")
        let (actions, _) = Self.run(Self.threeParts, known: known) { action, step in
            switch action {
            case .listParts(_, nil): .partsListed([Self.part(1)], next: 1)
            case .listParts(_, 1?): .partsListed([Self.part(2, size: 1)], next: nil)
            default: Self.happy(action, step)
            }
        }
        #expect(Self.requests(actions) == ["list", "list after 1", "part 2", "part 3", "complete [1, 2, 3]"])
        #expect(actions.contains(.record(.upload(ResumableUpload(url: Self.url, offset: 5 * Self.mib, endpointKey: "E"), parts: [Self.part(1)]))))
    }

    @Test("a listing follows every page a file's parts fill (2,500 parts: 25 pages of 100), and a server that keeps paging is bounded")
    func longListing() {
        let settings = S3UploadMachine.Settings(length: 2_500 * 5 * Self.mib, partSize: 5 * Self.mib, multipartThreshold: 5 * Self.mib, endpointKey: "E")
        let known = ResumableUpload(url: Self.url, offset: 0, endpointKey: "E")
        var machine = S3UploadMachine(settings: settings, known: known, parts: [])
        #expect(machine.listingPageLimit == 27)
        var action = machine.start()
        var pages = 0
        while case .listParts(_, let marker) = action {
            #expect(marker == (pages == 0 ? nil : pages * 100))
            let page = (pages * 100 + 1...pages * 100 + 100).map { Self.part($0) }
            pages += 1
            action = machine.listed(.partsListed(page, next: pages < 25 ? pages * 100 : nil))
        }
        #expect(pages == 25, "every page is read")
        guard case .record(.upload(_, let parts)) = action else { Issue.record("no record after the listing: \(action)"); return }
        #expect(parts.count == 2_500, "every listed part is kept, none sent again")

        // A server that never stops paging: the listing ends at the bound, with what it listed.
        var endless = S3UploadMachine(settings: Self.threeParts, known: known, parts: [])
        action = endless.start()
        var asked = 0
        while case .listParts = action, asked < 100 {
            asked += 1
            action = endless.listed(.partsListed([], next: asked))
        }
        #expect(asked == endless.listingPageLimit && asked == 20)
    }

    @Test("the server lost the upload (NoSuchUpload): forget it, create a new one")
    func lostUpload() {
        let known = ResumableUpload(url: Self.url, offset: 5 * Self.mib, endpointKey: "E")
        let (actions, _) = Self.run(Self.threeParts, known: known, parts: [Self.part(1)]) { action, step in
            if case .listParts = action { return Self.s3Error(404, "NoSuchUpload") }
            return Self.happy(action, step)
        }
        // The marker replaces the lost upload and its parts.
        #expect(Self.requests(actions) == ["list", "mark", "create", "part 1", "part 2", "part 3", "complete [1, 2, 3]"])
        #expect(actions[1] == .record(.upload(ResumableUpload(url: Self.marker, offset: 0, endpointKey: "E"), parts: [])))
    }

    @Test("a recorded creation marker (a crash lost the creation's answer): the key's uploads are abandoned, then a new one is made",
          arguments: [
            (S3UploadMachine.Response.uploadsAbandoned(1), S3UploadMachine.Notice?.some(.abandoned(count: 1))),
            (.uploadsAbandoned(0), nil),
            // Not allowed to list uploads: deliver anyway, and say so.
            (s3Error(403, "AccessDenied"), .notAbandoned(code: "AccessDenied")),
            (s3Error(501, "NotImplemented"), .notAbandoned(code: "NotImplemented")),
            // Only the listing's signature refused (moto, for a prefix holding "/"): the creation,
            // signed with the same keys, tells whether they are wrong.
            (s3Error(403, "SignatureDoesNotMatch"), .notAbandoned(code: "SignatureDoesNotMatch")),
          ])
    func creationMarker(_ listing: S3UploadMachine.Response, _ notice: S3UploadMachine.Notice?) {
        let known = ResumableUpload(url: Self.marker, offset: 0, endpointKey: "E")
        var notices: [S3UploadMachine.Notice] = []
        var machine = S3UploadMachine(settings: Self.threeParts, known: known, parts: [])
        #expect(machine.start() == .abandonUnrecorded)
        let next = machine.abandoned(listing)
        notices += machine.takeNotices()
        #expect(next == .record(.upload(known, parts: [])), "the marker again, for this creation")
        #expect(notices == (notice.map { [$0] } ?? []))
        let (actions, _) = Self.run(Self.threeParts, known: known) { action, step in
            if case .abandonUnrecorded = action { return listing }
            return Self.happy(action, step)
        }
        #expect(Self.requests(actions) == ["abandon", "mark", "create", "part 1", "part 2", "part 3", "complete [1, 2, 3]"])
        #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
    }

    @Test("the uploads cannot be listed or aborted now (no answer, 5xx, SlowDown): the attempt ends, the marker stays for the next",
          arguments: [
            S3UploadMachine.Response.failed("connection refused"), .cancelled, s3Error(503, "SlowDown"), s3Error(500, "InternalError"),
            s3Error(403, "RequestTimeTooSkewed"), .failed("the answer was cut"),
          ])
    func creationMarkerNotNow(_ listing: S3UploadMachine.Response) {
        let known = ResumableUpload(url: Self.marker, offset: 0, endpointKey: "E")
        var machine = S3UploadMachine(settings: Self.threeParts, known: known, parts: [])
        #expect(machine.start() == .abandonUnrecorded)
        guard case .finish = machine.abandoned(listing) else { Issue.record("the attempt should end"); return }
        #expect(machine.upload == known)
    }

    @Test("the listing and then the creation refused for their signature (wrong keys): the marker stays, for the upload a crash may have left")
    func wrongKeysKeepTheMarker() {
        let known = ResumableUpload(url: Self.marker, offset: 0, endpointKey: "E")
        let (actions, machine) = Self.run(Self.threeParts, known: known) { action, step in
            switch action {
            case .abandonUnrecorded, .create: return Self.s3Error(403, "SignatureDoesNotMatch")
            default: return Self.happy(action, step)
            }
        }
        #expect(Self.requests(actions) == ["abandon", "mark", "create"])
        #expect(machine.upload == known)
        guard case .answered(let answer)? = Self.report(actions) else { Issue.record("expected the refusal as the answer"); return }
        #expect(answer.verdict(now: Date()) == .permanent)
    }

    @Test("CreateMultipartUpload refused (a 4xx): no upload was made, so the marker goes with the attempt's outcome")
    func refusedCreation() {
        let (actions, machine) = Self.run(Self.threeParts) { action, step in
            if case .create = action { return Self.s3Error(403, "AccessDenied") }
            return Self.happy(action, step)
        }
        #expect(Self.requests(actions) == ["mark", "create"])
        #expect(machine.upload == nil)
        guard case .answered? = Self.report(actions) else { Issue.record("expected the refusal as the answer"); return }
    }

    @Test("a creation that fails leaves the marker recorded: the next attempt looks for the upload first")
    func failedCreation() {
        let (actions, machine) = Self.run(Self.threeParts) { action, step in
            if case .create = action { return .failed("the connection was reset") }
            return Self.happy(action, step)
        }
        #expect(Self.requests(actions) == ["mark", "create"])
        #expect(machine.upload == ResumableUpload(url: Self.marker, offset: 0, endpointKey: "E"))
    }

    /// The three parts of ``threeParts``, each confirmed, and the upload that holds them all.
    static let allConfirmed = [part(1), part(2), part(3, size: 2 * mib)]
    static let completedUpload = ResumableUpload(url: url, offset: 12 * mib, endpointKey: "E")

    @Test("every part confirmed and the upload gone: HEAD finds our object (the completion's answer was lost)")
    func completedEarlier() {
        let (parts, known) = (Self.allConfirmed, Self.completedUpload)
        let expected = S3ETag.expected(fromPartETags: parts.map(\.etag))!
        let (actions, machine) = Self.run(Self.threeParts, known: known, parts: parts) { action, _ in
            switch action {
            case .listParts: Self.s3Error(404, "NoSuchUpload")
            case .headObject: .object(etag: "\"\(expected)\"", checksum: nil)
            default: .failed("unexpected")
            }
        }
        #expect(Self.requests(actions) == ["list", "head"])
        #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
        #expect(machine.takeNoticesCopy().contains(.completedEarlier))
    }

    @Test("HEAD finds another object (or none): the upload starts over")
    func headMismatch() {
        let (parts, known) = (Self.allConfirmed, Self.completedUpload)
        let (actions, _) = Self.run(Self.threeParts, known: known, parts: parts) { action, step in
            switch action {
            case .listParts: Self.s3Error(404, "NoSuchUpload")
            case .complete: Self.s3Error(404, "NoSuchUpload")
            case .headObject: .object(etag: "\"someone-else\"", checksum: nil)
            default: Self.happy(action, step)
            }
        }
        // Started over once; the new upload's completion was "lost" too, and HEAD again finds
        // another object: bounded by the creation limit.
        #expect(Self.requests(actions).filter { $0 == "create" }.count == S3UploadMachine.creationLimit)
        guard case .noAnswer? = Self.report(actions) else { Issue.record("expected noAnswer, got \(String(describing: Self.report(actions)))"); return }
    }

    @Test("ListParts refused for good (a key without s3:ListMultipartUploadParts): the recorded parts are kept, the rest sent")
    func listingRefused() {
        let known = ResumableUpload(url: Self.url, offset: 10 * Self.mib, endpointKey: "E")
        for refusal in [Self.s3Error(403, "AccessDenied"), Self.s3Error(405, "MethodNotAllowed"), Self.s3Error(501, "NotImplemented")] {
            let (actions, machine) = Self.run(Self.threeParts, known: known, parts: [Self.part(1), Self.part(2)]) { action, step in
                if case .listParts = action { return refusal }
                return Self.happy(action, step)
            }
            #expect(Self.requests(actions) == ["list", "part 3", "complete [1, 2, 3]"])
            #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
            guard case .error(let error) = refusal else { continue }
            #expect(machine.takeNoticesCopy().contains(.partsNotListed(code: error.code!)))
        }
        // Every part recorded and the completion done by a request whose answer was lost: the
        // completion says NoSuchUpload, and HEAD finds the object.
        let parts = Self.allConfirmed
        let expected = S3ETag.expected(fromPartETags: parts.map(\.etag))!
        let (done, _) = Self.run(Self.threeParts, known: Self.completedUpload, parts: parts) { action, _ in
            switch action {
            case .listParts: Self.s3Error(403, "AccessDenied")
            case .complete: Self.s3Error(404, "NoSuchUpload")
            case .headObject: .object(etag: "\"\(expected)\"", checksum: nil)
            default: .failed("unexpected")
            }
        }
        #expect(Self.requests(done) == ["list", "complete [1, 2, 3]", "head"])
        #expect(Self.report(done) == .answered(ServerAnswer(status: 200)))
        // A refusal that may pass (SlowDown, a skewed clock) still ends the attempt.
        let (later, _) = Self.run(Self.threeParts, known: known, parts: [Self.part(1)]) { action, _ in
            if case .listParts = action { return Self.s3Error(403, "RequestTimeTooSkewed") }
            return .failed("unexpected")
        }
        #expect(Self.requests(later) == ["list"])
    }

    @Test("every part confirmed, the upload gone and HEAD refused (403: a key that may write but not read): the object is stored again")
    func headRefused() {
        let (parts, known) = (Self.allConfirmed, Self.completedUpload)
        let (actions, machine) = Self.run(Self.threeParts, known: known, parts: parts) { action, step in
            switch action {
            case .listParts: Self.s3Error(404, "NoSuchUpload")
            // A HEAD answer has no body, so no error code.
            case .headObject: .error(S3ErrorAnswer(status: 403, code: nil, message: nil))
            default: Self.happy(action, step)
            }
        }
        #expect(Self.requests(actions) == ["list", "head", "mark", "create", "part 1", "part 2", "part 3", "complete [1, 2, 3]"])
        #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
        #expect(machine.takeNoticesCopy().contains(.objectUnreadable))
        // Any other refusal of HEAD still ends the attempt as that answer.
        let (other, _) = Self.run(Self.threeParts, known: known, parts: parts) { action, _ in
            switch action {
            case .listParts: Self.s3Error(404, "NoSuchUpload")
            case .headObject: .error(S3ErrorAnswer(status: 400, code: nil, message: nil))
            default: .failed("unexpected")
            }
        }
        #expect(Self.requests(other) == ["list", "head"])
    }

    @Test("a part refused for its checksum is sent again, at most three times")
    func badDigest() {
        var refusals = 0
        let (actions, _) = Self.run(Self.threeParts) { action, step in
            if case .uploadPart(_, 2, _, _) = action, refusals < 1 { refusals += 1; return Self.s3Error(400, "BadDigest") }
            return Self.happy(action, step)
        }
        #expect(Self.requests(actions) == ["mark", "create", "part 1", "part 2", "part 2", "part 3", "complete [1, 2, 3]"])
        let (always, _) = Self.run(Self.threeParts) { action, step in
            if case .uploadPart(_, 1, _, _) = action { return Self.s3Error(400, "XAmzContentChecksumMismatch") }
            return Self.happy(action, step)
        }
        #expect(Self.requests(always) == ["mark", "create", "part 1", "part 1", "part 1"])
        guard case .answered(let answer)? = Self.report(always) else { Issue.record("expected an answer"); return }
        #expect(answer.verdict(now: Date()) == .retry(notBefore: nil))
    }

    @Test("S3 errors are classified by code, with advice", arguments: [
        (403, "SignatureDoesNotMatch", AttemptVerdict.permanent, "check secret_access_key"),
        (403, "RequestTimeTooSkewed", .retry(notBefore: nil), "check the time"),
        (403, "InvalidAccessKeyId", .permanent, "check access_key_id"),
        (404, "NoSuchBucket", .permanent, "the bucket does not exist"),
        (403, "AccessDenied", .permanent, "s3:PutObject"),
        (400, "EntityTooSmall", .permanent, "raise part_size"),
        (503, "SlowDown", .retry(notBefore: nil), "S3 SlowDown"),
        (400, "RequestTimeout", .retry(notBefore: nil), "S3 RequestTimeout"),
        (500, "InternalError", .retry(notBefore: nil), "S3 InternalError"),
        (400, "ExpiredToken", .permanent, "renew session_token"),
    ])
    func classification(_ status: Int, _ code: String, _ verdict: AttemptVerdict, _ advice: String) {
        let (actions, _) = Self.run(Self.threeParts) { action, _ in Self.s3Error(status, code) }
        guard case .answered(let answer)? = Self.report(actions) else { Issue.record("expected an answer"); return }
        #expect(answer.verdict(now: Date()) == verdict)
        #expect(answer.hint?.contains(advice) == true, "\(answer.hint ?? "-")")
        #expect(answer.hint?.contains("\(code) happened") == true, "the server's message is kept")
        #expect(answer.during == "creating the multipart upload")
    }

    @Test("a server that refuses S3's additional checksums (Backblaze B2's InvalidArgument) is told to set checksum = \"none\"")
    func checksumsUnsupported() {
        let b2 = S3ErrorAnswer(status: 400, code: "InvalidArgument", message: "Unsupported header 'x-amz-checksum-crc32c' received for this API call.")
        #expect(b2.verdict == nil, "a 400 stays permanent: every file would meet it again")
        #expect(b2.answer(during: "uploading").hint?.hasSuffix("set checksum = \"none\"") == true, "\(b2.answer(during: "uploading").hint ?? "-")")
        let other = S3ErrorAnswer(status: 400, code: "InvalidArgument", message: "Invalid storage class.")
        #expect(other.answer(during: "uploading").hint == "S3 InvalidArgument: Invalid storage class.")
    }

    @Test("an <Error> inside a 200 to CompleteMultipartUpload is not a success")
    func errorInside200() {
        let (actions, _) = Self.run(Self.threeParts) { action, step in
            if case .complete = action { return Self.s3Error(200, "InternalError") }
            return Self.happy(action, step)
        }
        guard case .answered(let answer)? = Self.report(actions) else { Issue.record("expected an answer"); return }
        #expect(!answer.isSuccess)
        #expect(answer.verdict(now: Date()) == .retry(notBefore: nil))
        let unknown = S3ErrorAnswer(status: 200, code: nil, message: nil).answer(during: "completing")
        #expect(!unknown.isSuccess)
        // A 200 whose document never came whole: the completion may have happened; the next
        // attempt asks the server, the file is not put aside.
        let (cut, _) = Self.run(Self.threeParts) { action, step in
            if case .complete = action { return .error(S3ErrorAnswer(status: 200, code: nil, message: nil, body: Array("      ".utf8))) }
            return Self.happy(action, step)
        }
        guard case .noAnswer(let message)? = Self.report(cut) else { Issue.record("expected noAnswer, got \(String(describing: Self.report(cut)))"); return }
        #expect(message.contains("asks the server"))
    }

    @Test("the object's composite checksum must be the one computed from the parts")
    func compositeChecksum() {
        let checksums = ["AAAAAA==", "AAAAAA==", "AAAAAA=="]
        let right = S3ChecksumAlgorithm.crc32c.composite(ofParts: checksums)!
        for (got, succeeds) in [(right, true), ("AAAAAB==-3", false)] {
            let (actions, _) = Self.run(Self.threeParts) { action, step in
                if case .complete = action { return .object(etag: "\"x-3\"", checksum: got) }
                return Self.happy(action, step)
            }
            if succeeds {
                #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)), "\(got)")
            } else {
                guard case .refused(let reason)? = Self.report(actions) else { Issue.record("expected refused for \(got)"); continue }
                #expect(reason.contains("checksum"))
            }
        }
    }

    @Test("a full-object CRC-32C (no -N) must be the whole file's, derived from the parts' CRCs and lengths",
          arguments: [(S3ChecksumAlgorithm.crc32c, 0, true), (.crc32c, 1, false), (.crc32c, 9, false), (.sha256, 1, true)])
    func fullObjectChecksum(_ algorithm: S3ChecksumAlgorithm, flippedByte: Int, succeeds: Bool) {
        // Parts of 4, 4 and 2 bytes; the server's full-object CRC is of the file with one byte
        // changed (none for index 0's case). A full-object SHA-256 cannot be derived from the
        // parts' SHA-256s, so it is taken as the server says.
        let file = Array("0123456789".utf8)
        let settings = S3UploadMachine.Settings(length: 10, partSize: 4, multipartThreshold: 4, endpointKey: "E", checksum: algorithm)
        var served = file
        if flippedByte > 0 { served[flippedByte] ^= 0x01 }
        let got = algorithm == .crc32c ? CRC32C.hash(data: served).base64 : "wholeFileSHA256+Base64="
        let (actions, _) = Self.run(settings) { action, step in
            switch action {
            case .uploadPart(_, let number, let offset, let length):
                return .stored(etag: "\"p\(number)\"", checksum: algorithm.checksum(of: Array(file[Int(offset)..<Int(offset + length)])))
            case .complete:
                return .object(etag: "\"x-3\"", checksum: got)
            default:
                return Self.happy(action, step)
            }
        }
        if succeeds {
            #expect(Self.report(actions) == .answered(ServerAnswer(status: 200)))
        } else {
            guard case .refused(let reason)? = Self.report(actions) else { Issue.record("expected refused, got \(String(describing: Self.report(actions)))"); return }
            #expect(reason.contains("checksum"))
        }
    }

    @Test("requests that confirm nothing new end the attempt")
    func noProgressBound() {
        let (actions, _) = Self.run(Self.threeParts) { action, step in
            if case .complete = action { return Self.s3Error(400, "InvalidPart") }
            return Self.happy(action, step)
        }
        guard case .noAnswer? = Self.report(actions) else { Issue.record("expected noAnswer, got \(String(describing: Self.report(actions)))"); return }
        #expect(actions.count < 200)
    }

    @Test("no answer, a changed file and a cancel end the attempt as such")
    func otherEnds() {
        let (failed, _) = Self.run(Self.threeParts) { _, _ in .failed("connection reset") }
        #expect(Self.report(failed) == .noAnswer("connection reset"))
        let (changed, _) = Self.run(Self.threeParts) { action, step in
            if case .uploadPart = action { return .sourceChanged }
            return Self.happy(action, step)
        }
        #expect(Self.report(changed) == .sourceChanged(nil))
        var machine = S3UploadMachine(settings: Self.threeParts, known: nil, parts: [])
        _ = machine.start()
        #expect(machine.cancel() == .finish(.stopped))
    }

    @Test("part layout: sizes grow so no file needs more than 10,000 parts")
    func partLayout() {
        let settings = S3Settings(bucket: "b", key: .literal("k"), accessKeyID: .literal("a"), secretAccessKey: .literal("s"), partSize: 8 * Self.mib)
        #expect(settings.partSize(forLength: 64 * Self.mib) == 8 * Self.mib)
        let huge: Int64 = 200 << 30  // 200 GiB: 8 MiB parts would be 25,600
        let grown = settings.partSize(forLength: huge)
        #expect(grown % Self.mib == 0)
        #expect((huge + grown - 1) / grown <= 10_000)
        let machine = S3UploadMachine.Settings(length: 64 * Self.mib, partSize: 8 * Self.mib, multipartThreshold: 8 * Self.mib)
        #expect(machine.partCount == 8)
        #expect(machine.range(ofPart: 8) == (56 * Self.mib)..<(64 * Self.mib))
        #expect(S3UploadMachine.Settings(length: 8 * Self.mib + 1, partSize: 8 * Self.mib, multipartThreshold: 1).partCount == 2)
    }
}

extension S3UploadMachine {
    /// The notices so far, without consuming a copy's.
    func takeNoticesCopy() -> [Notice] {
        var copy = self
        return copy.takeNotices()
    }
}
