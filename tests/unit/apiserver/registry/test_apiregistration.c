/* apiregistration.k8s.io/v1 served (registry/apiregistration), over HTTP
 * from an API server running in-process (util/inproc_server.h):
 * kube-aggregator's v1 defaulting and strategy (service port 443, status
 * only through /status, a local APIService Available on create, no
 * generation, the resourceVersion a PUT must name), its validation
 * messages and field paths (422 Status and its causes: the VERSION.GROUP
 * name, group, version, priorities, local APIServices' TLS fields, the
 * service, condition statuses), the SERVICE and AVAILABLE columns, the
 * local APIServices of the built-in group-versions and of a CRD's,
 * discovery and the OpenAPI description. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/json.h"
#include "util/inproc_server.h"
#include "util/quoted_json.h"

#define GV "/apis/apiregistration.k8s.io/v1"
#define AS GV "/apiservices"
#define TABLE "Accept: application/json;as=Table;v=v1;g=meta.k8s.io"
#define LABEL "kube-aggregator.kubernetes.io/automanaged"

/* An APIService body: its name and its spec's members (JSON with '). */
#define APISERVICE(name, spec)                                                                     \
    "{'apiVersion':'apiregistration.k8s.io/v1','kind':'APIService',"                               \
    "'metadata':{'name':'" name "'},'spec':{" spec "}}"
/* A valid spec of group/version: local unless more is appended. */
#define SPEC(group, version)                                                                       \
    "'group':'" group "','version':'" version "','groupPriorityMinimum':100,"                      \
    "'versionPriority':10"
#define SERVICE(ns, name) ",'service':{'namespace':'" ns "','name':'" name "'}"

/* ---- helpers ------------------------------------------------------------- */

static http_resp *merge_patch(ips *s, const char *path, const char *body)
{
    char *b = tu_quote(body);
    http_resp *r = HPATCH(s, "application/merge-patch+json", b, "%s", path);
    free(b);
    return r;
}

/* Asserts a 422 Invalid with `message` (NULL: any) and exactly the
 * causes given as "field|message" strings, in order (NULL-terminated). */
static void assert_invalid_at(http_resp *r, const char *message, const char *const *causes,
                              const char *file, int line)
{
    if (r->code != 422)
        fprintf(stderr, "%s:%d: HTTP %ld: %s\n", file, line, r->code, r->body.p);
    _assert_int_equal((uintmax_t)r->code, 422, file, line);
    _assert_string_equal(jstr(r->json, "reason"), "Invalid", file, line);
    if (message)
        _assert_string_equal(jstr(r->json, "message"), message, file, line);
    json_t *got = ckube_json_get_path(r->json, "details.causes");
    size_t n = 0;
    while (causes[n])
        n++;
    if (json_array_size(got) != n) {
        char *g = json_dumps(got, JSON_COMPACT);
        fprintf(stderr, "%s:%d: causes: %s\n", file, line, g ? g : "(none)");
        free(g);
    }
    _assert_int_equal(json_array_size(got), n, file, line);
    for (size_t i = 0; i < n; i++) {
        const char *bar = strchr(causes[i], '|');
        char field[256];
        snprintf(field, sizeof field, "%.*s", (int)(bar - causes[i]), causes[i]);
        json_t *c = json_array_get(got, i);
        _assert_string_equal(jstr(c, "field"), field, file, line);
        _assert_string_equal(jstr(c, "message"), bar + 1, file, line);
    }
}
#define CAUSES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define assert_invalid(r, message, causes)                                                         \
    assert_invalid_at((r), (message), (causes), __FILE__, __LINE__)

/* POSTs an APIService and asserts the causes. */
#define assert_create_invalid(s, body, causes)                                                     \
    do {                                                                                           \
        http_resp *r_ = tu_post((s), AS, body);                                                    \
        assert_invalid_at(r_, NULL, (causes), __FILE__, __LINE__);                                 \
        resp_free(r_);                                                                             \
    } while (0)

static const char *label_of(const json_t *obj)
{
    return json_string_value(json_object_get(ckube_json_get_path(obj, "metadata.labels"), LABEL));
}

/* ---- setup ---------------------------------------------------------------- */

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

static int teardown(void **state)
{
    ips_stop(*state);
    free(*state);
    return 0;
}

/* ---- defaulting and the strategy ------------------------------------------ */

static void test_defaults(void **state)
{
    ips *s = *state;
    /* A service's port defaults to 443; whatever status the body carries,
     * a non-local APIService starts with none; no generation. */
    http_resp *r = tu_post(
        s, AS,
        "{'apiVersion':'apiregistration.k8s.io/v1','kind':'APIService',"
        "'metadata':{'name':'v1.remote.example.com'},'spec':{" SPEC("remote.example.com", "v1")
            SERVICE("ns", "svc") "},"
                                 "'status':{'conditions':[{'type':'Available','status':'True'}]}}");
    assert_http(r, 201);
    tu_assert_json(json_object_get(r->json, "spec"),
                   "{'group':'remote.example.com','version':'v1','groupPriorityMinimum':100,"
                   "'versionPriority':10,'service':{'namespace':'ns','name':'svc','port':443}}");
    tu_assert_json(json_object_get(r->json, "status"), "{}");
    assert_null(ckube_json_get_path(r->json, "metadata.generation"));
    resp_free(r);

    /* A port given stays; a null service is no service. */
    r = tu_post(s, AS,
                APISERVICE("v2.remote.example.com",
                           SPEC("remote.example.com", "v2") ",'service':{'namespace':'ns','name':"
                                                            "'svc','port':8443}"));
    assert_http(r, 201);
    assert_int_equal(jint(r->json, "spec.service.port"), 8443);
    resp_free(r);

    /* A local one (no service) is available from its creation. */
    r = tu_post(
        s, AS,
        APISERVICE("v1.local.example.com", SPEC("local.example.com", "v1") ",'service':null"));
    assert_http(r, 201);
    assert_null(json_object_get(json_object_get(r->json, "spec"), "service"));
    json_t *conds = ckube_json_get_path(r->json, "status.conditions");
    assert_int_equal(json_array_size(conds), 1);
    json_t *c = json_array_get(conds, 0);
    assert_string_equal(jstr(c, "type"), "Available");
    assert_string_equal(jstr(c, "status"), "True");
    assert_string_equal(jstr(c, "reason"), "Local");
    assert_string_equal(jstr(c, "message"), "Local APIServices are always available");
    assert_non_null(jstr(c, "lastTransitionTime"));
    resp_free(r);
}

/* Spec through the main resource, status through /status; a PUT names
 * the resourceVersion it replaces. */
static void test_status_subresource(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, AS, APISERVICE("v1.st.example.com", SPEC("st.example.com", "v1")));
    assert_http(r, 201);
    resp_free(r);

    /* A PUT without a resourceVersion is refused. */
    r = tu_put(s, AS "/v1.st.example.com",
               APISERVICE("v1.st.example.com", SPEC("st.example.com", "v1")));
    assert_invalid(r,
                   "APIService.apiregistration.k8s.io \"v1.st.example.com\" is invalid: "
                   "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                   CAUSES("metadata.resourceVersion|Invalid value: 0x0: must be specified for an "
                          "update"));
    resp_free(r);

    /* Through the main resource: the spec changes, the status does not. */
    r = merge_patch(s, AS "/v1.st.example.com",
                    "{'spec':{'versionPriority':20},'status':{'conditions':[{'type':'Available',"
                    "'status':'False','reason':'Nope'}]}}");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "spec.versionPriority"), 20);
    assert_string_equal(jstr(r->json, "status.conditions[0].status"), "True");
    assert_null(ckube_json_get_path(r->json, "metadata.generation"));
    resp_free(r);

    /* Through /status: the status changes, the spec and labels do not. */
    r = merge_patch(s, AS "/v1.st.example.com/status",
                    "{'metadata':{'labels':{'a':'b'}},'spec':{'versionPriority':30},"
                    "'status':{'conditions':[{'type':'Available','status':'False',"
                    "'reason':'Nope','message':'down'}]}}");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "spec.versionPriority"), 20);
    assert_null(ckube_json_get_path(r->json, "metadata.labels"));
    assert_string_equal(jstr(r->json, "status.conditions[0].status"), "False");
    assert_string_equal(jstr(r->json, "status.conditions[0].reason"), "Nope");
    resp_free(r);

    /* A condition's status is True, False or Unknown. */
    r = merge_patch(s, AS "/v1.st.example.com/status",
                    "{'status':{'conditions':[{'type':'Available','status':'Maybe'}]}}");
    assert_invalid(
        r,
        "APIService.apiregistration.k8s.io \"v1.st.example.com\" is invalid: "
        "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", "
        "\"False\", \"Unknown\"",
        CAUSES("status.conditions[0].status|Unsupported value: \"Maybe\": supported values: "
               "\"True\", \"False\", \"Unknown\""));
    resp_free(r);
    /* Conditions merge by type in a strategic merge patch. */
    r = HPATCH(s, "application/strategic-merge-patch+json",
               "{\"status\":{\"conditions\":[{\"type\":\"Other\",\"status\":\"Unknown\"}]}}",
               AS "/v1.st.example.com/status");
    assert_http(r, 200);
    assert_int_equal(json_array_size(ckube_json_get_path(r->json, "status.conditions")), 2);
    resp_free(r);

    /* An update is validated as a create is. */
    r = merge_patch(s, AS "/v1.st.example.com", "{'spec':{'versionPriority':1001}}");
    assert_invalid(r, NULL,
                   CAUSES("spec.versionPriority|Invalid value: 1001: must be positive and less "
                          "than 1000"));
    resp_free(r);
}

/* ---- validation ------------------------------------------------------------ */

static void test_names(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, AS, APISERVICE("v1.other.example.com", SPEC("example.com", "v1")));
    assert_invalid(r,
                   "APIService.apiregistration.k8s.io \"v1.other.example.com\" is invalid: "
                   "metadata.name: Invalid value: \"v1.other.example.com\": must be "
                   "`spec.version+\".\"+spec.group`: \"v1.example.com\"",
                   CAUSES("metadata.name|Invalid value: \"v1.other.example.com\": must be "
                          "`spec.version+\".\"+spec.group`: \"v1.example.com\""));
    resp_free(r);
    /* A name that is no path segment says only that. */
    assert_create_invalid(
        s, APISERVICE("v1%example.com", SPEC("example.com", "v1")),
        CAUSES("metadata.name|Invalid value: \"v1%example.com\": may not contain '%'"));
    /* The legacy group's: "v1." */
    r = tu_post(s, AS,
                APISERVICE("v1.", "'version':'v1','groupPriorityMinimum':1,'versionPriority':1"));
    assert_int_equal(r->code, 409); /* the server's own */
    resp_free(r);
}

static void test_spec(void **state)
{
    ips *s = *state;
    /* Only v1 may have no group; the group is a DNS subdomain, the
     * version a DNS-1035 label; priorities in range. */
    assert_create_invalid(
        s, APISERVICE("v2.", "'version':'v2','groupPriorityMinimum':0,'versionPriority':-1"),
        CAUSES("spec.group|Required value: only v1 may have an empty group and it better be "
               "legacy kube",
               "spec.groupPriorityMinimum|Invalid value: 0: must be positive and less than 20000",
               "spec.versionPriority|Invalid value: -1: must be positive and less than 1000"));
    assert_create_invalid(
        s,
        APISERVICE("V1.Bad_Group", "'group':'Bad_Group','version':'V1',"
                                   "'groupPriorityMinimum':20001,'versionPriority':1001"),
        CAUSES("spec.group|Invalid value: \"Bad_Group\": a lowercase RFC 1123 subdomain must "
               "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
               "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
               "spec.version|Invalid value: \"V1\": a DNS-1035 label must consist of lower case "
               "alphanumeric characters or '-', start with an alphabetic character, and end with "
               "an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
               "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
               "spec.groupPriorityMinimum|Invalid value: 20001: must be positive and less than "
               "20000",
               "spec.versionPriority|Invalid value: 1001: must be positive and less than 1000"));
    /* Nothing given: an empty version, zero priorities. */
    assert_create_invalid(
        s, APISERVICE(".example.com", "'group':'example.com'"),
        CAUSES("spec.version|Invalid value: \"\": a DNS-1035 label must consist of lower case "
               "alphanumeric characters or '-', start with an alphabetic character, and end with "
               "an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
               "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
               "spec.groupPriorityMinimum|Invalid value: 0: must be positive and less than 20000",
               "spec.versionPriority|Invalid value: 0: must be positive and less than 1000"));

    /* A local APIService has no TLS settings. */
    assert_create_invalid(
        s,
        APISERVICE("v1.tls.example.com", SPEC("tls.example.com", "v1") ",'caBundle':'aGVsbG8=',"
                                                                       "'insecureSkipTLSVerify':"
                                                                       "true"),
        CAUSES("spec.caBundle|Invalid value: \"5 bytes\": local APIServices may not have a "
               "caBundle",
               "spec.insecureSkipTLSVerify|Invalid value: true: local APIServices may not have "
               "insecureSkipTLSVerify"));
    /* A service needs its namespace, name and a port; a caBundle and
     * insecureSkipTLSVerify exclude each other. */
    assert_create_invalid(
        s,
        APISERVICE("v1.tls.example.com",
                   SPEC("tls.example.com", "v1") ",'service':{'port':65536},"
                                                 "'caBundle':'aGVsbG8=',"
                                                 "'insecureSkipTLSVerify':true"),
        CAUSES("spec.service.namespace|Required value", "spec.service.name|Required value",
               "spec.service.port|Invalid value: 65536: port is not valid: must be between 1 and "
               "65535, inclusive",
               "spec.insecureSkipTLSVerify|Invalid value: true: may not be true if caBundle is "
               "present"));
    assert_create_invalid(
        s,
        APISERVICE("v1.tls.example.com",
                   SPEC("tls.example.com", "v1") ",'service':{'namespace':'ns','name':'svc',"
                                                 "'port':0}"),
        CAUSES("spec.service.port|Invalid value: 0: port is not valid: must be between 1 and "
               "65535, inclusive"));
    /* Either alone is fine with a service. */
    http_resp *r = tu_post(s, AS,
                           APISERVICE("v1.tls.example.com",
                                      SPEC("tls.example.com", "v1")
                                          SERVICE("ns", "svc") ",'insecureSkipTLSVerify':true"));
    assert_http(r, 201);
    resp_free(r);
    r = tu_post(s, AS,
                APISERVICE("v2.tls.example.com", SPEC("tls.example.com", "v2") SERVICE(
                                                     "ns", "svc") ",'caBundle':'aGVsbG8='"));
    assert_http(r, 201);
    assert_string_equal(jstr(r->json, "spec.caBundle"), "aGVsbG8=");
    resp_free(r);
}

/* ---- the local APIServices ---------------------------------------------------- */

/* The server's own group-versions, with kube-apiserver's priorities. */
static void test_builtin_local(void **state)
{
    ips *s = *state;
    static const struct {
        const char *name;
        int gp, vp;
    } want[] = {
        {"v1.", 18000, 1},
        {"v1.apps", 17800, 15},
        {"v1.events.k8s.io", 17750, 15},
        {"v1.authentication.k8s.io", 17700, 15},
        {"v1.authorization.k8s.io", 17600, 15},
        {"v1.rbac.authorization.k8s.io", 17000, 15},
        {"v1.admissionregistration.k8s.io", 16700, 15},
        {"v1.apiextensions.k8s.io", 16700, 15},
        {"v1.coordination.k8s.io", 16500, 15},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        http_resp *r = HGET(s, AS "/%s", want[i].name);
        assert_http(r, 200);
        assert_null(json_object_get(json_object_get(r->json, "spec"), "service"));
        assert_int_equal(jint(r->json, "spec.groupPriorityMinimum"), want[i].gp);
        assert_int_equal(jint(r->json, "spec.versionPriority"), want[i].vp);
        assert_string_equal(label_of(r->json), "onstart");
        assert_string_equal(jstr(r->json, "status.conditions[0].reason"), "Local");
        resp_free(r);
    }
    /* The core group's spec names no group. */
    http_resp *r = HGET(s, AS "/v1.");
    tu_assert_json(json_object_get(r->json, "spec"),
                   "{'version':'v1','groupPriorityMinimum':18000,'versionPriority':1}");
    resp_free(r);
    /* None for the aggregator's own group, nor for a version upstream has
     * no priority for. */
    r = HGET(s, AS "/v1.apiregistration.k8s.io");
    assert_int_equal(r->code, 404);
    resp_free(r);
    r = HGET(s, AS "/v1beta1.apiextensions.k8s.io");
    assert_int_equal(r->code, 404);
    resp_free(r);
}

static bool apiservice_is(ips *s, const char *name, bool want)
{
    http_resp *r = HGET(s, AS "/%s", name);
    bool there = r->code == 200;
    resp_free(r);
    return there == want;
}

typedef struct probe {
    ips *s;
    const char *name;
    bool want;
} probe;

static bool probe_ok(void *arg)
{
    probe *p = arg;
    return apiservice_is(p->s, p->name, p->want);
}

#define await_apiservice(s, name, want)                                                            \
    assert_true(ips_wait(probe_ok, &(probe){(s), (name), (want)}, 5000))

#define CRD(versions)                                                                              \
    "{'apiVersion':'apiextensions.k8s.io/v1','kind':'CustomResourceDefinition',"                   \
    "'metadata':{'name':'gizmos.crd.example.com'},'spec':{'group':'crd.example.com',"              \
    "'scope':'Namespaced','names':{'plural':'gizmos','singular':'gizmo','kind':'Gizmo'},"          \
    "'versions':[" versions "]}}"
#define CRD_VERSION(name, served, storage)                                                         \
    "{'name':'" name "','served':" served ",'storage':" storage ",'schema':{'openAPIV3Schema':"    \
    "{'type':'object','x-kubernetes-preserve-unknown-fields':true}}}"

/* A CRD's group-versions have APIServices while it serves them. */
static void test_crd_local(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(
        s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        CRD(CRD_VERSION("v1", "true", "true") "," CRD_VERSION("v1beta1", "false", "false")));
    assert_http(r, 201);
    resp_free(r);
    await_apiservice(s, "v1.crd.example.com", true);
    r = HGET(s, AS "/v1.crd.example.com");
    tu_assert_json(json_object_get(r->json, "spec"),
                   "{'group':'crd.example.com','version':'v1','groupPriorityMinimum':1000,"
                   "'versionPriority':100}");
    assert_string_equal(label_of(r->json), "true");
    assert_string_equal(jstr(r->json, "status.conditions[0].status"), "True");
    resp_free(r);
    assert_true(apiservice_is(s, "v1beta1.crd.example.com", false));

    /* Served versions come and go with the CRD. */
    r = HPATCH(s, "application/json-patch+json",
               "[{\"op\":\"replace\",\"path\":\"/spec/versions/1/served\",\"value\":true},"
               "{\"op\":\"replace\",\"path\":\"/spec/versions/0/served\",\"value\":false}]",
               "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.crd.example.com");
    assert_http(r, 200);
    resp_free(r);
    await_apiservice(s, "v1beta1.crd.example.com", true);
    await_apiservice(s, "v1.crd.example.com", false);

    /* A user's APIService of the group is left alone. */
    r = tu_post(s, AS, APISERVICE("v2.crd.example.com", SPEC("crd.example.com", "v2")));
    assert_http(r, 201);
    resp_free(r);

    r = HDELETE(s, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                   "gizmos.crd.example.com");
    assert_true(r->code == 200 || r->code == 202);
    resp_free(r);
    await_apiservice(s, "v1beta1.crd.example.com", false);
    assert_true(apiservice_is(s, "v2.crd.example.com", true));
}

/* ---- printing, discovery, OpenAPI -------------------------------------------- */

static void set_available(ips *s, const char *name, const char *conditions)
{
    char path[256], body[512];
    snprintf(path, sizeof path, AS "/%s/status", name);
    snprintf(body, sizeof body, "{'status':{'conditions':%s}}", conditions);
    http_resp *r = merge_patch(s, path, body);
    assert_http(r, 200);
    resp_free(r);
}

static void test_printing(void **state)
{
    ips *s = *state;
    static const char *const bodies[] = {
        APISERVICE("v1.a.example.com", SPEC("a.example.com", "v1")),
        APISERVICE("v1.b.example.com", SPEC("b.example.com", "v1")),
        APISERVICE("v1.c.example.com", SPEC("c.example.com", "v1")),
        APISERVICE("v1.d.example.com", SPEC("d.example.com", "v1")),
        APISERVICE("v1.e.example.com", SPEC("e.example.com", "v1") SERVICE("ns", "svc")),
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        http_resp *r = tu_post(s, AS, bodies[i]);
        assert_http(r, 201);
        resp_free(r);
    }
    set_available(s, "v1.b.example.com",
                  "[{'type':'Available','status':'False','reason':'MissingEndpoints'}]");
    set_available(s, "v1.c.example.com", "[{'type':'Available','status':'False'}]");
    set_available(s, "v1.d.example.com", "[{'type':'Other','status':'True'}]");

    /* NAME, SERVICE, AVAILABLE, AGE. */
    http_resp *r = http_call(s, "GET", NULL, NULL, IPS_HEADERS(TABLE), AS);
    assert_http(r, 200);
    json_t *cols = json_object_get(r->json, "columnDefinitions");
    assert_int_equal(json_array_size(cols), 4);
    assert_string_equal(jstr(cols, "[0].name"), "Name");
    assert_string_equal(jstr(cols, "[1].name"), "Service");
    assert_string_equal(jstr(cols, "[1].type"), "string");
    assert_string_equal(jstr(cols, "[2].name"), "Available");
    assert_string_equal(jstr(cols, "[2].type"), "string");
    assert_string_equal(jstr(cols, "[3].name"), "Age");
    static const struct {
        const char *name, *service, *available;
    } want[] = {
        {"v1.a.example.com", "Local", "True"},
        {"v1.b.example.com", "Local", "False (MissingEndpoints)"},
        {"v1.c.example.com", "Local", "False"},
        {"v1.d.example.com", "Local", "Unknown"},
        {"v1.e.example.com", "ns/svc", NULL},
        {"v1.apps", "Local", "True"},
    };
    size_t i, found = 0;
    json_t *row;
    json_array_foreach(json_object_get(r->json, "rows"), i, row)
    {
        json_t *cells = json_object_get(row, "cells");
        for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
            if (strcmp(jstr(cells, "[0]"), want[k].name))
                continue;
            found++;
            assert_string_equal(jstr(cells, "[1]"), want[k].service);
            /* (A non-local one's availability is the aggregator's to say:
             * Unknown until it has looked, False while nothing answers.) */
            const char *av = jstr(cells, "[2]");
            if (want[k].available)
                assert_string_equal(av, want[k].available);
            else
                assert_true(!strcmp(av, "Unknown") || !strncmp(av, "False", 5));
        }
    }
    assert_int_equal(found, sizeof want / sizeof *want);
    resp_free(r);
}

static void test_discovery_and_openapi(void **state)
{
    ips *s = *state;
    http_resp *r = HGET(s, GV);
    assert_http(r, 200);
    tu_assert_json(json_object_get(r->json, "resources"),
                   "[{'name':'apiservices','singularName':'apiservice','namespaced':false,"
                   "'kind':'APIService','verbs':['create','delete','deletecollection','get','list',"
                   "'patch','update','watch'],'categories':['api-extensions']},"
                   "{'name':'apiservices/status','singularName':'','namespaced':false,"
                   "'kind':'APIService','verbs':['get','patch','update']}]");
    resp_free(r);
    /* The aggregator's group comes first in /apis. */
    r = HGET(s, "/apis");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "groups[0].name"), "apiregistration.k8s.io");
    assert_string_equal(jstr(r->json, "groups[0].preferredVersion.groupVersion"),
                        "apiregistration.k8s.io/v1");
    resp_free(r);

    /* What kubectl explain reads: upstream's definition names, required
     * fields and conditions as a list-type map keyed by type. */
    r = HGET(s, "/openapi/v3/apis/apiregistration.k8s.io/v1");
    assert_http(r, 200);
    json_t *schemas = ckube_json_get_path(r->json, "components.schemas");
    const char *prefix = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.";
    char name[128];
    snprintf(name, sizeof name, "%sAPIService", prefix);
    assert_non_null(json_object_get(schemas, name));
    snprintf(name, sizeof name, "%sAPIServiceSpec", prefix);
    tu_assert_json(json_object_get(json_object_get(schemas, name), "required"),
                   "['groupPriorityMinimum','versionPriority']");
    snprintf(name, sizeof name, "%sAPIServiceCondition", prefix);
    tu_assert_json(json_object_get(json_object_get(schemas, name), "required"),
                   "['type','status']");
    snprintf(name, sizeof name, "%sAPIServiceStatus", prefix);
    json_t *conds = ckube_json_get_path(json_object_get(schemas, name), "properties.conditions");
    assert_string_equal(jstr(conds, "x-kubernetes-list-type"), "map");
    tu_assert_json(json_object_get(conds, "x-kubernetes-list-map-keys"), "['type']");
    assert_string_equal(jstr(conds, "x-kubernetes-patch-merge-key"), "type");
    assert_string_equal(jstr(conds, "x-kubernetes-patch-strategy"), "merge");
    assert_null(json_object_get(conds, "x-ckube-list-type"));
    snprintf(name, sizeof name, "%sServiceReference", prefix);
    assert_non_null(json_object_get(schemas, name));
    resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_subresource, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builtin_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crd_local, setup, teardown),
        cmocka_unit_test_setup_teardown(test_printing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discovery_and_openapi, setup, teardown),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
