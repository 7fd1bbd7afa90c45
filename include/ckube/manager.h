/* ckube/manager.h - the manager: runs controllers and other runnables with
 * a shared cache, leader election, /metrics and health probes
 * (controller-runtime's manager.Manager).
 *
 *   ckube_manager_options o = {.config = cfg, .leader_election = true,
 *                              .leader_election_id = "my-operator"};
 *   ckube_manager *m = ckube_manager_new(&o, &err);
 *   ckube_shared_informer *pods = ckube_manager_informer(m, &PODS);
 *   ... ckube_controller_watch(ctl, pods, ...);
 *   ckube_manager_add_controller(m, ctl);
 *   int code = ckube_manager_run(m);      // until SIGTERM / stop / lost lease
 *   ckube_manager_free(m);
 *
 * Start order (ckube_manager_start):
 *   1. the HTTP servers (metrics, health probes);
 *   2. the caches: every informer of the factory is started and synced
 *      (bounded by cache_sync_timeout_ns, 2 min by default; a stop
 *      requested meanwhile ends the wait at once and the manager exits
 *      with CKUBE_MANAGER_EXIT_OK);
 *   3. the runnables that do not need leader election, in the order added;
 *   4. leader election; the runnables that need it start once this
 *      replica leads (at once when leader election is disabled).
 * Stop (ckube_manager_stop, a signal, or lost leadership) runs the exact
 * reverse: elected runnables (reverse order), leader election (releasing
 * the lease when asked), the other runnables (reverse order), the caches
 * (the factory is shut down), the HTTP servers. It is bounded by the
 * graceful shutdown timeout (30 s): when that passes, ckube_manager_wait
 * returns CKUBE_MANAGER_EXIT_SHUTDOWN_TIMEOUT while the stop goes on in
 * the background (ckube_manager_free still waits for it).
 *
 * Losing the lease (no renewal within RenewDeadline) stops everything and
 * makes ckube_manager_wait/run return CKUBE_MANAGER_EXIT_LEADER_LOST:
 * as in controller-runtime, the process is expected to exit and restart
 * as a candidate rather than carry on with state from its reign.
 *
 * Threads: a manager thread handles leadership changes and the stop; the
 * HTTP endpoints run on one libevent (evhttp) thread of their own. Health
 * checks run on the HTTP thread.
 */
#ifndef CKUBE_MANAGER_H
#define CKUBE_MANAGER_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/config.h>
#include <ckube/controller.h>
#include <ckube/informer.h>
#include <ckube/leaderelection.h>
#include <ckube/metrics.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_manager ckube_manager;

/* What ckube_manager_wait / ckube_manager_run return. */
#define CKUBE_MANAGER_EXIT_OK 0               /* stopped on request */
#define CKUBE_MANAGER_EXIT_LEADER_LOST 1      /* "leader election lost" */
#define CKUBE_MANAGER_EXIT_START_FAILED 2     /* HTTP bind, cache sync or a runnable failed */
#define CKUBE_MANAGER_EXIT_SHUTDOWN_TIMEOUT 3 /* runnables outlived the grace period */
#define CKUBE_MANAGER_EXIT_RUNNABLE_FAILED 4  /* an elected runnable failed to start */

#define CKUBE_MANAGER_DEFAULT_SYNC_PERIOD_NS CKUBE_SEC(10 * 3600)
#define CKUBE_MANAGER_DEFAULT_METRICS_ADDR "127.0.0.1:8080"
#define CKUBE_MANAGER_DEFAULT_HEALTH_ADDR "127.0.0.1:8081"

/* A unit of work the manager starts and stops (controller-runtime's
 * Runnable, made explicit for C): `start` must not block (it starts its
 * own threads) and returns 0 or -1; `stop` stops them and joins them
 * before returning. `name` is for logs. Both run on the manager's
 * threads. ckube_manager_add copies the struct and the name; ctx is
 * borrowed and must outlive the manager. */
typedef struct ckube_runnable {
    const char *name;
    int (*start)(void *ctx);
    void (*stop)(void *ctx);
    void *ctx;
    bool needs_leader_election;
} ckube_runnable;

/* A health or readiness check: 0 = healthy; otherwise failing, with
 * *reason optionally set to a malloc'd explanation (freed by the
 * manager). Runs on the HTTP thread; must be thread-safe and quick. */
typedef int (*ckube_health_check_fn)(void *ctx, char **reason);

/* Secure serving of the manager's endpoints, as kube-controller-manager
 * serves its --secure-port and controller-runtime its metrics with
 * SecureServing and filters.WithAuthenticationAndAuthorization: /metrics,
 * /healthz and /readyz over HTTPS (TLS 1.2+), each request authenticated
 * and authorized by the API server the manager's client talks to
 * (k8s.io/apiserver's delegating authentication and authorization):
 *
 *  - authentication, in upstream's order: a client certificate verified
 *    against the client CA (user CN, groups O); else a bearer token, asked
 *    about with a TokenReview; else system:anonymous in
 *    system:unauthenticated. A certificate or token that fails is 401
 *    with upstream's Status ("Unauthorized"), whatever the path;
 *  - authorization: members of an always-allowed group (system:masters)
 *    and always-allowed paths (/healthz, /readyz, /livez) pass; anything
 *    else is a SubjectAccessReview for the path and the method's verb
 *    ("get" for GET): a denial is 403 with upstream's Status (`forbidden:
 *    User "system:anonymous" cannot get path "/metrics"`), a review that
 *    fails is 500.
 *
 * TokenReview and SubjectAccessReview answers are cached (upstream's 10 s
 * for allowed, denied and tokens alike). The manager's identity needs
 * `create` on tokenreviews.authentication.k8s.io and
 * subjectaccessreviews.authorization.k8s.io (the bootstrap policy's
 * system:auth-delegator grants both), and to read the client CA from the
 * ConfigMap, `get` on it (extension-apiserver-authentication-reader). */
typedef struct ckube_secure_serving_options {
    /* "host:port"; NULL or "0" = off; port 0 picks a free port (see
     * ckube_manager_secure_port). Copied. */
    const char *bind_address;
    /* PEM files of the serving certificate (its chain may follow) and its
     * key, read at start and again when either changes (looked at, at
     * most once a second, when a connection comes: a rotation reaches
     * the next connection; a half-written one keeps the certificate that
     * worked). Both NULL: a CA and a certificate for localhost
     * and 127.0.0.1 made in memory at start (P-256, one year), as
     * upstream's self-signed default. */
    const char *cert_file, *key_file;
    /* PEM bundle of the CAs whose client certificates are users. NULL =
     * the client-ca-file of ConfigMap
     * kube-system/extension-apiserver-authentication (which ckube server
     * and kube-apiserver publish), read at start; when it cannot be read,
     * client certificates are not asked for (logged) unless
     * skip_lookup is set. */
    const char *client_ca_file;
    bool skip_lookup; /* upstream's --authentication-skip-lookup */
    /* NULL-terminated lists, copied. always_allow_paths: exact paths, or
     * prefixes when ending in '*'; NULL = "/healthz", "/readyz", "/livez"
     * (an empty list: none). always_allow_groups: NULL =
     * "system:masters". */
    const char *const *always_allow_paths;
    const char *const *always_allow_groups;
    /* How long review answers are kept; 0 = 10 s; < 0 = not cached. */
    int64_t cache_ttl_ns;
} ckube_secure_serving_options;

typedef struct ckube_manager_options {
    /* How to reach the API server: `client` (borrowed; must outlive the
     * manager) or else `config` (copied; the manager owns the client it
     * builds). One is required. */
    ckube_client *client;
    const ckube_config *config;

    /* The cache. NULL = the manager creates a factory (restricted to
     * cache_namespace when set) with the sync period below; a factory
     * given here is borrowed (the manager starts and, on stop, shuts it
     * down, but never frees it). */
    ckube_informer_factory *cache;
    const char *cache_namespace; /* copied; NULL = every namespace */
    /* Resync period of the manager's own factory; 0 = 10 h. Jittered by
     * a factor in [0.9, 1.1) so replicas do not resync in step. */
    uint64_t sync_period_ns;
    /* Resources ckube_manager_get/list read from the server, never from
     * the cache (e.g. Secrets one does not want cached). Copied. */
    const ckube_gvr *uncached_resources;
    size_t n_uncached_resources;
    uint64_t cache_sync_timeout_ns; /* 0 = 2 min */

    /* Leader election on the Lease namespace/id. */
    bool leader_election;
    const char *leader_election_namespace; /* NULL = the client's namespace */
    const char *leader_election_id;        /* required when enabled */
    const char *leader_election_identity;  /* NULL = hostname_uuid */
    uint64_t lease_duration_ns;            /* 0 = 15 s */
    uint64_t renew_deadline_ns;            /* 0 = 10 s */
    uint64_t retry_period_ns;              /* 0 = 2 s */
    bool leader_election_release_on_cancel;

    /* "host:port" to serve /metrics on; NULL = "127.0.0.1:8080"; "0" =
     * off; port 0 picks a free port (see ckube_manager_metrics_port). */
    const char *metrics_bind_address;
    /* Same for /healthz and /readyz; NULL = "127.0.0.1:8081"; "0" = off. */
    const char *health_probe_bind_address;
    ckube_metrics_registry *metrics; /* served at /metrics; NULL = default */

    /* 0 = 30 s; < 0 = wait for ever. */
    int64_t graceful_shutdown_timeout_ns;
    /* ckube_manager_run handles SIGTERM and SIGINT: the first stops the
     * manager gracefully, a second one exits the process with code 1. */
    bool handle_signals;
    ckube_clock *clock; /* NULL = real; borrowed */
    /* HTTPS endpoints with delegated authentication and authorization
     * (see ckube_secure_serving_options); zero = off. Last in the struct
     * so that the fields above keep their offsets. */
    ckube_secure_serving_options secure_serving;
} ckube_manager_options;

/* Validates the options (leader election durations as client-go) and
 * builds the client, cache and elector. Returns NULL with *err (malloc'd,
 * caller frees; err may be NULL) on failure. */
ckube_manager *ckube_manager_new(const ckube_manager_options *opts, char **err);
/* Stops (if running; waiting for a stop in progress) and frees the
 * manager and everything it owns. Borrowed things (client, factory,
 * runnables' ctx, controllers) are left to the caller. NULL-safe. */
void ckube_manager_free(ckube_manager *m);

/* ---- what it runs ---- */

/* Adds a runnable (copied). Before ckube_manager_start only: returns -1
 * afterwards or on bad arguments (no start/stop). */
int ckube_manager_add(ckube_manager *m, const ckube_runnable *r);
/* Adds a controller (borrowed; free it after the manager) as a runnable
 * that needs leader election: ckube_controller_start(c, cache sync
 * timeout) / ckube_controller_stop(c). */
int ckube_manager_add_controller(ckube_manager *m, ckube_controller *c);
/* Adds a named check to /healthz (liveness) or /readyz (readiness). Any
 * time. `name` is copied; ctx borrowed. -1 on a duplicate or empty name. */
int ckube_manager_add_healthz_check(ckube_manager *m, const char *name, ckube_health_check_fn fn,
                                    void *ctx);
int ckube_manager_add_readyz_check(ckube_manager *m, const char *name, ckube_health_check_fn fn,
                                   void *ctx);

/* ---- client and cache ---- */

/* The client (borrowed). Writes go straight to the server through it. */
ckube_client *ckube_manager_client(ckube_manager *m);
/* The cache's factory (borrowed). */
ckube_informer_factory *ckube_manager_cache(ckube_manager *m);
/* The shared informer of gvr in the cache's namespace (all namespaces
 * when unrestricted), for controllers to watch. Borrowed; NULL on
 * failure. Informers obtained before start are synced by start. */
ckube_shared_informer *ckube_manager_informer(ckube_manager *m, const ckube_gvr *gvr);
/* The jittered sync period in use. */
uint64_t ckube_manager_sync_period_ns(const ckube_manager *m);

/* Reads ns/name (ns NULL for cluster-scoped) from the cache: the
 * informer is started on first use and waited for (cache sync timeout).
 * Resources in uncached_resources are read from the server instead. *out
 * is a private deep copy the caller owns (json_decref) and may modify.
 * Returns -1 with *err: 404 NotFound when absent; code 0 when the cache
 * is restricted to another namespace or did not sync. Any thread. */
int ckube_manager_get(ckube_manager *m, const ckube_gvr *gvr, const char *ns, const char *name,
                      json_t **out, ckube_status **err);
/* Lists objects of gvr in ns (NULL = all namespaces) matching
 * label_selector (NULL = all), same cache rules; *out is a List object
 * {"items": [...]} the caller owns. */
int ckube_manager_list(ckube_manager *m, const ckube_gvr *gvr, const char *ns,
                       const char *label_selector, json_t **out, ckube_status **err);

/* ---- running ---- */

/* Starts everything (see the order above) and returns: 0 once the
 * non-elected runnables are running and the election is under way; -1
 * when something failed to start (what had started is stopped again; the
 * reason is logged). Once only. */
int ckube_manager_start(ckube_manager *m);
/* Blocks until the manager has stopped; returns a CKUBE_MANAGER_EXIT_*
 * code. After a failed start returns CKUBE_MANAGER_EXIT_START_FAILED at
 * once. */
int ckube_manager_wait(ckube_manager *m);
/* start + wait, with signal handling when opts.handle_signals. */
int ckube_manager_run(ckube_manager *m);
/* Asks the manager to stop and returns at once. Thread-safe and
 * async-signal-safe (one write(2) to the manager's self-pipe), so it may
 * be called from a signal handler. */
void ckube_manager_stop(ckube_manager *m);

/* True while this replica leads (always true once started when leader
 * election is disabled). */
bool ckube_manager_is_leader(ckube_manager *m);
/* True once the elected runnables have been started. */
bool ckube_manager_elected(ckube_manager *m);
/* The elector (borrowed; NULL when leader election is disabled). */
ckube_leader_elector *ckube_manager_leader_elector(ckube_manager *m);
/* The ports the HTTP servers listen on (0 when disabled / not started). */
int ckube_manager_metrics_port(ckube_manager *m);
int ckube_manager_health_port(ckube_manager *m);
int ckube_manager_secure_port(ckube_manager *m);

#ifdef __cplusplus
}
#endif
#endif
