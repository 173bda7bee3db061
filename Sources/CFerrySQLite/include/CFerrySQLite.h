// SQLite's process-wide configuration, which Swift cannot set: sqlite3_config is variadic.
#ifndef CFERRY_SQLITE_H
#define CFERRY_SQLITE_H

/// Configures SQLite for a process whose connections are each used by one thread at a time
/// (GRDB serializes every access to a connection), before its first connection opens:
/// - SQLITE_CONFIG_MULTITHREAD: no mutex around each call on a connection or statement;
/// - SQLITE_CONFIG_MEMSTATUS off: no global mutex and statistics around each allocation.
/// Returns 0 when applied, or SQLite's error code (SQLITE_MISUSE once SQLite has started:
/// it keeps its defaults then, which are correct, only slower).
int cferry_sqlite_configure(void);

#endif
