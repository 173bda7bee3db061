import FerryQueue
import FerryTestSupport
import Foundation
import Testing

/// Operator actions on one job from two clients at once (a script releasing or retrying everything
/// while an operator works by hand).
@Suite("Operator actions racing")
struct OperatorRaceTests {
    @Test("retry and cancel of one failed job at the same moment: one at a time, and the replies match the file and the queue")
    func retryRacesCancel() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let paused = try await harness.ctl("pause")
            #expect(paused.status == 0, "\(paused)")
            for round in 0..<12 {
                let name = "r\(round).bin"
                _ = try harness.drop(name, pseudoRandomBytes(100, seed: UInt64(round)))
                var id = ""
                try await waitUntil("\(name) to be queued") {
                    id = try await jobs(harness).first { $0.displayPath == name }?.id.rawValue ?? ""
                    return !id.isEmpty
                }
                let first = try RawControlSocket(path: harness.controlSocket).request(#"{"v":1,"id":0,"cmd":"cancel","args":{"ids":["\#(id)"]}}"#)
                #expect(first["ok"] as? Bool == true, "\(first)")
                // Both requests are on their way before either reply is read.
                let retry = try RawControlSocket(path: harness.controlSocket)
                let cancel = try RawControlSocket(path: harness.controlSocket)
                try retry.send(#"{"v":1,"id":1,"cmd":"retry","args":{"ids":["\#(id)"]}}"# + "\n")
                try cancel.send(#"{"v":1,"id":2,"cmd":"cancel","args":{"ids":["\#(id)"]}}"# + "\n")
                let retried = try parseJSONObject(try #require(try retry.readLine()))
                let cancelled = try parseJSONObject(try #require(try cancel.readLine()))
                #expect(retried["ok"] as? Bool == true && cancelled["ok"] as? Bool == true, "\(retried) \(cancelled)")
                let all = try await jobs(harness).filter { $0.displayPath == name }
                let job = try #require(all.first { $0.id.rawValue == id })
                let inSpool = FileManager.default.fileExists(atPath: harness.spoolPath() + "/" + name)
                let failed = FileManager.default.fileExists(atPath: harness.spoolPath() + "/.failed/" + name)
                #expect(all.count == 1, "round \(round): a second job for the file: \(all.map { "\($0.id) \($0.state)" })")
                switch job.state {
                case .cancelled: #expect(!inSpool && failed, "round \(round): cancelled, yet the file is in the spool")
                case .queued: #expect(inSpool && !failed, "round \(round): queued, yet the file is not in the spool")
                default: Issue.record("round \(round): job is \(job.state) (\(retried) \(cancelled))")
                }
                // Out of the way for the next round.
                _ = try RawControlSocket(path: harness.controlSocket).request(#"{"v":1,"id":3,"cmd":"cancel","args":{"ids":["\#(id)"]}}"#)
            }
        }
    }
}
