import FerryConfig
import FerryDelivery
import FerryQueue
import Foundation
import Testing

/// Drives a ``ResumableUploadMachine`` with scripted answers: no network, no files. Files over 100
/// bytes count as large (``ResumableUploadMachine/Settings/wholeBodyLimit``).
struct ResumableScript {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    var machine: ResumableUploadMachine
    var actions: [ResumableUploadMachine.Action] = []

    init(length: Int64 = 1000, chunkSize: Int64? = nil, known: ResumableUpload? = nil, interop: ResumableInteropVersion = .v9,
         endpoint: String = "https://up.example/media", wholeBodyLimit: Int64 = 100) {
        machine = ResumableUploadMachine(
            settings: .init(endpoint: endpoint, length: length, chunkSize: chunkSize, endpointKey: "k", interop: interop, wholeBodyLimit: wholeBodyLimit),
            known: known, now: Self.now)
        actions.append(machine.start())
    }

    var last: ResumableUploadMachine.Action { actions.last! }

    mutating func step(_ next: (inout ResumableUploadMachine) -> ResumableUploadMachine.Action) {
        actions.append(next(&machine))
        while case .record = last { actions.append(machine.recorded()) }
    }

    static func answer(_ status: Int, _ headers: [String: String] = [:], body: String = "", sent: Int64 = 0) -> ResumableUploadMachine.Response {
        .answer(status: status, headers: headers.map { (name: $0.key, value: $0.value) }, body: Array(body.utf8), bytesSent: sent)
    }

    /// Feeds `response` to whatever the last action asked for; records are acknowledged at once.
    mutating func reply(_ response: ResumableUploadMachine.Response) {
        switch last {
        case .create: step { $0.created(response) }
        case .askOffset: step { $0.offsetAsked(response) }
        case .append: step { $0.appended(response) }
        case .terminate: step { $0.terminated() }
        default: Issue.record("no request pending: \(last)")
        }
    }

    /// Discovery that found an offer with `limit` (an `Upload-Limit` value), then a creation answered
    /// 201 at `/uploads/1`.
    mutating func createdOffered(_ limit: String = "min-size=0", interop: ResumableInteropVersion = .v9) {
        #expect(last == .discover)
        step { $0.discovered(.offered(UploadLimit(limit, interop: interop)!)) }
        #expect(last == .create(bodyLength: 0, complete: false))
        reply(Self.answer(201, ["Location": "/uploads/1", "Upload-Complete": "?0", "Upload-Offset": "0"]))
    }

    var records: [ResumableUpload] {
        actions.compactMap { if case .record(let upload) = $0 { upload } else { nil } }
    }

    /// How the attempt ended; an answer's headers (kept for the job, checked in their own tests)
    /// are left out, so expectations say what the machine decided.
    var report: AttemptReport? {
        guard case .finish(let report) = last else { return nil }
        guard case .answered(var answer) = report else { return report }
        answer.headers = []
        return .answered(answer)
    }
}

@Suite("resumable upload machine (the IETF draft)")
struct ResumableUploadMachineTests {
    let url = "https://up.example/uploads/1"

    @Test("a small file goes whole in one request with Upload-Complete: ?1, to any server, and its answer is the application's")
    func smallFileWhole() {
        for length: Int64 in [0, 1, 100] {
            var script = ResumableScript(length: length)
            #expect(script.last == .create(bodyLength: length, complete: true), "no OPTIONS for a small file")
            script.reply(ResumableScript.answer(200, ["Content-Type": "application/json"], body: #"{"id":"7"}"#, sent: length))
            #expect(script.report == .answered(ServerAnswer(status: 200, body: Array(#"{"id":"7"}"#.utf8), contentType: "application/json")))
            #expect(script.records.isEmpty)
        }
    }

    @Test("whole_body_limit 0 (the sender's choice after a failed attempt): a small file, too, is created empty where resumption is offered")
    func noWholeBody() {
        let empty = ResumableScript(length: 0, wholeBodyLimit: 0)
        #expect(empty.last == .create(bodyLength: 0, complete: true), "an empty file is whole in its creation")
        for length: Int64 in [1, 100] {
            var offered = ResumableScript(length: length, wholeBodyLimit: 0)
            offered.createdOffered()
            #expect(offered.records == [ResumableUpload(url: url, offset: 0, endpointKey: "k")], "the URL is recorded before any byte is sent")
            #expect(offered.last == .append(url: url, offset: 0, length: length, complete: true))
            var plain = ResumableScript(length: length, wholeBodyLimit: 0)
            plain.step { $0.discovered(.notOffered) }
            #expect(plain.last == .create(bodyLength: length, complete: true), "a server without resumption still gets the whole file")
        }
    }

    @Test("a large file to a server that offers resumption: empty creation, its URL recorded, one append, the application's answer")
    func largeFileOffered() {
        var script = ResumableScript()
        script.createdOffered()
        #expect(script.records == [ResumableUpload(url: url, offset: 0, endpointKey: "k")], "the URL is recorded before any byte is sent")
        #expect(script.last == .append(url: url, offset: 0, length: 1000, complete: true))
        // swift-nio-extras 1.35 answers the completing request with `Upload-Incomplete: ?0`.
        script.reply(ResumableScript.answer(200, ["Upload-Incomplete": "?0", "Upload-Offset": "1000"], body: "ok", sent: 1000))
        #expect(script.report == .answered(ServerAnswer(status: 200, body: Array("ok".utf8))))
        #expect(script.machine.bytesSent == 1000)
        #expect(!script.machine.answeredEarly)
    }

    @Test("a completing append answered 2xx before all of it was sent: early unless the answer says Upload-Complete: ?1", arguments: [
        ([:], Int64(400), true), (["Upload-Complete": "?1"], Int64(400), false), ([:], Int64(1000), false),
    ] as [([String: String], Int64, Bool)])
    func earlyCompletion(headers: [String: String], sent: Int64, early: Bool) {
        var script = ResumableScript()
        script.createdOffered()
        script.reply(ResumableScript.answer(200, headers, body: "ok", sent: sent))
        #expect(script.report == .answered(ServerAnswer(status: 200, body: Array("ok".utf8))))
        #expect(script.machine.answeredEarly == early)
    }

    @Test("an append answered 2xx without Upload-Offset is credited only if all of it was sent; else HEAD asks", arguments: [
        (Int64(300), Int64?(300)), (400, 300), (299, nil), (0, nil),
    ] as [(Int64, Int64?)])
    func appendWithoutOffset(sent: Int64, credited: Int64?) {
        var script = ResumableScript(chunkSize: 300)
        script.createdOffered()
        #expect(script.last == .append(url: url, offset: 0, length: 300, complete: false))
        script.reply(ResumableScript.answer(204, ["Upload-Complete": "?0"], sent: sent))
        if let credited {
            #expect(script.records.map(\.offset) == [0, credited])
            #expect(script.last == .append(url: url, offset: credited, length: 300, complete: false))
        } else {
            #expect(script.records.map(\.offset) == [0], "nothing credited")
            #expect(script.last == .askOffset(url: url))
        }
    }

    @Test("appends answered early without Upload-Offset, each confirmed by HEAD: the upload goes on to completion")
    func earlyAnswersConfirmedByHead() {
        var script = ResumableScript(chunkSize: 300)
        script.createdOffered()
        var offset: Int64 = 0
        while offset < 900 {
            #expect(script.last == .append(url: url, offset: offset, length: 300, complete: false))
            script.reply(ResumableScript.answer(204, ["Upload-Complete": "?0"], sent: 100))
            #expect(script.last == .askOffset(url: url))
            offset += 300
            script.reply(ResumableScript.answer(204, ["Upload-Offset": String(offset), "Upload-Complete": "?0"]))
        }
        #expect(script.last == .append(url: url, offset: 900, length: 100, complete: true))
        script.reply(ResumableScript.answer(200, ["Upload-Complete": "?1"], body: "ok", sent: 100))
        #expect(script.report?.isSuccessAnswer == true)
        #expect(script.records.map(\.offset) == [0, 300, 600, 900])
    }

    @Test("a creation's confirmed offset beyond the bytes it carried ends the attempt, nothing recorded")
    func creationOffsetBeyondBody() {
        // An empty creation (a large file, resumption offered) answered with these offsets.
        for (offset, recorded) in [("0", Int64?.some(0)), ("1", nil), ("999", nil), ("1000", nil), ("-1", 0)] {
            var script = ResumableScript()
            script.step { $0.discovered(.offered(UploadLimit("min-size=0", interop: .v9)!)) }
            script.reply(ResumableScript.answer(201, ["Location": "/uploads/1", "Upload-Complete": "?0", "Upload-Offset": offset]))
            #expect(script.records.first?.offset == recorded, "\(offset)")
            if recorded == nil {
                guard case .noAnswer(let reason)? = script.report else { Issue.record("\(script.last)"); continue }
                #expect(reason.contains("confirmed \(offset) bytes of it, but the creation carried 0"))
            }
        }
        // A small file's creation carries it whole; the server kept part of it (Upload-Complete: ?0).
        for (offset, recorded) in [("20", Int64?.some(20)), ("50", 50), ("51", nil)] {
            var script = ResumableScript(length: 50)
            #expect(script.last == .create(bodyLength: 50, complete: true))
            script.reply(ResumableScript.answer(201, ["Location": "/uploads/1", "Upload-Complete": "?0", "Upload-Offset": offset], sent: 50))
            #expect(script.records.first?.offset == recorded, "\(offset)")
        }
    }

    @Test("a server whose OPTIONS answer does not offer resumption gets the whole file as an ordinary upload")
    func notOffered() {
        var script = ResumableScript()
        script.step { $0.discovered(.notOffered) }
        #expect(script.last == .create(bodyLength: 1000, complete: true))
        script.reply(ResumableScript.answer(201, body: "stored", sent: 1000))
        #expect(script.report == .answered(ServerAnswer(status: 201, body: Array("stored".utf8))))
        var failing = ResumableScript()
        failing.step { $0.discovered(.failed("connection refused")) }
        #expect(failing.report == .noAnswer("asking the server whether it offers resumable uploads (OPTIONS): connection refused"))
        var unreachable = ResumableScript()
        unreachable.step { $0.discovered(.unreachable("connection to h:1 failed: Connection refused")) }
        #expect(unreachable.report == .unreachable("asking the server whether it offers resumable uploads (OPTIONS): connection to h:1 failed: Connection refused"))
    }

    @Test("appends follow chunk_size and the server's max-append-size and min-append-size; the last completes the upload")
    func appendSizes() {
        let cases: [(chunk: Int64?, limit: String, pieces: [Int64])] = [
            (nil, "max-append-size=300", [300, 300, 300, 100]),
            (400, "max-append-size=300", [300, 300, 300, 100]),
            (250, "min-size=0", [250, 250, 250, 250]),
            (100, "min-append-size=300", [300, 300, 300, 100]),
            (nil, "max-append-size=600, min-append-size=100", [600, 400]),
        ]
        for (chunk, limit, pieces) in cases {
            var script = ResumableScript(chunkSize: chunk)
            script.createdOffered(limit)
            var offset: Int64 = 0
            for (index, piece) in pieces.enumerated() {
                let complete = index == pieces.count - 1
                #expect(script.last == .append(url: url, offset: offset, length: piece, complete: complete), "\(chunk ?? 0) \(limit)")
                script.reply(complete ? ResumableScript.answer(200, ["Upload-Complete": "?1"])
                                      : ResumableScript.answer(204, ["Upload-Complete": "?0", "Upload-Offset": String(offset + piece)]))
                offset += piece
            }
            #expect(script.report?.isSuccessAnswer == true)
            #expect(script.records.map(\.offset) == [0] + pieces.dropLast().reduce(into: [Int64]()) { $0.append(($0.last ?? 0) + $1) })
        }
    }

    @Test("a file larger than the server's max-size is refused before a byte is sent")
    func maxSize() {
        var script = ResumableScript()
        script.step { $0.discovered(.offered(UploadLimit(maxSize: 999))) }
        #expect(script.report == .refused("the file (1000 bytes) is larger than the server accepts (Upload-Limit max-size=999)"))
    }

    @Test("a known upload is resumed from the offset HEAD reports, which may be less than was sent")
    func resumes() {
        var script = ResumableScript(known: ResumableUpload(url: url, offset: 700, endpointKey: "k"))
        #expect(script.last == .askOffset(url: url), "no OPTIONS, no creation")
        script.reply(ResumableScript.answer(204, ["Upload-Offset": "600", "Upload-Complete": "?0", "Cache-Control": "no-store"]))
        #expect(script.records == [ResumableUpload(url: url, offset: 600, endpointKey: "k")])
        #expect(script.last == .append(url: url, offset: 600, length: 400, complete: true))
    }

    @Test("what HEAD can say about a known upload", arguments: [
        (404, ["Content-Length": "0"], "create"),
        (410, [:], "create"),
        (204, ["Upload-Offset": "1200", "Upload-Complete": "?0"], "terminate"),
        (204, ["Upload-Offset": "10", "Upload-Complete": "?0", "Upload-Length": "999"], "terminate"),
        (204, ["Upload-Offset": "1000", "Upload-Complete": "?1"], "done"),
        (204, ["Upload-Offset": "10", "Upload-Complete": "?1"], "create"),
        (204, ["Upload-Offset": "1000", "Upload-Complete": "?0"], "complete"),
        (204, [:], "noAnswer"),
        (503, ["Retry-After": "5"], "answered"),
        // A refusal (a rotated token): the attempt's answer, not a lost upload.
        (403, [:], "refused"),
    ] as [(Int, [String: String], String)])
    func headAnswers(status: Int, headers: [String: String], outcome: String) {
        var script = ResumableScript(known: ResumableUpload(url: url, offset: 500, endpointKey: "k"))
        script.reply(ResumableScript.answer(status, headers))
        switch outcome {
        case "create": #expect(script.last == .create(bodyLength: 0, complete: false), "a lost or finished upload is created again")
        case "terminate":
            #expect(script.last == .terminate(url: url))
            script.reply(.failed("ignored", bytesSent: 0))
            #expect(script.last == .create(bodyLength: 0, complete: false))
        case "done": #expect(script.report?.isSuccessAnswer == true, "a completed upload whose last answer was lost is delivered")
        case "complete": #expect(script.last == .append(url: url, offset: 1000, length: 0, complete: true), "all bytes there: complete it")
        case "noAnswer": #expect(script.report == .noAnswer("the server's answer to HEAD had no Upload-Offset"))
        case "refused":
            #expect(script.report == .answered(ServerAnswer(status: 403, during: "asking for the upload's offset")))
            #expect(script.machine.upload?.url == url)
        default: #expect(script.report == .answered(ServerAnswer(status: 503, retryAfter: "5", during: "asking for the upload's offset")))
        }
    }

    @Test("a 409 asks for the offset; the same offset again means the server is busy with the upload")
    func conflict() {
        var script = ResumableScript()
        script.createdOffered()
        script.reply(ResumableScript.answer(409, ["Upload-Offset": "0"]))
        #expect(script.last == .askOffset(url: url))
        script.reply(ResumableScript.answer(204, ["Upload-Offset": "300", "Upload-Complete": "?0"]))
        #expect(script.last == .append(url: url, offset: 300, length: 700, complete: true))
        script.reply(ResumableScript.answer(409))
        script.reply(ResumableScript.answer(204, ["Upload-Offset": "300", "Upload-Complete": "?0"]))
        #expect(script.report == .noAnswer("the server reports the upload busy (409 at the offset it confirms): an earlier request may still hold it"))
    }

    @Test("an append the server lost (404) starts the upload over; a 413 halves the appends")
    func lostAndTooLarge() {
        var lost = ResumableScript()
        lost.createdOffered()
        lost.reply(ResumableScript.answer(404))
        #expect(lost.last == .create(bodyLength: 0, complete: false))
        var large = ResumableScript(length: 1 << 20)
        large.createdOffered()
        large.reply(ResumableScript.answer(413))
        #expect(large.last == .askOffset(url: url))
        large.reply(ResumableScript.answer(204, ["Upload-Offset": "0", "Upload-Complete": "?0"]))
        #expect(large.last == .append(url: url, offset: 0, length: 512 << 10, complete: false))
    }

    @Test("a file within the whole-body limit but over chunk_size is created empty and appended in chunks where resumption is offered")
    func smallFileOverChunkSize() {
        var offered = ResumableScript(length: 1000, chunkSize: 400, wholeBodyLimit: 4 << 20)
        offered.createdOffered()
        #expect(offered.last == .append(url: url, offset: 0, length: 400, complete: false))
        var plain = ResumableScript(length: 1000, chunkSize: 400, wholeBodyLimit: 4 << 20)
        plain.step { $0.discovered(.notOffered) }
        #expect(plain.last == .create(bodyLength: 1000, complete: true), "where nothing resumes, chunk_size cannot apply")
        let within = ResumableScript(length: 400, chunkSize: 400, wholeBodyLimit: 4 << 20)
        #expect(within.last == .create(bodyLength: 400, complete: true), "no OPTIONS for a file within chunk_size")
    }

    @Test("a 413 to a creation carrying the whole file (a proxy's body limit): appends of at most half where resumption is offered, else the 413 is the answer")
    func wholeCreationTooLarge() {
        let length: Int64 = 2 << 20
        var offered = ResumableScript(length: length, wholeBodyLimit: 4 << 20)
        #expect(offered.last == .create(bodyLength: length, complete: true))
        offered.reply(ResumableScript.answer(413, body: "too large", sent: 1 << 20))
        offered.createdOffered()
        #expect(offered.last == .append(url: url, offset: 0, length: length / 2, complete: false))
        offered.reply(ResumableScript.answer(413))
        #expect(offered.last == .askOffset(url: url))
        offered.reply(ResumableScript.answer(204, ["Upload-Offset": "0", "Upload-Complete": "?0"]))
        #expect(offered.last == .append(url: url, offset: 0, length: length / 4, complete: false))
        #expect(offered.machine.takeNotices().contains(.appendTooLarge(length: length)))

        var plain = ResumableScript(length: length, wholeBodyLimit: 4 << 20)
        plain.reply(ResumableScript.answer(413, body: "too large"))
        #expect(plain.last == .discover)
        plain.step { $0.discovered(.notOffered) }
        guard case .answered(let answer)? = plain.report else { Issue.record("expected the 413 as the answer, got \(String(describing: plain.report))"); return }
        #expect(answer.status == 413 && answer.body == Array("too large".utf8))

        // Nothing smaller to try: a file of at most the smallest append gets the 413 as its answer.
        var small = ResumableScript(length: ResumableUploadMachine.smallestAppend, wholeBodyLimit: 4 << 20)
        small.reply(ResumableScript.answer(413))
        guard case .answered(let refused)? = small.report else { Issue.record("expected the 413, got \(String(describing: small.report))"); return }
        #expect(refused.status == 413)
    }

    @Test("a completing append answered 2xx with Upload-Complete: ?0 is not taken as done; a refusal with ?1 forgets the upload")
    func completion() {
        var notDone = ResumableScript()
        notDone.createdOffered()
        notDone.reply(ResumableScript.answer(200, ["Upload-Complete": "?0", "Upload-Offset": "1000"]))
        #expect(notDone.last == .askOffset(url: url))
        var refused = ResumableScript()
        refused.createdOffered()
        refused.reply(ResumableScript.answer(422, ["Upload-Complete": "?1"], body: "bad image"))
        #expect(refused.report == .answered(ServerAnswer(status: 422, body: Array("bad image".utf8))))
        #expect(refused.machine.upload == nil, "the application refused the complete upload: a retry starts over")
        var failed = ResumableScript()
        failed.createdOffered()
        failed.reply(ResumableScript.answer(503))
        #expect(failed.report == .answered(ServerAnswer(status: 503, during: "sending")))
        #expect(failed.machine.upload?.url == url, "a 503 without ?1 keeps the upload to resume")
    }

    @Test("creations that do not give a usable upload URL are refused with the reason")
    func badCreations() {
        var noLocation = ResumableScript()
        noLocation.step { $0.discovered(.offered(UploadLimit())) }
        noLocation.reply(ResumableScript.answer(201))
        #expect(noLocation.report?.message?.contains("without the upload's URL (Location)") == true)
        var downgrade = ResumableScript()
        downgrade.step { $0.discovered(.offered(UploadLimit())) }
        downgrade.reply(ResumableScript.answer(201, ["Location": "http://up.example/uploads/1"]))
        #expect(downgrade.report?.message?.contains("does not send the file unencrypted") == true)
        var refused = ResumableScript()
        refused.step { $0.discovered(.offered(UploadLimit())) }
        refused.reply(ResumableScript.answer(403, body: "no"))
        #expect(refused.report == .answered(ServerAnswer(status: 403, body: Array("no".utf8), during: "creating the upload")))
    }

    @Test("a server of another draft version: the 400 says which interop_version to set")
    func interopMismatch() {
        var script = ResumableScript(length: 10)
        script.reply(ResumableScript.answer(400, ["Upload-Draft-Interop-Version": "6"]))
        #expect(script.report == .answered(ServerAnswer(
            status: 400, hint: "the server speaks interop version 6 of the resumable upload draft: set interop_version = 6")))
        var unknown = ResumableScript(length: 10, interop: .v6)
        unknown.reply(ResumableScript.answer(400, ["Upload-Draft-Interop-Version": "7"]))
        #expect(unknown.report.map { "\($0)".contains("which Ferry does not (it speaks 6 and 9)") } == true)
        // tusd without the experimental protocol, or at an interop version it does not know, is a tus
        // server: it refuses a request without Tus-Resumable with 412.
        var tus = ResumableScript(length: 10)
        tus.reply(ResumableScript.answer(412, ["Tus-Resumable": "1.0.0"], body: "ERR_UNSUPPORTED_VERSION"))
        guard case .answered(let answer)? = tus.report else { Issue.record("no answer: \(tus.last)"); return }
        #expect(answer.hint?.hasPrefix("the server speaks tus (it answered with Tus-Resumable or Tus-Version): set protocol = \"tus\"") == true)
        #expect(answer.hint?.contains("interop_version = 6") == true)
    }

    @Test("an upload past its recorded expiry is asked about (the server decides); the server's lifetime limit sets the expiry that is recorded")
    func expiry() {
        var expired = ResumableScript(known: ResumableUpload(url: url, offset: 10, expires: ResumableScript.now, endpointKey: "k"))
        #expect(expired.last == .askOffset(url: url))
        expired.reply(ResumableScript.answer(204, ["Upload-Offset": "10", "Upload-Complete": "?0"]))
        #expect(expired.last == .append(url: url, offset: 10, length: 990, complete: true), "still there: continued")
        for status in [404, 403] {
            // Past its expiry, a 403 is an upload the server no longer knows, too.
            var gone = ResumableScript(known: ResumableUpload(url: url, offset: 10, expires: ResumableScript.now, endpointKey: "k"))
            gone.reply(ResumableScript.answer(status))
            #expect(gone.last == .create(bodyLength: 0, complete: false), "\(status)")
        }
        var v9 = ResumableScript()
        v9.createdOffered("max-age=3600")
        #expect(v9.records.first?.expires == ResumableScript.now.addingTimeInterval(3600))
        var v6 = ResumableScript(interop: .v6)
        v6.createdOffered("expires=60", interop: .v6)
        #expect(v6.records.first?.expires == ResumableScript.now.addingTimeInterval(60))
    }

    @Test("a new upload after the old one was lost counts its own progress: its appends below the old offset are not idle")
    func newUploadProgress() {
        var script = ResumableScript(length: 2000, chunkSize: 10, known: ResumableUpload(url: url, offset: 900, endpointKey: "k"))
        script.reply(ResumableScript.answer(404))
        #expect(script.last == .create(bodyLength: 0, complete: false))
        script.reply(ResumableScript.answer(201, ["Location": "/uploads/2", "Upload-Complete": "?0", "Upload-Offset": "0"]))
        var appends = 0
        while case .append(_, let offset, let length, let complete) = script.last, appends < 500 {
            script.reply(ResumableScript.answer(204, ["Upload-Offset": String(offset + length), "Upload-Complete": complete ? "?1" : "?0"]))
            appends += 1
        }
        #expect(appends == 200)
        #expect(script.report?.isSuccessAnswer == true, "\(script.last)")
        #expect(script.machine.progressed)
    }

    @Test("answers that never take the bytes end the attempt")
    func bounded() {
        var script = ResumableScript()
        script.createdOffered()
        for _ in 0..<40 {
            guard script.report == nil else { break }
            script.reply(ResumableScript.answer(script.last == .askOffset(url: url) ? 204 : 409,
                                                ["Upload-Offset": "0", "Upload-Complete": "?0"]))
        }
        #expect(script.report != nil)
        var idle = ResumableScript()
        idle.createdOffered()
        for _ in 0..<10 where idle.report == nil {
            idle.reply(ResumableScript.answer(204, ["Upload-Offset": "0", "Upload-Complete": "?0"]))
        }
        #expect(idle.report.map { "\($0)".contains("without taking the bytes") || "\($0)".contains("busy") || "\($0)".contains("in a row") } == true)
    }

    @Test("Upload-Limit: integers by key, unknown keys ignored, a wrong type invalidates the field", arguments: [
        ("max-size=1000, min-size=0, max-append-size=10, min-append-size=2, max-age=60", ResumableInteropVersion.v9,
         UploadLimit(maxSize: 1000, minSize: 0, maxAppendSize: 10, minAppendSize: 2, lifetime: 60)),
        ("min-size=0", .v9, UploadLimit(minSize: 0)),
        ("expires=60", .v6, UploadLimit(lifetime: 60)),
        ("expires=60", .v9, UploadLimit()),
        ("max-age=60, future-key=?1", .v9, UploadLimit(lifetime: 60)),
        ("max-size=?1", .v9, nil),
        ("max-size=-5", .v9, nil),
        ("max-size=1.5", .v9, nil),
        ("not a dictionary (", .v9, nil),
    ] as [(String, ResumableInteropVersion, UploadLimit?)])
    func uploadLimit(text: String, interop: ResumableInteropVersion, expected: UploadLimit?) {
        #expect(UploadLimit(text, interop: interop) == expected)
    }

    @Test("Completeness from Upload-Complete, or the older Upload-Incomplete, as structured Booleans", arguments: [
        (["Upload-Complete": "?1"], true), (["Upload-Complete": "?0"], false), (["upload-complete": " ?1 "], true),
        (["Upload-Incomplete": "?0"], true), (["Upload-Incomplete": "?1"], false), ([:], nil),
        (["Upload-Complete": "1"], nil), (["Upload-Complete": "true"], nil),
    ] as [([String: String], Bool?)])
    func completeness(headers: [String: String], expected: Bool?) {
        #expect(ResumableFields.completeness(in: headers.map { (name: $0.key, value: $0.value) }) == expected)
    }

    @Test("OPTIONS offers resumption with Upload-Limit (or interop 7-8's Accept-Patch), never on a 5xx")
    func offers() {
        let cases: [(Int, [String: String], Bool)] = [
            (204, ["Upload-Limit": "min-size=0"], true), (200, ["Accept-Patch": "application/partial-upload"], true),
            (404, ["Upload-Limit": "min-size=0"], true), (200, ["Allow": "POST"], false), (405, [:], false),
            (503, ["Upload-Limit": "min-size=0"], false),
        ]
        for (status, headers, offered) in cases {
            #expect(ResumableInteropVersion.v9.offersResumption(status: status, headers: headers.map { (name: $0.key, value: $0.value) }) == offered)
        }
    }
}

extension AttemptReport {
    /// The text of a refusal or of a failure without an answer.
    var message: String? {
        switch self {
        case .refused(let message), .noAnswer(let message): message
        default: nil
        }
    }

    var isSuccessAnswer: Bool {
        if case .answered(let answer) = self { return answer.isSuccess }
        return false
    }
}
