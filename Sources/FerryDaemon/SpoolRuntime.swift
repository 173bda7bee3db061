import FerryConfig
import FerryDelivery
import FerryQueue
import FerrySpool
import FerryTransport
import Foundation
import Synchronization

/// What the senders share, whatever the spool: the queue (for resumable state), the body files and
/// the blocking-I/O threads.
struct SenderParts: Sendable {
    let store: JobStore
    let bodies: BodyBuilder
    let io: BlockingIO
}

/// Everything the pipeline needs to know about one spool at run time. A class: every job's
/// pipeline, the scheduler and the control service look it up, and copying the configuration
/// with it (as a struct) retained and released each of its fields every time.
final class SpoolRuntime: Sendable {
    let configuration: SpoolConfiguration
    let files: SpoolFiles
    /// Sends the spool's files by its protocol.
    let sender: any Sender
    /// The spool's own bandwidth limit (its uploads also draw from the daemon's).
    let bandwidth: BandwidthBucket
    /// What is taken out of a refusal before it is kept: the secrets the spool sends.
    let answerRedaction: AnswerRedaction

    init(configuration: SpoolConfiguration, uploader: Uploader, bandwidth: BandwidthBucket = BandwidthBucket(rate: nil), parts: SenderParts) {
        self.configuration = configuration
        self.bandwidth = bandwidth
        answerRedaction = SpoolSecrets.redaction(of: configuration)
        files = SpoolFiles(directory: configuration.directory)
        sender = Self.makeSender(configuration, uploader: uploader, parts: parts)
    }

    /// The one place a protocol is chosen.
    static func makeSender(_ configuration: SpoolConfiguration, uploader: Uploader, parts: SenderParts) -> any Sender {
        let endpoint = Endpoint(configuration)
        return switch configuration.uploadProtocol {
        case .multipart: MultipartSender(configuration: configuration, endpoint: endpoint, uploader: uploader, bodies: parts.bodies, io: parts.io)
        case .put: PutSender(configuration: configuration, endpoint: endpoint, uploader: uploader, io: parts.io)
        case .resumable: ResumableSender(configuration: configuration, endpoint: endpoint, client: ResumableClient(uploader: uploader), store: parts.store)
        case .tus: TusSender(configuration: configuration, endpoint: endpoint, client: TusClient(uploader: uploader), store: parts.store, io: parts.io)
        case .s3:
            if let settings = configuration.s3 {
                S3Sender(configuration: configuration, settings: settings, client: S3Client(uploader: uploader), store: parts.store, io: parts.io)
            } else {
                preconditionFailure("an s3 spool without its settings passed the configuration loader")
            }
        }
    }
}

/// A spool's endpoint with its secrets resolved (never logged): the URL without user information,
/// and the configured headers, plus `Authorization: Basic` when the URL carried `user:password@`.
/// The headers go to the URL's own origin and to those the spool names in `send_headers_to`, and
/// nowhere else.
struct Endpoint: Sendable {
    let url: String
    let headers: [(name: String, value: String)]
    /// The origins that may receive ``headers``.
    let trustedOrigins: Set<HTTPOrigin>

    /// The configured headers if `url` is on a trusted origin, else none.
    func headers(for url: String) -> [(name: String, value: String)] {
        HTTPOrigin.headers(headers, for: url, trusted: trustedOrigins)
    }

    init(_ configuration: SpoolConfiguration) {
        var headers = configuration.headers.map { (name: $0.name, value: $0.value.text) }
        // `https://user:password@host/…` means HTTP Basic authentication, as it does to curl.
        let url = configuration.url.text
        if let components = URLComponents(string: url), let user = components.percentEncodedUser {
            let password = components.percentEncodedPassword ?? ""
            let credentials = "\(user.removingPercentEncoding ?? user):\(password.removingPercentEncoding ?? password)"
            if !headers.contains(where: { $0.name.lowercased() == "authorization" }) {
                headers.append((name: "Authorization", value: "Basic " + Data(credentials.utf8).base64EncodedString()))
            }
        }
        self.url = Self.withoutUserInfo(url)
        self.headers = headers
        trustedOrigins = Set(configuration.sendHeadersTo + [HTTPOrigin(url: self.url)].compactMap { $0 })
    }

    /// `url` without `user:password@`.
    static func withoutUserInfo(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.percentEncodedUser != nil else { return url }
        components.percentEncodedUser = nil
        components.percentEncodedPassword = nil
        return components.string ?? url
    }
}
