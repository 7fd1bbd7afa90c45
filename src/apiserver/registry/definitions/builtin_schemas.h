/* builtin_schemas.h - OpenAPI v3 schemas of the built-in types.
 *
 * The schemas are ckube's own description of the Kubernetes API objects it
 * serves (core/v1 Namespace, ConfigMap, Secret, ServiceAccount, Service,
 * Endpoints, Pod, Node, Event; apps/v1 Deployment, ReplicaSet;
 * coordination.k8s.io/v1 Lease; events.k8s.io/v1 Event;
 * rbac.authorization.k8s.io/v1 Role, ClusterRole, RoleBinding,
 * ClusterRoleBinding; admissionregistration.k8s.io/v1
 * MutatingWebhookConfiguration, ValidatingWebhookConfiguration;
 * apiregistration.k8s.io/v1 APIService; the review types). They are
 * self-contained (no $ref): shared definitions are inlined, each inlined
 * copy marked with "x-ckube-ref": "<definition name>" (e.g.
 * "io.k8s.api.core.v1.Container") so the OpenAPI publisher can turn it back
 * into a $ref to a named component. The schema engine ignores the marker.
 *
 * Parts of the API that evolve quickly or are rarely used (affinity, most
 * volume sources, status internals) are `x-kubernetes-preserve-unknown-fields`
 * so that valid objects from newer clients are never rejected. Built-in
 * schemas carry no defaults: defaulting of built-ins is the types'
 * prepare_create hooks' job. They rely on SCHEMA_DEFAULT's removal of
 * non-nullable nulls (e.g. `creationTimestamp: null`).
 *
 * "x-ckube-required" lists fields upstream's OpenAPI marks required but
 * its decoding does not enforce (its validation reports them, in its own
 * words): the schema engine ignores the key, the OpenAPI publisher turns
 * it into `required`. In the same way "x-ckube-list-type" and
 * "x-ckube-list-map-keys" are published as x-kubernetes-list-type and
 * x-kubernetes-list-map-keys: lists upstream publishes as list-type maps
 * whose duplicate keys its validation reports (Duplicate value at the
 * key's field), which the schema engine would otherwise report first in
 * its own words.
 *
 * All functions are thread-safe; parsing happens once.
 */
#ifndef CKUBE_APISERVER_BUILTIN_SCHEMAS_H
#define CKUBE_APISERVER_BUILTIN_SCHEMAS_H

#include <jansson.h>

/* The schema of a built-in kind ("" group for core): a new reference to
 * the shared, immutable schema (its subtrees are shared with other kinds'
 * schemas: never modify it; json_deep_copy it to edit), or NULL if ckube
 * has none for that kind. */
json_t *builtin_schema(const char *group, const char *version, const char *kind);

/* The OpenAPI definition name of a built-in kind, e.g.
 * "io.k8s.api.apps.v1.Deployment", or NULL. Static storage. */
const char *builtin_definition_name(const char *group, const char *version, const char *kind);

/* A shared definition by name (as found in "x-ckube-ref" markers, e.g.
 * "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), fully inlined: a new
 * reference (private copy) or NULL if unknown. */
json_t *builtin_schema_fragment(const char *name);

#endif
