/* namespace.h - the namespace lifecycle controller (kube-controller-manager's
 * "namespace" controller), built only on libckube's public API.
 *
 * When a namespace is deleted the server keeps it Terminating
 * (metadata.deletionTimestamp set, spec.finalizers ["kubernetes"]). For
 * every such namespace this controller:
 *   1. discovers every namespaced resource that supports list and delete
 *      or deletecollection (custom resources included; discovery runs
 *      again on every pass, so a CRD created a moment ago is seen);
 *   2. deletes everything in the namespace: deletecollection where the
 *      resource supports it (propagationPolicy Background), else list +
 *      delete of each object;
 *   3. lists again and, while anything remains (typically objects held by
 *      their own finalizers), requeues the namespace after a delay;
 *   4. reports the pass in status.conditions as upstream does (types
 *      NamespaceDeletionDiscoveryFailure, NamespaceDeletionGroupVersion-
 *      ParsingFailure, NamespaceDeletionContentFailure,
 *      NamespaceContentRemaining, NamespaceFinalizersRemaining, with
 *      upstream's reasons and messages), written through /status only
 *      when something changed;
 *   5. once nothing is left, PUTs /finalize without "kubernetes" in
 *      spec.finalizers, after which the server removes the namespace.
 *
 * Threads: nsctl_start returns at once; a start thread waits for the
 * namespaces informer to sync, then the controller's workers run.
 */
#ifndef CKUBE_CONTROLLERS_NAMESPACE_H
#define CKUBE_CONTROLLERS_NAMESPACE_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/informer.h>
#include <ckube/metrics.h>
#include <stdint.h>

/* The finalizer token this controller owns in spec.finalizers. */
#define NSCTL_FINALIZER "kubernetes"

typedef struct nsctl_opts {
    int workers;                     /* concurrent namespaces; 0 = 2 */
    uint64_t content_requeue_ns;     /* objects remain, none with finalizers; 0 = 1 s */
    uint64_t finalizer_requeue_ns;   /* objects held by finalizers remain; 0 = 8 s
                                        (upstream: a 15 s estimate, requeued at half + 1) */
    ckube_metrics_registry *metrics; /* NULL = ckube_metrics_default(); borrowed */
    ckube_clock *clock;              /* NULL = real; borrowed */
} nsctl_opts;

typedef struct nsctl nsctl;

/* A controller using client `c` and the namespaces informer of factory
 * `f` (both borrowed: they must outlive the controller; the caller
 * starts the factory, after nsctl_new so the informer exists, and shuts
 * it down after nsctl_stop). `o` may be NULL (defaults). Returns NULL on
 * failure (logged). */
nsctl *nsctl_new(ckube_client *c, ckube_informer_factory *f, const nsctl_opts *o);
/* Starts in the background (waits for the informer to sync on its own
 * thread, then runs the workers). Returns 0, or -1 when already started
 * or the thread cannot be created. */
int nsctl_start(nsctl *n);
/* Stops: ends the start thread, lets running passes finish, joins the
 * workers. Idempotent. */
void nsctl_stop(nsctl *n);
/* Stops if needed and frees. NULL-safe. */
void nsctl_free(nsctl *n);

/* Whether namespace `ns` (borrowed) takes new content: not being deleted
 * and in no other phase than Active (one without a phase yet counts as
 * active: the server has just created it). For the controllers that
 * fill every namespace (default ServiceAccount, kube-root-ca.crt), as
 * upstream's skip namespaces being terminated. */
bool nsctl_namespace_active(const json_t *ns);

#endif
