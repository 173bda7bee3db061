#if canImport(Glibc)
import Glibc
#endif

/// Access to the control socket. Root, the daemon's own user and members of ``group`` may read and
/// act; any other local user may only read (``readOnlyForOthers``) or not connect at all.
public struct ControlAccess: Sendable, Equatable {
    /// A group whose members may act (`control_group`).
    public struct Group: Sendable, Equatable {
        public var name: String
        public var id: UInt32
        public init(name: String, id: UInt32) {
            self.name = name
            self.id = id
        }
    }

    public var group: Group?
    /// Whether users outside the group may run the read-only commands (`control_read_only_for_others`).
    /// When false, the socket is created mode 0660 and the kernel refuses them too.
    public var readOnlyForOthers: Bool
    /// A connection with no request in progress is closed after this long (`control_idle_timeout`).
    public var idleTimeout: Duration

    public init(group: Group? = nil, readOnlyForOthers: Bool = true, idleTimeout: Duration = .seconds(60)) {
        self.group = group
        self.readOnlyForOthers = readOnlyForOthers
        self.idleTimeout = idleTimeout
    }

    /// The id of the group called `name`, if it exists.
    public static func groupID(named name: String) -> UInt32? {
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }
}
