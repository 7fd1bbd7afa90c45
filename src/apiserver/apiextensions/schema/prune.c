/* The schema engine (internal.h): pruning unknown fields and applying defaults. */
#include "apiserver/apiextensions/schema/internal.h"

bool sch_is_resource_key(const char *k)
{
    return !strcmp(k, "apiVersion") || !strcmp(k, "kind");
}

/* Drops non-nullable nulls and applies defaults of `props` into object v. */
static void default_object(walk *w, const json_t *props, json_t *v, int ctx)
{
    const char *pk;
    json_t *ps;
    json_object_foreach((json_t *)props, pk, ps)
    {
        if (!json_is_object(ps))
            continue;
        if (ctx == CTX_ROOT && !strcmp(pk, "metadata"))
            continue;
        json_t *cur = json_object_get(v, pk);
        if (cur && !json_is_null(cur))
            continue;
        if (cur && sch_true(ps, "nullable"))
            continue;
        json_t *def = json_object_get(ps, "default");
        if (def && !json_is_null(def)) {
            json_t *copy = json_deep_copy(def);
            if (!copy || json_object_set_new(v, pk, copy)) {
                w->oom = true;
                return;
            }
        } else if (cur) {
            json_object_del(v, pk);
        }
    }
}

static bool schema_requires(const sch_kw *k, const char *key)
{
    size_t i;
    const json_t *r;
    json_array_foreach(k->required, i, r)
    {
        if (json_is_string(r) && !strcmp(json_string_value(r), key))
            return true;
    }
    return false;
}

/* SCHEMA_OMITEMPTY: whether property `key` of an object schema (its
 * keywords k), whose own schema is cs, is an empty map or list that Go's
 * omitempty leaves out. */
static bool omitted_when_empty(const sch_kw *k, const char *key, const json_t *cs, const json_t *v)
{
    bool empty_list = json_is_array(v) && !json_array_size(v);
    bool empty_map = json_is_object(v) && !json_object_size(v) &&
                     json_is_object(json_object_get(cs, "additionalProperties")) &&
                     !sch_obj(cs, "properties") &&
                     !sch_true(cs, "x-kubernetes-preserve-unknown-fields");
    return (empty_list || empty_map) && !schema_requires(k, key);
}

static void prune_object(walk *w, const json_t *s, json_t *v, int ctx)
{
    sch_kw k;
    sch_keywords(s, &k);
    const json_t *props = sch_kw_obj(k.properties);
    const json_t *addl = k.additional_properties;
    bool preserve = json_is_true(k.preserve_unknown_fields);
    bool embedded = ctx != CTX_NORMAL || json_is_true(k.embedded_resource);
    /* Only a schema that describes objects prunes: one with properties, an
     * additionalProperties decision or `type: object`. */
    bool structural =
        props || json_is_object(addl) || json_is_false(addl) || schema_type_is(s, "object");

    if ((w->flags & SCHEMA_DEFAULT) && props)
        default_object(w, props, v, ctx);

    const char *key;
    json_t *child;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, child)
    {
        if (ctx == CTX_ROOT && !strcmp(key, "metadata"))
            continue;
        const json_t *cs = props ? json_object_get(props, key) : NULL;
        if (!json_is_object(cs))
            cs = NULL;
        if (embedded && (sch_is_resource_key(key) || !strcmp(key, "metadata"))) {
            if (cs) {
                size_t old = sch_path_push_key(w, key);
                sch_prune_node(w, cs, child, CTX_NORMAL);
                sch_path_pop(w, old);
            }
            continue;
        }
        size_t old = sch_path_push_key(w, key);
        if (cs) {
            sch_prune_node(w, cs, child, CTX_NORMAL);
            if ((w->flags & SCHEMA_OMITEMPTY) && omitted_when_empty(&k, key, cs, child))
                json_object_del(v, key);
        } else if (json_is_object(addl)) {
            sch_prune_node(w, addl, child, CTX_NORMAL);
        } else if (!(json_is_true(addl) || preserve || !structural)) {
            sch_record_unknown(w);
            if (w->flags & SCHEMA_PRUNE)
                json_object_del(v, key);
        }
        sch_path_pop(w, old);
    }
}

void sch_prune_node(walk *w, const json_t *s, json_t *v, int ctx)
{
    if (!json_is_object(s) || !v || w->oom)
        return;
    if (++w->depth > MAX_DEPTH) {
        w->depth--;
        return;
    }
    if (json_is_object(v)) {
        prune_object(w, s, v, ctx);
    } else if (json_is_array(v)) {
        const json_t *items = sch_obj(s, "items");
        if (items) {
            const json_t *def = json_object_get(items, "default");
            for (size_t i = 0; i < json_array_size(v); i++) {
                json_t *e = json_array_get(v, i);
                if ((w->flags & SCHEMA_DEFAULT) && json_is_null(e) && def && !json_is_null(def) &&
                    !sch_true(items, "nullable")) {
                    json_t *copy = json_deep_copy(def);
                    if (!copy || json_array_set_new(v, i, copy)) {
                        w->oom = true;
                        break;
                    }
                    e = json_array_get(v, i);
                }
                size_t old = sch_path_push_index(w, i);
                sch_prune_node(w, items, e, CTX_NORMAL);
                sch_path_pop(w, old);
            }
        }
    }
    w->depth--;
}
