/* The codec of typed objects (ckube/typed.h): decode, encode, copy,
 * defaults and free for any struct described by a ckube_struct_info.
 *
 * Every function walks the tables, never the JSON's shape alone: a member
 * is reached by its offset and its kind says what is stored there. The
 * invariant that makes errors simple: a struct being filled is always
 * consistent (a pointer is stored the moment it is allocated, element
 * arrays are zeroed), so whatever fails half-way is freed by the one
 * ckube_struct_free. */
#include "ckube/typed.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/validation.h"
#include "typed/tables.h"

#define AT(p, off, T) ((T *)((char *)(p) + (off)))
#define CAT(p, off, T) ((const T *)((const char *)(p) + (off)))

typedef char **strv; /* (for CAT: a const pointer to char **) */

/* ---- the hand-written structs' tables ---------------------------------- */

static const ckube_value_info V_STRING = {.kind = CKUBE_VALUE_STRING};
static const ckube_value_info V_OWNER = {.kind = CKUBE_VALUE_OBJECT,
                                         .object = &ckube_owner_reference_info};

static const ckube_field_info OWNER_FIELDS[] = {
    SCALAR("apiVersion", ckube_owner_reference, api_version, CKUBE_VALUE_STRING),
    SCALAR("kind", ckube_owner_reference, kind, CKUBE_VALUE_STRING),
    SCALAR("name", ckube_owner_reference, name, CKUBE_VALUE_STRING),
    SCALAR("uid", ckube_owner_reference, uid, CKUBE_VALUE_STRING),
    FLAGGED("controller", ckube_owner_reference, controller, CKUBE_VALUE_BOOL),
    FLAGGED("blockOwnerDeletion", ckube_owner_reference, block_owner_deletion, CKUBE_VALUE_BOOL),
};

const ckube_struct_info ckube_owner_reference_info = {
    .name = "ckube_owner_reference",
    .size = sizeof(ckube_owner_reference),
    .fields = OWNER_FIELDS,
    .nfields = sizeof OWNER_FIELDS / sizeof *OWNER_FIELDS,
    .unknown_offset = offsetof(ckube_owner_reference, unknown),
};

static const ckube_field_info META_FIELDS[] = {
    SCALAR("name", ckube_object_meta, name, CKUBE_VALUE_STRING),
    SCALAR("generateName", ckube_object_meta, generate_name, CKUBE_VALUE_STRING),
    SCALAR("namespace", ckube_object_meta, namespace_, CKUBE_VALUE_STRING),
    SCALAR("selfLink", ckube_object_meta, self_link, CKUBE_VALUE_STRING),
    SCALAR("uid", ckube_object_meta, uid, CKUBE_VALUE_STRING),
    SCALAR("resourceVersion", ckube_object_meta, resource_version, CKUBE_VALUE_STRING),
    FLAGGED("generation", ckube_object_meta, generation, CKUBE_VALUE_INT),
    SCALAR("creationTimestamp", ckube_object_meta, creation_timestamp, CKUBE_VALUE_STRING),
    SCALAR("deletionTimestamp", ckube_object_meta, deletion_timestamp, CKUBE_VALUE_STRING),
    FLAGGED("deletionGracePeriodSeconds", ckube_object_meta, deletion_grace_period_seconds,
            CKUBE_VALUE_INT),
    MAP("labels", ckube_object_meta, labels, &V_STRING),
    MAP("annotations", ckube_object_meta, annotations, &V_STRING),
    ARRAY("ownerReferences", ckube_object_meta, owner_references, &V_OWNER),
    ARRAY("finalizers", ckube_object_meta, finalizers, &V_STRING),
    SCALAR("managedFields", ckube_object_meta, managed_fields, CKUBE_VALUE_JSON),
};

const ckube_struct_info ckube_object_meta_info = {
    .name = "ckube_object_meta",
    .size = sizeof(ckube_object_meta),
    .fields = META_FIELDS,
    .nfields = sizeof META_FIELDS / sizeof *META_FIELDS,
    .unknown_offset = offsetof(ckube_object_meta, unknown),
};

/* ---- sizes and presence ------------------------------------------------- */

/* The size of one element of kind v held in place; 0 for kinds that
 * cannot be elements (the generator never makes them). */
static size_t elem_size(const ckube_value_info *v)
{
    switch (v->kind) {
    case CKUBE_VALUE_STRING:
        return sizeof(char *);
    case CKUBE_VALUE_INT:
        return sizeof(int64_t);
    case CKUBE_VALUE_NUMBER:
        return sizeof(double);
    case CKUBE_VALUE_BOOL:
        return sizeof(bool);
    case CKUBE_VALUE_OBJECT:
        return v->object->size;
    case CKUBE_VALUE_INT_OR_STRING:
        return sizeof(ckube_int_or_string);
    case CKUBE_VALUE_JSON:
        return sizeof(json_t *);
    default:
        return 0;
    }
}

static bool flag_at(const void *obj, size_t off)
{
    return off != NO && *CAT(obj, off, bool);
}

static void set_flag(void *obj, size_t off, bool v)
{
    if (off != NO)
        *AT(obj, off, bool) = v;
}

static size_t count_at(const void *obj, const ckube_field_info *f)
{
    return f->n_offset != NO ? *CAT(obj, f->n_offset, size_t) : 0;
}

static bool struct_empty(const ckube_struct_info *si, const void *obj);

/* Whether field f of obj holds a value (JSON null aside). */
static bool present(const ckube_field_info *f, const void *obj)
{
    switch (f->value.kind) {
    case CKUBE_VALUE_STRING:
    case CKUBE_VALUE_JSON:
        return *CAT(obj, f->offset, void *) != NULL;
    case CKUBE_VALUE_OBJECT:
        if (f->inline_object)
            return flag_at(obj, f->has_offset) ||
                   !struct_empty(f->value.object, CAT(obj, f->offset, char));
        return *CAT(obj, f->offset, void *) != NULL;
    case CKUBE_VALUE_ARRAY:
    case CKUBE_VALUE_MAP:
        return flag_at(obj, f->has_offset) || count_at(obj, f) > 0;
    case CKUBE_VALUE_INT_OR_STRING:
        return CAT(obj, f->offset, ckube_int_or_string)->type != CKUBE_IOS_NONE;
    default:
        return flag_at(obj, f->has_offset);
    }
}

static bool struct_empty(const ckube_struct_info *si, const void *obj)
{
    for (size_t i = 0; i < si->nfields; i++)
        if (present(&si->fields[i], obj) || flag_at(obj, si->fields[i].null_offset))
            return false;
    return json_object_size(*CAT(obj, si->unknown_offset, json_t *)) == 0;
}

/* ---- free --------------------------------------------------------------- */

static void clear_struct(const ckube_struct_info *si, void *obj);

/* Frees what one element (or a non-pointer field's value) owns. */
static void clear_elem(const ckube_value_info *v, void *slot)
{
    switch (v->kind) {
    case CKUBE_VALUE_STRING:
        free(*(char **)slot);
        break;
    case CKUBE_VALUE_JSON:
        json_decref(*(json_t **)slot);
        break;
    case CKUBE_VALUE_OBJECT:
        clear_struct(v->object, slot);
        break;
    case CKUBE_VALUE_INT_OR_STRING:
        free(((ckube_int_or_string *)slot)->str_value);
        break;
    default:
        break;
    }
}

static void clear_field(const ckube_field_info *f, void *obj)
{
    void *slot = AT(obj, f->offset, char);
    switch (f->value.kind) {
    case CKUBE_VALUE_OBJECT:
        if (f->inline_object) {
            clear_struct(f->value.object, slot);
        } else if (*(void **)slot) {
            clear_struct(f->value.object, *(void **)slot);
            free(*(void **)slot);
        }
        break;
    case CKUBE_VALUE_ARRAY:
    case CKUBE_VALUE_MAP: {
        char *elems = *(char **)slot;
        size_t n = count_at(obj, f), es = elem_size(f->value.items);
        for (size_t i = 0; elems && i < n; i++)
            clear_elem(f->value.items, elems + i * es);
        free(elems);
        if (f->keys_offset != NO) {
            char **keys = *AT(obj, f->keys_offset, char **);
            for (size_t i = 0; keys && i < n; i++)
                free(keys[i]);
            free(keys);
        }
        break;
    }
    default:
        clear_elem(&f->value, slot);
    }
}

static void clear_struct(const ckube_struct_info *si, void *obj)
{
    for (size_t i = 0; i < si->nfields; i++)
        clear_field(&si->fields[i], obj);
    json_decref(*AT(obj, si->unknown_offset, json_t *));
    /* zeroed, but a kind keeps its type */
    const ckube_type_info *t = si->type ? ((ckube_typed *)obj)->type : NULL;
    memset(obj, 0, si->size);
    if (si->type)
        ((ckube_typed *)obj)->type = t;
}

void ckube_struct_clear(const ckube_struct_info *si, void *obj)
{
    if (obj)
        clear_struct(si, obj);
}

void ckube_struct_free(const ckube_struct_info *si, void *obj)
{
    if (!obj)
        return;
    clear_struct(si, obj);
    free(obj);
}

void *ckube_struct_new(const ckube_struct_info *si)
{
    void *obj = calloc(1, si->size);
    if (obj && si->type)
        ((ckube_typed *)obj)->type = si->type;
    return obj;
}

/* ---- decode ------------------------------------------------------------- */

typedef struct dec {
    const ckube_struct_info *root;
    const char *name; /* the object's metadata.name, for the Status */
    ckube_status **err;
    bool failed;
    char path[512]; /* the field path, as upstream writes it: spec.ports[0].port */
    size_t plen;
} dec;

static const char *json_type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static const char *kind_type_name(ckube_value_kind k)
{
    switch (k) {
    case CKUBE_VALUE_STRING:
        return "string";
    case CKUBE_VALUE_INT:
        return "integer";
    case CKUBE_VALUE_NUMBER:
        return "number";
    case CKUBE_VALUE_BOOL:
        return "boolean";
    case CKUBE_VALUE_ARRAY:
        return "array";
    case CKUBE_VALUE_INT_OR_STRING:
        return "integer or string"; /* (upstream: "integer,string") */
    default:
        return "object";
    }
}

/* Appends a path segment; returns the length to restore. (A path longer
 * than the buffer is cut: messages only.) */
static size_t path_push(dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t path_push(dec *d, const char *fmt, ...)
{
    size_t old = d->plen;
    if (d->plen < sizeof d->path - 1) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(d->path + d->plen, sizeof d->path - d->plen, fmt, ap);
        va_end(ap);
        if (n > 0)
            d->plen =
                d->plen + (size_t)n < sizeof d->path ? d->plen + (size_t)n : sizeof d->path - 1;
    }
    return old;
}

static void path_pop(dec *d, size_t len)
{
    d->plen = len;
    d->path[len] = 0;
}

/* The apiserver's wording for a value of the wrong type:
 *   spec.replicas: Invalid value: "string": spec.replicas in body must be
 *   of type integer: "string" */
static int type_error(dec *d, ckube_value_kind want, const json_t *got)
{
    d->failed = true;
    if (!d->err)
        return -1;
    const ckube_type_info *t = d->root->type;
    ckube_status *st =
        ckube_status_invalid_begin(t ? t->group : NULL, t ? t->kind : d->root->name, d->name);
    if (!st)
        return -1;
    const char *actual = json_type_name(got);
    const char *field = d->plen ? d->path : "<root>";
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_TYPE_INVALID, field,
                           "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"", actual,
                           field, kind_type_name(want), actual);
    ckube_status_invalid_finish(st);
    *d->err = st;
    return -1;
}

static int oom(dec *d)
{
    d->failed = true;
    return -1;
}

/* An integer from an integer, or a number with an integral value that
 * int64 holds (as kube-openapi's validator accepts 1.0 for an integer). */
static bool as_int(const json_t *j, int64_t *out)
{
    if (json_is_integer(j)) {
        *out = (int64_t)json_integer_value(j);
        return true;
    }
    if (json_is_real(j)) {
        double v = json_real_value(j);
        if (v == trunc(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0) {
            *out = (int64_t)v;
            return true;
        }
    }
    return false;
}

static int decode_struct(dec *d, const ckube_struct_info *si, const json_t *j, void *out);

/* Decodes j into an element held in place at slot (zeroed). */
static int decode_elem(dec *d, const ckube_value_info *v, const json_t *j, void *slot)
{
    switch (v->kind) {
    case CKUBE_VALUE_STRING:
        if (json_is_null(j))
            return 0; /* NULL */
        if (!json_is_string(j))
            return type_error(d, v->kind, j);
        if (!(*(char **)slot = strdup(json_string_value(j))))
            return oom(d);
        return 0;
    case CKUBE_VALUE_INT:
        if (!as_int(j, (int64_t *)slot))
            return type_error(d, v->kind, j);
        return 0;
    case CKUBE_VALUE_NUMBER:
        if (!json_is_number(j))
            return type_error(d, v->kind, j);
        *(double *)slot = json_number_value(j);
        return 0;
    case CKUBE_VALUE_BOOL:
        if (!json_is_boolean(j))
            return type_error(d, v->kind, j);
        *(bool *)slot = json_is_true(j);
        return 0;
    case CKUBE_VALUE_OBJECT:
        return decode_struct(d, v->object, j, slot);
    case CKUBE_VALUE_INT_OR_STRING: {
        ckube_int_or_string *ios = slot;
        if (json_is_string(j)) {
            if (!(ios->str_value = strdup(json_string_value(j))))
                return oom(d);
            ios->type = CKUBE_IOS_STRING;
        } else if (as_int(j, &ios->int_value)) {
            ios->type = CKUBE_IOS_INT;
        } else {
            return type_error(d, v->kind, j);
        }
        return 0;
    }
    case CKUBE_VALUE_JSON:
        *(json_t **)slot = json_incref((json_t *)j);
        return 0;
    default:
        return type_error(d, v->kind, j);
    }
}

/* An array or map field: the elements (and keys) stored before they are
 * filled, so that a failure leaves a struct that frees. */
static int decode_list(dec *d, const ckube_field_info *f, const json_t *j, void *obj)
{
    bool map = f->value.kind == CKUBE_VALUE_MAP;
    if (map ? !json_is_object(j) : !json_is_array(j))
        return type_error(d, f->value.kind, j);
    size_t n = map ? json_object_size(j) : json_array_size(j);
    size_t es = elem_size(f->value.items);
    char *elems = es ? calloc(n ? n : 1, es) : NULL;
    char **keys = map ? calloc(n ? n : 1, sizeof *keys) : NULL;
    *AT(obj, f->offset, char *) = elems;
    if (map)
        *AT(obj, f->keys_offset, char **) = keys;
    *AT(obj, f->n_offset, size_t) = n;
    set_flag(obj, f->has_offset, true);
    if (!es)
        return type_error(d, f->value.items->kind, j); /* (no generator makes these) */
    if (!elems || (map && !keys))
        return oom(d);
    if (!map) {
        for (size_t i = 0; i < n; i++) {
            size_t mark = path_push(d, "[%zu]", i);
            int rc = decode_elem(d, f->value.items, json_array_get(j, i), elems + i * es);
            path_pop(d, mark);
            if (rc)
                return rc;
        }
        return 0;
    }
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach((json_t *)j, k, v)
    {
        if (!(keys[i] = strdup(k)))
            return oom(d);
        size_t mark = path_push(d, "[%s]", k);
        int rc = decode_elem(d, f->value.items, v, elems + i * es);
        path_pop(d, mark);
        if (rc)
            return rc;
        i++;
    }
    return 0;
}

static int decode_field(dec *d, const ckube_field_info *f, const json_t *j, void *obj)
{
    if (json_is_null(j)) {
        if (f->null_offset != NO) {
            set_flag(obj, f->null_offset, true);
            return 0;
        }
        if (f->value.kind != CKUBE_VALUE_JSON)
            return 0; /* not nullable: pruned, as the apiserver does */
    }
    switch (f->value.kind) {
    case CKUBE_VALUE_OBJECT: {
        void *slot = AT(obj, f->offset, char);
        if (!f->inline_object) {
            if (!json_is_object(j))
                return type_error(d, f->value.kind, j);
            if (!(*(void **)slot = ckube_struct_new(f->value.object)))
                return oom(d);
            slot = *(void **)slot;
        }
        set_flag(obj, f->has_offset, true);
        return decode_struct(d, f->value.object, j, slot);
    }
    case CKUBE_VALUE_ARRAY:
    case CKUBE_VALUE_MAP:
        return decode_list(d, f, j, obj);
    default:
        if (decode_elem(d, &f->value, j, AT(obj, f->offset, char)))
            return -1;
        set_flag(obj, f->has_offset, true);
        return 0;
    }
}

static const ckube_field_info *find_field(const ckube_struct_info *si, const char *name)
{
    for (size_t i = 0; i < si->nfields; i++)
        if (!strcmp(si->fields[i].json_name, name))
            return &si->fields[i];
    return NULL;
}

static int decode_struct(dec *d, const ckube_struct_info *si, const json_t *j, void *out)
{
    if (!json_is_object(j))
        return type_error(d, CKUBE_VALUE_OBJECT, j);
    if (si->type)
        ((ckube_typed *)out)->type = si->type;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v)
    {
        const ckube_field_info *f = find_field(si, k);
        if (!f) {
            json_t **unknown = AT(out, si->unknown_offset, json_t *);
            if (!*unknown && !(*unknown = json_object()))
                return oom(d);
            if (json_object_set(*unknown, k, v))
                return oom(d);
            continue;
        }
        size_t mark = path_push(d, "%s%s", d->plen ? "." : "", k);
        int rc = decode_field(d, f, v, out);
        path_pop(d, mark);
        if (rc)
            return rc;
    }
    return 0;
}

void *ckube_struct_from_json(const ckube_struct_info *si, const json_t *j, ckube_status **err)
{
    if (err)
        *err = NULL;
    if (!json_is_object(j)) { /* apimachinery's words for a body of the wrong shape */
        if (err)
            *err = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                                    "the object provided is unrecognized (must be of type %s): "
                                    "not a JSON object but %s %s",
                                    si->type ? si->type->kind : si->name,
                                    json_is_array(j) || json_is_integer(j) ? "an" : "a",
                                    json_type_name(j));
        return NULL;
    }
    dec d = {.root = si, .err = err};
    d.name = json_string_value(json_object_get(json_object_get(j, "metadata"), "name"));
    void *obj = ckube_struct_new(si);
    if (!obj)
        return NULL;
    if (decode_struct(&d, si, j, obj)) {
        ckube_struct_free(si, obj);
        return NULL;
    }
    return obj;
}

void *ckube_struct_decode(const ckube_struct_info *si, const char *json, size_t len,
                          ckube_status **err)
{
    if (err)
        *err = NULL;
    json_error_t e;
    json_t *j = json_loadb(json, len, 0, &e);
    if (!j) {
        if (err)
            *err = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                                    "json parse error: line %d, column %d: %s", e.line, e.column,
                                    e.text);
        return NULL;
    }
    void *obj = ckube_struct_from_json(si, j, err);
    json_decref(j);
    return obj;
}

/* ---- encode ------------------------------------------------------------- */

static json_t *struct_to_json(const ckube_struct_info *si, const void *obj);

/* Go's encoding/json writes a float64 that holds an integer as one. */
static json_t *number_json(double v)
{
    if (!isfinite(v))
        return json_null(); /* JSON has no NaN or infinity */
    if (v == trunc(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *elem_to_json(const ckube_value_info *v, const void *slot)
{
    switch (v->kind) {
    case CKUBE_VALUE_STRING: {
        const char *s = *(char *const *)slot;
        return s ? json_string(s) : json_null();
    }
    case CKUBE_VALUE_INT:
        return json_integer((json_int_t) * (const int64_t *)slot);
    case CKUBE_VALUE_NUMBER:
        return number_json(*(const double *)slot);
    case CKUBE_VALUE_BOOL:
        return json_boolean(*(const bool *)slot);
    case CKUBE_VALUE_OBJECT:
        return struct_to_json(v->object, slot);
    case CKUBE_VALUE_INT_OR_STRING: {
        const ckube_int_or_string *ios = slot;
        if (ios->type == CKUBE_IOS_STRING)
            return json_string(ios->str_value ? ios->str_value : "");
        return json_integer((json_int_t)ios->int_value);
    }
    case CKUBE_VALUE_JSON: {
        /* a copy: the object may be a shared cache object, read by other
         * threads (jansson's counts are not safe to change from two) */
        json_t *j = *(json_t *const *)slot;
        return j ? json_deep_copy(j) : json_null();
    }
    default:
        return json_null();
    }
}

static json_t *list_to_json(const ckube_field_info *f, const void *obj)
{
    bool map = f->value.kind == CKUBE_VALUE_MAP;
    json_t *out = map ? json_object() : json_array();
    const char *elems = *CAT(obj, f->offset, char *);
    char *const *keys = map ? *CAT(obj, f->keys_offset, strv) : NULL;
    size_t n = count_at(obj, f), es = elem_size(f->value.items);
    for (size_t i = 0; out && elems && i < n; i++) {
        if (map && (!keys || !keys[i]))
            continue;
        json_t *e = elem_to_json(f->value.items, elems + i * es);
        int rc = !e    ? -1
                 : map ? json_object_set_new(out, keys[i], e)
                       : json_array_append_new(out, e);
        if (rc) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *field_to_json(const ckube_field_info *f, const void *obj)
{
    switch (f->value.kind) {
    case CKUBE_VALUE_OBJECT:
        return struct_to_json(f->value.object, f->inline_object ? CAT(obj, f->offset, char)
                                                                : *CAT(obj, f->offset, void *));
    case CKUBE_VALUE_ARRAY:
    case CKUBE_VALUE_MAP:
        return list_to_json(f, obj);
    default:
        return elem_to_json(&f->value, CAT(obj, f->offset, char));
    }
}

static json_t *struct_to_json(const ckube_struct_info *si, const void *obj)
{
    json_t *out = json_object();
    for (size_t i = 0; out && i < si->nfields; i++) {
        const ckube_field_info *f = &si->fields[i];
        json_t *v = NULL;
        if (flag_at(obj, f->null_offset))
            v = json_null();
        else if (present(f, obj))
            v = field_to_json(f, obj);
        else
            continue;
        if (!v || json_object_set_new(out, f->json_name, v)) {
            json_decref(out);
            return NULL;
        }
    }
    const json_t *unknown = *CAT(obj, si->unknown_offset, json_t *);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)unknown, k, v)
    {
        /* a known field wins over an unknown member of the same name */
        if (out && !json_object_get(out, k) && json_object_set_new(out, k, json_deep_copy(v))) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *ckube_struct_to_json(const ckube_struct_info *si, const void *obj)
{
    return obj ? struct_to_json(si, obj) : json_null();
}

char *ckube_struct_encode(const ckube_struct_info *si, const void *obj)
{
    json_t *j = ckube_struct_to_json(si, obj);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return s;
}

/* ---- copy --------------------------------------------------------------- */

static int copy_struct(const ckube_struct_info *si, const void *src, void *dst);

/* src's element into dst's zeroed slot. */
static int copy_elem(const ckube_value_info *v, const void *src, void *dst)
{
    switch (v->kind) {
    case CKUBE_VALUE_STRING: {
        const char *s = *(char *const *)src;
        return s && !(*(char **)dst = strdup(s)) ? -1 : 0;
    }
    case CKUBE_VALUE_OBJECT:
        return copy_struct(v->object, src, dst);
    case CKUBE_VALUE_INT_OR_STRING: {
        const ckube_int_or_string *a = src;
        ckube_int_or_string *b = dst;
        b->type = a->type;
        b->int_value = a->int_value;
        return a->str_value && !(b->str_value = strdup(a->str_value)) ? -1 : 0;
    }
    case CKUBE_VALUE_JSON: {
        const json_t *j = *(json_t *const *)src;
        return j && !(*(json_t **)dst = json_deep_copy(j)) ? -1 : 0;
    }
    default:
        memcpy(dst, src, elem_size(v));
        return 0;
    }
}

static int copy_list(const ckube_field_info *f, const void *src, void *dst)
{
    const char *elems = *CAT(src, f->offset, char *);
    size_t n = count_at(src, f), es = elem_size(f->value.items);
    if (!elems) /* (n without elements: nothing to copy) */
        return 0;
    char *ne = calloc(n ? n : 1, es);
    *AT(dst, f->offset, char *) = ne;
    if (!ne)
        return -1;
    *AT(dst, f->n_offset, size_t) = n;
    char **nk = NULL;
    char *const *keys = f->keys_offset != NO ? *CAT(src, f->keys_offset, strv) : NULL;
    if (f->keys_offset != NO) {
        if (!(nk = calloc(n ? n : 1, sizeof *nk)))
            return -1;
        *AT(dst, f->keys_offset, char **) = nk;
    }
    for (size_t i = 0; i < n; i++) {
        if (nk && keys && keys[i] && !(nk[i] = strdup(keys[i])))
            return -1;
        if (copy_elem(f->value.items, elems + i * es, ne + i * es))
            return -1;
    }
    return 0;
}

static int copy_struct(const ckube_struct_info *si, const void *src, void *dst)
{
    if (si->type)
        ((ckube_typed *)dst)->type = ((const ckube_typed *)src)->type;
    for (size_t i = 0; i < si->nfields; i++) {
        const ckube_field_info *f = &si->fields[i];
        set_flag(dst, f->has_offset, flag_at(src, f->has_offset));
        set_flag(dst, f->null_offset, flag_at(src, f->null_offset));
        int rc = 0;
        switch (f->value.kind) {
        case CKUBE_VALUE_OBJECT:
            if (f->inline_object) {
                rc = copy_struct(f->value.object, CAT(src, f->offset, char),
                                 AT(dst, f->offset, char));
            } else if (*CAT(src, f->offset, void *)) {
                void *n = ckube_struct_new(f->value.object);
                *AT(dst, f->offset, void *) = n;
                rc = n ? copy_struct(f->value.object, *CAT(src, f->offset, void *), n) : -1;
            }
            break;
        case CKUBE_VALUE_ARRAY:
        case CKUBE_VALUE_MAP:
            rc = copy_list(f, src, dst);
            break;
        default:
            rc = copy_elem(&f->value, CAT(src, f->offset, char), AT(dst, f->offset, char));
        }
        if (rc)
            return -1;
    }
    const json_t *unknown = *CAT(src, si->unknown_offset, json_t *);
    if (unknown && !(*AT(dst, si->unknown_offset, json_t *) = json_deep_copy(unknown)))
        return -1;
    return 0;
}

void *ckube_struct_copy(const ckube_struct_info *si, const void *obj)
{
    if (!obj)
        return NULL;
    void *n = ckube_struct_new(si);
    if (n && copy_struct(si, obj, n)) {
        ckube_struct_free(si, n);
        return NULL;
    }
    return n;
}

/* ---- defaults ----------------------------------------------------------- */

static int default_struct(const ckube_struct_info *si, void *obj);

static int default_list(const ckube_field_info *f, void *obj)
{
    if (f->value.items->kind != CKUBE_VALUE_OBJECT)
        return 0;
    char *elems = *AT(obj, f->offset, char *);
    size_t n = count_at(obj, f), es = elem_size(f->value.items);
    for (size_t i = 0; elems && i < n; i++)
        if (default_struct(f->value.items->object, elems + i * es))
            return -1;
    return 0;
}

static int default_struct(const ckube_struct_info *si, void *obj)
{
    for (size_t i = 0; i < si->nfields; i++) {
        const ckube_field_info *f = &si->fields[i];
        if (f->default_json && !present(f, obj) && !flag_at(obj, f->null_offset)) {
            json_t *j = json_loads(f->default_json, JSON_DECODE_ANY, NULL);
            dec d = {.root = si};
            int rc = j ? decode_field(&d, f, j, obj) : -1;
            json_decref(j);
            if (rc)
                return -1;
        }
        if (f->value.kind == CKUBE_VALUE_OBJECT) {
            void *sub = f->inline_object ? AT(obj, f->offset, char) : *AT(obj, f->offset, void *);
            if (sub && default_struct(f->value.object, sub))
                return -1;
        } else if (f->value.kind == CKUBE_VALUE_ARRAY || f->value.kind == CKUBE_VALUE_MAP) {
            if (default_list(f, obj))
                return -1;
        }
    }
    return 0;
}

int ckube_struct_set_defaults(const ckube_struct_info *si, void *obj)
{
    return obj ? default_struct(si, obj) : 0;
}

/* ---- strings and string maps ------------------------------------------- */

int ckube_set_string(char **slot, const char *value)
{
    char *n = NULL;
    if (value && !(n = strdup(value)))
        return -1;
    free(*slot);
    *slot = n;
    return 0;
}

const char *ckube_string_map_get(char *const *keys, char *const *values, size_t n, const char *key)
{
    for (size_t i = 0; keys && values && i < n; i++)
        if (keys[i] && !strcmp(keys[i], key))
            return values[i];
    return NULL;
}

int ckube_string_map_set(char ***keys, char ***values, size_t *n, bool *has, const char *key,
                         const char *value)
{
    for (size_t i = 0; *keys && *values && i < *n; i++) {
        if ((*keys)[i] && !strcmp((*keys)[i], key)) {
            if (ckube_set_string(&(*values)[i], value))
                return -1;
            if (has)
                *has = true;
            return 0;
        }
    }
    char *k = strdup(key), *v = value ? strdup(value) : NULL;
    char **nk = k && (v || !value) ? realloc(*keys, (*n + 1) * sizeof *nk) : NULL;
    if (nk)
        *keys = nk;
    char **nv = nk ? realloc(*values, (*n + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(k);
        free(v);
        return -1;
    }
    *values = nv;
    (*keys)[*n] = k;
    (*values)[*n] = v;
    (*n)++;
    if (has)
        *has = true;
    return 0;
}
