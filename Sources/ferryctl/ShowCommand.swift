import ArgumentParser
import FerryControl
import Foundation

/// `ferryctl show ID`: everything about one job.
struct Show: DaemonCommand {
    static let configuration = CommandConfiguration(abstract: "Show one job: its file, state, server response and attempts.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The job id, or an unambiguous prefix of it.", valueName: "id"), completion: DaemonCompletions.jobIDs())
    var id: String

    func execute(_ daemon: Daemon) async throws {
        let (raw, detail) = try await daemon.request(.show, ShowArguments(id: id), as: JobDetail.self)
        if daemon.json { try daemon.printJSON(raw) } else { Terminal.out(JobDetailView.render(detail)) }
    }
}

/// The human rendering of a ``JobDetail``.
enum JobDetailView {
    /// How many lines of a response body are shown.
    static let bodyLines = 20

    static func render(_ detail: JobDetail, now: Date = Date()) -> String {
        let job = detail.job
        var block = KeyValueBlock()
        block.append("id", job.id)
        block.append("spool", job.spool)
        block.append(job.bundle == nil ? "file" : "bundle", job.bundle == nil ? job.file : job.file + "/")
        block.append("size", "\(Format.bytes(job.size)) (\(job.size) bytes)\(job.bundle.map { " in \($0.files.count) file\($0.files.count == 1 ? "" : "s")" } ?? "")")
        for (index, file) in (job.bundle?.files ?? []).enumerated() {
            block.append("file \(index + 1)", "\(file.name) (\(Format.bytes(file.size)))")
        }
        block.append("state", job.state.rawValue)
        block.append("location", detail.path.map { "\(detail.location) (\($0))" } ?? detail.location.rawValue)
        block.append("disposition", detail.disposition?.rawValue)
        block.append("url", detail.url)
        block.append("created", Format.timeWithRelative(job.createdAt, now: now))
        block.append("held", detail.heldAt.map { Format.timeWithRelative($0, now: now) })
        block.append("next attempt", job.nextAttemptAt.map { "\(Format.relative($0, now: now)) (at \(Format.dateTime($0)))" })
        block.append("finished", job.finishedAt.map { Format.timeWithRelative($0, now: now) })
        block.append("attempts", String(job.attempts))
        block.append("confirmed", job.confirmedBytes.map {
            "\(Format.bytes($0)) of \(Format.bytes(job.size)) (\(Format.percent($0, of: job.size))) held by the server"
                + (job.state == .done ? "" : "; a retry resumes from there")
        })
        if let confirmed = detail.partsConfirmed, let total = detail.partsTotal {
            block.append("parts", "\(confirmed) of \(total) confirmed by the server (multipart upload); a retry sends only the others")
        }
        block.append("last error", job.lastError)
        if let response = detail.response {
            block.append("response", response.contentType.map { "\(response.status) (\($0))" } ?? String(response.status))
        } else {
            block.append("response", job.responseStatus.map(String.init))
        }
        for (name, value) in (detail.response?.headers ?? [:]).sorted(by: { $0.key < $1.key }) {
            block.append("  " + name, Format.printable(value))
        }
        block.append("digest", detail.digest)
        if let progress = detail.progress {
            block.append("progress", UploadLine.render(progress, interactive: Terminal.isInteractive))
        }
        var output = block.render()
        if let response = detail.response, let body = bodyExcerpt(response) {
            output += "response body:\n" + body
        }
        output += "\n" + attempts(detail.attempts, now: now)
        if let hooks = detail.hooks { output += "\n" + Self.hooks(hooks, now: now) }
        return output
    }

    /// What ran after the outcome: one line per hook, then the last lines of a failed one's output.
    static func hooks(_ hooks: [HookInfo], now: Date) -> String {
        var table = TextTable([
            .init("hook"), .init("state"), .init("runs", rightAligned: true), .init("exit", rightAligned: true), .init("next"), .init("error"),
        ])
        for hook in hooks {
            table.append([
                hook.kind == "result" ? "result file" : "on_\(hook.kind)", hook.state, String(hook.attempts),
                hook.exitStatus.map(String.init) ?? "", hook.nextAt.map { Format.relative($0, now: now) } ?? "",
                hook.error.map { Format.shortened($0, to: 60) } ?? "",
            ])
        }
        var output = table.render()
        for hook in hooks where hook.state != "succeeded" {
            guard let text = hook.output, !text.isEmpty else { continue }
            output += "on_\(hook.kind) output (last lines):\n"
            output += text.split(separator: "\n", omittingEmptySubsequences: false).suffix(10)
                .map { "    " + Format.printable(String($0)) + "\n" }.joined()
        }
        return output
    }

    /// The response body's first lines, indented, or a note on why it is not shown.
    static func bodyExcerpt(_ response: ResponseInfo) -> String? {
        if response.bodyHidden == true { return "    (hidden: not permitted)\n" }
        if let base64 = response.bodyBase64 {
            let size = Data(base64Encoded: base64)?.count ?? base64.count * 3 / 4
            return "    (binary, \(size) bytes)\n"
        }
        guard let body = response.body else { return nil }
        if body.isEmpty { return "    (empty)\n" }
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false)
        var output = lines.prefix(bodyLines).map { "    " + Format.printable($0.replacingOccurrences(of: "\r", with: "")) + "\n" }.joined()
        if lines.count > bodyLines { output += "    … (\(Format.count(lines.count - bodyLines, "more line")))\n" }
        return output
    }

    static func attempts(_ attempts: [AttemptInfo], now: Date) -> String {
        guard !attempts.isEmpty else { return "no attempts yet\n" }
        var table = TextTable([
            .init("#", rightAligned: true), .init("started"), .init("duration", rightAligned: true), .init("outcome"),
            .init("status", rightAligned: true), .init("bytes", rightAligned: true), .init("error"),
        ])
        for attempt in attempts {
            table.append([
                String(attempt.number), Format.timeWithRelative(attempt.startedAt, now: now),
                Format.preciseDuration(attempt.durationSeconds), attempt.outcome.rawValue, attempt.status.map(String.init) ?? "",
                Format.bytes(attempt.bytesSent), attempt.error.map { Format.shortened($0, to: 80) } ?? "",
            ])
        }
        return table.render()
    }
}

/// One upload in flight as a single line: "12.0 MiB / 100.0 MiB (12%) at 3.4 MB/s [##....]".
enum UploadLine {
    static func render(_ progress: UploadProgress, interactive: Bool) -> String {
        var text = "\(Format.bytes(progress.bytesSent)) / \(Format.bytes(progress.bytesTotal))"
            + " (\(Format.percent(progress.bytesSent, of: progress.bytesTotal))) at \(Format.rate(progress.bytesPerSecond))"
            + ", \(progress.phase), attempt \(progress.attempt)"
            + (progress.confirmedBytes.map { ", \(Format.bytes($0)) confirmed by the server" } ?? "")
            + (progress.partsConfirmed.flatMap { confirmed in progress.partsTotal.map { ", parts \(confirmed)/\($0)" } } ?? "")
        if interactive { text += " " + Format.progressBar(progress.bytesSent, of: progress.bytesTotal) }
        return text
    }
}
