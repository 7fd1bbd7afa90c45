/* health.c - /healthz, /livez and /readyz as kube-apiserver answers them:
 *
 *   GET /readyz                 "ok", or 500 listing every check when one fails
 *   GET /readyz?verbose         "[+]ping ok" ... "readyz check passed"
 *   GET /readyz?exclude=NAME    leaves a check out (repeatable)
 *   GET /readyz/NAME            one check: "ok" or 500; unknown NAME: 404
 *
 * Checks: ping (the server answers), log (logging works), the store's
 * and, for /readyz only, shutdown (fails from the moment a shutdown begins,
 * through --shutdown-delay-duration and the drain, so a load balancer
 * stops sending the server requests while it still answers them).
 *
 * The store's check is upstream's "etcd" (and, for /readyz, its
 * "etcd-readiness") on etcd, and "storage" on the embedded stores. On etcd
 * a prober thread asks etcd for its revision every second (a quorum read,
 * as upstream's check), and the checks read its last answer: a request to
 * /readyz never waits on etcd, and fails once etcd has not answered for
 * PROBE_TIMEOUT_MS (upstream's --etcd-healthcheck-timeout, 2 s). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/server/apiserver.h"
#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

typedef struct check {
    const char *name;
    bool ready_only; /* /readyz only */
    /* NULL when healthy, else why not (static) */
    const char *(*run)(apiserver *srv);
} check;

static const char *check_ping(apiserver *srv)
{
    (void)srv;
    return NULL;
}

/* ---- the shared store's prober ---- */

enum { PROBE_EVERY_MS = 1000, PROBE_TIMEOUT_MS = 2000 };

struct storage_prober {
    storage *st;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* CLOCK_MONOTONIC; stop */
    bool stop;               /* under mu */
    bool healthy;            /* under mu: the last probe's answer */
    struct timespec started; /* under mu: the probe in flight (tv_sec 0: none) */
};

static int64_t ms_since(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static void *prober_main(void *arg)
{
    struct storage_prober *p = arg;
    pthread_setname_np(pthread_self(), "ckube-probe"); /* top -H, perf, gdb */
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        clock_gettime(CLOCK_MONOTONIC, &p->started);
        pthread_mutex_unlock(&p->mu);
        bool ok = storage_current_rev(p->st) >= 0;
        pthread_mutex_lock(&p->mu);
        if (ok != p->healthy)
            CKUBE_INFO("health: the storage %s", ok ? "answers again" : "does not answer");
        p->healthy = ok;
        struct timespec next = p->started;
        p->started.tv_sec = 0;
        next.tv_sec += PROBE_EVERY_MS / 1000;
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &next) == 0) {
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void health_prober_start(apiserver *s)
{
    if (!storage_shared(s->st))
        return;
    struct storage_prober *p = xcalloc(1, sizeof *p);
    p->st = s->st;
    p->healthy = true; /* the storage answered when it was opened */
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->thread, NULL, prober_main, p) != 0) {
        CKUBE_ERROR("health: no prober thread; the storage check reads the store directly");
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        return;
    }
    s->prober = p;
}

void health_prober_stop(apiserver *s)
{
    struct storage_prober *p = s->prober;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL); /* at most one probe's time */
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    s->prober = NULL;
}

static const char *check_storage(apiserver *srv)
{
    struct storage_prober *p = srv->prober;
    if (!p)
        return storage_current_rev(srv->st) < 0 ? "the store does not answer" : NULL;
    pthread_mutex_lock(&p->mu);
    bool ok = p->healthy && (!p->started.tv_sec || ms_since(&p->started) < PROBE_TIMEOUT_MS);
    pthread_mutex_unlock(&p->mu);
    return ok ? NULL : "etcd does not answer";
}

static const char *check_shutdown(apiserver *srv)
{
    return atomic_load(&srv->shutting_down) || atomic_load(&srv->stopping)
               ? "process is shutting down"
               : NULL;
}

static const check checks[] = {
    {"ping", false, check_ping},
    {"log", false, check_ping},
    {"storage", false, check_storage}, /* "etcd" on etcd (check_name) */
    {"etcd-readiness", true, check_storage},
    {"shutdown", true, check_shutdown},
};

/* A check's name on this server, or NULL when it has none here. */
static const char *check_name(const apiserver *srv, const check *c)
{
    bool etcd = srv->prober != NULL;
    if (!strcmp(c->name, "storage"))
        return etcd ? "etcd" : "storage";
    if (!strcmp(c->name, "etcd-readiness"))
        return etcd ? c->name : NULL;
    return c->name;
}

static bool excluded(req_ctx *rc, const char *name)
{
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &rc->query, next)
    {
        if (!strcmp(kv->key, "exclude") && !strcmp(kv->value, name))
            return true;
    }
    return false;
}

bool handle_health(req_ctx *rc, const char *path)
{
    const char *endpoints[] = {"healthz", "livez", "readyz"};
    const char *endpoint = NULL, *one = NULL;
    for (size_t i = 0; i < 3 && !endpoint; i++) {
        size_t n = strlen(endpoints[i]);
        if (path[0] == '/' && !strncmp(path + 1, endpoints[i], n) &&
            (!path[n + 1] || path[n + 1] == '/')) {
            endpoint = endpoints[i];
            one = path[n + 1] == '/' ? path + n + 2 : NULL;
        }
    }
    if (!endpoint)
        return false;
    bool ready = !strcmp(endpoint, "readyz");
    /* The verbose form, built whole; terse answers are "ok". */
    ckube__strbuf list = {0};
    bool ok = true, found = false;
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        const check *c = &checks[i];
        const char *name = check_name(rc->srv, c);
        if (!name || (c->ready_only && !ready) || (one && strcmp(one, name)) ||
            (!one && excluded(rc, name)))
            continue;
        found = true;
        bool passed = !c->run(rc->srv);
        ok &= passed;
        ckube__sb_printf(&list, passed ? "[+]%s ok\n" : "[-]%s failed: reason withheld\n", name);
    }
    if (one && !found) {
        free(ckube__sb_take(&list));
        reply_status(rc, ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                          "the server could not find the requested resource"));
        return true;
    }
    if (!one)
        ckube__sb_printf(&list, "%s check %s\n", endpoint, ok ? "passed" : "failed");
    char *text = ckube__sb_take(&list);
    /* Terse unless asked (not for one check), or failing: then the list
     * says what failed. */
    bool verbose = !ok || (!one && req_query(rc, "verbose"));
    const char *body = verbose && text ? text : ok ? "ok" : "internal server error";
    httpd_add_header(rc->req, "X-Content-Type-Options", "nosniff");
    reply_raw(rc, ok ? 200 : 500, "text/plain; charset=utf-8", body, strlen(body));
    free(text);
    return true;
}
