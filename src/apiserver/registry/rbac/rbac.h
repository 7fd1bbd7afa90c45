/* rbac.h - rbac.authorization.k8s.io/v1 (rbac.c): roles, clusterroles,
 * rolebindings and clusterrolebindings, stored and served. Deciding
 * requests with them is authorization/rbac's. */
#ifndef CKUBE_APISERVER_REGISTRY_RBAC_RBAC_H
#define CKUBE_APISERVER_REGISTRY_RBAC_RBAC_H

#include "apiserver/registry/rest/registry.h"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int rbac_install(registry *reg);

#endif
