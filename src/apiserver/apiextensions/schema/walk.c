/* The schema engine (internal.h): the walk over an object and its schema, paths, causes; schema
 * node helpers. */
#include "apiserver/apiextensions/schema/internal.h"

#include <stddef.h>
#include "ckube/validation.h"
#include "common/xalloc.h"

size_t sch_path_push_key(walk *w, const char *key)
{
    size_t old = w->path.len;
    if (old)
        ckube__sb_addc(&w->path, '.');
    ckube__sb_add(&w->path, key);
    return old;
}

size_t sch_path_push_index(walk *w, size_t i)
{
    size_t old = w->path.len;
    ckube__sb_printf(&w->path, "[%zu]", i);
    return old;
}

void sch_path_pop(walk *w, size_t old)
{
    if (w->path.s && old <= w->path.len) {
        w->path.len = old;
        w->path.s[old] = 0;
    }
}

const char *sch_cur_path(const walk *w)
{
    return w->path.s ? w->path.s : "";
}

void sch_add_cause(walk *w, const char *type, const char *field, const char *fmt, ...)
{
    w->ncauses++;
    if (!w->st)
        return;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (r < 0) {
        w->oom = true;
        return;
    }
    ckube_status_add_cause(w->st, type, field, "%s", msg);
    free(msg);
}

void sch_add_value_cause(walk *w, const char *type, const char *label, const json_t *value,
                         const char *detail)
{
    char *v = value ? schema_format_value(value) : xstrdup("\"\"");
    if (!v) {
        w->oom = true;
        return;
    }
    if (detail && *detail)
        sch_add_cause(w, type, sch_cur_path(w), "%s: %s: %s", label, v, detail);
    else
        sch_add_cause(w, type, sch_cur_path(w), "%s: %s", label, v);
    free(v);
}

void sch_add_invalid(walk *w, const json_t *value, const char *fmt, ...)
{
    char *detail = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&detail, fmt, ap);
    va_end(ap);
    if (r < 0) {
        w->oom = true;
        return;
    }
    sch_add_value_cause(w, CKUBE_CAUSE_FIELD_INVALID, "Invalid value", value, detail);
    free(detail);
}

void sch_add_type_invalid(walk *w, const char *expected, const char *actual)
{
    json_t *a = json_string(actual);
    char *q = ckube_go_quote(actual);
    if (!a || !q) {
        w->oom = true;
    } else {
        char *detail = NULL;
        if (asprintf(&detail, "%s in body must be of type %s: %s", sch_cur_path(w), expected, q) <
            0)
            w->oom = true;
        else
            sch_add_value_cause(w, CKUBE_CAUSE_FIELD_TYPE_INVALID, "Invalid value", a, detail);
        free(detail);
    }
    free(q);
    json_decref(a);
}

void sch_record_unknown(walk *w)
{
    if (!w->collect_unknown || w->nunknown >= SCHEMA_MAX_UNKNOWN)
        return;
    if (w->nunknown == w->capunknown) {
        size_t cap = w->capunknown ? w->capunknown * 2 : 8;
        char **n = xrealloc(w->unknown, cap * sizeof *n);
        w->unknown = n;
        w->capunknown = cap;
    }
    char *p = xstrdup(sch_cur_path(w));
    w->unknown[w->nunknown++] = p;
}

bool sch_true(const json_t *s, const char *key)
{
    return json_is_true(json_object_get(s, key));
}

/* Sorted by name for bsearch. */
static const struct kw_slot {
    const char *name;
    size_t off;
} kw_slots[] = {
#define KW(name, field)                                                                            \
    {                                                                                              \
        name, offsetof(sch_kw, field)                                                              \
    }
    KW("additionalProperties", additional_properties),
    KW("allOf", all_of),
    KW("anyOf", any_of),
    KW("enum", enum_),
    KW("exclusiveMaximum", exclusive_maximum),
    KW("exclusiveMinimum", exclusive_minimum),
    KW("format", format),
    KW("items", items),
    KW("maxItems", max_items),
    KW("maxLength", max_length),
    KW("maxProperties", max_properties),
    KW("maximum", maximum),
    KW("minItems", min_items),
    KW("minLength", min_length),
    KW("minProperties", min_properties),
    KW("minimum", minimum),
    KW("multipleOf", multiple_of),
    KW("not", not_),
    KW("nullable", nullable),
    KW("oneOf", one_of),
    KW("pattern", pattern),
    KW("properties", properties),
    KW("required", required),
    KW("type", type),
    KW("uniqueItems", unique_items),
    KW("x-kubernetes-embedded-resource", embedded_resource),
    KW("x-kubernetes-int-or-string", int_or_string),
    KW("x-kubernetes-list-map-keys", list_map_keys),
    KW("x-kubernetes-list-type", list_type),
    KW("x-kubernetes-preserve-unknown-fields", preserve_unknown_fields),
#undef KW
};

static int kw_cmp(const void *key, const void *slot)
{
    return strcmp(key, ((const struct kw_slot *)slot)->name);
}

void sch_keywords(const json_t *s, sch_kw *kw)
{
    memset(kw, 0, sizeof *kw);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        const struct kw_slot *slot =
            bsearch(key, kw_slots, sizeof kw_slots / sizeof *kw_slots, sizeof *kw_slots, kw_cmp);
        if (slot)
            *(const json_t **)(void *)((char *)kw + slot->off) = v;
    }
}

const json_t *sch_obj(const json_t *s, const char *key)
{
    const json_t *v = json_object_get(s, key);
    return json_is_object(v) ? v : NULL;
}

const char *sch_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
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

bool sch_is_integral(const json_t *v)
{
    if (json_is_integer(v))
        return true;
    if (!json_is_real(v))
        return false;
    double d = json_real_value(v);
    return isfinite(d) && d == floor(d);
}

static bool type_name_matches(const char *t, const json_t *v)
{
    if (!strcmp(t, "object"))
        return json_is_object(v);
    if (!strcmp(t, "array"))
        return json_is_array(v);
    if (!strcmp(t, "string"))
        return json_is_string(v);
    if (!strcmp(t, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(t, "integer"))
        return sch_is_integral(v);
    if (!strcmp(t, "number"))
        return json_is_number(v);
    if (!strcmp(t, "null"))
        return json_is_null(v);
    return true; /* unknown type names are not enforced */
}

bool sch_type_matches(const json_t *type, const json_t *v, bool *contains_null)
{
    *contains_null = false;
    if (json_is_string(type)) {
        *contains_null = !strcmp(json_string_value(type), "null");
        return type_name_matches(json_string_value(type), v);
    }
    bool any = false, match = false;
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t)
    {
        if (!json_is_string(t))
            continue;
        any = true;
        if (!strcmp(json_string_value(t), "null"))
            *contains_null = true;
        if (type_name_matches(json_string_value(t), v))
            match = true;
    }
    return !any || match;
}

bool sch_has_type(const json_t *type)
{
    if (json_is_string(type))
        return true;
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t) if (json_is_string(t)) return true;
    return false;
}

char *sch_type_label(const json_t *type, bool int_or_string)
{
    if (int_or_string)
        return xstrdup("integer,string");
    if (json_is_string(type))
        return xstrdup(json_string_value(type));
    ckube__strbuf b = {0};
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t)
    {
        if (!json_is_string(t))
            continue;
        if (b.len)
            ckube__sb_addc(&b, ',');
        ckube__sb_add(&b, json_string_value(t));
    }
    return ckube__sb_take(&b);
}

bool schema_type_is(const json_t *s, const char *name)
{
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type))
        return !strcmp(json_string_value(type), name);
    size_t i;
    const json_t *t;
    json_array_foreach(type, i,
                       t) if (json_is_string(t) && !strcmp(json_string_value(t), name)) return true;
    return false;
}
