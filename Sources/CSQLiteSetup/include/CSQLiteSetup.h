#ifndef CSQLITESETUP_H
#define CSQLITESETUP_H

/// Turns off SQLite's memory statistics for the whole process (`SQLITE_CONFIG_MEMSTATUS`, 0).
///
/// With statistics on, every allocation SQLite makes takes and releases one process-wide mutex; the
/// reminder run's store threads spent ~4 % of their time there. Nothing here reads the statistics
/// (`sqlite3_memory_used`, soft heap limits). `sqlite3_config` is variadic, which Swift cannot call,
/// hence this C function. It takes effect only before SQLite initializes, that is before the first
/// connection of the process opens; later it returns SQLITE_MISUSE (21) and changes nothing.
///
/// Returns SQLITE_OK (0) when applied.
int diary_push_sqlite_disable_memory_statistics(void);

#endif
