extension ConfigurationLoader {
    /// The control socket ferryd serves when started with the configuration file at `path`:
    /// `control_socket` made absolute against the file's directory and normalised exactly as
    /// ``load(path:)`` does, or ``FerryConfiguration/defaultControlSocket`` when the file does not set it.
    ///
    /// Only that key is read (the rest of the file is not checked and no secret is resolved), so a
    /// client such as `ferryctl` finds the socket with any file ferryd could read it from.
    /// - Throws: ``ConfigurationError`` when the file cannot be read, is not TOML, or `control_socket`
    ///   is not a non-empty string; each issue names the file (and the line).
    public static func controlSocket(inFile path: String) throws(ConfigurationError) -> String {
        let text = try readText(path)
        let root = try document(text, path: path)
        let context = LoadContext(
            file: path, locator: TOMLKeyLocator(text: text), secrets: SecretSources(environment: [:], credentialsDirectory: nil))
        let socket = FerryConfiguration.controlSocket(TableReader(table: root, path: KeyPath(), context: context))
        try context.throwIssues()
        return socket
    }
}
