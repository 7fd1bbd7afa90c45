/* admission.h - admission webhooks (issue #25): the
 * MutatingWebhookConfigurations and ValidatingWebhookConfigurations in
 * the cache, which of their webhooks a write must ask, and the asking
 * (AdmissionReview v1 or v1beta1 over outbound/), in the order and with
 * the wording of k8s.io/apiserver's admission/plugin/webhook
 * (docs/webhooks.md, "1. Admission webhooks").
 *
 * The write path (the generic store's admit hook, handlers.c) calls
 * admission_run twice per write: mutating webhooks (one at a time,
 * configurations in name order, each patch applied before the next
 * webhook sees the object; those with reinvocationPolicy IfNeeded once
 * more when a later one changed it), then, once the object is prepared
 * and validated, validating webhooks (all at once; the first failure in
 * webhook order wins). A webhook answers allow, deny (its Status, the
 * message prefixed `admission webhook "NAME" denied the request`), or
 * fails: unreachable, timed out, a garbage answer, the wrong uid, an
 * undecodable patch. A failure is a 500 (`Internal error occurred:
 * failed calling webhook "NAME": ...`) under failurePolicy Fail, and
 * ignored under Ignore (with a failed-open audit annotation).
 * Webhook configurations themselves are never sent to webhooks, so a
 * broken webhook cannot lock anybody out of fixing it.
 *
 * Not yet: matchConditions (CEL) are not evaluated (a webhook with
 * them is called as if they all held), and matchPolicy Equivalent
 * matches only the version the request names (ckube serves each
 * resource at one version, CRDs aside).
 *
 * Threading: the configurations are compiled once per change into an
 * immutable snapshot shared by every loop; a run lives on one loop.
 */
#ifndef CKUBE_APISERVER_ADMISSION_ADMISSION_H
#define CKUBE_APISERVER_ADMISSION_ADMISSION_H

#include <jansson.h>
#include <stdbool.h>

#include "apiserver/authentication/user.h"
#include "apiserver/cacher/cacher.h"
#include "apiserver/outbound/outbound.h"
#include "apiserver/registry/rest/registry.h"
#include "ckube/metrics.h"
#include "ckube/status.h"

typedef struct admission admission;
typedef struct adm_run adm_run;

/* The webhook configurations of `c` (borrowed; outlives the admission),
 * followed through a cacher listener (so call before cacher_start). */
admission *admission_new(cacher *c);
void admission_free(admission *a);

/* Registers kube-apiserver's admission webhook metrics in `reg`
 * (borrowed; outlives the admission) and counts every call from then on:
 *   apiserver_admission_webhook_request_total{name,type,operation,code,rejected}
 *   apiserver_admission_webhook_admission_duration_seconds{name,type,operation,rejected}
 *   apiserver_admission_webhook_rejection_count{name,type,operation,error_type,rejection_code}
 *   apiserver_admission_webhook_fail_open_count{name,type}
 * with upstream's label values (type "admit" or "validating"; error_type
 * calling_webhook_error, apiserver_internal_error or no_error), and every
 * admission_run (matched or not) from then on, as upstream's phases:
 *   apiserver_admission_step_admission_duration_seconds{type,operation,rejected}
 *   apiserver_admission_controller_admission_duration_seconds{name,type,operation,rejected}
 * (type "admit" or "validate"; name MutatingAdmissionWebhook or
 * ValidatingAdmissionWebhook). Before the server serves (not thread-safe
 * against runs). */
void admission_set_metrics(admission *a, ckube_metrics_registry *reg);

/* What is being admitted (every pointer borrowed for the call). */
typedef struct adm_attrs {
    const char *operation; /* "CREATE", "UPDATE" or "DELETE" */
    const char *group, *version, *resource, *kind;
    /* The kind's group and version when they are not the resource's (a
     * /scale write: autoscaling/v1 Scale), else NULL. */
    const char *kind_group, *kind_version;
    const char *subresource; /* "" for the object itself */
    bool namespaced;
    const char *ns;   /* the request's namespace ("" cluster-scoped) */
    const char *name; /* the object's name ("" when generated later) */
    const auth_user *user;
    bool dry_run;
    /* Builds the operation's options (CreateOptions, UpdateOptions,
     * DeleteOptions with apiVersion and kind; a new reference) for the
     * reviews; called at most once, and only when a webhook matches, so
     * a write no webhook wants builds nothing. NULL: none. */
    json_t *(*options)(void *ctx, const char *operation);
    void *options_ctx;
    /* The request's type and the registry it is in (both borrowed; may
     * be NULL: no equivalents). A webhook whose matchPolicy is
     * Equivalent (the default) and whose rules name another version of
     * the same resource (a CRD's other versions) is called with the
     * objects converted to that version, as upstream's
     * EquivalentResourceMapper and versioned attributes do; its patch
     * applies to that version and the object is converted back. */
    const resource_type *type;
    registry *reg;
} adm_attrs;

/* How a run reports (on the run's loop thread). */
typedef struct adm_callbacks {
    /* The run ended: st NULL admits, a Status (taken) refuses. */
    void (*done)(void *arg, ckube_status *st);
    /* A webhook's warning, for the reply's Warning headers (optional). */
    void (*warn)(void *arg, const char *text);
    /* An audit annotation (optional). */
    void (*annotate)(void *arg, const char *key, const char *value);
} adm_callbacks;

/* Asks the mutating (mutating true; obj is changed in place) or
 * validating webhooks that match the request about obj (NULL on DELETE)
 * and old (NULL on CREATE), both borrowed until done. Returns NULL when
 * no webhook matches: nothing to wait for, no callback. Otherwise the
 * run, and cb->done comes later, once, never from inside this call.
 * `o` is the loop's outbound; `cb` must outlive the run. */
adm_run *admission_run(admission *a, outbound *o, bool mutating, const adm_attrs *at, json_t *obj,
                       const json_t *old, const adm_callbacks *cb, void *arg);

/* Stops a run before done (its calls are cancelled); no callback. */
void adm_run_cancel(adm_run *r);

/* How many webhooks the current configurations hold (mutating and
 * validating), compiling them if they changed. For tests. */
size_t admission_webhook_count(admission *a);

#endif
