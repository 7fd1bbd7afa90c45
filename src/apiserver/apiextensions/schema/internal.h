/* internal.h - what the files of the schema engine share (other modules
 * use schema.h):
 *   messages.c  values and limits as kube-openapi words them in messages;
 *   walk.c      the walk over an object and its schema, paths, causes; schema node helpers;
 *   prune.c     pruning unknown fields and applying defaults;
 *   regex.c     ECMA-262 patterns translated to POSIX, and Go regexp syntax errors;
 *   formats.c   the string formats (kube-openapi's strfmt registry);
 *   validate.c  validation of a value against its schema;
 *   schema.c    the API of schema.h.
 */
#ifndef CKUBE_APISERVER_APIEXTENSIONS_SCHEMA_INTERNAL_H
#define CKUBE_APISERVER_APIEXTENSIONS_SCHEMA_INTERNAL_H

#include "apiserver/apiextensions/schema/schema.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

#define MAX_DEPTH 200
enum { CTX_NORMAL = 0, CTX_ROOT = 1, CTX_EMBEDDED = 2 };

/* ---- messages.c ---- */

size_t sch_utf8_len(const char *s, size_t n);

char *sch_dump_canonical(const json_t *v);

char *schema_format_value(const json_t *v);

/* A schema number (limit) as text: integral values as integers when the
 * data is an integer (kube-openapi's *Int variants), else Go's %v. */
void sch_format_limit(char *out, size_t n, double limit, bool data_is_int);

/* ---- walk.c ---- */

typedef struct walk {
    unsigned flags;
    ckube_status *st;
    int ncauses;
    bool oom;
    bool collect_unknown;
    char **unknown;
    size_t nunknown, capunknown;
    ckube__strbuf path;
    int depth;
} walk;

size_t sch_path_push_key(walk *w, const char *key);

size_t sch_path_push_index(walk *w, size_t i);

void sch_path_pop(walk *w, size_t old);

const char *sch_cur_path(const walk *w);

void sch_add_cause(walk *w, const char *type, const char *field, const char *fmt, ...);

/* Adds "<Kind of error>: <value>: <detail>" at the current path. `value`
 * NULL renders as "" (upstream substitutes "" for a nil bad value). */
void sch_add_value_cause(walk *w, const char *type, const char *label, const json_t *value,
                         const char *detail);

void sch_add_invalid(walk *w, const json_t *value, const char *fmt, ...);

void sch_add_type_invalid(walk *w, const char *expected, const char *actual);

void sch_record_unknown(walk *w);

bool sch_true(const json_t *s, const char *key);

/* The keywords of one schema node that validation and pruning read,
 * found in one pass over the node's members (NULL: absent). A node has
 * a handful of members, and looking each keyword up by name hashed a
 * dozen names for every value a write validates. */
typedef struct sch_kw {
    const json_t *type, *enum_, *nullable, *int_or_string, *any_of, *one_of, *all_of, *not_;
    const json_t *format, *pattern, *max_length, *min_length;
    const json_t *multiple_of, *minimum, *maximum, *exclusive_minimum, *exclusive_maximum;
    const json_t *items, *min_items, *max_items, *unique_items, *list_type, *list_map_keys;
    const json_t *properties, *additional_properties, *min_properties, *max_properties;
    const json_t *required, *embedded_resource, *preserve_unknown_fields;
} sch_kw;

void sch_keywords(const json_t *s, sch_kw *kw);

/* kw as an object schema, or NULL (sch_obj's rule). */
static inline const json_t *sch_kw_obj(const json_t *kw)
{
    return json_is_object(kw) ? kw : NULL;
}

const json_t *sch_obj(const json_t *s, const char *key);

const char *sch_json_type_name(const json_t *v);

bool sch_is_integral(const json_t *v);

/* The `type` keyword as a list: a string or an array of strings. Returns
 * false when the schema has no usable type. */
bool sch_type_matches(const json_t *type, const json_t *v, bool *contains_null);

bool sch_has_type(const json_t *type);

char *sch_type_label(const json_t *type, bool int_or_string);

bool schema_type_is(const json_t *s, const char *name);

/* ---- prune.c ---- */

bool sch_is_resource_key(const char *k);

void sch_prune_node(walk *w, const json_t *s, json_t *v, int ctx);

/* ---- regex.c ---- */

/* Returns 1 match, 0 no match, -1 pattern not enforceable. */
int sch_pattern_match(const char *pattern, const char *s);

/* ---- formats.c ---- */

/* Returns false if `s` violates a known string format; unknown formats pass. */
bool sch_string_format_ok(const char *format, const char *s);

/* ---- validate.c ---- */

void sch_validate_node(walk *w, const json_t *s, const json_t *v, int ctx);

#endif
