/* manager_internal.h - pieces of the manager shared between manager.c and
 * manager_http.c (not installed). */
#ifndef CKUBE_MANAGER_INTERNAL_H
#define CKUBE_MANAGER_INTERNAL_H

#include <ckube/manager.h>
#include <ckube/metrics.h>
#include <pthread.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "runtime/delegated_auth.h"
#include "runtime/secure_serving.h"

/* A named list of health checks, safe to extend while being served. */
typedef struct manager_check {
    char *name; /* owned */
    ckube_health_check_fn fn;
    void *ctx; /* borrowed */
} manager_check;

typedef struct manager_checks {
    pthread_mutex_t mu;
    manager_check *v; /* under mu */
    size_t n, cap;
    const char *endpoint; /* "healthz" or "readyz"; static */
} manager_checks;

void manager_checks_init(manager_checks *c, const char *endpoint);
void manager_checks_destroy(manager_checks *c);
/* Appends a check (name copied). -1 on empty or duplicate name. */
int manager_checks_add(manager_checks *c, const char *name, ckube_health_check_fn fn, void *ctx);

/* The HTTP endpoints: one event loop on one thread serving the metrics
 * listener and the health probe listener. */
typedef struct manager_http manager_http;

manager_http *manager_http_new(void);
/* Binds the listeners (before start). `addr` is "host:port" ("" host =
 * every interface, "[v6]:port" allowed). Return -1 with *err (malloc'd)
 * when the address is malformed or cannot be bound. The registry and
 * the checks are borrowed and must outlive the server. */
int manager_http_listen_metrics(manager_http *h, const char *addr, ckube_metrics_registry *reg,
                                char **err);
int manager_http_listen_health(manager_http *h, const char *addr, manager_checks *healthz,
                               manager_checks *readyz, char **err);
/* The secure listener: HTTPS with the certificate of `tls` (taken: freed
 * with the server, also on failure), each request admitted by `auth`
 * (borrowed), serving /metrics from `reg` and /healthz, /readyz from the
 * checks. */
int manager_http_listen_secure(manager_http *h, const char *addr, serving_cert *tls,
                               delegated_auth *auth, ckube_metrics_registry *reg,
                               manager_checks *healthz, manager_checks *readyz, char **err);
/* Starts the loop thread (when anything is bound). -1 with *err
 * (malloc'd) on failure. */
int manager_http_start(manager_http *h, char **err);
/* Stops the loop and joins its thread; listeners are closed. Idempotent. */
void manager_http_stop(manager_http *h);
/* Stops and frees. NULL-safe. */
void manager_http_free(manager_http *h);
/* Bound ports (0 when not bound). */
int manager_http_metrics_port(const manager_http *h);
int manager_http_health_port(const manager_http *h);
int manager_http_secure_port(const manager_http *h);

#endif
