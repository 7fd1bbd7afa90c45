/* apps.h - apps/v1 (apps.c). */
#ifndef CKUBE_APISERVER_REGISTRY_APPS_APPS_H
#define CKUBE_APISERVER_REGISTRY_APPS_APPS_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int apps_install(registry *reg);

#endif
