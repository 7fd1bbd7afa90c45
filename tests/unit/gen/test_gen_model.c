/* test_gen_model.c - ckube-gen's model of its inputs (src/gen/model.h,
 * names.h): C names, the kinds and types of the project's CRDs, and the
 * errors bad input gets (non-structural schemas, names that clash once
 * mangled, reserved words), each naming the CRD, version and path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/yaml.h"
#include "gen/emit.h"
#include "gen/model.h"
#include "gen/names.h"

static void expect_name(const char *in, const char *want)
{
    char *got = gen_c_name(in);
    if (!want) {
        if (got)
            fail_msg("gen_c_name(%s): want NULL, got %s", in, got);
        return;
    }
    if (!got || strcmp(got, want))
        fail_msg("gen_c_name(%s): want %s, got %s", in, want, got ? got : "NULL");
    free(got);
}

static void test_c_names(void **state)
{
    (void)state;
    expect_name("cidr", "cidr");
    expect_name("podCIDR", "pod_cidr");
    expect_name("IPAddress", "ip_address");
    expect_name("hostIPs", "host_ips");
    expect_name("podCIDRs", "pod_cidrs");
    expect_name("IPsec", "i_psec"); /* (an acronym's plural only at a word's end) */
    expect_name("x-kubernetes.io/name", "x_kubernetes_io_name");
    expect_name("replicas2", "replicas2");
    expect_name("v1beta1", "v1beta1");
    expect_name("2fa", "_2fa");
    expect_name("default", "default_");
    expect_name("unknown", "unknown_");
    expect_name("Network", "network");
    expect_name("$ref", "ref");
    expect_name("-", NULL);
    expect_name("", NULL);
    expect_name("héllo", "h_llo");
    assert_true(gen_reserved("struct"));
    assert_true(gen_reserved("base"));
    assert_false(gen_reserved("spec"));
}

/* A model of one CRD given as YAML; NULL with *err on refusal. */
static gen_model *model_of(const char *yaml, char **err)
{
    char *yerr = NULL;
    json_t *crd = ckube_yaml_load(yaml, strlen(yaml), &yerr);
    if (!crd)
        fail_msg("test YAML: %s", yerr);
    gen_model *m = gen_model_new("pkg", err);
    assert_non_null(m);
    int rc = gen_model_add_crd(m, crd, "test.yaml", err);
    json_decref(crd);
    if (rc) {
        assert_non_null(*err);
        assert_int_equal(m->nkinds, 0); /* nothing half-added */
        gen_model_free(m);
        return NULL;
    }
    return m;
}

static const gen_field *field(const gen_type *t, const char *json_name)
{
    for (size_t i = 0; i < t->nfields; i++)
        if (!strcmp(t->fields[i].json_name, json_name))
            return &t->fields[i];
    fail_msg("%s has no field %s", t->c_name, json_name);
    return NULL;
}

/* The Network controller's CRD (the project's own, v1 with a schema). */
static void test_network_crd(void **state)
{
    (void)state;
    const char *src = getenv("CKUBE_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/network-controller/manifests/crd.yaml",
             src ? src : ".");
    char *err = NULL;
    gen_model *m = gen_model_new("samplecrd", &err);
    assert_non_null(m);
    if (gen_model_add_file(m, path, &err) != 0)
        fail_msg("%s", err);
    assert_true(m->nkinds >= 1);
    const gen_kind *k = &m->kinds[0];
    assert_string_equal(k->group, "samplecrd.k8s.io");
    assert_string_equal(k->kind, "Network");
    assert_string_equal(k->plural, "networks");
    assert_true(k->namespaced);
    assert_string_equal(k->root->c_name, "samplecrd_v1_network");
    const gen_field *spec = field(k->root, "spec");
    assert_true(spec->required);
    assert_int_equal(spec->type->kind, GEN_OBJECT);
    assert_string_equal(spec->type->c_name, "samplecrd_v1_network_spec");
    const gen_field *cidr = field(spec->type, "cidr");
    assert_int_equal(cidr->type->kind, GEN_STRING);
    assert_true(cidr->required);
    assert_string_equal(cidr->type->path, ".spec.cidr");
    const gen_field *status = field(k->root, "status");
    const gen_field *phase = field(status->type, "phase");
    assert_non_null(phase->type->enum_values);
    assert_string_equal(phase->type->enum_values[0], "Ready");
    assert_string_equal(phase->type->enum_values[1], "Failed");
    assert_null(phase->type->enum_values[2]);
    for (size_t i = 0; i < k->root->nfields; i++) /* the runtime types these */
        assert_true(strcmp(k->root->fields[i].json_name, "metadata") &&
                    strcmp(k->root->fields[i].json_name, "apiVersion"));
    gen_model_free(m);
}

/* The seed's CRD: v1beta1, one version, no schema. */
static void test_seed_crd_without_schema(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m = model_of("apiVersion: apiextensions.k8s.io/v1beta1\n"
                            "kind: CustomResourceDefinition\n"
                            "metadata: {name: networks.samplecrd.k8s.io}\n"
                            "spec:\n"
                            "  group: samplecrd.k8s.io\n"
                            "  version: v1\n"
                            "  names: {kind: Network, plural: networks}\n"
                            "  scope: Namespaced\n",
                            &err);
    if (!m)
        fail_msg("%s", err);
    assert_int_equal(m->nkinds, 1);
    assert_string_equal(m->kinds[0].root->c_name, "pkg_v1_network");
    assert_int_equal(m->kinds[0].root->kind, GEN_OBJECT);
    assert_int_equal(m->kinds[0].root->nfields, 0); /* all of it kept as unknown */
    gen_model_free(m);
}

static const char CRD_HEAD[] = "apiVersion: apiextensions.k8s.io/v1\n"
                               "kind: CustomResourceDefinition\n"
                               "metadata: {name: widgets.example.com}\n"
                               "spec:\n"
                               "  group: example.com\n"
                               "  names: {kind: Widget, plural: widgets}\n"
                               "  scope: Cluster\n"
                               "  versions:\n"
                               "  - name: v1\n"
                               "    served: true\n"
                               "    storage: true\n"
                               "    subresources: {status: {}}\n"
                               "    schema:\n"
                               "      openAPIV3Schema:\n"
                               "        type: object\n"
                               "        properties:\n";

/* The CRD above with `props` (YAML at the properties' indentation). */
static gen_model *widget(const char *props, char **err)
{
    size_t n = strlen(CRD_HEAD) + strlen(props) + 1;
    char *y = malloc(n);
    snprintf(y, n, "%s%s", CRD_HEAD, props);
    gen_model *m = model_of(y, err);
    free(y);
    return m;
}

static void expect_refused(const char *props, const char *want)
{
    char *err = NULL;
    gen_model *m = widget(props, &err);
    if (m)
        fail_msg("accepted: %s", props);
    if (!strstr(err, want))
        fail_msg("error [%s] lacks [%s]", err, want);
    if (!strstr(err, "test.yaml: CRD widgets.example.com, version v1: "))
        fail_msg("error [%s] does not say where", err);
    free(err);
}

static void test_types(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m =
        widget("          spec:\n"
               "            type: object\n"
               "            properties:\n"
               "              replicas: {type: integer, format: int32, default: 1}\n"
               "              ratio: {type: number, nullable: true}\n"
               "              paused: {type: boolean}\n"
               "              port: {x-kubernetes-int-or-string: true}\n"
               "              when: {type: string, format: date-time}\n"
               "              labels: {type: object, additionalProperties: {type: string}}\n"
               "              raw: {type: object, x-kubernetes-preserve-unknown-fields: true}\n"
               "              template: {type: object, x-kubernetes-embedded-resource: true,\n"
               "                         x-kubernetes-preserve-unknown-fields: true}\n"
               "              free: {type: object}\n"
               "              ports:\n"
               "                type: array\n"
               "                items:\n"
               "                  type: object\n"
               "                  properties: {name: {type: string}}\n",
               &err);
    if (!m)
        fail_msg("%s", err);
    const gen_kind *k = &m->kinds[0];
    assert_false(k->namespaced);
    assert_true(k->status_subresource);
    assert_false(k->scale_subresource);
    const gen_type *spec = field(k->root, "spec")->type;
    const gen_field *f = field(spec, "replicas");
    assert_int_equal(f->type->kind, GEN_INTEGER);
    assert_string_equal(f->type->format, "int32");
    assert_int_equal(json_integer_value(f->type->default_value), 1);
    f = field(spec, "ratio");
    assert_int_equal(f->type->kind, GEN_NUMBER);
    assert_true(f->nullable);
    assert_int_equal(field(spec, "paused")->type->kind, GEN_BOOLEAN);
    assert_int_equal(field(spec, "port")->type->kind, GEN_INT_OR_STRING);
    assert_string_equal(field(spec, "when")->type->format, "date-time");
    f = field(spec, "labels");
    assert_int_equal(f->type->kind, GEN_MAP);
    assert_int_equal(f->type->items->kind, GEN_STRING);
    assert_string_equal(f->type->items->path, ".spec.labels[*]");
    assert_int_equal(field(spec, "raw")->type->kind, GEN_JSON);
    assert_int_equal(field(spec, "template")->type->kind, GEN_JSON);
    assert_int_equal(field(spec, "free")->type->kind, GEN_JSON);
    f = field(spec, "ports");
    assert_int_equal(f->type->kind, GEN_ARRAY);
    assert_string_equal(f->type->items->c_name, "pkg_v1_widget_spec_ports_item");
    assert_string_equal(f->type->items->path, ".spec.ports[*]");
    gen_model_free(m);
}

static void test_bad_input(void **state)
{
    (void)state;
    /* not structural, in upstream's words */
    expect_refused("          spec:\n"
                   "            properties: {a: {type: string}}\n",
                   ".spec.type: Required value: must not be empty for specified object fields");
    expect_refused("          spec:\n"
                   "            type: object\n"
                   "            properties: {a: {type: string}}\n"
                   "            additionalProperties: {type: string}\n",
                   ".spec.additionalProperties: Forbidden: additionalProperties and properties "
                   "are mutual exclusive");
    expect_refused("          list: {type: array}\n", ".list.items: Required value");
    expect_refused("          x: {type: date}\n", ".x.type: Unsupported value: \"date\"");
    /* names that clash once mangled */
    expect_refused("          podCIDR: {type: string}\n"
                   "          pod_cidr: {type: string}\n",
                   ".podCIDR and .pod_cidr are both \"pod_cidr\" in C (struct pkg_v1_widget)");
    /* a presence member: an array's count is n_NAME */
    expect_refused("          items: {type: array, items: {type: string}}\n"
                   "          nItems: {type: integer}\n",
                   ".items and .nItems are both \"n_items\" in C");
    /* a field's struct against a sibling's: .a.b and .a_b */
    expect_refused("          a:\n"
                   "            type: object\n"
                   "            properties:\n"
                   "              b: {type: object, properties: {c: {type: string}}}\n"
                   "          aB: {type: object, properties: {d: {type: string}}}\n",
                   "would both be the C type pkg_v1_widget_a_b");
    expect_refused("          \"--\": {type: string}\n", "has no letter or digit");
    /* reserved words are renamed, not refused */
    char *err = NULL;
    gen_model *m = widget("          default: {type: string}\n"
                          "          struct: {type: string}\n",
                          &err);
    if (!m)
        fail_msg("%s", err);
    assert_string_equal(field(m->kinds[0].root, "default")->c_name, "default_");
    assert_string_equal(field(m->kinds[0].root, "struct")->c_name, "struct_");
    gen_model_free(m);
    /* and C++'s: a generated header can be included from C++ */
    m = widget("          template: {type: string}\n"
               "          namespace: {type: string}\n"
               "          class: {type: string}\n",
               &err);
    if (!m)
        fail_msg("%s", err);
    assert_string_equal(field(m->kinds[0].root, "template")->c_name, "template_");
    assert_string_equal(field(m->kinds[0].root, "namespace")->c_name, "namespace_");
    assert_string_equal(field(m->kinds[0].root, "class")->c_name, "class_");
    gen_model_free(m);
    /* what the generated code names after a struct: S_free, S_info... */
    expect_refused("          free: {type: object, properties: {a: {type: string}}}\n",
                   "Widget v1 . (its function free) and Widget v1 .free would both be the C "
                   "type pkg_v1_widget_free");
    expect_refused("          spec:\n"
                   "            type: object\n"
                   "            properties:\n"
                   "              info: {type: object, properties: {a: {type: string}}}\n",
                   "would both be the C type pkg_v1_widget_spec_info");
    /* a map's keys member */
    expect_refused("          env: {type: object, additionalProperties: {type: string}}\n"
                   "          envKeys: {type: string}\n",
                   ".env and .envKeys are both \"env_keys\" in C");
}

/* A schema nested past the limit (no real CRD nests so far; the
 * generated C would be unreadable long before) is refused, naming the
 * path, whether the nesting is of objects or of preserve-unknown objects
 * with properties. */
static void test_too_deep(void **state)
{
    (void)state;
    for (int preserve = 0; preserve < 2; preserve++) {
        json_t *leaf = json_pack("{s:s}", "type", "string");
        for (int i = 0; i < 60; i++) {
            json_t *o = json_pack("{s:s, s:{s:o}}", "type", "object", "properties", "a", leaf);
            if (preserve)
                json_object_set_new(o, "x-kubernetes-preserve-unknown-fields", json_true());
            leaf = o;
        }
        json_t *crd = json_pack(
            "{s:s, s:s, s:{s:s}, s:{s:s, s:{s:s, s:s}, s:s, s:[{s:s, s:b, s:b, s:{s:o}}]}}",
            "apiVersion", "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition", "metadata",
            "name", "deeps.example.com", "spec", "group", "example.com", "names", "kind", "Deep",
            "plural", "deeps", "scope", "Namespaced", "versions", "name", "v1", "served", 1,
            "storage", 1, "schema", "openAPIV3Schema", leaf);
        assert_non_null(crd);
        char *err = NULL;
        gen_model *m = gen_model_new("pkg", &err);
        assert_int_equal(gen_model_add_crd(m, crd, "deep.yaml", &err), -1);
        assert_int_equal(m->nkinds, 0);
        if (!strstr(err, "deep.yaml: CRD deeps.example.com, version v1: .a.a.a.a") ||
            !strstr(err, ": nested more than 48 deep"))
            fail_msg("%s", err);
        free(err);
        gen_model_free(m);
        json_decref(crd);
    }
}

/* Enum constants: STRUCT_FIELD_VALUE; values that mangle alike get none. */
static void test_enums(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m = widget("          action: {type: string, enum: [replace, Replace, keep, \"\", "
                          "\"True\", REPLACE]}\n"
                          "          modes: {type: array, items: {type: string, enum: [A]}}\n",
                          &err);
    if (!m)
        fail_msg("%s", err);
    const gen_type *t = field(m->kinds[0].root, "action")->type;
    assert_null(t->enum_macros[0]); /* replace, Replace and REPLACE: twins */
    assert_null(t->enum_macros[1]);
    assert_string_equal(t->enum_macros[2], "PKG_V1_WIDGET_ACTION_KEEP");
    assert_null(t->enum_macros[3]);                                      /* "" names nothing */
    assert_string_equal(t->enum_macros[4], "PKG_V1_WIDGET_ACTION_TRUE"); /* no '_' inside */
    assert_null(t->enum_macros[5]);
    const gen_type *modes = field(m->kinds[0].root, "modes")->type;
    assert_string_equal(modes->items->enum_macros[0], "PKG_V1_WIDGET_MODES_A");
    gen_model_free(m);
}

/* Elements held as JSON: arrays and maps of arrays or maps, and nullable
 * elements C cannot hold a null of (model.h). */
static void test_json_elements(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m = widget("          matrix: {type: array, items: {type: array, items: {type: "
                          "integer}}}\n"
                          "          groups: {type: object, additionalProperties: {type: array, "
                          "items: {type: string}}}\n"
                          "          nested: {type: object, additionalProperties: {type: object, "
                          "additionalProperties: {type: string}}}\n"
                          "          maybe: {type: array, items: {type: number, nullable: true}}\n"
                          "          maybeObj: {type: array, items: {type: object, nullable: "
                          "true, properties: {a: {type: string}}}}\n"
                          "          names: {type: array, items: {type: string, nullable: true}}\n"
                          "          objs: {type: array, items: {type: object, properties: {a: "
                          "{type: string}}}}\n",
                          &err);
    if (!m)
        fail_msg("%s", err);
    const gen_type *root = m->kinds[0].root;
    assert_int_equal(field(root, "matrix")->type->items->kind, GEN_JSON);
    assert_int_equal(field(root, "groups")->type->items->kind, GEN_JSON);
    assert_int_equal(field(root, "nested")->type->items->kind, GEN_JSON);
    assert_int_equal(field(root, "maybe")->type->items->kind, GEN_JSON);
    assert_int_equal(field(root, "maybeObj")->type->items->kind, GEN_JSON);
    assert_int_equal(field(root, "names")->type->items->kind, GEN_STRING); /* NULL is null */
    assert_int_equal(field(root, "objs")->type->items->kind, GEN_OBJECT);
    assert_string_equal(field(root, "objs")->type->items->c_name, "pkg_v1_widget_objs_item");
    gen_model_free(m);
}

/* Two kinds of one package whose type names meet: Network's .spec and a
 * kind NetworkSpec. */
static void test_clash_across_kinds(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m =
        widget("          spec: {type: object, properties: {a: {type: string}}}\n", &err);
    if (!m)
        fail_msg("%s", err);
    const char *other = "apiVersion: apiextensions.k8s.io/v1\n"
                        "kind: CustomResourceDefinition\n"
                        "metadata: {name: widgetspecs.example.com}\n"
                        "spec:\n"
                        "  group: example.com\n"
                        "  names: {kind: WidgetSpec, plural: widgetspecs}\n"
                        "  scope: Namespaced\n"
                        "  versions:\n"
                        "  - {name: v1, served: true, storage: true,\n"
                        "     schema: {openAPIV3Schema: {type: object}}}\n";
    json_t *crd = ckube_yaml_load(other, strlen(other), NULL);
    assert_non_null(crd);
    assert_int_equal(gen_model_add_crd(m, crd, "other.yaml", &err), -1);
    if (!strstr(err, "Widget v1 .spec and WidgetSpec v1 . would both be the C type "
                     "pkg_v1_widget_spec"))
        fail_msg("%s", err);
    assert_int_equal(m->nkinds, 1); /* the first kind kept, nothing of the second */
    free(err);
    err = NULL;
    json_decref(crd);
    /* a later input's type against an earlier kind's function */
    const char *third = "apiVersion: apiextensions.k8s.io/v1\n"
                        "kind: CustomResourceDefinition\n"
                        "metadata: {name: widgetnews.example.com}\n"
                        "spec:\n"
                        "  group: example.com\n"
                        "  names: {kind: WidgetNew, plural: widgetnews}\n"
                        "  scope: Namespaced\n"
                        "  versions:\n"
                        "  - {name: v1, served: true, storage: true,\n"
                        "     schema: {openAPIV3Schema: {type: object}}}\n";
    crd = ckube_yaml_load(third, strlen(third), NULL);
    assert_int_equal(gen_model_add_crd(m, crd, "third.yaml", &err), -1);
    if (!strstr(err, "Widget v1 . (its function new) and WidgetNew v1 . would both be the C "
                     "type pkg_v1_widget_new"))
        fail_msg("%s", err);
    free(err);
    json_decref(crd);
    gen_model_free(m);
}

/* An OpenAPI document: a kind from its paths, named types shared, the
 * definitions libckube types itself, recursion held as JSON. */
static const char OPENAPI[] =
    "{\"openapi\": \"3.0.0\", \"paths\": {"
    " \"/apis/x.io/v1/namespaces/{namespace}/things/{name}\": {\"get\": {"
    "  \"x-kubernetes-action\": \"get\","
    "  \"x-kubernetes-group-version-kind\": {\"group\": \"x.io\", \"version\": \"v1\","
    "   \"kind\": \"Thing\"},"
    "  \"responses\": {\"200\": {\"content\": {\"application/json\": {\"schema\":"
    "   {\"$ref\": \"#/components/schemas/io.x.v1.Thing\"}}}}}}},"
    " \"/apis/x.io/v1/namespaces/{namespace}/things/{name}/status\": {},"
    " \"/apis/x.io/v1/things\": {\"get\": {\"x-kubernetes-action\": \"list\"}}},"
    " \"components\": {\"schemas\": {"
    "  \"io.x.v1.Thing\": {\"type\": \"object\", \"properties\": {"
    "   \"metadata\": {\"allOf\": [{\"$ref\": "
    "\"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta\"}]},"
    "   \"spec\": {\"$ref\": \"#/components/schemas/io.x.v1.Tree\"},"
    "   \"other\": {\"allOf\": [{\"$ref\": \"#/components/schemas/io.x.v1.Tree\"}],"
    "    \"description\": \"the same type again\"},"
    "   \"size\": {\"$ref\": "
    "\"#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity\"},"
    "   \"when\": {\"$ref\": \"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time\"},"
    "   \"port\": {\"$ref\": "
    "\"#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString\"},"
    "   \"raw\": {\"description\": \"anything\"}}},"
    "  \"io.x.v1.Tree\": {\"type\": \"object\", \"properties\": {"
    "   \"name\": {\"type\": \"string\"},"
    "   \"template\": {\"type\": \"object\", \"properties\": {"
    "    \"metadata\": {\"$ref\": "
    "\"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta\"}}},"
    "   \"children\": {\"type\": \"array\", \"items\": {\"$ref\": "
    "\"#/components/schemas/io.x.v1.Tree\"}}}},"
    "  \"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta\": {\"type\": \"object\"},"
    "  \"io.k8s.apimachinery.pkg.api.resource.Quantity\": {},"
    "  \"io.k8s.apimachinery.pkg.util.intstr.IntOrString\": {}}}}";

static gen_model *openapi_model(const char *text, char **err)
{
    json_t *doc = json_loads(text, 0, NULL);
    assert_non_null(doc);
    gen_model *m = gen_model_new("pkg", err);
    int rc = gen_model_add_openapi(m, doc, "doc.json", err);
    json_decref(doc);
    if (rc) {
        assert_int_equal(m->nkinds, 0);
        gen_model_free(m);
        return NULL;
    }
    return m;
}

static void test_openapi(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m = openapi_model(OPENAPI, &err);
    if (!m)
        fail_msg("%s", err);
    assert_int_equal(m->nkinds, 1);
    const gen_kind *k = &m->kinds[0];
    assert_string_equal(k->group, "x.io");
    assert_string_equal(k->kind, "Thing");
    assert_string_equal(k->plural, "things");
    assert_true(k->namespaced && k->status_subresource && !k->scale_subresource);
    assert_string_equal(k->client, "pkg_v1_things");
    const gen_type *spec = field(k->root, "spec")->type, *other = field(k->root, "other")->type;
    assert_string_equal(spec->c_name, "pkg_v1_tree");  /* named after the definition */
    assert_string_equal(other->c_name, "pkg_v1_tree"); /* and shared */
    assert_int_equal(field(spec, "children")->type->items->kind, GEN_JSON); /* recursion */
    const gen_type *meta = field(field(spec, "template")->type, "metadata")->type;
    assert_true(meta->external);
    assert_string_equal(meta->c_name, "ckube_object_meta");
    assert_int_equal(field(k->root, "size")->type->kind, GEN_STRING);
    assert_string_equal(field(k->root, "size")->type->format, "quantity");
    assert_string_equal(field(k->root, "when")->type->format, "date-time");
    assert_int_equal(field(k->root, "port")->type->kind, GEN_INT_OR_STRING);
    assert_int_equal(field(k->root, "raw")->type->kind, GEN_JSON);
    /* the emitters write the shared type once */
    char *h = NULL;
    size_t hl = 0;
    FILE *f = open_memstream(&h, &hl);
    assert_int_equal(gen_emit_header(m, f), 0);
    fclose(f);
    const char *first = strstr(h, "struct pkg_v1_tree {");
    assert_non_null(first);
    assert_null(strstr(first + 1, "struct pkg_v1_tree {"));
    assert_null(strstr(h, "struct ckube_object_meta {"));
    free(h);
    gen_model_free(m);

    /* bad documents */
    assert_null(openapi_model("{\"openapi\": \"3.0.0\"}", &err));
    assert_string_equal(err, "doc.json: an OpenAPI v3 document needs paths and components.schemas");
    free(err);
    err = NULL;
    char *bad = strdup(OPENAPI);
    char *at = strstr(bad, "io.x.v1.Tree\"},");
    memcpy(at, "io.x.v1.Gone", 12);
    assert_null(openapi_model(bad, &err));
    if (!strstr(err, "doc.json: io.x.v1.Thing: .spec: $ref #/components/schemas/io.x.v1.Gone: "
                     "no such schema in the document"))
        fail_msg("%s", err);
    free(err);
    err = NULL;
    free(bad);
    bad = strdup(OPENAPI);
    at = strstr(bad, "#/components/schemas/io.x.v1.Tree\"},");
    memcpy(at, "other.json#/", 12);
    assert_null(openapi_model(bad, &err));
    if (!strstr(err, "only references to #/components/schemas/... are supported"))
        fail_msg("%s", err);
    free(err);
    err = NULL;
    free(bad);
    /* a second path whose group-version-kind has no version (or one that
     * is not a string) names no kind: skipped, as one without a kind is
     * (a fuzzer's finding: the version went to strcmp as NULL) */
    for (int variant = 0; variant < 2; variant++) {
        json_t *d = json_loads(OPENAPI, 0, NULL);
        json_t *ps = json_object_get(d, "paths");
        json_t *one = json_deep_copy(
            json_object_get(ps, "/apis/x.io/v1/namespaces/{namespace}/things/{name}"));
        json_t *g = json_object_get(json_object_get(one, "get"), "x-kubernetes-group-version-kind");
        if (variant)
            json_object_set_new(g, "version", json_integer(1));
        else
            json_object_del(g, "version");
        json_object_set_new(ps, "/apis/x.io/v1/things/{name}", one);
        char *text = json_dumps(d, 0);
        gen_model *mm = openapi_model(text, &err);
        if (!mm)
            fail_msg("%s", err);
        assert_int_equal(mm->nkinds, 1);
        assert_string_equal(mm->kinds[0].version, "v1");
        gen_model_free(mm);
        free(text);
        json_decref(d);
    }
    /* kinds that are only created (TokenReview's shape), but not a
     * subresource's (pods/{name}/eviction's) */
    json_t *doc = json_loads(OPENAPI, 0, NULL);
    json_t *paths = json_object_get(doc, "paths");
    json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    json_object_set_new(
        schemas, "io.x.v1.Review",
        json_pack("{s:s, s:{s:{s:s}}}", "type", "object", "properties", "token", "type", "string"));
    json_object_set_new(paths, "/apis/x.io/v1/reviews",
                        json_pack("{s:{s:s, s:{s:s, s:s, s:s}, s:{s:{s:{s:{s:{s:s}}}}}}}", "post",
                                  "x-kubernetes-action", "post", "x-kubernetes-group-version-kind",
                                  "group", "x.io", "version", "v1", "kind", "Review", "responses",
                                  "201", "content", "application/json", "schema", "$ref",
                                  "#/components/schemas/io.x.v1.Review"));
    json_object_set_new(paths, "/apis/x.io/v1/namespaces/{namespace}/things/{name}/eviction",
                        json_pack("{s:{s:s, s:{s:s, s:s, s:s}, s:{s:{s:{s:{s:{s:s}}}}}}}", "post",
                                  "x-kubernetes-action", "post", "x-kubernetes-group-version-kind",
                                  "group", "x.io", "version", "v1", "kind", "Eviction", "responses",
                                  "201", "content", "application/json", "schema", "$ref",
                                  "#/components/schemas/io.x.v1.Review"));
    m = gen_model_new("pkg", &err);
    assert_int_equal(gen_model_add_openapi(m, doc, "doc.json", &err), 0);
    assert_int_equal(m->nkinds, 2);
    assert_string_equal(m->kinds[1].kind, "Review");
    assert_string_equal(m->kinds[1].plural, "reviews");
    assert_false(m->kinds[1].namespaced);
    gen_model_free(m);
    json_decref(doc);

    /* --kinds */
    doc = json_loads(OPENAPI, 0, NULL);
    m = gen_model_new("pkg", &err);
    assert_int_equal(gen_model_set_kinds(m, "Other", &err), 0);
    assert_int_equal(gen_model_add_openapi(m, doc, "doc.json", &err), 0);
    assert_int_equal(m->nkinds, 0);
    assert_int_equal(gen_model_check_kinds(m, &err), -1);
    assert_string_equal(err, "--kinds: no kind Other is served by the OpenAPI documents given");
    free(err);
    err = NULL;
    assert_int_equal(gen_model_set_kinds(m, ",", &err), -1);
    free(err);
    gen_model_free(m);
    json_decref(doc);
}

static void test_not_a_crd(void **state)
{
    (void)state;
    char *err = NULL;
    gen_model *m = model_of("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", &err);
    assert_null(m);
    assert_string_equal(err, "test.yaml: ConfigMap x is not a CustomResourceDefinition "
                             "(apiextensions.k8s.io/v1 or v1beta1)");
    free(err);
    err = NULL;
    assert_null(gen_model_new("My-Package", &err));
    assert_non_null(strstr(err, "perhaps my_package"));
    free(err);
    err = NULL;
    gen_model *e = gen_model_new("pkg", &err);
    assert_int_equal(gen_model_add_file(e, "/nonexistent/crd.yaml", &err), -1);
    assert_non_null(strstr(err, "/nonexistent/crd.yaml: cannot open"));
    free(err);
    gen_model_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c_names),
        cmocka_unit_test(test_network_crd),
        cmocka_unit_test(test_seed_crd_without_schema),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_too_deep),
        cmocka_unit_test(test_enums),
        cmocka_unit_test(test_openapi),
        cmocka_unit_test(test_json_elements),
        cmocka_unit_test(test_clash_across_kinds),
        cmocka_unit_test(test_not_a_crd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
