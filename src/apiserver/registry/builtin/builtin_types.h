/* builtin_types.h - the built-in API groups' types (core/v1, apps/v1,
 * coordination, events, autoscaling): their strategies, validation,
 * printer columns and selectable fields. */
#ifndef CKUBE_APISERVER_REGISTRY_BUILTIN_BUILTIN_TYPES_H
#define CKUBE_APISERVER_REGISTRY_BUILTIN_BUILTIN_TYPES_H

#include "apiserver/registry/rest/registry.h"

/* Adds the built-in types to `reg`. 0, or -1 when one cannot be added. */
int builtin_types_register(registry *reg);

#endif
