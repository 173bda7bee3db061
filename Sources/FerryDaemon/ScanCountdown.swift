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

/// Counts down the watchers' first scans.
final class ScanCountdown: Sendable {
    private let remaining: Mutex<Int>
    private let doorbell = Doorbell()

    init(count: Int) { remaining = Mutex(count) }

    func done() {
        if remaining.withLock({ $0 -= 1; return $0 }) <= 0 { doorbell.ring() }
    }

    func wait() async {
        while remaining.withLock({ $0 }) > 0 { await doorbell.wait(until: nil) }
    }
}
