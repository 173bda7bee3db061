import NIOCore

/// The first handler of a receiver's pipeline, next to the socket: while ``rate`` is set it lets
/// each `read` through only once the bytes read so far have taken `1/rate` seconds each, so the
/// client's writes block as against a slow server. Being below TLS, it paces the bytes on the wire,
/// whatever reads the TLS handler asks for.
final class ReadPacer: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Bytes per second; `nil` reads freely.
    var rate: Int? {
        didSet { if rate == nil { owed = 0 } }
    }
    private var owed = 0
    private var waiting = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if rate != nil { owed += unwrapInboundIn(data).readableBytes }
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        guard let rate, owed > 0 else {
            if !waiting { context.read() }
            return
        }
        if waiting { return }
        waiting = true
        let delay = TimeAmount.nanoseconds(Int64(Double(owed) / Double(max(1, rate)) * 1e9))
        owed = 0
        let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            handler.waiting = false
            if context.channel.isActive { context.read() }
        }
    }
}
