/* checkpointer.h - copies the store's WAL back into its database file on
 * a thread of its own, not on the committer's.
 *
 * Why: SQLite checkpoints by default on the connection that commits, as
 * soon as a commit leaves 1,000 pages in the WAL: the commit that crosses
 * the line copies them all and fsyncs the database file before its
 * writes are acknowledged. That was the p99 of durable creates (with
 * checkpoints off, 9.4-10.3 ms became 4.8-6.4 ms; docs/performance.md,
 * "Durable creates"). Here the writer's WAL hook only asks this thread,
 * which runs a PASSIVE checkpoint on its own connection beside the
 * commits (SQLite allows one writer and one checkpointer at once).
 *
 * A passive checkpoint copies the frames committed when it started; the
 * WAL starts over from its beginning only when a write transaction
 * begins with every frame copied, which commits arriving during the copy
 * prevent. So once the WAL holds CHECKPOINTER_INLINE pages the writer
 * finishes it itself, but only when this thread has copied all but the
 * last commit's pages and CHECKPOINTER_REST more, and is idle (until
 * then the hook asks the thread at every commit, so it catches up): the
 * writer's checkpoint is then short, and the next transaction restarts
 * the WAL. At
 * CHECKPOINTER_LIMIT pages the writer checkpoints whatever is left, so
 * the WAL (and the time a crash recovery reads it) stays bounded.
 *
 * The thread is asked every CHECKPOINTER_START pages before that, as
 * SQLite's own checkpoints run: back-to-back checkpoints of a few commits
 * each copy the same hot pages (the meta row's, the table's last leaf,
 * the indexes' upper levels) and sync the database file each time
 * (measured: 5-11 us more server CPU per create than asking per 1,000
 * pages, in three pairs of runs alternating with the build before).
 *
 * Durability is unchanged: a commit is durable once its WAL frames are
 * fsync'd (synchronous=FULL); checkpoints only move committed pages. */
#ifndef CKUBE_STORAGE_SQLITE_CHECKPOINTER_H
#define CKUBE_STORAGE_SQLITE_CHECKPOINTER_H

#include <sqlite3.h>
#include <stdint.h>

/* WAL pages: the thread is asked every START of them (SQLite's own
 * default for wal_autocheckpoint); from INLINE on the writer finishes the
 * WAL once at most the last commit's and REST more are left to copy; at
 * LIMIT it does regardless. */
#define CHECKPOINTER_START 1000
#define CHECKPOINTER_INLINE 4000
#define CHECKPOINTER_REST 256
#define CHECKPOINTER_LIMIT 16000

typedef struct checkpointer checkpointer;

/* Starts the thread on its own connection to the database at `path`
 * (copied) and installs the WAL hook on `writer` (borrowed until
 * checkpointer_stop; its SQLite auto-checkpoint is replaced). NULL with
 * *err set (caller frees) on failure; the writer is then left as it was. */
checkpointer *checkpointer_start(const char *path, sqlite3 *writer, char **err);

/* Checkpoints since the start that copied pages: by the thread, and by
 * the writer itself; and the WAL's pages after the last commit (0 before
 * the first), which the policy above keeps under CHECKPOINTER_LIMIT plus
 * one commit's. */
typedef struct checkpointer_counts {
    uint64_t background;
    uint64_t inline_;
    int wal_pages;
} checkpointer_counts;
void checkpointer_counts_get(checkpointer *c, checkpointer_counts *out);

/* Removes the hook, stops the thread (a checkpoint under way finishes)
 * and closes its connection. NULL is a no-op. Call it from the writer's
 * thread or with the writer idle, before closing the writer. */
void checkpointer_stop(checkpointer *c);

#endif
