/* coordination.h - coordination.k8s.io/v1 (coordination.c). */
#ifndef CKUBE_APISERVER_REGISTRY_COORDINATION_COORDINATION_H
#define CKUBE_APISERVER_REGISTRY_COORDINATION_COORDINATION_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int coordination_install(registry *reg);

#endif
