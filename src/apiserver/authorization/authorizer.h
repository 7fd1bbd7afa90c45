/* authorizer.h - whether an authenticated request may do what it asks,
 * as kube-apiserver's authorizer chain decides with
 * --authorization-mode=RBAC, and the 403 it answers otherwise
 * (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters Forbidden and
 * apierrors.NewForbidden).
 *
 * The chain: the system:masters group is always allowed (upstream's
 * privileged group authorizer, ahead of every mode); then RBAC
 * (rbac/authorizer.h) over the index the server feeds from the watch
 * cache. Everything else is denied.
 */
#ifndef CKUBE_APISERVER_AUTHORIZATION_AUTHORIZER_H
#define CKUBE_APISERVER_AUTHORIZATION_AUTHORIZER_H

#include <stdbool.h>

#include "apiserver/authentication/user.h"
#include "apiserver/authorization/rbac/authorizer.h"
#include "ckube/status.h"

/* What a request asks (authorizer.Attributes). Borrowed strings, "" where
 * upstream has "". */
typedef struct authz_attributes {
    const auth_user *user;
    const char *verb; /* resource verbs; for other paths the lowercased method */
    bool resource_request;
    const char *api_group, *api_version, *resource, *subresource, *name, *namespace_;
    const char *path; /* the URL path (non-resource requests) */
} authz_attributes;

/* Whether `at` is allowed by the chain over `ix` (NULL: RBAC allows
 * nothing). The reasons as rbac_authorize's (each optional; NULL or
 * malloc'd): *reason on a denial, which the 403 message ends with;
 * *allowed_by on an allow by RBAC (system:masters has none, as
 * upstream's privileged-group authorizer). Thread-safe. */
bool authz_allowed(rbac_index *ix, const authz_attributes *at, char **reason, char **allowed_by);

/* Upstream's 403 for a denied request: "<resource>[.<group>] \"<name>\" is
 * forbidden: User \"<user>\" cannot <verb> resource \"<resource>[/<sub>]\"
 * in API group \"<group>\" in the namespace \"<ns>\"" (or "at the cluster
 * scope"; "forbidden: User ... cannot <verb> path \"<path>\"" for other
 * paths), then ": <reason>" when there is one. A new Status. */
ckube_status *authz_forbidden(const authz_attributes *at, const char *reason);

#endif
