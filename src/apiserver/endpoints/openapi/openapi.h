/* openapi.h - /openapi/v3 and /openapi/v2 documents built from a snapshot
 * of the registry's types.
 *
 * What clients rely on:
 *  - kubectl's --validate=strict (the default) looks, in the group-version
 *    document, for a PATCH operation whose `x-kubernetes-group-version-kind`
 *    is the object's kind and which has a query parameter named
 *    `fieldValidation`. Every PATCH/PUT/POST operation here has it.
 *  - kubectl explain finds the kind from the GET/POST/... operations of the
 *    resource's paths, then the component schema whose
 *    `x-kubernetes-group-version-kind` list contains it, and follows
 *    `allOf: [{$ref: "#/components/schemas/NAME"}]` references.
 *  - kubectl apply computes strategic merge patches from the OpenAPI schema
 *    when the PATCH operation accepts application/strategic-merge-patch+json.
 *    It is deliberately not listed, so kubectl uses its compiled-in patch
 *    metadata for built-in kinds (exact) and merge patches for custom ones.
 *
 * Component names: built-ins use upstream's names
 * ("io.k8s.api.core.v1.ConfigMap"); custom types use the reversed group
 * ("samplecrd.k8s.io" -> "io.k8s.samplecrd.v1.Network"). Every document
 * also carries the meta/v1 definitions its operations refer to.
 *
 * The types are borrowed; every function returns a new document the caller
 * owns. Functions are pure (no global state beyond the built-in schema
 * cache) and thread-safe.
 */
#ifndef CKUBE_APISERVER_OPENAPI_H
#define CKUBE_APISERVER_OPENAPI_H

#include <jansson.h>
#include <stddef.h>

#include "apiserver/registry/rest/registry.h"

/* {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=HEX"},
 *            "apis/apps/v1": {...}, ...}} for every group-version of the
 * types. HEX is the upper-case SHA-512 of the group-version document, so
 * it changes whenever that document does. */
json_t *openapi_v3_index(resource_type **types, size_t n);

/* The OpenAPI 3.0 document of one group-version ("" group for core), or
 * NULL if no type belongs to it. */
json_t *openapi_v3_group_version(resource_type **types, size_t n, const char *group,
                                 const char *version);

/* The Swagger 2.0 document of all types. */
json_t *openapi_v2(resource_type **types, size_t n);

/* Upper-case hex SHA-512 of a document's canonical encoding (compact,
 * sorted keys). Malloc'd; NULL on failure. */
char *openapi_hash(const json_t *doc);

/* The OpenAPI definition name of a type's kind (or, with `list`, of its list
 * kind), e.g. "io.k8s.api.core.v1.ConfigMap". Malloc'd. */
char *openapi_definition_name(const resource_type *t, int list);

#endif
