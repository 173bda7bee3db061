import GRDB

extension JobStore {
    /// The schema's history; a migration, once released, is never edited.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: jobs and attempts") { db in
            try db.execute(sql: """
                CREATE TABLE job (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL UNIQUE,
                    spool TEXT NOT NULL,
                    relative_path BLOB NOT NULL,
                    device INTEGER NOT NULL,
                    inode INTEGER NOT NULL,
                    size INTEGER NOT NULL,
                    mtime_ns INTEGER NOT NULL,
                    state TEXT NOT NULL,
                    boundary TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    created_at REAL NOT NULL,
                    updated_at REAL NOT NULL,
                    next_attempt_at REAL,
                    finished_at REAL,
                    last_error TEXT,
                    response_status INTEGER,
                    response_body BLOB,
                    response_content_type TEXT,
                    disposition TEXT,
                    disposed_at REAL,
                    final_path BLOB
                );
                -- At most one job per file in the spool is in flight: the database, not the
                -- watcher, guarantees a file is never queued twice.
                CREATE UNIQUE INDEX job_active_path ON job(spool, relative_path)
                    WHERE state IN ('queued', 'uploading', 'retrying');
                CREATE INDEX job_by_path ON job(spool, relative_path, seq);
                CREATE INDEX job_due ON job(next_attempt_at, seq)
                    WHERE state IN ('queued', 'retrying');
                CREATE INDEX job_by_state ON job(state, seq);
                CREATE INDEX job_undisposed ON job(seq)
                    WHERE disposed_at IS NULL AND state IN ('done', 'failed');

                CREATE TABLE attempt (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    number INTEGER NOT NULL,
                    started_at REAL NOT NULL,
                    duration REAL NOT NULL,
                    http_status INTEGER,
                    error TEXT,
                    bytes_sent INTEGER NOT NULL,
                    outcome TEXT NOT NULL
                );
                CREATE INDEX attempt_by_job ON attempt(job_seq, seq);
                """)
        }
        migrator.registerMigration("v2: hold, cancel, events, pause") { db in
            try db.execute(sql: """
                ALTER TABLE job ADD COLUMN held_at REAL;
                ALTER TABLE job ADD COLUMN age_base REAL;
                ALTER TABLE job ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;
                -- A held job still owns its file in the spool.
                DROP INDEX job_active_path;
                CREATE UNIQUE INDEX job_active_path ON job(spool, relative_path)
                    WHERE state IN ('queued', 'uploading', 'retrying', 'held');
                DROP INDEX job_undisposed;
                CREATE INDEX job_undisposed ON job(seq)
                    WHERE disposed_at IS NULL AND state IN ('done', 'failed', 'cancelled');
                CREATE INDEX job_by_created ON job(created_at);

                -- Every state change, written in the transaction that makes it: `watch` replays
                -- from here, so a client that reconnects misses nothing.
                CREATE TABLE event (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at REAL NOT NULL,
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    attempt INTEGER,
                    http_status INTEGER,
                    message TEXT
                );

                -- Spools paused by an operator ('*' pauses all); a pause survives a restart.
                CREATE TABLE paused_spool (
                    spool TEXT PRIMARY KEY,
                    paused_at REAL NOT NULL
                );
                """)
        }
        migrator.registerMigration("v3: metrics indexes") { db in
            try db.execute(sql: """
                -- The oldest job waiting to be delivered, per spool, by its max_age clock (metrics).
                CREATE INDEX job_waiting_age ON job(spool, COALESCE(age_base, created_at))
                    WHERE state IN ('queued', 'uploading', 'retrying');
                -- The last delivery per spool (metrics).
                CREATE INDEX job_done_by_spool ON job(spool, finished_at) WHERE state = 'done';
                """)
        }
        migrator.registerMigration("v4: counts index") { db in
            try db.execute(sql: """
                -- `status`, the STATUS= line and the ferry_jobs gauge count jobs by state and spool:
                -- a scan of this small covering index instead of the whole table (145 ms → a few
                -- ms with 100,000 jobs).
                CREATE INDEX job_by_state_spool ON job(state, spool);
                """)
        }
        migrator.registerMigration("v5: resumable uploads") { db in
            try db.execute(sql: """
                -- tus: the upload the server created for the job, the offset it confirmed and when
                -- it expires; kept the moment each is known, so a restart resumes rather than resends.
                ALTER TABLE job ADD COLUMN upload_url TEXT;
                ALTER TABLE job ADD COLUMN upload_offset INTEGER;
                ALTER TABLE job ADD COLUMN upload_expires REAL;
                ALTER TABLE job ADD COLUMN upload_endpoint TEXT;
                """)
        }
        migrator.registerMigration("v6: upload parts") { db in
            try db.execute(sql: """
                -- S3 multipart: each part the server confirmed (its ETag and checksum), committed
                -- when the answer arrives, so a restart sends only the parts the server lacks.
                CREATE TABLE upload_part (
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    number INTEGER NOT NULL,
                    size INTEGER NOT NULL,
                    etag TEXT NOT NULL,
                    checksum TEXT,
                    PRIMARY KEY (job_seq, number)
                ) WITHOUT ROWID;
                -- Parts belong to one upload: when the job's upload is forgotten or replaced (every
                -- way the job row is written), so are they.
                CREATE TRIGGER upload_part_forget AFTER UPDATE OF upload_url ON job
                WHEN NEW.upload_url IS NOT OLD.upload_url
                BEGIN
                    DELETE FROM upload_part WHERE job_seq = NEW.seq;
                END;
                """)
        }
        migrator.registerMigration("v7: answers, digests, hooks") { db in
            try db.execute(sql: """
                -- The final answer's headers the spool keeps (a JSON array of [name, value]) and the
                -- digest of what was delivered.
                ALTER TABLE job ADD COLUMN response_headers TEXT;
                ALTER TABLE job ADD COLUMN content_digest TEXT;
                -- What runs after an outcome (a hook, the result file), written in the outcome's
                -- transaction and run at least once, after the file's disposition.
                CREATE TABLE hook_run (
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_at REAL NOT NULL,
                    last_exit INTEGER,
                    last_error TEXT,
                    last_output TEXT,
                    updated_at REAL NOT NULL,
                    PRIMARY KEY (job_seq, kind)
                ) WITHOUT ROWID;
                CREATE INDEX hook_run_due ON hook_run(next_at) WHERE state = 'pending';
                """)
        }
        migrator.registerMigration("v8: due jobs by spool") { db in
            try db.execute(sql: """
                -- The oldest due jobs of one spool (slots and priority per spool, spools taking turns).
                CREATE INDEX job_due_by_spool ON job(spool, next_attempt_at, seq)
                    WHERE state IN ('queued', 'retrying');
                """)
        }
        migrator.registerMigration("v9: bundles, field sidecars") { db in
            try db.execute(sql: """
                -- A job sends a file or a bundle (a directory, its files in one request).
                ALTER TABLE job ADD COLUMN kind TEXT NOT NULL DEFAULT 'file';
                -- The version of the file's field sidecar the last attempt read (disposed of with it).
                ALTER TABLE job ADD COLUMN sidecar_device INTEGER;
                ALTER TABLE job ADD COLUMN sidecar_inode INTEGER;
                ALTER TABLE job ADD COLUMN sidecar_size INTEGER;
                ALTER TABLE job ADD COLUMN sidecar_mtime_ns INTEGER;
                -- A bundle's files as queued, for list and show.
                CREATE TABLE bundle_member (
                    job_seq INTEGER NOT NULL REFERENCES job(seq) ON DELETE CASCADE,
                    position INTEGER NOT NULL,
                    name BLOB NOT NULL,
                    size INTEGER NOT NULL,
                    PRIMARY KEY (job_seq, position)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v10: no index of due jobs across spools") { db in
            try db.execute(sql: """
                -- Since v8 the scheduler claims by spool (job_due_by_spool), and whether any job
                -- waits is the first entry of that index: job_due served no query of the daemon's,
                -- yet every intake, claim and retry rewrote it.
                DROP INDEX job_due;
                """)
        }
        migrator.registerMigration("v11: events without a foreign key") { db in
            // Forgetting finished jobs (job_retention) deletes job rows: through `ON DELETE CASCADE`
            // SQLite looked for each one's events in the whole unindexed event table (1.6 s for 200
            // jobs with 100,000 events, the queue's writes waiting). An index would cost every
            // event's insert instead. Events are kept by count, and `watch` reads them joined to
            // their job: a forgotten job's remaining events are not shown, and go with the pruning.
            let sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'event'")
            try db.execute(sql: """
                CREATE TABLE event_new (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at REAL NOT NULL,
                    job_seq INTEGER NOT NULL,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    attempt INTEGER,
                    http_status INTEGER,
                    message TEXT
                );
                INSERT INTO event_new (id, at, job_seq, kind, state, attempt, http_status, message)
                    SELECT id, at, job_seq, kind, state, attempt, http_status, message FROM event;
                DROP TABLE event;
                ALTER TABLE event_new RENAME TO event;
                """)
            // `watch` cursors are event ids: the next one continues where the old table's ended.
            if let sequence {
                try db.execute(sql: "DELETE FROM sqlite_sequence WHERE name = 'event'")
                try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('event', ?)", arguments: [sequence])
            }
        }
        migrator.registerMigration("v12: partial indexes without IN lists") { db in
            // A constant IN list of more than two values is evaluated through a temporary b-tree
            // built each time: every write to a job's state built two for each of these indexes
            // (JobPredicate). The same conditions, as comparisons.
            try db.execute(sql: """
                DROP INDEX job_active_path;
                CREATE UNIQUE INDEX job_active_path ON job(spool, relative_path)
                    WHERE (state = 'queued' OR state = 'uploading' OR state = 'retrying' OR state = 'held');
                DROP INDEX job_undisposed;
                CREATE INDEX job_undisposed ON job(seq)
                    WHERE disposed_at IS NULL AND (state = 'done' OR state = 'failed' OR state = 'cancelled');
                DROP INDEX job_waiting_age;
                CREATE INDEX job_waiting_age ON job(spool, COALESCE(age_base, created_at))
                    WHERE (state = 'queued' OR state = 'uploading' OR state = 'retrying');
                """)
        }
        return migrator
    }
}
