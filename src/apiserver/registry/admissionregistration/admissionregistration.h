/* admissionregistration.h - admissionregistration.k8s.io/v1: the webhook
 * configurations (admissionregistration.c). Calling the webhooks is the
 * admission chain's business, not this room's. */
#ifndef CKUBE_APISERVER_REGISTRY_ADMISSIONREGISTRATION_ADMISSIONREGISTRATION_H
#define CKUBE_APISERVER_REGISTRY_ADMISSIONREGISTRATION_ADMISSIONREGISTRATION_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int admissionregistration_install(registry *reg);

/* Upstream's webhook.ValidateWebhookURL / ValidateWebhookService on a
 * clientConfig (borrowed) reported at `path` ("...clientConfig"): exactly
 * one of url (https, a host, no user, query or fragment) and service
 * (name, namespace, port 1-65535, path segments). CRD conversion webhooks
 * share it with the webhook configurations. */
void webhook_client_config_validate(const json_t *cc, const char *path, ckube_status *st);

#endif
