import FerryConfig
@testable import FerryDaemon
import Testing

/// The values a refusal must not carry back into what ferryd keeps: secrets and credential-named
/// values, not every value (a chunk size in the URL stays readable in an answer).
@Suite("Spool secrets")
struct SpoolSecretsTests {
    @Test("secret and credential-named header values (and their part after the scheme), secret fields, the URL's password, credential query values and any secret in it, S3 keys")
    func values() throws {
        let configuration = try ConfigurationLoader(secrets: SecretSources(environment: ["TOKEN": "t0ken-from-env", "ALT": "alt-text-secret", "CODE": "azure-function-code"], credentialsDirectory: nil))
            .parse("""
                [[spool]]
                name = "media"
                directory = "/srv/media"
                url = "https://alice:pa55word@media.example/api/v2/media?chunk=1048576&X-Amz-Signature=abcdef123456&X-Amz-Date=20261129T000000Z&access_token=zzzzzz99&code=${env:CODE}"
                [spool.headers]
                Authorization = "Bearer ${env:TOKEN}"
                X-Api-Key = "literal-api-key"
                X-Source = "camera-two"
                [spool.fields]
                description = "${env:ALT}"
                visibility = "public-ish"
                """, path: "/x.toml")
        let spool = try #require(configuration.spools.first)
        let values = Set(SpoolSecrets.values(of: spool, endpoint: Endpoint(spool)))
        for secret in ["Bearer t0ken-from-env", "t0ken-from-env", "literal-api-key", "alt-text-secret", "pa55word", "abcdef123456", "zzzzzz99", "azure-function-code"] {
            #expect(values.contains(secret), "\(secret) is not redacted")
        }
        for plain in ["camera-two", "public-ish", "1048576", "20261129T000000Z"] {
            #expect(!values.contains(plain), "\(plain) would be redacted")
        }
    }
}
