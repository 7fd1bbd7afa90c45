/* admissionregistration.k8s.io/v1 served (registry/admissionregistration),
 * over HTTP from an API server running in-process (util/inproc_server.h):
 * upstream's v1 defaulting of the webhook configurations, its validation
 * messages and field paths (422 Status and its causes: webhook names,
 * client configs and URLs, rules and resources, policies, selectors,
 * review versions, match conditions), generation, the resourceVersion a
 * PUT must name, strategic merge by webhook name, the WEBHOOKS column,
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

#define GV "/apis/admissionregistration.k8s.io/v1"
#define MWC GV "/mutatingwebhookconfigurations"
#define VWC GV "/validatingwebhookconfigurations"
#define TABLE "Accept: application/json;as=Table;v=v1;g=meta.k8s.io"

/* The start of a configuration body, and a webhook that is valid
 * whatever is appended to it (a URL nobody calls, for nothing). */
#define MUTATING(name)                                                                             \
    "{'apiVersion':'admissionregistration.k8s.io/v1','kind':'MutatingWebhookConfiguration',"       \
    "'metadata':{'name':'" name "'},'webhooks':["
#define VALIDATING(name)                                                                           \
    "{'apiVersion':'admissionregistration.k8s.io/v1','kind':'ValidatingWebhookConfiguration',"     \
    "'metadata':{'name':'" name "'},'webhooks':["
#define HOOK(name)                                                                                 \
    "{'name':'" name "','clientConfig':{'url':'https://127.0.0.1:1/never'},"                       \
    "'sideEffects':'None','admissionReviewVersions':['v1']"

/* ---- helpers ------------------------------------------------------------- */

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

/* POSTs a validating configuration of the webhooks `hooks` and asserts
 * the causes. */
#define assert_hooks_invalid(s, hooks, causes)                                                     \
    do {                                                                                           \
        http_resp *r_ = tu_post((s), VWC, VALIDATING("bad") hooks "]}");                           \
        assert_invalid_at(r_, NULL, (causes), __FILE__, __LINE__);                                 \
        resp_free(r_);                                                                             \
    } while (0)

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

/* ---- defaulting ------------------------------------------------------------ */

static void test_defaults(void **state)
{
    ips *s = *state;
    /* Every default of SetObjectDefaults, for a mutating webhook: what is
     * missing or null is filled in, what is given stays. */
    http_resp *r = tu_post(
        s, MWC,
        MUTATING("m") "{'name':'a.example.com','clientConfig':{'url':'https://127.0.0.1:1/never'},"
                      "'sideEffects':'None','admissionReviewVersions':['v1'],'failurePolicy':null,"
                      "'rules':[{'operations':['CREATE'],'apiGroups':['example.com'],"
                      "'apiVersions':['v1'],'resources':['nothings']}]},"
                      "{'name':'b.example.com','clientConfig':{'service':{'namespace':'ns',"
                      "'name':'svc'}},'sideEffects':'NoneOnDryRun',"
                      "'admissionReviewVersions':['v1beta1'],'failurePolicy':'Ignore',"
                      "'matchPolicy':'Exact','timeoutSeconds':5,'reinvocationPolicy':'IfNeeded',"
                      "'namespaceSelector':{'matchLabels':{'a':'b'}},"
                      "'rules':[{'operations':['*'],'apiGroups':['*'],'apiVersions':['*'],"
                      "'resources':['*/*'],'scope':'Namespaced'}]}]}");
    assert_http(r, 201);
    assert_int_equal(jint(r->json, "metadata.generation"), 1);
    const char *want =
        "[{'name':'a.example.com','clientConfig':{'url':'https://127.0.0.1:1/never'},"
        "'sideEffects':'None','admissionReviewVersions':['v1'],'failurePolicy':'Fail',"
        "'matchPolicy':'Equivalent','namespaceSelector':{},'objectSelector':{},"
        "'timeoutSeconds':10,'reinvocationPolicy':'Never',"
        "'rules':[{'operations':['CREATE'],'apiGroups':['example.com'],'apiVersions':['v1'],"
        "'resources':['nothings'],'scope':'*'}]},"
        "{'name':'b.example.com','clientConfig':{'service':{'namespace':'ns','name':'svc',"
        "'port':443}},'sideEffects':'NoneOnDryRun','admissionReviewVersions':['v1beta1'],"
        "'failurePolicy':'Ignore','matchPolicy':'Exact','timeoutSeconds':5,"
        "'reinvocationPolicy':'IfNeeded','namespaceSelector':{'matchLabels':{'a':'b'}},"
        "'objectSelector':{},"
        "'rules':[{'operations':['*'],'apiGroups':['*'],'apiVersions':['*'],"
        "'resources':['*/*'],'scope':'Namespaced'}]}]";
    tu_assert_json(json_object_get(r->json, "webhooks"), want);
    resp_free(r);
    r = HGET(s, MWC "/m");
    assert_http(r, 200);
    tu_assert_json(json_object_get(r->json, "webhooks"), want);
    resp_free(r);

    /* A validating webhook has no reinvocationPolicy (one given is not
     * kept); a Service's port given stays. */
    r = tu_post(
        s, VWC,
        VALIDATING("v") "{'name':'c.example.com','clientConfig':{'service':{'namespace':'ns',"
                        "'name':'svc','port':8443,'path':'/check'}},'sideEffects':'None',"
                        "'admissionReviewVersions':['v1'],'reinvocationPolicy':'IfNeeded'}]}");
    assert_http(r, 201);
    tu_assert_json(json_object_get(r->json, "webhooks"),
                   "[{'name':'c.example.com','clientConfig':{'service':{'namespace':'ns',"
                   "'name':'svc','port':8443,'path':'/check'}},'sideEffects':'None',"
                   "'admissionReviewVersions':['v1'],'failurePolicy':'Fail',"
                   "'matchPolicy':'Equivalent','namespaceSelector':{},'objectSelector':{},"
                   "'timeoutSeconds':10}]");
    resp_free(r);

    /* No webhooks at all is a valid configuration. */
    r = tu_post(s, VWC, VALIDATING("empty") "]}");
    assert_http(r, 201);
    assert_null(json_object_get(r->json, "webhooks"));
    resp_free(r);
}

/* Generation moves with the webhooks; a PUT names the resourceVersion it
 * replaces (upstream's AllowUnconditionalUpdate is false); an update is
 * defaulted and validated as a create is. */
static void test_update(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, VWC, VALIDATING("u") HOOK("a.example.com") "}]}");
    assert_http(r, 201);
    char rv[32];
    snprintf(rv, sizeof rv, "%s", jstr(r->json, "metadata.resourceVersion"));
    resp_free(r);

    r = tu_post(s, VWC, VALIDATING("u") HOOK("a.example.com") "}]}");
    assert_int_equal(r->code, 409);
    resp_free(r);

    char *body = tu_quote(VALIDATING("u") HOOK("a.example.com") ",'timeoutSeconds':3}]}");
    r = HPUT(s, body, VWC "/u");
    free(body);
    assert_invalid(r,
                   "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"u\" is invalid: "
                   "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                   CAUSES("metadata.resourceVersion|Invalid value: 0x0: must be specified for an "
                          "update"));
    resp_free(r);

    char text[1024];
    snprintf(text, sizeof text,
             "{'apiVersion':'admissionregistration.k8s.io/v1',"
             "'kind':'ValidatingWebhookConfiguration','metadata':{'name':'u',"
             "'resourceVersion':'%s'},'webhooks':[" HOOK("a.example.com") ",'timeoutSeconds':3}]}",
             rv);
    body = tu_quote(text);
    r = HPUT(s, body, VWC "/u");
    free(body);
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "metadata.generation"), 2);
    assert_int_equal(jint(r->json, "webhooks[0].timeoutSeconds"), 3);
    assert_string_equal(jstr(r->json, "webhooks[0].failurePolicy"), "Fail");
    resp_free(r);

    /* A label change leaves the generation alone. */
    r = HPATCH(s, "application/merge-patch+json", "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
               VWC "/u");
    assert_http(r, 200);
    assert_int_equal(jint(r->json, "metadata.generation"), 2);
    resp_free(r);

    /* A strategic merge patch merges webhooks by name: the new one is
     * added and defaulted, the old one kept. */
    body = tu_quote("{'webhooks':[" HOOK("b.example.com") "}]}");
    r = HPATCH(s, "application/strategic-merge-patch+json", body, VWC "/u");
    free(body);
    assert_http(r, 200);
    json_t *hooks = json_object_get(r->json, "webhooks");
    assert_int_equal(json_array_size(hooks), 2);
    size_t a = !strcmp(jstr(hooks, "[0].name"), "a.example.com") ? 0 : 1;
    assert_string_equal(jstr(json_array_get(hooks, a), "name"), "a.example.com");
    assert_string_equal(jstr(json_array_get(hooks, 1 - a), "name"), "b.example.com");
    assert_int_equal(jint(json_array_get(hooks, a), "timeoutSeconds"), 3);
    assert_int_equal(jint(json_array_get(hooks, 1 - a), "timeoutSeconds"), 10);
    assert_int_equal(jint(r->json, "metadata.generation"), 3);
    resp_free(r);

    /* An update that breaks a rule is rejected as a create is. */
    body = tu_quote("{'webhooks':[{'name':'a.example.com','timeoutSeconds':0}]}");
    r = HPATCH(s, "application/strategic-merge-patch+json", body, VWC "/u");
    free(body);
    char cause[128];
    snprintf(cause, sizeof cause,
             "webhooks[%zu].timeoutSeconds|Invalid value: 0: the timeout value must be between 1 "
             "and 30 seconds",
             a);
    assert_invalid(r, NULL, CAUSES(cause));
    resp_free(r);
}

/* ---- validation ------------------------------------------------------------- */

static void test_names(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, MWC, MUTATING("bad") HOOK("abc") "}]}");
    assert_invalid(r,
                   "MutatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: "
                   "webhooks[0].name: Invalid value: \"abc\": should be a domain with at least "
                   "three segments separated by dots",
                   CAUSES("webhooks[0].name|Invalid value: \"abc\": should be a domain with at "
                          "least three segments separated by dots"));
    resp_free(r);
    assert_hooks_invalid(
        s,
        HOOK("a.b") "}," HOOK("") "}," HOOK("Web.Example.com") "}," HOOK("c.d.e") "}," HOOK(
            "c.d.e") "}," HOOK("c.d.e") "}",
        CAUSES("webhooks[0].name|Invalid value: \"a.b\": should be a domain with at least three "
               "segments separated by dots",
               "webhooks[1].name|Required value",
               "webhooks[2].name|Invalid value: \"Web.Example.com\": a lowercase RFC 1123 "
               "subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'example.com', regex "
               "used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
               "webhooks[4].name|Duplicate value: \"c.d.e\"",
               "webhooks[5].name|Duplicate value: \"c.d.e\""));
    /* The configuration's own name is a DNS subdomain. */
    r = tu_post(s, MWC, MUTATING("Bad_Name") "]}");
    assert_invalid(r, NULL,
                   CAUSES("metadata.name|Invalid value: \"Bad_Name\": a lowercase RFC 1123 "
                          "subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character (e.g. "
                          "'example.com', regex used for validation is "
                          "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
    resp_free(r);
}

#define CC_HOOK(name, cc)                                                                          \
    "{'name':'" name "','clientConfig':" cc                                                        \
    ",'sideEffects':'None','admissionReviewVersions':['v1']}"
#define URL_HOOK(name, url) CC_HOOK(name, "{'url':'" url "'}")
#define FORM "; desired format: https://host[/path]"

static void test_client_config(void **state)
{
    ips *s = *state;
    /* Exactly one of url and service. */
    assert_hooks_invalid(
        s,
        CC_HOOK("a.b.c", "{}") "," CC_HOOK("d.e.f",
                                           "{'url':'https://x.y','service':{'namespace':"
                                           "'n','name':'s'}}") "," CC_HOOK("g.h.i", "null"),
        CAUSES("webhooks[0].clientConfig|Required value: exactly one of url or service is required",
               "webhooks[1].clientConfig|Required value: exactly one of url or service is required",
               "webhooks[2].clientConfig|Required value: exactly one of url or service is "
               "required"));
    /* URLs: https, a host, and no user information, fragment or query. */
    assert_hooks_invalid(
        s,
        URL_HOOK("a.b.c", "http://example.com/x") "," URL_HOOK(
            "d.e.f",
            "https://"
            "user:secret@example.com/") "," URL_HOOK("g.h.i",
                                                     "https://example.com/#top") "," URL_HOOK("j.k."
                                                                                              "l",
                                                                                              "http"
                                                                                              "s://"
                                                                                              "exam"
                                                                                              "ple."
                                                                                              "com/"
                                                                                              "x?a="
                                                                                              "1") "," URL_HOOK("m.n.o",
                                                                                                                "https:///x") "," URL_HOOK("p.q.r",
                                                                                                                                           "") "," URL_HOOK("s.t.u",
                                                                                                                                                            "example.com/x"),
        CAUSES("webhooks[0].clientConfig.url|Invalid value: \"http\": 'https' is the only allowed "
               "URL scheme" FORM,
               "webhooks[1].clientConfig.url|Invalid value: \"user:secret\": user information is "
               "not permitted in the URL",
               "webhooks[2].clientConfig.url|Invalid value: \"top\": fragments are not permitted "
               "in the URL",
               "webhooks[3].clientConfig.url|Invalid value: \"a=1\": query parameters are not "
               "permitted in the URL",
               "webhooks[4].clientConfig.url|Invalid value: \"\": host must be provided" FORM,
               "webhooks[5].clientConfig.url|Invalid value: \"\": 'https' is the only allowed URL "
               "scheme" FORM,
               "webhooks[5].clientConfig.url|Invalid value: \"\": host must be provided" FORM,
               "webhooks[6].clientConfig.url|Invalid value: \"\": 'https' is the only allowed URL "
               "scheme" FORM,
               "webhooks[6].clientConfig.url|Invalid value: \"\": host must be provided" FORM));
    /* URLs Go's url.Parse refuses, with its error. */
    assert_hooks_invalid(
        s,
        URL_HOOK("a.b.c", "127.0.0.1:8443/x") "," URL_HOOK("d.e.f", "https://[::1/x") "," URL_HOOK("g.h.i", "https://example.com:https/") "," URL_HOOK(
            "j.k.l",
            "https://ex%zzample.com/") "," URL_HOOK("m.n.o",
                                                    "https://example .com/") "," URL_HOOK("p.q.r",
                                                                                          "://"
                                                                                          "example."
                                                                                          "com") "," URL_HOOK("s.t.u",
                                                                                                              "https://example.com/#%z"),
        CAUSES("webhooks[0].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"127.0.0.1:8443/x\": first path segment in URL cannot contain colon" FORM,
               "webhooks[1].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"https://[::1/x\": missing ']' in host" FORM,
               "webhooks[2].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"https://example.com:https/\": invalid port \":https\" after host" FORM,
               "webhooks[3].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"https://ex%zzample.com/\": invalid URL escape \"%zz\"" FORM,
               "webhooks[4].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"https://example .com/\": invalid character \" \" in host name" FORM,
               "webhooks[5].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"://example.com\": missing protocol scheme" FORM,
               "webhooks[6].clientConfig.url|Required value: url must be a valid URL: parse "
               "\"https://example.com/#%z\": invalid URL escape \"%z\"" FORM));
    /* Services: a name, a namespace, a port and a path of DNS labels. */
    assert_hooks_invalid(
        s,
        CC_HOOK("a.b.c", "{'service':{}}") "," CC_HOOK(
            "d.e.f",
            "{'service':{'"
            "namespace':'n','"
            "name':'s','port':"
            "0}}") "," CC_HOOK("g.h.i",
                               "{'service':{'namespace':'n','name':'s','port':"
                               "65536}}") "," CC_HOOK("j.k.l",
                                                      "{'service':{'namespace':'n'"
                                                      ",'name':'s','path':'hook'}"
                                                      "}") "," CC_HOOK("m.n.o",
                                                                       "{'service'"
                                                                       ":{'"
                                                                       "namespace'"
                                                                       ":'n','"
                                                                       "name':'s',"
                                                                       "'path':'//"
                                                                       "'}}") "," CC_HOOK("p"
                                                                                          "."
                                                                                          "q"
                                                                                          "."
                                                                                          "r",
                                                                                          "{"
                                                                                          "'"
                                                                                          "s"
                                                                                          "e"
                                                                                          "r"
                                                                                          "v"
                                                                                          "i"
                                                                                          "c"
                                                                                          "e"
                                                                                          "'"
                                                                                          ":"
                                                                                          "{"
                                                                                          "'"
                                                                                          "n"
                                                                                          "a"
                                                                                          "m"
                                                                                          "e"
                                                                                          "s"
                                                                                          "p"
                                                                                          "a"
                                                                                          "c"
                                                                                          "e"
                                                                                          "'"
                                                                                          ":"
                                                                                          "'"
                                                                                          "n"
                                                                                          "'"
                                                                                          ","
                                                                                          "'"
                                                                                          "n"
                                                                                          "a"
                                                                                          "m"
                                                                                          "e"
                                                                                          "'"
                                                                                          ":"
                                                                                          "'"
                                                                                          "s"
                                                                                          "'"
                                                                                          ","
                                                                                          "'"
                                                                                          "p"
                                                                                          "a"
                                                                                          "t"
                                                                                          "h"
                                                                                          "'"
                                                                                          ":"
                                                                                          "'"
                                                                                          "/"
                                                                                          "a"
                                                                                          "/"
                                                                                          "/"
                                                                                          "H"
                                                                                          "o"
                                                                                          "o"
                                                                                          "k"
                                                                                          "_"
                                                                                          "1"
                                                                                          "/"
                                                                                          "'"
                                                                                          "}"
                                                                                          "}") "," CC_HOOK("s.t.u",
                                                                                                           "{'service':{'namespace':'n','name':'s','path':'/'}}") "," CC_HOOK("v.w.x",
                                                                                                                                                                              "{'service':{'namespace':'n','name':'s','path':'/a.b/c/'}}"),
        CAUSES("webhooks[0].clientConfig.service.name|Required value: service "
               "name is required",
               "webhooks[0].clientConfig.service.namespace|Required value: "
               "service namespace is "
               "required",
               "webhooks[1].clientConfig.service.port|Invalid value: 0: port is "
               "not valid: must be "
               "between 1 and 65535, inclusive",
               "webhooks[2].clientConfig.service.port|Invalid value: 65536: port "
               "is not valid: "
               "must be between 1 and 65535, inclusive",
               "webhooks[3].clientConfig.service.path|Invalid value: \"hook\": "
               "must start with a "
               "'/'",
               "webhooks[4].clientConfig.service.path|Invalid value: \"//\": "
               "segment[0] may not be "
               "empty",
               "webhooks[5].clientConfig.service.path|Invalid value: "
               "\"/a//Hook_1/\": segment[1] "
               "may not be empty",
               "webhooks[5].clientConfig.service.path|Invalid value: "
               "\"/a//Hook_1/\": segment[2]: "
               "a lowercase RFC 1123 subdomain must consist of lower case "
               "alphanumeric "
               "characters, '-' or '.', and must start and end with an "
               "alphanumeric character "
               "(e.g. 'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'"
               ")"));
}

#define RULE_HOOK(name, rule) HOOK(name) ",'rules':[" rule "]}"

static void test_rules(void **state)
{
    ips *s = *state;
    /* Operations: at least one, '*' alone, known ones. */
    assert_hooks_invalid(
        s,
        RULE_HOOK("a.b.c",
                  "{'apiGroups':[''],'apiVersions':['v1'],'resources':['"
                  "pods']}") "," RULE_HOOK("d.e.f",
                                           "{'operations':['*','CREATE','PATCH'],'apiGroups':[''],"
                                           "'apiVersions':['v1'],'resources':['pods']}"),
        CAUSES("webhooks[0].rules[0].operations|Required value",
               "webhooks[1].rules[0].operations|Invalid value: "
               "[]admissionregistration.OperationType{\"*\", \"CREATE\", "
               "\"PATCH\"}: if '*' is "
               "present, must not specify other operations",
               "webhooks[1].rules[0].operations[2]|Unsupported value: \"PATCH\": "
               "supported "
               "values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\""));
    /* API groups and versions: at least one, '*' alone, no empty version;
     * a scope among the three. */
    assert_hooks_invalid(
        s,
        RULE_HOOK("a.b.c",
                  "{'operations':['CREATE'],'resources':['pods'],'scope':"
                  "'Global'}") "," RULE_HOOK("d.e.f",
                                             "{'operations':['CREATE'],'apiGroups':['*','apps'],"
                                             "'apiVersions':['v1','*',''],'resources':['pods']}"),
        CAUSES("webhooks[0].rules[0].apiGroups|Required value",
               "webhooks[0].rules[0].apiVersions|Required value",
               "webhooks[0].rules[0].scope|Unsupported value: \"Global\": "
               "supported values: \"*\", "
               "\"Cluster\", \"Namespaced\"",
               "webhooks[1].rules[0].apiGroups|Invalid value: []string{\"*\", "
               "\"apps\"}: if '*' is "
               "present, must not specify other API groups",
               "webhooks[1].rules[0].apiVersions|Invalid value: []string{\"v1\", "
               "\"*\", \"\"}: if "
               "'*' is present, must not specify other API versions",
               "webhooks[1].rules[0].apiVersions[2]|Required value"));
    /* Resources and their subresource forms. */
#define RES(name, list)                                                                            \
    RULE_HOOK(name, "{'operations':['CREATE'],'apiGroups':[''],'apiVersions':['v1'],"              \
                    "'resources':" list "}")
    assert_hooks_invalid(
        s,
        RES("a.b.c", "[]") "," RES("d.e.f", "['pods','']") "," RES("g.h.i", "['*/*','pods']") "," RES("j.k.l", "['*','pods']") "," RES(
            "m.n.o",
            "['pods/*','pods/status']") "," RES("p.q.r",
                                                "['*/status','pods/"
                                                "status']") "," RES("s.t.u",
                                                                    "['"
                                                                    "pods',"
                                                                    "'*']") "," RES("v.w.x",
                                                                                    "['*','pods/"
                                                                                    "log','*/"
                                                                                    "scale','"
                                                                                    "deployments/"
                                                                                    "*']"),
        CAUSES("webhooks[0].rules[0].resources|Required value",
               "webhooks[1].rules[0].resources[1]|Required value",
               "webhooks[2].rules[0].resources|Invalid value: []string{\"*/*\", \"pods\"}: if "
               "'*/*' is present, must not specify other resources",
               "webhooks[3].rules[0].resources|Invalid value: []string{\"*\", \"pods\"}: if '*' is "
               "present, must not specify other resources without subresources",
               "webhooks[4].rules[0].resources[1]|Invalid value: \"pods/status\": if 'pods/*' is "
               "present, must not specify pods/status",
               "webhooks[5].rules[0].resources[1]|Invalid value: \"pods/status\": if '*/status' is "
               "present, must not specify pods/status"));
#undef RES
}

static void test_policies(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(
        s, MWC,
        MUTATING(
            "bad") "{'name':'a.b.c','clientConfig':{'url':'https://x.y'},"
                   "'admissionReviewVersions':['v1'],'failurePolicy':'Retry',"
                   "'matchPolicy':'Loose','timeoutSeconds':0,'reinvocationPolicy':'Always'},"
                   "{'name':'d.e.f','clientConfig':{'url':'https://x.y'},"
                   "'admissionReviewVersions':['v1'],'sideEffects':'Some','timeoutSeconds':31},"
                   "{'name':'g.h.i','clientConfig':{'url':'https://x.y'},"
                   "'admissionReviewVersions':['v1'],'sideEffects':'Unknown','timeoutSeconds':30}"
                   "]}");
    assert_invalid(
        r, NULL,
        CAUSES("webhooks[0].failurePolicy|Unsupported value: \"Retry\": supported values: "
               "\"Fail\", \"Ignore\"",
               "webhooks[0].matchPolicy|Unsupported value: \"Loose\": supported values: "
               "\"Equivalent\", \"Exact\"",
               "webhooks[0].sideEffects|Required value: must specify one of None, NoneOnDryRun",
               "webhooks[0].timeoutSeconds|Invalid value: 0: the timeout value must be between 1 "
               "and 30 seconds",
               "webhooks[0].reinvocationPolicy|Unsupported value: \"Always\": supported values: "
               "\"IfNeeded\", \"Never\"",
               "webhooks[1].sideEffects|Unsupported value: \"Some\": supported values: \"None\", "
               "\"NoneOnDryRun\"",
               "webhooks[1].timeoutSeconds|Invalid value: 31: the timeout value must be between 1 "
               "and 30 seconds",
               "webhooks[2].sideEffects|Unsupported value: \"Unknown\": supported values: "
               "\"None\", \"NoneOnDryRun\""));
    resp_free(r);
}

static void test_review_versions(void **state)
{
    ips *s = *state;
    assert_hooks_invalid(
        s,
        "{'name':'a.b.c','clientConfig':{'url':'https://x.y'},'sideEffects':'None'},"
        "{'name':'d.e.f','clientConfig':{'url':'https://x.y'},'sideEffects':'None',"
        "'admissionReviewVersions':[]},"
        "{'name':'g.h.i','clientConfig':{'url':'https://x.y'},'sideEffects':'None',"
        "'admissionReviewVersions':['v2']},"
        "{'name':'j.k.l','clientConfig':{'url':'https://x.y'},'sideEffects':'None',"
        "'admissionReviewVersions':['v1','V1beta1','v1']}",
        CAUSES("webhooks[0].admissionReviewVersions|Required value: must specify one of v1, "
               "v1beta1",
               "webhooks[1].admissionReviewVersions|Required value: must specify one of v1, "
               "v1beta1",
               "webhooks[2].admissionReviewVersions|Invalid value: []string{\"v2\"}: must include "
               "at least one of v1, v1beta1",
               "webhooks[3].admissionReviewVersions[1]|Invalid value: \"V1beta1\": a DNS-1035 "
               "label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  "
               "or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
               "webhooks[3].admissionReviewVersions[2]|Invalid value: \"v1\": duplicate "
               "version"));
}

static void test_selectors(void **state)
{
    ips *s = *state;
    assert_hooks_invalid(
        s,
        HOOK("a.b.c") ",'namespaceSelector':{'matchLabels':{'bad key':'v'},"
                      "'matchExpressions':[{'key':'env','operator':'In'},"
                      "{'key':'env','operator':'Exists','values':['x']},"
                      "{'key':'env','operator':'Near','values':['a']}]},"
                      "'objectSelector':{'matchExpressions':[{'key':'-k','operator':'NotIn',"
                      "'values':['ok','not ok']}]}}",
        CAUSES(
            "webhooks[0].namespaceSelector.matchLabels|Invalid value: \"bad key\": name part "
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
            "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "webhooks[0].namespaceSelector.matchExpressions[0].values|Required value: must be "
            "specified when `operator` is 'In' or 'NotIn'",
            "webhooks[0].namespaceSelector.matchExpressions[1].values|Forbidden: may not be "
            "specified when `operator` is 'Exists' or 'DoesNotExist'",
            "webhooks[0].namespaceSelector.matchExpressions[2].operator|Invalid value: \"Near\": "
            "not a valid selector operator",
            "webhooks[0].objectSelector.matchExpressions[0].key|Invalid value: \"-k\": name part "
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
            "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "webhooks[0].objectSelector.matchExpressions[0].values[1]|Invalid value: \"not "
            "ok\": a valid label must be an empty string or consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
            "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"));
}

static void test_match_conditions(void **state)
{
    ips *s = *state;
    assert_hooks_invalid(
        s,
        HOOK("a.b.c") ",'matchConditions':[{'name':'ok','expression':'true'},"
                      "{'name':'','expression':'  '},{'name':'bad name','expression':'true'},"
                      "{'name':'ok','expression':'false'}]}",
        CAUSES("webhooks[0].matchConditions[1].expression|Required value",
               "webhooks[0].matchConditions[1].name|Required value",
               "webhooks[0].matchConditions[2].name|Invalid value: \"bad name\": name part must "
               "consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
               "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
               "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
               "webhooks[0].matchConditions[3].name|Duplicate value: \"ok\""));
    /* At most 64. */
    char body[8192] = VALIDATING("many") HOOK("a.b.c") ",'matchConditions':[";
    for (int i = 0; i < 65; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body),
                 "%s{'name':'c%d','expression':'true'}", i ? "," : "", i);
    strcat(body, "]}]}");
    http_resp *r = tu_post(s, VWC, body);
    assert_invalid(r, NULL,
                   CAUSES("webhooks[0].matchConditions|Too many: 65: must have at most 64 items"));
    resp_free(r);
    /* A valid one is kept as it is. */
    r = tu_post(s, VWC,
                VALIDATING("mc") HOOK("a.b.c") ",'matchConditions':[{'name':'example.com/not-mine',"
                                               "'expression':'request.name != \\'mine\\''}]}]}");
    assert_http(r, 201);
    assert_string_equal(jstr(r->json, "webhooks[0].matchConditions[0].name"),
                        "example.com/not-mine");
    resp_free(r);
}

/* ---- printing, discovery, OpenAPI -------------------------------------------- */

static void test_printing(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, MWC, MUTATING("two") HOOK("a.b.c") "}," HOOK("d.e.f") "}]}");
    assert_http(r, 201);
    resp_free(r);
    r = tu_post(s, MWC, MUTATING("none") "]}");
    assert_http(r, 201);
    resp_free(r);
    /* NAME, WEBHOOKS (how many), AGE. */
    r = http_call(s, "GET", NULL, NULL, IPS_HEADERS(TABLE), MWC);
    assert_http(r, 200);
    json_t *cols = json_object_get(r->json, "columnDefinitions");
    assert_int_equal(json_array_size(cols), 3);
    assert_string_equal(jstr(cols, "[0].name"), "Name");
    assert_string_equal(jstr(cols, "[1].name"), "Webhooks");
    assert_string_equal(jstr(cols, "[1].type"), "integer");
    assert_string_equal(jstr(cols, "[2].name"), "Age");
    tu_assert_json(ckube_json_get_path(r->json, "rows[0].cells"), "['none',0,'0s']");
    tu_assert_json(ckube_json_get_path(r->json, "rows[1].cells"), "['two',2,'0s']");
    resp_free(r);
}

static void test_discovery_and_openapi(void **state)
{
    ips *s = *state;
    http_resp *r = HGET(s, GV);
    assert_http(r, 200);
    tu_assert_json(json_object_get(r->json, "resources"),
                   "[{'name':'mutatingwebhookconfigurations',"
                   "'singularName':'mutatingwebhookconfiguration','namespaced':false,"
                   "'kind':'MutatingWebhookConfiguration','verbs':['create','delete',"
                   "'deletecollection','get','list','patch','update','watch'],"
                   "'categories':['api-extensions']},"
                   "{'name':'validatingwebhookconfigurations',"
                   "'singularName':'validatingwebhookconfiguration','namespaced':false,"
                   "'kind':'ValidatingWebhookConfiguration','verbs':['create','delete',"
                   "'deletecollection','get','list','patch','update','watch'],"
                   "'categories':['api-extensions']}]");
    resp_free(r);
    r = HGET(s, "/apis");
    assert_http(r, 200);
    bool found = false;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(r->json, "groups"), i, g)
    {
        found |=
            !strcmp(jstr(g, "name"), "admissionregistration.k8s.io") &&
            !strcmp(jstr(g, "preferredVersion.groupVersion"), "admissionregistration.k8s.io/v1");
    }
    assert_true(found);
    resp_free(r);

    /* What kubectl explain reads: upstream's required fields and its
     * list-type maps keyed by name, merged by name; no ckube markers. */
    r = HGET(s, "/openapi/v3/apis/admissionregistration.k8s.io/v1");
    assert_http(r, 200);
    json_t *schemas = ckube_json_get_path(r->json, "components.schemas");
    const char *kinds[] = {"Mutating", "Validating"};
    for (size_t k = 0; k < 2; k++) {
        char name[128];
        snprintf(name, sizeof name, "io.k8s.api.admissionregistration.v1.%sWebhookConfiguration",
                 kinds[k]);
        json_t *hooks = ckube_json_get_path(json_object_get(schemas, name), "properties.webhooks");
        assert_string_equal(jstr(hooks, "x-kubernetes-list-type"), "map");
        tu_assert_json(json_object_get(hooks, "x-kubernetes-list-map-keys"), "['name']");
        assert_string_equal(jstr(hooks, "x-kubernetes-patch-merge-key"), "name");
        assert_string_equal(jstr(hooks, "x-kubernetes-patch-strategy"), "merge");
        assert_null(json_object_get(hooks, "x-ckube-list-type"));
        snprintf(name, sizeof name, "io.k8s.api.admissionregistration.v1.%sWebhook", kinds[k]);
        json_t *hook = json_object_get(schemas, name);
        tu_assert_json(json_object_get(hook, "required"),
                       "['name','clientConfig','sideEffects','admissionReviewVersions']");
        assert_string_equal(jstr(hook, "properties.matchConditions.x-kubernetes-list-type"), "map");
        assert_int_equal(
            json_object_get(ckube_json_get_path(hook, "properties"), "reinvocationPolicy") != NULL,
            k == 0);
    }
    tu_assert_json(json_object_get(json_object_get(schemas, "io.k8s.api.admissionregistration.v1."
                                                            "ServiceReference"),
                                   "required"),
                   "['namespace','name']");
    resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_review_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_selectors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_match_conditions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_printing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discovery_and_openapi, setup, teardown),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
