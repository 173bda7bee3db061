import Foundation
import Logging

/// Reading the top-level table, and the checks that concern the configuration as a whole.
extension FerryConfiguration {
    /// Uploads in flight at once when `max_concurrent_uploads` is not set. Measured on 2 cores with
    /// 5,000 × 16 KiB files (docs/PERFORMANCE.md): 4 slots 845 files/s, 8 slots about 1,000, 16
    /// about 1,300. Eight keeps most of that gain while a burst of large files snapshots at most 8
    /// bodies at once in the state directory.
    public static let defaultMaxConcurrentUploads = 8

    /// The top-level keys.
    static let keys: Set<String> = [
        "state_directory", "control_socket", "max_concurrent_uploads", "log_level", "shutdown_timeout",
        "rescan_interval", "spool", "control_group", "control_read_only_for_others", "control_idle_timeout",
        "metrics_listen", "max_concurrent_hooks", "bandwidth_limit", "bandwidth_schedule", "job_retention",
    ]

    /// Reads the top-level table and every spool; problems are reported to the reader's context
    /// (the value is meaningful only if there are none).
    init(reading reader: TableReader) {
        let context = reader.context
        reader.rejectUnknownKeys(Self.keys)
        let stateDirectory = reader.path("state_directory") ?? "/var/lib/ferry"
        let controlSocket = Self.controlSocket(reader)
        let maxConcurrent = reader.int("max_concurrent_uploads", in: 1...256) ?? Self.defaultMaxConcurrentUploads
        var logLevel = Logger.Level.info
        if let text = reader.string("log_level") {
            if let level = Logger.Level(rawValue: text.lowercased()) {
                logLevel = level
            } else {
                let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                context.report(KeyPath().appending("log_level"), "unknown log level \"\(text)\"; use one of \(levels)")
            }
        }
        let shutdownTimeout = reader.duration("shutdown_timeout", minimum: .zero) ?? .seconds(30)
        let rescanInterval = reader.duration("rescan_interval", minimum: .seconds(1)) ?? .seconds(300)
        let control = ControlAccess(reading: reader)
        var metricsListen: ListenAddress?
        if let text = reader.string("metrics_listen") {
            switch ListenAddress.parse(text) {
            case .success(let address): metricsListen = address
            case .failure(let error): context.report(KeyPath().appending("metrics_listen"), error.message)
            }
        }

        var spools: [SpoolConfiguration] = []
        if let tables = reader.arrayOfTables("spool") {
            for (index, table) in tables.enumerated() {
                if let spool = SpoolConfiguration(reading: TableReader(table: table, path: KeyPath().appending("spool").appending(index: index), context: context)) {
                    spools.append(spool)
                }
            }
        }
        if spools.isEmpty && context.issues.isEmpty {
            context.report(KeyPath(), "no [[spool]] is configured; add at least one (see etc/ferry/ferry.toml for an example)")
        }
        Self.checkSpoolsAreDistinct(spools, context: context)
        Self.checkResultDirectories(spools, context: context)
        Self.checkStateDirectory(stateDirectory, spools: spools, context: context)
        self.init(
            path: context.file, stateDirectory: stateDirectory, controlSocket: controlSocket,
            maxConcurrentUploads: maxConcurrent, logLevel: logLevel, shutdownTimeout: shutdownTimeout,
            rescanInterval: rescanInterval, spools: spools, control: control, metricsListen: metricsListen)
        maxConcurrentHooks = reader.int("max_concurrent_hooks", in: 1...64) ?? Self.defaultMaxConcurrentHooks
        bandwidthLimit = reader.bandwidth("bandwidth_limit") ?? .off
        bandwidthSchedule = reader.bandwidthSchedule("bandwidth_schedule")
        jobRetention = reader.duration("job_retention", minimum: .seconds(60)) ?? Self.defaultJobRetention
    }

    /// `control_socket`, as ferryd and ``ConfigurationLoader/controlSocket(inFile:)`` both read it.
    static func controlSocket(_ reader: TableReader) -> String {
        reader.path("control_socket") ?? defaultControlSocket
    }

    static func checkSpoolsAreDistinct(_ spools: [SpoolConfiguration], context: LoadContext) {
        var names: [String: Int] = [:]
        var directories: [String: String] = [:]
        for (index, spool) in spools.enumerated() {
            let path = KeyPath().appending("spool").appending(index: index)
            if let first = names[spool.name] {
                context.report(path.appending("name"), "spool name \"\(spool.name)\" is already used by spool[\(first)]")
            }
            names[spool.name] = names[spool.name] ?? index
            let directory = LoadContext.resolved(spool.directory)
            if let other = directories[directory] {
                context.report(path.appending("directory"), "directory \(spool.directory) is already watched by spool \"\(other)\"")
            }
            directories[directory] = directories[directory] ?? spool.name
            if LoadContext.resolved(spool.failedDirectory) == directory {
                context.report(path.appending("failed_directory"), "failed_directory must not be the spool directory itself")
            }
            if spool.afterUpload == .move && LoadContext.resolved(spool.sentDirectory) == directory {
                context.report(path.appending("sent_directory"), "sent_directory must not be the spool directory itself")
            }
        }
        // A spool inside a recursive spool would be uploaded by both (dot-directories are not entered).
        for (index, inner) in spools.enumerated() {
            for outer in spools where outer.name != inner.name && outer.recursive {
                let outerPath = LoadContext.resolved(outer.directory)
                let innerPath = LoadContext.resolved(inner.directory)
                guard innerPath.hasPrefix(outerPath + "/") else { continue }
                let relative = innerPath.dropFirst(outerPath.count + 1)
                if !relative.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
                    context.report(KeyPath().appending("spool").appending(index: index).appending("directory"),
                           "directory \(inner.directory) is inside recursive spool \"\(outer.name)\"; its files would be uploaded twice")
                }
            }
            for other in spools where other.name != inner.name {
                let otherPath = LoadContext.resolved(other.directory)
                for (key, target) in [("failed_directory", inner.failedDirectory), ("sent_directory", inner.sentDirectory)]
                where key == "failed_directory" || inner.afterUpload == .move {
                    let targetPath = LoadContext.resolved(target)
                    let nested = targetPath == otherPath
                        || (targetPath.hasPrefix(otherPath + "/") && other.recursive
                            && !targetPath.dropFirst(otherPath.count + 1).split(separator: "/").contains(where: { $0.hasPrefix(".") }))
                    if nested {
                        context.report(KeyPath().appending("spool").appending(index: index).appending(key),
                               "\(key) \(target) is watched by spool \"\(other.name)\"; its files would be uploaded again")
                    }
                }
            }
        }
    }

    /// A spool's `result_directory` where a spool (its own or another) would find its files: every
    /// result file would be uploaded, and get a result file of its own, without end.
    static func checkResultDirectories(_ spools: [SpoolConfiguration], context: LoadContext) {
        for (index, spool) in spools.enumerated() {
            guard let results = spool.resultDirectory else { continue }
            let resultsPath = LoadContext.resolved(results)
            for other in spools {
                let otherPath = LoadContext.resolved(other.directory)
                let watched = resultsPath == otherPath
                    || (resultsPath.hasPrefix(otherPath + "/") && other.recursive
                        && !resultsPath.dropFirst(otherPath.count + 1).split(separator: "/").contains(where: { $0.hasPrefix(".") }))
                if watched {
                    context.report(KeyPath().appending("spool").appending(index: index).appending("result_directory"),
                                   "result_directory \(results) is watched by spool \"\(other.name)\"; its result files would be uploaded too — put it outside the spools (or in a dot-directory)")
                }
            }
        }
    }

    /// The state directory holds the queue and copies of files being sent: inside a spool it would
    /// upload itself.
    /// This configuration with the settings that take effect only at a restart (`state_directory`,
    /// `control_socket`, the control access settings, `log_level`, `metrics_listen`) as they are in
    /// `running`: what a reload puts in place. Fails, naming the spool, when a spool directory would
    /// be, hold or lie inside the state directory in use, which the file's own check cannot see when
    /// the file names another one.
    public func reloadable(over running: FerryConfiguration) throws(ConfigurationError) -> FerryConfiguration {
        var effective = self
        effective.stateDirectory = running.stateDirectory
        effective.controlSocket = running.controlSocket
        effective.control = running.control
        effective.logLevel = running.logLevel
        effective.metricsListen = running.metricsListen
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let context = LoadContext(file: path, locator: TOMLKeyLocator(text: text), secrets: SecretSources(environment: [:], credentialsDirectory: nil))
        let inUse = LoadContext.resolved(running.stateDirectory)
        for (index, spool) in spools.enumerated() {
            let directory = LoadContext.resolved(spool.directory)
            if LoadContext.isSameOrInside(directory, inUse) || LoadContext.isSameOrInside(inUse, directory) {
                context.report(KeyPath().appending("spool").appending(index: index).appending("directory"),
                               "spool directory \(spool.directory) is, holds or is inside the state directory in use, \(running.stateDirectory); Ferry would upload its own queue (a new state_directory takes effect only when ferryd restarts)")
            }
        }
        try context.throwIssues()
        return effective
    }

    static func checkStateDirectory(_ state: String, spools: [SpoolConfiguration], context: LoadContext) {
        let resolvedState = LoadContext.resolved(state)
        for (index, spool) in spools.enumerated() {
            let spoolPath = LoadContext.resolved(spool.directory)
            if LoadContext.isSameOrInside(resolvedState, spoolPath) {
                context.report(KeyPath().appending("state_directory"),
                       "state_directory \(state) is inside spool \"\(spool.name)\" (\(spool.directory)); Ferry would upload its own queue — put it elsewhere, e.g. /var/lib/ferry")
            } else if LoadContext.isSameOrInside(spoolPath, resolvedState) {
                context.report(KeyPath().appending("spool").appending(index: index).appending("directory"),
                       "spool directory \(spool.directory) is inside state_directory \(state)")
            }
        }
    }
}
