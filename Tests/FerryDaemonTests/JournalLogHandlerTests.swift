@testable import FerryDaemon
import FerryTestSupport
import Foundation
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The journal side of logging, against a real systemd-journald (``JournaldInstance``): journald's
/// own parser reads what ``JournalSocket`` sends, and journalctl reads it back.
@Suite("JournalLogHandler: records to a real systemd-journald")
struct JournalLogHandlerTests {
    @Test("JOURNAL_STREAM is two decimal numbers, device:inode", arguments: [
        ("2049:1234567", true), ("0:0", true), ("18446744073709551615:1", true),
        ("", false), ("2049", false), ("2049:", false), (":1", false), ("1:2:3", false), ("a:b", false), ("-1:2", false),
    ])
    func parseStream(value: String, valid: Bool) {
        #expect((JournalLogHandler.parseStream(value) != nil) == valid)
    }

    @Test("stderr is the journal only when JOURNAL_STREAM names its device and inode")
    func streamDetection() throws {
        let directory = try TemporaryDirectory()
        let descriptor = open(directory.url("stream"), O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        var status = stat()
        #expect(fstat(descriptor, &status) == 0)
        let other = open(directory.url("other"), O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        defer { close(other) }
        var otherStatus = stat()
        #expect(fstat(other, &otherStatus) == 0)
        func detects(_ value: String?) -> Bool {
            JournalLogHandler.streamIsJournal(environment: value.map { ["JOURNAL_STREAM": $0] } ?? [:], descriptor: descriptor)
        }
        #expect(detects("\(status.st_dev):\(status.st_ino)"))
        #expect(!detects("\(otherStatus.st_dev):\(otherStatus.st_ino)"), "another file on the same device")
        #expect(!detects("\(status.st_dev &+ 1):\(status.st_ino)"), "same inode, another device")
        #expect(!detects(nil))
        #expect(!detects("\(status.st_dev)-\(status.st_ino)"))
        #expect(!JournalLogHandler.streamIsJournal(environment: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"], descriptor: -1))
    }

    @Test("journald's socket is /run/systemd/journal/socket; debug builds take FERRY_TEST_JOURNAL_SOCKET")
    func socketPath() {
        #expect(JournalLogHandler.socketPath(environment: [:]) == "/run/systemd/journal/socket")
        #expect(JournalLogHandler.socketPath(environment: ["FERRY_TEST_JOURNAL_SOCKET": ""]) == "/run/systemd/journal/socket")
        #expect(JournalLogHandler.socketPath(environment: ["FERRY_TEST_JOURNAL_SOCKET": "/tmp/j.sock"]) == "/tmp/j.sock")
        #expect(JournalLogHandler.socketForStderr(environment: [:]) == nil, "no JOURNAL_STREAM: logfmt")
    }

    @Test("Without journald the send fails with a typed error naming the socket; a path too long is refused")
    func sendErrors() throws {
        let directory = try TemporaryDirectory()
        let socket = try JournalSocket(path: directory.url("no-journald"))
        #expect(throws: JournalError.send(path: directory.url("no-journald"), errno: ENOENT)) {
            try socket.send(Array("MESSAGE=lost\n".utf8))
        }
        #expect(throws: JournalError.pathTooLong("/" + String(repeating: "s", count: 120))) {
            _ = try JournalSocket(path: "/" + String(repeating: "s", count: 120))
        }
    }

    @Test("Records through Logger arrive whole: fields, priority, call site, newlines and Unicode")
    func loggerToJournald() async throws {
        try await withJournald { journald in
            let socket = try JournalSocket(path: journald.socketPath)
            let run = UUID().uuidString
            var logger = Logger(label: "ferry.test") { JournalLogHandler(label: $0, level: .debug, socket: socket) }
            logger[metadataKey: "run"] = "\(run)"
            let line = #line + 1
            logger.warning("moved to the failed directory", metadata: ["file": "été 📷.jpg", "reason": "HTTP 400\nbad request"])
            logger.trace("below the level: not sent")
            logger.debug("a debug record", metadata: ["retry_in_ms": "250"])
            var found: [[String: [String]]] = []
            try await waitUntil("two records of run \(run) in the journal") {
                found = try await journald.entries(["FERRY_RUN=\(run)"])
                return found.count >= 2
            }
            #expect(found.count == 2)
            let warning = try #require(found.first)
            #expect(warning["MESSAGE"] == ["moved to the failed directory"])
            #expect(warning["PRIORITY"] == ["4"])
            #expect(warning["SYSLOG_IDENTIFIER"] == ["ferryd"])
            #expect(warning["FERRY_LOGGER"] == ["ferry.test"])
            #expect(warning["FERRY_FILE"] == ["été 📷.jpg"])
            #expect(warning["FERRY_REASON"] == ["HTTP 400\nbad request"])
            #expect(warning["CODE_FILE"] == ["FerryDaemonTests/JournalLogHandlerTests.swift"])
            #expect(warning["CODE_LINE"] == ["\(line)"])
            #expect(warning["CODE_FUNC"] == ["loggerToJournald()"])
            #expect(warning["_TRANSPORT"] == ["journal"])
            #expect(warning["_PID"] == ["\(getpid())"])
            let debug = found[1]
            #expect(debug["PRIORITY"] == ["7"])
            #expect(debug["FERRY_RETRY_IN_MS"] == ["250"])
            let warnings = try await journald.entries(["FERRY_RUN=\(run)", "--priority", "warning"])
            #expect(warnings.map { $0["MESSAGE"] } == [["moved to the failed directory"]], "journalctl -p warning")
        }
    }

    @Test("A record too large for a datagram goes in a sealed memfd, and journald takes it whole")
    func largeRecordInMemfd() async throws {
        try await withJournald { journald in
            let run = UUID().uuidString
            // Larger than the send buffer JournalSocket gets (the kernel caps it at net.core.wmem_max
            // and doubles it), so the kernel refuses it as one datagram.
            let plain = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(plain) }
            var size = JournalSocket.sendBufferSize
            setsockopt(plain, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            var granted: Int32 = 0
            var grantedLength = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(plain, SOL_SOCKET, SO_SNDBUF, &granted, &grantedLength)
            let large = String(repeating: "0123456789abcdef", count: (Int(granted) + 1024 * 1024) / 16)
            let entry = JournalEntry(
                level: .error, message: "a large record", label: "ferry.test", identifier: "ferryd",
                metadata: ["run": "\(run)", "output": "\(large)\nand a second line"], file: "f", function: "g", line: 1)
            let datagram = entry.encoded()
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(journald.socketPath.utf8) + [0]) }
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { name in
                    datagram.withUnsafeBytes { sendto(plain, $0.baseAddress, $0.count, 0, name, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
            let refusal = errno
            try #require(sent == -1 && refusal == EMSGSIZE, "the kernel took \(datagram.count) bytes as one datagram: nothing to test")

            try JournalSocket(path: journald.socketPath).send(datagram)
            var found: [[String: [String]]] = []
            try await waitUntil("the large record in the journal") {
                found = try await journald.entries(["FERRY_RUN=\(run)"])
                return !found.isEmpty
            }
            let record = try #require(found.first)
            #expect(record["MESSAGE"] == ["a large record"])
            #expect(record["PRIORITY"] == ["3"])
            #expect(record["FERRY_OUTPUT"]?.first?.utf8.count == large.utf8.count + 18)
            let whole = record["FERRY_OUTPUT"] == ["\(large)\nand a second line"]
            #expect(whole, "the value arrived changed (compared without printing its megabytes)")
        }
    }
}
