import FerryConfig
import FerryDelivery
import Foundation

/// The secret values a spool sends, which a server's refusal must not carry into the job's record,
/// the failed file's sidecar or a hook (``AnswerRedaction``): the value of every header that holds
/// a secret or is named like a credential (and its credentials without the scheme, as in
/// `Bearer …`), form fields that hold a secret, the URL's password and the values of its query
/// parameters named like credentials (a pre-signed URL's signature and token), and an `s3`
/// spool's secret key and session token.
enum SpoolSecrets {
    /// Words in a header's or query parameter's name that make its value a credential, whether or
    /// not it came from a secret (`X-Api-Key`, `X-Amz-Signature`, `access_token`, `sig`).
    static let credentialWords = ["auth", "cookie", "token", "key", "secret", "pass", "sig", "session", "credential"]

    static func isCredentialName(_ name: String) -> Bool {
        let name = name.lowercased()
        return credentialWords.contains(where: name.contains)
    }

    static func values(of configuration: SpoolConfiguration, endpoint: Endpoint) -> [String] {
        var values: [String] = []
        let secretHeaders = Set(configuration.headers.filter(\.value.containsSecret).map { $0.name.lowercased() })
        for header in endpoint.headers {
            let name = header.name.lowercased()
            guard secretHeaders.contains(name) || isCredentialName(name) else { continue }
            values.append(header.value)
            if let space = header.value.firstIndex(of: " ") {
                values.append(String(header.value[header.value.index(after: space)...]).trimmingCharacters(in: .whitespaces))
            }
        }
        values += configuration.fields.filter(\.value.containsSecret).map(\.value.text)
        if let components = URLComponents(string: configuration.url.text) {
            if let password = components.password, !password.isEmpty { values.append(password) }
            // Only credentials: other parameters (a chunk size, a date) appear in answers innocently.
            for item in (components.queryItems ?? []) + (components.percentEncodedQueryItems ?? []) where isCredentialName(item.name) {
                if let value = item.value { values.append(value) }
            }
        }
        // Every value a secret reference resolved to, wherever it stands (a query value named
        // `code`, part of a path).
        values += ([configuration.url] + configuration.headers.map(\.value) + configuration.fields.map(\.value)).flatMap(\.secretValues)
        if let s3 = configuration.s3 {
            values += ([s3.accessKeyID, s3.secretAccessKey, s3.key] + (s3.sessionToken.map { [$0] } ?? [])).flatMap(\.secretValues)
            values.append(s3.secretAccessKey.text)
            if let token = s3.sessionToken { values.append(token.text) }
        }
        return values
    }

    /// The redaction of a spool's refusals.
    static func redaction(of configuration: SpoolConfiguration) -> AnswerRedaction {
        AnswerRedaction(secrets: values(of: configuration, endpoint: Endpoint(configuration)))
    }
}
