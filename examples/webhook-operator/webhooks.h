/* webhooks.h - the webhook operator's handlers for samplecrd.k8s.io
 * Networks (ckube/webhook.h), kept apart from main.c so tests can serve
 * them on a server of their own:
 *
 *   /mutate-samplecrd-k8s-io-v1-network    defaulting: a missing gateway
 *                                          becomes the CIDR's first host
 *   /validate-samplecrd-k8s-io-v1-network  validation: a well-formed
 *                                          spec whose CIDR overlaps no
 *                                          other Network of the namespace
 *                                          (a warning for very large ones)
 *   /convert                               conversion between v1alpha1
 *                                          (spec.subnet, spec.gw) and v1
 *                                          (spec.cidr, spec.gateway)
 *
 * (kubebuilder's path names.) */
#ifndef WEBHOOK_OPERATOR_WEBHOOKS_H
#define WEBHOOK_OPERATOR_WEBHOOKS_H

#include <ckube/informer.h>
#include <ckube/scheme.h>
#include <ckube/webhook.h>

#define NETWORK_MUTATE_PATH "/mutate-samplecrd-k8s-io-v1-network"
#define NETWORK_VALIDATE_PATH "/validate-samplecrd-k8s-io-v1-network"
#define NETWORK_CONVERT_PATH "/convert"

typedef struct network_webhooks {
    ckube_scheme *scheme;  /* samplecrd's kinds (owned) */
    ckube_lister networks; /* the cached Networks, for overlaps */
} network_webhooks;

/* Registers the three handlers on `s`; `networks` is the Networks
 * informer's lister (the manager's cache). 0, or -1. */
int network_webhooks_register(network_webhooks *w, ckube_webhook_server *s, ckube_lister networks);
void network_webhooks_clear(network_webhooks *w);

#endif
