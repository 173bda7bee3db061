import CFerrySystem
import FerryConfig
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Who is on the other end of a control connection, from the kernel (`SO_PEERCRED`), and what the
/// configuration lets them do.
struct ControlPeer: Sendable, CustomStringConvertible {
    enum Access: Sendable, Equatable {
        /// May run every command.
        case control
        /// May run the read-only commands (`status`, `list`, `show`, `watch`, `health`, `metrics`).
        case readOnly
        /// May run nothing.
        case none
    }

    var pid: Int32
    var uid: UInt32
    var gid: UInt32
    var access: Access

    var description: String { "pid \(pid) uid \(uid)" }
}

/// Decides a peer's access: root, the daemon's own user and members of `control_group` may act;
/// anyone else may read if `control_read_only_for_others`, else nothing.
struct ControlAccessPolicy: Sendable {
    let access: ControlAccess
    let daemonUID: UInt32 = geteuid()

    func peer(_ credentials: cferry_ucred) -> ControlPeer {
        var peer = ControlPeer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, access: .none)
        if credentials.uid == 0 || credentials.uid == daemonUID || isGroupMember(credentials) {
            peer.access = .control
        } else if access.readOnlyForOthers {
            peer.access = .readOnly
        }
        return peer
    }

    /// Whether the peer is in `control_group`: by its primary group, the supplementary groups of
    /// its process, or (if those cannot be read) its user's group memberships.
    private func isGroupMember(_ credentials: cferry_ucred) -> Bool {
        guard let group = access.group else { return false }
        if credentials.gid == group.id { return true }
        if let groups = Self.supplementaryGroups(pid: credentials.pid) { return groups.contains(group.id) }
        return Self.userGroups(uid: credentials.uid, gid: credentials.gid).contains(group.id)
    }

    /// The `Groups:` line of `/proc/<pid>/status`.
    static func supplementaryGroups(pid: Int32) -> Set<UInt32>? {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Groups:") {
            return Set(line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) })
        }
        return nil
    }

    /// The groups the user belongs to according to the group database.
    static func userGroups(uid: UInt32, gid: UInt32) -> Set<UInt32> {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return [gid] }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(name, gid, &groups, &count)
        }
        return Set(groups.prefix(Int(max(0, count))))
    }
}
