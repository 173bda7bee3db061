import FerryQueue
import FerryS3

/// How ``S3UploadMachine`` reconciles its record with the server's parts (ListParts), and learns,
/// by reading the file back, whether what the server holds is ours when the answer that would
/// have said so was lost: a listed part with no known checksum (its ETag is the MD5 of its bytes),
/// or an object whose ETag is the MD5 of its content.
extension S3UploadMachine {
    /// One page of ListParts.
    public mutating func listed(_ response: Response) -> Action {
        guard case .listing(let found, let pages) = phase, let upload else { preconditionFailure("listed() outside a listing") }
        switch response {
        case .partsListed(let page, let next):
            let all = found + page
            if let next, pages + 1 < listingPageLimit {
                phase = .listing(found: all, pages: pages + 1)
                return .listParts(url: upload.url, marker: next)
            }
            // The server's parts are the truth: a part we recorded that it does not list is sent
            // again. A part it lists is kept if its size is the one the layout gives it and, when
            // parts carry checksums, its checksum is known: listed by the server, or recorded
            // with the same ETag, or (a part whose answer was lost: no server measured lists
            // checksums, and completion must name them) read back from the file, when the
            // part's ETag is the MD5 of those bytes.
            var reconciled: [Int: UploadPart] = [:]
            var unknown: [Int: UploadPart] = [:]
            for part in all where (1...settings.partCount).contains(part.number)
                && part.size == Int64(settings.range(ofPart: part.number).count) {
                var part = part
                if let recorded = parts[part.number], S3ETag.same(recorded.etag, part.etag) {
                    part.checksum = part.checksum ?? recorded.checksum
                }
                if settings.checksum != nil && part.checksum == nil {
                    if S3ETag.md5(part.etag) != nil { unknown[part.number] = part }
                    continue
                }
                reconciled[part.number] = part
            }
            // Each part read back once, and no more than could have been in flight when answers
            // were lost (a server listing more gets the rest sent again): a listing cannot make
            // the file be read more than once.
            let toCheck = unknown.values.filter { reconciled[$0.number] == nil }.sorted { $0.number < $1.number }
            return checkParts(Array(toCheck.prefix(Self.concurrencyLimit)), kept: reconciled)
        case .error(let error) where error.code == "NoSuchUpload":
            return uploadLost()
        case .error(let error) where Self.refusesListingForGood(error):
            // A key that may upload but not list parts (s3:PutObject without
            // s3:ListMultipartUploadParts, a drop box's key): the record is the truth. A part whose
            // answer was lost is sent again; an upload the server no longer has answers the next
            // part or the completion with NoSuchUpload.
            notices.append(.partsNotListed(code: error.code ?? "HTTP \(error.status)"))
            return checkParts([], kept: parts)
        default:
            return finishOther(response, during: "listing the parts the server has")
        }
    }

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
            notices.append(.readingBack(part: next.number))
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
