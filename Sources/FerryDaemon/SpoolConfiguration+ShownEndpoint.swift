import FerryConfig
import FerryQueue

extension SpoolConfiguration {
    /// Where `job` goes, as `show` and the result file give it (secrets as `***`, no query or
    /// credentials); for s3 also the bucket and the key. The file's names, size, time and id are
    /// filled in, and `{sha256}` when `sha256` is known; a template holding a secret is shown as
    /// configured, and so is one whose `{sha256}` is not known (it would mean reading the file).
    func shownEndpoint(for job: Job, sha256: String? = nil) -> String {
        let placeholders = Placeholders(job: job, size: job.identity.size, modificationTime: job.identity.modificationTime, sha256: sha256 ?? "")
        func filled(_ template: ValueTemplate, _ use: Placeholders.Use) -> ValueTemplate {
            guard !template.placeholders.isEmpty, !template.containsSecret,
                  sha256 != nil || !template.placeholders.contains(.sha256) else { return template }
            return .literal(placeholders.render(template, for: use))
        }
        let shown = filled(url, .url).redactedURL
        guard let s3 else { return shown }
        return "\(shown) bucket \(s3.bucket), key \(filled(s3.key, .text).redacted)"
    }
}
