import Foundation

/// Reads `ferry.toml` into a ``FerryConfiguration``, or explains every problem in it.
///
/// Errors name the file, the line and the key path. Unknown keys are errors, so a typo never
/// silently turns a setting off; secrets are resolved here so a missing credential stops the daemon
/// at start rather than failing every upload later.
public struct ConfigurationLoader: Sendable {
    /// Where secret references read from.
    public var secrets: SecretSources

    public init(secrets: SecretSources) { self.secrets = secrets }

    /// A loader reading secrets from this process's environment and `$CREDENTIALS_DIRECTORY`.
    public static func fromProcessEnvironment() -> ConfigurationLoader {
        let environment = ProcessInfo.processInfo.environment
        return ConfigurationLoader(secrets: SecretSources(
            environment: environment, credentialsDirectory: environment["CREDENTIALS_DIRECTORY"]))
    }

    /// Loads the file at `path`.
    public func load(path: String) throws(ConfigurationError) -> FerryConfiguration {
        try parse(Self.readText(path), path: path)
    }

    /// Parses `text` as if read from `path`; relative paths in it are resolved against `path`'s directory.
    public func parse(_ text: String, path: String) throws(ConfigurationError) -> FerryConfiguration {
        let root = try Self.document(text, path: path)
        let context = LoadContext(file: path, locator: TOMLKeyLocator(text: text), secrets: secrets)
        let configuration = FerryConfiguration(reading: TableReader(table: root, path: KeyPath(), context: context))
        try context.throwIssues()
        return configuration
    }
}
