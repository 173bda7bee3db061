import FerryConfig
import FerryQueue
import Foundation

extension ResumableUploadMachine {
    /// The upload's fixed facts.
    public struct Settings: Sendable, Equatable {
        /// Where the upload is created (the spool's URL, names filled in).
        public var endpoint: String
        /// The file's length, sent as `Upload-Length`.
        public var length: Int64
        /// The most sent in one append (`chunk_size`); `nil`: as much as the server allows.
        public var chunkSize: Int64?
        /// Names the endpoint an upload was created at (stored with it).
        public var endpointKey: String?
        public var interop: ResumableInteropVersion
        /// Files up to this long go whole in the creation request, to any server: one request, and a
        /// cut before its answer (which alone would bring the upload's URL) costs little. The sender
        /// sets 0 after a failed attempt: on a link that drops every such request, a file created
        /// empty and appended still gets through.
        public var wholeBodyLimit: Int64

        public init(
            endpoint: String, length: Int64, chunkSize: Int64? = nil, endpointKey: String? = nil, interop: ResumableInteropVersion = .latest,
            wholeBodyLimit: Int64 = ResumableUploadMachine.defaultWholeBodyLimit
        ) {
            self.endpoint = endpoint
            self.length = length
            self.chunkSize = chunkSize
            self.endpointKey = endpointKey
            self.interop = interop
            self.wholeBodyLimit = wholeBodyLimit
        }
    }

    /// What the shell does next.
    public enum Action: Sendable, Equatable {
        /// `OPTIONS` the endpoint (shared between uploads) and report with ``discovered(_:)``.
        case discover
        /// Send the creation request (the spool's method) with the first `bodyLength` bytes and
        /// `Upload-Complete` `complete`; report with ``created(_:)``. With `complete` it is also an
        /// ordinary upload of the whole file, to a server that knows nothing of the draft.
        case create(bodyLength: Int64, complete: Bool)
        /// `HEAD` the upload; report with ``offsetAsked(_:)``.
        case askOffset(url: String)
        /// `PATCH` `length` bytes from `offset` with `Upload-Complete` `complete`; report with ``appended(_:)``.
        case append(url: String, offset: Int64, length: Int64, complete: Bool)
        /// Make this upload state durable, then call ``recorded()``.
        case record(ResumableUpload)
        /// `DELETE` the upload (best-effort), then call ``terminated()``.
        case terminate(url: String)
        /// The attempt is over.
        case finish(AttemptReport)
    }

    /// What one request got.
    public typealias Response = RequestOutcome

    /// What `OPTIONS` showed of the endpoint.
    public enum Discovery: Sendable, Equatable {
        /// The resource offers resumable uploads, with these limits.
        case offered(UploadLimit)
        /// It does not (or did not say so): files are sent whole, as ordinary uploads.
        case notOffered
        /// No usable answer (a 5xx, a cut connection).
        case failed(String)
        /// No connection could be made (``AttemptReport/unreachable(_:)``).
        case unreachable(String)
    }

    /// Things worth a log line that the machine noticed.
    public enum Notice: Sendable, Equatable {
        case notOffered
        case lost(status: Int)
        case mismatch(offset: Int64, length: Int64?)
        case created(offset: Int64)
        case resumed(offset: Int64)
        case completedEarlier
        case appendTooLarge(length: Int64)
    }
}
