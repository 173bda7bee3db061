import FerryQueue
import FerryS3

/// The sending phase of ``S3UploadMachine``: which parts start when, what a part's answer does,
/// and how a failure among parts in flight is held until they are answered.
extension S3UploadMachine {
    /// The shell started the part the last action asked for: what else to start now.
    public mutating func partStarted() -> Action {
        guard case .sending = phase else { preconditionFailure("partStarted() outside sending") }
        return continueSending()
    }

    /// Part `number`'s body has been written whole (handed to the kernel): the next part may start
    /// while this one waits for its answer. Ignored for a part already answered.
    public mutating func partWritten(_ number: Int) -> Action {
        guard case .sending = phase else { preconditionFailure("partWritten() outside sending") }
        writing.remove(number)
        return continueSending()
    }

    /// The answer to UploadPart `number`.
    public mutating func storedPart(_ number: Int, _ response: Response) -> Action {
        guard case .sending = phase, let upload, inFlight.contains(number) else { preconditionFailure("storedPart() for a part not in flight") }
        inFlight.remove(number)
        writing.remove(number)
        guard case .stored(let etag, let checksum) = response else {
            if heldFailure == nil { heldFailure = (number, response) }
            return continueSending()
        }
        let part = UploadPart(number: number, size: Int64(settings.range(ofPart: number).count), etag: etag, checksum: checksum)
        parts[number] = part
        resetRequestCount()
        let updated = withOffset(upload)
        self.upload = updated
        return record(.part(part, upload: updated, confirmedParts: parts.count), then: nil)
    }

    /// What the sending phase does next: a held failure once nothing is in flight; else another
    /// part if the window has room (fewer than `partConcurrency` bodies being written, and fewer
    /// than twice that many parts unanswered); else wait; else (every part confirmed) completion.
    mutating func continueSending() -> Action {
        guard let upload else { preconditionFailure("sending without an upload") }
        phase = .sending
        if let held = heldFailure {
            guard inFlight.isEmpty else { return .awaitPart }
            heldFailure = nil
            return partFailed(held.number, held.response)
        }
        let concurrency = min(max(settings.partConcurrency, 1), Self.concurrencyLimit)
        if writing.count < concurrency, inFlight.count < 2 * concurrency,
           let number = (1...settings.partCount).first(where: { parts[$0] == nil && !inFlight.contains($0) }) {
            if let action = countRequest() { return action }
            return sendPart(number)
        }
        if !inFlight.isEmpty { return .awaitPart }
        if let action = countRequest() { return action }
        phase = .completing
        return .complete(url: upload.url, parts: parts.values.sorted { $0.number < $1.number })
    }

    /// A part's failure, decided with no part in flight.
    private mutating func partFailed(_ number: Int, _ response: Response) -> Action {
        switch response {
        case .error(let error) where error.code == "NoSuchUpload":
            return uploadLost()
        case .error(let error) where S3ErrorAnswer.checksumCodes.contains(error.code ?? ""):
            rejections[number, default: 0] += 1
            notices.append(.partRejected(number: number, code: error.code ?? ""))
            guard rejections[number]! < Self.partRejectionLimit else {
                return finishOther(response, during: "uploading part \(number)")
            }
            return countRequest() ?? sendPart(number)
        default:
            return finishOther(response, during: "uploading part \(number) of \(settings.partCount)")
        }
    }

    mutating func sendPart(_ number: Int) -> Action {
        guard let upload else { preconditionFailure("a part without an upload") }
        let range = settings.range(ofPart: number)
        inFlight.insert(number)
        writing.insert(number)
        phase = .sending
        return .uploadPart(url: upload.url, number: number, offset: range.lowerBound, length: Int64(range.count))
    }
}
