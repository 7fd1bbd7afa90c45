/* ckube/selector.h - Kubernetes label and field selectors.
 *
 * Label selector grammar (as apimachinery's labels.Parse):
 *   key=value, key==value, key!=value, key in (a,b), key notin (a,b),
 *   key, !key, key>N, key<N (N an integer), requirements joined by ','.
 * `!=` and `notin` also match objects that lack the key.
 * Field selectors (fields.ParseSelector): key=value, key==value,
 * key!=value joined by ','; values may escape ',', '=' and '\' with '\'
 * (any other escape, or an unescaped ',' or '=' in a value, is an error, as
 * upstream). Keys are not validated and whitespace is significant.
 * A missing field compares as "" (upstream's fields.Set.Get), so
 * `f=` matches objects without f and `f!=` does not.
 */
#ifndef CKUBE_SELECTOR_H
#define CKUBE_SELECTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CKUBE_SEL_EQUALS = 1,     /* = and == */
    CKUBE_SEL_NOT_EQUALS,     /* != */
    CKUBE_SEL_IN,             /* in (...) */
    CKUBE_SEL_NOT_IN,         /* notin (...) */
    CKUBE_SEL_EXISTS,         /* key */
    CKUBE_SEL_DOES_NOT_EXIST, /* !key */
    CKUBE_SEL_GT,             /* > */
    CKUBE_SEL_LT,             /* < */
} ckube_sel_op;

typedef struct ckube_sel_requirement {
    char *key; /* owned */
    ckube_sel_op op;
    char **values; /* owned; sorted, deduplicated */
    size_t nvalues;
} ckube_sel_requirement;

/* A parsed selector (label or field). An empty selector (no requirements)
 * matches everything. */
typedef struct ckube_selector {
    ckube_sel_requirement *reqs; /* owned */
    size_t nreqs;
    bool is_field; /* parsed by ckube_field_selector_parse: field semantics */
} ckube_selector;

/* Looks up a label (or field) value; returns NULL when absent. The returned
 * string is borrowed and must stay valid during the match call. */
typedef const char *(*ckube_sel_lookup_fn)(void *ctx, const char *key);

/* Parses a label selector. `s` may be NULL or "" (matches everything).
 * On success returns 0 and *out (free with ckube_selector_free). On error
 * returns -1 and, if err is non-NULL, *err is a malloc'd message worded like
 * upstream (e.g. `unable to parse requirement: ...`); caller frees it.
 * Keys are validated as label keys (optional DNS prefix + '/' + name of at
 * most 63 chars) and values as label values. */
int ckube_label_selector_parse(const char *s, ckube_selector **out, char **err);

/* metav1.LabelSelectorAsSelector: the selector a LabelSelector object
 * stands for, {"matchLabels": {k: v}, "matchExpressions": [{"key": k,
 * "operator": "In"|"NotIn"|"Exists"|"DoesNotExist", "values": [...]}]},
 * every requirement ANDed. One with neither (or both empty) matches
 * everything. `ls` is borrowed. Same contract as
 * ckube_label_selector_parse; the errors are upstream's NewRequirement
 * ones (`values: Invalid value: []string(nil): for 'in', 'notin'
 * operators, values set can't be empty`, `"Foo" is not a valid label
 * selector operator`), or name the member that is not of its JSON type.
 * Upstream turns a nil LabelSelector into a selector that matches
 * nothing, which no ckube_selector expresses: NULL and anything but an
 * object (JSON null included) are refused here, so a caller for which
 * an absent selector selects nothing checks for it first. */
int ckube_label_selector_from_json(const json_t *ls, ckube_selector **out, char **err);

/* Parses a field selector (only =, ==, != are allowed). Same contract. */
int ckube_field_selector_parse(const char *s, ckube_selector **out, char **err);

bool ckube_selector_matches(const ckube_selector *sel, ckube_sel_lookup_fn lookup, void *ctx);
bool ckube_selector_empty(const ckube_selector *sel);

/* If `sel` requires key == value exactly (an = or == requirement, or an
 * `in` with one value), returns that value (borrowed from sel); else NULL.
 * Lets callers narrow a list by metadata.name or metadata.namespace. */
const char *ckube_selector_required_value(const ckube_selector *sel, const char *key);

/* Canonical string form (requirements sorted by key). Caller frees. */
char *ckube_selector_string(const ckube_selector *sel);

void ckube_selector_free(ckube_selector *sel);

#ifdef __cplusplus
}
#endif
#endif
