/* Tests for the authorizer chain and upstream's 403 messages
 * (src/apiserver/authorization/authorizer.c). The messages are compared
 * whole, as kube-apiserver words them (responsewriters.Forbidden over
 * apierrors.NewForbidden). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "apiserver/authorization/authorizer.h"

static auth_user *user(const char *name, const char *g1, const char *g2)
{
    const char *groups[2] = {g1, g2};
    return auth_user_new(name, NULL, groups, g2 ? 2 : g1 ? 1 : 0, NULL);
}

static void expect_message(const authz_attributes *at, const char *reason, const char *want)
{
    ckube_status *st = authz_forbidden(at, reason);
    assert_non_null(st);
    assert_int_equal(st->code, 403);
    assert_string_equal(st->reason, "Forbidden");
    assert_string_equal(st->message, want);
    ckube_status_free(st);
}

static void test_messages(void **state)
{
    (void)state;
    auth_user *bot = user("system:serviceaccount:default:bot", "system:serviceaccounts", NULL);
    authz_attributes list_cm = {.user = bot,
                                .verb = "list",
                                .resource_request = true,
                                .api_group = "",
                                .resource = "configmaps",
                                .namespace_ = "default"};
    /* the example, word for word */
    expect_message(&list_cm, NULL,
                   "configmaps is forbidden: User \"system:serviceaccount:default:bot\" cannot "
                   "list resource \"configmaps\" in API group \"\" in the namespace \"default\"");
    authz_attributes get_deploy = {.user = bot,
                                   .verb = "get",
                                   .resource_request = true,
                                   .api_group = "apps",
                                   .resource = "deployments",
                                   .name = "web",
                                   .namespace_ = "prod"};
    expect_message(&get_deploy, NULL,
                   "deployments.apps \"web\" is forbidden: User "
                   "\"system:serviceaccount:default:bot\" cannot get resource \"deployments\" in "
                   "API group \"apps\" in the namespace \"prod\"");
    authz_attributes nodes = {.user = bot,
                              .verb = "list",
                              .resource_request = true,
                              .api_group = "",
                              .resource = "nodes"};
    expect_message(&nodes, NULL,
                   "nodes is forbidden: User \"system:serviceaccount:default:bot\" cannot list "
                   "resource \"nodes\" in API group \"\" at the cluster scope");
    authz_attributes exec = {.user = bot,
                             .verb = "create",
                             .resource_request = true,
                             .api_group = "",
                             .resource = "pods",
                             .subresource = "exec",
                             .name = "p",
                             .namespace_ = "default"};
    expect_message(&exec, NULL,
                   "pods \"p\" is forbidden: User \"system:serviceaccount:default:bot\" cannot "
                   "create resource \"pods/exec\" in API group \"\" in the namespace \"default\"");
    auth_user *anon = user("system:anonymous", "system:unauthenticated", NULL);
    authz_attributes path = {.user = anon, .verb = "get", .path = "/api"};
    expect_message(&path, NULL, "forbidden: User \"system:anonymous\" cannot get path \"/api\"");
    expect_message(&nodes, "RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found",
                   "nodes is forbidden: User \"system:serviceaccount:default:bot\" cannot list "
                   "resource \"nodes\" in API group \"\" at the cluster scope: RBAC: "
                   "clusterrole.rbac.authorization.k8s.io \"x\" not found");
    /* details name the resource as upstream's StatusDetails */
    ckube_status *st = authz_forbidden(&get_deploy, NULL);
    assert_string_equal(st->group, "apps");
    assert_string_equal(st->kind, "deployments");
    assert_string_equal(st->name, "web");
    ckube_status_free(st);
    auth_user_unref(bot);
    auth_user_unref(anon);
}

static void apply(rbac_index *ix, rbac_kind kind, const char *text)
{
    json_error_t e;
    json_t *o = json_loads(text, 0, &e);
    assert_non_null(o);
    rbac_index_apply(ix, kind, o, false);
    json_decref(o);
}

static void test_chain(void **state)
{
    (void)state;
    auth_user *admin = user("system:admin", "system:masters", "system:authenticated");
    auth_user *bob = user("bob", "system:authenticated", NULL);
    authz_attributes at = {.verb = "list",
                           .resource_request = true,
                           .api_group = "",
                           .resource = "configmaps",
                           .namespace_ = "default"};
    /* system:masters: always, even with no RBAC at all */
    at.user = admin;
    assert_true(authz_allowed(NULL, &at, NULL, NULL));
    at.user = bob;
    assert_false(authz_allowed(NULL, &at, NULL, NULL));
    at.user = NULL;
    assert_false(authz_allowed(NULL, &at, NULL, NULL));

    rbac_index *ix = rbac_index_new();
    at.user = bob;
    char *reason = (char *)"unset";
    assert_false(authz_allowed(ix, &at, &reason, NULL));
    free(reason);
    apply(ix, RBAC_ROLE,
          "{\"metadata\":{\"namespace\":\"default\",\"name\":\"cm-reader\"},\"rules\":[{"
          "\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"],\"verbs\":[\"get\",\"list\"]}]}");
    apply(ix, RBAC_ROLE_BINDING,
          "{\"metadata\":{\"namespace\":\"default\",\"name\":\"b\"},\"roleRef\":{\"apiGroup\":"
          "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"cm-reader\"},"
          "\"subjects\":[{\"kind\":\"User\",\"apiGroup\":\"rbac.authorization.k8s.io\","
          "\"name\":\"bob\"}]}");
    assert_true(authz_allowed(ix, &at, NULL, NULL));
    at.verb = "delete";
    assert_false(authz_allowed(ix, &at, NULL, NULL));
    at.verb = "list";
    at.namespace_ = "other";
    assert_false(authz_allowed(ix, &at, NULL, NULL));
    /* a binding to a missing ClusterRole: denied, with RBAC's reason */
    apply(ix, RBAC_CLUSTER_ROLE_BINDING,
          "{\"metadata\":{\"name\":\"cb\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\","
          "\"kind\":\"ClusterRole\",\"name\":\"missing\"},\"subjects\":[{\"kind\":\"Group\","
          "\"apiGroup\":\"rbac.authorization.k8s.io\",\"name\":\"system:authenticated\"}]}");
    reason = NULL;
    assert_false(authz_allowed(ix, &at, &reason, NULL));
    assert_non_null(reason);
    assert_non_null(strstr(reason, "\"missing\" not found"));
    free(reason);
    rbac_index_free(ix);
    auth_user_unref(admin);
    auth_user_unref(bob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
