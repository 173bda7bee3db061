/// One row of the configuration reference: a key (or a few keys documented together, or a
/// sub-table such as `[spool.fields]`), its default and its meaning, written in Markdown.
public struct ConfigurationKeyReference: Sendable, Equatable {
    /// The table a key is read from.
    public enum Table: String, Sendable, CaseIterable {
        /// The top level of the file.
        case topLevel = ""
        /// Each `[[spool]]`.
        case spool = "spool"
        /// A spool's `[spool.retry]`.
        case spoolRetry = "spool.retry"
        /// A spool's `[spool.hooks]`.
        case spoolHooks = "spool.hooks"
    }

    /// Where the keys are read.
    public var table: Table
    /// The keys this row documents (one, or a few documented together).
    public var names: [String]
    /// Whether the row is a sub-table of free-form entries (`[spool.fields]`), not a value.
    public var isSubTable: Bool
    /// The default, in Markdown (`` `8` ``, `none`, `required`).
    public var defaultValue: String
    /// What the key does, in Markdown.
    public var meaning: String

    /// A row of one or more value keys.
    init(_ table: Table, _ names: [String], default defaultValue: String, _ meaning: String) {
        self.table = table
        self.names = names
        self.isSubTable = false
        self.defaultValue = defaultValue
        self.meaning = meaning
    }

    /// A row for a sub-table of free-form entries, such as `[spool.fields]`.
    init(_ table: Table, table name: String, default defaultValue: String, _ meaning: String) {
        self.table = table
        self.names = [name]
        self.isSubTable = true
        self.defaultValue = defaultValue
        self.meaning = meaning
    }

    /// The key cell as the README writes it: `` `name` ``, `` `a`, `b` ``, `` `[spool.fields]` ``
    /// or `` `[spool.retry]` `max_delay` ``.
    public var markdownKeys: String {
        if isSubTable { return "`[\(table.rawValue).\(names[0])]`" }
        let keys = names.map { "`\($0)`" }.joined(separator: ", ")
        switch table {
        case .topLevel, .spool: return keys
        case .spoolRetry, .spoolHooks: return "`[\(table.rawValue)]` \(keys)"
        }
    }
}
