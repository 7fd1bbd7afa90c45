/* Tests of server-side apply and managedFields (apiserver/fieldmanager.h):
 * FieldsV1 encoding (f:, k:, v:, "."), update ownership, apply merge,
 * conflicts and force, removal of fields dropped from an apply, kubectl's
 * client-side-apply upgrade, subresources, capping and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "apiserver/registry/definitions/builtin_schemas.h"
#include "apiserver/fieldmanager/fieldmanager.h"
#include "ckube/json.h"
#include "ckube/patch.h"

#define T0 "2024-01-01T00:00:00Z"
#define T1 "2024-01-01T00:00:01Z"
#define T2 "2024-01-01T00:00:02Z"

/* ---- helpers ------------------------------------------------------------ */

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad test JSON (%s): %s", e.text, text);
    return v;
}

static char *dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
}

static void expect_json(const json_t *got, const char *want)
{
    json_t *w = J(want);
    if (!ckube_patch_json_equal(got, w)) {
        char *g = dump(got), *x = dump(w);
        print_error("got:  %s\nwant: %s\n", g ? g : "(null)", x);
        free(g);
        free(x);
        json_decref(w);
        fail();
    }
    json_decref(w);
}

static fm_type configmap_type(void)
{
    static json_t *schema;
    if (!schema)
        schema = builtin_schema("", "v1", "ConfigMap");
    return (fm_type){.schema = schema,
                     .patch_meta = patchmeta_configmap,
                     .api_version = "v1",
                     .kind = "ConfigMap"};
}

static fm_type deployment_type(void)
{
    static json_t *schema;
    if (!schema)
        schema = builtin_schema("apps", "v1", "Deployment");
    return (fm_type){.schema = schema,
                     .patch_meta = patchmeta_deployment,
                     .status_subresource = true,
                     .api_version = "apps/v1",
                     .kind = "Deployment"};
}

/* A custom resource with every list and map flavour. */
static const char *const widget_schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"apiVersion\":{\"type\":\"string\"},\"kind\":{\"type\":\"string\"},"
    "\"metadata\":{\"type\":\"object\"},"
    "\"spec\":{\"type\":\"object\",\"properties\":{"
    "  \"ports\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"map\","
    "    \"x-kubernetes-list-map-keys\":[\"name\",\"proto\"],"
    "    \"items\":{\"type\":\"object\",\"properties\":{"
    "      \"name\":{\"type\":\"string\"},\"proto\":{\"type\":\"string\",\"default\":\"TCP\"},"
    "      \"port\":{\"type\":\"integer\"}}}},"
    "  \"tags\":{\"type\":\"array\",\"x-kubernetes-list-type\":\"set\","
    "    \"items\":{\"type\":\"string\"}},"
    "  \"args\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "  \"selector\":{\"type\":\"object\",\"x-kubernetes-map-type\":\"atomic\","
    "    \"additionalProperties\":{\"type\":\"string\"}},"
    "  \"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
    "  \"size\":{\"type\":\"integer\"}}},"
    "\"status\":{\"type\":\"object\",\"properties\":{\"phase\":{\"type\":\"string\"}}}}}";

static fm_type widget_type(void)
{
    static json_t *schema;
    if (!schema)
        schema = J(widget_schema);
    return (fm_type){.schema = schema,
                     .custom = true,
                     .status_subresource = true,
                     .api_version = "example.com/v1",
                     .kind = "Widget"};
}

static void set_fields_is(const fm_type *t, const char *obj_s, const char *want)
{
    json_t *obj = J(obj_s);
    char *err = NULL;
    fm_set *s = fm_set_of(t, obj, &err);
    if (!s)
        fail_msg("fm_set_of failed: %s", err);
    json_t *f = fm_set_to_fields(s);
    expect_json(f, want);
    json_decref(f);
    fm_set_free(s);
    json_decref(obj);
}

/* The entry of `manager` (and operation) in obj's managedFields, or NULL. */
static json_t *entry_of(const json_t *obj, const char *manager, const char *op)
{
    size_t i;
    json_t *e;
    json_array_foreach(ckube_json_get_path(obj, "metadata.managedFields"), i, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "manager")), manager) &&
            !strcmp(json_string_value(json_object_get(e, "operation")), op))
            return e;
    }
    return NULL;
}

static void fields_of_is(const json_t *obj, const char *manager, const char *op, const char *want)
{
    json_t *e = entry_of(obj, manager, op);
    if (!e) {
        char *d = dump(obj);
        fail_msg("no %s entry of %s in %s", op, manager, d);
    }
    expect_json(json_object_get(e, "fieldsV1"), want);
}

static size_t nentries(const json_t *obj)
{
    return json_array_size(ckube_json_get_path(obj, "metadata.managedFields"));
}

/* Runs an update by `manager` from old to the new object text; returns the
 * new object with its managedFields. */
static json_t *do_update(const fm_type *t, const char *manager, const char *sub, const json_t *old,
                         const char *new_s, const char *now)
{
    json_t *obj = J(new_s);
    fm_op op = {.manager = manager, .subresource = sub, .now = now};
    fm_update(t, &op, old, obj);
    return obj;
}

/* Applies; returns the result with managedFields stored, or NULL with *st. */
static json_t *do_apply(const fm_type *t, const char *manager, bool force, const json_t *live,
                        const char *config_s, const char *now, ckube_status **st)
{
    json_t *config = J(config_s);
    fm_op op = {.manager = manager, .force = force, .now = now};
    fm_managed *m = NULL;
    json_t *out = fm_apply(t, &op, live, config, &m, st);
    json_decref(config);
    if (out)
        fm_managed_store(m, out);
    fm_managed_free(m);
    return out;
}

static json_t *apply_ok(const fm_type *t, const char *manager, bool force, const json_t *live,
                        const char *config_s, const char *now)
{
    ckube_status *st = NULL;
    json_t *out = do_apply(t, manager, force, live, config_s, now, &st);
    if (!out)
        fail_msg("apply failed: %d %s", st->code, st->message);
    return out;
}

/* ---- field sets ------------------------------------------------------- */

static void test_fieldset_configmap(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    set_fields_is(&t,
                  "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\","
                  "\"labels\":{\"app\":\"a\"}},\"data\":{\"k\":\"v\",\"k2\":\"v2\"}}",
                  "{\"f:apiVersion\":{},\"f:kind\":{},\"f:data\":{\"f:k\":{},\"f:k2\":{}},"
                  "\"f:metadata\":{\"f:name\":{},\"f:labels\":{\"f:app\":{}}}}");
}

static void test_fieldset_deployment_keys(void **state)
{
    (void)state;
    fm_type t = deployment_type();
    /* Containers by name, ports by containerPort+protocol (defaulted
     * TCP), env by name, the selector atomic, finalizers a set. */
    set_fields_is(
        &t,
        "{\"metadata\":{\"finalizers\":[\"example.com/f\"]},\"spec\":{\"replicas\":2,"
        "\"selector\":{\"matchLabels\":{\"app\":\"w\"}},\"template\":{\"spec\":{\"containers\":"
        "[{\"name\":\"c\",\"image\":\"nginx\",\"ports\":[{\"containerPort\":80}],"
        "\"env\":[{\"name\":\"A\",\"value\":\"1\"}],\"args\":[\"x\",\"y\"]}]}}}}",
        "{\"f:metadata\":{\"f:finalizers\":{\"v:\\\"example.com/f\\\"\":{}}},"
        "\"f:spec\":{\"f:replicas\":{},\"f:selector\":{},\"f:template\":{\"f:spec\":{"
        "\"f:containers\":{\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:name\":{},\"f:image\":{},"
        "\"f:args\":{},\"f:ports\":{\"k:{\\\"containerPort\\\":80,\\\"protocol\\\":\\\"TCP\\\"}\":"
        "{\".\":{},\"f:containerPort\":{}}},\"f:env\":{\"k:{\\\"name\\\":\\\"A\\\"}\":{\".\":{},"
        "\"f:name\":{},\"f:value\":{}}}}}}}}}");
}

static void test_fieldset_custom_lists(void **state)
{
    (void)state;
    fm_type t = widget_type();
    set_fields_is(&t,
                  "{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80}],"
                  "\"tags\":[\"a\",\"b\"],\"args\":[\"x\"],\"selector\":{\"a\":\"b\"},"
                  "\"env\":{\"X\":\"1\"},\"size\":3}}",
                  "{\"f:spec\":{\"f:ports\":{\"k:{\\\"name\\\":\\\"http\\\",\\\"proto\\\":"
                  "\\\"TCP\\\"}\":{\".\":{},\"f:name\":{},\"f:port\":{}}},"
                  "\"f:tags\":{\"v:\\\"a\\\"\":{},\"v:\\\"b\\\"\":{}},\"f:args\":{},"
                  "\"f:selector\":{},\"f:env\":{\"f:X\":{}},\"f:size\":{}}}");
}

/* Field sets from many serving threads at once: the list keys' defaults
 * (the schema's "TCP", and the built-in one for a container's port) are
 * shared by all of them. Under TSan, also that nothing races on them. */
typedef struct fs_worker {
    fm_type t;
    const char *obj, *want;
    int bad;
} fs_worker;

static void *fs_work(void *arg)
{
    fs_worker *w = arg;
    json_t *obj = J(w->obj);
    for (int i = 0; i < 300; i++) {
        char *err = NULL;
        fm_set *s = fm_set_of(&w->t, obj, &err);
        json_t *f = s ? fm_set_to_fields(s) : NULL;
        char *got = f ? json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!got || strcmp(got, w->want))
            w->bad++;
        free(got);
        free(err);
        json_decref(f);
        fm_set_free(s);
    }
    json_decref(obj);
    return NULL;
}

static void test_fieldset_from_many_threads(void **state)
{
    (void)state;
    const char *widget = "{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80}]}}";
    const char *deploy = "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":"
                         "\"c\",\"ports\":[{\"containerPort\":80}]}]}}}}";
    enum { N = 4 };
    fs_worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        bool is_widget = i % 2 == 0;
        w[i] = (fs_worker){.t = is_widget ? widget_type() : deployment_type(),
                           .obj = is_widget ? widget : deploy};
        /* the expected set, computed alone first */
        json_t *obj = J(w[i].obj);
        char *err = NULL;
        fm_set *s = fm_set_of(&w[i].t, obj, &err);
        assert_non_null(s);
        json_t *f = fm_set_to_fields(s);
        w[i].want = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);
        assert_non_null(strstr(w[i].want, "TCP"));
        json_decref(f);
        fm_set_free(s);
        json_decref(obj);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_create(&th[i], NULL, fs_work, &w[i]), 0);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(w[i].bad, 0);
        free((char *)w[i].want);
    }
}

static void test_fieldset_bad_lists(void **state)
{
    (void)state;
    fm_type t = widget_type();
    char *err = NULL;
    json_t *dup = J("{\"spec\":{\"tags\":[\"a\",\"a\"]}}");
    assert_null(fm_set_of(&t, dup, &err));
    assert_non_null(strstr(err, ".spec.tags: duplicate entries for key [=\"a\"]"));
    free(err);
    json_decref(dup);

    fm_type d = deployment_type();
    json_t *nokey =
        J("{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"image\":\"nginx\"}]}}}}");
    assert_null(fm_set_of(&d, nokey, &err));
    assert_non_null(strstr(err, ".spec.template.spec.containers: element 0: associative list "
                                "with keys has an element that omits key field \"name\""));
    free(err);
    json_decref(nokey);

    json_t *objset = J("{\"spec\":{\"tags\":[{\"a\":1}]}}");
    assert_null(fm_set_of(&t, objset, &err));
    free(err);
    json_decref(objset);
}

static void test_fields_roundtrip_and_errors(void **state)
{
    (void)state;
    char *err = NULL;
    /* Non-canonical keys are canonicalized; "." marks the node itself;
     * unknown element types are skipped. */
    json_t *f = J("{\"f:a\":{\".\":{},\"f:b\":{}},\"k:{\\\"y\\\":2, \\\"x\\\":1}\":{},"
                  "\"z:future\":{},\"v:3\":{},\"i:4\":{}}");
    fm_set *s = fm_set_from_fields(f, &err);
    assert_non_null(s);
    json_t *back = fm_set_to_fields(s);
    expect_json(back, "{\"f:a\":{\".\":{},\"f:b\":{}},\"k:{\\\"x\\\":1,\\\"y\\\":2}\":{},"
                      "\"v:3\":{},\"i:4\":{}}");
    json_decref(back);
    fm_set_free(s);
    json_decref(f);

    static const char *const bad[] = {
        "{\"x\":{}}",                /* too short */
        "{\"fa\":{}}",               /* no colon */
        "{\"k:[1]\":{}}",            /* key not an object */
        "{\"v:{bad\":{}}",           /* bad JSON */
        "{\"i:x\":{}}",              /* bad index */
        "{\"f:a\":\"notanobject\"}", /* child not an object */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *b = J(bad[i]);
        fm_set *x = fm_set_from_fields(b, &err);
        if (x)
            fail_msg("accepted %s", bad[i]);
        assert_non_null(err);
        free(err);
        json_decref(b);
    }
}

/* ---- updates ------------------------------------------------------------ */

static void test_update_create_records_entry(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *obj = do_update(&t, "kubectl-create", NULL, NULL,
                            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                            "\"c\",\"namespace\":\"d\",\"uid\":\"u\",\"labels\":{\"a\":\"b\"}},"
                            "\"data\":{\"k\":\"v\"}}",
                            T0);
    expect_json(ckube_json_get_path(obj, "metadata.managedFields"),
                "[{\"manager\":\"kubectl-create\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
                "\"time\":\"" T0 "\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:data\":"
                "{\".\":{},\"f:k\":{}},\"f:metadata\":{\"f:labels\":{\".\":{},\"f:a\":{}}}}}]");
    json_decref(obj);
}

static void test_update_create_deployment_skeleton(void **state)
{
    (void)state;
    /* Structs a zero Deployment already has (spec, template) are not
     * marked with "."; pointers (securityContext) and new maps are. */
    fm_type t = deployment_type();
    json_t *obj = do_update(
        &t, "kubectl-create", NULL, NULL,
        "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":1,\"template\":{\"metadata\":"
        "{\"labels\":{\"app\":\"w\"}},\"spec\":{\"securityContext\":{},\"containers\":[{\"name\":"
        "\"c\",\"image\":\"i\",\"resources\":{}}]}}},\"status\":{\"replicas\":0}}",
        T0);
    fields_of_is(obj, "kubectl-create", "Update",
                 "{\"f:spec\":{\"f:replicas\":{},\"f:template\":{\"f:metadata\":{\"f:labels\":{"
                 "\".\":{},\"f:app\":{}}},\"f:spec\":{\"f:securityContext\":{},\"f:containers\":{"
                 "\"k:{\\\"name\\\":\\\"c\\\"}\":{\".\":{},\"f:name\":{},\"f:image\":{},"
                 "\"f:resources\":{}}}}}}}");
    json_decref(obj);
}

static void test_update_transfers_ownership(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 =
        do_update(&t, "alice", NULL, NULL,
                  "{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}", T0);
    /* bob changes a: it moves to bob. */
    json_t *v1c = json_deep_copy(v1);
    json_object_set_new(json_object_get(v1c, "data"), "a", json_string("9"));
    char *s = dump(v1c);
    json_t *v2 = do_update(&t, "bob", NULL, v1, s, T1);
    free(s);
    fields_of_is(v2, "alice", "Update", "{\"f:data\":{\".\":{},\"f:b\":{}}}");
    fields_of_is(v2, "bob", "Update", "{\"f:data\":{\"f:a\":{}}}");
    assert_string_equal(json_string_value(json_object_get(entry_of(v2, "bob", "Update"), "time")),
                        T1);
    assert_string_equal(json_string_value(json_object_get(entry_of(v2, "alice", "Update"), "time")),
                        T0);
    /* bob removes b (alice's): alice keeps only the data map itself
     * (the "." she got when she created it); bob keeps a. */
    json_t *v2c = json_deep_copy(v2);
    json_object_del(json_object_get(v2c, "data"), "b");
    s = dump(v2c);
    json_t *v3 = do_update(&t, "bob", NULL, v2, s, T2);
    free(s);
    fields_of_is(v3, "alice", "Update", "{\"f:data\":{}}");
    fields_of_is(v3, "bob", "Update", "{\"f:data\":{\"f:a\":{}}}");
    /* A no-op update changes nothing, time included. */
    s = dump(v3);
    json_t *v4 = do_update(&t, "carol", NULL, v3, s, "2030-01-01T00:00:00Z");
    free(s);
    assert_true(ckube_patch_json_equal(ckube_json_get_path(v3, "metadata.managedFields"),
                                       ckube_json_get_path(v4, "metadata.managedFields")));
    json_decref(v1);
    json_decref(v1c);
    json_decref(v2);
    json_decref(v2c);
    json_decref(v3);
    json_decref(v4);
}

static void test_update_noop_keeps_managed_fields(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 = do_update(&t, "alice", NULL, NULL,
                           "{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"1\"}}", T0);
    char *s = dump(v1);
    json_t *v2 = do_update(&t, "bob", NULL, v1, s, T1);
    free(s);
    assert_true(ckube_patch_json_equal(ckube_json_get_path(v1, "metadata.managedFields"),
                                       ckube_json_get_path(v2, "metadata.managedFields")));
    json_decref(v1);
    json_decref(v2);
}

static void test_update_managed_fields_from_request(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 = do_update(&t, "alice", NULL, NULL,
                           "{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"1\"}}", T0);
    /* [] resets, and the object is not tracked again. */
    json_t *v2 = do_update(&t, "bob", NULL, v1,
                           "{\"metadata\":{\"name\":\"c\",\"managedFields\":[]},\"data\":{\"a\":"
                           "\"2\"}}",
                           T1);
    assert_null(ckube_json_get_path(v2, "metadata.managedFields"));
    json_t *v2b = do_update(&t, "bob", NULL, v1,
                            "{\"metadata\":{\"name\":\"c\",\"managedFields\":[{}]},\"data\":{\"a\":"
                            "\"1\"}}",
                            T1);
    assert_null(ckube_json_get_path(v2b, "metadata.managedFields"));
    json_t *v3 = do_update(&t, "bob", NULL, v2,
                           "{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"3\"}}", T2);
    assert_null(ckube_json_get_path(v3, "metadata.managedFields"));
    /* Invalid managedFields are replaced by the live ones. */
    json_t *v4 = do_update(&t, "bob", NULL, v1,
                           "{\"metadata\":{\"name\":\"c\",\"managedFields\":[{\"manager\":\"x\","
                           "\"operation\":\"Bogus\",\"apiVersion\":\"v1\",\"fieldsType\":"
                           "\"FieldsV1\"}]},\"data\":{\"a\":\"1\"}}",
                           T1);
    expect_json(ckube_json_get_path(v4, "metadata.managedFields"),
                "[{\"manager\":\"alice\",\"operation\":\"Update\",\"apiVersion\":\"v1\",\"time\":"
                "\"" T0 "\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:data\":{\".\":{},"
                "\"f:a\":{}}}}]");
    json_t *v5 = do_update(&t, "bob", NULL, v1,
                           "{\"metadata\":{\"name\":\"c\",\"managedFields\":[{\"manager\":\"x\","
                           "\"operation\":\"Update\",\"apiVersion\":\"v1\",\"fieldsType\":"
                           "\"FieldsV1\",\"fieldsV1\":{\"k:notjson\":{}}}]},\"data\":{\"a\":"
                           "\"1\"}}",
                           T1);
    assert_non_null(entry_of(v5, "alice", "Update"));
    assert_null(entry_of(v5, "x", "Update"));
    /* Valid ones are taken as written (kubectl's migration relies on it). */
    json_t *v6 =
        do_update(&t, "bob", NULL, v1,
                  "{\"metadata\":{\"name\":\"c\",\"managedFields\":[{\"manager\":\"kubectl\","
                  "\"operation\":\"Apply\",\"apiVersion\":\"v1\",\"fieldsType\":"
                  "\"FieldsV1\",\"fieldsV1\":{\"f:data\":{\"f:a\":{}}}}]},\"data\":{\"a\":"
                  "\"1\"}}",
                  T1);
    assert_int_equal(nentries(v6), 1);
    fields_of_is(v6, "kubectl", "Apply", "{\"f:data\":{\"f:a\":{}}}");
    json_decref(v1);
    json_decref(v2);
    json_decref(v2b);
    json_decref(v3);
    json_decref(v4);
    json_decref(v5);
    json_decref(v6);
}

static void test_update_status_subresource(void **state)
{
    (void)state;
    fm_type t = deployment_type();
    json_t *v1 = do_update(&t, "kubectl", NULL, NULL,
                           "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":1},\"status\":"
                           "{\"replicas\":5}}",
                           T0);
    /* The main resource does not own status. */
    fields_of_is(v1, "kubectl", "Update", "{\"f:spec\":{\"f:replicas\":{}}}");
    json_t *v2 = do_update(&t, "controller", "status", v1,
                           "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":1},\"status\":"
                           "{\"replicas\":1,\"readyReplicas\":1}}",
                           T1);
    json_t *e = entry_of(v2, "controller", "Update");
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "subresource")), "status");
    expect_json(json_object_get(e, "fieldsV1"),
                "{\"f:status\":{\"f:replicas\":{},\"f:readyReplicas\":{}}}");
    json_decref(v1);
    json_decref(v2);
}

static void test_update_cap_managers(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *cur =
        do_update(&t, "m0", NULL, NULL, "{\"metadata\":{\"name\":\"c\"},\"data\":{\"k0\":\"v\"}}",
                  "2024-01-01T00:00:00Z");
    for (int i = 1; i <= 11; i++) {
        json_t *next = json_deep_copy(cur);
        json_object_del(json_object_get(next, "metadata"), "managedFields");
        char key[16], mgr[16], now[32];
        snprintf(key, sizeof key, "k%d", i);
        snprintf(mgr, sizeof mgr, "m%d", i);
        snprintf(now, sizeof now, "2024-01-01T00:00:%02dZ", i);
        json_object_set_new(json_object_get(next, "data"), key, json_string("v"));
        char *s = dump(next);
        json_t *out = do_update(&t, mgr, NULL, cur, s, now);
        free(s);
        json_decref(next);
        json_decref(cur);
        cur = out;
    }
    /* 12 updaters: the 3 oldest merged into one bucket -> 10 entries. */
    assert_int_equal(nentries(cur), 10);
    json_t *anc = entry_of(cur, "ancient-changes", "Update");
    assert_non_null(anc);
    expect_json(json_object_get(anc, "fieldsV1"),
                "{\"f:data\":{\".\":{},\"f:k0\":{},\"f:k1\":{},\"f:k2\":{}}}");
    assert_null(entry_of(cur, "m0", "Update"));
    assert_non_null(entry_of(cur, "m11", "Update"));
    json_decref(cur);
}

/* ---- apply -------------------------------------------------------------- */

#define CM_HEAD "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\"},"

static void test_apply_create_and_idempotent(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 = apply_ok(&t, "kubectl", false, NULL, CM_HEAD "\"data\":{\"a\":\"1\"}}", T0);
    assert_string_equal(json_string_value(ckube_json_get_path(v1, "data.a")), "1");
    expect_json(ckube_json_get_path(v1, "metadata.managedFields"),
                "[{\"manager\":\"kubectl\",\"operation\":\"Apply\",\"apiVersion\":\"v1\","
                "\"time\":\"" T0 "\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:data\":"
                "{\"f:a\":{}}}}]");
    /* Re-applying the same thing changes nothing, not even the time. */
    json_t *v2 = apply_ok(&t, "kubectl", false, v1, CM_HEAD "\"data\":{\"a\":\"1\"}}", T1);
    assert_true(ckube_patch_json_equal(v1, v2));
    json_decref(v1);
    json_decref(v2);
}

static void test_apply_conflict_and_force(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 = do_update(&t, "kubectl-client-side-apply", NULL, NULL,
                           CM_HEAD "\"data\":{\"key\":\"old\",\"other\":\"x\"}}", T0);
    ckube_status *st = NULL;
    json_t *none = do_apply(&t, "mgr", false, v1, CM_HEAD "\"data\":{\"key\":\"new\"}}", T1, &st);
    assert_null(none);
    assert_int_equal(st->code, 409);
    assert_string_equal(st->reason, "Conflict");
    assert_string_equal(st->message, "Apply failed with 1 conflict: conflict with "
                                     "\"kubectl-client-side-apply\" using v1: .data.key");
    assert_int_equal(st->ncauses, 1);
    assert_string_equal(st->causes[0].type, "FieldManagerConflict");
    assert_string_equal(st->causes[0].field, ".data.key");
    assert_string_equal(st->causes[0].message,
                        "conflict with \"kubectl-client-side-apply\" using v1");
    ckube_status_free(st);

    /* Two conflicts are listed per manager. */
    st = NULL;
    none = do_apply(&t, "mgr", false, v1, CM_HEAD "\"data\":{\"key\":\"new\",\"other\":\"y\"}}", T1,
                    &st);
    assert_null(none);
    assert_string_equal(st->message, "Apply failed with 2 conflicts: conflicts with "
                                     "\"kubectl-client-side-apply\" using v1:\n- .data.key\n"
                                     "- .data.other");
    assert_int_equal(st->ncauses, 2);
    ckube_status_free(st);

    /* The same value is no conflict: both own it. */
    json_t *v2 = apply_ok(&t, "mgr", false, v1, CM_HEAD "\"data\":{\"key\":\"old\"}}", T1);
    fields_of_is(v2, "mgr", "Apply", "{\"f:data\":{\"f:key\":{}}}");
    fields_of_is(v2, "kubectl-client-side-apply", "Update",
                 "{\"f:data\":{\".\":{},\"f:key\":{},\"f:other\":{}}}");

    /* Forced, the field moves to the applier. */
    json_t *v3 = apply_ok(&t, "mgr", true, v1, CM_HEAD "\"data\":{\"key\":\"new\"}}", T1);
    assert_string_equal(json_string_value(ckube_json_get_path(v3, "data.key")), "new");
    assert_string_equal(json_string_value(ckube_json_get_path(v3, "data.other")), "x");
    fields_of_is(v3, "mgr", "Apply", "{\"f:data\":{\"f:key\":{}}}");
    fields_of_is(v3, "kubectl-client-side-apply", "Update",
                 "{\"f:data\":{\".\":{},\"f:other\":{}}}");
    json_decref(v1);
    json_decref(v2);
    json_decref(v3);
}

static void test_apply_conflict_between_appliers(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 = apply_ok(&t, "a", false, NULL, CM_HEAD "\"data\":{\"k\":\"1\"}}", T0);
    ckube_status *st = NULL;
    assert_null(do_apply(&t, "b", false, v1, CM_HEAD "\"data\":{\"k\":\"2\"}}", T1, &st));
    /* An applier is named without "using". */
    assert_string_equal(st->message, "Apply failed with 1 conflict: conflict with \"a\": .data.k");
    ckube_status_free(st);
    json_decref(v1);
}

static void test_apply_removes_dropped_fields(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    json_t *v1 = apply_ok(&t, "a", false, NULL,
                          CM_HEAD "\"data\":{\"x\":\"1\",\"y\":\"2\",\"z\":\"3\"}}", T0);
    /* b shares z (same value). */
    json_t *v2 = apply_ok(&t, "b", false, v1, CM_HEAD "\"data\":{\"z\":\"3\"}}", T1);
    /* a drops y and z: y goes, z stays (b owns it). */
    json_t *v3 = apply_ok(&t, "a", false, v2, CM_HEAD "\"data\":{\"x\":\"1\"}}", T2);
    expect_json(json_object_get(v3, "data"), "{\"x\":\"1\",\"z\":\"3\"}");
    fields_of_is(v3, "a", "Apply", "{\"f:data\":{\"f:x\":{}}}");
    fields_of_is(v3, "b", "Apply", "{\"f:data\":{\"f:z\":{}}}");
    /* Unowned fields (set by nobody's apply) stay when an applier drops
     * everything. */
    json_t *v4 = apply_ok(&t, "a", false, v3, CM_HEAD "\"binaryData\":{}}", T2);
    expect_json(json_object_get(v4, "data"), "{\"z\":\"3\"}");
    assert_null(entry_of(v4, "a", "Apply"));
    json_decref(v1);
    json_decref(v2);
    json_decref(v3);
    json_decref(v4);
}

static void test_apply_lists(void **state)
{
    (void)state;
    fm_type t = widget_type();
#define W_HEAD                                                                                     \
    "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\"},"
    json_t *v1 = apply_ok(&t, "a", false, NULL,
                          W_HEAD "\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":80},{\"name\":"
                                 "\"https\",\"port\":443}],\"tags\":[\"x\"],\"args\":[\"1\",\"2\"],"
                                 "\"selector\":{\"a\":\"1\",\"b\":\"2\"}}}",
                          T0);
    /* b adds a port and a tag, merged by key and by value. */
    json_t *v2 = apply_ok(&t, "b", false, v1,
                          W_HEAD "\"spec\":{\"ports\":[{\"name\":\"metrics\",\"port\":9090}],"
                                 "\"tags\":[\"y\"]}}",
                          T1);
    expect_json(ckube_json_get_path(v2, "spec.ports"),
                "[{\"name\":\"http\",\"port\":80},{\"name\":\"https\",\"port\":443},"
                "{\"name\":\"metrics\",\"port\":9090}]");
    expect_json(ckube_json_get_path(v2, "spec.tags"), "[\"x\",\"y\"]");
    /* a drops https and one arg (atomic list replaced) and a selector key
     * (atomic map replaced). */
    json_t *v3 = apply_ok(&t, "a", false, v2,
                          W_HEAD "\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":8080}],"
                                 "\"tags\":[\"x\"],\"args\":[\"1\"],\"selector\":{\"a\":\"1\"}}}",
                          T2);
    expect_json(ckube_json_get_path(v3, "spec.ports"),
                "[{\"name\":\"http\",\"port\":8080},{\"name\":\"metrics\",\"port\":9090}]");
    expect_json(ckube_json_get_path(v3, "spec.args"), "[\"1\"]");
    expect_json(ckube_json_get_path(v3, "spec.selector"), "{\"a\":\"1\"}");
    expect_json(ckube_json_get_path(v3, "spec.tags"), "[\"x\",\"y\"]");
    /* b conflicts on a's port value. */
    ckube_status *st = NULL;
    assert_null(do_apply(&t, "b", false, v3,
                         W_HEAD "\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":1}]}}", T2, &st));
    assert_string_equal(st->causes[0].field, ".spec.ports[name=\"http\",proto=\"TCP\"].port");
    ckube_status_free(st);
    json_decref(v1);
    json_decref(v2);
    json_decref(v3);
}

static void test_apply_status_and_main(void **state)
{
    (void)state;
    fm_type t = widget_type();
    /* The main resource never owns status... */
    json_t *v1 = apply_ok(&t, "a", false, NULL,
                          W_HEAD "\"spec\":{\"size\":1},\"status\":{\"phase\":\"x\"}}", T0);
    fields_of_is(v1, "a", "Apply", "{\"f:spec\":{\"f:size\":{}}}");
    /* ...and /status owns only status. */
    json_t *cfg = J(W_HEAD "\"spec\":{\"size\":9},\"status\":{\"phase\":\"Ready\"}}");
    fm_op op = {.manager = "ctrl", .subresource = "status", .now = T1};
    fm_managed *m = NULL;
    ckube_status *st = NULL;
    json_t *v2 = fm_apply(&t, &op, v1, cfg, &m, &st);
    assert_non_null(v2);
    fm_managed_store(m, v2);
    json_t *e = entry_of(v2, "ctrl", "Apply");
    assert_string_equal(json_string_value(json_object_get(e, "subresource")), "status");
    expect_json(json_object_get(e, "fieldsV1"), "{\"f:status\":{\"f:phase\":{}}}");
    fm_managed_free(m);
    json_decref(cfg);
    json_decref(v1);
    json_decref(v2);
}

static void test_apply_before_first_apply(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    /* An object without managedFields: its fields go to before-first-apply. */
    json_t *live = J(CM_HEAD "\"data\":{\"a\":\"1\",\"b\":\"2\"}}");
    ckube_status *st = NULL;
    assert_null(do_apply(&t, "x", false, live, CM_HEAD "\"data\":{\"a\":\"2\"}}", T1, &st));
    assert_string_equal(st->message, "Apply failed with 1 conflict: conflict with "
                                     "\"before-first-apply\" using v1: .data.a");
    ckube_status_free(st);
    json_t *v = apply_ok(&t, "x", false, live, CM_HEAD "\"data\":{\"c\":\"3\"}}", T1);
    fields_of_is(v, "before-first-apply", "Update",
                 "{\"f:data\":{\".\":{},\"f:a\":{},\"f:b\":{}}}");
    json_decref(live);
    json_decref(v);
}

static void test_apply_kubectl_upgrades_client_side_apply(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    /* What client-side `kubectl apply` leaves behind. */
    json_t *v1 = do_update(
        &t, "kubectl-client-side-apply", NULL, NULL,
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
        "\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
        "\"{\\\"apiVersion\\\":\\\"v1\\\",\\\"data\\\":{\\\"a\\\":\\\"1\\\",\\\"b\\\":\\\"2\\\"},"
        "\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":{\\\"name\\\":\\\"c\\\"}}\\n\"}},"
        "\"data\":{\"a\":\"1\",\"b\":\"2\"}}",
        T0);
    /* Another manager still conflicts... */
    ckube_status *st = NULL;
    assert_null(do_apply(&t, "other", false, v1, CM_HEAD "\"data\":{\"a\":\"9\"}}", T1, &st));
    ckube_status_free(st);
    /* ...but kubectl takes over fields still as last applied, and the
     * annotation follows the new configuration. */
    json_t *v2 =
        apply_ok(&t, "kubectl", false, v1, CM_HEAD "\"data\":{\"a\":\"9\",\"b\":\"2\"}}", T1);
    assert_string_equal(json_string_value(ckube_json_get_path(v2, "data.a")), "9");
    fields_of_is(v2, "kubectl", "Apply", "{\"f:data\":{\"f:a\":{},\"f:b\":{}}}");
    const char *la =
        json_string_value(json_object_get(ckube_json_get_path(v2, "metadata.annotations"),
                                          "kubectl.kubernetes.io/last-applied-configuration"));
    assert_string_equal(la, "{\"apiVersion\":\"v1\",\"data\":{\"a\":\"9\",\"b\":\"2\"},\"kind\":"
                            "\"ConfigMap\",\"metadata\":{\"name\":\"c\"}}\n");
    /* A field changed since the last client-side apply is a real conflict. */
    json_t *v1b = json_deep_copy(v1);
    json_object_set_new(json_object_get(v1b, "data"), "b", json_string("changed"));
    st = NULL;
    assert_null(do_apply(&t, "kubectl", false, v1b, CM_HEAD "\"data\":{\"a\":\"9\",\"b\":\"3\"}}",
                         T1, &st));
    assert_string_equal(st->message, "Apply failed with 1 conflict: conflict with "
                                     "\"kubectl-client-side-apply\" using v1: .data.b");
    ckube_status_free(st);
    json_decref(v1);
    json_decref(v1b);
    json_decref(v2);
}

static void test_apply_bad_input(void **state)
{
    (void)state;
    fm_type t = configmap_type();
    ckube_status *st = NULL;
    assert_null(do_apply(
        &t, "m", false, NULL,
        "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"c\"}}", T0, &st));
    assert_int_equal(st->code, 400);
    assert_string_equal(st->message, "invalid object type: /v1, Kind=Secret");
    ckube_status_free(st);
    assert_null(do_apply(&t, "m", false, NULL, "{\"metadata\":{\"name\":\"c\"}}", T0, &st));
    assert_string_equal(st->message, "invalid object type: /, Kind=");
    ckube_status_free(st);
    fm_type d = deployment_type();
    assert_null(do_apply(&d, "m", false, NULL,
                         "{\"apiVersion\":\"v1\",\"kind\":\"Deployment\",\"metadata\":{}}", T0,
                         &st));
    assert_string_equal(st->message, "invalid object type: /v1, Kind=Deployment");
    ckube_status_free(st);
    assert_null(
        do_apply(&t, "m", false, NULL,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
                 "\"managedFields\":[]}}",
                 T0, &st));
    assert_int_equal(st->code, 400);
    assert_string_equal(st->message, "metadata.managedFields must be nil");
    ckube_status_free(st);
    assert_null(do_apply(&t, "m", false, NULL,
                         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":\"x\"}", T0,
                         &st));
    assert_string_equal(st->message, "metadata must be an object");
    ckube_status_free(st);
    assert_null(
        do_apply(&d, "m", false, NULL,
                 "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"spec\":{\"template\":"
                 "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"a\"}]}}}}",
                 T0, &st));
    assert_int_equal(st->code, 400);
    assert_non_null(strstr(st->message, "duplicate entries for key [name=\"a\"]"));
    ckube_status_free(st);
}

/* ---- options and helpers -------------------------------------------------- */

static void test_manager_validation(void **state)
{
    (void)state;
    assert_null(fm_validate_manager("kubectl", "PatchOptions", true));
    assert_null(fm_validate_manager(NULL, "CreateOptions", false));
    ckube_status *st = fm_validate_manager(NULL, "PatchOptions", true);
    assert_int_equal(st->code, 422);
    assert_string_equal(st->message, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                     "Required value: is required for apply patch");
    ckube_status_free(st);
    char longname[200];
    memset(longname, 'a', 129);
    longname[129] = 0;
    st = fm_validate_manager(longname, "CreateOptions", false);
    assert_int_equal(st->code, 422);
    assert_non_null(strstr(st->message, "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                        "Too long: may not be more than 128 bytes"));
    ckube_status_free(st);
    st = fm_validate_manager("a\x01"
                             "b",
                             "UpdateOptions", false);
    assert_string_equal(st->message, "UpdateOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                     "Invalid value: \"a\\x01b\": invalid character U+0001 (at "
                                     "position 1)");
    ckube_status_free(st);
}

static void test_manager_from_user_agent(void **state)
{
    (void)state;
    char *m = fm_manager_from_user_agent("kubectl/v1.27.3 (linux/amd64) kubernetes/25b4e43");
    assert_string_equal(m, "kubectl");
    free(m);
    m = fm_manager_from_user_agent("OpenAPI-Generator/22.6.0/python");
    assert_string_equal(m, "OpenAPI-Generator");
    free(m);
    m = fm_manager_from_user_agent("a\tb/x");
    assert_string_equal(m, "ab");
    free(m);
    m = fm_manager_from_user_agent(NULL);
    assert_string_equal(m, "");
    free(m);
    char longua[300];
    memset(longua, 'x', 299);
    longua[299] = 0;
    m = fm_manager_from_user_agent(longua);
    assert_int_equal(strlen(m), 128);
    free(m);
}

static void test_ignore_timestamp_only_changes(void **state)
{
    (void)state;
    json_t *old =
        J("{\"metadata\":{\"resourceVersion\":\"5\",\"managedFields\":[{\"manager\":\"a\","
          "\"time\":\"" T0 "\"}]},\"data\":{\"x\":\"1\"}}");
    json_t *same = J("{\"metadata\":{\"managedFields\":[{\"manager\":\"a\",\"time\":\"" T1 "\"}]},"
                     "\"data\":{\"x\":\"1\"}}");
    fm_ignore_timestamp_only_changes(old, same);
    expect_json(ckube_json_get_path(same, "metadata.managedFields"),
                "[{\"manager\":\"a\",\"time\":\"" T0 "\"}]");
    json_t *changed = J("{\"metadata\":{\"managedFields\":[{\"manager\":\"a\",\"time\":\"" T1
                        "\"}]},\"data\":{\"x\":\"2\"}}");
    fm_ignore_timestamp_only_changes(old, changed);
    expect_json(ckube_json_get_path(changed, "metadata.managedFields"),
                "[{\"manager\":\"a\",\"time\":\"" T1 "\"}]");
    json_decref(old);
    json_decref(same);
    json_decref(changed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fieldset_configmap),
        cmocka_unit_test(test_fieldset_deployment_keys),
        cmocka_unit_test(test_fieldset_custom_lists),
        cmocka_unit_test(test_fieldset_from_many_threads),
        cmocka_unit_test(test_fieldset_bad_lists),
        cmocka_unit_test(test_fields_roundtrip_and_errors),
        cmocka_unit_test(test_update_create_records_entry),
        cmocka_unit_test(test_update_create_deployment_skeleton),
        cmocka_unit_test(test_update_transfers_ownership),
        cmocka_unit_test(test_update_noop_keeps_managed_fields),
        cmocka_unit_test(test_update_managed_fields_from_request),
        cmocka_unit_test(test_update_status_subresource),
        cmocka_unit_test(test_update_cap_managers),
        cmocka_unit_test(test_apply_create_and_idempotent),
        cmocka_unit_test(test_apply_conflict_and_force),
        cmocka_unit_test(test_apply_conflict_between_appliers),
        cmocka_unit_test(test_apply_removes_dropped_fields),
        cmocka_unit_test(test_apply_lists),
        cmocka_unit_test(test_apply_status_and_main),
        cmocka_unit_test(test_apply_before_first_apply),
        cmocka_unit_test(test_apply_kubectl_upgrades_client_side_apply),
        cmocka_unit_test(test_apply_bad_input),
        cmocka_unit_test(test_manager_validation),
        cmocka_unit_test(test_manager_from_user_agent),
        cmocka_unit_test(test_ignore_timestamp_only_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
