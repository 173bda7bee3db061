import AsyncHTTPClient
import FerrySystem
import Foundation
import Logging
import NIOCore
import _NIOFileSystem
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Keeps a response's status, headers and first `limit` bytes (for the legacy AsyncHTTPClient API,
/// which ``Uploader`` uses to send bodies with `sendfile`). An answer longer than 4 MiB is cut off:
/// the connection is simply not reused.
final class ResponseCollector: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void
    struct Answer: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]
    }

    private let limit: Int
    private let watchdog: ProgressWatchdog
    /// Hears of each body part once the connection has written it (its length), when the request's
    /// body is not counted elsewhere.
    private let written: (@Sendable (Int64) -> Void)?
    /// The request's running count of body bytes written, read when the answer's head arrives.
    private let sent: ByteCounter
    private let state = Mutex<(answer: Answer?, drained: Int, sentAtHead: Int64?)>((nil, 0, nil))

    init(limit: Int, watchdog: ProgressWatchdog, sent: ByteCounter, written: (@Sendable (Int64) -> Void)? = nil) {
        self.limit = limit
        self.watchdog = watchdog
        self.sent = sent
        self.written = written
    }

    var answer: Answer? { state.withLock { $0.answer } }

    /// The body bytes written when the answer's head arrived: fewer than the body's length means
    /// the server answered early, even if it read (and dropped) the rest afterwards, as Node does.
    var sentAtHead: Int64? { state.withLock { $0.sentAtHead } }

    func didSendRequestPart(task: HTTPClient.Task<Void>, _ part: IOData) {
        watchdog.progressed()
        written?(Int64(part.readableBytes))
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        watchdog.progressed()
        watchdog.answerStarted()
        let sentNow = sent.value
        state.withLock {
            $0.answer = Answer(status: Int(head.status.code), headers: head.headers.map { (name: $0.name, value: $0.value) }, body: [])
            $0.sentAtHead = sentNow
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        watchdog.progressed()
        let tooLong = state.withLock { state -> Bool in
            if let count = state.answer?.body.count, count < limit {
                state.answer?.body += buffer.readableBytesView.prefix(limit - count)
            }
            state.drained += buffer.readableBytes
            return state.drained > 4 * 1024 * 1024
        }
        if tooLong { task.cancel() }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {}
}
