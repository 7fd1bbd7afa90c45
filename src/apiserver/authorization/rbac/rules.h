/* rules.h - RBAC's matching (issue #21): whether a PolicyRule allows a
 * request, and whether a binding's subject is the requesting user, as
 * kube-apiserver's RBAC authorizer decides (plugin/pkg/auth/authorizer/
 * rbac RuleAllows and appliesTo, pkg/apis/rbac/v1's *Matches helpers).
 *
 * The bindings' index that makes a decision cheap with many bindings, and
 * the authorizer that walks ClusterRoleBindings then RoleBindings, build
 * on this. Rules are compiled once from their JSON (a Role's `rules`) so a
 * decision compares strings, never walks JSON.
 */
#ifndef CKUBE_APISERVER_AUTHORIZATION_RBAC_RULES_H
#define CKUBE_APISERVER_AUTHORIZATION_RBAC_RULES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* What a request asks, as authorizer.Attributes: a resource request
 * (resource set) or a non-resource one (path set). Borrowed strings;
 * "" where upstream has "" (the core group, no subresource, no name, no
 * namespace). */
typedef struct rbac_request {
    const char *verb; /* get, list, watch, create, update, patch, delete, ... */
    bool resource_request;
    const char *api_group;
    const char *resource;
    const char *subresource;
    const char *name;
    const char *namespace_;
    const char *path; /* non-resource requests: the URL path */
} rbac_request;

/* The requesting user (user.Info): name and groups, borrowed. */
typedef struct rbac_user {
    const char *name;
    const char *const *groups;
    size_t ngroups;
} rbac_user;

/* One compiled PolicyRule: each list a NULL-terminated array of strings
 * in one allocation (the rule owns it). A list the rule does not have is
 * NULL (matches nothing, except resourceNames, where none means any). */
typedef struct rbac_rule {
    char **verbs, **api_groups, **resources, **resource_names, **non_resource_urls;
} rbac_rule;

/* Compiles a `rules` array (borrowed JSON) into *out (n of them, the
 * caller frees with rbac_rules_free). Entries that are not objects, and
 * list members that are not strings, are skipped: validation refuses
 * them before a Role is stored. Returns 0, or -1 when `rules` is not an
 * array (*out NULL, *n 0). */
int rbac_rules_compile(const json_t *rules, rbac_rule **out, size_t *n);
void rbac_rules_free(rbac_rule *rules, size_t n);

/* Whether `rule` allows `req` (RuleAllows). */
bool rbac_rule_allows(const rbac_rule *rule, const rbac_request *req);

/* Whether a binding's subject (a RoleBinding's or ClusterRoleBinding's
 * `subjects` entry, borrowed JSON) is `user`, for a binding in namespace
 * `ns` ("" for a ClusterRoleBinding): a User by name, a Group among the
 * user's groups, a ServiceAccount as system:serviceaccount:NS:NAME (its
 * namespace defaulting to the binding's). */
bool rbac_subject_applies(const json_t *subject, const rbac_user *user, const char *ns);

/* The rights `wanted` (a PolicyRule array, borrowed JSON) grants that
 * the `owner` rules do not cover (upstream's validation.Covers): a new
 * array of them broken down as BreakdownRule (one verb and one group,
 * resource and name, or one URL, per rule), in the order asked. */
json_t *rbac_uncovered_rules(const rbac_rule *owner, size_t n, const json_t *wanted);

/* The same rights as upstream's ConfirmNoEscalation lists
 * them (validation.Covers over BreakdownRule's atomic rights, compacted
 * as CompactRules, each as rbacv1helpers.CompactString, e.g.
 * `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`, sorted,
 * one per line): malloc'd, or NULL when owner covers everything. */
char *rbac_uncovered_rights(const rbac_rule *owner, size_t n, const json_t *wanted);

#endif
