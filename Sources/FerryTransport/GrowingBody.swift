import NIOCore
import Synchronization

/// A request body that is still being written to its file: the sender may read only what the
/// writer has put in place (``advance(to:)``), and stops if the writer fails. With it, sending a
/// multipart body overlaps with building it.
///
/// The writer should hold back the last bytes until the body is known to be good (for ferryd: the
/// source did not change while it was copied), calling ``finish()`` only then; a server can then
/// never receive a whole body made from a changing file.
public final class GrowingBody: Sendable {
    private struct State {
        var available: Int64 = 0
        var finished = false
        var failure: (any Error)?
        var waiters: [(until: Int64, continuation: CheckedContinuation<Void, any Error>)] = []
        var promises: [(until: Int64, promise: EventLoopPromise<Void>)] = []
    }

    /// The body's full length.
    public let length: Int64
    private let state = Mutex(State())

    public init(length: Int64) { self.length = length }

    /// The first `count` bytes are in place (only the first `length - 1` count until ``finish()``).
    public func advance(to count: Int64) {
        settle { $0.available = max($0.available, min(count, length - 1)) }
    }

    /// Every byte is in place and good.
    public func finish() {
        settle { $0.available = length; $0.finished = true }
    }

    /// The body will not be completed: readers waiting, and readers to come, get `error`.
    public func fail(_ error: any Error) {
        settle { if !$0.finished { $0.failure = error } }
    }

    /// Returns once the first `end` bytes are in place; throws if the writer failed.
    public func wait(until end: Int64) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let now = state.withLock { state -> Result<Void, any Error>? in
                if let failure = state.failure { return .failure(failure) }
                if state.available >= end { return .success(()) }
                state.waiters.append((end, continuation))
                return nil
            }
            if let now { continuation.resume(with: now) }
        }
    }

    /// A future for ``wait(until:)``, on `loop`.
    public func ready(until end: Int64, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        let now = state.withLock { state -> Result<Void, any Error>? in
            if let failure = state.failure { return .failure(failure) }
            if state.available >= end { return .success(()) }
            state.promises.append((end, promise))
            return nil
        }
        if let now { promise.completeWith(now) }
        return promise.futureResult
    }

    private func settle(_ change: (inout State) -> Void) {
        let (continuations, promises, failure) = state.withLock { state in
            change(&state)
            if let failure = state.failure {
                defer { state.waiters = []; state.promises = [] }
                return (state.waiters.map(\.continuation), state.promises.map(\.promise), Optional(failure))
            }
            let available = state.available
            let ready = state.waiters.filter { $0.until <= available }.map(\.continuation)
            state.waiters.removeAll { $0.until <= available }
            let readyPromises = state.promises.filter { $0.until <= available }.map(\.promise)
            state.promises.removeAll { $0.until <= available }
            return (ready, readyPromises, Optional<any Error>.none)
        }
        for continuation in continuations {
            if let failure { continuation.resume(throwing: failure) } else { continuation.resume() }
        }
        for promise in promises {
            if let failure { promise.fail(failure) } else { promise.succeed() }
        }
    }
}
