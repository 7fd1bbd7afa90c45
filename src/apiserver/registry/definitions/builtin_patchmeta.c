/* builtin_patchmeta.c - strategic-merge-patch metadata of built-in kinds.
 *
 * Transcribed from the patchStrategy / patchMergeKey struct tags of the
 * upstream API types (k8s.io/api). Lists not listed here are replaced by a
 * patch (upstream's default), e.g. tolerations, envFrom, endpoints subsets,
 * node taints and images. Paths follow ckube/patch.h: list elements add no
 * path segment.
 */
#include "apiserver/registry/definitions/builtin_patchmeta.h"

#include <string.h>

/* The tables read best one entry per line; clang-format would pack them. */
// clang-format off
#define MERGE CKUBE_STRATEGY_MERGE
#define MERGE_RETAIN (CKUBE_STRATEGY_MERGE | CKUBE_STRATEGY_RETAIN_KEYS)
#define RETAIN CKUBE_STRATEGY_RETAIN_KEYS

/* ObjectMeta, under prefix P ("" for the object, "spec.template." for a
 * pod template). */
#define OBJECT_META(P)                                                                             \
    {P "metadata.finalizers", MERGE, NULL}, {P "metadata.ownerReferences", MERGE, "uid"}

/* One container list of a pod spec (Container / EphemeralContainer),
 * with C the full path of the list, e.g. "spec.containers". */
#define CONTAINER(C)                                                                               \
    {C, MERGE, "name"}, {C ".ports", MERGE, "containerPort"}, {C ".env", MERGE, "name"},          \
        {C ".volumeMounts", MERGE, "mountPath"}, {C ".volumeDevices", MERGE, "devicePath"}

/* PodSpec under prefix S (e.g. "spec." or "spec.template.spec."). */
#define POD_SPEC(S)                                                                                \
    {S "volumes", MERGE_RETAIN, "name"}, CONTAINER(S "initContainers"),                           \
        CONTAINER(S "containers"), CONTAINER(S "ephemeralContainers"),                            \
        {S "imagePullSecrets", MERGE, "name"}, {S "hostAliases", MERGE, "ip"},                    \
        {S "topologySpreadConstraints", MERGE, "topologyKey"},                                    \
        {S "schedulingGates", MERGE, "name"}, {S "resourceClaims", MERGE_RETAIN, "name"}

/* A pod template (PodTemplateSpec) at "spec.template". */
#define POD_TEMPLATE OBJECT_META("spec.template."), POD_SPEC("spec.template.spec.")

#define CONDITIONS_BY_TYPE(P) {P "status.conditions", MERGE, "type"}

#define END {NULL, 0, NULL}

const ckube_patch_meta_entry patchmeta_metadata_only[] = {OBJECT_META(""), END};

const ckube_patch_meta_entry patchmeta_pod[] = {
    OBJECT_META(""),
    POD_SPEC("spec."),
    CONDITIONS_BY_TYPE(""),
    {"status.podIPs", MERGE, "ip"},
    {"status.hostIPs", MERGE, "ip"},
    {"status.resourceClaimStatuses", MERGE_RETAIN, "name"},
    END,
};

const ckube_patch_meta_entry patchmeta_deployment[] = {
    OBJECT_META(""),
    {"spec.strategy", RETAIN, NULL},
    POD_TEMPLATE,
    CONDITIONS_BY_TYPE(""),
    END,
};

const ckube_patch_meta_entry patchmeta_replicaset[] = {
    OBJECT_META(""),
    POD_TEMPLATE,
    CONDITIONS_BY_TYPE(""),
    END,
};

const ckube_patch_meta_entry patchmeta_service[] = {
    OBJECT_META(""),
    {"spec.ports", MERGE, "port"},
    CONDITIONS_BY_TYPE(""),
    END,
};

const ckube_patch_meta_entry patchmeta_node[] = {
    OBJECT_META(""),
    {"spec.podCIDRs", MERGE, NULL},
    CONDITIONS_BY_TYPE(""),
    {"status.addresses", MERGE, "type"},
    END,
};

const ckube_patch_meta_entry patchmeta_namespace[] = {
    OBJECT_META(""),
    CONDITIONS_BY_TYPE(""),
    END,
};

const ckube_patch_meta_entry patchmeta_serviceaccount[] = {
    OBJECT_META(""),
    {"secrets", MERGE, "name"},
    END,
};

/* admissionregistration.k8s.io/v1: webhooks and their matchConditions
 * merge by name. */
#define WEBHOOKS {"webhooks", MERGE, "name"}, {"webhooks.matchConditions", MERGE, "name"}

const ckube_patch_meta_entry patchmeta_mutatingwebhookconfiguration[] = {
    OBJECT_META(""),
    WEBHOOKS,
    END,
};

const ckube_patch_meta_entry patchmeta_validatingwebhookconfiguration[] = {
    OBJECT_META(""),
    WEBHOOKS,
    END,
};

/* apiregistration.k8s.io/v1 APIService: status conditions merge by type. */
const ckube_patch_meta_entry patchmeta_apiservice[] = {
    OBJECT_META(""),
    CONDITIONS_BY_TYPE(""),
    END,
};

// clang-format on

const ckube_patch_meta_entry *builtin_patchmeta_for(const char *group, const char *kind)
{
    static const struct {
        const char *group, *kind;
        const ckube_patch_meta_entry *table;
    } kinds[] = {
        {"", "Pod", patchmeta_pod},
        {"apps", "Deployment", patchmeta_deployment},
        {"apps", "ReplicaSet", patchmeta_replicaset},
        {"", "Service", patchmeta_service},
        {"", "Endpoints", patchmeta_endpoints},
        {"", "Node", patchmeta_node},
        {"", "Namespace", patchmeta_namespace},
        {"", "ConfigMap", patchmeta_configmap},
        {"", "Secret", patchmeta_secret},
        {"", "ServiceAccount", patchmeta_serviceaccount},
        {"", "Event", patchmeta_event},
        {"events.k8s.io", "Event", patchmeta_events_v1_event},
        {"coordination.k8s.io", "Lease", patchmeta_lease},
        {"rbac.authorization.k8s.io", "Role", patchmeta_role},
        {"rbac.authorization.k8s.io", "ClusterRole", patchmeta_clusterrole},
        {"rbac.authorization.k8s.io", "RoleBinding", patchmeta_rolebinding},
        {"rbac.authorization.k8s.io", "ClusterRoleBinding", patchmeta_clusterrolebinding},
        {"admissionregistration.k8s.io", "MutatingWebhookConfiguration",
         patchmeta_mutatingwebhookconfiguration},
        {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration",
         patchmeta_validatingwebhookconfiguration},
        {"apiregistration.k8s.io", "APIService", patchmeta_apiservice},
    };
    if (!group || !kind)
        return NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(kinds[i].group, group) && !strcmp(kinds[i].kind, kind))
            return kinds[i].table;
    return NULL;
}
