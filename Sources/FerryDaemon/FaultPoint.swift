import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Crash windows the tests can hit on purpose. In debug builds only, `FERRY_FAULT_POINT=NAME` makes
/// ferryd kill itself with SIGKILL when it reaches that point; release builds ignore it.
enum FaultPoint: String {
    /// The server's 2xx is in hand; the record of it is not written yet.
    case deliveredBeforeRecord = "delivered-before-record"
    /// The 2xx is on record; the file is not deleted or moved yet.
    case deliveredBeforeDisposal = "delivered-before-disposal"
    /// The delivered file is deleted; its field sidecar is not yet.
    case deletedBeforeFieldSidecar = "deleted-before-field-sidecar"
    /// A retry has reopened its failed job (now `held`); its file is not brought back yet.
    case retryReopened = "retry-reopened"
    /// A retry has brought its file back into the spool; the job is not queued yet.
    case retryBroughtBack = "retry-brought-back"

    func reached() {
        #if DEBUG
        if Self.armed == rawValue { kill(getpid(), SIGKILL) }
        #endif
    }

    #if DEBUG
    private static let armed = ProcessInfo.processInfo.environment["FERRY_FAULT_POINT"]
    #endif
}
