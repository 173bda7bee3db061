import Foundation
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// Handles one connection's requests for a ``Receiver``: runs the plan's action for each and, when
/// storing, streams file parts straight to disk while hashing them.
///
/// File writes are plain blocking `write(2)` calls on the event loop: this is a test and demo server
/// on loopback, where the page cache absorbs them.
final class ReceiverHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let core: ReceiverCore
    var request: InFlight?
    /// While a `stallUntil` request waits at its gate, what arrives is held here, in order.
    private var held: [HTTPServerRequestPart]?

    init(core: ReceiverCore) { self.core = core }

    /// The request being received on this connection.
    struct InFlight {
        var index: Int
        var head: HTTPRequestHead
        var action: ReceiverAction
        var bodyBytes: Int64 = 0
        var parser: MultipartStreamParser?
        /// A non-multipart body, stored as one file.
        var rawBody: PartSink?
        var currentPart: PartSink?
        var fields: [ReceivedField] = []
        var files: [ReceivedFile] = []
        var stopped = false
        /// A `stallUntil` request whose gate has opened.
        var released = false
        var error: String?
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if held != nil {
            held!.append(part)
            return
        }
        process(part, context: context)
    }

    private func process(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            begin(head, context: context)
        case .body(let buffer):
            body(buffer, context: context)
        case .end:
            end(context: context)
        }
    }

    private func begin(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let headers = head.headers.map { HeaderField(name: $0.name, value: $0.value) }
        let (index, action) = core.begin(method: head.method.rawValue, uri: head.uri, headers: headers)
        var request = InFlight(index: index, head: head, action: action)
        if case .respondEarly(let status, let extra, let text) = action {
            self.request = request
            respond(status: status, headers: extra, body: Array(text.utf8), close: true, context: context)
            self.request?.stopped = true
            return
        }
        if head.headers.first(name: "Expect")?.lowercased() == "100-continue" {
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        if case .slowRead(let rate, _) = action {
            // Small reads, each one let through only when the bytes so far have "taken" their time.
            let channel = context.channel
            let chunk = max(1024, min(64 * 1024, rate / 10))
            channel.setOption(ChannelOptions.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 1024, initial: chunk, maximum: chunk))
                .whenComplete { _ in }
            (try? context.pipeline.syncOperations.handler(type: ReadPacer.self))?.rate = rate
        }
        if action.stores {
            let contentType = head.headers.first(name: "Content-Type") ?? ""
            let (mediaType, parameters) = HeaderParameters.parse(contentType)
            if mediaType.lowercased() == "multipart/form-data" {
                if let boundary = parameters["boundary"], !boundary.isEmpty {
                    request.parser = MultipartStreamParser(boundary: boundary)
                } else {
                    request.error = "multipart/form-data without a boundary parameter"
                }
            } else if head.method == .PUT || head.method == .POST || head.method == .PATCH {
                let name = head.uri.split(separator: "?").first.flatMap { $0.split(separator: "/").last }.map(String.init) ?? "upload"
                request.rawBody = PartSink(
                    fieldName: "", filenameParameter: name.removingPercentEncoding ?? name,
                    contentType: head.headers.first(name: "Content-Type"), directory: core.directory, countOnly: core.discard,
                    keep: core.keepFiles)
            }
        }
        self.request = request
    }

    private func body(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        guard var request, !request.stopped else { return }
        var buffer = buffer
        // Fault actions act at an exact byte count: cut the chunk there.
        var limit = request.action.cutOff
        if case .stallUntil(let after, _) = request.action, !request.released { limit = after }
        var rest: ByteBuffer?
        if let limit, request.bodyBytes + Int64(buffer.readableBytes) >= limit {
            let keep = Int(max(0, limit - request.bodyBytes))
            rest = buffer.getSlice(at: buffer.readerIndex + keep, length: buffer.readableBytes - keep)
            buffer = buffer.getSlice(at: buffer.readerIndex, length: keep)!
            if case .stallUntil = request.action {
                request.released = true  // the rest is processed once the gate opens
            } else {
                request.stopped = true
            }
        }
        request.bodyBytes += Int64(buffer.readableBytes)
        if request.error == nil {
            buffer.withUnsafeReadableBytes { bytes in
                if let sink = request.rawBody {
                    sink.append(bytes)
                } else if var parser = request.parser {
                    do {
                        try parser.feed(bytes) { event in handle(event, request: &request) }
                    } catch {
                        request.error = "invalid multipart body: \(error)"
                    }
                    request.parser = parser
                }
            }
        }
        let bodyBytes = request.bodyBytes
        core.update(request.index) { $0.bodyBytes = bodyBytes }
        self.request = request
        if case .stallUntil(_, let gate) = request.action, let rest {
            // Stop reading and hold whatever still arrives until the gate opens; then replay it in order.
            held = [.body(rest)]
            let channel = context.channel
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            gate.whenOpen {
                channel.eventLoop.execute {
                    let (handler, context) = loopBound.value
                    let parts = handler.held ?? []
                    handler.held = nil
                    for part in parts { handler.process(part, context: context) }
                    channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                    channel.read()
                }
            }
            return
        }
        if request.stopped {
            switch request.action {
            case .stall:
                context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            case .disconnect, .reset, .acceptPartial:
                cutShort(context: context)
            case .answerThenDrain(_, let status):
                answerEarly(status: status, context: context)
            default:
                break
            }
        }
    }

    /// `answerThenDrain`: the answer now; the rest of the body is read and dropped (the request is
    /// stopped, so its bytes are not counted or stored).
    private func answerEarly(status: Int, context: ChannelHandlerContext) {
        guard let request else { return }
        discardParts()
        self.request?.stopped = true
        core.update(request.index) { $0.error = "answered \(status) after \(request.bodyBytes) body bytes, then dropped the rest (not stored)" }
        respond(status: status, headers: [HeaderField(name: "Content-Type", value: "application/json")],
                body: Array("{\"accepted\":true}".utf8), close: false, context: context)
        // Read on only half a second later, so that the answer reaches the client before the rest of
        // its body can: on loopback 48 MiB otherwise pass in the time the client takes to read it.
        let channel = context.channel
        channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        channel.eventLoop.scheduleTask(in: .milliseconds(500)) {
            channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            channel.read()
        }
    }

    /// Ends a request the plan cuts short (`disconnect`, `reset`, `acceptPartial`), mid-body or,
    /// when the body was shorter than the cut-off, at its end. Nothing is stored.
    private func cutShort(context: ChannelHandlerContext) {
        guard let request else { return }
        discardParts()
        self.request?.stopped = true
        switch request.action {
        case .disconnect:
            core.update(request.index) { $0.error = "disconnected by plan" }
            context.close(promise: nil)
        case .reset:
            core.update(request.index) { $0.error = "reset by plan" }
            Self.reset(context.channel)
        case .acceptPartial(_, let status):
            core.update(request.index) { $0.error = "answered \(status) after \(request.bodyBytes) body bytes (truncated, not stored)" }
            respond(status: status, headers: [HeaderField(name: "Content-Type", value: "application/json")],
                    body: Array("{\"accepted\":true}".utf8), close: true, context: context)
        default:
            break
        }
    }

    /// Closes `channel` with a TCP RST: `SO_LINGER` {on, 0} makes close(2) discard unsent data and
    /// reset the connection instead of the orderly FIN.
    static func reset(_ channel: any Channel) {
        guard let provider = channel as? any SocketOptionProvider else {
            channel.close(promise: nil)
            return
        }
        provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Back to normal reading after a paced (`slowRead`) request.
    private func endPacing(context: ChannelHandlerContext) {
        (try? context.pipeline.syncOperations.handler(type: ReadPacer.self))?.rate = nil
        context.channel.setOption(ChannelOptions.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 65536, maximum: 1 << 20))
            .whenComplete { _ in }
    }

    private func handle(_ event: MultipartStreamParser.Event, request: inout InFlight) {
        switch event {
        case .partBegin(let headers):
            let disposition = headers.first { $0.name == "content-disposition" }?.value ?? ""
            let (_, parameters) = HeaderParameters.parse(disposition)
            request.currentPart = PartSink(
                fieldName: parameters["name"] ?? "", filenameParameter: parameters["filename"],
                contentType: headers.first { $0.name == "content-type" }?.value, directory: core.directory,
                countOnly: core.discard, keep: core.keepFiles)
        case .partData(let bytes):
            request.currentPart?.append(bytes)
        case .partEnd:
            guard let part = request.currentPart else { return }
            part.finish()
            request.currentPart = nil
            if let filename = part.filenameParameter {
                request.files.append(ReceivedFile(
                    fieldName: HeaderParameters.unescapeWHATWG(part.fieldName), filenameParameter: filename,
                    filename: HeaderParameters.unescapeWHATWG(filename), contentType: part.contentType,
                    size: part.size, sha256: part.digest, storedPath: part.temporaryPath))
                if let error = part.writeError { request.error = error }
            } else {
                request.fields.append(ReceivedField(name: HeaderParameters.unescapeWHATWG(part.fieldName), value: part.textValue))
            }
        }
    }

    private func end(context: ChannelHandlerContext) {
        guard var request else { return }
        defer { self.request = nil }
        if request.stopped { return }
        self.request = request
        switch request.action {
        case .store(let status):
            storeAndAnswer(&request, status: status, context: context)
        case .respond(let status, let headers, let text):
            core.update(request.index) { $0.complete = true }
            respond(status: status, headers: headers, body: Array(text.utf8), close: false, context: context)
        case .stallUntil:
            storeAndAnswer(&request, status: 201, context: context)
        case .slowRead(_, let status):
            endPacing(context: context)
            storeAndAnswer(&request, status: status, context: context)
        case .stallAfterBody(let store), .closeAfterBody(let store):
            if store {
                _ = storeFiles(&request, status: nil)
            }
            core.update(request.index) { $0.complete = true }
            if case .closeAfterBody = request.action {
                core.update(request.index) { $0.error = "closed without an answer by plan" }
                context.close(promise: nil)
            } else {
                core.update(request.index) { $0.error = "no answer by plan" }
            }
        case .disconnect, .reset, .acceptPartial:
            // The body was shorter than the cut-off: cut it short at its end.
            cutShort(context: context)
        case .answerThenDrain(_, let status):
            answerEarly(status: status, context: context)
        case .trickleAnswer(let status, let interval):
            core.update(request.index) {
                $0.complete = true
                $0.status = status
                $0.error = "answer trickled by plan"
            }
            trickle(status: status, interval: interval, context: context)
        case .respondEarly, .stall:
            break
        }
    }

    /// Finishes a stored request: final file names, the record, and the JSON answer (or 400).
    private func storeAndAnswer(_ request: inout InFlight, status: Int, context: ChannelHandlerContext) {
        if let error = storeFiles(&request, status: status) {
            respond(status: 400, headers: [], body: Array("{\"error\":\(Self.jsonString(error))}".utf8), close: false, context: context)
            return
        }
        respond(status: status, headers: [HeaderField(name: "Content-Type", value: "application/json")],
                body: Self.summary(index: request.index, files: request.files), close: false, context: context)
    }

    /// Gives the stored files their final names and records them (and in the manifest, with the
    /// `status` about to be answered, `nil` for none), or discards them and returns what was wrong.
    private func storeFiles(_ request: inout InFlight, status: Int?) -> String? {
        if let sink = request.rawBody {
            sink.finish()
            request.files.append(ReceivedFile(
                fieldName: "", filenameParameter: sink.filenameParameter ?? "", filename: sink.filenameParameter ?? "",
                contentType: sink.contentType, size: sink.size, sha256: sink.digest, storedPath: sink.temporaryPath))
            if let error = sink.writeError { request.error = error }
        } else if let parser = request.parser, !parser.isComplete, request.error == nil {
            request.error = "the multipart body ended before its close delimiter"
        }
        if let error = request.error {
            for file in request.files { if let path = file.storedPath { unlink(path) } }
            request.currentPart?.discard()
            let files = request.files
            core.update(request.index) {
                $0.error = error
                $0.files = files.map { var f = $0; f.storedPath = nil; return f }
                $0.complete = true
            }
            return error
        }
        // Give each stored file its final name.
        for index in request.files.indices {
            guard let temporary = request.files[index].storedPath else { continue }
            let name = core.reserveName(for: request.files[index].filename)
            let path = core.directory + "/" + name
            if rename(temporary, path) == 0 { request.files[index].storedPath = path }
        }
        let (fields, files) = (request.fields, request.files)
        core.update(request.index) {
            $0.fields = fields
            $0.files = files
            $0.complete = true
        }
        // The manifest line is written before the answer leaves, so a client that saw a 2xx can
        // always find its file there.
        if let manifest = core.manifest, !core.discard {
            let key = request.head.headers.first(name: "Idempotency-Key")
            for file in files { manifest.record(file, idempotencyKey: key, status: status, request: request.index) }
        }
        return nil
    }

    private func respond(status: Int, headers extra: [HeaderField], body: [UInt8], close: Bool, context: ChannelHandlerContext) {
        guard let request else { return }
        var headers = HTTPHeaders()
        for header in extra { headers.add(name: header.name, value: header.value) }
        headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        let keepAlive = request.head.isKeepAlive && !close
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let index = request.index
        core.update(index) {
            $0.status = status
            $0.finishedAt = Date()
        }
        let head = HTTPResponseHead(version: request.head.version, status: HTTPResponseStatus(statusCode: status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func discardParts() {
        request?.currentPart?.discard()
        request?.rawBody?.discard()
        for file in request?.files ?? [] { if let path = file.storedPath { unlink(path) } }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let request {
            discardParts()
            if !request.stopped || request.error == nil {
                core.update(request.index) { if !$0.complete && $0.error == nil { $0.error = "the connection closed mid-request" } }
            }
        }
        request = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let request { core.update(request.index) { $0.error = "\(error)" } }
        context.close(promise: nil)
    }

    /// The 201 answer: where each file went, like a media API's answer.
    static func summary(index: Int, files: [ReceivedFile]) -> [UInt8] {
        let entries = files.map { file in
            let name = file.storedPath.map { String($0.split(separator: "/").last ?? "") } ?? ""
            return "{\"name\":\(jsonString(file.filename)),\"url\":\(jsonString("/files/" + name)),\"size\":\(file.size),\"sha256\":\"\(file.sha256)\"}"
        }
        return Array("{\"id\":\(index),\"files\":[\(entries.joined(separator: ","))]}".utf8)
    }

    static func jsonString(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
