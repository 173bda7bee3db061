// A server of the IETF resumable upload draft for Ferry's integration tests, built on
// swift-nio-extras' NIOResumableUpload (interop versions 3, 5 and 6): the same server code a Swift
// application serving Apple's URLSession clients would run. Its application stores nothing: it
// hashes each upload's body and answers 200 with `{"id": N, "size": …, "sha256": "…"}`.
//
//     nio-resumable-server [--port 0] [--origin http://127.0.0.1:PORT]
//
// Prints one line `{"listening": "http://127.0.0.1:PORT"}` when ready. Without `--origin` the
// upload URLs (`Location`) are relative, so a client behind a proxy resolves them against the
// proxy. `GET /__stats` (no draft headers) answers what the server saw as JSON.

import Crypto
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the server saw, for `GET /__stats`.
struct Stats: Encodable {
    struct Request: Encodable {
        var method: String
        var path: String
        var interop: String?
        var uploadComplete: String?
        var uploadOffset: String?
        var contentType: String?
        var bodyBytes = 0
        var statuses: [Int] = []
    }
    struct Completed: Encodable {
        var id: Int
        var path: String
        var size: Int
        var sha256: String
        var contentType: String?
    }
    var counts: [String: Int] = [:]
    /// Request body bytes read, by method.
    var bodyBytes: [String: Int] = [:]
    var requests: [Request] = []
    var completed: [Completed] = []
    /// Uploads the application saw end in an error (cancelled, a failed resumption, a timeout).
    var failedUploads: [String] = []
}

let stats = Mutex(Stats())

/// Counts requests, their body bytes and the statuses answered, and answers `GET /__stats`.
final class Observer: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var index: Int?
    private var answeringStats = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        switch part {
        case .head(let request):
            if request.method == .get, request.path == "/__stats" {
                answeringStats = true
                return
            }
            let method = request.method.rawValue
            index = stats.withLock { stats in
                stats.counts[method, default: 0] += 1
                stats.requests.append(.init(
                    method: method, path: request.path ?? "", interop: request.headerFields[HTTPField.Name("Upload-Draft-Interop-Version")!],
                    uploadComplete: request.headerFields[HTTPField.Name("Upload-Complete")!],
                    uploadOffset: request.headerFields[HTTPField.Name("Upload-Offset")!],
                    contentType: request.headerFields[.contentType]))
                return stats.requests.count - 1
            }
        case .body(let buffer):
            if answeringStats { return }
            if let index {
                stats.withLock { stats in
                    stats.requests[index].bodyBytes += buffer.readableBytes
                    stats.bodyBytes[stats.requests[index].method, default: 0] += buffer.readableBytes
                }
            }
        case .end:
            if answeringStats {
                answeringStats = false
                answerStats(context: context)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .head(let response) = unwrapOutboundIn(data), let index {
            stats.withLock { $0.requests[index].statuses.append(response.status.code) }
        }
        context.write(data, promise: promise)
    }

    private func answerStats(context: ChannelHandlerContext) {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let body = (try? stats.withLock { try encoder.encode($0) }) ?? Data("{}".utf8)
        var response = HTTPResponse(status: .ok)
        response.headerFields[.contentType] = "application/json"
        response.headerFields[.contentLength] = String(body.count)
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// The application behind NIOResumableUpload: it sees each upload as one request whose body is
/// everything appended, hashes it and answers with what it got.
final class Application: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    private var hasher = SHA256()
    private var size = 0
    private var request: HTTPRequest?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            request = head
            hasher = SHA256()
            size = 0
        case .body(let buffer):
            buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            size += buffer.readableBytes
        case .end:
            guard let request else { return }
            if request.method == .options {
                var response = HTTPResponse(status: .noContent)
                response.headerFields[.allow] = "OPTIONS, POST, PUT"
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
            let id = stats.withLock { stats in
                stats.completed.append(.init(
                    id: stats.completed.count + 1, path: request.path ?? "", size: size, sha256: digest,
                    contentType: request.headerFields[.contentType]))
                return stats.completed.count
            }
            let body = Data(#"{"id":\#(id),"size":\#(size),"sha256":"\#(digest)"}"#.utf8)
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = "application/json"
            response.headerFields[.contentLength] = String(body.count)
            context.write(wrapOutboundOut(.head(response)), promise: nil)
            context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        stats.withLock { $0.failedUploads.append(String(describing: error)) }
        context.close(promise: nil)
    }
}

// The test runner may start children with signals blocked: let SIGTERM stop the server.
var blocked = sigset_t()
sigemptyset(&blocked)
sigaddset(&blocked, SIGTERM)
sigaddset(&blocked, SIGINT)
pthread_sigmask(SIG_UNBLOCK, &blocked, nil)

var port = 0
var origin = ""
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--port": port = arguments.next().flatMap { Int($0) } ?? 0
    case "--origin": origin = arguments.next() ?? ""
    default:
        FileHandle.standardError.write(Data("usage: nio-resumable-server [--port N] [--origin URL]\n".utf8))
        exit(2)
    }
}

let uploadContext = HTTPResumableUploadContext(origin: origin)
let server = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.configureHTTPServerPipeline()
            try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try sync.addHandler(Observer())
            try sync.addHandler(HTTPResumableUploadHandler(context: uploadContext) { child in
                try? child.pipeline.syncOperations.addHandler(Application())
            })
        }
    }
    .bind(host: "127.0.0.1", port: port)
    .wait()
FileHandle.standardOutput.write(Data(#"{"listening": "http://127.0.0.1:\#(server.localAddress?.port ?? 0)"}"#.utf8 + [10]))
try server.closeFuture.wait()
