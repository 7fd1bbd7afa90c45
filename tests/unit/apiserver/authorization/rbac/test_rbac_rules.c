/* RBAC's matching (apiserver/authorization/rbac/rules.h), case by case
 * against upstream's semantics (pkg/apis/rbac/v1 evaluation helpers,
 * plugin/pkg/auth/authorizer/rbac RuleAllows and appliesTo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <jansson.h>

#include "apiserver/authorization/rbac/rules.h"

/* Whether the single rule (JSON) allows the request. */
static bool allows(const char *rule_json, rbac_request req)
{
    json_error_t e;
    json_t *rules = json_loads(rule_json, 0, &e);
    assert_non_null(rules);
    rbac_rule *r = NULL;
    size_t n = 0;
    assert_int_equal(rbac_rules_compile(rules, &r, &n), 0);
    json_decref(rules);
    bool ok = false;
    for (size_t i = 0; i < n; i++)
        ok |= rbac_rule_allows(&r[i], &req);
    rbac_rules_free(r, n);
    return ok;
}

#define RES(v_, g_, r_, s_, n_)                                                                    \
    ((rbac_request){.verb = (v_),                                                                  \
                    .resource_request = true,                                                      \
                    .api_group = (g_),                                                             \
                    .resource = (r_),                                                              \
                    .subresource = (s_),                                                           \
                    .name = (n_),                                                                  \
                    .namespace_ = "default"})
#define URL(v_, p_) ((rbac_request){.verb = (v_), .resource_request = false, .path = (p_)})

static void test_verbs_and_groups(void **state)
{
    (void)state;
    const char *r =
        "[{\"verbs\":[\"get\",\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]";
    assert_true(allows(r, RES("get", "", "pods", "", "")));
    assert_true(allows(r, RES("list", "", "pods", "", "")));
    assert_false(allows(r, RES("watch", "", "pods", "", "")));
    assert_false(allows(r, RES("get", "apps", "pods", "", "")));
    assert_false(allows(r, RES("get", "", "services", "", "")));
    /* "*" in each list. */
    assert_true(allows("[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}]",
                       RES("deletecollection", "apps", "deployments", "scale", "x")));
    /* No apiGroups list: matches no group, not even the core one. */
    assert_false(
        allows("[{\"verbs\":[\"get\"],\"resources\":[\"pods\"]}]", RES("get", "", "pods", "", "")));
    /* No verbs: nothing. */
    assert_false(allows("[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]",
                        RES("get", "", "pods", "", "")));
    /* Verbs are case-sensitive, as upstream compares them. */
    assert_false(allows("[{\"verbs\":[\"GET\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]",
                        RES("get", "", "pods", "", "")));
}

static void test_subresources(void **state)
{
    (void)state;
    const char *pods = "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]";
    /* "pods" does not reach pods/log, nor pods/log pods. */
    assert_false(allows(pods, RES("get", "", "pods", "log", "")));
    const char *log = "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"]}]";
    assert_true(allows(log, RES("get", "", "pods", "log", "")));
    assert_false(allows(log, RES("get", "", "pods", "", "")));
    assert_false(allows(log, RES("get", "", "pods", "status", "")));
    /* "<star>/scale" is the scale subresource of any resource... */
    const char *scale = "[{\"verbs\":[\"get\"],\"apiGroups\":[\"*\"],\"resources\":[\"*/scale\"]}]";
    assert_true(allows(scale, RES("get", "apps", "deployments", "scale", "")));
    assert_true(allows(scale, RES("get", "", "replicationcontrollers", "scale", "")));
    assert_false(allows(scale, RES("get", "apps", "deployments", "", "")));
    assert_false(allows(scale, RES("get", "apps", "deployments", "status", "")));
    /* ...but "pods/<star>" is not every subresource of pods, and
     * "<star>/<star>" is only the subresource literally named "*". */
    const char *star = "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/*\"]}]";
    assert_false(allows(star, RES("get", "", "pods", "log", "")));
    const char *ss = "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"*/*\"]}]";
    assert_false(allows(ss, RES("get", "", "pods", "log", "")));
    /* "*" covers subresources too. */
    assert_true(allows("[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"*\"]}]",
                       RES("get", "", "pods", "log", "")));
}

static void test_resource_names(void **state)
{
    (void)state;
    const char *r = "[{\"verbs\":[\"get\",\"list\"],\"apiGroups\":[\"\"],\"resources\":"
                    "[\"configmaps\"],\"resourceNames\":[\"a\",\"b\"]}]";
    assert_true(allows(r, RES("get", "", "configmaps", "", "a")));
    assert_true(allows(r, RES("get", "", "configmaps", "", "b")));
    assert_false(allows(r, RES("get", "", "configmaps", "", "c")));
    /* A list has no name: a rule with names does not allow it. */
    assert_false(allows(r, RES("list", "", "configmaps", "", "")));
    /* An empty resourceNames list means any name. */
    assert_true(allows("[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
                       "\"resourceNames\":[]}]",
                       RES("get", "", "configmaps", "", "z")));
}

static void test_non_resource_urls(void **state)
{
    (void)state;
    const char *r = "[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/healthz\",\"/version\","
                    "\"/api/*\",\"/openapi*\"]}]";
    assert_true(allows(r, URL("get", "/healthz")));
    assert_true(allows(r, URL("get", "/version")));
    assert_false(allows(r, URL("get", "/version/")));
    assert_false(allows(r, URL("post", "/healthz")));
    assert_true(allows(r, URL("get", "/api/v1")));
    assert_true(allows(r, URL("get", "/api/")));
    assert_false(allows(r, URL("get", "/api")));
    /* A prefix without a slash before the star matches as a prefix. */
    assert_true(allows(r, URL("get", "/openapi/v3")));
    assert_true(allows(r, URL("get", "/openapiX")));
    /* Case-sensitive. */
    assert_false(allows(r, URL("get", "/HEALTHZ")));
    assert_true(allows("[{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}]", URL("put", "/x")));
    /* Resource rules do not allow non-resource requests and the other way. */
    assert_false(allows("[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}]",
                        URL("get", "/healthz")));
    assert_false(allows("[{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}]",
                        RES("get", "", "pods", "", "")));
}

static void test_compile(void **state)
{
    (void)state;
    rbac_rule *r = NULL;
    size_t n = 7;
    json_t *notarray = json_object();
    assert_int_equal(rbac_rules_compile(notarray, &r, &n), -1);
    assert_null(r);
    assert_int_equal(n, 0);
    json_decref(notarray);
    /* Non-object entries and non-string members are skipped. */
    json_t *rules = json_loads("[1, null, {\"verbs\":[\"get\",2,null],\"apiGroups\":\"x\","
                               "\"resources\":[\"pods\"]}, {}]",
                               0, NULL);
    assert_int_equal(rbac_rules_compile(rules, &r, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(r[0].verbs[0], "get");
    assert_null(r[0].verbs[1]);
    assert_null(r[0].api_groups); /* not an array */
    assert_null(r[1].verbs);
    rbac_rules_free(r, n);
    json_decref(rules);
}

static bool applies(const char *subject_json, const char *user, const char *const *groups,
                    size_t ng, const char *ns)
{
    json_t *s = json_loads(subject_json, 0, NULL);
    assert_non_null(s);
    rbac_user u = {.name = user, .groups = groups, .ngroups = ng};
    bool ok = rbac_subject_applies(s, &u, ns);
    json_decref(s);
    return ok;
}

static void test_subjects(void **state)
{
    (void)state;
    const char *groups[] = {"system:authenticated", "devs"};
    assert_true(applies("{\"kind\":\"User\",\"name\":\"jane\"}", "jane", NULL, 0, ""));
    assert_false(applies("{\"kind\":\"User\",\"name\":\"jane\"}", "Jane", NULL, 0, ""));
    assert_true(applies("{\"kind\":\"Group\",\"name\":\"devs\"}", "bob", groups, 2, "ns"));
    assert_false(applies("{\"kind\":\"Group\",\"name\":\"ops\"}", "bob", groups, 2, "ns"));
    /* A group subject does not match a user of that name. */
    assert_false(applies("{\"kind\":\"Group\",\"name\":\"bob\"}", "bob", groups, 2, "ns"));
    /* ServiceAccounts: qualified, or in the binding's namespace. */
    const char *sa = "system:serviceaccount:team:bot";
    assert_true(applies("{\"kind\":\"ServiceAccount\",\"name\":\"bot\",\"namespace\":\"team\"}", sa,
                        NULL, 0, ""));
    assert_true(applies("{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}", sa, NULL, 0, "team"));
    assert_false(applies("{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}", sa, NULL, 0, "other"));
    /* A ClusterRoleBinding's unqualified ServiceAccount names nobody. */
    assert_false(applies("{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}", sa, NULL, 0, ""));
    assert_false(applies("{\"kind\":\"ServiceAccount\",\"name\":\"bo\",\"namespace\":\"team\"}", sa,
                         NULL, 0, ""));
    assert_false(applies("{\"kind\":\"ServiceAccount\",\"name\":\"bot\",\"namespace\":\"tea\"}", sa,
                         NULL, 0, ""));
    /* Unknown kinds and missing fields name nobody. */
    assert_false(applies("{\"kind\":\"Robot\",\"name\":\"jane\"}", "jane", NULL, 0, ""));
    assert_false(applies("{\"name\":\"jane\"}", "jane", NULL, 0, ""));
    assert_false(applies("{\"kind\":\"User\"}", "jane", NULL, 0, ""));
}

/* What `owner` (rules JSON) lacks of `wanted` (rules JSON), or NULL. */
static char *uncovered(const char *owner_json, const char *wanted_json)
{
    json_error_t e;
    json_t *owner = json_loads(owner_json, 0, &e), *wanted = json_loads(wanted_json, 0, &e);
    assert_non_null(owner);
    assert_non_null(wanted);
    rbac_rule *r = NULL;
    size_t n = 0;
    rbac_rules_compile(owner, &r, &n);
    char *out = rbac_uncovered_rights(r, n, wanted);
    rbac_rules_free(r, n);
    json_decref(owner);
    json_decref(wanted);
    return out;
}

static void expect_uncovered(const char *owner, const char *wanted, const char *want)
{
    char *got = uncovered(owner, wanted);
    if (!want)
        assert_null(got);
    else
        assert_string_equal(got, want);
    free(got);
}

/* validation.Covers over BreakdownRule, CompactRules and CompactString,
 * as ConfirmNoEscalation prints what is missing. */
static void test_coverage(void **state)
{
    (void)state;
    const char *admin = "[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]},"
                        "{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}]";
    const char *cm_get = "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]}]";
    /* everything covers everything; a right held exactly covers itself */
    expect_uncovered(admin, admin, NULL);
    expect_uncovered(cm_get, cm_get, NULL);
    expect_uncovered("[]", "[]", NULL);
    /* missing verbs of one resource are compacted into one line, in the
     * order asked; lines are sorted */
    expect_uncovered(cm_get,
                     "[{\"verbs\":[\"get\",\"delete\",\"list\"],\"apiGroups\":[\"\",\"apps\"],"
                     "\"resources\":[\"configmaps\"]}]",
                     "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\" \"list\"]}\n"
                     "{APIGroups:[\"apps\"], Resources:[\"configmaps\"], Verbs:[\"get\" \"delete\" "
                     "\"list\"]}");
    /* a "*" asked for is covered only by a "*" */
    expect_uncovered(cm_get, "[{\"verbs\":[\"*\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]}]",
                     "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"*\"]}");
    /* subresources: "<star>/scale" covers any resource's scale, "pods"
     * does not cover pods/log */
    expect_uncovered("[{\"verbs\":[\"get\"],\"apiGroups\":[\"*\"],\"resources\":[\"*/scale\","
                     "\"pods\"]}]",
                     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"apps\"],\"resources\":["
                     "\"deployments/scale\",\"pods\",\"pods/log\"]}]",
                     "{APIGroups:[\"apps\"], Resources:[\"pods/log\"], Verbs:[\"get\"]}");
    /* resource names: an owner without names covers any; with names only
     * those; a wanted rule without names needs an owner without names */
    expect_uncovered(cm_get,
                     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
                     "\"resourceNames\":[\"a\"]}]",
                     NULL);
    expect_uncovered("[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
                     "\"resourceNames\":[\"a\"]}]",
                     "[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
                     "\"resourceNames\":[\"a\",\"b\"]},"
                     "{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]}]",
                     "{APIGroups:[\"\"], Resources:[\"configmaps\"], ResourceNames:[\"b\"], "
                     "Verbs:[\"get\"]}\n"
                     "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\"]}");
    /* URLs: a prefix ending in "*" covers longer paths; each missing URL
     * right is its own line */
    expect_uncovered("[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/healthz/*\",\"/version\"]}]",
                     "[{\"verbs\":[\"get\",\"post\"],\"nonResourceURLs\":[\"/healthz/etcd\","
                     "\"/version\"]}]",
                     "{NonResourceURLs:[\"/healthz/etcd\"], Verbs:[\"post\"]}\n"
                     "{NonResourceURLs:[\"/version\"], Verbs:[\"post\"]}");
    /* resource rights do not cover URL rights, nor the reverse */
    expect_uncovered("[{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}]",
                     "[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\"]}]",
                     "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}");
    expect_uncovered("[{\"verbs\":[\"*\"],\"nonResourceURLs\":[\"*\"]}]", cm_get,
                     "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\"]}");
    /* the same right asked twice is one line */
    expect_uncovered("[]",
                     "[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/x\"]},"
                     "{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/x\"]}]",
                     "{NonResourceURLs:[\"/x\"], Verbs:[\"get\"]}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verbs_and_groups), cmocka_unit_test(test_subresources),
        cmocka_unit_test(test_resource_names),   cmocka_unit_test(test_non_resource_urls),
        cmocka_unit_test(test_compile),          cmocka_unit_test(test_subjects),
        cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
