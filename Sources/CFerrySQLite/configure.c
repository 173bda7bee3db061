#include "CFerrySQLite.h"

#include <sqlite3.h>

int cferry_sqlite_configure(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
