/* test_manager.c - the manager against a real `ckube server`: start and
 * stop order, cache-backed reads and the uncached bypass, /metrics,
 * /healthz, /readyz over HTTP, leader election between two managers,
 * lost leadership, signals, start failures and the shutdown grace
 * period. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/controller.h>
#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/manager.h>
#include <ckube/metrics.h>

#include <curl/curl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/server_util.h"

static const ckube_gvr CMS = {"", "v1", "configmaps"};
static const ckube_gvr SECRETS = {"", "v1", "secrets"};

static struct test_server srv;
static ckube_client *client;

/* ======================================================================
 * Helpers
 * ====================================================================== */

/* A log of runnable starts and stops, in order. */
struct evlog {
    pthread_mutex_t mu;
    char entries[64][48];
    int n;
};

static struct evlog evlog;

static void evlog_add(const char *what, const char *name)
{
    pthread_mutex_lock(&evlog.mu);
    if (evlog.n < 64)
        snprintf(evlog.entries[evlog.n++], 48, "%s:%s", what, name);
    pthread_mutex_unlock(&evlog.mu);
}

static void evlog_reset(void)
{
    pthread_mutex_lock(&evlog.mu);
    evlog.n = 0;
    pthread_mutex_unlock(&evlog.mu);
}

/* The log joined with spaces (static buffer). */
static const char *evlog_str(void)
{
    static char buf[64 * 48];
    pthread_mutex_lock(&evlog.mu);
    buf[0] = '\0';
    for (int i = 0; i < evlog.n; i++) {
        if (i)
            strcat(buf, " ");
        strcat(buf, evlog.entries[i]);
    }
    pthread_mutex_unlock(&evlog.mu);
    return buf;
}

struct probe {
    const char *name;
    atomic_int starts, stops;
    int fail_start;
    int stop_sleep_ms;
    /* Checked at start: what must already be running. */
    ckube_manager *m;
    ckube_shared_informer *inf;
    atomic_int saw_synced, saw_http;
};

static int probe_start(void *ctx)
{
    struct probe *p = ctx;
    if (p->fail_start)
        return -1;
    if (p->inf && ckube_shared_informer_has_synced(p->inf))
        atomic_fetch_add(&p->saw_synced, 1);
    if (p->m && ckube_manager_health_port(p->m) > 0 &&
        tsu_port_open(ckube_manager_health_port(p->m)))
        atomic_fetch_add(&p->saw_http, 1);
    atomic_fetch_add(&p->starts, 1);
    evlog_add("start", p->name);
    return 0;
}

static void probe_stop(void *ctx)
{
    struct probe *p = ctx;
    if (p->stop_sleep_ms)
        usleep((useconds_t)p->stop_sleep_ms * 1000);
    atomic_fetch_add(&p->stops, 1);
    evlog_add("stop", p->name);
}

static ckube_runnable runnable(struct probe *p, bool elected)
{
    return (ckube_runnable){p->name, probe_start, probe_stop, p, elected};
}

struct body {
    char *data;
    size_t len;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct body *b = ud;
    size_t n = size * nmemb;
    char *d = realloc(b->data, b->len + n + 1);
    if (!d)
        return 0;
    memcpy(d + b->len, ptr, n);
    b->len += n;
    d[b->len] = '\0';
    b->data = d;
    return n;
}

/* GET http://127.0.0.1:port/path; returns the status code (-1 when no
 * answer) and the body in *out (malloc'd, caller frees). */
static long http_get(int port, const char *path, char **out)
{
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    struct body b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long code = -1;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    if (!b.data)
        b.data = strdup("");
    if (out)
        *out = b.data;
    else
        free(b.data);
    return code;
}

static bool wait_for(bool (*cond)(void *), void *ctx, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (cond(ctx))
            return true;
        usleep(10000);
    }
    return cond(ctx);
}

static bool is_elected(void *m)
{
    return ckube_manager_elected(m);
}

static void create_cm(const char *ns, const char *name, const char *value, const char *label)
{
    json_t *cm =
        json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                  "metadata", "name", name, "labels", "app", label, "data", "v", value);
    ckube_status *err = NULL;
    int rc = ckube_create(client, &CMS, ns, cm, NULL, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "create %s: %s\n", name, err && err->message ? err->message : "?");
    ckube_status_free(err);
    json_decref(cm);
    assert_int_equal(rc, 0);
}

static ckube_manager_options base_opts(ckube_metrics_registry *reg)
{
    return (ckube_manager_options){
        .client = client,
        .metrics = reg,
        .metrics_bind_address = "127.0.0.1:0",
        .health_probe_bind_address = "127.0.0.1:0",
    };
}

/* ======================================================================
 * Options (no server needed)
 * ====================================================================== */

static void expect_new_error(const ckube_manager_options *o, const char *want)
{
    char *err = NULL;
    ckube_manager *m = ckube_manager_new(o, &err);
    assert_null(m);
    assert_non_null(err);
    assert_string_equal(err, want);
    free(err);
}

static void test_options(void **state)
{
    (void)state;
    ckube_manager_options o = {0};
    expect_new_error(&o, "a client or a config is required");
    ckube_config cfg = {.host = "http://127.0.0.1:1"};
    o.config = &cfg;
    o.leader_election = true;
    expect_new_error(&o, "LeaderElectionID must be configured");
    o.leader_election_id = "x";
    o.lease_duration_ns = CKUBE_SEC(5);
    o.renew_deadline_ns = CKUBE_SEC(5);
    expect_new_error(&o, "leaseDuration must be greater than renewDeadline");

    /* Defaults: sync period 10 h jittered into [9 h, 11 h). */
    ckube_manager_options d = {.config = &cfg};
    uint64_t first = 0;
    bool differ = false;
    for (int i = 0; i < 20; i++) {
        ckube_manager *m = ckube_manager_new(&d, NULL);
        assert_non_null(m);
        uint64_t sp = ckube_manager_sync_period_ns(m);
        assert_true(sp >= CKUBE_SEC(9 * 3600));
        assert_true(sp < CKUBE_SEC(11 * 3600));
        if (i == 0)
            first = sp;
        else if (sp != first)
            differ = true;
        assert_null(ckube_manager_leader_elector(m));
        ckube_manager_free(m);
    }
    assert_true(differ);
    d.sync_period_ns = CKUBE_SEC(100);
    ckube_manager *m = ckube_manager_new(&d, NULL);
    assert_true(ckube_manager_sync_period_ns(m) >= CKUBE_SEC(90));
    assert_true(ckube_manager_sync_period_ns(m) < CKUBE_SEC(110));

    /* Registration rules. */
    struct probe p = {.name = "p"};
    ckube_runnable bad = {"bad", NULL, probe_stop, &p, false};
    assert_int_equal(ckube_manager_add(m, &bad), -1);
    ckube_runnable good = runnable(&p, false);
    assert_int_equal(ckube_manager_add(m, &good), 0);
    assert_int_equal(ckube_manager_add_controller(m, NULL), -1);
    assert_int_equal(ckube_manager_add_healthz_check(m, "", NULL, NULL), -1);
    ckube_manager_free(m);

    /* A malformed bind address fails the start, nothing runs. */
    ckube_manager_options bad_addr = {
        .config = &cfg, .metrics_bind_address = "nonsense", .health_probe_bind_address = "0"};
    m = ckube_manager_new(&bad_addr, NULL);
    assert_int_equal(ckube_manager_add(m, &good), 0);
    assert_int_equal(ckube_manager_start(m), -1);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_START_FAILED);
    assert_int_equal(atomic_load(&p.starts), 0);
    assert_int_equal(ckube_manager_start(m), -1);
    ckube_manager_free(m);
}

/* ======================================================================
 * With a server
 * ====================================================================== */

static int server_setup(void **state)
{
    (void)state;
    pthread_mutex_init(&evlog.mu, NULL);
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = srv.kubeconfig};
    if (ckube_config_load(&ov, &cfg, &err) != 0)
        return -1;
    cfg->qps = -1;
    cfg->timeout_ms = 5000;
    client = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    return client ? 0 : -1;
}

static int server_teardown(void **state)
{
    (void)state;
    ckube_client_free(client);
    client = NULL;
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

static int ready_flag = 1;

static int check_flag(void *ctx, char **reason)
{
    if (__atomic_load_n((int *)ctx, __ATOMIC_SEQ_CST))
        return 0;
    *reason = strdup("db down");
    return -1;
}

static int check_ok(void *ctx, char **reason)
{
    (void)ctx;
    (void)reason;
    return 0;
}

static void test_start_order_endpoints_stop(void **state)
{
    (void)state;
    evlog_reset();
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_counter_inc(
        ckube_metric_with(ckube_metrics_counter(reg, "test_things_total", "Things.", NULL), NULL));
    ckube_manager_options o = base_opts(reg);
    o.cache_namespace = "default";
    ckube_manager *m = ckube_manager_new(&o, NULL);
    assert_non_null(m);
    ckube_shared_informer *inf = ckube_manager_informer(m, &CMS);
    assert_non_null(inf);
    struct probe o1 = {.name = "o1", .m = m, .inf = inf}, o2 = {.name = "o2", .m = m, .inf = inf},
                 e1 = {.name = "e1", .m = m, .inf = inf};
    ckube_runnable r;
    r = runnable(&e1, true);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    r = runnable(&o1, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    r = runnable(&o2, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    assert_int_equal(ckube_manager_add_healthz_check(m, "ping", check_ok, NULL), 0);
    assert_int_equal(ckube_manager_add_healthz_check(m, "ping", check_ok, NULL), -1);
    assert_int_equal(ckube_manager_add_readyz_check(m, "db", check_flag, &ready_flag), 0);
    assert_int_equal(ckube_manager_add_readyz_check(m, "cache", check_ok, NULL), 0);

    assert_int_equal(ckube_manager_start(m), 0);
    /* Non-elected runnables in order, then (no leader election) the
     * elected ones; each saw synced caches and live HTTP servers. */
    assert_string_equal(evlog_str(), "start:o1 start:o2 start:e1");
    assert_int_equal(atomic_load(&o1.saw_synced) + atomic_load(&e1.saw_synced), 2);
    assert_int_equal(atomic_load(&o1.saw_http) + atomic_load(&e1.saw_http), 2);
    assert_true(ckube_manager_elected(m));
    assert_true(ckube_manager_is_leader(m));
    assert_int_equal(ckube_manager_start(m), -1);
    ckube_runnable late = runnable(&o1, false);
    assert_int_equal(ckube_manager_add(m, &late), -1);

    int mp = ckube_manager_metrics_port(m), hp = ckube_manager_health_port(m);
    assert_true(mp > 0);
    assert_true(hp > 0);
    assert_int_not_equal(mp, hp);
    char *body = NULL;
    assert_int_equal(http_get(mp, "/metrics", &body), 200);
    assert_non_null(strstr(body, "# TYPE test_things_total counter\ntest_things_total 1\n"));
    free(body);
    assert_int_equal(http_get(mp, "/other", NULL), 404);
    assert_int_equal(http_get(hp, "/metrics", NULL), 404);

    assert_int_equal(http_get(hp, "/healthz", &body), 200);
    assert_string_equal(body, "ok");
    free(body);
    assert_int_equal(http_get(hp, "/healthz?verbose", &body), 200);
    assert_string_equal(body, "[+]ping ok\nhealthz check passed\n");
    free(body);
    assert_int_equal(http_get(hp, "/readyz", &body), 200);
    assert_string_equal(body, "ok");
    free(body);
    assert_int_equal(http_get(hp, "/readyz?verbose=1", &body), 200);
    assert_string_equal(body, "[+]cache ok\n[+]db ok\nreadyz check passed\n");
    free(body);

    /* A failing readiness check: 500, listed without its reason; the
     * check's own endpoint names the reason. */
    __atomic_store_n(&ready_flag, 0, __ATOMIC_SEQ_CST);
    assert_int_equal(http_get(hp, "/readyz", &body), 500);
    assert_string_equal(body, "[+]cache ok\n[-]db failed: reason withheld\nreadyz check failed\n");
    free(body);
    assert_int_equal(http_get(hp, "/readyz/db", &body), 500);
    assert_string_equal(body, "internal server error: db down\n");
    free(body);
    assert_int_equal(http_get(hp, "/readyz/cache", &body), 200);
    assert_string_equal(body, "ok");
    free(body);
    assert_int_equal(http_get(hp, "/readyz/nope", NULL), 404);
    assert_int_equal(http_get(hp, "/readyzz", NULL), 404);
    assert_int_equal(http_get(hp, "/readyz?exclude=db", &body), 200);
    assert_string_equal(body, "ok");
    free(body);
    assert_int_equal(http_get(hp, "/readyz?exclude=db&exclude=zz&verbose", &body), 200);
    assert_string_equal(body, "[+]cache ok\n[+]db excluded: ok\nwarn: some health checks cannot "
                              "be excluded: no matches for \"zz\"\nreadyz check passed\n");
    free(body);
    /* healthz is independent of readyz. */
    assert_int_equal(http_get(hp, "/healthz", NULL), 200);
    /* A check added while serving is picked up. */
    assert_int_equal(ckube_manager_add_healthz_check(m, "late", check_flag, &ready_flag), 0);
    assert_int_equal(http_get(hp, "/healthz", NULL), 500);
    __atomic_store_n(&ready_flag, 1, __ATOMIC_SEQ_CST);

    /* Stop: the reverse order; then everything is closed. */
    ckube_manager_stop(m);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_OK);
    assert_string_equal(evlog_str(), "start:o1 start:o2 start:e1 stop:e1 stop:o2 stop:o1");
    assert_false(tsu_port_open(hp));
    assert_false(tsu_port_open(mp));
    assert_int_equal(http_get(hp, "/healthz", NULL), -1);
    assert_null(ckube_informer_factory_for(ckube_manager_cache(m), &CMS));
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_OK);
    ckube_manager_free(m);
    ckube_metrics_registry_free(reg);
}

/* ---- a controller added with ckube_manager_add_controller ---- */

static atomic_int reconciled;

static ckube_result count_reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns,
                                    const char *name)
{
    (void)ctx;
    (void)rc;
    if (ns && strcmp(ns, "default") == 0 && strcmp(name, "ctl-1") == 0)
        atomic_fetch_add(&reconciled, 1);
    return ckube_result_ok();
}

static bool reconciled_once(void *ctx)
{
    (void)ctx;
    return atomic_load(&reconciled) > 0;
}

static void test_controller(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_manager_options o = base_opts(reg);
    o.metrics_bind_address = "0";
    o.health_probe_bind_address = "0";
    ckube_manager *m = ckube_manager_new(&o, NULL);
    ckube_controller_options co = {.name = "counter", .metrics = reg};
    ckube_controller *ctl = ckube_controller_new(&co, count_reconcile, NULL);
    ckube_watch_spec self = {.map = CKUBE_MAP_SELF};
    assert_int_equal(ckube_controller_watch(ctl, ckube_manager_informer(m, &CMS), &self), 0);
    assert_int_equal(ckube_manager_add_controller(m, ctl), 0);
    assert_int_equal(ckube_manager_start(m), 0);
    assert_int_equal(ckube_manager_metrics_port(m), 0);
    assert_int_equal(ckube_manager_health_port(m), 0);
    create_cm("default", "ctl-1", "x", "ctl");
    assert_true(wait_for(reconciled_once, NULL, 10000));
    ckube_manager_stop(m);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_OK);
    ckube_manager_free(m);
    ckube_controller_free(ctl);
    ckube_metrics_registry_free(reg);
}

/* ---- leader election ---- */

static ckube_manager *le_manager(const char *id, bool release, ckube_metrics_registry *reg,
                                 struct probe *elected, struct probe *other)
{
    ckube_manager_options o = base_opts(reg);
    o.metrics_bind_address = "0";
    o.leader_election = true;
    o.leader_election_id = "test-mgr";
    o.leader_election_namespace = "default";
    o.leader_election_identity = id;
    o.lease_duration_ns = CKUBE_SEC(2);
    o.renew_deadline_ns = CKUBE_SEC(1);
    o.retry_period_ns = CKUBE_MS(200);
    o.leader_election_release_on_cancel = release;
    char *err = NULL;
    ckube_manager *m = ckube_manager_new(&o, &err);
    if (!m)
        fprintf(stderr, "manager: %s\n", err);
    free(err);
    assert_non_null(m);
    ckube_runnable r = runnable(elected, true);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    r = runnable(other, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    return m;
}

static void test_two_managers_handover(void **state)
{
    (void)state;
    ckube_metrics_registry *ra = ckube_metrics_registry_new(), *rb = ckube_metrics_registry_new();
    struct probe ea = {.name = "ea"}, oa = {.name = "oa"}, eb = {.name = "eb"}, ob = {.name = "ob"};
    ckube_manager *a = le_manager("mgr-a", true, ra, &ea, &oa);
    ckube_manager *b = le_manager("mgr-b", true, rb, &eb, &ob);
    assert_int_equal(ckube_manager_start(a), 0);
    assert_true(wait_for(is_elected, a, 5000));
    assert_int_equal(ckube_manager_start(b), 0);
    /* B runs its other runnables but not the elected one, for longer than
     * a lease duration. */
    usleep(2500 * 1000);
    assert_int_equal(atomic_load(&ob.starts), 1);
    assert_int_equal(atomic_load(&eb.starts), 0);
    assert_false(ckube_manager_elected(b));
    assert_true(ckube_manager_is_leader(a));
    assert_false(ckube_manager_is_leader(b));
    char *text = ckube_metrics_render(ra, NULL);
    assert_non_null(strstr(text, "leader_election_master_status{name=\"test-mgr\"} 1\n"));
    free(text);
    text = ckube_metrics_render(rb, NULL);
    assert_non_null(strstr(text, "leader_election_master_status{name=\"test-mgr\"} 0\n"));
    free(text);
    /* /healthz on B answers although B does not lead. */
    assert_int_equal(http_get(ckube_manager_health_port(b), "/healthz", NULL), 200);

    /* A stops and releases: B takes over within about a retry period. */
    ckube_manager_stop(a);
    assert_int_equal(ckube_manager_wait(a), CKUBE_MANAGER_EXIT_OK);
    uint64_t t0 = ckube_monotonic_ns();
    assert_int_equal(atomic_load(&ea.stops), 1);
    assert_int_equal(atomic_load(&oa.stops), 1);
    assert_true(wait_for(is_elected, b, 3000));
    assert_true(ckube_monotonic_ns() - t0 < CKUBE_MS(1500));
    assert_int_equal(atomic_load(&eb.starts), 1);
    ckube_manager_stop(b);
    assert_int_equal(ckube_manager_wait(b), CKUBE_MANAGER_EXIT_OK);
    assert_int_equal(atomic_load(&eb.stops), 1);
    ckube_manager_free(a);
    ckube_manager_free(b);
    ckube_metrics_registry_free(ra);
    ckube_metrics_registry_free(rb);
}

static void test_lost_lease_exits(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    struct probe e = {.name = "e"}, o = {.name = "o"};
    ckube_manager *m = le_manager("mgr-lost", false, reg, &e, &o);
    evlog_reset();
    assert_int_equal(ckube_manager_start(m), 0);
    assert_true(wait_for(is_elected, m, 8000));
    uint64_t t0 = ckube_monotonic_ns();
    ckube_leader_elector_pause_renewals(ckube_manager_leader_elector(m), true);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_LEADER_LOST);
    uint64_t took = ckube_monotonic_ns() - t0;
    assert_true(took >= CKUBE_MS(900));
    assert_true(took < CKUBE_SEC(4));
    assert_string_equal(evlog_str(), "start:o start:e stop:e stop:o");
    assert_false(ckube_manager_is_leader(m));
    ckube_manager_free(m);
    ckube_metrics_registry_free(reg);
}

/* ---- signals ---- */

struct run_arg {
    ckube_manager *m;
    int code;
};

static void *run_thread(void *arg)
{
    struct run_arg *a = arg;
    a->code = ckube_manager_run(a->m);
    return NULL;
}

static void test_sigterm(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_manager_options o = base_opts(reg);
    o.handle_signals = true;
    ckube_manager *m = ckube_manager_new(&o, NULL);
    struct probe e = {.name = "sig"};
    ckube_runnable r = runnable(&e, true);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    struct run_arg a = {m, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_thread, &a), 0);
    assert_true(wait_for(is_elected, m, 5000));
    usleep(50 * 1000); /* the handler is installed before start */
    kill(getpid(), SIGTERM);
    pthread_join(t, NULL);
    assert_int_equal(a.code, CKUBE_MANAGER_EXIT_OK);
    assert_int_equal(atomic_load(&e.stops), 1);
    ckube_manager_free(m);
    ckube_metrics_registry_free(reg);
}

/* A stop while start waits for a cache that cannot sync yet (a CRD not
 * installed): the wait ends at once, no runnable starts, exit code OK. */
static void *stop_later(void *arg)
{
    usleep(300 * 1000);
    ckube_manager_stop(arg);
    return NULL;
}

static void test_stop_during_cache_wait(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_manager_options o = base_opts(reg);
    o.cache_sync_timeout_ns = CKUBE_SEC(3600);
    ckube_manager *m = ckube_manager_new(&o, NULL);
    static const ckube_gvr WIDGETS = {"nope.example.com", "v1", "widgets"};
    assert_non_null(ckube_manager_informer(m, &WIDGETS));
    struct probe p = {.name = "never"};
    ckube_runnable r = runnable(&p, true);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_later, m), 0);
    uint64_t t0 = ckube_monotonic_ns();
    assert_int_equal(ckube_manager_start(m), 0);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_OK);
    assert_true(ckube_monotonic_ns() - t0 < CKUBE_SEC(5));
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&p.starts), 0);
    ckube_manager_free(m);
    ckube_metrics_registry_free(reg);
}

/* ---- failures ---- */

static void test_start_failures(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    /* The health port is taken. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 1), 0);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(sa.sin_port));
    ckube_manager_options o = base_opts(reg);
    o.health_probe_bind_address = addr;
    ckube_manager *m = ckube_manager_new(&o, NULL);
    struct probe p = {.name = "never"};
    ckube_runnable r = runnable(&p, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    assert_int_equal(ckube_manager_run(m), CKUBE_MANAGER_EXIT_START_FAILED);
    assert_int_equal(atomic_load(&p.starts), 0);
    ckube_manager_free(m);
    close(fd);

    /* A cache that never syncs (unknown resource): start gives up after
     * the cache sync timeout, before any runnable. */
    o = base_opts(reg);
    o.cache_sync_timeout_ns = CKUBE_SEC(1);
    m = ckube_manager_new(&o, NULL);
    static const ckube_gvr WIDGETS = {"nope.example.com", "v1", "widgets"};
    assert_non_null(ckube_manager_informer(m, &WIDGETS));
    assert_int_equal(ckube_manager_add(m, &r), 0);
    uint64_t t0 = ckube_monotonic_ns();
    assert_int_equal(ckube_manager_start(m), -1);
    assert_true(ckube_monotonic_ns() - t0 >= CKUBE_MS(900));
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_START_FAILED);
    assert_int_equal(atomic_load(&p.starts), 0);
    ckube_manager_free(m);

    /* A runnable that fails to start: the ones started before it stop. */
    evlog_reset();
    o = base_opts(reg);
    m = ckube_manager_new(&o, NULL);
    struct probe ok = {.name = "ok"}, bad = {.name = "bad", .fail_start = 1};
    r = runnable(&ok, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    r = runnable(&bad, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    assert_int_equal(ckube_manager_start(m), -1);
    assert_string_equal(evlog_str(), "start:ok stop:ok");
    ckube_manager_free(m);

    /* An elected runnable that fails: the manager stops with a code. */
    evlog_reset();
    m = ckube_manager_new(&o, NULL);
    r = runnable(&ok, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    r = runnable(&bad, true);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    assert_int_equal(ckube_manager_start(m), -1);
    assert_string_equal(evlog_str(), "start:ok stop:ok");
    ckube_manager_free(m);
    ckube_metrics_registry_free(reg);
}

static void test_shutdown_timeout(void **state)
{
    (void)state;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_manager_options o = base_opts(reg);
    o.graceful_shutdown_timeout_ns = CKUBE_MS(200);
    ckube_manager *m = ckube_manager_new(&o, NULL);
    struct probe slow = {.name = "slow", .stop_sleep_ms = 1500};
    ckube_runnable r = runnable(&slow, false);
    assert_int_equal(ckube_manager_add(m, &r), 0);
    assert_int_equal(ckube_manager_start(m), 0);
    uint64_t t0 = ckube_monotonic_ns();
    ckube_manager_stop(m);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_SHUTDOWN_TIMEOUT);
    assert_true(ckube_monotonic_ns() - t0 < CKUBE_MS(1200));
    assert_int_equal(atomic_load(&slow.stops), 0);
    /* free waits for the stop still in progress. */
    ckube_manager_free(m);
    assert_int_equal(atomic_load(&slow.stops), 1);
    ckube_metrics_registry_free(reg);
}

/* ---- reads through the cache (last: it restarts the server) ---- */

static void test_cache_reads(void **state)
{
    (void)state;
    create_cm("default", "c1", "one", "reads");
    create_cm("default", "c2", "two", "other");
    create_cm("kube-system", "c3", "three", "reads");
    json_t *sec = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
                            "metadata", "name", "s1", "stringData", "k", "v");
    ckube_status *err = NULL;
    assert_int_equal(ckube_create(client, &SECRETS, "default", sec, NULL, NULL, &err), 0);
    json_decref(sec);

    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_manager_options o = base_opts(reg);
    o.cache_namespace = "default";
    o.uncached_resources = &SECRETS;
    o.n_uncached_resources = 1;
    ckube_manager *m = ckube_manager_new(&o, NULL);
    assert_int_equal(ckube_manager_start(m), 0);

    /* First use starts the configmaps informer and waits for it. */
    json_t *obj = NULL;
    assert_int_equal(ckube_manager_get(m, &CMS, "default", "c1", &obj, &err), 0);
    assert_string_equal(json_string_value(ckube_json_get_path(obj, "data.v")), "one");
    /* A private copy: changing it leaves the cache alone. */
    json_object_set_new(json_object_get(obj, "data"), "v", json_string("changed"));
    json_decref(obj);
    assert_int_equal(ckube_manager_get(m, &CMS, "default", "c1", &obj, &err), 0);
    assert_string_equal(json_string_value(ckube_json_get_path(obj, "data.v")), "one");
    json_decref(obj);
    assert_true(ckube_shared_informer_has_synced(ckube_manager_informer(m, &CMS)));

    /* Absent: 404 as the server words it. */
    assert_int_equal(ckube_manager_get(m, &CMS, "default", "nope", &obj, &err), -1);
    assert_null(obj);
    assert_int_equal(err->code, 404);
    assert_string_equal(err->message, "configmaps \"nope\" not found");
    ckube_status_free(err);
    err = NULL;
    /* Outside the cache's namespace. */
    assert_int_equal(ckube_manager_get(m, &CMS, "kube-system", "c3", &obj, &err), -1);
    assert_int_equal(err->code, 0);
    assert_non_null(strstr(err->message, "restricted to namespace \"default\""));
    ckube_status_free(err);
    err = NULL;

    /* List with a selector, from the cache. */
    json_t *list = NULL;
    assert_int_equal(ckube_manager_list(m, &CMS, "default", "app=reads", &list, &err), 0);
    assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
    json_decref(list);
    assert_int_equal(ckube_manager_list(m, &CMS, "default", "app in (", &list, &err), -1);
    assert_int_equal(err->code, 400);
    ckube_status_free(err);
    err = NULL;

    /* Uncached secrets come from the server. */
    assert_int_equal(ckube_manager_get(m, &SECRETS, "default", "s1", &obj, &err), 0);
    assert_string_equal(ckube_obj_name(obj), "s1");
    json_decref(obj);

    /* With the server gone the cache still answers; the bypass cannot. */
    assert_int_equal(tsu_stop(&srv, SIGKILL), 128 + SIGKILL);
    assert_int_equal(ckube_manager_get(m, &CMS, "default", "c1", &obj, &err), 0);
    json_decref(obj);
    assert_int_equal(ckube_manager_get(m, &SECRETS, "default", "s1", &obj, &err), -1);
    assert_int_equal(err->code, 0);
    ckube_status_free(err);
    err = NULL;

    ckube_manager_stop(m);
    assert_int_equal(ckube_manager_wait(m), CKUBE_MANAGER_EXIT_OK);
    /* After stop the cache is gone. */
    assert_int_equal(ckube_manager_get(m, &CMS, "default", "c1", &obj, &err), -1);
    ckube_status_free(err);
    ckube_manager_free(m);
    ckube_metrics_registry_free(reg);
    assert_int_equal(tsu_start(&srv, "memory"), 0);
}

int main(void)
{
    if (getenv("TEST_V"))
        ckube_log_set_verbosity(atoi(getenv("TEST_V")));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest offline[] = {
        cmocka_unit_test(test_options),
    };
    const struct CMUnitTest online[] = {
        cmocka_unit_test(test_start_order_endpoints_stop),
        cmocka_unit_test(test_controller),
        cmocka_unit_test(test_two_managers_handover),
        cmocka_unit_test(test_lost_lease_exits),
        cmocka_unit_test(test_sigterm),
        cmocka_unit_test(test_start_failures),
        cmocka_unit_test(test_stop_during_cache_wait),
        cmocka_unit_test(test_shutdown_timeout),
        cmocka_unit_test(test_cache_reads),
    };
    int rc = cmocka_run_group_tests_name("offline", offline, NULL, NULL);
    rc += cmocka_run_group_tests_name("server", online, server_setup, server_teardown);
    curl_global_cleanup();
    return rc;
}
