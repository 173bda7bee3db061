import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 answer read by ``httpRequest(port:path:method:keepAlive:body:)``.
public struct HTTPAnswer: CustomStringConvertible, Sendable {
    public var status: Int
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: String
    public var description: String { "\(status) \(headers)\n\(body)" }
}

/// One HTTP/1.1 request to 127.0.0.1:`port`, read until the answer is complete.
public func httpRequest(port: Int, path: String, method: String = "GET", keepAlive: Bool = false, body: String = "") throws -> HTTPAnswer {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw TestFailure("connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
    let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(keepAlive ? "" : "Connection: close\r\n")Content-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
    guard request.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
        throw TestFailure("send: \(String(cString: strerror(errno)))")
    }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        // With keep-alive the server leaves the connection open: stop once Content-Length bytes are in.
        if let answer = parse(received), answer.complete { return answer.answer }
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count == 0 { break }
        guard count > 0 else { throw TestFailure("recv: \(String(cString: strerror(errno)))") }
        received += buffer[0..<count]
    }
    guard let answer = parse(received) else { throw TestFailure("not an HTTP answer: \(String(decoding: received, as: UTF8.self))") }
    return answer.answer

    func parse(_ bytes: [UInt8]) -> (answer: HTTPAnswer, complete: Bool)? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 "),
              let status = Int(statusLine.dropFirst(9).prefix(3)) else { return nil }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let body = String(text[end.upperBound...])
        let complete = headers["content-length"].flatMap(Int.init).map { body.utf8.count >= $0 } ?? false
        return (HTTPAnswer(status: status, headers: headers, body: body), complete)
    }
}
