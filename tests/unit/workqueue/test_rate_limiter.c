/* Rate limiters: exact delays with the fake clock, forget, overflow
 * safety, composition, custom limiters, and concurrent use. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/workqueue.h"

#define MS(n) CKUBE_MS(n)
#define SEC(n) CKUBE_SEC(n)

static void test_exponential(void **state)
{
    (void)state;
    ckube_rate_limiter *rl = ckube_rate_limiter_exponential(MS(1), SEC(1));
    assert_non_null(rl);
    uint64_t want = MS(1);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), i);
        assert_int_equal(ckube_rate_limiter_when(rl, "a"), want);
        want *= 2; /* 1, 2, 4 ... 512 ms */
    }
    /* 1024 ms is past the cap. */
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(1));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(1));
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 12);
    /* Keys are independent. */
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "b"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "b"), MS(1));
    /* Forget starts the backoff over, for that key only. */
    ckube_rate_limiter_forget(rl, "a");
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(1));
    assert_int_equal(ckube_rate_limiter_when(rl, "b"), MS(2));
    ckube_rate_limiter_forget(rl, "never-seen"); /* harmless */
    ckube_rate_limiter_free(rl);
}

static void test_exponential_overflow(void **state)
{
    (void)state;
    /* The controller default: 5 ms doubling to 1000 s. After many
     * failures the delay stays at the cap instead of wrapping. */
    ckube_rate_limiter *rl = ckube_rate_limiter_exponential(MS(5), SEC(1000));
    uint64_t last = 0;
    for (int i = 0; i < 300; i++) {
        uint64_t d = ckube_rate_limiter_when(rl, "k");
        assert_true(d >= last);
        assert_true(d <= SEC(1000));
        last = d;
    }
    assert_int_equal(last, SEC(1000));
    /* 5 ms * 2^17 = 655.36 s < 1000 s < 2^18 * 5 ms. */
    ckube_rate_limiter_forget(rl, "k");
    for (int i = 0; i < 17; i++)
        ckube_rate_limiter_when(rl, "k");
    assert_int_equal(ckube_rate_limiter_when(rl, "k"), MS(5) << 17);
    assert_int_equal(ckube_rate_limiter_when(rl, "k"), SEC(1000));
    ckube_rate_limiter_free(rl);

    /* Right at the edge of 64 bits with an unbounded max. */
    rl = ckube_rate_limiter_exponential(1ull << 62, UINT64_MAX);
    assert_int_equal(ckube_rate_limiter_when(rl, "k"), 1ull << 62);
    assert_int_equal(ckube_rate_limiter_when(rl, "k"), 1ull << 63);
    assert_int_equal(ckube_rate_limiter_when(rl, "k"), UINT64_MAX);
    assert_int_equal(ckube_rate_limiter_when(rl, "k"), UINT64_MAX);
    ckube_rate_limiter_free(rl);

    rl = ckube_rate_limiter_exponential(0, SEC(1));
    for (int i = 0; i < 100; i++)
        assert_int_equal(ckube_rate_limiter_when(rl, "k"), 0);
    ckube_rate_limiter_free(rl);
}

static void test_fast_slow(void **state)
{
    (void)state;
    ckube_rate_limiter *rl = ckube_rate_limiter_fast_slow(MS(5), SEC(10), 3);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(5));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(5));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(5));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(10));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(10));
    assert_int_equal(ckube_rate_limiter_when(rl, "b"), MS(5));
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 5);
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "b"), 1);
    ckube_rate_limiter_forget(rl, "a");
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(5));
    ckube_rate_limiter_free(rl);

    /* No fast attempts at all: always slow. */
    rl = ckube_rate_limiter_fast_slow(MS(5), SEC(10), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(10));
    ckube_rate_limiter_free(rl);
}

static void test_bucket(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(1000));
    ckube_rate_limiter *rl = ckube_rate_limiter_bucket(clk, 10, 3);
    assert_non_null(rl);
    /* Starts full: the burst passes, then tokens are reserved 100 ms
     * apart, each call reserving the next one. */
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "b"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "c"), MS(100));
    assert_int_equal(ckube_rate_limiter_when(rl, "d"), MS(200));
    /* 150 ms later: the debt of 2 tokens shrank by 1.5. */
    ckube_fake_clock_advance(clk, MS(150));
    assert_int_equal(ckube_rate_limiter_when(rl, "e"), MS(150));
    /* After a long pause the bucket is full again (capped at burst). */
    ckube_fake_clock_advance(clk, SEC(60));
    for (int i = 0; i < 3; i++)
        assert_int_equal(ckube_rate_limiter_when(rl, "x"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "x"), MS(100));
    /* Per-key calls are not tracked. */
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "x"), 0);
    ckube_rate_limiter_forget(rl, "x");
    ckube_rate_limiter_free(rl);

    /* Fractional qps: 2/s burst 1; partial refill counts. */
    rl = ckube_rate_limiter_bucket(clk, 2, 1);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(500));
    ckube_fake_clock_advance(clk, MS(200));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(800));
    ckube_rate_limiter_free(rl);

    rl = ckube_rate_limiter_bucket(clk, 0.5, 1);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), 0);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(2));
    ckube_rate_limiter_free(rl);

    /* Unlimited. */
    rl = ckube_rate_limiter_bucket(clk, INFINITY, 1);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ckube_rate_limiter_when(rl, "a"), 0);
    ckube_rate_limiter_free(rl);

    /* Invalid settings. */
    assert_null(ckube_rate_limiter_bucket(clk, 0, 10));
    assert_null(ckube_rate_limiter_bucket(clk, -1, 10));
    assert_null(ckube_rate_limiter_bucket(clk, NAN, 10));
    assert_null(ckube_rate_limiter_bucket(clk, 10, 0));
    ckube_fake_clock_free(clk);
}

static void test_max_of_and_max_wait(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(0);
    ckube_rate_limiter *subs[] = {ckube_rate_limiter_exponential(MS(1), SEC(1)),
                                  ckube_rate_limiter_bucket(clk, 1, 2),
                                  ckube_rate_limiter_fast_slow(MS(3), MS(30), 1)};
    ckube_rate_limiter *rl = ckube_rate_limiter_max_of(subs, 3);
    assert_non_null(rl);
    /* exp 1ms / bucket 0 / fast 3ms */
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(3));
    /* exp 2ms / bucket 0 / slow 30ms */
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(30));
    /* exp 4ms / bucket 1s / slow 30ms */
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(1));
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 3);
    ckube_rate_limiter_forget(rl, "a");
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 0);
    ckube_fake_clock_advance(clk, SEC(100));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(3));
    ckube_rate_limiter_free(rl);

    /* Bad input: NULL entries or none at all. The good limiters passed in
     * are freed (ASan checks it). */
    ckube_rate_limiter *bad[] = {ckube_rate_limiter_exponential(1, 2), NULL};
    assert_null(ckube_rate_limiter_max_of(bad, 2));
    assert_null(ckube_rate_limiter_max_of(NULL, 0));

    rl =
        ckube_rate_limiter_with_max_wait(ckube_rate_limiter_exponential(SEC(1), SEC(1000)), SEC(3));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(1));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(2));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(3));
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(3));
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 4);
    ckube_rate_limiter_forget(rl, "a");
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), SEC(1));
    ckube_rate_limiter_free(rl);
    assert_null(ckube_rate_limiter_with_max_wait(NULL, 1));
    ckube_fake_clock_free(clk);
}

static void test_default_controller(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(SEC(5));
    ckube_rate_limiter *rl = ckube_rate_limiter_default_controller(clk);
    assert_non_null(rl);
    char key[32];
    /* 100 failures of distinct keys fit the burst: 5 ms each. */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "ns/k%d", i);
        assert_int_equal(ckube_rate_limiter_when(rl, key), MS(5));
    }
    /* Then the bucket spreads retries out at 10 per second. */
    assert_int_equal(ckube_rate_limiter_when(rl, "ns/k100"), MS(100));
    assert_int_equal(ckube_rate_limiter_when(rl, "ns/k101"), MS(200));
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "ns/k0"), 1);
    ckube_rate_limiter_forget(rl, "ns/k0");
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "ns/k0"), 0);
    /* Refilled: the per-item exponential shows again. */
    ckube_fake_clock_advance(clk, SEC(3600));
    assert_int_equal(ckube_rate_limiter_when(rl, "ns/k1"), MS(10));
    assert_int_equal(ckube_rate_limiter_when(rl, "ns/k1"), MS(20));
    ckube_rate_limiter_free(rl);
    ckube_fake_clock_free(clk);
}

/* A user-written limiter through the public vtable. */
typedef struct constant_limiter {
    ckube_rate_limiter base;
    uint64_t delay;
    int calls, forgets;
} constant_limiter;

static uint64_t const_when(ckube_rate_limiter *rl, const char *key)
{
    (void)key;
    constant_limiter *c = (constant_limiter *)rl;
    c->calls++;
    return c->delay;
}

static void const_forget(ckube_rate_limiter *rl, const char *key)
{
    (void)key;
    ((constant_limiter *)rl)->forgets++;
}

static int const_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    (void)key;
    return ((constant_limiter *)rl)->calls;
}

static int const_frees;

static void const_free(ckube_rate_limiter *rl)
{
    const_frees++;
    free(rl);
}

static const ckube_rate_limiter_ops const_ops = {const_when, const_forget, const_num_requeues,
                                                 const_free};

static void test_custom_limiter(void **state)
{
    (void)state;
    constant_limiter *c = calloc(1, sizeof(*c));
    c->base.ops = &const_ops;
    c->delay = MS(42);
    ckube_rate_limiter *subs[] = {&c->base, ckube_rate_limiter_exponential(MS(1), MS(100))};
    ckube_rate_limiter *rl = ckube_rate_limiter_max_of(subs, 2);
    assert_int_equal(ckube_rate_limiter_when(rl, "a"), MS(42));
    assert_int_equal(c->calls, 1);
    ckube_rate_limiter_forget(rl, "a");
    assert_int_equal(c->forgets, 1);
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "a"), 1);
    const_frees = 0;
    ckube_rate_limiter_free(rl);
    assert_int_equal(const_frees, 1);
    /* NULL limiter: calls are no-ops. */
    assert_int_equal(ckube_rate_limiter_when(NULL, "a"), 0);
    assert_int_equal(ckube_rate_limiter_num_requeues(NULL, "a"), 0);
    ckube_rate_limiter_forget(NULL, "a");
    ckube_rate_limiter_free(NULL);
}

#define THREADS 4
#define ITERS 2000

static void *hammer(void *arg)
{
    ckube_rate_limiter *rl = arg;
    char key[16];
    for (int i = 0; i < ITERS; i++) {
        ckube_rate_limiter_when(rl, "shared");
        snprintf(key, sizeof(key), "k%d", i % 50);
        ckube_rate_limiter_when(rl, key);
        if (i % 7 == 0)
            ckube_rate_limiter_forget(rl, key);
        ckube_rate_limiter_num_requeues(rl, key);
    }
    return NULL;
}

static void test_concurrent_use(void **state)
{
    (void)state;
    ckube_rate_limiter *rl = ckube_rate_limiter_default_controller(NULL);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, hammer, rl);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* Every failure of the shared key was counted exactly once. */
    assert_int_equal(ckube_rate_limiter_num_requeues(rl, "shared"), THREADS * ITERS);
    ckube_rate_limiter_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exponential),         cmocka_unit_test(test_exponential_overflow),
        cmocka_unit_test(test_fast_slow),           cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_max_of_and_max_wait), cmocka_unit_test(test_default_controller),
        cmocka_unit_test(test_custom_limiter),      cmocka_unit_test(test_concurrent_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
