import FerryQueue
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Holds `count` control connections as `nobody`, each with a `watch` running, and prints how many
/// were admitted and how many refused as busy; then holds them until killed.
private let holdConnections = #"""
import json, socket, sys, time
path, count = sys.argv[1], int(sys.argv[2])
held, admitted, refused, messages = [], 0, 0, set()
for i in range(count):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(10)
    try:
        s.sendall(b'{"v":1,"id":1,"cmd":"watch"}\n')
    except OSError:
        pass
    line = b""
    try:
        while not line.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk: break
            line += chunk
    except OSError:
        pass
    reply = json.loads(line.split(b"\n")[0] or b"{}")
    if reply.get("ok"):
        admitted += 1
    else:
        refused += 1
        messages.add(reply.get("error", {}).get("message", "no reply"))
    held.append(s)
print(json.dumps({"admitted": admitted, "refused": refused, "messages": sorted(messages)}), flush=True)
time.sleep(600)
"""#

@Suite("Control connections: one user cannot lock the administrators out", .serialized)
struct ControlAdmissionTests {
    @Test("nobody holding 60 watch connections gets 32; root's ferryctl still works, and a refusal says why",
          .enabled(if: getuid() == 0, "runs a client as nobody through setpriv, which needs root"))
    func perUserLimit() async throws {
        try await withDaemonHarness(controlSocket: "run/control.sock") { harness in
            chmod(harness.directory.path, 0o755)
            try await harness.start()
            let script = harness.directory.url("hold.py")
            try holdConnections.write(toFile: script, atomically: true, encoding: .utf8)
            chmod(script, 0o644)
            let holder = try ChildProcess(
                executable: "/usr/bin/setpriv",
                arguments: ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", script, harness.controlSocket, "60"],
                logPath: harness.directory.url("hold.log"))
            let summary = try parseJSONObject(try await holder.readStdoutLine { $0.hasPrefix("{") })
            #expect(summary["admitted"] as? Int == 32, "\(summary)")
            #expect(summary["refused"] as? Int == 28, "\(summary)")
            let messages = summary["messages"] as? [String] ?? []
            #expect(messages.count == 1 && messages.first?.contains("too many control connections from uid") == true, "\(messages)")
            // The administrator is not locked out while nobody's connections stay open.
            let status = try await harness.ctl("status", "--json")
            #expect(status.status == 0, "\(status)")
            #expect(holder.isRunning, "the connections were still held")
            holder.send(SIGKILL)
        }
    }
}
