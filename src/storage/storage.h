/* storage.h - the etcd-shaped storage interface under the API server.
 *
 * A revisioned key-value store: one global revision counter that every
 * write increments by one; that revision is the Kubernetes resourceVersion.
 * Each key remembers the revision that created it (create_rev) and the one
 * that last modified it (mod_rev). Writes are conditional on mod_rev, like an
 * etcd Txn(If(ModRevision(key) == N)). Nothing above this interface knows
 * which backend it runs on. Each backend is a folder of its own below this
 * one with a header that opens it: sqlite/ (the embedded default) and
 * memory/ (tests) implement `struct storage_backend_ops` with the group
 * committer below, etcd/ (issue #23) on etcd's own transactions and
 * watch streams.
 *
 * Threading: every function is thread-safe. Writes are asynchronous: they
 * are queued and a backend thread commits them in groups (one transaction
 * and one fsync for many writes). For each committed group the backend
 * first delivers the events to every watch callback, in revision order,
 * and only then runs each op's `done` callback; so a watcher that applies
 * events under its own lock is never behind a write whose caller was told
 * it succeeded. An op is acknowledged (done with result 0) only after its
 * transaction is durable on disk.
 */
#ifndef CKUBE_STORAGE_H
#define CKUBE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Results of operations (negative; 0 is success). */
enum {
    STORAGE_OK = 0,
    STORAGE_ERR_NOT_FOUND = -1, /* key absent (get, update, delete) */
    STORAGE_ERR_EXISTS = -2,    /* create of a key that exists */
    STORAGE_ERR_CONFLICT = -3,  /* mod_rev precondition failed */
    STORAGE_ERR_IO = -4,        /* backend failure; nothing was written */
    STORAGE_ERR_COMPACTED = -5, /* watch/range from a compacted revision */
    STORAGE_ERR_CLOSED = -6,    /* storage is shutting down */
    STORAGE_ERR_NOMEM = -7,
    STORAGE_ERR_INVALID = -8,
    STORAGE_ERR_TOO_LARGE = -9, /* the write is over the backend's request limit (etcd's
                                 * --max-request-bytes); nothing was written */
};

const char *storage_strerror(int err);

/* A key with its value. Owned by whoever received it; free with
 * storage_kv_release (frees key and value, not the struct itself). */
typedef struct storage_kv {
    char *key;
    char *value; /* value_len bytes; may contain NULs. The built-in backends
                  * always put one extra NUL after them (not counted). */
    size_t value_len;
    int64_t create_rev;
    int64_t mod_rev;
} storage_kv;

void storage_kv_release(storage_kv *kv);

typedef enum {
    STORAGE_EVENT_PUT = 1,
    STORAGE_EVENT_DELETE = 2,
    STORAGE_EVENT_PROGRESS = 3,
} storage_event_type;

/* One change, as delivered to watchers. Everything is borrowed for the
 * duration of the callback only. For DELETE, value is NULL and rev is the
 * deletion revision. For PUT, create_rev == rev means the key was created.
 * PROGRESS (shared backends only, alone in its batch; key and value NULL):
 * every event up to rev has been delivered, though the revisions after the
 * last event were other keys' (etcd's progress notification). Watchers that
 * do not track revisions ignore it. */
typedef struct storage_event {
    storage_event_type type;
    const char *key;
    const char *value;
    size_t value_len;
    int64_t rev;
    int64_t create_rev;
    /* PUT: the writing op's hint (storage_op.hint) when this event is
     * that op's own write delivered as it commits (etcd: the event of a
     * Txn of this client's); NULL otherwise (deletes, events read back:
     * replays, another server's writes seen through etcd). */
    const void *hint;
} storage_event;

typedef enum {
    STORAGE_OP_CREATE = 1,
    STORAGE_OP_UPDATE = 2,
    STORAGE_OP_DELETE = 3
} storage_op_type;

/* An asynchronous write. The caller allocates it and keeps it alive until
 * `done` runs; the storage never frees it. `done` runs on a backend thread
 * and must not block for long (hand work to your own thread).
 *
 * CREATE: put key=value if the key does not exist, else STORAGE_ERR_EXISTS.
 * UPDATE: put key=value if the key exists and (expect_mod_rev == 0 or its
 *         mod_rev == expect_mod_rev); else NOT_FOUND or CONFLICT.
 * DELETE: delete key if it exists and (expect_mod_rev == 0 or its mod_rev
 *         == expect_mod_rev); else NOT_FOUND or CONFLICT.
 */
typedef struct storage_op storage_op;
struct storage_op {
    storage_op_type type;
    const char *key;   /* borrowed until done */
    const char *value; /* borrowed until done; CREATE/UPDATE only */
    size_t value_len;
    int64_t expect_mod_rev;
    /* The writer's note about value for the watchers, opaque to the
     * storage (ckube's store passes the value's jscan_meta when the value
     * is canonical, so the watch cache need not scan it again); NULL:
     * none. Borrowed until done; handed to watch callbacks in the
     * write's event (storage_event.hint) by SQLite and memory, which
     * deliver their own commits, and by etcd, which finds the op of its
     * own Txn's event. */
    const void *hint;

    /* Results, valid in done(). */
    int result;         /* STORAGE_OK or STORAGE_ERR_* */
    int64_t rev;        /* revision of this write when result == OK */
    int64_t create_rev; /* create_rev of the key after (PUT) or before (DELETE) */
    /* On CONFLICT/EXISTS: the current revision of the key (0 if absent). */
    int64_t current_mod_rev;
    /* On IO: the backend's own words for the failure when it has them
     * (etcd's "etcdserver: request timed out"), for the client's Status;
     * else "". */
    char message[160];

    void (*done)(storage_op *op, void *arg);
    void *arg;
    storage_op *next; /* internal: queue link */
};

/* Watch callback: a batch of events in increasing revision order, all from
 * one committed transaction (or, for a backend watch stream, one response).
 * Called on a backend thread, never concurrently with itself. History
 * replayed by storage_watch may come in batches of any size. */
typedef void (*storage_watch_fn)(void *arg, const storage_event *events, size_t n);

/* Range callback: called once per key in key order; return non-zero to
 * stop. The kv is borrowed for the duration of the call. */
typedef int (*storage_range_fn)(void *arg, const storage_kv *kv);

typedef struct storage storage;

/* Write-path counters (monotonic since open). */
typedef struct storage_stats {
    uint64_t commits;        /* groups committed (one transaction + fsync each) */
    uint64_t failed_commits; /* groups whose transaction failed (ops got IO) */
    uint64_t ops;            /* ops that completed (done ran), any result */
    uint64_t max_batch;      /* largest group seen */
    uint64_t commit_ns;      /* time spent applying groups (transaction and fsync) */
    /* SQLite: WAL checkpoints by the checkpointer thread, and by the
     * writer itself once the WAL reached its bound (checkpointer.h). */
    uint64_t checkpoints;
    uint64_t inline_checkpoints;
    uint64_t wal_pages; /* SQLite: the WAL's pages after the last commit */
} storage_stats;

struct storage_backend_ops {
    const char *name;
    int (*submit)(storage *st, storage_op *op);
    int (*get)(storage *st, const char *key, storage_kv *out);
    int (*range)(storage *st, const char *prefix, storage_range_fn fn, void *arg, int64_t *rev_out);
    /* Optional (may be NULL: storage_load uses range): storage_load. */
    int (*load)(storage *st, const char *prefix, storage_range_fn fn, void *arg, int64_t *rev_out);
    int64_t (*current_rev)(storage *st);
    int (*watch)(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg);
    int (*compact)(storage *st, int64_t rev);
    int64_t (*compacted_rev)(storage *st);
    void (*close)(storage *st);
    /* Optional (may be NULL): counters for monitoring and tests. */
    void (*stats)(storage *st, struct storage_stats *out);
    /* Optional (may be NULL): asks for a PROGRESS event on every watch
     * soon (etcd's RequestProgress), asynchronously. */
    int (*request_progress)(storage *st);
    /* Optional (may be NULL; shared backends): storage_claim_cluster_data. */
    int (*claim_cluster_data)(storage *st, const char *value, size_t len, char **out,
                              size_t *out_len);
    /* True when other processes write to the same store (etcd with several
     * servers): a watcher here may then lag a write another process had
     * acknowledged, and a reader that must see it asks current_rev. */
    bool shared;
};

struct storage {
    const struct storage_backend_ops *ops;
};

/* Dispatchers over st->ops; see struct storage_backend_ops. */

/* Queues a write. Returns 0 if queued (done will run exactly once), or a
 * STORAGE_ERR_* if it could not be queued (done will not run). */
int storage_submit(storage *st, storage_op *op);

/* Synchronous read of one key at the latest revision. On success fills
 * *out (caller releases with storage_kv_release). */
int storage_get(storage *st, const char *key, storage_kv *out);

/* Synchronous read of every key starting with `prefix` ("" = all) at one
 * consistent revision, which is stored in *rev_out if non-NULL. */
int storage_range(storage *st, const char *prefix, storage_range_fn fn, void *arg,
                  int64_t *rev_out);

/* storage_range without the key order: every live key under `prefix` at
 * one consistent revision, each once, in whatever order the backend reads
 * fastest (SQLite: the order rows were written, so the file is read front
 * to back). For reading everything at start-up. */
int storage_load(storage *st, const char *prefix, storage_range_fn fn, void *arg, int64_t *rev_out);

/* The latest committed revision (0 for an empty new store). */
int64_t storage_current_rev(storage *st);

/* Registers a watcher for every event with revision > from_rev. Events
 * already in the backend's history after from_rev are delivered first
 * (from the calling thread or the backend thread, before any newer event),
 * then live events. Returns STORAGE_ERR_COMPACTED if from_rev is older than
 * the compacted revision (if a compaction races with the replay, some
 * history may have been delivered before that error). Watches last until
 * storage_close. A watch callback must not call storage_watch,
 * storage_compact or storage_close (it may read and submit); a done callback
 * must not call storage_close. */
int storage_watch(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg);

/* Forgets history up to and including `rev` (the latest version of each
 * live key is always kept). STORAGE_ERR_INVALID if rev is above the current
 * revision; compacting at or below the compacted revision is a no-op (OK). */
int storage_compact(storage *st, int64_t rev);
int64_t storage_compacted_rev(storage *st);

/* Waits for queued writes to finish (their done callbacks run), stops the
 * backend threads and frees everything. */
void storage_close(storage *st);

/* Whether other processes may write to this store (see `shared` above).
 * On an unshared store every acknowledged write has reached the watchers
 * before its done callback ran, so a cache fed by storage_watch is never
 * behind a write the caller was told about. */
bool storage_shared(storage *st);

/* Asks every watch of a shared store for a PROGRESS event (see
 * storage_event): how a cache learns that it has seen all there is up to a
 * revision when the last revisions were other keys'. Returns at once;
 * STORAGE_ERR_INVALID if the backend has no such events. */
int storage_request_progress(storage *st);

/* The cluster's own data on a shared store, beside the objects and never
 * served: what several servers must agree on before they serve (the
 * cluster identity, apiserver/pki/identity.h). Atomically: if none is
 * stored and `value` is not NULL, stores value[0..len); then returns what
 * is stored (ours, or the value of the server that was first) in *out
 * (malloc'd, NUL-terminated, the caller frees) and *out_len.
 * STORAGE_ERR_NOT_FOUND when none is stored and value is NULL;
 * STORAGE_ERR_INVALID on a backend that is not shared. */
int storage_claim_cluster_data(storage *st, const char *value, size_t len, char **out,
                               size_t *out_len);

/* Fills *out (all zeros if the backend keeps no counters). */
void storage_get_stats(storage *st, storage_stats *out);

/* ---- For backend implementations only ------------------------------------
 *
 * The group committer shared by the SQLite and memory backends (storage.c).
 * It owns the write queue, the committer thread and the watcher list, and
 * implements the ordering promised above: a group is applied (and made
 * durable) by `apply`, then its events go to every watcher, then the ops'
 * done callbacks run in submission order.
 *
 * The "commit lock" is held while a group is applied and its events are
 * delivered, while a watcher is registered, and around
 * storage_committer_exclusive. So watch callbacks run with it held and must
 * not call storage_watch, storage_compact or storage_close (they may read and
 * submit). done callbacks run without it but on the committer thread, so they
 * must not call storage_close. */
typedef struct storage_committer storage_committer;

struct storage_committer_hooks {
    /* Applies ops[0..n) (already validated) as one atomic, durable group.
     * On success returns 0, has set every op's result fields, and has filled
     * events[0..*nevents) (at most n; pointers may borrow from the ops) in
     * revision order. On failure returns a STORAGE_ERR_*: nothing was
     * written, and the committer fails every op with STORAGE_ERR_IO. */
    int (*apply)(void *ctx, storage_op **ops, size_t n, storage_event *events, size_t *nevents);
    /* Delivers history events with revision > *from to fn and advances *from
     * to the last revision delivered. Called twice per watch: first without
     * the commit lock (locked == 0; may do some, all or none of the work),
     * then with it (locked == 1; must reach the latest committed revision).
     * Returns STORAGE_ERR_COMPACTED if events after *from were compacted. */
    int (*replay)(void *ctx, int64_t *from, int locked, storage_watch_fn fn, void *arg);
};

/* Starts the committer thread; groups hold at most max_batch ops. `hooks`
 * and `ctx` are borrowed until storage_committer_stop. NULL on failure. */
storage_committer *storage_committer_start(const struct storage_committer_hooks *hooks, void *ctx,
                                           size_t max_batch);
/* storage_submit semantics (validates the op first: STORAGE_ERR_INVALID). */
int storage_committer_submit(storage_committer *c, storage_op *op);
/* storage_watch semantics. */
int storage_committer_watch(storage_committer *c, int64_t from_rev, storage_watch_fn fn, void *arg);
/* Runs fn(ctx) with the commit lock held (no group is being applied); for
 * work that must not interleave with groups or watch registration, such as
 * compaction. Returns fn's result. */
int storage_committer_exclusive(storage_committer *c, int (*fn)(void *ctx), void *ctx);
void storage_committer_stats(storage_committer *c, storage_stats *out);
/* Refuses new ops (STORAGE_ERR_CLOSED), finishes the queued ones, joins the
 * thread and frees the committer and its watchers. Not from a callback. */
void storage_committer_stop(storage_committer *c);

#endif
