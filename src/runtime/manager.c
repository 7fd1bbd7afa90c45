/* manager.c - runs runnables with a shared cache, leader election and HTTP
 * endpoints (see ckube/manager.h for the order of things and contracts).
 *
 * Threads:
 *   - the caller of ckube_manager_start starts the HTTP servers, caches
 *     and non-elected runnables, then the manager thread;
 *   - the manager thread starts the elector, waits on the self-pipe for
 *     events ('L' = we lead, 'X' = we stopped leading, 'S' = stop), starts
 *     the elected runnables when leading and runs the stop procedure on a
 *     stopper thread (so it can give up waiting after the grace period);
 *   - the elector's callbacks only write to the pipe (they must not
 *     block the elector).
 */
#include "common/text.h"
#include "manager_internal.h"
#include "runtime/secure_serving.h"

#include <ckube/json.h>
#include <ckube/log.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define DEFAULT_GRACE_NS CKUBE_SEC(30)
#define DEFAULT_SYNC_TIMEOUT_NS CKUBE_SEC(120)

struct runnable_entry {
    ckube_runnable r;
    char *name;      /* owned copy of r.name */
    void *owned_ctx; /* freed with the manager (controller adapters) */
    bool started;
};

struct runnable_list {
    struct runnable_entry *v;
    size_t n, cap;
};

struct controller_adapter {
    ckube_controller *c;
    uint64_t timeout_ns;
};

enum mgr_state { MGR_NEW, MGR_RUNNING, MGR_FAILED, MGR_DONE };

struct ckube_manager {
    ckube_client *client;
    bool own_client;
    ckube_informer_factory *cache;
    bool own_cache;
    char *cache_ns;
    ckube_gvr *uncached;
    size_t n_uncached;
    uint64_t sync_period_ns, cache_sync_timeout_ns;
    int64_t grace_ns;
    bool handle_signals;
    ckube_clock *clock;
    ckube_metrics_registry *metrics;
    char *metrics_addr, *health_addr;
    /* Secure serving (NULL secure_addr: off): the options' copies and the
     * delegated authenticator/authorizer its listener admits with. */
    char *secure_addr, *secure_cert, *secure_key, *secure_client_ca;
    bool secure_skip_lookup;
    delegated_auth *auth;

    manager_checks healthz, readyz;
    manager_http *http;
    ckube_leader_elector *le;

    /* Runnables: written before start only, read by the manager threads
     * after start (pthread_create orders the accesses). */
    struct runnable_list others, elected;

    int pipe[2];
    pthread_t loop, stopper;
    bool loop_started, stopper_started;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* Under mu: */
    enum mgr_state state;
    bool stop_done;
    int exit_code;
    bool leading, elected_started;
};

/* ======================================================================
 * Small helpers
 * ====================================================================== */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool gvr_eq(const ckube_gvr *a, const ckube_gvr *b)
{
    return str_eq(a->group, b->group) && str_eq(a->version, b->version) &&
           str_eq(a->resource, b->resource);
}

/* A factor in [0.9, 1.1), as controller-runtime's cache resync jitter. */
static uint64_t jitter_sync_period(uint64_t period)
{
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = (uint32_t)rand();
    double f = 0.9 + 0.2 * ((double)r / 4294967296.0);
    return (uint64_t)((double)period * f);
}

static void notify(ckube_manager *m, char ev)
{
    /* Async-signal-safe; the pipe is non-blocking, and a full pipe already
     * holds wake-ups enough. */
    ssize_t w = write(m->pipe[1], &ev, 1);
    (void)w;
}

/* ======================================================================
 * Construction
 * ====================================================================== */

static void on_started_leading(void *ctx)
{
    ckube_manager *m = ctx;
    pthread_mutex_lock(&m->mu);
    m->leading = true;
    pthread_mutex_unlock(&m->mu);
    notify(m, 'L');
}

static void on_stopped_leading(void *ctx)
{
    ckube_manager *m = ctx;
    pthread_mutex_lock(&m->mu);
    m->leading = false;
    pthread_mutex_unlock(&m->mu);
    notify(m, 'X');
}

static void on_new_leader(void *ctx, const char *identity)
{
    (void)ctx;
    CKUBE_INFO("new leader elected: %s", identity);
}

static int make_elector(ckube_manager *m, const ckube_manager_options *o, char **err)
{
    if (!o->leader_election_id || !*o->leader_election_id) {
        ckube__set_err(err, "LeaderElectionID must be configured");
        return -1;
    }
    const char *ns = o->leader_election_namespace ? o->leader_election_namespace
                                                  : ckube_client_namespace(m->client);
    ckube_leader_lock *lock = ckube_leader_lease_lock_new(m->client, ns, o->leader_election_id);
    if (!lock) {
        ckube__set_err(err, "cannot create the leader election lock %s/%s", ns ? ns : "",
                       o->leader_election_id);
        return -1;
    }
    ckube_leader_election_config lc = {
        .lock = lock,
        .identity = o->leader_election_identity,
        .lease_duration_ns = o->lease_duration_ns,
        .renew_deadline_ns = o->renew_deadline_ns,
        .retry_period_ns = o->retry_period_ns,
        .release_on_cancel = o->leader_election_release_on_cancel,
        .callbacks = {on_started_leading, on_stopped_leading, on_new_leader, m},
        .name = o->leader_election_id,
        .clock = m->clock,
        .metrics = m->metrics,
    };
    m->le = ckube_leader_elector_new(&lc, err);
    return m->le ? 0 : -1;
}

static int copy_uncached(ckube_manager *m, const ckube_manager_options *o)
{
    if (!o->n_uncached_resources)
        return 0;
    m->uncached = calloc(o->n_uncached_resources, sizeof(*m->uncached));
    if (!m->uncached)
        return -1;
    for (size_t i = 0; i < o->n_uncached_resources; i++) {
        const ckube_gvr *g = &o->uncached_resources[i];
        m->uncached[i].group = strdup(g->group ? g->group : "");
        m->uncached[i].version = strdup(g->version ? g->version : "");
        m->uncached[i].resource = strdup(g->resource ? g->resource : "");
        m->n_uncached = i + 1;
        if (!m->uncached[i].group || !m->uncached[i].version || !m->uncached[i].resource)
            return -1;
    }
    return 0;
}

static int make_client_and_cache(ckube_manager *m, const ckube_manager_options *o, char **err)
{
    if (o->client) {
        m->client = o->client;
    } else if (o->config) {
        ckube_status *st = NULL;
        m->client = ckube_client_new(o->config, &st);
        if (!m->client) {
            ckube__set_err(err, "unable to create the client: %s",
                           st && st->message ? st->message : "unknown error");
            ckube_status_free(st);
            return -1;
        }
        m->own_client = true;
    } else {
        ckube__set_err(err, "a client or a config is required");
        return -1;
    }
    m->sync_period_ns = jitter_sync_period(
        o->sync_period_ns ? o->sync_period_ns : CKUBE_MANAGER_DEFAULT_SYNC_PERIOD_NS);
    if (o->cache) {
        m->cache = o->cache;
        return 0;
    }
    ckube_informer_factory_opts fo = {
        .default_resync_ns = m->sync_period_ns,
        .namespace_ = o->cache_namespace,
        .clock = m->clock,
    };
    m->cache = ckube_informer_factory_new(m->client, &fo);
    if (!m->cache) {
        ckube__set_err(err, "unable to create the cache");
        return -1;
    }
    m->own_cache = true;
    return 0;
}

/* Copies the secure serving options and makes the delegated
 * authenticator (on the manager's client). Off (0) without an address. */
static int make_secure_serving(ckube_manager *m, const ckube_secure_serving_options *o, char **err)
{
    if (!o->bind_address || !strcmp(o->bind_address, "0"))
        return 0;
    delegated_auth_opts ao = {.client = m->client,
                              .always_allow_paths = o->always_allow_paths,
                              .always_allow_groups = o->always_allow_groups,
                              .cache_ttl_ns = o->cache_ttl_ns,
                              .clock = m->clock};
    m->secure_addr = strdup(o->bind_address);
    m->secure_cert = dup_or_null(o->cert_file);
    m->secure_key = dup_or_null(o->key_file);
    m->secure_client_ca = dup_or_null(o->client_ca_file);
    m->secure_skip_lookup = o->skip_lookup;
    m->auth = delegated_auth_new(&ao);
    if (!m->secure_addr || (o->cert_file && !m->secure_cert) || (o->key_file && !m->secure_key) ||
        (o->client_ca_file && !m->secure_client_ca) || !m->auth) {
        ckube__set_err(err, "out of memory");
        return -1;
    }
    if (!o->cert_file != !o->key_file) {
        ckube__set_err(err, "secure serving: a certificate file and its key file go together");
        return -1;
    }
    return 0;
}

ckube_manager *ckube_manager_new(const ckube_manager_options *o, char **err)
{
    if (err)
        *err = NULL;
    if (!o) {
        ckube__set_err(err, "no options");
        return NULL;
    }
    ckube_manager *m = calloc(1, sizeof(*m));
    if (!m) {
        ckube__set_err(err, "out of memory");
        return NULL;
    }
    m->pipe[0] = m->pipe[1] = -1;
    pthread_mutex_init(&m->mu, NULL);
    ckube_cond_init(&m->cond);
    manager_checks_init(&m->healthz, "healthz");
    manager_checks_init(&m->readyz, "readyz");
    m->clock = ckube_clock_or_real(o->clock);
    m->metrics = o->metrics ? o->metrics : ckube_metrics_default();
    m->handle_signals = o->handle_signals;
    m->grace_ns = o->graceful_shutdown_timeout_ns ? o->graceful_shutdown_timeout_ns
                                                  : (int64_t)DEFAULT_GRACE_NS;
    m->cache_sync_timeout_ns =
        o->cache_sync_timeout_ns ? o->cache_sync_timeout_ns : DEFAULT_SYNC_TIMEOUT_NS;
    m->metrics_addr = strdup(o->metrics_bind_address ? o->metrics_bind_address
                                                     : CKUBE_MANAGER_DEFAULT_METRICS_ADDR);
    m->health_addr = strdup(o->health_probe_bind_address ? o->health_probe_bind_address
                                                         : CKUBE_MANAGER_DEFAULT_HEALTH_ADDR);
    m->cache_ns = dup_or_null(o->cache_namespace);
    if (!m->metrics_addr || !m->health_addr || (o->cache_namespace && !m->cache_ns) ||
        copy_uncached(m, o) != 0 || pipe2(m->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        ckube__set_err(err, "out of memory");
        ckube_manager_free(m);
        return NULL;
    }
    if (make_client_and_cache(m, o, err) != 0 ||
        (o->leader_election && make_elector(m, o, err) != 0)) {
        ckube_manager_free(m);
        return NULL;
    }
    if (make_secure_serving(m, &o->secure_serving, err) != 0) {
        ckube_manager_free(m);
        return NULL;
    }
    m->http = manager_http_new();
    if (!m->http) {
        ckube__set_err(err, "cannot create the HTTP event loop");
        ckube_manager_free(m);
        return NULL;
    }
    return m;
}

/* ======================================================================
 * Registration
 * ====================================================================== */

static int list_add(struct runnable_list *l, const ckube_runnable *r, void *owned_ctx)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct runnable_entry *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    struct runnable_entry *e = &l->v[l->n];
    memset(e, 0, sizeof(*e));
    e->r = *r;
    e->name = strdup(r->name ? r->name : "runnable");
    if (!e->name)
        return -1;
    e->r.name = e->name;
    e->owned_ctx = owned_ctx;
    l->n++;
    return 0;
}

static int add_runnable(ckube_manager *m, const ckube_runnable *r, void *owned_ctx)
{
    if (!m || !r || !r->start || !r->stop)
        return -1;
    pthread_mutex_lock(&m->mu);
    bool fresh = m->state == MGR_NEW;
    pthread_mutex_unlock(&m->mu);
    if (!fresh) {
        CKUBE_ERROR("manager: cannot add runnable %s after start", r->name ? r->name : "");
        return -1;
    }
    return list_add(r->needs_leader_election ? &m->elected : &m->others, r, owned_ctx);
}

int ckube_manager_add(ckube_manager *m, const ckube_runnable *r)
{
    return add_runnable(m, r, NULL);
}

static int controller_start(void *ctx)
{
    struct controller_adapter *a = ctx;
    return ckube_controller_start(a->c, a->timeout_ns);
}

static void controller_stop(void *ctx)
{
    struct controller_adapter *a = ctx;
    ckube_controller_stop(a->c);
}

int ckube_manager_add_controller(ckube_manager *m, ckube_controller *c)
{
    if (!m || !c)
        return -1;
    struct controller_adapter *a = calloc(1, sizeof(*a));
    if (!a)
        return -1;
    a->c = c;
    a->timeout_ns = m->cache_sync_timeout_ns;
    ckube_runnable r = {.name = "controller",
                        .start = controller_start,
                        .stop = controller_stop,
                        .ctx = a,
                        .needs_leader_election = true};
    if (add_runnable(m, &r, a) != 0) {
        free(a);
        return -1;
    }
    return 0;
}

int ckube_manager_add_healthz_check(ckube_manager *m, const char *name, ckube_health_check_fn fn,
                                    void *ctx)
{
    return m ? manager_checks_add(&m->healthz, name, fn, ctx) : -1;
}

int ckube_manager_add_readyz_check(ckube_manager *m, const char *name, ckube_health_check_fn fn,
                                   void *ctx)
{
    return m ? manager_checks_add(&m->readyz, name, fn, ctx) : -1;
}

/* ======================================================================
 * Client and cache
 * ====================================================================== */

ckube_client *ckube_manager_client(ckube_manager *m)
{
    return m->client;
}

ckube_informer_factory *ckube_manager_cache(ckube_manager *m)
{
    return m->cache;
}

uint64_t ckube_manager_sync_period_ns(const ckube_manager *m)
{
    return m->sync_period_ns;
}

ckube_shared_informer *ckube_manager_informer(ckube_manager *m, const ckube_gvr *gvr)
{
    return ckube_informer_factory_for(m->cache, gvr);
}

static bool is_uncached(ckube_manager *m, const ckube_gvr *gvr)
{
    for (size_t i = 0; i < m->n_uncached; i++)
        if (gvr_eq(&m->uncached[i], gvr))
            return true;
    return false;
}

/* The synced informer serving reads of gvr in ns, started on first use. */
static ckube_shared_informer *cache_informer(ckube_manager *m, const ckube_gvr *gvr, const char *ns,
                                             ckube_status **err)
{
    if (ns && *ns && m->cache_ns && strcmp(ns, m->cache_ns) != 0) {
        if (err)
            *err = ckube_status_new(0, NULL,
                                    "unable to read %s in namespace \"%s\": the cache is "
                                    "restricted to namespace \"%s\"",
                                    gvr->resource, ns, m->cache_ns);
        return NULL;
    }
    /* A namespaced read uses the cache's namespace (all when
     * unrestricted); a cluster-scoped one the cluster-wide informer. */
    ckube_shared_informer *inf = ns && *ns
                                     ? ckube_informer_factory_for(m->cache, gvr)
                                     : ckube_informer_factory_for_namespace(m->cache, gvr, NULL);
    if (!inf) {
        if (err)
            *err = ckube_status_new(0, NULL, "no cache for %s (manager stopped?)", gvr->resource);
        return NULL;
    }
    if (!ckube_shared_informer_is_started(inf) && ckube_informer_factory_start(m->cache) != 0) {
        if (err)
            *err = ckube_status_new(0, NULL, "unable to start the informer for %s", gvr->resource);
        return NULL;
    }
    if (!ckube_wait_for_cache_sync(&inf, 1, m->cache_sync_timeout_ns)) {
        if (err)
            *err = ckube_status_new(0, NULL, "timed out waiting for cache to be synced for %s",
                                    gvr->resource);
        return NULL;
    }
    return inf;
}

int ckube_manager_get(ckube_manager *m, const ckube_gvr *gvr, const char *ns, const char *name,
                      json_t **out, ckube_status **err)
{
    *out = NULL;
    if (err)
        *err = NULL;
    if (is_uncached(m, gvr))
        return ckube_get(m->client, gvr, ns, name, out, err);
    ckube_shared_informer *inf = cache_informer(m, gvr, ns, err);
    if (!inf)
        return -1;
    ckube_lister l = ckube_shared_informer_lister(inf);
    json_t *obj = ckube_lister_get(&l, ns, name);
    if (!obj) {
        if (err)
            *err = ckube_status_not_found(gvr->group, gvr->resource, name);
        return -1;
    }
    /* A private copy: cache objects are shared and read-only. */
    *out = json_deep_copy(obj);
    ckube_obj_unref(obj);
    if (!*out) {
        if (err)
            *err = ckube_status_new(0, NULL, "out of memory");
        return -1;
    }
    return 0;
}

int ckube_manager_list(ckube_manager *m, const ckube_gvr *gvr, const char *ns,
                       const char *label_selector, json_t **out, ckube_status **err)
{
    *out = NULL;
    if (err)
        *err = NULL;
    if (is_uncached(m, gvr)) {
        ckube_list_opts lo = {.label_selector = label_selector};
        return ckube_list_all(m->client, gvr, ns, &lo, out, err);
    }
    ckube_selector *sel = NULL;
    if (label_selector && *label_selector) {
        char *perr = NULL;
        if (ckube_label_selector_parse(label_selector, &sel, &perr) != 0) {
            if (err)
                *err = ckube_status_bad_request("unable to parse requirement: %s",
                                                perr ? perr : label_selector);
            free(perr);
            return -1;
        }
    }
    ckube_shared_informer *inf = cache_informer(m, gvr, ns ? ns : m->cache_ns, err);
    if (!inf) {
        ckube_selector_free(sel);
        return -1;
    }
    ckube_lister l = ckube_shared_informer_lister(inf);
    ckube_obj_list objs = {0};
    int rc = ckube_lister_list(&l, ns, sel, &objs);
    ckube_selector_free(sel);
    json_t *items = json_array();
    for (size_t i = 0; rc == 0 && items && i < objs.n; i++)
        json_array_append_new(items, json_deep_copy(objs.items[i]));
    ckube_obj_list_free(&objs);
    if (rc != 0 || !items) {
        json_decref(items);
        if (err)
            *err = ckube_status_new(0, NULL, "unable to list %s from the cache", gvr->resource);
        return -1;
    }
    *out = json_pack("{s:s,s:o}", "kind", "List", "items", items);
    return *out ? 0 : -1;
}

/* ======================================================================
 * Starting and stopping
 * ====================================================================== */

static int start_list(struct runnable_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        struct runnable_entry *e = &l->v[i];
        CKUBE_V(1, "starting runnable %s", e->name);
        if (e->r.start(e->r.ctx) != 0) {
            CKUBE_ERROR("failed to start runnable %s", e->name);
            return -1;
        }
        e->started = true;
    }
    return 0;
}

static void stop_list(struct runnable_list *l)
{
    for (size_t i = l->n; i-- > 0;) {
        struct runnable_entry *e = &l->v[i];
        if (!e->started)
            continue;
        CKUBE_V(1, "stopping runnable %s", e->name);
        e->r.stop(e->r.ctx);
        e->started = false;
    }
}

/* The reverse of start: elected runnables, leader election (release),
 * other runnables, caches, HTTP servers. */
static void stop_everything(ckube_manager *m)
{
    CKUBE_INFO("Stopping and waiting for leader election runnables");
    stop_list(&m->elected);
    if (m->le)
        ckube_leader_elector_stop(m->le);
    CKUBE_INFO("Stopping and waiting for non leader election runnables");
    stop_list(&m->others);
    CKUBE_INFO("Stopping and waiting for caches");
    ckube_informer_factory_shutdown(m->cache);
    CKUBE_INFO("Stopping and waiting for HTTP servers");
    manager_http_stop(m->http);
    CKUBE_INFO("Wait completed, proceeding to shutdown the manager");
}

static void *stopper_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-stopper"); /* top -H, perf, gdb */
    ckube_manager *m = arg;
    stop_everything(m);
    pthread_mutex_lock(&m->mu);
    m->stop_done = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* Runs the stop on the stopper thread and waits for it up to the grace
 * period. Returns false on timeout. */
static bool graceful_stop(ckube_manager *m)
{
    if (pthread_create(&m->stopper, NULL, stopper_main, m) != 0) {
        stopper_main(m);
        return true;
    }
    m->stopper_started = true;
    pthread_mutex_lock(&m->mu);
    uint64_t deadline = m->grace_ns > 0 ? ckube_clock_now(m->clock) + (uint64_t)m->grace_ns : 0;
    while (!m->stop_done) {
        if (deadline && ckube_clock_now(m->clock) >= deadline)
            break;
        ckube_clock_cond_wait(m->clock, &m->cond, &m->mu, deadline);
    }
    bool done = m->stop_done;
    pthread_mutex_unlock(&m->mu);
    if (!done)
        CKUBE_ERROR("failed waiting for all runnables to end within grace period of %gs: "
                    "context deadline exceeded",
                    (double)m->grace_ns / 1e9);
    return done;
}

static int start_elected(ckube_manager *m)
{
    if (start_list(&m->elected) != 0)
        return -1;
    pthread_mutex_lock(&m->mu);
    m->elected_started = true;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static void *loop_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-manager"); /* top -H, perf, gdb */
    ckube_manager *m = arg;
    int code = CKUBE_MANAGER_EXIT_OK;
    bool done = false;
    if (m->le && ckube_leader_elector_start(m->le) != 0) {
        code = CKUBE_MANAGER_EXIT_START_FAILED;
        done = true;
    }
    while (!done) {
        struct pollfd p = {.fd = m->pipe[0], .events = POLLIN};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            break;
        char ev;
        while (!done && read(m->pipe[0], &ev, 1) == 1) {
            if (ev == 'S') {
                CKUBE_INFO("Stopping the manager");
                done = true;
            } else if (ev == 'L') {
                if (start_elected(m) != 0) {
                    code = CKUBE_MANAGER_EXIT_RUNNABLE_FAILED;
                    done = true;
                }
            } else if (ev == 'X') {
                CKUBE_ERROR("leader election lost");
                code = CKUBE_MANAGER_EXIT_LEADER_LOST;
                done = true;
            }
        }
    }
    if (!graceful_stop(m) && code == CKUBE_MANAGER_EXIT_OK)
        code = CKUBE_MANAGER_EXIT_SHUTDOWN_TIMEOUT;
    pthread_mutex_lock(&m->mu);
    m->exit_code = code;
    m->state = MGR_DONE;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* The client CA's PEM bytes: the file, or the ConfigMap's (NULL when
 * neither, logged as upstream's warning: client certificates are then not
 * asked for). -1 with *err when the file cannot be read. */
static int client_ca(ckube_manager *m, char **pem, size_t *len, char **err)
{
    *pem = NULL;
    *len = 0;
    if (m->secure_client_ca) {
        FILE *f = fopen(m->secure_client_ca, "rb");
        if (!f) {
            ckube__set_err(err, "cannot read the client CA file %s: %s", m->secure_client_ca,
                           strerror(errno));
            return -1;
        }
        ckube__strbuf b = {0};
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            ckube__sb_addn(&b, buf, n);
        fclose(f);
        *len = b.len;
        *pem = ckube__sb_take(&b);
        return *pem ? 0 : -1;
    }
    if (m->secure_skip_lookup)
        return 0;
    char *why = NULL;
    *pem = secure_serving_lookup_client_ca(m->client, len, &why);
    if (!*pem)
        CKUBE_WARN("Unable to get configmap/extension-apiserver-authentication in kube-system, so "
                   "client certificate authentication won't work: %s",
                   why ? why : "out of memory");
    free(why);
    return 0;
}

static int listen_secure(ckube_manager *m, char **err)
{
    char *pem = NULL;
    size_t len = 0;
    if (client_ca(m, &pem, &len, err) != 0)
        return -1;
    serving_cert *tls =
        serving_cert_new(m->secure_cert, m->secure_key, pem, len, "secure serving", err);
    free(pem);
    if (!tls)
        return -1;
    return manager_http_listen_secure(m->http, m->secure_addr, tls, m->auth, m->metrics,
                                      &m->healthz, &m->readyz, err);
}

static int start_http(ckube_manager *m)
{
    char *err = NULL;
    if (strcmp(m->metrics_addr, "0") != 0 &&
        manager_http_listen_metrics(m->http, m->metrics_addr, m->metrics, &err) != 0)
        goto fail;
    if (strcmp(m->health_addr, "0") != 0 &&
        manager_http_listen_health(m->http, m->health_addr, &m->healthz, &m->readyz, &err) != 0)
        goto fail;
    if (m->secure_addr && listen_secure(m, &err) != 0)
        goto fail;
    if (manager_http_start(m->http, &err) != 0)
        goto fail;
    return 0;
fail:
    CKUBE_ERROR("manager: %s", err ? err : "out of memory");
    free(err);
    return -1;
}

static int start_caches(ckube_manager *m)
{
    if (ckube_informer_factory_start(m->cache) != 0) {
        CKUBE_ERROR("manager: failed to start the caches");
        return -1;
    }
    /* Waits in short slices so a stop (a signal) during a long wait, e.g.
     * for a CRD that is not installed yet, is honoured at once. A stop
     * request is a byte in the self-pipe: poll sees it without taking it,
     * so the manager loop still gets it. */
    uint64_t t0 = ckube_monotonic_ns();
    while (!ckube_informer_factory_has_synced(m->cache)) {
        struct pollfd pfd = {.fd = m->pipe[0], .events = POLLIN};
        if (poll(&pfd, 1, 50) > 0) {
            CKUBE_INFO("manager: stop requested before the caches synced");
            return 1;
        }
        if (ckube_monotonic_ns() - t0 >= m->cache_sync_timeout_ns) {
            CKUBE_ERROR(
                "failed to wait for caches to sync: timed out waiting for cache to be synced");
            return -1;
        }
    }
    return 0;
}

int ckube_manager_start(ckube_manager *m)
{
    pthread_mutex_lock(&m->mu);
    bool fresh = m->state == MGR_NEW;
    if (fresh)
        m->state = MGR_RUNNING;
    pthread_mutex_unlock(&m->mu);
    if (!fresh)
        return -1;
    CKUBE_INFO("Starting manager");
    int caches = -1;
    bool ok = start_http(m) == 0 && (caches = start_caches(m)) == 0 && start_list(&m->others) == 0;
    if (caches == 1) { /* stopped while waiting: a clean stop, not a failure */
        stop_everything(m);
        pthread_mutex_lock(&m->mu);
        m->state = MGR_DONE;
        m->exit_code = CKUBE_MANAGER_EXIT_OK;
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    if (ok && !m->le)
        ok = start_elected(m) == 0;
    if (ok && pthread_create(&m->loop, NULL, loop_main, m) != 0)
        ok = false;
    if (!ok) {
        stop_everything(m);
        pthread_mutex_lock(&m->mu);
        m->state = MGR_FAILED;
        m->exit_code = CKUBE_MANAGER_EXIT_START_FAILED;
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->mu);
        return -1;
    }
    m->loop_started = true;
    return 0;
}

int ckube_manager_wait(ckube_manager *m)
{
    pthread_mutex_lock(&m->mu);
    while (m->state == MGR_RUNNING)
        pthread_cond_wait(&m->cond, &m->mu);
    int code = m->state == MGR_NEW ? CKUBE_MANAGER_EXIT_START_FAILED : m->exit_code;
    pthread_mutex_unlock(&m->mu);
    return code;
}

void ckube_manager_stop(ckube_manager *m)
{
    if (m && m->pipe[1] >= 0)
        notify(m, 'S');
}

/* ---- signals: one manager at a time handles them ---- */

/* Atomics (lock-free, so async-signal-safe), not just volatile: the
 * handler runs on whichever thread the signal lands on, while the thread
 * in ckube_manager_run sets and clears them (a plain volatile is a data
 * race ThreadSanitizer reports when a SIGTERM comes early). */
static _Atomic int signal_fd = -1;
static _Atomic int signals_seen;

static void on_signal(int sig)
{
    (void)sig;
    if (atomic_fetch_add(&signals_seen, 1) > 0)
        _exit(1); /* second signal: exit directly, as controller-runtime */
    int fd = atomic_load(&signal_fd);
    if (fd >= 0) {
        char s = 'S';
        ssize_t w = write(fd, &s, 1);
        (void)w;
    }
}

int ckube_manager_run(ckube_manager *m)
{
    struct sigaction old_term, old_int;
    if (m->handle_signals) {
        atomic_store(&signals_seen, 0);
        atomic_store(&signal_fd, m->pipe[1]);
        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, &old_term);
        sigaction(SIGINT, &sa, &old_int);
    }
    int code =
        ckube_manager_start(m) == 0 ? ckube_manager_wait(m) : CKUBE_MANAGER_EXIT_START_FAILED;
    if (m->handle_signals) {
        sigaction(SIGTERM, &old_term, NULL);
        sigaction(SIGINT, &old_int, NULL);
        atomic_store(&signal_fd, -1);
    }
    return code;
}

/* ---- queries ---- */

bool ckube_manager_is_leader(ckube_manager *m)
{
    if (m->le)
        return ckube_leader_elector_is_leader(m->le);
    pthread_mutex_lock(&m->mu);
    bool r = m->state == MGR_RUNNING;
    pthread_mutex_unlock(&m->mu);
    return r;
}

bool ckube_manager_elected(ckube_manager *m)
{
    pthread_mutex_lock(&m->mu);
    bool r = m->elected_started;
    pthread_mutex_unlock(&m->mu);
    return r;
}

ckube_leader_elector *ckube_manager_leader_elector(ckube_manager *m)
{
    return m->le;
}

int ckube_manager_metrics_port(ckube_manager *m)
{
    return manager_http_metrics_port(m->http);
}

int ckube_manager_health_port(ckube_manager *m)
{
    return manager_http_health_port(m->http);
}

int ckube_manager_secure_port(ckube_manager *m)
{
    return manager_http_secure_port(m->http);
}

/* ======================================================================
 * Free
 * ====================================================================== */

static void list_free(struct runnable_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].owned_ctx);
    }
    free(l->v);
}

void ckube_manager_free(ckube_manager *m)
{
    if (!m)
        return;
    if (m->loop_started) {
        ckube_manager_stop(m);
        pthread_join(m->loop, NULL);
    }
    if (m->stopper_started)
        pthread_join(m->stopper, NULL);
    ckube_leader_elector_free(m->le);
    manager_http_free(m->http);
    delegated_auth_free(m->auth); /* after the listener that used it */
    free(m->secure_addr);
    free(m->secure_cert);
    free(m->secure_key);
    free(m->secure_client_ca);
    if (m->own_cache)
        ckube_informer_factory_free(m->cache);
    if (m->own_client)
        ckube_client_free(m->client);
    list_free(&m->others);
    list_free(&m->elected);
    for (size_t i = 0; i < m->n_uncached; i++) {
        free((char *)m->uncached[i].group);
        free((char *)m->uncached[i].version);
        free((char *)m->uncached[i].resource);
    }
    free(m->uncached);
    free(m->cache_ns);
    free(m->metrics_addr);
    free(m->health_addr);
    manager_checks_destroy(&m->healthz);
    manager_checks_destroy(&m->readyz);
    if (m->pipe[0] >= 0)
        close(m->pipe[0]);
    if (m->pipe[1] >= 0)
        close(m->pipe[1]);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
