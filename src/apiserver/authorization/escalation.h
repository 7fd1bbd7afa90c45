/* escalation.h - RBAC's guard against privilege escalation through the
 * RBAC objects themselves, as kube-apiserver's RBAC storage checks
 * (pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/
 * policybased and pkg/registry/rbac/validation ConfirmNoEscalation):
 *
 *   - A Role or ClusterRole may be written only by someone who holds
 *     every right it grants, or who may "escalate" on it; a ClusterRole
 *     with an aggregationRule (which can gather anything) only by someone
 *     with every right ("*" on everything).
 *   - A RoleBinding or ClusterRoleBinding may be written only by someone
 *     who holds every right of the role it refers to, or who may "bind"
 *     that role.
 *   - system:masters may do anything, and a write that changes only the
 *     fields the garbage collector needs (ownerReferences, finalizers) is
 *     not checked, so that objects can always be cleaned up.
 *
 * This is the request path's check after validation; the authorizer
 * (authorizer.h) has already allowed the verb itself.
 */
#ifndef CKUBE_APISERVER_AUTHORIZATION_ESCALATION_H
#define CKUBE_APISERVER_AUTHORIZATION_ESCALATION_H

#include <jansson.h>

#include "apiserver/authentication/user.h"
#include "apiserver/authorization/rbac/authorizer.h"
#include "ckube/status.h"

/* Whether `user` may write `obj` (a create: old NULL; an update: the
 * stored `old`) of rbac.authorization.k8s.io `resource` ("roles",
 * "clusterroles", "rolebindings", "clusterrolebindings"; any other
 * resource is not checked) in namespace `ns` ("" for the cluster-scoped
 * kinds). NULL, or a new 403 Status in upstream's words:
 *   clusterroles.rbac.authorization.k8s.io "x" is forbidden: user "bob"
 *   (groups=["system:authenticated"]) is attempting to grant RBAC
 *   permissions not currently held:
 *   {APIGroups:[""], Resources:["pods"], Verbs:["get"]}
 * All arguments borrowed; thread-safe. */
ckube_status *authz_check_rbac_write(rbac_index *ix, const auth_user *user, const char *resource,
                                     const char *ns, const json_t *obj, const json_t *old);

#endif
