@testable import FerryConfig
import Foundation
import Testing

@Suite("Configuration of bundles: bundles, bundle_file_field, max_bundle_files")
struct BundleConfigurationTests {
    /// `minimalSpool` is four lines; what a case adds starts on line 5.
    static let file = "/etc/ferry/ferry.toml"

    @Test("defaults: no bundles, the file part's field, at most 100 files")
    func defaults() throws {
        let spool = try #require(try loader().parse(minimalSpool, path: Self.file).spools.first)
        #expect(spool.bundles == false)
        #expect(spool.bundleFileField == "file")
        #expect(spool.maxBundleFiles == 100)
        let renamed = try #require(try loader().parse(minimalSpool + "\nfile_field = \"upload\"\nbundles = true", path: Self.file).spools.first)
        #expect(renamed.bundles == true)
        #expect(renamed.bundleFileField == "upload", "bundle_file_field defaults to file_field")
    }

    @Test("everything set")
    func everything() throws {
        let text = minimalSpool + """

            bundles = true
            bundle_file_field = "files[]"
            max_bundle_files = 10000
            after_upload = "move"
            [spool.fields]
            title = "{filename} ({size} bytes)"
            """
        let spool = try #require(try loader().parse(text, path: Self.file).spools.first)
        #expect(spool.bundles == true)
        #expect(spool.bundleFileField == "files[]")
        #expect(spool.fileField == "file")
        #expect(spool.maxBundleFiles == 10000)
        #expect(spool.fields.map(\.name) == ["title"])
        let least = try #require(try loader().parse(minimalSpool + "\nbundles = true\nmax_bundle_files = 1", path: Self.file).spools.first)
        #expect(least.maxBundleFiles == 1)
    }

    @Test("bundleFileField follows fileField until it is set")
    func resolvedField() {
        var spool = SpoolConfiguration(name: "a", directory: "/srv/a", url: .literal("https://example.org/"), fileField: "upload")
        #expect(spool.bundleFileField == "upload")
        spool.fileField = "document"
        #expect(spool.bundleFileField == "document")
        spool.bundleFileField = "files[]"
        spool.fileField = "other"
        #expect(spool.bundleFileField == "files[]")
    }

    @Test("each refusal names the file, line and key, and says why", arguments: [
        ("bundles = true\nprotocol = \"put\"",
         "ferry.toml:5: spool[0].bundles: bundles = true needs protocol = \"multipart\": a put upload carries one file per request"),
        ("bundles = true\nprotocol = \"tus\"",
         "ferry.toml:5: spool[0].bundles: bundles = true needs protocol = \"multipart\": a tus upload carries one file per request"),
        ("bundles = true\nprotocol = \"resumable\"",
         "ferry.toml:5: spool[0].bundles: bundles = true needs protocol = \"multipart\": a resumable upload carries one file per request"),
        ("recursive = true\nbundles = true",
         "ferry.toml:6: spool[0].bundles: bundles = true cannot be used with recursive = true: in a recursive spool a directory is a subdirectory to watch, not a bundle"),
        ("bundles = true\ndigest = \"sha-256\"",
         "ferry.toml:5: spool[0].bundles: bundles = true cannot be used with digest: Repr-Digest describes one file; a bundle has several"),
        ("bundles = true\n[spool.fields]\ntitle = \"{filename}\"\nchecksum = \"sha256:{sha256}\"",
         "ferry.toml:8: spool[0].fields.checksum: {sha256} cannot be used with bundles = true: a bundle has no single SHA-256"),
        ("bundles = true\nbundle_file_field = \"files[]\"\n[spool.fields]\n\"files[]\" = \"x\"",
         "ferry.toml:8: spool[0].fields.\"files[]\": field \"files[]\" has the same name as bundle_file_field"),
        ("bundles = true\n[spool.fields]\nfile = \"x\"",
         "ferry.toml:7: spool[0].fields.file: field \"file\" has the same name as file_field"),
        ("bundle_file_field = \"files[]\"",
         "ferry.toml:5: spool[0].bundle_file_field: bundle_file_field has no effect without bundles = true"),
        ("bundles = false\nbundle_file_field = \"files[]\"",
         "ferry.toml:6: spool[0].bundle_file_field: bundle_file_field has no effect without bundles = true"),
        ("max_bundle_files = 5",
         "ferry.toml:5: spool[0].max_bundle_files: max_bundle_files has no effect without bundles = true"),
        ("bundles = false\nmax_bundle_files = 5",
         "ferry.toml:6: spool[0].max_bundle_files: max_bundle_files has no effect without bundles = true"),
        ("bundles = true\nmax_bundle_files = 0",
         "ferry.toml:6: spool[0].max_bundle_files: 0 is out of range; use 1 to 10000"),
        ("bundles = true\nmax_bundle_files = 10001",
         "ferry.toml:6: spool[0].max_bundle_files: 10001 is out of range; use 1 to 10000"),
        ("bundles = true\nmax_bundle_files = \"100\"",
         "ferry.toml:6: spool[0].max_bundle_files: expected an integer, got a string"),
        ("bundles = true\nbundle_file_field = \"\"",
         "ferry.toml:6: spool[0].bundle_file_field: the field name must not be empty"),
        ("bundles = true\nbundle_file_field = \"files\\n[]\"",
         "ferry.toml:6: spool[0].bundle_file_field: the field name contains a line feed (LF)"),
        ("bundles = true\nbundle_file_field = \"files\\r\"",
         "ferry.toml:6: spool[0].bundle_file_field: the field name contains a carriage return (CR)"),
        ("bundles = true\nbundle_file_field = 'files\\'",
         "ferry.toml:6: spool[0].bundle_file_field: the field name \"files\\\" ends in a backslash"),
        ("file_field = 'upload\\'",
         "ferry.toml:5: spool[0].file_field: the field name \"upload\\\" ends in a backslash"),
        ("bundles = true\nbundle_file_field = 3",
         "ferry.toml:6: spool[0].bundle_file_field: expected a string, got an integer"),
        ("bundles = \"yes\"",
         "ferry.toml:5: spool[0].bundles: expected a boolean, got a string"),
        // A `bundles` of the wrong type is reported once, not again for the keys that need it.
        ("bundles = 1\nbundle_file_field = \"files[]\"\nmax_bundle_files = 5",
         "ferry.toml:5: spool[0].bundles: expected a boolean, got an integer"),
        ("bundle = true",
         "ferry.toml:5: spool[0].bundle: unknown key \"bundle\" (did you mean \"bundles\"?)"),
    ])
    func refusals(_ lines: String, _ message: String) {
        expectOneIssue(minimalSpool + "\n" + lines, message)
    }

    @Test("an s3 spool refuses bundles too")
    func s3() {
        expectOneIssue("""
            [[spool]]
            name = "archives"
            directory = "/srv/archives"
            url = "https://s3.eu-west-1.amazonaws.com"
            protocol = "s3"
            bucket = "acme-archives"
            access_key_id = "k"
            secret_access_key = "s"
            bundles = true
            """, "ferry.toml:9: spool[0].bundles: bundles = true needs protocol = \"multipart\": an s3 upload carries one file per request")
    }

    @Test("a NUL in bundle_file_field is refused before it can cut the name")
    func nulInField() {
        let found = issues(minimalSpool + "\nbundles = true\nbundle_file_field = \"files\\u0000[]\"").map(\.description)
        #expect(found == ["/etc/ferry/ferry.toml:6: a NUL character (\\u0000) is not allowed in any value"])
    }

    @Test("several conflicts are all reported, in the order of the file")
    func severalConflicts() {
        let found = issues(minimalSpool + """

            protocol = "put"
            recursive = true
            digest = "sha-256"
            bundles = true
            max_bundle_files = 0
            """).map(\.description)
        #expect(found == [
            "/etc/ferry/ferry.toml:8: spool[0].bundles: bundles = true needs protocol = \"multipart\": a put upload carries one file per request",
            "/etc/ferry/ferry.toml:8: spool[0].bundles: bundles = true cannot be used with recursive = true: in a recursive spool a directory is a subdirectory to watch, not a bundle",
            "/etc/ferry/ferry.toml:8: spool[0].bundles: bundles = true cannot be used with digest: Repr-Digest describes one file; a bundle has several",
            "/etc/ferry/ferry.toml:9: spool[0].max_bundle_files: 0 is out of range; use 1 to 10000",
        ])
    }

    @Test("a file with CRLF line ends gets the same lines")
    func crlfLines() {
        let text = (minimalSpool + "\nbundles = true\nprotocol = \"tus\"\n").replacingOccurrences(of: "\n", with: "\r\n")
        expectOneIssue(text, "ferry.toml:5: spool[0].bundles: bundles = true needs protocol = \"multipart\"")
    }

    @Test("without bundles, {sha256} fields, digest and recursive are as before")
    func withoutBundles() throws {
        let text = minimalSpool + "\nrecursive = true\ndigest = \"sha-256\"\n[spool.fields]\nchecksum = \"{sha256}\"\n\"files[]\" = \"x\""
        let spool = try #require(try loader().parse(text, path: Self.file).spools.first)
        #expect(spool.bundles == false && spool.recursive && spool.digest == .sha256)
        #expect(spool.fields.map(\.name) == ["checksum", "files[]"])
    }
}
