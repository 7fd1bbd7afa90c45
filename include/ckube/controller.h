/* ckube/controller.h - controllers: watches -> keys -> workqueue -> reconcile.
 *
 * The C counterpart of controller-runtime's controller (and of the seed's
 * hand-written Run(threadiness) / processNextWorkItem / syncHandler loop):
 *
 *   informer events --(watch: map to keys, predicates)--> rate-limited
 *   workqueue --(N workers)--> reconcile(ns, name) --> result
 *
 * Result handling matches controller-runtime: OK forgets the key's
 * backoff; ERROR requeues it rate-limited; TERMINAL logs and does not
 * requeue; REQUEUE_AFTER forgets then re-adds after the delay; REQUEUE
 * requeues rate-limited without counting as an error.
 *
 * Beyond controller-runtime:
 *   - read-your-writes: a reconciler reports what it wrote with
 *     ckube_reconcile_wrote(); the next reconcile of that key waits until
 *     the informer cache has seen that resourceVersion (bounded by
 *     `ryw_timeout_ns`), so it never acts on its own stale state;
 *   - a key in error backoff is not pulled forward by events that do not
 *     change the object's generation (status-only or resync updates);
 *   - every run knows why it ran: ckube_reconcile_reason() names the
 *     event, the watch and the object that enqueued it.
 *
 * Thread-safety: ckube_controller_watch only before start; everything
 * else may be called from any thread. Reconcile functions run on worker
 * threads, at most one at a time per key.
 */
#ifndef CKUBE_CONTROLLER_H
#define CKUBE_CONTROLLER_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/informer.h>
#include <ckube/metrics.h>
#include <ckube/workqueue.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_controller ckube_controller;
/* Per-run context handed to the reconcile function; valid only during
 * that call. */
typedef struct ckube_reconcile_ctx ckube_reconcile_ctx;

typedef enum ckube_result_kind {
    CKUBE_RESULT_OK = 0,
    CKUBE_RESULT_ERROR,         /* retry with the rate limiter's backoff */
    CKUBE_RESULT_TERMINAL,      /* do not retry until the next event */
    CKUBE_RESULT_REQUEUE,       /* retry with backoff, not an error */
    CKUBE_RESULT_REQUEUE_AFTER, /* forget backoff, run again after delay */
} ckube_result_kind;

typedef struct ckube_result {
    ckube_result_kind kind;
    uint64_t requeue_after_ns; /* REQUEUE_AFTER only */
} ckube_result;

static inline ckube_result ckube_result_ok(void)
{
    return (ckube_result){CKUBE_RESULT_OK, 0};
}
static inline ckube_result ckube_result_error(void)
{
    return (ckube_result){CKUBE_RESULT_ERROR, 0};
}
static inline ckube_result ckube_result_terminal(void)
{
    return (ckube_result){CKUBE_RESULT_TERMINAL, 0};
}
static inline ckube_result ckube_result_requeue_after(uint64_t ns)
{
    return (ckube_result){CKUBE_RESULT_REQUEUE_AFTER, ns};
}

/* The reconcile function. `ns` is NULL for cluster-scoped objects; both
 * strings are borrowed for the call. It must be idempotent: it reads the
 * desired state (typically from a lister) and drives the actual state
 * towards it. */
typedef ckube_result (*ckube_reconcile_fn)(void *ctx, ckube_reconcile_ctx *rc, const char *ns,
                                           const char *name);

typedef struct ckube_controller_options {
    const char *name;                 /* required: metrics label, log prefix */
    int max_concurrent_reconciles;    /* workers; 0 = 1 */
    ckube_rate_limiter *rate_limiter; /* owned; NULL = default controller limiter */
    ckube_clock *clock;               /* NULL = real */
    ckube_metrics_registry *metrics;  /* NULL = ckube_metrics_default() */
    uint64_t ryw_timeout_ns;          /* read-your-writes wait bound; 0 = 10 s */
} ckube_controller_options;

ckube_controller *ckube_controller_new(const ckube_controller_options *o, ckube_reconcile_fn fn,
                                       void *ctx);
/* Stops (if running) and frees. The informers it watched are not freed. */
void ckube_controller_free(ckube_controller *c);

/* ---- what to watch ---- */

/* Maps an object to the keys to reconcile. Call ckube_enqueue(out, ns,
 * name) for each; `obj` is borrowed. */
typedef struct ckube_key_sink ckube_key_sink;
void ckube_enqueue(ckube_key_sink *out, const char *ns, const char *name);
typedef void (*ckube_map_fn)(void *ctx, const json_t *obj, ckube_key_sink *out);

/* Decides whether an event enqueues. For creates and deletes old is NULL
 * and obj the object; for updates both are set. */
typedef bool (*ckube_predicate_fn)(void *ctx, const json_t *old_obj, const json_t *new_obj);

typedef enum ckube_watch_map {
    CKUBE_MAP_SELF = 0, /* the object's own namespace/name (For()) */
    CKUBE_MAP_OWNER,    /* its controller owner of owner_kind (Owns()) */
    CKUBE_MAP_FUNC,     /* map_fn (Watches() with a mapping handler) */
} ckube_watch_map;

typedef struct ckube_watch_spec {
    ckube_watch_map map;
    /* CKUBE_MAP_OWNER: the owner's apiVersion group ("" = core) and kind;
     * only ownerReferences with controller=true unless all_owners. */
    const char *owner_group;
    const char *owner_kind;
    bool all_owners;
    bool owner_cluster_scoped; /* the owner kind is cluster-scoped */
    ckube_map_fn map_fn;       /* CKUBE_MAP_FUNC */
    void *map_ctx;
    /* All must pass (NULL entries end the list early). */
    ckube_predicate_fn predicates[4];
    void *predicate_ctx[4];
    /* Skip updates whose resourceVersion did not change (resyncs), as
     * the seed's sample controller does. Default false: resyncs enqueue. */
    bool skip_resync;
    const char *label; /* names this watch in reconcile reasons; may be NULL */
} ckube_watch_spec;

/* Adds a watch on `inf` (borrowed; must outlive the controller). Before
 * ckube_controller_start only. Returns 0, or -1 if started. */
int ckube_controller_watch(ckube_controller *c, ckube_shared_informer *inf,
                           const ckube_watch_spec *spec);

/* Ready-made predicates (ctx unused). */
bool ckube_predicate_generation_changed(void *ctx, const json_t *old_obj, const json_t *new_obj);
bool ckube_predicate_labels_changed(void *ctx, const json_t *old_obj, const json_t *new_obj);
bool ckube_predicate_annotations_changed(void *ctx, const json_t *old_obj, const json_t *new_obj);
bool ckube_predicate_resource_version_changed(void *ctx, const json_t *old_obj,
                                              const json_t *new_obj);

/* ---- running ---- */

/* Waits (up to timeout_ns, 0 = 2 min) for every watched informer to sync,
 * then starts the workers. Returns 0, or -1 when the caches did not
 * sync in time (nothing started). */
int ckube_controller_start(ckube_controller *c, uint64_t timeout_ns);
/* Stops taking new work, lets running reconciles finish, joins workers. */
void ckube_controller_stop(ckube_controller *c);
/* Adds a key by hand (e.g. from a timer). Any thread. */
void ckube_controller_enqueue(ckube_controller *c, const char *ns, const char *name);
/* The controller's queue (borrowed), e.g. for metrics or tests. */
ckube_workqueue *ckube_controller_queue(ckube_controller *c);

/* ---- inside a reconcile ---- */

/* Why this run happened, e.g.
 * "configmaps default/app MODIFIED (generation 3) via watch \"owned\"";
 * borrowed for the call. When several events coalesced into one run it
 * names the first and the latest: "<first>; (N more); <latest>". */
const char *ckube_reconcile_reason(const ckube_reconcile_ctx *rc);
/* How many times this key has been retried after errors. */
int ckube_reconcile_retries(const ckube_reconcile_ctx *rc);
/* Read-your-writes: records that this reconcile wrote `written` (the
 * object the server returned) to the resource `inf` caches. The next
 * reconcile of key ns/name waits until `inf` has seen that
 * resourceVersion. `written` is borrowed. */
void ckube_reconcile_wrote(ckube_reconcile_ctx *rc, ckube_shared_informer *inf,
                           const json_t *written);

/* ---- finalizer helpers ---- */

/* True when obj's metadata.finalizers contains `finalizer`. */
bool ckube_has_finalizer(const json_t *obj, const char *finalizer);
/* Adds (or removes) `finalizer` on the object with a merge patch carrying
 * the resourceVersion `obj` was read at, so a concurrent change gives 409
 * rather than lost finalizers. Does nothing (returns 0, *out = NULL) when already
 * present (absent). *out, when not NULL, receives the updated object. */
int ckube_finalizer_add(ckube_client *c, const ckube_gvr *r, const json_t *obj,
                        const char *finalizer, json_t **out, ckube_status **err);
int ckube_finalizer_remove(ckube_client *c, const ckube_gvr *r, const json_t *obj,
                           const char *finalizer, json_t **out, ckube_status **err);

/* Cleanup run before a finalizer is removed: 0 when the external state
 * is gone, -1 to retry later. `obj` is borrowed. */
typedef int (*ckube_finalizer_cleanup_fn)(void *ctx, const json_t *obj);

/* The whole finalizer flow for the object a reconcile just read:
 *  - not being deleted: ensures `finalizer` is on it (adding it when
 *    missing: *updated then receives the patched object, else NULL) and
 *    returns 1: reconcile as usual;
 *  - being deleted and ours is still on it: runs cleanup; when cleanup
 *    returns 0, removes the finalizer (*updated receives what the server
 *    answered) and returns 0 (nothing more to do); when it returns -1,
 *    returns -1 with *err saying so (requeue);
 *  - being deleted and ours is gone: returns 0.
 * API failures return -1 with the server's *err (409 when the object
 * changed meanwhile). `updated` and `err` may be NULL. Report *updated
 * with ckube_reconcile_wrote so the next run sees the cache after it. */
int ckube_finalizer_handle(ckube_client *c, const ckube_gvr *r, const json_t *obj,
                           const char *finalizer, ckube_finalizer_cleanup_fn cleanup, void *ctx,
                           json_t **updated, ckube_status **err);

#ifdef __cplusplus
}
#endif
#endif
