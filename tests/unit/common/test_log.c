/* Tests for ckube/log.h's klog flags: parsing (pflag's words for bad
 * values), vmodule matching as klog matches (base name, no extension,
 * globs, first match wins, only ever raising), and the arguments that
 * hand the same logging to another program. */
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ckube/log.h"

static void expect_flag_error(const char *name, const char *value, const char *want)
{
    char *err = NULL;
    assert_int_equal(ckube_log_set_flag(name, value, &err), -1);
    assert_non_null(err);
    if (strcmp(err, want))
        fail_msg("flag %s=%s\n got: %s\nwant: %s", name, value, err, want);
    free(err);
}

static void test_verbosity(void **state)
{
    (void)state;
    char *err = NULL;
    assert_int_equal(ckube_log_getopt('v', "=4", &err), 1); /* -v=4 */
    assert_int_equal(ckube_log_verbosity(), 4);
    assert_int_equal(ckube_log_getopt('v', "7", &err), 1);
    assert_int_equal(ckube_log_verbosity(), 7);
    assert_int_equal(ckube_log_getopt('h', NULL, &err), 0); /* not ours */
    expect_flag_error("v", "abc",
                      "invalid argument \"abc\" for \"-v, --v\" flag: "
                      "strconv.ParseInt: parsing \"abc\": invalid syntax");
    expect_flag_error("v", "",
                      "invalid argument \"\" for \"-v, --v\" flag: "
                      "strconv.ParseInt: parsing \"\": invalid syntax");
    expect_flag_error("v", " 3",
                      "invalid argument \" 3\" for \"-v, --v\" flag: "
                      "strconv.ParseInt: parsing \" 3\": invalid syntax");
    expect_flag_error("v", "4294967296",
                      "invalid argument \"4294967296\" for \"-v, --v\" flag: "
                      "strconv.ParseInt: parsing \"4294967296\": value out of "
                      "range");
    assert_int_equal(ckube_log_verbosity(), 7); /* a bad value changes nothing */
    ckube_log_set_verbosity(0);
}

static void test_vmodule(void **state)
{
    (void)state;
    char *err = NULL;
    assert_int_equal(ckube_log_set_flag("vmodule", "cach*=3,http=5,list_?tream=2,,zero=0", &err),
                     0);
    assert_true(ckube_log_v(3, "src/apiserver/cacher.c"));
    assert_false(ckube_log_v(4, "src/apiserver/cacher.c"));
    assert_true(ckube_log_v(5, "/abs/path/http.c"));
    assert_true(ckube_log_v(2, "list_stream.c"));
    assert_false(ckube_log_v(1, "httpd.c")); /* a base name, not a prefix */
    assert_false(ckube_log_v(1, "zero.c"));  /* level 0 patterns are dropped */
    assert_true(ckube_log_v(0, "anything.c"));
    /* Only raising: -v 6 wins over http=5. */
    ckube_log_set_verbosity(6);
    assert_true(ckube_log_v(6, "http.c"));
    ckube_log_set_verbosity(0);
    expect_flag_error("vmodule", "http",
                      "invalid argument \"http\" for \"--vmodule\" flag: "
                      "syntax error: expect comma-separated list of "
                      "filename=N");
    expect_flag_error("vmodule", "a=b=c",
                      "invalid argument \"a=b=c\" for \"--vmodule\" flag: "
                      "syntax error: expect comma-separated list of "
                      "filename=N");
    expect_flag_error("vmodule", "=3",
                      "invalid argument \"=3\" for \"--vmodule\" flag: "
                      "syntax error: expect comma-separated list of filename=N");
    expect_flag_error("vmodule", "a=-1",
                      "invalid argument \"a=-1\" for \"--vmodule\" flag: "
                      "negative value for vmodule level");
    assert_true(ckube_log_v(5, "http.c")); /* the bad values changed nothing */
    assert_int_equal(ckube_log_set_flag("vmodule", "", &err), 0);
    assert_false(ckube_log_v(5, "http.c"));
}

static void test_output_flags_and_args(void **state)
{
    (void)state;
    char *err = NULL;
    expect_flag_error("logtostderr", "maybe",
                      "invalid argument \"maybe\" for \"--logtostderr\" flag: "
                      "strconv.ParseBool: parsing \"maybe\": invalid syntax");
    expect_flag_error("nonsense", "1", "unknown flag: --nonsense");
    ckube_log_set_verbosity(3);
    assert_int_equal(ckube_log_set_flag("vmodule", "http=5", &err), 0);
    const char *const *args = ckube_log_flag_args();
    assert_string_equal(args[0], "--v=3");
    assert_string_equal(args[1], "--vmodule=http=5");
    assert_null(args[2]);
    /* A log file, used once logtostderr is false (bare bool flags are true). */
    char path[] = "/tmp/ckube-test-log.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(ckube_log_getopt(CKUBE_LOG_OPT_LOG_FILE, path, &err), 1);
    assert_int_equal(ckube_log_getopt(CKUBE_LOG_OPT_LOGTOSTDERR, "false", &err), 1);
    CKUBE_INFO("to the file %d", 42);
    assert_int_equal(ckube_log_getopt(CKUBE_LOG_OPT_LOGTOSTDERR, NULL, &err), 1);
    CKUBE_INFO("to stderr");
    char buf[512] = {0};
    assert_true(read(fd, buf, sizeof buf - 1) > 0);
    assert_non_null(strstr(buf, "test_log.c:"));
    assert_non_null(strstr(buf, "] to the file 42\n"));
    assert_null(strstr(buf, "to stderr"));
    close(fd);
    args = ckube_log_flag_args();
    assert_int_equal(strncmp(args[2], "--log-file=/tmp/ckube-test-log.", 31), 0);
    assert_null(args[3]); /* logtostderr is true again */
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verbosity),
        cmocka_unit_test(test_vmodule),
        cmocka_unit_test(test_output_flags_and_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
