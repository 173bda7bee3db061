import FerryDelivery
import FerryQueue
import Foundation
import Testing

/// Drives a ``TusUploadMachine`` with scripted answers: no network, no files.
struct TusScript {
    var machine: TusUploadMachine
    var actions: [TusUploadMachine.Action] = []

    init(
        length: Int64 = 1000, chunkSize: Int64? = nil, known: ResumableUpload? = nil, endpoint: String = "https://tus.example/files/",
        uploadsDuringCreation: Bool = true
    ) {
        machine = TusUploadMachine(settings: .init(endpoint: endpoint, length: length, chunkSize: chunkSize, endpointKey: "k",
                                                   uploadsDuringCreation: uploadsDuringCreation),
                                   known: known, now: Date(timeIntervalSince1970: 1_800_000_000))
        actions.append(machine.start())
    }

    var last: TusUploadMachine.Action { actions.last! }

    mutating func step(_ next: (inout TusUploadMachine) -> TusUploadMachine.Action) { actions.append(next(&machine)) }

    static func answer(_ status: Int, _ headers: [String: String] = [:], sent: Int64 = 0) -> TusUploadMachine.Response {
        .answer(status: status, headers: headers.map { (name: $0.key, value: $0.value) }, body: [], bytesSent: sent)
    }

    /// Feeds `response` to whatever the last action asked for; records are acknowledged at once.
    mutating func reply(_ response: TusUploadMachine.Response) {
        switch last {
        case .create: step { $0.created(response) }
        case .askOffset: step { $0.offsetAsked(response) }
        case .append: step { $0.appended(response) }
        default: Issue.record("no request pending: \(last)")
        }
        while case .record = last { step { $0.recorded() } }
    }

    mutating func discover(_ extensions: String = "creation", maxSize: Int64? = nil, checksums: String? = nil) {
        var headers = ["Tus-Extension": extensions]
        if let maxSize { headers["Tus-Max-Size"] = String(maxSize) }
        if let checksums { headers["Tus-Checksum-Algorithm"] = checksums }
        let capabilities = TusCapabilities(headers: headers.map { (name: $0.key, value: $0.value) })
        step { $0.discovered(.success(capabilities)) }
        while case .record = last { step { $0.recorded() } }
    }

    var report: AttemptReport? {
        if case .finish(let report) = last { return report }
        return nil
    }
}

@Suite("tus upload machine")
struct TusUploadMachineTests {
    @Test("a new upload: discover, create, record, append the whole file, record, done")
    func fresh() {
        var script = TusScript()
        #expect(script.last == .discover)
        script.discover()
        #expect(script.last == .create(bodyLength: 0, checksum: false, sendsIdempotencyKey: true))
        script.step { $0.created(TusScript.answer(201, ["Location": "/files/abc"])) }
        #expect(script.last == .record(ResumableUpload(url: "https://tus.example/files/abc", offset: 0, endpointKey: "k")))
        script.step { $0.recorded() }
        #expect(script.last == .append(url: "https://tus.example/files/abc", offset: 0, length: 1000, checksum: false))
        script.step { $0.appended(TusScript.answer(204, ["Upload-Offset": "1000"], sent: 1000)) }
        #expect(script.last == .record(ResumableUpload(url: "https://tus.example/files/abc", offset: 1000, endpointKey: "k")))
        script.step { $0.recorded() }
        // tusd's last answer names no upload: the result names it, as the creation did.
        #expect(script.report == .answered(ServerAnswer(
            status: 204, headers: [("Upload-Offset", "1000"), ("Location", "https://tus.example/files/abc")], body: [])))
        #expect(script.machine.bytesSent == 1000 && script.machine.progressed)
    }

    @Test("creation-with-upload carries a file of up to 4 MiB (or chunk_size) whole; a longer one is created empty")
    func creationWithUpload() {
        // (length, chunk size, whether the sender allows it, the creation's body)
        let table: [(Int64, Int64?, Bool, Int64)] = [
            (0, nil, true, 0),
            (1000, nil, true, 1000),
            (4 << 20, nil, true, 4 << 20),
            ((4 << 20) + 1, nil, true, 0),
            (10 << 20, nil, true, 0),
            (1 << 20, 1 << 20, true, 1 << 20),
            ((1 << 20) + 1, 1 << 20, true, 0),
            (6 << 20, 8 << 20, true, 6 << 20),
            (1000, nil, false, 0),
            (4 << 20, 8 << 20, false, 0),
        ]
        for (length, chunkSize, allowed, body) in table {
            var script = TusScript(length: length, chunkSize: chunkSize, uploadsDuringCreation: allowed)
            script.discover("creation,creation-with-upload,checksum", checksums: "md5,sha1")
            #expect(script.last == .create(bodyLength: body, checksum: body > 0, sendsIdempotencyKey: true), "\(length), \(String(describing: chunkSize)), \(allowed)")
        }
        var big = TusScript(length: 10 << 20)
        big.discover("creation,creation-with-upload")
        #expect(big.last == .create(bodyLength: 0, checksum: false, sendsIdempotencyKey: true))
        big.reply(TusScript.answer(201, ["Location": "https://tus.example/files/x", "Upload-Offset": "0"]))
        #expect(big.actions.contains(.record(ResumableUpload(url: "https://tus.example/files/x", offset: 0, endpointKey: "k"))), "the URL is on record before any byte goes")
        #expect(big.last == .append(url: "https://tus.example/files/x", offset: 0, length: 10 << 20, checksum: false))
        var small = TusScript(length: 3 << 20)
        small.discover("creation,creation-with-upload")
        small.reply(TusScript.answer(201, ["Location": "https://tus.example/files/y", "Upload-Offset": "3145728"], sent: 3 << 20))
        #expect(small.machine.upload?.offset == 3 << 20)
        #expect(!small.actions.contains { if case .append = $0 { true } else { false } }, "one request for the whole file")
    }

    @Test("a creation's confirmed offset beyond the bytes it carried ends the attempt, nothing recorded")
    func creationOffsetBeyondBody() {
        // (length, creation-with-upload, Upload-Offset answered, the upload's offset on record or nil)
        let table: [(Int64, Bool, String, Int64?)] = [
            (10 << 20, true, "0", 0),
            (10 << 20, true, "1", nil),
            (10 << 20, true, "10485760", nil),
            (1000, true, "1000", 1000),
            (1000, true, "400", 400),
            (1000, true, "1001", nil),
            (1000, false, "0", 0),
            (1000, false, "500", nil),
            (1000, false, "-3", 0),
        ]
        for (length, withUpload, offset, recorded) in table {
            var script = TusScript(length: length)
            script.discover(withUpload ? "creation,creation-with-upload" : "creation")
            guard case .create(let carried, _, _) = script.last else { Issue.record("\(script.last)"); continue }
            script.reply(TusScript.answer(201, ["Location": "https://tus.example/files/o", "Upload-Offset": offset], sent: carried))
            let records = script.actions.compactMap { if case .record(let upload) = $0 { upload.offset } else { nil } }
            #expect(records.first == recorded, "\(length) \(withUpload) \(offset)")
            if recorded == nil {
                guard case .noAnswer(let reason)? = script.report else { Issue.record("\(script.last)"); continue }
                #expect(reason.contains("confirmed \(offset) bytes"))
            }
        }
    }

    @Test("the last request's answer is the result, headers and body: a creation that carried the file, or the last PATCH")
    func finalAnswerKept() {
        let body = Array(#"{"id":"y","url":"https://media.example/y"}"#.utf8)
        let created: [(name: String, value: String)] = [("Location", "https://tus.example/files/y"), ("Upload-Offset", "1000")]
        var whole = TusScript(length: 1000)
        whole.discover("creation,creation-with-upload")
        whole.reply(.answer(status: 201, headers: created, body: body, bytesSent: 1000))
        #expect(whole.report == .answered(ServerAnswer(status: 201, headers: created, body: body)))

        var empty = TusScript(length: 0)
        empty.discover("creation")
        empty.reply(.answer(status: 201, headers: [("Location", "/files/e")], body: body, bytesSent: 0))
        #expect(empty.report == .answered(ServerAnswer(status: 201, headers: [("Location", "/files/e")], body: body)))

        var patched = TusScript(length: 1000)
        patched.discover("creation")
        patched.reply(TusScript.answer(201, ["Location": "/files/p"]))
        #expect(patched.last == .append(url: "https://tus.example/files/p", offset: 0, length: 1000, checksum: false))
        patched.reply(.answer(status: 204, headers: [("Upload-Offset", "1000")], body: body, bytesSent: 1000))
        #expect(patched.report == .answered(ServerAnswer(
            status: 204, headers: [("Upload-Offset", "1000"), ("Location", "https://tus.example/files/p")], body: body)))
    }

    @Test("creation with a body but no Upload-Offset in the answer: ask with HEAD")
    func creationWithoutOffset() {
        var script = TusScript(length: 1 << 20)
        script.discover("creation-with-upload")
        script.reply(TusScript.answer(201, ["Location": "/files/y"], sent: 1 << 20))
        #expect(script.last == .askOffset(url: "https://tus.example/files/y"))
    }

    @Test("chunk_size: pieces of at most chunk_size, each recorded")
    func chunks() {
        var script = TusScript(length: 2500, chunkSize: 1000)
        script.discover()
        script.reply(TusScript.answer(201, ["Location": "/files/c"]))
        for (offset, length) in [(0, 1000), (1000, 1000), (2000, 500)] {
            #expect(script.last == .append(url: "https://tus.example/files/c", offset: Int64(offset), length: Int64(length), checksum: false))
            script.reply(TusScript.answer(204, ["Upload-Offset": String(offset + length)], sent: Int64(length)))
        }
        #expect(script.report == .answered(ServerAnswer(
            status: 204, headers: [("Upload-Offset", "2500"), ("Location", "https://tus.example/files/c")], body: [])))
    }

    @Test("a known upload resumes from the server's offset (HEAD), without creating")
    func resume() {
        let known = ResumableUpload(url: "https://tus.example/files/r", offset: 100, endpointKey: "k")
        var script = TusScript(known: known)
        script.discover()
        #expect(script.last == .askOffset(url: known.url))
        script.reply(TusScript.answer(200, ["Upload-Offset": "600", "Upload-Length": "1000"]))
        #expect(script.last == .append(url: known.url, offset: 600, length: 400, checksum: false))
        #expect(script.machine.progressed)
    }

    @Test("every byte confirmed already: done without asking the server")
    func alreadyComplete() {
        let script = TusScript(known: ResumableUpload(url: "https://tus.example/files/d", offset: 1000))
        #expect(script.report == .answered(ServerAnswer(status: 204, headers: [("Location", "https://tus.example/files/d")], body: [])))
    }

    @Test("a lost upload (404, 410, 403 on HEAD) is created again; no idempotency key the second time")
    func lost() {
        for status in [403, 404, 410] {
            var script = TusScript(known: ResumableUpload(url: "https://tus.example/files/gone", offset: 10))
            script.discover()
            script.reply(TusScript.answer(status))
            #expect(script.last == .create(bodyLength: 0, checksum: false, sendsIdempotencyKey: false), "\(status)")
            #expect(script.machine.takeNotices().contains(.lost(status: status)))
        }
    }

    @Test("an upload past its recorded expiry is asked about: gone (404), it starts over; still there (a clock ahead of the server's), it resumes")
    func expired() {
        let known = ResumableUpload(url: "https://tus.example/files/e", offset: 10, expires: Date(timeIntervalSince1970: 1_700_000_000))
        var gone = TusScript(known: known)
        gone.discover()
        #expect(gone.last == .askOffset(url: "https://tus.example/files/e"))
        gone.reply(TusScript.answer(404))
        #expect(gone.last == .create(bodyLength: 0, checksum: false, sendsIdempotencyKey: false))
        #expect(gone.machine.takeNotices() == [.expired])
        var live = TusScript(known: known)
        live.discover()
        live.reply(TusScript.answer(200, ["Upload-Offset": "10", "Upload-Length": "1000"]))
        #expect(live.last == .append(url: "https://tus.example/files/e", offset: 10, length: 990, checksum: false))
    }

    @Test("an upload of another length is deleted and created again")
    func mismatch() {
        var script = TusScript(known: ResumableUpload(url: "https://tus.example/files/m", offset: 10))
        script.discover()
        script.reply(TusScript.answer(200, ["Upload-Offset": "10", "Upload-Length": "999"]))
        #expect(script.last == .terminate(url: "https://tus.example/files/m"))
        script.step { $0.terminated() }
        #expect(script.last == .create(bodyLength: 0, checksum: false, sendsIdempotencyKey: false))
    }

    @Test("409: ask the offset; 409 again at the confirmed offset means busy")
    func conflict() {
        var script = TusScript(known: ResumableUpload(url: "https://tus.example/files/b", offset: 0))
        script.discover()
        script.reply(TusScript.answer(200, ["Upload-Offset": "100"]))
        script.reply(TusScript.answer(409))
        #expect(script.last == .askOffset(url: "https://tus.example/files/b"))
        script.reply(TusScript.answer(200, ["Upload-Offset": "100"]))
        guard case .noAnswer(let message) = script.report else { Issue.record("\(script.last)"); return }
        #expect(message.contains("busy"))
    }

    @Test("460: the piece is sent again, at most three times")
    func checksumMismatch() {
        var script = TusScript()
        script.discover("creation,checksum", checksums: "sha1")
        script.reply(TusScript.answer(201, ["Location": "/files/s"]))
        for _ in 0..<2 {
            #expect(script.last == .append(url: "https://tus.example/files/s", offset: 0, length: 1000, checksum: true))
            script.reply(TusScript.answer(460))
            #expect(script.last == .askOffset(url: "https://tus.example/files/s"))
            script.reply(TusScript.answer(200, ["Upload-Offset": "0"]))
        }
        script.reply(TusScript.answer(460))
        #expect(script.report == .noAnswer("the server reported a checksum mismatch (460) three times in a row"))
    }

    @Test("a 2xx to PATCH that takes no bytes is asked about, then ends the attempt")
    func idleAnswers() {
        var script = TusScript()
        script.discover()
        script.reply(TusScript.answer(201, ["Location": "/files/i"]))
        for _ in 0..<2 {
            script.reply(TusScript.answer(204, ["Upload-Offset": "0"]))
            script.reply(TusScript.answer(200, ["Upload-Offset": "0"]))
        }
        script.reply(TusScript.answer(204))
        guard case .noAnswer(let message) = script.report else { Issue.record("\(script.last)"); return }
        #expect(message.contains("without taking the bytes"))
    }

    @Test("a server alternating 409 and offsets 0/1 ends the attempt instead of looping")
    func loopBound() {
        var script = TusScript(known: ResumableUpload(url: "https://tus.example/files/l", offset: 0))
        script.discover()
        var requests = 0
        var offset = 1
        while script.report == nil && requests < 1000 {
            switch script.last {
            case .askOffset: script.reply(TusScript.answer(200, ["Upload-Offset": String(offset)])); offset = 1 - offset
            case .append: script.reply(TusScript.answer(409))
            default: Issue.record("unexpected \(script.last)"); return
            }
            requests += 1
        }
        #expect(requests <= TusUploadMachine.requestsWithoutProgressLimit + 2, "\(requests) requests")
        guard case .noAnswer(let message) = script.report else { Issue.record("\(script.last)"); return }
        #expect(message.contains("without confirming more"))
    }

    @Test("a new upload after the old one was lost counts its own progress: its appends below the old offset are not idle")
    func newUploadProgress() {
        // Known at 900 of 2000; the server has forgotten it (404); the new one goes in 10-byte appends.
        var script = TusScript(length: 2000, chunkSize: 10, known: ResumableUpload(url: "https://tus.example/files/old", offset: 900))
        script.discover()
        script.reply(TusScript.answer(404))
        script.reply(TusScript.answer(201, ["Location": "/files/new"]))
        var appends = 0
        while case .append(_, let offset, let length, _) = script.last, appends < 500 {
            script.reply(TusScript.answer(204, ["Upload-Offset": String(offset + length)]))
            appends += 1
        }
        #expect(appends == 200)
        #expect(script.report?.isSuccessAnswer == true, "\(script.last)")
        #expect(script.machine.progressed)
        // A new upload that confirms nothing before the attempt ends is no progress.
        var stalled = TusScript(known: ResumableUpload(url: "https://tus.example/files/old", offset: 900))
        stalled.discover()
        stalled.reply(TusScript.answer(404))
        stalled.reply(TusScript.answer(201, ["Location": "/files/new"]))
        stalled.reply(.failed("reset", bytesSent: 0))
        #expect(!stalled.machine.progressed)
    }

    @Test("a server that keeps losing new uploads is bounded")
    func creationsBounded() {
        var script = TusScript()
        script.discover()
        for _ in 0..<3 {
            script.reply(TusScript.answer(201, ["Location": "/files/n"]))
            script.reply(TusScript.answer(404))
        }
        #expect(script.report == .noAnswer("the server kept losing the upload right after creating it"))
    }

    @Test("refusals: too large for Tus-Max-Size; https endpoint creating at http")
    func refusals() {
        var large = TusScript(length: 2000)
        large.discover(maxSize: 1000)
        guard case .refused = large.report else { Issue.record("\(large.last)"); return }
        var downgrade = TusScript()
        downgrade.discover()
        downgrade.reply(TusScript.answer(201, ["Location": "http://tus.example/files/plain"]))
        guard case .refused(let message) = downgrade.report else { Issue.record("\(downgrade.last)"); return }
        #expect(message.contains("unencrypted"))
    }

    @Test("answers that end the attempt name their step; 413 hints at chunk_size")
    func answersEnd() {
        var creating = TusScript()
        creating.discover()
        creating.reply(TusScript.answer(413))
        #expect(creating.report == .answered(ServerAnswer(status: 413, during: "creating the upload", hint: "if a proxy limits request bodies, set chunk_size")))
        var locked = TusScript(known: ResumableUpload(url: "https://tus.example/files/k", offset: 0))
        locked.discover()
        locked.reply(TusScript.answer(200, ["Upload-Offset": "0"]))
        locked.reply(TusScript.answer(423, ["Retry-After": "5"]))
        #expect(locked.report == .answered(ServerAnswer(status: 423, headers: [("Retry-After", "5")], body: [], during: "sending (the upload is locked)")))
        var head = TusScript(known: ResumableUpload(url: "https://tus.example/files/h", offset: 0))
        head.discover()
        head.reply(TusScript.answer(500))
        #expect(head.report == .answered(ServerAnswer(status: 500, during: "asking for the upload's offset")))
        var noLocation = TusScript()
        noLocation.discover()
        noLocation.reply(TusScript.answer(201))
        #expect(noLocation.report == .noAnswer("the server created the upload but sent no usable Location (201)"))
    }

    @Test("no answer, a changed file, a cancel and a failed discovery end the attempt, keeping the bytes sent")
    func ends() {
        var cut = TusScript()
        cut.discover()
        cut.reply(TusScript.answer(201, ["Location": "/files/z"]))
        cut.reply(.failed("connection reset", bytesSent: 600))
        #expect(cut.report == .noAnswer("connection reset") && cut.machine.bytesSent == 600)
        var changed = TusScript()
        changed.discover()
        changed.reply(.sourceChanged(bytesSent: 0))
        #expect(changed.report == .sourceChanged(nil))
        var cancelled = TusScript()
        cancelled.step { $0.cancel() }
        #expect(cancelled.report == .stopped)
        var unreachable = TusScript()
        unreachable.step { $0.discovered(.failure(TusDiscoveryFailure(message: "the server answered OPTIONS with 502"))) }
        #expect(unreachable.report == .noAnswer("the server answered OPTIONS with 502"))
        // OPTIONS is the attempt's first request: a connection it cannot make holds the spool.
        var refused = TusScript()
        refused.step { $0.discovered(.failure(TusDiscoveryFailure(message: "connection to h:1 failed: Connection refused", unreachable: true))) }
        #expect(refused.report == .unreachable("connection to h:1 failed: Connection refused"))
        var refusedLater = TusScript()
        refusedLater.discover()
        refusedLater.reply(.unreachable("cannot connect to h:1: No route to host"))
        #expect(refusedLater.report == .unreachable("cannot connect to h:1: No route to host") && refusedLater.machine.bytesSent == 0)
    }

    @Test("capabilities: no Tus-Extension means creation only; lists are case- and space-insensitive")
    func capabilities() {
        #expect(TusCapabilities(headers: []).extensions == ["creation"])
        let found = TusCapabilities(headers: [("tus-extension", "Creation, Checksum ,termination"), ("Tus-Checksum-Algorithm", "SHA1"), ("Tus-Max-Size", "42")])
        #expect(found.extensions == ["creation", "checksum", "termination"] && found.usesSHA1Checksums && found.maxSize == 42)
    }

    @Test("a Location is made absolute; one that is not http(s) with a host and a port from 1 to 65535 is not usable", arguments: [
        ("/files/abc", "https://tus.example/files/abc"),
        ("abc", "https://tus.example/files/abc"),
        ("http://127.0.0.1:1080/files/abc", "http://127.0.0.1:1080/files/abc"),
        ("http://127.0.0.1:65535/files/abc", "http://127.0.0.1:65535/files/abc"),
        ("http://127.0.0.1:99999/files/abc", nil),
        ("http://127.0.0.1:65536/files/abc", nil),
        ("http://127.0.0.1:0/files/abc", nil),
        ("ftp://tus.example/files/abc", nil),
        ("http:///files/abc", nil),
    ] as [(String, String?)])
    func location(location: String, resolved: String?) {
        #expect(TusUploadMachine.resolve(location, against: "https://tus.example/files/") == resolved)
    }
}
