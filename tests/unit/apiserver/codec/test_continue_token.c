/* List continue tokens: upstream-compatible encoding and strict decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <resolv.h>

#include "apiserver/codec/continue_token.h"

/* base64url without padding of arbitrary bytes, via glibc's standard
 * base64 (an independent implementation from the one under test). */
static char *b64url(const char *raw)
{
    size_t n = strlen(raw);
    size_t cap = 4 * ((n + 2) / 3) + 1;
    char *out = malloc(cap);
    assert_non_null(out);
    assert_true(b64_ntop((const unsigned char *)raw, n, out, cap) >= 0);
    char *w = out;
    for (char *p = out; *p; p++) {
        if (*p == '=')
            continue;
        *w++ = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    }
    *w = 0;
    return out;
}

static void expect_ok(const char *tok, int64_t want_rv, const char *want_start)
{
    int64_t rv = 0;
    char *start = NULL, *err = NULL;
    if (continue_token_decode(tok, &rv, &start, &err) != 0)
        fail_msg("decode of %s failed: %s", tok, err ? err : "(null)");
    assert_null(err);
    assert_int_equal(rv, want_rv);
    assert_string_equal(start, want_start);
    free(start);
}

static void expect_err(const char *tok, const char *want)
{
    int64_t rv = 7;
    char *start = (char *)1, *err = NULL;
    assert_int_equal(continue_token_decode(tok, &rv, &start, &err), -1);
    assert_null(start);
    assert_non_null(err);
    if (strcmp(err, want) != 0)
        fail_msg("token %s\n got: %s\nwant: %s", tok, err, want);
    free(err);
    assert_int_equal(continue_token_decode(tok, &rv, &start, NULL), -1);
}

/* Encodes `json` and expects decoding to fail with `want`. */
static void expect_json_err(const char *json, const char *want)
{
    char *tok = b64url(json);
    expect_err(tok, want);
    free(tok);
}

static void expect_json_err_prefix(const char *json, const char *prefix)
{
    char *tok = b64url(json);
    int64_t rv;
    char *start = NULL, *err = NULL;
    assert_int_equal(continue_token_decode(tok, &rv, &start, &err), -1);
    assert_non_null(err);
    if (strncmp(err, prefix, strlen(prefix)) != 0)
        fail_msg("json %s\n got: %s\nwant prefix: %s", json, err, prefix);
    free(err);
    free(tok);
}

static void test_encode_exact(void **state)
{
    (void)state;
    char *tok = continue_token_encode(1, "a");
    assert_string_equal(tok, "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhIn0");
    free(tok);
    /* Go's encoding/json escapes <, > and & */
    tok = continue_token_encode(42, "ns/<x&y>");
    assert_string_equal(tok, "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NDIsInN0YXJ0IjoibnMvXHUwMDNjeFx1"
                             "MDAyNnlcdTAwM2UifQ");
    free(tok);
}

static void test_round_trip(void **state)
{
    (void)state;
    const char *keys[] = {
        "default/cm-b", "a",  "ns/name.with.dots", "x/\"quoted\"\\", "caf\xc3\xa9/\xe2\x80\xa8",
        "tab\there",    "<&>"};
    const int64_t rvs[] = {1, 2, 12345, INT64_MAX, 999, 3, 4};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char *tok = continue_token_encode(rvs[i], keys[i]);
        assert_non_null(tok);
        /* unpadded base64url: no '=', '+', '/' */
        assert_null(strpbrk(tok, "=+/"));
        expect_ok(tok, rvs[i], keys[i]);
        free(tok);
    }
}

static void test_decode_lenient_like_go(void **state)
{
    (void)state;
    /* keys match case-insensitively, unknown keys are ignored */
    char *tok = b64url("{\"V\":\"meta.k8s.io/v1\",\"RV\":9,\"Start\":\"ns/x\",\"extra\":[1]}");
    expect_ok(tok, 9, "ns/x");
    free(tok);
    /* line breaks inside the base64 are skipped */
    tok = continue_token_encode(5, "ns/y");
    char wrapped[256];
    snprintf(wrapped, sizeof wrapped, "%.10s\r\n%s", tok, tok + 10);
    expect_ok(wrapped, 5, "ns/y");
    free(tok);
    /* A negative revision is decoded as given: upstream's store reads any
     * of them as "the latest" (the -1 of an inconsistent continuation). */
    tok = b64url("{\"v\":\"meta.k8s.io/v1\",\"rv\":-2,\"start\":\"deWU\\u066c`/cm-b\"}");
    expect_ok(tok, -2, "deWU\xd9\xac`/cm-b");
    free(tok);
}

#define GENERIC "continue key is not valid"

static void test_bad_base64(void **state)
{
    (void)state;
    expect_err("!!!!", GENERIC ": illegal base64 data at input byte 0");
    expect_err("eyJ2Ij+", GENERIC ": illegal base64 data at input byte 6");
    /* padding is not accepted */
    char *tok = continue_token_encode(1, "a");
    char padded[128];
    snprintf(padded, sizeof padded, "%s=", tok);
    expect_err(padded, GENERIC ": illegal base64 data at input byte 55");
    free(tok);
    /* a lone trailing character cannot encode a byte */
    expect_err("eyJ2I", GENERIC ": illegal base64 data at input byte 4");
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_json_err_prefix("not json", GENERIC ": ");
    expect_json_err_prefix("{\"v\":", GENERIC ": ");
    expect_json_err("[1,2]", GENERIC ": json: cannot unmarshal array into Go value of type "
                                     "storage.continueToken");
    expect_json_err("\"s\"", GENERIC ": json: cannot unmarshal string into Go value of type "
                                     "storage.continueToken");
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"rv\":\"5\",\"start\":\"a\"}",
                    GENERIC ": json: cannot unmarshal string into Go struct field "
                            "continueToken.rv of type int64");
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"rv\":1.5,\"start\":\"a\"}",
                    GENERIC ": json: cannot unmarshal number into Go struct field "
                            "continueToken.rv of type int64");
    expect_json_err("{\"v\":1,\"rv\":1,\"start\":\"a\"}",
                    GENERIC ": json: cannot unmarshal number into Go struct field "
                            "continueToken.v of type string");
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":true}",
                    GENERIC ": json: cannot unmarshal bool into Go struct field "
                            "continueToken.start of type string");
    /* embedded NUL in the start key */
    expect_json_err_prefix("{\"v\":\"meta.k8s.io/v1\",\"rv\":1,\"start\":\"a\\u0000\"}",
                           GENERIC ": ");
    /* A token as long as a request line may be, of empty objects: read
     * within 64 KiB of memory (it would decode into 27 MB). */
    size_t n = 110000;
    char *dense = malloc(3 * n + 8), *p = dense;
    *p++ = '[';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s{}", i ? "," : "");
    strcpy(p, "]");
    expect_json_err(dense, GENERIC ": decoding it needs more than 65536 bytes of memory");
    free(dense);
}

static void test_bad_fields(void **state)
{
    (void)state;
    expect_json_err("{\"v\":\"meta.k8s.io/v2\",\"rv\":1,\"start\":\"a\"}",
                    GENERIC ": server does not recognize this encoded version meta.k8s.io/v2");
    expect_json_err("{\"rv\":1,\"start\":\"a\"}",
                    GENERIC ": server does not recognize this encoded version ");
    expect_json_err("null", GENERIC ": server does not recognize this encoded version ");
    const char *rv_err = GENERIC ": incorrect encoded start resourceVersion (version "
                                 "meta.k8s.io/v1)";
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"rv\":0,\"start\":\"a\"}", rv_err);
    /* a negative rv is upstream's inconsistent continuation (-1): valid */
    char *neg = b64url("{\"v\":\"meta.k8s.io/v1\",\"rv\":-1,\"start\":\"a\"}");
    expect_ok(neg, -1, "a");
    free(neg);
    char *enc = continue_token_encode(-1, "ns/b");
    expect_ok(enc, -1, "ns/b");
    free(enc);
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"start\":\"a\"}", rv_err);
    const char *empty = GENERIC ": encoded start key empty (version meta.k8s.io/v1)";
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"rv\":3,\"start\":\"\"}", empty);
    expect_json_err("{\"v\":\"meta.k8s.io/v1\",\"rv\":3}", empty);
}

static void test_path_traversal(void **state)
{
    (void)state;
    const char *bad[] = {"..",    "../secrets/x", "a/../../b", "a/..", ".",  "./a",
                         "a/./b", "/a",           "/",         "a//b", "a/", "//"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[256], want[256];
        snprintf(json, sizeof json, "{\"v\":\"meta.k8s.io/v1\",\"rv\":3,\"start\":\"%s\"}", bad[i]);
        snprintf(want, sizeof want, GENERIC ": %s", bad[i]);
        expect_json_err(json, want);
    }
    /* dots inside a segment are fine */
    char *tok = b64url("{\"v\":\"meta.k8s.io/v1\",\"rv\":3,\"start\":\"ns/..a/b..\"}");
    expect_ok(tok, 3, "ns/..a/b..");
    free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_exact),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_decode_lenient_like_go),
        cmocka_unit_test(test_bad_base64),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_path_traversal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
