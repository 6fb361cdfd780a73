#include "CSQLiteSetup.h"

#include <sqlite3.h>

int diary_push_sqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
