/* Request path parsing, checked against what upstream's RequestInfoFactory
 * derives for the same paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/endpoints/request/request_info.h"

static void expect_info(const char *path, const char *method, bool watch, const char *verb,
                        const char *group, const char *version, const char *ns,
                        const char *resource, const char *name, const char *sub)
{
    request_info ri;
    assert_int_equal(request_info_parse(path, method, watch, &ri), 0);
    assert_true(ri.is_resource);
    assert_string_equal(ri.verb, verb);
    assert_string_equal(ri.group, group);
    assert_string_equal(ri.version, version);
    assert_string_equal(ri.ns, ns);
    assert_string_equal(ri.resource, resource);
    assert_string_equal(ri.name, name);
    assert_string_equal(ri.subresource, sub);
}

static void test_core_paths(void **state)
{
    expect_info("/api/v1/namespaces/default/configmaps", "GET", false, "list", "", "v1", "default",
                "configmaps", "", "");
    expect_info("/api/v1/namespaces/default/configmaps/c1", "GET", false, "get", "", "v1",
                "default", "configmaps", "c1", "");
    expect_info("/api/v1/namespaces/default/configmaps", "POST", false, "create", "", "v1",
                "default", "configmaps", "", "");
    expect_info("/api/v1/namespaces/default/configmaps/c1", "PUT", false, "update", "", "v1",
                "default", "configmaps", "c1", "");
    expect_info("/api/v1/namespaces/default/configmaps/c1", "PATCH", false, "patch", "", "v1",
                "default", "configmaps", "c1", "");
    expect_info("/api/v1/namespaces/default/configmaps/c1", "DELETE", false, "delete", "", "v1",
                "default", "configmaps", "c1", "");
    expect_info("/api/v1/namespaces/default/configmaps", "DELETE", false, "deletecollection", "",
                "v1", "default", "configmaps", "", "");
    expect_info("/api/v1/configmaps", "GET", false, "list", "", "v1", "", "configmaps", "", "");
    expect_info("/api/v1/nodes/n1/status", "PUT", false, "update", "", "v1", "", "nodes", "n1",
                "status");
}

static void test_namespaces_themselves(void **state)
{
    /* /api/v1/namespaces/NAME is the namespace object... */
    expect_info("/api/v1/namespaces/team-a", "GET", false, "get", "", "v1", "team-a", "namespaces",
                "team-a", "");
    /* ...and its own subresources are not resources in it. */
    expect_info("/api/v1/namespaces/team-a/finalize", "PUT", false, "update", "", "v1", "team-a",
                "namespaces", "team-a", "finalize");
    expect_info("/api/v1/namespaces/team-a/status", "GET", false, "get", "", "v1", "team-a",
                "namespaces", "team-a", "status");
    expect_info("/api/v1/namespaces", "GET", false, "list", "", "v1", "", "namespaces", "", "");
}

static void test_groups_and_watch(void **state)
{
    expect_info("/apis/apps/v1/namespaces/ns/deployments/d/scale", "GET", false, "get", "apps",
                "v1", "ns", "deployments", "d", "scale");
    expect_info("/apis/apps/v1/namespaces/ns/deployments", "GET", true, "watch", "apps", "v1", "ns",
                "deployments", "", "");
    expect_info("/api/v1/watch/namespaces/ns/configmaps/c1", "GET", false, "watch", "", "v1", "ns",
                "configmaps", "c1", "");
    expect_info("/apis/coordination.k8s.io/v1/watch/leases", "GET", false, "watch",
                "coordination.k8s.io", "v1", "", "leases", "", "");
}

static void test_discovery_and_other(void **state)
{
    request_info ri;
    assert_int_equal(request_info_parse("/api", "GET", false, &ri), 0);
    assert_true(ri.is_discovery);
    assert_int_equal(request_info_parse("/apis/apps", "GET", false, &ri), 0);
    assert_true(ri.is_discovery);
    assert_string_equal(ri.group, "apps");
    assert_int_equal(request_info_parse("/apis/apps/v1", "GET", false, &ri), 0);
    assert_true(ri.is_discovery);
    assert_int_equal(request_info_parse("/version", "GET", false, &ri), 0);
    assert_false(ri.is_resource);
    assert_false(ri.is_discovery);
}

static void test_malformed(void **state)
{
    request_info ri;
    /* too many parts */
    assert_int_equal(request_info_parse("/api/v1/namespaces/a/b/c/d/e", "GET", false, &ri), -1);
    /* a bare watch prefix */
    assert_int_equal(request_info_parse("/api/v1/watch", "GET", false, &ri), -1);
    /* an over-long segment */
    char path[1200] = "/api/v1/namespaces/default/configmaps/";
    memset(path + strlen(path), 'a', 600);
    assert_int_equal(request_info_parse(path, "GET", false, &ri), -1);
    /* a path longer than the parse buffer */
    char huge[4000];
    memset(huge, 'x', sizeof huge - 1);
    huge[0] = '/';
    huge[sizeof huge - 1] = 0;
    assert_int_equal(request_info_parse(huge, "GET", false, &ri), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_paths),       cmocka_unit_test(test_namespaces_themselves),
        cmocka_unit_test(test_groups_and_watch), cmocka_unit_test(test_discovery_and_other),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
