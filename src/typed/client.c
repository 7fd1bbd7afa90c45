/* The REST client on typed objects (ckube/typed_client.h): each call is
 * the dynamic client's (client.h) with the object encoded before and
 * decoded after. */
#include "ckube/typed_client.h"

#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "typed/tables.h"

static ckube_gvr gvr_of(const ckube_type_info *t)
{
    return (ckube_gvr){t->group, t->version, t->plural};
}

ckube_object_meta *ckube_typed_meta(const ckube_typed *obj)
{
    const ckube_struct_info *si = obj->type->object;
    for (size_t i = 0; i < si->nfields; i++) {
        const ckube_field_info *f = &si->fields[i];
        if (f->inline_object && f->value.object == &ckube_object_meta_info)
            return (ckube_object_meta *)((char *)obj + f->offset);
    }
    return NULL;
}

/* The server's answer j (consumed) as kind t into *out; a decode error
 * becomes a local error (code 0): the server did answer 2xx. */
static int decode_answer(const ckube_type_info *t, json_t *j, ckube_typed **out, ckube_status **err)
{
    ckube_status *why = NULL;
    *out = ckube_struct_from_json(t->object, j, &why);
    json_decref(j);
    if (*out)
        return 0;
    if (err)
        *err = ckube__local_error("decoding the server's answer as %s: %s", t->kind,
                                  why && why->message ? why->message : "out of memory");
    ckube_status_free(why);
    return -1;
}

/* The namespace a write goes to: `ns`, else the object's own. */
static const char *write_ns(const char *ns, const ckube_typed *obj)
{
    if (ns || !obj->type->namespaced)
        return obj->type->namespaced ? ns : NULL;
    const ckube_object_meta *m = ckube_typed_meta(obj);
    return m ? m->namespace_ : NULL;
}

int ckube_typed_get(ckube_client *c, const ckube_type_info *t, const char *ns, const char *name,
                    ckube_typed **out, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    json_t *j = NULL;
    *out = NULL;
    if (ckube_get(c, &r, ns, name, &j, err))
        return -1;
    return decode_answer(t, j, out, err);
}

void ckube_typed_list_free(ckube_typed_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n_items; i++)
        ckube_typed_free(l->items[i]);
    free(l->items);
    free(l->metadata.resource_version);
    free(l->metadata.continue_);
    free(l);
}

int ckube_typed_list_page(ckube_client *c, const ckube_type_info *t, const char *ns,
                          const ckube_list_opts *opts, ckube_typed_list **out, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    json_t *j = NULL;
    *out = NULL;
    if (ckube_list(c, &r, ns, opts, &j, err))
        return -1;
    ckube_typed_list *l = calloc(1, sizeof *l);
    const json_t *items = json_object_get(j, "items");
    const json_t *meta = json_object_get(j, "metadata");
    size_t n = json_array_size(items);
    if (l)
        l->items = calloc(n ? n : 1, sizeof *l->items);
    if (!l || !l->items) {
        free(l);
        json_decref(j);
        if (err)
            *err = ckube__local_error("out of memory");
        return -1;
    }
    l->metadata.resource_version =
        ckube__strdup0(json_string_value(json_object_get(meta, "resourceVersion")));
    l->metadata.continue_ = ckube__strdup0(json_string_value(json_object_get(meta, "continue")));
    const json_t *rem = json_object_get(meta, "remainingItemCount");
    if (json_is_integer(rem)) {
        l->metadata.remaining_item_count = (int64_t)json_integer_value(rem);
        l->metadata.has_remaining_item_count = true;
    }
    for (size_t i = 0; i < n; i++) {
        if (decode_answer(t, json_incref(json_array_get(items, i)), &l->items[i], err)) {
            ckube_typed_list_free(l);
            json_decref(j);
            return -1;
        }
        l->n_items++;
    }
    json_decref(j);
    *out = l;
    return 0;
}

typedef int (*write_fn)(ckube_client *, const ckube_gvr *, const char *, const json_t *,
                        const ckube_write_opts *, json_t **, ckube_status **);

static int write(write_fn fn, ckube_client *c, const char *ns, const ckube_typed *obj,
                 const ckube_write_opts *wo, ckube_typed **out, ckube_status **err)
{
    const ckube_type_info *t = obj->type;
    ckube_gvr r = gvr_of(t);
    json_t *body = ckube_typed_to_json(obj), *j = NULL;
    if (out)
        *out = NULL;
    if (!body) {
        if (err)
            *err = ckube__local_error("out of memory");
        return -1;
    }
    int rc = fn(c, &r, write_ns(ns, obj), body, wo, out ? &j : NULL, err);
    json_decref(body);
    if (rc)
        return -1;
    return out ? decode_answer(t, j, out, err) : 0;
}

int ckube_typed_create(ckube_client *c, const char *ns, const ckube_typed *obj,
                       const ckube_write_opts *wo, ckube_typed **out, ckube_status **err)
{
    return write(ckube_create, c, ns, obj, wo, out, err);
}

int ckube_typed_update(ckube_client *c, const char *ns, const ckube_typed *obj,
                       const ckube_write_opts *wo, ckube_typed **out, ckube_status **err)
{
    return write(ckube_update, c, ns, obj, wo, out, err);
}

int ckube_typed_update_status(ckube_client *c, const char *ns, const ckube_typed *obj,
                              const ckube_write_opts *wo, ckube_typed **out, ckube_status **err)
{
    return write(ckube_update_status, c, ns, obj, wo, out, err);
}

int ckube_typed_patch(ckube_client *c, const ckube_type_info *t, const char *ns, const char *name,
                      ckube_patch_type type, const char *patch, size_t len,
                      const ckube_write_opts *wo, ckube_typed **out, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    json_t *j = NULL;
    if (out)
        *out = NULL;
    if (ckube_patch(c, &r, ns, name, type, patch, len, wo, out ? &j : NULL, err))
        return -1;
    return out ? decode_answer(t, j, out, err) : 0;
}

int ckube_typed_delete(ckube_client *c, const ckube_type_info *t, const char *ns, const char *name,
                       const ckube_delete_opts *o, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    return ckube_delete(c, &r, ns, name, o, NULL, err);
}

int ckube_typed_delete_collection(ckube_client *c, const ckube_type_info *t, const char *ns,
                                  const ckube_list_opts *sel, const ckube_delete_opts *o,
                                  ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    return ckube_delete_collection(c, &r, ns, sel, o, err);
}

int ckube_typed_watch(ckube_client *c, const ckube_type_info *t, const char *ns,
                      const ckube_list_opts *opts, ckube_watch **out, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    return ckube_watch_open(c, &r, ns, opts, out, err);
}

int ckube_typed_watch_next(ckube_watch *w, const ckube_type_info *t, ckube_watch_event_type *type,
                           ckube_typed **obj, ckube_status **err)
{
    json_t *j = NULL;
    *obj = NULL;
    int rc = ckube_watch_next(w, type, &j, err);
    if (rc != 1)
        return rc;
    if (*type == CKUBE_WATCH_ERROR) {
        ckube_status *st = ckube_status_from_json(j, 0);
        json_decref(j);
        if (err)
            *err = st ? st : ckube__local_error("a watch ERROR event without a Status");
        else
            ckube_status_free(st);
        return 1;
    }
    return decode_answer(t, j, obj, err) ? -1 : 1;
}

/* ---- the scale subresource ---- */

static const ckube_struct_info SCALE_SPEC_INFO = {
    .name = "ckube_scale_spec",
    .size = sizeof(ckube_scale_spec),
    .fields = (const ckube_field_info[]){FLAGGED("replicas", ckube_scale_spec, replicas,
                                                 CKUBE_VALUE_INT)},
    .nfields = 1,
    .unknown_offset = offsetof(ckube_scale_spec, unknown),
};

static const ckube_struct_info SCALE_STATUS_INFO = {
    .name = "ckube_scale_status",
    .size = sizeof(ckube_scale_status),
    .fields =
        (const ckube_field_info[]){
            FLAGGED("replicas", ckube_scale_status, replicas, CKUBE_VALUE_INT),
            SCALAR("selector", ckube_scale_status, selector, CKUBE_VALUE_STRING),
        },
    .nfields = 2,
    .unknown_offset = offsetof(ckube_scale_status, unknown),
};

const ckube_type_info ckube_scale_type = {
    .group = "autoscaling",
    .version = "v1",
    .kind = "Scale",
    .plural = "scales",
    .namespaced = true,
    .object = &ckube_scale_info,
};

const ckube_struct_info ckube_scale_info = {
    .name = "ckube_scale",
    .size = sizeof(ckube_scale),
    .fields =
        (const ckube_field_info[]){
            SCALAR("apiVersion", ckube_scale, api_version, CKUBE_VALUE_STRING),
            SCALAR("kind", ckube_scale, kind, CKUBE_VALUE_STRING),
            METADATA(ckube_scale),
            OBJECT("spec", ckube_scale, spec, &SCALE_SPEC_INFO),
            OBJECT("status", ckube_scale, status, &SCALE_STATUS_INFO),
        },
    .nfields = 5,
    .unknown_offset = offsetof(ckube_scale, unknown),
    .type = &ckube_scale_type,
};

int ckube_typed_get_scale(ckube_client *c, const ckube_type_info *t, const char *ns,
                          const char *name, ckube_scale **out, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    *out = NULL;
    char *path = ckube_resource_path(&r, t->namespaced ? ns : NULL, name, "scale");
    if (!path) {
        if (err)
            *err = ckube__local_error("out of memory");
        return -1;
    }
    ckube_request rq = {.method = "GET", .path = path};
    ckube_response resp = {0};
    int rc = ckube_client_do(c, &rq, &resp, err);
    free(path);
    json_t *j = rc ? NULL : json_loadb(resp.body, resp.body_len, 0, NULL);
    ckube_response_free(&resp);
    if (rc)
        return -1;
    if (!j) {
        if (err)
            *err = ckube__local_error("decoding the server's answer as Scale: not JSON");
        return -1;
    }
    ckube_typed *s = NULL;
    rc = decode_answer(&ckube_scale_type, j, &s, err);
    *out = (ckube_scale *)s;
    return rc;
}

int ckube_typed_update_scale(ckube_client *c, const ckube_type_info *t, const char *ns,
                             const ckube_scale *scale, const ckube_write_opts *wo,
                             ckube_scale **out, ckube_status **err)
{
    ckube_gvr r = gvr_of(t);
    ckube_write_opts o = wo ? *wo : (ckube_write_opts){0};
    o.subresource = "scale";
    json_t *body = ckube_typed_to_json(&scale->base), *j = NULL;
    if (out)
        *out = NULL;
    if (!body) {
        if (err)
            *err = ckube__local_error("out of memory");
        return -1;
    }
    int rc = ckube_update(c, &r, t->namespaced ? (ns ? ns : scale->metadata.namespace_) : NULL,
                          body, &o, out ? &j : NULL, err);
    json_decref(body);
    if (rc || !out)
        return rc ? -1 : 0;
    ckube_typed *s = NULL;
    rc = decode_answer(&ckube_scale_type, j, &s, err);
    *out = (ckube_scale *)s;
    return rc;
}
