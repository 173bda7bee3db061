@testable import FerryQueue
import GRDB
import Testing

/// The statements every file's path runs, read through SQLite's `EXPLAIN`: no temporary b-tree
/// built per execution, and the queries on the indexes made for them.
@Suite("The queue's statements (EXPLAIN)")
struct QueueStatementTests {
    /// The opcodes of `sql`'s main program (EXPLAIN lists a trigger's program after it, from its
    /// own `Init`: `upload_part_forget`'s runs only when a job's upload URL changes).
    static func opcodes(_ sql: String, _ store: JobStore) async throws -> [String] {
        // Parameters as NULL: the program is the same, and EXPLAIN needs no arguments then.
        let sql = sql.replacingOccurrences(of: "?", with: "NULL")
        let all = try await store.read { db in try Row.fetchAll(db, sql: "EXPLAIN " + sql).map { $0["opcode"] as String } }
        return [String](all.prefix(1)) + all.dropFirst().prefix { $0 != "Init" }
    }

    /// The query plan of `sql`, its lines joined.
    static func plan(_ sql: String, _ store: JobStore) async throws -> String {
        try await store.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String? ?? "" }.joined(separator: "; ")
        }
    }

    @Test("Inserting a job and each write of its state (claim, outcome, disposition) build no temporary b-tree: no partial index's condition is a list of constants",
          arguments: [
              Job.insertion,
              "UPDATE job SET state = 'uploading', updated_at = 1 WHERE seq = 1",
              Job.outcomeUpdate,
              "UPDATE job SET disposition = 'deleted', disposed_at = 1, final_path = NULL, updated_at = 1 WHERE seq = 1 AND disposed_at IS NULL AND \(JobPredicate.final)",
              "SELECT 1 FROM job WHERE spool = 's' AND relative_path = x'61' AND \(JobPredicate.active) LIMIT 1",
          ])
    func noTemporaryTrees(sql: String) async throws {
        let queue = try TestQueue()
        let opcodes = try await Self.opcodes(sql, queue.store)
        #expect(!opcodes.isEmpty)
        #expect(!opcodes.contains("OpenEphemeral"), "\(sql): \(opcodes)")
    }

    @Test("The intake's query, the waiting age and the pending dispositions use their partial indexes")
    func partialIndexesUsed() async throws {
        let queue = try TestQueue()
        let cases: [(sql: String, index: String)] = [
            ("SELECT 1 FROM job WHERE spool = 's' AND relative_path = x'61' AND \(JobPredicate.active) LIMIT 1", "job_active_path"),
            ("SELECT MIN(COALESCE(age_base, created_at)) FROM job WHERE spool = 's' AND \(JobPredicate.waiting)", "job_waiting_age"),
        ]
        for (sql, index) in cases {
            let plan = try await Self.plan(sql, queue.store)
            #expect(plan.contains(index) && !plan.contains("SCAN job"), "\(sql): \(plan)")
        }
        // The pending dispositions walk job_undisposed (INDEXED BY: without statistics SQLite took
        // job_by_state, every finished job's entry, and sorted them), in seq order.
        let pending = try await Self.plan(
            "SELECT * FROM job INDEXED BY job_undisposed WHERE \(JobPredicate.undisposed) AND seq > 0 ORDER BY seq LIMIT 10", queue.store)
        #expect(pending.contains("SEARCH job USING INDEX job_undisposed") && !pending.contains("TEMP B-TREE"), "\(pending)")
    }

    @Test("The partial indexes' conditions are the predicates the queries use")
    func indexConditions() async throws {
        let queue = try TestQueue()
        let definitions = try await queue.store.read { db in
            try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql LIKE '%WHERE%'")
                .map { ($0["name"] as String, $0["sql"] as String) }
        }
        let byName = Dictionary(uniqueKeysWithValues: definitions)
        #expect(byName["job_active_path"]?.hasSuffix("WHERE " + JobPredicate.active) == true, "\(byName)")
        #expect(byName["job_undisposed"]?.hasSuffix("WHERE " + JobPredicate.undisposed) == true, "\(byName)")
        #expect(byName["job_waiting_age"]?.hasSuffix("WHERE " + JobPredicate.waiting) == true, "\(byName)")
    }

    @Test("The predicates name the states JobState groups: active, waiting (active but held), final")
    func predicatesMatchStates() {
        func states(_ predicate: String) -> Set<String> {
            Set(predicate.split(separator: "'").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        }
        #expect(states(JobPredicate.active) == Set(JobState.active.map(\.rawValue)))
        #expect(states(JobPredicate.waiting) == Set(JobState.active.map(\.rawValue)).subtracting(["held"]))
        #expect(states(JobPredicate.final) == Set(JobState.allCases.filter(\.isFinal).map(\.rawValue)))
        #expect(states(JobPredicate.undisposed) == ["done", "failed", "cancelled"])
    }
}
