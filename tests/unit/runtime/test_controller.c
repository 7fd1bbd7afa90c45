/* test_controller.c - ckube_controller over a real shared informer fed by
 * the fake list-watch: mapping, predicates, result handling, per-key
 * exclusion, read-your-writes, backoff that events do not pull forward,
 * reconcile reasons and metrics. */
#include <ckube/controller.h>
#include <ckube/fake.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/metrics.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "informer/informer_internal.h"

/* ------------------------------------------------------------ fixture */

#define MAXLOG 256

/* What the reconcile function saw, and what it should answer. */
struct rec {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    char *keys[MAXLOG];    /* every run, in order ("ns/name") */
    char *reasons[MAXLOG]; /* the reason of each run */
    int retries[MAXLOG];
    uint64_t at[MAXLOG]; /* monotonic ns of each run */
    int n;
    /* Behaviour: for key `fail_key`, answer `fail_kind` the first
     * `fail_times` runs, then OK. */
    const char *fail_key;
    ckube_result fail_result;
    int fail_times;
    int failed;
    /* Per-key exclusion check. */
    char *inflight[16];
    int ninflight;
    int overlap;
    useconds_t sleep_us;
    /* Read-your-writes: on the first run of ryw_key, report a write at
     * ryw_rv on `inf` and enqueue the key again. */
    const char *ryw_key;
    uint64_t ryw_rv;
    /* ...and first, when set, a write at ryw_rv2 on inf2. */
    ckube_shared_informer *inf2;
    uint64_t ryw_rv2;
    ckube_shared_informer *inf;
    ckube_controller *ctl;
    bool ryw_done;
};

static struct rec R;

static void rec_reset(void)
{
    for (int i = 0; i < R.n; i++) {
        free(R.keys[i]);
        free(R.reasons[i]);
    }
    pthread_mutex_destroy(&R.mu);
    pthread_cond_destroy(&R.cond);
    memset(&R, 0, sizeof(R));
    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cond, NULL);
}

static ckube_result reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns, const char *name)
{
    (void)ctx;
    char key[256];
    snprintf(key, sizeof(key), "%s%s%s", ns ? ns : "", ns ? "/" : "", name);

    pthread_mutex_lock(&R.mu);
    for (int i = 0; i < R.ninflight; i++)
        if (strcmp(R.inflight[i], key) == 0)
            R.overlap++;
    R.inflight[R.ninflight++] = strdup(key);
    pthread_mutex_unlock(&R.mu);

    if (R.sleep_us)
        usleep(R.sleep_us);

    ckube_result res = ckube_result_ok();
    pthread_mutex_lock(&R.mu);
    if (R.n < MAXLOG) {
        R.keys[R.n] = strdup(key);
        R.reasons[R.n] = strdup(ckube_reconcile_reason(rc));
        R.retries[R.n] = ckube_reconcile_retries(rc);
        R.at[R.n] = ckube_monotonic_ns();
        R.n++;
    }
    if (R.fail_key && strcmp(R.fail_key, key) == 0 && R.failed < R.fail_times) {
        R.failed++;
        res = R.fail_result;
    }
    bool do_ryw = R.ryw_key && !R.ryw_done && strcmp(R.ryw_key, key) == 0;
    if (do_ryw)
        R.ryw_done = true;
    for (int i = 0; i < R.ninflight; i++) {
        if (strcmp(R.inflight[i], key) == 0) {
            free(R.inflight[i]);
            R.inflight[i] = R.inflight[--R.ninflight];
            break;
        }
    }
    pthread_cond_broadcast(&R.cond);
    pthread_mutex_unlock(&R.mu);

    if (do_ryw) {
        char rv[32];
        if (R.inf2) {
            snprintf(rv, sizeof(rv), "%llu", (unsigned long long)R.ryw_rv2);
            json_t *child = json_pack("{s:{s:s,s:s,s:s}}", "metadata", "namespace", ns, "name",
                                      "child", "resourceVersion", rv);
            ckube_reconcile_wrote(rc, R.inf2, child);
            json_decref(child);
        }
        snprintf(rv, sizeof(rv), "%llu", (unsigned long long)R.ryw_rv);
        json_t *written = json_pack("{s:{s:s,s:s,s:s}}", "metadata", "namespace", ns, "name", name,
                                    "resourceVersion", rv);
        ckube_reconcile_wrote(rc, R.inf, written);
        json_decref(written);
        ckube_controller_enqueue(R.ctl, ns, name);
    }
    return res;
}

/* Waits until `n` runs have been recorded (or 5 s). */
static int wait_runs(int n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&R.mu);
    while (R.n < n) {
        if (pthread_cond_timedwait(&R.cond, &R.mu, &ts) == ETIMEDOUT)
            break;
    }
    int got = R.n;
    pthread_mutex_unlock(&R.mu);
    return got;
}

static int runs_of(const char *key)
{
    pthread_mutex_lock(&R.mu);
    int c = 0;
    for (int i = 0; i < R.n; i++)
        if (strcmp(R.keys[i], key) == 0)
            c++;
    pthread_mutex_unlock(&R.mu);
    return c;
}

static json_t *obj(const char *ns, const char *name, int generation, const char *label)
{
    json_t *o = json_pack("{s:s,s:s,s:{s:s,s:s,s:i}}", "apiVersion", "v1", "kind", "Fake",
                          "metadata", "namespace", ns, "name", name, "generation", generation);
    if (label)
        json_object_set_new(json_object_get(o, "metadata"), "labels",
                            json_pack("{s:s}", "l", label));
    return o;
}

/* Polls the registry until its text holds `needle` (metrics are updated
 * just after the reconcile function returns). */
static bool metrics_show(ckube_metrics_registry *reg, const char *needle)
{
    for (int i = 0; i < 200; i++) {
        char *text = ckube_metrics_render(reg, NULL);
        bool found = text && strstr(text, needle);
        free(text);
        if (found)
            return true;
        usleep(5000);
    }
    return false;
}

struct env {
    ckube_fake_lw *fake;
    ckube_shared_informer *inf;
    ckube_controller *ctl;
    ckube_metrics_registry *reg;
};

static void env_start(struct env *e, const ckube_watch_spec *spec, int workers,
                      ckube_rate_limiter *rl)
{
    e->fake = ckube_fake_lw_new(&(ckube_fake_lw_opts){.resource = "fakes"});
    e->inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(e->fake), NULL);
    assert_non_null(e->inf);
    e->reg = ckube_metrics_registry_new();
    ckube_controller_options o = {.name = "t",
                                  .max_concurrent_reconciles = workers,
                                  .rate_limiter = rl,
                                  .metrics = e->reg,
                                  .ryw_timeout_ns = CKUBE_SEC(5)};
    e->ctl = ckube_controller_new(&o, reconcile, NULL);
    assert_non_null(e->ctl);
    R.ctl = e->ctl;
    R.inf = e->inf;
    assert_int_equal(ckube_controller_watch(e->ctl, e->inf, spec), 0);
}

static void env_run(struct env *e)
{
    assert_int_equal(ckube_shared_informer_start(e->inf), 0);
    assert_int_equal(ckube_controller_start(e->ctl, CKUBE_SEC(5)), 0);
    /* Adding a watch after start is refused. */
    ckube_watch_spec late = {.map = CKUBE_MAP_SELF};
    assert_int_equal(ckube_controller_watch(e->ctl, e->inf, &late), -1);
}

static void env_stop(struct env *e)
{
    ckube_controller_free(e->ctl);
    ckube_shared_informer_free(e->inf);
    ckube_fake_lw_unref(e->fake);
    ckube_metrics_registry_free(e->reg);
}

static ckube_rate_limiter *fast_limiter(void)
{
    return ckube_rate_limiter_exponential(CKUBE_MS(1), CKUBE_MS(20));
}

/* -------------------------------------------------------------- tests */

static void test_self_mapping_and_reasons(void **state)
{
    (void)state;
    rec_reset();
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF, .label = "primary"};
    env_start(&e, &spec, 2, fast_limiter());
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof(name), "o%d", i);
        json_t *o = obj("ns", name, 1, NULL);
        ckube_fake_lw_add(e.fake, o);
        json_decref(o);
    }
    size_t built = __atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED);
    env_run(&e);
    assert_int_equal(wait_runs(3), 3);
    /* Mapping an object to its own key (no predicates) decodes nothing. */
    assert_int_equal(__atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED), built);
    assert_int_equal(runs_of("ns/o0"), 1);
    assert_int_equal(runs_of("ns/o2"), 1);
    assert_non_null(strstr(R.reasons[0], "ADDED (initial list)"));
    assert_non_null(strstr(R.reasons[0], "via watch \"primary\""));

    json_t *o = obj("ns", "o1", 2, NULL);
    ckube_fake_lw_update(e.fake, o);
    json_decref(o);
    assert_int_equal(wait_runs(4), 4);
    assert_string_equal(R.keys[3], "ns/o1");
    assert_non_null(strstr(R.reasons[3], "MODIFIED (generation 2"));

    ckube_fake_lw_delete(e.fake, "ns", "o2");
    assert_int_equal(wait_runs(5), 5);
    assert_string_equal(R.keys[4], "ns/o2");
    assert_non_null(strstr(R.reasons[4], "DELETED"));

    /* Metrics: five successful runs, the worker gauge. */
    assert_true(metrics_show(
        e.reg, "controller_runtime_reconcile_total{controller=\"t\",result=\"success\"} 5"));
    assert_true(
        metrics_show(e.reg, "controller_runtime_max_concurrent_reconciles{controller=\"t\"} 2"));
    assert_true(
        metrics_show(e.reg, "controller_runtime_reconcile_time_seconds_count{controller=\"t\"} 5"));
    assert_true(metrics_show(e.reg, "workqueue_adds_total{name=\"t\"}"));
    env_stop(&e);
}

static void test_error_requeues_with_backoff_then_forgets(void **state)
{
    (void)state;
    rec_reset();
    R.fail_key = "ns/bad";
    R.fail_result = ckube_result_error();
    R.fail_times = 3;
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF};
    env_start(&e, &spec, 1, fast_limiter());
    json_t *o = obj("ns", "bad", 1, NULL);
    ckube_fake_lw_add(e.fake, o);
    json_decref(o);
    env_run(&e);
    assert_int_equal(wait_runs(4), 4);
    /* Retries count up through the failures, then success forgets. */
    for (int i = 0; i < 4; i++) {
        assert_string_equal(R.keys[i], "ns/bad");
        assert_int_equal(R.retries[i], i);
    }
    usleep(50000);
    assert_int_equal(R.n, 4); /* no further runs after success */
    assert_int_equal(ckube_workqueue_num_requeues(ckube_controller_queue(e.ctl), "ns/bad"), 0);
    assert_true(metrics_show(
        e.reg, "controller_runtime_reconcile_total{controller=\"t\",result=\"error\"} 3"));
    assert_true(
        metrics_show(e.reg, "controller_runtime_reconcile_errors_total{controller=\"t\"} 3"));
    assert_true(metrics_show(e.reg, "workqueue_retries_total{name=\"t\"} 3"));
    env_stop(&e);
}

static void test_terminal_error_is_not_retried(void **state)
{
    (void)state;
    rec_reset();
    R.fail_key = "ns/term";
    R.fail_result = ckube_result_terminal();
    R.fail_times = 1;
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF};
    env_start(&e, &spec, 1, fast_limiter());
    json_t *o = obj("ns", "term", 1, NULL);
    ckube_fake_lw_add(e.fake, o);
    env_run(&e);
    assert_int_equal(wait_runs(1), 1);
    usleep(100000);
    assert_int_equal(R.n, 1);
    /* The next event runs it again. */
    json_object_set_new(json_object_get(o, "metadata"), "generation", json_integer(2));
    ckube_fake_lw_update(e.fake, o);
    json_decref(o);
    assert_int_equal(wait_runs(2), 2);
    assert_true(metrics_show(
        e.reg, "controller_runtime_terminal_reconcile_errors_total{controller=\"t\"} 1"));
    env_stop(&e);
}

static void test_requeue_after(void **state)
{
    (void)state;
    rec_reset();
    R.fail_key = "ns/later";
    R.fail_result = ckube_result_requeue_after(CKUBE_MS(150));
    R.fail_times = 1;
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF};
    env_start(&e, &spec, 1, fast_limiter());
    json_t *o = obj("ns", "later", 1, NULL);
    ckube_fake_lw_add(e.fake, o);
    json_decref(o);
    env_run(&e);
    assert_int_equal(wait_runs(2), 2);
    uint64_t gap = R.at[1] - R.at[0];
    assert_true(gap >= CKUBE_MS(140));
    assert_int_equal(R.retries[1], 0); /* requeue-after forgets the backoff */
    env_stop(&e);
}

static void test_one_key_never_runs_twice_at_once(void **state)
{
    (void)state;
    rec_reset();
    R.sleep_us = 2000;
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF};
    env_start(&e, &spec, 4, fast_limiter());
    json_t *o = obj("ns", "hot", 1, NULL);
    ckube_fake_lw_add(e.fake, o);
    env_run(&e);
    for (int i = 2; i < 60; i++) {
        json_object_set_new(json_object_get(o, "metadata"), "generation", json_integer(i));
        ckube_fake_lw_update(e.fake, o);
        if (i % 10 == 0)
            usleep(3000);
    }
    json_decref(o);
    /* The last change is always reconciled after it happened: a run
     * carries it in its reason. (Not necessarily the last run: an event
     * that lands between a worker's get and its reading of the reasons
     * is reported by that run, and the run its re-queue causes then
     * has no new reason.) */
    usleep(200000);
    pthread_mutex_lock(&R.mu);
    assert_int_equal(R.overlap, 0);
    assert_true(R.n >= 2);
    bool seen59 = false;
    for (int i = 0; i < R.n; i++)
        seen59 |= R.reasons[i] && strstr(R.reasons[i], "generation 59") != NULL;
    assert_true(seen59);
    pthread_mutex_unlock(&R.mu);
    env_stop(&e);
}

static void test_owner_mapping_and_predicates(void **state)
{
    (void)state;
    rec_reset();
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_OWNER,
                             .owner_group = "samplecrd.k8s.io",
                             .owner_kind = "Network",
                             .predicates = {ckube_predicate_generation_changed},
                             .label = "owned"};
    env_start(&e, &spec, 1, fast_limiter());
    json_t *child = obj("ns", "child", 1, NULL);
    json_object_set_new(json_object_get(child, "metadata"), "ownerReferences",
                        json_pack("[{s:s,s:s,s:s,s:b},{s:s,s:s,s:s}]", "apiVersion",
                                  "samplecrd.k8s.io/v1", "kind", "Network", "name", "net1",
                                  "controller", 1, "apiVersion", "v1", "kind", "ConfigMap", "name",
                                  "other"));
    ckube_fake_lw_add(e.fake, child);
    /* An object without a matching owner maps to nothing. */
    json_t *orphan = obj("ns", "orphan", 1, NULL);
    ckube_fake_lw_add(e.fake, orphan);
    json_decref(orphan);
    env_run(&e);
    assert_int_equal(wait_runs(1), 1);
    assert_string_equal(R.keys[0], "ns/net1");
    assert_non_null(strstr(R.reasons[0], "ns/child"));

    /* A label-only change fails generation_changed: nothing runs. */
    json_object_set_new(json_object_get(child, "metadata"), "labels", json_pack("{s:s}", "a", "b"));
    ckube_fake_lw_update(e.fake, child);
    usleep(100000);
    assert_int_equal(R.n, 1);
    /* A generation change passes. */
    json_object_set_new(json_object_get(child, "metadata"), "generation", json_integer(2));
    ckube_fake_lw_update(e.fake, child);
    assert_int_equal(wait_runs(2), 2);
    assert_string_equal(R.keys[1], "ns/net1");
    json_decref(child);
    env_stop(&e);
}

static void map_to_fixed(void *ctx, const json_t *o, ckube_key_sink *out)
{
    (void)o;
    ckube_enqueue(out, NULL, (const char *)ctx);
}

static void test_map_func_cluster_scoped(void **state)
{
    (void)state;
    rec_reset();
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_FUNC, .map_fn = map_to_fixed, .map_ctx = "global"};
    env_start(&e, &spec, 1, fast_limiter());
    json_t *o = obj("ns", "x", 1, NULL);
    ckube_fake_lw_add(e.fake, o);
    json_decref(o);
    env_run(&e);
    assert_int_equal(wait_runs(1), 1);
    assert_string_equal(R.keys[0], "global");
    env_stop(&e);
}

static void test_read_your_writes_holds_until_cache_catches_up(void **state)
{
    (void)state;
    rec_reset();
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF, .skip_resync = true};
    env_start(&e, &spec, 1, fast_limiter());
    json_t *o = obj("ns", "ryw", 1, NULL);
    uint64_t rv = ckube_fake_lw_add(e.fake, o);
    json_decref(o);
    /* The reconcile "wrote" at rv+3; the cache has only rv. */
    R.ryw_key = "ns/ryw";
    R.ryw_rv = rv + 3;
    env_run(&e);
    assert_int_equal(wait_runs(1), 1);
    usleep(150000);
    assert_int_equal(R.n, 1); /* held: the cache is behind the write */
    /* Unrelated changes move the cache to rv+1, rv+2: still held. */
    json_t *other = obj("other", "a", 1, NULL);
    ckube_fake_lw_add(e.fake, other);
    json_object_set_new(json_object_get(other, "metadata"), "generation", json_integer(2));
    ckube_fake_lw_update(e.fake, other);
    usleep(150000);
    assert_int_equal(runs_of("ns/ryw"), 1);
    /* rv+3 arrives: the held key runs. */
    json_object_set_new(json_object_get(other, "metadata"), "generation", json_integer(3));
    uint64_t last = ckube_fake_lw_update(e.fake, other);
    assert_int_equal(last, rv + 3);
    json_decref(other);
    for (int i = 0; i < 50 && runs_of("ns/ryw") < 2; i++)
        usleep(20000);
    assert_int_equal(runs_of("ns/ryw"), 2);
    env_stop(&e);
}

static void map_to_nothing(void *ctx, const json_t *o, ckube_key_sink *out)
{
    (void)ctx;
    (void)o;
    (void)out;
}

/* A reconcile that writes through two informers (creates a child, then
 * updates its own status) is held until both caches have the writes:
 * the second write must not replace the hold on the first, or the next
 * run would miss the child and create it again (409 AlreadyExists). */
static void test_read_your_writes_holds_every_informer_written(void **state)
{
    (void)state;
    rec_reset();
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF, .skip_resync = true};
    env_start(&e, &spec, 1, fast_limiter());
    ckube_fake_lw *fake2 = ckube_fake_lw_new(&(ckube_fake_lw_opts){.resource = "children"});
    ckube_shared_informer *inf2 = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake2), NULL);
    assert_non_null(inf2);
    ckube_watch_spec children = {.map = CKUBE_MAP_FUNC, .map_fn = map_to_nothing};
    assert_int_equal(ckube_controller_watch(e.ctl, inf2, &children), 0);
    json_t *o = obj("ns", "ryw", 1, NULL);
    uint64_t rv = ckube_fake_lw_add(e.fake, o);
    json_decref(o);
    /* The reconcile wrote a child at rv+1 (inf2), then itself at rv+2.
     * (Each fake counts revisions on its own, from the same start.) */
    R.ryw_key = "ns/ryw";
    R.inf2 = inf2;
    R.ryw_rv2 = rv + 1;
    R.ryw_rv = rv + 2;
    assert_int_equal(ckube_shared_informer_start(inf2), 0);
    env_run(&e);
    assert_int_equal(wait_runs(1), 1);
    /* Its own informer catches up: still held, the child is not seen. */
    json_t *other = obj("other", "a", 1, NULL);
    ckube_fake_lw_add(e.fake, other);
    json_object_set_new(json_object_get(other, "metadata"), "generation", json_integer(2));
    assert_int_equal(ckube_fake_lw_update(e.fake, other), rv + 2);
    json_decref(other);
    usleep(200000);
    assert_int_equal(runs_of("ns/ryw"), 1);
    /* The child's informer reaches rv+1: the key runs. */
    json_t *c1 = obj("ns", "c1", 1, NULL), *c2 = obj("ns", "c2", 1, NULL);
    assert_int_equal(ckube_fake_lw_add(fake2, c1), rv);
    usleep(100000);
    assert_int_equal(runs_of("ns/ryw"), 1);
    assert_int_equal(ckube_fake_lw_add(fake2, c2), rv + 1);
    json_decref(c1);
    json_decref(c2);
    for (int i = 0; i < 100 && runs_of("ns/ryw") < 2; i++)
        usleep(20000);
    assert_int_equal(runs_of("ns/ryw"), 2);
    env_stop(&e);
    ckube_shared_informer_free(inf2);
    ckube_fake_lw_unref(fake2);
}

static void test_backoff_not_pulled_forward_by_status_updates(void **state)
{
    (void)state;
    rec_reset();
    R.fail_key = "ns/slow";
    R.fail_result = ckube_result_error();
    R.fail_times = 100;
    struct env e;
    ckube_watch_spec spec = {.map = CKUBE_MAP_SELF};
    /* A 10 s backoff: no retry happens during the test on its own. */
    env_start(&e, &spec, 1, ckube_rate_limiter_exponential(CKUBE_SEC(10), CKUBE_SEC(10)));
    json_t *o = obj("ns", "slow", 1, NULL);
    ckube_fake_lw_add(e.fake, o);
    env_run(&e);
    assert_int_equal(wait_runs(1), 1);
    /* Wait until the failure has been handled (the key is in backoff). */
    ckube_workqueue *q = ckube_controller_queue(e.ctl);
    for (int i = 0; i < 250 && ckube_workqueue_num_requeues(q, "ns/slow") < 1; i++)
        usleep(2000);
    assert_int_equal(ckube_workqueue_num_requeues(q, "ns/slow"), 1);
    /* A status-only change (same generation) waits for the backoff. */
    json_object_set_new(o, "status", json_pack("{s:s}", "phase", "x"));
    ckube_fake_lw_update(e.fake, o);
    usleep(150000);
    assert_int_equal(R.n, 1);
    /* A spec change (new generation) runs now. */
    json_object_set_new(json_object_get(o, "metadata"), "generation", json_integer(2));
    ckube_fake_lw_update(e.fake, o);
    json_decref(o);
    assert_int_equal(wait_runs(2), 2);
    assert_non_null(strstr(R.reasons[1], "generation 2"));
    /* The status change is remembered in the reason of the next run. */
    assert_non_null(strstr(R.reasons[1], "generation 1"));
    env_stop(&e);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ckube_controller_options o = {.name = NULL};
    assert_null(ckube_controller_new(&o, reconcile, NULL));
    o.name = "x";
    assert_null(ckube_controller_new(&o, NULL, NULL));
    assert_null(ckube_controller_new(NULL, reconcile, NULL));
    o.metrics = ckube_metrics_registry_new();
    ckube_controller *c = ckube_controller_new(&o, reconcile, NULL);
    assert_non_null(c);
    ckube_watch_spec owner_without_kind = {.map = CKUBE_MAP_OWNER};
    ckube_fake_lw *f = ckube_fake_lw_new(NULL);
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(f), NULL);
    assert_int_equal(ckube_controller_watch(c, inf, &owner_without_kind), -1);
    ckube_watch_spec func_without_fn = {.map = CKUBE_MAP_FUNC};
    assert_int_equal(ckube_controller_watch(c, inf, &func_without_fn), -1);
    /* Never started: start times out when the informer never syncs. */
    ckube_watch_spec ok = {.map = CKUBE_MAP_SELF};
    assert_int_equal(ckube_controller_watch(c, inf, &ok), 0);
    assert_int_equal(ckube_controller_start(c, CKUBE_MS(100)), -1);
    ckube_controller_free(c);
    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(f);
    ckube_metrics_registry_free(o.metrics);
    ckube_controller_free(NULL);
}

static void test_has_finalizer(void **state)
{
    (void)state;
    json_t *o = json_pack("{s:{s:[s,s]}}", "metadata", "finalizers", "a/x", "b/y");
    assert_true(ckube_has_finalizer(o, "b/y"));
    assert_false(ckube_has_finalizer(o, "c/z"));
    json_decref(o);
    json_t *bare = json_object();
    assert_false(ckube_has_finalizer(bare, "a/x"));
    json_decref(bare);
}

int main(void)
{
    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cond, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_mapping_and_reasons),
        cmocka_unit_test(test_error_requeues_with_backoff_then_forgets),
        cmocka_unit_test(test_terminal_error_is_not_retried),
        cmocka_unit_test(test_requeue_after),
        cmocka_unit_test(test_one_key_never_runs_twice_at_once),
        cmocka_unit_test(test_owner_mapping_and_predicates),
        cmocka_unit_test(test_map_func_cluster_scoped),
        cmocka_unit_test(test_read_your_writes_holds_every_informer_written),
        cmocka_unit_test(test_read_your_writes_holds_until_cache_catches_up),
        cmocka_unit_test(test_backoff_not_pulled_forward_by_status_updates),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_has_finalizer),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rec_reset();
    return rc;
}
