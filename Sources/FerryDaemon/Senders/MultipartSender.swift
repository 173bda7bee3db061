import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySystem
import FerryTransport
import Logging

/// `protocol = "multipart"`: an RFC 7578 form (the configured fields, then the file) built as a
/// snapshot in `state_directory/bodies` and sent while it is being built. The sender never passes
/// the builder, and the last bytes wait until the copy is known to match the file, so a large file
/// costs about the longer of copying and sending, and a server never gets a body made from a
/// changing file.
struct MultipartSender: Sender {
    let configuration: SpoolConfiguration
    let endpoint: Endpoint
    let uploader: Uploader
    let bodies: BodyBuilder
    let io: BlockingIO

    /// What rendering a small body in memory gave.
    enum Rendered: Sendable {
        case body([UInt8], contentType: String, digests: SentDigests?)
        /// The body cannot be sent: why, as a report (stopped, the file changed, local trouble).
        case unusable(AttemptReport)
    }

    /// How a build ended.
    enum BuildOutcome: Sendable {
        case built(BuiltBody)
        /// The build did not finish: why, as a report (stopped, the file changed, local trouble).
        case stopped(AttemptReport)
    }

    /// Bodies of files up to this size are built in memory and sent from there: a body file would
    /// cost more system calls (create, reserve, copy, open, send, unlink) than the bytes are worth.
    static let inMemoryLimit = UploadRequest.inMemoryLimit

    var prefetchLimit: Int64 { Self.inMemoryLimit }

    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        let (fields, refusal) = Self.fields(
            configuration.fields, sidecar: source.fieldSidecar, named: FieldSidecar.name(for: job.baseNameBytes), fileField: configuration.fileField)
        if let refusal { return SendResult(report: refusal, requested: false) }
        if source.status.size <= Self.inMemoryLimit {
            return await sendFromMemory(job, from: source, fields: fields, tracker: tracker, logger: logger)
        }
        return await sendBuilding(job, tracker: tracker, logger: logger) { isCancelled, start in
            self.build(job, from: source, fields: fields, isCancelled: isCancelled, start: start)
        }
    }

    /// The request's fields: the spool's, merged with those of the file's (or bundle's) sidecar.
    /// A sidecar (called `name`) that cannot be used gives a refusal instead: the file is never sent
    /// with other fields than its producer gave.
    static func fields(
        _ spool: [NamedValue], sidecar: [UInt8]?, named name: [UInt8], fileField: String
    ) -> (fields: [NamedValue], refusal: AttemptReport?) {
        guard let sidecar else { return (spool, nil) }
        do {
            return (FieldSidecar.merged(spool: spool, file: try FieldSidecar.parse(sidecar, fileField: fileField)), nil)
        } catch {
            return ([], .refused("its field sidecar \(displayName(name)) is malformed: \(error)"))
        }
    }

    /// Sends a body file while `build` writes it (on the ``BlockingIO`` pool).
    func sendBuilding(
        _ job: Job, tracker: UploadTracker, logger: Logger,
        build: @escaping @Sendable (_ isCancelled: @escaping () -> Bool, BodyStart) -> BuildOutcome
    ) async -> SendResult {
        let start = BodyStart()
        let building = Task { [io] in
            do {
                return try await io.run { flag in build({ flag.isCancelled }, start) }
            } catch {
                start.fire(nil)
                return BuildOutcome.stopped(.stopped)
            }
        }
        let started = await withTaskCancellationHandler { await start.started() } onCancel: { building.cancel() }
        let body: BuiltBody
        let growing: GrowingBody?
        if let (built, following) = started {
            (body, growing) = (built, following)
        } else {
            // The build ended before the body file existed.
            switch await building.value {
            case .built(let built): (body, growing) = (built, nil)
            case .stopped(let report): return SendResult(report: report, requested: false)
            }
        }
        if Task.isCancelled {
            building.cancel()
            _ = await building.value
            return SendResult(report: .stopped, requested: false)
        }
        let request = UploadRequest(
            url: endpoint.url, method: configuration.method, headers: endpoint.headers + (body.digests?.headers ?? []), bodyPath: body.path,
            contentLength: body.contentLength, contentType: body.contentType, idempotencyKey: job.id.rawValue, growing: growing)
        tracker.sending(total: body.contentLength)
        let sent = await withTaskCancellationHandler {
            await uploader.send(request, logger: logger, progress: { tracker.sent($0) })
        } onCancel: {
            building.cancel()
        }
        var result = SendResult(sent, source: nil, bodyLength: body.contentLength)
        result.digests = body.digests
        // The build's outcome decides unless the server has answered 2xx (then it has the body, or
        // accepted what it got) or the attempt was stopped.
        if case .answered(let answer) = result.report, answer.isSuccess {
            _ = await building.value
            return result
        }
        building.cancel()
        switch (await building.value, result.report) {
        case (_, .stopped), (.built, _), (.stopped(.stopped), _):
            return result  // the transport's outcome stands
        case (.stopped(let report), _):
            // The file changed, or local trouble: that, not the cut request, is the attempt's story.
            result = SendResult(report: report, requested: false)
            return result
        }
    }

    /// A small file: the whole body is built in memory from the file read when it was opened (or,
    /// if it was not, read in one blocking call), checked against the version queued (the bytes
    /// sent are the bytes read), and sent from there.
    private func sendFromMemory(_ job: Job, from source: SourceFile, fields: [NamedValue], tracker: UploadTracker, logger: Logger) async -> SendResult {
        let built: Rendered
        if source.prefetched != nil {
            // Read when it was opened: the form is built here, with no blocking call.
            built = Self.render(job, from: source, spool: configuration, fields: fields, isCancelled: { Task.isCancelled })
        } else {
            do {
                built = try await io.run { flag in
                    Self.render(job, from: source, spool: configuration, fields: fields, isCancelled: { flag.isCancelled })
                }
            } catch {
                return SendResult(report: .stopped, requested: false)
            }
        }
        switch built {
        case .unusable(let report):
            return SendResult(report: report, requested: false)
        case .body(let body, let contentType, let digests):
            if Task.isCancelled { return SendResult(report: .stopped, requested: false) }
            var request = UploadRequest(url: endpoint.url, method: configuration.method, headers: endpoint.headers + (digests?.headers ?? []), bodyPath: nil,
                                        contentLength: Int64(body.count), contentType: contentType, idempotencyKey: job.id.rawValue)
            request.bytes = body
            tracker.sending(total: Int64(body.count))
            let sent = await uploader.send(request, logger: logger, progress: { tracker.sent($0) })
            var result = SendResult(sent, source: source, bodyLength: Int64(body.count))
            result.digests = digests
            return result
        }
    }

    /// Renders the body in memory from the open source and checks the source is still the version
    /// queued. Blocking: runs on the ``BlockingIO`` pool.
    static func render(
        _ job: Job, from source: SourceFile, spool: SpoolConfiguration, fields: [NamedValue]? = nil, isCancelled: @escaping () -> Bool
    ) -> Rendered {
        do {
            let form = try BodyBuilder.body(job: job, source: source, spool: spool, fields: fields, isCancelled: isCancelled)
            if let prefetched = source.prefetched {
                // Checked against the queued version after it was read.
                let body = try form.bytes(path: job.displayPath, fileContents: prefetched)
                return .body(body, contentType: form.contentType, digests: Self.digests(spool, file: prefetched, body: body))
            }
            let body = try form.bytes(path: job.displayPath)
            if let changed = Self.changedSince(job, source) { return .unusable(changed) }
            var digests: SentDigests?
            if spool.digest != nil, case .bytes(let before)? = form.pieces.first {
                // The file part follows the bytes of the first piece.
                let file = Array(body[before.count..<(before.count + Int(source.status.size))])
                digests = Self.digests(spool, file: file, body: body)
            }
            return .body(body, contentType: form.contentType, digests: digests)
        } catch {
            return .unusable(Self.report(for: error, source: source))
        }
    }

    /// The digests of a form in memory, if the spool sends them.
    private static func digests(_ spool: SpoolConfiguration, file: [UInt8], body: [UInt8]) -> SentDigests? {
        spool.digest.map { DigestReader.form(file: file, body: body, algorithm: $0) }
    }

    /// A copy is only good if the file did not change while it was read: the report if it did.
    private static func changedSince(_ job: Job, _ source: SourceFile) -> AttemptReport? {
        guard let now = try? source.currentStatus(), now.version != job.identity else { return nil }
        return .sourceChanged(now.version)
    }

    /// What a failed body build or render says about the attempt.
    private static func report(for error: MultipartError, source: SourceFile) -> AttemptReport {
        switch error {
        case .cancelled: .stopped
        case .sourceChanged: .sourceChanged(source.currentVersion)
        default: .localFailure("cannot build the request body: \(error)")
        }
    }

    /// Builds the body from the open source. Blocking: runs on the ``BlockingIO`` pool.
    private func build(_ job: Job, from source: SourceFile, fields: [NamedValue], isCancelled: @escaping () -> Bool, start: BodyStart) -> BuildOutcome {
        finishBuild(job, start: start, changed: { Self.changedSince(job, source) }, failure: { Self.report(for: $0, source: source) }) { () throws(MultipartError) in
            try bodies.build(job: job, source: source, spool: configuration, fields: fields, isCancelled: isCancelled,
                             progress: { built, written in start.advance(built, to: written) })
        }
    }

    /// Runs a build; the body is released to the sender only if `changed` finds the source unchanged
    /// once it is written (else the sender's request is cut short and never completes).
    func finishBuild(
        _ job: Job, start: BodyStart, changed: () -> AttemptReport?, failure: (MultipartError) -> AttemptReport,
        build: () throws(MultipartError) -> BuiltBody
    ) -> BuildOutcome {
        let outcome: BuildOutcome
        do {
            let built = try build()
            if let changed = changed() {
                bodies.remove(for: job)
                outcome = .stopped(changed)
            } else {
                outcome = .built(built)
            }
        } catch {
            bodies.remove(for: job)
            outcome = .stopped(failure(error))
        }
        if case .built = outcome { start.body?.finish() } else { start.body?.fail(BodyStart.Abandoned()) }
        start.fire(nil)  // if the build ended before the body file existed
        return outcome
    }
}
