import FerryQueue
import Foundation

/// The tus 1.0 upload of one file as a pure state machine: it says which request to make next
/// (``Action``) and is told what each request got (``Response``); the I/O shell (``TusClient`` in
/// FerryTransport) makes the requests, stores each new upload state before the next request, and
/// computes checksums and metadata. Tested with scripted responses, without a network.
///
///     discover ─▶ create ─▶ record ─┐         (no upload yet, or the server lost it)
///        │                          ▼
///        └─────▶ askOffset ─▶ record? ─▶ append ─▶ record ─▶ … ─▶ finish(done)
///                     ▲                    │
///                     └── 409, 460, idle ──┘ ── 404/410 ─▶ create again
///
/// Every loop the server can drive is bounded: creations, checksum failures, idle answers, and
/// requests in a row that did not move the confirmed offset past its best.
public struct TusUploadMachine: Sendable {
    /// The upload's fixed facts.
    public struct Settings: Sendable, Equatable {
        /// The creation endpoint (`POST` target).
        public var endpoint: String
        /// The file's length, sent as `Upload-Length`.
        public var length: Int64
        /// The most sent in one request; `nil`: the whole remainder.
        public var chunkSize: Int64?
        /// Names the endpoint an upload was created at (stored with it).
        public var endpointKey: String?
        /// The checksum algorithm to use when the server offers it (the spool's `digest`: `sha256`,
        /// `sha512`); otherwise `sha1`, when offered.
        public var preferredChecksum: String?
        /// Whether the creation request may carry the file (creation-with-upload). The sender says
        /// no after a failed attempt: a creation whose answer never came loses what it carried, so
        /// on a link that drops every such request the file would never get through, where an
        /// empty creation gets the URL first and the appends resume.
        public var uploadsDuringCreation: Bool

        public init(
            endpoint: String, length: Int64, chunkSize: Int64? = nil, endpointKey: String? = nil, preferredChecksum: String? = nil,
            uploadsDuringCreation: Bool = true
        ) {
            self.uploadsDuringCreation = uploadsDuringCreation
            self.preferredChecksum = preferredChecksum
            self.endpoint = endpoint
            self.length = length
            self.chunkSize = chunkSize
            self.endpointKey = endpointKey
        }
    }

    /// What the shell does next.
    public enum Action: Sendable, Equatable {
        /// `OPTIONS` the endpoint (shared between uploads) and report with ``discovered(_:)``.
        case discover
        /// `POST` a new upload with `Upload-Length` and `Upload-Metadata`, carrying the first
        /// `bodyLength` bytes (creation-with-upload) when not 0; report with ``created(_:)``.
        case create(bodyLength: Int64, checksum: Bool, sendsIdempotencyKey: Bool)
        /// `HEAD` the upload; report with ``offsetAsked(_:)``.
        case askOffset(url: String)
        /// `PATCH` `length` bytes from `offset`; report with ``appended(_:)``.
        case append(url: String, offset: Int64, length: Int64, checksum: Bool)
        /// Make this upload state durable, then call ``recorded()``.
        case record(ResumableUpload)
        /// `DELETE` the upload (best-effort), then call ``terminated()``.
        case terminate(url: String)
        /// The attempt is over.
        case finish(AttemptReport)
    }

    /// What one request got.
    public typealias Response = RequestOutcome

    /// Things worth a log line that the machine noticed.
    public enum Notice: Sendable, Equatable {
        case expired
        case lost(status: Int)
        case mismatch(offset: Int64, length: Int64?)
        case checksumMismatch
        case created(offset: Int64)
        case resumed(offset: Int64)
    }

    /// With creation-with-upload, the creation request carries a file of up to this length (or
    /// `chunk_size`) whole: its answer brings the upload's URL, and until then a cut connection
    /// loses what was sent. A longer file is created empty, then appended.
    public static let creationBodyLimit: Int64 = 4 << 20
    /// Requests in a row that may leave the confirmed offset where it was before the attempt ends.
    public static let requestsWithoutProgressLimit = ProgressBound.limit

    private enum Phase: Sendable {
        case ready, discovering, creating(bodyLength: Int64), askingOffset(ResumableUpload)
        case appending(ResumableUpload, length: Int64), recording(then: Action?), terminating, finished
    }

    public let settings: Settings
    /// The upload as it stands: URL, confirmed offset, expiry.
    public private(set) var upload: ResumableUpload?
    /// Request body bytes handed to connections so far.
    public private(set) var bytesSent: Int64 = 0
    public private(set) var capabilities: TusCapabilities?

    /// The `Upload-Checksum` algorithm requests carry (when an action says `checksum`).
    public var checksumAlgorithm: String? { capabilities?.checksumAlgorithm(preferring: settings.preferredChecksum) }
    private var notices: [Notice] = []
    /// The known upload was past its recorded `Upload-Expires` when the attempt began.
    private var pastRecordedExpiry = false
    private let initialUpload: ResumableUpload?
    private let now: Date
    private var phase = Phase.ready
    /// Whether `upload.offset` came from the server during this attempt (else ask with HEAD).
    private var current = false
    private var creations = 0, checksumFailures = 0, idleAnswers = 0
    /// The offset a PATCH answered 409 at: if HEAD then reports the same offset, the server is busy
    /// with the upload (an earlier request still holds it), not at another offset.
    private var conflictAt: Int64?
    private var progress: ProgressBound

    /// `known`: the upload from an earlier attempt, if any; `now`: to judge its expiry.
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
        // Every byte confirmed already (a crash came between the last answer and the done record):
        // nothing to ask, whatever the server has done with the upload since.
        if let upload, upload.offset >= settings.length { return finish(.answered(completion(204, [], [], url: upload.url))) }
        phase = .discovering
        return .discover
    }

    /// The server's capabilities, or why they could not be had.
    public mutating func discovered(_ result: Result<TusCapabilities, TusDiscoveryFailure>) -> Action {
        guard case .discovering = phase else { preconditionFailure("discovered() outside discovery") }
        switch result {
        case .failure(let failure):
            return finish(failure.unreachable ? .unreachable(failure.message) : .noAnswer(failure.message))
        case .success(let found):
            capabilities = found
            if let max = found.maxSize, settings.length > max {
                return finish(.refused("the file (\(settings.length) bytes) is larger than the server accepts (Tus-Max-Size \(max))"))
            }
            // Past its recorded expiry by this machine's clock, the upload is asked about all the
            // same: a clock ahead of the server's, or an expiry the server extended, would throw a
            // live upload away and send the whole file again. The server's 404 or 410 says it is gone.
            if let expires = upload?.expires, expires <= now { pastRecordedExpiry = true }
            return next()
        }
    }

    public mutating func created(_ response: Response) -> Action {
        guard case .creating(let withBody) = phase else { preconditionFailure("created() outside creation") }
        guard case .answer(let status, let headers, let body, let bytes) = response else { return ended(response) }
        bytesSent += bytes
        guard (200..<300).contains(status) else {
            return finish(.answered(answer(status, headers, body, during: "creating the upload")))
        }
        guard let location = HTTPHeaders.value("Location", in: headers), let url = Self.resolve(location, against: settings.endpoint) else {
            return finish(.noAnswer("the server created the upload but sent no usable Location (\(status))"))
        }
        if settings.endpoint.lowercased().hasPrefix("https:"), url.lowercased().hasPrefix("http:") {
            return finish(.refused("""
                the server created the upload at an http:// URL although the endpoint is https:// (a tus \
                server behind a TLS proxy that does not know it: tusd needs -behind-proxy and the proxy \
                X-Forwarded-Proto); Ferry does not send the file unencrypted
                """))
        }
        let confirmed = HTTPHeaders.value("Upload-Offset", in: headers).flatMap { Int64($0) }
        if let confirmed, confirmed > withBody {
            // A new upload holds at most what its creation carried: believing more would skip bytes.
            return finish(.noAnswer("""
                the server created the upload and confirmed \(confirmed) bytes of it, but the creation \
                carried \(withBody): a tus server that counts wrong; the upload is created again
                """))
        }
        let created = ResumableUpload(
            url: url, offset: min(max(confirmed ?? 0, 0), settings.length), expires: Self.expiry(headers),
            endpointKey: settings.endpointKey)
        upload = created
        current = confirmed != nil || withBody == 0
        notices.append(.created(offset: created.offset))
        progress.restart(at: created.offset)
        // A creation that carried the whole file (or an empty file) is the upload's last request: its
        // answer (with the upload's Location, and what a server's finish hook put in it) is the result.
        let complete = current && created.offset >= settings.length
        phase = .recording(then: complete ? .finish(.answered(answer(status, headers, body))) : nil)
        return .record(created)
    }

    public mutating func offsetAsked(_ response: Response) -> Action {
        guard case .askingOffset(let asked) = phase else { preconditionFailure("offsetAsked() outside HEAD") }
        guard case .answer(let status, let headers, let body, _) = response else { return ended(response) }
        if [403, 404, 410].contains(status) {
            notices.append(pastRecordedExpiry ? .expired : .lost(status: status))
            upload = nil
            progress.count(offset: nil)
            return next()
        }
        guard (200..<300).contains(status) else {
            return finish(.answered(answer(status, headers, body, during: "asking for the upload's offset")))
        }
        guard let offset = HTTPHeaders.value("Upload-Offset", in: headers).flatMap({ Int64($0) }), offset >= 0 else {
            return finish(.noAnswer("the server's answer to HEAD had no Upload-Offset"))
        }
        let length = HTTPHeaders.value("Upload-Length", in: headers).flatMap { Int64($0) }
        if offset > settings.length || (length != nil && length != settings.length) {
            notices.append(.mismatch(offset: offset, length: length))
            upload = nil
            progress.count(offset: nil)
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
        progress.count(offset: offset)
        notices.append(.resumed(offset: offset))
        let updated = ResumableUpload(url: asked.url, offset: offset, expires: Self.expiry(headers) ?? asked.expires, endpointKey: asked.endpointKey)
        upload = updated
        guard updated != asked else { return next() }
        phase = .recording(then: nil)
        return .record(updated)
    }

    public mutating func appended(_ response: Response) -> Action {
        guard case .appending(let sent, let length) = phase else { preconditionFailure("appended() outside PATCH") }
        guard case .answer(let status, let headers, let body, let bytes) = response else { return ended(response) }
        bytesSent += bytes
        let base = sent.offset
        switch status {
        case 200..<300:
            let offset = HTTPHeaders.value("Upload-Offset", in: headers).flatMap { Int64($0) }
            guard let offset, offset > base, offset <= base + length else {
                // No offset, or one that did not move: ask rather than assume, a few times.
                idleAnswers += 1
                progress.count(offset: nil)
                if idleAnswers > 2 {
                    return finish(.noAnswer("""
                        the server answered \(status) to PATCH without taking the bytes (Upload-Offset \
                        \(offset.map(String.init) ?? "missing"), expected more than \(base))
                        """))
                }
                current = false
                return next()
            }
            idleAnswers = 0
            checksumFailures = 0
            progress.count(offset: offset)
            let updated = ResumableUpload(url: sent.url, offset: offset, expires: Self.expiry(headers) ?? sent.expires, endpointKey: sent.endpointKey)
            upload = updated
            phase = .recording(then: offset >= settings.length ? .finish(.answered(completion(status, headers, body, url: sent.url))) : nil)
            return .record(updated)
        case 409:
            // Our offset is not the server's, or the server is busy with the upload: ask.
            conflictAt = base
            current = false
            progress.count(offset: nil)
            return next()
        case 423:
            return finish(.answered(answer(status, headers, body, during: "sending (the upload is locked)")))
        case 460:
            checksumFailures += 1
            notices.append(.checksumMismatch)
            progress.count(offset: nil)
            if checksumFailures > 2 {
                return finish(.noAnswer("the server reported a checksum mismatch (460) three times in a row"))
            }
            current = false
            return next()
        case 404, 410:
            notices.append(.lost(status: status))
            upload = nil
            progress.count(offset: nil)
            return next()
        default:
            return finish(.answered(answer(status, headers, body, during: "sending")))
        }
    }

    /// The state from the last ``Action/record(_:)`` is durable.
    public mutating func recorded() -> Action {
        guard case .recording(let then) = phase else { preconditionFailure("recorded() without a record") }
        if let then {
            if case .finish(let report) = then { return finish(report) }
            return then
        }
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
        guard let upload else {
            // Create the upload. The old one, if any, stays on record until a new one exists.
            creations += 1
            if creations > 3 {
                return finish(.noAnswer("the server kept losing the upload right after creating it"))
            }
            var withBody: Int64 = 0
            if settings.uploadsDuringCreation, capabilities?.extensions.contains("creation-with-upload") == true,
               settings.length <= settings.chunkSize ?? Self.creationBodyLimit {
                // One request for the whole file. A longer one is created empty: the appends follow
                // either way, and no byte is at risk before the URL is known.
                withBody = settings.length
            }
            phase = .creating(bodyLength: withBody)
            return .create(
                bodyLength: withBody, checksum: withBody > 0 && checksumAlgorithm != nil,
                sendsIdempotencyKey: creations == 1 && initialUpload == nil)
        }
        if !current {
            phase = .askingOffset(upload)
            return .askOffset(url: upload.url)
        }
        if upload.offset >= settings.length {
            return finish(.answered(completion(204, [], [], url: upload.url)))
        }
        let remaining = settings.length - upload.offset
        let length = min(remaining, settings.chunkSize ?? remaining)
        phase = .appending(upload, length: length)
        return .append(url: upload.url, offset: upload.offset, length: length, checksum: checksumAlgorithm != nil)
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


    /// The answer that completed the upload. It names the upload (`Location`, as the creation's
    /// answer did) when it does not itself: tusd answers the last PATCH 204 with none, and the
    /// producer's result file and hooks would not learn where the file went.
    private func completion(_ status: Int, _ headers: [(name: String, value: String)], _ body: [UInt8], url: String) -> ServerAnswer {
        let named = HTTPHeaders.value("Location", in: headers) == nil ? headers + [(name: "Location", value: url)] : headers
        return answer(status, named, body)
    }

    private func answer(_ status: Int, _ headers: [(name: String, value: String)], _ body: [UInt8], during: String? = nil) -> ServerAnswer {
        let hint = status == 413 && settings.chunkSize == nil ? "if a proxy limits request bodies, set chunk_size" : nil
        return ServerAnswer(status: status, headers: headers, body: body, during: during, hint: hint)
    }

    // MARK: Wire formats

    /// `Location` made absolute against the endpoint (it may be relative, RFC 9110 §10.2.2); `nil`
    /// unless that is an http(s) URL with a host and, if it names one, a port from 1 to 65535.
    public static func resolve(_ location: String, against endpoint: String) -> String? {
        guard let base = URL(string: endpoint), let url = URL(string: location, relativeTo: base)?.absoluteURL,
              let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host?.isEmpty == false, (url.port ?? 1) >= 1, (url.port ?? 1) <= 65535 else { return nil }
        return url.absoluteString
    }

    static func expiry(_ headers: [(name: String, value: String)]) -> Date? {
        HTTPHeaders.value("Upload-Expires", in: headers).flatMap(RetryRules.parseHTTPDate)
    }
}

/// Why a tus server's capabilities could not be had (a 5xx to `OPTIONS`, no answer).
public struct TusDiscoveryFailure: Error, Sendable, Equatable {
    public var message: String
    /// No connection could be made (``AttemptReport/unreachable(_:)``).
    public var unreachable: Bool
    public init(message: String, unreachable: Bool = false) {
        self.message = message
        self.unreachable = unreachable
    }
}
