/* The Network controller's address checks and its memory backend
 * (examples/network-controller/netaddr.c, backend_memory.c). */
#include "backend.h"
#include "netaddr.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static void expect_spec_error(const char *cidr, const char *gw, const char *needle)
{
    netaddr_prefix p;
    netaddr g;
    char *err = NULL;
    if (netaddr_check_spec(cidr, gw, &p, &g, &err) == 0)
        fail_msg("cidr=%s gateway=%s was accepted", cidr ? cidr : "(null)", gw ? gw : "(null)");
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("error [%s] lacks [%s]", err, needle);
    free(err);
}

static void test_specs(void **state)
{
    (void)state;
    netaddr_prefix p;
    netaddr g;
    char buf[NETADDR_STRLEN];
    assert_int_equal(netaddr_check_spec("192.168.0.0/16", "192.168.0.1", &p, &g, NULL), 0);
    assert_int_equal(p.len, 16);
    assert_string_equal(netaddr_format_prefix(&g, p.len, buf, sizeof(buf)), "192.168.0.1/16");
    assert_int_equal(netaddr_check_spec("fd00:10::/64", "fd00:10::1", &p, &g, NULL), 0);
    assert_int_equal(g.family, AF_INET6);
    assert_string_equal(netaddr_format_prefix(&g, p.len, buf, sizeof(buf)), "fd00:10::1/64");
    assert_int_equal(netaddr_check_spec("10.0.0.0/31", "10.0.0.0", &p, &g, NULL), 0); /* RFC 3021 */
    assert_int_equal(netaddr_check_spec("10.0.0.7/32", "10.0.0.7", &p, &g, NULL), 0);

    expect_spec_error("10.9.0.0/16", "10.10.0.1", "is outside spec.cidr 10.9.0.0/16");
    expect_spec_error("10.9.0.1/16", "10.9.0.2", "did you mean 10.9.0.0/16?");
    expect_spec_error("10.9.0.0/16", "10.9.0.0", "network address");
    expect_spec_error("10.9.0.0/16", "10.9.255.255", "broadcast address");
    expect_spec_error("10.9.0.0/16", "fd00::1", "different IP families");
    expect_spec_error("10.9.0.0/33", "10.9.0.1", "prefix length must be 0 to 32");
    expect_spec_error("fd00::/129", "fd00::1", "0 to 128");
    expect_spec_error("10.9.0.0", "10.9.0.1", "CIDR notation");
    expect_spec_error("10.9.0.0/", "10.9.0.1", "prefix length");
    expect_spec_error("10.9.0.0/+8", "10.9.0.1", "prefix length");
    expect_spec_error("10.9.0.0/08", "10.9.0.1", "prefix length");
    expect_spec_error("10.9/16", "10.9.0.1", "not a valid IPv4 address");
    expect_spec_error("300.0.0.0/8", "10.9.0.1", "not a valid IPv4 address");
    expect_spec_error("10.0.0.0/8", "10.1", "not a valid IPv4 address");
    expect_spec_error("10.0.0.0/8", "010.0.0.1", "not a valid IPv4 address");
    expect_spec_error("fd00::zz/64", "fd00::1", "not a valid IPv6 address");
    expect_spec_error("", "10.0.0.1", "spec.cidr is required");
    expect_spec_error("10.0.0.0/8", NULL, "spec.gateway is required");
}

static void test_overlap(void **state)
{
    (void)state;
    netaddr_prefix a, b, c, d, v6;
    assert_int_equal(netaddr_parse_prefix("192.169.0.0/16", &a, NULL), 0);
    assert_int_equal(netaddr_parse_prefix("192.169.128.0/17", &b, NULL), 0);
    assert_int_equal(netaddr_parse_prefix("192.170.0.0/16", &c, NULL), 0);
    assert_int_equal(netaddr_parse_prefix("0.0.0.0/0", &d, NULL), 0);
    assert_int_equal(netaddr_parse_prefix("::/0", &v6, NULL), 0);
    assert_true(netaddr_prefix_overlaps(&a, &b));
    assert_true(netaddr_prefix_overlaps(&b, &a));
    assert_false(netaddr_prefix_overlaps(&a, &c));
    assert_true(netaddr_prefix_overlaps(&d, &c));
    assert_false(netaddr_prefix_overlaps(&v6, &a)); /* families never overlap */
}

static void test_device_names(void **state)
{
    (void)state;
    char a[16], b[16], c[16];
    netctl_device_name("default/example-network", a);
    netctl_device_name("default/example-network", b);
    netctl_device_name("default/example-networl", c);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(strlen(a), 12); /* "ckn-" + 8 hex: within IFNAMSIZ */
    assert_memory_equal(a, "ckn-", 4);
}

static char *tmpfile_path(const char *name)
{
    const char *dir = getenv("CKUBE_TEST_TMP");
    if (!dir || !*dir)
        dir = "/tmp";
    mkdir(dir, 0755); /* may be the first test to run in a fresh tree */
    char *p = NULL;
    assert_true(asprintf(&p, "%s/netctl-%d-%s", dir, (int)getpid(), name) > 0);
    return p;
}

static void test_memory_backend(void **state)
{
    (void)state;
    char *path = tmpfile_path("state.json");
    unlink(path);
    char *err = NULL;
    netctl_backend *b = netctl_backend_memory_new(path, &err); /* missing file: empty */
    assert_non_null(b);
    assert_string_equal(netctl_backend_name(b), "memory");
    netctl_want w;
    assert_int_equal(netaddr_check_spec("10.1.0.0/24", "10.1.0.1", &w.cidr, &w.gateway, NULL), 0);
    netctl_actual act;
    assert_int_equal(netctl_backend_observe(b, "ns/a", &act, &err), 0);
    assert_false(act.exists);
    if (netctl_backend_apply(b, "ns/a", &w, &err) != 0)
        fail_msg("apply: %s", err ? err : "?");
    assert_int_equal(netctl_backend_observe(b, "ns/a", &act, &err), 0);
    assert_true(netctl_actual_matches(&act, &w));

    /* Another instance on the same file sees it (a second replica). */
    netctl_backend *b2 = netctl_backend_memory_new(path, &err);
    assert_non_null(b2);
    assert_int_equal(netctl_backend_observe(b2, "ns/a", &act, &err), 0);
    assert_true(netctl_actual_matches(&act, &w));
    char **keys = NULL;
    size_t n = 0;
    assert_int_equal(netctl_backend_list(b2, &keys, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(keys[0], "ns/a");
    netctl_free_keys(keys, n);
    /* Removed through one, gone for the other (the file is the truth). */
    assert_int_equal(netctl_backend_remove(b2, "ns/a", &err), 0);
    assert_int_equal(netctl_backend_observe(b, "ns/a", &act, &err), 0);
    assert_false(act.exists);
    assert_int_equal(netctl_backend_remove(b, "ns/a", &err), 0); /* idempotent */
    netctl_backend_free(b2);
    netctl_backend_free(b);

    /* A corrupt state file is refused at start with a clear error. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"networks\": [1,", f);
    fclose(f);
    assert_null(netctl_backend_memory_new(path, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "cannot load memory backend state"));
    free(err);
    err = NULL;
    f = fopen(path, "w");
    fputs("{\"other\": {}}", f);
    fclose(f);
    assert_null(netctl_backend_memory_new(path, &err));
    assert_non_null(strstr(err, "no \"networks\" object"));
    free(err);
    unlink(path);
    free(path);

    /* A state file that cannot be written: apply fails with the reason
     * and the table is left as it was. */
    b = netctl_backend_memory_new("/nonexistent-dir/state.json", &err);
    assert_non_null(b);
    assert_int_equal(netctl_backend_apply(b, "x/y", &w, &err), -1);
    assert_non_null(strstr(err, "cannot write /nonexistent-dir/state.json.tmp"));
    free(err);
    err = NULL;
    assert_int_equal(netctl_backend_observe(b, "x/y", &act, &err), 0);
    assert_false(act.exists);
    netctl_backend_free(b);

    /* Without a file, state lives in memory only. */
    b = netctl_backend_memory_new(NULL, &err);
    assert_int_equal(netctl_backend_apply(b, "x/y", &w, &err), 0);
    assert_int_equal(netctl_backend_observe(b, "x/y", &act, &err), 0);
    assert_true(act.exists);
    netctl_backend_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specs),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_device_names),
        cmocka_unit_test(test_memory_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
