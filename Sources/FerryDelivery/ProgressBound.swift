/// Bounds the requests in a row that do not move a resumable upload's confirmed offset past its
/// best, so a server cannot drive an upload machine round in circles.
struct ProgressBound: Sendable {
    /// Requests in a row that may leave the confirmed offset where it was before the attempt ends.
    static let limit = 16

    private var best: Int64
    /// Requests since the offset last moved past its best.
    private(set) var requestsWithoutProgress = 0
    init(start: Int64) { best = start }

    /// Counts a request that confirmed `offset`, or nothing (`nil`).
    mutating func count(offset: Int64?) {
        if let offset, offset > best {
            best = offset
            requestsWithoutProgress = 0
        } else {
            requestsWithoutProgress += 1
        }
    }

    /// Counts the creation of a new upload that holds `offset` bytes: the best is then that
    /// upload's, not the lost one's (whose offset its appends would otherwise have to pass before
    /// they counted). Creations have their own bound. (Whether the attempt moved the upload on,
    /// which resets the retry count, is the machines' to say: past the offset it began at.)
    mutating func restart(at offset: Int64) {
        best = offset
        requestsWithoutProgress = 0
    }

    /// Why the attempt ends here, if the bound is reached.
    var exhausted: String? {
        guard requestsWithoutProgress >= Self.limit else { return nil }
        return "the server answered \(requestsWithoutProgress) requests in a row without confirming more of the upload; trying again later"
    }
}
