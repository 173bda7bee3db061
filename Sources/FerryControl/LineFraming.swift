import NIOCore

/// One frame read from a control connection.
public enum ControlFrame: Sendable {
    /// A complete line, without its newline.
    case line(ByteBuffer)
    /// A line longer than the limit; its bytes were dropped up to the next newline.
    case oversized
}

/// Splits a byte stream into newline-terminated lines of at most `maximumLength` bytes. A longer
/// line is reported once as ``ControlFrame/oversized`` and skipped, without buffering it, so a
/// client sending a huge line costs the daemon no memory and the connection stays usable.
public struct ControlLineDecoder: ByteToMessageDecoder {
    public typealias InboundOut = ControlFrame

    public let maximumLength: Int
    private var discarding = false
    private var scanned = 0

    public init(maximumLength: Int) {
        self.maximumLength = maximumLength
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let view = buffer.readableBytesView
        let start = view.index(view.startIndex, offsetBy: scanned)
        if let newline = view[start...].firstIndex(of: 0x0A) {
            let length = newline - view.startIndex
            scanned = 0
            if discarding {
                discarding = false
                buffer.moveReaderIndex(forwardBy: length + 1)
                return .continue
            }
            if length > maximumLength {
                buffer.moveReaderIndex(forwardBy: length + 1)
                context.fireChannelRead(wrapInboundOut(.oversized))
                return .continue
            }
            var line = buffer.readSlice(length: length)!
            buffer.moveReaderIndex(forwardBy: 1)
            if line.readableBytesView.last == 0x0D { line.moveWriterIndex(to: line.writerIndex - 1) }
            context.fireChannelRead(wrapInboundOut(.line(line)))
            return .continue
        }
        if discarding {
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            scanned = 0
        } else if buffer.readableBytes > maximumLength {
            discarding = true
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            scanned = 0
            context.fireChannelRead(wrapInboundOut(.oversized))
        } else {
            scanned = buffer.readableBytes
        }
        return .needMoreData
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        // A last line without its newline still counts (it is usually truncated JSON, and gets an error reply).
        if !discarding, buffer.readableBytes > 0, let line = buffer.readSlice(length: buffer.readableBytes) {
            context.fireChannelRead(wrapInboundOut(.line(line)))
        }
        scanned = 0
        return .needMoreData
    }
}
