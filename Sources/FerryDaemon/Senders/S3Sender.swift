import Crypto
import FerryConfig
import FerryDelivery
import FerryMultipart
import FerryQueue
import FerryS3
import FerrySystem
import FerryTransport
import Foundation
import Logging
import Synchronization

/// `protocol = "s3"`: the file becomes an object in a bucket, signed with SigV4. Below
/// `multipart_threshold` it is one PutObject; from there a multipart upload whose `UploadId` (as
/// the job's ``ResumableUpload``) and confirmed parts (``UploadPart``) are committed to the queue as
/// the server answers, so a cut connection or a kill -9 sends only the parts the server lacks. The
/// protocol is ``S3UploadMachine`` (decisions) and ``S3Client`` (its I/O); this sender ties them to
/// a job and its spool's settings.
struct S3Sender: Sender {
    let configuration: SpoolConfiguration
    let settings: S3Settings
    let client: S3Client
    let store: JobStore
    let io: BlockingIO

    var signer: SigV4Signer {
        SigV4Signer(
            credentials: SigV4Credentials(
                accessKeyID: settings.accessKeyID.text, secretAccessKey: settings.secretAccessKey.text,
                sessionToken: settings.sessionToken?.text),
            region: settings.region)
    }

    var checksum: S3ChecksumAlgorithm? {
        switch settings.checksum {
        case .crc32c: .crc32c
        case .sha256: .sha256
        case .none: nil
        }
    }

    /// Names what an upload belongs to (a digest, as the endpoint may hold a secret): endpoint,
    /// bucket, key template, addressing, part size and checksum. An upload made under other
    /// settings is not continued.
    var endpointKey: String {
        let text = [configuration.url.text, settings.bucket, settings.key.redacted, settings.addressing.rawValue,
                    String(settings.partSize), settings.checksum.rawValue].joined(separator: "\n")
        return String(SHA256.hash(data: Data(text.utf8)).hex.prefix(16))
    }

    /// The time requests are signed at. Debug builds take `FERRY_S3_CLOCK_SKEW` (seconds) to test
    /// what a wrong clock does.
    static let clock: @Sendable () -> Date = {
        #if DEBUG
        if let text = ProcessInfo.processInfo.environment["FERRY_S3_CLOCK_SKEW"], let skew = TimeInterval(text) {
            return { Date().addingTimeInterval(skew) }
        }
        #endif
        return { Date() }
    }()

    /// Small files go in one PutObject from memory (``S3Client``).
    var prefetchLimit: Int64 { min(UploadRequest.inMemoryLimit, settings.multipartThreshold - 1) }

    func send(_ job: Job, from source: SourceFile, tracker: UploadTracker, logger: Logger) async throws -> SendResult {
        let length = source.status.size
        guard length <= S3Settings.maximumObjectSize else {
            return SendResult(report: .refused("the file is larger than S3's largest object (5 TiB)"), requested: false)
        }
        let key = endpointKey
        let multipart = length >= settings.multipartThreshold
        let known = job.upload.flatMap { $0.endpointKey == key && multipart ? $0 : nil }
        let abandoned = job.upload != nil && known == nil
        if abandoned {
            // Made under other settings (or the file is now below multipart_threshold): abort it, so
            // its parts are not left behind, and start afresh.
            await endUpload(of: job, logger: logger)
            try await store.recordUpload(job, nil, now: Date())
        }
        // Ending before a request: the record of the job says the aborted upload is gone (else the
        // claimed job's copy would write it back).
        func unsent(_ report: AttemptReport) -> SendResult {
            SendResult(report: report, requested: false, upload: nil, recordsUpload: abandoned)
        }
        let partSize = settings.partSize(forLength: length)
        let knownParts = known == nil ? [] : try await store.uploadParts(of: job)
        // The object's address: the recorded upload's (its key was rendered then; for a creation
        // marker, made again from that key, as the listing of its uploads needs the key itself), or
        // from the key template.
        let digest = DigestOnce(source: source, io: io)
        let object: S3ObjectAddress
        if let known, let address = S3ObjectAddress.isCreationMarker(known.url) ? markedObject(known.url) : S3ObjectAddress.parse(known.url)?.address {
            object = address
        } else {
            if let problem = Self.keyNameProblem(job, key: settings.key) {
                return unsent(.refused(problem))
            }
            let objectKey: String
            do {
                objectKey = try await self.objectKey(for: job, source: source, digest: digest)
            } catch {
                return unsent(Task.isCancelled ? .stopped : .localFailure("cannot read the file for {sha256}: \(error)"))
            }
            guard let address = S3ObjectAddress(
                endpoint: configuration.url.text, bucket: settings.bucket, key: objectKey, virtualHosted: settings.addressing == .virtual) else {
                return unsent(.refused("the endpoint is not a URL"))
            }
            object = address
        }
        let machineSettings = S3UploadMachine.Settings(
            length: length, partSize: partSize, multipartThreshold: settings.multipartThreshold, endpointKey: key, checksum: checksum,
            partConcurrency: settings.partConcurrency, creationMarker: object.creationMarker)
        var transfer = S3Transfer(
            object: object, signer: signer, checksum: checksum, objectHeaders: objectHeaders(for: job, source: source, digest: digest),
            contentType: configuration.fileContentType ?? MediaType.forFilename(job.baseName), source: source, settings: machineSettings,
            known: known, knownParts: knownParts, clock: Self.clock)
        transfer.uploadHeaders = configuration.headers.filter { S3Transfer.repeatsOnEveryRequest($0.name) }.map { (name: $0.name, value: $0.value.text) }
        let total = machineSettings.partCount
        tracker.sending(total: length, confirmed: known?.offset)
        if multipart { tracker.parts(confirmed: knownParts.count, total: total) }
        let result = try await client.send(transfer, logger: logger, record: { [store] change in
            switch change {
            case .upload(let upload, let parts):
                try await store.recordUpload(job, upload, parts: parts, now: Date())
                tracker.confirmed(upload?.offset ?? 0)
                tracker.parts(confirmed: parts.count, total: total)
            case .part(let part, let upload, let confirmedParts):
                try await store.recordPart(job, part, upload: upload, now: Date())
                tracker.confirmed(upload.offset)
                tracker.parts(confirmed: confirmedParts, total: total)
            }
        }, progress: { tracker.sent($0) })
        var report = result.report
        switch report {
        case .sourceChanged(nil):
            report = .sourceChanged(source.currentVersion)
        case .answered(let answer) where answer.isSuccess:
            // What a producer needs of the object: where it is and which version.
            report = .answered(ServerAnswer(
                status: answer.status,
                body: Self.objectDescription(
                    bucket: settings.bucket, object: object,
                    bucketRoot: S3ObjectAddress(
                        endpoint: configuration.url.text, bucket: settings.bucket, key: "", virtualHosted: settings.addressing == .virtual),
                    etag: result.etag, versionID: result.versionID),
                contentType: "application/json"))
        default:
            break
        }
        return SendResult(report: report, bytesSent: result.bytesSent, progressed: result.progressed, upload: result.upload, recordsUpload: true)
    }

    /// Aborts the job's multipart upload (cancelled, superseded, given up, or made under settings
    /// that changed since), so no parts are left to bill. Only in the configured bucket on the
    /// configured endpoint: an upload in a bucket or at an endpoint no longer configured is left
    /// (with a warning) rather than sent signed requests the configuration no longer meant.
    func endUpload(of job: Job, logger: Logger) async {
        guard let upload = job.upload else { return }
        guard upload.endpointKey == endpointKey || isInConfiguredBucket(upload.url) else {
            // Not the URL: an endpoint may carry a secret.
            logger.warning("""
                a multipart upload made under other settings is not in the configured bucket, so it is not aborted; \
                its parts remain until a lifecycle rule removes them
                """)
            return
        }
        guard S3ObjectAddress.isCreationMarker(upload.url) else {
            await client.abort(uploadURL: upload.url, signer: signer, clock: Self.clock, logger: logger)
            return
        }
        // A crash came between creating the upload and recording it: find it by its key.
        guard let object = markedObject(upload.url) else { return }
        let response = await client.abandonUploads(of: object, signer: signer, clock: Self.clock, logger: logger)
        if case .error(let error) = response { S3Client.log(.notAbandoned(code: error.code ?? "HTTP \(error.status)"), to: logger) }
    }

    /// The object a creation marker names, in the configured bucket (with its key, for listing).
    func markedObject(_ marker: String) -> S3ObjectAddress? {
        guard let bucket = configuredBucket, let recorded = S3ObjectAddress.parse(marker)?.address,
              let key = recorded.key(inBucket: bucket) else { return nil }
        return S3ObjectAddress(endpoint: configuration.url.text, bucket: settings.bucket, key: key, virtualHosted: settings.addressing == .virtual)
    }

    /// The configured bucket's root address.
    var configuredBucket: S3ObjectAddress? {
        S3ObjectAddress(endpoint: configuration.url.text, bucket: settings.bucket, key: "", virtualHosted: settings.addressing == .virtual)
    }

    /// Whether `url` (a recorded upload's) is in the configured bucket at the configured endpoint.
    func isInConfiguredBucket(_ url: String) -> Bool {
        guard let recorded = S3ObjectAddress.parse(url)?.address, let bucket = configuredBucket else { return false }
        return recorded.isInBucket(bucket)
    }

    /// Why the file's name cannot be part of its object key, if it cannot: S3 keys are UTF-8 text,
    /// and a name of other bytes would be changed (U+FFFD for each invalid byte), so two files could
    /// land on one key and the second replace the first. Such a file is refused, and moved aside.
    static func keyNameProblem(_ job: Job, key: ValueTemplate) -> String? {
        let names: [UInt8]
        if key.placeholders.contains(.relativePath) {
            names = job.relativePath
        } else if key.placeholders.contains(.filename) {
            names = job.baseNameBytes
        } else {
            return nil
        }
        guard String(validating: names, as: UTF8.self) == nil else { return nil }
        return "the file name is not valid UTF-8, and S3 object keys are UTF-8 text: rename the file, "
            + "or use a key without {filename} and {relative_path} (such as {id} or {sha256})"
    }

    /// The object key: the `key` template with the file's placeholders (names as UTF-8 text).
    func objectKey(for job: Job, source: SourceFile, digest: DigestOnce) async throws -> String {
        let sha256 = settings.key.placeholders.contains(.sha256) ? try await digest.value() : ""
        return Placeholders(job: job, size: source.status.size, modificationTime: source.status.modificationTime, sha256: sha256)
            .render(settings.key, for: .text)
    }

    /// `x-amz-meta-*` from the fields (non-ASCII values RFC 2047-encoded, as AWS's SDKs do),
    /// `x-amz-storage-class`, and the configured headers.
    private func objectHeaders(for job: Job, source: SourceFile, digest: DigestOnce) -> @Sendable () async throws -> [(name: String, value: String)] {
        let fields = configuration.fields
        let headers = configuration.headers.map { (name: $0.name, value: $0.value.text) }
        let storageClass = settings.storageClass
        return {
            var all: [(name: String, value: String)] = []
            if !fields.isEmpty {
                let sha256 = Placeholders.needsDigest(fields.map(\.value)) ? try await digest.value() : ""
                let placeholders = Placeholders(job: job, size: source.status.size, modificationTime: source.status.modificationTime, sha256: sha256)
                for field in fields {
                    all.append(("x-amz-meta-" + field.name.lowercased(), Self.metadataValue(placeholders.render(field.value, for: .text))))
                }
            }
            if let storageClass { all.append(("x-amz-storage-class", storageClass)) }
            return all + headers
        }
    }

    /// A metadata value as S3 takes it: printable ASCII as it is, anything else as an RFC 2047
    /// encoded word (`=?UTF-8?B?…?=`).
    static func metadataValue(_ text: String) -> String {
        if text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7F }) { return text }
        return "=?UTF-8?B?\(Data(text.utf8).base64EncodedString())?="
    }

    /// `{"bucket":…,"etag":…,"key":…,"url":…,"version_id":…}`: kept with the job as the server's answer.
    /// The key is the address's own; for an address read back from a recorded upload, its path
    /// below `bucketRoot` (the bucket's root at the configured endpoint, in the configured addressing).
    static func objectDescription(
        bucket: String, object: S3ObjectAddress, bucketRoot: S3ObjectAddress?, etag: String?, versionID: String?
    ) -> [UInt8] {
        let key = object.key ?? bucketRoot.flatMap { object.key(inBucket: $0) } ?? {
            let encoded = String(object.path.drop(while: { $0 == "/" }))
            return encoded.removingPercentEncoding ?? encoded
        }()
        let description = ObjectDescription(bucket: bucket, etag: etag, key: key, url: object.url, versionID: versionID)
        // JSONEncoder, not JSONSerialization: sorting keys there opens an ICU collator, whose data
        // is resident pages in every S3 sender (measured: about 1 MiB of peak RSS).
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return [UInt8]((try? encoder.encode(description)) ?? Data())
    }

    /// The stored object, as ``objectDescription(bucket:object:bucketRoot:etag:versionID:)`` writes it.
    struct ObjectDescription: Encodable {
        var bucket: String
        var etag: String?
        var key: String
        var url: String
        var versionID: String?

        enum CodingKeys: String, CodingKey {
            case bucket, etag, key, url
            case versionID = "version_id"
        }
    }
}

/// The file's SHA-256 (hex), read at most once per attempt (when first asked for), off the
/// concurrency pool.
final class DigestOnce: Sendable {
    private let source: SourceFile
    private let io: BlockingIO
    private let task = Mutex<Task<String, any Error>?>(nil)

    init(source: SourceFile, io: BlockingIO) {
        self.source = source
        self.io = io
    }

    func value() async throws -> String {
        let task = task.withLock { task in
            if let task { return task }
            let started = Task { [source, io] in
                try await io.run { flag in try source.digest(SHA256.self, isCancelled: { flag.isCancelled }).hex }
            }
            task = started
            return started
        }
        return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }
}
