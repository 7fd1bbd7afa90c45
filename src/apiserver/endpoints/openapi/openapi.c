/* OpenAPI v3 and v2 documents; see openapi.h.
 *
 * Schemas are assembled in OpenAPI v3 form (references as
 * `allOf: [{$ref: "#/components/schemas/NAME"}]`) and converted for v2
 * (`$ref: "#/definitions/NAME"`, no nullable/anyOf/oneOf/not). Shared
 * definitions come from builtin_schemas.c: inlined copies there carry an
 * "x-ckube-ref" marker, which is turned back into a reference to a
 * component added on first use.
 */
#include "apiserver/endpoints/openapi/openapi.h"

#include <ctype.h>
#include <sha512.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/definitions/builtin_schemas.h"
#include "common/text.h"
#include "common/xalloc.h"

#define META "io.k8s.apimachinery.pkg.apis.meta.v1."
#define REF_V3 "#/components/schemas/"
#define REF_V2 "#/definitions/"
#define SCALE_DEF "io.k8s.api.autoscaling.v1.Scale"
#define MAX_DEPTH 200

typedef struct builder {
    bool v2;
    json_t *paths; /* borrowed from the document */
    json_t *comps; /* components.schemas (v3) or definitions (v2); borrowed */
} builder;

/* ------------------------------------------------------------- names */

char *openapi_definition_name(const resource_type *t, int list)
{
    char kind[256];
    if (list && t->list_kind)
        snprintf(kind, sizeof kind, "%s", t->list_kind);
    else if (list)
        snprintf(kind, sizeof kind, "%sList", t->kind);
    else
        snprintf(kind, sizeof kind, "%s", t->kind);
    const char *g = t->group ? t->group : "";
    char prefix[512];
    const char *b = t->is_custom ? NULL : builtin_definition_name(g, t->version, t->kind);
    if (b) {
        const char *dot = strrchr(b, '.');
        snprintf(prefix, sizeof prefix, "%.*s", (int)(dot - b), b);
    } else if (!t->is_custom && !*g) {
        snprintf(prefix, sizeof prefix, "io.k8s.api.core.%s", t->version);
    } else if (!t->is_custom && !strcmp(g, "apiextensions.k8s.io")) {
        snprintf(prefix, sizeof prefix, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.%s",
                 t->version);
    } else if (!t->is_custom && !strcmp(g, "apiregistration.k8s.io")) {
        snprintf(prefix, sizeof prefix, "io.k8s.kube-aggregator.pkg.apis.apiregistration.%s",
                 t->version);
    } else if (!t->is_custom) {
        size_t seg = strcspn(g, ".");
        snprintf(prefix, sizeof prefix, "io.k8s.api.%.*s.%s", (int)seg, g, t->version);
    } else {
        char rev[256];
        ckube__reverse_dns(g, rev, sizeof rev);
        snprintf(prefix, sizeof prefix, "%s.%s", rev, t->version);
    }
    char *out = NULL;
    if (asprintf(&out, "%s.%s", prefix, kind) < 0)
        return NULL;
    return out;
}

/* Upper-camel identifier of the group-version for operation IDs:
 * "" -> "CoreV1", "apps" -> "AppsV1", "coordination.k8s.io" ->
 * "CoordinationV1", "samplecrd.k8s.io" (custom) -> "SamplecrdK8sIoV1". */
static void op_base(const resource_type *t, char *buf, size_t n)
{
    const char *g = t->group && *t->group ? t->group : "core";
    size_t glen = strlen(g);
    if (!t->is_custom && glen > 7 && !strcmp(g + glen - 7, ".k8s.io"))
        glen = strcspn(g, ".");
    size_t o = 0;
    bool up = true;
    for (size_t i = 0; i < glen && o + 1 < n; i++) {
        char c = g[i];
        if (c == '.' || c == '-') {
            up = true;
            continue;
        }
        buf[o++] = up ? (char)toupper((unsigned char)c) : c;
        up = false;
    }
    for (const char *v = t->version; *v && o + 1 < n; v++)
        buf[o++] = v == t->version ? (char)toupper((unsigned char)*v) : *v;
    buf[o] = 0;
}

/* "core_v1", "apps_v1", "samplecrdK8sIo_v1" */
static void op_tag(const resource_type *t, char *buf, size_t n)
{
    char base[256];
    op_base(t, base, sizeof base);
    size_t vlen = strlen(t->version);
    size_t blen = strlen(base);
    if (blen >= vlen)
        base[blen - vlen] = 0;
    base[0] = (char)tolower((unsigned char)base[0]);
    snprintf(buf, n, "%s_%s", base, t->version);
}

/* ---------------------------------------------------------- schemas */

static json_t *ref_site(const builder *b, const char *name, const char *desc)
{
    json_t *site = json_object();
    char ref[512];
    if (b->v2) {
        snprintf(ref, sizeof ref, REF_V2 "%s", name);
        json_object_set_new(site, "$ref", json_string(ref));
    } else {
        snprintf(ref, sizeof ref, REF_V3 "%s", name);
        json_object_set_new(site, "allOf", json_pack("[{s:s}]", "$ref", ref));
    }
    if (desc)
        json_object_set_new(site, "description", json_string(desc));
    return site;
}

/* A plain {"$ref": ...} (response and body schemas). */
static json_t *ref_plain(const builder *b, const char *name)
{
    char ref[512];
    snprintf(ref, sizeof ref, "%s%s", b->v2 ? REF_V2 : REF_V3, name);
    return json_pack("{s:s}", "$ref", ref);
}

static void process_refs(builder *b, json_t *node, int depth);

/* Adds the shared definition `name` (and what it refers to) once. */
static void add_component(builder *b, const char *name, int depth)
{
    if (json_object_get(b->comps, name) || depth > MAX_DEPTH)
        return;
    json_t *frag = builtin_schema_fragment(name);
    if (!frag)
        frag = json_pack("{s:s,s:b}", "type", "object", "x-kubernetes-preserve-unknown-fields", 1);
    json_object_set_new(b->comps, name, frag); /* placeholder first: stops cycles */
    process_refs(b, frag, depth + 1);
}

/* If `v` is an inlined shared definition, returns the reference that
 * replaces it (and adds the component). */
static json_t *maybe_ref(builder *b, json_t *v, int depth)
{
    const char *name = json_string_value(json_object_get(v, "x-ckube-ref"));
    if (!name)
        return NULL;
    add_component(b, name, depth + 1);
    /* Keep the field's own description; an inlined copy without one carries
     * the definition's, which kubectl explain would then print twice. */
    const char *desc = json_string_value(json_object_get(v, "description"));
    const char *own =
        json_string_value(json_object_get(json_object_get(b->comps, name), "description"));
    if (desc && own && !strcmp(desc, own))
        desc = NULL;
    return ref_site(b, name, desc);
}

/* Replaces inlined definitions by references and drops x-ckube-* keys;
 * x-ckube-required (fields upstream publishes as required but checks in
 * validation, see builtin_schemas.h) becomes `required`, and
 * x-ckube-list-type and x-ckube-list-map-keys (list-type maps whose
 * duplicates validation reports) become x-kubernetes-list-type and
 * x-kubernetes-list-map-keys. */
static void process_refs(builder *b, json_t *node, int depth)
{
    static const char *const published[][2] = {
        {"x-ckube-required", "required"},
        {"x-ckube-list-type", "x-kubernetes-list-type"},
        {"x-ckube-list-map-keys", "x-kubernetes-list-map-keys"},
    };
    if (depth > MAX_DEPTH)
        return;
    if (json_is_object(node)) {
        for (size_t i = 0; i < sizeof published / sizeof *published; i++) {
            json_t *x = json_object_get(node, published[i][0]);
            if (x && !json_object_get(node, published[i][1]))
                json_object_set(node, published[i][1], x);
        }
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(node, tmp, k, v)
        {
            if (!strncmp(k, "x-ckube-", 8)) {
                json_object_del(node, k);
                continue;
            }
            json_t *r = json_is_object(v) ? maybe_ref(b, v, depth) : NULL;
            if (r)
                json_object_set_new(node, k, r);
            else
                process_refs(b, v, depth + 1);
        }
    } else if (json_is_array(node)) {
        for (size_t i = 0; i < json_array_size(node); i++) {
            json_t *v = json_array_get(node, i);
            json_t *r = json_is_object(v) ? maybe_ref(b, v, depth) : NULL;
            if (r)
                json_array_set_new(node, i, r);
            else
                process_refs(b, v, depth + 1);
        }
    }
}

/* Converts a v3 schema to Swagger 2.0 in place, following only the
 * keywords that hold schemas (property names are never mistaken for
 * keywords). */
static void to_v2(json_t *node, int depth)
{
    if (!json_is_object(node) || depth > MAX_DEPTH)
        return;
    const char *ref = json_string_value(json_object_get(node, "$ref"));
    if (ref && !strncmp(ref, REF_V3, strlen(REF_V3))) {
        char buf[512];
        snprintf(buf, sizeof buf, REF_V2 "%s", ref + strlen(REF_V3));
        json_object_set_new(node, "$ref", json_string(buf));
    }
    json_t *allof = json_object_get(node, "allOf");
    json_t *first = json_array_get(allof, 0);
    if (json_array_size(allof) == 1 && json_object_size(first) == 1 &&
        json_object_get(first, "$ref")) {
        json_t *inner = json_incref(json_object_get(first, "$ref"));
        json_object_del(node, "allOf");
        json_object_set_new(node, "$ref", inner);
        to_v2(node, depth + 1); /* rewrite the moved reference */
        return;
    }
    if (json_is_true(json_object_get(node, "nullable")))
        json_object_set_new(node, "x-nullable", json_true());
    json_object_del(node, "nullable");
    json_object_del(node, "anyOf");
    json_object_del(node, "oneOf");
    json_object_del(node, "not");
    static const char *const maps[] = {"properties", "patternProperties", "definitions"};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(node, maps[i]), k, v) to_v2(v, depth + 1);
    }
    to_v2(json_object_get(node, "additionalProperties"), depth + 1);
    json_t *items = json_object_get(node, "items");
    if (json_is_array(items)) {
        size_t i;
        json_t *v;
        json_array_foreach(items, i, v) to_v2(v, depth + 1);
    } else {
        to_v2(items, depth + 1);
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(node, "allOf"), i, v) to_v2(v, depth + 1);
}

static json_t *gvk_object(const char *g, const char *v, const char *k)
{
    return json_pack("{s:s,s:s,s:s}", "group", g ? g : "", "kind", k, "version", v);
}

static void set_default_prop(json_t *props, const char *name, const char *desc)
{
    if (json_object_get(props, name))
        return;
    json_object_set_new(props, name, json_pack("{s:s,s:s}", "type", "string", "description", desc));
}

/* The published schema of a type's kind. */
static json_t *type_component(builder *b, const resource_type *t)
{
    json_t *s = t->schema ? json_deep_copy(t->schema) : NULL;
    if (!s && !t->is_custom) { /* shared and immutable: edit a copy */
        json_t *shared = builtin_schema(t->group ? t->group : "", t->version, t->kind);
        s = shared ? json_deep_copy(shared) : NULL;
        json_decref(shared);
    }
    if (!json_is_object(s)) {
        json_decref(s);
        s = json_pack("{s:s,s:b}", "type", "object", "x-kubernetes-preserve-unknown-fields", 1);
    }
    if (!json_object_get(s, "type"))
        json_object_set_new(s, "type", json_string("object"));
    json_t *props = json_object_get(s, "properties");
    if (!json_is_object(props)) {
        props = json_object();
        json_object_set_new(s, "properties", props);
    }
    set_default_prop(props, "apiVersion",
                     "The versioned schema of this representation of the object.");
    set_default_prop(props, "kind", "The REST resource this object represents, in CamelCase.");
    json_object_set_new(
        props, "metadata",
        ref_site(&(builder){.v2 = false}, META "ObjectMeta", "Standard object metadata."));
    add_component(b, META "ObjectMeta", 0);
    json_object_set_new(s, "x-kubernetes-group-version-kind",
                        json_pack("[o]", gvk_object(t->group, t->version, t->kind)));
    process_refs(b, s, 0);
    return s;
}

static json_t *list_component(builder *b, const resource_type *t, const char *def)
{
    char *list_kind = NULL;
    if (asprintf(&list_kind, "%sList", t->kind) < 0)
        return NULL;
    const char *lk = t->list_kind ? t->list_kind : list_kind;
    char desc[512];
    snprintf(desc, sizeof desc, "A list of %s objects.", t->kind);
    json_t *s = json_pack(
        "{s:s,s:s,s:[s],s:{s:{s:s,s:s},s:{s:s,s:o,s:s},s:{s:s,s:s},s:o},s:[o]}", "description",
        desc, "type", "object", "required", "items", "properties", "apiVersion", "type", "string",
        "description", "The versioned schema of this representation of the list.", "items", "type",
        "array", "items", ref_site(&(builder){.v2 = false}, def, NULL), "description",
        "The objects of the list.", "kind", "type", "string", "description",
        "The REST resource this list represents, in CamelCase.", "metadata",
        ref_site(&(builder){.v2 = false}, META "ListMeta", "Standard list metadata."),
        "x-kubernetes-group-version-kind", gvk_object(t->group, t->version, lk));
    free(list_kind);
    add_component(b, META "ListMeta", 0);
    return s;
}

/* ------------------------------------------------------- operations */

static json_t *param(const builder *b, const char *name, const char *in, const char *type,
                     const char *desc)
{
    json_t *p = json_pack("{s:s,s:s,s:s}", "name", name, "in", in, "description", desc);
    if (!strcmp(in, "path"))
        json_object_set_new(p, "required", json_true());
    if (b->v2) {
        json_object_set_new(p, "type", json_string(type));
        json_object_set_new(p, "uniqueItems", json_true());
    } else {
        json_object_set_new(p, "schema", json_pack("{s:s,s:b}", "type", type, "uniqueItems", 1));
    }
    return p;
}

#define P_PRETTY(b) param(b, "pretty", "query", "string", "If 'true', pretty-print the output.")
#define P_DRYRUN(b)                                                                                \
    param(b, "dryRun", "query", "string",                                                          \
          "If present, process the request without persisting it. The only valid value is All.")
#define P_MANAGER(b)                                                                               \
    param(b, "fieldManager", "query", "string",                                                    \
          "Name of the actor making the change, recorded in managedFields.")
#define P_VALIDATION(b)                                                                            \
    param(b, "fieldValidation", "query", "string",                                                 \
          "How unknown and duplicate fields in the body are treated: Ignore, Warn (the "           \
          "default) or Strict.")
#define P_FORCE(b)                                                                                 \
    param(b, "force", "query", "boolean",                                                          \
          "Make an apply request take ownership of conflicting fields.")

static void add_list_params(const builder *b, json_t *ps)
{
    json_array_append_new(ps, param(b, "allowWatchBookmarks", "query", "boolean",
                                    "Ask for BOOKMARK events in a watch."));
    json_array_append_new(ps, param(b, "continue", "query", "string",
                                    "Token from a previous limited list to fetch the next page."));
    json_array_append_new(ps, param(b, "fieldSelector", "query", "string",
                                    "Restrict the result by fields, e.g. metadata.name=x."));
    json_array_append_new(
        ps, param(b, "labelSelector", "query", "string", "Restrict the result by labels."));
    json_array_append_new(
        ps, param(b, "limit", "query", "integer", "Maximum number of items to return."));
    json_array_append_new(ps, param(b, "resourceVersion", "query", "string",
                                    "Which version of the collection to serve."));
    json_array_append_new(ps, param(b, "resourceVersionMatch", "query", "string",
                                    "How resourceVersion is matched: Exact or NotOlderThan."));
    json_array_append_new(ps, param(b, "sendInitialEvents", "query", "boolean",
                                    "Start a watch with the current state as ADDED events."));
    json_array_append_new(ps, param(b, "timeoutSeconds", "query", "integer",
                                    "Close the list or watch call after this many seconds."));
    json_array_append_new(
        ps, param(b, "watch", "query", "boolean", "Watch for changes instead of listing."));
}

static void add_delete_params(const builder *b, json_t *ps)
{
    json_array_append_new(ps, P_DRYRUN(b));
    json_array_append_new(ps, param(b, "gracePeriodSeconds", "query", "integer",
                                    "Seconds before the object is deleted."));
    json_array_append_new(
        ps, param(b, "orphanDependents", "query", "boolean", "Deprecated: use propagationPolicy."));
    json_array_append_new(ps, param(b, "propagationPolicy", "query", "string",
                                    "Orphan, Background or Foreground garbage collection."));
}

enum body_kind { BODY_NONE, BODY_OBJECT, BODY_PATCH, BODY_DELETE };

typedef struct op_spec {
    const char *action;  /* x-kubernetes-action */
    const char *opid;    /* operationId */
    const char *desc;    /* description */
    const char *resp;    /* response definition */
    enum body_kind body; /* request body */
    const char *body_def;
    bool created, accepted; /* 201, 202 responses */
    const char *g, *v, *k;  /* x-kubernetes-group-version-kind */
} op_spec;

static const char *const patch_types[] = {
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
};

static json_t *response(const builder *b, const char *desc, const char *def)
{
    json_t *r = json_pack("{s:s}", "description", desc);
    if (b->v2)
        json_object_set_new(r, "schema", ref_plain(b, def));
    else
        json_object_set_new(r, "content",
                            json_pack("{s:{s:o},s:{s:o}}", "application/json", "schema",
                                      ref_plain(b, def), "application/yaml", "schema",
                                      ref_plain(b, def)));
    return r;
}

/* Builds one operation; `params` (stolen) are its own parameters. */
static json_t *operation(const builder *b, const resource_type *t, const op_spec *o, json_t *params)
{
    char tag[256];
    op_tag(t, tag, sizeof tag);
    json_t *op =
        json_pack("{s:[s],s:s,s:s}", "tags", tag, "description", o->desc, "operationId", o->opid);
    json_t *resp = json_object();
    json_object_set_new(resp, "200", response(b, "OK", o->resp));
    if (o->created)
        json_object_set_new(resp, "201", response(b, "Created", o->resp));
    if (o->accepted)
        json_object_set_new(resp, "202", response(b, "Accepted", o->resp));
    json_object_set_new(resp, "401", json_pack("{s:s}", "description", "Unauthorized"));

    if (b->v2) {
        if (o->body != BODY_NONE) {
            const char *def = o->body == BODY_PATCH    ? META "Patch"
                              : o->body == BODY_DELETE ? META "DeleteOptions"
                                                       : o->body_def;
            json_t *bp = json_pack("{s:s,s:s,s:o}", "name", "body", "in", "body", "schema",
                                   ref_plain(b, def));
            if (o->body != BODY_DELETE)
                json_object_set_new(bp, "required", json_true());
            json_array_insert_new(params, 0, bp);
        }
        json_t *consumes = json_array();
        if (o->body == BODY_PATCH)
            for (size_t i = 0; i < sizeof patch_types / sizeof *patch_types; i++)
                json_array_append_new(consumes, json_string(patch_types[i]));
        else
            json_array_append_new(consumes, json_string("*/*"));
        json_object_set_new(op, "consumes", consumes);
        json_object_set_new(op, "produces",
                            json_pack("[s,s]", "application/json", "application/yaml"));
        json_object_set_new(op, "schemes", json_pack("[s]", "https"));
    } else if (o->body != BODY_NONE) {
        json_t *content = json_object();
        if (o->body == BODY_PATCH) {
            for (size_t i = 0; i < sizeof patch_types / sizeof *patch_types; i++)
                json_object_set_new(content, patch_types[i],
                                    json_pack("{s:o}", "schema", ref_plain(b, META "Patch")));
        } else {
            const char *def = o->body == BODY_DELETE ? META "DeleteOptions" : o->body_def;
            json_object_set_new(content, "application/json",
                                json_pack("{s:o}", "schema", ref_plain(b, def)));
        }
        json_t *rb = json_pack("{s:o}", "content", content);
        if (o->body != BODY_DELETE)
            json_object_set_new(rb, "required", json_true());
        json_object_set_new(op, "requestBody", rb);
    }
    json_object_set_new(op, "parameters", params);
    json_object_set_new(op, "responses", resp);
    json_object_set_new(op, "x-kubernetes-action", json_string(o->action));
    json_object_set_new(op, "x-kubernetes-group-version-kind", gvk_object(o->g, o->v, o->k));
    return op;
}

/* Parameters every write (create, update, patch) takes. */
static json_t *write_params(const builder *b, bool patch)
{
    json_t *ps = json_array();
    json_array_append_new(ps, P_DRYRUN(b));
    json_array_append_new(ps, P_MANAGER(b));
    json_array_append_new(ps, P_VALIDATION(b));
    if (patch)
        json_array_append_new(ps, P_FORCE(b));
    return ps;
}

/* Adds a path item if it has operations; `path_params` (stolen) are the
 * path-level parameters. */
static void add_path(builder *b, const char *path, json_t *item, json_t *path_params)
{
    if (!json_object_size(item)) {
        json_decref(item);
        json_decref(path_params);
        return;
    }
    json_object_set_new(item, "parameters", path_params);
    json_object_set_new(b->paths, path, item);
}

static json_t *path_params(const builder *b, bool name, bool ns, const char *kind)
{
    json_t *ps = json_array();
    char desc[256];
    if (name) {
        snprintf(desc, sizeof desc, "Name of the %s.", kind);
        json_array_append_new(ps, param(b, "name", "path", "string", desc));
    }
    if (ns)
        json_array_append_new(ps, param(b, "namespace", "path", "string",
                                        "Object name and auth scope, such as for teams and "
                                        "projects."));
    json_array_append_new(ps, P_PRETTY(b));
    return ps;
}

/* GET/PUT/PATCH of a subresource (status or scale) at item + "/" + sub. */
static void add_subresource(builder *b, const resource_type *t, const char *item_path,
                            const char *sub, const char *def, const char *g, const char *v,
                            const char *k, const char *base, const char *ns)
{
    char path[1024], opid[512], desc[256];
    const char *Sub = !strcmp(sub, "status") ? "Status" : "Scale";
    snprintf(path, sizeof path, "%s/%s", item_path, sub);
    json_t *item = json_object();
    op_spec o = {.resp = def, .body_def = def, .g = g, .v = v, .k = k};
    if (t->verbs & VERB_GET) {
        snprintf(opid, sizeof opid, "read%s%s%s%s", base, ns, t->kind, Sub);
        snprintf(desc, sizeof desc, "Read the %s of the specified %s.", sub, t->kind);
        o.action = "get", o.opid = opid, o.desc = desc, o.body = BODY_NONE;
        json_object_set_new(item, "get", operation(b, t, &o, json_array()));
    }
    if (t->verbs & VERB_UPDATE) {
        snprintf(opid, sizeof opid, "replace%s%s%s%s", base, ns, t->kind, Sub);
        snprintf(desc, sizeof desc, "Replace the %s of the specified %s.", sub, t->kind);
        o.action = "put", o.opid = opid, o.desc = desc, o.body = BODY_OBJECT, o.created = true;
        json_object_set_new(item, "put", operation(b, t, &o, write_params(b, false)));
    }
    if (t->verbs & VERB_PATCH) {
        snprintf(opid, sizeof opid, "patch%s%s%s%s", base, ns, t->kind, Sub);
        snprintf(desc, sizeof desc, "Partially update the %s of the specified %s.", sub, t->kind);
        o.action = "patch", o.opid = opid, o.desc = desc, o.body = BODY_PATCH, o.created = true;
        json_object_set_new(item, "patch", operation(b, t, &o, write_params(b, true)));
    }
    add_path(b, path, item, path_params(b, true, t->namespaced, t->kind));
}

static void add_type(builder *b, const resource_type *t)
{
    char *def = openapi_definition_name(t, 0);
    char *list_def = openapi_definition_name(t, 1);
    if (!def || !list_def) {
        free(def);
        free(list_def);
        return;
    }
    json_object_set_new(b->comps, def, type_component(b, t));
    json_object_set_new(b->comps, list_def, list_component(b, t, def));
    add_component(b, META "Status", 0);
    add_component(b, META "DeleteOptions", 0);
    add_component(b, META "Patch", 0);

    const char *g = t->group ? t->group : "";
    char prefix[512], coll[1024], item_path[1100], all[1024];
    if (*g)
        snprintf(prefix, sizeof prefix, "/apis/%s/%s", g, t->version);
    else
        snprintf(prefix, sizeof prefix, "/api/%s", t->version);
    if (t->namespaced)
        snprintf(coll, sizeof coll, "%s/namespaces/{namespace}/%s", prefix, t->resource);
    else
        snprintf(coll, sizeof coll, "%s/%s", prefix, t->resource);
    snprintf(item_path, sizeof item_path, "%s/{name}", coll);
    snprintf(all, sizeof all, "%s/%s", prefix, t->resource);

    char base[256], opid[512], desc[512];
    op_base(t, base, sizeof base);
    const char *ns = t->namespaced ? "Namespaced" : "";
    const char *k = t->kind;
    op_spec o = {.g = g, .v = t->version, .k = k};

    /* collection */
    json_t *citem = json_object();
    if (t->verbs & VERB_LIST) {
        snprintf(opid, sizeof opid, "list%s%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "List or watch %s objects.", k);
        o = (op_spec){"list", opid,  desc, list_def,   BODY_NONE, NULL,
                      false,  false, g,    t->version, k};
        json_t *ps = json_array();
        add_list_params(b, ps);
        json_object_set_new(citem, "get", operation(b, t, &o, ps));
    }
    if (t->verbs & VERB_CREATE) {
        snprintf(opid, sizeof opid, "create%s%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "Create a %s.", k);
        o = (op_spec){"post", opid, desc, def, BODY_OBJECT, def, true, true, g, t->version, k};
        json_object_set_new(citem, "post", operation(b, t, &o, write_params(b, false)));
    }
    if (t->verbs & VERB_DELETECOLLECTION) {
        snprintf(opid, sizeof opid, "delete%sCollection%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "Delete a collection of %s objects.", k);
        o = (op_spec){
            "deletecollection", opid, desc, META "Status", BODY_DELETE, NULL, false, false, g,
            t->version,         k};
        json_t *ps = json_array();
        add_list_params(b, ps);
        add_delete_params(b, ps);
        json_object_set_new(citem, "delete", operation(b, t, &o, ps));
    }
    add_path(b, coll, citem, path_params(b, false, t->namespaced, k));

    /* item */
    json_t *item = json_object();
    if (t->verbs & VERB_GET) {
        snprintf(opid, sizeof opid, "read%s%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "Read the specified %s.", k);
        o = (op_spec){"get", opid, desc, def, BODY_NONE, NULL, false, false, g, t->version, k};
        json_object_set_new(item, "get", operation(b, t, &o, json_array()));
    }
    if (t->verbs & VERB_UPDATE) {
        snprintf(opid, sizeof opid, "replace%s%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "Replace the specified %s.", k);
        o = (op_spec){"put", opid, desc, def, BODY_OBJECT, def, true, false, g, t->version, k};
        json_object_set_new(item, "put", operation(b, t, &o, write_params(b, false)));
    }
    if (t->verbs & VERB_PATCH) {
        snprintf(opid, sizeof opid, "patch%s%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "Partially update the specified %s.", k);
        o = (op_spec){"patch", opid, desc, def, BODY_PATCH, NULL, true, false, g, t->version, k};
        json_object_set_new(item, "patch", operation(b, t, &o, write_params(b, true)));
    }
    if (t->verbs & VERB_DELETE) {
        snprintf(opid, sizeof opid, "delete%s%s%s", base, ns, k);
        snprintf(desc, sizeof desc, "Delete a %s.", k);
        o = (op_spec){"delete", opid,       desc, META "Status", BODY_DELETE, NULL, false, true,
                      g,        t->version, k};
        json_t *ps = json_array();
        add_delete_params(b, ps);
        json_object_set_new(item, "delete", operation(b, t, &o, ps));
    }
    add_path(b, item_path, item, path_params(b, true, t->namespaced, k));

    /* list across namespaces */
    if (t->namespaced && (t->verbs & VERB_LIST)) {
        json_t *aitem = json_object();
        snprintf(opid, sizeof opid, "list%s%sForAllNamespaces", base, k);
        snprintf(desc, sizeof desc, "List or watch %s objects of all namespaces.", k);
        o = (op_spec){"list", opid,  desc, list_def,   BODY_NONE, NULL,
                      false,  false, g,    t->version, k};
        json_t *ps = json_array();
        add_list_params(b, ps);
        json_object_set_new(aitem, "get", operation(b, t, &o, ps));
        add_path(b, all, aitem, path_params(b, false, false, k));
    }

    if (t->status_subresource)
        add_subresource(b, t, item_path, "status", def, g, t->version, k, base, ns);
    if (t->scale_subresource) {
        add_component(b, SCALE_DEF, 0);
        json_t *scale = json_object_get(b->comps, SCALE_DEF);
        if (!json_object_get(scale, "x-kubernetes-group-version-kind"))
            json_object_set_new(scale, "x-kubernetes-group-version-kind",
                                json_pack("[o]", gvk_object("autoscaling", "v1", "Scale")));
        add_subresource(b, t, item_path, "scale", SCALE_DEF, "autoscaling", "v1", "Scale", base,
                        ns);
    }
    free(def);
    free(list_def);
}

static json_t *security_scheme(void)
{
    return json_pack("{s:s,s:s,s:s,s:s}", "type", "apiKey", "description",
                     "Bearer token authentication", "name", "authorization", "in", "header");
}

/* ------------------------------------------------------------- API */

static bool same_gv(const resource_type *t, const char *group, const char *version)
{
    return !strcmp(t->group ? t->group : "", group ? group : "") && !strcmp(t->version, version);
}

json_t *openapi_v3_group_version(resource_type **types, size_t n, const char *group,
                                 const char *version)
{
    if (!version)
        return NULL;
    json_t *doc =
        json_pack("{s:s,s:{s:s,s:s},s:{},s:{s:{},s:{s:o}},s:[{s:[]}]}", "openapi", "3.0.0", "info",
                  "title", "Kubernetes", "version", "unversioned", "paths", "components", "schemas",
                  "securitySchemes", "BearerToken", security_scheme(), "security", "BearerToken");
    if (!doc)
        return NULL;
    builder b = {.v2 = false,
                 .paths = json_object_get(doc, "paths"),
                 .comps = json_object_get(json_object_get(doc, "components"), "schemas")};
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        if (!types[i] || !same_gv(types[i], group, version))
            continue;
        add_type(&b, types[i]);
        found++;
    }
    if (!found) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *openapi_v2(resource_type **types, size_t n)
{
    json_t *doc = json_pack("{s:s,s:{s:s,s:s},s:{},s:{},s:{s:o},s:[{s:[]}]}", "swagger", "2.0",
                            "info", "title", "Kubernetes", "version", "unversioned", "paths",
                            "definitions", "securityDefinitions", "BearerToken", security_scheme(),
                            "security", "BearerToken");
    if (!doc)
        return NULL;
    builder b = {.v2 = true,
                 .paths = json_object_get(doc, "paths"),
                 .comps = json_object_get(doc, "definitions")};
    for (size_t i = 0; i < n; i++)
        if (types[i])
            add_type(&b, types[i]);
    const char *name;
    json_t *def;
    json_object_foreach(b.comps, name, def) to_v2(def, 0);
    return doc;
}

char *openapi_hash(const json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!text)
        return NULL;
    /* libmd writes lowercase hex; kube-apiserver's hashes are uppercase. */
    char *hex = xmalloc(SHA512_DIGEST_STRING_LENGTH);
    if (hex && SHA512Data((const uint8_t *)text, strlen(text), hex))
        for (char *p = hex; *p; p++)
            *p = (char)toupper((unsigned char)*p);
    free(text);
    return hex;
}

json_t *openapi_v3_index(resource_type **types, size_t n)
{
    json_t *paths = json_object();
    json_t *index = json_pack("{s:o}", "paths", paths);
    if (!index)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const resource_type *t = types[i];
        if (!t)
            continue;
        const char *g = t->group ? t->group : "";
        char key[512];
        if (*g)
            snprintf(key, sizeof key, "apis/%s/%s", g, t->version);
        else
            snprintf(key, sizeof key, "api/%s", t->version);
        if (json_object_get(paths, key))
            continue;
        json_t *doc = openapi_v3_group_version(types, n, g, t->version);
        char *hash = doc ? openapi_hash(doc) : NULL;
        json_decref(doc);
        char url[1024];
        snprintf(url, sizeof url, "/openapi/v3/%s?hash=%s", key, hash ? hash : "0");
        free(hash);
        json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url));
    }
    return index;
}
