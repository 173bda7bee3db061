import Logging
import NIOCore

/// Accepts connections on a NIO server channel until the task is cancelled, handling each in its
/// own child task; the control socket and the metrics endpoint both serve this way.
/// - Parameters:
///   - what: names the server in the error logged if accepting fails (not on cancellation).
///   - handle: serves one connection; cancelled with the others when the server stops.
func acceptConnections<Inbound: Sendable, Outbound: Sendable>(
    on server: NIOAsyncChannel<NIOAsyncChannel<Inbound, Outbound>, Never>, what: String, logger: Logger,
    handle: @escaping @Sendable (NIOAsyncChannel<Inbound, Outbound>) async -> Void
) async {
    await withDiscardingTaskGroup { group in
        do {
            try await server.executeThenClose { inbound in
                for try await connection in inbound {
                    group.addTask { await handle(connection) }
                }
            }
        } catch {
            if !Task.isCancelled {
                logger.error("\(what) failed", metadata: ["error": "\(error)"])
            }
        }
        group.cancelAll()
    }
}
