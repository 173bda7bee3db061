import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `[spool.hooks]`: programs run after an outcome, at least once, through the real ferryd.
@Suite("Hooks after delivery and failure", .serialized)
struct HookTests {
    /// Writes an executable `/bin/sh` script and returns its path.
    static func script(_ directory: TemporaryDirectory, _ name: String, _ body: String) throws -> String {
        let path = directory.url(name)
        try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }

    /// The job's hook runs as `show --json` reports them.
    static func hooks(_ harness: DaemonHarness, _ id: String) async throws -> [[String: Any]] {
        (try await harness.ctl("show", id, "--json").json()["hooks"] as? [[String: Any]]) ?? []
    }

    static func hook(_ harness: DaemonHarness, _ id: String, _ kind: String) async throws -> [String: Any]? {
        try await hooks(harness, id).first { $0["kind"] as? String == kind }
    }

    /// Makes `hook` the spool's `on_delivered` (with `lines` before it: plain spool keys), starts
    /// ferryd, delivers one file and waits until the hook's run is `state`; returns the job id and
    /// the run as `show --json` reports it.
    static func runHook(_ harness: DaemonHarness, _ hook: String, _ lines: [String], until state: String) async throws -> (String, [String: Any]) {
        try (lines + ["[spool.hooks]", "on_delivered = [\"\(hook)\"]"]).joined(separator: "\n").insertIntoSpool(harness.configPath)
        try await harness.start()
        try harness.drop("a.txt", Array("x".utf8))
        try await harness.waitForQuiet()
        let id = try #require(try await jobs(harness).first).id.rawValue
        try await waitUntil("the hook to be \(state)", timeout: .seconds(60)) {
            try await Self.hook(harness, id, "delivered")?["state"] as? String == state
        }
        return (id, try #require(try await Self.hook(harness, id, "delivered")))
    }

    /// Makes `hook` the spool's `on_delivered` (with `settings`, more lines of `[spool.hooks]`),
    /// starts ferryd, drops one file and waits until the hook has written `marker`.
    static func startHook(_ harness: DaemonHarness, _ hook: String, _ settings: [String], waitingFor marker: String) async throws {
        try (["[spool.hooks]", "on_delivered = [\"\(hook)\"]"] + settings).joined(separator: "\n").insertIntoSpool(harness.configPath)
        try await harness.start()
        try harness.drop("a.txt", Array("x".utf8))
        try await waitUntil("the hook to start") { hasCompleteLine(marker) }
    }

    /// Whether `path` holds at least one whole line: a hook's `echo … >> path` creates the file
    /// before it writes the line, so the file's existence alone does not mean the line is there.
    static func hasCompleteLine(_ path: String) -> Bool {
        (try? String(contentsOfFile: path, encoding: .utf8))?.contains("\n") ?? false
    }

    @Test("on_delivered gets the job's JSON on stdin, its id in argv and FERRY_* in a clean environment, in its working directory")
    func deliveredHookInputs() async throws {
        let tools = try TemporaryDirectory()
        let out = try tools.makeDirectory("out")
        let work = try tools.makeDirectory("work")
        let hook = try Self.script(tools, "notify.sh", """
            cat > \(out)/stdin.json
            printf '%s\\n' "$@" > \(out)/argv
            env > \(out)/env
            pwd > \(out)/pwd
            """)
        let spool = TestSpool(options: ["after_upload = \"keep\""])
        try await withDaemonHarness(spools: [spool], topLevel: []) { harness in
            try """
            [spool.hooks]
            on_delivered = ["\(hook)", "--job", "{id}", "--name={filename}"]
            working_directory = "\(work)"
            """.appendLine(to: harness.configPath)
            try await harness.start(environment: ["FERRY_TEST_SECRET_TOKEN": "s3cr3t"])
            try harness.drop("page 1.png", pseudoRandomBytes(2000, seed: 3))
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            try await waitUntil("the hook's run to be recorded") {
                try await Self.hook(harness, job.id.rawValue, "delivered")?["state"] as? String == "succeeded"
            }
            let argv = try String(contentsOfFile: out + "/argv", encoding: .utf8)
            #expect(argv == "--job\n\(job.id.rawValue)\n--name=page 1.png\n")
            let stdin = try parseJSONObject(try String(contentsOfFile: out + "/stdin.json", encoding: .utf8))
            let status = try #require(job.responseStatus)
            #expect(stdin["job"] as? String == job.id.rawValue && stdin["version"] as? Int == 1 && stdin["status"] as? Int == status)
            #expect(stdin["path"] as? String == harness.spoolPath() + "/page 1.png", "kept: the hook gets the file's final path")
            let environment = try String(contentsOfFile: out + "/env", encoding: .utf8)
            #expect(environment.contains("FERRY_JOB_ID=\(job.id.rawValue)\n"))
            #expect(environment.contains("FERRY_SPOOL=test\n") && environment.contains("FERRY_FILE=page 1.png\n"))
            #expect(environment.contains("FERRY_STATUS=\(status)\n") && environment.contains("FERRY_OUTCOME=delivered\n"))
            #expect(environment.contains("FERRY_PATH=\(harness.spoolPath())/page 1.png\n"))
            #expect(!environment.contains("s3cr3t"), "ferryd's own environment (where ${env:…} secrets live) is not handed down")
            #expect(try String(contentsOfFile: out + "/pwd", encoding: .utf8) == work + "\n")
        }
    }

    @Test("a hook that exits 1 three times runs again with backoff and succeeds on the fourth run; show reports it")
    func failingThenSucceeding() async throws {
        let tools = try TemporaryDirectory()
        let counter = tools.url("runs")
        let hook = try Self.script(tools, "flaky.sh", """
            n=$(cat \(counter) 2>/dev/null || echo 0); n=$((n+1)); echo $n > \(counter)
            echo "run $n for $FERRY_JOB_ID"
            [ $n -ge 4 ] || { echo "not yet" >&2; exit 1; }
            """)
        try await withDaemonHarness { harness in
            let (_, run) = try await Self.runHook(harness, hook, ["hook_max_attempts = 5"], until: "succeeded")
            #expect(run["attempts"] as? Int == 4)
            #expect(run["exit_status"] as? Int == 0)
            #expect(try String(contentsOfFile: counter, encoding: .utf8) == "4\n")
            #expect(harness.daemon?.log.contains("hook failed; will run it again") == true)
        }
    }

    @Test("a hook that hangs is killed with its process group at its timeout, holds no upload, gives up, and retry-hook runs it again")
    func hangingHook() async throws {
        let tools = try TemporaryDirectory()
        let pids = tools.url("pids")
        let release = tools.url("release")
        // Sleeps in a child of its own (a grandchild of ferryd) unless released.
        let hook = try Self.script(tools, "hang.sh", """
            [ -e \(release) ] && exit 0
            sleep 600 &
            echo $! >> \(pids)
            wait
            """)
        try await withDaemonHarness(topLevel: ["max_concurrent_hooks = 1"]) { harness in
            try """
            hook_max_attempts = 1
            [spool.hooks]
            on_delivered = ["\(hook)"]
            timeout = "2s"
            """.insertIntoSpool(harness.configPath)
            try await harness.start()
            try harness.drop("first.txt", Array("1".utf8))
            try await waitUntil("the hook to start") { Self.hasCompleteLine(pids) }
            // Uploads go on while the only hook slot is taken.
            for index in 0..<5 { try harness.drop("more-\(index).txt", Array("m".utf8)) }
            try await harness.waitForAccepted(6)
            let first = try #require(try await jobs(harness).first { $0.displayPath == "first.txt" }).id.rawValue
            try await waitUntil("the hook to give up", timeout: .seconds(60)) {
                try await Self.hook(harness, first, "delivered")?["state"] as? String == "gave_up"
            }
            let run = try #require(try await Self.hook(harness, first, "delivered"))
            #expect((run["error"] as? String)?.contains("timed out after") == true, "\(run)")
            // The hook's own child went with it.
            let child = try #require(Int32(try String(contentsOfFile: pids, encoding: .utf8).split(separator: "\n").first ?? ""))
            try await waitUntil("the hook's child to be killed") { kill(child, 0) != 0 }
            // An operator runs it again; this time it finishes.
            _ = FileManager.default.createFile(atPath: release, contents: Data())
            let retried = try await harness.ctl("retry-hook", first)
            #expect(retried.status == 0 && retried.stdout.contains("on_delivered"), "\(retried)")
            try await waitUntil("the retried hook to succeed") {
                try await Self.hook(harness, first, "delivered")?["state"] as? String == "succeeded"
            }
            let again = try await harness.ctl("retry-hook", first)
            #expect(again.status != 0 && again.stderr.contains("no hook that gave up"), "\(again)")
        }
    }

    @Test("ferryd stopping (SIGTERM) takes a running hook's whole process group with it; the run is not counted")
    func shutdownKillsHookGroup() async throws {
        let tools = try TemporaryDirectory()
        let pids = tools.url("pids")
        let hook = try Self.script(tools, "hang.sh", """
            sleep 600 &
            echo $! >> \(pids)
            wait
            """)
        try await withDaemonHarness { harness in
            try await Self.startHook(harness, hook, ["timeout = \"10m\""], waitingFor: pids)
            let child = try #require(Int32(try String(contentsOfFile: pids, encoding: .utf8).split(separator: "\n").first ?? ""))
            #expect(try await harness.daemon?.stop() == 0)
            try await waitUntil("the hook's child to be killed with ferryd's shutdown") { kill(child, 0) != 0 }
            let store = try harness.queue()
            defer { try? store.close() }
            let job = try #require(try await store.jobs(limit: 1).first)
            let run = try #require(try await store.hookRuns(of: job).first)
            #expect(run.state == .pending && run.attempts == 0, "it runs again at the next start")
        }
    }

    @Test("a hook that prints 10 MB is drained, keeps only its last lines, and leaves the log bounded")
    func floodingHook() async throws {
        let tools = try TemporaryDirectory()
        let hook = try Self.script(tools, "flood.sh", """
            head -c 10000000 /dev/zero | tr '\\0' 'x' | fold -w 100
            echo "the last line"
            exit 3
            """)
        try await withDaemonHarness { harness in
            let (_, run) = try await Self.runHook(harness, hook, ["hook_max_attempts = 1"], until: "gave_up")
            #expect(run["exit_status"] as? Int == 3)
            let output = try #require(run["output"] as? String)
            #expect(output.hasSuffix("the last line\n") || output.hasSuffix("the last line"), "\(output.suffix(200))")
            #expect(output.utf8.count <= 4096)
            let log = harness.daemon?.log ?? ""
            #expect(log.utf8.count < 200_000, "the log holds \(log.utf8.count) bytes")
            #expect(log.contains("hook failed; giving up"))
        }
    }

    @Test("kill -9 of ferryd while a hook runs: the hook runs again after the restart (at least once)")
    func hookRunsAgainAfterKill() async throws {
        let tools = try TemporaryDirectory()
        let starts = tools.url("starts")
        let release = tools.url("release")
        let hook = try Self.script(tools, "slow.sh", """
            echo "$FERRY_JOB_ID $FERRY_HOOK_ATTEMPT" >> \(starts)
            i=0; while [ ! -e \(release) ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
            """)
        try await withDaemonHarness { harness in
            try await Self.startHook(harness, hook, ["timeout = \"60s\""], waitingFor: starts)
            try await harness.kill9()
            try await harness.start()
            try await waitUntil("the hook to start again") {
                (try? String(contentsOfFile: starts, encoding: .utf8))?.split(separator: "\n").count == 2
            }
            _ = FileManager.default.createFile(atPath: release, contents: Data())
            let id = try #require(try await jobs(harness).first).id.rawValue
            try await waitUntil("the hook to succeed") {
                try await Self.hook(harness, id, "delivered")?["state"] as? String == "succeeded"
            }
            let lines = try String(contentsOfFile: starts, encoding: .utf8).split(separator: "\n")
            #expect(lines.allSatisfy { $0.hasPrefix(id + " ") }, "both runs are for the same job: \(lines)")
            #expect(harness.receiver.acceptedRequests.count == 1, "the file was not sent again")
        }
    }

    @Test("on_failed gets the .error.json document and the failed directory's path; a cancel runs it too")
    func failedHook() async throws {
        let tools = try TemporaryDirectory()
        let out = try tools.makeDirectory("out")
        let hook = try Self.script(tools, "failed.sh", """
            cat > "\(out)/$FERRY_JOB_ID.json"
            echo "$FERRY_OUTCOME $FERRY_STATUS $FERRY_PATH" > "\(out)/$FERRY_JOB_ID.env"
            """)
        try await withDaemonHarness(plan: { _ in .respond(status: 422) }) { harness in
            try """
            [spool.hooks]
            on_failed = ["\(hook)"]
            """.insertIntoSpool(harness.configPath)
            try await harness.start()
            try harness.drop("bad.txt", Array("nope".utf8))
            try await harness.waitForQuiet()
            let job = try #require(try await jobs(harness).first)
            #expect(job.state == .failed)
            let envPath = out + "/\(job.id.rawValue).env"
            // Whole: the shell makes the file before echo writes its line.
            try await waitUntil("the on_failed hook") { Self.hasCompleteLine(envPath) }
            #expect(try String(contentsOfFile: envPath, encoding: .utf8) == "failed 422 \(harness.spoolPath())/.failed/bad.txt\n")
            let document = try parseJSONObject(try String(contentsOfFile: out + "/\(job.id.rawValue).json", encoding: .utf8))
            #expect(document["job"] as? String == job.id.rawValue && document["status"] as? Int == 422)
            #expect(document["outcome"] as? String == "failed" && (document["reason"] as? String)?.contains("422") == true)

            // An operator's cancel of a queued job is a final rejection too.
            #expect(try await harness.ctl("pause").status == 0)
            try harness.drop("parked.txt", Array("later".utf8))
            try await waitUntil("the parked file to be queued") { try await jobs(harness).contains { $0.displayPath == "parked.txt" } }
            let parked = try #require(try await jobs(harness).first { $0.displayPath == "parked.txt" })
            #expect(try await harness.ctl("cancel", parked.id.rawValue).status == 0)
            let parkedEnv = out + "/\(parked.id.rawValue).env"
            try await waitUntil("the on_failed hook after the cancel") { Self.hasCompleteLine(parkedEnv) }
            #expect(try String(contentsOfFile: parkedEnv, encoding: .utf8) == "cancelled  \(harness.spoolPath())/.failed/parked.txt\n")
        }
    }
}

extension String {
    /// Appends this text, as lines, to the file at `path`.
    func appendLine(to path: String) throws {
        let existing = try String(contentsOfFile: path, encoding: .utf8)
        try (existing + "\n" + self + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Puts these lines into the test configuration's only `[[spool]]`, before its sub-tables
    /// (plain keys first, then a table such as `[spool.hooks]`), by appending at the end: the
    /// harness writes `[spool.retry]` last, so keys go into a re-opened spool table only through a
    /// table header of their own. Plain keys are placed before the first `[spool.` line.
    func insertIntoSpool(_ path: String) throws {
        let existing = try String(contentsOfFile: path, encoding: .utf8)
        let lines = split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let tableStart = lines.firstIndex { $0.hasPrefix("[") } ?? lines.count
        let plain = lines[..<tableStart].joined(separator: "\n")
        let tables = lines[tableStart...].joined(separator: "\n")
        var configuration = existing
        if let subTable = configuration.range(of: "\n[spool.") {
            configuration.insert(contentsOf: "\n" + plain, at: subTable.lowerBound)
        } else {
            configuration += "\n" + plain
        }
        configuration += "\n" + tables + "\n"
        try configuration.write(toFile: path, atomically: true, encoding: .utf8)
    }
}
