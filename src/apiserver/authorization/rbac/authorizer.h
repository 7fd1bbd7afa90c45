/* authorizer.h - RBAC's decision over an index of the cluster's Roles,
 * ClusterRoles and bindings (issue #21), as kube-apiserver's RBAC
 * authorizer decides: a request is allowed when a ClusterRoleBinding, or
 * a RoleBinding of the request's namespace, names the user (or one of
 * their groups, or their ServiceAccount) and refers to a role with a
 * rule that allows it (rules.h). Otherwise it is denied, with upstream's
 * reason when a binding refers to a role that does not exist
 * (`RBAC: role.rbac.authorization.k8s.io "x" not found`).
 *
 * The index is fed the objects as they change (from the watch cache, on
 * the storage thread) and read by the request loops: a decision looks up
 * the bindings of the user and of each of their groups, never scans
 * every binding. Thread-safe: changes take a write lock, decisions a read
 * lock.
 */
#ifndef CKUBE_APISERVER_AUTHORIZATION_RBAC_AUTHORIZER_H
#define CKUBE_APISERVER_AUTHORIZATION_RBAC_AUTHORIZER_H

#include <jansson.h>
#include <stdbool.h>

#include "apiserver/authorization/rbac/rules.h"

typedef enum {
    RBAC_ROLE,
    RBAC_CLUSTER_ROLE,
    RBAC_ROLE_BINDING,
    RBAC_CLUSTER_ROLE_BINDING,
} rbac_kind;

typedef struct rbac_index rbac_index;

rbac_index *rbac_index_new(void);
void rbac_index_free(rbac_index *ix);

/* An object of `kind` was stored (deleted false: added or changed) or
 * deleted. obj is borrowed: its metadata.namespace and .name say which;
 * the rest is read into the index. */
void rbac_index_apply(rbac_index *ix, rbac_kind kind, const json_t *obj, bool deleted);

/* Whether RBAC allows `req` for `user`, with upstream's reasons (each
 * out parameter optional; set to a malloc'd text the caller frees, or
 * NULL): on a denial *reason names the roles that bindings name but that
 * do not exist (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not
 * found`), which the 403 message ends with; on an allow *allowed_by is
 * `RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to User
 * "u"` (built only when asked for: it costs more than the decision). */
bool rbac_authorize(rbac_index *ix, const rbac_user *user, const rbac_request *req, char **reason,
                    char **allowed_by);

/* Every rule that applies to `user` in namespace `ns` ("" or NULL:
 * ClusterRoleBindings only), as upstream's RulesFor: a new JSON array of
 * PolicyRule objects (copies; each binding counted once). *errors (when
 * given) is NULL, or the roles bindings name that do not exist, as
 * upstream's aggregate error (`clusterrole.rbac.authorization.k8s.io "x"
 * not found`, several as "[a, b]"; malloc'd). `storage_names`: name the
 * resource as the roles' storage does (`clusterroles.rbac...`), as the
 * escalation check's resolver reads roles from storage, where the
 * authorizer's (SelfSubjectRulesReview's) reads them from listers. */
json_t *rbac_rules_for(rbac_index *ix, const rbac_user *user, const char *ns, bool storage_names,
                       char **errors);

/* The rules of ClusterRole `name` (cluster) or Role ns/name: a new JSON
 * array, or NULL when it does not exist. */
json_t *rbac_role_rules(rbac_index *ix, bool cluster, const char *ns, const char *name);

#endif
