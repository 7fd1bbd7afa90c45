/* bootstrap.h - kube-apiserver's RBAC bootstrap policy (v1.31) and its
 * reconciliation (bootstrap.c).
 *
 * The policy is data: bootstrap_policy.yaml beside this file, compiled
 * into the server (cmake/embed.cmake), holds the ClusterRoles,
 * ClusterRoleBindings, Roles and RoleBindings every cluster has, each
 * labelled kubernetes.io/bootstrapping=rbac-defaults and annotated
 * rbac.authorization.kubernetes.io/autoupdate=true, as upstream's
 * plugin/pkg/auth/authorizer/rbac/bootstrappolicy makes them.
 *
 * Reconciliation is upstream's pkg/registry/rbac/reconciliation in its
 * union mode (what kube-apiserver runs on every start): what a cluster
 * admin added is kept, what the policy wants and the stored object lacks
 * is added, nothing is taken away. These are pure functions on JSON: no
 * I/O; server/bootstrap.c reads the objects and writes the results
 * through the generic store.
 *
 * Ownership: every json_t * parameter is borrowed and left unchanged;
 * what a function returns, or leaves in an rbac_reconcile, is the
 * caller's (rbac_reconcile_release frees it). Out of memory aborts
 * (common/xalloc.h), as everywhere in the server. Reentrant.
 */
#ifndef CKUBE_APISERVER_REGISTRY_RBAC_BOOTSTRAP_H
#define CKUBE_APISERVER_REGISTRY_RBAC_BOOTSTRAP_H

#include <jansson.h>
#include <stdbool.h>

/* The annotation and label every policy object carries. */
#define RBAC_AUTOUPDATE_ANNOTATION "rbac.authorization.kubernetes.io/autoupdate"
#define RBAC_BOOTSTRAPPING_LABEL "kubernetes.io/bootstrapping"

/* The policy: a new array of objects, each with apiVersion, kind and
 * metadata.name (and metadata.namespace for Roles and RoleBindings):
 * upstream's (ClusterRoles, then ClusterRoleBindings, Roles,
 * RoleBindings), then ckube's own (ckube_policy.yaml beside this file:
 * the roles and bindings of ckube's controllers that upstream does not
 * have, kept apart so that bootstrap_policy.yaml stays upstream's data).
 * Parsed anew on every call. The embedded data is checked by a unit test;
 * if it still does not parse, this logs why and aborts, as upstream's
 * RuleOrDie panics on a policy it cannot build. */
json_t *rbac_bootstrap_policy(void);

/* What a stored object needs to become what the policy wants. */
typedef enum {
    RBAC_RECONCILE_NONE,   /* nothing to write */
    RBAC_RECONCILE_CREATE, /* not there: create `object` */
    /* Update to `object`: the stored one with the additions, keeping
     * its metadata.resourceVersion (the update's precondition). */
    RBAC_RECONCILE_UPDATE,
    /* Bindings only: the roleRef differs and a roleRef cannot change, so
     * delete the stored binding (its uid as the precondition), then
     * create `object`, the policy's binding. */
    RBAC_RECONCILE_RECREATE,
} rbac_reconcile_op;

typedef struct rbac_reconcile {
    rbac_reconcile_op op;
    /* The stored object says autoupdate "false": `op` tells what
     * reconciling would do, but `object` is NULL and nothing is to be
     * written (upstream logs it as skipped). */
    bool protected_;
    /* Made by rbac_reconcile_binding: `missing` holds subjects. */
    bool binding;
    /* What to write (op CREATE, UPDATE or RECREATE, not protected_), or
     * NULL. Owned. */
    json_t *object;
    /* What the stored object lacked, for the log (an array, owned, never
     * NULL): for a role the rules it did not cover, broken down to one
     * verb, group, resource and name each (upstream's BreakdownRule); for
     * a binding the subjects. On create the policy's rules or subjects;
     * on recreate none. */
    json_t *missing;
} rbac_reconcile;

/* A Role or ClusterRole. `existing` is the stored object, or NULL when
 * there is none; `wanted` is the policy's. Labels and annotations the
 * stored object lacks are added (its own values win); the rules it does
 * not cover already (upstream's validation.Covers: a covered rule is not
 * added again) are appended, broken down; the aggregation rule's
 * clusterRoleSelectors are unioned, and an aggregation rule the policy
 * does not have is removed, as upstream does. Fills *out (the caller
 * releases it). */
void rbac_reconcile_role(const json_t *existing, const json_t *wanted, rbac_reconcile *out);

/* A RoleBinding or ClusterRoleBinding, likewise: labels and annotations
 * added, missing subjects appended (a subject is its kind, apiGroup,
 * name and namespace); a roleRef that differs is
 * RBAC_RECONCILE_RECREATE. Fills *out. */
void rbac_reconcile_binding(const json_t *existing, const json_t *wanted, rbac_reconcile *out);

/* Frees what *r holds (not r itself). */
void rbac_reconcile_release(rbac_reconcile *r);

/* r->missing as upstream's log lines print it, Go's %v of a []PolicyRule
 * ("[{[get] [] [] [] [/version]}]") or []Subject ("[{Group
 * rbac.authorization.k8s.io system:authenticated }]"). Malloc'd; the
 * caller frees it. */
char *rbac_reconcile_describe(const rbac_reconcile *r);

/* Whether the rules `owner` (an array of PolicyRules) allow everything
 * `servant`'s do: upstream's validation.Covers. When `uncovered` is
 * non-NULL it is set to a new array of the servant's rules, broken down,
 * that no owner rule covers. */
bool rbac_rules_cover(const json_t *owner, const json_t *servant, json_t **uncovered);

#endif
