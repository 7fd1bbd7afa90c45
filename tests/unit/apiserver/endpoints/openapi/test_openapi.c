/* OpenAPI documents: the v3 index, per-group-version documents (what
 * kubectl's fieldValidation check and `kubectl explain` read) and the
 * Swagger 2.0 document. Types are built by hand, not from the registry. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/registry/definitions/builtin_schemas.h"
#include "apiserver/endpoints/openapi/openapi.h"

static json_t *J(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    if (!j)
        fail_msg("bad test JSON: %s", err.text);
    free(s);
    return j;
}

static resource_type *mk(const char *group, const char *version, const char *resource,
                         const char *kind, bool namespaced, bool custom, json_t *schema)
{
    resource_type *t = calloc(1, sizeof *t);
    assert_non_null(t);
    atomic_init(&t->refs, 1);
    t->group = strdup(group);
    t->version = strdup(version);
    t->resource = strdup(resource);
    t->kind = strdup(kind);
    char buf[256];
    snprintf(buf, sizeof buf, "%sList", kind);
    t->list_kind = strdup(buf);
    if (*group)
        snprintf(buf, sizeof buf, "%s/%s", group, version);
    else
        snprintf(buf, sizeof buf, "%s", version);
    t->api_version = strdup(buf);
    t->namespaced = namespaced;
    t->is_custom = custom;
    t->verbs = VERB_ALL;
    t->schema = schema;
    return t;
}

static void rm(resource_type *t)
{
    free(t->group);
    free(t->version);
    free(t->resource);
    free(t->kind);
    free(t->list_kind);
    free(t->api_version);
    json_decref(t->schema);
    free(t);
}

#define NETWORK_SCHEMA                                                                             \
    "{'type':'object','properties':{'spec':{'type':'object','description':'Network spec.',"        \
    "'properties':{'cidr':{'type':'string'},'vlan':{'type':'integer','nullable':true},"            \
    "'mode':{'anyOf':[{'type':'string'},{'type':'integer'}]}}},"                                   \
    "'metadata':{'type':'object'}}}"

typedef struct fixture {
    resource_type *types[6];
    size_t n;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->types[f->n++] =
        mk("", "v1", "configmaps", "ConfigMap", true, false, builtin_schema("", "v1", "ConfigMap"));
    f->types[f->n++] = mk("", "v1", "namespaces", "Namespace", false, false,
                          builtin_schema("", "v1", "Namespace"));
    f->types[f->n - 1]->status_subresource = true;
    f->types[f->n++] = mk("apps", "v1", "deployments", "Deployment", true, false,
                          builtin_schema("apps", "v1", "Deployment"));
    f->types[f->n - 1]->status_subresource = true;
    f->types[f->n - 1]->scale_subresource = true;
    f->types[f->n++] =
        mk("samplecrd.k8s.io", "v1", "networks", "Network", true, true, J(NETWORK_SCHEMA));
    f->types[f->n++] = mk("example.com", "v1alpha1", "widgets", "Widget", false, true, NULL);
    f->types[f->n - 1]->verbs = VERB_GET | VERB_LIST | VERB_WATCH;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (size_t i = 0; i < f->n; i++)
        rm(f->types[i]);
    free(f);
    return 0;
}

/* ------------------------------------------------------------- index */

static void test_index(void **state)
{
    fixture *f = *state;
    json_t *idx = openapi_v3_index(f->types, f->n);
    json_t *paths = json_object_get(idx, "paths");
    assert_int_equal(json_object_size(paths), 4);
    const char *keys[] = {"api/v1", "apis/apps/v1", "apis/samplecrd.k8s.io/v1",
                          "apis/example.com/v1alpha1"};
    for (size_t i = 0; i < 4; i++) {
        const char *url = json_string_value(
            json_object_get(json_object_get(paths, keys[i]), "serverRelativeURL"));
        assert_non_null(url);
        char prefix[256];
        snprintf(prefix, sizeof prefix, "/openapi/v3/%s?hash=", keys[i]);
        assert_int_equal(strncmp(url, prefix, strlen(prefix)), 0);
        const char *hash = url + strlen(prefix);
        assert_int_equal(strlen(hash), 128);
        for (const char *p = hash; *p; p++)
            assert_true(isdigit((unsigned char)*p) || (*p >= 'A' && *p <= 'F'));
    }
    /* same input, same index */
    json_t *again = openapi_v3_index(f->types, f->n);
    assert_true(json_equal(idx, again));
    json_decref(again);

    /* changing one CRD's schema changes only its group-version's hash */
    resource_type *net = f->types[3];
    json_object_set_new(
        json_object_get(json_object_get(json_object_get(net->schema, "properties"), "spec"),
                        "properties"),
        "extra", json_pack("{s:s}", "type", "boolean"));
    json_t *changed = openapi_v3_index(f->types, f->n);
    json_t *cp = json_object_get(changed, "paths");
    assert_false(json_equal(json_object_get(paths, "apis/samplecrd.k8s.io/v1"),
                            json_object_get(cp, "apis/samplecrd.k8s.io/v1")));
    assert_true(json_equal(json_object_get(paths, "api/v1"), json_object_get(cp, "api/v1")));
    json_decref(changed);
    json_decref(idx);
}

static void test_hash(void **state)
{
    (void)state;
    json_t *doc = json_object();
    char *h = openapi_hash(doc);
    /* SHA-512 of "{}" */
    assert_string_equal(h, "27C74670ADB75075FAD058D5CEAF7B20C4E7786C83BAE8A32F626F9782AF34C9"
                           "A33C2046EF60FD2A7878D378E29FEC851806BBD9A67878F3A9F1CDA4830763FD");
    free(h);
    json_decref(doc);
}

/* ------------------------------------------------ group-version docs */

/* Every $ref in `node` must name an entry of `defs` under `prefix`. */
static void check_refs(const json_t *node, const json_t *defs, const char *prefix, int *count)
{
    if (json_is_object(node)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)node, k, v)
        {
            if (!strcmp(k, "$ref")) {
                const char *ref = json_string_value(v);
                assert_non_null(ref);
                if (strncmp(ref, prefix, strlen(prefix)))
                    fail_msg("reference %s does not start with %s", ref, prefix);
                if (!json_object_get(defs, ref + strlen(prefix)))
                    fail_msg("unresolved reference %s", ref);
                (*count)++;
            } else {
                check_refs(v, defs, prefix, count);
            }
        }
    } else if (json_is_array(node)) {
        size_t i;
        const json_t *v;
        json_array_foreach(node, i, v) check_refs(v, defs, prefix, count);
    }
}

static bool has_query_param(const json_t *op, const char *name)
{
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(op, "parameters"), i, p)
    {
        if (!strcmp(json_string_value(json_object_get(p, "name")), name) &&
            !strcmp(json_string_value(json_object_get(p, "in")), "query"))
            return true;
    }
    return false;
}

/* Every write operation carries fieldValidation and a GVK; returns the
 * number of PATCH operations seen. */
static int check_operations(const json_t *doc, bool v2)
{
    int patches = 0;
    const char *path;
    const json_t *item;
    json_object_foreach(json_object_get(doc, "paths"), path, item)
    {
        const char *method;
        const json_t *op;
        json_object_foreach((json_t *)item, method, op)
        {
            if (!strcmp(method, "parameters"))
                continue;
            const json_t *gvk = json_object_get(op, "x-kubernetes-group-version-kind");
            if (!json_is_object(gvk) || !json_is_string(json_object_get(gvk, "group")) ||
                !json_is_string(json_object_get(gvk, "version")) ||
                !json_is_string(json_object_get(gvk, "kind")))
                fail_msg("%s %s lacks a GVK", method, path);
            assert_non_null(json_string_value(json_object_get(op, "x-kubernetes-action")));
            assert_non_null(json_string_value(json_object_get(op, "operationId")));
            assert_true(json_is_object(json_object_get(op, "responses")));
            bool write =
                !strcmp(method, "patch") || !strcmp(method, "put") || !strcmp(method, "post");
            if (write && !has_query_param(op, "fieldValidation"))
                fail_msg("%s %s lacks fieldValidation", method, path);
            if (!strcmp(method, "patch")) {
                patches++;
                assert_true(has_query_param(op, "force"));
                const json_t *content =
                    v2 ? NULL : json_object_get(json_object_get(op, "requestBody"), "content");
                if (!v2) {
                    assert_non_null(json_object_get(content, "application/merge-patch+json"));
                    assert_non_null(json_object_get(content, "application/json-patch+json"));
                    /* kubectl uses its own strategic-merge metadata */
                    assert_null(json_object_get(content, "application/strategic-merge-patch+json"));
                }
            }
        }
    }
    return patches;
}

static const json_t *op_of(const json_t *doc, const char *path, const char *method)
{
    const json_t *op =
        json_object_get(json_object_get(json_object_get(doc, "paths"), path), method);
    if (!op)
        fail_msg("no %s %s", method, path);
    return op;
}

static void expect_gvk(const json_t *op, const char *g, const char *v, const char *k)
{
    const json_t *gvk = json_object_get(op, "x-kubernetes-group-version-kind");
    assert_string_equal(json_string_value(json_object_get(gvk, "group")), g);
    assert_string_equal(json_string_value(json_object_get(gvk, "version")), v);
    assert_string_equal(json_string_value(json_object_get(gvk, "kind")), k);
    assert_int_equal(json_object_size(gvk), 3);
}

static void test_core_document(void **state)
{
    fixture *f = *state;
    json_t *doc = openapi_v3_group_version(f->types, f->n, "", "v1");
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.0.0");
    assert_non_null(json_object_get(json_object_get(doc, "info"), "title"));
    /* only core types */
    json_t *paths = json_object_get(doc, "paths");
    assert_null(json_object_get(paths, "/apis/apps/v1/namespaces/{namespace}/deployments"));

    const json_t *patch = op_of(doc, "/api/v1/namespaces/{namespace}/configmaps/{name}", "patch");
    expect_gvk(patch, "", "v1", "ConfigMap");
    assert_true(has_query_param(patch, "fieldValidation"));
    assert_string_equal(json_string_value(json_object_get(patch, "x-kubernetes-action")), "patch");
    assert_string_equal(json_string_value(json_object_get(patch, "operationId")),
                        "patchCoreV1NamespacedConfigMap");
    expect_gvk(op_of(doc, "/api/v1/configmaps", "get"), "", "v1", "ConfigMap");
    op_of(doc, "/api/v1/namespaces/{namespace}/configmaps", "post");
    op_of(doc, "/api/v1/namespaces/{namespace}/configmaps", "delete");
    /* cluster-scoped Namespace, with its status subresource */
    expect_gvk(op_of(doc, "/api/v1/namespaces/{name}", "patch"), "", "v1", "Namespace");
    expect_gvk(op_of(doc, "/api/v1/namespaces/{name}/status", "patch"), "", "v1", "Namespace");
    assert_null(json_object_get(paths, "/api/v1/namespaces/{namespace}/configmaps/{name}/status"));
    /* path parameters */
    size_t np = json_array_size(json_object_get(
        json_object_get(paths, "/api/v1/namespaces/{namespace}/configmaps/{name}"), "parameters"));
    assert_int_equal(np, 3);

    assert_int_equal(check_operations(doc, false), 3);
    const json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    int refs = 0;
    check_refs(doc, schemas, "#/components/schemas/", &refs);
    assert_true(refs > 10);

    /* the kind and list components carry their GVKs */
    const json_t *cm = json_object_get(schemas, "io.k8s.api.core.v1.ConfigMap");
    assert_non_null(cm);
    const json_t *gvks = json_object_get(cm, "x-kubernetes-group-version-kind");
    assert_int_equal(json_array_size(gvks), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(gvks, 0), "kind")),
                        "ConfigMap");
    const json_t *list = json_object_get(schemas, "io.k8s.api.core.v1.ConfigMapList");
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(list, "x-kubernetes-group-version-kind"), 0), "kind")),
        "ConfigMapList");
    assert_non_null(json_object_get(schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    assert_non_null(json_object_get(schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.Status"));
    /* no internal markers leak */
    char *text = json_dumps(doc, JSON_COMPACT);
    assert_null(strstr(text, "x-ckube-"));
    assert_null(strstr(text, "$ckref"));
    free(text);
    json_decref(doc);
    assert_null(openapi_v3_group_version(f->types, f->n, "nope.io", "v1"));
    assert_null(openapi_v3_group_version(f->types, f->n, "", "v2"));
}

/* --------------------------------------------- kubectl explain model */

static const json_t *resolve(const json_t *doc, const json_t *schema)
{
    const json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    for (int guard = 0; guard < 10 && schema; guard++) {
        const char *ref = json_string_value(json_object_get(schema, "$ref"));
        if (ref) {
            assert_int_equal(strncmp(ref, "#/components/schemas/", 21), 0);
            schema = json_object_get(schemas, ref + 21);
            continue;
        }
        const json_t *allof = json_object_get(schema, "allOf");
        if (json_array_size(allof) == 1 && !json_object_get(schema, "properties")) {
            schema = json_array_get(allof, 0);
            continue;
        }
        if (json_object_get(schema, "items")) {
            schema = json_object_get(schema, "items");
            continue;
        }
        return schema;
    }
    return schema;
}

/* What `kubectl explain RESOURCE.a.b` does: the GVK from the resource's
 * operations, the component listing that GVK, then the field path. */
static const json_t *explain(const json_t *doc, const char *prefix, const char *resource,
                             const char *fields)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", prefix, resource);
    const json_t *gvk = json_object_get(op_of(doc, path, "get"), "x-kubernetes-group-version-kind");
    const json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    const json_t *found = NULL;
    const char *name;
    const json_t *s;
    json_object_foreach((json_t *)schemas, name, s)
    {
        size_t i;
        const json_t *g;
        json_array_foreach(json_object_get(s, "x-kubernetes-group-version-kind"), i, g)
        {
            if (json_equal((json_t *)g, (json_t *)gvk))
                found = s;
        }
    }
    if (!found)
        fail_msg("no schema for %s", resource);
    char *copy = strdup(fields);
    const json_t *cur = found;
    for (char *tok = strtok(copy, "."); tok; tok = strtok(NULL, ".")) {
        cur = resolve(doc, cur);
        cur = json_object_get(json_object_get(cur, "properties"), tok);
        if (!cur)
            fail_msg("field %s of %s not found", tok, fields);
    }
    free(copy);
    return resolve(doc, cur);
}

static void test_explain(void **state)
{
    fixture *f = *state;
    json_t *core = openapi_v3_group_version(f->types, f->n, "", "v1");
    const json_t *data = explain(core, "/api/v1", "configmaps", "data");
    assert_string_equal(json_string_value(json_object_get(data, "type")), "object");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(data, "additionalProperties"), "type")),
        "string");
    assert_non_null(json_string_value(json_object_get(data, "description")));
    const json_t *labels = explain(core, "/api/v1", "configmaps", "metadata.labels");
    assert_non_null(json_object_get(labels, "additionalProperties"));
    json_decref(core);

    json_t *apps = openapi_v3_group_version(f->types, f->n, "apps", "v1");
    const json_t *c =
        explain(apps, "/apis/apps/v1", "deployments", "spec.template.spec.containers");
    assert_non_null(json_object_get(json_object_get(c, "properties"), "image"));
    const json_t *tmpl = json_object_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(apps, "components"), "schemas"),
                            "io.k8s.api.apps.v1.DeploymentSpec"),
            "properties"),
        "template");
    /* upstream's reference shape: allOf with one $ref beside the description */
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(tmpl, "allOf"), 0), "$ref")),
                        "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec");
    assert_non_null(json_object_get(tmpl, "description"));
    /* the scale subresource publishes autoscaling/v1 Scale */
    const json_t *scale =
        op_of(apps, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "patch");
    expect_gvk(scale, "autoscaling", "v1", "Scale");
    assert_true(has_query_param(scale, "fieldValidation"));
    const json_t *sch =
        json_object_get(json_object_get(json_object_get(apps, "components"), "schemas"),
                        "io.k8s.api.autoscaling.v1.Scale");
    assert_non_null(json_object_get(sch, "x-kubernetes-group-version-kind"));
    assert_int_equal(check_operations(apps, false), 3);
    int refs = 0;
    check_refs(apps, json_object_get(json_object_get(apps, "components"), "schemas"),
               "#/components/schemas/", &refs);
    json_decref(apps);

    json_t *crd = openapi_v3_group_version(f->types, f->n, "samplecrd.k8s.io", "v1");
    const json_t *spec = explain(crd, "/apis/samplecrd.k8s.io/v1", "networks", "spec");
    assert_string_equal(json_string_value(json_object_get(spec, "description")), "Network spec.");
    assert_non_null(json_object_get(json_object_get(spec, "properties"), "cidr"));
    const json_t *schemas = json_object_get(json_object_get(crd, "components"), "schemas");
    const json_t *net = json_object_get(schemas, "io.k8s.samplecrd.v1.Network");
    assert_non_null(net);
    assert_non_null(json_object_get(schemas, "io.k8s.samplecrd.v1.NetworkList"));
    /* metadata points at ObjectMeta; apiVersion and kind are described */
    const json_t *md = json_object_get(json_object_get(net, "properties"), "metadata");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(md, "allOf"), 0), "$ref")),
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    assert_non_null(json_object_get(json_object_get(net, "properties"), "apiVersion"));
    expect_gvk(
        op_of(crd, "/apis/samplecrd.k8s.io/v1/namespaces/{namespace}/networks/{name}", "patch"),
        "samplecrd.k8s.io", "v1", "Network");
    assert_string_equal(
        json_string_value(json_object_get(
            op_of(crd, "/apis/samplecrd.k8s.io/v1/namespaces/{namespace}/networks/{name}", "patch"),
            "operationId")),
        "patchSamplecrdK8sIoV1NamespacedNetwork");
    refs = 0;
    check_refs(crd, schemas, "#/components/schemas/", &refs);
    json_decref(crd);
}

static void test_verbs_and_schemaless(void **state)
{
    fixture *f = *state;
    json_t *doc = openapi_v3_group_version(f->types, f->n, "example.com", "v1alpha1");
    assert_non_null(doc);
    json_t *paths = json_object_get(doc, "paths");
    const json_t *coll = json_object_get(paths, "/apis/example.com/v1alpha1/widgets");
    const json_t *item = json_object_get(paths, "/apis/example.com/v1alpha1/widgets/{name}");
    assert_non_null(json_object_get(coll, "get"));
    assert_null(json_object_get(coll, "post"));
    assert_null(json_object_get(coll, "delete"));
    assert_non_null(json_object_get(item, "get"));
    assert_null(json_object_get(item, "patch"));
    assert_null(json_object_get(item, "put"));
    assert_int_equal(check_operations(doc, false), 0);
    const json_t *w =
        json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                        "com.example.v1alpha1.Widget");
    assert_non_null(w);
    assert_true(json_is_true(json_object_get(w, "x-kubernetes-preserve-unknown-fields")));
    json_decref(doc);
}

static void test_definition_names(void **state)
{
    fixture *f = *state;
    const char *want[][2] = {
        {"io.k8s.api.core.v1.ConfigMap", "io.k8s.api.core.v1.ConfigMapList"},
        {"io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.NamespaceList"},
        {"io.k8s.api.apps.v1.Deployment", "io.k8s.api.apps.v1.DeploymentList"},
        {"io.k8s.samplecrd.v1.Network", "io.k8s.samplecrd.v1.NetworkList"},
        {"com.example.v1alpha1.Widget", "com.example.v1alpha1.WidgetList"},
    };
    for (size_t i = 0; i < f->n; i++) {
        for (int list = 0; list < 2; list++) {
            char *name = openapi_definition_name(f->types[i], list);
            assert_string_equal(name, want[i][list]);
            free(name);
        }
    }
    resource_type *crd = mk("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                            "CustomResourceDefinition", false, false, NULL);
    char *name = openapi_definition_name(crd, 0);
    assert_string_equal(name, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
                              "CustomResourceDefinition");
    free(name);
    rm(crd);
}

/* ---------------------------------------------------------------- v2 */

static void check_v2_schema_clean(const json_t *node)
{
    if (json_is_object(node)) {
        const json_t *allof = json_object_get(node, "allOf");
        if (json_array_size(allof) == 1 && json_object_get(json_array_get(allof, 0), "$ref"))
            fail_msg("v2 schema still uses allOf for a reference");
        assert_null(json_object_get(node, "nullable"));
        assert_null(json_object_get(node, "anyOf"));
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)node, k, v) check_v2_schema_clean(v);
    } else if (json_is_array(node)) {
        size_t i;
        const json_t *v;
        json_array_foreach(node, i, v) check_v2_schema_clean(v);
    }
}

static void test_v2(void **state)
{
    fixture *f = *state;
    json_t *doc = openapi_v2(f->types, f->n);
    assert_string_equal(json_string_value(json_object_get(doc, "swagger")), "2.0");
    const json_t *defs = json_object_get(doc, "definitions");
    assert_non_null(json_object_get(defs, "io.k8s.api.core.v1.ConfigMap"));
    assert_non_null(json_object_get(defs, "io.k8s.api.apps.v1.Deployment"));
    assert_non_null(json_object_get(defs, "io.k8s.samplecrd.v1.Network"));
    int refs = 0;
    check_refs(doc, defs, "#/definitions/", &refs);
    assert_true(refs > 10);
    check_v2_schema_clean(defs);
    /* the CRD's nullable became x-nullable */
    const json_t *vlan = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(defs, "io.k8s.samplecrd.v1."
                                                                              "Network"),
                                                        "properties"),
                                        "spec"),
                        "properties"),
        "vlan");
    assert_true(json_is_true(json_object_get(vlan, "x-nullable")));

    assert_int_equal(check_operations(doc, true), 7);
    const json_t *patch =
        op_of(doc, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}", "patch");
    expect_gvk(patch, "apps", "v1", "Deployment");
    const json_t *consumes = json_object_get(patch, "consumes");
    assert_true(json_array_size(consumes) >= 2);
    /* parameters are v2-style: type beside the name, a body parameter */
    bool body = false;
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(patch, "parameters"), i, p)
    {
        const char *in = json_string_value(json_object_get(p, "in"));
        if (!strcmp(in, "body"))
            body = json_object_get(p, "schema") != NULL;
        else
            assert_non_null(json_string_value(json_object_get(p, "type")));
    }
    assert_true(body);
    /* and the whole document round-trips through JSON text */
    char *text = json_dumps(doc, JSON_COMPACT);
    assert_non_null(text);
    json_t *back = json_loads(text, 0, NULL);
    assert_true(json_equal(back, doc));
    json_decref(back);
    free(text);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index, setup, teardown),
        cmocka_unit_test(test_hash),
        cmocka_unit_test_setup_teardown(test_core_document, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verbs_and_schemaless, setup, teardown),
        cmocka_unit_test_setup_teardown(test_definition_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
