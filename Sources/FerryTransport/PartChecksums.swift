import Synchronization

/// The checksums of one multipart upload's parts, each computed while the part before it is on
/// the wire: a part's checksum goes in its headers, so it must be read before its body is sent,
/// and with one part in flight that read would otherwise stand between one part's answer and the
/// next part's first byte. Computing ahead reads the file, never sends: it puts no more of the
/// file in flight than the parts themselves.
///
/// A checksum computed ahead is used once: a part sent again (its checksum refused) reads its
/// range afresh, and a failure computed ahead is computed again when asked for. A part whose own
/// request asked first is not computed ahead. (``S3Client`` uses it; generic so that it is
/// tested with plain values.)
public final class PartChecksums<Checksum: Sendable, Failure: Error>: Sendable {
    public typealias Value = Result<Checksum, Failure>

    private enum Entry {
        /// Being computed ahead; the part's request, if it asked meanwhile, waits here.
        case computing(waiting: CheckedContinuation<Value?, Never>?)
        /// Computed ahead, not yet asked for.
        case computed(Value)
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        /// Parts confirmed before this transfer, or whose requests have asked for their checksum:
        /// not worth computing ahead.
        var asked: Set<Int>
    }

    private let state: Mutex<State>

    /// `confirmed`: the parts the server already has.
    public init(confirmed: some Sequence<Int>) {
        state = Mutex(State(asked: Set(confirmed)))
    }

    /// Part `number`'s checksum: the one computed ahead (waiting for it if it is still being
    /// computed), else `compute()`'s.
    public func checksum(ofPart number: Int, compute: () async -> Value) async -> Value {
        let ahead: Value? = await withCheckedContinuation { continuation in
            let found: Value?? = state.withLock { state in
                state.asked.insert(number)
                switch state.entries[number] {
                case .computed(let value)?:
                    state.entries[number] = nil
                    return .some(value)
                case .computing(nil)?:
                    state.entries[number] = .computing(waiting: continuation)
                    return nil
                case .computing(_?)?:
                    preconditionFailure("two requests for part \(number) at once")
                case nil:
                    return .some(nil)
                }
            }
            if let found { continuation.resume(returning: found) }
        }
        if case .success? = ahead, let ahead { return ahead }
        return await compute()
    }

    /// Computes part `number`'s checksum ahead with `compute`, unless its request asked already,
    /// the server has it, or it is being computed.
    public func computeAhead(ofPart number: Int, compute: () async -> Value) async {
        let claimed = state.withLock { state in
            guard !state.asked.contains(number), state.entries[number] == nil else { return false }
            state.entries[number] = .computing(waiting: nil)
            return true
        }
        guard claimed else { return }
        let value = await compute()
        let waiting = state.withLock { state -> CheckedContinuation<Value?, Never>? in
            guard case .computing(let waiting) = state.entries[number] else { return nil }
            state.entries[number] = waiting == nil ? .computed(value) : nil
            return waiting
        }
        waiting?.resume(returning: value)
    }

    /// Whether part `number`'s request is waiting for its checksum to be computed ahead.
    public func isWaiting(forPart number: Int) -> Bool {
        state.withLock { state in
            if case .computing(_?)? = state.entries[number] { return true }
            return false
        }
    }
}
