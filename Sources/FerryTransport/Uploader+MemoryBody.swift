import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1

extension Uploader {
    /// Sends a body held in memory (a small multipart form, an S3 XML document) in one write, through
    /// AsyncHTTPClient's delegate API: its `didSendRequestPart` reports the body once the connection
    /// has written it, so an answer that comes before the body was written is known as such.
    func executeFromMemory(
        _ request: UploadRequest, bytes: [UInt8], headers: HTTPHeaders, logger: Logger, counter: ByteCounter,
        watchdog: ProgressWatchdog, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> UploadResult {
        await throttled(Int64(bytes.count), watchdog: watchdog)
        let http = try HTTPClient.Request(
            url: request.url, method: HTTPMethod(rawValue: request.method), headers: headers, body: .byteBuffer(ByteBuffer(bytes: bytes)))
        let delegate = ResponseCollector(limit: Self.responseLimit, watchdog: watchdog, sent: counter, written: { progress(counter.add($0)) })
        let task = client.execute(request: http, delegate: delegate, eventLoop: .indifferent, deadline: nil, logger: logger.forHTTPClient)
        return try await answer(of: task, from: delegate, counter: counter, logger: logger)
    }

    /// Waits for a delegate-API request to end and returns the answer its collector kept.
    func answer(of task: HTTPClient.Task<Void>, from delegate: ResponseCollector, counter: ByteCounter, logger: Logger) async throws -> UploadResult {
        do {
            try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
        } catch {
            // The status is in: the server has decided, whatever happened to the rest of the answer.
            guard let answer = delegate.answer else { throw error }
            logger.debug("reading the response body failed after the status arrived", metadata: ["error": "\(error)"])
            return .response(status: answer.status, headers: answer.headers, body: answer.body, bytesSent: delegate.sentAtHead ?? counter.value)
        }
        guard let answer = delegate.answer else { throw HTTPClientError.remoteConnectionClosed }
        // What had been written when the answer came, not after: AsyncHTTPClient goes on writing
        // the body to a server that answered early but reads on, and the byte count must say the
        // answer was early (the 2xx may be to a body the server never looked at).
        return .response(status: answer.status, headers: answer.headers, body: answer.body, bytesSent: delegate.sentAtHead ?? counter.value)
    }
}
