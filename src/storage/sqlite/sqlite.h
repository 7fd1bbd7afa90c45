/* sqlite.h - the embedded SQLite storage backend (sqlite.c), the
 * default: durable, one machine. */
#ifndef CKUBE_STORAGE_SQLITE_SQLITE_H
#define CKUBE_STORAGE_SQLITE_SQLITE_H

#include "storage/storage.h"

/* Opens the SQLite backend in `dir` (created if missing; the database is
 * DIR/state.db in WAL mode with synchronous=FULL). On failure returns NULL
 * and, when err is given, sets *err to a message (malloc'd; the caller
 * frees it). */
storage *storage_sqlite_open(const char *dir, char **err);

#endif
