/* Waiting for the watch cache to reach a revision (fresh.h). */
#include "apiserver/cacher/fresh.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "ckube/log.h"
#include "common/xalloc.h"

typedef struct waiter waiter;
struct waiter {
    waiter *next;
    int64_t want;             /* < 0: the storage's current revision, not asked yet */
    struct timespec deadline; /* CLOCK_MONOTONIC */
    fresh_fn fn;
    void *arg;
};

struct fresh {
    storage *st;
    fresh_rev_fn rev;
    void *rev_ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* on CLOCK_MONOTONIC: new waiters, pokes, close */
    waiter *ask;         /* under mu: waiting for the storage's revision */
    waiter *waiting;     /* under mu: waiting for the cache */
    uint64_t pokes;      /* under mu: bumped by fresh_poke */
    bool closing;        /* under mu */
    atomic_size_t count; /* waiters in ask and waiting (fresh_poke reads it) */
};

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

enum { PROGRESS_EVERY_MS = 100 };

static void add_ms(struct timespec *t, int ms)
{
    t->tv_sec += ms / 1000;
    t->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

static void push(waiter **list, waiter *w)
{
    w->next = *list;
    *list = w;
}

/* Calls and frees every waiter of a list (mu not held). */
static void finish_all(fresh *f, waiter *list, int rc, int64_t have)
{
    while (list) {
        waiter *w = list;
        list = w->next;
        atomic_fetch_sub(&f->count, 1);
        w->fn(w->arg, rc, w->want, have);
        free(w);
    }
}

/* Asks the storage for its revision for every waiter in `batch` (one
 * question for all), then files them as waiting for it. mu held on entry
 * and exit, dropped for the question. */
static void ask_storage(fresh *f, waiter *batch)
{
    pthread_mutex_unlock(&f->mu);
    int64_t cur = storage_current_rev(f->st);
    waiter *failed = NULL;
    pthread_mutex_lock(&f->mu);
    while (batch) {
        waiter *w = batch;
        batch = w->next;
        if (cur < 0) {
            push(&failed, w);
        } else {
            w->want = cur;
            push(&f->waiting, w);
        }
    }
    if (failed) {
        pthread_mutex_unlock(&f->mu);
        CKUBE_WARN("cacher: the storage cannot tell its current revision; consistent reads fail");
        finish_all(f, failed, FRESH_UNAVAILABLE, f->rev(f->rev_ctx));
        pthread_mutex_lock(&f->mu);
    }
}

/* Takes, from `waiting`, the waiters the cache has reached (into *done)
 * and those whose time is out (into *late). mu held. Returns the earliest
 * deadline left in *next (tv_sec 0 if none). */
static void sort_out(fresh *f, int64_t have, const struct timespec *now, waiter **done,
                     waiter **late, struct timespec *next)
{
    next->tv_sec = 0;
    next->tv_nsec = 0;
    for (waiter **p = &f->waiting; *p;) {
        waiter *w = *p;
        if (w->want <= have || !before(now, &w->deadline)) {
            *p = w->next;
            push(w->want <= have ? done : late, w);
            continue;
        }
        if (!next->tv_sec || before(&w->deadline, next))
            *next = w->deadline;
        p = &w->next;
    }
}

static void *fresh_main(void *arg)
{
    fresh *f = arg;
    pthread_setname_np(pthread_self(), "ckube-fresh"); /* top -H, perf, gdb */
    struct timespec progress_at = {0, 0};              /* when to ask for progress next */
    pthread_mutex_lock(&f->mu);
    while (!f->closing) {
        if (f->ask) {
            waiter *batch = f->ask;
            f->ask = NULL;
            ask_storage(f, batch);
            continue;
        }
        uint64_t pokes = f->pokes;
        pthread_mutex_unlock(&f->mu);
        int64_t have = f->rev(f->rev_ctx); /* takes the cacher's lock: not under mu */
        struct timespec now, next;
        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&f->mu);
        waiter *done = NULL, *late = NULL;
        sort_out(f, have, &now, &done, &late, &next);
        if (done || late) {
            pthread_mutex_unlock(&f->mu);
            finish_all(f, done, FRESH_OK, have);
            finish_all(f, late, FRESH_TIMEOUT, have);
            pthread_mutex_lock(&f->mu);
            continue;
        }
        if (f->pokes != pokes || f->ask || f->closing)
            continue; /* the cache moved (or more came) while we looked */
        if (f->waiting && !before(&now, &progress_at)) {
            /* The revisions waited for may all be other keys': only a
             * progress event moves the cache there. Asked every 100 ms
             * while anybody waits, as upstream's progress requester. */
            progress_at = now;
            add_ms(&progress_at, PROGRESS_EVERY_MS);
            pthread_mutex_unlock(&f->mu);
            storage_request_progress(f->st);
            pthread_mutex_lock(&f->mu);
            continue;
        }
        if (f->waiting && before(&progress_at, &next))
            next = progress_at;
        if (next.tv_sec)
            pthread_cond_timedwait(&f->cv, &f->mu, &next);
        else
            pthread_cond_wait(&f->cv, &f->mu);
    }
    waiter *rest = f->ask, *more = f->waiting;
    f->ask = f->waiting = NULL;
    pthread_mutex_unlock(&f->mu);
    int64_t have = f->rev(f->rev_ctx);
    finish_all(f, rest, FRESH_CLOSED, have);
    finish_all(f, more, FRESH_CLOSED, have);
    return NULL;
}

fresh *fresh_new(storage *st, fresh_rev_fn rev, void *rev_ctx)
{
    fresh *f = xcalloc(1, sizeof *f);
    f->st = st;
    f->rev = rev;
    f->rev_ctx = rev_ctx;
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&f->thread, NULL, fresh_main, f) != 0) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        free(f);
        return NULL;
    }
    return f;
}

void fresh_wait(fresh *f, int64_t rev, int timeout_ms, fresh_fn fn, void *arg)
{
    waiter *w = xcalloc(1, sizeof *w);
    w->want = rev;
    w->fn = fn;
    w->arg = arg;
    clock_gettime(CLOCK_MONOTONIC, &w->deadline);
    add_ms(&w->deadline, timeout_ms);
    atomic_fetch_add(&f->count, 1);
    pthread_mutex_lock(&f->mu);
    push(rev < 0 ? &f->ask : &f->waiting, w);
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void fresh_poke(fresh *f)
{
    if (!f || atomic_load(&f->count) == 0)
        return;
    pthread_mutex_lock(&f->mu);
    f->pokes++;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void fresh_free(fresh *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->closing = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}
