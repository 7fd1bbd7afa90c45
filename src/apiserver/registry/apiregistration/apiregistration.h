/* apiregistration.h - apiregistration.k8s.io/v1: APIServices
 * (apiregistration.c), and the "local" APIServices kube-apiserver keeps
 * for the group-versions it serves itself (local.c). Proxying to the
 * services of non-local APIServices, and their availability, are not this
 * room's. */
#ifndef CKUBE_APISERVER_REGISTRY_APIREGISTRATION_APIREGISTRATION_H
#define CKUBE_APISERVER_REGISTRY_APIREGISTRATION_APIREGISTRATION_H

#include <stdbool.h>

#include "apiserver/registry/generic/store.h"
#include "apiserver/registry/rest/registry.h"

#define APIREGISTRATION_GROUP "apiregistration.k8s.io"
/* The label kube-aggregator's autoregister controller marks the
 * APIServices it manages with: "onstart" (a built-in group-version,
 * written once when the server starts) or "true" (a CRD's, kept in step
 * with the CRDs). */
#define APIREGISTRATION_AUTOMANAGED_LABEL "kube-aggregator.kubernetes.io/automanaged"

/* Adds the group's types to `reg`. 0, or -1 when one cannot be added. */
int apiregistration_install(registry *reg);

/* kube-apiserver's discovery priorities of a group-version it serves
 * itself (its apiVersionPriorities table): true with *group_priority and
 * *version_priority set, or false for one it has no APIService for. */
bool apiregistration_builtin_priority(const char *group, const char *version, int *group_priority,
                                      int *version_priority);

/* ---- local APIServices (local.c) ----------------------------------------
 *
 * As kube-apiserver's autoregister and crdregistration controllers, through
 * the generic store (so the type's strategy marks each one Available,
 * reason Local):
 *   - one APIService VERSION.GROUP ("v1." for the core group) per built-in
 *     group-version of `reg` that has a priority (above), labeled
 *     automanaged "onstart": created when missing, its spec brought back
 *     to the table's when the server starts; one labeled "onstart" that is
 *     no longer served is deleted then;
 *   - one per group-version a CRD serves (while any CRD of the group
 *     serves that version), labeled automanaged "true", group priority
 *     1000 and version priority 100: created, updated and deleted as CRDs
 *     change (apiregistration_sync_crd_group), the built-in group-versions
 *     excepted.
 * APIServices without the label (made by users) are never touched. Both
 * functions only read the store's cache and start writes, so they may run
 * from a cacher listener; a CRD APIService written re-checks its group
 * once the write is done, so a CRD that changed meanwhile is caught up
 * with. `reg` and `s` are borrowed and must outlive the writes. */

/* Everything, at server start: waits for its writes. */
void apiregistration_sync_local(registry *reg, store *s);
/* The CRD APIServices of `group`, after a change of one of its CRDs
 * (created, updated, deleted). Does not wait. */
void apiregistration_sync_crd_group(registry *reg, store *s, const char *group);

#endif
