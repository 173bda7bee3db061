import Synchronization

/// Who may hold a control connection. Peers who may only read (any local user, when
/// `control_read_only_for_others`) share a bounded number of connections, and each of them may hold
/// only a few: one user opening hundreds of `watch` streams cannot lock the administrators out.
/// Root, ferryd's own user and `control_group` members are always admitted (up to a limit far above
/// any real use, so a runaway script cannot exhaust ferryd's descriptors either).
final class ControlAdmission: Sendable {
    /// Connections one read-only user may hold at once.
    static let perReadOnlyUser = 32
    /// Connections all read-only users may hold together.
    static let readOnlyTotal = 192
    /// Connections privileged peers may hold together.
    static let privilegedTotal = 1024

    private struct Counts {
        var byUser: [UInt32: Int] = [:]
        var readOnly = 0
        var privileged = 0
    }
    private let counts = Mutex(Counts())

    /// Counts `peer` in, or says why it is refused (then nothing is counted).
    func admit(_ peer: ControlPeer) -> String? {
        counts.withLock { counts in
            if peer.access == .control {
                guard counts.privileged < Self.privilegedTotal else {
                    return "too many control connections (\(Self.privilegedTotal) from privileged users); close some and try again"
                }
                counts.privileged += 1
                return nil
            }
            let mine = counts.byUser[peer.uid, default: 0]
            if mine >= Self.perReadOnlyUser {
                return "too many control connections from uid \(peer.uid) (at most \(Self.perReadOnlyUser) each); close some (watch, wait) and try again"
            }
            if counts.readOnly >= Self.readOnlyTotal {
                return "too many control connections from read-only users (\(Self.readOnlyTotal)); try again later"
            }
            counts.byUser[peer.uid] = mine + 1
            counts.readOnly += 1
            return nil
        }
    }

    /// Counts out a peer that was admitted.
    func release(_ peer: ControlPeer) {
        counts.withLock { counts in
            if peer.access == .control {
                counts.privileged -= 1
                return
            }
            let left = counts.byUser[peer.uid, default: 1] - 1
            counts.byUser[peer.uid] = left > 0 ? left : nil
            counts.readOnly -= 1
        }
    }
}
