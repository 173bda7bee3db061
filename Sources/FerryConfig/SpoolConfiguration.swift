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
    /// Whether `after_upload` applies even when the server answered 2xx before the whole body was
    /// sent (`trust_early_answers`); by default such a file is kept.
    public var trustsEarlyAnswers: Bool
    /// Origins besides the URL's own that may receive the configured headers (`send_headers_to`),
    /// for servers whose upload URLs (a tus `Location`) are on another host.
    public var sendHeadersTo: [HTTPOrigin]
    /// `protocol = "s3"`: the bucket, key template, credentials and part layout.
    public var s3: S3Settings?
    /// `protocol = "resumable"`: the draft revision (`Upload-Draft-Interop-Version`) the server speaks.
    public var resumableInterop: ResumableInteropVersion?
    /// The response headers kept with a job's final answer, lowercased: ``keptResponseHeaders`` and
    /// any `result_headers` adds.
    public var resultHeaders: [String] = SpoolConfiguration.keptResponseHeaders
    /// Where `<name>.result.json` is written for each delivered file (`result_directory`); `nil`: off.
    public var resultDirectory: String?
    /// The programs run after an outcome (`[spool.hooks]`).
    public var hooks = HookSettings()
    /// The RFC 9530 digest sent with each upload and checked in the answer (`digest`); `nil`: off.
    public var digest: DigestAlgorithm?
    /// This spool's bandwidth (`bandwidth_limit`), within the daemon's.
    public var bandwidthLimit = BandwidthLimit.off
    /// When this spool's limit changes (`bandwidth_schedule`); replaces its `bandwidth_limit`.
    public var bandwidthSchedule: BandwidthSchedule?
    /// When uploads may start (`upload_window`); `nil`: at any time.
    public var uploadWindow: UploadWindow?
    /// When the window closes with uploads in flight: `false` (`window_end = "finish"`, the
    /// default) lets them finish; `true` (`"pause"`) stops them, queued again, resumed later where
    /// the protocol can resume.
    public var pausesAtWindowEnd = false
    /// At most this many of the spool's uploads at once, within `max_concurrent_uploads`; `nil`: no
    /// limit of its own.
    public var maxConcurrentUploads: Int?
    /// Higher first when upload slots are short (`priority`, default 0); spools of the same priority
    /// take turns.
    public var priority = 0
    /// Whether a directory in the spool is a bundle: one job, one multipart request with each of its
    /// regular files as a file part (`bundles`, multipart only; default `false`).
    public var bundles = false
    /// The form field of every file part of a bundle (`bundle_file_field`): the configured name, or
    /// ``fileField`` when none is set.
    public var bundleFileField: String {
        get { configuredBundleFileField ?? fileField }
        set { configuredBundleFileField = newValue }
    }
    /// `bundle_file_field` as configured; `nil` follows ``fileField``.
    private var configuredBundleFileField: String?
    /// The most files a bundle may hold (`max_bundle_files`, 1…10000, default 100); a bigger one is
    /// rejected.
    public var maxBundleFiles = 100

    public init(
        name: String, directory: String, recursive: Bool = false, url: ValueTemplate,
        uploadProtocol: UploadProtocol = .multipart, method: String = "POST", chunkSize: Int64? = nil, fileField: String = "file", fileContentType: String? = nil, settle: Duration = .seconds(2),
        afterUpload: AfterUpload = .delete, sentDirectory: String? = nil, failedDirectory: String? = nil,
        fields: [NamedValue] = [], headers: [NamedValue] = [], retry: RetryPolicy = RetryPolicy(),
        caFile: String? = nil, connectTimeout: Duration = .seconds(10), noProgressTimeout: Duration = .seconds(60),
        sendHeadersTo: [HTTPOrigin] = [], trustsEarlyAnswers: Bool = false, s3: S3Settings? = nil,
        resumableInterop: ResumableInteropVersion? = nil
    ) {
        self.s3 = s3
        self.resumableInterop = resumableInterop ?? (uploadProtocol == .resumable ? .latest : nil)
        self.sendHeadersTo = sendHeadersTo
        self.trustsEarlyAnswers = trustsEarlyAnswers
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
