extension ControlAccess {
    /// Reads `control_group`, `control_read_only_for_others` and `control_idle_timeout` from the
    /// top-level table; problems are reported to the reader's context.
    init(reading reader: TableReader) {
        self.init()
        if let group = reader.string("control_group") {
            if let gid = ControlAccess.groupID(named: group) {
                self.group = ControlAccess.Group(name: group, id: gid)
            } else {
                reader.context.report(KeyPath().appending("control_group"), "no group named \"\(group)\" exists on this system; create it (groupadd \(group)) or remove the key")
            }
        }
        readOnlyForOthers = reader.bool("control_read_only_for_others") ?? true
        idleTimeout = reader.duration("control_idle_timeout", minimum: .seconds(1)) ?? .seconds(60)
    }
}
