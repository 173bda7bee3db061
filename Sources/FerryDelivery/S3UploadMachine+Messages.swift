import FerryQueue
import FerryS3
import Foundation

/// The facts an ``S3UploadMachine`` starts from, and the messages it exchanges with its shell
/// besides its actions: the durable changes it asks for, the responses it is told, its notices.
extension S3UploadMachine {
    /// The upload's fixed facts.
    public struct Settings: Sendable, Equatable {
        /// The file's length.
        public var length: Int64
        /// The size of every part but the last (already grown so no more than 10,000 are needed).
        public var partSize: Int64
        /// Files at least this long are sent as multipart uploads; smaller ones with one PutObject.
        public var multipartThreshold: Int64
        /// Names the endpoint, bucket, key and part layout an upload belongs to (stored with it).
        public var endpointKey: String?
        /// The checksum every part carries, which the object's composite checksum must match.
        public var checksum: S3ChecksumAlgorithm?
        /// The most parts' bodies being written at once (1 to ``S3UploadMachine/concurrencyLimit``);
        /// up to twice as many parts may be waiting for their answers.
        public var partConcurrency: Int
        /// What is recorded before CreateMultipartUpload is sent
        /// (``FerryS3/S3ObjectAddress/creationMarker``), so that an upload whose creation's answer
        /// a crash lost is found and aborted by the next attempt.
        public var creationMarker: String

        public init(
            length: Int64, partSize: Int64, multipartThreshold: Int64, endpointKey: String? = nil, checksum: S3ChecksumAlgorithm? = .crc32c,
            partConcurrency: Int = 1, creationMarker: String
        ) {
            self.length = length
            self.partSize = partSize
            self.multipartThreshold = multipartThreshold
            self.endpointKey = endpointKey
            self.checksum = checksum
            self.partConcurrency = partConcurrency
            self.creationMarker = creationMarker
        }

        /// How many parts the file takes.
        public var partCount: Int { length == 0 ? 1 : Int((length + partSize - 1) / partSize) }

        /// The byte range of part `number` (from 1).
        public func range(ofPart number: Int) -> Range<Int64> {
            let start = Int64(number - 1) * partSize
            return start..<min(start + partSize, length)
        }
    }

    /// A change to the upload's durable state.
    public enum Record: Sendable, Equatable {
        /// The upload (`nil`: none) and exactly these confirmed parts.
        case upload(ResumableUpload?, parts: [UploadPart])
        /// One more confirmed part, the upload's new byte count, and how many parts are now
        /// confirmed (parts in flight are confirmed in any order).
        case part(UploadPart, upload: ResumableUpload, confirmedParts: Int)
    }

    /// What one request got, as the shell parsed it.
    public enum Response: Sendable, Equatable {
        /// CreateMultipartUpload's `UploadId`, as the upload's URL (the object's URL with `?uploadId=`).
        case uploadCreated(url: String)
        /// A part or the whole object was stored: its ETag, and the checksum the server verified.
        case stored(etag: String, checksum: String?)
        /// One page of ListParts; `next`: the marker of the next page, if truncated.
        case partsListed([UploadPart], next: Int?)
        /// CompleteMultipartUpload (or HEAD) found the object: its ETag and checksum.
        case object(etag: String?, checksum: String?)
        /// HEAD found no object.
        case noObject
        /// ListMultipartUploads of the key, and an abort of each upload it listed: how many.
        case uploadsAbandoned(Int)
        /// A range of the file read back: its MD5 (hex) and, if asked, its checksum (base64).
        case digested(md5: String, checksum: String?)
        /// An S3 error (status, code, message), including an `<Error>` inside a 200.
        case error(S3ErrorAnswer)
        /// No usable answer.
        case failed(String)
        /// No connection could be made (``AttemptReport/unreachable(_:)``).
        case unreachable(String)
        /// The file is no longer the version being sent.
        case sourceChanged
        case cancelled
    }

    /// Things worth a log line that the machine noticed.
    public enum Notice: Sendable, Equatable {
        case created
        case resumed(partsConfirmed: Int, partsTotal: Int)
        case lost
        case partRejected(number: Int, code: String)
        case completedEarlier
        /// HEAD on the object was refused (403), so whether an earlier completion stored it cannot
        /// be told: the upload starts over.
        case objectUnreadable
        /// Parts the server listed that were not recorded (their answers lost), kept: not sent again.
        case partsRecognised(count: Int)
        /// The file is read back to compare with what the server holds: part `number`, or (`nil`)
        /// the whole object.
        case readingBack(part: Int?)
        case checksumMismatch(expected: String, got: String)
        /// Uploads of the key aborted because a crash lost the answer that created them.
        case abandoned(count: Int)
        /// They could not be listed (the key may not list uploads): any stays until a lifecycle rule.
        case notAbandoned(code: String)
        /// ListParts was refused for good (the key may not list parts): the recorded parts are kept.
        case partsNotListed(code: String)
    }
}
