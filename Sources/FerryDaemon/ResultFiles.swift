import FerryQueue
import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// Writes a delivered file's `<name>.result.json` into the spool's `result_directory` (below the
/// same subdirectories as the file): atomically and durably, never replacing a file. If the name
/// holds another job's result (the same name delivered twice), the job id goes into the name:
/// `<name>.<job id>.result.json`. Writing it again for the same job finds it there and is done.
enum ResultFiles {
    static let suffix = Array(".result.json".utf8)

    /// Writes `document` for `job`; returns the path written (or found).
    static func write(_ document: [UInt8], for job: Job, into directory: String) throws(SystemError) -> String {
        try makeDirectories(directory, mode: 0o755)
        let root = try DirectoryHandle.open(directory)
        let destination = try root.openOrCreateSubdirectory(job.subdirectories, mode: 0o755)
        let name = job.relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? job.relativePath
        let token = Array(job.id.rawValue.utf8)
        for candidate in [name + suffix, name + [UInt8(ascii: ".")] + token + suffix] {
            if destination.status(of: candidate) != nil {
                if let existing = destination.readPrefix(candidate, limit: 4096), contains(existing, token) {
                    return destination.childPath(candidate)
                }
                continue
            }
            do {
                try destination.writeNewFile(candidate, bytes: document)
                return destination.childPath(candidate)
            } catch where error.code == EEXIST {
                continue
            }
        }
        throw SystemError(operation: "write the result file", path: destination.childPath(name + suffix), code: EEXIST)
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
