/* rbac.authorization.k8s.io/v1 served (registry/rbac/rbac.c), over HTTP
 * from an API server running in-process (util/inproc_server.h): upstream's
 * validation messages (422 Status and its causes), the defaulting of a
 * subject's and a roleRef's apiGroup, the roleRef that cannot change, path
 * segment names, server-side printing (kubectl get, -o wide), server-side
 * apply's atomic roleRef and the OpenAPI description kubectl explain
 * reads. */
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

#define GV "/apis/rbac.authorization.k8s.io/v1"
#define TABLE "Accept: application/json;as=Table;v=v1;g=meta.k8s.io"

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

/* ---- roles ---------------------------------------------------------------- */

static void test_role_rules(void **state)
{
    ips *s = *state;
    /* A rule needs verbs, and API groups and resources unless it is about
     * non-resource URLs, which a namespaced Role cannot name, and which
     * no rule mixes with resources. */
    http_resp *r = tu_post(s, GV "/namespaces/default/roles",
                           "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'Role',"
                           "'metadata':{'name':'bad'},'rules':["
                           "{'apiGroups':[''],'resources':['pods']},"
                           "{'verbs':['get']},"
                           "{'verbs':['get'],'nonResourceURLs':['/healthz','/metrics']},"
                           "{'verbs':['get'],'resources':['pods'],'nonResourceURLs':['/x']}]}");
    assert_invalid(
        r,
        "Role.rbac.authorization.k8s.io \"bad\" is invalid: [rules[0].verbs: Required value: verbs "
        "must contain at least one value, rules[1].apiGroups: Required value: resource rules must "
        "supply at least one api group, rules[1].resources: Required value: resource rules must "
        "supply at least one resource, rules[2].nonResourceURLs: Invalid value: "
        "[]string{\"/healthz\", \"/metrics\"}: namespaced rules cannot apply to non-resource URLs, "
        "rules[3].nonResourceURLs: Invalid value: []string{\"/x\"}: namespaced rules cannot apply "
        "to non-resource URLs, rules[3].nonResourceURLs: Invalid value: []string{\"/x\"}: rules "
        "cannot apply to both regular resources and non-resource URLs]",
        CAUSES("rules[0].verbs|Required value: verbs must contain at least one value",
               "rules[1].apiGroups|Required value: resource rules must supply at least one api "
               "group",
               "rules[1].resources|Required value: resource rules must supply at least one "
               "resource",
               "rules[2].nonResourceURLs|Invalid value: []string{\"/healthz\", \"/metrics\"}: "
               "namespaced rules cannot apply to non-resource URLs",
               "rules[3].nonResourceURLs|Invalid value: []string{\"/x\"}: namespaced rules cannot "
               "apply to non-resource URLs",
               "rules[3].nonResourceURLs|Invalid value: []string{\"/x\"}: rules cannot apply to "
               "both regular resources and non-resource URLs"));
    assert_string_equal(
        jstr(json_array_get(ckube_json_get_path(r->json, "details.causes"), 0), "reason"),
        "FieldValueRequired");
    resp_free(r);

    /* A valid Role with a name of the kind RBAC's bootstrap roles have
     * (path segment names: colons allowed), and one without rules. */
    r = tu_post(s, GV "/namespaces/default/roles",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'Role',"
                "'metadata':{'name':'system:controller:reader'},'rules':["
                "{'apiGroups':['','apps'],'resources':['pods','deployments/scale'],"
                "'resourceNames':['web'],'verbs':['get','update']}]}");
    assert_http(r, 201);
    tu_assert_json(json_object_get(r->json, "rules"),
                   "[{'apiGroups':['','apps'],'resources':['pods','deployments/scale'],"
                   "'resourceNames':['web'],'verbs':['get','update']}]");
    resp_free(r);
    r = tu_post(s, GV "/namespaces/default/roles",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'Role',"
                "'metadata':{'name':'empty'}}");
    assert_http(r, 201);
    resp_free(r);
    r = tu_post(s, GV "/namespaces/default/roles",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'Role',"
                "'metadata':{'name':'a%b'}}");
    assert_invalid(r,
                   "Role.rbac.authorization.k8s.io \"a%b\" is invalid: metadata.name: Invalid "
                   "value: \"a%b\": may not contain '%'",
                   CAUSES("metadata.name|Invalid value: \"a%b\": may not contain '%'"));
    resp_free(r);
    /* Roles are namespaced, cluster roles are not. */
    r = tu_post(s, GV "/clusterroles",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRole',"
                "'metadata':{'name':'metrics-reader'},'rules':["
                "{'nonResourceURLs':['/metrics','/metrics/*'],'verbs':['get']},"
                "{'apiGroups':['*'],'resources':['*'],'verbs':['list']}]}");
    assert_http(r, 201);
    assert_string_equal(jstr(r->json, "metadata.namespace"), "");
    resp_free(r);
}

static void test_clusterrole_aggregation(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, GV "/clusterroles",
                           "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRole',"
                           "'metadata':{'name':'agg'},'aggregationRule':{}}");
    assert_invalid(r,
                   "ClusterRole.rbac.authorization.k8s.io \"agg\" is invalid: "
                   "aggregationRule.clusterRoleSelectors: Required value: at least one "
                   "clusterRoleSelector required if aggregationRule is non-nil",
                   CAUSES("aggregationRule.clusterRoleSelectors|Required value: at least one "
                          "clusterRoleSelector required if aggregationRule is non-nil"));
    resp_free(r);

    /* Each selector as metav1's ValidateLabelSelector checks it, then
     * "invalid label selector." for a selector that does not convert. */
    r = tu_post(s, GV "/clusterroles",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRole',"
                "'metadata':{'name':'agg'},'aggregationRule':{'clusterRoleSelectors':["
                "{'matchLabels':{'ok':'yes'}},"
                "{'matchExpressions':[{'key':'k','operator':'Within','values':['a']},"
                "{'key':'k','operator':'In'},"
                "{'key':'bad key','operator':'Exists','values':['x']}]},"
                "{'matchLabels':{'k':'bad value!'}}]}}");
    assert_invalid(
        r, NULL,
        CAUSES("aggregationRule.clusterRoleSelectors[1].matchExpressions[0].operator|Invalid "
               "value: \"Within\": not a valid selector operator",
               "aggregationRule.clusterRoleSelectors[1].matchExpressions[1].values|Required "
               "value: must be specified when `operator` is 'In' or 'NotIn'",
               "aggregationRule.clusterRoleSelectors[1].matchExpressions[2].values|Forbidden: "
               "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
               "aggregationRule.clusterRoleSelectors[1].matchExpressions[2].key|Invalid value: "
               "\"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', "
               "and must start and end with an alphanumeric character (e.g. 'MyName',  or "
               "'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
               "aggregationRule.clusterRoleSelectors[1]|Invalid value: \"null\": invalid label "
               "selector.",
               "aggregationRule.clusterRoleSelectors[2].matchLabels|Invalid value: \"bad "
               "value!\": a valid label must be an empty string or consist of alphanumeric "
               "characters, '-', '_' or '.', and must start and end with an alphanumeric "
               "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
               "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
               "aggregationRule.clusterRoleSelectors[2]|Invalid value: \"null\": invalid label "
               "selector."));
    resp_free(r);

    /* The aggregated role: rules may be empty (a controller fills them
     * upstream; nothing does here). */
    r = tu_post(s, GV "/clusterroles",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRole',"
                "'metadata':{'name':'monitoring'},'aggregationRule':{'clusterRoleSelectors':["
                "{'matchLabels':{'rbac.example.com/aggregate-to-monitoring':'true'}},"
                "{'matchExpressions':[{'key':'tier','operator':'NotIn','values':['x']}]}]},"
                "'rules':[]}");
    assert_http(r, 201);
    tu_assert_json(json_object_get(r->json, "aggregationRule"),
                   "{'clusterRoleSelectors':["
                   "{'matchLabels':{'rbac.example.com/aggregate-to-monitoring':'true'}},"
                   "{'matchExpressions':[{'key':'tier','operator':'NotIn','values':['x']}]}]}");
    resp_free(r);
}

/* ---- bindings --------------------------------------------------------------- */

static void test_binding_defaults(void **state)
{
    ips *s = *state;
    /* SetDefaults_Subject and SetDefaults_RoleBinding: User and Group get
     * this group, a ServiceAccount none (an empty one is left out, as
     * omitempty leaves it), roleRef.apiGroup this group. */
    http_resp *r =
        tu_post(s, GV "/namespaces/default/rolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
                "'metadata':{'name':'rb'},'roleRef':{'kind':'Role','name':'reader'},"
                "'subjects':[{'kind':'User','name':'alice'},"
                "{'kind':'Group','name':'devs','apiGroup':''},"
                "{'kind':'ServiceAccount','name':'builder','apiGroup':'','namespace':''},"
                "{'kind':'ServiceAccount','name':'ci','namespace':'tools'},"
                "{'kind':'User','name':'carol','apiGroup':null}]}");
    assert_http(r, 201);
    tu_assert_json(json_object_get(r->json, "roleRef"),
                   "{'apiGroup':'rbac.authorization.k8s.io','kind':'Role','name':'reader'}");
    tu_assert_json(json_object_get(r->json, "subjects"),
                   "[{'kind':'User','apiGroup':'rbac.authorization.k8s.io','name':'alice'},"
                   "{'kind':'Group','apiGroup':'rbac.authorization.k8s.io','name':'devs'},"
                   "{'kind':'ServiceAccount','name':'builder'},"
                   "{'kind':'ServiceAccount','name':'ci','namespace':'tools'},"
                   "{'kind':'User','apiGroup':'rbac.authorization.k8s.io','name':'carol'}]");
    resp_free(r);
    r = HGET(s, GV "/namespaces/default/rolebindings/rb");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "subjects[0].apiGroup"), "rbac.authorization.k8s.io");
    resp_free(r);
}

static void test_binding_validation(void **state)
{
    ips *s = *state;
    /* No roleRef at all: its apiGroup is defaulted, kind and name are not. */
    http_resp *r = tu_post(s, GV "/namespaces/default/rolebindings",
                           "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
                           "'metadata':{'name':'rb'}}");
    assert_invalid(r,
                   "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: [roleRef.kind: "
                   "Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\", "
                   "roleRef.name: Required value]",
                   CAUSES("roleRef.kind|Unsupported value: \"\": supported values: \"Role\", "
                          "\"ClusterRole\"",
                          "roleRef.name|Required value"));
    assert_string_equal(
        jstr(json_array_get(ckube_json_get_path(r->json, "details.causes"), 0), "reason"),
        "FieldValueNotSupported");
    resp_free(r);
    /* A null roleRef decodes to the empty struct, defaulted the same way. */
    r = tu_post(s, GV "/namespaces/default/rolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
                "'metadata':{'name':'rb'},'roleRef':null}");
    assert_invalid(r, NULL,
                   CAUSES("roleRef.kind|Unsupported value: \"\": supported values: \"Role\", "
                          "\"ClusterRole\"",
                          "roleRef.name|Required value"));
    resp_free(r);

    /* A ClusterRoleBinding binds ClusterRoles only, and its ServiceAccount
     * subjects need a namespace. */
    r = tu_post(s, GV "/clusterrolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRoleBinding',"
                "'metadata':{'name':'crb'},"
                "'roleRef':{'apiGroup':'rbac.example.com','kind':'Role','name':'a/b'},"
                "'subjects':[{'kind':'ServiceAccount','name':'Builder','apiGroup':'v1'},"
                "{'kind':'User','name':'bob','apiGroup':'example.com'},"
                "{'kind':'Group'},{'kind':'Robot','name':'r2d2'}]}");
    assert_invalid(
        r, NULL,
        CAUSES("roleRef.apiGroup|Unsupported value: \"rbac.example.com\": supported values: "
               "\"rbac.authorization.k8s.io\"",
               "roleRef.kind|Unsupported value: \"Role\": supported values: \"ClusterRole\"",
               "roleRef.name|Invalid value: \"a/b\": may not contain '/'",
               "subjects[0].name|Invalid value: \"Builder\": a lowercase RFC 1123 subdomain must "
               "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
               "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
               "subjects[0].apiGroup|Unsupported value: \"v1\": supported values: \"\"",
               "subjects[0].namespace|Required value",
               "subjects[1].apiGroup|Unsupported value: \"example.com\": supported values: "
               "\"rbac.authorization.k8s.io\"",
               "subjects[2].name|Required value",
               "subjects[3].kind|Unsupported value: \"Robot\": supported values: "
               "\"ServiceAccount\", \"User\", \"Group\""));
    assert_true(strstr(jstr(r->json, "message"),
                       "ClusterRoleBinding.rbac.authorization.k8s.io \"crb\" is invalid: "
                       "[roleRef.apiGroup: Unsupported value: \"rbac.example.com\"") ==
                jstr(r->json, "message"));
    resp_free(r);

    /* kubectl create clusterrolebinding x --clusterrole=view with a Role. */
    r = tu_post(s, GV "/clusterrolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRoleBinding',"
                "'metadata':{'name':'crb'},"
                "'roleRef':{'apiGroup':'rbac.authorization.k8s.io','kind':'Role','name':'x'}}");
    assert_invalid(r,
                   "ClusterRoleBinding.rbac.authorization.k8s.io \"crb\" is invalid: "
                   "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                   CAUSES("roleRef.kind|Unsupported value: \"Role\": supported values: "
                          "\"ClusterRole\""));
    resp_free(r);
    r = tu_post(s, GV "/clusterrolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRoleBinding',"
                "'metadata':{'name':'system:prometheus'},"
                "'roleRef':{'apiGroup':'rbac.authorization.k8s.io','kind':'ClusterRole',"
                "'name':'system:metrics'},"
                "'subjects':[{'kind':'ServiceAccount','name':'prom','namespace':'monitoring'}]}");
    assert_http(r, 201);
    resp_free(r);
}

static void test_roleref_immutable(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, GV "/namespaces/default/rolebindings",
                           "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
                           "'metadata':{'name':'rb'},'roleRef':{'apiGroup':"
                           "'rbac.authorization.k8s.io','kind':'Role','name':'reader'},"
                           "'subjects':[{'kind':'User','name':'alice'}]}");
    assert_http(r, 201);
    resp_free(r);
    /* Subjects may change; the roleRef may not (an update without its
     * apiGroup is the same roleRef once defaulted). */
    r = tu_put(s, GV "/namespaces/default/rolebindings/rb",
               "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
               "'metadata':{'name':'rb'},'roleRef':{'kind':'Role','name':'reader'},"
               "'subjects':[{'kind':'Group','name':'devs'}]}");
    assert_http(r, 200);
    assert_string_equal(jstr(r->json, "subjects[0].apiGroup"), "rbac.authorization.k8s.io");
    resp_free(r);
    r = tu_put(s, GV "/namespaces/default/rolebindings/rb",
               "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
               "'metadata':{'name':'rb'},'roleRef':{'apiGroup':'rbac.authorization.k8s.io',"
               "'kind':'ClusterRole','name':'view'}}");
    assert_invalid(r,
                   "RoleBinding.rbac.authorization.k8s.io \"rb\" is invalid: roleRef: Invalid "
                   "value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", "
                   "Kind:\"ClusterRole\", Name:\"view\"}: cannot change roleRef",
                   CAUSES("roleRef|Invalid value: rbac.RoleRef{APIGroup:"
                          "\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", "
                          "Name:\"view\"}: cannot change roleRef"));
    resp_free(r);
    char *b = tu_quote("{'roleRef':{'name':'writer'}}");
    r = HPATCH(s, "application/merge-patch+json", b, GV "/namespaces/default/rolebindings/rb");
    free(b);
    assert_int_equal(r->code, 422);
    assert_string_equal(
        jstr(json_array_get(ckube_json_get_path(r->json, "details.causes"), 0), "message"),
        "Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", "
        "Kind:\"Role\", Name:\"writer\"}: cannot change roleRef");
    resp_free(r);
    r = HGET(s, GV "/namespaces/default/rolebindings/rb");
    assert_string_equal(jstr(r->json, "roleRef.name"), "reader");
    resp_free(r);
}

/* Server-side apply: roleRef is an atomic struct and the lists are
 * atomic, so one manager owns each whole. */
static void test_apply(void **state)
{
    ips *s = *state;
    const char *yaml = "apiVersion: rbac.authorization.k8s.io/v1\n"
                       "kind: ClusterRoleBinding\n"
                       "metadata:\n  name: applied\n"
                       "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n"
                       "  kind: ClusterRole\n  name: view\n"
                       "subjects:\n- kind: User\n  name: alice\n";
    http_resp *r = http_call(s, "PATCH", "application/apply-patch+yaml", yaml, NULL,
                             GV "/clusterrolebindings/applied?fieldManager=tool");
    assert_http(r, 201);
    tu_assert_json(ckube_json_get_path(r->json, "metadata.managedFields[0].fieldsV1"),
                   "{'f:roleRef':{},'f:subjects':{}}");
    assert_string_equal(jstr(r->json, "subjects[0].apiGroup"), "rbac.authorization.k8s.io");
    resp_free(r);
}

/* ---- printing --------------------------------------------------------------- */

static void test_printing(void **state)
{
    ips *s = *state;
    http_resp *r = tu_post(s, GV "/namespaces/default/roles",
                           "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'Role',"
                           "'metadata':{'name':'reader'},'rules':[{'apiGroups':[''],"
                           "'resources':['pods'],'verbs':['get']}]}");
    assert_http(r, 201);
    char created[64];
    snprintf(created, sizeof created, "%s", jstr(r->json, "metadata.creationTimestamp"));
    resp_free(r);
    /* Roles: NAME and CREATED AT, the time itself. */
    r = http_call(s, "GET", NULL, NULL, IPS_HEADERS(TABLE), GV "/namespaces/default/roles");
    assert_http(r, 200);
    json_t *cols = json_object_get(r->json, "columnDefinitions");
    assert_int_equal(json_array_size(cols), 2);
    assert_string_equal(jstr(cols, "[0].name"), "Name");
    assert_string_equal(jstr(cols, "[0].format"), "name");
    assert_string_equal(jstr(cols, "[1].name"), "Created At");
    assert_string_equal(jstr(cols, "[1].type"), "date");
    json_t *cells = ckube_json_get_path(r->json, "rows[0].cells");
    assert_string_equal(jstr(cells, "[0]"), "reader");
    assert_string_equal(jstr(cells, "[1]"), created);
    resp_free(r);

    r = tu_post(s, GV "/namespaces/default/rolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'RoleBinding',"
                "'metadata':{'name':'rb'},'roleRef':{'kind':'ClusterRole','name':'view'},"
                "'subjects':[{'kind':'User','name':'alice'},{'kind':'User','name':'bob'},"
                "{'kind':'Group','name':'devs'},"
                "{'kind':'ServiceAccount','name':'builder','namespace':'ci'},"
                "{'kind':'ServiceAccount','name':'local'}]}");
    assert_http(r, 201);
    resp_free(r);
    /* Bindings: NAME, ROLE, AGE; USERS, GROUPS, SERVICEACCOUNTS with -o
     * wide (priority 1), joined with ", " as upstream's printer. */
    r = http_call(s, "GET", NULL, NULL, IPS_HEADERS(TABLE), GV "/namespaces/default/rolebindings");
    assert_http(r, 200);
    cols = json_object_get(r->json, "columnDefinitions");
    assert_int_equal(json_array_size(cols), 6);
    const char *names[] = {"Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"};
    const int prio[] = {0, 0, 0, 1, 1, 1};
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(jstr(json_array_get(cols, i), "name"), names[i]);
        assert_int_equal(jint(json_array_get(cols, i), "priority"), prio[i]);
    }
    cells = ckube_json_get_path(r->json, "rows[0].cells");
    tu_assert_json(cells,
                   "['rb','ClusterRole/view','0s','alice, bob','devs','ci/builder, /local']");
    resp_free(r);
    r = tu_post(s, GV "/clusterrolebindings",
                "{'apiVersion':'rbac.authorization.k8s.io/v1','kind':'ClusterRoleBinding',"
                "'metadata':{'name':'crb'},'roleRef':{'kind':'ClusterRole','name':'edit'}}");
    assert_http(r, 201);
    resp_free(r);
    r = http_call(s, "GET", NULL, NULL, IPS_HEADERS(TABLE), GV "/clusterrolebindings/crb");
    assert_http(r, 200);
    tu_assert_json(ckube_json_get_path(r->json, "rows[0].cells"),
                   "['crb','ClusterRole/edit','0s','','','']");
    resp_free(r);
}

/* ---- discovery and OpenAPI ---------------------------------------------------- */

static void test_discovery_and_openapi(void **state)
{
    ips *s = *state;
    http_resp *r = HGET(s, GV);
    assert_http(r, 200);
    json_t *res = json_object_get(r->json, "resources");
    assert_int_equal(json_array_size(res), 4);
    size_t i;
    json_t *e;
    json_array_foreach(res, i, e)
    {
        /* no short names, no categories, every verb */
        assert_null(json_object_get(e, "shortNames"));
        assert_null(json_object_get(e, "categories"));
        assert_int_equal(json_array_size(json_object_get(e, "verbs")), 8);
        const char *name = jstr(e, "name");
        bool ns = !strcmp(name, "roles") || !strcmp(name, "rolebindings");
        assert_int_equal(json_is_true(json_object_get(e, "namespaced")), ns);
    }
    resp_free(r);

    /* What kubectl explain reads: upstream's required fields, atomic
     * structs; nothing of ckube's own markers. */
    r = HGET(s, "/openapi/v3/apis/rbac.authorization.k8s.io/v1");
    assert_http(r, 200);
    json_t *schemas = ckube_json_get_path(r->json, "components.schemas");
    json_t *rule = json_object_get(schemas, "io.k8s.api.rbac.v1.PolicyRule");
    tu_assert_json(json_object_get(rule, "required"), "['verbs']");
    assert_null(json_object_get(rule, "x-ckube-required"));
    json_t *ref = json_object_get(schemas, "io.k8s.api.rbac.v1.RoleRef");
    tu_assert_json(json_object_get(ref, "required"), "['apiGroup','kind','name']");
    assert_string_equal(jstr(ref, "x-kubernetes-map-type"), "atomic");
    json_t *subj = json_object_get(schemas, "io.k8s.api.rbac.v1.Subject");
    tu_assert_json(json_object_get(subj, "required"), "['kind','name']");
    json_t *rb = json_object_get(schemas, "io.k8s.api.rbac.v1.RoleBinding");
    tu_assert_json(json_object_get(rb, "required"), "['roleRef']");
    tu_assert_json(json_object_get(rb, "x-kubernetes-group-version-kind"),
                   "[{'group':'rbac.authorization.k8s.io','kind':'RoleBinding','version':'v1'}]");
    assert_non_null(json_object_get(schemas, "io.k8s.api.rbac.v1.AggregationRule"));
    resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_role_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clusterrole_aggregation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binding_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binding_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_roleref_immutable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_printing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_discovery_and_openapi, setup, teardown),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
