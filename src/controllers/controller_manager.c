/* controller_manager.c - the built-in controllers on one manager (see
 * controller_manager.h). Every controller is a leader-elected runnable,
 * as in kube-controller-manager: with --leader-elect only the holder of
 * the Lease acts. */
#include "controllers/controller_manager.h"

#include "controllers/clientbuilder.h"
#include "controllers/clusterrole_aggregation.h"
#include "controllers/gc.h"
#include "controllers/namespace.h"
#include "controllers/podcounter.h"
#include "controllers/rootca.h"
#include "controllers/serviceaccount.h"

#include <ckube/events.h>
#include <ckube/log.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A controller as the manager runs it (a runnable's context). */
typedef struct cm_slot {
    struct cm *c;
    const char *sa; /* its ServiceAccount (upstream's name for it) */
    int (*start)(void *);
    void (*stop)(void *);
    void *ctx;
} cm_slot;

struct cm {
    ckube_manager *mgr;
    ckube_event_recorder *rec;
    clientbuilder *cb; /* NULL without --use-service-account-credentials */
    cm_slot slots[8];
    size_t nslots;
    nsctl *ns;
    gc *gc;
    podcounter *pc;
    sactl *sa;
    rootca *rootca;
    cragg *cragg;
};

bool cm_controller_enabled(const char *spec, const char *name)
{
    if (!spec || !*spec)
        spec = "*";
    bool star = false, on = false, off = false;
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 1 && *p == '*')
            star = true;
        else if (n > 1 && *p == '-' && strlen(name) == n - 1 && !strncmp(p + 1, name, n - 1))
            off = true;
        else if (strlen(name) == n && !strncmp(p, name, n))
            on = true;
        p += n + (comma ? 1 : 0);
    }
    return !off && (on || star);
}

/* Runnable adapters: each controller's start is non-blocking, stop joins. */
static int ns_start(void *ctx)
{
    return nsctl_start(ctx);
}
static void ns_stop(void *ctx)
{
    nsctl_stop(ctx);
}
static int gc_run(void *ctx)
{
    return gc_start(ctx);
}
static void gc_halt(void *ctx)
{
    gc_stop(ctx);
}
static int pc_start(void *ctx)
{
    return podcounter_start(ctx);
}
static void pc_stop(void *ctx)
{
    podcounter_stop(ctx);
}

static int sa_start(void *ctx)
{
    return sactl_start(ctx);
}
static void sa_stop(void *ctx)
{
    sactl_stop(ctx);
}

static int rootca_run(void *ctx)
{
    return rootca_start(ctx);
}
static void rootca_halt(void *ctx)
{
    rootca_stop(ctx);
}

static int cragg_run(void *ctx)
{
    return cragg_start(ctx);
}
static void cragg_halt(void *ctx)
{
    cragg_stop(ctx);
}

/* The whole of a file (malloc'd, *len bytes), or NULL. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            char *nb = cap < (64u << 20) ? realloc(buf, cap = cap ? cap * 2 : 8192) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* root-ca-cert-publisher with the CA of the options, else of the config
 * (as kube-controller-manager takes its client config's CA when
 * --root-ca-file is not given). Without CA bytes it does not run: *absent
 * is set (logged) and NULL returned; NULL otherwise means it cannot be
 * set up. */
static rootca *new_rootca(const cm_opts *o, ckube_client *client, ckube_informer_factory *f,
                          bool *absent)
{
    const char *ca = o->root_ca;
    size_t len = o->root_ca_len;
    char *file = NULL;
    if (!ca && o->config->ca_data) { /* data overrides the file, as in the client */
        ca = o->config->ca_data;
        len = o->config->ca_data_len;
    } else if (!ca && o->config->ca_file) {
        ca = file = read_file(o->config->ca_file, &len);
        if (!file)
            CKUBE_WARN("root-ca-cert-publisher: cannot read %s", o->config->ca_file);
    }
    *absent = !ca || !len;
    rootca *r = NULL;
    if (*absent)
        CKUBE_V(1, "root-ca-cert-publisher: no root CA (--root-ca-file, or the kubeconfig's "
                   "certificate authority); not publishing kube-root-ca.crt");
    else
        r = rootca_new(client, f, &(rootca_opts){.ca = ca, .ca_len = len});
    free(file);
    return r;
}

static bool valid_spec(const char *spec, char **err)
{
    if (!spec)
        return true;
    char *copy = strdup(spec);
    bool ok = copy != NULL;
    for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && ok;
         tok = strtok_r(NULL, ",", &save)) {
        const char *name = *tok == '-' ? tok + 1 : tok;
        if (!strcmp(tok, "*"))
            continue;
        char probe[128];
        snprintf(probe, sizeof(probe), ",%s,", name);
        if (!strstr("," CM_CONTROLLERS ",", probe)) {
            if (err && asprintf(err, "--controllers: unknown controller \"%s\" (known: %s)", name,
                                CM_CONTROLLERS) < 0)
                *err = NULL;
            ok = false;
        }
    }
    free(copy);
    return ok;
}

/* The client controller `sa` (upstream's ServiceAccount name for it)
 * writes with: its own with --use-service-account-credentials, else the
 * manager's. NULL when its client cannot be made (logged). */
static ckube_client *client_for(cm *c, const char *sa)
{
    if (!c->cb)
        return ckube_manager_client(c->mgr);
    ckube_status *st = NULL;
    ckube_client *client = clientbuilder_client(c->cb, sa, &st);
    if (!client)
        CKUBE_ERROR("cannot make the client of ServiceAccount %s: %s", sa,
                    st && st->message ? st->message : "out of memory");
    ckube_status_free(st);
    return client;
}

/* Starts a controller once elected. With its own credentials, its
 * ServiceAccount is made and its first token fetched first, as upstream
 * builds a controller's client in its start function: the ServiceAccount
 * exists from then on, whether the controller has written anything yet or
 * not. A failure is no reason not to start: its requests try again. */
static int slot_start(void *p)
{
    cm_slot *s = p;
    ckube_status *st = NULL;
    if (s->c->cb && clientbuilder_prepare(s->c->cb, s->sa, &st) != 0)
        CKUBE_WARN("ServiceAccount %s: cannot fetch its token yet: %s; its requests will try "
                   "again",
                   s->sa, st && st->message ? st->message : "unknown error");
    ckube_status_free(st);
    return s->start(s->ctx);
}

static void slot_stop(void *p)
{
    cm_slot *s = p;
    s->stop(s->ctx);
}

/* Adds a built-in controller as a leader-elected runnable, as
 * kube-controller-manager runs them; `sa` is its ServiceAccount. ctx NULL
 * (its constructor failed) or a refusal: 1, else 0. */
static int add_controller(cm *c, const char *name, const char *sa, int (*start)(void *),
                          void (*stop)(void *), void *ctx)
{
    if (!ctx || c->nslots == sizeof c->slots / sizeof *c->slots)
        return 1;
    cm_slot *s = &c->slots[c->nslots++];
    *s = (cm_slot){.c = c, .sa = sa, .start = start, .stop = stop, .ctx = ctx};
    ckube_runnable r = {.name = name,
                        .start = slot_start,
                        .stop = slot_stop,
                        .ctx = s,
                        .needs_leader_election = true};
    return ckube_manager_add(c->mgr, &r) != 0;
}

cm *cm_new(const cm_opts *o, char **err)
{
    if (err)
        *err = NULL;
    if (!o || !o->config || !valid_spec(o->controllers, err))
        return NULL;
    cm *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    ckube_manager_options mo = {
        .config = o->config,
        .leader_election = o->leader_elect,
        .leader_election_namespace = o->lease_namespace ? o->lease_namespace : "kube-system",
        .leader_election_id = o->lease_name ? o->lease_name : "kube-controller-manager",
        .lease_duration_ns = o->lease_duration_ns,
        .renew_deadline_ns = o->renew_deadline_ns,
        .retry_period_ns = o->retry_period_ns,
        .leader_election_release_on_cancel = true,
        .metrics_bind_address = o->metrics_bind_address ? o->metrics_bind_address : "0",
        .health_probe_bind_address = o->health_bind_address ? o->health_bind_address : "0",
        .handle_signals = o->handle_signals,
        .secure_serving = o->secure,
    };
    c->mgr = ckube_manager_new(&mo, err);
    if (!c->mgr) {
        free(c);
        return NULL;
    }
    /* The manager's client is the controller-manager's own identity: the
     * shared informers (f), the Lease, the events, and, with
     * --use-service-account-credentials, the ServiceAccounts and
     * TokenRequests of the controllers' clients (upstream's
     * rootClientBuilder and "shared-informers" client). */
    ckube_client *client = ckube_manager_client(c->mgr);
    ckube_informer_factory *f = ckube_manager_cache(c->mgr);
    if (o->use_service_account_credentials) {
        clientbuilder_opts bo = {.lifetime_seconds = o->sa_token_lifetime_seconds};
        if (!(c->cb = clientbuilder_new(client, o->config, &bo))) {
            if (err && !*err)
                *err = strdup("cannot set up the controllers' clients: out of memory");
            cm_free(c);
            return NULL;
        }
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    ckube_status *st = NULL;
    c->rec = ckube_event_recorder_new(
        client, &(ckube_event_recorder_opts){.component = "ckube-controller-manager", .host = host},
        &st);
    ckube_status_free(st);

    const char *spec = o->controllers;
    int rc = 0;
    if (cm_controller_enabled(spec, "namespace")) {
        const char *sa = "namespace-controller";
        ckube_client *cc = client_for(c, sa);
        c->ns = cc ? nsctl_new(cc, f, NULL) : NULL;
        rc |= add_controller(c, "namespace-controller", sa, ns_start, ns_stop, c->ns);
    }
    if (cm_controller_enabled(spec, "garbagecollector")) {
        const char *sa = "generic-garbage-collector";
        ckube_client *cc = client_for(c, sa);
        c->gc = cc ? gc_new(cc, NULL) : NULL;
        rc |= add_controller(c, "garbage-collector-controller", sa, gc_run, gc_halt, c->gc);
    }
    if (cm_controller_enabled(spec, "podcounter")) {
        podcounter_opts po = {.period_ns = o->podcounter_period_ns};
        /* ckube's own controller; its ServiceAccount and least-privilege
         * role are ckube's bootstrap policy (registry/rbac/ckube_policy.yaml) */
        const char *sa = "pod-counter";
        ckube_client *cc = client_for(c, sa);
        c->pc = cc ? podcounter_new(cc, f, c->rec, &po) : NULL;
        rc |= add_controller(c, "pod-counter", sa, pc_start, pc_stop, c->pc);
    }
    if (cm_controller_enabled(spec, "serviceaccount")) {
        const char *sa = "service-account-controller";
        ckube_client *cc = client_for(c, sa);
        c->sa = cc ? sactl_new(cc, f, NULL) : NULL;
        rc |= add_controller(c, "serviceaccount-controller", sa, sa_start, sa_stop, c->sa);
    }
    if (cm_controller_enabled(spec, "root-ca-cert-publisher")) {
        bool absent = false;
        const char *sa = "root-ca-cert-publisher";
        ckube_client *cc = client_for(c, sa);
        c->rootca = cc ? new_rootca(o, cc, f, &absent) : NULL;
        if (!absent) /* without a CA it does not run (logged): not a failure */
            rc |= add_controller(c, "root-ca-certificate-publisher-controller", sa, rootca_run,
                                 rootca_halt, c->rootca);
    }
    if (cm_controller_enabled(spec, "clusterrole-aggregation")) {
        const char *sa = "clusterrole-aggregation-controller";
        ckube_client *cc = client_for(c, sa);
        c->cragg = cc ? cragg_new(cc, f, NULL) : NULL;
        rc |= add_controller(c, "clusterrole-aggregation-controller", sa, cragg_run, cragg_halt,
                             c->cragg);
    }
    if (rc) {
        if (err && !*err)
            *err = strdup("cannot set up the controllers");
        cm_free(c);
        return NULL;
    }
    return c;
}

int cm_start(cm *c)
{
    return c ? ckube_manager_start(c->mgr) : -1;
}

int cm_wait(cm *c)
{
    return c ? ckube_manager_wait(c->mgr) : -1;
}

int cm_run(cm *c)
{
    return c ? ckube_manager_run(c->mgr) : -1;
}

void cm_stop(cm *c)
{
    if (c)
        ckube_manager_stop(c->mgr);
}

void cm_free(cm *c)
{
    if (!c)
        return;
    /* Order matters. The manager stops the runnables (controllers); the
     * recorder then flushes what they recorded through the manager's
     * client, which must still exist (freeing the manager frees it: the
     * recorder's sender thread used to post through a freed client on
     * SIGTERM); then the manager and its cache, then the controllers. */
    ckube_manager_stop(c->mgr);
    ckube_manager_wait(c->mgr);
    ckube_event_recorder_free(c->rec);
    ckube_manager_free(c->mgr);
    podcounter_free(c->pc);
    sactl_free(c->sa);
    rootca_free(c->rootca);
    cragg_free(c->cragg);
    nsctl_free(c->ns);
    gc_free(c->gc);
    /* Last: the controllers above made their requests with its clients. */
    clientbuilder_free(c->cb);
    free(c);
}
