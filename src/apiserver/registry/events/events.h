/* events.h - events.k8s.io/v1 (events.c). */
#ifndef CKUBE_APISERVER_REGISTRY_EVENTS_EVENTS_H
#define CKUBE_APISERVER_REGISTRY_EVENTS_EVENTS_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int events_install(registry *reg);

#endif
