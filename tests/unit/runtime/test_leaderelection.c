/* test_leaderelection.c - leader election: configuration checks, the
 * algorithm on a fake clock with an in-memory lock (expiry measured on our
 * clock, renew deadline, release, transitions, conflicts), and the Lease
 * lock against a real `ckube server` (two electors in one process). */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/json.h>
#include <ckube/leaderelection.h>
#include <ckube/log.h>
#include <ckube/metrics.h>

#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/server_util.h"

static const ckube_gvr LEASES = {"coordination.k8s.io", "v1", "leases"};

/* ======================================================================
 * Callback recorder
 * ====================================================================== */

struct rec {
    pthread_mutex_t mu;
    ckube_clock *clock;
    int started, stopped;
    uint64_t started_at, stopped_at;
    char last_leader[300];
    int new_leader_calls;
    struct rec *peer; /* the other elector's recorder */
    int overlap;      /* started while the peer was leading */
    bool leading;
};

static void rec_init(struct rec *r, ckube_clock *clock)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->clock = clock;
}

static bool peer_leading(struct rec *r)
{
    if (!r->peer)
        return false;
    pthread_mutex_lock(&r->peer->mu);
    bool l = r->peer->leading;
    pthread_mutex_unlock(&r->peer->mu);
    return l;
}

static void cb_started(void *ctx)
{
    struct rec *r = ctx;
    bool overlap = peer_leading(r);
    pthread_mutex_lock(&r->mu);
    r->started++;
    r->leading = true;
    r->started_at = ckube_clock_now(r->clock);
    if (overlap)
        r->overlap++;
    pthread_mutex_unlock(&r->mu);
}

static void cb_stopped(void *ctx)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    r->stopped++;
    r->leading = false;
    r->stopped_at = ckube_clock_now(r->clock);
    pthread_mutex_unlock(&r->mu);
}

static void cb_new_leader(void *ctx, const char *id)
{
    struct rec *r = ctx;
    pthread_mutex_lock(&r->mu);
    snprintf(r->last_leader, sizeof(r->last_leader), "%s", id);
    r->new_leader_calls++;
    pthread_mutex_unlock(&r->mu);
}

static int rec_get(struct rec *r, int *field)
{
    pthread_mutex_lock(&r->mu);
    int v = *field;
    pthread_mutex_unlock(&r->mu);
    return v;
}

static uint64_t rec_time(struct rec *r, uint64_t *field)
{
    pthread_mutex_lock(&r->mu);
    uint64_t v = *field;
    pthread_mutex_unlock(&r->mu);
    return v;
}

static ckube_leader_callbacks callbacks(struct rec *r)
{
    return (ckube_leader_callbacks){cb_started, cb_stopped, cb_new_leader, r};
}

/* ======================================================================
 * In-memory lock: one shared "server" record with a version, and one
 * view per elector remembering the version it last read or wrote.
 * ====================================================================== */

struct mem_server {
    pthread_mutex_t mu;
    bool exists;
    ckube_leader_record rec;
    int64_t version;
    int conflicts, writes;
};

struct mem_view {
    struct mem_server *s;
    int64_t seen; /* -1 before get/create */
};

static int mem_get(void *ctx, ckube_leader_record *out, ckube_status **err)
{
    struct mem_view *v = ctx;
    pthread_mutex_lock(&v->s->mu);
    int rc = 0;
    if (!v->s->exists) {
        *err = ckube_status_not_found("coordination.k8s.io", "leases", "mem");
        rc = -1;
    } else {
        *out = v->s->rec;
        v->seen = v->s->version;
    }
    pthread_mutex_unlock(&v->s->mu);
    return rc;
}

static int mem_create(void *ctx, const ckube_leader_record *rec, ckube_status **err)
{
    struct mem_view *v = ctx;
    pthread_mutex_lock(&v->s->mu);
    int rc = 0;
    if (v->s->exists) {
        *err = ckube_status_already_exists("coordination.k8s.io", "leases", "mem");
        rc = -1;
    } else {
        v->s->exists = true;
        v->s->rec = *rec;
        v->seen = ++v->s->version;
        v->s->writes++;
    }
    pthread_mutex_unlock(&v->s->mu);
    return rc;
}

static int mem_update(void *ctx, const ckube_leader_record *rec, ckube_status **err)
{
    struct mem_view *v = ctx;
    pthread_mutex_lock(&v->s->mu);
    int rc = 0;
    if (v->seen < 0) {
        *err = ckube_status_new(0, NULL, "lease not initialized");
        rc = -1;
    } else if (v->seen != v->s->version) {
        *err = ckube_status_conflict("coordination.k8s.io", "leases", "mem",
                                     "the object has been modified");
        v->s->conflicts++;
        rc = -1;
    } else {
        v->s->rec = *rec;
        v->seen = ++v->s->version;
        v->s->writes++;
    }
    pthread_mutex_unlock(&v->s->mu);
    return rc;
}

static const char *mem_describe(void *ctx)
{
    (void)ctx;
    return "test/mem";
}

static void mem_free(void *ctx)
{
    free(ctx);
}

static const ckube_leader_lock_ops MEM_OPS = {mem_get, mem_create, mem_update, mem_describe,
                                              mem_free};

static ckube_leader_lock *mem_lock(struct mem_server *s)
{
    struct mem_view *v = calloc(1, sizeof(*v));
    v->s = s;
    v->seen = -1;
    return ckube_leader_lock_new(&MEM_OPS, v);
}

static ckube_leader_record mem_record(struct mem_server *s)
{
    pthread_mutex_lock(&s->mu);
    ckube_leader_record r = s->rec;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* Moves the fake clock in 100 ms steps until cond(ctx) holds or max_ns of
 * fake time passed. After each step it gives the threads time to notice
 * (a fake-clock sleeper re-checks the time every millisecond) and waits
 * (up to 1 s of real time) until `threads` elector threads are asleep on
 * the clock again, so fake times measured by the callbacks hardly depend
 * on the machine's speed. */
static bool advance_until(ckube_clock *clk, size_t threads, uint64_t max_ns, bool (*cond)(void *),
                          void *ctx)
{
    for (uint64_t t = 0;; t += CKUBE_MS(100)) {
        usleep(2500);
        for (int i = 0; i < 2000 && ckube_fake_clock_waiters(clk) < threads; i++) {
            if (cond(ctx))
                return true;
            usleep(500);
        }
        if (cond(ctx))
            return true;
        if (t >= max_ns)
            return false;
        ckube_fake_clock_advance(clk, CKUBE_MS(100));
    }
}

static bool is_started(void *ctx)
{
    return rec_get(ctx, &((struct rec *)ctx)->started) > 0;
}

static bool is_stopped(void *ctx)
{
    return rec_get(ctx, &((struct rec *)ctx)->stopped) > 0;
}

/* ======================================================================
 * Configuration
 * ====================================================================== */

static void expect_invalid(uint64_t ld, uint64_t rd, uint64_t rp, bool with_cbs, const char *id,
                           const char *want)
{
    struct mem_server s = {0};
    pthread_mutex_init(&s.mu, NULL);
    struct rec r;
    rec_init(&r, NULL);
    ckube_leader_election_config c = {
        .lock = mem_lock(&s),
        .identity = id,
        .lease_duration_ns = ld,
        .renew_deadline_ns = rd,
        .retry_period_ns = rp,
        .callbacks = with_cbs ? callbacks(&r) : (ckube_leader_callbacks){0},
    };
    char *err = NULL;
    ckube_leader_elector *le = ckube_leader_elector_new(&c, &err);
    assert_null(le);
    assert_non_null(err);
    assert_string_equal(err, want);
    free(err);
}

static void test_config_validation(void **state)
{
    (void)state;
    expect_invalid(CKUBE_SEC(10), CKUBE_SEC(10), CKUBE_SEC(2), true, "a",
                   "leaseDuration must be greater than renewDeadline");
    /* 10 s deadline vs 9 s retry: 9 * 1.2 = 10.8 >= 10. */
    expect_invalid(CKUBE_SEC(15), CKUBE_SEC(10), CKUBE_SEC(9), true, "a",
                   "renewDeadline must be greater than retryPeriod*JitterFactor");
    expect_invalid(CKUBE_MS(900), CKUBE_MS(500), CKUBE_MS(100), true, "a",
                   "leaseDuration must be at least one second");
    expect_invalid(0, 0, 0, false, "a", "OnStartedLeading callback must not be nil");
    expect_invalid(0, 0, 0, true, "", "Lock identity is empty");
    char longid[300];
    memset(longid, 'x', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    expect_invalid(0, 0, 0, true, longid, "Lock identity is longer than 253 characters");

    /* No lock at all. */
    struct rec r;
    rec_init(&r, NULL);
    ckube_leader_election_config nolock = {.identity = "a", .callbacks = callbacks(&r)};
    char *err = NULL;
    assert_null(ckube_leader_elector_new(&nolock, &err));
    assert_string_equal(err, "Lock must not be nil.");
    free(err);

    /* Defaults are valid; the default identity is hostname_uuid. */
    struct mem_server s = {0};
    pthread_mutex_init(&s.mu, NULL);
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_leader_election_config ok = {
        .lock = mem_lock(&s), .callbacks = callbacks(&r), .metrics = reg};
    ckube_leader_elector *le = ckube_leader_elector_new(&ok, &err);
    assert_non_null(le);
    const char *id = ckube_leader_elector_identity(le);
    char host[128] = "";
    gethostname(host, sizeof(host) - 1);
    assert_int_equal(strncmp(id, host, strlen(host)), 0);
    assert_int_equal(id[strlen(host)], '_');
    assert_int_equal(strlen(id + strlen(host) + 1), 36);
    assert_false(ckube_leader_elector_is_leader(le));
    /* The gauge exists at 0 before anything happens, labelled with the
     * lock's description. */
    char *text = ckube_metrics_render(reg, NULL);
    assert_non_null(strstr(text, "leader_election_master_status{name=\"test/mem\"} 0\n"));
    free(text);
    ckube_leader_elector_free(le);
    ckube_metrics_registry_free(reg);

    /* Bad lock arguments. */
    assert_null(ckube_leader_lease_lock_new(NULL, "ns", "n"));
}

static void test_record_json(void **state)
{
    (void)state;
    ckube_leader_record r = {0};
    snprintf(r.holder_identity, sizeof(r.holder_identity), "me");
    r.lease_duration_seconds = 15;
    snprintf(r.acquire_time, sizeof(r.acquire_time), "2024-01-02T03:04:05.123456Z");
    snprintf(r.renew_time, sizeof(r.renew_time), "2024-01-02T03:04:06.000001Z");
    r.leader_transitions = 3;
    json_t *spec = ckube_leader_record_to_lease_spec(&r);
    char *s = json_dumps(spec, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s, "{\"acquireTime\":\"2024-01-02T03:04:05.123456Z\",\"holderIdentity\":"
                           "\"me\",\"leaseDurationSeconds\":15,\"leaseTransitions\":3,"
                           "\"renewTime\":\"2024-01-02T03:04:06.000001Z\"}");
    free(s);
    ckube_leader_record back;
    ckube_leader_record_from_lease_spec(spec, &back);
    assert_memory_equal(&r, &back, sizeof(r));
    json_decref(spec);

    /* A release clears the holder explicitly: "" is written, not omitted. */
    ckube_leader_record empty = {0};
    spec = ckube_leader_record_to_lease_spec(&empty);
    assert_string_equal(json_string_value(json_object_get(spec, "holderIdentity")), "");
    json_decref(spec);
    /* Missing fields read as zero values; non-objects too. */
    ckube_leader_record_from_lease_spec(NULL, &back);
    assert_string_equal(back.holder_identity, "");
    assert_int_equal(back.lease_duration_seconds, 0);
}

/* ======================================================================
 * The algorithm on a fake clock
 * ====================================================================== */

struct pair {
    struct mem_server s;
    ckube_clock *clk;
    struct rec ra, rb;
    ckube_leader_elector *a, *b;
    ckube_metrics_registry *reg;
};

static void pair_setup(struct pair *p, bool release)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->s.mu, NULL);
    p->clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    rec_init(&p->ra, p->clk);
    rec_init(&p->rb, p->clk);
    p->ra.peer = &p->rb;
    p->rb.peer = &p->ra;
    p->reg = ckube_metrics_registry_new();
    ckube_leader_election_config c = {.lock = mem_lock(&p->s),
                                      .identity = "a",
                                      .release_on_cancel = release,
                                      .callbacks = callbacks(&p->ra),
                                      .name = "a",
                                      .clock = p->clk,
                                      .metrics = p->reg};
    p->a = ckube_leader_elector_new(&c, NULL);
    c.lock = mem_lock(&p->s);
    c.identity = "b";
    c.name = "b";
    c.callbacks = callbacks(&p->rb);
    p->b = ckube_leader_elector_new(&c, NULL);
    assert_non_null(p->a);
    assert_non_null(p->b);
}

static void pair_teardown(struct pair *p)
{
    ckube_leader_elector_free(p->a);
    ckube_leader_elector_free(p->b);
    ckube_fake_clock_free(p->clk);
    ckube_metrics_registry_free(p->reg);
    pthread_mutex_destroy(&p->s.mu);
    pthread_mutex_destroy(&p->ra.mu);
    pthread_mutex_destroy(&p->rb.mu);
}

static double gauge(ckube_metrics_registry *reg, const char *name)
{
    char *text = ckube_metrics_render(reg, NULL);
    char want[128];
    snprintf(want, sizeof(want), "leader_election_master_status{name=\"%s\"} ", name);
    char *p = strstr(text, want);
    double v = p ? atof(p + strlen(want)) : -1;
    free(text);
    return v;
}

static void test_fake_renew_deadline_and_expiry(void **state)
{
    (void)state;
    struct pair p;
    pair_setup(&p, false);
    assert_int_equal(ckube_leader_elector_start(p.a), 0);
    assert_true(advance_until(p.clk, 1, 0, is_started, &p.ra));
    assert_true(ckube_leader_elector_is_leader(p.a));
    ckube_leader_record r = mem_record(&p.s);
    assert_string_equal(r.holder_identity, "a");
    assert_int_equal(r.lease_duration_seconds, 15);
    assert_int_equal(r.leader_transitions, 0);
    assert_string_equal(r.acquire_time, r.renew_time);
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    assert_int_equal(regexec(&re, r.acquire_time, 0, NULL, 0), 0);
    regfree(&re);
    assert_true(gauge(p.reg, "a") == 1);

    /* B starts: the lease is held and keeps being renewed, so B waits for
     * ever (60 s of fake time here). */
    assert_int_equal(ckube_leader_elector_start(p.b), 0);
    assert_false(advance_until(p.clk, 2, CKUBE_SEC(60), is_started, &p.rb));
    char *leader = ckube_leader_elector_get_leader(p.b);
    assert_string_equal(leader, "a");
    free(leader);
    pthread_mutex_lock(&p.rb.mu);
    assert_string_equal(p.rb.last_leader, "a");
    pthread_mutex_unlock(&p.rb.mu);
    /* A renewed (renewTime moved on, acquireTime kept). */
    ckube_leader_record r2 = mem_record(&p.s);
    assert_string_equal(r2.acquire_time, r.acquire_time);
    assert_string_not_equal(r2.renew_time, r.renew_time);
    assert_true(gauge(p.reg, "b") == 0);

    /* A stops renewing: it gives up after RenewDeadline (10 s, plus at
     * most one RetryPeriod since its last renewal), and B takes over once
     * the record has not changed for leaseDuration on B's clock. */
    uint64_t paused_at = ckube_clock_now(p.clk);
    ckube_leader_elector_pause_renewals(p.a, true);
    assert_true(advance_until(p.clk, 2, CKUBE_SEC(30), is_stopped, &p.ra));
    uint64_t lost = rec_time(&p.ra, &p.ra.stopped_at) - paused_at;
    assert_true(lost >= CKUBE_SEC(10));
    assert_true(lost <= CKUBE_SEC(12) + CKUBE_MS(200));
    assert_false(ckube_leader_elector_is_leader(p.a));
    assert_true(gauge(p.reg, "a") == 0);

    assert_true(advance_until(p.clk, 1, CKUBE_SEC(30), is_started, &p.rb));
    uint64_t took = rec_time(&p.rb, &p.rb.started_at) - paused_at;
    /* B counts the lease from the moment it first SAW A's last renewal:
     * that renewal came at most 2 s before the pause, and B reads the
     * lock every 2..4.4 s, so it saw it between pause-2 s and pause+4.4 s;
     * it then takes over at its first retry after 15 s more. */
    assert_true(took >= CKUBE_SEC(13));
    assert_true(took <= CKUBE_SEC(15) + CKUBE_MS(2 * 4400) + CKUBE_MS(300));
    assert_int_equal(p.rb.overlap, 0);
    r = mem_record(&p.s);
    assert_string_equal(r.holder_identity, "b");
    assert_int_equal(r.leader_transitions, 1);
    assert_true(gauge(p.reg, "b") == 1);
    /* A's elector is done: started and stopped exactly once. */
    assert_int_equal(rec_get(&p.ra, &p.ra.started), 1);
    assert_int_equal(rec_get(&p.ra, &p.ra.stopped), 1);
    /* B was stopped without release: on_stopped_leading runs, the record
     * keeps B as holder. */
    ckube_leader_elector_stop(p.b);
    assert_int_equal(rec_get(&p.rb, &p.rb.stopped), 1);
    assert_string_equal(mem_record(&p.s).holder_identity, "b");
    pair_teardown(&p);
}

static void test_fake_release_on_cancel(void **state)
{
    (void)state;
    struct pair p;
    pair_setup(&p, true);
    assert_int_equal(ckube_leader_elector_start(p.a), 0);
    assert_true(advance_until(p.clk, 1, 0, is_started, &p.ra));
    assert_int_equal(ckube_leader_elector_start(p.b), 0);
    assert_false(advance_until(p.clk, 2, CKUBE_SEC(5), is_started, &p.rb));

    /* Stopping A releases: holder "", leaseDurationSeconds 1, the
     * transition count kept. B takes over at its next retry (<= 4.4 s),
     * long before the 15 s lease would have run out. */
    ckube_leader_elector_stop(p.a);
    assert_int_equal(rec_get(&p.ra, &p.ra.stopped), 1);
    ckube_leader_record r = mem_record(&p.s);
    assert_true(strcmp(r.holder_identity, "") == 0 || strcmp(r.holder_identity, "b") == 0);
    if (r.holder_identity[0] == '\0') {
        assert_int_equal(r.lease_duration_seconds, 1);
        assert_int_equal(r.leader_transitions, 0);
    }
    uint64_t released_at = ckube_clock_now(p.clk);
    assert_true(advance_until(p.clk, 1, CKUBE_MS(4600), is_started, &p.rb));
    assert_true(rec_time(&p.rb, &p.rb.started_at) - released_at <= CKUBE_MS(4600));
    r = mem_record(&p.s);
    assert_string_equal(r.holder_identity, "b");
    assert_int_equal(r.lease_duration_seconds, 15);
    assert_int_equal(r.leader_transitions, 1);
    /* Stopping a non-leader's elector after it led: B releases too. */
    ckube_leader_elector_stop(p.b);
    r = mem_record(&p.s);
    assert_string_equal(r.holder_identity, "");
    /* Stop is idempotent; an elector cannot be restarted. */
    ckube_leader_elector_stop(p.b);
    assert_int_equal(ckube_leader_elector_start(p.b), -1);
    pair_teardown(&p);
}

/* Two electors racing for a free lock: optimistic concurrency lets
 * exactly one win; the loser sees a conflict or a held lease. */
static void test_fake_race(void **state)
{
    (void)state;
    for (int round = 0; round < 5; round++) {
        struct pair p;
        pair_setup(&p, false);
        assert_int_equal(ckube_leader_elector_start(p.a), 0);
        assert_int_equal(ckube_leader_elector_start(p.b), 0);
        for (int i = 0; i < 200 && !is_started(&p.ra) && !is_started(&p.rb); i++)
            usleep(1000);
        /* Run well past several retries: still exactly one leader. */
        for (int i = 0; i < 100; i++) {
            ckube_fake_clock_advance(p.clk, CKUBE_MS(100));
            usleep(500);
        }
        int a = rec_get(&p.ra, &p.ra.started), b = rec_get(&p.rb, &p.rb.started);
        assert_int_equal(a + b, 1);
        assert_true(ckube_leader_elector_is_leader(p.a) != ckube_leader_elector_is_leader(p.b));
        pair_teardown(&p);
    }
}

/* ======================================================================
 * Against a real server: the Lease lock
 * ====================================================================== */

static struct test_server srv;
static ckube_client *client;

static int server_setup(void **state)
{
    (void)state;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = srv.kubeconfig};
    if (ckube_config_load(&ov, &cfg, &err) != 0)
        return -1;
    cfg->qps = -1;
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

static ckube_leader_elector *real_elector(const char *lease, const char *id, struct rec *r,
                                          ckube_metrics_registry *reg, bool release)
{
    ckube_leader_election_config c = {
        .lock = ckube_leader_lease_lock_new(client, "default", lease),
        .identity = id,
        .lease_duration_ns = CKUBE_SEC(2),
        .renew_deadline_ns = CKUBE_SEC(1),
        .retry_period_ns = CKUBE_MS(200),
        .release_on_cancel = release,
        .callbacks = callbacks(r),
        .metrics = reg,
    };
    char *err = NULL;
    ckube_leader_elector *le = ckube_leader_elector_new(&c, &err);
    if (!le)
        fprintf(stderr, "elector: %s\n", err);
    free(err);
    return le;
}

static json_t *get_lease(const char *name)
{
    json_t *o = NULL;
    ckube_status *err = NULL;
    if (ckube_get(client, &LEASES, "default", name, &o, &err) != 0) {
        ckube_status_free(err);
        return NULL;
    }
    return o;
}

static bool wait_real(bool (*cond)(void *), void *ctx, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (cond(ctx))
            return true;
        usleep(10000);
    }
    return cond(ctx);
}

static void test_lease_two_electors_release(void **state)
{
    (void)state;
    struct rec ra, rb;
    rec_init(&ra, NULL);
    rec_init(&rb, NULL);
    ra.clock = rb.clock = ckube_clock_real();
    ra.peer = &rb;
    rb.peer = &ra;
    ckube_metrics_registry *rega = ckube_metrics_registry_new(),
                           *regb = ckube_metrics_registry_new();
    ckube_leader_elector *a = real_elector("two", "alpha", &ra, rega, true);
    ckube_leader_elector *b = real_elector("two", "beta", &rb, regb, true);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ckube_leader_elector_start(a), 0);
    assert_true(wait_real(is_started, &ra, 5000));
    assert_int_equal(ckube_leader_elector_start(b), 0);
    /* B sees A and waits; more than a lease duration passes. */
    usleep(2500 * 1000);
    assert_int_equal(rec_get(&rb, &rb.started), 0);
    assert_true(ckube_leader_elector_is_leader(a));
    assert_false(ckube_leader_elector_is_leader(b));
    pthread_mutex_lock(&rb.mu);
    assert_string_equal(rb.last_leader, "alpha");
    pthread_mutex_unlock(&rb.mu);
    assert_true(gauge(rega, "default/two") == 1);
    assert_true(gauge(regb, "default/two") == 0);

    json_t *l = get_lease("two");
    assert_non_null(l);
    assert_string_equal(json_string_value(ckube_json_get_path(l, "spec.holderIdentity")), "alpha");
    assert_int_equal(json_integer_value(ckube_json_get_path(l, "spec.leaseDurationSeconds")), 2);
    assert_int_equal(json_integer_value(ckube_json_get_path(l, "spec.leaseTransitions")), 0);
    const char *rt = json_string_value(ckube_json_get_path(l, "spec.renewTime"));
    assert_non_null(rt);
    assert_int_equal(strlen(rt), strlen("2006-01-02T15:04:05.000000Z"));
    json_decref(l);

    /* Release: A writes holder "" and 1 s; B takes over within about a
     * retry period (200 ms, jittered to at most 440 ms). */
    ckube_leader_elector_stop(a);
    uint64_t released = ckube_monotonic_ns();
    assert_int_equal(rec_get(&ra, &ra.stopped), 1);
    assert_true(wait_real(is_started, &rb, 3000));
    uint64_t took = ckube_monotonic_ns() - released;
    assert_true(took < CKUBE_MS(1200));
    assert_int_equal(rb.overlap, 0);
    l = get_lease("two");
    assert_string_equal(json_string_value(ckube_json_get_path(l, "spec.holderIdentity")), "beta");
    assert_int_equal(json_integer_value(ckube_json_get_path(l, "spec.leaseTransitions")), 1);
    json_decref(l);
    assert_true(gauge(rega, "default/two") == 0);
    assert_true(gauge(regb, "default/two") == 1);

    ckube_leader_elector_stop(b);
    l = get_lease("two");
    assert_string_equal(json_string_value(ckube_json_get_path(l, "spec.holderIdentity")), "");
    assert_int_equal(json_integer_value(ckube_json_get_path(l, "spec.leaseDurationSeconds")), 1);
    json_decref(l);
    ckube_leader_elector_free(a);
    ckube_leader_elector_free(b);
    ckube_metrics_registry_free(rega);
    ckube_metrics_registry_free(regb);
}

/* Someone else takes the lease (as a deposed-then-returning replica
 * would): the leader's writes conflict, it cannot renew and gives up
 * after RenewDeadline. */
static void test_lease_stolen(void **state)
{
    (void)state;
    struct rec ra;
    rec_init(&ra, ckube_clock_real());
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_leader_elector *a = real_elector("stolen", "alpha", &ra, reg, true);
    assert_int_equal(ckube_leader_elector_start(a), 0);
    assert_true(wait_real(is_started, &ra, 5000));

    json_t *l = get_lease("stolen");
    json_t *spec = json_object_get(l, "spec");
    json_object_set_new(spec, "holderIdentity", json_string("intruder"));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(60));
    ckube_status *err = NULL;
    /* Retry on conflict with A's own renewals. */
    int rc = -1;
    for (int i = 0; i < 20 && rc != 0; i++) {
        rc = ckube_update(client, &LEASES, "default", l, NULL, NULL, &err);
        ckube_status_free(err);
        err = NULL;
        if (rc != 0) {
            json_decref(l);
            l = get_lease("stolen");
            spec = json_object_get(l, "spec");
            json_object_set_new(spec, "holderIdentity", json_string("intruder"));
            json_object_set_new(spec, "leaseDurationSeconds", json_integer(60));
        }
    }
    assert_int_equal(rc, 0);
    json_decref(l);
    uint64_t stolen = ckube_monotonic_ns();
    assert_true(wait_real(is_stopped, &ra, 5000));
    uint64_t lost = ckube_monotonic_ns() - stolen;
    /* RenewDeadline 1 s after the last renewal (<= one 200 ms retry
     * before the theft), plus request times. */
    assert_true(lost >= CKUBE_MS(700));
    assert_true(lost < CKUBE_MS(2500));
    assert_false(ckube_leader_elector_is_leader(a));
    assert_true(gauge(reg, "default/stolen") == 0);
    char *leader = ckube_leader_elector_get_leader(a);
    assert_string_equal(leader, "intruder");
    free(leader);
    ckube_leader_elector_free(a);
    /* No release of a lease we no longer hold. */
    l = get_lease("stolen");
    assert_string_equal(json_string_value(ckube_json_get_path(l, "spec.holderIdentity")),
                        "intruder");
    json_decref(l);
    ckube_metrics_registry_free(reg);
}

/* A leader that cannot renew (paused) loses after RenewDeadline; the
 * other takes over after the lease duration, never overlapping. */
static void test_lease_paused_leader(void **state)
{
    (void)state;
    struct rec ra, rb;
    rec_init(&ra, ckube_clock_real());
    rec_init(&rb, ckube_clock_real());
    ra.peer = &rb;
    rb.peer = &ra;
    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_leader_elector *a = real_elector("paused", "alpha", &ra, reg, false);
    ckube_leader_elector *b = real_elector("paused", "beta", &rb, reg, false);
    assert_int_equal(ckube_leader_elector_start(a), 0);
    assert_true(wait_real(is_started, &ra, 5000));
    assert_int_equal(ckube_leader_elector_start(b), 0);
    usleep(500 * 1000);
    assert_int_equal(rec_get(&rb, &rb.started), 0);
    ckube_leader_elector_pause_renewals(a, true);
    assert_true(wait_real(is_started, &rb, 6000));
    assert_int_equal(rec_get(&ra, &ra.stopped), 1);
    assert_int_equal(rb.overlap, 0);
    json_t *l = get_lease("paused");
    assert_string_equal(json_string_value(ckube_json_get_path(l, "spec.holderIdentity")), "beta");
    assert_int_equal(json_integer_value(ckube_json_get_path(l, "spec.leaseTransitions")), 1);
    json_decref(l);
    ckube_leader_elector_free(a);
    ckube_leader_elector_free(b);
    ckube_metrics_registry_free(reg);
}

int main(void)
{
    if (getenv("TEST_V"))
        ckube_log_set_verbosity(atoi(getenv("TEST_V")));
    const struct CMUnitTest unit[] = {
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_record_json),
        cmocka_unit_test(test_fake_renew_deadline_and_expiry),
        cmocka_unit_test(test_fake_release_on_cancel),
        cmocka_unit_test(test_fake_race),
    };
    const struct CMUnitTest real[] = {
        cmocka_unit_test(test_lease_two_electors_release),
        cmocka_unit_test(test_lease_stolen),
        cmocka_unit_test(test_lease_paused_leader),
    };
    int rc = cmocka_run_group_tests_name("fake", unit, NULL, NULL);
    rc += cmocka_run_group_tests_name("lease", real, server_setup, server_teardown);
    return rc;
}
