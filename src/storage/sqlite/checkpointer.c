/* checkpointer.c - the store's WAL checkpointed on a thread of its own
 * (see checkpointer.h).
 *
 * The writer's WAL hook runs on whichever thread just committed with the
 * writer connection (the committer, or compaction under the commit
 * lock); it asks the thread (`wanted`, a signal), or decides the writer
 * finishes the WAL itself (the header's policy). When the writer would
 * finish while the thread's checkpoint is under way it sets `yield`: the
 * thread starts no other, and the next commit finishes. The thread waits
 * for `wanted`, then runs one PASSIVE checkpoint on its own connection;
 * asks that arrive during a checkpoint make it run one more afterwards,
 * not one per ask, and it records where the checkpoint ended (`log`,
 * `copied`) for the hook. A busy answer (the other side holds the
 * checkpoint lock) is not an error: whoever holds it is copying the same
 * frames. */
#include "storage/sqlite/checkpointer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

struct checkpointer {
    char *path;
    sqlite3 *writer; /* borrowed: the hook's */
    sqlite3 *db;     /* the thread's own connection */
    pthread_t thread;
    pthread_mutex_t mu; /* guards the fields down to `copied` */
    pthread_cond_t cv;
    bool wanted, stopping;
    bool running; /* a checkpoint of the thread's is under way */
    /* The writer wants to finish the WAL itself: start no checkpoint
     * until it has. */
    bool yield;
    /* The WAL's size and its pages copied when the thread's last
     * checkpoint ended (SQLite's pnLog and pnCkpt). */
    int log, copied;
    /* The hook's own (hooks run one at a time, under the commit lock):
     * the WAL's size when it last asked; and after the previous commit,
     * which the metrics' reader reads too (hence atomic). */
    int asked_at;
    _Atomic int wal_pages;
    _Atomic uint64_t background, inline_;
};

/* A checkpoint's result worth a warning: anything but done or busy. */
static void warn_unless_busy(sqlite3 *db, int rc, const char *who)
{
    if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
        CKUBE_WARN("storage: %s checkpoint of %s: %s", who, sqlite3_db_filename(db, "main"),
                   sqlite3_errmsg(db));
}

/* Asks the thread for a checkpoint. Called with c->mu held. */
static void ask(checkpointer *c)
{
    if (!c->wanted) {
        c->wanted = true;
        pthread_cond_signal(&c->cv);
    }
}

/* The writer's own checkpoint, on the writer's thread. */
static void finish_inline(checkpointer *c, sqlite3 *db, const char *schema)
{
    int log = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    if (rc == SQLITE_OK && copied > 0)
        atomic_fetch_add_explicit(&c->inline_, 1, memory_order_relaxed);
    warn_unless_busy(db, rc, "writer");
    pthread_mutex_lock(&c->mu);
    c->yield = rc == SQLITE_BUSY; /* the next commit tries again */
    if (!c->yield && c->wanted)
        pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* The writer's WAL hook: `pages` is the WAL's size after the commit. */
static int wal_hook(void *arg, sqlite3 *db, const char *schema, int pages)
{
    checkpointer *c = arg;
    if (pages < c->asked_at) /* the WAL started over */
        c->asked_at = 0;
    int prev = atomic_load_explicit(&c->wal_pages, memory_order_relaxed);
    int added = pages > prev ? pages - prev : pages; /* by this commit */
    atomic_store_explicit(&c->wal_pages, pages, memory_order_relaxed);
    if (pages >= CHECKPOINTER_LIMIT) {
        finish_inline(c, db, schema);
        return SQLITE_OK;
    }
    pthread_mutex_lock(&c->mu);
    bool finish = false;
    if (pages >= CHECKPOINTER_INLINE) {
        /* Left to copy: from where the thread's last checkpoint ended,
         * if that was this WAL (one that started over since is smaller
         * than the WAL was then). The writer finishes when that is about
         * this commit's own pages. */
        int left = c->log <= pages ? pages - c->copied : pages;
        if (left > added + CHECKPOINTER_REST) {
            c->yield = false; /* too much left for the writer */
            ask(c);           /* the thread catches up, commit after commit */
        } else if (c->running)
            c->yield = true; /* finish once this checkpoint ends */
        else
            finish = true;
    } else if (pages >= c->asked_at + CHECKPOINTER_START) {
        c->asked_at = pages;
        ask(c);
    }
    pthread_mutex_unlock(&c->mu);
    if (finish)
        finish_inline(c, db, schema);
    return SQLITE_OK; /* a hook's error would fail the commit */
}

static void *checkpointer_main(void *p)
{
    pthread_setname_np(pthread_self(), "ckube-ckpt"); /* top -H, perf, gdb */
    checkpointer *c = p;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while ((!c->wanted || c->yield) && !c->stopping)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stopping)
            break;
        c->wanted = false;
        c->running = true;
        int before = c->copied;
        pthread_mutex_unlock(&c->mu);
        int log = 0, copied = 0;
        int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        warn_unless_busy(c->db, rc, "background");
        pthread_mutex_lock(&c->mu);
        c->running = false;
        if (rc == SQLITE_OK) {
            if (copied > 0 && (copied != before || log != c->log)) /* it copied */
                atomic_fetch_add_explicit(&c->background, 1, memory_order_relaxed);
            c->log = log;
            c->copied = copied;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

checkpointer *checkpointer_start(const char *path, sqlite3 *writer, char **err)
{
    checkpointer *c = xcalloc(1, sizeof *c);
    c->path = xstrdup(path);
    c->writer = writer;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    /* NOMUTEX: the connection is this thread's alone. No busy timeout: a
     * passive checkpoint never waits for one anyway. */
    int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "cannot open %s for checkpoints: %s", path,
                       c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        goto fail;
    }
    /* No lookaside slots (120 KB per connection by default, for the
     * small allocations of statements this connection hardly runs), and
     * a page cache of a few pages: a checkpoint copies through a buffer
     * of its own. An idle server's resident set would carry both. */
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 0, 0);
    sqlite3_exec(c->db, "PRAGMA cache_size=8", NULL, NULL, NULL);
    /* A connection finds the store in WAL mode when it first reads it;
     * until then (SQLite before 3.43) a checkpoint on it does nothing.
     * The header is read, not the schema (nothing here needs it). */
    rc = sqlite3_exec(c->db, "PRAGMA schema_version", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "cannot read %s for checkpoints: %s", path, sqlite3_errmsg(c->db));
        goto fail;
    }
    rc = pthread_create(&c->thread, NULL, checkpointer_main, c);
    if (rc != 0) {
        ckube__set_err(err, "cannot start the checkpointer thread: %s", strerror(rc));
        goto fail;
    }
    /* Replaces SQLite's auto-checkpoint, itself a WAL hook. */
    sqlite3_wal_hook(writer, wal_hook, c);
    return c;
fail:
    sqlite3_close(c->db);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->path);
    free(c);
    return NULL;
}

void checkpointer_counts_get(checkpointer *c, checkpointer_counts *out)
{
    out->background = atomic_load(&c->background);
    out->inline_ = atomic_load(&c->inline_);
    out->wal_pages = atomic_load_explicit(&c->wal_pages, memory_order_relaxed);
}

void checkpointer_stop(checkpointer *c)
{
    if (!c)
        return;
    sqlite3_wal_hook(c->writer, NULL, NULL);
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    if (sqlite3_close(c->db) != SQLITE_OK)
        CKUBE_ERROR("storage: closing %s's checkpointer: %s", c->path, sqlite3_errmsg(c->db));
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->path);
    free(c);
}
