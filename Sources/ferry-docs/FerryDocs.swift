import ArgumentParser
import FerryConfig
import FerrySystem
import Foundation

/// `ferry-docs`: renders the documents that come from one source in the code, so they cannot drift:
/// README.md's configuration reference and the `ferry.toml(5)` manual page (both from
/// `ConfigurationReference`). Not installed; `scripts/generate-docs.sh` and the packaging use it.
@main
struct FerryDocs: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-docs",
        abstract: "Render README.md's configuration reference and ferry.toml(5) from the code.",
        subcommands: [Readme.self, Manual.self])
}

/// `ferry-docs readme [--check] README.md`: rewrites (or checks) the generated block.
struct Readme: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Rewrite README.md's configuration reference from the code.")

    @Argument(help: ArgumentHelp("The README to update.", valueName: "path"))
    var path = "README.md"

    @Flag(help: "Only check: exit 1 if the block differs from the code.")
    var check = false

    func run() throws {
        let readme = try String(contentsOfFile: path, encoding: .utf8)
        guard let updated = ConfigurationReference.updatingReadme(readme) else {
            throw ValidationError("\(path) has no block between\n  \(ConfigurationReference.readmeStart)\nand\n  \(ConfigurationReference.readmeEnd)")
        }
        if updated == readme { return }
        if check {
            FileHandle.standardError.write(Data("\(path): the configuration reference differs from Sources/FerryConfig/ConfigurationReference.swift; run `swift run ferry-docs readme \(path)`\n".utf8))
            throw ExitCode.failure
        }
        try updated.write(toFile: path, atomically: true, encoding: .utf8)
        print("updated \(path)")
    }
}

/// `ferry-docs manual`: prints `ferry.toml(5)`.
struct Manual: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the ferry.toml(5) manual page.")

    @Option(help: ArgumentHelp("The page's date, YYYY-MM-DD (default: from SOURCE_DATE_EPOCH, else today).", valueName: "date"))
    var date: String?

    func run() throws {
        print(ConfigurationReference.manualPage(date: date ?? Self.defaultDate(), version: FerryVersion.current), terminator: "")
    }

    /// `SOURCE_DATE_EPOCH` (reproducible builds), else today, in UTC.
    static func defaultDate() -> String {
        let epoch = ProcessInfo.processInfo.environment["SOURCE_DATE_EPOCH"].flatMap(TimeInterval.init) ?? Date().timeIntervalSince1970
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: Date(timeIntervalSince1970: epoch))
    }
}
