/* storage.c - dispatchers over storage_backend_ops, and the group committer
 * shared by the SQLite and memory backends (see storage.h). */
#include "storage/storage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckube/log.h"
#include "common/xalloc.h"

const char *storage_strerror(int err)
{
    switch (err) {
    case STORAGE_OK:
        return "ok";
    case STORAGE_ERR_NOT_FOUND:
        return "key not found";
    case STORAGE_ERR_EXISTS:
        return "key already exists";
    case STORAGE_ERR_CONFLICT:
        return "revision precondition failed";
    case STORAGE_ERR_IO:
        return "storage I/O error";
    case STORAGE_ERR_COMPACTED:
        return "requested revision has been compacted";
    case STORAGE_ERR_CLOSED:
        return "storage is closed";
    case STORAGE_ERR_NOMEM:
        return "out of memory";
    case STORAGE_ERR_INVALID:
        return "invalid argument";
    case STORAGE_ERR_TOO_LARGE:
        return "request is too large";
    default:
        return "unknown storage error";
    }
}

void storage_kv_release(storage_kv *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    kv->key = NULL;
    kv->value = NULL;
    kv->value_len = 0;
}

/* ---- dispatchers ---- */

int storage_submit(storage *st, storage_op *op)
{
    if (!st || !op)
        return STORAGE_ERR_INVALID;
    return st->ops->submit(st, op);
}

int storage_get(storage *st, const char *key, storage_kv *out)
{
    if (!st || !key || !out)
        return STORAGE_ERR_INVALID;
    return st->ops->get(st, key, out);
}

int storage_range(storage *st, const char *prefix, storage_range_fn fn, void *arg, int64_t *rev_out)
{
    if (!st || !fn)
        return STORAGE_ERR_INVALID;
    return st->ops->range(st, prefix ? prefix : "", fn, arg, rev_out);
}

int storage_load(storage *st, const char *prefix, storage_range_fn fn, void *arg, int64_t *rev_out)
{
    if (!st || !fn)
        return STORAGE_ERR_INVALID;
    if (!st->ops->load)
        return st->ops->range(st, prefix ? prefix : "", fn, arg, rev_out);
    return st->ops->load(st, prefix ? prefix : "", fn, arg, rev_out);
}

int64_t storage_current_rev(storage *st)
{
    return st ? st->ops->current_rev(st) : 0;
}

int storage_request_progress(storage *st)
{
    return st && st->ops->request_progress ? st->ops->request_progress(st) : STORAGE_ERR_INVALID;
}

int storage_claim_cluster_data(storage *st, const char *value, size_t len, char **out,
                               size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!st || !st->ops->claim_cluster_data)
        return STORAGE_ERR_INVALID;
    return st->ops->claim_cluster_data(st, value, len, out, out_len);
}

bool storage_shared(storage *st)
{
    return st && st->ops->shared;
}

int storage_watch(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg)
{
    if (!st || !fn || from_rev < 0)
        return STORAGE_ERR_INVALID;
    return st->ops->watch(st, from_rev, fn, arg);
}

int storage_compact(storage *st, int64_t rev)
{
    if (!st || rev < 0)
        return STORAGE_ERR_INVALID;
    return st->ops->compact(st, rev);
}

int64_t storage_compacted_rev(storage *st)
{
    return st ? st->ops->compacted_rev(st) : 0;
}

void storage_close(storage *st)
{
    if (st)
        st->ops->close(st);
}

void storage_get_stats(storage *st, storage_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (st && st->ops->stats)
        st->ops->stats(st, out);
}

/* ---- group committer ---- */

struct watcher {
    storage_watch_fn fn;
    void *arg;
    int64_t last; /* highest revision delivered (or the watch's from_rev) */
    struct watcher *next;
};

struct storage_committer {
    const struct storage_committer_hooks *hooks; /* borrowed */
    void *ctx;                                   /* borrowed */
    size_t max_batch;

    /* q_mu guards the queue and `closing`; q_cv wakes the committer. */
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    storage_op *head, *tail;
    bool closing;
    pthread_t thread;

    /* The commit lock: held while a group is applied and its events are
     * delivered, and while watchers are registered (so a new watcher's
     * history replay and its first live event meet exactly). Guards
     * `watchers` and the backend's write state. */
    pthread_mutex_t commit_mu;
    struct watcher *watchers;
    struct watcher **watchers_tail;

    /* Committer-thread scratch, max_batch entries each. */
    storage_op **batch;
    storage_event *events;

    _Atomic uint64_t commits, failed_commits, ops_done, max_batch_seen, commit_ns;
};

static bool op_valid(const storage_op *op)
{
    if (!op->key || !op->key[0] || !op->done || op->expect_mod_rev < 0)
        return false;
    switch (op->type) {
    case STORAGE_OP_CREATE:
    case STORAGE_OP_UPDATE:
        return op->value || op->value_len == 0;
    case STORAGE_OP_DELETE:
        return true;
    default:
        return false;
    }
}

int storage_committer_submit(storage_committer *c, storage_op *op)
{
    if (!op_valid(op))
        return STORAGE_ERR_INVALID;
    op->result = STORAGE_OK;
    op->rev = 0;
    op->create_rev = 0;
    op->current_mod_rev = 0;
    op->message[0] = 0;
    op->next = NULL;
    pthread_mutex_lock(&c->q_mu);
    if (c->closing) {
        pthread_mutex_unlock(&c->q_mu);
        return STORAGE_ERR_CLOSED;
    }
    if (c->tail)
        c->tail->next = op;
    else
        c->head = op;
    c->tail = op;
    pthread_cond_signal(&c->q_cv);
    pthread_mutex_unlock(&c->q_mu);
    return STORAGE_OK;
}

/* Sends events[0..n) (revision order) to every watcher, skipping what a
 * watcher already has (a watch registered from a future revision). Called
 * with the commit lock held. */
static void deliver(storage_committer *c, const storage_event *events, size_t n)
{
    if (n == 0)
        return;
    for (struct watcher *w = c->watchers; w; w = w->next) {
        size_t i = 0;
        while (i < n && events[i].rev <= w->last)
            i++;
        if (i < n) {
            w->fn(w->arg, events + i, n - i);
            w->last = events[n - 1].rev;
        }
    }
}

static void fail_op(storage_op *op, int err)
{
    op->result = err;
    op->rev = 0;
    op->create_rev = 0;
    op->current_mod_rev = 0;
}

static void run_group(storage_committer *c, size_t n)
{
    size_t nev = 0;
    pthread_mutex_lock(&c->commit_mu);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = c->hooks->apply(c->ctx, c->batch, n, c->events, &nev);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    atomic_fetch_add(&c->commit_ns,
                     (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec)));
    if (rc != STORAGE_OK) {
        CKUBE_ERROR("storage: group of %zu writes failed: %s", n, storage_strerror(rc));
        for (size_t i = 0; i < n; i++)
            fail_op(c->batch[i], STORAGE_ERR_IO);
        nev = 0;
        atomic_fetch_add(&c->failed_commits, 1);
    } else {
        atomic_fetch_add(&c->commits, 1);
    }
    deliver(c, c->events, nev);
    pthread_mutex_unlock(&c->commit_mu);

    if (n > atomic_load(&c->max_batch_seen))
        atomic_store(&c->max_batch_seen, n);
    atomic_fetch_add(&c->ops_done, n);
    /* After done() the op may be freed or resubmitted: do not touch it. */
    for (size_t i = 0; i < n; i++)
        c->batch[i]->done(c->batch[i], c->batch[i]->arg);
}

static void *committer_main(void *p)
{
    pthread_setname_np(pthread_self(), "ckube-commit"); /* top -H, perf, gdb */
    storage_committer *c = p;
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&c->q_mu);
        while (!c->head && !c->closing)
            pthread_cond_wait(&c->q_cv, &c->q_mu);
        if (!c->head) { /* closing and drained */
            pthread_mutex_unlock(&c->q_mu);
            break;
        }
        while (c->head && n < c->max_batch) {
            c->batch[n++] = c->head;
            c->head = c->head->next;
        }
        if (!c->head)
            c->tail = NULL;
        pthread_mutex_unlock(&c->q_mu);
        run_group(c, n);
    }
    return NULL;
}

storage_committer *storage_committer_start(const struct storage_committer_hooks *hooks, void *ctx,
                                           size_t max_batch)
{
    if (!hooks || !hooks->apply || !hooks->replay || max_batch == 0)
        return NULL;
    storage_committer *c = xcalloc(1, sizeof *c);
    c->hooks = hooks;
    c->ctx = ctx;
    c->max_batch = max_batch;
    c->watchers_tail = &c->watchers;
    c->batch = xcalloc(max_batch, sizeof *c->batch);
    c->events = xcalloc(max_batch, sizeof *c->events);
    pthread_mutex_init(&c->q_mu, NULL);
    pthread_cond_init(&c->q_cv, NULL);
    pthread_mutex_init(&c->commit_mu, NULL);
    int err = pthread_create(&c->thread, NULL, committer_main, c);
    if (err) {
        CKUBE_ERROR("storage: cannot start committer thread: %s", strerror(err));
        pthread_mutex_destroy(&c->q_mu);
        pthread_cond_destroy(&c->q_cv);
        pthread_mutex_destroy(&c->commit_mu);
        goto fail;
    }
    return c;
fail:
    free(c->batch);
    free(c->events);
    free(c);
    return NULL;
}

int storage_committer_watch(storage_committer *c, int64_t from_rev, storage_watch_fn fn, void *arg)
{
    if (!fn || from_rev < 0)
        return STORAGE_ERR_INVALID;
    struct watcher *w = xcalloc(1, sizeof *w);
    w->fn = fn;
    w->arg = arg;
    int64_t last = from_rev;
    /* Most of the history can be replayed without stalling writers; the
     * locked pass then only has the tail left. */
    int rc = c->hooks->replay(c->ctx, &last, 0, fn, arg);
    if (rc == STORAGE_OK) {
        pthread_mutex_lock(&c->commit_mu);
        rc = c->hooks->replay(c->ctx, &last, 1, fn, arg);
        if (rc == STORAGE_OK) {
            w->last = last;
            *c->watchers_tail = w;
            c->watchers_tail = &w->next;
        }
        pthread_mutex_unlock(&c->commit_mu);
    }
    if (rc != STORAGE_OK)
        free(w);
    return rc;
}

int storage_committer_exclusive(storage_committer *c, int (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&c->commit_mu);
    int rc = fn(ctx);
    pthread_mutex_unlock(&c->commit_mu);
    return rc;
}

void storage_committer_stats(storage_committer *c, storage_stats *out)
{
    memset(out, 0, sizeof *out);
    out->commits = atomic_load(&c->commits);
    out->failed_commits = atomic_load(&c->failed_commits);
    out->ops = atomic_load(&c->ops_done);
    out->max_batch = atomic_load(&c->max_batch_seen);
    out->commit_ns = atomic_load(&c->commit_ns);
}

void storage_committer_stop(storage_committer *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->q_mu);
    c->closing = true;
    pthread_cond_broadcast(&c->q_cv);
    pthread_mutex_unlock(&c->q_mu);
    pthread_join(c->thread, NULL);

    for (struct watcher *w = c->watchers, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    pthread_mutex_destroy(&c->q_mu);
    pthread_cond_destroy(&c->q_cv);
    pthread_mutex_destroy(&c->commit_mu);
    free(c->batch);
    free(c->events);
    free(c);
}
