// SQLite's process-wide configuration, which Swift cannot set: sqlite3_config is variadic.
#ifndef CFERRY_SQLITE_H
#define CFERRY_SQLITE_H

/// Turns SQLite's memory statistics off (SQLITE_CONFIG_MEMSTATUS 0) before its first connection
/// opens: with them, every allocation and free takes a global mutex to count bytes that Ferry
/// never reads. (Each connection already runs without its own mutex: GRDB opens them with
/// SQLITE_OPEN_NOMUTEX, as it serializes every access.) Returns 0 when applied, or SQLite's error
/// code (SQLITE_MISUSE once SQLite has started: it keeps its default then, correct, only slower).
int cferry_sqlite_configure(void);

#endif
