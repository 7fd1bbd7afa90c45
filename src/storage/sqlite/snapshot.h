/* snapshot.h - a SQLite store as one file: the online copy behind
 * `ckube backup`, the check and atomic install behind `ckube restore`
 * (snapshot.c). They sit beside sqlite.c because they know its schema
 * and its lock; they never open the store as a storage backend.
 *
 * A snapshot holds the objects only (the `kv` and `meta` tables), as an
 * etcd snapshot does: the cluster's certificates and keys in DIR/pki are
 * separate files the user keeps alongside.
 *
 * Errors: each function returns 0 or -1 with *err (when err is given)
 * set to a one-line message, malloc'd, which the caller frees. Files are
 * made with mode 0600: a store holds Secrets. */
#ifndef CKUBE_STORAGE_SQLITE_SNAPSHOT_H
#define CKUBE_STORAGE_SQLITE_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

/* What a snapshot holds (filled on success). */
typedef struct storage_sqlite_info {
    int64_t rev;       /* the store's revision (the newest resourceVersion) */
    int64_t compacted; /* history is kept after this revision */
    int64_t objects;   /* live keys */
    int64_t bytes;     /* size of the file */
} storage_sqlite_info;

/* Writes a consistent copy of DIR/state.db to `file` while a server may
 * be writing to the store: one read transaction's snapshot, copied to
 * FILE.tmp, checked (storage_sqlite_check), fsync'd, renamed over `file`
 * and the directory fsync'd. The store is only read, and no lock is
 * taken. Refuses when DIR/state.db is missing, and when `file` exists
 * unless `force`. `out` may be NULL. */
int storage_sqlite_backup(const char *dir, const char *file, bool force, storage_sqlite_info *out,
                          char **err);

/* Checks that `file` is a ckube store, without changing its contents:
 * SQLite's integrity_check passes, the tables and index are those
 * sqlite.c makes, meta's schema version is STORAGE_SQLITE_SCHEMA_VERSION
 * and no row is newer than meta's revision. Opens it read-write (a
 * WAL-mode file needs its -shm), so give it a file nobody else has open:
 * the copies backup and restore make. `out` may be NULL. */
int storage_sqlite_check(const char *file, storage_sqlite_info *out, char **err);

/* Installs `file` as DIR/state.db (DIR is made if missing): takes the
 * store's lock (storage_sqlite_lock) for the whole install, so it
 * refuses while a server runs on DIR (*busy set, when given) and no
 * server starts on DIR while it works; refuses an existing DIR/state.db
 * unless `force`. Then copies `file` to DIR/state.db.tmp, fsyncs it,
 * checks the copy (storage_sqlite_check), removes the old store's
 * -wal and -shm (a stale WAL would be replayed onto the new file),
 * renames the copy to DIR/state.db and fsyncs DIR. `out` may be NULL. */
int storage_sqlite_restore(const char *file, const char *dir, bool force, bool *busy,
                           storage_sqlite_info *out, char **err);

#endif
