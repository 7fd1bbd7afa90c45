/* schema.h - a structural OpenAPI v3 schema engine over jansson.
 *
 * One walk over an object and its schema (a resource_type's `schema`, or a
 * CRD version's openAPIV3Schema) does what the API server needs on a write:
 *
 *  - PRUNE: removes fields the schema does not describe, except under
 *    `x-kubernetes-preserve-unknown-fields: true`, `additionalProperties:
 *    true` and schemas that say nothing about their object (no type, no
 *    properties). An object schema with neither properties nor
 *    additionalProperties keeps nothing, as upstream's structural pruning.
 *  - OMITEMPTY (built-ins only): removes a property's empty map (an object
 *    schema with additionalProperties and no properties) or empty list
 *    unless the object's schema lists it as required. In Kubernetes' Go
 *    types a field is required exactly when it has no omitempty, so this
 *    is what decoding and encoding a built-in does: `data: {}` on a
 *    ConfigMap is not stored. Struct-shaped objects (with properties)
 *    stay, as Go keeps an empty struct.
 *  - DEFAULT: removes `null` from properties that are not `nullable` and
 *    fills absent (or such null) properties with their `default` (a deep
 *    copy). Built-in types rely on the null removal: Go decodes null into
 *    any field as its zero value, so `creationTimestamp: null` is valid.
 *  - VALIDATE: type (integer vs number, nullable, x-kubernetes-int-or-string),
 *    enum, pattern, format, min/max(+exclusive), multipleOf, min/maxLength,
 *    min/maxItems, uniqueItems, min/maxProperties, required,
 *    additionalProperties false, allOf/anyOf/oneOf/not,
 *    x-kubernetes-embedded-resource (apiVersion and kind required) and
 *    x-kubernetes-list-type set/map (Duplicate value). Each failure becomes a
 *    cause on `invalid` worded as upstream's apiextensions-apiserver words it
 *    (field "spec.replicas", message `Invalid value: "string": spec.replicas
 *    in body must be of type integer: "string"`).
 *
 * Unknown fields (those PRUNE removes, whether or not PRUNE is set) are
 * reported as dot paths with list indexes, e.g. "spec.foo" and
 * "spec.items[0].foo", for fieldValidation=Strict/Warn.
 *
 * The object is treated as a resource root: `apiVersion` and `kind` are
 * always allowed, and `metadata` is only checked to be an object (ObjectMeta
 * is validated elsewhere). Keys starting with "x-ckube-" in a schema are
 * ignored. Malformed schemas never crash the walk; what cannot be understood
 * is not enforced.
 *
 * Thread safety: schemas and objects are not shared-mutated; several threads
 * may walk the same schema at once.
 */
#ifndef CKUBE_APISERVER_SCHEMA_H
#define CKUBE_APISERVER_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "ckube/status.h"

enum {
    SCHEMA_PRUNE = 1u << 0,    /* remove unknown fields */
    SCHEMA_DEFAULT = 1u << 1,  /* drop non-nullable nulls, apply `default` */
    SCHEMA_VALIDATE = 1u << 2, /* add causes for invalid values */
    /* Drop empty maps and lists the schema does not require, as Go's
     * omitempty does when a built-in object is decoded and encoded again
     * (not for custom resources, which upstream keeps as sent). */
    SCHEMA_OMITEMPTY = 1u << 3,
    SCHEMA_ALL = SCHEMA_PRUNE | SCHEMA_DEFAULT | SCHEMA_VALIDATE,
};

/* Walks `obj` (modified in place by PRUNE/DEFAULT) against `schema`
 * (borrowed, read-only; NULL means anything goes). Pruning and defaulting
 * happen first, validation sees the result.
 *
 * `invalid` (may be NULL: causes are only counted) receives one cause per
 * failure via ckube_status_add_cause; the caller composes the 422 with
 * ckube_status_invalid_finish. If `unknown_fields` is non-NULL it is set to
 * a malloc'd array of malloc'd paths (NULL when there are none) and
 * *nunknown to its length, at most SCHEMA_MAX_UNKNOWN (the first ones
 * found; a path can be as long as the body is deep, so all of them could
 * take far more memory than the body); free with schema_free_paths.
 *
 * Returns the number of causes found (0: valid), or -1 when out of memory. */
#define SCHEMA_MAX_UNKNOWN 1000
int schema_apply(const json_t *schema, json_t *obj, unsigned flags, ckube_status *invalid,
                 char ***unknown_fields, size_t *nunknown);

/* VALIDATE alone, of a value that is not a resource root (e.g. an
 * object's metadata against the ObjectMeta schema): causes are named
 * from `path` (e.g. "metadata" gives "metadata.labels.a"; NULL or "" for
 * none). Same contract as schema_apply otherwise. */
int schema_validate_at(const json_t *schema, const json_t *value, const char *path,
                       ckube_status *invalid);

void schema_free_paths(char **paths, size_t n);

/* Renders a value the way upstream's field errors print a bad value: a
 * string Go-quoted ("a\nb" -> "\"a\\nb\""), numbers and booleans plainly
 * (floats as Go's %v: 1e+06, 0.5), objects and arrays as compact JSON with
 * sorted keys, null as null. Returns malloc'd text or NULL on OOM. */
char *schema_format_value(const json_t *v);

/* Converts an ECMA-262 pattern (as CRD schemas use; RE2 subset) to a POSIX
 * extended regular expression. Returns malloc'd text, or NULL if the pattern
 * uses something POSIX cannot express (the pattern is then not enforced). */
char *schema_ecma_to_posix(const char *pattern);

/* The error Go's regexp.Compile (what upstream checks a CRD's `pattern`
 * with) reports for the pattern, worded as Go words it ("error parsing
 * regexp: missing closing ): `(a`"), or NULL when it is not one of the
 * errors recognised here: a trailing backslash, a backreference, a
 * lookahead, an unclosed class or group, an unexpected ')', a repetition
 * with nothing to repeat, a nested repetition, a count over 1000.
 * Malloc'd. */
char *schema_re2_error(const char *pattern);

#endif
