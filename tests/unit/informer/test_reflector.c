/* The reflector against the fake list-watch on a fake clock: list and
 * watch options, re-watch without relist, bookmarks, 410 handling,
 * backoff timings, 429 Retry-After, 404 retries, a slow server, dropped
 * and broken connections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>

#include "ckube/clock.h"
#include "ckube/fake.h"
#include "ckube/informer.h"
#include "ckube/json.h"
#include "util/informer_test_util.h"

/* ---- a sink that records what the reflector delivered ---- */

struct rec {
    pthread_mutex_t mu;
    json_t *state; /* key -> object */
    size_t replaces, adds, updates, removes;
    size_t last_replace_n;
    char last_replace_rv[32];
};

static char *key_of(json_t *obj)
{
    char *k = ckube_meta_namespace_key(obj);
    assert_non_null(k);
    return k;
}

static int rec_replace(void *ctx, json_t *items, const char *rv)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    json_object_clear(r->state);
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o)
    {
        char *k = key_of(o);
        json_object_set(r->state, k, o);
        free(k);
    }
    r->replaces++;
    r->last_replace_n = json_array_size(items);
    snprintf(r->last_replace_rv, sizeof(r->last_replace_rv), "%s", rv ? rv : "");
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int rec_put(struct rec *r, json_t *obj, size_t *counter)
{
    char *k = key_of(obj);
    pthread_mutex_lock(&r->mu);
    json_object_set(r->state, k, obj);
    (*counter)++;
    pthread_mutex_unlock(&r->mu);
    free(k);
    return 0;
}

static int rec_add(void *ctx, json_t *obj)
{
    struct rec *r = ctx;
    return rec_put(r, obj, &r->adds);
}

static int rec_update(void *ctx, json_t *obj)
{
    struct rec *r = ctx;
    return rec_put(r, obj, &r->updates);
}

static int rec_remove(void *ctx, json_t *obj)
{
    struct rec *r = ctx;
    char *k = key_of(obj);
    pthread_mutex_lock(&r->mu);
    json_object_del(r->state, k);
    r->removes++;
    pthread_mutex_unlock(&r->mu);
    free(k);
    return 0;
}

static size_t rec_get(struct rec *r, size_t *field)
{
    pthread_mutex_lock(&r->mu);
    size_t v = *field;
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* True when the sink holds exactly the fake's objects (same RVs). */
static bool rec_matches(struct rec *r, ckube_fake_lw *fake)
{
    json_t *objs = ckube_fake_lw_objects(fake);
    pthread_mutex_lock(&r->mu);
    bool ok = json_object_size(r->state) == json_array_size(objs);
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        if (!ok)
            break;
        char *k = ckube_meta_namespace_key(o);
        json_t *mine = json_object_get(r->state, k);
        free(k);
        const char *rv = mine ? ckube_obj_resource_version(mine) : NULL;
        ok = rv && strcmp(rv, ckube_obj_resource_version(o)) == 0;
    }
    pthread_mutex_unlock(&r->mu);
    json_decref(objs);
    return ok;
}

/* ---- fixture ---- */

struct fx {
    ckube_clock *clk;
    ckube_fake_lw *fake;
    ckube_list_watch *lw;
    ckube_reflector *r;
    struct rec rec;
};

static void fx_init(struct fx *x, int nobjs)
{
    memset(x, 0, sizeof(*x));
    x->clk = ckube_fake_clock_new(CKUBE_SEC(10000));
    ckube_fake_lw_opts fo = {.clock = x->clk};
    x->fake = ckube_fake_lw_new(&fo);
    x->lw = ckube_fake_lw_list_watch(x->fake);
    pthread_mutex_init(&x->rec.mu, NULL);
    x->rec.state = json_object();
    for (int i = 0; i < nobjs; i++) {
        char name[16];
        snprintf(name, sizeof(name), "o%d", i);
        json_t *o = tu_obj("ns", name, NULL, NULL, i);
        assert_true(ckube_fake_lw_add(x->fake, o) > 0);
        json_decref(o);
    }
}

/* Starts a reflector with jitter off (exact timings) unless `o` says. */
static void fx_start(struct fx *x, const ckube_reflector_opts *o)
{
    ckube_reflector_opts ro = o ? *o : (ckube_reflector_opts){.backoff = {.jitter = -1}};
    ro.clock = x->clk;
    ckube_reflector_sink sink = {.replace = rec_replace,
                                 .add = rec_add,
                                 .update = rec_update,
                                 .remove = rec_remove,
                                 .ctx = &x->rec};
    x->r = ckube_reflector_new(x->lw, sink, &ro);
    assert_non_null(x->r);
    assert_int_equal(ckube_reflector_start(x->r), 0);
    assert_int_equal(ckube_reflector_start(x->r), -1);
}

static void fx_free(struct fx *x)
{
    ckube_reflector_free(x->r);
    assert_int_equal(ckube_fake_lw_open_watches(x->fake), 0);
    ckube_list_watch_free(x->lw);
    ckube_fake_lw_unref(x->fake);
    ckube_fake_clock_free(x->clk);
    json_decref(x->rec.state);
    pthread_mutex_destroy(&x->rec.mu);
}

/* Waits until the reflector is watching with the n-th watch. */
static void wait_watching(struct fx *x, size_t nwatch)
{
    assert_true(ckube_fake_lw_wait_calls(x->fake, CKUBE_FAKE_WATCH, nwatch, 5000));
    assert_true(TU_WAIT(ckube_fake_lw_open_watches(x->fake) == 1, 5000));
}

/* Waits until the reflector sleeps on the fake clock with no watch open:
 * in a backoff, or in a call the (slow) fake delays. An open watch waits
 * on the clock too (for its timeout), hence the first condition. */
static void wait_sleeping(struct fx *x)
{
    assert_true(TU_WAIT(
        ckube_fake_lw_open_watches(x->fake) == 0 && ckube_fake_clock_waiters(x->clk) > 0, 5000));
}

static void expect_call(ckube_fake_lw *fake, size_t i, ckube_fake_call_kind kind, const char *rv)
{
    ckube_fake_call c;
    if (!ckube_fake_lw_call(fake, i, &c))
        fail_msg("no call #%zu", i);
    assert_int_equal(c.kind, kind);
    if (rv) {
        assert_non_null(c.resource_version);
        if (strcmp(c.resource_version, rv) != 0)
            fail_msg("call #%zu: resourceVersion \"%s\", want \"%s\"", i, c.resource_version, rv);
    } else {
        assert_null(c.resource_version);
    }
    ckube_fake_call_clear(&c);
}

static char *rv_str(uint64_t rv)
{
    static char buf[4][32];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, 32, "%" PRIu64, rv);
    return b;
}

static bool last_rv_is(ckube_reflector *r, uint64_t want)
{
    char *rv = ckube_reflector_last_sync_resource_version(r);
    bool ok = rv && strcmp(rv, rv_str(want)) == 0;
    free(rv);
    return ok;
}

/* ---- tests ---- */

static void test_list_then_watch(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 3);
    /* One object carries managedFields: stripped by default. */
    json_t *mf = tu_obj("ns", "mf", NULL, NULL, 0);
    json_object_set_new(json_object_get(mf, "metadata"), "managedFields",
                        json_pack("[{s:s}]", "manager", "kubectl"));
    ckube_fake_lw_add(x.fake, mf);
    json_decref(mf);
    uint64_t rv0 = ckube_fake_lw_resource_version(x.fake);
    fx_start(&x, NULL);
    wait_watching(&x, 1);

    ckube_fake_call c;
    assert_true(ckube_fake_lw_call(x.fake, 0, &c));
    assert_int_equal(c.kind, CKUBE_FAKE_LIST);
    assert_string_equal(c.resource_version, "0");
    assert_int_equal(c.limit, 500);
    assert_null(c.continue_token);
    ckube_fake_call_clear(&c);
    assert_true(ckube_fake_lw_call(x.fake, 1, &c));
    assert_int_equal(c.kind, CKUBE_FAKE_WATCH);
    assert_string_equal(c.resource_version, rv_str(rv0));
    assert_true(c.allow_watch_bookmarks);
    assert_true(c.timeout_seconds.set);
    assert_true(c.timeout_seconds.value >= 300 && c.timeout_seconds.value <= 600);
    ckube_fake_call_clear(&c);

    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 1);
    assert_int_equal(x.rec.last_replace_n, 4);
    assert_string_equal(x.rec.last_replace_rv, rv_str(rv0));
    assert_true(last_rv_is(x.r, rv0));
    pthread_mutex_lock(&x.rec.mu);
    json_t *got = json_object_get(x.rec.state, "ns/mf");
    assert_non_null(got);
    assert_null(ckube_json_get_path(got, "metadata.managedFields"));
    pthread_mutex_unlock(&x.rec.mu);

    /* Watch events reach the sink. */
    json_t *n = tu_obj("ns", "new", NULL, NULL, 7);
    json_object_set_new(json_object_get(n, "metadata"), "managedFields", json_array());
    ckube_fake_lw_add(x.fake, n);
    json_t *o1 = tu_obj("ns", "o1", NULL, NULL, 100);
    ckube_fake_lw_update(x.fake, o1);
    ckube_fake_lw_delete(x.fake, "ns", "o2");
    assert_true(TU_WAIT(rec_matches(&x.rec, x.fake), 5000));
    assert_int_equal(rec_get(&x.rec, &x.rec.adds), 1);
    assert_int_equal(rec_get(&x.rec, &x.rec.updates), 1);
    assert_int_equal(rec_get(&x.rec, &x.rec.removes), 1);
    assert_true(TU_WAIT(last_rv_is(x.r, ckube_fake_lw_resource_version(x.fake)), 5000));
    pthread_mutex_lock(&x.rec.mu);
    assert_null(
        ckube_json_get_path(json_object_get(x.rec.state, "ns/new"), "metadata.managedFields"));
    pthread_mutex_unlock(&x.rec.mu);
    json_decref(n);
    json_decref(o1);

    /* Stop is prompt while a watch is open (the fake clock never moved). */
    ckube_reflector_stop(x.r);
    assert_int_equal(ckube_fake_lw_open_watches(x.fake), 0);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    ckube_reflector_stop(x.r); /* idempotent */
    fx_free(&x);
}

static void test_keep_managed_fields(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 0);
    json_t *mf = tu_obj("ns", "mf", NULL, NULL, 0);
    json_object_set_new(json_object_get(mf, "metadata"), "managedFields",
                        json_pack("[{s:s}]", "manager", "kubectl"));
    ckube_fake_lw_add(x.fake, mf);
    json_decref(mf);
    ckube_reflector_opts o = {.keep_managed_fields = true, .backoff = {.jitter = -1}};
    fx_start(&x, &o);
    wait_watching(&x, 1);
    pthread_mutex_lock(&x.rec.mu);
    assert_non_null(
        ckube_json_get_path(json_object_get(x.rec.state, "ns/mf"), "metadata.managedFields"));
    pthread_mutex_unlock(&x.rec.mu);
    fx_free(&x);
}

static void test_paging(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 5);
    /* A server that pages even resourceVersion=0 lists (no watch cache). */
    ckube_fake_lw_set_page_rv0(x.fake, true);
    ckube_reflector_opts o = {.page_size = 2, .backoff = {.jitter = -1}};
    fx_start(&x, &o);
    wait_watching(&x, 1);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 3);
    ckube_fake_call c;
    ckube_fake_lw_call(x.fake, 0, &c);
    assert_string_equal(c.resource_version, "0");
    assert_int_equal(c.limit, 2);
    ckube_fake_call_clear(&c);
    for (size_t i = 1; i < 3; i++) {
        ckube_fake_lw_call(x.fake, i, &c);
        assert_int_equal(c.kind, CKUBE_FAKE_LIST);
        assert_non_null(c.continue_token);
        assert_null(c.resource_version); /* a continue carries no RV */
        assert_int_equal(c.limit, 2);
        ckube_fake_call_clear(&c);
    }
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 1);
    assert_int_equal(x.rec.last_replace_n, 5);
    assert_true(rec_matches(&x.rec, x.fake));

    /* After a 410 the relist is a consistent one from "", paged too. */
    ckube_fake_lw_expire_watches(x.fake);
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(800));
    wait_watching(&x, 2);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 6);
    ckube_fake_lw_call(x.fake, 4, &c);
    assert_string_equal(c.resource_version, "");
    assert_int_equal(c.limit, 2);
    ckube_fake_call_clear(&c);
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 2);
    fx_free(&x);
}

static void test_clean_close_rewatches(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 2);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    int64_t timeouts[6];
    for (size_t i = 0; i < 6; i++) {
        char name[16];
        snprintf(name, sizeof(name), "n%zu", i);
        json_t *o = tu_obj("ns", name, NULL, NULL, 0);
        uint64_t rv = ckube_fake_lw_add(x.fake, o);
        json_decref(o);
        assert_true(TU_WAIT(last_rv_is(x.r, rv), 5000));
        /* The server closes the watch: re-watched from the last RV at
         * once, without a relist. */
        ckube_fake_lw_drop_watches(x.fake);
        wait_watching(&x, i + 2);
        ckube_fake_call c;
        assert_true(ckube_fake_lw_last_call(x.fake, CKUBE_FAKE_WATCH, &c));
        assert_string_equal(c.resource_version, rv_str(rv));
        timeouts[i] = c.timeout_seconds.value;
        assert_true(timeouts[i] >= 300 && timeouts[i] <= 600);
        ckube_fake_call_clear(&c);
    }
    /* timeoutSeconds is random. */
    bool differ = false;
    for (size_t i = 1; i < 6; i++)
        differ |= timeouts[i] != timeouts[0];
    assert_true(differ);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    assert_true(rec_matches(&x.rec, x.fake));

    /* A watch that ends at once without an event is a failure: backoff,
     * then a re-watch (still no relist). */
    size_t watches = ckube_fake_lw_watch_calls(x.fake);
    ckube_fake_lw_drop_watches(x.fake);
    wait_sleeping(&x);
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_watch_calls(x.fake), watches);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(799));
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_watch_calls(x.fake), watches);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1));
    wait_watching(&x, watches + 1);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    fx_free(&x);
}

static void test_bookmarks(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 2);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    ckube_fake_lw_bump_rv(x.fake);
    uint64_t rv = ckube_fake_lw_bump_rv(x.fake);
    assert_int_equal(ckube_fake_lw_bookmark(x.fake), 1);
    /* A bookmark moves the RV and nothing else. */
    assert_true(TU_WAIT(last_rv_is(x.r, rv), 5000));
    assert_int_equal(rec_get(&x.rec, &x.rec.adds) + rec_get(&x.rec, &x.rec.updates) +
                         rec_get(&x.rec, &x.rec.removes),
                     0);
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 1);
    /* The next watch starts from the bookmark's RV. */
    ckube_fake_lw_drop_watches(x.fake);
    wait_watching(&x, 2);
    ckube_fake_call c;
    ckube_fake_lw_last_call(x.fake, CKUBE_FAKE_WATCH, &c);
    assert_string_equal(c.resource_version, rv_str(rv));
    ckube_fake_call_clear(&c);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    fx_free(&x);
}

static void test_expired_event_relists(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 3);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    /* 410 as an ERROR event: relist from "" after one backoff step. */
    assert_int_equal(ckube_fake_lw_expire_watches(x.fake), 1);
    wait_sleeping(&x);
    /* Changes while nobody watches show up in the relist. */
    ckube_fake_lw_delete(x.fake, "ns", "o0");
    json_t *o = tu_obj("ns", "late", NULL, NULL, 0);
    ckube_fake_lw_add(x.fake, o);
    json_decref(o);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(799));
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1));
    wait_watching(&x, 2);
    expect_call(x.fake, 2, CKUBE_FAKE_LIST, "");
    ckube_fake_call c;
    ckube_fake_lw_call(x.fake, 2, &c);
    assert_int_equal(c.limit, 500);
    ckube_fake_call_clear(&c);
    expect_call(x.fake, 3, CKUBE_FAKE_WATCH, rv_str(ckube_fake_lw_resource_version(x.fake)));
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 2);
    assert_true(rec_matches(&x.rec, x.fake));
    fx_free(&x);
}

static void test_expired_on_open_relists(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 3);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    json_t *o = tu_obj("ns", "a", NULL, NULL, 0);
    uint64_t rv = ckube_fake_lw_add(x.fake, o);
    json_decref(o);
    assert_true(TU_WAIT(last_rv_is(x.r, rv), 5000));
    /* The server compacts past our RV, then closes the watch: the
     * re-watch fails with 410 on open, so relist from "". */
    ckube_fake_lw_bump_rv(x.fake);
    ckube_fake_lw_compact(x.fake);
    ckube_fake_lw_drop_watches(x.fake);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_WATCH, 2, 5000));
    expect_call(x.fake, 2, CKUBE_FAKE_WATCH, rv_str(rv));
    wait_sleeping(&x);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(800));
    wait_watching(&x, 3);
    expect_call(x.fake, 3, CKUBE_FAKE_LIST, "");
    expect_call(x.fake, 4, CKUBE_FAKE_WATCH, rv_str(ckube_fake_lw_resource_version(x.fake)));

    /* The same with an injected 410 on open. */
    ckube_status *gone = ckube_status_new(410, CKUBE_REASON_GONE, "gone");
    ckube_fake_lw_fail_watches(x.fake, gone, 1);
    ckube_status_free(gone);
    ckube_fake_lw_bookmark(x.fake); /* an event, so the close is not "short" */
    ckube_fake_lw_drop_watches(x.fake);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_WATCH, 4, 5000));
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1600)); /* second step of the backoff */
    wait_watching(&x, 5);
    expect_call(x.fake, 6, CKUBE_FAKE_LIST, "");
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 3);
    fx_free(&x);
}

/* Advances the clock by `d` in two steps, checking that the next list call
 * comes exactly at d. `calls` is the list count before. */
static void expect_next_list_after(struct fx *x, uint64_t d, size_t calls)
{
    wait_sleeping(x);
    ckube_fake_clock_advance(x->clk, d - CKUBE_MS(1));
    tu_sleep_ms(15);
    if (ckube_fake_lw_list_calls(x->fake) != calls)
        fail_msg("listed before %" PRIu64 " ms", d / 1000000);
    ckube_fake_clock_advance(x->clk, CKUBE_MS(1));
    if (!ckube_fake_lw_wait_calls(x->fake, CKUBE_FAKE_LIST, calls + 1, 5000))
        fail_msg("no list after %" PRIu64 " ms", d / 1000000);
}

static void test_backoff_timings(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 1);
    ckube_status *st = ckube_status_new(500, CKUBE_REASON_INTERNAL, "etcd is down");
    ckube_fake_lw_fail_lists(x.fake, st, -1);
    fx_start(&x, NULL);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 1, 5000));
    static const uint64_t want_ms[] = {800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
    for (size_t i = 0; i < sizeof(want_ms) / sizeof(want_ms[0]); i++)
        expect_next_list_after(&x, CKUBE_MS(want_ms[i]), i + 1);
    /* The call times agree. */
    for (size_t i = 0; i < sizeof(want_ms) / sizeof(want_ms[0]); i++) {
        ckube_fake_call a, b;
        ckube_fake_lw_call(x.fake, i, &a);
        ckube_fake_lw_call(x.fake, i + 1, &b);
        assert_int_equal(b.at_ns - a.at_ns, CKUBE_MS(want_ms[i]));
        ckube_fake_call_clear(&a);
        ckube_fake_call_clear(&b);
    }
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 0);

    /* Recovery, then 2 minutes healthy: the backoff starts over at 800 ms. */
    ckube_fake_lw_fail_lists(x.fake, NULL, 0);
    size_t lists = ckube_fake_lw_list_calls(x.fake);
    expect_next_list_after(&x, CKUBE_SEC(30), lists);
    wait_watching(&x, 1);
    ckube_fake_clock_advance(x.clk, CKUBE_SEC(121));
    ckube_fake_lw_fail_lists(x.fake, st, -1);
    ckube_fake_lw_expire_watches(x.fake);
    lists = ckube_fake_lw_list_calls(x.fake);
    expect_next_list_after(&x, CKUBE_MS(800), lists);
    expect_next_list_after(&x, CKUBE_MS(1600), lists + 1);
    ckube_status_free(st);
    fx_free(&x);
}

static void test_backoff_jitter(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 1);
    ckube_status *st = ckube_status_new(503, CKUBE_REASON_SERVICE_UNAVAILABLE, "later");
    ckube_fake_lw_fail_lists(x.fake, st, 1);
    ckube_status_free(st);
    ckube_reflector_opts o = {0}; /* default jitter: up to +100% */
    fx_start(&x, &o);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 1, 5000));
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(799));
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(801));
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 2, 5000));
    wait_watching(&x, 1);
    fx_free(&x);
}

static void test_retry_after(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 1);
    ckube_status *st = ckube_status_new(429, CKUBE_REASON_TOO_MANY_REQUESTS, "slow down");
    st->retry_after_seconds = 7;
    ckube_fake_lw_fail_lists(x.fake, st, 1);
    fx_start(&x, NULL);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 1, 5000));
    expect_next_list_after(&x, CKUBE_SEC(7), 1);
    wait_watching(&x, 1);

    /* On a watch open: re-watch after Retry-After, no relist. */
    st->retry_after_seconds = 3;
    ckube_fake_lw_fail_watches(x.fake, st, 1);
    ckube_fake_lw_bookmark(x.fake);
    ckube_fake_lw_drop_watches(x.fake);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_WATCH, 2, 5000));
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(2999));
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_watch_calls(x.fake), 2);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1));
    wait_watching(&x, 3);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 2);
    ckube_status_free(st);
    fx_free(&x);
}

static void test_not_found_keeps_retrying(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 2);
    ckube_status *st = ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                        "the server could not find the requested resource");
    ckube_fake_lw_fail_lists(x.fake, st, -1);
    ckube_status_free(st);
    tu_capture cap;
    tu_capture_begin(&cap);
    fx_start(&x, NULL);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 1, 5000));
    /* No spinning while the clock stands still. */
    tu_sleep_ms(100);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    expect_next_list_after(&x, CKUBE_MS(800), 1);
    expect_next_list_after(&x, CKUBE_MS(1600), 2);
    wait_sleeping(&x); /* the third failure is logged by now */
    char *log = tu_capture_end(&cap);
    /* klog error lines, in the seed's wording. */
    const char *want = "failed to list fakes: the server could not find the requested resource";
    char *line = strstr(log, want);
    if (!line)
        fail_msg("log lacks '%s':\n%s", want, log);
    while (line > log && line[-1] != '\n')
        line--;
    assert_int_equal(line[0], 'E');
    size_t n = 0;
    for (const char *p = log; (p = strstr(p, want)); p++)
        n++;
    assert_int_equal(n, 3);
    free(log);

    /* The resource appears (the CRD got applied): the reflector syncs. */
    ckube_fake_lw_fail_lists(x.fake, NULL, 0);
    expect_next_list_after(&x, CKUBE_MS(3200), 3);
    wait_watching(&x, 1);
    assert_true(rec_matches(&x.rec, x.fake));
    fx_free(&x);
}

static void test_slow_server(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 2);
    ckube_fake_lw_set_delay(x.fake, CKUBE_SEC(10));
    fx_start(&x, NULL);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 1, 5000));
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_SEC(9));
    tu_sleep_ms(20);
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 0);
    ckube_fake_clock_advance(x.clk, CKUBE_SEC(1));
    assert_true(TU_WAIT(rec_get(&x.rec, &x.rec.replaces) == 1, 5000));
    /* The watch open is slow too; nothing is retried meanwhile. */
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_WATCH, 1, 5000));
    wait_sleeping(&x);
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_open_watches(x.fake), 0);
    ckube_fake_clock_advance(x.clk, CKUBE_SEC(10));
    wait_watching(&x, 1);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    assert_int_equal(ckube_fake_lw_watch_calls(x.fake), 1);
    /* Events flow normally once connected. */
    json_t *o = tu_obj("ns", "a", NULL, NULL, 0);
    ckube_fake_lw_add(x.fake, o);
    json_decref(o);
    assert_true(TU_WAIT(rec_matches(&x.rec, x.fake), 5000));
    ckube_fake_lw_set_delay(x.fake, 0);
    fx_free(&x);
}

static void test_broken_connection(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 3);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    uint64_t rv = ckube_fake_lw_resource_version(x.fake);
    /* A transport error: back off, re-watch from the last RV. */
    assert_int_equal(ckube_fake_lw_break_watches(x.fake), 1);
    wait_sleeping(&x);
    /* What happens meanwhile is replayed by the re-watch. */
    json_t *o = tu_obj("ns", "during", NULL, NULL, 0);
    ckube_fake_lw_add(x.fake, o);
    json_decref(o);
    ckube_fake_lw_delete(x.fake, "ns", "o1");
    ckube_fake_clock_advance(x.clk, CKUBE_MS(800));
    wait_watching(&x, 2);
    expect_call(x.fake, 2, CKUBE_FAKE_WATCH, rv_str(rv));
    assert_true(TU_WAIT(rec_matches(&x.rec, x.fake), 5000));
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    assert_int_equal(rec_get(&x.rec, &x.rec.replaces), 1);

    /* Connection refused on open (code 0): back off, retry the watch. */
    ckube_status *refused = ckube_status_new(0, NULL, "connection refused");
    ckube_fake_lw_fail_watches(x.fake, refused, 2);
    ckube_status_free(refused);
    ckube_fake_lw_break_watches(x.fake);
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1600));
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_WATCH, 3, 5000));
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(3200));
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_WATCH, 4, 5000));
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(6400));
    wait_watching(&x, 5);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    fx_free(&x);
}

static void test_error_events(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 1);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    /* 500 as an event: re-watch after a backoff, no relist. */
    ckube_status *st = ckube_status_new(500, CKUBE_REASON_INTERNAL, "boom");
    assert_int_equal(ckube_fake_lw_error_watches(x.fake, st), 1);
    ckube_status_free(st);
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(800));
    wait_watching(&x, 2);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    /* Anything else (403 here): relist after a backoff. */
    st = ckube_status_new(403, CKUBE_REASON_FORBIDDEN, "no");
    ckube_fake_lw_error_watches(x.fake, st);
    ckube_status_free(st);
    wait_sleeping(&x);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1600));
    wait_watching(&x, 3);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 2);
    /* Not a 410: the relist keeps the last RV (served from the cache). */
    expect_call(x.fake, 3, CKUBE_FAKE_LIST, rv_str(ckube_fake_lw_resource_version(x.fake)));
    fx_free(&x);
}

static void test_watch_timeout(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 1);
    fx_start(&x, NULL);
    wait_watching(&x, 1);
    ckube_fake_call c;
    ckube_fake_lw_last_call(x.fake, CKUBE_FAKE_WATCH, &c);
    int64_t t = c.timeout_seconds.value;
    ckube_fake_call_clear(&c);
    /* The server ends the watch at timeoutSeconds: re-watch at once. */
    ckube_fake_clock_advance(x.clk, CKUBE_SEC(t) - CKUBE_MS(1));
    tu_sleep_ms(20);
    assert_int_equal(ckube_fake_lw_watch_calls(x.fake), 1);
    ckube_fake_clock_advance(x.clk, CKUBE_MS(1));
    wait_watching(&x, 2);
    assert_int_equal(ckube_fake_lw_list_calls(x.fake), 1);
    fx_free(&x);
}

static void test_stop_during_backoff(void **state)
{
    (void)state;
    struct fx x;
    fx_init(&x, 1);
    ckube_status *st = ckube_status_new(500, CKUBE_REASON_INTERNAL, "down");
    ckube_fake_lw_fail_lists(x.fake, st, -1);
    ckube_status_free(st);
    fx_start(&x, NULL);
    assert_true(ckube_fake_lw_wait_calls(x.fake, CKUBE_FAKE_LIST, 1, 5000));
    wait_sleeping(&x);
    uint64_t t0 = ckube_monotonic_ns();
    ckube_reflector_stop(x.r);
    assert_true(ckube_monotonic_ns() - t0 < CKUBE_SEC(2));
    assert_null(ckube_reflector_last_sync_resource_version(x.r));
    fx_free(&x);
}

static void test_bad_args(void **state)
{
    (void)state;
    ckube_reflector_sink none = {0};
    ckube_fake_lw *f = ckube_fake_lw_new(NULL);
    ckube_list_watch *lw = ckube_fake_lw_list_watch(f);
    assert_null(ckube_reflector_new(lw, none, NULL));
    assert_null(ckube_reflector_new(NULL, none, NULL));
    ckube_reflector_free(NULL);
    ckube_list_watch_free(lw);
    ckube_fake_lw_unref(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_then_watch),
        cmocka_unit_test(test_keep_managed_fields),
        cmocka_unit_test(test_paging),
        cmocka_unit_test(test_clean_close_rewatches),
        cmocka_unit_test(test_bookmarks),
        cmocka_unit_test(test_expired_event_relists),
        cmocka_unit_test(test_expired_on_open_relists),
        cmocka_unit_test(test_backoff_timings),
        cmocka_unit_test(test_backoff_jitter),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_not_found_keeps_retrying),
        cmocka_unit_test(test_slow_server),
        cmocka_unit_test(test_broken_connection),
        cmocka_unit_test(test_error_events),
        cmocka_unit_test(test_watch_timeout),
        cmocka_unit_test(test_stop_during_backoff),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
