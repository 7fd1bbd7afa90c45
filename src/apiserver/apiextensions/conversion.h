/* conversion.h - CRD conversion webhooks: ConversionReviews sent to the
 * webhook a CRD's spec.conversion names (strategy Webhook), as
 * apiextensions-apiserver's webhookConverter sends them.
 *
 * Every version of such a CRD is served through the type's asynchronous
 * `convert` hook (registry.h): reads convert stored objects (in the
 * storage version) to the version asked for, writes convert the object
 * to the storage version just before it is stored, each as one review
 * holding every object that is not in the wanted version already (a
 * list's page is one review). What comes back is checked as upstream
 * checks it (the uid, the count, apiVersion, kind, name, namespace and
 * uid of each object), and of its metadata only labels and annotations
 * are taken; anything else fails the read or write with a Status (code
 * 500, upstream's words: `conversion webhook for G/V, Kind=K failed:
 * ...`), and nothing is written.
 *
 * The call: POST to the clientConfig's URL or Service (apiserver/webhook)
 * with `?timeout=30s`, upstream's default for these webhooks, in the
 * first of conversionReviewVersions that is v1 or v1beta1.
 */
#ifndef CKUBE_APISERVER_APIEXTENSIONS_CONVERSION_H
#define CKUBE_APISERVER_APIEXTENSIONS_CONVERSION_H

#include <jansson.h>
#include <stdbool.h>

#include "apiserver/registry/rest/registry.h"
#include "ckube/metrics.h"

/* A CRD's conversion webhook, compiled: shared by the CRD's types.
 * Reference counted; thread-safe. */
typedef struct crd_conv crd_conv;

/* kube-apiserver's conversion metrics (apiextensions-apiserver's
 * conversion/metrics.go), the families of one server's registry:
 *   apiserver_crd_conversion_webhook_duration_seconds{crd_name,
 *       from_version,to_version,succeeded}   a whole conversion, its
 *       objects' checks included (when the versions differ)
 *   apiserver_conversion_webhook_request_total{result,failure_type}
 *   apiserver_conversion_webhook_duration_seconds{result,failure_type}
 *       the webhook's call: "success" once its review is a good answer,
 *       else "failure" with conversion_webhook_call_failure (as 1.30+).
 * All NULL: not counted. */
typedef struct crd_conv_metrics {
    ckube_metric_family *crd_duration, *requests, *latency;
} crd_conv_metrics;

/* Registers the families in reg (borrowed). */
void crd_conv_metrics_init(crd_conv_metrics *m, ckube_metrics_registry *reg);

/* The CRD's webhook (NULL unless spec.conversion.strategy is Webhook):
 * `stor` is the storage version's name; `m` (copied; NULL: none) the
 * metrics its conversions count in. */
crd_conv *crd_conv_new(const json_t *crd, const char *stor, const crd_conv_metrics *m);
crd_conv *crd_conv_ref(crd_conv *c);
void crd_conv_unref(crd_conv *c);

/* What a custom resource type keeps in its priv (crd.c sets it up):
 * the storage version's name and the CRD's webhook, both owned. */
typedef struct cr_priv {
    char *stor;
    crd_conv *conv; /* NULL: strategy None */
} cr_priv;
void cr_priv_free(void *p);

/* Makes t, whose priv is a cr_priv with a webhook, convert through it
 * (sets t->convert and t->convert_cancel). */
void crd_conv_attach(resource_type *t);

/* For the fuzz target and unit tests: reads a webhook's answer to a
 * review of `sent` (a JSON array, borrowed) sent with `uid` in
 * `review_version` ("v1" or "v1beta1"), wanting `want` ("group/version");
 * `gvk` names the objects in messages ("g/v, Kind=K"). Returns the
 * objects in order, those already in `want` taken from `sent`, or NULL
 * with *err (malloc'd, UTF-8) in upstream's words. `status` is the HTTP
 * status; body is not NUL-terminated. */
json_t *crd_conv__answer(const char *review_version, const char *uid, const json_t *sent,
                         const char *want, const char *gvk, bool list, int status, const char *body,
                         size_t len, char **err);

#endif
