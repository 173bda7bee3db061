import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import Logging

/// Bundles: every file of a directory in one form, as a browser sends `<input type=file multiple>`.
extension MultipartSender {
    /// Sends the bundle as one request whose body file is built from its open files and sent while
    /// it is written. Once written, the bundle is looked at again: if any file was written, added,
    /// removed or renamed meanwhile, the last bytes are withheld (the server never gets a complete
    /// request) and the attempt reports the change, which supersedes the whole bundle.
    func send(_ job: Job, bundle: BundleSource, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        let (fields, refusal) = Self.fields(
            configuration.fields, sidecar: bundle.fieldSidecar, named: BundleListing.sidecarName, fileField: configuration.bundleFileField)
        if let refusal { return SendResult(report: refusal, requested: false) }
        if bundle.fieldSidecar != nil, Placeholders.needsDigest(fields.map(\.value)) {
            let name = displayName(BundleListing.sidecarName)
            return SendResult(report: .refused("its field sidecar \(name) uses {sha256}, but a bundle has no single SHA-256"), requested: false)
        }
        return await sendBuilding(job, tracker: tracker, logger: logger) { isCancelled, start in
            self.finishBuild(job, start: start, changed: { bundle.change(from: job) }, failure: { Self.report(for: $0, bundle: bundle, job: job) }) { () throws(MultipartError) in
                try bodies.build(job: job, bundle: bundle, spool: configuration, fields: fields, isCancelled: isCancelled,
                                 progress: { built, written in start.advance(built, to: written) })
            }
        }
    }

    /// What a failed bundle build says about the attempt.
    private static func report(for error: MultipartError, bundle: BundleSource, job: Job) -> AttemptReport {
        switch error {
        case .cancelled: .stopped
        case .sourceChanged: bundle.change(from: job) ?? .sourceChanged(nil)
        default: .localFailure("cannot build the request body: \(error)")
        }
    }
}
