/* test_storage.c - one storage test suite run against every backend
 * (memory, SQLite and etcd). SQLite stores live in a fresh directory
 * under $CKUBE_TEST_TMP (or /tmp), removed afterwards; each etcd test
 * runs against a fresh etcd member on loopback (util/etcd_util.h).
 *
 * cmocka assertions run on the test's main thread only: callbacks on the
 * backend thread record what they saw and the main thread checks it. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "storage/etcd/etcd.h"
#include "storage/memory/memory.h"
#include "storage/sqlite/checkpointer.h"
#include "storage/sqlite/sqlite.h"
#include "storage/sqlite/vfs.h"
#include "storage/storage.h"
#include "util/etcd_util.h"

#define WAIT_SECONDS 60

enum backend { BE_MEMORY, BE_SQLITE, BE_ETCD };
static const enum backend be_memory = BE_MEMORY;
static const enum backend be_sqlite = BE_SQLITE;
static const enum backend be_etcd = BE_ETCD;

struct fixture {
    enum backend be;
    char dir[PATH_MAX];
    storage *st;
    struct test_etcd etcd;
};

/* ---- helpers: temp dirs, fixture ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void make_temp_dir(char *out, size_t len)
{
    const char *base = getenv("CKUBE_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0700); /* may exist; mkdtemp reports real problems */
    snprintf(out, len, "%s/storage-XXXXXX", base);
    assert_non_null(mkdtemp(out));
}

/* ---- etcd: the suite's revisions, counted from 0 ----
 *
 * An empty etcd is at revision 1, the other backends at 0, and the suite
 * names revisions by number. For etcd the tests run through this shim,
 * which shifts every revision by etcd's first one (1) each way and passes
 * everything else through, so each test checks etcd's semantics (which
 * write got which revision relative to the others, what a watch from a
 * revision replays, what compaction forgets) unchanged. */
#define ETCD_BASE 1

struct shifted {
    storage base;
    storage *inner;
};

struct shifted_op {
    storage_op op; /* first: the inner op */
    storage_op *outer;
};

static void shifted_done(storage_op *op, void *arg)
{
    (void)arg;
    struct shifted_op *w = (struct shifted_op *)op;
    storage_op *o = w->outer;
    o->result = op->result;
    o->rev = op->rev ? op->rev - ETCD_BASE : 0;
    o->create_rev = op->create_rev ? op->create_rev - ETCD_BASE : 0;
    o->current_mod_rev = op->current_mod_rev ? op->current_mod_rev - ETCD_BASE : 0;
    free(w);
    o->done(o, o->arg);
}

static int shifted_submit(storage *st, storage_op *o)
{
    struct shifted *s = (struct shifted *)st;
    if (!o)
        return storage_submit(s->inner, NULL);
    struct shifted_op *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->outer = o;
    w->op = (storage_op){.type = o->type,
                         .key = o->key,
                         .value = o->value,
                         .value_len = o->value_len,
                         .expect_mod_rev = o->expect_mod_rev > 0 ? o->expect_mod_rev + ETCD_BASE
                                                                 : o->expect_mod_rev,
                         .hint = o->hint,
                         .done = o->done ? shifted_done : NULL};
    int rc = storage_submit(s->inner, &w->op);
    if (rc != STORAGE_OK)
        free(w);
    return rc;
}

static void shift_kv(storage_kv *kv)
{
    kv->create_rev -= ETCD_BASE;
    kv->mod_rev -= ETCD_BASE;
}

static int shifted_get(storage *st, const char *key, storage_kv *out)
{
    int rc = storage_get(((struct shifted *)st)->inner, key, out);
    if (rc == STORAGE_OK)
        shift_kv(out);
    return rc;
}

struct shifted_range {
    storage_range_fn fn;
    void *arg;
};

static int shifted_range_fn(void *arg, const storage_kv *kv)
{
    struct shifted_range *r = arg;
    storage_kv k = *kv;
    shift_kv(&k);
    return r->fn(r->arg, &k);
}

static int shifted_range(storage *st, const char *prefix, storage_range_fn fn, void *arg,
                         int64_t *rev_out)
{
    struct shifted_range r = {fn, arg};
    int rc = storage_range(((struct shifted *)st)->inner, prefix, fn ? shifted_range_fn : NULL, &r,
                           rev_out);
    if (rc == STORAGE_OK && rev_out)
        *rev_out -= ETCD_BASE;
    return rc;
}

static int64_t shifted_current_rev(storage *st)
{
    return storage_current_rev(((struct shifted *)st)->inner) - ETCD_BASE;
}

/* A watcher's callback and argument; kept until the store closes. */
struct shifted_watch {
    struct shifted_watch *next;
    storage_watch_fn fn;
    void *arg;
};
static struct shifted_watch *shifted_watches;
static pthread_mutex_t shifted_mu = PTHREAD_MUTEX_INITIALIZER;

static void shifted_watch_fn(void *arg, const storage_event *events, size_t n)
{
    struct shifted_watch *w = arg;
    storage_event *ev = calloc(n ? n : 1, sizeof *ev);
    assert_non_null(ev);
    for (size_t i = 0; i < n; i++) {
        ev[i] = events[i];
        ev[i].rev -= ETCD_BASE;
        if (ev[i].create_rev)
            ev[i].create_rev -= ETCD_BASE;
    }
    w->fn(w->arg, ev, n);
    free(ev);
}

static int shifted_watch(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg)
{
    if (from_rev < 0 || !fn)
        return storage_watch(((struct shifted *)st)->inner, from_rev, fn, arg);
    struct shifted_watch *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->fn = fn;
    w->arg = arg;
    pthread_mutex_lock(&shifted_mu);
    w->next = shifted_watches;
    shifted_watches = w;
    pthread_mutex_unlock(&shifted_mu);
    return storage_watch(((struct shifted *)st)->inner, from_rev + ETCD_BASE, shifted_watch_fn, w);
}

static int shifted_compact(storage *st, int64_t rev)
{
    if (rev <= 0)
        return storage_compact(((struct shifted *)st)->inner, rev);
    return storage_compact(((struct shifted *)st)->inner, rev + ETCD_BASE);
}

static int64_t shifted_compacted_rev(storage *st)
{
    int64_t r = storage_compacted_rev(((struct shifted *)st)->inner);
    return r > 0 ? r - ETCD_BASE : r;
}

static void shifted_close(storage *st)
{
    storage_close(((struct shifted *)st)->inner);
    free(st);
    pthread_mutex_lock(&shifted_mu);
    while (shifted_watches) {
        struct shifted_watch *next = shifted_watches->next;
        free(shifted_watches);
        shifted_watches = next;
    }
    pthread_mutex_unlock(&shifted_mu);
}

static void shifted_stats(storage *st, storage_stats *out)
{
    storage_get_stats(((struct shifted *)st)->inner, out);
}

static const struct storage_backend_ops SHIFTED_OPS = {
    .name = "etcd (revisions from 0)",
    .submit = shifted_submit,
    .get = shifted_get,
    .range = shifted_range,
    .current_rev = shifted_current_rev,
    .watch = shifted_watch,
    .compact = shifted_compact,
    .compacted_rev = shifted_compacted_rev,
    .close = shifted_close,
    .stats = shifted_stats,
};

static storage *shifted_open(storage *inner)
{
    struct shifted *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->base.ops = &SHIFTED_OPS;
    s->inner = inner;
    return &s->base;
}

static storage *open_backend(struct fixture *f)
{
    if (f->be == BE_MEMORY)
        return storage_memory_open();
    char *err = NULL;
    if (f->be == BE_ETCD) {
        storage *st = storage_etcd_open(f->etcd.url, "/", false, NULL, &err);
        if (!st)
            print_error("storage_etcd_open(%s): %s\n", f->etcd.url, err ? err : "?");
        free(err);
        return st ? shifted_open(st) : NULL;
    }
    storage *st = storage_sqlite_open(f->dir, &err);
    if (!st)
        print_error("storage_sqlite_open(%s): %s\n", f->dir, err ? err : "?");
    free(err);
    return st;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->be = *(const enum backend *)*state;
    if (f->be == BE_SQLITE)
        make_temp_dir(f->dir, sizeof f->dir);
    if (f->be == BE_ETCD && teu_start(&f->etcd) != 0)
        return -1;
    f->st = open_backend(f);
    assert_non_null(f->st);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    storage_close(f->st);
    if (f->be == BE_SQLITE)
        rm_rf(f->dir);
    if (f->be == BE_ETCD) {
        teu_stop(&f->etcd, SIGTERM);
        rm_rf(f->etcd.dir);
    }
    free(f);
    return 0;
}

/* Closes and reopens the store (for SQLite: the same directory). */
static void reopen(struct fixture *f)
{
    storage_close(f->st);
    f->st = open_backend(f);
    assert_non_null(f->st);
}

static void deadline(struct timespec *ts)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += WAIT_SECONDS;
}

/* ---- helpers: synchronous ops ---- */

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void waiter_done(storage_op *op, void *arg)
{
    (void)op;
    struct waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Submits op and waits for done; returns the submit error or op->result. */
static int run_op(storage *st, storage_op *op)
{
    struct waiter w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    op->done = waiter_done;
    op->arg = &w;
    int rc = storage_submit(st, op);
    if (rc == STORAGE_OK) {
        struct timespec ts;
        deadline(&ts);
        pthread_mutex_lock(&w.mu);
        while (!w.done && rc == STORAGE_OK)
            if (pthread_cond_timedwait(&w.cv, &w.mu, &ts) == ETIMEDOUT)
                rc = -1000;
        pthread_mutex_unlock(&w.mu);
        if (rc == STORAGE_OK)
            rc = op->result;
    }
    assert_int_not_equal(rc, -1000); /* timed out */
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}

static int do_write(storage *st, storage_op_type type, const char *key, const char *value,
                    size_t len, int64_t expect, storage_op *out)
{
    storage_op tmp;
    storage_op *op = out ? out : &tmp;
    *op = (storage_op){
        .type = type, .key = key, .value = value, .value_len = len, .expect_mod_rev = expect};
    return run_op(st, op);
}

static int do_create(storage *st, const char *key, const char *value, storage_op *out)
{
    return do_write(st, STORAGE_OP_CREATE, key, value, strlen(value), 0, out);
}

static int do_update(storage *st, const char *key, const char *value, int64_t expect,
                     storage_op *out)
{
    return do_write(st, STORAGE_OP_UPDATE, key, value, strlen(value), expect, out);
}

static int do_delete(storage *st, const char *key, int64_t expect, storage_op *out)
{
    return do_write(st, STORAGE_OP_DELETE, key, NULL, 0, expect, out);
}

static void assert_kv(storage *st, const char *key, const char *value, int64_t create_rev,
                      int64_t mod_rev)
{
    storage_kv kv = {0};
    assert_int_equal(storage_get(st, key, &kv), STORAGE_OK);
    assert_string_equal(kv.key, key);
    assert_int_equal(kv.value_len, strlen(value));
    assert_memory_equal(kv.value, value, kv.value_len + 1); /* with the NUL */
    if (create_rev)
        assert_int_equal(kv.create_rev, create_rev);
    if (mod_rev)
        assert_int_equal(kv.mod_rev, mod_rev);
    storage_kv_release(&kv);
}

/* ---- helpers: watch recorder ---- */

struct rec_event {
    storage_event_type type;
    char *key;
    char *value; /* NULL for DELETE */
    size_t value_len;
    int64_t rev;
    int64_t create_rev;
    const void *hint; /* the event's (storage_event.hint) */
};

struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct rec_event *ev;
    size_t n, cap;
    size_t calls;
    int64_t last_rev;
    bool out_of_order;  /* a revision not above the previous one */
    bool bad_delete;    /* DELETE with a value */
    storage *reentrant; /* if set, the callback reads through it */
    bool reentrant_fail;
};

static void rec_init(struct recorder *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_free(struct recorder *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->ev[i].key);
        free(r->ev[i].value);
    }
    free(r->ev);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static char *memdup0(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

static void rec_fn(void *arg, const storage_event *ev, size_t n)
{
    struct recorder *r = arg;
    if (n == 1 && ev[0].type == STORAGE_EVENT_PROGRESS)
        return; /* etcd's periodic progress notification: no change */
    if (r->reentrant) {
        /* A watcher may read the store from its callback. */
        storage_kv kv = {0};
        int rc = storage_get(r->reentrant, ev[0].key, &kv);
        if (rc != STORAGE_OK && rc != STORAGE_ERR_NOT_FOUND)
            r->reentrant_fail = true;
        storage_kv_release(&kv);
    }
    pthread_mutex_lock(&r->mu);
    r->calls++;
    for (size_t i = 0; i < n; i++) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 64;
            r->ev = realloc(r->ev, r->cap * sizeof *r->ev);
            if (!r->ev)
                abort();
        }
        const storage_event *e = &ev[i];
        if (e->rev <= r->last_rev)
            r->out_of_order = true;
        if (e->type == STORAGE_EVENT_DELETE && e->value)
            r->bad_delete = true;
        r->last_rev = e->rev;
        r->ev[r->n++] = (struct rec_event){
            .type = e->type,
            .key = strdup(e->key),
            .value = e->value ? memdup0(e->value, e->value_len) : NULL,
            .value_len = e->value_len,
            .rev = e->rev,
            .create_rev = e->create_rev,
            .hint = e->hint,
        };
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits until the recorder has seen revision `rev`. */
static void rec_wait(struct recorder *r, int64_t rev)
{
    struct timespec ts;
    deadline(&ts);
    pthread_mutex_lock(&r->mu);
    int err = 0;
    while (r->last_rev < rev && err == 0)
        err = pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    int64_t last = r->last_rev;
    pthread_mutex_unlock(&r->mu);
    if (last < rev)
        fail_msg("watcher stuck at revision %" PRId64 ", want %" PRId64, last, rev);
}

static void rec_check_contiguous(struct recorder *r, int64_t from, int64_t to)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    bool ooo = r->out_of_order, bad = r->bad_delete;
    pthread_mutex_unlock(&r->mu);
    assert_false(ooo);
    assert_false(bad);
    assert_int_equal(n, (size_t)(to - from));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(r->ev[i].rev, from + 1 + (int64_t)i);
}

/* ---- helpers: asynchronous bursts ---- */

struct counter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t done;
};

static void counter_done(storage_op *op, void *arg)
{
    (void)op;
    struct counter *c = arg;
    pthread_mutex_lock(&c->mu);
    c->done++;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void counter_wait(struct counter *c, size_t n)
{
    struct timespec ts;
    deadline(&ts);
    pthread_mutex_lock(&c->mu);
    int err = 0;
    while (c->done < n && err == 0)
        err = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    size_t got = c->done;
    pthread_mutex_unlock(&c->mu);
    if (got < n)
        fail_msg("only %zu of %zu ops completed", got, n);
}

/* `nthreads` threads each submit `per_thread` creates of "PREFIX/tT-i"
 * without waiting; done callbacks count into `counter`. */
struct burst {
    storage *st;
    const char *prefix;
    size_t per_thread;
    size_t thread;
    storage_op *ops;  /* per_thread entries for this thread */
    char (*keys)[64]; /* same */
    struct counter *counter;
    atomic_int *submit_errors;
    void (*done)(storage_op *op, void *arg); /* default counter_done */
    void *arg;                               /* default the counter */
};

static void *burst_main(void *p)
{
    struct burst *b = p;
    for (size_t i = 0; i < b->per_thread; i++) {
        snprintf(b->keys[i], sizeof b->keys[i], "%s/t%zu-%05zu", b->prefix, b->thread, i);
        b->ops[i] = (storage_op){.type = STORAGE_OP_CREATE,
                                 .key = b->keys[i],
                                 .value = b->keys[i],
                                 .value_len = strlen(b->keys[i]),
                                 .done = b->done ? b->done : counter_done,
                                 .arg = b->arg ? b->arg : b->counter};
        if (storage_submit(b->st, &b->ops[i]) != STORAGE_OK)
            atomic_fetch_add(b->submit_errors, 1);
    }
    return NULL;
}

struct burst_run {
    size_t total;
    storage_op *ops;
    char (*keys)[64];
    double seconds;
};

static void run_burst(storage *st, const char *prefix, size_t nthreads, size_t per_thread,
                      void (*done)(storage_op *, void *), void *arg, struct burst_run *out)
{
    size_t total = nthreads * per_thread;
    struct counter c = {.done = 0};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    atomic_int errors = 0;
    out->total = total;
    out->ops = calloc(total, sizeof *out->ops);
    out->keys = calloc(total, sizeof *out->keys);
    struct burst *b = calloc(nthreads, sizeof *b);
    pthread_t *th = calloc(nthreads, sizeof *th);
    assert_true(out->ops && out->keys && b && th);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t t = 0; t < nthreads; t++) {
        b[t] = (struct burst){.st = st,
                              .prefix = prefix,
                              .per_thread = per_thread,
                              .thread = t,
                              .ops = out->ops + t * per_thread,
                              .keys = out->keys + t * per_thread,
                              .counter = &c,
                              .submit_errors = &errors,
                              .done = done,
                              .arg = arg};
        assert_int_equal(pthread_create(&th[t], NULL, burst_main, &b[t]), 0);
    }
    for (size_t t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    assert_int_equal(atomic_load(&errors), 0);
    if (!done) {
        counter_wait(&c, total);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        out->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    free(b);
    free(th);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
}

static void burst_free(struct burst_run *r)
{
    free(r->ops);
    free(r->keys);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Asserts every op succeeded with distinct revisions forming exactly
 * (base, base + n]. */
static void assert_revs_contiguous(const struct burst_run *r, int64_t base)
{
    int64_t *revs = calloc(r->total, sizeof *revs);
    assert_non_null(revs);
    for (size_t i = 0; i < r->total; i++) {
        assert_int_equal(r->ops[i].result, STORAGE_OK);
        assert_int_equal(r->ops[i].create_rev, r->ops[i].rev);
        revs[i] = r->ops[i].rev;
    }
    qsort(revs, r->total, sizeof *revs, cmp_i64);
    for (size_t i = 0; i < r->total; i++)
        assert_int_equal(revs[i], base + 1 + (int64_t)i);
    free(revs);
}

/* ---- range collection ---- */

struct collected {
    size_t n;
    char keys[64][64];
    char values[64][64];
    int64_t mod_rev[64];
    size_t stop_after; /* 0 = never stop */
};

static int collect_fn(void *arg, const storage_kv *kv)
{
    struct collected *c = arg;
    if (c->n < 64) {
        snprintf(c->keys[c->n], sizeof c->keys[0], "%s", kv->key);
        snprintf(c->values[c->n], sizeof c->values[0], "%.*s", (int)kv->value_len, kv->value);
        c->mod_rev[c->n] = kv->mod_rev;
    }
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

/* ======================================================================
 * Tests
 * ====================================================================== */

static void test_create_get(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    assert_int_equal(storage_current_rev(st), 0);

    storage_op op;
    assert_int_equal(do_create(st, "/r/a", "alpha", &op), STORAGE_OK);
    assert_int_equal(op.rev, 1);
    assert_int_equal(op.create_rev, 1);
    assert_kv(st, "/r/a", "alpha", 1, 1);
    assert_int_equal(storage_current_rev(st), 1);

    /* A second create fails, reports the key's revision, uses no revision. */
    assert_int_equal(do_create(st, "/r/a", "beta", &op), STORAGE_ERR_EXISTS);
    assert_int_equal(op.current_mod_rev, 1);
    assert_int_equal(op.rev, 0);
    assert_kv(st, "/r/a", "alpha", 1, 1);
    assert_int_equal(storage_current_rev(st), 1);

    storage_kv kv = {0};
    assert_int_equal(storage_get(st, "/r/missing", &kv), STORAGE_ERR_NOT_FOUND);
    assert_null(kv.key);
    assert_int_equal(storage_get(st, "/r", &kv), STORAGE_ERR_NOT_FOUND); /* no prefix match */

    /* Binary values with NULs, empty values and a large value round-trip. */
    static const char bin[] = {'x', 0, 'y', 0, (char)0xff, 0};
    assert_int_equal(do_write(st, STORAGE_OP_CREATE, "/r/bin", bin, sizeof bin, 0, NULL),
                     STORAGE_OK);
    assert_int_equal(storage_get(st, "/r/bin", &kv), STORAGE_OK);
    assert_int_equal(kv.value_len, sizeof bin);
    assert_memory_equal(kv.value, bin, sizeof bin);
    storage_kv_release(&kv);

    assert_int_equal(do_write(st, STORAGE_OP_CREATE, "/r/empty", NULL, 0, 0, NULL), STORAGE_OK);
    assert_kv(st, "/r/empty", "", 0, 0);

    size_t big_len = 1 << 20;
    char *big = malloc(big_len);
    assert_non_null(big);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)(i * 7 + 3);
    assert_int_equal(do_write(st, STORAGE_OP_CREATE, "/r/big", big, big_len, 0, NULL), STORAGE_OK);
    assert_int_equal(storage_get(st, "/r/big", &kv), STORAGE_OK);
    assert_int_equal(kv.value_len, big_len);
    assert_memory_equal(kv.value, big, big_len);
    storage_kv_release(&kv);
    free(big);

    /* UTF-8 keys are just bytes. */
    assert_int_equal(do_create(st, "/r/\xc3\xa9t\xc3\xa9", "summer", NULL), STORAGE_OK);
    assert_kv(st, "/r/\xc3\xa9t\xc3\xa9", "summer", 0, 0);
}

static void noop_done(storage_op *op, void *arg)
{
    (void)op;
    (void)arg;
}

static void test_invalid_ops(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    storage_op op = {
        .type = STORAGE_OP_CREATE, .key = NULL, .value = "v", .value_len = 1, .done = noop_done};
    assert_int_equal(storage_submit(st, &op), STORAGE_ERR_INVALID); /* no key */
    op.key = "";
    assert_int_equal(storage_submit(st, &op), STORAGE_ERR_INVALID); /* empty key */
    op.key = "/k";
    op.type = (storage_op_type)42;
    assert_int_equal(storage_submit(st, &op), STORAGE_ERR_INVALID); /* bad type */
    op.type = STORAGE_OP_UPDATE;
    op.expect_mod_rev = -1;
    assert_int_equal(storage_submit(st, &op), STORAGE_ERR_INVALID); /* negative rev */
    op.expect_mod_rev = 0;
    op.value = NULL;
    assert_int_equal(storage_submit(st, &op), STORAGE_ERR_INVALID); /* NULL value, len 1 */
    op.value = "v";
    op.done = NULL;
    assert_int_equal(storage_submit(st, &op), STORAGE_ERR_INVALID); /* no done */
    assert_int_equal(storage_submit(st, NULL), STORAGE_ERR_INVALID);
    assert_int_equal(storage_submit(NULL, &op), STORAGE_ERR_INVALID);

    storage_kv kv = {0};
    assert_int_equal(storage_get(st, NULL, &kv), STORAGE_ERR_INVALID);
    assert_int_equal(storage_get(st, "/k", NULL), STORAGE_ERR_INVALID);
    assert_int_equal(storage_range(st, "", NULL, NULL, NULL), STORAGE_ERR_INVALID);
    assert_int_equal(storage_watch(st, -1, rec_fn, NULL), STORAGE_ERR_INVALID);
    assert_int_equal(storage_watch(st, 0, NULL, NULL), STORAGE_ERR_INVALID);
    assert_int_equal(storage_compact(st, -1), STORAGE_ERR_INVALID);
    /* Nothing was written. */
    assert_int_equal(storage_current_rev(st), 0);

    /* Error strings exist for every code. */
    for (int e = STORAGE_ERR_INVALID; e <= STORAGE_OK; e++)
        assert_string_not_equal(storage_strerror(e), "unknown storage error");
    assert_string_equal(storage_strerror(12345), "unknown storage error");
}

static void test_update(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    storage_op op;
    assert_int_equal(do_create(st, "/u/a", "v1", &op), STORAGE_OK);
    int64_t created = op.rev;

    /* Right expectation. */
    assert_int_equal(do_update(st, "/u/a", "v2", created, &op), STORAGE_OK);
    assert_int_equal(op.rev, created + 1);
    assert_int_equal(op.create_rev, created); /* preserved */
    assert_kv(st, "/u/a", "v2", created, created + 1);

    /* Stale expectation: conflict, current revision reported, nothing written. */
    assert_int_equal(do_update(st, "/u/a", "v3", created, &op), STORAGE_ERR_CONFLICT);
    assert_int_equal(op.current_mod_rev, created + 1);
    assert_int_equal(op.rev, 0);
    assert_kv(st, "/u/a", "v2", created, created + 1);
    assert_int_equal(storage_current_rev(st), created + 1);

    /* Zero expectation: unconditional. */
    assert_int_equal(do_update(st, "/u/a", "v4", 0, &op), STORAGE_OK);
    assert_int_equal(op.rev, created + 2);
    assert_int_equal(op.create_rev, created);
    assert_kv(st, "/u/a", "v4", created, created + 2);

    /* Missing key: NOT_FOUND whatever the expectation. */
    assert_int_equal(do_update(st, "/u/missing", "x", 0, &op), STORAGE_ERR_NOT_FOUND);
    assert_int_equal(op.current_mod_rev, 0);
    assert_int_equal(do_update(st, "/u/missing", "x", 5, &op), STORAGE_ERR_NOT_FOUND);
    assert_int_equal(storage_current_rev(st), created + 2);
}

static void test_delete(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    storage_op op;
    assert_int_equal(do_create(st, "/d/a", "v1", &op), STORAGE_OK);
    int64_t c = op.rev;
    assert_int_equal(do_update(st, "/d/a", "v2", 0, &op), STORAGE_OK);

    assert_int_equal(do_delete(st, "/d/a", c, &op), STORAGE_ERR_CONFLICT);
    assert_int_equal(op.current_mod_rev, c + 1);
    assert_kv(st, "/d/a", "v2", c, c + 1);

    assert_int_equal(do_delete(st, "/d/a", c + 1, &op), STORAGE_OK);
    assert_int_equal(op.rev, c + 2);
    assert_int_equal(op.create_rev, c); /* create_rev of the deleted key */
    storage_kv kv = {0};
    assert_int_equal(storage_get(st, "/d/a", &kv), STORAGE_ERR_NOT_FOUND);
    assert_int_equal(do_delete(st, "/d/a", 0, &op), STORAGE_ERR_NOT_FOUND);
    assert_int_equal(do_update(st, "/d/a", "v", 0, &op), STORAGE_ERR_NOT_FOUND);

    /* Re-creating starts a new life: create_rev is the new revision. */
    assert_int_equal(do_create(st, "/d/a", "v3", &op), STORAGE_OK);
    assert_int_equal(op.rev, c + 3);
    assert_int_equal(op.create_rev, c + 3);
    assert_kv(st, "/d/a", "v3", c + 3, c + 3);

    /* Unconditional delete. */
    assert_int_equal(do_create(st, "/d/b", "b", NULL), STORAGE_OK);
    assert_int_equal(do_delete(st, "/d/b", 0, &op), STORAGE_OK);
    assert_int_equal(op.rev, c + 5);
    assert_int_equal(storage_current_rev(st), c + 5);
}

static void test_revisions_global(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    storage_op op;
    int64_t last = storage_current_rev(st);
    const char *keys[] = {"/g/x", "/g/y", "/h/z"};
    for (int round = 0; round < 5; round++) {
        for (size_t k = 0; k < 3; k++) {
            int rc =
                round == 0 ? do_create(st, keys[k], "v", &op) : do_update(st, keys[k], "w", 0, &op);
            assert_int_equal(rc, STORAGE_OK);
            /* One global counter across keys, +1 per successful write. */
            assert_int_equal(op.rev, last + 1);
            last = op.rev;
            /* Failed writes consume nothing. */
            assert_int_equal(do_create(st, keys[k], "v", NULL), STORAGE_ERR_EXISTS);
            assert_int_equal(do_update(st, keys[k], "v", 1000000, NULL), STORAGE_ERR_CONFLICT);
            assert_int_equal(storage_current_rev(st), last);
        }
    }
    /* create_rev preserved across all the updates. */
    storage_kv kv = {0};
    assert_int_equal(storage_get(st, "/g/y", &kv), STORAGE_OK);
    assert_int_equal(kv.create_rev, 2);
    assert_int_equal(kv.mod_rev, last - 1);
    storage_kv_release(&kv);
}

static void test_range_prefix(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    /* Inserted out of order; byte order puts "/a/10" before "/a/2". */
    const char *keys[] = {"/b/1", "/a/2", "/a", "/a/10", "/ab", "/a/1", "/z\xff\xff", "/z\xff"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_int_equal(do_create(st, keys[i], keys[i], NULL), STORAGE_OK);
    assert_int_equal(do_create(st, "/a/3", "gone", NULL), STORAGE_OK);
    assert_int_equal(do_delete(st, "/a/3", 0, NULL), STORAGE_OK);
    assert_int_equal(do_update(st, "/a/2", "two", 0, NULL), STORAGE_OK);

    struct collected c = {0};
    int64_t rev = -1;
    assert_int_equal(storage_range(st, "/a/", collect_fn, &c, &rev), STORAGE_OK);
    assert_int_equal(rev, storage_current_rev(st));
    assert_int_equal(c.n, 3);
    assert_string_equal(c.keys[0], "/a/1");
    assert_string_equal(c.keys[1], "/a/10");
    assert_string_equal(c.keys[2], "/a/2");
    assert_string_equal(c.values[2], "two"); /* latest version */
    assert_int_equal(c.mod_rev[2], rev);

    memset(&c, 0, sizeof c);
    assert_int_equal(storage_range(st, "", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 8);
    for (size_t i = 1; i < c.n; i++)
        assert_true(strcmp(c.keys[i - 1], c.keys[i]) < 0);

    memset(&c, 0, sizeof c);
    assert_int_equal(storage_range(st, "/a", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 5); /* /a /a/1 /a/10 /a/2 /ab */

    /* A prefix ending in 0xff bytes (no simple upper bound). */
    memset(&c, 0, sizeof c);
    assert_int_equal(storage_range(st, "/z\xff", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.keys[0], "/z\xff");
    assert_string_equal(c.keys[1], "/z\xff\xff");

    memset(&c, 0, sizeof c);
    assert_int_equal(storage_range(st, "/nothing/", collect_fn, &c, &rev), STORAGE_OK);
    assert_int_equal(c.n, 0);

    /* The callback can stop the iteration. */
    memset(&c, 0, sizeof c);
    c.stop_after = 2;
    assert_int_equal(storage_range(st, "", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 2);
}

/* storage_load gives what storage_range gives, in any order: each live
 * key once with its newest row, under a prefix (bounded as range bounds
 * it, 0xff bytes included), whatever history is behind the keys; the
 * same revision; the callback can stop it. */
static int cmp_collected(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void sort_collected(struct collected *c)
{
    /* keys, values and revisions sorted together: pack each row */
    struct row {
        char key[64], value[64];
        int64_t mod_rev;
    } rows[64];
    size_t n = c->n < 64 ? c->n : 64;
    for (size_t i = 0; i < n; i++) {
        memcpy(rows[i].key, c->keys[i], 64);
        memcpy(rows[i].value, c->values[i], 64);
        rows[i].mod_rev = c->mod_rev[i];
    }
    qsort(rows, n, sizeof rows[0], cmp_collected);
    for (size_t i = 0; i < n; i++) {
        memcpy(c->keys[i], rows[i].key, 64);
        memcpy(c->values[i], rows[i].value, 64);
        c->mod_rev[i] = rows[i].mod_rev;
    }
}

/* Every row a load or range gives, for comparing thousands of them. */
struct rows {
    size_t n, cap;
    struct krow {
        char key[64];
        int64_t mod_rev;
        size_t value_len;
        uint64_t value_hash; /* FNV-1a of the value's bytes */
    } * v;
};

static int cmp_krow(const void *a, const void *b)
{
    return strcmp(((const struct krow *)a)->key, ((const struct krow *)b)->key);
}

static int rows_fn(void *arg, const storage_kv *kv)
{
    struct rows *r = arg;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 1024;
        r->v = realloc(r->v, r->cap * sizeof *r->v);
        assert_non_null(r->v);
    }
    struct krow *k = &r->v[r->n++];
    snprintf(k->key, sizeof k->key, "%s", kv->key);
    k->mod_rev = kv->mod_rev;
    k->value_len = kv->value_len;
    k->value_hash = 1469598103934665603ull;
    for (size_t i = 0; i < kv->value_len; i++)
        k->value_hash = (k->value_hash ^ (unsigned char)kv->value[i]) * 1099511628211ull;
    return 0;
}

/* Load and range of `prefix` give the same rows, values byte for byte;
 * returns how many. */
static size_t assert_load_like_range(storage *st, const char *prefix)
{
    struct rows l = {0}, r = {0};
    assert_int_equal(storage_load(st, prefix, rows_fn, &l, NULL), STORAGE_OK);
    assert_int_equal(storage_range(st, prefix, rows_fn, &r, NULL), STORAGE_OK);
    assert_int_equal(l.n, r.n);
    qsort(l.v, l.n, sizeof *l.v, cmp_krow);
    for (size_t i = 0; i < l.n; i++) {
        assert_string_equal(l.v[i].key, r.v[i].key);
        assert_int_equal(l.v[i].mod_rev, r.v[i].mod_rev);
        assert_int_equal(l.v[i].value_len, r.v[i].value_len);
        if (l.v[i].value_hash != r.v[i].value_hash)
            fail_msg("%s: the loaded value differs from the stored one", l.v[i].key);
    }
    size_t n = l.n;
    free(l.v);
    free(r.v);
    return n;
}

/* A load of thousands of keys written by several threads at once (so
 * their revisions do not follow key order, and run past the 2,048 of one
 * digit of the loader's id sort), then updated and deleted here and
 * there: exactly the rows a range gives. */
static void test_load_many(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    struct burst_run run;
    run_burst(st, "/many", 4, 1000, NULL, NULL, &run);
    size_t deleted = 0;
    for (size_t i = 0; i < run.total; i += 5) {
        if (i % 7 == 0) {
            assert_int_equal(do_delete(st, run.keys[i], 0, NULL), STORAGE_OK);
            deleted++;
        } else {
            assert_int_equal(do_update(st, run.keys[i], "updated", 0, NULL), STORAGE_OK);
        }
    }
    assert_true(storage_current_rev(st) > 4096);
    assert_int_equal(assert_load_like_range(st, "/many/"), run.total - deleted);
    burst_free(&run);
}

/* A burst of creates of sized values, and the writer VFS's counts around
 * it. */
struct sized_burst {
    size_t n, total; /* creates; bytes of values */
    storage_op *ops;
    char (*keys)[32];
    char *vals;
    vfs_writer_counts before, after;
};

/* Creates n values of lengths from `min` up to below `max`, with bytes
 * that differ by value and position, as /PREFIX/kNNNNN (the i-th value's
 * NNNNN is i * key_stride % n: 1 writes the keys in order, a prime to n
 * permutes them), all submitted at once; waits for them and asserts each
 * succeeded. */
static void sized_burst_run(storage *st, const char *prefix, size_t n, size_t key_stride,
                            size_t min, size_t max, struct sized_burst *b)
{
    *b = (struct sized_burst){.n = n,
                              .ops = calloc(n, sizeof *b->ops),
                              .keys = calloc(n, sizeof *b->keys),
                              .vals = malloc(n * max)};
    assert_true(b->ops && b->keys && b->vals);
    struct counter c = {.done = 0};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    vfs_writer_counts_get(&b->before);
    for (size_t i = 0; i < n; i++) {
        size_t len = min + i * 2741 % (max - min);
        char *v = b->vals + i * max;
        for (size_t j = 0; j < len; j++)
            v[j] = (char)('a' + (i + j * 7) % 26);
        snprintf(b->keys[i], sizeof b->keys[i], "/%s/k%05zu", prefix, i * key_stride % n);
        b->ops[i] = (storage_op){.type = STORAGE_OP_CREATE,
                                 .key = b->keys[i],
                                 .value = v,
                                 .value_len = len,
                                 .done = counter_done,
                                 .arg = &c};
        assert_int_equal(storage_submit(st, &b->ops[i]), STORAGE_OK);
        b->total += len;
    }
    counter_wait(&c, n);
    vfs_writer_counts_get(&b->after);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(b->ops[i].result, STORAGE_OK);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
}

static void sized_burst_free(struct sized_burst *b)
{
    free(b->ops);
    free(b->keys);
    free(b->vals);
}

/* A load reads the table from memory-mapped windows of the file
 * (vfs.h): a store of several windows, with values of every size
 * from a hundred bytes to two pages (overflow pages included), some
 * rewritten after the first pass of writes, loads byte for byte what a
 * range reads through SQLite's ordinary reads. */
static void test_load_windows(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    enum { N = 6000, MAX = 8200 };
    struct sized_burst b;
    sized_burst_run(st, "win", N, 7919, 100, MAX, &b);
    assert_true(b.total > 2 * VFS_WINDOW);
    for (size_t i = 0; i < N; i += 9) /* newer rows at the end of the file */
        assert_int_equal(do_update(st, b.keys[i], "rewritten", 0, NULL), STORAGE_OK);
    assert_int_equal(assert_load_like_range(st, "/win/"), N);
    sized_burst_free(&b);
}

/* Every value of a burst reads back as written. */
static void assert_burst(storage *st, storage_op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        storage_kv kv = {0};
        assert_int_equal(storage_get(st, ops[i].key, &kv), STORAGE_OK);
        assert_int_equal(kv.value_len, ops[i].value_len);
        assert_memory_equal(kv.value, ops[i].value, kv.value_len);
        storage_kv_release(&kv);
    }
}

/* The writer's WAL writes are combined (vfs.h): a burst of writes, many
 * values spanning more pages than the buffer holds (a commit's frames
 * written in several pieces, each under the default VFS's 128 KiB limit
 * on one write), reads back whole from the store's other connections
 * right after it commits (the buffer is written before the commit shows),
 * and after a reopen; and the frames went out in far fewer system calls
 * than SQLite's writes. */
static void test_wal_combined(void **state)
{
    struct fixture *f = *state;
    enum { N = 120, MIN = 100, MAX = 300 * 1024 }; /* MAX: more than the buffer */
    struct sized_burst b;
    sized_burst_run(f->st, "wal", N, 1, MIN, MAX, &b);
    assert_burst(f->st, b.ops, N);
    uint64_t writes = b.after.writes - b.before.writes,
             calls = b.after.syscalls - b.before.syscalls;
    print_message("WAL: %" PRIu64 " writes in %" PRIu64 " system calls\n", writes, calls);
    assert_true(writes > 2 * N);
    assert_true(calls * 8 < writes);
    reopen(f);
    assert_burst(f->st, b.ops, N);
    sized_burst_free(&b);
}

/* Size of DIR/state.db-wal, 0 if there is none. */
static long long wal_size(const struct fixture *f)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state.db-wal", f->dir);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* The WAL is checkpointed by the checkpointer's thread (checkpointer.h),
 * and stays bounded: a burst of writes whose frames add up to more than
 * twice the writer's inline bound leaves a WAL file well under what they
 * add up to (about the bound plus the commits made during one background
 * checkpoint: 0.4 of it here under ASan), the background thread has
 * checkpointed, and everything reads back, before and after a reopen. */
static void test_checkpointer(void **state)
{
    struct fixture *f = *state;
    enum { N = 8000, MIN = 3000, MAX = 8000 };
    struct sized_burst b;
    sized_burst_run(f->st, "ckpt", N, 1, MIN, MAX, &b);
    /* what the WAL would hold if nothing were copied back: two writes
     * (header, page) per frame */
    long long frames = (long long)(b.after.writes - b.before.writes) / 2 * (4096 + 24);
    storage_stats st = {0};
    for (int i = 0; i < WAIT_SECONDS * 10; i++) {
        storage_get_stats(f->st, &st);
        if (st.checkpoints > 0)
            break;
        usleep(100 * 1000);
    }
    long long wal = wal_size(f);
    print_message("%zu bytes written, %lld in WAL frames; WAL %lld bytes; checkpoints %" PRIu64
                  " + %" PRIu64 " inline\n",
                  b.total, frames, wal, st.checkpoints, st.inline_checkpoints);
    assert_true(st.checkpoints > 0);
    assert_true(frames > 2 * 4096 * (long long)CHECKPOINTER_INLINE);
    assert_true(wal < frames * 3 / 4);
    /* the WAL's pages after the last commit: some, and no more than its
     * file holds (a WAL that starts over reuses the file from the top) */
    assert_true(st.wal_pages > 0);
    assert_true((long long)st.wal_pages * (4096 + 24) <= wal);
    assert_burst(f->st, b.ops, N);
    reopen(f);
    assert_burst(f->st, b.ops, N);
    sized_burst_free(&b);
}

static void test_load_like_range(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    const char *keys[] = {"/b/1", "/a/2", "/a", "/a/10", "/ab", "/a/1", "/z\xff\xff", "/z\xff"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_int_equal(do_create(st, keys[i], keys[i], NULL), STORAGE_OK);
    for (int i = 0; i < 5; i++) /* history behind /a/2 and /a/1 */
        assert_int_equal(do_update(st, i % 2 ? "/a/2" : "/a/1", i % 2 ? "two" : "one", 0, NULL),
                         STORAGE_OK);
    assert_int_equal(do_create(st, "/a/3", "gone", NULL), STORAGE_OK);
    assert_int_equal(do_delete(st, "/a/3", 0, NULL), STORAGE_OK); /* a tombstone newest */
    assert_int_equal(do_delete(st, "/ab", 0, NULL), STORAGE_OK);
    assert_int_equal(do_create(st, "/ab", "again", NULL), STORAGE_OK); /* re-created */
    assert_int_equal(do_update(st, "/b/1", "b", 0, NULL), STORAGE_OK);

    const char *prefixes[] = {"", "/a", "/a/", "/ab", "/b/", "/z\xff", "/z\xff\xff", "/nothing/"};
    const size_t want[] = {8, 5, 3, 1, 1, 2, 1, 0};
    for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++) {
        struct collected r = {0}, l = {0};
        int64_t rrev = -1, lrev = -1;
        assert_int_equal(storage_range(st, prefixes[p], collect_fn, &r, &rrev), STORAGE_OK);
        assert_int_equal(storage_load(st, prefixes[p], collect_fn, &l, &lrev), STORAGE_OK);
        assert_int_equal(lrev, rrev);
        assert_int_equal(lrev, storage_current_rev(st));
        assert_int_equal(l.n, want[p]);
        assert_int_equal(r.n, want[p]);
        sort_collected(&l);
        for (size_t i = 0; i < l.n; i++) {
            assert_string_equal(l.keys[i], r.keys[i]);
            assert_string_equal(l.values[i], r.values[i]);
            assert_int_equal(l.mod_rev[i], r.mod_rev[i]);
        }
    }
    struct collected c = {.stop_after = 3};
    assert_int_equal(storage_load(st, "", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 3);
    assert_int_equal(storage_load(st, "", NULL, NULL, NULL), STORAGE_ERR_INVALID);
    /* the reader connection works normally afterwards */
    c = (struct collected){0};
    assert_int_equal(storage_range(st, "/a/", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.values[2], "two");
}

/* A range returns each live key's newest row only, whatever history is
 * behind it (updates, a delete and a re-create, a tombstone as the newest
 * row), with that row's revisions; values may hold NULs and are followed
 * by a NUL. The reader connection works normally afterwards. */
struct full_kv {
    size_t n;
    char keys[8][32];
    char values[8][64];
    size_t value_len[8];
    int64_t create_rev[8], mod_rev[8];
    bool nul_after;
};

static int full_fn(void *arg, const storage_kv *kv)
{
    struct full_kv *c = arg;
    if (c->n < 8) {
        snprintf(c->keys[c->n], sizeof c->keys[0], "%s", kv->key);
        assert_true(kv->value_len < sizeof c->values[0]);
        memcpy(c->values[c->n], kv->value, kv->value_len);
        c->value_len[c->n] = kv->value_len;
        c->create_rev[c->n] = kv->create_rev;
        c->mod_rev[c->n] = kv->mod_rev;
        c->nul_after &= kv->value[kv->value_len] == '\0';
    }
    c->n++;
    return 0;
}

static void test_range_history(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    storage_op op;
    assert_int_equal(do_create(st, "/h/a", "a1", NULL), STORAGE_OK);
    for (int i = 2; i <= 20; i++) {
        char v[16];
        snprintf(v, sizeof v, "a%d", i);
        assert_int_equal(do_update(st, "/h/a", v, 0, NULL), STORAGE_OK);
    }
    assert_int_equal(do_create(st, "/h/b", "b1", NULL), STORAGE_OK);
    assert_int_equal(do_delete(st, "/h/b", 0, NULL), STORAGE_OK); /* tombstone newest */
    assert_int_equal(do_create(st, "/h/c", "c1", NULL), STORAGE_OK);
    assert_int_equal(do_delete(st, "/h/c", 0, NULL), STORAGE_OK);
    assert_int_equal(do_create(st, "/h/c", "c2", &op), STORAGE_OK); /* re-created */
    int64_t c_rev = op.rev;
    assert_int_equal(do_write(st, STORAGE_OP_CREATE, "/h/d", "x\0y", 3, 0, &op), STORAGE_OK);
    int64_t d_rev = op.rev;
    assert_int_equal(do_create(st, "/i/after", "z", NULL), STORAGE_OK);

    for (int round = 0; round < 2; round++) {
        struct full_kv c = {.nul_after = true};
        int64_t rev = 0;
        assert_int_equal(storage_range(st, "/h/", full_fn, &c, &rev), STORAGE_OK);
        assert_int_equal(rev, storage_current_rev(st));
        assert_int_equal(c.n, 3);
        assert_string_equal(c.keys[0], "/h/a");
        assert_int_equal(c.value_len[0], 3);
        assert_memory_equal(c.values[0], "a20", 3);
        assert_int_equal(c.create_rev[0], 1);
        assert_int_equal(c.mod_rev[0], 20);
        assert_string_equal(c.keys[1], "/h/c");
        assert_memory_equal(c.values[1], "c2", 2);
        assert_int_equal(c.create_rev[1], c_rev);
        assert_int_equal(c.mod_rev[1], c_rev);
        assert_string_equal(c.keys[2], "/h/d");
        assert_int_equal(c.value_len[2], 3);
        assert_memory_equal(c.values[2], "x\0y", 3);
        assert_int_equal(c.mod_rev[2], d_rev);
        assert_true(c.nul_after);
        /* Reads on the (pooled) reader still work between ranges. */
        assert_kv(st, "/h/a", "a20", 1, 20);
    }
    if (f->be == BE_SQLITE) { /* and from the file after a restart */
        reopen(f);
        struct full_kv c = {.nul_after = true};
        assert_int_equal(storage_range(f->st, "/h/", full_fn, &c, NULL), STORAGE_OK);
        assert_int_equal(c.n, 3);
        assert_int_equal(c.mod_rev[0], 20);
    }
}

/* A writer creates /c/00001, /c/00002, ... one at a time, so key i has
 * revision base + i; a consistent range at revision R therefore returns
 * exactly keys 1..R-base. */
struct seq_writer {
    storage *st;
    int count;
    atomic_int failed;
};

static void *seq_writer_main(void *p)
{
    struct seq_writer *w = p;
    char key[32];
    for (int i = 1; i <= w->count; i++) {
        snprintf(key, sizeof key, "/c/%05d", i);
        storage_op op = {.type = STORAGE_OP_CREATE, .key = key, .value = "v", .value_len = 1};
        struct waiter wt = {.done = false};
        pthread_mutex_init(&wt.mu, NULL);
        pthread_cond_init(&wt.cv, NULL);
        op.done = waiter_done;
        op.arg = &wt;
        if (storage_submit(w->st, &op) != STORAGE_OK) {
            atomic_store(&w->failed, 1);
            break;
        }
        pthread_mutex_lock(&wt.mu);
        while (!wt.done)
            pthread_cond_wait(&wt.cv, &wt.mu);
        pthread_mutex_unlock(&wt.mu);
        pthread_mutex_destroy(&wt.mu);
        pthread_cond_destroy(&wt.cv);
        if (op.result != STORAGE_OK)
            atomic_store(&w->failed, 1);
    }
    return NULL;
}

struct count_range {
    size_t n;
    int64_t max_mod;
    char expect[32];
    bool wrong_key;
};

static int count_fn(void *arg, const storage_kv *kv)
{
    struct count_range *c = arg;
    c->n++;
    snprintf(c->expect, sizeof c->expect, "/c/%05zu", c->n);
    if (strcmp(kv->key, c->expect) != 0)
        c->wrong_key = true;
    if (kv->mod_rev > c->max_mod)
        c->max_mod = kv->mod_rev;
    return 0;
}

static void test_range_consistent(void **state)
{
    struct fixture *f = *state;
    int64_t base = storage_current_rev(f->st);
    struct seq_writer w = {.st = f->st, .count = 300};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, seq_writer_main, &w), 0);
    int64_t rev = 0;
    int ranges = 0;
    while (rev < base + w.count) {
        struct count_range c = {0};
        assert_int_equal(storage_range(f->st, "/c/", count_fn, &c, &rev), STORAGE_OK);
        assert_false(c.wrong_key);
        assert_int_equal((int64_t)c.n, rev - base);
        assert_true(c.max_mod <= rev);
        ranges++;
    }
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&w.failed), 0);
    assert_true(ranges > 1);
}

static void test_watch_from_zero(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    assert_int_equal(do_create(st, "/w/a", "1", NULL), STORAGE_OK);
    assert_int_equal(do_update(st, "/w/a", "2", 0, NULL), STORAGE_OK);
    assert_int_equal(do_create(st, "/w/b", "3", NULL), STORAGE_OK);
    assert_int_equal(do_delete(st, "/w/a", 0, NULL), STORAGE_OK);

    struct recorder r;
    rec_init(&r);
    r.reentrant = st;
    assert_int_equal(storage_watch(st, 0, rec_fn, &r), STORAGE_OK);
    rec_wait(&r, 4); /* history */
    assert_int_equal(do_create(st, "/w/c", "live", NULL), STORAGE_OK);
    rec_wait(&r, 5);
    rec_check_contiguous(&r, 0, 5);

    assert_int_equal(r.ev[0].type, STORAGE_EVENT_PUT);
    assert_string_equal(r.ev[0].key, "/w/a");
    assert_string_equal(r.ev[0].value, "1");
    assert_int_equal(r.ev[0].create_rev, 1); /* == rev: a creation */
    assert_string_equal(r.ev[1].value, "2");
    assert_int_equal(r.ev[1].create_rev, 1); /* an update */
    assert_int_equal(r.ev[3].type, STORAGE_EVENT_DELETE);
    assert_string_equal(r.ev[3].key, "/w/a");
    assert_null(r.ev[3].value);
    assert_int_equal(r.ev[3].create_rev, 1);
    assert_string_equal(r.ev[4].key, "/w/c");
    assert_string_equal(r.ev[4].value, "live");
    assert_int_equal(r.ev[4].create_rev, 5);
    assert_false(r.reentrant_fail);
    storage_close(f->st); /* stop the watch before freeing the recorder */
    f->st = open_backend(f);
    rec_free(&r);
}

static void test_watch_from_middle(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    char key[32];
    for (int i = 1; i <= 600; i++) { /* several replay chunks */
        snprintf(key, sizeof key, "/m/%d", i % 7);
        int rc = i <= 7 ? do_create(st, key, "v", NULL) : do_update(st, key, key, 0, NULL);
        assert_int_equal(rc, STORAGE_OK);
    }
    struct recorder r, future;
    rec_init(&r);
    rec_init(&future);
    assert_int_equal(storage_watch(st, 300, rec_fn, &r), STORAGE_OK);
    rec_wait(&r, 600);
    /* A watch from a future revision only sees events after it. */
    assert_int_equal(storage_watch(st, 605, rec_fn, &future), STORAGE_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(do_update(st, "/m/1", "live", 0, NULL), STORAGE_OK);
    rec_wait(&r, 610);
    rec_wait(&future, 610);
    rec_check_contiguous(&r, 300, 610);
    rec_check_contiguous(&future, 605, 610);
    assert_string_equal(r.ev[309].value, "live");

    storage_close(f->st);
    f->st = open_backend(f);
    rec_free(&r);
    rec_free(&future);
}

/* Watch events are delivered before done() runs. */
struct before_done {
    pthread_mutex_t mu;
    int64_t watched; /* highest revision the watcher has seen */
    int64_t *seen_at_done;
    storage_op *ops;
    struct counter *counter;
};

static void bd_watch(void *arg, const storage_event *ev, size_t n)
{
    struct before_done *b = arg;
    pthread_mutex_lock(&b->mu);
    b->watched = ev[n - 1].rev;
    pthread_mutex_unlock(&b->mu);
}

static void bd_done(storage_op *op, void *arg)
{
    struct before_done *b = arg;
    pthread_mutex_lock(&b->mu);
    b->seen_at_done[op - b->ops] = b->watched;
    pthread_mutex_unlock(&b->mu);
    counter_done(op, b->counter);
}

static void test_watch_before_done(void **state)
{
    struct fixture *f = *state;
    enum { N = 400 };
    struct counter c = {.done = 0};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    struct before_done b = {.counter = &c};
    pthread_mutex_init(&b.mu, NULL);
    b.seen_at_done = calloc(N, sizeof *b.seen_at_done);
    b.ops = calloc(N, sizeof *b.ops);
    char(*keys)[32] = calloc(N, sizeof *keys);
    assert_true(b.seen_at_done && b.ops && keys);
    assert_int_equal(storage_watch(f->st, 0, bd_watch, &b), STORAGE_OK);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "/bd/%d", i);
        b.ops[i] = (storage_op){.type = STORAGE_OP_CREATE,
                                .key = keys[i],
                                .value = "v",
                                .value_len = 1,
                                .done = bd_done,
                                .arg = &b};
        assert_int_equal(storage_submit(f->st, &b.ops[i]), STORAGE_OK);
    }
    counter_wait(&c, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(b.ops[i].result, STORAGE_OK);
        assert_true(b.seen_at_done[i] >= b.ops[i].rev);
    }
    storage_close(f->st);
    f->st = open_backend(f);
    free(b.seen_at_done);
    free(b.ops);
    free(keys);
    pthread_mutex_destroy(&b.mu);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
}

/* A write's hint (storage_op.hint) reaches the watchers in that write's
 * own event and in no other: SQLite and memory deliver their commits
 * with it; etcd finds the op of its own Txn's event, whether the event
 * comes before the Txn's answer (in flight) or after (pending). No
 * delete event carries one, nor does a replay of history. */
static void test_write_hints(void **state)
{
    struct fixture *f = *state;
    enum { N = 40 };
    static const char tags[N][2]; /* one address per write: the hints */
    static const char upd_tags[N][2];
    struct recorder r;
    rec_init(&r);
    assert_int_equal(storage_watch(f->st, 0, rec_fn, &r), STORAGE_OK);
    char keys[N][32], vals[N][64];
    const void *want[3 * N + 1] = {0}; /* by revision since the first */
    int64_t first = 0, last = 0;
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "/hint/%d", i);
        snprintf(vals[i], sizeof vals[i], "value %0*d", 1 + i % 7, i);
        storage_op op = {.type = STORAGE_OP_CREATE,
                         .key = keys[i],
                         .value = vals[i],
                         .value_len = strlen(vals[i]),
                         .hint = tags[i]};
        assert_int_equal(run_op(f->st, &op), STORAGE_OK);
        if (!first)
            first = op.rev;
        assert_true(op.rev - first < 3 * N);
        want[op.rev - first] = tags[i];
        last = op.rev;
    }
    for (int i = 0; i < N; i += 2) { /* updates, then deletes with a hint set */
        storage_op op = {.type = STORAGE_OP_UPDATE,
                         .key = keys[i],
                         .value = "updated",
                         .value_len = 7,
                         .hint = upd_tags[i]};
        assert_int_equal(run_op(f->st, &op), STORAGE_OK);
        want[op.rev - first] = upd_tags[i];
        storage_op del = {.type = STORAGE_OP_DELETE, .key = keys[i + 1], .hint = tags[i + 1]};
        assert_int_equal(run_op(f->st, &del), STORAGE_OK);
        last = del.rev;
    }
    rec_wait(&r, last);
    size_t puts = 0, hinted = 0;
    pthread_mutex_lock(&r.mu);
    for (size_t i = 0; i < r.n; i++) {
        const struct rec_event *e = &r.ev[i];
        if (e->rev < first)
            continue;
        assert_true(e->rev - first < 3 * N);
        if (e->type == STORAGE_EVENT_DELETE) {
            assert_null(e->hint);
            continue;
        }
        puts++;
        if (e->hint) {
            assert_ptr_equal(e->hint, want[e->rev - first]);
            hinted++;
        }
    }
    pthread_mutex_unlock(&r.mu);
    assert_int_equal(puts, N + N / 2);
    assert_int_equal(hinted, puts);
    /* a replay is read back from the store: no hints */
    struct recorder replay;
    rec_init(&replay);
    assert_int_equal(storage_watch(f->st, first - 1, rec_fn, &replay), STORAGE_OK);
    rec_wait(&replay, last);
    pthread_mutex_lock(&replay.mu);
    for (size_t i = 0; i < replay.n; i++)
        assert_null(replay.ev[i].hint);
    pthread_mutex_unlock(&replay.mu);
    storage_close(f->st);
    f->st = open_backend(f);
    rec_free(&replay);
    rec_free(&r);
}

/* Watches registered while writers are busy see every revision after their
 * start exactly once, in order: nothing lost or duplicated at the seam
 * between history replay and live events. */
struct update_loop {
    storage *st;
    int id;
    int count;
    atomic_int failed;
};

static void *update_loop_main(void *p)
{
    struct update_loop *u = p;
    char key[32];
    snprintf(key, sizeof key, "/race/%d", u->id);
    for (int i = 0; i < u->count; i++) {
        storage_op op = {.type = i == 0 ? STORAGE_OP_CREATE : STORAGE_OP_UPDATE,
                         .key = key,
                         .value = key,
                         .value_len = strlen(key)};
        struct waiter w = {.done = false};
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        op.done = waiter_done;
        op.arg = &w;
        if (storage_submit(u->st, &op) != STORAGE_OK) {
            atomic_store(&u->failed, 1);
            break;
        }
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        pthread_mutex_destroy(&w.mu);
        pthread_cond_destroy(&w.cv);
        if (op.result != STORAGE_OK)
            atomic_store(&u->failed, 1);
    }
    return NULL;
}

static void test_watch_register_race(void **state)
{
    struct fixture *f = *state;
    enum { THREADS = 4, PER = 400, WATCHERS = 6 };
    struct update_loop u[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        u[t] = (struct update_loop){.st = f->st, .id = t, .count = PER};
        assert_int_equal(pthread_create(&th[t], NULL, update_loop_main, &u[t]), 0);
    }
    struct recorder r[WATCHERS];
    int64_t from[WATCHERS];
    for (int i = 0; i < WATCHERS; i++) {
        rec_init(&r[i]);
        /* Spread the registrations over the burst, some far enough back to
         * need several replay chunks. */
        while (storage_current_rev(f->st) < (int64_t)i * THREADS * PER / WATCHERS)
            usleep(200);
        int64_t cur = storage_current_rev(f->st);
        from[i] = i % 2 ? cur : (cur > 300 ? cur - 300 : 0);
        assert_int_equal(storage_watch(f->st, from[i], rec_fn, &r[i]), STORAGE_OK);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(atomic_load(&u[t].failed), 0);
    }
    int64_t end = storage_current_rev(f->st);
    assert_int_equal(end, THREADS * PER);
    for (int i = 0; i < WATCHERS; i++) {
        /* On a slow machine the burst may end before the last watchers
         * register: one from the end has nothing to wait for. */
        if (from[i] < end)
            rec_wait(&r[i], end);
        rec_check_contiguous(&r[i], from[i], end);
    }
    storage_close(f->st);
    f->st = open_backend(f);
    for (int i = 0; i < WATCHERS; i++)
        rec_free(&r[i]);
}

/* The revisions n compactions take: none but etcd's election writes. */
#define COMPACT_WRITES(f, n) ((f)->be == BE_ETCD ? (n) : 0)

static void test_compaction(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    assert_int_equal(do_create(st, "/k/a", "a1", NULL), STORAGE_OK);    /* 1 */
    assert_int_equal(do_create(st, "/k/b", "b1", NULL), STORAGE_OK);    /* 2 */
    assert_int_equal(do_update(st, "/k/a", "a2", 0, NULL), STORAGE_OK); /* 3 */
    assert_int_equal(do_delete(st, "/k/b", 0, NULL), STORAGE_OK);       /* 4 */
    assert_int_equal(do_create(st, "/k/c", "c1", NULL), STORAGE_OK);    /* 5 */
    assert_int_equal(do_update(st, "/k/c", "c2", 0, NULL), STORAGE_OK); /* 6 */
    assert_int_equal(do_create(st, "/k/d", "d1", NULL), STORAGE_OK);    /* 7 */
    assert_int_equal(do_delete(st, "/k/d", 0, NULL), STORAGE_OK);       /* 8 */
    assert_int_equal(do_create(st, "/k/e", "e1", NULL), STORAGE_OK);    /* 9 */

    assert_int_equal(storage_compacted_rev(st), 0);
    assert_int_equal(storage_compact(st, 100), STORAGE_ERR_INVALID); /* future */
    assert_int_equal(storage_compact(st, 6), STORAGE_OK);
    assert_int_equal(storage_compacted_rev(st), 6);
    assert_int_equal(storage_compact(st, 3), STORAGE_OK); /* older: no-op */
    assert_int_equal(storage_compacted_rev(st), 6);
    /* etcd: electing the compacting server writes compact_rev_key, which
     * takes a revision, as upstream's compaction does */
    assert_int_equal(storage_current_rev(st), 9 + COMPACT_WRITES(f, 1));

    struct recorder r;
    rec_init(&r);
    assert_int_equal(storage_watch(st, 5, rec_fn, &r), STORAGE_ERR_COMPACTED);
    assert_int_equal(storage_watch(st, 0, rec_fn, &r), STORAGE_ERR_COMPACTED);
    assert_int_equal(r.n, 0);
    assert_int_equal(storage_watch(st, 6, rec_fn, &r), STORAGE_OK);
    rec_wait(&r, 9);
    rec_check_contiguous(&r, 6, 9);

    /* Latest values survive, including versions at or below the compaction. */
    assert_kv(st, "/k/a", "a2", 1, 3);
    assert_kv(st, "/k/c", "c2", 5, 6);
    assert_kv(st, "/k/e", "e1", 9, 9);
    storage_kv kv = {0};
    assert_int_equal(storage_get(st, "/k/b", &kv), STORAGE_ERR_NOT_FOUND);
    assert_int_equal(storage_get(st, "/k/d", &kv), STORAGE_ERR_NOT_FOUND);
    struct collected c = {0};
    assert_int_equal(storage_range(st, "/k/", collect_fn, &c, NULL), STORAGE_OK);
    assert_int_equal(c.n, 3);

    /* Writes to compacted keys keep working and create_rev survives. */
    storage_op op;
    assert_int_equal(do_update(st, "/k/a", "a3", 3, &op), STORAGE_OK);
    assert_int_equal(op.rev, 10 + COMPACT_WRITES(f, 1));
    assert_int_equal(op.create_rev, 1);
    assert_int_equal(do_create(st, "/k/b", "b2", &op), STORAGE_OK);
    assert_int_equal(op.rev, 11 + COMPACT_WRITES(f, 1));
    assert_int_equal(op.create_rev, 11 + COMPACT_WRITES(f, 1));
    if (f->be == BE_ETCD) {
        /* 7..9, then (after the election's write, 10, a gap) 11 and 12 */
        rec_wait(&r, 12);
        pthread_mutex_lock(&r.mu);
        assert_int_equal(r.n, 5);
        static const int64_t revs[] = {7, 8, 9, 11, 12};
        for (size_t i = 0; i < 5; i++)
            assert_int_equal(r.ev[i].rev, revs[i]);
        pthread_mutex_unlock(&r.mu);
    } else {
        rec_wait(&r, 11);
        rec_check_contiguous(&r, 6, 11);
    }

    if (f->be == BE_SQLITE) {
        /* Superseded rows and tombstones up to 6 are gone from the log: only
         * /k/a@3 and /k/c@6 remain there (a's row 3 is superseded only by
         * 10, after the compaction). */
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/state.db", f->dir);
        sqlite3 *db;
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_stmt *s;
        assert_int_equal(
            sqlite3_prepare_v2(db, "SELECT group_concat(id) FROM (SELECT id FROM kv ORDER BY id)",
                               -1, &s, NULL),
            SQLITE_OK);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(s, 0), "3,6,7,8,9,10,11");
        sqlite3_finalize(s);
        sqlite3_close(db);
    }
    storage_close(f->st);
    f->st = open_backend(f);
    rec_free(&r);
}

/* Compacting away the newest row (a tombstone) must not let a revision be
 * reused, in memory, in the database, or after a restart. */
static void test_compaction_keeps_counter(void **state)
{
    struct fixture *f = *state;
    storage *st = f->st;
    storage_op op;
    assert_int_equal(do_create(st, "/x", "1", NULL), STORAGE_OK); /* 1 */
    assert_int_equal(do_create(st, "/y", "1", NULL), STORAGE_OK); /* 2 */
    assert_int_equal(do_delete(st, "/y", 0, NULL), STORAGE_OK);   /* 3 */
    assert_int_equal(storage_compact(st, 3), STORAGE_OK);
    assert_int_equal(storage_current_rev(st), 3 + COMPACT_WRITES(f, 1));
    assert_int_equal(do_create(st, "/z", "1", &op), STORAGE_OK);
    assert_int_equal(op.rev, 4 + COMPACT_WRITES(f, 1));
    assert_int_equal(do_delete(st, "/z", 0, NULL), STORAGE_OK); /* 5 */
    assert_int_equal(storage_compact(st, 5), STORAGE_OK);
    if (f->be == BE_SQLITE) {
        reopen(f);
        st = f->st;
        assert_int_equal(storage_current_rev(st), 5);
        assert_int_equal(storage_compacted_rev(st), 5);
        assert_kv(st, "/x", "1", 1, 1);
    }
    assert_int_equal(do_create(st, "/y", "2", &op), STORAGE_OK);
    assert_int_equal(op.rev, 6 + COMPACT_WRITES(f, 2));
    struct recorder r;
    rec_init(&r);
    assert_int_equal(storage_watch(st, 4, rec_fn, &r), STORAGE_ERR_COMPACTED);
    assert_int_equal(storage_watch(st, 5, rec_fn, &r), STORAGE_OK);
    if (f->be == BE_ETCD) {
        /* the delete of /z (6), then /y (8): the election's write (7) is
         * outside the watched keys, a gap in the revisions */
        rec_wait(&r, 8);
        pthread_mutex_lock(&r.mu);
        assert_int_equal(r.n, 2);
        assert_int_equal(r.ev[0].rev, 6);
        assert_int_equal(r.ev[1].rev, 8);
        pthread_mutex_unlock(&r.mu);
    } else {
        rec_wait(&r, 6);
        rec_check_contiguous(&r, 5, 6);
    }
    storage_close(f->st);
    f->st = open_backend(f);
    rec_free(&r);
}

static void test_group_commit(void **state)
{
    struct fixture *f = *state;
    storage_stats before, after;
    storage_get_stats(f->st, &before);
    int64_t base = storage_current_rev(f->st);
    struct burst_run run;
    run_burst(f->st, "/gc", 8, 125, NULL, NULL, &run);
    assert_revs_contiguous(&run, base);
    assert_int_equal(storage_current_rev(f->st), base + 1000);
    storage_get_stats(f->st, &after);
    uint64_t commits = after.commits - before.commits;
    assert_int_equal(after.ops - before.ops, 1000);
    assert_int_equal(after.failed_commits, 0);
    print_message("      %s: 1000 ops in %" PRIu64 " transactions (largest %" PRIu64 ")\n",
                  f->be == BE_SQLITE ? "sqlite" : "memory", commits, after.max_batch);
    if (f->be == BE_SQLITE) {
        assert_true(commits < 100);
        assert_true(after.max_batch > 10);
    }
    assert_true(commits <= 1000 && commits >= 2); /* at most 512 per group */
    /* Every value landed under its key. */
    for (size_t i = 0; i < run.total; i += 97)
        assert_kv(f->st, run.keys[i], run.keys[i], run.ops[i].rev, run.ops[i].rev);
    burst_free(&run);
}

static void test_throughput(void **state)
{
    struct fixture *f = *state;
    int64_t base = storage_current_rev(f->st);
    storage_stats st0, st1;
    storage_get_stats(f->st, &st0);
    struct burst_run run;
    run_burst(f->st, "/tp", 8, 1250, NULL, NULL, &run);
    storage_get_stats(f->st, &st1);
    assert_revs_contiguous(&run, base);
    print_message("      %s: 10000 concurrent creates in %.3f s = %.0f ops/s, %" PRIu64
                  " transactions\n",
                  f->be == BE_SQLITE ? "sqlite" : "memory", run.seconds, 10000.0 / run.seconds,
                  st1.commits - st0.commits);
    burst_free(&run);
}

/* Callbacks may use the store: a done callback submits a follow-up write
 * (it is queued, not deadlocked) and a range callback reads. */
struct chain {
    storage *st;
    storage_op next;
    int submit_rc;
    struct counter *counter;
};

static void chain_done(storage_op *op, void *arg)
{
    (void)op;
    struct chain *c = arg;
    c->next = (storage_op){.type = STORAGE_OP_CREATE,
                           .key = "/chain/2",
                           .value = "second",
                           .value_len = 6,
                           .done = counter_done,
                           .arg = c->counter};
    c->submit_rc = storage_submit(c->st, &c->next);
    counter_done(op, c->counter);
}

struct nested {
    storage *st;
    int inner_rc;
    size_t inner_n;
};

static int nested_fn(void *arg, const storage_kv *kv)
{
    struct nested *n = arg;
    storage_kv got = {0};
    n->inner_rc |= storage_get(n->st, kv->key, &got);
    if (n->inner_rc == STORAGE_OK &&
        (got.value_len != kv->value_len || memcmp(got.value, kv->value, kv->value_len) != 0))
        n->inner_rc = -999;
    storage_kv_release(&got);
    struct collected c = {0};
    n->inner_rc |= storage_range(n->st, "/chain/", collect_fn, &c, NULL);
    n->inner_n = c.n;
    return 0;
}

static void test_reentrant_callbacks(void **state)
{
    struct fixture *f = *state;
    struct counter cnt = {.done = 0};
    pthread_mutex_init(&cnt.mu, NULL);
    pthread_cond_init(&cnt.cv, NULL);
    struct chain ch = {.st = f->st, .counter = &cnt};
    storage_op first = {.type = STORAGE_OP_CREATE,
                        .key = "/chain/1",
                        .value = "first",
                        .value_len = 5,
                        .done = chain_done,
                        .arg = &ch};
    assert_int_equal(storage_submit(f->st, &first), STORAGE_OK);
    counter_wait(&cnt, 2);
    assert_int_equal(ch.submit_rc, STORAGE_OK);
    assert_int_equal(first.result, STORAGE_OK);
    assert_int_equal(ch.next.result, STORAGE_OK);
    assert_int_equal(ch.next.rev, first.rev + 1);

    struct nested n = {.st = f->st};
    assert_int_equal(storage_range(f->st, "/chain/", nested_fn, &n, NULL), STORAGE_OK);
    assert_int_equal(n.inner_rc, STORAGE_OK);
    assert_int_equal(n.inner_n, 2);
    pthread_mutex_destroy(&cnt.mu);
    pthread_cond_destroy(&cnt.cv);
}

/* storage_close finishes every queued op (done ran for all, results OK) and
 * refuses ops submitted once it has started. */
struct late {
    storage *st;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool release;
    int late_rc;
    storage_op late_op;
};

static void late_done(storage_op *op, void *arg)
{
    (void)op;
    struct late *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->release)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    l->late_op = (storage_op){
        .type = STORAGE_OP_CREATE, .key = "/late", .value = "x", .value_len = 1, .done = noop_done};
    l->late_rc = storage_submit(l->st, &l->late_op);
}

static void *release_later(void *p)
{
    struct late *l = p;
    usleep(300 * 1000); /* long enough for the main thread to be in close */
    pthread_mutex_lock(&l->mu);
    l->release = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void test_close(void **state)
{
    struct fixture *f = *state;
    /* Close drains the queue. */
    struct counter cnt = {.done = 0};
    pthread_mutex_init(&cnt.mu, NULL);
    pthread_cond_init(&cnt.cv, NULL);
    enum { N = 300 };
    storage_op *ops = calloc(N, sizeof *ops);
    char(*keys)[32] = calloc(N, sizeof *keys);
    assert_true(ops && keys);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "/close/%03d", i);
        ops[i] = (storage_op){.type = STORAGE_OP_CREATE,
                              .key = keys[i],
                              .value = keys[i],
                              .value_len = strlen(keys[i]),
                              .done = counter_done,
                              .arg = &cnt};
        assert_int_equal(storage_submit(f->st, &ops[i]), STORAGE_OK);
    }
    storage_close(f->st);
    f->st = NULL;
    assert_int_equal(cnt.done, N); /* no lock needed: the thread is gone */
    for (int i = 0; i < N; i++)
        assert_int_equal(ops[i].result, STORAGE_OK);
    f->st = open_backend(f);
    if (f->be == BE_SQLITE) { /* and it was all durable */
        assert_int_equal(storage_current_rev(f->st), N);
        assert_kv(f->st, keys[N - 1], keys[N - 1], 0, 0);
    }

    /* An op submitted after close started is refused. */
    struct late l = {.st = f->st, .late_rc = 12345};
    pthread_mutex_init(&l.mu, NULL);
    pthread_cond_init(&l.cv, NULL);
    storage_op blocker = {.type = STORAGE_OP_CREATE,
                          .key = "/blocker",
                          .value = "x",
                          .value_len = 1,
                          .done = late_done,
                          .arg = &l};
    assert_int_equal(storage_submit(f->st, &blocker), STORAGE_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_later, &l), 0);
    storage_close(f->st);
    pthread_join(th, NULL);
    assert_int_equal(l.late_rc, STORAGE_ERR_CLOSED);
    assert_int_equal(blocker.result, STORAGE_OK);
    f->st = open_backend(f);

    pthread_mutex_destroy(&l.mu);
    pthread_cond_destroy(&l.cv);
    pthread_mutex_destroy(&cnt.mu);
    pthread_cond_destroy(&cnt.cv);
    free(ops);
    free(keys);
}

/* ---- SQLite only ---- */

static void test_restart(void **state)
{
    struct fixture *f = *state;
    storage_op op;
    assert_int_equal(do_create(f->st, "/p/a", "a1", NULL), STORAGE_OK);    /* 1 */
    assert_int_equal(do_create(f->st, "/p/b", "b1", NULL), STORAGE_OK);    /* 2 */
    assert_int_equal(do_update(f->st, "/p/a", "a2", 1, NULL), STORAGE_OK); /* 3 */
    assert_int_equal(do_delete(f->st, "/p/b", 0, NULL), STORAGE_OK);       /* 4 */
    static const char bin[] = {'\0', 'b', '\0'};
    assert_int_equal(do_write(f->st, STORAGE_OP_CREATE, "/p/bin", bin, 3, 0, NULL), STORAGE_OK);
    reopen(f);
    assert_int_equal(storage_current_rev(f->st), 5);
    assert_kv(f->st, "/p/a", "a2", 1, 3);
    storage_kv kv = {0};
    assert_int_equal(storage_get(f->st, "/p/b", &kv), STORAGE_ERR_NOT_FOUND);
    assert_int_equal(storage_get(f->st, "/p/bin", &kv), STORAGE_OK);
    assert_int_equal(kv.value_len, 3);
    assert_memory_equal(kv.value, bin, 3);
    storage_kv_release(&kv);

    /* History survives too. */
    struct recorder r;
    rec_init(&r);
    assert_int_equal(storage_watch(f->st, 0, rec_fn, &r), STORAGE_OK);
    rec_wait(&r, 5);
    /* New revisions continue above the old ones; preconditions still hold. */
    assert_int_equal(do_update(f->st, "/p/a", "a3", 3, &op), STORAGE_OK);
    assert_int_equal(op.rev, 6);
    assert_int_equal(op.create_rev, 1);
    rec_wait(&r, 6);
    rec_check_contiguous(&r, 0, 6);
    assert_int_equal(r.ev[3].type, STORAGE_EVENT_DELETE);
    assert_int_equal(r.ev[3].create_rev, 2);
    assert_int_equal(r.ev[4].value_len, 3);
    assert_memory_equal(r.ev[4].value, bin, 3);
    reopen(f);
    rec_free(&r);
    assert_int_equal(storage_current_rev(f->st), 6);
}

/* A failing transaction fails every op of its group with IO, sends no
 * events and consumes no revisions; the store keeps working. The failure is
 * injected with a trigger that aborts inserts of keys starting "/boom". */
struct fail_run {
    storage_op ops[64];
    char keys[64][32];
};

static void test_commit_failure(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(do_create(f->st, "/ok/0", "v", NULL), STORAGE_OK);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state.db", f->dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TRIGGER boom BEFORE INSERT ON kv"
                                  " WHEN NEW.key LIKE '/boom%'"
                                  " BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);

    struct recorder r;
    rec_init(&r);
    assert_int_equal(storage_watch(f->st, 1, rec_fn, &r), STORAGE_OK);
    storage_op op;
    assert_int_equal(do_create(f->st, "/boom/1", "v", &op), STORAGE_ERR_IO);
    assert_int_equal(op.rev, 0);
    assert_int_equal(storage_current_rev(f->st), 1);

    /* A burst mixing good and failing ops: whichever groups they land in,
     * the ops that succeeded have contiguous revisions and are exactly what
     * the watcher saw. */
    struct counter cnt = {.done = 0};
    pthread_mutex_init(&cnt.mu, NULL);
    pthread_cond_init(&cnt.cv, NULL);
    struct fail_run *fr = calloc(1, sizeof *fr);
    assert_non_null(fr);
    for (int i = 0; i < 64; i++) {
        snprintf(fr->keys[i], sizeof fr->keys[i], i % 16 == 15 ? "/boom/%d" : "/ok/%d", i + 1);
        fr->ops[i] = (storage_op){.type = STORAGE_OP_CREATE,
                                  .key = fr->keys[i],
                                  .value = "v",
                                  .value_len = 1,
                                  .done = counter_done,
                                  .arg = &cnt};
        assert_int_equal(storage_submit(f->st, &fr->ops[i]), STORAGE_OK);
    }
    counter_wait(&cnt, 64);
    int64_t next = 2;
    size_t failed = 0;
    storage_kv kv = {0};
    for (int i = 0; i < 64; i++) {
        if (fr->ops[i].result == STORAGE_OK) {
            assert_int_equal(fr->ops[i].rev, next++);
            assert_kv(f->st, fr->keys[i], "v", 0, fr->ops[i].rev);
        } else {
            assert_int_equal(fr->ops[i].result, STORAGE_ERR_IO);
            assert_int_equal(storage_get(f->st, fr->keys[i], &kv), STORAGE_ERR_NOT_FOUND);
            failed++;
        }
    }
    assert_true(failed >= 4); /* the four /boom keys at least */
    assert_int_equal(storage_current_rev(f->st), next - 1);
    /* Still working afterwards. */
    assert_int_equal(do_create(f->st, "/ok/after", "v", &op), STORAGE_OK);
    assert_int_equal(op.rev, next);
    rec_wait(&r, next);
    rec_check_contiguous(&r, 1, next);
    for (size_t i = 0; i < r.n; i++)
        assert_int_equal(strncmp(r.ev[i].key, "/ok/", 4), 0);
    storage_stats stats;
    storage_get_stats(f->st, &stats);
    assert_true(stats.failed_commits >= 2);

    storage_close(f->st);
    f->st = open_backend(f);
    rec_free(&r);
    free(fr);
    pthread_mutex_destroy(&cnt.mu);
    pthread_cond_destroy(&cnt.cv);
}

static void test_open_errors(void **state)
{
    struct fixture *f = *state;
    char *err = NULL;
    /* The directory is locked by the open store. */
    assert_null(storage_sqlite_open(f->dir, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "in use"));
    free(err);
    err = NULL;

    assert_null(storage_sqlite_open("", &err));
    assert_non_null(err);
    free(err);
    err = NULL;
    assert_null(storage_sqlite_open(NULL, NULL));

    /* A regular file where the directory should be. */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/file", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_null(storage_sqlite_open(path, &err));
    assert_true(err && *err);
    free(err);
    err = NULL;

    /* Nested directories are created. */
    snprintf(path, sizeof path, "%s/a/b/c", f->dir);
    storage *st = storage_sqlite_open(path, &err);
    assert_null(err);
    assert_non_null(st);
    storage_close(st);

    /* Not a database. */
    snprintf(path, sizeof path, "%s/bad", f->dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/bad/state.db", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("this is not an sqlite database, just text that is long enough......", fp);
    fclose(fp);
    snprintf(path, sizeof path, "%s/bad", f->dir);
    assert_null(storage_sqlite_open(path, &err));
    assert_true(err && *err);
    free(err);
}

#define SUITE(X, be)                                                                               \
    X(test_create_get, be), X(test_invalid_ops, be), X(test_update, be), X(test_delete, be),       \
        X(test_revisions_global, be), X(test_range_prefix, be), X(test_load_like_range, be),       \
        X(test_load_many, be), X(test_range_history, be), X(test_range_consistent, be),            \
        X(test_watch_from_zero, be), X(test_watch_from_middle, be), X(test_watch_before_done, be), \
        X(test_write_hints, be), X(test_watch_register_race, be), X(test_compaction, be),          \
        X(test_compaction_keeps_counter, be), X(test_group_commit, be), X(test_throughput, be),    \
        X(test_reentrant_callbacks, be), X(test_close, be)

/* What only the SQLite store has: a file to reopen, fail and lock (etcd's
 * restart, fault and open errors are test_etcd_client's). */
#define SQLITE_ONLY(X, be)                                                                         \
    X(test_load_windows, be), X(test_wal_combined, be), X(test_checkpointer, be),                  \
        X(test_restart, be), X(test_commit_failure, be), X(test_open_errors, be)

/* etcd: the suite as it applies (revisions are etcd's, which start at 1,
 * and writes are not grouped as the committer groups them). */
#define ETCD_SUITE(X, be) SUITE(X, be)

#define T(fn, be) cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, (void *)&be)

/* Every backend's group, or those named on the command line ("memory",
 * "sqlite", "etcd"): the ThreadSanitizer pass runs the first two (the
 * committer's and checkpointer's threads), whose etcd group, several
 * times slower under TSan, ran past the test timeout beside the e2e
 * tests; the etcd client's threads have TSan tests of their own
 * (tests/unit/storage/etcd/). */
static bool wanted(int argc, char **argv, const char *group)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], group))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest memory_tests[] = {SUITE(T, be_memory)};
    const struct CMUnitTest sqlite_tests[] = {SUITE(T, be_sqlite), SQLITE_ONLY(T, be_sqlite)};
    const struct CMUnitTest etcd_tests[] = {ETCD_SUITE(T, be_etcd)};
    int failed = 0;
    if (wanted(argc, argv, "memory"))
        failed += cmocka_run_group_tests_name("storage/memory", memory_tests, NULL, NULL);
    if (wanted(argc, argv, "sqlite"))
        failed += cmocka_run_group_tests_name("storage/sqlite", sqlite_tests, NULL, NULL);
    if (wanted(argc, argv, "etcd"))
        failed += cmocka_run_group_tests_name("storage/etcd", etcd_tests, NULL, NULL);
    return failed != 0;
}
