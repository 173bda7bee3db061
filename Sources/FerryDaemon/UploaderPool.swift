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

/// One uploader (connection pool) per distinct transport setting, shared by the spools that use it;
/// each spool sends through it under its own bandwidth limit and the daemon's.
final class UploaderPool: Sendable {
    private let uploaders = Mutex<[TransportSettings: Uploader]>([:])
    /// The daemon's `bandwidth_limit`, shared by every upload (kept across reloads).
    let global = BandwidthBucket(rate: nil)
    /// Each spool's own bucket, by name, kept across reloads: uploads in flight during a reload
    /// draw from the bucket the new configuration's schedule and `ferryctl limit` set (a new one
    /// per reload let them run unlimited, and the spool at twice its limit).
    private let spoolBuckets = Mutex<[String: BandwidthBucket]>([:])

    /// The spools' run-time parts, creating the uploaders they need.
    func runtimes(for configuration: FerryConfiguration, parts: SenderParts) throws(DaemonError) -> [String: SpoolRuntime] {
        global.setRate(BandwidthPolicy.limit(configuration.bandwidthLimit, configuration.bandwidthSchedule, at: BandwidthPolicy.now()).rate)
        var spools: [String: SpoolRuntime] = [:]
        for spool in configuration.spools {
            let settings = TransportSettings(caFile: spool.caFile, connectTimeout: spool.connectTimeout, noProgressTimeout: spool.noProgressTimeout)
            let uploader: Uploader
            do {
                uploader = try uploaders.withLock { uploaders in
                    if let existing = uploaders[settings] { return existing }
                    let created = try Uploader(settings: settings)
                    uploaders[settings] = created
                    return created
                }
            } catch {
                throw .other("spool \(spool.name): cannot set up TLS: \(error)")
            }
            let rate = BandwidthPolicy.limit(spool.bandwidthLimit, spool.bandwidthSchedule, at: BandwidthPolicy.now()).rate
            let bucket = spoolBuckets.withLock { buckets in
                // A kept bucket's rate is set by BandwidthPolicy once the reload is in place (with
                // any `ferryctl limit` override): a reload rejected later must not change it.
                if let kept = buckets[spool.name] { return kept }
                let created = BandwidthBucket(rate: rate)
                buckets[spool.name] = created
                return created
            }
            let throttle = Throttle(buckets: [bucket, global])
            spools[spool.name] = SpoolRuntime(configuration: spool, uploader: uploader.limited(by: throttle), bandwidth: bucket, parts: parts)
        }
        return spools
    }

    func shutdown() async {
        for uploader in uploaders.withLock({ Array($0.values) }) { try? await uploader.shutdown() }
    }
}
