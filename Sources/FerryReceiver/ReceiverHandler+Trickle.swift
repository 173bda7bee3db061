import Foundation
import NIOCore
import NIOHTTP1

/// The `trickleAnswer` fault: an answer that never ends.
extension ReceiverHandler {
    /// Sends the head of a chunked answer, then one body byte every `interval` while the connection lasts.
    func trickle(status: Int, interval: Duration, context: ChannelHandlerContext) {
        guard let request else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Transfer-Encoding", value: "chunked")
        headers.add(name: "Content-Type", value: "text/plain")
        context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(
            version: request.head.version, status: HTTPResponseStatus(statusCode: status), headers: headers))), promise: nil)
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let step = TimeAmount.nanoseconds(Int64(interval.components.seconds) * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000)
        context.eventLoop.scheduleRepeatedTask(initialDelay: step, delay: step) { task in
            let (handler, context) = loopBound.value
            guard context.channel.isActive else {
                task.cancel()
                return
            }
            context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: "."))))).whenFailure { _ in
                task.cancel()
            }
        }
    }
}
