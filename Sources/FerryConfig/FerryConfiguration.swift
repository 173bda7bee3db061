import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's whole configuration, as read from `ferry.toml`.
public struct FerryConfiguration: Sendable {
    /// Where the configuration was read from (for messages).
    public var path: String
    /// Holds the SQLite database and the temporary request bodies.
    public var stateDirectory: String
    /// The control socket's path.
    public var controlSocket: String
    /// How many uploads may run at once, across all spools.
    public var maxConcurrentUploads: Int
    /// The least severe log level written.
    public var logLevel: Logger.Level
    /// How long a shutdown waits for uploads in flight before aborting them (they stay queued).
    public var shutdownTimeout: Duration
    /// How often every spool is rescanned in full, in case an inotify event was missed.
    public var rescanInterval: Duration
    /// The watched spool directories.
    public var spools: [SpoolConfiguration]
    /// Who may use the control socket, and how.
    public var control: ControlAccess
    /// Where `GET /metrics` is served over HTTP (`metrics_listen`); `nil` (the default): not served.
    public var metricsListen: ListenAddress?

    /// The default configuration file.
    public static let defaultPath = "/etc/ferry/ferry.toml"
    /// The control socket when the configuration does not set `control_socket`.
    public static let defaultControlSocket = "/run/ferry/control.sock"

    public init(
        path: String, stateDirectory: String, controlSocket: String, maxConcurrentUploads: Int,
        logLevel: Logger.Level, shutdownTimeout: Duration, rescanInterval: Duration,
        spools: [SpoolConfiguration], control: ControlAccess = ControlAccess(), metricsListen: ListenAddress? = nil
    ) {
        self.control = control
        self.metricsListen = metricsListen
        self.path = path
        self.stateDirectory = stateDirectory
        self.controlSocket = controlSocket
        self.maxConcurrentUploads = maxConcurrentUploads
        self.logLevel = logLevel
        self.shutdownTimeout = shutdownTimeout
        self.rescanInterval = rescanInterval
        self.spools = spools
    }

    /// The spool called `name`.
    public func spool(named name: String) -> SpoolConfiguration? {
        spools.first { $0.name == name }
    }
}

/// Access to the control socket. Root, the daemon's own user and members of ``group`` may read and
/// act; any other local user may only read (``readOnlyForOthers``) or not connect at all.
public struct ControlAccess: Sendable, Equatable {
    /// A group whose members may act (`control_group`).
    public struct Group: Sendable, Equatable {
        public var name: String
        public var id: UInt32
        public init(name: String, id: UInt32) {
            self.name = name
            self.id = id
        }
    }

    public var group: Group?
    /// Whether users outside the group may run the read-only commands (`control_read_only_for_others`).
    /// When false, the socket is created mode 0660 and the kernel refuses them too.
    public var readOnlyForOthers: Bool
    /// A connection with no request in progress is closed after this long (`control_idle_timeout`).
    public var idleTimeout: Duration

    public init(group: Group? = nil, readOnlyForOthers: Bool = true, idleTimeout: Duration = .seconds(60)) {
        self.group = group
        self.readOnlyForOthers = readOnlyForOthers
        self.idleTimeout = idleTimeout
    }

    /// The id of the group called `name`, if it exists.
    public static func groupID(named name: String) -> UInt32? {
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }
}

/// A TCP address to listen on, such as `metrics_listen`: a numeric IPv4 or IPv6 address (or
/// `localhost`, taken as 127.0.0.1) and a port.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// The numeric address, without brackets: `127.0.0.1`, `::1`.
    public var host: String
    /// 1–65535.
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `HOST:PORT`, with an IPv6 address in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Reads `HOST:PORT` (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`); the failure says what is wrong.
    public static func parse(_ text: String) -> Result<ListenAddress, ListenAddressError> {
        let usage = "expected \"HOST:PORT\" such as \"127.0.0.1:9464\", \"[::1]:9464\" or \"localhost:9464\", got \"\(text)\""
        let host: String
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return .failure(ListenAddressError(message: usage))
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else {
                return .failure(ListenAddressError(message: "\"\(host)\" is not an IPv6 address; \(usage)"))
            }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[0].isEmpty else {
                let hint = parts.count > 2 ? " (write an IPv6 address in brackets: \"[::1]:9464\")" : ""
                return .failure(ListenAddressError(message: usage + hint))
            }
            portText = parts[1]
            if parts[0].lowercased() == "localhost" {
                host = "127.0.0.1"
            } else {
                host = String(parts[0])
                var address = in_addr()
                guard inet_pton(AF_INET, host, &address) == 1 else {
                    return .failure(ListenAddressError(message:
                        "\"\(host)\" is not an IPv4 address (use a numeric address, \"[IPv6]\" or localhost); \(usage)"))
                }
            }
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(portText), (1...65535).contains(port) else {
            return .failure(ListenAddressError(message: "the port must be a number from 1 to 65535; \(usage)"))
        }
        return .success(ListenAddress(host: host, port: port))
    }
}

/// Why a `HOST:PORT` value cannot be used.
public struct ListenAddressError: Error, Sendable, Equatable {
    public var message: String
}

/// One watched directory and the endpoint its files go to.
public struct SpoolConfiguration: Sendable, Equatable {
    /// Unique name, `[a-z0-9_-]+`; stored with each job.
    public var name: String
    /// The directory watched for files (absolute).
    public var directory: String
    /// Whether subdirectories are watched too.
    public var recursive: Bool
    /// The endpoint; may contain secrets, so it is logged only without its query.
    public var url: ValueTemplate
    /// How a file travels: a `multipart/form-data` form, the raw bytes, or tus resumable uploads.
    public var uploadProtocol: UploadProtocol
    /// `POST` or `PUT` (multipart and put; tus chooses its own methods).
    public var method: String
    /// tus only: the most bytes sent in one `PATCH`; `nil` (the default) sends the whole remainder
    /// in one request. Set it for servers behind a proxy that limits request bodies.
    public var chunkSize: Int64?
    /// The form field name of the file part.
    public var fileField: String
    /// Overrides the file part's `Content-Type`, which is otherwise chosen by extension.
    public var fileContentType: String?
    /// A file written in place is taken once its size and mtime have not changed for this long.
    public var settle: Duration
    /// What happens to a file once the server has accepted it.
    public var afterUpload: AfterUpload
    /// Where `after_upload = "move"` puts sent files.
    public var sentDirectory: String
    /// Where files that cannot be uploaded are moved, each with a `.error.json` sidecar.
    public var failedDirectory: String
    /// Extra text fields, sent before the file part, in key order.
    public var fields: [NamedValue]
    /// Extra request headers.
    public var headers: [NamedValue]
    /// When to retry and when to give up.
    public var retry: RetryPolicy
    /// A PEM bundle of CA certificates trusted instead of the system's, for private CAs.
    public var caFile: String?
    /// The longest a TCP/TLS connection may take to establish.
    public var connectTimeout: Duration
    /// An upload that neither sends nor receives a byte for this long is aborted and retried.
    public var noProgressTimeout: Duration

    public init(
        name: String, directory: String, recursive: Bool = false, url: ValueTemplate,
        uploadProtocol: UploadProtocol = .multipart, method: String = "POST", chunkSize: Int64? = nil, fileField: String = "file", fileContentType: String? = nil, settle: Duration = .seconds(2),
        afterUpload: AfterUpload = .delete, sentDirectory: String? = nil, failedDirectory: String? = nil,
        fields: [NamedValue] = [], headers: [NamedValue] = [], retry: RetryPolicy = RetryPolicy(),
        caFile: String? = nil, connectTimeout: Duration = .seconds(10), noProgressTimeout: Duration = .seconds(60)
    ) {
        self.name = name
        self.directory = directory
        self.recursive = recursive
        self.url = url
        self.uploadProtocol = uploadProtocol
        self.method = method
        self.chunkSize = chunkSize
        self.fileField = fileField
        self.fileContentType = fileContentType
        self.settle = settle
        self.afterUpload = afterUpload
        self.sentDirectory = sentDirectory ?? directory + "/.sent"
        self.failedDirectory = failedDirectory ?? directory + "/.failed"
        self.fields = fields
        self.headers = headers
        self.retry = retry
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.noProgressTimeout = noProgressTimeout
    }
}

/// How a spool's files are sent (`protocol`).
public enum UploadProtocol: String, Sendable, CaseIterable {
    /// An RFC 7578 `multipart/form-data` form: the configured fields, then the file (the default).
    /// The body is a snapshot of the file in the state directory, so the file may change meanwhile.
    case multipart
    /// The file's bytes as the whole request body (`PUT` by default, or `POST`), `Content-Type` by
    /// extension: WebDAV, pre-signed object-store URLs, simple ingest endpoints. Sent from the
    /// file itself; the URL may name it with `{filename}` or `{relative_path}`.
    case put
    /// tus 1.0 resumable uploads (tus.io): the upload URL and the offset the server confirmed are
    /// kept in the queue, so a failure or a restart resumes where the server's bytes end.
    case tus
}

/// A configured name and value: a form field or a header.
public struct NamedValue: Sendable, Equatable {
    public var name: String
    public var value: ValueTemplate
    public init(name: String, value: ValueTemplate) {
        self.name = name
        self.value = value
    }
}

/// What to do with a file once the server has accepted it.
public enum AfterUpload: String, Sendable, CaseIterable {
    /// Remove the file from the spool.
    case delete
    /// Leave it where it is; it is not uploaded again unless it changes.
    case keep
    /// Move it to `sent_directory`.
    case move
}

/// When a failed attempt is retried, and when Ferry gives up.
public struct RetryPolicy: Sendable, Equatable {
    /// The backoff before the first retry; it doubles each attempt, with full jitter.
    public var initialDelay: Duration
    /// The largest backoff.
    public var maxDelay: Duration
    /// Attempts before giving up; 0 means no limit other than ``maxAge``.
    public var maxAttempts: Int
    /// A file still not delivered this long after it was queued is given up on.
    public var maxAge: Duration

    public init(
        initialDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(300), maxAttempts: Int = 0,
        maxAge: Duration = .seconds(5 * 86_400)
    ) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.maxAttempts = maxAttempts
        self.maxAge = maxAge
    }
}
