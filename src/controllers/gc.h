/* gc.h - the garbage collector (kube-controller-manager's
 * "garbagecollector" controller), built only on libckube's public API.
 *
 * What it does (upstream's rules):
 *  - Monitors: one informer per resource that discovery lists with the
 *    list, watch and delete verbs (preferred version of each group,
 *    built-in and custom; core and events.k8s.io "events" ignored as
 *    upstream does). Discovery runs again every resync period and soon
 *    after a CustomResourceDefinition is added or removed; monitors of
 *    resources that appeared are started (workers pause until they have
 *    synced), those of resources that vanished are stopped.
 *  - A graph keyed by uid: each object's ownerReferences make it a
 *    dependent of its owners. An owner referenced but never observed is a
 *    "virtual" node that is verified against the server.
 *  - An object none of whose owners exists any more is deleted, with the
 *    propagation its own finalizers ask for (Background by default) and
 *    its uid as a precondition. Each owner is checked with a live GET on
 *    its resource (resolved from apiVersion + kind through a RESTMapper):
 *    not found, or found with another uid (the name was reused), means
 *    gone. Nothing is ever deleted because an owner is merely missing
 *    from a cache. Dangling references of an object that still has a
 *    live owner are removed from it instead.
 *  - Foreground: an owner with deletionTimestamp and the
 *    "foregroundDeletion" finalizer has all its dependents deleted (those
 *    that have dependents of their own with propagationPolicy
 *    Foreground); its finalizer is removed once no dependent with
 *    blockOwnerDeletion=true remains.
 *  - Orphan: an owner with deletionTimestamp and the "orphan" finalizer
 *    has its ownerReference removed from every dependent, then its
 *    "orphan" finalizer removed.
 *
 * Threads: a run thread (discovery, monitors), one graph thread applying
 * informer events to the graph, and worker threads for the
 * attempt-to-delete and attempt-to-orphan queues (started once the first
 * monitors have synced). gc_start returns at once.
 */
#ifndef CKUBE_CONTROLLERS_GC_H
#define CKUBE_CONTROLLERS_GC_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/metrics.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GC_FINALIZER_FOREGROUND "foregroundDeletion"
#define GC_FINALIZER_ORPHAN "orphan"

typedef struct gc_opts {
    int delete_workers;              /* attempt-to-delete workers; 0 = 4 */
    int orphan_workers;              /* attempt-to-orphan workers; 0 = 1 */
    uint64_t resync_ns;              /* rediscovery period; 0 = 30 s */
    uint64_t sync_timeout_ns;        /* wait for new monitors to sync; 0 = 30 s */
    ckube_metrics_registry *metrics; /* workqueue metrics; NULL = default; borrowed */
    ckube_clock *clock;              /* NULL = real; borrowed */
} gc_opts;

typedef struct gc gc;

/* A collector over client `c` (borrowed: it must outlive the collector).
 * The collector owns its informers (it starts and stops monitors as
 * resources come and go, which a shared factory cannot). `o` may be
 * NULL. Returns NULL on allocation failure. */
gc *gc_new(ckube_client *c, const gc_opts *o);
/* Starts the run thread (discovery, monitors, then workers) and returns.
 * Returns 0, or -1 when already started or a thread cannot be created. */
int gc_start(gc *g);
/* Stops every thread (in-flight API calls finish first) and every
 * monitor. Idempotent. */
void gc_stop(gc *g);
/* Stops if needed and frees everything. NULL-safe. */
void gc_free(gc *g);

/* True once the first monitors have synced and the workers run.
 * Thread-safe. */
bool gc_ready(gc *g);
/* For tests and metrics: the number of nodes in the graph, and of
 * running monitors. Thread-safe. */
size_t gc_graph_size(gc *g);
size_t gc_monitor_count(gc *g);

#endif
