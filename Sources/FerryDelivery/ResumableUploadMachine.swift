import FerryConfig
import FerryQueue
import Foundation

/// One file's upload by the IETF draft "Resumable Uploads for HTTP" as a pure state machine: it says
/// which request to make next (``Action``) and is told what each got (``Response``); the I/O shell
/// (`ResumableClient` in FerryTransport) makes the requests and stores each new upload state before
/// the next request. Tested with scripted answers, without a network.
///
///     small file (within chunk_size), or a server that does not offer resumption:
///       create(whole, Upload-Complete: ?1) ─▶ finish (the application's answer)
///       … 413: discover ─▶ (offered) create(empty, ?0) ─▶ appends of at most half the file, halved on 413
///     a large file to a server that offers it (OPTIONS shows Upload-Limit):
///       discover ─▶ create(empty, ?0) ─▶ record URL ─▶ append(?0) ─▶ record ─▶ … ─▶ append(?1) ─▶ finish
///     a known upload (a cut, a restart):
///       askOffset (HEAD) ─▶ record? ─▶ append … ; 404/410: create again; 409: askOffset
///
/// AsyncHTTPClient drops interim (1xx) responses, so the `104 Upload Resumption Supported` that
/// carries the upload's URL during a creation is never seen: a large file is therefore created empty
/// (`Upload-Complete: ?0`, whose final answer carries the URL) and appended afterwards, as the draft
/// allows, and only to a resource whose `OPTIONS` answer showed it offers resumable uploads. Any
/// other server gets the whole file in one request, so an empty or partial body is never sent to a
/// server that could take it for the whole file.
///
/// Every loop the server can drive is bounded: creations, answers that do not take the bytes, and
/// requests in a row that do not move the confirmed offset past its best.
public struct ResumableUploadMachine: Sendable {
    /// Files up to this long go whole in the creation request (``Settings/wholeBodyLimit``).
    public static let defaultWholeBodyLimit: Int64 = 4 << 20
    /// A 413 halves the appends down to this.
    public static let smallestAppend: Int64 = 64 << 10

    private enum Phase: Sendable {
        case ready, discovering, creating(whole: Bool), askingOffset(ResumableUpload)
        case appending(ResumableUpload, length: Int64, complete: Bool), recording, terminating, finished
    }

    public let settings: Settings
    /// The upload as it stands: URL, confirmed offset, expiry; `nil` when there is none to continue.
    public private(set) var upload: ResumableUpload?
    /// Request body bytes handed to connections so far.
    public private(set) var bytesSent: Int64 = 0
    /// Whether the attempt ended on a 2xx to the whole file that came before all of it was sent.
    public private(set) var answeredEarly = false
    /// The server's limits as last announced.
    public private(set) var limit = UploadLimit()
    private var notices: [Notice] = []
    private let initialUpload: ResumableUpload?
    /// Whether the known upload was past its recorded expiry when the attempt began.
    private var pastRecordedExpiry = false
    private let now: Date
    private var phase = Phase.ready
    /// Whether the server is known to offer resumable uploads at the endpoint.
    private var offered = false
    /// Whether `upload.offset` came from the server during this attempt (else ask with HEAD).
    private var current = false
    /// The most sent in one append after a 413.
    private var appendCeiling: Int64?
    /// Whether OPTIONS was asked during this attempt.
    private var discoveryAsked = false
    /// The 413 that a creation carrying the whole file got: the file then goes in appends, if the
    /// server offers them (a proxy's body limit in front of a resumable server).
    private var wholeRefusal: ServerAnswer?
    private var creations = 0, idleAnswers = 0
    /// The offset a PATCH answered 409 at: if HEAD then reports the same offset, the server is busy
    /// with the upload (an earlier request still holds it).
    private var conflictAt: Int64?
    private var progress: ProgressBound

    /// `known`: the upload from an earlier attempt at the same endpoint, if any; `now`: to judge its expiry.
    public init(settings: Settings, known: ResumableUpload?, now: Date) {
        self.settings = settings
        upload = known
        initialUpload = known
        progress = ProgressBound(start: known?.offset ?? 0)
        self.now = now
    }

    /// Whether the attempt moved the confirmed offset past where it began.
    public var progressed: Bool { (upload?.offset ?? 0) > (initialUpload?.offset ?? 0) }

    /// The notices since the last call.
    public mutating func takeNotices() -> [Notice] {
        defer { notices = [] }
        return notices
    }

    // MARK: Events

    public mutating func start() -> Action {
        guard case .ready = phase else { preconditionFailure("start() called twice") }
        // An upload past its recorded expiry is asked about all the same: the draft's lifetime
        // counts from each answer, the record's from an attempt's start, and the server knows
        // (404 or 410, or a 403 for one it no longer knows: a new upload).
        if let expires = upload?.expires, expires <= now { pastRecordedExpiry = true }
        if let upload {
            // The server offered resumption when the upload was made: ask where it stands.
            offered = true
            phase = .askingOffset(upload)
            return .askOffset(url: upload.url)
        }
        if settings.length <= settings.wholeBodyLimit, fitsOneAppend { return create() }
        return discover()
    }

    /// What `OPTIONS` showed of the endpoint.
    public mutating func discovered(_ discovery: Discovery) -> Action {
        guard case .discovering = phase else { preconditionFailure("discovered() outside discovery") }
        switch discovery {
        case .failed(let message):
            return finish(.noAnswer("asking the server whether it offers resumable uploads (OPTIONS): \(message)"))
        case .unreachable(let message):
            return finish(.unreachable("asking the server whether it offers resumable uploads (OPTIONS): \(message)"))
        case .notOffered:
            notices.append(.notOffered)
            if let refusal = wholeRefusal { return finish(.answered(refusal)) }
            return create()
        case .offered(let found):
            offered = true
            limit = found
            if let max = found.maxSize, settings.length > max {
                return finish(.refused("the file (\(settings.length) bytes) is larger than the server accepts (Upload-Limit max-size=\(max))"))
            }
            return next()
        }
    }

    public mutating func created(_ response: Response) -> Action {
        guard case .creating(let whole) = phase else { preconditionFailure("created() outside creation") }
        guard case .answer(let status, let headers, let body, let bytes) = response else { return ended(response) }
        bytesSent += bytes
        let location = HTTPHeaders.value("Location", in: headers).flatMap { TusUploadMachine.resolve($0, against: settings.endpoint) }
        let success = (200..<300).contains(status)
        // The whole file was sent: the answer is the application's (an ordinary server's too),
        // unless a resumable server says it kept only part of it.
        if whole, status == 413, wholeRefusal == nil, settings.length > Self.smallestAppend, !discoveryAsked || offered {
            // Too large for one request (a proxy's body limit, a max-append-size below the file):
            // in appends, if the server offers them; halved until they pass.
            wholeRefusal = answer(status, headers, body)
            appendCeiling = max(Self.smallestAppend, settings.length / 2)
            notices.append(.appendTooLarge(length: settings.length))
            return offered ? create() : discover()
        }
        if whole, !(success && ResumableFields.completeness(in: headers) == false && location != nil) {
            // The application's answer to the whole file: a 2xx before all of it was sent is early.
            if success && bytes < settings.length { answeredEarly = true }
            return finish(.answered(answer(status, headers, body)))
        }
        guard success else { return finish(.answered(answer(status, headers, body, during: "creating the upload"))) }
        guard let location else {
            return finish(.refused("""
                the server answered the creation of a resumable upload (\(status)) without the upload's URL \
                (Location), although its OPTIONS answer offered resumable uploads; check that the URL is the \
                upload endpoint
                """))
        }
        if settings.endpoint.lowercased().hasPrefix("https:"), location.lowercased().hasPrefix("http:") {
            return finish(.refused("""
                the server created the upload at an http:// URL although the endpoint is https:// (a server \
                behind a TLS proxy that does not know it); Ferry does not send the file unencrypted
                """))
        }
        offered = true
        limit = limit.updated(with: UploadLimit(headers: headers, interop: settings.interop))
        let carried = whole ? settings.length : 0
        let confirmed = ResumableFields.integer("Upload-Offset", in: headers)
        if let confirmed, confirmed > carried {
            // A new upload holds at most what its creation carried: believing more would skip bytes.
            return finish(.noAnswer("""
                the server created the upload and confirmed \(confirmed) bytes of it, but the creation \
                carried \(carried): a resumable-upload server that counts wrong; the upload is created again
                """))
        }
        let offset = confirmed ?? 0
        let created = ResumableUpload(url: location, offset: offset, expires: expiry(), endpointKey: settings.endpointKey)
        upload = created
        current = confirmed != nil || !whole
        notices.append(.created(offset: offset))
        progress.restart(at: offset)
        phase = .recording
        return .record(created)
    }

    public mutating func offsetAsked(_ response: Response) -> Action {
        guard case .askingOffset(let asked) = phase else { preconditionFailure("offsetAsked() outside HEAD") }
        guard case .answer(let status, let headers, let body, _) = response else { return ended(response) }
        // The draft says 404 for an upload the server no longer has (410 for one it ended). A 403
        // is the server's refusal (a rotated token), the attempt's answer, unless the upload was
        // past its recorded expiry: then it is taken for one the server has forgotten.
        if [404, 410].contains(status) || (status == 403 && pastRecordedExpiry) {
            notices.append(.lost(status: status))
            upload = nil
            progress.count(offset: nil)
            return next()
        }
        guard (200..<300).contains(status) else {
            return finish(.answered(answer(status, headers, body, during: "asking for the upload's offset")))
        }
        guard let offset = ResumableFields.integer("Upload-Offset", in: headers) else {
            return finish(.noAnswer("the server's answer to HEAD had no Upload-Offset"))
        }
        let length = ResumableFields.integer("Upload-Length", in: headers)
        let complete = ResumableFields.completeness(in: headers) == true
        if complete, offset == settings.length, length == nil || length == settings.length {
            // The upload was completed, and the answer to its last request lost (a cut, a crash).
            notices.append(.completedEarlier)
            return finish(.answered(ServerAnswer(status: 204, headers: headers, body: [])))
        }
        if complete || offset > settings.length || (length != nil && length != settings.length) {
            notices.append(.mismatch(offset: offset, length: length))
            upload = nil
            progress.count(offset: nil)
            if complete { return next() }
            phase = .terminating
            return .terminate(url: asked.url)
        }
        if let at = conflictAt, offset == at {
            return finish(.noAnswer("""
                the server reports the upload busy (409 at the offset it confirms): an earlier request \
                may still hold it
                """))
        }
        conflictAt = nil
        current = true
        // Bytes an unconfirmed append sent were taken after all: not an idle answer.
        if offset > asked.offset { idleAnswers = 0 }
        progress.count(offset: offset)
        notices.append(.resumed(offset: offset))
        limit = limit.updated(with: UploadLimit(headers: headers, interop: settings.interop))
        let updated = ResumableUpload(url: asked.url, offset: offset, expires: expiry() ?? asked.expires, endpointKey: asked.endpointKey)
        upload = updated
        guard updated != asked else { return next() }
        phase = .recording
        return .record(updated)
    }

    public mutating func appended(_ response: Response) -> Action {
        guard case .appending(let sent, let length, let complete) = phase else { preconditionFailure("appended() outside PATCH") }
        guard case .answer(let status, let headers, let body, let bytes) = response else { return ended(response) }
        bytesSent += bytes
        let base = sent.offset
        let says = ResumableFields.completeness(in: headers)
        switch status {
        case 200..<300 where complete && says != false:
            // The application's answer to the whole upload. Without `Upload-Complete: ?1` (which the
            // draft requires of it), a 2xx that came before all of this append was sent (a proxy's,
            // say) is early, as to a whole-file creation: it does not prove the upload complete.
            if says != true && bytes < length { answeredEarly = true }
            return finish(.answered(answer(status, headers, body)))
        case 200..<300:
            // Without `Upload-Offset` a 2xx acknowledges the append, but only one that came after all
            // of it was sent: an early one (a proxy's, a server answering before reading the body)
            // proves nothing about the bytes still on their way.
            let offset = complete ? nil : ResumableFields.integer("Upload-Offset", in: headers) ?? (bytes >= length ? base + length : nil)
            guard let offset, offset > base, offset <= base + length else {
                // The bytes were not taken, or the upload not completed: ask rather than assume, a few times.
                idleAnswers += 1
                progress.count(offset: nil)
                if idleAnswers > 2 {
                    return finish(.noAnswer("the server answered \(status) to PATCH without taking the bytes (or completing the upload)"))
                }
                current = false
                return next()
            }
            idleAnswers = 0
            progress.count(offset: offset)
            limit = limit.updated(with: UploadLimit(headers: headers, interop: settings.interop))
            let updated = ResumableUpload(url: sent.url, offset: offset, expires: expiry() ?? sent.expires, endpointKey: sent.endpointKey)
            upload = updated
            phase = .recording
            return .record(updated)
        case _ where complete && says == true:
            // The upload is complete and the application refused it: a new attempt starts over.
            upload = nil
            return finish(.answered(answer(status, headers, body)))
        case 409:
            // Our offset is not the server's, or the server is busy with the upload: ask.
            conflictAt = base
            current = false
            progress.count(offset: nil)
            return next()
        case 404, 410:
            notices.append(.lost(status: status))
            upload = nil
            progress.count(offset: nil)
            return next()
        case 413 where length > Self.smallestAppend:
            appendCeiling = max(Self.smallestAppend, length / 2)
            notices.append(.appendTooLarge(length: length))
            current = false
            progress.count(offset: nil)
            return next()
        default:
            return finish(.answered(answer(status, headers, body, during: "sending")))
        }
    }

    /// The state from the last ``Action/record(_:)`` is durable.
    public mutating func recorded() -> Action {
        guard case .recording = phase else { preconditionFailure("recorded() without a record") }
        return next()
    }

    /// The `DELETE` from the last ``Action/terminate(url:)`` is done (whatever it got).
    public mutating func terminated() -> Action {
        guard case .terminating = phase else { preconditionFailure("terminated() without a terminate") }
        return next()
    }

    /// The attempt was cancelled (shutdown, hold, cancel).
    public mutating func cancel() -> Action { finish(.stopped) }

    // MARK: The loop

    private mutating func next() -> Action {
        if let exhausted = progress.exhausted { return finish(.noAnswer(exhausted)) }
        guard let upload else { return create() }
        if !current {
            phase = .askingOffset(upload)
            return .askOffset(url: upload.url)
        }
        let remaining = settings.length - upload.offset
        var piece = [settings.chunkSize, limit.maxAppendSize, appendCeiling].compactMap { $0 }.reduce(remaining) { min($0, $1) }
        if let least = limit.minAppendSize, piece < remaining, piece < least { piece = min(remaining, least) }
        if piece <= 0, remaining > 0 {
            return finish(.refused("the server allows no bytes in an append (Upload-Limit max-append-size=0)"))
        }
        let complete = piece == remaining
        phase = .appending(upload, length: piece, complete: complete)
        return .append(url: upload.url, offset: upload.offset, length: piece, complete: complete)
    }

    /// A new upload: empty and continued with appends where the server offers resumption and the
    /// file is large, else the whole file in one request.
    private mutating func create() -> Action {
        creations += 1
        if creations > 3 {
            return finish(.noAnswer("the server kept losing the upload right after creating it"))
        }
        let whole = !offered || (settings.length <= settings.wholeBodyLimit && fitsOneAppend && wholeRefusal == nil)
            || limit.minSize.map { settings.length < $0 } == true
        current = false
        phase = .creating(whole: whole)
        return .create(bodyLength: whole ? settings.length : 0, complete: whole)
    }

    /// Asks the server (OPTIONS) whether it offers resumable uploads.
    private mutating func discover() -> Action {
        discoveryAsked = true
        phase = .discovering
        return .discover
    }

    /// Whether the whole file fits in one request under `chunk_size`, the server's max-append-size
    /// and a 413's ceiling (the draft limits a creation's body as it limits an append's).
    private var fitsOneAppend: Bool {
        [settings.chunkSize, limit.maxAppendSize, appendCeiling].allSatisfy { $0.map { settings.length <= $0 } ?? true }
    }

    /// A request that got no answer ends the attempt.
    private mutating func ended(_ response: Response) -> Action {
        guard let (report, bytes) = response.ending else { preconditionFailure("an answer is not an end") }
        bytesSent += bytes
        return finish(report)
    }

    private mutating func finish(_ report: AttemptReport) -> Action {
        phase = .finished
        return .finish(report)
    }


    /// When the server forgets the upload, from its last announced lifetime.
    private func expiry() -> Date? {
        limit.lifetime.map { now.addingTimeInterval(TimeInterval($0)) }
    }

    private func answer(_ status: Int, _ headers: [(name: String, value: String)], _ body: [UInt8], during: String? = nil) -> ServerAnswer {
        var hint: String?
        if (400..<500).contains(status), let theirs = HTTPHeaders.value("Upload-Draft-Interop-Version", in: headers),
           theirs != settings.interop.headerValue {
            let known = ResumableInteropVersion.allCases.map(\.headerValue)
            hint = known.contains(theirs)
                ? "the server speaks interop version \(theirs) of the resumable upload draft: set interop_version = \(theirs)"
                : "the server speaks interop version \(theirs) of the resumable upload draft, which Ferry does not (it speaks \(known.joined(separator: " and ")))"
        } else if (400..<500).contains(status), HTTPHeaders.value("Tus-Resumable", in: headers) ?? HTTPHeaders.value("Tus-Version", in: headers) != nil {
            hint = """
                the server speaks tus (it answered with Tus-Resumable or Tus-Version): set protocol = "tus"; for tusd's \
                experimental support of the draft, set interop_version = 6 and start tusd with -enable-experimental-protocol
                """
        } else if status == 413, settings.chunkSize == nil {
            hint = "if a proxy limits request bodies, set chunk_size"
        }
        return ServerAnswer(status: status, headers: headers, body: body, during: during, hint: hint)
    }
}
