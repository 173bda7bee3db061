import FerryQueue
import FerryS3

/// How ``S3UploadMachine`` learns, by reading the file back, whether what the server holds is
/// ours when the answer that would have said so was lost: a listed part with no known checksum
/// (its ETag is the MD5 of its bytes), or an object whose ETag is the MD5 of its content.
extension S3UploadMachine {
    /// The file's range was read back (``Action/digest(offset:length:withChecksum:)``).
    public mutating func digested(_ response: Response) -> Action {
        switch phase {
        case .checkingParts(var pending, var kept):
            guard case .digested(let md5, let checksum) = response else {
                return finishOther(response, during: "reading back a part the server holds")
            }
            var part = pending.removeFirst()
            if let etag = S3ETag.md5(part.etag), etag == md5.lowercased(), let checksum {
                part.checksum = checksum
                kept[part.number] = part
            }
            return checkParts(pending, kept: kept)
        case .checkingObject(let etag):
            guard case .digested(let md5, _) = response else {
                return finishOther(response, during: "reading back the file to compare with the object")
            }
            if S3ETag.md5(etag) == md5.lowercased() {
                notices.append(.completedEarlier)
                return succeed(etag: etag)
            }
            notices.append(.lost)
            return startOver()
        default:
            preconditionFailure("digested() outside a check")
        }
    }

    /// Reads back the next of `pending`, else records the listed parts `kept` as the confirmed ones.
    mutating func checkParts(_ pending: [UploadPart], kept: [Int: UploadPart]) -> Action {
        if let next = pending.first {
            phase = .checkingParts(pending: pending, kept: kept)
            let range = settings.range(ofPart: next.number)
            return .digest(offset: range.lowerBound, length: Int64(range.count), withChecksum: true)
        }
        guard let upload else { preconditionFailure("checking parts without an upload") }
        let recognised = kept.values.filter { part in parts[part.number].map { !S3ETag.same($0.etag, part.etag) } ?? true }.count
        if recognised > 0 { notices.append(.partsRecognised(count: recognised)) }
        parts = kept
        let updated = withOffset(upload)
        self.upload = updated
        return record(.upload(updated, parts: parts.values.sorted { $0.number < $1.number }), then: nil)
    }
}
