/* ckube/json.h's writers: ckube_json_dumps against jansson's
 * json_dumps(JSON_COMPACT | JSON_ENCODE_ANY), the reference it must match
 * byte for byte, on the values API objects hold and on the edges of the
 * encoding; and the uid generator's RFC 4122 version-4 form, its
 * uniqueness across its pool and across fork(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "ckube/json.h"

/* Both serializations of v: equal bytes, or both failing (want_fail). */
static void expect_same(const json_t *v, bool want_fail)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = 12345;
    char *got = ckube_json_dumps(v, &n);
    if (want_fail) {
        assert_null(want);
        assert_null(got);
        return;
    }
    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_int_equal(n, strlen(want));
    free(want);
    free(got);
}

static void expect_text(const char *json)
{
    json_error_t e;
    json_t *v = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!v)
        fail_msg("test input does not parse: %s: %s", json, e.text);
    expect_same(v, false);
    json_decref(v);
}

static void test_api_objects(void **state)
{
    (void)state;
    expect_text("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\","
                "\"namespace\":\"default\",\"uid\":\"0b7e\",\"resourceVersion\":\"12\","
                "\"labels\":{\"app.kubernetes.io/name\":\"x\"},\"managedFields\":[{\"manager\":"
                "\"kubectl\",\"fieldsV1\":{\"f:data\":{\".\":{},\"f:a\":{}}}}]},"
                "\"data\":{\"a\":\"line1\\nline2\\ttab \\\"q\\\" back\\\\slash /path\"}}");
    expect_text("{\"spec\":{\"replicas\":3,\"template\":{\"spec\":{\"containers\":[{\"name\":"
                "\"c\",\"ports\":[{\"containerPort\":80}],\"args\":[]}]}}},\"status\":{}}");
    expect_text("[]");
    expect_text("{}");
    expect_text("[[],{},[{}],{\"a\":[]}]");
}

static void test_scalars(void **state)
{
    (void)state;
    expect_text("0");
    expect_text("-0");
    expect_text("9223372036854775807");
    expect_text("-9223372036854775808");
    expect_text("-42");
    expect_text("true");
    expect_text("false");
    expect_text("null");
    /* Reals keep jansson's formatting (precision, "1.0"). */
    expect_text("1.0");
    expect_text("0.1");
    expect_text("-0.0");
    expect_text("1e300");
    expect_text("2.5e-308");
    expect_text("123456789.123456789");
    json_t *r = json_real(1.0 / 3.0);
    expect_same(r, false);
    json_decref(r);
}

static void test_escapes(void **state)
{
    (void)state;
    /* Every control character, the two mandatory escapes, DEL and
     * non-ASCII left alone, '/' not escaped. */
    char raw[40];
    for (int i = 0; i < 32; i++)
        raw[i] = (char)(i + 1 == 32 ? 0x7f : i);
    memcpy(raw + 32, "\"\\/\xc3\xa9", 6);
    json_t *s = json_stringn(raw, sizeof raw - 2);
    assert_non_null(s);
    expect_same(s, false);
    json_decref(s);
    expect_text("\"\\u0000 NUL inside\"");
    expect_text("\"\\u2028\\u2029 \\ud83d\\ude00 \xe4\xb8\xad\"");
    /* Keys are escaped like strings, NUL included. */
    json_t *o = json_object();
    json_object_setn_new(o, "a\0b", 3, json_string("nul in key"));
    json_object_set_new(o, "tab\there", json_integer(1));
    expect_same(o, false);
    json_decref(o);
}

static void test_key_order_is_insertion_order(void **state)
{
    (void)state;
    json_t *o = json_object();
    const char *keys[] = {"zeta", "alpha", "mid", "beta", "a"};
    for (size_t i = 0; i < 5; i++)
        json_object_set_new(o, keys[i], json_integer((json_int_t)i));
    json_object_del(o, "mid");
    json_object_set_new(o, "mid", json_true()); /* re-added: now last */
    json_object_set_new(o, "zeta", json_false()); /* replaced: keeps its place */
    expect_same(o, false);
    char *got = ckube_json_dumps(o, NULL);
    assert_string_equal(got, "{\"zeta\":false,\"alpha\":1,\"beta\":3,\"a\":4,\"mid\":true}");
    free(got);
    json_decref(o);
}

static void test_invalid_utf8_fails_like_jansson(void **state)
{
    (void)state;
    /* Only *_nocheck constructors let these in; both encoders refuse. */
    static const char *bad[] = {
        "\xc3",             /* truncated */
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xed\xa0\x80",     /* UTF-16 surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xff",             /* never valid */
        "ok \x80 continuation alone",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *s = json_string_nocheck(bad[i]);
        expect_same(s, true);
        /* As a key, jansson ignores its own failure and emits a broken
         * text (a string cut short); we fail instead. */
        json_t *o = json_object();
        json_object_set_nocheck(o, bad[i], json_null());
        assert_null(ckube_json_dumps(o, NULL));
        json_t *a = json_pack("[s,o]", "fine", s);
        expect_same(a, true);
        json_decref(a);
        json_decref(o);
    }
    /* The longest valid forms pass. */
    json_t *s = json_string_nocheck("\xf4\x8f\xbf\xbf \xef\xbf\xbf \xdf\xbf");
    expect_same(s, false);
    json_decref(s);
}

static void test_depth_and_cycles(void **state)
{
    (void)state;
    /* Deeper than any parser builds (2048) still serializes. */
    json_t *root = json_array(), *cur = root;
    for (int i = 0; i < 1000; i++) { /* 3 levels each */
        json_t *next = json_object();
        json_array_append_new(cur, next);
        cur = json_object();
        json_object_set_new(next, "k", cur);
        cur = json_object_get(next, "k");
        json_t *arr = json_array();
        json_object_set_new(cur, "a", arr);
        cur = arr;
    }
    expect_same(root, false);
    json_decref(root);
    /* A cycle fails with both, not by running out of stack. */
    json_t *a = json_array();
    json_t *o = json_object();
    json_array_append(a, o);
    json_object_set(o, "back", a);
    expect_same(a, true);
    json_object_clear(o); /* break the cycle so both are freed */
    json_decref(o);
    json_decref(a);
}

static void test_large_strings(void **state)
{
    (void)state;
    /* Long runs, escapes at the buffer's growth edges. */
    size_t n = 300000;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i % 977 == 0 ? '\n' : i % 1009 == 0 ? '"' : 'a' + (int)(i % 26));
    big[n] = 0;
    json_t *v = json_pack("{s:s,s:[s,s]}", "data", big, "list", big, "x");
    expect_same(v, false);
    json_decref(v);
    free(big);
}

static void test_null_input(void **state)
{
    (void)state;
    size_t n = 7;
    assert_null(ckube_json_dumps(NULL, &n));
    assert_int_equal(n, 7);
}

static void test_uuid4(void **state)
{
    (void)state;
    char a[37], b[37];
    ckube_uuid4(a, sizeof a);
    ckube_uuid4(b, sizeof b);
    assert_int_equal(strlen(a), 36);
    assert_string_not_equal(a, b);
    for (size_t i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(a[i], '-');
        else
            assert_non_null(strchr("0123456789abcdef", a[i]));
    }
    assert_int_equal(a[14], '4');                  /* version 4 */
    assert_non_null(strchr("89ab", a[19]));        /* RFC 4122 variant */
    char small[9];
    ckube_uuid4(small, sizeof small); /* truncated, still terminated */
    assert_int_equal(strlen(small), 8);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Ids come from a per-thread pool of random bytes: many more than one
 * pool holds are all distinct. */
static void test_uuid4_many_distinct(void **state)
{
    (void)state;
    enum { N = 4096 };
    char(*ids)[37] = calloc(N, sizeof *ids);
    assert_non_null(ids);
    for (size_t i = 0; i < N; i++)
        ckube_uuid4(ids[i], sizeof ids[i]);
    qsort(ids, N, sizeof *ids, cmp_str);
    for (size_t i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

/* A forked child does not hand out the ids its parent still holds in
 * its pool. */
static void test_uuid4_fork(void **state)
{
    (void)state;
    char first[37], parent_next[37], child_next[37] = "";
    ckube_uuid4(first, sizeof first); /* the pool is filled now */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char id[37];
        ckube_uuid4(id, sizeof id);
        ssize_t w = write(fds[1], id, sizeof id);
        _exit(w == (ssize_t)sizeof id ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], child_next, sizeof child_next), (ssize_t)sizeof child_next);
    close(fds[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ckube_uuid4(parent_next, sizeof parent_next);
    assert_int_equal(strlen(child_next), 36);
    assert_string_not_equal(child_next, parent_next);
    assert_string_not_equal(child_next, first);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_objects),
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_key_order_is_insertion_order),
        cmocka_unit_test(test_invalid_utf8_fails_like_jansson),
        cmocka_unit_test(test_depth_and_cycles),
        cmocka_unit_test(test_large_strings),
        cmocka_unit_test(test_null_input),
        cmocka_unit_test(test_uuid4),
        cmocka_unit_test(test_uuid4_many_distinct),
        cmocka_unit_test(test_uuid4_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
