/* clusterrole_aggregation.h - the ClusterRole aggregation controller of
 * kube-controller-manager ("clusterrole-aggregation"): a ClusterRole
 * with an aggregationRule has as rules those of the ClusterRoles its
 * clusterRoleSelectors match, as the built-in admin, edit and view roles
 * gather what CRD authors label "aggregate-to-admin" and the like.
 *
 * As upstream (pkg/controller/clusterroleaggregation):
 *  - the rules are, for each selector in order, those of the ClusterRoles
 *    it matches in order of name, the role itself left out, each rule
 *    kept only the first time it appears (rules are compared field by
 *    field, a missing list equal to an empty one);
 *  - when they equal the role's rules (in the same comparison) nothing is
 *    written; else they are applied (server-side apply, force, field
 *    manager CLUSTERROLE_AGGREGATION_MANAGER) with a body holding only the
 *    rules. With no rule at all the body has no "rules": the server then
 *    drops the rules this manager owned (those it applied before), and
 *    keeps any another manager set, as upstream's apply does. A server
 *    that answers the apply with 415 gets an update (PUT) instead;
 *  - any change to any ClusterRole re-checks every aggregated one: which
 *    roles a role depends on is known only by evaluating its selectors,
 *    and there are few ClusterRoles.
 * A role whose aggregationRule is absent or null is not touched; an
 * empty selector matches every other ClusterRole. */
#ifndef CKUBE_CONTROLLERS_CLUSTERROLE_AGGREGATION_H
#define CKUBE_CONTROLLERS_CLUSTERROLE_AGGREGATION_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/informer.h>
#include <ckube/metrics.h>

#define CLUSTERROLE_AGGREGATION_MANAGER "clusterrole-aggregation-controller"

typedef struct cragg cragg;

typedef struct cragg_opts {
    ckube_clock *clock;              /* NULL = real */
    ckube_metrics_registry *metrics; /* NULL = ckube_metrics_default() */
    int workers;                     /* 0 = 5, upstream's number */
} cragg_opts;

/* `c` and `f` are borrowed and must outlive the controller; it takes the
 * clusterroles informer from `f`. `o` may be NULL (defaults). Returns
 * NULL on bad arguments or out of memory. */
cragg *cragg_new(ckube_client *c, ckube_informer_factory *f, const cragg_opts *o);
/* Non-blocking: a thread waits for the cache, then starts the workers.
 * 0, or -1 when already started or the thread cannot start. */
int cragg_start(cragg *a);
/* Stops the workers (running reconciles finish). Idempotent. */
void cragg_stop(cragg *a);
/* Stops if needed and frees. NULL-safe. */
void cragg_free(cragg *a);

#endif
