/* rootca.h - the root CA certificate publisher of kube-controller-manager
 * ("root-ca-cert-publisher"): every active namespace has a ConfigMap
 * named "kube-root-ca.crt" with data {"ca.crt": <the root CA bundle>}
 * and the annotation "kubernetes.io/description" (ROOTCA_DESCRIPTION),
 * so that Pods can verify the API server on its internal endpoints.
 *
 * As upstream: made when the namespace appears and again when someone
 * deletes it; when its data is not exactly {"ca.crt": CA} or the
 * description annotation is missing or empty, the data is set back and
 * the annotation set, on the existing object (other keys, labels and
 * annotations of it are kept). Other ConfigMaps are ignored. Namespaces
 * that are not Active (Terminating) are left alone; an AlreadyExists
 * answer, or a refusal because the namespace is being deleted or gone,
 * is success. */
#ifndef CKUBE_CONTROLLERS_ROOTCA_H
#define CKUBE_CONTROLLERS_ROOTCA_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/informer.h>
#include <ckube/metrics.h>

#include <stddef.h>

#define ROOTCA_CONFIGMAP "kube-root-ca.crt"
#define ROOTCA_KEY "ca.crt"
#define ROOTCA_DESCRIPTION_ANNOTATION "kubernetes.io/description"
#define ROOTCA_DESCRIPTION                                                                         \
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "      \
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "      \
    "guaranteed across distributions of Kubernetes clusters."

typedef struct rootca rootca;

typedef struct rootca_opts {
    const char *ca; /* the CA bundle (PEM); required, copied */
    size_t ca_len;
    ckube_clock *clock;              /* NULL = real */
    ckube_metrics_registry *metrics; /* NULL = ckube_metrics_default() */
    int workers;                     /* 0 = 1 */
} rootca_opts;

/* `c` and `f` are borrowed and must outlive the controller; it takes the
 * namespaces and configmaps informers from `f` (all namespaces). Returns
 * NULL on bad arguments (no CA, or one that is not text: UTF-8 without
 * NULs) or out of memory. */
rootca *rootca_new(ckube_client *c, ckube_informer_factory *f, const rootca_opts *o);
/* Non-blocking: a thread waits for the caches, then starts the workers.
 * 0, or -1 when already started or the thread cannot start. */
int rootca_start(rootca *r);
/* Stops the workers (running reconciles finish). Idempotent. */
void rootca_stop(rootca *r);
/* Stops if needed and frees. NULL-safe. */
void rootca_free(rootca *r);

#endif
