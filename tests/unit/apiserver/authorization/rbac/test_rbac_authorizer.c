/* RBAC's decision over the index (apiserver/authorization/rbac/
 * authorizer.h): which bindings apply, roles and cluster roles, the
 * reasons of a denial, and the index following changes and deletions. */
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

#include "apiserver/authorization/rbac/authorizer.h"

static void apply(rbac_index *ix, rbac_kind kind, const char *json, bool deleted)
{
    json_error_t e;
    json_t *o = json_loads(json, 0, &e);
    if (!o)
        fail_msg("bad test JSON: %s", e.text);
    rbac_index_apply(ix, kind, o, deleted);
    json_decref(o);
}

static rbac_request req(const char *verb, const char *group, const char *res, const char *ns)
{
    return (rbac_request){.verb = verb,
                          .resource_request = true,
                          .api_group = group,
                          .resource = res,
                          .subresource = "",
                          .name = "",
                          .namespace_ = ns};
}

static bool can(rbac_index *ix, const char *user, const char *const *groups, size_t ng,
                rbac_request r, char **reason)
{
    rbac_user u = {.name = user, .groups = groups, .ngroups = ng};
    return rbac_authorize(ix, &u, &r, reason, reason); /* whichever applies */
}

#define READER                                                                                     \
    "{\"metadata\":{\"name\":\"reader\",\"namespace\":\"team\"},\"rules\":[{\"verbs\":[\"get\","   \
    "\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]}]}"
#define VIEW                                                                                       \
    "{\"metadata\":{\"name\":\"view\"},\"rules\":[{\"verbs\":[\"get\",\"list\",\"watch\"],"        \
    "\"apiGroups\":[\"\",\"apps\"],\"resources\":[\"*\"]}]}"

static void test_role_binding_in_its_namespace(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_ROLE, READER, false);
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"rb\",\"namespace\":\"team\"},\"roleRef\":{\"apiGroup\":"
          "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"reader\"},\"subjects\":["
          "{\"kind\":\"User\",\"name\":\"jane\"},{\"kind\":\"ServiceAccount\",\"name\":\"bot\"}]}",
          false);
    char *why = NULL;
    /* An allow says which binding allowed, in upstream's words. */
    assert_true(can(ix, "jane", NULL, 0, req("list", "", "configmaps", "team"), &why));
    assert_string_equal(why, "RBAC: allowed by RoleBinding \"rb/team\" of Role \"reader\" to "
                             "User \"jane\"");
    free(why);
    why = NULL;
    assert_true(can(ix, "system:serviceaccount:team:bot", NULL, 0,
                    req("list", "", "configmaps", "team"), &why));
    assert_string_equal(why, "RBAC: allowed by RoleBinding \"rb/team\" of Role \"reader\" to "
                             "ServiceAccount \"bot/team\"");
    free(why);
    why = NULL;
    assert_false(can(ix, "jane", NULL, 0, req("delete", "", "configmaps", "team"), &why));
    assert_null(why);
    /* Another namespace, or cluster-wide: the RoleBinding does not apply. */
    assert_false(can(ix, "jane", NULL, 0, req("list", "", "configmaps", "other"), NULL));
    assert_false(can(ix, "jane", NULL, 0, req("list", "", "configmaps", ""), NULL));
    /* The unqualified ServiceAccount is the binding's namespace's. */
    assert_true(can(ix, "system:serviceaccount:team:bot", NULL, 0,
                    req("get", "", "configmaps", "team"), NULL));
    assert_false(can(ix, "system:serviceaccount:other:bot", NULL, 0,
                     req("get", "", "configmaps", "team"), NULL));
    assert_false(can(ix, "bob", NULL, 0, req("get", "", "configmaps", "team"), NULL));
    rbac_index_free(ix);
}

static void test_cluster_roles_and_groups(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_CLUSTER_ROLE, VIEW, false);
    /* A ClusterRoleBinding to a group: everywhere. */
    apply(ix, RBAC_CLUSTER_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"viewers\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
          "\"view\"},\"subjects\":[{\"kind\":\"Group\",\"name\":\"devs\"}]}",
          false);
    const char *devs[] = {"system:authenticated", "devs"};
    assert_true(can(ix, "bob", devs, 2, req("watch", "apps", "deployments", "x"), NULL));
    assert_true(can(ix, "bob", devs, 2, req("list", "", "namespaces", ""), NULL));
    assert_false(can(ix, "bob", devs, 2, req("create", "apps", "deployments", "x"), NULL));
    assert_false(can(ix, "bob", devs, 1, req("list", "", "pods", "x"), NULL));
    /* A RoleBinding to a ClusterRole: that namespace only. */
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"v\",\"namespace\":\"qa\"},\"roleRef\":{\"kind\":"
          "\"ClusterRole\",\"name\":\"view\"},\"subjects\":[{\"kind\":\"User\",\"name\":"
          "\"ann\"}]}",
          false);
    assert_true(can(ix, "ann", NULL, 0, req("get", "", "pods", "qa"), NULL));
    assert_false(can(ix, "ann", NULL, 0, req("get", "", "pods", "prod"), NULL));
    assert_false(can(ix, "ann", NULL, 0, req("list", "", "namespaces", ""), NULL));
    /* A ClusterRoleBinding's unqualified ServiceAccount names nobody. */
    apply(ix, RBAC_CLUSTER_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"sa\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
          "\"view\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"bot\"},{\"kind\":"
          "\"ServiceAccount\",\"name\":\"cm\",\"namespace\":\"kube-system\"}]}",
          false);
    assert_false(can(ix, "system:serviceaccount:default:bot", NULL, 0,
                     req("get", "", "pods", "default"), NULL));
    assert_true(can(ix, "system:serviceaccount:kube-system:cm", NULL, 0,
                    req("get", "", "pods", "default"), NULL));
    rbac_index_free(ix);
}

static void test_missing_roles_give_reasons(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"rb\",\"namespace\":\"team\"},\"roleRef\":{\"kind\":\"Role\","
          "\"name\":\"gone\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"jane\"}]}",
          false);
    char *why = NULL;
    assert_false(can(ix, "jane", NULL, 0, req("get", "", "pods", "team"), &why));
    assert_string_equal(why, "RBAC: role.rbac.authorization.k8s.io \"gone\" not found");
    free(why);
    apply(ix, RBAC_CLUSTER_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"c\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
          "\"nope\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"jane\"}]}",
          false);
    assert_false(can(ix, "jane", NULL, 0, req("get", "", "pods", "team"), &why));
    /* Cluster-wide bindings first, as upstream visits them. */
    assert_string_equal(why, "RBAC: [clusterrole.rbac.authorization.k8s.io \"nope\" not found, "
                             "role.rbac.authorization.k8s.io \"gone\" not found]");
    free(why);
    /* Once the role exists and allows, the reason is the allow's: the
     * missing ClusterRole is not mentioned. */
    apply(ix, RBAC_ROLE,
          "{\"metadata\":{\"name\":\"gone\",\"namespace\":\"team\"},\"rules\":[{\"verbs\":[\"*\"],"
          "\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}]}",
          false);
    assert_true(can(ix, "jane", NULL, 0, req("get", "", "pods", "team"), &why));
    assert_string_equal(why, "RBAC: allowed by RoleBinding \"rb/team\" of Role \"gone\" to User "
                             "\"jane\"");
    free(why);
    rbac_index_free(ix);
}

static void test_changes_and_deletions(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_ROLE, READER, false);
    const char *rb = "{\"metadata\":{\"name\":\"rb\",\"namespace\":\"team\"},\"roleRef\":{\"kind\":"
                     "\"Role\",\"name\":\"reader\"},\"subjects\":[{\"kind\":\"User\",\"name\":"
                     "\"jane\"},{\"kind\":\"User\",\"name\":\"jane\"}]}";
    apply(ix, RBAC_ROLE_BINDING, rb, false);
    assert_true(can(ix, "jane", NULL, 0, req("get", "", "configmaps", "team"), NULL));
    /* The binding changes subjects: jane out, joe in. */
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"rb\",\"namespace\":\"team\"},\"roleRef\":{\"kind\":\"Role\","
          "\"name\":\"reader\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"joe\"}]}",
          false);
    assert_false(can(ix, "jane", NULL, 0, req("get", "", "configmaps", "team"), NULL));
    assert_true(can(ix, "joe", NULL, 0, req("get", "", "configmaps", "team"), NULL));
    /* The role changes its rules. */
    apply(ix, RBAC_ROLE,
          "{\"metadata\":{\"name\":\"reader\",\"namespace\":\"team\"},\"rules\":[{\"verbs\":"
          "[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"secrets\"]}]}",
          false);
    assert_false(can(ix, "joe", NULL, 0, req("get", "", "configmaps", "team"), NULL));
    assert_true(can(ix, "joe", NULL, 0, req("get", "", "secrets", "team"), NULL));
    /* Deleting the role: denied with a reason; deleting the binding:
     * denied without one. */
    apply(ix, RBAC_ROLE, READER, true);
    char *why = NULL;
    assert_false(can(ix, "joe", NULL, 0, req("get", "", "secrets", "team"), &why));
    assert_non_null(why);
    free(why);
    apply(ix, RBAC_ROLE_BINDING, rb, true);
    assert_false(can(ix, "joe", NULL, 0, req("get", "", "secrets", "team"), &why));
    assert_null(why);
    /* Bad objects are ignored, not crashed on. */
    apply(ix, RBAC_ROLE_BINDING, "{\"metadata\":{\"name\":\"x\"}}", false);
    apply(ix, RBAC_ROLE, "{\"rules\":7}", false);
    apply(ix, RBAC_CLUSTER_ROLE_BINDING, "{}", true);
    /* A user with no name is nobody. */
    rbac_user nobody = {.name = NULL};
    rbac_request r = req("get", "", "secrets", "team");
    assert_false(rbac_authorize(ix, &nobody, &r, NULL, NULL));
    rbac_index_free(ix);
}

/* Long names are looked up whole, never cut to a buffer's size (a cut
 * name could match another subject's). */
static void test_long_names(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_CLUSTER_ROLE, VIEW, false);
    char big[3000], other[3000];
    memset(big, 'g', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(other, big, sizeof big);
    other[2990] = 'h';
    char *crb = NULL;
    assert_true(asprintf(&crb,
                         "{\"metadata\":{\"name\":\"long\"},\"roleRef\":{\"kind\":\"ClusterRole\","
                         "\"name\":\"view\"},\"subjects\":[{\"kind\":\"Group\",\"name\":\"%s\"}]}",
                         big) > 0);
    apply(ix, RBAC_CLUSTER_ROLE_BINDING, crb, false);
    free(crb);
    const char *g1[] = {big}, *g2[] = {other};
    assert_true(can(ix, "u", g1, 1, req("get", "", "pods", "x"), NULL));
    assert_false(can(ix, "u", g2, 1, req("get", "", "pods", "x"), NULL));
    rbac_index_free(ix);
}

/* Not a timed assertion (benchmarks hold targets): prints what a
 * decision costs with 1,000 bindings, and checks it is right. */
static void test_thousand_bindings(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_CLUSTER_ROLE, VIEW, false);
    char buf[512];
    for (int i = 0; i < 1000; i++) {
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"b%d\",\"namespace\":\"ns%d\"},\"roleRef\":{\"kind\":"
                 "\"ClusterRole\",\"name\":\"view\"},\"subjects\":[{\"kind\":\"User\",\"name\":"
                 "\"user%d\"}]}",
                 i, i % 50, i);
        apply(ix, RBAC_ROLE_BINDING, buf, false);
    }
    const char *groups[] = {"system:authenticated", "team-a", "team-b"};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int allowed = 0;
    for (int i = 0; i < 100000; i++) {
        char user[32], ns[32];
        snprintf(user, sizeof user, "user%d", i % 1000);
        snprintf(ns, sizeof ns, "ns%d", (i % 1000) % 50);
        allowed += can(ix, user, groups, 3, req("get", "", "pods", ns), NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(allowed, 100000);
    assert_false(can(ix, "user7", groups, 3, req("get", "", "pods", "ns8"), NULL));
    double ns_per = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 100000.0;
    print_message("rbac: %.0f ns per decision with 1000 bindings (incl. building names)\n", ns_per);
    rbac_index_free(ix);
}

/* RulesFor: the rules of every binding naming the user (or a group)
 * in scope of the namespace, each binding once, and the missing roles
 * as upstream's aggregate error. */
static void test_rules_for(void **state)
{
    (void)state;
    rbac_index *ix = rbac_index_new();
    apply(ix, RBAC_ROLE, READER, false);
    apply(ix, RBAC_CLUSTER_ROLE,
          "{\"metadata\":{\"name\":\"basic\"},\"rules\":[{\"verbs\":[\"get\"],"
          "\"nonResourceURLs\":[\"/version\"]}]}",
          false);
    /* names jane twice (as herself and through her group): counted once */
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"rb\",\"namespace\":\"team\"},\"roleRef\":{\"kind\":"
          "\"Role\",\"name\":\"reader\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"jane\"},"
          "{\"kind\":\"Group\",\"name\":\"devs\"}]}",
          false);
    apply(ix, RBAC_CLUSTER_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"crb\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
          "\"basic\"},\"subjects\":[{\"kind\":\"Group\",\"name\":\"devs\"}]}",
          false);
    const char *groups[] = {"devs"};
    rbac_user u = {.name = "jane", .groups = groups, .ngroups = 1};
    char *errors = (char *)"unset";
    json_t *rules = rbac_rules_for(ix, &u, "team", false, &errors);
    assert_null(errors);
    char *text = json_dumps(rules, JSON_COMPACT | JSON_SORT_KEYS);
    /* ClusterRoleBindings and RoleBindings alike; order is not part of
     * the contract, so look for each */
    assert_int_equal(json_array_size(rules), 2);
    assert_non_null(strstr(text, "{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],"
                                 "\"verbs\":[\"get\",\"list\"]}"));
    assert_non_null(strstr(text, "{\"nonResourceURLs\":[\"/version\"],\"verbs\":[\"get\"]}"));
    free(text);
    json_decref(rules);
    /* outside the namespace: the cluster-wide rules only */
    rules = rbac_rules_for(ix, &u, "", false, NULL);
    assert_int_equal(json_array_size(rules), 1);
    json_decref(rules);
    rules = rbac_rules_for(ix, &u, "other", false, NULL);
    assert_int_equal(json_array_size(rules), 1);
    json_decref(rules);
    /* missing roles: the aggregate */
    apply(ix, RBAC_CLUSTER_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"x\"},\"roleRef\":{\"kind\":\"ClusterRole\",\"name\":"
          "\"gone\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"jane\"}]}",
          false);
    rules = rbac_rules_for(ix, &u, "team", false, &errors);
    assert_int_equal(json_array_size(rules), 2);
    assert_string_equal(errors, "clusterrole.rbac.authorization.k8s.io \"gone\" not found");
    free(errors);
    json_decref(rules);
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"y\",\"namespace\":\"team\"},\"roleRef\":{\"kind\":"
          "\"Role\",\"name\":\"gone2\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"jane\"}]}",
          false);
    rules = rbac_rules_for(ix, &u, "team", false, &errors);
    assert_string_equal(errors, "[clusterrole.rbac.authorization.k8s.io \"gone\" not found, "
                                "role.rbac.authorization.k8s.io \"gone2\" not found]");
    free(errors);
    json_decref(rules);
    /* the escalation check's resolver reads the roles' storage, which
     * names the resources in the plural */
    rules = rbac_rules_for(ix, &u, "team", true, &errors);
    assert_string_equal(errors, "[clusterroles.rbac.authorization.k8s.io \"gone\" not found, "
                                "roles.rbac.authorization.k8s.io \"gone2\" not found]");
    free(errors);
    json_decref(rules);
    /* a role's rules by name */
    json_t *r = rbac_role_rules(ix, false, "team", "reader");
    assert_int_equal(json_array_size(r), 1);
    json_decref(r);
    assert_null(rbac_role_rules(ix, true, NULL, "reader"));
    r = rbac_role_rules(ix, true, NULL, "basic");
    assert_int_equal(json_array_size(r), 1);
    json_decref(r);
    rbac_index_free(ix);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_role_binding_in_its_namespace),
        cmocka_unit_test(test_rules_for),
        cmocka_unit_test(test_cluster_roles_and_groups),
        cmocka_unit_test(test_missing_roles_give_reasons),
        cmocka_unit_test(test_changes_and_deletions),
        cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_thousand_bindings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
