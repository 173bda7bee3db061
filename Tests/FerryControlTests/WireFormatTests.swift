import FerryControl
import Foundation
import Testing

/// The protocol's closed sets of names are enums; these tests pin the JSON they produce to the text
/// the protocol has always sent (docs/control-protocol.md), byte for byte.
@Suite("Control protocol wire format")
struct WireFormatTests {
    private static let at = Date(timeIntervalSince1970: 1_795_342_530.25)  // 2026-11-22T10:15:30.250Z

    private func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try ControlJSON.encoder.encode(value), as: UTF8.self)
    }

    /// Every case encodes as its name, alone and as the value of a key.
    private func expectNames<V: ControlVocabulary>(_ type: V.Type, _ names: [String]) throws {
        #expect(V.allCases.map(\.rawValue) == names)
        for (value, name) in zip(V.allCases, names) {
            #expect(try json(["k": value]) == #"{"k":"\#(name)"}"#)
            #expect(V(rawValue: name) == value)
            #expect(try ControlJSON.decoder.decode(V.self, from: Data(#""\#(name)""#.utf8)) == value)
        }
    }

    @Test("Request ids are echoed as sent: 64-bit integers exactly, strings, fractions", arguments: [
        "9007199254740993", "-9223372036854775808", "9223372036854775807", "7", "0", "1.5", #""abc""#, "null",
    ])
    func idsEchoed(id: String) throws {
        let value = try ControlJSON.decoder.decode(JSONValue.self, from: Data(id.utf8))
        #expect(try json(value) == id)
    }

    @Test("Each enum's cases are the names on the wire")
    func names() throws {
        try expectNames(AttemptInfo.Outcome.self, ["success", "retry", "failure", "interrupted"])
        try expectNames(JobDetail.Location.self, ["spool", "sent", "failed", "deleted", "kept", "missing"])
        try expectNames(JobDetail.Disposition.self, ["deleted", "moved", "kept", "left", "missing"])
        try expectNames(UploadProgress.Phase.self, ["waiting", "preparing", "sending"])
        try expectNames(WatchEvent.Kind.self, ["job", "progress"])
        try expectNames(JobEventName.self, [
            "queued", "started", "retry", "done", "failed", "requeued", "superseded", "held", "released", "retried",
            "cancelled", "disposed",
        ])
        try expectNames(HealthReport.Status.self, ["ok", "degraded"])
        try expectNames(SpoolServerWait.Reason.self, ["asked", "unreachable"])
    }

    @Test("A spool's server_wait: its fields on the wire; absent from an older daemon's status; a newer reason kept")
    func serverWait() throws {
        let wait = SpoolServerWait(reason: .unreachable, until: Self.at, message: "connection to h:1 failed: Connection refused", tries: 3)
        #expect(try json(wait) == #"{"message":"connection to h:1 failed: Connection refused","reason":"unreachable","tries":3,"until":"2026-11-22T10:15:30.250Z"}"#)
        #expect(try json(SpoolServerWait(reason: .asked, until: Self.at)) == #"{"reason":"asked","until":"2026-11-22T10:15:30.250Z"}"#)
        let older = #"{"name":"a","directory":"/s","paused":false,"counts":{},"settling":0}"#
        #expect(try ControlJSON.decoder.decode(SpoolStatus.self, from: Data(older.utf8)).serverWait == nil)
        let newer = #"{"reason":"throttled","until":"2026-11-22T10:15:30.250Z"}"#
        #expect(try ControlJSON.decoder.decode(SpoolServerWait.self, from: Data(newer.utf8)).reason == .unrecognized("throttled"))
    }

    @Test("A name this client does not know (a newer daemon's) is kept, not an error, and re-encoded unchanged")
    func unknownNames() throws {
        let line = #"{"at":"2026-11-22T10:15:30.250Z","event":"archived","type":"job"}"#
        let event = try ControlJSON.decoder.decode(WatchEvent.self, from: Data(line.utf8))
        #expect(event.event == .unrecognized("archived"))
        #expect(event.type == .job)
        #expect(try json(event) == line)
        let phase = try ControlJSON.decoder.decode(UploadProgress.Phase.self, from: Data(#""verifying""#.utf8))
        #expect(phase == .unrecognized("verifying") && phase.rawValue == "verifying")
    }

    @Test("Whole messages carrying them encode exactly as before")
    func messages() throws {
        let upload = UploadProgress(
            job: "01JD00000000000000000000AB", spool: "scans", file: "a.jpg", phase: .sending, bytesSent: 10,
            bytesTotal: 20, bytesPerSecond: 5, startedAt: Self.at, attempt: 2)
        #expect(try json(upload) == #"{"attempt":2,"bytes_per_second":5,"bytes_sent":10,"bytes_total":20,"file":"a.jpg","job":"01JD00000000000000000000AB","phase":"sending","spool":"scans","started_at":"2026-11-22T10:15:30.250Z"}"#)

        let attempt = AttemptInfo(number: 1, startedAt: Self.at, durationSeconds: 0.5, status: 503, error: "HTTP 503", bytesSent: 7, outcome: .retry)
        #expect(try json(attempt) == #"{"bytes_sent":7,"duration_seconds":0.5,"error":"HTTP 503","number":1,"outcome":"retry","started_at":"2026-11-22T10:15:30.250Z","status":503}"#)

        let summary = JobSummary(
            id: "01JD00000000000000000000AB", spool: "scans", file: "a.jpg", size: 20, state: .done, attempts: 1,
            createdAt: Self.at, updatedAt: Self.at, nextAttemptAt: nil, finishedAt: Self.at, lastError: nil, responseStatus: 201)
        let detail = JobDetail(
            job: summary, url: "https://example.net/upload", location: .sent, path: "/srv/spool/.sent/a.jpg",
            disposition: .moved, heldAt: nil, response: nil, attempts: [attempt], progress: nil)
        #expect(try json(detail) == #"{"attempts":[{"bytes_sent":7,"duration_seconds":0.5,"error":"HTTP 503","number":1,"outcome":"retry","started_at":"2026-11-22T10:15:30.250Z","status":503}],"disposition":"moved","job":{"attempts":1,"created_at":"2026-11-22T10:15:30.250Z","file":"a.jpg","finished_at":"2026-11-22T10:15:30.250Z","id":"01JD00000000000000000000AB","response_status":201,"size":20,"spool":"scans","state":"done","updated_at":"2026-11-22T10:15:30.250Z"},"location":"sent","path":"/srv/spool/.sent/a.jpg","url":"https://example.net/upload"}"#)

        let event = WatchEvent(
            type: .job, id: 42, at: Self.at, job: "01JD00000000000000000000AB", spool: "scans", file: "a.jpg", state: .retrying,
            event: .retry, attempt: 1, status: 503, message: "HTTP 503")
        #expect(try json(event) == #"{"at":"2026-11-22T10:15:30.250Z","attempt":1,"event":"retry","file":"a.jpg","id":42,"job":"01JD00000000000000000000AB","message":"HTTP 503","spool":"scans","state":"retrying","status":503,"type":"job"}"#)
        #expect(try json(WatchEvent(type: .progress, at: Self.at, uploads: [])) == #"{"at":"2026-11-22T10:15:30.250Z","type":"progress","uploads":[]}"#)

        let health = HealthReport(status: .degraded, version: "0.1.0", uptimeSeconds: 3, problems: ["the queue database cannot be read"])
        #expect(try json(health) == #"{"problems":["the queue database cannot be read"],"status":"degraded","uptime_seconds":3,"version":"0.1.0"}"#)

        // And they read back as the same values.
        #expect(try ControlJSON.decoder.decode(UploadProgress.self, from: ControlJSON.encoder.encode(upload)) == upload)
        #expect(try ControlJSON.decoder.decode(WatchEvent.self, from: ControlJSON.encoder.encode(event)) == event)
        let decoded = try ControlJSON.decoder.decode(JobDetail.self, from: ControlJSON.encoder.encode(detail))
        #expect(decoded.location == .sent && decoded.disposition == .moved && decoded.attempts == [attempt])
    }
}
