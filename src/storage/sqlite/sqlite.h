/* sqlite.h - the embedded SQLite storage backend (sqlite.c), the
 * default: durable, one machine. */
#ifndef CKUBE_STORAGE_SQLITE_SQLITE_H
#define CKUBE_STORAGE_SQLITE_SQLITE_H

#include <stdbool.h>

#include "storage/storage.h"

/* Opens the SQLite backend in `dir` (created if missing; the database is
 * DIR/state.db in WAL mode with synchronous=FULL). On failure returns NULL
 * and, when err is given, sets *err to a message (malloc'd; the caller
 * frees it). */
storage *storage_sqlite_open(const char *dir, char **err);

/* The files of a store under its directory. */
#define STORAGE_SQLITE_DB "state.db"
#define STORAGE_SQLITE_LOCK "state.lock"
/* meta.schema of the tables sqlite.c creates (and snapshot.c checks). */
#define STORAGE_SQLITE_SCHEMA_VERSION 1

/* Takes the store's lock: an exclusive flock on DIR/state.lock (created
 * if missing; DIR must exist), which a running storage_sqlite_open holds
 * for the store's life. Returns the descriptor that holds it (the caller
 * closes it to release the lock; close-on-exec), or -1 with *err set
 * (malloc'd) and *busy (when given) true if another process holds it.
 * Programs that must not run beside a server on the same store (`ckube
 * restore`, `ckube migrate`) take it; `ckube backup` does not. */
int storage_sqlite_lock(const char *dir, bool *busy, char **err);

#endif
