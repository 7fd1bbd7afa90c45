/* serviceaccount.h - the service account controller of
 * kube-controller-manager ("serviceaccount"): every active namespace has
 * a ServiceAccount named "default", created when the namespace appears
 * and again when someone deletes it.
 *
 * As upstream: namespaces that are not Active (Terminating) are left
 * alone; an AlreadyExists answer, or a refusal because the namespace is
 * being deleted, is success. No token Secret is made (upstream stopped
 * making them in 1.24). */
#ifndef CKUBE_CONTROLLERS_SERVICEACCOUNT_H
#define CKUBE_CONTROLLERS_SERVICEACCOUNT_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/informer.h>
#include <ckube/metrics.h>

typedef struct sactl sactl;

typedef struct sactl_opts {
    ckube_clock *clock;              /* NULL = real */
    ckube_metrics_registry *metrics; /* NULL = ckube_metrics_default() */
    int workers;                     /* 0 = 1 */
} sactl_opts;

/* `c` and `f` are borrowed and must outlive the controller; it takes the
 * namespaces and serviceaccounts informers from `f` (all namespaces).
 * `o` may be NULL. Returns NULL on bad arguments or out of memory. */
sactl *sactl_new(ckube_client *c, ckube_informer_factory *f, const sactl_opts *o);
/* Non-blocking: a thread waits for the caches, then starts the workers.
 * 0, or -1 when already started or the thread cannot start. */
int sactl_start(sactl *s);
/* Stops the workers (running reconciles finish). Idempotent. */
void sactl_stop(sactl *s);
/* Stops if needed and frees. NULL-safe. */
void sactl_free(sactl *s);

#endif
