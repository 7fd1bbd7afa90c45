/* ckube/typed.h - typed objects: the runtime of the code ckube-gen writes.
 *
 * ckube-gen (docs/ckube-gen.md) turns a CRD's or an OpenAPI document's
 * schemas into C structs. The generated code holds no decoder of its own:
 * it describes each struct in tables (ckube_struct_info: each member's
 * JSON name, kind and offset), and the functions here decode, encode,
 * copy, default and free any struct so described, as protobuf-c's
 * descriptors do for protobuf messages. One codec, tested and fuzzed
 * once, serves every generated package; the generated files stay small.
 *
 * How a schema's values are held (the member named x):
 *
 *   string            char *x                         NULL: absent
 *   integer           int64_t x; bool has_x           !has_x: absent
 *   number            double x; bool has_x
 *   boolean           bool x; bool has_x
 *   object            T *x                            NULL: absent
 *   array             E *x; size_t n_x; bool has_x    !has_x: absent ([] is has_x, n_x 0)
 *   map               char **x_keys; E *x; size_t n_x; bool has_x
 *   int-or-string     ckube_int_or_string x           type CKUBE_IOS_NONE: absent
 *   anything else     json_t *x (an owned reference)  NULL: absent
 *
 * E, an array's or map's element: char * (NULL is JSON null), int64_t,
 * double, bool, T (the struct itself, not a pointer), ckube_int_or_string
 * or json_t * (elements that are arrays or maps, or nullable numbers,
 * booleans and objects). A field the schema marks nullable has also
 * `bool x_null`: true holds JSON null (and the value is absent). Every
 * struct ends with `json_t *unknown`: the members its schema does not
 * name, in their order, re-emitted after the known ones, so an object a
 * newer schema wrote survives a read-modify-write by older code.
 *
 * A top-level kind's struct begins with `ckube_typed base` (so any
 * generated object is a ckube_typed *), then api_version, kind and
 * `ckube_object_meta metadata`. Encoding emits an absent value for
 * nothing: a field with has_x false, NULL, or type NONE is left out. For
 * convenience an array, map or the metadata is emitted when it holds
 * anything even if its has_x is false (has_x keeps an empty one).
 *
 * Ownership: a decoded or copied struct owns every string, element array
 * and nested struct it points to, and one reference of each json_t.
 * ckube_struct_free frees all of it; set strings with ckube_set_string
 * (or malloc'd copies) so that it can.
 *
 * Nulls in fields the schema does not mark nullable decode as absent, as
 * kube-apiserver prunes them. A value of the wrong type is an error: a
 * 422 Invalid Status whose cause names the field's path, in the
 * apiserver's words. Numbers of a `number` field keep their value, not
 * their spelling: 3.0 is encoded as 3 (as Go's encoding/json does).
 */
#ifndef CKUBE_TYPED_H
#define CKUBE_TYPED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckube/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the values --------------------------------------------------------- */

typedef enum ckube_int_or_string_type {
    CKUBE_IOS_NONE = 0, /* absent */
    CKUBE_IOS_INT,
    CKUBE_IOS_STRING,
} ckube_int_or_string_type;

/* x-kubernetes-int-or-string (intstr.IntOrString). */
typedef struct ckube_int_or_string {
    ckube_int_or_string_type type;
    int64_t int_value;
    char *str_value; /* owned; set when type is CKUBE_IOS_STRING */
} ckube_int_or_string;

/* metav1.OwnerReference. */
typedef struct ckube_owner_reference {
    char *api_version;
    char *kind;
    char *name;
    char *uid;
    bool controller, has_controller;
    bool block_owner_deletion, has_block_owner_deletion;
    json_t *unknown;
} ckube_owner_reference;

/* metav1.ObjectMeta: one struct, hand-written, shared by every generated
 * package. (`namespace_`: the generated names avoid C++'s keywords too, so
 * that the headers can be included from C++, as libckube's are.) */
typedef struct ckube_object_meta {
    char *name;
    char *generate_name;
    char *namespace_;
    char *self_link;
    char *uid;
    char *resource_version;
    int64_t generation;
    bool has_generation;
    char *creation_timestamp; /* RFC 3339 */
    char *deletion_timestamp;
    int64_t deletion_grace_period_seconds;
    bool has_deletion_grace_period_seconds;
    char **labels_keys;
    char **labels;
    size_t n_labels;
    bool has_labels;
    char **annotations_keys;
    char **annotations;
    size_t n_annotations;
    bool has_annotations;
    ckube_owner_reference *owner_references;
    size_t n_owner_references;
    bool has_owner_references;
    char **finalizers;
    size_t n_finalizers;
    bool has_finalizers;
    json_t *managed_fields; /* as the server sent them */
    json_t *unknown;
} ckube_object_meta;

/* ---- how the generated code describes its structs ------------------------ */

typedef enum ckube_value_kind {
    CKUBE_VALUE_STRING = 1,
    CKUBE_VALUE_INT,
    CKUBE_VALUE_NUMBER,
    CKUBE_VALUE_BOOL,
    CKUBE_VALUE_OBJECT,
    CKUBE_VALUE_ARRAY,
    CKUBE_VALUE_MAP,
    CKUBE_VALUE_INT_OR_STRING,
    CKUBE_VALUE_JSON,
} ckube_value_kind;

typedef struct ckube_struct_info ckube_struct_info;
typedef struct ckube_type_info ckube_type_info;

/* A value's type. An ARRAY's or MAP's `items` is its element: a scalar,
 * an OBJECT (held in place), INT_OR_STRING or JSON. */
typedef struct ckube_value_info {
    ckube_value_kind kind;
    const ckube_struct_info *object;      /* OBJECT */
    const struct ckube_value_info *items; /* ARRAY, MAP */
} ckube_value_info;

/* The offset of a member a field does not have. */
#define CKUBE_NO_MEMBER ((size_t)-1)

typedef struct ckube_field_info {
    const char *json_name;
    ckube_value_info value;
    bool inline_object;       /* OBJECT held in the struct, not by pointer */
    size_t offset;            /* the value (the element array for ARRAY and MAP) */
    size_t has_offset;        /* bool has_x, or CKUBE_NO_MEMBER */
    size_t n_offset;          /* size_t n_x: ARRAY, MAP */
    size_t keys_offset;       /* char **x_keys: MAP */
    size_t null_offset;       /* bool x_null: nullable fields */
    const char *default_json; /* the schema's default, as JSON text, or NULL */
} ckube_field_info;

struct ckube_struct_info {
    const char *name; /* the C type's name, for messages */
    size_t size;
    const ckube_field_info *fields;
    size_t nfields;
    size_t unknown_offset;
    /* A top-level kind's struct (it begins with ckube_typed): its type,
     * which new, decode and copy set in base. NULL for nested structs. */
    const ckube_type_info *type;
};

/* A kind, as a scheme knows it. */
struct ckube_type_info {
    const char *group; /* "" for the core group */
    const char *version;
    const char *kind;
    const char *plural;
    bool namespaced;
    const ckube_struct_info *object;
};

/* What every top-level generated struct begins with. */
typedef struct ckube_typed {
    const ckube_type_info *type;
} ckube_typed;

/* The tables of the hand-written structs, for generated tables to point to. */
extern const ckube_struct_info ckube_object_meta_info;
extern const ckube_struct_info ckube_owner_reference_info;

/* ---- what the generated functions call ---------------------------------- */

/* A zeroed struct of `si` (base.type set for a kind). NULL: out of memory.
 * Free with ckube_struct_free. */
void *ckube_struct_new(const ckube_struct_info *si);

/* Frees `obj` (may be NULL) and everything it owns. */
void ckube_struct_free(const ckube_struct_info *si, void *obj);

/* Clears what `obj` owns and zeroes it, leaving the struct itself (for a
 * struct held in place, such as metadata). base.type is kept. */
void ckube_struct_clear(const ckube_struct_info *si, void *obj);

/* Decodes JSON text into a new struct of `si`. NULL with *err (if err is
 * not NULL; free with ckube_status_free): 400 BadRequest for text that is
 * not a JSON object, 422 Invalid naming the path of a value of the wrong
 * type. NULL with *err NULL: out of memory. */
void *ckube_struct_decode(const ckube_struct_info *si, const char *json, size_t len,
                          ckube_status **err);

/* Decodes a JSON value (borrowed; unknown members and JSON-valued fields
 * are kept by reference, so `j` must not be a tree other threads hold,
 * such as a cache object: decode a json_deep_copy of one) into a new
 * struct. Errors as ckube_struct_decode's. */
void *ckube_struct_from_json(const ckube_struct_info *si, const json_t *j, ckube_status **err);

/* The JSON of `obj`: a new reference sharing nothing with obj (so obj may
 * be a cached object other threads read), or NULL when out of memory. */
json_t *ckube_struct_to_json(const ckube_struct_info *si, const void *obj);

/* The compact JSON text of `obj`: malloc'd, or NULL when out of memory. */
char *ckube_struct_encode(const ckube_struct_info *si, const void *obj);

/* A deep copy of `obj` (json_t members are deep-copied too, so the copy
 * shares nothing). NULL when out of memory. */
void *ckube_struct_copy(const ckube_struct_info *si, const void *obj);

/* Applies the schema's defaults as kube-apiserver's structural defaulting
 * does: to every absent field with a default, in `obj` and in the objects,
 * array elements and map values it holds (a default that creates an
 * object is defaulted in turn). 0, or -1 when out of memory or a default
 * does not decode (the generator checked them, so a bug). */
int ckube_struct_set_defaults(const ckube_struct_info *si, void *obj);

/* Replaces the string at *slot with a copy of `value` (NULL clears it).
 * 0, or -1 when out of memory (*slot unchanged). */
int ckube_set_string(char **slot, const char *value);

/* The value of `key` in a string map (labels, annotations, map[string]string
 * fields), borrowed, or NULL. */
const char *ckube_string_map_get(char *const *keys, char *const *values, size_t n, const char *key);

/* Sets `key` to a copy of `value` in a string map, adding it at the end
 * if missing (and setting *has when has is not NULL). 0, or -1 when out
 * of memory (the map unchanged). */
int ckube_string_map_set(char ***keys, char ***values, size_t *n, bool *has, const char *key,
                         const char *value);

/* ---- the values held as strings ------------------------------------------ */

/* A resource.Quantity ("500m", "64Mi", "1.5", "2e3", "-1k") as its value
 * in milli-units (upstream's MilliValue) or in units (Value), rounded away
 * from zero as upstream rounds. 0, or -1 for text that is not a quantity
 * (upstream's expression: sign, digits with at most one '.', then one of
 * the binary suffixes Ki Mi Gi Ti Pi Ei, the decimal n u m k M G T P E, or
 * an exponent e/E with a signed integer), a value beyond int64, or more
 * than 19 significant digits (upstream keeps any precision; an int64
 * holds 19). */
int ckube_quantity_milli(const char *s, int64_t *milli);
int ckube_quantity_value(const char *s, int64_t *value);

/* A date-time field (RFC 3339, "2026-11-27T10:00:00Z", fractions and
 * offsets allowed) as Unix seconds and nanoseconds. 0, or -1 when it is
 * not one. */
int ckube_time_parse(const char *s, int64_t *seconds, int32_t *nanos);

#ifdef __cplusplus
}
#endif

#endif
