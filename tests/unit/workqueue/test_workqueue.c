/* The work queue: dedup, requeue after done, one worker per key, no lost
 * adds, shutdown and drain, delays on the fake clock, rate limiting and
 * metrics. Also run under ThreadSanitizer. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ckube/workqueue.h"

#define MS(n) CKUBE_MS(n)
#define SEC(n) CKUBE_SEC(n)

static ckube_workqueue *newq(ckube_clock *clk)
{
    ckube_workqueue_config cfg = {.clock = clk};
    ckube_workqueue *q = ckube_workqueue_new(&cfg);
    assert_non_null(q);
    return q;
}

static void real_sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Polls (in real time, up to 10 s) until `n` threads sleep on the fake
 * clock, i.e. a getter is parked waiting for a delay. */
static void wait_waiters(ckube_clock *clk, size_t n)
{
    for (int i = 0; i < 100000; i++) {
        if (ckube_fake_clock_waiters(clk) >= n)
            return;
        real_sleep_us(100);
    }
    fail_msg("timed out waiting for %zu fake-clock waiters", n);
}

/* get + compare + done, single-threaded (the key must be ready). */
static void expect_next(ckube_workqueue *q, const char *want)
{
    char *k = ckube_workqueue_get(q);
    assert_non_null(k);
    assert_string_equal(k, want);
    assert_int_equal(ckube_workqueue_done(q, k), 0);
    free(k);
}

static void test_fifo_and_dedup(void **state)
{
    (void)state;
    ckube_workqueue *q = newq(NULL);
    assert_int_equal(ckube_workqueue_add(q, "ns/a"), 0);
    assert_int_equal(ckube_workqueue_add(q, "ns/b"), 0);
    assert_int_equal(ckube_workqueue_add(q, "ns/a"), 0); /* merged */
    assert_int_equal(ckube_workqueue_add(q, "ns/c"), 0);
    assert_int_equal(ckube_workqueue_len(q), 3);
    expect_next(q, "ns/a");
    expect_next(q, "ns/b");
    expect_next(q, "ns/c");
    assert_int_equal(ckube_workqueue_len(q), 0);
    /* The queue copied the keys: a caller's buffer can change. */
    char buf[16];
    strcpy(buf, "ns/x");
    ckube_workqueue_add(q, buf);
    strcpy(buf, "ns/y");
    expect_next(q, "ns/x");
    ckube_workqueue_free(q);
}

static void test_requeue_after_done(void **state)
{
    (void)state;
    ckube_workqueue *q = newq(NULL);
    ckube_workqueue_add(q, "a");
    ckube_workqueue_add(q, "b");
    char *k = ckube_workqueue_get(q);
    assert_string_equal(k, "a");
    /* Added while processing: not handed out to anyone else... */
    ckube_workqueue_add(q, "a");
    ckube_workqueue_add(q, "a");
    assert_int_equal(ckube_workqueue_len(q), 1); /* only b */
    expect_next(q, "b");
    assert_int_equal(ckube_workqueue_len(q), 0);
    /* ...and queued again, once, when the worker is done. */
    assert_int_equal(ckube_workqueue_done(q, k), 0);
    free(k);
    assert_int_equal(ckube_workqueue_len(q), 1);
    expect_next(q, "a");
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_workqueue_free(q);
}

static void test_done_misuse(void **state)
{
    (void)state;
    ckube_workqueue *q = newq(NULL);
    /* Unknown key, key only queued (not processing), and double done are
     * refused without side effects. */
    assert_int_equal(ckube_workqueue_done(q, "nope"), -1);
    ckube_workqueue_add(q, "a");
    assert_int_equal(ckube_workqueue_done(q, "a"), -1);
    assert_int_equal(ckube_workqueue_len(q), 1);
    char *k = ckube_workqueue_get(q);
    assert_int_equal(ckube_workqueue_done(q, "a"), 0); /* any equal string works */
    assert_int_equal(ckube_workqueue_done(q, k), -1);
    free(k);
    assert_int_equal(ckube_workqueue_len(q), 0);
    /* NULL arguments. */
    assert_int_equal(ckube_workqueue_add(NULL, "a"), -1);
    assert_int_equal(ckube_workqueue_add(q, NULL), -1);
    assert_int_equal(ckube_workqueue_add_after(q, NULL, 1), -1);
    assert_int_equal(ckube_workqueue_add_rate_limited(q, NULL), -1);
    assert_int_equal(ckube_workqueue_done(q, NULL), -1);
    assert_null(ckube_workqueue_get(NULL));
    assert_null(ckube_workqueue_get_borrowed(NULL));
    assert_int_equal(ckube_workqueue_len(NULL), 0);
    ckube_workqueue_shutdown(NULL);
    ckube_workqueue_free(NULL);
    ckube_workqueue_free(q);
}

static void test_borrowed_keys(void **state)
{
    (void)state;
    ckube_workqueue *q = newq(NULL);
    ckube_workqueue_add(q, "ns/borrowed");
    const char *k = ckube_workqueue_get_borrowed(q);
    assert_string_equal(k, "ns/borrowed");
    ckube_workqueue_add(q, "ns/borrowed"); /* while processing */
    assert_string_equal(k, "ns/borrowed"); /* still valid */
    assert_int_equal(ckube_workqueue_done(q, k), 0);
    const char *k2 = ckube_workqueue_get_borrowed(q);
    assert_string_equal(k2, "ns/borrowed");
    assert_int_equal(ckube_workqueue_done(q, k2), 0);
    ckube_workqueue_free(q);
}

static void test_many_keys_recycled(void **state)
{
    (void)state;
    /* More distinct keys than the queue keeps idle: evicted items are
     * freed and can come back (ASan checks for leaks and reuse bugs). */
    ckube_workqueue *q = newq(NULL);
    char key[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 5000; i++) {
            snprintf(key, sizeof(key), "ns/key-%d", i);
            ckube_workqueue_add(q, key);
        }
        assert_int_equal(ckube_workqueue_len(q), 5000);
        for (int i = 0; i < 5000; i++) {
            snprintf(key, sizeof(key), "ns/key-%d", i);
            expect_next(q, key);
        }
    }
    ckube_workqueue_free(q);
}

/* ---- shutdown ---- */

typedef struct getter {
    ckube_workqueue *q;
    char *got;
    atomic_int finished;
} getter;

static void *getter_main(void *arg)
{
    getter *g = arg;
    g->got = ckube_workqueue_get(g->q);
    atomic_store(&g->finished, 1);
    return NULL;
}

static void test_shutdown_wakes_getters(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(1));
    ckube_workqueue *q = newq(clk);
    /* A far-away delayed key makes blocked getters sleep on the fake
     * clock, so we can see that all of them are parked. */
    ckube_workqueue_add_after(q, "far", SEC(3600));
    enum { N = 4 };
    getter g[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        g[i] = (getter){.q = q};
        pthread_create(&th[i], NULL, getter_main, &g[i]);
    }
    wait_waiters(clk, N);
    assert_int_equal(ckube_workqueue_shutting_down(q), 0);
    ckube_workqueue_shutdown(q);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_null(g[i].got); /* the delayed key was dropped */
    }
    assert_int_equal(ckube_workqueue_shutting_down(q), 1);
    ckube_workqueue_shutdown(q); /* idempotent */
    ckube_workqueue_free(q);
    ckube_fake_clock_free(clk);
}

static void test_shutdown_semantics(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(0);
    ckube_workqueue *q = newq(clk);
    ckube_workqueue_add(q, "a");
    ckube_workqueue_add(q, "b");
    ckube_workqueue_add_after(q, "later", SEC(1));
    char *a = ckube_workqueue_get(q);
    ckube_workqueue_add(q, "a"); /* dirty while processing */
    ckube_workqueue_shutdown(q);
    /* Adds after shutdown are ignored. */
    assert_int_equal(ckube_workqueue_add(q, "c"), 0);
    assert_int_equal(ckube_workqueue_add_after(q, "d", 0), 0);
    assert_int_equal(ckube_workqueue_add_rate_limited(q, "e"), 0);
    ckube_fake_clock_advance(clk, SEC(2));
    /* Keys queued before shutdown are still handed out, including the
     * one re-added while processing; the delayed one is dropped. */
    assert_int_equal(ckube_workqueue_len(q), 1);
    expect_next(q, "b");
    assert_int_equal(ckube_workqueue_done(q, a), 0);
    free(a);
    expect_next(q, "a");
    assert_null(ckube_workqueue_get(q));
    assert_null(ckube_workqueue_get_borrowed(q));
    ckube_workqueue_free(q);
    ckube_fake_clock_free(clk);
}

typedef struct drainer {
    ckube_workqueue *q;
    atomic_int returned;
} drainer;

static void *drainer_main(void *arg)
{
    drainer *d = arg;
    ckube_workqueue_shutdown_with_drain(d->q);
    atomic_store(&d->returned, 1);
    return NULL;
}

static void test_drain_waits_for_done(void **state)
{
    (void)state;
    ckube_workqueue *q = newq(NULL);
    /* Nothing in flight: returns at once. */
    ckube_workqueue_shutdown_with_drain(q);
    ckube_workqueue_free(q);

    q = newq(NULL);
    ckube_workqueue_add(q, "a");
    ckube_workqueue_add(q, "b");
    char *a = ckube_workqueue_get(q);
    char *b = ckube_workqueue_get(q);
    drainer d = {.q = q};
    pthread_t th;
    pthread_create(&th, NULL, drainer_main, &d);
    /* Give a wrong implementation time to return early. */
    while (!ckube_workqueue_shutting_down(q))
        real_sleep_us(100);
    real_sleep_us(20000);
    assert_int_equal(atomic_load(&d.returned), 0);
    ckube_workqueue_done(q, a);
    real_sleep_us(20000);
    assert_int_equal(atomic_load(&d.returned), 0); /* b still in flight */
    /* Adds during the drain are ignored, so done(b) does not requeue. */
    ckube_workqueue_add(q, "b");
    ckube_workqueue_done(q, b);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&d.returned), 1);
    assert_null(ckube_workqueue_get(q));
    free(a);
    free(b);
    ckube_workqueue_free(q);

    /* A plain shutdown from elsewhere cuts a drain short. */
    q = newq(NULL);
    ckube_workqueue_add(q, "stuck");
    char *s = ckube_workqueue_get(q);
    d = (drainer){.q = q};
    pthread_create(&th, NULL, drainer_main, &d);
    while (!ckube_workqueue_shutting_down(q))
        real_sleep_us(100);
    ckube_workqueue_shutdown(q);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&d.returned), 1);
    ckube_workqueue_done(q, s);
    free(s);
    ckube_workqueue_free(q);
}

/* ---- concurrency ---- */

#define NKEYS 64
#define WORKERS 4
#define PRODUCERS 2
#define ADDS_PER_PRODUCER 20000

typedef struct stress {
    ckube_workqueue *q;
    atomic_int in_flight[NKEYS];
    atomic_uint version[NKEYS]; /* bumped before every add */
    atomic_uint seen[NKEYS];    /* version read when processing started */
    atomic_int violations;
    atomic_long processed;
    bool borrowed;
} stress;

static int key_index(const char *k)
{
    return atoi(k + 4); /* "key-N" */
}

static void *stress_worker(void *arg)
{
    stress *s = arg;
    for (;;) {
        char *owned = NULL;
        const char *k;
        if (s->borrowed) {
            k = ckube_workqueue_get_borrowed(s->q);
        } else {
            owned = ckube_workqueue_get(s->q);
            k = owned;
        }
        if (!k)
            return NULL;
        int i = key_index(k);
        if (atomic_fetch_add(&s->in_flight[i], 1) != 0)
            atomic_fetch_add(&s->violations, 1);
        unsigned v = atomic_load(&s->version[i]);
        unsigned old = atomic_load(&s->seen[i]);
        while (v > old && !atomic_compare_exchange_weak(&s->seen[i], &old, v))
            ;
        if (atomic_fetch_add(&s->processed, 1) % 64 == 0)
            sched_yield();
        atomic_fetch_sub(&s->in_flight[i], 1);
        ckube_workqueue_done(s->q, k);
        free(owned);
    }
}

static void *stress_producer(void *arg)
{
    stress *s = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    char key[16];
    for (int n = 0; n < ADDS_PER_PRODUCER; n++) {
        int i = (int)(rand_r(&seed) % NKEYS);
        snprintf(key, sizeof(key), "key-%d", i);
        atomic_fetch_add(&s->version[i], 1);
        ckube_workqueue_add(s->q, key);
    }
    return NULL;
}

static void run_stress(bool borrowed)
{
    stress *s = calloc(1, sizeof(*s));
    s->q = newq(NULL);
    s->borrowed = borrowed;
    pthread_t w[WORKERS], p[PRODUCERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, stress_worker, s);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_create(&p[i], NULL, stress_producer, s);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(p[i], NULL);
    /* Workers keep taking what is queued (and what done() requeues)
     * until the queue is empty after shutdown. */
    ckube_workqueue_shutdown(s->q);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    assert_int_equal(atomic_load(&s->violations), 0);
    /* No lost add: every key was processed after its last add. */
    for (int i = 0; i < NKEYS; i++)
        if (atomic_load(&s->seen[i]) != atomic_load(&s->version[i]))
            fail_msg("key-%d: last add %u, last processed %u", i, atomic_load(&s->version[i]),
                     atomic_load(&s->seen[i]));
    assert_true(atomic_load(&s->processed) >= NKEYS / 2);
    assert_true(atomic_load(&s->processed) <= PRODUCERS * ADDS_PER_PRODUCER);
    ckube_workqueue_free(s->q);
    free(s);
}

static void test_concurrent_workers(void **state)
{
    (void)state;
    run_stress(false);
    run_stress(true);
}

/* Workers failing each key twice (rate-limited retries on the real clock)
 * before succeeding: every key ends up done exactly once. */
typedef struct retry_ctx {
    ckube_workqueue *q;
    atomic_int attempts[NKEYS];
    atomic_int successes;
} retry_ctx;

static void *retry_worker(void *arg)
{
    retry_ctx *c = arg;
    char *k;
    while ((k = ckube_workqueue_get(c->q)) != NULL) {
        int i = key_index(k);
        int n = atomic_fetch_add(&c->attempts[i], 1);
        if (n < 2) {
            assert_int_equal(ckube_workqueue_num_requeues(c->q, k), n);
            ckube_workqueue_add_rate_limited(c->q, k);
        } else {
            ckube_workqueue_forget(c->q, k);
            atomic_fetch_add(&c->successes, 1);
        }
        ckube_workqueue_done(c->q, k);
        free(k);
    }
    return NULL;
}

static void test_concurrent_rate_limited_retries(void **state)
{
    (void)state;
    retry_ctx *c = calloc(1, sizeof(*c));
    ckube_workqueue_config cfg = {.rate_limiter =
                                      ckube_rate_limiter_exponential(100000 /* 100 us */, MS(5))};
    c->q = ckube_workqueue_new(&cfg);
    pthread_t w[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, retry_worker, c);
    char key[16];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        ckube_workqueue_add(c->q, key);
    }
    for (int i = 0; i < 100000 && atomic_load(&c->successes) < NKEYS; i++)
        real_sleep_us(100);
    assert_int_equal(atomic_load(&c->successes), NKEYS);
    ckube_workqueue_shutdown_with_drain(c->q);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    for (int i = 0; i < NKEYS; i++) {
        assert_int_equal(atomic_load(&c->attempts[i]), 3);
        snprintf(key, sizeof(key), "key-%d", i);
        assert_int_equal(ckube_workqueue_num_requeues(c->q, key), 0);
    }
    ckube_workqueue_free(c->q);
    free(c);
}

/* ---- delays (fake clock) ---- */

static void test_delay_order(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(100));
    ckube_workqueue *q = newq(clk);
    ckube_workqueue_add_after(q, "c", SEC(3));
    ckube_workqueue_add_after(q, "a", SEC(1));
    ckube_workqueue_add_after(q, "b", SEC(2));
    ckube_workqueue_add_after(q, "a2", SEC(1)); /* same time as a: after it */
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_fake_clock_advance(clk, MS(999));
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_fake_clock_advance(clk, MS(1));
    assert_int_equal(ckube_workqueue_len(q), 2);
    expect_next(q, "a");
    expect_next(q, "a2");
    ckube_fake_clock_advance(clk, SEC(5)); /* b and c both due: in time order */
    expect_next(q, "b");
    expect_next(q, "c");
    assert_int_equal(ckube_workqueue_len(q), 0);
    /* Zero delay: added now. */
    ckube_workqueue_add_after(q, "now", 0);
    assert_int_equal(ckube_workqueue_len(q), 1);
    expect_next(q, "now");
    ckube_workqueue_free(q);
    ckube_fake_clock_free(clk);
}

static void test_delay_dedup(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(0);
    ckube_workqueue *q = newq(clk);
    /* A second, earlier ready time wins... */
    ckube_workqueue_add_after(q, "k", SEC(5));
    ckube_workqueue_add_after(q, "k", SEC(2));
    ckube_fake_clock_advance(clk, SEC(2));
    assert_int_equal(ckube_workqueue_len(q), 1);
    expect_next(q, "k");
    ckube_fake_clock_advance(clk, SEC(10));
    assert_int_equal(ckube_workqueue_len(q), 0); /* only once */

    /* ...and a later one does not postpone it. */
    ckube_workqueue_add_after(q, "k", SEC(2));
    ckube_workqueue_add_after(q, "k", SEC(5));
    ckube_fake_clock_advance(clk, SEC(2));
    expect_next(q, "k");
    ckube_fake_clock_advance(clk, SEC(10));
    assert_int_equal(ckube_workqueue_len(q), 0);

    /* A direct add does not cancel the delayed one (as in client-go). */
    ckube_workqueue_add_after(q, "k", SEC(2));
    ckube_workqueue_add(q, "k");
    expect_next(q, "k");
    ckube_fake_clock_advance(clk, SEC(2));
    expect_next(q, "k");
    assert_int_equal(ckube_workqueue_len(q), 0);

    /* Due while already queued: merged. */
    ckube_workqueue_add(q, "m");
    ckube_workqueue_add_after(q, "m", SEC(1));
    ckube_fake_clock_advance(clk, SEC(1));
    assert_int_equal(ckube_workqueue_len(q), 1);
    expect_next(q, "m");

    /* Due while processing: handed out again after done. */
    ckube_workqueue_add(q, "p");
    char *p = ckube_workqueue_get(q);
    ckube_workqueue_add_after(q, "p", SEC(1));
    ckube_fake_clock_advance(clk, SEC(1));
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_workqueue_done(q, p);
    free(p);
    expect_next(q, "p");
    ckube_workqueue_free(q);
    ckube_fake_clock_free(clk);
}

static void test_blocked_getter_wakes_on_delay(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(1));
    ckube_workqueue *q = newq(clk);
    ckube_workqueue_add_after(q, "late", SEC(10));
    getter g = {.q = q};
    pthread_t th;
    pthread_create(&th, NULL, getter_main, &g);
    wait_waiters(clk, 1);
    /* An earlier key arrives while the getter sleeps until 10 s: it must
     * re-arm for 1 s. */
    ckube_workqueue_add_after(q, "early", SEC(1));
    ckube_fake_clock_advance(clk, MS(500));
    wait_waiters(clk, 1);
    assert_int_equal(atomic_load(&g.finished), 0);
    ckube_fake_clock_advance(clk, MS(500));
    pthread_join(th, NULL);
    assert_string_equal(g.got, "early");
    ckube_workqueue_done(q, g.got);
    free(g.got);

    /* A plain add wakes a getter parked on a delay, too. */
    g = (getter){.q = q};
    pthread_create(&th, NULL, getter_main, &g);
    wait_waiters(clk, 1);
    ckube_workqueue_add(q, "direct");
    pthread_join(th, NULL);
    assert_string_equal(g.got, "direct");
    ckube_workqueue_done(q, g.got);
    free(g.got);

    /* And the parked key still comes out on time. */
    g = (getter){.q = q};
    pthread_create(&th, NULL, getter_main, &g);
    wait_waiters(clk, 1);
    ckube_fake_clock_advance(clk, SEC(9));
    pthread_join(th, NULL);
    assert_string_equal(g.got, "late");
    ckube_workqueue_done(q, g.got);
    free(g.got);
    ckube_workqueue_free(q);
    ckube_fake_clock_free(clk);
}

/* On the real clock a getter sleeping until a late deadline must be
 * woken to re-arm for an earlier one (the fake clock's polling would hide
 * a missing wake-up). */
static void test_real_clock_rearm(void **state)
{
    (void)state;
    ckube_workqueue *q = newq(NULL);
    ckube_workqueue_add_after(q, "late", SEC(3600));
    getter g = {.q = q};
    pthread_t th;
    pthread_create(&th, NULL, getter_main, &g);
    real_sleep_us(20000); /* let it park on the hour-long deadline */
    uint64_t t0 = ckube_clock_now(NULL);
    ckube_workqueue_add_after(q, "soon", MS(20));
    for (int i = 0; i < 50000 && !atomic_load(&g.finished); i++)
        real_sleep_us(100);
    assert_int_equal(atomic_load(&g.finished), 1);
    pthread_join(th, NULL);
    assert_true(ckube_clock_now(NULL) - t0 >= MS(20));
    assert_string_equal(g.got, "soon");
    ckube_workqueue_done(q, g.got);
    free(g.got);
    ckube_workqueue_free(q);
}

static void test_rate_limited_queue(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(1));
    ckube_workqueue *q = newq(clk); /* default controller limiter on the fake clock */
    ckube_workqueue_add_rate_limited(q, "k");
    assert_int_equal(ckube_workqueue_num_requeues(q, "k"), 1);
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_fake_clock_advance(clk, MS(4));
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_fake_clock_advance(clk, MS(1)); /* 5 ms */
    expect_next(q, "k");
    ckube_workqueue_add_rate_limited(q, "k");
    ckube_fake_clock_advance(clk, MS(9));
    assert_int_equal(ckube_workqueue_len(q), 0);
    ckube_fake_clock_advance(clk, MS(1)); /* 10 ms */
    expect_next(q, "k");
    assert_int_equal(ckube_workqueue_num_requeues(q, "k"), 2);
    ckube_workqueue_forget(q, "k");
    assert_int_equal(ckube_workqueue_num_requeues(q, "k"), 0);
    ckube_workqueue_add_rate_limited(q, "k");
    ckube_fake_clock_advance(clk, MS(5));
    expect_next(q, "k");
    ckube_workqueue_free(q);
    ckube_fake_clock_free(clk);
}

/* ---- metrics ---- */

static void assert_has_line(const char *text, const char *line)
{
    char want[256];
    snprintf(want, sizeof(want), "\n%s\n", line);
    if (!strstr(text, want))
        fail_msg("missing line \"%s\" in:\n%s", line, text);
}

static void test_metrics(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(1000));
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_workqueue_config cfg = {.name = "pods", .clock = clk, .metrics = reg};
    ckube_workqueue *q = ckube_workqueue_new(&cfg);
    ckube_workqueue_add(q, "a");
    ckube_workqueue_add(q, "b");
    ckube_workqueue_add(q, "a"); /* merged: not counted */
    ckube_fake_clock_advance(clk, SEC(1));
    char *a = ckube_workqueue_get(q); /* waited 1 s */
    ckube_fake_clock_advance(clk, SEC(2));
    char *text = ckube_metrics_render(reg, NULL);
    assert_non_null(text);
    const char *types[] = {
        "# TYPE workqueue_adds_total counter",
        "# TYPE workqueue_depth gauge",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "# TYPE workqueue_retries_total counter",
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# TYPE workqueue_work_duration_seconds histogram",
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        assert_has_line(text, types[i]);
    assert_has_line(text, "workqueue_adds_total{name=\"pods\"} 2");
    assert_has_line(text, "workqueue_depth{name=\"pods\"} 1");
    assert_has_line(text, "workqueue_unfinished_work_seconds{name=\"pods\"} 2");
    assert_has_line(text, "workqueue_longest_running_processor_seconds{name=\"pods\"} 2");
    assert_has_line(text, "workqueue_queue_duration_seconds_bucket{name=\"pods\",le=\"0.1\"} 0");
    assert_has_line(text, "workqueue_queue_duration_seconds_bucket{name=\"pods\",le=\"1\"} 1");
    assert_has_line(text, "workqueue_queue_duration_seconds_bucket{name=\"pods\",le=\"+Inf\"} 1");
    assert_has_line(text, "workqueue_queue_duration_seconds_sum{name=\"pods\"} 1");
    assert_has_line(text, "workqueue_queue_duration_seconds_count{name=\"pods\"} 1");
    assert_has_line(text, "workqueue_work_duration_seconds_bucket{name=\"pods\",le=\"1e-08\"} 0");
    assert_has_line(text, "workqueue_work_duration_seconds_bucket{name=\"pods\","
                          "le=\"9.999999999999999e-06\"} 0");
    assert_has_line(text, "workqueue_work_duration_seconds_count{name=\"pods\"} 0");
    assert_has_line(text, "workqueue_retries_total{name=\"pods\"} 0");
    free(text);

    /* Re-added while processing: counted as an add and in the depth. */
    ckube_workqueue_add(q, "a");
    ckube_workqueue_done(q, a); /* worked 2 s */
    free(a);
    ckube_workqueue_add_after(q, "c", SEC(1));
    ckube_workqueue_add_rate_limited(q, "d");
    ckube_fake_clock_advance(clk, SEC(1)); /* c, d become ready */
    text = ckube_metrics_render(reg, NULL);
    assert_has_line(text, "workqueue_adds_total{name=\"pods\"} 5");
    assert_has_line(text, "workqueue_depth{name=\"pods\"} 4"); /* b a d c */
    assert_has_line(text, "workqueue_retries_total{name=\"pods\"} 2");
    assert_has_line(text, "workqueue_unfinished_work_seconds{name=\"pods\"} 0");
    assert_has_line(text, "workqueue_longest_running_processor_seconds{name=\"pods\"} 0");
    assert_has_line(text, "workqueue_work_duration_seconds_bucket{name=\"pods\",le=\"1\"} 0");
    assert_has_line(text, "workqueue_work_duration_seconds_bucket{name=\"pods\",le=\"10\"} 1");
    assert_has_line(text, "workqueue_work_duration_seconds_sum{name=\"pods\"} 2");
    assert_has_line(text, "workqueue_work_duration_seconds_count{name=\"pods\"} 1");
    free(text);
    /* Delayed keys' waits are measured from when they became ready. */
    expect_next(q, "b");
    expect_next(q, "a");
    expect_next(q, "d"); /* ready at +5 ms */
    ckube_fake_clock_advance(clk, MS(500));
    expect_next(q, "c");
    text = ckube_metrics_render(reg, NULL);
    assert_has_line(text, "workqueue_queue_duration_seconds_count{name=\"pods\"} 5");
    /* waits: a 1 s, b 4 s, a 1 s, d 0.995 s, c 0.5 s */
    assert_has_line(text, "workqueue_queue_duration_seconds_sum{name=\"pods\"} 7.495");
    free(text);

    /* A second queue with another name gets its own series. */
    ckube_workqueue_config cfg2 = {.name = "svc", .clock = clk, .metrics = reg};
    ckube_workqueue *q2 = ckube_workqueue_new(&cfg2);
    ckube_workqueue_add(q2, "x");
    text = ckube_metrics_render(reg, NULL);
    assert_has_line(text, "workqueue_adds_total{name=\"svc\"} 1");
    assert_has_line(text, "workqueue_depth{name=\"svc\"} 1");
    free(text);
    ckube_workqueue_free(q2);

    /* Freed queues stop reporting gauges; counters stay. */
    ckube_workqueue_free(q);
    text = ckube_metrics_render(reg, NULL);
    assert_has_line(text, "workqueue_depth{name=\"pods\"} 0");
    assert_has_line(text, "workqueue_depth{name=\"svc\"} 0");
    assert_has_line(text, "workqueue_adds_total{name=\"pods\"} 5");
    free(text);
    ckube_metrics_registry_free(reg);

    /* No name: no metrics at all. */
    reg = ckube_metrics_registry_new();
    ckube_workqueue_config quiet = {.clock = clk, .metrics = reg, .name = ""};
    q = ckube_workqueue_new(&quiet);
    ckube_workqueue_add(q, "a");
    text = ckube_metrics_render(reg, NULL);
    assert_string_equal(text, "");
    free(text);
    ckube_workqueue_free(q);
    ckube_metrics_registry_free(reg);

    /* A conflicting family in the registry disables metrics, not the
     * queue. */
    reg = ckube_metrics_registry_new();
    ckube_metrics_gauge(reg, "workqueue_adds_total", "squatter", NULL);
    ckube_workqueue_config clash = {.name = "x", .clock = clk, .metrics = reg};
    q = ckube_workqueue_new(&clash);
    assert_non_null(q);
    ckube_workqueue_add(q, "a");
    expect_next(q, "a");
    ckube_workqueue_free(q);
    ckube_metrics_registry_free(reg);
    ckube_fake_clock_free(clk);
}

static void test_default_config(void **state)
{
    (void)state;
    /* NULL config: real clock, default limiter, no metrics. */
    ckube_workqueue *q = ckube_workqueue_new(NULL);
    assert_non_null(q);
    ckube_workqueue_add_rate_limited(q, "k"); /* 5 ms on the real clock */
    expect_next(q, "k");                      /* get blocks until then */
    assert_int_equal(ckube_workqueue_num_requeues(q, "k"), 1);
    ckube_workqueue_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_and_dedup),
        cmocka_unit_test(test_requeue_after_done),
        cmocka_unit_test(test_done_misuse),
        cmocka_unit_test(test_borrowed_keys),
        cmocka_unit_test(test_many_keys_recycled),
        cmocka_unit_test(test_shutdown_wakes_getters),
        cmocka_unit_test(test_shutdown_semantics),
        cmocka_unit_test(test_drain_waits_for_done),
        cmocka_unit_test(test_concurrent_workers),
        cmocka_unit_test(test_concurrent_rate_limited_retries),
        cmocka_unit_test(test_delay_order),
        cmocka_unit_test(test_delay_dedup),
        cmocka_unit_test(test_blocked_getter_wakes_on_delay),
        cmocka_unit_test(test_real_clock_rearm),
        cmocka_unit_test(test_rate_limited_queue),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_default_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
