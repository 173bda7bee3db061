import GRDB

extension StatementArguments {
    /// Arguments from values already converted, for the statements every upload runs.
    ///
    /// `StatementArguments([DatabaseValue])` takes GRDB's generic initializer, which runs
    /// unspecialized and projects each value through a key path (`\.databaseValue`): about 3 % of
    /// ferryd's CPU in the many-small-files benchmark, for copying two dozen values a row. Boxed
    /// here, in code the compiler specializes, GRDB's other initializer only unboxes them.
    init(positional values: [DatabaseValue]) {
        self.init(values.map { value -> (any DatabaseValueConvertible)? in value })
    }
}
