/* controller_internal.h - the controller's private state (controller.c). */
#ifndef CKUBE_RUNTIME_CONTROLLER_INTERNAL_H
#define CKUBE_RUNTIME_CONTROLLER_INTERNAL_H

#include <ckube/controller.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/tree.h>

/* A read-your-writes hold on one informer: wait until it has delivered
 * rv. */
struct ryw_hold {
    ckube_shared_informer *inf; /* borrowed */
    uint64_t rv;
};

/* Bookkeeping of one key; exists only while it carries something. */
struct keyinfo {
    RB_ENTRY(keyinfo) link;
    char *key;         /* owned */
    char *reason;      /* owned; first cause since the last run, or NULL */
    char *last_reason; /* owned; latest cause when there were several */
    size_t nreasons;
    bool in_backoff; /* requeued rate-limited after an error, not yet run */
    /* Read-your-writes holds: one per informer the reconcile wrote
     * through, each until that informer has delivered the write (a
     * reconcile that creates a child and then updates its parent's status
     * must see both). None: nhold == 0. */
    struct ryw_hold *holds; /* owned */
    size_t nhold, holdcap;
    uint64_t hold_deadline; /* on the controller's clock */
    bool hold_parked;       /* dequeued and waiting for the cache */
};
RB_HEAD(keytree, keyinfo);

/* The highest resourceVersion an informer has delivered to this
 * controller's handlers. */
struct inf_seen {
    ckube_shared_informer *inf; /* borrowed */
    uint64_t rv;
};

struct watch_entry {
    ckube_controller *c;
    ckube_shared_informer *inf; /* borrowed */
    ckube_watch_spec spec;      /* label, owner_kind, owner_group owned */
    char *resource_label;       /* owned: the informer's name */
    ckube_handler_reg *reg;     /* owned by the informer; NULL = none */
};

struct ckube_controller {
    char *name;
    ckube_reconcile_fn fn;
    void *ctx;
    ckube_clock *clock;
    int nworkers;
    uint64_t ryw_timeout_ns;
    ckube_workqueue *queue;

    struct watch_entry **watches;
    size_t nwatches;

    pthread_mutex_t mu; /* guards keys, seen, nholds */
    struct keytree keys;
    struct inf_seen *seen;
    size_t nseen;
    size_t nholds;

    pthread_t *workers;
    int nstarted;
    bool started, stopped;

    /* Metrics children (controller-runtime's names); NULL = none. */
    ckube_metric *m_total_success, *m_total_error, *m_total_requeue, *m_total_requeue_after;
    ckube_metric *m_errors, *m_terminal_errors, *m_time, *m_active, *m_max;
};

#endif
