/* ckube_parse_duration: Go-style durations from flags. */
#include <ckube/clock.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static void test_valid(void **state)
{
    (void)state;
    assert_true(ckube_parse_duration("30s") == CKUBE_SEC(30));
    assert_true(ckube_parse_duration("500ms") == CKUBE_MS(500));
    assert_true(ckube_parse_duration("1m") == CKUBE_SEC(60));
    assert_true(ckube_parse_duration("2m30s") == CKUBE_SEC(150));
    assert_true(ckube_parse_duration("1.5h") == CKUBE_SEC(5400));
    assert_true(ckube_parse_duration("1h2m3s4ms") == CKUBE_SEC(3723) + CKUBE_MS(4));
    assert_true(ckube_parse_duration("250us") == 250000);
    assert_true(ckube_parse_duration("10ns") == 10);
    assert_true(ckube_parse_duration("15") == CKUBE_SEC(15)); /* bare seconds */
    assert_true(ckube_parse_duration("0.5") == CKUBE_MS(500));
}

static void test_invalid(void **state)
{
    (void)state;
    const char *bad[] = {"", "s", "-1s", "+1s", " 1s", "1x", "1s ", "2m30", "inf", "nan",
                         "0s", "0", "1e30h", "1..5s", "ms"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (ckube_parse_duration(bad[i]) != 0)
            fail_msg("\"%s\" was accepted", bad[i]);
    }
    assert_true(ckube_parse_duration(NULL) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_valid), cmocka_unit_test(test_invalid)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
