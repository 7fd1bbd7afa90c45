/* openapi.c - the extension API server's OpenAPI v3 document for its
 * group/version (ckube/apiext.h): what kube-apiserver's aggregator
 * fetches from an extension server (GET /openapi/v3, then the path it
 * names) and hands to clients, so `kubectl explain` reads the kinds.
 *
 * The document has a schema per kind, tagged with
 * x-kubernetes-group-version-kind as kubectl looks them up, the kind's
 * list, the two metadata types they point to, and the read paths the
 * server answers (get and list). A kind's own schema comes from its
 * resource (ckube_apiext_resource.schema); without one it is an object
 * with any fields. */
#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiext/internal.h"
#include "common/text.h"

static json_t *gvk(const char *group, const char *version, const char *kind)
{
    return json_pack("[{s:s,s:s,s:s}]", "group", group, "kind", kind, "version", version);
}

static json_t *ref(const char *name)
{
    char r[512];
    snprintf(r, sizeof r, "#/components/schemas/%s", name);
    return json_pack("{s:[{s:s}]}", "allOf", "$ref", r);
}

#define OBJECT_META "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
#define LIST_META "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"

/* The metadata types the kinds point to: the fields this server fills. */
static void add_meta(json_t *schemas)
{
    json_object_set_new(
        schemas, OBJECT_META,
        json_pack("{s:s,s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s,s:s},s:{s:s,s:s},s:{s:s,s:s},"
                  "s:{s:s,s:s,s:{s:s}},s:{s:s,s:s,s:{s:s}}}}",
                  "description", "The object's name, namespace and other metadata.", "type",
                  "object", "properties", "name", "description",
                  "The object's name, unique in its namespace.", "type", "string", "namespace",
                  "description", "The namespace the object is in (namespaced kinds).", "type",
                  "string", "creationTimestamp", "description", "When the object was made.", "type",
                  "string", "format", "date-time", "uid", "description", "The object's unique id.",
                  "type", "string", "resourceVersion", "description",
                  "The version of the object as the server has it.", "type", "string", "labels",
                  "description", "Keys and values to select the object by.", "type", "object",
                  "additionalProperties", "type", "string", "annotations", "description",
                  "Keys and values for tools and people.", "type", "object", "additionalProperties",
                  "type", "string"));
    json_object_set_new(schemas, LIST_META,
                        json_pack("{s:s,s:s,s:{s:{s:s,s:s}}}", "description", "A list's metadata.",
                                  "type", "object", "properties", "resourceVersion", "description",
                                  "The version of the list as the server has it.", "type",
                                  "string"));
}

static json_t *type_meta_props(void)
{
    return json_pack("{s:{s:s,s:s},s:{s:s,s:s}}", "apiVersion", "description",
                     "The group and version of the object.", "type", "string", "kind",
                     "description", "The kind of the object.", "type", "string");
}

/* The kind's schema: its own (copied) with apiVersion, kind and metadata
 * added. */
static json_t *kind_schema(const apiext_openapi_kind *k, const char *group, const char *version)
{
    json_t *sc = k->schema ? json_deep_copy(k->schema)
                           : json_pack("{s:s,s:b}", "type", "object",
                                       "x-kubernetes-preserve-unknown-fields", 1);
    if (!json_object_get(sc, "type"))
        json_object_set_new(sc, "type", json_string("object"));
    json_t *props = json_object_get(sc, "properties");
    if (!json_is_object(props)) {
        props = json_object();
        json_object_set_new(sc, "properties", props);
    }
    json_t *tm = type_meta_props();
    json_object_update_missing(props, tm);
    json_decref(tm);
    json_object_set_new(props, "metadata", ref(OBJECT_META));
    json_object_set_new(sc, "x-kubernetes-group-version-kind", gvk(group, version, k->kind));
    return sc;
}

/* KINDList: items of the kind. */
static json_t *list_schema(const char *item, const char *group, const char *version,
                           const char *kind)
{
    json_t *props = type_meta_props();
    char r[600], list_kind[300];
    snprintf(r, sizeof r, "#/components/schemas/%s", item);
    snprintf(list_kind, sizeof list_kind, "%sList", kind);
    json_object_set_new(props, "items",
                        json_pack("{s:s,s:s,s:{s:[{s:s}]}}", "description", "The objects.", "type",
                                  "array", "items", "allOf", "$ref", r));
    json_object_set_new(props, "metadata", ref(LIST_META));
    return json_pack("{s:s,s:s,s:[s],s:o,s:o}", "description", "A list of objects.", "type",
                     "object", "required", "items", "properties", props,
                     "x-kubernetes-group-version-kind", gvk(group, version, list_kind));
}

/* A GET of `path` answering `schema` (a components name). */
static json_t *get_op(const char *id, const char *action, const char *schema, const char *group,
                      const char *version, const char *kind)
{
    char r[600];
    snprintf(r, sizeof r, "#/components/schemas/%s", schema);
    return json_pack("{s:{s:s,s:{s:{s:s,s:{s:{s:{s:s}}}}},s:s,s:o}}", "get", "operationId", id,
                     "responses", "200", "description", "OK", "content", "application/json",
                     "schema", "$ref", r, "x-kubernetes-action", action,
                     "x-kubernetes-group-version-kind",
                     json_pack("{s:s,s:s,s:s}", "group", group, "version", version, "kind", kind));
}

static json_t *name_param(const char *name, const char *desc)
{
    return json_pack("{s:s,s:s,s:s,s:b,s:{s:s}}", "name", name, "in", "path", "description", desc,
                     "required", 1, "schema", "type", "string");
}

/* The read paths of one kind: list (in a namespace and across them, for
 * namespaced kinds) and get. */
static void add_paths(json_t *paths, const apiext_openapi_kind *k, const char *item,
                      const char *list, const char *group, const char *version)
{
    char base[700], id[300];
    if (k->namespaced) {
        snprintf(base, sizeof base, "/apis/%s/%s/namespaces/{namespace}/%s", group, version,
                 k->plural);
        snprintf(id, sizeof id, "listNamespaced%s", k->kind);
        json_t *p = get_op(id, "list", list, group, version, k->kind);
        json_object_set_new(p, "parameters",
                            json_pack("[o]", name_param("namespace", "The namespace.")));
        json_object_set_new(paths, base, p);
        char one[800];
        snprintf(one, sizeof one, "%s/{name}", base);
        snprintf(id, sizeof id, "readNamespaced%s", k->kind);
        p = get_op(id, "get", item, group, version, k->kind);
        json_object_set_new(p, "parameters",
                            json_pack("[o,o]", name_param("name", "The object's name."),
                                      name_param("namespace", "The namespace.")));
        json_object_set_new(paths, one, p);
        snprintf(base, sizeof base, "/apis/%s/%s/%s", group, version, k->plural);
        snprintf(id, sizeof id, "list%sForAllNamespaces", k->kind);
        json_object_set_new(paths, base, get_op(id, "list", list, group, version, k->kind));
        return;
    }
    snprintf(base, sizeof base, "/apis/%s/%s/%s", group, version, k->plural);
    snprintf(id, sizeof id, "list%s", k->kind);
    json_object_set_new(paths, base, get_op(id, "list", list, group, version, k->kind));
    char one[800];
    snprintf(one, sizeof one, "%s/{name}", base);
    snprintf(id, sizeof id, "read%s", k->kind);
    json_t *p = get_op(id, "get", item, group, version, k->kind);
    json_object_set_new(p, "parameters",
                        json_pack("[o]", name_param("name", "The object's name.")));
    json_object_set_new(paths, one, p);
}

json_t *apiext_openapi_v3(const char *group, const char *version, const apiext_openapi_kind *kinds,
                          size_t n)
{
    char prefix[300];
    ckube__reverse_dns(group, prefix, sizeof prefix);
    json_t *schemas = json_object(), *paths = json_object();
    add_meta(schemas);
    for (size_t i = 0; i < n; i++) {
        const apiext_openapi_kind *k = &kinds[i];
        char item[512], list[530];
        snprintf(item, sizeof item, "%.200s.%.60s.%.200s", prefix, version, k->kind);
        snprintf(list, sizeof list, "%sList", item);
        json_object_set_new(schemas, item, kind_schema(k, group, version));
        json_object_set_new(schemas, list, list_schema(item, group, version, k->kind));
        add_paths(paths, k, item, list, group, version);
    }
    char gv[300];
    snprintf(gv, sizeof gv, "%s/%s", group, version);
    return json_pack("{s:s,s:{s:s,s:s},s:o,s:{s:o}}", "openapi", "3.0.0", "info", "title",
                     "ckube extension API server", "version", gv, "paths", paths, "components",
                     "schemas", schemas);
}

char *apiext_openapi_hash(const json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!text || !EVP_Digest(text, strlen(text), md, &len, EVP_sha512(), NULL)) {
        free(text);
        return NULL;
    }
    free(text);
    char *hex = malloc(2 * (size_t)len + 1);
    for (unsigned int i = 0; hex && i < len; i++)
        snprintf(hex + 2 * i, 3, "%02X", md[i]);
    return hex;
}
