/* crd.h - CustomResourceDefinitions: the apiextensions.k8s.io types and
 * the machinery that turns each CRD into served resource types.
 *
 * A CRD object is stored in the v1 shape whatever version wrote it
 * (v1beta1 bodies are converted on the way in and back on the way out).
 * Its status (acceptedNames, NamesAccepted and Established conditions) is
 * computed when it is written, so `kubectl wait --for=condition=Established`
 * is satisfied by the create's own response. The cacher tells us about
 * every applied CRD change (crd_attach), on the storage thread, after the
 * change is visible: we (re)register its served versions in the registry,
 * so discovery, OpenAPI and the REST handler serve them at once, and
 * keep the group's local APIServices in step (registry/apiregistration's
 * apiregistration_sync_crd_group). Deleting a
 * CRD runs the cleanup finalizer: every object of the CRD is deleted, then
 * the finalizer is removed and the CRD and its endpoints go away.
 */
#ifndef CKUBE_APISERVER_CRD_H
#define CKUBE_APISERVER_CRD_H

#include "apiserver/cacher/cacher.h"
#include "apiserver/registry/generic/store.h"
#include "apiserver/registry/rest/registry.h"
#include "ckube/metrics.h"

#define CRD_CLEANUP_FINALIZER "customresourcecleanup.apiextensions.k8s.io"
#define CRD_KEY_PREFIX "/registry/apiextensions.k8s.io/customresourcedefinitions/"

/* Registers apiextensions.k8s.io/v1 and v1beta1 customresourcedefinitions
 * in `reg`. The server calls it with the other groups' install functions. */
int apiextensions_install(registry *reg);

/* The CRD machinery of one server: follows CRD changes in the store's
 * cache, serving their types from `reg`, and cleans up deleted CRDs
 * through the store `s` (both borrowed; they outlive it); conversion
 * webhooks count in `metrics` (borrowed; NULL: not counted). Call before cacher_start so stored
 * CRDs are registered at start-up. crd_detach frees it once the cacher no longer calls it (after
 * cacher_free). */
typedef struct crd_state crd_state;
crd_state *crd_attach(registry *reg, store *s, ckube_metrics_registry *metrics);
void crd_detach(crd_state *crds);

/* Types retired by CRD changes. A type is retired when its CRD is
 * deleted, or updated so that its uid, spec or accepted names differ (a
 * change of status or a deletion that starts retires nothing), as
 * upstream tears down a CRD's storage, and with it the watches on it,
 * exactly then. The generation moves (atomically) after the retired types
 * have left the registry, so a loop that sees it move looks through its
 * watches for crd_type_retired ones and ends them. Thread-safe. */
unsigned long crd_retired_generation(crd_state *crds);
bool crd_type_retired(const resource_type *t);

#endif
