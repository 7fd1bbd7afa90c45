/* sqlite.c - the embedded SQLite storage backend.
 *
 * Schema (log-structured, like kine): every successful write is one row of
 * `kv` whose id is its revision. A delete is a tombstone row (deleted = 1).
 * The state of a key is its highest-id row, found through the (key, id)
 * index; the rows in id order are the watch history. `meta` holds the
 * revision counter (so revisions are never reused, even when compaction
 * removes the newest row, a tombstone) and the compacted revision.
 *
 * Connections: one writer, used only with the commit lock held (by the
 * committer thread and by compaction), and a pool of readers so that reads
 * run concurrently with commits (WAL) and with each other, and so that
 * callbacks may read re-entrantly. The database is in WAL mode with
 * synchronous=FULL: COMMIT returns after the WAL is fsync'd, so a write is
 * acknowledged only once durable.
 *
 * An flock on DIR/state.lock (storage_sqlite_lock) keeps a second process
 * from opening the same store (the revision counter and watchers live in
 * this process), and `ckube restore` and `ckube migrate` from running
 * beside the server. Online copies (`ckube backup`) are snapshot.c's. */
#include "storage/sqlite/sqlite.h"
#include "storage/sqlite/checkpointer.h"
#include "storage/sqlite/vfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

#define SQ_MAX_BATCH 512
#define SQ_REPLAY_CHUNK 256
#define SQ_MAX_IDLE_READERS 8
#define SQ_BUSY_TIMEOUT_MS 5000
#define SQ_SCHEMA_VERSION STORAGE_SQLITE_SCHEMA_VERSION
/* Address space mapped while a range runs (SQLite maps at most the file). */
#define SQ_RANGE_MMAP "4294967296"

static const char SQ_SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS kv ("
    " id INTEGER PRIMARY KEY," /* the revision of this write */
    " key TEXT NOT NULL,"
    " value BLOB,"
    " create_rev INTEGER NOT NULL,"
    " prev_rev INTEGER NOT NULL," /* previous row of this key, 0 if none */
    " deleted INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS kv_key_id ON kv(key, id);"
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) "
    " WITHOUT ROWID;"
    "INSERT OR IGNORE INTO meta VALUES ('schema', 1), ('rev', 0), ('compacted', 0);";

/* Statements of a read connection. */
struct sq_reader {
    sqlite3 *db;
    sqlite3_stmt *begin, *end, *get, *meta, *range, *hist;
    struct sq_reader *next; /* idle pool link */
};

struct sq_storage {
    storage base; /* first: storage * and sq_storage * convert */
    char *path;   /* DIR/state.db */
    int lock_fd;
    storage_committer *committer;
    checkpointer *ckpt; /* the WAL copied back on a thread of its own */

    /* Writer connection and statements: commit lock only. */
    sqlite3 *wdb;
    sqlite3_stmt *w_begin, *w_commit, *w_rollback, *w_latest, *w_insert, *w_get_meta, *w_set_meta,
        *w_compact;

    pthread_mutex_t pool_mu; /* guards pool, npool */
    struct sq_reader *pool;
    size_t npool;

    /* Latest committed and compacted revisions, for lock-free reads. */
    _Atomic int64_t rev;
    _Atomic int64_t compacted;
};

static struct sq_storage *sq_of(storage *st)
{
    return (struct sq_storage *)st;
}

static char *dup_bytes(const void *p, size_t len)
{
    char *d = xmalloc(len + 1);
    if (len)
        memcpy(d, p, len);
    d[len] = '\0';
    return d;
}

/* Steps a statement that returns no rows, then resets it. */
static int step_done(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **out)
{
    return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL);
}

/* vfs: NULL for the default. */
static int open_conn(const char *path, int flags, const char *vfs, sqlite3 **out)
{
    *out = NULL;
    int rc = sqlite3_open_v2(path, out, flags | SQLITE_OPEN_NOMUTEX, vfs);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(*out, SQ_BUSY_TIMEOUT_MS);
    return rc;
}

/* Reads meta.value for `name` with `stmt` (SELECT value FROM meta WHERE
 * name = ?1); -1 on error. */
static int64_t read_meta(sqlite3_stmt *stmt, const char *name)
{
    int64_t v = -1;
    sqlite3_bind_text(stmt, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        v = sqlite3_column_int64(stmt, 0);
    sqlite3_reset(stmt);
    return v;
}

/* ---- read connections ---- */

static void reader_close(struct sq_reader *r)
{
    if (!r)
        return;
    sqlite3_finalize(r->begin);
    sqlite3_finalize(r->end);
    sqlite3_finalize(r->get);
    sqlite3_finalize(r->meta);
    sqlite3_finalize(r->range);
    sqlite3_finalize(r->hist);
    sqlite3_close(r->db);
    free(r);
}

static struct sq_reader *reader_open(struct sq_storage *s)
{
    struct sq_reader *r = xcalloc(1, sizeof *r);
    int rc = open_conn(s->path, SQLITE_OPEN_READWRITE, NULL, &r->db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(r->db, "PRAGMA query_only=1", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = prepare(r->db, "BEGIN", &r->begin);
    if (rc == SQLITE_OK)
        rc = prepare(r->db, "COMMIT", &r->end);
    if (rc == SQLITE_OK)
        rc = prepare(r->db,
                     "SELECT value, create_rev, id, deleted FROM kv WHERE key = ?1"
                     " ORDER BY id DESC LIMIT 1",
                     &r->get);
    if (rc == SQLITE_OK)
        rc = prepare(r->db, "SELECT value FROM meta WHERE name = ?1", &r->meta);
    /* The latest row of each key from ?1 on, in key order (the caller
     * stops at the end of the prefix and skips tombstones). One statement
     * rather than a lookup per key: the (key, id) index answers "is there
     * a newer row" and the table row is read only for rows that pass. */
    if (rc == SQLITE_OK)
        rc = prepare(r->db,
                     "SELECT key, id, value, create_rev, deleted FROM kv AS a WHERE key >= ?1"
                     " AND NOT EXISTS (SELECT 1 FROM kv AS b WHERE b.key = a.key AND b.id > a.id)"
                     " ORDER BY key",
                     &r->range);
    if (rc == SQLITE_OK)
        rc = prepare(r->db,
                     "SELECT id, key, value, create_rev, deleted FROM kv WHERE id > ?1"
                     " ORDER BY id LIMIT ?2",
                     &r->hist);
    if (rc != SQLITE_OK) {
        CKUBE_ERROR("storage: cannot open read connection to %s: %s", s->path,
                    r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
        reader_close(r);
        return NULL;
    }
    return r;
}

/* Takes an idle reader or opens a new one. NULL on failure. */
static struct sq_reader *reader_get(struct sq_storage *s)
{
    pthread_mutex_lock(&s->pool_mu);
    struct sq_reader *r = s->pool;
    if (r) {
        s->pool = r->next;
        s->npool--;
    }
    pthread_mutex_unlock(&s->pool_mu);
    return r ? r : reader_open(s);
}

static void reader_put(struct sq_storage *s, struct sq_reader *r)
{
    pthread_mutex_lock(&s->pool_mu);
    if (s->npool < SQ_MAX_IDLE_READERS) {
        r->next = s->pool;
        s->pool = r;
        s->npool++;
        r = NULL;
    }
    pthread_mutex_unlock(&s->pool_mu);
    reader_close(r);
}

/* Ends the read transaction if one is open (also after errors). */
static void reader_end(struct sq_reader *r)
{
    if (!sqlite3_get_autocommit(r->db))
        step_done(r->end);
}

/* Column `col` as a NUL-terminated buffer (sqlite adds the NUL to blobs
 * too) and its length; "" for NULL. Borrowed until the next step/reset. */
static const char *column_value(sqlite3_stmt *stmt, int col, size_t *len)
{
    const char *v = (const char *)sqlite3_column_text(stmt, col);
    *len = (size_t)sqlite3_column_bytes(stmt, col);
    if (!v) {
        *len = 0;
        return "";
    }
    return v;
}

/* ---- writes (committer thread, commit lock held) ---- */

struct sq_latest {
    bool found; /* some row exists (maybe a tombstone) */
    bool live;  /* the latest row is not a tombstone */
    int64_t id; /* its revision */
    int64_t create_rev;
};

static int sq_latest(struct sq_storage *s, const char *key, struct sq_latest *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_bind_text(s->w_latest, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s->w_latest);
    if (rc == SQLITE_ROW) {
        out->found = true;
        out->id = sqlite3_column_int64(s->w_latest, 0);
        out->create_rev = sqlite3_column_int64(s->w_latest, 1);
        out->live = sqlite3_column_int(s->w_latest, 2) == 0;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(s->w_latest);
    return rc;
}

/* Checks op's precondition; sets result fields and returns false if it
 * fails. */
static bool sq_precondition(storage_op *op, const struct sq_latest *l)
{
    if (op->type == STORAGE_OP_CREATE) {
        if (l->live) {
            op->result = STORAGE_ERR_EXISTS;
            op->current_mod_rev = l->id;
            return false;
        }
        return true;
    }
    if (!l->live) {
        op->result = STORAGE_ERR_NOT_FOUND;
        return false;
    }
    if (op->expect_mod_rev != 0 && op->expect_mod_rev != l->id) {
        op->result = STORAGE_ERR_CONFLICT;
        op->current_mod_rev = l->id;
        return false;
    }
    return true;
}

static int sq_insert(struct sq_storage *s, const storage_op *op, int64_t rev, int64_t create_rev,
                     int64_t prev_rev)
{
    sqlite3_stmt *st = s->w_insert;
    bool del = op->type == STORAGE_OP_DELETE;
    sqlite3_bind_int64(st, 1, rev);
    sqlite3_bind_text(st, 2, op->key, -1, SQLITE_STATIC);
    if (del)
        sqlite3_bind_null(st, 3);
    else /* a non-NULL pointer so that "" stays a zero-length blob */
        sqlite3_bind_blob64(st, 3, op->value ? op->value : "", op->value_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, create_rev);
    sqlite3_bind_int64(st, 5, prev_rev);
    sqlite3_bind_int(st, 6, del);
    return step_done(st);
}

static int sq_set_meta(struct sq_storage *s, const char *name, int64_t v)
{
    sqlite3_bind_text(s->w_set_meta, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s->w_set_meta, 2, v);
    return step_done(s->w_set_meta);
}

static void sq_rollback(struct sq_storage *s, const char *what)
{
    CKUBE_ERROR("storage: sqlite %s failed: %s", what, sqlite3_errmsg(s->wdb));
    if (!sqlite3_get_autocommit(s->wdb))
        step_done(s->w_rollback);
}

/* One group = one IMMEDIATE transaction. Preconditions are checked through
 * the writer connection, which sees the group's own earlier rows. */
static int sq_apply(void *ctx, storage_op **ops, size_t n, storage_event *events, size_t *nevents)
{
    struct sq_storage *s = ctx;
    size_t k = 0;
    if (step_done(s->w_begin) != SQLITE_OK) {
        sq_rollback(s, "BEGIN");
        return STORAGE_ERR_IO;
    }
    int64_t rev = read_meta(s->w_get_meta, "rev");
    int64_t start = rev;
    if (rev < 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        storage_op *op = ops[i];
        struct sq_latest l;
        if (sq_latest(s, op->key, &l) != SQLITE_OK)
            goto fail;
        if (!sq_precondition(op, &l))
            continue;
        int64_t create_rev = op->type == STORAGE_OP_CREATE ? rev + 1 : l.create_rev;
        if (sq_insert(s, op, rev + 1, create_rev, l.found ? l.id : 0) != SQLITE_OK)
            goto fail;
        rev++;
        op->result = STORAGE_OK;
        op->rev = rev;
        op->create_rev = create_rev;
        bool put = op->type != STORAGE_OP_DELETE;
        events[k++] = (storage_event){.type = put ? STORAGE_EVENT_PUT : STORAGE_EVENT_DELETE,
                                      .key = op->key,
                                      .value = put ? (op->value ? op->value : "") : NULL,
                                      .value_len = put ? op->value_len : 0,
                                      .rev = rev,
                                      .create_rev = create_rev,
                                      .hint = put ? op->hint : NULL};
    }
    if (rev != start && sq_set_meta(s, "rev", rev) != SQLITE_OK)
        goto fail;
    if (step_done(s->w_commit) != SQLITE_OK)
        goto fail;
    atomic_store(&s->rev, rev);
    *nevents = k;
    return STORAGE_OK;
fail:
    sq_rollback(s, "write transaction");
    return STORAGE_ERR_IO;
}

/* ---- watch history ---- */

/* One chunk of history, copied out of the read transaction. */
struct sq_chunk {
    storage_event ev[SQ_REPLAY_CHUNK];
    char *buf[SQ_REPLAY_CHUNK]; /* owned: key NUL value NUL */
    size_t n;
};

static void chunk_clear(struct sq_chunk *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->buf[i]);
    c->n = 0;
}

static int chunk_add_row(struct sq_chunk *c, sqlite3_stmt *st)
{
    const char *key = (const char *)sqlite3_column_text(st, 1);
    size_t klen = key ? strlen(key) : 0, vlen;
    const char *value = column_value(st, 2, &vlen);
    bool del = sqlite3_column_int(st, 4) != 0;
    char *b = xmalloc(klen + vlen + 2);
    memcpy(b, key ? key : "", klen + 1);
    memcpy(b + klen + 1, value, vlen + 1);
    c->buf[c->n] = b;
    c->ev[c->n] = (storage_event){.type = del ? STORAGE_EVENT_DELETE : STORAGE_EVENT_PUT,
                                  .key = b,
                                  .value = del ? NULL : b + klen + 1,
                                  .value_len = del ? 0 : vlen,
                                  .rev = sqlite3_column_int64(st, 0),
                                  .create_rev = sqlite3_column_int64(st, 3)};
    c->n++;
    return STORAGE_OK;
}

/* Reads up to SQ_REPLAY_CHUNK events after `from` in one read transaction,
 * checking in the same snapshot that they have not been compacted. */
static int sq_read_chunk(struct sq_storage *s, int64_t from, struct sq_chunk *c)
{
    struct sq_reader *r = reader_get(s);
    if (!r)
        return STORAGE_ERR_IO;
    int rc = STORAGE_OK;
    if (step_done(r->begin) != SQLITE_OK) {
        rc = STORAGE_ERR_IO;
        goto out;
    }
    int64_t compacted = read_meta(r->meta, "compacted");
    if (compacted < 0) {
        rc = STORAGE_ERR_IO;
        goto out;
    }
    if (from < compacted) {
        rc = STORAGE_ERR_COMPACTED;
        goto out;
    }
    sqlite3_bind_int64(r->hist, 1, from);
    sqlite3_bind_int64(r->hist, 2, SQ_REPLAY_CHUNK);
    int src = SQLITE_DONE;
    while (rc == STORAGE_OK && (src = sqlite3_step(r->hist)) == SQLITE_ROW)
        rc = chunk_add_row(c, r->hist);
    if (rc == STORAGE_OK && src != SQLITE_DONE)
        rc = STORAGE_ERR_IO;
    sqlite3_reset(r->hist);
out:
    if (rc == STORAGE_ERR_IO)
        CKUBE_ERROR("storage: reading history: %s", sqlite3_errmsg(r->db));
    reader_end(r);
    reader_put(s, r);
    return rc;
}

/* Unlocked pass: replays up to the revision current at the start (so it
 * cannot chase a busy writer forever). Locked pass: replays to the end. */
static int sq_replay(void *ctx, int64_t *from, int locked, storage_watch_fn fn, void *arg)
{
    struct sq_storage *s = ctx;
    int64_t stop = locked ? INT64_MAX : atomic_load(&s->rev);
    struct sq_chunk *c = xcalloc(1, sizeof *c);
    int rc = STORAGE_OK;
    while (*from < stop) {
        rc = sq_read_chunk(s, *from, c);
        if (rc == STORAGE_OK && c->n > 0) {
            fn(arg, c->ev, c->n);
            *from = c->ev[c->n - 1].rev;
        }
        size_t got = c->n;
        chunk_clear(c);
        if (rc != STORAGE_OK || got < SQ_REPLAY_CHUNK)
            break;
    }
    free(c);
    return rc;
}

static const struct storage_committer_hooks sq_hooks = {.apply = sq_apply, .replay = sq_replay};

/* ---- backend ops ---- */

static int sq_submit(storage *st, storage_op *op)
{
    return storage_committer_submit(sq_of(st)->committer, op);
}

static int sq_get(storage *st, const char *key, storage_kv *out)
{
    struct sq_storage *s = sq_of(st);
    struct sq_reader *r = reader_get(s);
    if (!r)
        return STORAGE_ERR_IO;
    int rc;
    sqlite3_bind_text(r->get, 1, key, -1, SQLITE_STATIC);
    int src = sqlite3_step(r->get);
    if (src == SQLITE_ROW && sqlite3_column_int(r->get, 3) == 0) {
        size_t len;
        const char *v = column_value(r->get, 0, &len);
        out->key = dup_bytes(key, strlen(key));
        out->value = dup_bytes(v, len);
        out->value_len = len;
        out->create_rev = sqlite3_column_int64(r->get, 1);
        out->mod_rev = sqlite3_column_int64(r->get, 2);
        rc = STORAGE_OK;
        if (!out->key || !out->value) {
            storage_kv_release(out);
            rc = STORAGE_ERR_NOMEM;
        }
    } else if (src == SQLITE_ROW || src == SQLITE_DONE) {
        rc = STORAGE_ERR_NOT_FOUND;
    } else {
        CKUBE_ERROR("storage: get %s: %s", key, sqlite3_errmsg(r->db));
        rc = STORAGE_ERR_IO;
    }
    sqlite3_reset(r->get);
    reader_put(s, r);
    return rc;
}

/* Calls fn for each live key under prefix; runs inside r's read
 * transaction. Returns a STORAGE_ERR_* or OK. */
static int sq_range_rows(struct sq_reader *r, const char *prefix, storage_range_fn fn, void *arg)
{
    size_t plen = strlen(prefix);
    int rc = STORAGE_OK, src;
    sqlite3_bind_text(r->range, 1, prefix, -1, SQLITE_STATIC);
    while ((src = sqlite3_step(r->range)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(r->range, 0);
        if (!key || strncmp(key, prefix, plen) != 0)
            break; /* past the prefix: keys come in byte order */
        if (sqlite3_column_int(r->range, 4) != 0)
            continue; /* deleted */
        size_t len;
        const char *v = column_value(r->range, 2, &len);
        storage_kv kv = {.key = (char *)key,
                         .value = (char *)v,
                         .value_len = len,
                         .create_rev = sqlite3_column_int64(r->range, 3),
                         .mod_rev = sqlite3_column_int64(r->range, 1)};
        if (fn(arg, &kv)) {
            src = SQLITE_DONE;
            break;
        }
    }
    if (src != SQLITE_ROW && src != SQLITE_DONE)
        rc = STORAGE_ERR_IO;
    sqlite3_reset(r->range);
    return rc;
}

static int sq_range(storage *st, const char *prefix, storage_range_fn fn, void *arg,
                    int64_t *rev_out)
{
    struct sq_storage *s = sq_of(st);
    struct sq_reader *r = reader_get(s);
    if (!r)
        return STORAGE_ERR_IO;
    int rc = STORAGE_ERR_IO;
    /* A range reads much of the database once (`ckube migrate`; the
     * server's start-up reads with sq_load): map the file for it rather
     * than copying every page through pread into the page cache, and
     * unmap it afterwards, so the mapping does not stay in the resident
     * set. In key order the table's pages come in no order, so the whole
     * file is mapped, not windows of it (vfs.h). */
    sqlite3_exec(r->db, "PRAGMA mmap_size=" SQ_RANGE_MMAP, NULL, NULL, NULL);
    /* One read transaction: the revision and the rows are one snapshot. */
    if (step_done(r->begin) == SQLITE_OK) {
        int64_t rev = read_meta(r->meta, "rev");
        if (rev >= 0) {
            rc = sq_range_rows(r, prefix, fn, arg);
            if (rc == STORAGE_OK && rev_out)
                *rev_out = rev;
        }
    }
    if (rc == STORAGE_ERR_IO)
        CKUBE_ERROR("storage: range %s: %s", prefix, sqlite3_errmsg(r->db));
    reader_end(r);
    sqlite3_exec(r->db, "PRAGMA mmap_size=0", NULL, NULL, NULL);
    reader_put(s, r);
    return rc;
}

static int64_t sq_current_rev(storage *st)
{
    return atomic_load(&sq_of(st)->rev);
}

static int64_t sq_compacted_rev(storage *st)
{
    return atomic_load(&sq_of(st)->compacted);
}

static int sq_watch(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg)
{
    return storage_committer_watch(sq_of(st)->committer, from_rev, fn, arg);
}

struct sq_compact_req {
    struct sq_storage *s;
    int64_t rev;
};

/* Runs under the commit lock, on the writer connection. */
static int sq_compact_locked(void *p)
{
    struct sq_compact_req *req = p;
    struct sq_storage *s = req->s;
    if (req->rev > atomic_load(&s->rev))
        return STORAGE_ERR_INVALID;
    if (req->rev <= atomic_load(&s->compacted))
        return STORAGE_OK;
    if (step_done(s->w_begin) != SQLITE_OK)
        goto fail;
    sqlite3_bind_int64(s->w_compact, 1, req->rev);
    if (step_done(s->w_compact) != SQLITE_OK)
        goto fail;
    int deleted = sqlite3_changes(s->wdb);
    if (sq_set_meta(s, "compacted", req->rev) != SQLITE_OK)
        goto fail;
    if (step_done(s->w_commit) != SQLITE_OK)
        goto fail;
    atomic_store(&s->compacted, req->rev);
    CKUBE_V(2, "storage: compacted to revision %" PRId64 " (%d rows removed)", req->rev, deleted);
    return STORAGE_OK;
fail:
    sq_rollback(s, "compaction");
    return STORAGE_ERR_IO;
}

static int sq_compact(storage *st, int64_t rev)
{
    struct sq_compact_req req = {.s = sq_of(st), .rev = rev};
    return storage_committer_exclusive(req.s->committer, sq_compact_locked, &req);
}

static void sq_stats(storage *st, storage_stats *out)
{
    struct sq_storage *s = sq_of(st);
    storage_committer_stats(s->committer, out);
    checkpointer_counts n;
    checkpointer_counts_get(s->ckpt, &n);
    out->checkpoints = n.background;
    out->inline_checkpoints = n.inline_;
    out->wal_pages = (uint64_t)n.wal_pages;
}

/* Frees everything but the committer (already stopped or never started). */
static void sq_free(struct sq_storage *s)
{
    checkpointer_stop(s->ckpt);
    sqlite3_finalize(s->w_begin);
    sqlite3_finalize(s->w_commit);
    sqlite3_finalize(s->w_rollback);
    sqlite3_finalize(s->w_latest);
    sqlite3_finalize(s->w_insert);
    sqlite3_finalize(s->w_get_meta);
    sqlite3_finalize(s->w_set_meta);
    sqlite3_finalize(s->w_compact);
    for (struct sq_reader *r = s->pool, *next; r; r = next) {
        next = r->next;
        reader_close(r);
    }
    if (s->wdb && sqlite3_close(s->wdb) != SQLITE_OK)
        CKUBE_ERROR("storage: closing %s: %s", s->path, sqlite3_errmsg(s->wdb));
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    pthread_mutex_destroy(&s->pool_mu);
    free(s->path);
    free(s);
}

/* ---- storage_load: everything, in row order ---- */

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The exclusive upper bound of keys starting with `prefix`: the prefix
 * with its last byte below 0xFF raised by one, or "\xff" (above any UTF-8
 * key) when there is none. Caller frees. */
static char *prefix_end(const char *prefix)
{
    size_t n = strlen(prefix);
    while (n && (unsigned char)prefix[n - 1] == 0xFF)
        n--;
    if (!n)
        return xstrdup("\xff");
    char *e = xstrndup(prefix, n);
    if (e)
        e[n - 1]++;
    return e;
}

/* The ids pass 1 finds: 8 MB at a million keys, mapped rather than
 * malloc'd: glibc raises its mmap threshold to the size of a mapped
 * chunk it frees, and after an 8 MB one the loops' next large buffers
 * come from heaps grown for them. With a malloc'd array the first watch
 * resumed after a start at 1M took 20-27 ms (the build before storage_load:
 * 9-22), mapped 11-21 ms. */
typedef struct id_list {
    int64_t *v;
    size_t n, cap;
} id_list;

static void ids_free(id_list *l)
{
    if (l->v)
        munmap(l->v, l->cap * sizeof *l->v);
    *l = (id_list){0};
}

/* Appends id; false when out of memory. */
static bool ids_push(id_list *l, int64_t id)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 65536, size = ncap * sizeof *l->v;
        void *p =
            l->v ? mremap(l->v, l->cap * sizeof *l->v, size, MREMAP_MAYMOVE)
                 : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return false;
        l->v = p;
        l->cap = ncap;
    }
    l->v[l->n++] = id;
    return true;
}

/* Sorts l's ids (row ids: positive) ascending: least significant digit
 * first, 11 bits per pass, as many passes as the largest id needs (two
 * up to 4M revisions). A million shuffled ids take glibc's qsort 130 ms
 * here and this 10 ms, on the one thread a start has busy at that point
 * (the builders wait for pass 2). Falls back to qsort when the scratch
 * copy cannot be mapped. */
#define ID_DIGIT_BITS 11
static void sort_ids(id_list *l)
{
    size_t n = l->n, size = l->cap * sizeof *l->v;
    int64_t max = 0;
    for (size_t i = 0; i < n; i++)
        max = l->v[i] > max ? l->v[i] : max;
    int64_t *tmp = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED) {
        qsort(l->v, n, sizeof *l->v, cmp_id);
        return;
    }
    int64_t *src = l->v, *dst = tmp;
    for (unsigned shift = 0; shift < 63 && (max >> shift); shift += ID_DIGIT_BITS) {
        size_t count[1u << ID_DIGIT_BITS] = {0};
        const uint64_t mask = (1u << ID_DIGIT_BITS) - 1;
        for (size_t i = 0; i < n; i++)
            count[((uint64_t)src[i] >> shift) & mask]++;
        size_t at = 0;
        for (size_t d = 0; d <= mask; d++) {
            size_t c = count[d];
            count[d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[((uint64_t)src[i] >> shift) & mask]++] = src[i];
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != l->v)
        memcpy(l->v, src, n * sizeof *l->v);
    munmap(tmp, size);
}

/* Pass 1 of sq_load: the newest row id of every key under prefix, from
 * the (key, id) index alone (a covering scan of a few dozen MB at a
 * million keys, no table page read), sorted ascending into *out
 * (the caller frees it with ids_free, also on failure). Tombstones are among them; pass 2 reads
 * their flag. The index gives each key's rows in id order, so the newest is the last row before the
 * key changes (grouping here: GROUP BY with max() costs SQLite five times the scan). */
static int live_ids(sqlite3 *db, const char *prefix, id_list *out)
{
    sqlite3_stmt *st = NULL;
    char *end = prefix_end(prefix);
    int rc = end ? SQLITE_OK : SQLITE_NOMEM;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db,
                                "SELECT key, id FROM kv INDEXED BY kv_key_id"
                                " WHERE key >= ?1 AND key < ?2 ORDER BY key, id",
                                -1, &st, NULL);
    int64_t last = -1;
    size_t klen = 0, kcap = 0;
    char *key = NULL; /* the current key (its newest row so far is `last`) */
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, end, -1, SQLITE_STATIC);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *k = (const char *)sqlite3_column_text(st, 0);
            size_t len = (size_t)sqlite3_column_bytes(st, 0);
            int64_t id = sqlite3_column_int64(st, 1);
            if (last >= 0 && len == klen && !memcmp(k, key, len)) {
                last = id; /* a newer row of the same key */
                continue;
            }
            if (last >= 0 && !ids_push(out, last)) {
                rc = SQLITE_NOMEM;
                break;
            }
            if (len + 1 > kcap) {
                char *p = realloc(key, len + 1);
                if (!p) {
                    rc = SQLITE_NOMEM;
                    break;
                }
                key = p;
                kcap = len + 1;
            }
            memcpy(key, k ? k : "", len);
            klen = len;
            last = id;
        }
        if (rc == SQLITE_DONE)
            rc = last >= 0 && !ids_push(out, last) ? SQLITE_NOMEM : SQLITE_OK;
    }
    sqlite3_finalize(st);
    free(end);
    free(key);
    if (rc == SQLITE_OK && out->n)
        sort_ids(out);
    return rc;
}

/* Pass 2 of sq_load: the table in rowid (= revision) order from the
 * oldest live row, calling fn for each row whose id is in ids (sorted)
 * and that is not a tombstone; stops after the newest. The file is read
 * front to back, where key order would seek a table page per row. */
static int live_rows(sqlite3 *db, const int64_t *ids, size_t n, storage_range_fn fn, void *arg)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT id, key, value, create_rev, deleted FROM kv"
                                " WHERE id >= ?1 ORDER BY id",
                                -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, ids[0]);
    size_t i = 0;
    while (i < n && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        while (i < n && ids[i] < id)
            i++; /* (a row gone since pass 1 cannot be: one transaction) */
        if (i == n || ids[i] != id)
            continue; /* an older row of a key, or another prefix's */
        i++;
        if (sqlite3_column_int(st, 4) != 0)
            continue; /* deleted */
        size_t len;
        const char *v = column_value(st, 2, &len);
        storage_kv kv = {.key = (char *)sqlite3_column_text(st, 1),
                         .value = (char *)v,
                         .value_len = len,
                         .create_rev = sqlite3_column_int64(st, 3),
                         .mod_rev = id};
        if (kv.key && fn(arg, &kv))
            break; /* the caller stops */
    }
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(st);
    return rc;
}

/* storage_load. Two passes in one read transaction (see live_ids and
 * live_rows), on a connection of its own through the window VFS
 * (vfs.h): pass 1 reads the index through pread (its pages lie all
 * over the file, in key order), pass 2 reads the table front to back from
 * memory-mapped windows, so no page is copied and at most a few windows
 * are mapped at a time: the 2 GB of a million objects never count in the
 * resident set of a server building its cache from them. The connection
 * and its statements live for this call: it runs once per start. */
static int sq_load(storage *st, const char *prefix, storage_range_fn fn, void *arg,
                   int64_t *rev_out)
{
    struct sq_storage *s = sq_of(st);
    const char *vfs = vfs_window_name();
    sqlite3 *db = NULL;
    sqlite3_stmt *meta = NULL;
    int64_t rev = -1;
    id_list ids = {0};
    int src = open_conn(s->path, SQLITE_OPEN_READWRITE, vfs, &db);
    if (src == SQLITE_OK)
        src = sqlite3_exec(db, "PRAGMA query_only=1; BEGIN", NULL, NULL, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE name = ?1", -1, &meta, NULL);
    if (src == SQLITE_OK && (rev = read_meta(meta, "rev")) < 0)
        src = SQLITE_ERROR;
    if (src == SQLITE_OK)
        src = live_ids(db, prefix, &ids);
    if (src == SQLITE_OK && ids.n && vfs)
        src = sqlite3_exec(db, "PRAGMA mmap_size=" SQ_RANGE_MMAP, NULL, NULL, NULL);
    if (src == SQLITE_OK && ids.n)
        src = live_rows(db, ids.v, ids.n, fn, arg);
    ids_free(&ids);
    int rc = src == SQLITE_OK      ? STORAGE_OK
             : src == SQLITE_NOMEM ? STORAGE_ERR_NOMEM
                                   : STORAGE_ERR_IO;
    if (rc != STORAGE_OK)
        CKUBE_ERROR("storage: load %s: %s", prefix, db ? sqlite3_errmsg(db) : sqlite3_errstr(src));
    else if (rev_out)
        *rev_out = rev;
    sqlite3_finalize(meta);
    if (db && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static void sq_close(storage *st)
{
    struct sq_storage *s = sq_of(st);
    storage_committer_stop(s->committer);
    sq_free(s);
}

static const struct storage_backend_ops sq_ops = {
    .name = "sqlite",
    .submit = sq_submit,
    .get = sq_get,
    .range = sq_range,
    .load = sq_load,
    .current_rev = sq_current_rev,
    .watch = sq_watch,
    .compact = sq_compact,
    .compacted_rev = sq_compacted_rev,
    .close = sq_close,
    .stats = sq_stats,
};

/* mkdir -p. */
static int make_dirs(const char *dir, char **err)
{
    char *p = xstrdup(dir);
    for (char *q = p + 1;; q++) {
        if (*q != '/' && *q != '\0')
            continue;
        char c = *q;
        *q = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            ckube__set_err(err, "cannot create directory %s: %s", p, strerror(errno));
            free(p);
            return -1;
        }
        *q = c;
        if (c == '\0')
            break;
    }
    free(p);
    return 0;
}

int storage_sqlite_lock(const char *dir, bool *busy, char **err)
{
    if (busy)
        *busy = false;
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/" STORAGE_SQLITE_LOCK, dir) >= sizeof path) {
        ckube__set_err(err, "%s: path too long", dir);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        ckube__set_err(err, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (busy)
            *busy = e == EWOULDBLOCK;
        ckube__set_err(err, "%s is in use by another process (%s)", dir,
                       e == EWOULDBLOCK ? "locked" : strerror(e));
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens the writer connection, sets WAL + synchronous=FULL, creates the
 * schema and prepares the writer statements. */
static int open_writer(struct sq_storage *s, char **err)
{
    /* The writer VFS combines the WAL's frame writes into one system
     * call per commit; it needs synchronous=FULL, set below (vfs.h). */
    int rc =
        open_conn(s->path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs_writer_name(), &s->wdb);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "cannot open %s: %s", s->path,
                       s->wdb ? sqlite3_errmsg(s->wdb) : sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_stmt *jm = NULL;
    bool wal = false;
    if (prepare(s->wdb, "PRAGMA journal_mode=WAL", &jm) == SQLITE_OK &&
        sqlite3_step(jm) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(jm, 0);
        wal = mode && strcmp(mode, "wal") == 0;
    }
    sqlite3_finalize(jm);
    if (!wal) {
        ckube__set_err(err, "%s: cannot enable WAL mode: %s", s->path, sqlite3_errmsg(s->wdb));
        return -1;
    }
    rc = sqlite3_exec(s->wdb, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, SQ_SCHEMA, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        ckube__set_err(err, "%s: cannot create schema: %s", s->path, sqlite3_errmsg(s->wdb));
        return -1;
    }
    struct {
        const char *sql;
        sqlite3_stmt **stmt;
    } stmts[] = {
        {"BEGIN IMMEDIATE", &s->w_begin},
        {"COMMIT", &s->w_commit},
        {"ROLLBACK", &s->w_rollback},
        {"SELECT id, create_rev, deleted FROM kv WHERE key = ?1 ORDER BY id DESC LIMIT 1",
         &s->w_latest},
        {"INSERT INTO kv (id, key, value, create_rev, prev_rev, deleted)"
         " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
         &s->w_insert},
        {"SELECT value FROM meta WHERE name = ?1", &s->w_get_meta},
        {"UPDATE meta SET value = ?2 WHERE name = ?1", &s->w_set_meta},
        /* Up to ?1: drop tombstones and every row that is not its key's
         * newest; what stays is the latest version of each live key. */
        {"DELETE FROM kv WHERE id <= ?1 AND (deleted != 0 OR"
         " id < (SELECT MAX(k2.id) FROM kv AS k2 WHERE k2.key = kv.key))",
         &s->w_compact},
    };
    for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
        if (prepare(s->wdb, stmts[i].sql, stmts[i].stmt) != SQLITE_OK) {
            ckube__set_err(err, "%s: cannot prepare \"%s\": %s", s->path, stmts[i].sql,
                           sqlite3_errmsg(s->wdb));
            return -1;
        }
    }
    int64_t schema = read_meta(s->w_get_meta, "schema");
    int64_t rev = read_meta(s->w_get_meta, "rev");
    int64_t compacted = read_meta(s->w_get_meta, "compacted");
    if (schema != SQ_SCHEMA_VERSION || rev < 0 || compacted < 0) {
        ckube__set_err(err, "%s: unsupported or damaged store (schema %" PRId64 ")", s->path,
                       schema);
        return -1;
    }
    atomic_store(&s->rev, rev);
    atomic_store(&s->compacted, compacted);
    return 0;
}

/* Makes the directory entries of a newly created database durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        if (fsync(fd) != 0)
            CKUBE_WARN("storage: fsync %s: %s", dir, strerror(errno));
        close(fd);
    }
}

storage *storage_sqlite_open(const char *dir, char **err)
{
    if (!dir || !*dir) {
        ckube__set_err(err, "no storage directory given");
        return NULL;
    }
    struct sq_storage *s = xcalloc(1, sizeof *s);
    s->base.ops = &sq_ops;
    s->lock_fd = -1;
    pthread_mutex_init(&s->pool_mu, NULL);
    if (asprintf(&s->path, "%s/" STORAGE_SQLITE_DB, dir) < 0) {
        s->path = NULL;
        ckube__set_err(err, "out of memory");
        goto fail;
    }
    if (make_dirs(dir, err) != 0)
        goto fail;
    s->lock_fd = storage_sqlite_lock(dir, NULL, err);
    if (s->lock_fd < 0 || open_writer(s, err) != 0)
        goto fail;
    s->ckpt = checkpointer_start(s->path, s->wdb, err);
    if (!s->ckpt)
        goto fail;
    sync_dir(dir);
    s->committer = storage_committer_start(&sq_hooks, s, SQ_MAX_BATCH);
    if (!s->committer) {
        ckube__set_err(err, "cannot start the committer thread");
        goto fail;
    }
    CKUBE_V(1, "storage: opened %s at revision %" PRId64 " (compacted %" PRId64 ")", s->path,
            atomic_load(&s->rev), atomic_load(&s->compacted));
    return &s->base;
fail:
    sq_free(s);
    return NULL;
}
