/* The REST handlers (endpoints/handlers/handlers.c, list_stream.c) over
 * HTTP: a server runs in this process (util/inproc_server.h) for each
 * test and libcurl talks to it over loopback. Each reply is checked as a
 * client sees it: code, Content-Type, the object or the Status with
 * upstream's reason and wording. */
#include "util/inproc_server.h"

#include <inttypes.h>
#include <unistd.h>

#define CMS "/api/v1/namespaces/default/configmaps"
#define DEPLOYS "/apis/apps/v1/namespaces/default/deployments"

static int setup(void **state)
{
    ips *s = calloc(1, sizeof *s);
    if (!s || ips_start(s, 0) != 0) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

/* A server keeping 8 events per resource: old revisions expire fast. */
static int setup_small_ring(void **state)
{
    ips *s = calloc(1, sizeof *s);
    if (!s || ips_start(s, 8) != 0) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    ips *s = *state;
    ips_stop(s);
    free(s);
    return 0;
}

/* A ConfigMap's JSON; `labels` is a JSON object's members ("" for none). */
static char *cm_json(const char *name, const char *labels, const char *data)
{
    char *s;
    if (asprintf(&s,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
                 "\"labels\":{%s}},\"data\":{%s}}",
                 name, labels, data) < 0)
        return NULL;
    return s;
}

/* Creates a ConfigMap in namespace ns; returns the stored object. */
static json_t *create_cm(ips *s, const char *ns, const char *name, const char *labels,
                         const char *data)
{
    char *body = cm_json(name, labels, data);
    http_resp *r = HPOST(s, body, "/api/v1/namespaces/%s/configmaps", ns);
    free(body);
    assert_http(r, 201);
    json_t *obj = json_incref(r->json);
    resp_free(r);
    return obj;
}

static void create_namespace(ips *s, const char *name)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", name);
    http_resp *r = HPOST(s, body, "/api/v1/namespaces");
    assert_http(r, 201);
    resp_free(r);
}

static const char deployment_web[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},"
    "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":["
    "{\"name\":\"c\",\"image\":\"nginx:1\"},{\"name\":\"d\",\"image\":\"busybox:1\"}]}}}}";

static json_t *create_deployment(ips *s)
{
    http_resp *r = HPOST(s, deployment_web, DEPLOYS);
    assert_http(r, 201);
    json_t *obj = json_incref(r->json);
    resp_free(r);
    return obj;
}

/* ---- create, get, list ---------------------------------------------------- */

static void test_create_get_list(void **state)
{
    ips *s = *state;
    char *body = cm_json("cm1", "\"app\":\"demo\"", "\"k\":\"v\"");
    http_resp *r = HPOST(s, body, CMS);
    free(body);
    assert_http(r, 201);
    assert_header(r, "Content-Type", "application/json");
    assert_header(r, "Cache-Control", "no-cache, private");
    json_t *o = r->json;
    /* kind and apiVersion lead, as upstream serializes them */
    assert_true(r->body.len > 40);
    assert_memory_equal(r->body.p, "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",", 38);
    assert_string_equal(jstr(o, "metadata.name"), "cm1");
    assert_string_equal(jstr(o, "metadata.namespace"), "default");
    assert_string_equal(jstr(o, "metadata.labels.app"), "demo");
    assert_string_equal(jstr(o, "data.k"), "v");
    assert_int_equal(strlen(jstr(o, "metadata.uid")), 36);
    assert_true(strlen(jstr(o, "metadata.creationTimestamp")) == 20); /* 2026-01-02T03:04:05Z */
    char rv[32], uid[40];
    snprintf(rv, sizeof rv, "%s", jstr(o, "metadata.resourceVersion"));
    snprintf(uid, sizeof uid, "%s", jstr(o, "metadata.uid"));
    assert_true(atoll(rv) > 0);
    /* The field manager comes from the User-Agent's product part. */
    assert_string_equal(jstr(o, "metadata.managedFields[0].manager"), "ckube-unit-test");
    assert_string_equal(jstr(o, "metadata.managedFields[0].operation"), "Update");
    assert_string_equal(jstr(o, "metadata.managedFields[0].apiVersion"), "v1");
    resp_free(r);

    r = HGET(s, CMS "/cm1");
    assert_http(r, 200);
    assert_header(r, "Content-Type", "application/json");
    assert_string_equal(jstr(r->json, "metadata.resourceVersion"), rv);
    assert_string_equal(jstr(r->json, "metadata.uid"), uid);
    assert_string_equal(jstr(r->json, "data.k"), "v");
    resp_free(r);

    /* A second object; the namespace's list has both, in name order. */
    json_decref(create_cm(s, "default", "cm0", "", "\"a\":\"b\""));
    r = HGET(s, CMS);
    assert_http(r, 200);
    assert_header(r, "Content-Type", "application/json");
    assert_string_equal(jstr(r->json, "kind"), "ConfigMapList");
    assert_string_equal(jstr(r->json, "apiVersion"), "v1");
    assert_true(atoll(jstr(r->json, "metadata.resourceVersion")) > atoll(rv));
    assert_null(ckube_json_get_path(r->json, "metadata.continue"));
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    assert_string_equal(jstr(r->json, "items[0].metadata.name"), "cm0");
    assert_string_equal(jstr(r->json, "items[1].metadata.name"), "cm1");
    assert_string_equal(jstr(r->json, "items[1].metadata.resourceVersion"), rv);
    resp_free(r);

    /* Label selector on a list. */
    r = HGET(s, CMS "?labelSelector=app%%3Ddemo");
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 1);
    assert_string_equal(jstr(r->json, "items[0].metadata.name"), "cm1");
    resp_free(r);
    /* A field selector on a field configmaps do not have: 400. */
    r = HGET(s, CMS "?fieldSelector=spec.nodeName%%3Dx");
    assert_status(r, 400, "BadRequest", "field label not supported: spec.nodeName");
    resp_free(r);

    /* All namespaces: the bootstrap namespaces have none, so only ours. */
    r = HGET(s, "/api/v1/configmaps");
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    resp_free(r);
}

static void test_create_yaml(void **state)
{
    ips *s = *state;
    http_resp *r = http_call(s, "POST", "application/yaml",
                             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fromyaml\n"
                             "data:\n  k: v\n",
                             NULL, CMS);
    assert_http(r, 201);
    assert_string_equal(jstr(r->json, "metadata.name"), "fromyaml");
    assert_string_equal(jstr(r->json, "data.k"), "v");
    resp_free(r);
}

static void test_not_found(void **state)
{
    ips *s = *state;
    http_resp *r = HGET(s, CMS "/x");
    assert_status(r, 404, "NotFound", "configmaps \"x\" not found");
    assert_string_equal(jstr(r->json, "details.name"), "x");
    assert_string_equal(jstr(r->json, "details.kind"), "configmaps");
    assert_null(ckube_json_get_path(r->json, "details.group"));
    resp_free(r);
    /* A grouped resource names its group. */
    r = HGET(s, DEPLOYS "/x");
    assert_status(r, 404, "NotFound", "deployments.apps \"x\" not found");
    assert_string_equal(jstr(r->json, "details.group"), "apps");
    resp_free(r);
    /* Update, patch and delete of a missing object. */
    char *body = cm_json("x", "", "");
    r = HPUT(s, body, CMS "/x");
    free(body);
    assert_status(r, 404, "NotFound", "configmaps \"x\" not found");
    resp_free(r);
    r = HPATCH(s, "application/merge-patch+json", "{\"data\":{\"a\":\"b\"}}", CMS "/x");
    assert_status(r, 404, "NotFound", "configmaps \"x\" not found");
    resp_free(r);
    r = HDELETE(s, CMS "/x");
    assert_status(r, 404, "NotFound", "configmaps \"x\" not found");
    resp_free(r);
    /* An unknown resource, and a verb the resource does not take. */
    r = HGET(s, "/api/v1/namespaces/default/nosuchthings");
    assert_status(r, 404, "NotFound", "the server could not find the requested resource");
    resp_free(r);
    r = HPOST(s, "{}", CMS "/named");
    assert_status(r, 405, "MethodNotAllowed",
                  "the server does not allow this method on the requested resource");
    resp_free(r);
}

static void test_already_exists(void **state)
{
    ips *s = *state;
    json_decref(create_cm(s, "default", "dup", "", ""));
    char *body = cm_json("dup", "", "\"x\":\"y\"");
    http_resp *r = HPOST(s, body, CMS);
    free(body);
    assert_status(r, 409, "AlreadyExists", "configmaps \"dup\" already exists");
    assert_string_equal(jstr(r->json, "details.name"), "dup");
    assert_string_equal(jstr(r->json, "details.kind"), "configmaps");
    resp_free(r);
    /* The first object is untouched. */
    r = HGET(s, CMS "/dup");
    assert_http(r, 200);
    assert_null(ckube_json_get_path(r->json, "data"));
    resp_free(r);
}

/* ---- update --------------------------------------------------------------- */

static void test_update(void **state)
{
    ips *s = *state;
    json_t *obj = create_cm(s, "default", "u", "", "\"k\":\"v1\"");
    char rv1[32];
    snprintf(rv1, sizeof rv1, "%s", jstr(obj, "metadata.resourceVersion"));

    /* With the current resourceVersion. */
    json_object_set_new(json_object_get(obj, "data"), "k", json_string("v2"));
    char *body = json_dumps(obj, JSON_COMPACT);
    http_resp *r = HPUT(s, body, CMS "/u");
    free(body);
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.k"), "v2");
    assert_string_equal(jstr(r->json, "metadata.uid"), jstr(obj, "metadata.uid"));
    char rv2[32];
    snprintf(rv2, sizeof rv2, "%s", jstr(r->json, "metadata.resourceVersion"));
    assert_true(atoll(rv2) > atoll(rv1));
    resp_free(r);

    /* With the old one: a conflict, nothing written. */
    json_object_set_new(json_object_get(obj, "data"), "k", json_string("stale"));
    body = json_dumps(obj, JSON_COMPACT);
    r = HPUT(s, body, CMS "/u");
    free(body);
    assert_status(r, 409, "Conflict",
                  "Operation cannot be fulfilled on configmaps \"u\": the object has been "
                  "modified; please apply your changes to the latest version and try again");
    assert_string_equal(jstr(r->json, "details.name"), "u");
    assert_string_equal(jstr(r->json, "details.kind"), "configmaps");
    resp_free(r);
    r = HGET(s, CMS "/u");
    assert_string_equal(jstr(r->json, "data.k"), "v2");
    assert_string_equal(jstr(r->json, "metadata.resourceVersion"), rv2);
    resp_free(r);

    /* Without one: built-in types allow an unconditional update
     * (allow_unconditional_update in builtin_types.c). */
    json_object_del(json_object_get(obj, "metadata"), "resourceVersion");
    json_object_set_new(json_object_get(obj, "data"), "k", json_string("v3"));
    body = json_dumps(obj, JSON_COMPACT);
    r = HPUT(s, body, CMS "/u");
    free(body);
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.k"), "v3");
    assert_true(atoll(jstr(r->json, "metadata.resourceVersion")) > atoll(rv2));
    resp_free(r);

    /* The same object again: a no-op keeps the resourceVersion. */
    r = HGET(s, CMS "/u");
    char rv3[32];
    snprintf(rv3, sizeof rv3, "%s", jstr(r->json, "metadata.resourceVersion"));
    body = json_dumps(r->json, JSON_COMPACT);
    resp_free(r);
    r = HPUT(s, body, CMS "/u");
    free(body);
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "metadata.resourceVersion"), rv3);
    resp_free(r);

    /* The body must name the object of the URL. */
    body = cm_json("other", "", "");
    r = HPUT(s, body, CMS "/u");
    free(body);
    assert_status(r, 400, "BadRequest",
                  "the name of the object (other) does not match the name on the URL (u)");
    resp_free(r);
    /* and be of the URL's kind */
    r = HPUT(s, "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"u\"}}",
             CMS "/u");
    assert_status(r, 400, "BadRequest",
                  "the kind in the data (Secret) does not match the expected kind (ConfigMap)");
    resp_free(r);
    json_decref(obj);
}

/* A custom resource's type requires a resourceVersion on PUT (crd.c sets
 * allow_unconditional_update = false for them): 422. */
static void test_update_requires_rv_for_custom_resources(void **state)
{
    ips *s = *state;
    http_resp *r = HPOST(
        s,
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"widgets.unit.ckube.io\"},\"spec\":{\"group\":\"unit.ckube.io\","
        "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\","
        "\"kind\":\"Widget\"},\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
        "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{"
        "\"type\":\"object\",\"properties\":{\"size\":{\"type\":\"integer\"}}}}}}}]}}",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    assert_http(r, 201);
    resp_free(r);
    /* Served once the CRD's event reaches the registry. */
    const char *widgets = "/apis/unit.ckube.io/v1/namespaces/default/widgets";
    int64_t deadline = ips_now_ms() + 5000;
    long code = 0;
    while (ips_now_ms() < deadline) {
        r = HGET(s, "%s", widgets);
        code = r->code;
        resp_free(r);
        if (code == 200)
            break;
        usleep(20000);
    }
    assert_int_equal(code, 200);
    r = HPOST(s,
              "{\"apiVersion\":\"unit.ckube.io/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":"
              "\"good\"},\"spec\":{\"size\":1}}",
              "%s", widgets);
    assert_http(r, 201);
    assert_int_equal(jint(r->json, "metadata.generation"), 1);
    resp_free(r);
    r = http_call(s, "PUT", "application/json",
                  "{\"apiVersion\":\"unit.ckube.io/v1\",\"kind\":\"Widget\",\"metadata\":{"
                  "\"name\":\"good\"},\"spec\":{\"size\":5}}",
                  NULL, "%s/good", widgets);
    assert_status(r, 422, "Invalid",
                  "Widget.unit.ckube.io \"good\" is invalid: metadata.resourceVersion: Invalid "
                  "value: 0x0: must be specified for an update");
    assert_string_equal(jstr(r->json, "details.kind"), "Widget");
    assert_string_equal(jstr(r->json, "details.group"), "unit.ckube.io");
    assert_string_equal(jstr(r->json, "details.causes[0].reason"), "FieldValueInvalid");
    assert_string_equal(jstr(r->json, "details.causes[0].field"), "metadata.resourceVersion");
    resp_free(r);
    r = HGET(s, "%s/good", widgets);
    assert_int_equal(jint(r->json, "spec.size"), 1); /* nothing written */
    resp_free(r);
}

/* ---- patch ---------------------------------------------------------------- */

static void test_patch_merge_and_json(void **state)
{
    ips *s = *state;
    json_t *obj = create_cm(s, "default", "p", "", "\"a\":\"1\",\"b\":\"2\"");
    char rv1[32];
    snprintf(rv1, sizeof rv1, "%s", jstr(obj, "metadata.resourceVersion"));
    json_decref(obj);

    http_resp *r = HPATCH(s, "application/merge-patch+json",
                          "{\"data\":{\"a\":null,\"c\":\"3\"},\"metadata\":{\"labels\":{\"x\":"
                          "\"y\"}}}",
                          CMS "/p");
    assert_http(r, 200);
    assert_header(r, "Content-Type", "application/json");
    assert_null(ckube_json_get_path(r->json, "data.a"));
    assert_string_equal(jstr(r->json, "data.b"), "2");
    assert_string_equal(jstr(r->json, "data.c"), "3");
    assert_string_equal(jstr(r->json, "metadata.labels.x"), "y");
    assert_true(atoll(jstr(r->json, "metadata.resourceVersion")) > atoll(rv1));
    resp_free(r);

    r = HPATCH(s, "application/json-patch+json",
               "[{\"op\":\"test\",\"path\":\"/data/b\",\"value\":\"2\"},"
               "{\"op\":\"replace\",\"path\":\"/data/b\",\"value\":\"20\"},"
               "{\"op\":\"remove\",\"path\":\"/data/c\"}]",
               CMS "/p");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.b"), "20");
    assert_null(ckube_json_get_path(r->json, "data.c"));
    resp_free(r);

    /* A failing test operation: 422, nothing written. */
    r = HPATCH(s, "application/json-patch+json",
               "[{\"op\":\"test\",\"path\":\"/data/b\",\"value\":\"nope\"}]", CMS "/p");
    assert_status(r, 422, "Invalid", NULL);
    resp_free(r);
    /* A JSON patch that is not an array: 400. */
    r = HPATCH(s, "application/json-patch+json", "{}", CMS "/p");
    assert_status(r, 400, "BadRequest", "json patch must be an array of operations");
    resp_free(r);
    /* A patch naming a resourceVersion that is not current: 409. */
    r = HPATCH(s, "application/merge-patch+json",
               "{\"metadata\":{\"resourceVersion\":\"1\"},\"data\":{\"z\":\"z\"}}", CMS "/p");
    assert_status(r, 409, "Conflict", NULL);
    resp_free(r);
    /* A whole object is not a patch type. */
    r = HPATCH(s, "application/json", "{}", CMS "/p");
    assert_status(r, 415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media types "
                  "include: application/json-patch+json, application/merge-patch+json, "
                  "application/strategic-merge-patch+json, application/apply-patch+yaml");
    resp_free(r);
    /* force is for apply only. */
    r = HPATCH(s, "application/merge-patch+json", "{}", CMS "/p?force=true");
    assert_status(r, 422, "Invalid",
                  "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be "
                  "specified for non-apply patch");
    resp_free(r);

    r = HGET(s, CMS "/p");
    assert_string_equal(jstr(r->json, "data.b"), "20");
    assert_null(ckube_json_get_path(r->json, "data.z"));
    resp_free(r);
}

/* A strategic merge patch merges a Deployment's containers by name, where
 * a merge patch would replace the list. */
static void test_patch_strategic_deployment(void **state)
{
    ips *s = *state;
    json_t *d = create_deployment(s);
    assert_int_equal(jint(d, "metadata.generation"), 1);
    json_decref(d);
    http_resp *r = HPATCH(s, "application/strategic-merge-patch+json",
                          "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\","
                          "\"image\":\"nginx:2\"}]}}}}",
                          DEPLOYS "/web");
    assert_http(r, 200);
    json_t *cs = ckube_json_get_path(r->json, "spec.template.spec.containers");
    assert_int_equal(json_array_size(cs), 2);
    assert_string_equal(jstr(cs, "[0].name"), "c");
    assert_string_equal(jstr(cs, "[0].image"), "nginx:2");
    assert_string_equal(jstr(cs, "[1].name"), "d");
    assert_string_equal(jstr(cs, "[1].image"), "busybox:1");
    assert_int_equal(jint(r->json, "metadata.generation"), 2); /* the spec changed */
    resp_free(r);

    /* $patch: delete removes one entry by its key. */
    r = HPATCH(s, "application/strategic-merge-patch+json",
               "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"d\","
               "\"$patch\":\"delete\"}]}}}}",
               DEPLOYS "/web");
    assert_http(r, 200);
    cs = ckube_json_get_path(r->json, "spec.template.spec.containers");
    assert_int_equal(json_array_size(cs), 1);
    assert_string_equal(jstr(cs, "[0].name"), "c");
    resp_free(r);

    /* The same with a merge patch replaces the list. */
    r = HPATCH(s, "application/merge-patch+json",
               "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"e\","
               "\"image\":\"redis:7\"}]}}}}",
               DEPLOYS "/web");
    assert_http(r, 200);
    cs = ckube_json_get_path(r->json, "spec.template.spec.containers");
    assert_int_equal(json_array_size(cs), 1);
    assert_string_equal(jstr(cs, "[0].name"), "e");
    resp_free(r);

    /* A strategic merge patch on a ConfigMap merges maps. */
    json_decref(create_cm(s, "default", "smp", "", "\"a\":\"1\""));
    r = HPATCH(s, "application/strategic-merge-patch+json", "{\"data\":{\"b\":\"2\"}}", CMS "/smp");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.a"), "1");
    assert_string_equal(jstr(r->json, "data.b"), "2");
    resp_free(r);
}

static void test_server_side_apply(void **state)
{
    ips *s = *state;
    const char *apply = "application/apply-patch+yaml";
    /* An apply without a field manager: 422. */
    http_resp *r = HPATCH(s, apply,
                          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n"
                          "data:\n  k: v\n",
                          CMS "/ssa");
    assert_status(r, 422, "Invalid",
                  "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is "
                  "required for apply patch");
    resp_free(r);

    /* An apply to a missing object creates it: 201. */
    r = HPATCH(s, apply,
               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n"
               "data:\n  k: v\n  keep: x\n",
               CMS "/ssa?fieldManager=alice");
    assert_http(r, 201);
    assert_string_equal(jstr(r->json, "data.k"), "v");
    assert_string_equal(jstr(r->json, "metadata.managedFields[0].manager"), "alice");
    assert_string_equal(jstr(r->json, "metadata.managedFields[0].operation"), "Apply");
    assert_string_equal(jstr(r->json, "metadata.managedFields[0].fieldsType"), "FieldsV1");
    assert_non_null(ckube_json_get_path(r->json, "metadata.managedFields[0].fieldsV1.f:data.f:k"));
    assert_int_equal(json_array_size(ckube_json_get_path(r->json, "metadata.managedFields")), 1);
    resp_free(r);

    /* Another manager changing alice's field: a conflict. */
    r = HPATCH(s, apply,
               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: bob\n",
               CMS "/ssa?fieldManager=bob");
    assert_status(r, 409, "Conflict",
                  "Apply failed with 1 conflict: conflict with \"alice\": .data.k");
    assert_string_equal(jstr(r->json, "details.causes[0].reason"), "FieldManagerConflict");
    assert_string_equal(jstr(r->json, "details.causes[0].field"), ".data.k");
    resp_free(r);

    /* Forced, bob takes it over; alice keeps what bob does not apply. */
    r = HPATCH(s, apply,
               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: bob\n",
               CMS "/ssa?fieldManager=bob&force=true");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.k"), "bob");
    assert_string_equal(jstr(r->json, "data.keep"), "x");
    json_t *mf = ckube_json_get_path(r->json, "metadata.managedFields");
    assert_int_equal(json_array_size(mf), 2);
    bool alice_has_k = true, bob_has_k = false;
    for (size_t i = 0; i < json_array_size(mf); i++) {
        json_t *e = json_array_get(mf, i);
        bool has_k = ckube_json_get_path(e, "fieldsV1.f:data.f:k") != NULL;
        if (!strcmp(jstr(e, "manager"), "alice"))
            alice_has_k = has_k;
        else if (!strcmp(jstr(e, "manager"), "bob"))
            bob_has_k = has_k;
    }
    assert_false(alice_has_k);
    assert_true(bob_has_k);
    resp_free(r);

    /* alice applies without `keep`: she owned it alone, so it goes. */
    r = HPATCH(s, apply, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n",
               CMS "/ssa?fieldManager=alice");
    assert_http(r, 200);
    assert_null(ckube_json_get_path(r->json, "data.keep"));
    assert_string_equal(jstr(r->json, "data.k"), "bob");
    resp_free(r);

    /* An apply body that is not a mapping. */
    r = HPATCH(s, apply, "- a\n- b\n", CMS "/ssa?fieldManager=alice");
    assert_status(r, 400, "BadRequest",
                  "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: "
                  "cannot unmarshal array into Go value of type map[string]interface {}");
    resp_free(r);
}

/* ---- delete ----------------------------------------------------------------- */

static void test_delete(void **state)
{
    ips *s = *state;
    json_t *obj = create_cm(s, "default", "d", "", "");
    char uid[40];
    snprintf(uid, sizeof uid, "%s", jstr(obj, "metadata.uid"));
    json_decref(obj);
    http_resp *r = HDELETE(s, CMS "/d");
    assert_http(r, 200);
    assert_header(r, "Content-Type", "application/json");
    assert_string_equal(jstr(r->json, "kind"), "Status");
    assert_string_equal(jstr(r->json, "status"), "Success");
    assert_int_equal(jint(r->json, "code"), 200);
    assert_string_equal(jstr(r->json, "details.name"), "d");
    assert_string_equal(jstr(r->json, "details.kind"), "configmaps");
    assert_string_equal(jstr(r->json, "details.uid"), uid);
    resp_free(r);
    r = HGET(s, CMS "/d");
    assert_status(r, 404, "NotFound", "configmaps \"d\" not found");
    resp_free(r);
    r = HDELETE(s, CMS "/d");
    assert_status(r, 404, "NotFound", "configmaps \"d\" not found");
    resp_free(r);
    /* A bad propagationPolicy. */
    json_decref(create_cm(s, "default", "d2", "", ""));
    /* DeleteOptions in the body: a dry run keeps the object. */
    r = http_call(s, "DELETE", "application/json",
                  "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"dryRun\":[\"All\"]}", NULL,
                  CMS "/d2");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "status"), "Success");
    resp_free(r);
    r = HGET(s, CMS "/d2");
    assert_http(r, 200);
    resp_free(r);
    r = http_call(s, "DELETE", "application/json", "[]", NULL, CMS "/d2");
    assert_status(r, 400, "BadRequest", "DeleteOptions must be an object");
    resp_free(r);
    r = HDELETE(s, CMS "/d2?propagationPolicy=Sideways");
    assert_status(r, 400, "BadRequest", "invalid propagationPolicy Sideways");
    resp_free(r);
}

static void test_delete_preconditions(void **state)
{
    ips *s = *state;
    json_t *obj = create_cm(s, "default", "pre", "", "");
    char uid[40], rv[32];
    snprintf(uid, sizeof uid, "%s", jstr(obj, "metadata.uid"));
    snprintf(rv, sizeof rv, "%s", jstr(obj, "metadata.resourceVersion"));
    json_decref(obj);

    http_resp *r = http_call(s, "DELETE", "application/json",
                             "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\","
                             "\"preconditions\":{\"uid\":\"not-the-uid\"}}",
                             NULL, CMS "/pre");
    char want[256];
    snprintf(want, sizeof want,
             "Precondition failed: UID in precondition: not-the-uid, UID in object meta: %s", uid);
    assert_status(r, 409, "Conflict", want);
    assert_string_equal(jstr(r->json, "details.name"), "pre");
    resp_free(r);

    r = http_call(s, "DELETE", "application/json",
                  "{\"preconditions\":{\"resourceVersion\":\"1\"}}", NULL, CMS "/pre");
    snprintf(want, sizeof want,
             "Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object "
             "meta: %s",
             rv);
    assert_status(r, 409, "Conflict", want);
    resp_free(r);

    r = HGET(s, CMS "/pre");
    assert_http(r, 200); /* still there */
    resp_free(r);

    char body[256];
    snprintf(body, sizeof body, "{\"preconditions\":{\"uid\":\"%s\",\"resourceVersion\":\"%s\"}}",
             uid, rv);
    r = http_call(s, "DELETE", "application/json", body, NULL, CMS "/pre");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "status"), "Success");
    resp_free(r);
}

static void test_deletecollection(void **state)
{
    ips *s = *state;
    json_decref(create_cm(s, "default", "a1", "\"app\":\"x\"", ""));
    json_decref(create_cm(s, "default", "a2", "\"app\":\"x\"", ""));
    json_decref(create_cm(s, "default", "b1", "\"app\":\"y\"", ""));
    json_decref(create_cm(s, "default", "c1", "", ""));
    /* and one in another namespace that matches */
    create_namespace(s, "other");
    json_decref(create_cm(s, "other", "a3", "\"app\":\"x\"", ""));

    http_resp *r = HDELETE(s, CMS "?labelSelector=app%%3Dx");
    assert_http(r, 200);
    assert_header(r, "Content-Type", "application/json");
    assert_string_equal(jstr(r->json, "kind"), "ConfigMapList");
    assert_string_equal(jstr(r->json, "apiVersion"), "v1");
    json_t *items = json_object_get(r->json, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(jstr(items, "[0].metadata.name"), "a1");
    assert_string_equal(jstr(items, "[1].metadata.name"), "a2");
    resp_free(r);

    r = HGET(s, CMS);
    items = json_object_get(r->json, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(jstr(items, "[0].metadata.name"), "b1");
    assert_string_equal(jstr(items, "[1].metadata.name"), "c1");
    resp_free(r);
    r = HGET(s, "/api/v1/namespaces/other/configmaps/a3");
    assert_http(r, 200);
    resp_free(r);

    /* A dry run lists what it would delete and deletes nothing. */
    r = HDELETE(s, CMS "?dryRun=All");
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    resp_free(r);
    r = HGET(s, CMS);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    resp_free(r);

    /* Nothing matches: an empty list. */
    r = HDELETE(s, CMS "?labelSelector=app%%3Dnone");
    assert_http(r, 200);
    assert_true(json_is_array(json_object_get(r->json, "items")));
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 0);
    resp_free(r);
    /* A selector that does not parse: 400. */
    r = HDELETE(s, CMS "?labelSelector=%%3D%%3D");
    assert_http(r, 400);
    assert_string_equal(jstr(r->json, "reason"), "BadRequest");
    resp_free(r);
}

/* ---- request options ------------------------------------------------------ */

static void test_generate_name(void **state)
{
    ips *s = *state;
    const char *body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
                       "\"generateName\":\"gen-\"}}";
    http_resp *r = HPOST(s, body, CMS);
    assert_http(r, 201);
    const char *name = jstr(r->json, "metadata.name");
    assert_int_equal(strlen(name), 9); /* "gen-" and five characters */
    assert_memory_equal(name, "gen-", 4);
    assert_string_equal(jstr(r->json, "metadata.generateName"), "gen-");
    char first[64];
    snprintf(first, sizeof first, "%s", name);
    resp_free(r);
    r = HGET(s, CMS "/%s", first);
    assert_http(r, 200);
    resp_free(r);
    /* Another gets another name. */
    r = HPOST(s, body, CMS);
    assert_http(r, 201);
    assert_string_not_equal(jstr(r->json, "metadata.name"), first);
    resp_free(r);
    /* Neither a name nor generateName: 422. */
    r = HPOST(s, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{}}", CMS);
    assert_status(r, 422, "Invalid", NULL);
    assert_string_equal(jstr(r->json, "details.causes[0].field"), "metadata.name");
    resp_free(r);
}

static void test_dry_run(void **state)
{
    ips *s = *state;
    char *body = cm_json("dry", "", "\"k\":\"v\"");
    http_resp *r = HPOST(s, body, CMS "?dryRun=All");
    assert_http(r, 201);
    assert_string_equal(jstr(r->json, "metadata.name"), "dry");
    assert_string_equal(jstr(r->json, "data.k"), "v");
    assert_int_equal(strlen(jstr(r->json, "metadata.uid")), 36);
    resp_free(r);
    r = HGET(s, CMS "/dry");
    assert_status(r, 404, "NotFound", "configmaps \"dry\" not found");
    resp_free(r);
    r = HGET(s, CMS);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 0);
    resp_free(r);

    r = HPOST(s, body, CMS "?dryRun=Bogus");
    assert_status(r, 400, "BadRequest", "Invalid dry run value: Bogus, valid values are: All");
    resp_free(r);
    free(body);

    /* Update, patch and delete dry runs leave the stored object alone. */
    json_t *obj = create_cm(s, "default", "dry", "", "\"k\":\"v\"");
    char rv[32];
    snprintf(rv, sizeof rv, "%s", jstr(obj, "metadata.resourceVersion"));
    json_object_set_new(json_object_get(obj, "data"), "k", json_string("changed"));
    body = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    r = HPUT(s, body, CMS "/dry?dryRun=All");
    free(body);
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.k"), "changed");
    resp_free(r);
    r = HPATCH(s, "application/merge-patch+json", "{\"data\":{\"k\":\"patched\"}}",
               CMS "/dry?dryRun=All");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.k"), "patched");
    resp_free(r);
    r = HPATCH(s, "application/merge-patch+json", "{}", CMS "/dry?dryRun=x");
    assert_status(r, 400, "BadRequest", "Invalid dry run value: x, valid values are: All");
    resp_free(r);
    r = HDELETE(s, CMS "/dry?dryRun=All");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "status"), "Success");
    resp_free(r);
    r = HDELETE(s, CMS "/dry?dryRun=no");
    assert_status(r, 400, "BadRequest", "Invalid dry run value: no, valid values are: All");
    resp_free(r);
    r = HGET(s, CMS "/dry");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "data.k"), "v");
    assert_string_equal(jstr(r->json, "metadata.resourceVersion"), rv);
    resp_free(r);
}

static void test_field_validation(void **state)
{
    ips *s = *state;
    const char *body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                       "\"fv\"},\"data\":{\"k\":\"v\"},\"bogus\":1}";
    http_resp *r = HPOST(s, body, CMS "?fieldValidation=Bad");
    assert_status(r, 400, "BadRequest",
                  "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\"");
    resp_free(r);
    r = HPOST(s, body, CMS "?fieldValidation=Strict");
    assert_status(r, 400, "BadRequest",
                  "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding "
                  "error: unknown field \"bogus\"");
    resp_free(r);
    /* Warn (the default): stored without the field, with a Warning. */
    r = HPOST(s, body, CMS);
    assert_http(r, 201);
    assert_header(r, "Warning", "299 - \"unknown field \\\"bogus\\\"\"");
    assert_null(json_object_get(r->json, "bogus"));
    resp_free(r);
    /* Ignore: stored without the field, silently. */
    r = HDELETE(s, CMS "/fv");
    resp_free(r);
    r = HPOST(s, body, CMS "?fieldValidation=Ignore");
    assert_http(r, 201);
    char warning[256];
    assert_null(http_header(r, "Warning", warning, sizeof warning));
    assert_null(json_object_get(r->json, "bogus"));
    resp_free(r);
    /* Strict also refuses duplicate keys. */
    r = HPOST(s,
              "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"dupk\"},"
              "\"data\":{\"k\":\"1\",\"k\":\"2\"}}",
              CMS "?fieldValidation=Strict");
    assert_http(r, 400);
    assert_non_null(strstr(jstr(r->json, "message"), "strict decoding error: json: "));
    resp_free(r);
}

static void test_unsupported_media_type(void **state)
{
    ips *s = *state;
    char *body = cm_json("m", "", "");
    http_resp *r = http_call(s, "POST", "text/plain", body, NULL, CMS);
    assert_status(r, 415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media types "
                  "include: application/json, application/yaml, "
                  "application/vnd.kubernetes.protobuf");
    resp_free(r);
    r = http_call(s, "PUT", "application/merge-patch+json", body, NULL, CMS "/m");
    assert_int_equal(r->code, 415);
    resp_free(r);
    free(body);
    /* Nothing was created. */
    r = HGET(s, CMS "/m");
    assert_int_equal(r->code, 404);
    resp_free(r);
    /* An empty body and one that does not decode: 400. */
    r = HPOST(s, "", CMS);
    assert_status(r, 400, "BadRequest", "the body of the request was empty");
    resp_free(r);
    r = HPOST(s, "{\"kind\":", CMS);
    assert_http(r, 400);
    assert_memory_equal(jstr(r->json, "message"), "error decoding request body: ", 29);
    resp_free(r);
    /* An Accept nothing can satisfy: 406. */
    r = http_call(s, "GET", NULL, NULL, IPS_HEADERS("Accept: application/vnd.kubernetes.protobuf"),
                  CMS);
    assert_status(r, 406, "NotAcceptable",
                  "only the following media types are accepted: application/json");
    resp_free(r);
}

/* ---- pagination and large lists ------------------------------------------- */

static void test_list_pagination(void **state)
{
    ips *s = *state;
    create_namespace(s, "pg");
    const char *names[] = {"p0", "p1", "p2", "p3", "p4"};
    for (size_t i = 0; i < 5; i++)
        json_decref(create_cm(s, "pg", names[i], "", ""));

    http_resp *r = HGET(s, "/api/v1/namespaces/pg/configmaps?limit=2");
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    assert_string_equal(jstr(r->json, "items[0].metadata.name"), "p0");
    assert_string_equal(jstr(r->json, "items[1].metadata.name"), "p1");
    assert_int_equal(jint(r->json, "metadata.remainingItemCount"), 3);
    char rv[32], cont[512];
    snprintf(rv, sizeof rv, "%s", jstr(r->json, "metadata.resourceVersion"));
    snprintf(cont, sizeof cont, "%s", jstr(r->json, "metadata.continue"));
    assert_true(*cont);
    resp_free(r);

    /* Changes after the first page are not seen by the later ones: they
     * are served at the first page's revision. */
    json_decref(create_cm(s, "pg", "p2a", "", ""));
    r = HDELETE(s, "/api/v1/namespaces/pg/configmaps/p3");
    assert_http(r, 200);
    resp_free(r);

    char *esc = curl_easy_escape(s->curl, cont, 0);
    r = HGET(s, "/api/v1/namespaces/pg/configmaps?limit=2&continue=%s", esc);
    curl_free(esc);
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    assert_string_equal(jstr(r->json, "items[0].metadata.name"), "p2");
    assert_string_equal(jstr(r->json, "items[1].metadata.name"), "p3");
    assert_string_equal(jstr(r->json, "metadata.resourceVersion"), rv);
    assert_int_equal(jint(r->json, "metadata.remainingItemCount"), 1);
    snprintf(cont, sizeof cont, "%s", jstr(r->json, "metadata.continue"));
    assert_true(*cont);
    resp_free(r);

    esc = curl_easy_escape(s->curl, cont, 0);
    r = HGET(s, "/api/v1/namespaces/pg/configmaps?limit=2&continue=%s", esc);
    curl_free(esc);
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 1);
    assert_string_equal(jstr(r->json, "items[0].metadata.name"), "p4");
    assert_null(ckube_json_get_path(r->json, "metadata.continue"));
    assert_null(ckube_json_get_path(r->json, "metadata.remainingItemCount"));
    resp_free(r);

    /* A fresh list sees the changes. */
    r = HGET(s, "/api/v1/namespaces/pg/configmaps");
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 5);
    assert_string_equal(jstr(r->json, "items[2].metadata.name"), "p2");
    assert_string_equal(jstr(r->json, "items[3].metadata.name"), "p2a");
    assert_string_equal(jstr(r->json, "items[4].metadata.name"), "p4");
    resp_free(r);

    /* resourceVersion=0 is served whole from the cache, ignoring limit. */
    r = HGET(s, "/api/v1/namespaces/pg/configmaps?limit=2&resourceVersion=0");
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 5);
    assert_null(ckube_json_get_path(r->json, "metadata.continue"));
    resp_free(r);

    r = HGET(s, "/api/v1/namespaces/pg/configmaps?limit=2&continue=notatoken");
    assert_http(r, 400);
    assert_string_equal(jstr(r->json, "reason"), "BadRequest");
    assert_memory_equal(jstr(r->json, "message"), "continue key is not valid: ", 27);
    resp_free(r);
    r = HGET(s, "/api/v1/namespaces/pg/configmaps?limit=two");
    assert_status(r, 400, "BadRequest", "invalid limit \"two\"");
    resp_free(r);
    r = HGET(s, "/api/v1/namespaces/pg/configmaps?resourceVersion=abc");
    assert_status(r, 400, "BadRequest", "invalid resourceVersion \"abc\"");
    resp_free(r);
    r = HGET(s, "/api/v1/namespaces/pg/configmaps?resourceVersion=99999999");
    assert_http(r, 504);
    assert_string_equal(jstr(r->json, "reason"), "Timeout");
    assert_memory_equal(jstr(r->json, "message"), "Too large resource version: 99999999", 36);
    resp_free(r);
}

/* A continue token whose revision fell out of the event ring: 410 with
 * upstream's message and a token for an inconsistent continuation. */
static void test_list_continue_expired(void **state)
{
    ips *s = *state;
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "e%d", i);
        json_decref(create_cm(s, "default", name, "", ""));
    }
    http_resp *r = HGET(s, CMS "?limit=1");
    assert_http(r, 200);
    char rv[32], cont[512];
    snprintf(rv, sizeof rv, "%s", jstr(r->json, "metadata.resourceVersion"));
    snprintf(cont, sizeof cont, "%s", jstr(r->json, "metadata.continue"));
    resp_free(r);
    /* Exact reads at that revision work while it is in the ring. */
    r = HGET(s, CMS "?resourceVersion=%s&resourceVersionMatch=Exact", rv);
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 3);
    resp_free(r);
    /* Ten more events push it out of the ring of 8. */
    for (int i = 0; i < 10; i++) {
        char patch[64];
        snprintf(patch, sizeof patch, "{\"data\":{\"n\":\"%d\"}}", i);
        r = HPATCH(s, "application/merge-patch+json", patch, CMS "/e2");
        assert_http(r, 200);
        resp_free(r);
    }
    char *esc = curl_easy_escape(s->curl, cont, 0);
    r = HGET(s, CMS "?limit=1&continue=%s", esc);
    curl_free(esc);
    assert_status(r, 410, "Expired",
                  "The provided continue parameter is too old to display a consistent list "
                  "result. You can start a new list without the continue parameter, or use the "
                  "continue token in this response to retrieve the remainder of the results. "
                  "Continuing with the provided token results in an inconsistent list - objects "
                  "that were created, modified, or deleted between the time the first chunk was "
                  "returned and now may show up in the list.");
    snprintf(cont, sizeof cont, "%s", jstr(r->json, "metadata.continue"));
    assert_true(*cont);
    resp_free(r);
    /* That token continues after e0, at the current revision. */
    esc = curl_easy_escape(s->curl, cont, 0);
    r = HGET(s, CMS "?continue=%s", esc);
    curl_free(esc);
    assert_http(r, 200);
    assert_int_equal(json_array_size(json_object_get(r->json, "items")), 2);
    assert_string_equal(jstr(r->json, "items[0].metadata.name"), "e1");
    assert_string_equal(jstr(r->json, "items[1].data.n"), "9");
    resp_free(r);
    r = HGET(s, CMS "?resourceVersion=%s&resourceVersionMatch=Exact", rv);
    assert_http(r, 410);
    assert_string_equal(jstr(r->json, "reason"), "Expired");
    assert_memory_equal(jstr(r->json, "message"), "too old resource version: ", 26);
    resp_free(r);
}

/* Lists above 256 KiB are streamed in chunks (list_stream.c): the same
 * document, objects and Table alike. */
static void test_large_list_streamed(void **state)
{
    ips *s = *state;
    create_namespace(s, "big");
    size_t vlen = 100 * 1024;
    char *v = malloc(vlen + 1);
    memset(v, 'x', vlen);
    v[vlen] = 0;
    char *data;
    assert_true(asprintf(&data, "\"blob\":\"%s\"", v) > 0);
    free(v);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "big%d", i);
        json_decref(create_cm(s, "big", name, "", data));
    }
    free(data);
    http_resp *r = HGET(s, "/api/v1/namespaces/big/configmaps");
    assert_http(r, 200);
    assert_header(r, "Transfer-Encoding", "chunked");
    assert_header(r, "Content-Type", "application/json");
    assert_string_equal(jstr(r->json, "kind"), "ConfigMapList");
    json_t *items = json_object_get(r->json, "items");
    assert_int_equal(json_array_size(items), 4);
    for (size_t i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "big%zu", i);
        assert_string_equal(jstr(json_array_get(items, i), "metadata.name"), name);
        assert_int_equal(strlen(jstr(json_array_get(items, i), "data.blob")), vlen);
    }
    resp_free(r);
    r = http_call(s, "GET", NULL, NULL,
                  IPS_HEADERS("Accept: application/json;as=Table;v=v1;g=meta.k8s.io"),
                  "/api/v1/namespaces/big/configmaps?includeObject=Object");
    assert_http(r, 200);
    assert_header(r, "Transfer-Encoding", "chunked");
    assert_string_equal(jstr(r->json, "kind"), "Table");
    assert_int_equal(json_array_size(json_object_get(r->json, "rows")), 4);
    assert_string_equal(jstr(r->json, "rows[3].cells[0]"), "big3");
    assert_int_equal(strlen(jstr(r->json, "rows[3].object.data.blob")), vlen);
    resp_free(r);
    /* A small list is not chunked. */
    r = HGET(s, CMS);
    assert_http(r, 200);
    char hv[64] = "";
    assert_null(http_header(r, "Transfer-Encoding", hv, sizeof hv));
    assert_non_null(http_header(r, "Content-Length", hv, sizeof hv));
    assert_int_equal(atoll(hv), r->body.len);
    resp_free(r);
}

/* ---- subresources ----------------------------------------------------------- */

static void test_status_subresource(void **state)
{
    ips *s = *state;
    json_t *d = create_deployment(s);
    /* A create's status is reset to {}. */
    assert_true(json_is_object(json_object_get(d, "status")));
    assert_int_equal(json_object_size(json_object_get(d, "status")), 0);
    json_t *st = json_object_get(d, "status");
    json_object_set_new(st, "replicas", json_integer(2));
    json_object_set_new(st, "readyReplicas", json_integer(1));
    json_object_set_new(ckube_json_get_path(d, "spec"), "replicas", json_integer(7));
    char *body = json_dumps(d, JSON_COMPACT);
    http_resp *r = HPUT(s, body, DEPLOYS "/web/status");
    free(body);
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "kind"), "Deployment");
    assert_int_equal(jint(r->json, "status.replicas"), 2);
    assert_int_equal(jint(r->json, "status.readyReplicas"), 1);
    assert_int_equal(jint(r->json, "spec.replicas"), 2); /* spec kept */
    assert_int_equal(jint(r->json, "metadata.generation"), 1);
    assert_string_equal(jstr(r->json, "metadata.managedFields[1].subresource"), "status");
    resp_free(r);

    /* The main resource ignores status. */
    r = HPATCH(s, "application/merge-patch+json",
               "{\"status\":{\"replicas\":9},\"spec\":{\"replicas\":3}}", DEPLOYS "/web");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "status.replicas"), 2);
    assert_int_equal(jint(r->json, "spec.replicas"), 3);
    assert_int_equal(jint(r->json, "metadata.generation"), 2);
    resp_free(r);

    /* A status patch. */
    r = HPATCH(s, "application/merge-patch+json",
               "{\"status\":{\"readyReplicas\":2},\"spec\":{\"replicas\":4}}",
               DEPLOYS "/web/status");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "status.readyReplicas"), 2);
    assert_int_equal(jint(r->json, "spec.replicas"), 3);
    resp_free(r);
    r = HGET(s, DEPLOYS "/web/status");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "status.readyReplicas"), 2);
    resp_free(r);

    /* ConfigMaps have no status subresource. */
    json_decref(create_cm(s, "default", "nostatus", "", ""));
    r = HGET(s, CMS "/nostatus/status");
    assert_status(r, 404, "NotFound", "the server could not find the requested resource");
    resp_free(r);
    json_decref(d);
}

static void test_scale_subresource(void **state)
{
    ips *s = *state;
    json_t *d = create_deployment(s);
    char uid[40];
    snprintf(uid, sizeof uid, "%s", jstr(d, "metadata.uid"));
    json_decref(d);

    http_resp *r = HGET(s, DEPLOYS "/web/scale");
    assert_http(r, 200);
    assert_header(r, "Content-Type", "application/json");
    assert_string_equal(jstr(r->json, "kind"), "Scale");
    assert_string_equal(jstr(r->json, "apiVersion"), "autoscaling/v1");
    assert_string_equal(jstr(r->json, "metadata.name"), "web");
    assert_string_equal(jstr(r->json, "metadata.namespace"), "default");
    assert_string_equal(jstr(r->json, "metadata.uid"), uid);
    assert_int_equal(jint(r->json, "spec.replicas"), 2);
    assert_int_equal(jint(r->json, "status.replicas"), 0);
    char rv[32];
    snprintf(rv, sizeof rv, "%s", jstr(r->json, "metadata.resourceVersion"));
    resp_free(r);

    r = HPUT(s,
             "{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":"
             "\"web\",\"namespace\":\"default\"},\"spec\":{\"replicas\":5}}",
             DEPLOYS "/web/scale");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "kind"), "Scale");
    assert_int_equal(jint(r->json, "spec.replicas"), 5);
    assert_true(atoll(jstr(r->json, "metadata.resourceVersion")) > atoll(rv));
    resp_free(r);
    r = HGET(s, DEPLOYS "/web");
    assert_int_equal(jint(r->json, "spec.replicas"), 5);
    assert_int_equal(jint(r->json, "metadata.generation"), 2);
    assert_string_equal(jstr(r->json, "spec.template.spec.containers[1].name"), "d");
    resp_free(r);

    /* A stale resourceVersion in the Scale: 409. */
    char body[512];
    snprintf(body, sizeof body,
             "{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":"
             "\"web\",\"resourceVersion\":\"%s\"},\"spec\":{\"replicas\":1}}",
             rv);
    r = HPUT(s, body, DEPLOYS "/web/scale");
    assert_status(r, 409, "Conflict",
                  "Operation cannot be fulfilled on deployments.apps \"web\": the object has been "
                  "modified; please apply your changes to the latest version and try again");
    resp_free(r);
    /* Negative replicas: 422. */
    r = HPUT(s, "{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"spec\":{\"replicas\":-1}}",
             DEPLOYS "/web/scale");
    assert_status(r, 422, "Invalid",
                  "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must "
                  "be greater than or equal to 0");
    resp_free(r);
    /* A merge patch of the Scale. */
    r = HPATCH(s, "application/merge-patch+json", "{\"spec\":{\"replicas\":3}}",
               DEPLOYS "/web/scale");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "spec.replicas"), 3);
    resp_free(r);
    /* Of a missing object: 404; of a type without one: 404. */
    r = HGET(s, DEPLOYS "/nope/scale");
    assert_status(r, 404, "NotFound", "deployments.apps \"nope\" not found");
    resp_free(r);
    r = HGET(s, CMS "/nope/scale");
    assert_status(r, 404, "NotFound", "the server could not find the requested resource");
    resp_free(r);
}

/* ---- Table ---------------------------------------------------------------- */

static void test_table(void **state)
{
    ips *s = *state;
    json_decref(create_cm(s, "default", "t1", "", "\"a\":\"1\",\"b\":\"2\""));
    json_decref(create_cm(s, "default", "t2", "", ""));
    const char *const *accept = IPS_HEADERS("Accept: application/json;as=Table;v=v1;g=meta.k8s.io");
    http_resp *r = http_call(s, "GET", NULL, NULL, accept, CMS);
    assert_http(r, 200);
    /* (Upstream labels a Table "application/json;as=Table;v=v1;g=meta.k8s.io";
     * ckube's get and list say application/json.) */
    char ct[256] = "";
    assert_non_null(http_header(r, "Content-Type", ct, sizeof ct));
    assert_memory_equal(ct, "application/json", 16);
    assert_string_equal(jstr(r->json, "kind"), "Table");
    assert_string_equal(jstr(r->json, "apiVersion"), "meta.k8s.io/v1");
    assert_true(atoll(jstr(r->json, "metadata.resourceVersion")) > 0);
    json_t *cols = json_object_get(r->json, "columnDefinitions");
    assert_int_equal(json_array_size(cols), 3);
    assert_string_equal(jstr(cols, "[0].name"), "Name");
    assert_string_equal(jstr(cols, "[0].format"), "name");
    assert_string_equal(jstr(cols, "[1].name"), "Data");
    assert_string_equal(jstr(cols, "[2].name"), "Age");
    json_t *rows = json_object_get(r->json, "rows");
    assert_int_equal(json_array_size(rows), 2);
    assert_string_equal(jstr(rows, "[0].cells[0]"), "t1");
    assert_int_equal(jint(rows, "[0].cells[1]"), 2);
    assert_string_equal(jstr(rows, "[1].cells[0]"), "t2");
    assert_int_equal(jint(rows, "[1].cells[1]"), 0);
    /* includeObject defaults to Metadata */
    assert_string_equal(jstr(rows, "[0].object.kind"), "PartialObjectMetadata");
    assert_string_equal(jstr(rows, "[0].object.apiVersion"), "meta.k8s.io/v1");
    assert_string_equal(jstr(rows, "[0].object.metadata.name"), "t1");
    assert_null(ckube_json_get_path(rows, "[0].object.metadata.managedFields"));
    assert_null(ckube_json_get_path(rows, "[0].object.data"));
    resp_free(r);

    /* One object: one row; includeObject=None leaves the object out. */
    r = http_call(s, "GET", NULL, NULL, accept, CMS "/t1?includeObject=None");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "kind"), "Table");
    assert_int_equal(json_array_size(json_object_get(r->json, "rows")), 1);
    assert_string_equal(jstr(r->json, "rows[0].cells[0]"), "t1");
    assert_null(ckube_json_get_path(r->json, "rows[0].object"));
    resp_free(r);

    /* A Table from another group is not offered: with nothing else
     * acceptable, 406; with a fallback, plain JSON. */
    r = http_call(s, "GET", NULL, NULL,
                  IPS_HEADERS("Accept: application/json;as=Table;v=v1;g=example.com"), CMS);
    assert_int_equal(r->code, 406);
    resp_free(r);
    r = http_call(
        s, "GET", NULL, NULL,
        IPS_HEADERS("Accept: application/json;as=Table;v=v1;g=example.com, application/json"), CMS);
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "kind"), "ConfigMapList");
    resp_free(r);
}

/* ---- namespaces --------------------------------------------------------------- */

static void test_create_in_missing_namespace(void **state)
{
    ips *s = *state;
    char *body = cm_json("c", "", "");
    http_resp *r = HPOST(s, body, "/api/v1/namespaces/nope/configmaps");
    free(body);
    assert_status(r, 404, "NotFound", "namespaces \"nope\" not found");
    assert_string_equal(jstr(r->json, "details.name"), "nope");
    assert_string_equal(jstr(r->json, "details.kind"), "namespaces");
    resp_free(r);
    /* A namespace in the body that is not the URL's: 400. */
    r = HPOST(s,
              "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
              "\"namespace\":\"kube-system\"}}",
              CMS);
    assert_status(r, 400, "BadRequest",
                  "the namespace of the provided object does not match the namespace sent on the "
                  "request");
    resp_free(r);
}

static void test_create_in_terminating_namespace(void **state)
{
    ips *s = *state;
    create_namespace(s, "t1");
    http_resp *r = HGET(s, "/api/v1/namespaces/t1");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "spec.finalizers[0]"), "kubernetes");
    assert_string_equal(jstr(r->json, "status.phase"), "Active");
    resp_free(r);
    json_decref(create_cm(s, "t1", "before", "", ""));

    /* With its finalizer and no namespace controller, the delete only
     * marks it: it stays Terminating. */
    r = HDELETE(s, "/api/v1/namespaces/t1");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "kind"), "Namespace");
    assert_string_equal(jstr(r->json, "status.phase"), "Terminating");
    assert_true(*jstr(r->json, "metadata.deletionTimestamp"));
    resp_free(r);
    r = HGET(s, "/api/v1/namespaces/t1");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "status.phase"), "Terminating");
    resp_free(r);

    char *body = cm_json("c", "", "");
    r = HPOST(s, body, "/api/v1/namespaces/t1/configmaps");
    free(body);
    assert_status(r, 403, "Forbidden",
                  "configmaps \"c\" is forbidden: unable to create new content in namespace t1 "
                  "because it is being terminated");
    assert_string_equal(jstr(r->json, "details.name"), "c");
    assert_string_equal(jstr(r->json, "details.kind"), "configmaps");
    resp_free(r);
    /* Objects already there can still be changed and deleted. */
    r = HPATCH(s, "application/merge-patch+json", "{\"data\":{\"k\":\"v\"}}",
               "/api/v1/namespaces/t1/configmaps/before");
    assert_http(r, 200);
    resp_free(r);
    r = HDELETE(s, "/api/v1/namespaces/t1/configmaps/before");
    assert_http(r, 200);
    resp_free(r);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_create_get_list),
        T(test_create_yaml),
        T(test_not_found),
        T(test_already_exists),
        T(test_update),
        T(test_update_requires_rv_for_custom_resources),
        T(test_patch_merge_and_json),
        T(test_patch_strategic_deployment),
        T(test_server_side_apply),
        T(test_delete),
        T(test_delete_preconditions),
        T(test_deletecollection),
        T(test_generate_name),
        T(test_dry_run),
        T(test_field_validation),
        T(test_unsupported_media_type),
        T(test_list_pagination),
        cmocka_unit_test_setup_teardown(test_list_continue_expired, setup_small_ring, teardown),
        T(test_large_list_streamed),
        T(test_status_subresource),
        T(test_scale_subresource),
        T(test_table),
        T(test_create_in_missing_namespace),
        T(test_create_in_terminating_namespace),
    };
#undef T
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
