/* common/text.h: ckube__concat, the snprintf("%s%s...") of hot paths. */
#include "common/text.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static void test_concat_fits(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(ckube__concat(buf, sizeof buf, "/registry/", "core", "/", "configmaps", "/",
                                   "default", "/", "cm-1", NULL),
                     strlen("/registry/core/configmaps/default/cm-1"));
    assert_string_equal(buf, "/registry/core/configmaps/default/cm-1");
    assert_int_equal(ckube__concat(buf, sizeof buf, NULL), 0);
    assert_string_equal(buf, "");
    assert_int_equal(ckube__concat(buf, sizeof buf, "", "a", "", NULL), 1);
    assert_string_equal(buf, "a");
}

/* Cut where snprintf cuts, with the same return value, at every size. */
static void test_concat_cut_as_snprintf(void **state)
{
    (void)state;
    const char *a = "/registry/", *b = "apps", *c = "/deployments/x";
    char want[32], got[32];
    for (size_t n = 0; n <= sizeof got; n++) {
        memset(want, 'Z', sizeof want);
        memset(got, 'Z', sizeof got);
        int w = snprintf(want, n, "%s%s%s", a, b, c);
        size_t g = ckube__concat(got, n, a, b, c, NULL);
        assert_int_equal(g, (size_t)w);
        assert_memory_equal(got, want, sizeof got); /* bytes past n untouched too */
    }
}

/* Schema names: the group's labels reversed; cut short, never overrun. */
static void test_reverse_dns(void **state)
{
    (void)state;
    char buf[64];
    ckube__reverse_dns("samplecrd.k8s.io", buf, sizeof buf);
    assert_string_equal(buf, "io.k8s.samplecrd");
    ckube__reverse_dns("metrics.ckube.io", buf, sizeof buf);
    assert_string_equal(buf, "io.ckube.metrics");
    ckube__reverse_dns("example", buf, sizeof buf);
    assert_string_equal(buf, "example");
    ckube__reverse_dns("", buf, sizeof buf);
    assert_string_equal(buf, "");
    char small[8];
    ckube__reverse_dns("samplecrd.k8s.io", small, sizeof small);
    assert_string_equal(small, "io.k8s");
    ckube__reverse_dns("averyverylonglabel.io", small, sizeof small);
    assert_string_equal(small, "io");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concat_fits),
        cmocka_unit_test(test_concat_cut_as_snprintf),
        cmocka_unit_test(test_reverse_dns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
