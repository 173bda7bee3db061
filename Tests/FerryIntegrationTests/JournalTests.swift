import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ferryd under journald: when stderr is the journal (`JOURNAL_STREAM` names it), every record
/// goes to journald natively with its fields; elsewhere, logfmt on stderr as always.
///
/// journald here is the real one (``JournaldInstance``: systemd-journald in a mount namespace of its
/// own, reached through `FERRY_TEST_JOURNAL_SOCKET`), so its parser, not ours, checks the protocol.
/// ferryd's stderr is what systemd gives a service: a connection to journald's stdout stream, its
/// device and inode in `JOURNAL_STREAM`; or, to see what reaches stderr, a file named the same way.
@Suite("journald: ferryd's records with their fields")
struct JournalTests {
    static let spools = [TestSpool(name: "media"), TestSpool(name: "reject", urlPath: "/reject")]

    /// The receiver stores what comes to the media spool and rejects what comes to the reject spool.
    static let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
        info.uri.hasPrefix("/reject") ? .respond(status: 400, body: "rejected") : .store()
    }

    /// `<device>:<inode>` of `path`, as systemd writes `JOURNAL_STREAM`.
    static func streamIdentity(_ path: String) throws -> String {
        var status = stat()
        guard stat(path, &status) == 0 else { throw TestFailure("stat \(path): \(String(cString: strerror(errno)))") }
        return "\(status.st_dev):\(status.st_ino)"
    }

    /// Starts ferryd with stderr appended to `stderrPath` (created here) and `JOURNAL_STREAM` naming
    /// that file, sending to `journald`. The shell only redirects, then becomes ferryd (`exec`).
    static func startWithStderrFile(_ harness: DaemonHarness, journald: JournaldInstance, stderrPath: String) throws -> ChildProcess {
        guard FileManager.default.createFile(atPath: stderrPath, contents: nil) else { throw TestFailure("cannot create \(stderrPath)") }
        return try ChildProcess(
            executable: "/bin/sh",
            arguments: ["-c", "exec \"$0\" --config \"$1\" 2>>\"$2\"", try BuiltProducts.path("ferryd"), harness.configPath, stderrPath],
            logPath: harness.directory.url("shell.log"),
            environment: ["JOURNAL_STREAM": try streamIdentity(stderrPath), "FERRY_TEST_JOURNAL_SOCKET": journald.socketPath])
    }

    /// Starts ferryd as systemd would with `StandardError=journal`: stderr (and stdout) connected to
    /// journald's stdout stream (after the stream's header: identifier, unit, priority, level prefix,
    /// forward to syslog, kmsg, console), `JOURNAL_STREAM` its device and inode. Python connects, then
    /// becomes ferryd (`execv`).
    static func startOnJournalStream(_ harness: DaemonHarness, journald: JournaldInstance) throws -> ChildProcess {
        let launcher = """
            import os, socket, sys
            stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stream.connect(sys.argv[1])
            stream.sendall(b"ferryd\\n\\n6\\n0\\n0\\n0\\n0\\n")
            os.dup2(stream.fileno(), 1)
            os.dup2(stream.fileno(), 2)
            status = os.fstat(2)
            os.environ["JOURNAL_STREAM"] = "%d:%d" % (status.st_dev, status.st_ino)
            os.execv(sys.argv[2], sys.argv[2:])
            """
        return try ChildProcess(
            executable: "/usr/bin/python3",
            arguments: ["-c", launcher, journald.streamSocketPath, try BuiltProducts.path("ferryd"), "--config", harness.configPath],
            logPath: harness.directory.url("launcher.log"),
            environment: ["FERRY_TEST_JOURNAL_SOCKET": journald.socketPath])
    }

    /// Waits until journald has a record of ferryd's saying `message`.
    static func waitForRecord(_ journald: JournaldInstance, _ message: String, daemon: ChildProcess, stderrPath: String) async throws {
        try await waitUntil("ferryd's \"\(message)\" in the journal; its stderr:\n\((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")") {
            if !daemon.isRunning { throw TestFailure("ferryd exited (status \(daemon.terminationStatus))") }
            return try await !journald.entries(["SYSLOG_IDENTIFIER=ferryd", "MESSAGE=\(message)"]).isEmpty
        }
    }

    @Test("Each record goes to journald natively with PRIORITY, MESSAGE and FERRY_JOB, FERRY_SPOOL, FERRY_FILE; a rejected file's warning is priority 4; nothing through the stderr stream")
    func recordsWithFields() async throws {
        try await withJournald { journald in
            try await withDaemonHarness(spools: Self.spools, plan: Self.plan) { harness in
                let stderrPath = harness.directory.url("launcher.log")
                let daemon = try Self.startOnJournalStream(harness, journald: journald)
                defer { if daemon.isRunning { daemon.send(SIGKILL) } }
                try await Self.waitForRecord(journald, "ready", daemon: daemon, stderrPath: stderrPath)

                try harness.drop("photo.jpg", Array("a photo".utf8), spool: "media")
                try harness.drop("bad.txt", Array("a file the server rejects".utf8), spool: "reject")
                try await harness.waitForAccepted(1)
                try await harness.waitForQuiet()
                try await Self.waitForRecord(journald, "moved to the failed directory", daemon: daemon, stderrPath: stderrPath)
                let all = try await jobs(harness)
                let delivered = try #require(all.first { $0.spool == "media" })
                let rejected = try #require(all.first { $0.spool == "reject" })
                #expect(delivered.state == .done && rejected.state == .failed)

                // journalctl FERRY_JOB=… : one job's story, and only that job's.
                let story = try await journald.entries(["FERRY_JOB=\(delivered.id.rawValue)"])
                let messages = story.compactMap { $0["MESSAGE"]?.first }
                #expect(messages.contains("queued") && messages.contains("uploaded"), "\(messages)")
                for record in story {
                    #expect(record["FERRY_JOB"] == [delivered.id.rawValue])
                    #expect(record["SYSLOG_IDENTIFIER"] == ["ferryd"])
                    #expect(record["_TRANSPORT"] == ["journal"], "sent natively, not through the stdout stream")
                    #expect(record["_PID"] == ["\(daemon.pid)"])
                    #expect(record["PRIORITY"].map { ["5", "6", "7"].contains($0) } == true, "no warnings for a delivered file: \(record)")
                    #expect(record["CODE_FILE"]?.first?.hasSuffix(".swift") == true, "the log call's site: \(record)")
                    #expect(record["CODE_LINE"]?.first.flatMap { Int($0) } != nil, "\(record)")
                }
                let uploaded = try #require(story.first { $0["MESSAGE"] == ["uploaded"] })
                #expect(uploaded["FERRY_SPOOL"] == ["media"] && uploaded["FERRY_FILE"] == ["photo.jpg"], "\(uploaded)")
                #expect(uploaded["FERRY_STATUS"] == ["201"] && uploaded["PRIORITY"] == ["6"], "\(uploaded)")

                // journalctl -p warning: the rejected file, at priority 4, with its job's fields.
                let warnings = try await journald.entries(["SYSLOG_IDENTIFIER=ferryd", "--priority", "warning"])
                let moved = try #require(warnings.first { $0["MESSAGE"] == ["moved to the failed directory"] }, "\(warnings)")
                #expect(moved["PRIORITY"] == ["4"])
                #expect(moved["FERRY_JOB"] == [rejected.id.rawValue])
                #expect(moved["FERRY_SPOOL"] == ["reject"])
                #expect(moved["FERRY_FILE"] == ["bad.txt"])
                #expect(moved["FERRY_REASON"]?.first?.contains("400") == true, "\(moved)")
                #expect(!warnings.contains { $0["FERRY_JOB"] == [delivered.id.rawValue] })

                daemon.send(SIGTERM)
                #expect(try await daemon.waitForExit() == 0)
                try await waitUntil("ferryd's last record, stopped, in the journal") {
                    try await !journald.entries(["SYSLOG_IDENTIFIER=ferryd", "MESSAGE=stopped"]).isEmpty
                }
                let streamed = try await journald.entries(["_TRANSPORT=stdout"])
                #expect(streamed.isEmpty, "nothing through the stderr stream: \(streamed.map { $0["MESSAGE"] ?? [] })")
                #expect(try await !journald.entries(["SYSLOG_IDENTIFIER=ferryd", "_TRANSPORT=journal"]).isEmpty)
            }
        }
    }

    @Test("When journald stops taking records, each goes to stderr as logfmt with journal_error=, not lost")
    func fallsBackToStderr() async throws {
        try await withJournald { journald in
            try await withDaemonHarness(spools: Self.spools, plan: Self.plan) { harness in
                let stderrPath = harness.directory.url("stderr.log")
                let daemon = try Self.startWithStderrFile(harness, journald: journald, stderrPath: stderrPath)
                defer { if daemon.isRunning { daemon.send(SIGKILL) } }
                try await Self.waitForRecord(journald, "ready", daemon: daemon, stderrPath: stderrPath)
                await journald.stop()

                try harness.drop("photo.jpg", Array("a photo".utf8), spool: "media")
                try await harness.waitForAccepted(1)
                try await waitUntil("the queued record on stderr") {
                    let stderr = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
                    return stderr.contains("msg=queued")
                }
                let stderr = try String(contentsOfFile: stderrPath, encoding: .utf8)
                let queued = try #require(stderr.split(separator: "\n").first { $0.contains("msg=queued") })
                #expect(queued.hasPrefix("level=info "), "no timestamp: the journal stamps the line: \(queued)")
                #expect(queued.contains("spool=media") && queued.contains("file=photo.jpg"), "\(queued)")
                #expect(queued.contains("journal_error=\"cannot send to the journal at \(journald.socketPath): Connection refused"), "\(queued)")
            }
        }
    }

    @Test("JOURNAL_STREAM set but naming another stream than stderr: logfmt on stderr, with timestamps, nothing to journald")
    func strayJournalStream() async throws {
        try await withJournald { journald in
            try await withDaemonHarness(spools: Self.spools, plan: Self.plan) { harness in
                let elsewhere = harness.directory.url("another-stream")
                guard FileManager.default.createFile(atPath: elsewhere, contents: nil) else { throw TestFailure("cannot create \(elsewhere)") }
                try await harness.start(environment: [
                    "JOURNAL_STREAM": try Self.streamIdentity(elsewhere), "FERRY_TEST_JOURNAL_SOCKET": journald.socketPath,
                ])
                try harness.drop("photo.jpg", Array("a photo".utf8), spool: "media")
                try await harness.waitForAccepted(1)
                try await harness.daemon?.waitForLog("msg=queued")
                let log = harness.daemon?.log ?? ""
                let queued = try #require(log.split(separator: "\n").first { $0.contains("msg=queued") })
                let stamped = try Regex(#"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info msg=queued "#)
                #expect(queued.contains(stamped), "\(queued)")
                #expect(try await journald.entries(["SYSLOG_IDENTIFIER=ferryd"]).isEmpty)
            }
        }
    }
}
