import Synchronization

/// The actions to run when a control connection closes, registered by the requests that wait on
/// it and removed when they end: one callback on the channel however many requests wait in turn.
final class ConnectionClosing: Sendable {
    private let state = Mutex<(isClosed: Bool, next: Int, actions: [Int: @Sendable () -> Void])>((false, 0, [:]))

    /// Registers `action` (run at once if the connection is closed already); `unregister` with the
    /// token it returns when the request ends.
    func register(_ action: @escaping @Sendable () -> Void) -> Int {
        let (token, runNow) = state.withLock { state -> (Int, Bool) in
            state.next += 1
            if state.isClosed { return (state.next, true) }
            state.actions[state.next] = action
            return (state.next, false)
        }
        if runNow { action() }
        return token
    }

    func unregister(_ token: Int) { _ = state.withLock { $0.actions.removeValue(forKey: token) } }

    /// The connection closed: runs every registered action.
    func closed() {
        let actions = state.withLock { state in
            state.isClosed = true
            defer { state.actions = [:] }
            return Array(state.actions.values)
        }
        for action in actions { action() }
    }
}
