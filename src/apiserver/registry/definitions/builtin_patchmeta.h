/* builtin_patchmeta.h - strategic-merge-patch metadata of the built-in
 * kinds, i.e. the x-kubernetes-patch-strategy / x-kubernetes-patch-merge-key
 * of the upstream API types, as ckube_patch_meta_entry tables (see
 * ckube/patch.h for the path convention). Each table is zero-terminated;
 * look paths up with ckube_patch_meta_table(table, path, &merge_key).
 *
 * Every table includes the ObjectMeta entries (metadata.finalizers,
 * metadata.ownerReferences); kinds with nothing beyond those use
 * patchmeta_metadata_only (the aliases below name them).
 */
#ifndef CKUBE_APISERVER_BUILTIN_PATCHMETA_H
#define CKUBE_APISERVER_BUILTIN_PATCHMETA_H

#include "ckube/patch.h"

/* ObjectMeta only: finalizers (merge, primitive) and ownerReferences
 * (merge by uid). */
extern const ckube_patch_meta_entry patchmeta_metadata_only[];

extern const ckube_patch_meta_entry patchmeta_pod[];            /* core/v1 Pod */
extern const ckube_patch_meta_entry patchmeta_deployment[];     /* apps/v1 Deployment */
extern const ckube_patch_meta_entry patchmeta_replicaset[];     /* apps/v1 ReplicaSet */
extern const ckube_patch_meta_entry patchmeta_service[];        /* core/v1 Service */
extern const ckube_patch_meta_entry patchmeta_node[];           /* core/v1 Node */
extern const ckube_patch_meta_entry patchmeta_namespace[];      /* core/v1 Namespace */
extern const ckube_patch_meta_entry patchmeta_serviceaccount[]; /* core/v1 ServiceAccount */
/* admissionregistration.k8s.io/v1 */
extern const ckube_patch_meta_entry patchmeta_mutatingwebhookconfiguration[];
extern const ckube_patch_meta_entry patchmeta_validatingwebhookconfiguration[];
/* apiregistration.k8s.io/v1 */
extern const ckube_patch_meta_entry patchmeta_apiservice[];

/* Kinds whose only merge lists are the ObjectMeta ones. */
#define patchmeta_endpoints patchmeta_metadata_only       /* core/v1 Endpoints (subsets: replace) */
#define patchmeta_configmap patchmeta_metadata_only       /* core/v1 ConfigMap */
#define patchmeta_secret patchmeta_metadata_only          /* core/v1 Secret */
#define patchmeta_event patchmeta_metadata_only           /* core/v1 Event */
#define patchmeta_events_v1_event patchmeta_metadata_only /* events.k8s.io/v1 Event */
#define patchmeta_lease patchmeta_metadata_only           /* coordination.k8s.io/v1 Lease */
/* rbac.authorization.k8s.io/v1: rules, subjects and clusterRoleSelectors
 * carry no patch strategy upstream (a patch replaces them whole). */
#define patchmeta_role patchmeta_metadata_only               /* Role */
#define patchmeta_clusterrole patchmeta_metadata_only        /* ClusterRole */
#define patchmeta_rolebinding patchmeta_metadata_only        /* RoleBinding */
#define patchmeta_clusterrolebinding patchmeta_metadata_only /* ClusterRoleBinding */

/* The table for a built-in kind by API group ("" for core) and kind, or
 * NULL for kinds not listed above. Static storage; never free. */
const ckube_patch_meta_entry *builtin_patchmeta_for(const char *group, const char *kind);

#endif
