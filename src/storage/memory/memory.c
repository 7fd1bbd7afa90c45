/* memory.c - the in-memory storage backend (tests, no durability).
 *
 * State: a red-black tree of live keys (sorted like SQLite's BINARY
 * collation: strcmp on bytes) plus an event log holding one entry per
 * revision since the last compaction, which serves watch history. Writes go
 * through the shared group committer (storage.c), so callbacks arrive on a
 * backend thread in exactly the same order as with SQLite.
 *
 * Locking: `mu` guards the tree, the revision counters and the log for
 * readers. The log and counters are only modified with the commit lock held
 * as well (apply and compaction), so replay, which runs under the commit
 * lock, may read the log without `mu` and call back into get/range. */
#include "storage/memory/memory.h"
#include "common/xalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* libbsd's RB_GENERATE_STATIC marks the functions __unused, which libbsd
 * leaves undefined on Linux (a struct member there has that name). Define
 * it just for the expansion below. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#define CKUBE_UNDEF_UNUSED
#endif
#include <sys/tree.h>

#define MEM_MAX_BATCH 512
#define MEM_REPLAY_CHUNK 512

struct mem_node {
    RB_ENTRY(mem_node) link;
    char *key;   /* owned */
    char *value; /* owned, value_len bytes + NUL */
    size_t value_len;
    int64_t create_rev;
    int64_t mod_rev;
};

static int mem_node_cmp(struct mem_node *a, struct mem_node *b)
{
    return strcmp(a->key, b->key);
}

RB_HEAD(mem_tree, mem_node);
RB_GENERATE_STATIC(mem_tree, mem_node, link, mem_node_cmp)
#ifdef CKUBE_UNDEF_UNUSED
#undef __unused
#undef CKUBE_UNDEF_UNUSED
#endif

/* One revision of history; key and value are owned copies. */
struct mem_event {
    storage_event_type type;
    char *key;
    char *value; /* NULL for DELETE */
    size_t value_len;
    int64_t rev;
    int64_t create_rev;
};

struct mem_storage {
    storage base; /* first: storage * and mem_storage * convert */
    storage_committer *committer;
    pthread_mutex_t mu;
    struct mem_tree tree;
    int64_t rev;
    int64_t compacted;
    struct mem_event *log; /* revisions (compacted, rev], in order */
    size_t nlog, caplog;
};

static struct mem_storage *mem_of(storage *st)
{
    return (struct mem_storage *)st;
}

/* malloc'ed copy of len bytes plus a terminating NUL; NULL on OOM. */
static char *dup_bytes(const char *p, size_t len)
{
    char *d = xmalloc(len + 1);
    if (len)
        memcpy(d, p, len);
    d[len] = '\0';
    return d;
}

static struct mem_node *mem_find(struct mem_storage *m, const char *key)
{
    struct mem_node probe = {.key = (char *)key};
    return RB_FIND(mem_tree, &m->tree, &probe);
}

static void mem_node_free(struct mem_node *n)
{
    free(n->key);
    free(n->value);
    free(n);
}

/* Checks op's precondition against the current state; sets result fields
 * and returns false if it fails. */
static bool mem_precondition(storage_op *op, const struct mem_node *n)
{
    if (op->type == STORAGE_OP_CREATE) {
        if (n) {
            op->result = STORAGE_ERR_EXISTS;
            op->current_mod_rev = n->mod_rev;
            return false;
        }
        return true;
    }
    if (!n) {
        op->result = STORAGE_ERR_NOT_FOUND;
        return false;
    }
    if (op->expect_mod_rev != 0 && op->expect_mod_rev != n->mod_rev) {
        op->result = STORAGE_ERR_CONFLICT;
        op->current_mod_rev = n->mod_rev;
        return false;
    }
    return true;
}

static bool mem_log_reserve(struct mem_storage *m)
{
    if (m->nlog < m->caplog)
        return true;
    size_t cap = m->caplog ? m->caplog * 2 : 256;
    struct mem_event *log = xrealloc(m->log, cap * sizeof *log);
    m->log = log;
    m->caplog = cap;
    return true;
}

/* Applies one op whose precondition held. Everything is allocated before
 * anything changes, so on OOM the op fails alone and consumes no revision. */
static void mem_apply_op(struct mem_storage *m, storage_op *op, struct mem_node *n,
                         storage_event *ev)
{
    bool is_put = op->type != STORAGE_OP_DELETE;
    struct mem_event le = {.type = is_put ? STORAGE_EVENT_PUT : STORAGE_EVENT_DELETE};
    char *node_value = NULL;
    struct mem_node *fresh = NULL;

    le.key = dup_bytes(op->key, strlen(op->key));
    if (is_put) {
        le.value = dup_bytes(op->value, op->value_len);
        le.value_len = op->value_len;
        node_value = dup_bytes(op->value, op->value_len);
    }
    if (op->type == STORAGE_OP_CREATE) {
        fresh = xcalloc(1, sizeof *fresh);
        if (fresh)
            fresh->key = dup_bytes(op->key, strlen(op->key));
    }
    bool ok = le.key && mem_log_reserve(m) && (!is_put || (le.value && node_value)) &&
              (op->type != STORAGE_OP_CREATE || (fresh && fresh->key));
    if (!ok) {
        free(le.key);
        free(le.value);
        free(node_value);
        if (fresh)
            mem_node_free(fresh);
        op->result = STORAGE_ERR_NOMEM;
        return;
    }

    int64_t rev = ++m->rev;
    switch (op->type) {
    case STORAGE_OP_CREATE:
        fresh->value = node_value;
        fresh->value_len = op->value_len;
        fresh->create_rev = fresh->mod_rev = rev;
        RB_INSERT(mem_tree, &m->tree, fresh);
        le.create_rev = rev;
        break;
    case STORAGE_OP_UPDATE:
        free(n->value);
        n->value = node_value;
        n->value_len = op->value_len;
        n->mod_rev = rev;
        le.create_rev = n->create_rev;
        break;
    case STORAGE_OP_DELETE:
        le.create_rev = n->create_rev;
        RB_REMOVE(mem_tree, &m->tree, n);
        mem_node_free(n);
        break;
    }
    le.rev = rev;
    m->log[m->nlog++] = le;

    op->result = STORAGE_OK;
    op->rev = rev;
    op->create_rev = le.create_rev;
    /* The event borrows from the op, which lives until its done() runs. */
    *ev = (storage_event){.type = le.type,
                          .key = op->key,
                          .value = is_put ? (op->value ? op->value : "") : NULL,
                          .value_len = is_put ? op->value_len : 0,
                          .rev = rev,
                          .create_rev = le.create_rev,
                          .hint = is_put ? op->hint : NULL};
}

static int mem_apply(void *ctx, storage_op **ops, size_t n, storage_event *events, size_t *nevents)
{
    struct mem_storage *m = ctx;
    size_t k = 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        storage_op *op = ops[i];
        struct mem_node *node = mem_find(m, op->key);
        if (!mem_precondition(op, node))
            continue;
        mem_apply_op(m, op, node, &events[k]);
        if (op->result == STORAGE_OK)
            k++;
    }
    pthread_mutex_unlock(&m->mu);
    *nevents = k;
    return STORAGE_OK;
}

/* Index of the first log entry with rev > from. */
static size_t mem_log_after(const struct mem_storage *m, int64_t from)
{
    size_t lo = 0, hi = m->nlog;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->log[mid].rev <= from)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The whole log is replayed in the locked pass: it cannot change then. */
static int mem_replay(void *ctx, int64_t *from, int locked, storage_watch_fn fn, void *arg)
{
    struct mem_storage *m = ctx;
    if (!locked)
        return STORAGE_OK;
    if (*from < m->compacted)
        return STORAGE_ERR_COMPACTED;
    storage_event buf[MEM_REPLAY_CHUNK];
    for (size_t i = mem_log_after(m, *from); i < m->nlog;) {
        size_t k = 0;
        for (; k < MEM_REPLAY_CHUNK && i < m->nlog; k++, i++) {
            const struct mem_event *e = &m->log[i];
            buf[k] = (storage_event){.type = e->type,
                                     .key = e->key,
                                     .value = e->value,
                                     .value_len = e->value_len,
                                     .rev = e->rev,
                                     .create_rev = e->create_rev};
        }
        fn(arg, buf, k);
        *from = buf[k - 1].rev;
    }
    return STORAGE_OK;
}

static const struct storage_committer_hooks mem_hooks = {.apply = mem_apply, .replay = mem_replay};

static int mem_submit(storage *st, storage_op *op)
{
    return storage_committer_submit(mem_of(st)->committer, op);
}

static int mem_get(storage *st, const char *key, storage_kv *out)
{
    struct mem_storage *m = mem_of(st);
    int rc = STORAGE_OK;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = mem_find(m, key);
    if (!n) {
        rc = STORAGE_ERR_NOT_FOUND;
    } else {
        out->key = dup_bytes(n->key, strlen(n->key));
        out->value = dup_bytes(n->value, n->value_len);
        out->value_len = n->value_len;
        out->create_rev = n->create_rev;
        out->mod_rev = n->mod_rev;
        if (!out->key || !out->value) {
            storage_kv_release(out);
            rc = STORAGE_ERR_NOMEM;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static void kvs_free(storage_kv *kvs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        storage_kv_release(&kvs[i]);
    free(kvs);
}

/* Copies the matching keys under the lock, then calls fn without it so that
 * fn may use the storage. */
static int mem_range(storage *st, const char *prefix, storage_range_fn fn, void *arg,
                     int64_t *rev_out)
{
    struct mem_storage *m = mem_of(st);
    size_t plen = strlen(prefix), n = 0, cap = 0;
    storage_kv *kvs = NULL;
    int rc = STORAGE_OK;
    int64_t rev;

    pthread_mutex_lock(&m->mu);
    rev = m->rev;
    struct mem_node probe = {.key = (char *)prefix};
    for (struct mem_node *x = RB_NFIND(mem_tree, &m->tree, &probe);
         x && strncmp(x->key, prefix, plen) == 0; x = RB_NEXT(mem_tree, &m->tree, x)) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            storage_kv *nk = xrealloc(kvs, ncap * sizeof *nk);
            kvs = nk;
            cap = ncap;
        }
        storage_kv *kv = &kvs[n++];
        kv->key = dup_bytes(x->key, strlen(x->key));
        kv->value = dup_bytes(x->value, x->value_len);
        kv->value_len = x->value_len;
        kv->create_rev = x->create_rev;
        kv->mod_rev = x->mod_rev;
        if (!kv->key || !kv->value) {
            rc = STORAGE_ERR_NOMEM;
            break;
        }
    }
    pthread_mutex_unlock(&m->mu);

    if (rc == STORAGE_OK) {
        if (rev_out)
            *rev_out = rev;
        for (size_t i = 0; i < n; i++)
            if (fn(arg, &kvs[i]))
                break;
    }
    kvs_free(kvs, n);
    return rc;
}

static int64_t mem_current_rev(storage *st)
{
    struct mem_storage *m = mem_of(st);
    pthread_mutex_lock(&m->mu);
    int64_t rev = m->rev;
    pthread_mutex_unlock(&m->mu);
    return rev;
}

static int64_t mem_compacted_rev(storage *st)
{
    struct mem_storage *m = mem_of(st);
    pthread_mutex_lock(&m->mu);
    int64_t rev = m->compacted;
    pthread_mutex_unlock(&m->mu);
    return rev;
}

static int mem_watch(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg)
{
    return storage_committer_watch(mem_of(st)->committer, from_rev, fn, arg);
}

struct mem_compact_req {
    struct mem_storage *m;
    int64_t rev;
};

/* Runs under the commit lock. */
static int mem_compact_locked(void *p)
{
    struct mem_compact_req *req = p;
    struct mem_storage *m = req->m;
    int rc = STORAGE_OK;
    pthread_mutex_lock(&m->mu);
    if (req->rev > m->rev) {
        rc = STORAGE_ERR_INVALID;
    } else if (req->rev > m->compacted) {
        size_t drop = mem_log_after(m, req->rev);
        for (size_t i = 0; i < drop; i++) {
            free(m->log[i].key);
            free(m->log[i].value);
        }
        memmove(m->log, m->log + drop, (m->nlog - drop) * sizeof *m->log);
        m->nlog -= drop;
        m->compacted = req->rev;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_compact(storage *st, int64_t rev)
{
    struct mem_compact_req req = {.m = mem_of(st), .rev = rev};
    return storage_committer_exclusive(req.m->committer, mem_compact_locked, &req);
}

static void mem_stats(storage *st, storage_stats *out)
{
    storage_committer_stats(mem_of(st)->committer, out);
}

static void mem_free_state(struct mem_storage *m)
{
    struct mem_node *n, *next;
    RB_FOREACH_SAFE(n, mem_tree, &m->tree, next)
    {
        RB_REMOVE(mem_tree, &m->tree, n);
        mem_node_free(n);
    }
    for (size_t i = 0; i < m->nlog; i++) {
        free(m->log[i].key);
        free(m->log[i].value);
    }
    free(m->log);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void mem_close(storage *st)
{
    struct mem_storage *m = mem_of(st);
    storage_committer_stop(m->committer);
    mem_free_state(m);
}

static const struct storage_backend_ops mem_ops = {
    .name = "memory",
    .submit = mem_submit,
    .get = mem_get,
    .range = mem_range,
    .current_rev = mem_current_rev,
    .watch = mem_watch,
    .compact = mem_compact,
    .compacted_rev = mem_compacted_rev,
    .close = mem_close,
    .stats = mem_stats,
};

storage *storage_memory_open(void)
{
    struct mem_storage *m = xcalloc(1, sizeof *m);
    m->base.ops = &mem_ops;
    RB_INIT(&m->tree);
    pthread_mutex_init(&m->mu, NULL);
    m->committer = storage_committer_start(&mem_hooks, m, MEM_MAX_BATCH);
    if (!m->committer) {
        mem_free_state(m);
        return NULL;
    }
    return &m->base;
}
