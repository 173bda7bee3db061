#include "CFerrySQLite.h"

#include <sqlite3.h>

int cferry_sqlite_configure(void) {
    int result = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    if (result != SQLITE_OK) return result;
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
