/* admissionregistration.h - admissionregistration.k8s.io/v1: the webhook
 * configurations (admissionregistration.c). Calling the webhooks is the
 * admission chain's business, not this room's. */
#ifndef CKUBE_APISERVER_REGISTRY_ADMISSIONREGISTRATION_ADMISSIONREGISTRATION_H
#define CKUBE_APISERVER_REGISTRY_ADMISSIONREGISTRATION_ADMISSIONREGISTRATION_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int admissionregistration_install(registry *reg);

#endif
