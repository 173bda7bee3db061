import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension ReceiverHandler {
    /// Where one part's bytes go: a temporary file (file parts) or memory (text fields).
    final class PartSink {
        let fieldName: String
        let filenameParameter: String?
        let contentType: String?
        let temporaryPath: String?
        private var fd: Int32 = -1
        private var text: [UInt8] = []
        private var hasher = SHA256()
        var size: Int64 = 0
        var writeError: String?

        /// Count the bytes only (the receiver's discard mode).
        let countOnly: Bool
        /// Hash a file part's bytes without writing them anywhere (the receiver's `keepFiles: false`).
        let hashOnly: Bool

        init(fieldName: String, filenameParameter: String?, contentType: String?, directory: String, countOnly: Bool = false,
             keep: Bool = true) {
            self.fieldName = fieldName
            self.filenameParameter = filenameParameter
            self.contentType = contentType
            self.countOnly = countOnly && filenameParameter != nil
            hashOnly = !countOnly && !keep && filenameParameter != nil
            if filenameParameter != nil && !countOnly && keep {
                let path = directory + "/.receiving-\(UUID().uuidString)"
                temporaryPath = path
                fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
                if fd < 0 { writeError = "cannot create \(path): \(String(cString: strerror(errno)))" }
            } else {
                temporaryPath = nil
            }
        }

        func append(_ bytes: UnsafeRawBufferPointer) {
            size += Int64(bytes.count)
            if countOnly { return }
            if hashOnly {
                hasher.update(bufferPointer: bytes)
                return
            }
            guard temporaryPath != nil else {
                text.append(contentsOf: bytes)
                return
            }
            hasher.update(bufferPointer: bytes)
            var offset = 0
            while offset < bytes.count && fd >= 0 {
                let count = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    writeError = "write failed: \(String(cString: strerror(errno)))"
                    close(fd)
                    fd = -1
                    return
                }
                offset += count
            }
        }

        var textValue: String { String(decoding: text, as: UTF8.self) }
        var digest: String { countOnly ? "" : hasher.finalize().map { String(format: "%02x", $0) }.joined() }

        func finish() { if fd >= 0 { close(fd); fd = -1 } }

        func discard() {
            finish()
            if let temporaryPath { unlink(temporaryPath) }
        }
    }
}
