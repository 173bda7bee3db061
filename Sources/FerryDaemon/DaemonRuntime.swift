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

/// The live configuration, held in one place: the configuration in force and the spools' run-time
/// parts built from it, replaced together by a reload; and the watchers. A job already being
/// processed keeps the spool runtime it started with.
final class DaemonRuntime: Sendable {
    private struct State {
        var configuration: FerryConfiguration
        var spools: [String: SpoolRuntime]
        var watchers: [String: SpoolWatcher] = [:]
        var reloader: (@Sendable (String) async throws -> ReloadResult)?
        var reloading = false
        /// A SIGHUP came during a reload: one more follows it (the file may have changed since
        /// that reload read it).
        var reloadAgain = false
    }
    private let state: Mutex<State>

    init(configuration: FerryConfiguration, spools: [String: SpoolRuntime]) {
        state = Mutex(State(configuration: configuration, spools: spools))
    }

    /// The configuration in force.
    var configuration: FerryConfiguration { state.withLock { $0.configuration } }

    /// The run-time parts of the spool called `name`, if it is configured.
    func spool(named name: String) -> SpoolRuntime? { state.withLock { $0.spools[name] } }

    /// Puts a new configuration and its spools in force, together.
    func apply(_ configuration: FerryConfiguration, spools: [String: SpoolRuntime]) {
        state.withLock {
            $0.configuration = configuration
            $0.spools = spools
        }
    }

    func watcher(named name: String) -> SpoolWatcher? { state.withLock { $0.watchers[name] } }

    func setWatcher(_ watcher: SpoolWatcher, for name: String) { state.withLock { $0.watchers[name] = watcher } }

    func removeWatcher(for name: String) -> SpoolWatcher? { state.withLock { $0.watchers.removeValue(forKey: name) } }

    func setReloader(_ reloader: @escaping @Sendable (String) async throws -> ReloadResult) {
        state.withLock { $0.reloader = reloader }
    }

    /// Re-reads the configuration (one reload at a time).
    /// With `againIfBusy` (SIGHUP), a reload asked for while one runs is made once that one ends
    /// (and `nil` returned); else it is refused (`conflict`: `ferryctl reload` says so).
    @discardableResult
    func reload(reason: String, againIfBusy: Bool = false) async throws -> ReloadResult? {
        let reloader = try state.withLock { state -> (@Sendable (String) async throws -> ReloadResult)? in
            guard let reloader = state.reloader else { throw ControlError(.unavailable, "ferryd is still starting; try again") }
            if state.reloading {
                guard againIfBusy else { throw ControlError(.conflict, "a reload is already in progress") }
                state.reloadAgain = true
                return nil
            }
            state.reloading = true
            return reloader
        }
        guard let reloader else { return nil }
        // The caller is told of its own reload; the ones a SIGHUP asked for meanwhile follow it.
        var why = reason
        var first: Result<ReloadResult, any Error>?
        repeat {
            let outcome: Result<ReloadResult, any Error>
            do { outcome = .success(try await reloader(why)) } catch { outcome = .failure(error) }
            if first == nil { first = outcome }
            why = "SIGHUP during a reload"
        } while state.withLock { state in
            // Checked and cleared with the end of the reload, so that no SIGHUP falls between.
            defer { state.reloadAgain = false }
            if !state.reloadAgain { state.reloading = false }
            return state.reloadAgain
        }
        return try first?.get()
    }
}
