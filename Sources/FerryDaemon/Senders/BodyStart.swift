import FerryTransport
import Synchronization

/// Where a multipart build and its sender meet: the build announces the body file once it exists
/// (``started()`` returns it with a ``GrowingBody`` to follow), then advances it; `nil` if the build
/// ended first (a failure, or nothing to send).
final class BodyStart: Sendable {
    /// Why a growing body was abandoned (the pipeline learns the reason from the build's result).
    struct Abandoned: Error {}

    private let state = Mutex<(started: (BuiltBody, GrowingBody)??, waiter: CheckedContinuation<(BuiltBody, GrowingBody)?, Never>?)>((nil, nil))

    /// The growing body, once started.
    var body: GrowingBody? { state.withLock { $0.started??.1 } }

    /// The build wrote `count` bytes of `built` (the first call starts the body).
    func advance(_ built: BuiltBody, to count: Int64) {
        let body = state.withLock { state -> GrowingBody? in
            if case .some(.some(let started)) = state.started { return started.1 }
            if case .some(.none) = state.started { return nil }
            let body = GrowingBody(length: built.contentLength)
            state.started = .some((built, body))
            return body
        }
        body?.advance(to: count)
        if let waiter = state.withLock({ state -> CheckedContinuation<(BuiltBody, GrowingBody)?, Never>? in
            defer { state.waiter = nil }
            return state.waiter
        }), case .some(.some(let started)) = state.withLock({ $0.started }) {
            waiter.resume(returning: started)
        }
    }

    /// Ends the wait with `value` if the body has not started.
    func fire(_ value: (BuiltBody, GrowingBody)?) {
        let waiter = state.withLock { state -> CheckedContinuation<(BuiltBody, GrowingBody)?, Never>? in
            if state.started == nil { state.started = .some(value) }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: state.withLock { $0.started ?? nil })
    }

    /// The body file and its growing view, or `nil` if the build ended before it existed.
    func started() async -> (BuiltBody, GrowingBody)? {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> (BuiltBody, GrowingBody)??? in
                if let started = state.started { return .some(started) }
                state.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now ?? nil) }
        }
    }
}
