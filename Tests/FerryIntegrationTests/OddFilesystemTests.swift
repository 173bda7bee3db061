import FerryQueue
import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

/// Filesystems that lack what Ferry prefers to use, imitated with a preloaded library.
@Suite("Odd filesystems", .serialized)
struct OddFilesystemTests {
    /// Builds a library that, preloaded, makes `renameat2` with any flag fail with `EINVAL`, as it
    /// does on FUSE mounts, NFS and some other filesystems.
    static func withoutRenameNoReplace(in directory: TemporaryDirectory) async throws -> String {
        let source = directory.url("noreplace.c"), library = directory.url("noreplace.so")
        try """
            #define _GNU_SOURCE
            #include <errno.h>
            #include <stdio.h>
            int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
                if (flags != 0) { errno = EINVAL; return -1; }
                return renameat(olddirfd, oldpath, newdirfd, newpath);
            }
            """.write(toFile: source, atomically: true, encoding: .utf8)
        let status = try await runToCompletion(
            ["/usr/bin/cc", "-shared", "-fPIC", "-o", library, source], environment: ["PATH": "/usr/bin:/bin"],
            stdoutPath: directory.url("cc.out"), stderrPath: directory.url("cc.err"), timeout: .seconds(60))
        try #require(status == 0, "cc failed: \((try? String(contentsOfFile: directory.url("cc.err"), encoding: .utf8)) ?? "")")
        return library
    }

    @Test("Where renameat2(RENAME_NOREPLACE) fails with EINVAL, delivered files are still moved and rejected ones still go aside with their reason")
    func noRenameNoReplace() async throws {
        let spool = TestSpool(options: ["after_upload = \"move\""])
        try await withDaemonHarness(spools: [spool], plan: { info in
            info.index == 1 ? .respond(status: 400, body: "no thanks") : .store()
        }) { harness in
            let library = try await Self.withoutRenameNoReplace(in: harness.directory)
            try await harness.start(environment: ["LD_PRELOAD": library])
            try harness.drop("good.txt", Array("good".utf8))
            try await harness.waitForAccepted(1)
            try harness.drop("bad.txt", Array("bad".utf8))
            try await waitUntil("both jobs to end and their files to be dealt with\n\(harness.daemon?.log ?? "")") {
                let all = try await jobs(harness)
                return all.count == 2 && all.allSatisfy { $0.state.isFinal && $0.disposedAt != nil }
            }
            #expect(fileExists(harness.spoolPath() + "/.sent/good.txt"), "the delivered file was moved\n\(harness.daemon?.log ?? "")")
            #expect(fileExists(harness.spoolPath() + "/.failed/bad.txt"))
            #expect(fileExists(harness.spoolPath() + "/.failed/bad.txt.error.json"))
            #expect(!fileExists(harness.spoolPath() + "/good.txt") && !fileExists(harness.spoolPath() + "/bad.txt"))
            #expect(harness.daemon?.log.contains("cannot dispose") == false)
        }
    }
}
