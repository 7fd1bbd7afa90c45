/* Audit events (apiserver/audit/event.h): golden lines as kube-apiserver's
 * log backend writes them (encoding/json of audit.k8s.io/v1 Event), the
 * legacy format, managedFields left out, audit IDs and source IPs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "apiserver/audit/event.h"

/* 2026-11-27T09:00:00Z */
#define T0 1795770000

static const char *const alice_groups[] = {"dev", "system:authenticated"};
static const char *const ips[] = {"10.0.0.1"};

static json_t *js(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad JSON in the test: %s", e.text);
    return v;
}

static void expect_line(const audit_event *e, const char *want)
{
    size_t len = 0;
    char *got = audit_event_encode(e, &len);
    assert_int_equal(len, strlen(got));
    if (strcmp(got, want))
        fail_msg("line\n  got:  %s\n  want: %s", got, want);
    free(got);
}

/* A get of a pod by alice, allowed by RBAC. */
static audit_event get_pod(const audit_object_ref *ref, const audit_response_status *st,
                           const audit_annotation *ann, size_t nann)
{
    return (audit_event){
        .level = AUDIT_LEVEL_METADATA,
        .audit_id = "6a0f3c2e-5b1d-4c8e-9f7a-2d4b6e8a0c1f",
        .stage = AUDIT_STAGE_RESPONSE_COMPLETE,
        .request_uri = "/api/v1/namespaces/default/pods/web?timeout=32s",
        .verb = "get",
        .user = {.username = "alice", .groups = alice_groups, .ngroups = 2},
        .source_ips = ips,
        .nsource_ips = 1,
        .user_agent = "kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef0",
        .object_ref = ref,
        .response_status = st,
        .request_received = {T0, 123456789},
        .stage_timestamp = {T0, 125000000},
        .annotations = ann,
        .nannotations = nann,
    };
}

static void test_metadata_level(void **state)
{
    (void)state;
    audit_object_ref ref = {
        .resource = "pods", .namespace_ = "default", .name = "web", .api_version = "v1"};
    audit_response_status st = {.code = 200};
    audit_annotation ann[] = {
        {AUDIT_ANNOTATION_REASON, "RBAC: allowed by ClusterRoleBinding \"admins\" of ClusterRole "
                                  "\"cluster-admin\" to Group \"dev\""},
        {AUDIT_ANNOTATION_DECISION, AUDIT_DECISION_ALLOW},
    };
    audit_event e = get_pod(&ref, &st, ann, 2);
    /* objects are not recorded at Metadata */
    json_t *obj = js("{\"kind\":\"Pod\"}");
    e.request_object = obj;
    e.response_object = obj;
    expect_line(&e, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"Metadata\","
                    "\"auditID\":\"6a0f3c2e-5b1d-4c8e-9f7a-2d4b6e8a0c1f\",\"stage\":"
                    "\"ResponseComplete\",\"requestURI\":\"/api/v1/namespaces/default/pods/"
                    "web?timeout=32s\",\"verb\":\"get\",\"user\":{\"username\":\"alice\","
                    "\"groups\":[\"dev\",\"system:authenticated\"]},\"sourceIPs\":[\"10.0.0.1\"],"
                    "\"userAgent\":\"kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef0\","
                    "\"objectRef\":{\"resource\":\"pods\",\"namespace\":\"default\",\"name\":"
                    "\"web\",\"apiVersion\":\"v1\"},\"responseStatus\":{\"metadata\":{},"
                    "\"code\":200},\"requestReceivedTimestamp\":\"2026-11-27T09:00:00.123456Z\","
                    "\"stageTimestamp\":\"2026-11-27T09:00:00.125000Z\",\"annotations\":{"
                    "\"authorization.k8s.io/decision\":\"allow\",\"authorization.k8s.io/"
                    "reason\":\"RBAC: allowed by ClusterRoleBinding \\\"admins\\\" of ClusterRole "
                    "\\\"cluster-admin\\\" to Group \\\"dev\\\"\"}}\n");
    /* RequestReceived: no status yet, both timestamps the same */
    e.stage = AUDIT_STAGE_REQUEST_RECEIVED;
    e.response_status = NULL;
    e.stage_timestamp = e.request_received;
    e.nannotations = 0;
    e.nsource_ips = 0;
    e.user_agent = NULL;
    expect_line(&e, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"Metadata\","
                    "\"auditID\":\"6a0f3c2e-5b1d-4c8e-9f7a-2d4b6e8a0c1f\",\"stage\":"
                    "\"RequestReceived\",\"requestURI\":\"/api/v1/namespaces/default/pods/"
                    "web?timeout=32s\",\"verb\":\"get\",\"user\":{\"username\":\"alice\","
                    "\"groups\":[\"dev\",\"system:authenticated\"]},\"objectRef\":{\"resource\":"
                    "\"pods\",\"namespace\":\"default\",\"name\":\"web\",\"apiVersion\":\"v1\"},"
                    "\"requestReceivedTimestamp\":\"2026-11-27T09:00:00.123456Z\","
                    "\"stageTimestamp\":\"2026-11-27T09:00:00.123456Z\"}\n");
    json_decref(obj);
}

static void test_request_level(void **state)
{
    (void)state;
    audit_object_ref ref = {.resource = "configmaps",
                            .namespace_ = "default",
                            .name = "settings",
                            .api_group = "",
                            .api_version = "v1"};
    audit_response_status st = {.code = 201};
    audit_event e = get_pod(&ref, &st, NULL, 0);
    e.level = AUDIT_LEVEL_REQUEST;
    e.verb = "create";
    e.request_uri = "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-client-side-apply"
                    "&fieldValidation=Strict";
    e.omit_managed_fields = true;
    json_t *req = js("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
                     "\"settings\",\"namespace\":\"default\",\"managedFields\":[{\"manager\":"
                     "\"kubectl\"}]},\"data\":{\"page\":\"<b>Tom & Jerry</b>\",\"n\":\"1\"}}");
    json_t *resp = js("{\"kind\":\"ConfigMap\"}");
    e.request_object = req;
    e.response_object = resp; /* not at Request */
    expect_line(&e,
                "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"Request\","
                "\"auditID\":\"6a0f3c2e-5b1d-4c8e-9f7a-2d4b6e8a0c1f\",\"stage\":"
                "\"ResponseComplete\",\"requestURI\":\"/api/v1/namespaces/default/"
                "configmaps?fieldManager=kubectl-client-side-apply\\u0026fieldValidation=Strict\","
                "\"verb\":\"create\",\"user\":{\"username\":\"alice\",\"groups\":[\"dev\","
                "\"system:authenticated\"]},\"sourceIPs\":[\"10.0.0.1\"],\"userAgent\":"
                "\"kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef0\",\"objectRef\":{"
                "\"resource\":\"configmaps\",\"namespace\":\"default\",\"name\":\"settings\","
                "\"apiVersion\":\"v1\"},\"responseStatus\":{\"metadata\":{},\"code\":201},"
                "\"requestObject\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{"
                "\"name\":\"settings\",\"namespace\":\"default\"},\"data\":{\"page\":"
                "\"\\u003cb\\u003eTom \\u0026 Jerry\\u003c/b\\u003e\",\"n\":\"1\"}},"
                "\"requestReceivedTimestamp\":\"2026-11-27T09:00:00.123456Z\","
                "\"stageTimestamp\":\"2026-11-27T09:00:00.125000Z\"}\n");
    /* the tree itself is untouched */
    assert_non_null(json_object_get(json_object_get(req, "metadata"), "managedFields"));
    json_decref(req);
    json_decref(resp);
}

static void test_request_response_level(void **state)
{
    (void)state;
    audit_object_ref ref = {.resource = "deployments",
                            .namespace_ = "default",
                            .name = "web",
                            .uid = "0a1b2c3d-0000-4000-8000-000000000001",
                            .api_group = "apps",
                            .api_version = "v1",
                            .resource_version = "4211",
                            .subresource = "scale"};
    audit_response_status st = {.code = 200};
    audit_event e = get_pod(&ref, &st, NULL, 0);
    e.level = AUDIT_LEVEL_REQUEST_RESPONSE;
    e.verb = "patch";
    e.request_uri = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    json_t *patch = js("{\"spec\":{\"replicas\":3}}");
    json_t *resp = js("{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{"
                      "\"name\":\"web\",\"managedFields\":[]},\"spec\":{\"replicas\":3},"
                      "\"x\":[1.5,2.0,1e21,1e20,0.000001,1e-7,-0.25,0.1,123456789.125,-0.0]}");
    e.request_object = patch;
    e.response_object = resp;
    expect_line(&e, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":"
                    "\"RequestResponse\",\"auditID\":\"6a0f3c2e-5b1d-4c8e-9f7a-2d4b6e8a0c1f\","
                    "\"stage\":\"ResponseComplete\",\"requestURI\":\"/apis/apps/v1/namespaces/"
                    "default/deployments/web/scale\",\"verb\":\"patch\",\"user\":{\"username\":"
                    "\"alice\",\"groups\":[\"dev\",\"system:authenticated\"]},\"sourceIPs\":["
                    "\"10.0.0.1\"],\"userAgent\":\"kubectl/v1.31.0 (linux/amd64) kubernetes/"
                    "abcdef0\",\"objectRef\":{\"resource\":\"deployments\",\"namespace\":"
                    "\"default\",\"name\":\"web\",\"uid\":\"0a1b2c3d-0000-4000-8000-000000000001\","
                    "\"apiGroup\":\"apps\",\"apiVersion\":\"v1\",\"resourceVersion\":\"4211\","
                    "\"subresource\":\"scale\"},\"responseStatus\":{\"metadata\":{},\"code\":200},"
                    "\"requestObject\":{\"spec\":{\"replicas\":3}},\"responseObject\":{\"kind\":"
                    "\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":\"web\","
                    "\"managedFields\":[]},\"spec\":{\"replicas\":3},\"x\":[1.5,2,1e+21,"
                    "100000000000000000000,0.000001,1e-7,-0.25,0.1,123456789.125,-0]},"
                    "\"requestReceivedTimestamp\":\"2026-11-27T09:00:00.123456Z\","
                    "\"stageTimestamp\":\"2026-11-27T09:00:00.125000Z\"}\n");
    json_decref(patch);
    json_decref(resp);
}

/* A request the authorizer refused: the Status reply recorded whole. */
static void test_forbidden(void **state)
{
    (void)state;
    static const char *const bob_groups[] = {"system:authenticated"};
    audit_object_ref ref = {.resource = "pods", .namespace_ = "default", .api_version = "v1"};
    json_t *details = js("{\"kind\":\"pods\"}");
    audit_response_status st = {
        .code = 403,
        .status = "Failure",
        .message = "pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group "
                   "\"\" in the namespace \"default\"",
        .reason = "Forbidden",
        .details = details,
    };
    audit_annotation ann[] = {
        {AUDIT_ANNOTATION_DECISION, AUDIT_DECISION_FORBID},
        {AUDIT_ANNOTATION_REASON, ""},
    };
    audit_event e = {
        .level = AUDIT_LEVEL_METADATA,
        .audit_id = "1d2f5a7c-3e4b-4a6d-8c9e-0f1a2b3c4d5e",
        .stage = AUDIT_STAGE_RESPONSE_COMPLETE,
        .request_uri = "/api/v1/namespaces/default/pods?limit=500",
        .verb = "list",
        .user = {.username = "bob", .groups = bob_groups, .ngroups = 1},
        .source_ips = ips,
        .nsource_ips = 1,
        .user_agent = "kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef0",
        .object_ref = &ref,
        .response_status = &st,
        .request_received = {T0, 500000000},
        .stage_timestamp = {T0, 501234999},
        .annotations = ann,
        .nannotations = 2,
    };
    expect_line(&e,
                "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"Metadata\","
                "\"auditID\":\"1d2f5a7c-3e4b-4a6d-8c9e-0f1a2b3c4d5e\",\"stage\":"
                "\"ResponseComplete\",\"requestURI\":\"/api/v1/namespaces/default/"
                "pods?limit=500\",\"verb\":\"list\",\"user\":{\"username\":\"bob\",\"groups\":["
                "\"system:authenticated\"]},\"sourceIPs\":[\"10.0.0.1\"],\"userAgent\":"
                "\"kubectl/v1.31.0 (linux/amd64) kubernetes/abcdef0\",\"objectRef\":{"
                "\"resource\":\"pods\",\"namespace\":\"default\",\"apiVersion\":\"v1\"},"
                "\"responseStatus\":{\"metadata\":{},\"status\":\"Failure\",\"message\":\"pods is "
                "forbidden: User \\\"bob\\\" cannot list resource \\\"pods\\\" in API group "
                "\\\"\\\" in the namespace \\\"default\\\"\",\"reason\":\"Forbidden\","
                "\"details\":{\"kind\":\"pods\"},\"code\":403},\"requestReceivedTimestamp\":"
                "\"2026-11-27T09:00:00.500000Z\",\"stageTimestamp\":"
                "\"2026-11-27T09:00:00.501234Z\",\"annotations\":{"
                "\"authorization.k8s.io/decision\":\"forbid\",\"authorization.k8s.io/reason\":"
                "\"\"}}\n");
    json_decref(details);
}

/* Impersonation, extra, a non-resource request, and strings that need
 * encoding/json's escapes. */
static void test_user_details_and_escapes(void **state)
{
    (void)state;
    static const char *const scopes[] = {"read", "write"};
    static const char *const empty[] = {NULL};
    audit_user_extra extra[] = {
        {"scopes.example.com", scopes, 2},
        {"a-empty", empty, 0},
        {"b-nil", NULL, 0},
    };
    static const char *const imp_groups[] = {"system:serviceaccounts"};
    audit_user_info imp = {.username = "system:serviceaccount:ns:sa",
                           .uid = "u-2",
                           .groups = imp_groups,
                           .ngroups = 1};
    audit_annotation ann[] = {{"z", "1"}, {"a", "first"}, {"a", "second"}};
    char agent[AUDIT_USER_AGENT_MAX + 10];
    memset(agent, 'x', sizeof agent - 1);
    agent[sizeof agent - 1] = '\0';
    audit_event e = {
        .level = AUDIT_LEVEL_REQUEST_RESPONSE,
        .audit_id = "id",
        .stage = AUDIT_STAGE_RESPONSE_STARTED,
        .request_uri = "/healthz?x=\x01\t\"\\\xe2\x80\xa8\xff\xc3\xa9\x7f",
        .verb = "get",
        .user = {.username = "carol", .uid = "u-1", .extra = extra, .nextra = 3},
        .impersonated_user = &imp,
        .impersonation_constraint = "impersonate:serviceaccount",
        .user_agent = agent,
        .response_status = &(audit_response_status){.code = 200},
        .request_received = {T0, 0},
        .stage_timestamp = {0, 0},
        .annotations = ann,
        .nannotations = 3,
    };
    size_t len;
    char *line = audit_event_encode(&e, &len);
    char want_agent[AUDIT_USER_AGENT_MAX + 32];
    memset(want_agent, 'x', AUDIT_USER_AGENT_MAX);
    strcpy(want_agent + AUDIT_USER_AGENT_MAX, "...TRUNCATED");
    char *want = NULL;
    int n = asprintf(
        &want,
        "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":\"RequestResponse\","
        "\"auditID\":\"id\",\"stage\":\"ResponseStarted\",\"requestURI\":"
        "\"/healthz?x=\\u0001\\t\\\"\\\\\\u2028\\ufffd\xc3\xa9\x7f\",\"verb\":\"get\","
        "\"user\":{\"username\":\"carol\",\"uid\":\"u-1\",\"extra\":{\"a-empty\":[],\"b-nil\":"
        "null,\"scopes.example.com\":[\"read\",\"write\"]}},\"impersonatedUser\":{\"username\":"
        "\"system:serviceaccount:ns:sa\",\"uid\":\"u-2\",\"groups\":["
        "\"system:serviceaccounts\"]},\"authenticationMetadata\":{\"impersonationConstraint\":"
        "\"impersonate:serviceaccount\"},\"userAgent\":\"%s\",\"responseStatus\":{\"metadata\":"
        "{},\"code\":200},\"requestReceivedTimestamp\":\"2026-11-27T09:00:00.000000Z\","
        "\"stageTimestamp\":null,\"annotations\":{\"a\":\"first\",\"z\":\"1\"}}\n",
        want_agent);
    assert_true(n > 0);
    if (strcmp(line, want))
        fail_msg("line\n  got:  %s\n  want: %s", line, want);
    assert_int_equal(len, strlen(want));
    free(want);
    free(line);
}

/* Every line parses back as JSON and carries what was put in. */
static void test_round_trip(void **state)
{
    (void)state;
    audit_object_ref ref = {.resource = "pods", .namespace_ = "ns", .name = "p"};
    audit_response_status st = {.code = 404, .status = "Failure", .reason = "NotFound"};
    audit_event e = get_pod(&ref, &st, NULL, 0);
    char *line = audit_event_encode(&e, NULL);
    json_error_t je;
    json_t *v = json_loads(line, 0, &je);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "verb")), "get");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(v, "responseStatus"), "code")), 404);
    json_decref(v);
    free(line);
}

static void test_legacy(void **state)
{
    (void)state;
    setenv("TZ", "UTC", 1);
    tzset();
    audit_object_ref ref = {.resource = "pods", .namespace_ = "default", .name = "web"};
    audit_response_status st = {.code = 200};
    audit_event e = get_pod(&ref, &st, NULL, 0);
    e.user_agent = "kubectl";
    e.request_uri = "/api/v1/namespaces/default/pods/web";
    size_t len;
    char *line = audit_event_encode_legacy(&e, &len);
    assert_string_equal(line, "2026-11-27T09:00:00.123456789Z AUDIT: "
                              "id=\"6a0f3c2e-5b1d-4c8e-9f7a-2d4b6e8a0c1f\" "
                              "stage=\"ResponseComplete\" ip=\"10.0.0.1\" method=\"get\" "
                              "user=\"alice\" groups=\"\\\"dev\\\",\\\"system:authenticated\\\"\" "
                              "as=\"<self>\" asgroups=\"<lookup>\" user-agent=\"kubectl\" "
                              "namespace=\"default\" uri=\"/api/v1/namespaces/default/pods/web\" "
                              "response=\"200\"\n");
    assert_int_equal(len, strlen(line));
    free(line);

    /* nothing known yet; an impersonation with no groups */
    static const char *const none[] = {NULL};
    audit_user_info imp = {.username = "sa", .groups = none, .ngroups = 0};
    audit_event f = {.audit_id = "x",
                     .stage = AUDIT_STAGE_REQUEST_RECEIVED,
                     .verb = "get",
                     .request_uri = "/healthz",
                     .impersonated_user = &imp,
                     .request_received = {T0, 120000000}};
    line = audit_event_encode_legacy(&f, NULL);
    assert_string_equal(line, "2026-11-27T09:00:00.12Z AUDIT: id=\"x\" stage=\"RequestReceived\" "
                              "ip=\"<unknown>\" method=\"get\" user=\"<none>\" groups=\"<none>\" "
                              "as=\"sa\" asgroups=\"\" user-agent=\"\" namespace=\"<none>\" "
                              "uri=\"/healthz\" response=\"<deferred>\"\n");
    free(line);
    /* in another zone, local time with its offset */
    setenv("TZ", "EST5", 1);
    tzset();
    f.request_received.tv_nsec = 0;
    line = audit_event_encode_legacy(&f, NULL);
    assert_true(!strncmp(line, "2026-11-27T04:00:00-05:00 AUDIT: ", 33));
    free(line);
    setenv("TZ", "UTC", 1);
    tzset();
}

static void test_without_managed_fields(void **state)
{
    (void)state;
    json_t *plain = js("{\"metadata\":{\"name\":\"a\"}}");
    json_t *out = audit_without_managed_fields(plain);
    assert_ptr_equal(out, plain);
    json_decref(out);
    json_decref(plain);
    assert_null(audit_without_managed_fields(NULL));

    json_t *list =
        js("{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\"},\"items\":["
           "{\"metadata\":{\"name\":\"a\",\"managedFields\":[{}]}},{\"metadata\":{\"name\":\"b\"}},"
           "3]}");
    char *before = json_dumps(list, JSON_COMPACT);
    out = audit_without_managed_fields(list);
    char *s = json_dumps(out, JSON_COMPACT);
    assert_string_equal(s, "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\"},"
                           "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":"
                           "\"b\"}},3]}");
    free(s);
    s = json_dumps(list, JSON_COMPACT);
    assert_string_equal(s, before); /* unchanged */
    free(s);
    free(before);
    /* the encoder leaves out the same */
    audit_event e = {.level = AUDIT_LEVEL_REQUEST_RESPONSE,
                     .response_object = list,
                     .omit_managed_fields = true};
    char *line = audit_event_encode(&e, NULL);
    s = json_dumps(out, JSON_COMPACT);
    char *want = NULL;
    assert_true(asprintf(&want, "\"responseObject\":%s,", s) > 0);
    assert_non_null(strstr(line, want));
    free(want);
    free(s);
    free(line);
    json_decref(out);
    json_decref(list);

    json_t *table = js("{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"rows\":["
                       "{\"cells\":[\"a\"],\"object\":{\"metadata\":{\"name\":\"a\","
                       "\"managedFields\":[]}}},{\"cells\":[\"b\"]}]}");
    out = audit_without_managed_fields(table);
    s = json_dumps(out, JSON_COMPACT);
    assert_string_equal(s, "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"rows\":["
                           "{\"cells\":[\"a\"],\"object\":{\"metadata\":{\"name\":\"a\"}}},"
                           "{\"cells\":[\"b\"]}]}");
    e.response_object = table;
    line = audit_event_encode(&e, NULL);
    char *w2 = NULL;
    assert_true(asprintf(&w2, "\"responseObject\":%s,", s) > 0);
    assert_non_null(strstr(line, w2));
    free(w2);
    free(line);
    free(s);
    json_decref(out);
    json_decref(table);

    /* a rows key outside a Table, and managedFields deeper down, stay */
    json_t *other = js("{\"rows\":[{\"object\":{\"metadata\":{\"managedFields\":1}}}],"
                       "\"spec\":{\"metadata\":{\"managedFields\":2}},"
                       "\"metadata\":{\"managedFields\":3,\"name\":\"o\"}}");
    out = audit_without_managed_fields(other);
    s = json_dumps(out, JSON_COMPACT);
    assert_string_equal(s, "{\"rows\":[{\"object\":{\"metadata\":{\"managedFields\":1}}}],"
                           "\"spec\":{\"metadata\":{\"managedFields\":2}},"
                           "\"metadata\":{\"name\":\"o\"}}");
    free(s);
    json_decref(out);
    json_decref(other);
}

/* objectRef from a decoded body (upstream's LogRequestObject): only the
 * fields the URL left empty, only non-empty strings, never the group,
 * version, resource or subresource. */
static void test_object_ref_fill(void **state)
{
    (void)state;
    /* a create: the URL has no name; the body's name and namespace are
     * taken only where the URL had none */
    json_t *cm = js("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                    "\"c1\",\"namespace\":\"other\",\"uid\":\"\",\"resourceVersion\":7}}");
    audit_object_ref ref = {.resource = "configmaps", .namespace_ = "default", .api_version = "v1"};
    audit_object_ref_fill(&ref, cm);
    assert_string_equal(ref.resource, "configmaps");
    assert_string_equal(ref.namespace_, "default");
    assert_string_equal(ref.name, "c1");
    assert_null(ref.uid);              /* "" is not a value */
    assert_null(ref.resource_version); /* nor a number */
    assert_null(ref.api_group);
    assert_string_equal(ref.api_version, "v1");
    json_decref(cm);

    /* an update: uid and resourceVersion are the client's */
    json_t *upd = js("{\"metadata\":{\"name\":\"other-name\",\"uid\":\"u-1\","
                     "\"resourceVersion\":\"41\",\"generateName\":\"x-\"}}");
    audit_object_ref r2 = {.resource = "configmaps", .namespace_ = "", .name = "c1"};
    audit_object_ref_fill(&r2, upd);
    assert_string_equal(r2.name, "c1"); /* the URL's */
    assert_string_equal(r2.uid, "u-1");
    assert_string_equal(r2.resource_version, "41");
    assert_string_equal(r2.namespace_, ""); /* a cluster-scoped URL: the body has none */

    /* the event writes what was filled */
    audit_response_status st = {.code = 200};
    audit_event e = get_pod(&r2, &st, NULL, 0);
    char *line = audit_event_encode(&e, NULL);
    assert_non_null(strstr(line, "\"objectRef\":{\"resource\":\"configmaps\",\"name\":\"c1\","
                                 "\"uid\":\"u-1\",\"resourceVersion\":\"41\"},"));
    free(line);
    json_decref(upd);

    /* a generateName create has no name yet; DeleteOptions no metadata */
    json_t *gen = js("{\"metadata\":{\"generateName\":\"c-\"}}");
    json_t *opts = js("{\"kind\":\"DeleteOptions\",\"propagationPolicy\":\"Background\"}");
    audit_object_ref r3 = {.resource = "configmaps"};
    audit_object_ref_fill(&r3, gen);
    audit_object_ref_fill(&r3, opts);
    audit_object_ref_fill(&r3, NULL);
    assert_null(r3.name);
    assert_null(r3.namespace_);
    json_decref(gen);
    json_decref(opts);
}

static void test_audit_ids(void **state)
{
    (void)state;
    char buf[AUDIT_ID_SIZE], buf2[AUDIT_ID_SIZE];
    const char *id = audit_id_for_request("client-chosen id", buf, sizeof buf);
    assert_string_equal(id, "client-chosen id");
    id = audit_id_for_request("", buf, sizeof buf);
    assert_ptr_equal(id, buf);
    assert_int_equal(strlen(buf), 36);
    assert_true(buf[8] == '-' && buf[13] == '-' && buf[18] == '-' && buf[23] == '-');
    assert_int_equal(buf[14], '4');
    assert_true(strchr("89ab", buf[19]) != NULL);
    audit_id_for_request(NULL, buf2, sizeof buf2);
    assert_string_not_equal(buf, buf2);
}

static void expect_ips(const char *xff, const char *real, const char *remote,
                       const char *const *want, size_t nwant)
{
    size_t n = 99;
    char **got = audit_source_ips(xff, real, remote, &n);
    assert_non_null(got);
    if (n != nwant)
        fail_msg("%zu IPs, want %zu (first: %s)", n, nwant, n ? got[0] : "-");
    for (size_t i = 0; i < n; i++)
        assert_string_equal(got[i], want[i]);
    assert_null(got[n]);
    free(got);
}

static void test_source_ips(void **state)
{
    (void)state;
    expect_ips(NULL, NULL, "10.0.0.9:51234", (const char *const[]){"10.0.0.9"}, 1);
    expect_ips("1.2.3.4, 5.6.7.8", NULL, "10.0.0.9:51234",
               (const char *const[]){"1.2.3.4", "5.6.7.8", "10.0.0.9"}, 3);
    /* invalid entries skipped; leading zeros read as decimal */
    expect_ips("bogus, 001.002.003.004 ,,1.2.3", NULL, "10.0.0.9",
               (const char *const[]){"1.2.3.4", "10.0.0.9"}, 2);
    /* X-Real-Ip only when not already in the chain */
    expect_ips("1.2.3.4", "1.2.3.4", "10.0.0.9:1", (const char *const[]){"1.2.3.4", "10.0.0.9"}, 2);
    expect_ips("1.2.3.4", "9.9.9.9", "10.0.0.9:1",
               (const char *const[]){"1.2.3.4", "9.9.9.9", "10.0.0.9"}, 3);
    /* the remote address not repeated when it is the last already */
    expect_ips("1.2.3.4", NULL, "1.2.3.4:80", (const char *const[]){"1.2.3.4"}, 1);
    /* IPv6, as Go prints it */
    expect_ips("2001:DB8::0:1, ::ffff:10.0.0.1", NULL, "[::1]:6443",
               (const char *const[]){"2001:db8::1", "10.0.0.1", "::1"}, 3);
    expect_ips("2001:db8:0:0:1:0:0:1, fe80::1%eth0", NULL, "[2001:db8::]:1",
               (const char *const[]){"2001:db8::1:0:0:1", "2001:db8::"}, 2);
    expect_ips("1:0:1:0:1:0:1:0", NULL, "::", (const char *const[]){"1:0:1:0:1:0:1:0", "::"}, 2);
    expect_ips(NULL, NULL, NULL, NULL, 0);
    expect_ips("", "", "not-an-ip:1", NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_level),
        cmocka_unit_test(test_request_level),
        cmocka_unit_test(test_request_response_level),
        cmocka_unit_test(test_forbidden),
        cmocka_unit_test(test_user_details_and_escapes),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_legacy),
        cmocka_unit_test(test_without_managed_fields),
        cmocka_unit_test(test_object_ref_fill),
        cmocka_unit_test(test_audit_ids),
        cmocka_unit_test(test_source_ips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
