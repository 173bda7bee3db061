import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

// The bad-input matrix of docs/RELIABILITY.md. Inputs already covered elsewhere (quotes, `;`,
// `\`, `%22`, invalid UTF-8, 250-byte names, zero-byte files, symlinks, FIFOs, subdirectories, a
// garbage database, a second daemon, unknown keys) are not repeated here; the table there names
// the test for every row.

/// `directory/name` as a C path, for names that are raw bytes.
func rawPath(_ directory: String, _ name: [UInt8]) -> [CChar] {
    (Array(directory.utf8) + [UInt8(ascii: "/")] + name + [0]).map { CChar(bitPattern: $0) }
}

/// The contents of `directory/name` (a raw name), or nil.
func rawContents(_ directory: String, _ name: [UInt8]) -> [UInt8]? {
    rawContents(Array(directory.utf8) + [UInt8(ascii: "/")] + name)
}

/// The contents of the file at the raw path `path`, or nil.
func rawContents(_ path: [UInt8]) -> [UInt8]? {
    let fd = open((path + [0]).map { CChar(bitPattern: $0) }, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count <= 0 { return bytes }
        bytes += buffer[..<count]
    }
}

/// A copy of the built `ferryd` that any user may run (the build directory may be private).
func ferrydCopy(in directory: TemporaryDirectory) async throws -> String {
    let copy = directory.url("ferryd-copy")
    if !fileExists(copy) { try await copyBuiltExecutable("ferryd", to: copy) }
    return copy
}

/// Starts the harness's ferryd as `nobody` (through setpriv) after handing it the whole test
/// directory, and waits until it is ready. The caller stops it with ``stopChild(_:)``.
func startFerrydAsNobody(_ harness: DaemonHarness) async throws -> ChildProcess {
    let ferryd = try await ferrydCopy(in: harness.directory)
    chmod(harness.directory.path, 0o755)
    let chown = try ChildProcess(executable: "/bin/chown", arguments: ["-R", "nobody:nogroup", harness.directory.path],
                                 logPath: harness.directory.url("chown.log"))
    #expect(try await chown.waitForExit() == 0)
    let child = try ChildProcess(
        executable: "/usr/bin/setpriv",
        arguments: ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", ferryd, "--config", harness.configPath],
        logPath: harness.logPath)
    try await waitUntil("ferryd (as nobody) to be ready\n\(child.log)") {
        if child.log.contains("msg=ready") { return true }
        if !child.isRunning { throw TestFailure("ferryd as nobody exited:\n\(child.log)") }
        return false
    }
    return child
}

func stopChild(_ child: ChildProcess) async {
    guard child.isRunning else { return }
    child.send(SIGTERM)
    _ = try? await child.waitForExit()
}

/// Waits until every job is final and its file dealt with (for daemons not started by the harness).
func waitForDisposed(_ harness: DaemonHarness, count: Int, log: @autoclosure () -> String) async throws {
    try await waitUntil("\(count) jobs final and disposed\n\(log())") {
        let all = try await jobs(harness)
        return all.count == count && all.allSatisfy { $0.state.isFinal && $0.disposedAt != nil }
    }
}

@Suite("Bad input: names, vanishing and changing files, special files, permissions, the spool and the queue", .serialized)
struct BadInputTests {
    @Test("Names with CR/LF, NFC and NFD forms of one name, and 255 bytes arrive under their own bytes; the log cannot be forged")
    func hostileNameBytes() async throws {
        let spool = TestSpool(options: ["after_upload = \"move\""])
        try await withDaemonHarness(spools: [spool]) { harness in
            try await harness.start()
            let nfc = Array("caf\u{E9}.txt".utf8)
            let nfd = Array("cafe\u{301}.txt".utf8)
            let forged = Array("line\r\nlevel=critical msg=forged.txt".utf8)
            let longest = Array(String(repeating: "n", count: 251).utf8) + Array(".txt".utf8)
            try #require(longest.count == 255, "fixture: the longest name Linux allows")
            let names = [nfc, nfd, forged, longest]
            for (index, name) in names.enumerated() {
                try dropRawName(name, Array("content \(index)".utf8), in: harness.spoolPath())
            }
            try await harness.waitForAccepted(names.count)
            try await harness.waitForQuiet()
            let received = harness.receiver.acceptedRequests.compactMap(\.files.first)
            for (index, name) in names.enumerated() {
                // Compared as bytes: Swift's String equality would make NFC and NFD the same name.
                let file = try #require(received.first { Array($0.filename.utf8) == name }, "no upload named \(name)")
                #expect(file.sha256 == sha256Hex(Array("content \(index)".utf8)))
            }
            #expect(received.contains { $0.filenameParameter == "line%0D%0Alevel=critical msg=forged.txt" })
            let sent = harness.spoolPath() + "/.sent"
            for (index, name) in names.enumerated() {
                #expect(rawContents(sent, name) == Array("content \(index)".utf8), "\(name) not in .sent under its own name")
            }
            // A second file with the 255-byte name cannot be `name.1.txt` (257 bytes): it gets a shortened
            // name, never replaces the first, never fails.
            try dropRawName(longest, Array("second".utf8), in: harness.spoolPath())
            try await harness.waitForAccepted(names.count + 1)
            try await harness.waitForQuiet()
            // Jobs come newest first.
            let second = try #require(try await jobs(harness).first { $0.relativePath == longest })
            let moved = try #require(second.finalPath)
            #expect(moved != Array(sent.utf8) + [UInt8(ascii: "/")] + longest)
            #expect(moved.split(separator: UInt8(ascii: "/")).last.map(\.count) ?? 256 <= 255)
            #expect(rawContents(moved) == Array("second".utf8))
            #expect(rawContents(sent, longest) == Array("content 3".utf8), "the first file is kept")
            // The CR/LF is escaped inside one logfmt value: no log line starts with the forged text.
            let lines = (harness.daemon?.log ?? "").split(separator: "\n")
            #expect(!lines.contains { $0.hasPrefix("level=critical msg=forged") }, "a file name forged a log line")
            #expect(lines.contains { $0.contains(#"line\r\nlevel=critical msg=forged.txt"#) })
        }
    }

    @Test("A file deleted after it was queued fails with the reason; nothing is moved, nothing else is touched")
    func deletedBeforeUpload() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            #expect(try await harness.ctl("pause", "test").status == 0)
            let path = try harness.drop("vanishing.txt", Array("here, then gone".utf8))
            try await waitUntil("the file to be queued") { try await jobs(harness).first?.state == .queued }
            #expect(unlink(path) == 0)
            #expect(try await harness.ctl("resume", "test").status == 0)
            try await waitUntil("the job to fail and be disposed") {
                let job = try await jobs(harness).first
                return job?.state == .failed && job?.disposedAt != nil
            }
            let job = try #require(try await jobs(harness).first)
            #expect(job.lastError == "the file disappeared before it was uploaded")
            #expect(job.disposition == .missing)
            #expect(harness.receiver.requests.isEmpty)
            #expect(!fileExists(harness.spoolPath() + "/.failed/vanishing.txt.error.json"), "no sidecar for a file that is not there")
            let shown = try await harness.ctl("show", job.id.rawValue, "--json").json()
            #expect(shown["location"] as? String == "missing")
            // The spool still works.
            try harness.drop("after.txt", Array("x".utf8))
            try await harness.waitForAccepted(1)
        }
    }

    @Test("A file modified during its upload: the snapshot is delivered, the file is not deleted, its new version follows as a new job")
    func modifiedDuringUpload() async throws {
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .store()
        }
        try await withDaemonHarness(plan: plan) { harness in
            try await harness.start()
            let original = pseudoRandomBytes(1 << 20, seed: 21)
            let appended = Array("\nappended while the upload was under way\n".utf8)
            let path = try harness.drop("growing.log", original)
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let fd = open(path, O_WRONLY | O_APPEND)
            #expect(fd >= 0)
            #expect(appended.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == appended.count)
            close(fd)
            gate.open()
            try await harness.waitForAccepted(2)
            try await harness.waitForQuiet()
            let accepted = harness.receiver.acceptedRequests
            #expect(accepted[0].files.first?.sha256 == sha256Hex(original), "the first upload is the version it started with")
            #expect(accepted[1].files.first?.sha256 == sha256Hex(original + appended), "the new version is uploaded too")
            #expect(accepted[0].idempotencyKey != accepted[1].idempotencyKey)
            #expect(harness.daemon?.log.contains("the file changed after it was uploaded; left in place and queued again") == true)
            let all = try await jobs(harness)
            #expect(all.count == 2 && all.allSatisfy { $0.state == .done })
            #expect(!fileExists(path), "the second job deleted the version it delivered")
        }
    }

    @Test("Sockets and device nodes are skipped and left alone, like FIFOs")
    func socketsAndDevices() async throws {
        try await withDaemonHarness { harness in
            let spool = harness.spoolPath()
            let atStart = spool + "/at-start.sock"
            let listening = try bindUnixSocket(atStart)
            defer { close(listening) }
            try await harness.start()
            #expect(mknod(spool + "/null-device", S_IFCHR | 0o666, dev_t(0x103) /* makedev(1, 3): /dev/null */) == 0, "mknod: \(String(cString: strerror(errno)))")
            let running = try bindUnixSocket(spool + "/while-running.sock")
            defer { close(running) }
            try harness.drop("sentinel.txt", Array("ok".utf8))
            try await harness.waitForAccepted(1)
            try await harness.daemon?.waitForLog("file=while-running.sock")
            try await harness.daemon?.waitForLog("file=null-device")
            #expect(harness.receiver.requests.count == 1)
            for name in ["at-start.sock", "while-running.sock", "null-device"] {
                #expect(fileExists(spool + "/" + name), "\(name) must be left alone")
            }
            let log = harness.daemon?.log ?? ""
            #expect(log.contains("skipping not a regular file") && log.contains("file=at-start.sock"))
            #expect(try await jobs(harness).count == 1)
        }
    }

    @Test("A file ferryd may not read is moved to the failed directory with the reason; readable ones are delivered",
          .enabled(if: getuid() == 0, "runs ferryd as nobody through setpriv, which needs root"))
    func unreadableFile() async throws {
        try await withDaemonHarness { harness in
            let child = try await startFerrydAsNobody(harness)
            do {
                let spool = harness.spoolPath()
                // Written by root with mode 0600 and renamed in: nobody may rename it but not read it.
                let secret = harness.directory.url("private.txt")
                #expect(FileManager.default.createFile(atPath: secret, contents: Data("root only".utf8), attributes: [.posixPermissions: 0o600]))
                #expect(rename(secret, spool + "/private.txt") == 0)
                try dropFile(Array("public".utf8), at: spool + "/public.txt")
                chown(spool + "/public.txt", 65534, 65534)
                try await waitForDisposed(harness, count: 2, log: child.log)
                #expect(harness.receiver.acceptedRequests.compactMap(\.files.first?.filename) == ["public.txt"])
                let failed = try #require(try await jobs(harness).first { $0.displayPath == "private.txt" })
                #expect(failed.state == .failed)
                #expect(failed.lastError == "ferryd may not read the file (permission denied)")
                #expect(try String(contentsOfFile: spool + "/.failed/private.txt", encoding: .utf8) == "root only")
                let sidecar = try #require(FileManager.default.contents(atPath: spool + "/.failed/private.txt.error.json"))
                let report = try #require(try JSONSerialization.jsonObject(with: sidecar) as? [String: Any])
                #expect((report["reason"] as? String)?.contains("permission denied") == true)
                // Once readable, `ferryctl retry` brings it back and it is delivered.
                chown(spool + "/.failed/private.txt", 65534, 65534)
                let retried = try await harness.ctl("retry", failed.id.rawValue)
                #expect(retried.status == 0, "\(retried)")
                try await harness.waitForAccepted(2)
            } catch {
                await stopChild(child)
                throw error
            }
            await stopChild(child)
        }
    }

    @Test("A spool directory deleted and re-created while ferryd runs is watched again")
    func spoolRecreated() async throws {
        try await withDaemonHarness(topLevel: ["rescan_interval = \"1h\""]) { harness in
            try await harness.start()
            let spool = harness.spoolPath()
            try harness.drop("before.txt", Array("before".utf8))
            try await harness.waitForAccepted(1)
            try FileManager.default.removeItem(atPath: spool)
            try await harness.daemon?.waitForLog("spool directory was removed or moved away; waiting for it to come back")
            // health and status say so while it lasts.
            try await waitUntil("health to name the missing spool directory") {
                let health = try await harness.ctl("health", "--json").json()
                return health["status"] as? String == "degraded"
                    && (health["problems"] as? [String])?.contains { $0.contains("cannot open the spool directory") } == true
            }
            let status = try await harness.ctl("status")
            #expect(status.stdout.contains("problem in test: cannot open the spool directory \(spool)"), "\(status)")
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: false)
            try harness.drop("after.txt", Array("after".utf8))
            try await harness.waitForAccepted(2, timeout: .seconds(20))
            #expect(harness.receiver.acceptedRequests.compactMap(\.files.first?.filename) == ["before.txt", "after.txt"])
            try await waitUntil("the problem to clear") {
                try await harness.ctl("health", "--json").json()["status"] as? String == "ok"
            }
        }
    }

    @Test("A queue database another process holds locked stops ferryd with exit 74 and a clear error; nothing is replaced")
    func lockedDatabase() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            try harness.drop("first.txt", Array("x".utf8))
            try await harness.waitForQuiet()
            #expect(try await harness.daemon?.stop() == 0)
            let database = harness.directory.url("state/queue.sqlite")
            // Another program writes to the database and keeps its exclusive lock.
            let locker = try ChildProcess(executable: "/usr/bin/python3", arguments: ["-c", """
                import signal, sqlite3, sys
                c = sqlite3.connect(sys.argv[1], isolation_level=None)
                c.execute("PRAGMA locking_mode = EXCLUSIVE")
                c.execute("BEGIN EXCLUSIVE")
                c.execute("CREATE TABLE IF NOT EXISTS intruder (x)")
                c.execute("COMMIT")
                print("locked", flush=True)
                signal.pause()
                """, database], logPath: harness.directory.url("locker.log"))
            defer { locker.send(SIGKILL) }
            _ = try await locker.readStdoutLine { $0 == "locked" }
            let before = FileManager.default.contents(atPath: database)
            let second = try ChildProcess(executable: try BuiltProducts.path("ferryd"), arguments: ["--config", harness.configPath],
                                          logPath: harness.directory.url("second.log"))
            let status = try await second.waitForExit(timeout: .seconds(30))
            #expect(status == 74, "\(second.log)")
            #expect(second.log.contains("the database is locked by another process"), "\(second.log)")
            #expect(FileManager.default.contents(atPath: database) == before, "the database is left as it was")
            #expect(!second.log.contains("msg=ready"))
        }
    }

    @Test("A queue database with a valid header but damaged pages stops ferryd with exit 74; it is left as it was, and nothing is uploaded again")
    func damagedPages() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            for index in 0..<40 { try harness.drop("file-\(index).txt", Array("content \(index)".utf8)) }
            try await harness.waitForAccepted(40)
            try await harness.waitForQuiet()
            #expect(try await harness.daemon?.stop() == 0)
            let database = harness.directory.url("state/queue.sqlite")
            // Move everything from the WAL into the database file, so the damage below is all there is.
            let checkpoint = try ChildProcess(executable: "/usr/bin/python3", arguments: ["-c", """
                import sqlite3, sys
                sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                """, database], logPath: harness.directory.url("checkpoint.log"))
            #expect(try await checkpoint.waitForExit() == 0, "\(checkpoint.log)")
            var bytes = try #require(FileManager.default.contents(atPath: database).map { [UInt8]($0) })
            #expect(bytes.count >= 6 * 4096, "the database has pages to damage (\(bytes.count) bytes)")
            // Keep page 1 (the header and schema); scribble over the rest.
            for offset in stride(from: 4096, to: bytes.count, by: 4096) {
                for index in offset..<min(offset + 512, bytes.count) { bytes[index] = UInt8(truncatingIfNeeded: index &* 31) }
            }
            _ = FileManager.default.createFile(atPath: database, contents: Data(bytes))
            let second = try ChildProcess(executable: try BuiltProducts.path("ferryd"), arguments: ["--config", harness.configPath],
                                          logPath: harness.directory.url("second.log"))
            let status = try await second.waitForExit()
            #expect(status == 74, "\(second.log)")
            #expect(second.log.contains("is damaged") && second.log.contains("Ferry will not start over it"), "\(second.log)")
            #expect(FileManager.default.contents(atPath: database).map { [UInt8]($0) } == bytes, "left as it was; log:\n\(second.log)")
            #expect(harness.receiver.requests.count == 40, "nothing was uploaded again")
        }
    }

    @Test("A queue database ferryd's user may not open stops it with the owner, the mode and the fix, and is left as it was",
          .enabled(if: getuid() == 0, "runs ferryd as nobody through setpriv, which needs root"))
    func unreadableDatabase() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            try harness.drop("one.txt", Array("one".utf8))
            try await harness.waitForAccepted(1)
            try await harness.waitForQuiet()
            #expect(try await harness.daemon?.stop() == 0)
            // Everything else is nobody's; the database stays root's, mode 0600 (say, after a run as root).
            let database = harness.directory.url("state/queue.sqlite")
            let before = FileManager.default.contents(atPath: database)
            let ferryd = try await ferrydCopy(in: harness.directory)
            chmod(harness.directory.path, 0o755)
            let chown = try ChildProcess(executable: "/bin/chown", arguments: ["-R", "nobody:nogroup", harness.directory.path],
                                         logPath: harness.directory.url("chown.log"))
            #expect(try await chown.waitForExit() == 0)
            #expect(Glibc.chown(database, 0, 0) == 0 && chmod(database, 0o600) == 0)
            let child = try ChildProcess(
                executable: "/usr/bin/setpriv",
                arguments: ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", ferryd, "--config", harness.configPath],
                logPath: harness.directory.url("nobody.log"))
            let status = try await child.waitForExit()
            #expect(status == 74, "\(child.log)")
            #expect(child.log.contains("cannot open the queue database \(database): the file \(database) (owner uid 0, mode 600) cannot be opened for reading and writing by uid 65534: Permission denied; give ferryd's user access"), "\(child.log)")
            #expect(FileManager.default.contents(atPath: database) == before)
        }
    }

    @Test("check-config and ferryd refuse wrong types, CR/LF in header values and names, field names and the URL, and a credential file they may not read (exit 78, file:line:key, no secret)")
    func badConfigurations() async throws {
        let fixture = try BadConfigFixture()
        let (directory, write) = (fixture.directory, fixture.write)
        let wrongType = try write("type.toml", ["settle = 2"])
        let crlf = try write("crlf.toml", ["[spool.headers]", #"X-Note = "one\r\nX-Injected: yes""#])
        // CR/LF in names rather than values: a header name, a field name, the file field, the URL.
        let badNames: [(lines: [String], key: String)] = [
            (["[spool.headers]", #""X-A\r\nInjected" = "v""#], "spool[0].headers."),
            (["[spool.fields]", #""a\r\nb" = "v""#], "spool[0].fields."),
            ([#"file_field = "f\r\nx""#], "spool[0].file_field:"),
        ]
        for (index, bad) in badNames.enumerated() {
            let path = try write("name-\(index).toml", bad.lines)
            let result = try await runFerryd(["check-config", "--config", path], in: directory)
            #expect(result.status == 78, "\(bad.lines): \(result.stderr)")
            #expect(result.stderr.contains("\(path):\(4 + bad.lines.count): \(bad.key)"), "\(result.stderr)")
        }
        let badURL = directory.url("url.toml")
        try ["[[spool]]", "name = \"media\"", "directory = \"\(directory.path)/spool\"", #"url = "https://example.org/up\r\nX-Injected: 1""#]
            .joined(separator: "\n").write(toFile: badURL, atomically: true, encoding: .utf8)
        let urlResult = try await runFerryd(["check-config", "--config", badURL], in: directory)
        #expect(urlResult.status == 78 && urlResult.stderr.contains("\(badURL):4: spool[0].url:"), "\(urlResult.stderr)")

        let typed = try await runFerryd(["check-config", "--config", wrongType], in: directory)
        #expect(typed.status == 78)
        #expect(typed.stderr.contains("\(wrongType):5: spool[0].settle:"), "\(typed.stderr)")
        let injected = try await runFerryd(["check-config", "--config", crlf], in: directory)
        #expect(injected.status == 78)
        #expect(injected.stderr.contains("\(crlf):6: spool[0].headers.X-Note:"), "\(injected.stderr)")
        #expect(injected.stderr.contains("CR"), "\(injected.stderr)")
    }

    @Test("A credential file ferryd's user may not read is refused by check-config and ferryd (exit 78, file:line:key, no secret)",
          .enabled(if: getuid() == 0, "runs ferryd as nobody through setpriv, which needs root"))
    func unreadableCredential() async throws {
        // Root can read anything: ferryd's own user (here nobody) cannot read a root-only secret.
        let fixture = try BadConfigFixture()
        let (directory, secret, write) = (fixture.directory, fixture.secret, fixture.write)
        let unreadable = try write("unreadable.toml", ["[spool.headers]", "Authorization = \"Bearer ${file:\(secret)}\""])
        let ferryd = try await ferrydCopy(in: directory)
        // The same through `${credential:token}`, with $CREDENTIALS_DIRECTORY pointing at the secret's directory.
        let credential = try write("credential.toml", ["[spool.headers]", "Authorization = \"Bearer ${credential:token}\""])
        for (config, arguments) in [(unreadable, ["check-config"]), (unreadable, []), (credential, ["check-config"])] {
            let out = directory.url("out"), err = directory.url("err")
            let status = try await runToCompletion(
                ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", ferryd] + arguments + ["--config", config],
                environment: ["PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": directory.path], stdoutPath: out, stderrPath: err,
                timeout: .seconds(30))
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            #expect(status == 78, "\(arguments): \(stderr)")
            #expect(stderr.contains("\(config):6: spool[0].headers.Authorization:"), "\(stderr)")
            #expect(stderr.contains("Permission denied") || stderr.contains("permission denied"), "\(stderr)")
            #expect(!stderr.contains("TOPSECRET"))
        }
    }
}

/// A directory readable by others, a root-only secret in it, and configuration files written there
/// (one spool, then `lines`), for the bad-configuration tests.
struct BadConfigFixture {
    let directory: TemporaryDirectory
    let secret: String

    init() throws {
        directory = try TemporaryDirectory()
        chmod(directory.path, 0o755)
        secret = directory.url("token")
        _ = FileManager.default.createFile(atPath: secret, contents: Data("TOPSECRET-credential\n".utf8), attributes: [.posixPermissions: 0o600])
    }

    func write(_ name: String, _ lines: [String]) throws -> String {
        let path = directory.url(name)
        try (["[[spool]]", "name = \"media\"", "directory = \"\(directory.path)/spool\"", "url = \"https://example.org/upload\""] + lines)
            .joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        return path
    }
}

/// Binds a Unix stream socket at `path` (the socket file stays until removed) and returns its descriptor.
func bindUnixSocket(_ path: String) throws -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else {
        close(descriptor)
        throw TestFailure("bind \(path): \(String(cString: strerror(errno)))")
    }
    return descriptor
}
