import FerryQueue
import FerryS3
import Foundation

/// The S3 upload of one file as a pure state machine: it says which request to make next
/// (``Action``) and is told what each got (``Response``); the I/O shell (`S3Client` in
/// FerryTransport) signs and makes the requests, computes part checksums, parses S3's XML, and
/// makes each recorded state durable before the next request. Tested with scripted responses.
///
///     smaller than multipart_threshold:  putObject ─▶ finish
///
///     record marker ─▶ create ─▶ record ─▶ uploadPart ─▶ recordPart ─▶ … ─▶ complete ─▶ finish(done)
///       ▲                                     ▲
///       │             (a known upload) listParts ─▶ record (the server's parts, reconciled)
///       │                                     │
///       ├─ NoSuchUpload ──────────────────────┴─ (every part confirmed) headObject: ours? done : start over
///       └─ (a known marker: a crash lost the creation's answer) abandonUnrecorded: abort the key's uploads
///
/// At most `partConcurrency` parts' bodies are being written at once (1 by default), and at most
/// twice that many parts are unanswered: a part starts once the one before has been written whole
/// (``partWritten(_:)``, which the shell reports only when it knows the kernel took the bytes),
/// while that one waits for its answer. A body being written is what a cut or a kill -9 costs; a
/// part written whole whose answer was lost is found by the next ListParts and kept once read back
/// (its ETag is its MD5), unless the server never got all of it. A failed part stops new parts; the
/// parts in flight are answered (and recorded) before the failure is decided, as if it had come last.
///
/// Every loop the server can drive is bounded: creations, re-sent parts, listings, and requests in
/// a row that confirm nothing new.
public struct S3UploadMachine: Sendable {
    /// What the shell does next.
    public enum Action: Sendable, Equatable {
        /// `PUT` the whole file as the object; report with ``stored(_:)``.
        case putObject
        /// `POST ?uploads` (CreateMultipartUpload); report with ``created(_:)``. The creation marker
        /// was recorded before it.
        case create
        /// The recorded state is a creation marker: a crash came between CreateMultipartUpload and
        /// the record of its answer. List the key's uploads (ListMultipartUploads) and abort each,
        /// so none is left to bill; report with ``abandoned(_:)``.
        case abandonUnrecorded
        /// `GET` the upload (ListParts) from after part `marker`; report with ``listed(_:)``.
        case listParts(url: String, marker: Int?)
        /// Start `PUT` part `number` (the file's `offset..<offset+length`), then call
        /// ``partStarted()`` without waiting; report its body written whole with
        /// ``partWritten(_:)`` and its answer with ``storedPart(_:_:)``.
        case uploadPart(url: String, number: Int, offset: Int64, length: Int64)
        /// Nothing to start: wait for a part in flight to be written whole or answered.
        case awaitPart
        /// `POST` the upload with the parts (CompleteMultipartUpload); report with ``completed(_:)``.
        case complete(url: String, parts: [UploadPart])
        /// `HEAD` the object; report with ``headed(_:)``.
        case headObject
        /// Read the file's `offset..<offset+length` and report its MD5 and, if `withChecksum`, its
        /// checksum with ``digested(_:)``: is what the server holds (a part or the object whose
        /// answer was lost) these bytes?
        case digest(offset: Int64, length: Int64, withChecksum: Bool)
        /// Make this durable, then call ``recorded()``.
        case record(Record)
        /// The attempt is over.
        case finish(AttemptReport)
    }

    /// Multipart uploads created in one attempt before it gives up (the server keeps losing them).
    public static let creationLimit = 3
    /// The most parts' bodies written at once (`part_concurrency` is clamped to it).
    public static let concurrencyLimit = 8
    /// Times one part may be refused for its checksum (BadDigest) before the attempt gives up.
    public static let partRejectionLimit = 3
    /// Requests in a row that confirm nothing new before the attempt ends.
    public static let requestsWithoutProgressLimit = 16
    /// ListParts page size asked for: 100 parts fit the 64 KiB of an answer that is kept.
    public static let listingPageSize = 100
    /// ListParts pages read in one listing: every part of the file at ``listingPageSize`` a page,
    /// and margin (a server may send smaller pages). Past it, unlisted parts are sent again.
    public var listingPageLimit: Int { max(20, settings.partCount / Self.listingPageSize + 2) }

    enum Phase: Sendable {
        case ready, putting, creating, abandoning, listing(found: [UploadPart], pages: Int), sending
        /// `then`: the action after the record; `nil`: go on sending parts.
        case completing, heading, recording(then: Action?), finished
        /// Reading back listed parts whose answers were lost (`pending`, first in hand) to learn
        /// whether they are ours; `kept`: the listed parts kept so far.
        case checkingParts(pending: [UploadPart], kept: [Int: UploadPart])
        /// Reading back the whole file to compare with the object's (whole-content MD5) ETag.
        case checkingObject(etag: String)
    }

    public let settings: Settings
    /// The multipart upload as it stands, and its confirmed parts by number.
    public internal(set) var upload: ResumableUpload?
    public internal(set) var parts: [Int: UploadPart]
    /// The stored object's ETag, once the upload succeeded.
    public private(set) var objectETag: String?
    var notices: [Notice] = []
    private let initialBytes: Int64
    var phase = Phase.ready
    private var creations = 0, listings = 0, requestsWithoutProgress = 0
    var rejections: [Int: Int] = [:]
    /// Parts requested and not yet answered.
    var inFlight: Set<Int> = []
    /// Parts in flight whose bodies are still being written.
    var writing: Set<Int> = []
    /// The first part that failed while others were in flight, decided once they are answered.
    var heldFailure: (number: Int, response: Response)?
    /// The key's uploads could not be listed because the listing's signature was refused.
    private var keepsMarkerIfRefused = false

    /// `known`: the upload from an earlier attempt and its recorded parts, if any.
    public init(settings: Settings, known: ResumableUpload?, parts: [UploadPart]) {
        self.settings = settings
        upload = known
        self.parts = known == nil ? [:] : Dictionary(parts.map { ($0.number, $0) }, uniquingKeysWith: { _, last in last })
        initialBytes = known == nil ? 0 : self.parts.values.reduce(0) { $0 + $1.size }
    }

    /// Bytes of the file the server has confirmed.
    public var confirmedBytes: Int64 { parts.values.reduce(0) { $0 + $1.size } }
    /// Whether the attempt confirmed more of the file than it began with.
    public var progressed: Bool { confirmedBytes > initialBytes }

    /// The notices since the last call.
    public mutating func takeNotices() -> [Notice] {
        defer { notices = [] }
        return notices
    }

    // MARK: Events

    public mutating func start() -> Action {
        guard case .ready = phase else { preconditionFailure("start() called twice") }
        if settings.length < settings.multipartThreshold {
            phase = .putting
            return .putObject
        }
        if let upload {
            if S3ObjectAddress.isCreationMarker(upload.url) {
                phase = .abandoning
                return .abandonUnrecorded
            }
            notices.append(.resumed(partsConfirmed: parts.count, partsTotal: settings.partCount))
            return list(upload)
        }
        return create()
    }

    /// The key's unrecorded uploads were looked for and aborted.
    public mutating func abandoned(_ response: Response) -> Action {
        guard case .abandoning = phase else { preconditionFailure("abandoned() outside abandoning") }
        switch response {
        case .uploadsAbandoned(let count):
            if count > 0 { notices.append(.abandoned(count: count)) }
            return create()
        case .error(let error) where Self.refusesListingForGood(error):
            // Not allowed to list or abort uploads: deliver anyway; a lifecycle rule is the backstop.
            notices.append(.notAbandoned(code: error.code ?? "HTTP \(error.status)"))
            // Refused for its signature: if the creation is refused too, the keys are wrong, and
            // the marker stays so that the upload is looked for once they are right.
            keepsMarkerIfRefused = error.code == "SignatureDoesNotMatch"
            return create()
        default:
            // Anything else (a 5xx, SlowDown, no answer) may pass: the marker stays for the next attempt.
            return finishOther(response, during: "looking for the multipart upload a crash left")
        }
    }

    /// The answer to CreateMultipartUpload.
    public mutating func created(_ response: Response) -> Action {
        guard case .creating = phase else { preconditionFailure("created() outside creation") }
        switch response {
        case .uploadCreated(let url):
            notices.append(.created)
            let upload = ResumableUpload(url: url, offset: 0, endpointKey: settings.endpointKey)
            self.upload = upload
            parts = [:]
            return record(.upload(upload, parts: []), then: nil)
        case .error(let error) where (400..<500).contains(error.status):
            // Refused: no upload was made, so the marker goes (with the attempt's outcome).
            if !keepsMarkerIfRefused { upload = nil }
            return finishOther(response, during: "creating the multipart upload")
        default:
            return finishOther(response, during: "creating the multipart upload")
        }
    }

    /// The answer to PutObject.
    public mutating func stored(_ response: Response) -> Action {
        guard case .putting = phase else { preconditionFailure("stored() outside PutObject") }
        switch response {
        case .stored(let etag, _):
            return succeed(etag: etag)
        default:
            return finishOther(response, during: "uploading the object")
        }
    }

    /// The answer to CompleteMultipartUpload.
    public mutating func completed(_ response: Response) -> Action {
        guard case .completing = phase, let upload else { preconditionFailure("completed() outside completion") }
        switch response {
        case .object(let etag, let checksum):
            if let checksum, let expected = expectedChecksum(for: checksum), checksum != expected {
                notices.append(.checksumMismatch(expected: expected, got: checksum))
                return finish(.refused("the object's checksum (\(checksum)) is not the one computed from the parts (\(expected)): the server may hold a corrupt copy; the file is kept for a new try"))
            }
            return succeed(etag: etag)
        case .error(let error) where error.code == "NoSuchUpload":
            // Completed by an earlier request whose answer was lost, or forgotten: HEAD tells.
            phase = .heading
            return .headObject
        case .error(let error) where error.code == nil && (200..<300).contains(error.status):
            // A 2xx whose document did not come whole (cut, or not S3's): the completion may have
            // happened. The next attempt asks the server (ListParts, then HEAD).
            return finish(.noAnswer("the answer to CompleteMultipartUpload (HTTP \(error.status)) was not the document S3 sends; the next attempt asks the server whether the object is complete"))
        case .error(let error) where error.code == "InvalidPart" || error.code == "InvalidPartOrder":
            if let action = countRequest() { return action }
            return list(upload)
        default:
            return finishOther(response, during: "completing the multipart upload")
        }
    }

    /// The answer to HEAD on the object, asked when the upload vanished after every part was confirmed.
    public mutating func headed(_ response: Response) -> Action {
        guard case .heading = phase else { preconditionFailure("headed() outside a check") }
        switch response {
        case .object(let etag, _):
            let expected = S3ETag.expected(fromPartETags: parts.values.sorted { $0.number < $1.number }.map(\.etag))
            if let etag, let expected, S3ETag.names(etag, multipart: expected) {
                notices.append(.completedEarlier)
                return succeed(etag: etag)
            }
            if let etag, S3ETag.md5(etag) != nil {
                // Some servers (rclone serve s3) give an assembled object the MD5 of its content.
                phase = .checkingObject(etag: etag)
                notices.append(.readingBack(part: nil))
                return .digest(offset: 0, length: settings.length, withChecksum: false)
            }
            notices.append(.lost)
            return startOver()
        case .noObject:
            notices.append(.lost)
            return startOver()
        case .error(let answer) where answer.status == 403:
            // A key that may write but not read (no s3:GetObject, the least a drop box is given)
            // is refused HEAD whether or not the object exists: the object cannot be checked, so
            // it is stored again, the same bytes under the same key.
            notices.append(.objectUnreadable)
            return startOver()
        default:
            return finishOther(response, during: "checking whether the object was completed")
        }
    }

    /// The recorded state is durable.
    public mutating func recorded() -> Action {
        guard case .recording(let next) = phase else { preconditionFailure("recorded() outside recording") }
        guard let next else { return continueSending() }
        return proceed(to: next)
    }

    /// Ends the attempt: a shutdown, or an operator's hold or cancel.
    public mutating func cancel() -> Action { finish(.stopped) }

    // MARK: Steps

    /// Whether an answer to ListMultipartUploads or AbortMultipartUpload says the key will never be
    /// allowed to (403, 405, 501), rather than not now. `SignatureDoesNotMatch` counts: the
    /// creation that follows is signed with the same keys and says so if they are wrong, while a
    /// server may refuse only the listing's signature (moto does for a prefix holding `/`,
    /// botocore's own request too). A skewed clock (a retryable code) ends the attempt: it is no one
    /// request's fault.
    static func refusesListingForGood(_ error: S3ErrorAnswer) -> Bool {
        [403, 405, 501].contains(error.status) && !S3ErrorAnswer.retryableCodes.contains(error.code ?? "")
    }

    /// Records the creation marker, then creates.
    private mutating func create() -> Action {
        creations += 1
        guard creations <= Self.creationLimit else {
            return finish(.noAnswer("the server lost the multipart upload \(Self.creationLimit) times in one attempt"))
        }
        let marker = ResumableUpload(url: settings.creationMarker, offset: 0, endpointKey: settings.endpointKey)
        upload = marker
        parts = [:]
        return record(.upload(marker, parts: []), then: .create)
    }

    private mutating func list(_ upload: ResumableUpload) -> Action {
        listings += 1
        guard listings <= Self.creationLimit + 1 else {
            return finish(.noAnswer("the server kept refusing the parts it listed"))
        }
        phase = .listing(found: [], pages: 0)
        return .listParts(url: upload.url, marker: nil)
    }

    mutating func uploadLost() -> Action {
        let allConfirmed = (1...settings.partCount).allSatisfy { parts[$0] != nil }
        if allConfirmed {
            phase = .heading
            return .headObject
        }
        notices.append(.lost)
        return startOver()
    }

    mutating func startOver() -> Action {
        upload = nil
        parts = [:]
        return create()
    }

    mutating func record(_ change: Record, then next: Action?) -> Action {
        phase = .recording(then: next)
        return .record(change)
    }

    private mutating func proceed(to next: Action) -> Action {
        if case .create = next { phase = .creating }
        return next
    }

    /// A request confirmed something new.
    mutating func resetRequestCount() { requestsWithoutProgress = 0 }

    /// Counts a request that may not confirm anything new; ends the attempt past the limit.
    mutating func countRequest() -> Action? {
        requestsWithoutProgress += 1
        guard requestsWithoutProgress <= Self.requestsWithoutProgressLimit else {
            return finish(.noAnswer("\(Self.requestsWithoutProgressLimit) requests in a row confirmed no new part"))
        }
        return nil
    }

    func withOffset(_ upload: ResumableUpload) -> ResumableUpload {
        var updated = upload
        updated.offset = confirmedBytes
        return updated
    }

    /// The checksum the object must have, computed from the recorded parts, to compare with the
    /// object's `got`: the composite (`<checksum of the checksums>-<parts>`) when `got` is one, else
    /// the full-object checksum where the algorithm can derive it (CRC-32C); `nil` when a part has
    /// no checksum, or for a full-object SHA-256, which only the whole file's bytes could give.
    private func expectedChecksum(for got: String) -> String? {
        guard let algorithm = settings.checksum else { return nil }
        let ordered = parts.values.sorted { $0.number < $1.number }
        let checksums = ordered.compactMap(\.checksum)
        guard checksums.count == ordered.count, !checksums.isEmpty else { return nil }
        if got.contains("-") { return algorithm.composite(ofParts: checksums) }
        return algorithm.fullObject(ofParts: zip(ordered, checksums).map { (checksum: $1, length: Int64(settings.range(ofPart: $0.number).count)) })
    }

    mutating func finishOther(_ response: Response, during: String) -> Action {
        switch response {
        case .error(let error) where error.code == nil && (200..<300).contains(error.status):
            // A 2xx whose document did not come whole (cut after its head), or a server that is
            // not S3: not a failure to put the file aside for; the next attempt asks again.
            return finish(.noAnswer("the answer (HTTP \(error.status)) \(during) was not the document S3 sends: cut short, or url is not an S3 endpoint"))
        case .error(let error):
            return finish(.answered(error.answer(during: during)))
        case .failed(let message):
            return finish(.noAnswer(message))
        case .unreachable(let message):
            return finish(.unreachable(message))
        case .sourceChanged:
            return finish(.sourceChanged(nil))
        case .cancelled:
            return finish(.stopped)
        case .uploadCreated, .stored, .partsListed, .object, .noObject, .uploadsAbandoned, .digested:
            return finish(.noAnswer("the server's answer did not fit the request (\(during))"))
        }
    }

    /// The object is in the bucket: S3 answered 200 (the shell keeps the object's details).
    mutating func succeed(etag: String?) -> Action {
        objectETag = etag
        upload = nil
        return finish(.answered(ServerAnswer(status: 200)))
    }

    mutating func finish(_ report: AttemptReport) -> Action {
        phase = .finished
        return .finish(report)
    }
}
