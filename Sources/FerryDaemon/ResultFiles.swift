import FerryQueue
import Foundation
import FerrySystem

#if canImport(Glibc)
import Glibc
#endif

/// Writes a delivered file's `<name>.result.json` into the spool's `result_directory` (below the
/// same subdirectories as the file): atomically and durably, never replacing a file. If the name
/// holds another job's result (the same name delivered twice), the job id goes into the name:
/// `<name>.<job id>.result.json`. Writing it again for the same job finds it there and is done.
/// Files are 0640 and the directories ferryd makes 0750, as the failed directory's sidecars: an
/// answer can hold a URL that reads the upload (a tus upload's `Location`), for the producer only.
enum ResultFiles {
    static let suffix = Array(".result.json".utf8)

    /// Writes `document` for `job`; returns the path written (or found).
    static func write(_ document: [UInt8], for job: Job, into directory: String) throws(SystemError) -> String {
        try makeDirectories(directory, mode: 0o750)
        let root = try DirectoryHandle.open(directory)
        let destination = try root.openOrCreateSubdirectory(job.subdirectories, mode: 0o750)
        let name = job.relativePath.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? job.relativePath
        let token = Array(job.id.rawValue.utf8)
        for candidate in candidates(name: name, token: token) {
            if destination.status(of: candidate) != nil {
                if let existing = destination.readPrefix(candidate, limit: 1 << 20), jobID(in: existing) == job.id.rawValue {
                    return destination.childPath(candidate)
                }
                continue
            }
            do {
                try destination.writeNewFile(candidate, bytes: document, mode: 0o640)
                return destination.childPath(candidate)
            } catch where error.code == EEXIST {
                continue
            }
        }
        throw SystemError(operation: "write the result file", path: destination.childPath(name + suffix), code: EEXIST)
    }

    /// `<name>.result.json`, then `<name>.<job id>.result.json`; a name too long for either (the
    /// limit is 255 bytes) is cut at a character boundary and always carries the job id.
    static func candidates(name: [UInt8], token: [UInt8]) -> [[UInt8]] {
        let plain = name + suffix
        let withID = name + [UInt8(ascii: ".")] + token + suffix
        if withID.count <= 255 { return [plain, withID] }
        var kept = name.prefix(255 - token.count - 1 - suffix.count)
        while let last = kept.last, last & 0xC0 == 0x80 { kept.removeLast() }  // a continuation byte
        if let last = kept.last, last >= 0xC0 { kept.removeLast() }  // a lead byte without its continuation
        let short = Array(kept) + [UInt8(ascii: ".")] + token + suffix
        return plain.count <= 255 ? [plain, short] : [short]
    }

    /// The `job` of a result document, if it is one.
    private static func jobID(in bytes: [UInt8]) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])?["job"] as? String
    }
}
