import FerryConfig
import FerryControl
import FerryMultipart
import FerryQueue
import FerrySpool
import FerrySystem
import FerryTransport
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Hands files found by the watchers to the queue, and wakes the scheduler when any is new.
final class Intake: Sendable {
    let store: JobStore
    let logger: Logger
    /// Where a spool whose files cannot be queued says so (for `status`).
    let problems: LocalProblems
    private let queuedHook = Mutex<(@Sendable () -> Void)?>(nil)

    init(store: JobStore, logger: Logger, problems: LocalProblems = LocalProblems()) {
        self.store = store
        self.logger = logger
        self.problems = problems
    }

    var onQueued: (@Sendable () -> Void)? {
        get { queuedHook.withLock { $0 } }
        set { queuedHook.withLock { $0 = newValue } }
    }

    /// Queues `files` (due at once, or at `notBefore`); returns whether the queue took them (false:
    /// they stay in the spool, unqueued).
    @discardableResult
    func submit(spool: String, files: [SpoolFile], notBefore: Date? = nil) async -> Bool {
        let discovered = files.map {
            JobStore.DiscoveredFile(
                spool: spool, relativePath: $0.relativePath, identity: $0.status.version, bundleFiles: $0.bundle?.bundleFiles,
                observedAt: $0.observedAt)
        }
        do {
            let jobs = try await store.enqueue(discovered, now: Date(), notBefore: notBefore, makeBoundary: { MultipartBoundary.random().value })
            for job in jobs {
                logger.info("queued", metadata: ["job": "\(job.id)", "spool": "\(spool)", "file": "\(job.displayPath)", "bytes": "\(job.identity.size)"])
            }
            if !jobs.isEmpty { onQueued?() }
            problems.resolvedIntake(spool: spool)
            return true
        } catch {
            logger.error("cannot queue files; they stay in the spool and are looked for again in a few seconds",
                         metadata: ["spool": "\(spool)", "files": "\(files.count)", "error": "\(error)"])
            problems.reportIntake(spool: spool, "cannot queue files: \(error)")
            return false
        }
    }
}

extension BundleListing {
    /// The files a bundle job records (the parts it sends, in order).
    var bundleFiles: [BundleFile] { files.map { BundleFile(name: $0.name, size: $0.status.size) } }
}
