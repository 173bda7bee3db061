import FerrySystem
import FerryTestSupport
import Foundation
import Synchronization
import Testing

@testable import FerrySpool

/// The inotify reader thread: a read that fails for good is reported, not a silent end.
@Suite("InotifyListener")
struct InotifyListenerTests {
    @Test("a read that fails for good (here EISDIR: a directory put in place of the inotify descriptor) calls onFailure once")
    func readFailureReported() async throws {
        let listener = try InotifyListener()
        let root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        #expect(root >= 0)
        defer { close(root) }
        // The listener closes its descriptor number at deinit: it then closes this directory.
        #expect(dup2(root, listener.descriptor) == listener.descriptor)
        let failures = Mutex<[String]>([])
        listener.start(onEvents: { _ in }, onFailure: { error in failures.withLock { $0.append("\(error)") } })
        defer { listener.stop() }
        try await waitUntil("the reader's failure to be reported") { !failures.withLock { $0.isEmpty } }
        let reported = failures.withLock { $0 }
        #expect(reported.count == 1)
        #expect(reported.first?.contains("read the inotify descriptor") == true, "\(reported)")
    }
}
