/* ckube/validation.h - object name, label and annotation validation.
 *
 * The rules and the messages follow apimachinery (pkg/util/validation,
 * pkg/api/validation, pkg/api/validation/path, pkg/apis/meta/v1/validation)
 * byte for byte, because clients show them to users and test suites compare
 * them. Two styles:
 *
 *   - ckube_is_*() / ckube_validate_name(): return NULL when the value is
 *     valid, else a malloc'd description (caller frees). When upstream
 *     reports several problems they are joined with "; " (as labels.Parse
 *     does).
 *   - ckube_validate_*() taking a ckube_status: append one cause per problem,
 *     with the field path (e.g. "metadata.name") and a message formatted as
 *     upstream's field.Error body, e.g. `Invalid value: "X": <detail>`.
 *
 * All functions are pure and thread-safe. Strings are borrowed.
 */
#ifndef CKUBE_VALIDATION_H
#define CKUBE_VALIDATION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckube/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKUBE_DNS1123_LABEL_MAX 63
#define CKUBE_DNS1123_SUBDOMAIN_MAX 253
#define CKUBE_DNS1035_LABEL_MAX 63
#define CKUBE_QUALIFIED_NAME_MAX 63
#define CKUBE_LABEL_VALUE_MAX 63
/* Sum of the lengths of all annotation keys and values (256 KiB). */
#define CKUBE_ANNOTATIONS_SIZE_MAX (256 * 1024)

/* Which rule an object's metadata.name follows (upstream's nameFn). */
enum ckube_name_kind {
    CKUBE_NAME_DNS1123_SUBDOMAIN = 0, /* most types: ConfigMap, Secret, Deployment, CRs */
    CKUBE_NAME_DNS1123_LABEL = 1,     /* Namespace */
    CKUBE_NAME_DNS1035_LABEL = 2,     /* Service */
    CKUBE_NAME_PATH_SEGMENT = 3,      /* not ".", "..", no "/" or "%" */
};

/* --- single-value checks: NULL = valid, else malloc'd message --- */

/* RFC 1123 subdomain: lower-case alphanumerics, '-', '.', at most 253. */
char *ckube_is_dns1123_subdomain(const char *value);
/* RFC 1123 label: lower-case alphanumerics and '-', at most 63. */
char *ckube_is_dns1123_label(const char *value);
/* RFC 1035 label: like a 1123 label but must start with a letter. */
char *ckube_is_dns1035_label(const char *value);
/* A name usable as a URL path segment. With `prefix` (a generateName) only
 * the "may not contain" rules apply. */
char *ckube_is_path_segment_name(const char *value, bool prefix);
/* A qualified name (label key, annotation key, finalizer): optional DNS
 * subdomain prefix and '/', then a name of at most 63 characters matching
 * ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]. */
char *ckube_is_qualified_name(const char *value);
/* A label value: empty, or a qualified-name part of at most 63 chars. */
char *ckube_is_label_value(const char *value);

/* Validates an object name of the given kind (enum ckube_name_kind). With
 * `prefix` the value is a generateName: a trailing '-' is allowed (masked as
 * upstream does before checking). An unknown kind is treated as
 * CKUBE_NAME_DNS1123_SUBDOMAIN. */
char *ckube_validate_name(int kind, const char *name, bool prefix);

/* --- field errors, formatted like upstream's field.Error bodies --- */

/* Go's %q rendering of a string (strconv.Quote). Caller frees. */
char *ckube_go_quote(const char *s);

/* Appends a FieldValueInvalid cause: `Invalid value: "<value>": <detail>`
 * (detail omitted when NULL or empty). */
void ckube_field_invalid(ckube_status *st, const char *field, const char *value,
                         const char *detail);
/* Same, for an integer bad value: `Invalid value: -1: <detail>`. */
void ckube_field_invalid_int(ckube_status *st, const char *field, int64_t value,
                             const char *detail);
/* FieldValueRequired: `Required value` or `Required value: <detail>`. */
void ckube_field_required(ckube_status *st, const char *field, const char *detail);
/* FieldValueForbidden: `Forbidden: <detail>`. */
void ckube_field_forbidden(ckube_status *st, const char *field, const char *detail);
/* FieldValueTooLong: `Too long: may not be more than <max> bytes`. */
void ckube_field_too_long(ckube_status *st, const char *field, long max_bytes);

/* --- metadata validation appending causes to `st` --- */

/* One FieldValueInvalid cause at `field` per problem with `name`. */
void ckube_validate_name_field(ckube_status *st, const char *field, const char *name, int kind,
                               bool prefix);
/* `labels` is the metadata.labels object (NULL or non-object: nothing to
 * check). Keys must be qualified names and values label values; causes
 * are reported at `field` (e.g. "metadata.labels"). Non-string values are
 * skipped (a decoding concern, not a validation one). */
void ckube_validate_labels(const json_t *labels, const char *field, ckube_status *st);
/* A metav1 LabelSelector at `path` (e.g. "spec.selector"; NULL or
 * non-object `sel`: nothing to check), as upstream's
 * ValidateLabelSelector: matchLabels as labels; in each matchExpression
 * the values the operator needs or forbids, the operator itself, the key
 * (a qualified name) and, unless `allow_invalid_values`
 * (AllowInvalidLabelValueInSelector), each value (a label value).
 * Returns how many causes it added to `st` (dropped ones included). */
size_t ckube_validate_label_selector(const json_t *sel, const char *path, bool allow_invalid_values,
                                     ckube_status *st);
/* Annotation keys must be qualified names (case-insensitively) and the
 * total size of keys and values at most CKUBE_ANNOTATIONS_SIZE_MAX. */
void ckube_validate_annotations(const json_t *annotations, const char *field, ckube_status *st);

/* `refs` is metadata.ownerReferences (NULL or non-array: nothing to
 * check), as upstream's ValidateOwnerReferences: each reference needs an
 * apiVersion with a version, a kind, a name and a uid (causes at
 * `field`.apiVersion etc., without the list index, as upstream names
 * them); a v1 Event cannot be an owner; at most one reference may have
 * controller true. Values of the wrong type count as empty. */
void ckube_validate_owner_references(const json_t *refs, const char *field, ckube_status *st);
/* `finalizers` is metadata.finalizers: each a qualified name, and not
 * both "orphan" and "foregroundDeletion". Non-string entries are skipped
 * (a decoding concern). */
void ckube_validate_finalizers(const json_t *finalizers, const char *field, ckube_status *st);

/* Validates obj.metadata on create, as upstream's ValidateObjectMeta:
 *   - metadata.generateName (if set) with the prefix rules of name_kind;
 *   - metadata.name with name_kind, or `Required value: name or
 *     generateName is required` when both are empty. Call this after the
 *     name was generated; if name is still empty while generateName is set,
 *     only generateName is checked;
 *   - metadata.namespace: required and a DNS-1123 label when `namespaced`,
 *     `Forbidden: not allowed on this type` otherwise;
 *   - metadata.generation >= 0, metadata.labels, metadata.annotations,
 *     metadata.ownerReferences and metadata.finalizers (above).
 * `obj` is borrowed; causes are appended to `st` (typically a status from
 * ckube_status_invalid_begin). */
void ckube_validate_object_meta(const json_t *obj, bool namespaced, int name_kind,
                                ckube_status *st);

#ifdef __cplusplus
}
#endif
#endif
