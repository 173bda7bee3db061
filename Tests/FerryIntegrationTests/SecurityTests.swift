import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every regular file below `path` (not following symlinks), with its lstat.
func walk(_ path: String) -> [(path: String, status: stat)] {
    var found: [(String, stat)] = []
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return [] }
    for name in names {
        let full = path + "/" + name
        var st = stat()
        guard lstat(full, &st) == 0 else { continue }
        found.append((full, st))
        if st.st_mode & S_IFMT == S_IFDIR { found += walk(full) }
    }
    return found
}

@Suite("Security checks", .serialized)
struct SecurityTests {
    @Test("Hard links into the spool: only the spool's name is removed or moved; the other name and its content stay")
    func hardLinks() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in info.uri.contains("strict") ? .respond(status: 400) : .store() }
        try await withDaemonHarness(spools: [TestSpool(), TestSpool(name: "strict")], plan: plan) { harness in
            try await harness.start()
            let outside = try harness.directory.makeDirectory("outside")
            let delivered = outside + "/delivered.txt"
            let rejected = outside + "/rejected.txt"
            try "deliver me".write(toFile: delivered, atomically: true, encoding: .utf8)
            try "reject me".write(toFile: rejected, atomically: true, encoding: .utf8)
            #expect(link(delivered, harness.directory.url(".staged-1")) == 0)
            #expect(link(rejected, harness.directory.url(".staged-2")) == 0)
            // Renamed in, as producers do; the link count is 2 when ferryd sees them.
            #expect(rename(harness.directory.url(".staged-1"), harness.spoolPath() + "/linked.txt") == 0)
            #expect(rename(harness.directory.url(".staged-2"), harness.spoolPath("strict") + "/linked.txt") == 0)
            try await waitUntil("both jobs final and disposed") {
                let all = try await jobs(harness)
                return all.count == 2 && all.allSatisfy { $0.disposedAt != nil }
            }
            #expect(harness.receiver.acceptedRequests.first?.files.first?.sha256 == sha256Hex(Array("deliver me".utf8)))
            var st = stat()
            #expect(try String(contentsOfFile: delivered, encoding: .utf8) == "deliver me")
            #expect(stat(delivered, &st) == 0 && st.st_nlink == 1, "the spool's link was removed, the outside name kept")
            #expect(!fileExists(harness.spoolPath() + "/linked.txt"))
            #expect(try String(contentsOfFile: rejected, encoding: .utf8) == "reject me")
            #expect(stat(rejected, &st) == 0 && st.st_nlink == 2, "moved to .failed inside the spool, the outside name kept")
            #expect(try String(contentsOfFile: harness.spoolPath("strict") + "/.failed/linked.txt", encoding: .utf8) == "reject me")
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).sorted() == ["delivered.txt", "rejected.txt"])
        }
    }

    @Test("A queued file's directory swapped for a symlink to outside (recursive spool): nothing outside is uploaded, moved or deleted")
    func directorySwappedForSymlink() async throws {
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { _ in .respond(status: 400) }
        try await withDaemonHarness(spools: [TestSpool(options: ["recursive = true"])], plan: plan) { harness in
            try await harness.start()
            let spool = harness.spoolPath()
            let outside = try harness.directory.makeDirectory("outside")
            try "outside, same name".write(toFile: outside + "/report.txt", atomically: true, encoding: .utf8)
            #expect(try await harness.ctl("pause", "test").status == 0)
            try FileManager.default.createDirectory(atPath: spool + "/sub", withIntermediateDirectories: true)
            try dropFile(Array("inside".utf8), at: spool + "/sub/report.txt")
            try await waitUntil("the file to be queued") { try await jobs(harness).first?.state == .queued }
            // The producer swaps the directory for a symlink to a directory holding a file of the same name.
            #expect(rename(spool + "/sub", spool + "/.sub-away") == 0)
            #expect(symlink(outside, spool + "/sub") == 0)
            #expect(try await harness.ctl("resume", "test").status == 0)
            try await waitUntil("the job to fail") { try await jobs(harness).first?.state == .failed }
            let job = try #require(try await jobs(harness).first)
            #expect(job.lastError?.contains("symlink") == true || job.lastError?.contains("disappeared") == true, "\(job.lastError ?? "")")
            #expect(harness.receiver.requests.isEmpty, "nothing was uploaded")
            try await waitUntil("the job's disposition to be recorded (missing, not retried forever)") { try await jobs(harness).first?.disposedAt != nil }
            #expect(try await jobs(harness).first?.disposition == .missing)
            #expect(harness.daemon?.log.contains("cannot dispose of the file") == false)
            #expect(try String(contentsOfFile: outside + "/report.txt", encoding: .utf8) == "outside, same name")
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["report.txt"], "nothing moved or written through the link")
            #expect(try String(contentsOfFile: spool + "/.sub-away/report.txt", encoding: .utf8) == "inside")
        }
    }

    /// A precondition of the platform Ferry relies on (it checks the kernel, not Ferry): with
    /// `fs.protected_hardlinks`, the README's shared spool cannot be used to make ferryd upload a file
    /// its producer may not read.
    @Test("Platform precondition: a producer cannot hard-link a file it may not read into a spool (fs.protected_hardlinks)",
          .enabled(if: getuid() == 0, "runs ln as nobody through setpriv, which needs root"))
    func protectedHardlinks() async throws {
        let setting = try String(contentsOfFile: "/proc/sys/fs/protected_hardlinks", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(setting == "1", "fs.protected_hardlinks is \(setting): a producer could link files it may not read into a spool; ferryd's own user must then not be able to read them either")
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o755)
        let spool = try directory.makeDirectory("spool")
        chmod(spool, 0o777)
        let shadow = directory.url("shadow-like")
        _ = FileManager.default.createFile(atPath: shadow, contents: Data("root:$6$secret".utf8), attributes: [.posixPermissions: 0o600])
        let status = try await runToCompletion(
            ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "/bin/ln", shadow, spool + "/shadow"],
            environment: [:], stdoutPath: directory.url("out"), stderrPath: directory.url("err"), timeout: .seconds(10))
        #expect(status != 0)
        #expect(!fileExists(spool + "/shadow"))
        #expect(((try? String(contentsOfFile: directory.url("err"), encoding: .utf8)) ?? "").contains("Operation not permitted"))
    }

    @Test("With umask 000, state files, bodies and sidecars are still not readable by others")
    func modesIgnoreUmask() async throws {
        let gate = ReceiverGate()
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            info.index == 0 ? .stallUntil(afterBytes: 64 * 1024, gate: gate) : .respond(status: 400, body: "rejected")
        }
        try await withDaemonHarness(plan: plan) { harness in
            let child = try ChildProcess(
                executable: "/bin/sh", arguments: ["-c", "umask 000; exec \"$0\" --config \"$1\"", try BuiltProducts.path("ferryd"), harness.configPath],
                logPath: harness.logPath)
            defer { child.send(SIGKILL) }
            try await waitUntil("ferryd to be ready\n\(child.log)") { child.log.contains("msg=ready") }
            try harness.drop("big.bin", pseudoRandomBytes(4 << 20, seed: 41))
            try await waitUntil("the upload to be under way") { (harness.receiver.requests.first?.bodyBytes ?? 0) >= 64 * 1024 }
            let state = harness.directory.url("state")
            let during = walk(state)
            #expect(during.contains { $0.path.hasSuffix(".body") }, "a body exists while uploading")
            #expect(during.contains { $0.path.hasSuffix("queue.sqlite-wal") })
            gate.open()
            try harness.drop("rejected.txt", Array("no".utf8))
            try await waitUntil("the rejected file to be moved aside") { fileExists(harness.spoolPath() + "/.failed/rejected.txt.error.json") }
            for entry in during + walk(state) {
                let mode = entry.status.st_mode
                guard mode & S_IFMT != S_IFSOCK else { continue }  // the control socket: access is by SO_PEERCRED
                #expect(mode & 0o007 == 0, "\(entry.path) is mode \(String(mode & 0o777, radix: 8)): others may use it")
            }
            var st = stat()
            #expect(stat(state, &st) == 0 && st.st_mode & 0o777 == 0o700)
            #expect(stat(harness.spoolPath() + "/.failed", &st) == 0 && st.st_mode & 0o007 == 0, "the failed directory is not open to others")
            #expect(stat(harness.spoolPath() + "/.failed/rejected.txt.error.json", &st) == 0 && st.st_mode & 0o007 == 0,
                    "the sidecar is mode \(String(st.st_mode & 0o777, radix: 8))")
            child.send(SIGTERM)
            #expect(try await child.waitForExit() == 0)
        }
    }

    @Test("Secrets (header from ${env:} and ${file:}, URL user:password, URL query token) appear nowhere ferryd writes or shows, even at log_level trace, even when a refusal echoes them")
    func secretsNowhere() async throws {
        let envSecret = "ENVSECRET-7f3a9c"
        let fileSecret = "FILESECRET-b41d22"
        let urlPassword = "URLPASS-c0ffee"
        let queryToken = "QUERYTOKEN-5e5e5e"
        let secrets = try TemporaryDirectory("ferry-secrets")
        try (fileSecret + "\n").write(toFile: secrets.url("api-key"), atomically: true, encoding: .utf8)
        let failedOnce = Atomic<Bool>(false)
        let plan: @Sendable (RequestInfo) -> ReceiverAction = { info in
            // The refusal echoes what it was sent, as servers do (AWS's SignatureDoesNotMatch quotes
            // the signed headers): kept with the job, in the sidecar and for hooks, it must not carry them.
            if info.uri.contains("strict") {
                return .respond(status: 403, body: "forbidden: Bearer \(envSecret), key \(fileSecret), ?token=\(queryToken), alice:\(urlPassword)")
            }
            return failedOnce.exchange(true, ordering: .relaxed) ? .store() : .respond(status: 503, headers: [HeaderField(name: "Retry-After", value: "1")])
        }
        let headers = ["Authorization = \"Bearer ${env:FERRY_TEST_TOKEN}\"", "X-Api-Key = \"${file:\(secrets.url("api-key"))}\""]
        let spools = [
            TestSpool(headers: headers), TestSpool(name: "strict", headers: headers),
            TestSpool(name: "down", headers: headers, retry: ["initial_delay = \"50ms\"", "max_delay = \"100ms\"", "max_attempts = 2"]),
        ]
        try await withDaemonHarness(spools: spools, plan: plan) { harness in
            // Every spool's URL gets credentials and a query token; "down" points at a closed port.
            let port = harness.receiver.url(path: "/").split(separator: ":").last!.split(separator: "/").first!
            // At trace, the most talkative level, libraries log too.
            var config = try String(contentsOfFile: harness.configPath, encoding: .utf8)
                .replacingOccurrences(of: "log_level = \"debug\"", with: "log_level = \"trace\"")
            config = config.replacingOccurrences(of: "http://127.0.0.1:\(port)/upload/down", with: "http://127.0.0.1:9/upload/down")
            for name in ["test", "strict", "down"] {
                for host in ["127.0.0.1:\(port)", "127.0.0.1:9"] {
                    config = config.replacingOccurrences(
                        of: "\"http://\(host)/upload/\(name)\"", with: "\"http://alice:\(urlPassword)@\(host)/upload/\(name)?token=\(queryToken)\"")
                }
            }
            try config.write(toFile: harness.configPath, atomically: true, encoding: .utf8)
            try #require(config.components(separatedBy: queryToken).count == 4, "fixture: every URL carries the secrets")
            try #require(config.contains("log_level = \"trace\""), "fixture: trace logging")
            try await harness.start(environment: ["FERRY_TEST_TOKEN": envSecret])
            try harness.drop("ok.txt", Array("delivered after a 503".utf8))
            try harness.drop("no.txt", Array("rejected with 403".utf8), spool: "strict")
            try harness.drop("down.txt", Array("never reaches a server".utf8), spool: "down")
            try await waitUntil("three jobs final and disposed\n\(harness.daemon?.log ?? "")") {
                let all = try await jobs(harness)
                return all.count == 3 && all.allSatisfy { $0.state.isFinal && $0.disposedAt != nil }
            }
            // The secrets did reach the server.
            let request = try #require(harness.receiver.acceptedRequests.first)
            #expect(request.header("Authorization") == "Bearer \(envSecret)")
            #expect(request.header("X-Api-Key") == fileSecret)
            #expect(request.uri.contains("token=\(queryToken)"))

            // Everything ferryd wrote or shows.
            var texts: [(String, [UInt8])] = [("log", Array((harness.daemon?.log ?? "").utf8))]
            for name in ["test", "strict", "down"] {
                for entry in walk(harness.spoolPath(name)) where entry.status.st_mode & S_IFMT == S_IFREG {
                    texts.append((entry.path, [UInt8](FileManager.default.contents(atPath: entry.path) ?? Data())))
                }
            }
            let sidecars = texts.filter { $0.0.hasSuffix(".error.json") }
            #expect(sidecars.count == 2, "sidecars: \(sidecars.map(\.0))")
            for entry in walk(harness.directory.url("state")) where entry.status.st_mode & S_IFMT == S_IFREG {
                texts.append((entry.path, [UInt8](FileManager.default.contents(atPath: entry.path) ?? Data())))
            }
            let commands: [[String]] = [["status", "--json"], ["list", "--json"], ["metrics"], ["metrics", "--json"], ["health", "--json"], ["list"]]
            for command in commands {
                let result = try await runFerryctl(command, socket: harness.controlSocket)
                #expect(result.status == 0, "\(command): \(result)")
                texts.append((command.joined(separator: " "), Array((result.stdout + result.stderr).utf8)))
            }
            for job in try await jobs(harness) {
                for command in [["show", job.id.rawValue, "--json"], ["show", job.id.rawValue]] {
                    let result = try await runFerryctl(command, socket: harness.controlSocket)
                    #expect(result.status == 0, "\(result)")
                    texts.append((command.joined(separator: " "), Array((result.stdout + result.stderr).utf8)))
                }
            }
            // The event log (`ferryctl watch`) is read from the database, grepped above with the rest
            // of the state directory (queue.sqlite and its -wal).
            #expect(texts.contains { $0.0.hasSuffix("queue.sqlite-wal") || $0.0.hasSuffix("queue.sqlite") })

            let basic = Data("alice:\(urlPassword)".utf8).base64EncodedString()
            for secret in [envSecret, fileSecret, urlPassword, queryToken, basic] {
                for (origin, bytes) in texts {
                    #expect(!SecurityTests.contains(bytes, Array(secret.utf8)), "\(origin) contains the secret \(secret)")
                }
            }
            // What is shown instead: the URL without credentials or query.
            let shown = try await runFerryctl(["show", try #require(try await jobs(harness).first { $0.spool == "strict" }).id.rawValue, "--json"],
                                              socket: harness.controlSocket).json()
            #expect(shown["url"] as? String == "http://127.0.0.1:\(port)/upload/strict")
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
