import FerryReceiver
import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

private func errorCode(_ reply: [String: Any]) -> String? {
    (reply["error"] as? [String: Any])?["code"] as? String
}

@Suite("Control protocol over the Unix socket", .serialized)
struct ControlProtocolTests {
    @Test("Garbage, a 1 MiB line, truncated JSON, a wrong version, an unknown command: error replies, and the daemon keeps serving and uploading")
    func badRequests() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let socket = try RawControlSocket(path: harness.controlSocket)

            try socket.send([0xFF, 0x00, 0x13, 0x37, 0xC3, 0x28, 0x0A])
            let garbageReply = try #require(try socket.readLine())
            #expect(errorCode(try parseJSONObject(garbageReply)) == "bad_request")

            try socket.send([UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20) + [0x0A])
            let hugeReply = try #require(try socket.readLine())
            #expect(errorCode(try parseJSONObject(hugeReply)) == "request_too_large")

            #expect(errorCode(try socket.request(#"{"v":1,"id":1,"cmd":"sta"#)) == "bad_request")
            let wrongVersion = try socket.request(#"{"v":2,"id":2,"cmd":"status"}"#)
            #expect(errorCode(wrongVersion) == "unsupported_version")
            #expect(wrongVersion["id"] as? Int == 2)
            let unknown = try socket.request(#"{"v":1,"id":"three","cmd":"explode"}"#)
            #expect(errorCode(unknown) == "unknown_command")
            #expect(unknown["id"] as? String == "three")
            #expect(errorCode(try socket.request(#"{"v":1,"id":4,"cmd":"list","args":[1,2]}"#)) == "bad_request")
            #expect(errorCode(try socket.request(#"{"v":1,"id":5,"cmd":"list","args":{"limit":0}}"#)) == "invalid_argument")
            #expect(errorCode(try socket.request(#"{"v":1,"id":6,"cmd":"list","args":{"limit":"many"}}"#)) == "invalid_argument")
            #expect(errorCode(try socket.request(#"{"v":1,"id":7,"cmd":"show","args":{"id":"01NOSUCHJOB"}}"#)) == "not_found")
            #expect(errorCode(try socket.request(#"{"v":1,"id":8,"cmd":"hold"}"#)) == "invalid_argument")
            #expect(errorCode(try socket.request(#"[1,2,3]"#)) == "bad_request")

            // Each mistake is named: a version of the wrong type, a misspelt key or argument (never
            // taken for an absent one: a `list` of everything, a `cancel` of the wrong job), a type.
            func message(_ line: String) throws -> String {
                let reply = try socket.request(line)
                #expect(reply["ok"] as? Bool == false, "\(reply)")
                return ((reply["error"] as? [String: Any])?["message"] as? String) ?? ""
            }
            #expect(try message(#"{"v":"1","id":11,"cmd":"status"}"#).contains(#""v" is a string; it must be the number of the protocol version"#))
            #expect(try message(#"{"v":1,"id":12,"cmd":7}"#).contains(#""cmd" is a number"#))
            #expect(try message(#"{"v":1,"id":13,"cmd":"list","arg":{"state":"failed"}}"#).contains(#"unknown key "arg""#))
            let misspelt = try socket.request(#"{"v":1,"id":14,"cmd":"list","args":{"state":["failed"]}}"#)
            #expect(errorCode(misspelt) == "invalid_argument")
            #expect(((misspelt["error"] as? [String: Any])?["message"] as? String)?.contains(#"list has no argument "state""#) == true, "\(misspelt)")
            #expect(try message(#"{"v":1,"id":15,"cmd":"status","args":{"verbose":true}}"#).contains(#"status has no argument "verbose""#))
            #expect(try message(#"{"v":1,"id":16,"cmd":"limit","args":{"rate":1.5}}"#) == #"invalid arguments for limit: "rate" must be a string"#)
            #expect(try message(#"{"v":1,"id":17,"cmd":"list","args":{"limit":"many"}}"#).contains(#""limit" must be a whole number"#))
            // Numbers that no duration can hold are refused before the stream starts (1e17 s stopped the daemon).
            for interval in ["1e17", "1e308", "-1", "3600.5"] {
                #expect(try message(#"{"v":1,"id":19,"cmd":"watch","args":{"progress_interval":"# + interval + "}}")
                    .contains("progress_interval must be between 0.2 and 3600 seconds"))
            }
            for timeout in ["1e17", "1e308", "-1"] {
                #expect(try message(#"{"v":1,"id":20,"cmd":"wait","args":{"timeout_seconds":"# + timeout + "}}")
                    .contains("timeout_seconds must be between 0 and 31536000"))
            }
            // An argument given as null is an absent one.
            #expect(try socket.request(#"{"v":1,"id":18,"cmd":"list","args":{"state":null}}"#)["ok"] as? Bool == true)

            // The same connection still works, and so does the daemon's real job.
            let status = try socket.request(#"{"v":1,"id":9,"cmd":"status"}"#)
            #expect(status["ok"] as? Bool == true)
            #expect(status["v"] as? Int == 1)
            try harness.drop("after-garbage.txt", Array("still uploading".utf8))
            try await harness.waitForAccepted(1)
            #expect(harness.daemon?.child.isRunning == true)

            // A client that sends a last line without a newline and half-closes still gets its answer.
            let halfClosed = try RawControlSocket(path: harness.controlSocket)
            try halfClosed.send(#"{"v":1,"id":10,"cmd":"health"}"#)
            shutdown(halfClosed.descriptor, Int32(SHUT_WR))
            let healthLine = try #require(try halfClosed.readLine())
            let health = try parseJSONObject(healthLine)
            #expect(health["ok"] as? Bool == true)
        }
    }

    @Test("200 concurrent clients are all answered while one idle client is timed out")
    func manyClientsAndAnIdleOne() async throws {
        // 3 s: every one of the 200 clients sends well within it, even on a loaded machine.
        try await withDaemonHarness(topLevel: ["control_idle_timeout = \"3s\""]) { harness in
            try await harness.start()
            let idle = try RawControlSocket(path: harness.controlSocket)
            var clients: [RawControlSocket] = []
            for _ in 0..<200 { clients.append(try RawControlSocket(path: harness.controlSocket)) }
            for (index, client) in clients.enumerated() {
                try client.send(#"{"v":1,"id":\#(index),"cmd":"status"}"# + "\n")
            }
            try harness.drop("during-load.txt", Array("x".utf8))
            for (index, client) in clients.enumerated() {
                let line = try #require(try client.readLine(timeout: .seconds(30)))
                let reply = try parseJSONObject(line)
                #expect(reply["ok"] as? Bool == true)
                #expect(reply["id"] as? Int == index)
            }
            try await harness.waitForAccepted(1)
            // The idle client is disconnected; the others were not kept waiting by it.
            #expect(try idle.readLine(timeout: .seconds(10)) == nil)
            let late = try RawControlSocket(path: harness.controlSocket)
            #expect(try late.request(#"{"v":1,"id":1,"cmd":"health"}"#)["ok"] as? Bool == true)
        }
    }

    @Test("A client that sends requests and never reads the replies is closed after control_idle_timeout; others are served")
    func neverReads() async throws {
        try await withDaemonHarness(topLevel: ["control_idle_timeout = \"1s\""]) { harness in
            try await harness.start()
            let stuck = try RawControlSocket(path: harness.controlSocket)
            let requests = 20_000
            let lines = (0..<requests).map { #"{"v":1,"id":\#($0),"cmd":"status"}"# + "\n" }.joined()
            // Blocks once ferryd stops reading (its replies wait for us); ends when ferryd closes.
            let sender = Task.detached { try? stuck.send(lines) }
            _ = await sender.value
            var replies = 0
            while try stuck.readLine(timeout: .seconds(30)) != nil { replies += 1 }
            #expect(replies < requests, "the connection was closed before every reply was written")
            let other = try RawControlSocket(path: harness.controlSocket)
            #expect(try other.request(#"{"v":1,"id":1,"cmd":"health"}"#)["ok"] as? Bool == true)
        }
    }

    @Test("enqueue refuses a name holding a NUL: \"..\\u0000\" is not \"..\" to the check and would be to the system calls")
    func enqueueNUL() async throws {
        try await withDaemonHarness(spools: [TestSpool(options: ["recursive = true"])]) { harness in
            try await harness.start()
            let outside = harness.directory.url("outside.txt")
            try Data("not the spool's".utf8).write(to: URL(fileURLWithPath: outside))
            let socket = try RawControlSocket(path: harness.controlSocket)
            for name in [#"..\u0000/outside.txt"#, #"x\u0000y"#, #"\u0000"#] {
                let reply = try socket.request(#"{"v":1,"id":1,"cmd":"enqueue","args":{"spool":"test","files":[""# + name + #""]}}"#)
                let results = try #require((reply["result"] as? [String: Any])?["results"] as? [[String: Any]] ?? reply["results"] as? [[String: Any]], "\(reply)")
                #expect(results.first?["ok"] as? Bool == false, "\(name): \(reply)")
                #expect((results.first?["error"] as? [String: Any])?["code"] as? String == "invalid_argument", "\(name): \(reply)")
            }
            #expect(try await jobs(harness).isEmpty)
            #expect(fileExists(outside))
        }
    }

    @Test("watch streams job events with increasing ids, and a reconnect with since replays what was missed")
    func watchReplay() async throws {
        try await withDaemonHarness { harness in
            try await harness.start()
            let watcher = try RawControlSocket(path: harness.controlSocket)
            let start = try watcher.request(#"{"v":1,"id":1,"cmd":"watch","args":{"progress":false}}"#)
            #expect(start["ok"] as? Bool == true)
            try harness.drop("one.txt", Array("1".utf8))
            var ids: [Int] = []
            var kinds: [String] = []
            while !kinds.contains("disposed") {
                let text = try #require(try watcher.readLine(timeout: .seconds(30)))
                let line = try parseJSONObject(text)
                let event = try #require(line["event"] as? [String: Any])
                #expect(line["id"] as? Int == 1)
                ids.append(try #require(event["id"] as? Int))
                kinds.append(try #require(event["event"] as? String))
            }
            #expect(kinds == ["queued", "started", "done", "disposed"])
            #expect(ids == ids.sorted() && Set(ids).count == ids.count)

            // Events that happen while no one watches are replayed from `since`.
            try harness.drop("two.txt", Array("2".utf8))
            try await harness.waitForAccepted(2)
            try await harness.waitForQuiet()
            let again = try RawControlSocket(path: harness.controlSocket)
            let resumed = try again.request(#"{"v":1,"id":2,"cmd":"watch","args":{"since":\#(ids[0]),"progress":false}}"#)
            #expect((resumed["result"] as? [String: Any])?["missed"] == nil)
            var replayed: [Int] = []
            var files: Set<String> = []
            while replayed.count < 7 {
                let line = try #require(try again.readLine(timeout: .seconds(10)))
                let event = try #require(try parseJSONObject(line)["event"] as? [String: Any])
                replayed.append(try #require(event["id"] as? Int))
                files.insert(try #require(event["file"] as? String))
            }
            #expect(replayed == Array((ids[0] + 1)...(ids[0] + 7)))
            #expect(files == ["one.txt", "two.txt"])

            // An id from the future (another database) is reported as missed, not silently ignored.
            let future = try RawControlSocket(path: harness.controlSocket)
            let reply = try future.request(#"{"v":1,"id":3,"cmd":"watch","args":{"since":999999,"progress":false}}"#)
            #expect((reply["result"] as? [String: Any])?["missed"] != nil)
        }
    }
}
