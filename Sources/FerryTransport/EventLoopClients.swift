import AsyncHTTPClient
import NIOCore
import Synchronization

/// One AsyncHTTPClient per event loop, for requests whose body must be made ready on the loop of the
/// connection that sends it (file regions written with `sendfile(2)`).
///
/// Such a request could pin itself to a loop of the shared client with `.delegateAndChannel(on:)`,
/// but AsyncHTTPClient serves a request that *requires* a loop from an idle connection on that loop
/// or else from a new "overflow" connection, which it closes as soon as it is idle: every other S3
/// part, and every body whose answer came before its last write, paid a new TCP connection. A client
/// whose only loop is that loop needs no requirement: its connections are ordinary pooled
/// keep-alive connections, and all of them, the request's delegate and the body's readiness run on
/// the one loop.
final class EventLoopClients: Sendable {
    private let lanes: [(loop: any EventLoop, client: HTTPClient)]
    private let turn = Mutex(0)

    init(group: any EventLoopGroup, configuration: HTTPClient.Configuration) {
        lanes = group.makeIterator().map { loop in (loop, HTTPClient(eventLoopGroup: loop, configuration: configuration)) }
    }

    /// The next loop and its client, in turn.
    func next() -> (loop: any EventLoop, client: HTTPClient) {
        let index = turn.withLock { turn in
            defer { turn = (turn + 1) % lanes.count }
            return turn
        }
        return lanes[index]
    }

    /// Closes every client's connection pool.
    func shutdown() async throws {
        for lane in lanes { try await lane.client.shutdown() }
    }
}
