/* leaderelection.c - leader election over a Lease (see
 * ckube/leaderelection.h for the algorithm and the contracts).
 *
 * One thread per elector runs acquire, then renew, then (on stop) release.
 * State shared with other threads (the observed record, the leading flag,
 * the stop request) is under `mu`; lock calls happen on the elector's
 * thread without holding it. */
#include "common/text.h"
#include <ckube/json.h>
#include <ckube/leaderelection.h>
#include <ckube/log.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const ckube_gvr LEASES = {"coordination.k8s.io", "v1", "leases"};

/* ======================================================================
 * Records
 * ====================================================================== */

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void ckube_leader_record_from_lease_spec(const json_t *spec, ckube_leader_record *out)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(spec))
        return;
    copy_str(out->holder_identity, sizeof(out->holder_identity),
             json_string_value(json_object_get(spec, "holderIdentity")));
    out->lease_duration_seconds = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    copy_str(out->acquire_time, sizeof(out->acquire_time),
             json_string_value(json_object_get(spec, "acquireTime")));
    copy_str(out->renew_time, sizeof(out->renew_time),
             json_string_value(json_object_get(spec, "renewTime")));
    out->leader_transitions = json_integer_value(json_object_get(spec, "leaseTransitions"));
}

json_t *ckube_leader_record_to_lease_spec(const ckube_leader_record *rec)
{
    json_t *s = json_object();
    if (!s)
        return NULL;
    /* holderIdentity is always written, "" included: a release must clear
     * it explicitly. */
    json_object_set_new(s, "holderIdentity", json_string(rec->holder_identity));
    json_object_set_new(s, "leaseDurationSeconds", json_integer(rec->lease_duration_seconds));
    if (rec->acquire_time[0])
        json_object_set_new(s, "acquireTime", json_string(rec->acquire_time));
    if (rec->renew_time[0])
        json_object_set_new(s, "renewTime", json_string(rec->renew_time));
    json_object_set_new(s, "leaseTransitions", json_integer(rec->leader_transitions));
    return s;
}

static bool record_equal(const ckube_leader_record *a, const ckube_leader_record *b)
{
    return strcmp(a->holder_identity, b->holder_identity) == 0 &&
           a->lease_duration_seconds == b->lease_duration_seconds &&
           strcmp(a->acquire_time, b->acquire_time) == 0 &&
           strcmp(a->renew_time, b->renew_time) == 0 &&
           a->leader_transitions == b->leader_transitions;
}

/* ======================================================================
 * Locks
 * ====================================================================== */

ckube_leader_lock *ckube_leader_lock_new(const ckube_leader_lock_ops *ops, void *ctx)
{
    ckube_leader_lock *l = calloc(1, sizeof(*l));
    if (!l || !ops) {
        free(l);
        if (ops && ops->free)
            ops->free(ctx);
        return NULL;
    }
    l->ops = ops;
    l->ctx = ctx;
    return l;
}

void ckube_leader_lock_free(ckube_leader_lock *l)
{
    if (!l)
        return;
    if (l->ops->free)
        l->ops->free(l->ctx);
    free(l);
}

/* The Lease lock: remembers the Lease last read or written so updates
 * carry its resourceVersion. */
struct lease_lock {
    ckube_client *client;
    char *ns, *name, *desc;
    json_t *lease; /* last Lease seen (owned), NULL before get/create */
};

static void lease_remember(struct lease_lock *ll, json_t *lease)
{
    json_decref(ll->lease);
    ll->lease = lease;
}

static int lease_get(void *ctx, ckube_leader_record *out, ckube_status **err)
{
    struct lease_lock *ll = ctx;
    json_t *obj = NULL;
    if (ckube_get(ll->client, &LEASES, ll->ns, ll->name, &obj, err) != 0)
        return -1;
    ckube_leader_record_from_lease_spec(json_object_get(obj, "spec"), out);
    lease_remember(ll, obj);
    return 0;
}

/* Writes `obj` (stolen) with rec as its spec: a create, or an update
 * (which carries the resourceVersion `obj` was read at). */
static int lease_write(struct lease_lock *ll, json_t *obj, const ckube_leader_record *rec,
                       bool update, ckube_status **err)
{
    json_t *spec = ckube_leader_record_to_lease_spec(rec);
    if (!obj || !spec) {
        json_decref(obj);
        json_decref(spec);
        if (err)
            *err = ckube_status_new(0, NULL, "out of memory");
        return -1;
    }
    json_object_set_new(obj, "spec", spec);
    json_t *out = NULL;
    int rc = update ? ckube_update(ll->client, &LEASES, ll->ns, obj, NULL, &out, err)
                    : ckube_create(ll->client, &LEASES, ll->ns, obj, NULL, &out, err);
    json_decref(obj);
    if (rc == 0)
        lease_remember(ll, out);
    return rc;
}

static int lease_create(void *ctx, const ckube_leader_record *rec, ckube_status **err)
{
    struct lease_lock *ll = ctx;
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                            "Lease", "metadata", "name", ll->name, "namespace", ll->ns);
    return lease_write(ll, obj, rec, false, err);
}

static int lease_update(void *ctx, const ckube_leader_record *rec, ckube_status **err)
{
    struct lease_lock *ll = ctx;
    if (!ll->lease) {
        if (err)
            *err = ckube_status_new(0, NULL, "lease not initialized, call get or create first");
        return -1;
    }
    /* The copy keeps metadata.resourceVersion: the server refuses the
     * write with 409 when someone else wrote in between. */
    return lease_write(ll, json_deep_copy(ll->lease), rec, true, err);
}

static const char *lease_describe(void *ctx)
{
    return ((struct lease_lock *)ctx)->desc;
}

static void lease_free(void *ctx)
{
    struct lease_lock *ll = ctx;
    if (!ll)
        return;
    json_decref(ll->lease);
    free(ll->ns);
    free(ll->name);
    free(ll->desc);
    free(ll);
}

static const ckube_leader_lock_ops LEASE_OPS = {
    .get = lease_get,
    .create = lease_create,
    .update = lease_update,
    .describe = lease_describe,
    .free = lease_free,
};

ckube_leader_lock *ckube_leader_lease_lock_new(ckube_client *c, const char *ns, const char *name)
{
    if (!c || !ns || !*ns || !name || !*name)
        return NULL;
    struct lease_lock *ll = calloc(1, sizeof(*ll));
    if (!ll)
        return NULL;
    ll->client = c;
    ll->ns = strdup(ns);
    ll->name = strdup(name);
    if (ll->ns && ll->name && asprintf(&ll->desc, "%s/%s", ns, name) < 0)
        ll->desc = NULL;
    if (!ll->ns || !ll->name || !ll->desc) {
        lease_free(ll);
        return NULL;
    }
    return ckube_leader_lock_new(&LEASE_OPS, ll);
}

/* ======================================================================
 * The elector
 * ====================================================================== */

struct ckube_leader_elector {
    ckube_leader_lock *lock;
    char identity[CKUBE_LEADER_IDENTITY_MAX + 1];
    char *name;
    uint64_t lease_duration, renew_deadline, retry_period;
    bool release_on_cancel;
    ckube_leader_callbacks cb;
    ckube_clock *clock;
    ckube_metric *master_status;
    /* Wall time (ns since the epoch) matching clock time `mono_base`. */
    int64_t wall_base;
    uint64_t mono_base;

    pthread_t thread;
    bool started, joined;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* Under mu: */
    bool stopping;
    bool paused;
    ckube_leader_record observed;
    uint64_t observed_time;
    bool have_observed;
    /* Set while this elector considers itself leader (between
     * on_started_leading and giving up). */
    bool leading;
    char reported_leader[CKUBE_LEADER_IDENTITY_MAX + 1];
};

char *ckube_leader_default_identity(char *buf, size_t n)
{
    char host[128] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
        snprintf(host, sizeof(host), "localhost");
    char uuid[40];
    ckube_uuid4(uuid, sizeof(uuid));
    snprintf(buf, n, "%s_%s", host, uuid);
    return buf;
}

/* client-go's NewLeaderElector checks, in its order and words. */
static int validate(const ckube_leader_election_config *cfg, uint64_t ld, uint64_t rd, uint64_t rp,
                    const char *identity, char **err)
{
    if (ld <= rd) {
        ckube__set_err(err, "leaseDuration must be greater than renewDeadline");
        return -1;
    }
    if ((double)rd <= CKUBE_LEADER_JITTER_FACTOR * (double)rp) {
        ckube__set_err(err, "renewDeadline must be greater than retryPeriod*JitterFactor");
        return -1;
    }
    if (ld < CKUBE_SEC(1)) {
        ckube__set_err(err, "leaseDuration must be at least one second");
        return -1;
    }
    if (!cfg->callbacks.on_started_leading) {
        ckube__set_err(err, "OnStartedLeading callback must not be nil");
        return -1;
    }
    if (!cfg->callbacks.on_stopped_leading) {
        ckube__set_err(err, "OnStoppedLeading callback must not be nil");
        return -1;
    }
    if (!cfg->lock) {
        ckube__set_err(err, "Lock must not be nil.");
        return -1;
    }
    if (!identity[0]) {
        ckube__set_err(err, "Lock identity is empty");
        return -1;
    }
    if (strlen(identity) > CKUBE_LEADER_IDENTITY_MAX) {
        ckube__set_err(err, "Lock identity is longer than %d characters",
                       CKUBE_LEADER_IDENTITY_MAX);
        return -1;
    }
    return 0;
}

static ckube_metric *master_status_metric(ckube_metrics_registry *reg, const char *name)
{
    static const char *const labels[] = {"name", NULL};
    ckube_metric_family *f = ckube_metrics_gauge(
        reg ? reg : ckube_metrics_default(), "leader_election_master_status",
        "1 while this process leads the named lease, 0 while it is a backup", labels);
    const char *lv[] = {name};
    return ckube_metric_with(f, lv);
}

ckube_leader_elector *ckube_leader_elector_new(const ckube_leader_election_config *cfg, char **err)
{
    if (err)
        *err = NULL;
    if (!cfg) {
        ckube__set_err(err, "no configuration");
        return NULL;
    }
    uint64_t ld = cfg->lease_duration_ns ? cfg->lease_duration_ns : CKUBE_LEADER_LEASE_DURATION_NS;
    uint64_t rd = cfg->renew_deadline_ns ? cfg->renew_deadline_ns : CKUBE_LEADER_RENEW_DEADLINE_NS;
    uint64_t rp = cfg->retry_period_ns ? cfg->retry_period_ns : CKUBE_LEADER_RETRY_PERIOD_NS;
    char idbuf[CKUBE_LEADER_IDENTITY_MAX + 2];
    const char *identity =
        cfg->identity ? cfg->identity : ckube_leader_default_identity(idbuf, sizeof(idbuf));
    if (validate(cfg, ld, rd, rp, identity, err) != 0) {
        ckube_leader_lock_free(cfg->lock);
        return NULL;
    }
    ckube_leader_elector *le = calloc(1, sizeof(*le));
    const char *name = cfg->name ? cfg->name : cfg->lock->ops->describe(cfg->lock->ctx);
    if (!le || !(le->name = strdup(name ? name : ""))) {
        free(le);
        ckube_leader_lock_free(cfg->lock);
        ckube__set_err(err, "out of memory");
        return NULL;
    }
    le->lock = cfg->lock;
    copy_str(le->identity, sizeof(le->identity), identity);
    le->lease_duration = ld;
    le->renew_deadline = rd;
    le->retry_period = rp;
    le->release_on_cancel = cfg->release_on_cancel;
    le->cb = cfg->callbacks;
    le->clock = ckube_clock_or_real(cfg->clock);
    le->master_status = master_status_metric(cfg->metrics, le->name);
    ckube_gauge_set(le->master_status, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    le->wall_base = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    le->mono_base = ckube_clock_now(le->clock);
    pthread_mutex_init(&le->mu, NULL);
    ckube_cond_init(&le->cond);
    return le;
}

const char *ckube_leader_elector_identity(const ckube_leader_elector *le)
{
    return le->identity;
}

/* "2006-01-02T15:04:05.000000Z" for the clock's current time. */
static void micro_now(ckube_leader_elector *le, char *buf, size_t n)
{
    int64_t wall = le->wall_base + (int64_t)(ckube_clock_now(le->clock) - le->mono_base);
    time_t sec = (time_t)(wall / 1000000000);
    long usec = (long)((wall % 1000000000) / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    char date[32];
    size_t len = strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    /* usec < 1e6: always six digits; %.*s bounds the date for the compiler. */
    snprintf(buf, n, "%.*s.%06ldZ", (int)len, date, usec % 1000000);
}

static bool is_leader_locked(ckube_leader_elector *le)
{
    return le->have_observed && strcmp(le->observed.holder_identity, le->identity) == 0;
}

bool ckube_leader_elector_is_leader(ckube_leader_elector *le)
{
    pthread_mutex_lock(&le->mu);
    bool r = le->leading && is_leader_locked(le);
    pthread_mutex_unlock(&le->mu);
    return r;
}

char *ckube_leader_elector_get_leader(ckube_leader_elector *le)
{
    pthread_mutex_lock(&le->mu);
    char *r = strdup(le->have_observed ? le->observed.holder_identity : "");
    pthread_mutex_unlock(&le->mu);
    return r;
}

void ckube_leader_elector_observed(ckube_leader_elector *le, ckube_leader_record *out)
{
    pthread_mutex_lock(&le->mu);
    *out = le->observed;
    pthread_mutex_unlock(&le->mu);
}

void ckube_leader_elector_pause_renewals(ckube_leader_elector *le, bool paused)
{
    pthread_mutex_lock(&le->mu);
    le->paused = paused;
    pthread_mutex_unlock(&le->mu);
}

static bool stopping(ckube_leader_elector *le)
{
    pthread_mutex_lock(&le->mu);
    bool s = le->stopping;
    pthread_mutex_unlock(&le->mu);
    return s;
}

/* Sleeps `ns` on the clock unless stopped first. Returns true when
 * stopping. */
static bool wait_or_stop(ckube_leader_elector *le, uint64_t ns)
{
    pthread_mutex_lock(&le->mu);
    uint64_t deadline = ckube_clock_now(le->clock) + ns;
    while (!le->stopping && ckube_clock_now(le->clock) < deadline)
        ckube_clock_cond_wait(le->clock, &le->cond, &le->mu, deadline);
    bool s = le->stopping;
    pthread_mutex_unlock(&le->mu);
    return s;
}

static void set_observed(ckube_leader_elector *le, const ckube_leader_record *rec)
{
    pthread_mutex_lock(&le->mu);
    le->observed = *rec;
    le->have_observed = true;
    le->observed_time = ckube_clock_now(le->clock);
    pthread_mutex_unlock(&le->mu);
}

/* observedTime + leaseDurationSeconds (of the observed record) > now. */
static bool lease_valid_locked(ckube_leader_elector *le, uint64_t now)
{
    uint64_t dur = le->observed.lease_duration_seconds > 0
                       ? CKUBE_SEC(le->observed.lease_duration_seconds)
                       : 0;
    return le->observed_time + dur > now;
}

static void report_transition(ckube_leader_elector *le)
{
    pthread_mutex_lock(&le->mu);
    char holder[sizeof(le->observed.holder_identity)];
    copy_str(holder, sizeof(holder), le->have_observed ? le->observed.holder_identity : "");
    bool changed = strcmp(holder, le->reported_leader) != 0;
    if (changed)
        copy_str(le->reported_leader, sizeof(le->reported_leader), holder);
    pthread_mutex_unlock(&le->mu);
    if (changed && holder[0] && le->cb.on_new_leader)
        le->cb.on_new_leader(le->cb.ctx, holder);
}

static void log_status(const char *what, const char *desc, ckube_status *st)
{
    CKUBE_V(2, "%s %s: %s", what, desc, st && st->message ? st->message : "unknown error");
}

/* One attempt (client-go's tryAcquireOrRenew). True when we hold the
 * lock afterwards. */
static bool try_acquire_or_renew(ckube_leader_elector *le)
{
    const ckube_leader_lock_ops *ops = le->lock->ops;
    void *lctx = le->lock->ctx;
    const char *desc = ops->describe(lctx);
    ckube_leader_record rec = {0};
    copy_str(rec.holder_identity, sizeof(rec.holder_identity), le->identity);
    rec.lease_duration_seconds = (int64_t)(le->lease_duration / CKUBE_SEC(1));
    micro_now(le, rec.renew_time, sizeof(rec.renew_time));
    copy_str(rec.acquire_time, sizeof(rec.acquire_time), rec.renew_time);
    ckube_status *err = NULL;

    /* Fast path: we lead and the lease has not expired: update directly
     * with the version we last wrote. */
    pthread_mutex_lock(&le->mu);
    bool fast = is_leader_locked(le) && lease_valid_locked(le, ckube_clock_now(le->clock));
    ckube_leader_record old = le->observed;
    pthread_mutex_unlock(&le->mu);
    if (fast) {
        copy_str(rec.acquire_time, sizeof(rec.acquire_time), old.acquire_time);
        rec.leader_transitions = old.leader_transitions;
        if (ops->update(lctx, &rec, &err) == 0) {
            set_observed(le, &rec);
            return true;
        }
        log_status("Failed to update lock optimistically, falling back to slow path:", desc, err);
        ckube_status_free(err);
        err = NULL;
    }

    /* Slow path: read the lock. */
    if (ops->get(lctx, &old, &err) != 0) {
        if (!ckube_is_not_found(err)) {
            CKUBE_ERROR("error retrieving resource lock %s: %s", desc,
                        err && err->message ? err->message : "unknown error");
            ckube_status_free(err);
            return false;
        }
        ckube_status_free(err);
        err = NULL;
        if (ops->create(lctx, &rec, &err) != 0) {
            CKUBE_ERROR("error initially creating leader election record: %s",
                        err && err->message ? err->message : "unknown error");
            ckube_status_free(err);
            return false;
        }
        set_observed(le, &rec);
        return true;
    }

    /* A changed record restarts the expiry count on our clock. */
    uint64_t now = ckube_clock_now(le->clock);
    pthread_mutex_lock(&le->mu);
    if (!le->have_observed || !record_equal(&le->observed, &old)) {
        le->observed = old;
        le->have_observed = true;
        le->observed_time = now;
    }
    bool leader = is_leader_locked(le);
    bool held = old.holder_identity[0] && lease_valid_locked(le, now) && !leader;
    pthread_mutex_unlock(&le->mu);
    if (held) {
        CKUBE_V(4, "lock is held by %s and has not yet expired", old.holder_identity);
        return false;
    }
    if (leader) {
        copy_str(rec.acquire_time, sizeof(rec.acquire_time), old.acquire_time);
        rec.leader_transitions = old.leader_transitions;
    } else {
        rec.leader_transitions = old.leader_transitions + 1;
    }
    if (ops->update(lctx, &rec, &err) != 0) {
        CKUBE_ERROR("Failed to update lock: %s",
                    err && err->message ? err->message : "unknown error");
        ckube_status_free(err);
        return false;
    }
    set_observed(le, &rec);
    return true;
}

/* Jittered retry wait: retry + random [0, 1.2 * retry). */
static uint64_t jittered(uint64_t period)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint32_t)rand();
    double f = (double)r / 4294967296.0;
    return period + (uint64_t)(f * CKUBE_LEADER_JITTER_FACTOR * (double)period);
}

/* Returns true once acquired, false when stopped first. */
static bool acquire(ckube_leader_elector *le)
{
    const char *desc = le->lock->ops->describe(le->lock->ctx);
    CKUBE_INFO("attempting to acquire leader lease %s...", desc);
    for (;;) {
        if (stopping(le))
            return false;
        bool ok = try_acquire_or_renew(le);
        report_transition(le);
        if (ok) {
            CKUBE_INFO("successfully acquired lease %s", desc);
            return true;
        }
        /* Candidates poll every RetryPeriod plus at most a fifth of it
         * (client-go's JitterUntil adds up to 1.2 periods, so a released
         * lease could sit unclaimed for 4.4 s); renewals keep client-go's
         * jitter. */
        if (wait_or_stop(le,
                         le->retry_period + jittered(le->retry_period / 6) - le->retry_period / 6))
            return false;
    }
}

/* One renewal round: retries every RetryPeriod until RenewDeadline.
 * Returns true when renewed, false when the deadline passed or on stop. */
static bool renew_once(ckube_leader_elector *le)
{
    uint64_t deadline = ckube_clock_now(le->clock) + le->renew_deadline;
    for (;;) {
        pthread_mutex_lock(&le->mu);
        bool paused = le->paused, stop = le->stopping;
        pthread_mutex_unlock(&le->mu);
        if (stop)
            return false;
        bool ok = !paused && try_acquire_or_renew(le);
        report_transition(le);
        if (ok)
            return true;
        uint64_t now = ckube_clock_now(le->clock);
        if (now >= deadline)
            return false;
        uint64_t wait = le->retry_period;
        if (now + wait > deadline)
            wait = deadline - now;
        if (wait_or_stop(le, wait))
            return false;
    }
}

static void release(ckube_leader_elector *le)
{
    pthread_mutex_lock(&le->mu);
    bool leader = is_leader_locked(le);
    ckube_leader_record rec = {0};
    rec.leader_transitions = le->observed.leader_transitions;
    pthread_mutex_unlock(&le->mu);
    if (!leader)
        return;
    rec.lease_duration_seconds = 1;
    micro_now(le, rec.renew_time, sizeof(rec.renew_time));
    copy_str(rec.acquire_time, sizeof(rec.acquire_time), rec.renew_time);
    ckube_status *err = NULL;
    if (le->lock->ops->update(le->lock->ctx, &rec, &err) != 0) {
        CKUBE_ERROR("Failed to release lock: %s",
                    err && err->message ? err->message : "unknown error");
        ckube_status_free(err);
        return;
    }
    set_observed(le, &rec);
    CKUBE_INFO("released leader lease %s", le->lock->ops->describe(le->lock->ctx));
}

static void *elector_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-elector"); /* top -H, perf, gdb */
    ckube_leader_elector *le = arg;
    if (!acquire(le))
        return NULL;
    pthread_mutex_lock(&le->mu);
    le->leading = true;
    pthread_mutex_unlock(&le->mu);
    ckube_gauge_set(le->master_status, 1);
    le->cb.on_started_leading(le->cb.ctx);

    const char *desc = le->lock->ops->describe(le->lock->ctx);
    while (renew_once(le)) {
        if (wait_or_stop(le, le->retry_period))
            break;
    }
    bool stopped = stopping(le);
    if (!stopped)
        CKUBE_INFO("failed to renew lease %s: timed out waiting for the condition", desc);
    pthread_mutex_lock(&le->mu);
    le->leading = false;
    pthread_mutex_unlock(&le->mu);
    ckube_gauge_set(le->master_status, 0);
    if (stopped && le->release_on_cancel)
        release(le);
    report_transition(le);
    le->cb.on_stopped_leading(le->cb.ctx);
    return NULL;
}

int ckube_leader_elector_start(ckube_leader_elector *le)
{
    if (!le || le->started)
        return -1;
    if (pthread_create(&le->thread, NULL, elector_main, le) != 0) {
        CKUBE_ERROR("leader election: cannot create thread");
        return -1;
    }
    le->started = true;
    return 0;
}

void ckube_leader_elector_stop(ckube_leader_elector *le)
{
    if (!le)
        return;
    pthread_mutex_lock(&le->mu);
    le->stopping = true;
    pthread_cond_broadcast(&le->cond);
    pthread_mutex_unlock(&le->mu);
    if (le->started && !le->joined) {
        pthread_join(le->thread, NULL);
        le->joined = true;
    }
}

void ckube_leader_elector_free(ckube_leader_elector *le)
{
    if (!le)
        return;
    ckube_leader_elector_stop(le);
    ckube_leader_lock_free(le->lock);
    pthread_mutex_destroy(&le->mu);
    pthread_cond_destroy(&le->cond);
    free(le->name);
    free(le);
}
