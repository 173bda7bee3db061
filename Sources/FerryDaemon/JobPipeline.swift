import Crypto
import FerryConfig
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import FerryTransport
import Foundation
import Logging
import Synchronization

/// The spools the daemon runs now, by name. A configuration reload replaces the whole set; a job
/// already being processed keeps the runtime it started with.
final class SpoolRegistry: Sendable {
    private let current: Mutex<[String: SpoolRuntime]>

    init(_ spools: [String: SpoolRuntime]) { current = Mutex(spools) }

    subscript(name: String) -> SpoolRuntime? { current.withLock { $0[name] } }

    /// Every spool, in no particular order.
    var all: [String: SpoolRuntime] { current.withLock { $0 } }

    func replace(with spools: [String: SpoolRuntime]) { current.withLock { $0 = spools } }
}

/// Everything the pipeline needs to know about one spool at run time.
struct SpoolRuntime: Sendable {
    let configuration: SpoolConfiguration
    let files: SpoolFiles
    let uploader: Uploader
    /// Speaks tus on the uploader's connections (protocol "tus").
    let tus: TusClient
    let backoff: Backoff
    /// The endpoint with secrets resolved (never logged).
    let url: String
    /// Configured headers with secrets resolved (never logged).
    let headers: [(name: String, value: String)]

    init(configuration: SpoolConfiguration, uploader: Uploader) {
        self.configuration = configuration
        files = SpoolFiles(directory: configuration.directory)
        self.uploader = uploader
        tus = TusClient(uploader: uploader)
        backoff = Backoff(initialDelay: configuration.retry.initialDelay, maxDelay: configuration.retry.maxDelay)
        var headers = configuration.headers.map { (name: $0.name, value: $0.value.text) }
        // `https://user:password@host/…` means HTTP Basic authentication, as it does to curl.
        var url = configuration.url.text
        if var components = URLComponents(string: url), let user = components.percentEncodedUser {
            let password = components.percentEncodedPassword ?? ""
            let credentials = "\(user.removingPercentEncoding ?? user):\(password.removingPercentEncoding ?? password)"
            if !headers.contains(where: { $0.name.lowercased() == "authorization" }) {
                headers.append((name: "Authorization", value: "Basic " + Data(credentials.utf8).base64EncodedString()))
            }
            components.percentEncodedUser = nil
            components.percentEncodedPassword = nil
            url = components.string ?? url
        }
        self.url = url
        self.headers = headers
    }

    /// The URL for one job: the endpoint, or for a raw PUT whose URL names the file
    /// (`{filename}`, `{relative_path}`, …) the endpoint with those filled in, percent-encoded.
    func url(for job: Job) -> String {
        guard configuration.uploadProtocol == .put, !configuration.url.placeholders.isEmpty else { return url }
        let rendered = configuration.url.render { placeholder in
            switch placeholder {
            case .filename: Self.percentEncoded(Array(job.relativePath.split(separator: UInt8(ascii: "/")).last ?? []))
            case .relativePath: Self.percentEncoded(job.relativePath, keepingSlashes: true)
            case .size: String(job.identity.size)
            case .mtime: Self.percentEncoded(Array(BodyBuilder.rfc3339(nanoseconds: job.identity.modificationTime).utf8))
            case .id: job.id.rawValue
            case .sha256: ""  // refused by the configuration loader
            }
        }
        guard var components = URLComponents(string: rendered), components.percentEncodedUser != nil else { return rendered }
        components.percentEncodedUser = nil
        components.percentEncodedPassword = nil
        return components.string ?? rendered
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters (and `/` if asked).
    static func percentEncoded(_ bytes: [UInt8], keepingSlashes: Bool = false) -> String {
        var text = ""
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                text.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepingSlashes:
                text += "/"
            default:
                text += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return text
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// The data path for one claimed job, top to bottom:
///
///     spool        open the source without following symlinks; is it the version queued?
///     body         build (or reuse) the multipart body file from it
///     transport    send the body; classify the answer
///     disposition  record the outcome durably, then delete / move / keep the source
///
/// The outcome is committed before the source file is touched, so a crash at any point leaves
/// either the file in the spool or the success on record (and the file is finished at next start).
final class JobPipeline: Sendable {
    let store: JobStore
    /// Writes outcomes, retrying while the database cannot be written.
    let records: OutcomeRecorder
    let bodies: BodyBuilder
    let disposer: Disposer
    /// The configured spools (replaced by a configuration reload).
    let spools: SpoolRegistry
    /// The jobs being processed, their progress, and operators' interventions.
    let activity: ActiveJobs
    let logger: Logger
    /// Re-queues a path whose file changed after its upload (set by the daemon).
    let requeue: @Sendable (String, [UInt8]) async -> Void
    /// Runs body builds off the concurrency pool.
    let io: BlockingIO
    /// Counts attempts by outcome, their bytes and durations.
    let metrics: DaemonMetrics
    /// The local problem holding each spool back, if any (for `status`).
    let problems: LocalProblems

    /// The longest `Retry-After` honoured.
    static let retryAfterLimit = Duration.seconds(86_400)

    init(
        store: JobStore, bodies: BodyBuilder, spools: SpoolRegistry, activity: ActiveJobs, logger: Logger, io: BlockingIO,
        metrics: DaemonMetrics = DaemonMetrics(), problems: LocalProblems = LocalProblems(),
        requeue: @escaping @Sendable (String, [UInt8]) async -> Void
    ) {
        self.problems = problems
        self.activity = activity
        self.metrics = metrics
        self.io = io
        self.store = store
        self.records = OutcomeRecorder(store: store, logger: logger)
        self.bodies = bodies
        self.disposer = Disposer(store: store, logger: logger)
        self.spools = spools
        self.logger = logger
        self.requeue = requeue
    }

    /// Whether the job is being processed right now.
    func isActive(_ job: Job) -> Bool {
        activity.contains(job)
    }

    /// Processes one job that the scheduler moved to `uploading`. The work runs in a task of its own
    /// so that an operator can stop this one job (hold, cancel); cancelling the caller (shutdown)
    /// stops it too.
    func process(_ job: Job) async {
        activity.begin(job, estimatedTotal: job.identity.size)
        defer { activity.end(job) }
        var log = logger
        log[metadataKey: "job"] = "\(job.id)"
        log[metadataKey: "spool"] = "\(job.spool)"
        log[metadataKey: "file"] = "\(job.displayPath)"
        let work = Task { [log] in
            do {
                try await self.run(job, log: log)
            } catch {
                // Only the queue database can throw here. The job stays `uploading` in the database and
                // is put back in the queue at the next start; say so loudly.
                log.critical("cannot record the job's state in the queue database", metadata: ["error": "\(error)"])
            }
        }
        activity.attach(work, to: job)
        await withTaskCancellationHandler {
            await work.value
        } onCancel: {
            work.cancel()
        }
    }

    /// Records how an attempt that was cut short ends: held or cancelled if an operator asked for
    /// it, otherwise back in the queue (a shutdown).
    private func stopped(_ job: Job, spool: SpoolRuntime, startedAt: Date, bytesSent: Int64, log: Logger) async throws {
        forgetBody(of: job)
        switch activity.intervention(for: job) {
        case .hold(let reason):
            try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: bytesSent, transition: .held(reason: reason))
            log.notice("upload stopped: the job is on hold", metadata: ["reason": "\(reason)"])
        case .cancel(let reason):
            let cancelled = try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: bytesSent,
                                                     transition: .cancelled(reason: reason))
            log.notice("upload stopped: the job is cancelled", metadata: ["reason": "\(reason)"])
            await disposer.dispose(cancelled, spool: spool.configuration, files: spool.files)
            await terminateUpload(of: job, spool: spool, log: log)
        case nil:
            try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: bytesSent,
                                     transition: .interrupted(at: Date(), reason: "interrupted by shutdown"))
            if bytesSent > 0 { log.notice("upload interrupted by shutdown; it stays queued") }
        }
    }

    private func run(_ job: Job, log: Logger) async throws {
        var job = job
        let startedAt = Date()
        guard let spool = spools[job.spool] else {
            try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: 0, transition: .interrupted(
                at: Date().addingTimeInterval(300), reason: "spool \"\(job.spool)\" is not in the configuration"))
            log.warning("the job's spool is no longer configured; it waits until the spool returns")
            return
        }

        // 1. Spool → body: a multipart snapshot in the state directory, or (put, tus) the file itself.
        let body: BuiltBody
        var prepared: PreparedBody
        // multipart: the body is sent while it is being built (the sender never passes the builder,
        // and the last bytes wait until the copy is known to match the file), so a large file costs
        // about the longer of copying and sending, not their sum.
        var building: Task<PreparedBody, Never>?
        var growing: GrowingBody?
        if spool.configuration.uploadProtocol == .multipart {
            let start = BodyStart()
            let task = Task { [io, job] in
                do {
                    return try await io.run { flag in self.prepareBody(job, spool: spool, isCancelled: { flag.isCancelled }, growing: start) }
                } catch {
                    start.fire(nil)
                    return PreparedBody.interrupted
                }
            }
            if let (built, body) = await withTaskCancellationHandler(operation: { await start.started() }, onCancel: { task.cancel() }) {
                prepared = .ready(built)
                building = task
                growing = body
            } else {
                prepared = await task.value
            }
        } else {
            do {
                prepared = try await io.run { [job] flag in self.prepareBody(job, spool: spool, isCancelled: { flag.isCancelled }) }
            } catch {
                prepared = .interrupted
            }
        }
        if let building, Task.isCancelled {
            building.cancel()
            prepared = await building.value
        }
        if case .localFailure = prepared {} else if let problem = problems.resolved(spool: job.spool, job: job.id.rawValue) {
            log.notice("uploads can be prepared again", metadata: [
                "problem": "\(problem.message)", "duration_ms": "\(Int(Date().timeIntervalSince(problem.since) * 1000))",
            ])
        }
        switch prepared {
        case .ready(let built):
            body = built
            if built.source == nil {
                log.debug("body built", metadata: [
                    "bytes": "\(built.contentLength)", "duration_ms": "\(Int(Date().timeIntervalSince(startedAt) * 1000))",
                ])
            }
        case .interrupted:
            try await stopped(job, spool: spool, startedAt: startedAt, bytesSent: 0, log: log)
            return
        case .changed(let identity):
            try await changed(job, to: identity, spool: spool, log: log)
            return
        case .gone(let reason):
            let failed = try await records.fail(job, now: Date(), error: reason)
            log.warning("cannot upload the file", metadata: ["reason": "\(reason)"])
            await disposer.dispose(failed, spool: spool.configuration, files: spool.files)
            return
        case .localFailure(let reason):
            // A local problem (the state directory is full, a read failed) says nothing about the
            // server: it does not use up an attempt. Wait 15–30 s and try again, until max_age.
            let deadline = job.ageStart.addingTimeInterval(spool.configuration.retry.maxAge.seconds)
            if Date() >= deadline {
                problems.resolved(spool: job.spool, job: job.id.rawValue)
                try await giveUpOn(job, spool: spool, reason: "gave up: not delivered within max_age: \(reason)", log: log)
                return
            }
            problems.report(spool: job.spool, job: job.id.rawValue, reason)
            let ceiling = min(spool.configuration.retry.maxDelay, .seconds(30)).seconds
            let next = min(Date().addingTimeInterval(Double.random(in: (ceiling / 2)...ceiling)), deadline)
            try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: 0, transition: .interrupted(at: next, reason: reason))
            log.warning("cannot prepare the upload; will try again", metadata: [
                "error": "\(reason)", "retry_in_ms": "\(Int(next.timeIntervalSinceNow * 1000))",
            ])
            return
        }
        defer { body.source?.descriptor.close() }

        // 2. Transport.
        let delivery: Delivery
        let confirmedBefore = job.upload?.offset ?? 0
        if spool.configuration.uploadProtocol == .tus, let source = body.source {
            (delivery, job.upload) = try await sendTus(job, from: source, spool: spool, log: log)
        } else {
            let request = UploadRequest(
                url: spool.url(for: job), method: spool.configuration.method, headers: spool.headers, bodyPath: body.path,
                contentLength: body.contentLength, contentType: body.contentType, idempotencyKey: job.id.rawValue,
                expectedSource: body.source?.status, growing: growing)
            activity.sending(job, total: body.contentLength)
            let sent = await withTaskCancellationHandler {
                await spool.uploader.send(request, logger: log, progress: { [activity, job] sent in activity.progressed(job, sent: sent) })
            } onCancel: { [building] in
                building?.cancel()
            }
            delivery = Delivery(sent)
        }
        if let building {
            // The build's outcome decides unless the server has answered 2xx (then it has the body,
            // or accepted what it got) or the attempt was stopped.
            if case .answered(let status, _, _, _, _) = delivery, (200..<300).contains(status) {
                _ = await building.value
            } else {
                building.cancel()
                let built = await building.value
                switch (built, delivery) {
                case (_, .cancelled), (.ready, _), (.interrupted, _):
                    break  // the transport's outcome stands
                case (.changed(let identity), _):
                    try await changed(job, to: identity, spool: spool, log: log)
                    return
                case (.gone(let reason), _):
                    forgetBody(of: job)
                    let failed = try await records.fail(job, now: Date(), error: reason)
                    log.warning("cannot upload the file", metadata: ["reason": "\(reason)"])
                    await disposer.dispose(failed, spool: spool.configuration, files: spool.files)
                    return
                case (.localFailure(let reason), _):
                    forgetBody(of: job)
                    problems.report(spool: job.spool, job: job.id.rawValue, reason)
                    let ceiling = min(spool.configuration.retry.maxDelay, .seconds(30)).seconds
                    let next = Date().addingTimeInterval(Double.random(in: (ceiling / 2)...ceiling))
                    try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: 0, transition: .interrupted(at: next, reason: reason))
                    log.warning("cannot prepare the upload; will try again", metadata: ["error": "\(reason)"])
                    return
                }
            }
        }

        // 3. Disposition.
        switch delivery {
        case .answered(let status, let headers, let responseBody, let bytesSent, let during):
            let contentType = headers.first { $0.name.lowercased() == "content-type" }?.value
            let retryAfter = headers.first { $0.name.lowercased() == "retry-after" }?.value
            let answered = "server answered \(status) \(Self.reason(status))" + (during.map { " while \($0)" } ?? "")
            switch RetryRules.verdict(status: status, retryAfter: retryAfter) {
            case .success:
                let done = try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: bytesSent,
                                                  transition: .succeeded(status: status, body: responseBody, contentType: contentType))
                attemptEnded(job, .delivered, startedAt: startedAt, bytesSent: bytesSent)
                log.info("uploaded", metadata: [
                    "status": "\(status)", "bytes": "\(job.identity.size)", "sent": "\(bytesSent)",
                    "duration_ms": "\(Int(Date().timeIntervalSince(startedAt) * 1000))", "attempt": "\(done.attempts)",
                ])
                forgetBody(of: job)
                if let result = await disposer.dispose(done, spool: spool.configuration, files: spool.files),
                   result.disposition == .left {
                    await requeue(job.spool, job.relativePath)
                }
            case .retry(let notBefore):
                if (job.upload?.offset ?? 0) > confirmedBefore { job.attemptBase = job.attempts }
                try await retryOrGiveUp(job, spool: spool, startedAt: startedAt, bytesSent: bytesSent,
                                        error: answered, status: status,
                                        body: responseBody, contentType: contentType, notBefore: notBefore, log: log)
            case .permanent:
                let hint = status == 413 && spool.configuration.uploadProtocol == .tus && spool.configuration.chunkSize == nil
                    ? " (if a proxy limits request bodies, set chunk_size)" : ""
                let failed = try await records.finish(job, startedAt: startedAt, now: Date(), bytesSent: bytesSent, transition: .failed(
                    error: answered + hint, status: status, body: responseBody, contentType: contentType))
                attemptEnded(job, .failed, startedAt: startedAt, bytesSent: bytesSent)
                log.error("upload rejected; not retrying", metadata: ["status": "\(status)"] .merging(during.map { ["during": "\($0)"] } ?? [:]) { $1 })
                forgetBody(of: job)
                await disposer.dispose(failed, spool: spool.configuration, files: spool.files)
            }
        case .noAnswer(let failure, _) where failure.kind == .sourceChanged:
            // Sent from the spool itself (put, tus), and the file changed under the request.
            let now = body.source.flatMap { try? $0.descriptor.status() }.map(FileIdentity.init)
            try await changed(job, to: now ?? job.identity, spool: spool, log: log)
        case .noAnswer(let failure, let bytesSent):
            if (job.upload?.offset ?? 0) > confirmedBefore { job.attemptBase = job.attempts }
            try await retryOrGiveUp(job, spool: spool, startedAt: startedAt, bytesSent: bytesSent, error: failure.message,
                                    status: nil, body: nil, contentType: nil, notBefore: nil, log: log)
        case .refused(let reason, let bytesSent):
            try await giveUpOn(job, spool: spool, reason: reason, log: log, attempt: (startedAt, bytesSent, nil, nil, nil))
        case .cancelled(let bytesSent):
            try await stopped(job, spool: spool, startedAt: startedAt, bytesSent: bytesSent, log: log)
            attemptEnded(job, .interrupted, startedAt: startedAt, bytesSent: bytesSent)
        }
    }

    /// What came of the transport step, whatever the protocol.
    enum Delivery: Sendable {
        /// The server answered (`during`: which step of a multi-request protocol, for messages).
        case answered(status: Int, headers: [(name: String, value: String)], body: [UInt8], bytesSent: Int64, during: String?)
        case noAnswer(TransportFailure, bytesSent: Int64)
        /// The file cannot be sent to this server at all.
        case refused(String, bytesSent: Int64)
        case cancelled(bytesSent: Int64)

        init(_ result: UploadResult) {
            switch result {
            case .response(let status, let headers, let body, let bytesSent):
                self = .answered(status: status, headers: headers, body: body, bytesSent: bytesSent, during: nil)
            case .failed(let failure, let bytesSent): self = .noAnswer(failure, bytesSent: bytesSent)
            case .cancelled(let bytesSent): self = .cancelled(bytesSent: bytesSent)
            }
        }
    }

    /// Sends the file with tus, from where the server's copy ends. Each new upload URL and offset is
    /// committed to the queue before the next request; returns the outcome and the upload as it
    /// stands at the end (to be written with the attempt).
    private func sendTus(
        _ job: Job, from source: SourceFile, spool: SpoolRuntime, log: Logger
    ) async throws -> (Delivery, ResumableUpload?) {
        // An upload made for another endpoint (the spool's URL changed since) is not continued.
        let endpointKey = SHA256.hash(data: Data(spool.url.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        let known = job.upload.flatMap { $0.endpointKey == endpointKey ? $0 : nil }
        let latest = Mutex(known)
        let filename = job.baseName
        let contentType = spool.configuration.fileContentType ?? MediaType.forFilename(filename)
        let fields = spool.configuration.fields
        let metadata: @Sendable () async throws -> [(key: String, value: String)] = { [io] in
            var pairs: [(key: String, value: String)] = [("filename", filename), ("filetype", contentType)]
            guard !fields.isEmpty else { return pairs }
            let needsDigest = fields.contains { $0.value.placeholders.contains(.sha256) }
            let digest = needsDigest ? try await io.run { flag in
                try BodyBuilder.sha256(of: source.descriptor.descriptor, length: source.status.size, path: job.displayPath,
                                       isCancelled: { flag.isCancelled })
            } : ""
            for field in fields {
                pairs.append((field.name, BodyBuilder.render(field.value, job: job, status: source.status, digest: { digest })))
            }
            return pairs
        }
        let transfer = TusTransfer(
            endpoint: spool.url, headers: spool.headers, metadata: metadata, path: source.procPath, source: source.status,
            chunkSize: spool.configuration.chunkSize,
            state: known.map { TusUploadState(url: $0.url, offset: $0.offset, expires: $0.expires) },
            idempotencyKey: job.id.rawValue)
        activity.sending(job, total: job.identity.size, confirmed: known?.offset)
        let outcome = try await spool.tus.send(transfer, logger: log, record: { [store, activity] state in
            let upload = state.map { ResumableUpload(url: $0.url, offset: $0.offset, expires: $0.expires, endpointKey: endpointKey) }
            try await store.recordUpload(job, upload, now: Date())
            latest.withLock { $0 = upload }
            activity.confirmed(job, upload?.offset ?? 0)
        }, progress: { [activity] position in activity.progressed(job, sent: position) })
        let upload = latest.withLock { $0 }
        switch outcome {
        case .completed(let status, let headers, let bytesSent):
            return (.answered(status: status, headers: headers, body: [], bytesSent: bytesSent, during: nil), upload)
        case .response(let status, let headers, let body, let bytesSent, let during):
            return (.answered(status: status, headers: headers, body: body, bytesSent: bytesSent, during: during), upload)
        case .failed(let failure, let bytesSent):
            return (.noAnswer(failure, bytesSent: bytesSent), upload)
        case .rejected(let reason, let bytesSent):
            return (.refused(reason, bytesSent: bytesSent), upload)
        case .cancelled(let bytesSent):
            return (.cancelled(bytesSent: bytesSent), upload)
        }
    }

    /// The file was written again since it was queued: the new content is a new upload, under a new
    /// job and so a new Idempotency-Key, once it has settled (or, if it kept changing for max_age, a failure).
    private func changed(_ job: Job, to identity: FileIdentity, spool: SpoolRuntime, log: Logger) async throws {
        let deadline = job.ageStart.addingTimeInterval(spool.configuration.retry.maxAge.seconds)
        if Date() >= deadline {
            try await giveUpOn(job, spool: spool, reason: "gave up: the file kept changing for max_age (\(DurationParser.format(spool.configuration.retry.maxAge)))", log: log)
            return
        }
        let successor = try await records.supersede(
            job, by: identity, now: Date(), notBefore: Date().addingTimeInterval(spool.configuration.settle.seconds),
            boundary: MultipartBoundary.random().value)
        log.info("the file changed before it was delivered; its new version is a new job", metadata: ["new_job": "\(successor.id)"])
        bodies.remove(for: job)
        await terminateUpload(of: job, spool: spool, log: log)
    }

    /// Asks a tus server to delete the job's unfinished upload (cancelled, or superseded by a new
    /// version of the file); best-effort.
    func terminateUpload(of job: Job, spool: SpoolRuntime, log: Logger) async {
        guard spool.configuration.uploadProtocol == .tus, let upload = job.upload, upload.offset < job.identity.size else { return }
        await spool.tus.terminate(upload.url, headers: spool.headers, logger: log)
    }

    /// Schedules the next attempt with backoff, or fails the job when it is out of attempts or too old.
    private func retryOrGiveUp(
        _ job: Job, spool: SpoolRuntime, startedAt: Date, bytesSent: Int64, error: String, status: Int?,
        body: [UInt8]?, contentType: String?, notBefore: Duration?, log: Logger
    ) async throws {
        let now = Date()
        let policy = spool.configuration.retry
        let attemptsMade = job.attemptsInRound + 1
        let deadline = job.ageStart.addingTimeInterval(policy.maxAge.seconds)
        var giveUp: String?
        if policy.maxAttempts > 0 && attemptsMade >= policy.maxAttempts {
            giveUp = "gave up after \(attemptsMade) attempts: \(error)"
        } else if now >= deadline {
            giveUp = "gave up: not delivered within max_age (\(DurationParser.format(policy.maxAge))): \(error)"
        }
        if let giveUp {
            try await giveUpOn(job, spool: spool, reason: giveUp, log: log, attempt: (startedAt, bytesSent, status, body, contentType))
            return
        }
        var delay = spool.backoff.delay(forRetry: job.attemptsInRound)
        if let notBefore {
            let asked = min(notBefore, Self.retryAfterLimit)
            if now.addingTimeInterval(asked.seconds) > deadline {
                // The server asks us to wait past the file's max_age: give up now rather than early.
                let reason = "gave up: the server asked to retry after \(DurationParser.format(asked)), past max_age: \(error)"
                try await giveUpOn(job, spool: spool, reason: reason, log: log, attempt: (startedAt, bytesSent, status, body, contentType))
                return
            }
            delay = max(delay, asked)
        }
        let next = min(now.addingTimeInterval(delay.seconds), deadline)
        // The body is rebuilt for the next attempt: retrying jobs keep no copy of their file.
        forgetBody(of: job)
        try await records.finish(job, startedAt: startedAt, now: now, bytesSent: bytesSent, transition: .retry(
            at: next, error: error, status: status, body: body, contentType: contentType))
        attemptEnded(job, .retry, startedAt: startedAt, bytesSent: bytesSent)
        log.warning("upload attempt failed; will retry", metadata: [
            "error": "\(error)", "attempt": "\(attemptsMade)", "retry_in_ms": "\(Int(next.timeIntervalSince(now) * 1000))",
        ])
    }

    /// Fails the job for good — recording the attempt that ended it, if there was one — and moves
    /// its file to the failed directory.
    private func giveUpOn(
        _ job: Job, spool: SpoolRuntime, reason: String, log: Logger,
        attempt: (startedAt: Date, bytesSent: Int64, status: Int?, body: [UInt8]?, contentType: String?)? = nil
    ) async throws {
        let failed: Job
        if let attempt {
            failed = try await records.finish(job, startedAt: attempt.startedAt, now: Date(), bytesSent: attempt.bytesSent, transition: .failed(
                error: reason, status: attempt.status, body: attempt.body, contentType: attempt.contentType))
            attemptEnded(job, .failed, startedAt: attempt.startedAt, bytesSent: attempt.bytesSent)
        } else {
            failed = try await records.fail(job, now: Date(), error: reason)
        }
        log.error("giving up on the file", metadata: ["reason": "\(reason)"])
        forgetBody(of: job)
        await disposer.dispose(failed, spool: spool.configuration, files: spool.files)
    }

    /// Counts an upload attempt (one that made or tried a request) once its outcome is on record.
    private func attemptEnded(_ job: Job, _ outcome: AttemptOutcome, startedAt: Date, bytesSent: Int64) {
        metrics.attemptEnded(spool: job.spool, outcome: outcome, bytesSent: bytesSent, duration: Date().timeIntervalSince(startedAt))
    }

    // MARK: Body

    enum PreparedBody: Sendable {
        case ready(BuiltBody)
        /// Shutdown cut the build short.
        case interrupted
        /// The file is now a different version than the job names.
        case changed(FileIdentity)
        /// The file cannot be uploaded at all (gone, a symlink, not a regular file, unreadable).
        case gone(String)
        /// Building the body failed for a local reason that may pass (e.g. the disk is full).
        case localFailure(String)
    }

    /// Opens the source and, for multipart, builds its body file, right before it is sent, so the
    /// body always matches the file as it is now. For put and tus the file is sent from its own bytes:
    /// the descriptor opened here (without following symlinks) stays open until the transfer ends.
    /// Blocking: runs on the ``BlockingIO`` pool.
    func prepareBody(_ job: Job, spool: SpoolRuntime, isCancelled: () -> Bool, growing: BodyStart? = nil) -> PreparedBody {
        let prepared = prepareBody0(job, spool: spool, isCancelled: isCancelled, growing: growing)
        if let growing {
            switch prepared {
            case .ready: growing.body?.finish()
            default: growing.body?.fail(BodyStart.Abandoned())
            }
            growing.fire(nil)  // if the build ended before the body file existed
        }
        return prepared
    }

    private func prepareBody0(_ job: Job, spool: SpoolRuntime, isCancelled: () -> Bool, growing: BodyStart?) -> PreparedBody {
        let source: (descriptor: FileDescriptorBox, status: FileStatus)
        do {
            let (descriptor, status) = try spool.files.open(job.relativePath)
            source = (FileDescriptorBox(descriptor), status)
        } catch {
            switch error {
            case .missing: return .gone("the file disappeared before it was uploaded")
            case .symlink: return .gone("the file was replaced by a symlink, which Ferry never follows")
            case .notRegularFile(let kind): return .gone("the file was replaced by a \(kind.rawValue) entry, not a regular file")
            case .permissionDenied: return .gone("ferryd may not read the file (permission denied)")
            case .other(let error): return .localFailure("cannot open the file: \(error)")
            }
        }
        guard source.status.matches(job.identity) else {
            source.descriptor.close()
            return .changed(FileIdentity(source.status))
        }
        if spool.configuration.uploadProtocol != .multipart {
            let file = SourceFile(descriptor: source.descriptor, status: source.status)
            let contentType = spool.configuration.fileContentType ?? MediaType.forFilename(job.baseName)
            return .ready(BuiltBody(path: file.procPath, contentLength: source.status.size, contentType: contentType,
                                    identity: job.identity, source: file))
        }
        defer { source.descriptor.close() }
        let built: BuiltBody
        do {
            built = try bodies.build(job: job, source: source.descriptor.descriptor, status: source.status,
                                     spool: spool.configuration, isCancelled: isCancelled, progress: { built, written in
                                         growing?.advance(built, to: written)
                                     })
        } catch {
            bodies.remove(for: job)
            switch error {
            case .cancelled:
                return .interrupted
            case .sourceChanged:
                return .changed(spool.files.status(job.relativePath).map(FileIdentity.init) ?? job.identity)
            default:
                return .localFailure("cannot build the request body: \(error)")
            }
        }
        // The copy is only good if the file did not change while it was being copied.
        if let after = try? source.descriptor.status(), !after.matches(job.identity) {
            bodies.remove(for: job)
            return .changed(FileIdentity(after))
        }
        return .ready(built)
    }

    private func forgetBody(of job: Job) {
        bodies.remove(for: job)
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 425: "Too Early"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 300..<400: "(redirect; Ferry does not follow redirects, configure the final URL)"
        default: ""
        }
    }
}

import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Owns an open source file for the length of one body build (or, for put and tus, one transfer).
struct FileDescriptorBox: Sendable {
    let descriptor: FileDescriptor
    init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }
    func close() { try? descriptor.close() }
    /// A path that opens this very file (through the descriptor, so no symlink is involved):
    /// for reading it with the transport's own file I/O.
    var procPath: String { "/proc/self/fd/\(descriptor.rawValue)" }
    func status() throws -> FileStatus {
        var st = stat()
        guard fstat(descriptor.rawValue, &st) == 0 else { throw SystemError.current("stat", "(source)") }
        return FileStatus(st)
    }
}

/// A spool file sent from its own bytes (put, tus): the descriptor ferryd opened without following
/// symlinks, and the version it was when checked against the job.
struct SourceFile: Sendable {
    let descriptor: FileDescriptorBox
    let status: FileStatus
    var procPath: String { descriptor.procPath }
}

/// Where a multipart build and its sender meet: the build announces the body file once it exists
/// (``started()`` returns it with a ``GrowingBody`` to follow), then advances it; `nil` if the build
/// ended first (a failure, or nothing to send).
final class BodyStart: Sendable {
    /// Why a growing body was abandoned (the pipeline learns the reason from the build's result).
    struct Abandoned: Error {}

    private let state = Mutex<(started: (BuiltBody, GrowingBody)??, waiter: CheckedContinuation<(BuiltBody, GrowingBody)?, Never>?)>((nil, nil))

    /// The growing body, once started.
    var body: GrowingBody? { state.withLock { $0.started??.1 } }

    /// The build wrote `count` bytes of `built` (the first call starts the body).
    func advance(_ built: BuiltBody, to count: Int64) {
        let body = state.withLock { state -> GrowingBody? in
            if case .some(.some(let started)) = state.started { return started.1 }
            if case .some(.none) = state.started { return nil }
            let body = GrowingBody(length: built.contentLength)
            state.started = .some((built, body))
            return body
        }
        body?.advance(to: count)
        if let waiter = state.withLock({ state -> CheckedContinuation<(BuiltBody, GrowingBody)?, Never>? in
            defer { state.waiter = nil }
            return state.waiter
        }), case .some(.some(let started)) = state.withLock({ $0.started }) {
            waiter.resume(returning: started)
        }
    }

    /// Ends the wait with `value` if the body has not started.
    func fire(_ value: (BuiltBody, GrowingBody)?) {
        let waiter = state.withLock { state -> CheckedContinuation<(BuiltBody, GrowingBody)?, Never>? in
            if state.started == nil { state.started = .some(value) }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: state.withLock { $0.started ?? nil })
    }

    /// The body file and its growing view, or `nil` if the build ended before it existed.
    func started() async -> (BuiltBody, GrowingBody)? {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> (BuiltBody, GrowingBody)??? in
                if let started = state.started { return .some(started) }
                state.waiter = continuation
                return nil
            }
            if let now { continuation.resume(returning: now ?? nil) }
        }
    }
}
