import ArgumentParser
import FerrySystem

@main
struct Ferryctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferryctl",
        abstract: "Talk to a running ferryd over its control socket.",
        discussion: "This release only reports its version; the control protocol (status, list, show, retry, …) comes next.",
        version: FerryVersion.current)

    func run() throws {
        print("ferryctl \(FerryVersion.current)")
    }
}
