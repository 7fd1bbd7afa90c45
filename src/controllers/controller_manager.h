/* controller_manager.h - the built-in controllers on one ckube_manager:
 * what `ckube controller-manager` runs, and what `ckube server` runs
 * in-process by default. They reach the API server only through the
 * client, like any other controller. */
#ifndef CKUBE_CONTROLLERS_CONTROLLER_MANAGER_H
#define CKUBE_CONTROLLERS_CONTROLLER_MANAGER_H

#include <ckube/config.h>
#include <ckube/manager.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The controllers, by their --controllers names. */
#define CM_CONTROLLERS                                                                             \
    "namespace,garbagecollector,podcounter,serviceaccount,root-ca-cert-publisher,"                 \
    "clusterrole-aggregation"

typedef struct cm_opts {
    const ckube_config *config; /* required; copied by the manager */
    /* kube-controller-manager's syntax: "*" (all; also the default when
     * NULL), names, "-name" to disable, comma-separated. */
    const char *controllers;
    bool leader_elect;
    const char *lease_namespace; /* NULL = "kube-system" */
    const char *lease_name;      /* NULL = "kube-controller-manager" (upstream's) */
    uint64_t lease_duration_ns, renew_deadline_ns, retry_period_ns; /* 0 = 15/10/2 s */
    /* ckube's plain-HTTP endpoints (loopback addresses; upstream removed
     * its insecure port): /metrics, and /healthz with /readyz. NULL or "0"
     * = off. */
    const char *metrics_bind_address;
    const char *health_bind_address;
    /* kube-controller-manager's --secure-port: /metrics, /healthz and
     * /readyz over HTTPS with delegated authentication and authorization
     * (ckube/manager.h); bind_address NULL = off. Borrowed. */
    ckube_secure_serving_options secure;
    bool handle_signals;
    uint64_t podcounter_period_ns; /* 0 = 10 s */
    /* The CA bundle (PEM) root-ca-cert-publisher puts in every namespace
     * (kube-controller-manager's --root-ca-file); borrowed for cm_new.
     * NULL = the config's CA (ca_data, else ca_file's contents); with
     * neither, that controller does not run. */
    const char *root_ca;
    size_t root_ca_len;
    /* kube-controller-manager's --use-service-account-credentials: each
     * controller's requests carry a token of its own ServiceAccount in
     * kube-system (upstream's name for that controller: namespace-controller,
     * generic-garbage-collector, ...; see controllers/clientbuilder.h),
     * while the shared informers, the Lease and the events keep the
     * config's identity, as upstream's. false: every request is the
     * config's. */
    bool use_service_account_credentials;
    /* With it: how long a controller uses a token (clientbuilder_opts'
     * lifetime_seconds; 0 = 3600). */
    int64_t sa_token_lifetime_seconds;
} cm_opts;

typedef struct cm cm;

/* Builds the manager and the enabled controllers (nothing runs yet).
 * Returns NULL with *err (malloc'd; caller frees) on bad options. */
cm *cm_new(const cm_opts *o, char **err);
/* Starts the manager (and, once elected, the controllers). 0 or the
 * manager's non-zero exit code. */
int cm_start(cm *c);
/* Blocks until stopped (signal, cm_stop or lost leadership); returns the
 * manager's exit code (CKUBE_MANAGER_EXIT_*). */
int cm_wait(cm *c);
/* cm_start + cm_wait, with SIGTERM/SIGINT stopping it gracefully when
 * handle_signals was set (a second signal exits at once). */
int cm_run(cm *c);
/* Asks it to stop; async-signal-safe. */
void cm_stop(cm *c);
/* Stops (if needed) and frees everything. */
void cm_free(cm *c);
/* Whether controller `name` is enabled by the --controllers value `spec`
 * (exposed for tests). */
bool cm_controller_enabled(const char *spec, const char *name);

#endif
