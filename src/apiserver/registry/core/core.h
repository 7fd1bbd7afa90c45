/* core.h - core/v1, the legacy API group (core.c). */
#ifndef CKUBE_APISERVER_REGISTRY_CORE_CORE_H
#define CKUBE_APISERVER_REGISTRY_CORE_CORE_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int core_install(registry *reg);

#endif
