/* ckube__json_parse (src/common/json_parse.c) against the installed jansson:
 * for every input here both readers accept or both reject, and accepted
 * trees are json_equal and dump to the same bytes (which checks key order
 * and integer/real types). A few expectations are also stated outright, so a
 * change in either reader shows up as a failure rather than silently moving
 * both.
 *
 * Set CKUBE_JSON_PARSE_BENCH=N to also time N parses of a 1.5 KiB ConfigMap
 * with both readers (printed, never asserted). */
#include "common/json_parse.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#define ALL_FLAGS (CKUBE_JP_DECODE_ANY | CKUBE_JP_REJECT_DUPLICATES)

/* A realistic ConfigMap as the API server receives it (kubectl apply adds
 * the escaped last-applied annotation), about 1.5 KiB. */
static const char configmap[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"app-config\","
    "\"namespace\":\"production\",\"labels\":{\"app.kubernetes.io/name\":\"web\","
    "\"app.kubernetes.io/component\":\"frontend\",\"app.kubernetes.io/part-of\":\"shop\","
    "\"tier\":\"web\"},\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
    "\"{\\\"apiVersion\\\":\\\"v1\\\",\\\"data\\\":{\\\"LOG_LEVEL\\\":\\\"info\\\","
    "\\\"MAX_CONNECTIONS\\\":\\\"100\\\"},\\\"kind\\\":\\\"ConfigMap\\\",\\\"metadata\\\":"
    "{\\\"annotations\\\":{},\\\"name\\\":\\\"app-config\\\",\\\"namespace\\\":"
    "\\\"production\\\"}}\\n\",\"owner\":\"team-web@example.com\"},\"generation\":1,"
    "\"creationTimestamp\":null},"
    "\"data\":{\"LOG_LEVEL\":\"info\",\"MAX_CONNECTIONS\":\"100\",\"TIMEOUT_SECONDS\":\"30\","
    "\"FEATURE_FLAGS\":\"checkout=true,search=false,recommendations=true\","
    "\"DATABASE_URL\":\"postgres://db.production.svc.cluster.local:5432/shop\","
    "\"CACHE_URL\":\"redis://cache.production.svc.cluster.local:6379/0\","
    "\"nginx.conf\":\"server {\\n  listen 8080;\\n  location / {\\n    proxy_pass "
    "http://127.0.0.1:3000;\\n    proxy_set_header Host $host;\\n  }\\n  location /healthz "
    "{\\n    return 200 'ok';\\n  }\\n}\\n\",\"greeting\":\"Gr\xc3\xbc\xc3\x9f"
    "e, \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\",\"limits\":\"cpu=500m,memory=256Mi\","
    "\"replicas\":\"3\",\"regions\":\"eu-west-1,eu-central-1,us-east-1\"},"
    "\"binaryData\":{\"logo.png\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\"},\"immutable\":false,"
    "\"extra\":{\"weights\":[0.5,1.25e2,-3,0,-0.0,1E-3,12345678901234],\"enabled\":true,"
    "\"nothing\":null,\"nested\":[[1,[2,[3]]],{},[]]}}";

static const char deployment[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
    "\"namespace\":\"default\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"replicas\":3,"
    "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"strategy\":{\"type\":\"RollingUpdate\","
    "\"rollingUpdate\":{\"maxSurge\":\"25%\",\"maxUnavailable\":0}},\"template\":{\"metadata\":"
    "{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":"
    "\"nginx:1.25\",\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}],\"resources\":"
    "{\"limits\":{\"cpu\":\"500m\",\"memory\":\"128Mi\"}},\"env\":[{\"name\":\"A\",\"value\":"
    "\"1\"}],\"readinessProbe\":{\"httpGet\":{\"path\":\"/\",\"port\":80},"
    "\"initialDelaySeconds\":5,\"periodSeconds\":10}}],\"terminationGracePeriodSeconds\":30}}}}";

static const char status[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"configmaps \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":"
    "{\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":404}";

/* Shows the input for failure messages: printable ASCII as is, the rest as
 * \xNN, cut at 160 bytes. */
static const char *show(const char *in, size_t n)
{
    static char out[800];
    size_t o = 0;
    for (size_t i = 0; i < n && o < sizeof out - 8; i++) {
        unsigned char c = (unsigned char)in[i];
        if (i == 160) {
            o += (size_t)snprintf(out + o, sizeof out - o, "...(%zu bytes)", n);
            break;
        }
        if (c >= 0x20 && c < 0x7f)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}

static char *dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Parses in[0..n) with both readers and fails the test if they disagree.
 * The input is copied to a buffer of exactly n bytes, so ASan reports any
 * read past the end. Returns 1 when both accepted. */
static int check_same(const char *in, size_t n, int flags)
{
    char *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    memcpy(copy, in, n);
    json_error_t err;
    json_t *ours = ckube__json_parse(copy, n, flags);
    json_t *ref = json_loadb(copy, n, (size_t)flags, &err);
    free(copy);
    if (!ours != !ref) {
        json_decref(ours);
        json_decref(ref);
        fail_msg("flags %d: ours %s, jansson %s (%s) for \"%s\"", flags,
                 ours ? "accepts" : "rejects", ref ? "accepts" : "rejects", ref ? "" : err.text,
                 show(in, n));
    }
    if (!ours)
        return 0;
    char *a = dump(ours), *b = dump(ref);
    int equal = json_equal(ours, ref);
    int same = a && b && strcmp(a, b) == 0;
    if (!equal || !same) {
        fprintf(stderr, "ours:    %s\njansson: %s\n", a ? a : "(null)", b ? b : "(null)");
        free(a);
        free(b);
        json_decref(ours);
        json_decref(ref);
        fail_msg("flags %d: trees differ for \"%s\"", flags, show(in, n));
    }
    free(a);
    free(b);
    json_decref(ours);
    json_decref(ref);
    return 1;
}

/* check_same under every flag combination; returns how many accepted. */
static int check_all_flags(const char *in, size_t n)
{
    int accepted = 0;
    for (int f = 0; f <= ALL_FLAGS; f++) {
        if ((f & ~ALL_FLAGS) == 0)
            accepted += check_same(in, n, f);
    }
    return accepted;
}

struct input {
    const char *text;
    size_t len; /* 0: strlen(text) */
};

/* The test tables below are kept packed, clang-format off around them. */
/* clang-format off */
#define IN(s) {s, sizeof(s) - 1}
/* clang-format on */

static void check_table(const struct input *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_all_flags(t[i].text, t[i].len ? t[i].len : strlen(t[i].text));
}

static void test_documents(void **state)
{
    (void)state;
    const char *docs[] = {configmap, deployment, status};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(check_all_flags(docs[i], strlen(docs[i])), 4);

    /* And outright: the values we expect, in the order written. */
    json_t *cm = ckube__json_parse(configmap, strlen(configmap), 0);
    assert_non_null(cm);
    json_t *md = json_object_get(cm, "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "name")), "app-config");
    assert_true(json_is_null(json_object_get(md, "creationTimestamp")));
    json_t *data = json_object_get(cm, "data");
    assert_string_equal(json_string_value(json_object_get(data, "greeting")),
                        "Gr\xc3\xbc\xc3\x9f"
                        "e, \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80");
    const char *conf = json_string_value(json_object_get(data, "nginx.conf"));
    assert_non_null(conf);
    assert_true(strncmp(conf, "server {\n  listen 8080;\n", 24) == 0);
    json_t *w = json_object_get(json_object_get(cm, "extra"), "weights");
    assert_int_equal(json_array_size(w), 7);
    assert_true(json_is_real(json_array_get(w, 0)));
    assert_true(json_is_integer(json_array_get(w, 2)));
    assert_int_equal(json_integer_value(json_array_get(w, 2)), -3);
    assert_int_equal(json_integer_value(json_array_get(w, 6)), 12345678901234LL);
    const char *k;
    json_t *v;
    const char *order[] = {"apiVersion", "kind",      "metadata", "data",
                           "binaryData", "immutable", "extra"};
    size_t i = 0;
    json_object_foreach(cm, k, v)
    {
        assert_true(i < 7);
        assert_string_equal(k, order[i++]);
    }
    json_decref(cm);
}

static void test_structure(void **state)
{
    (void)state;
    /* clang-format off */
    static const struct input t[] = {
        IN("{}"), IN("[]"), IN(" \t\r\n{ } \n"), IN("[ ]"), IN("[1,2,3]"), IN("[1,]"), IN("[,1]"),
        IN("[1 2]"), IN("[[[]]]"), IN("[[[]]"), IN("[[]]]"), IN("{\"a\":1}"), IN("{\"a\":1,}"),
        IN("{\"a\"}"), IN("{\"a\":}"), IN("{\"a\" 1}"), IN("{\"a\":1 \"b\":2}"), IN("{1:2}"),
        IN("{a:1}"), IN("{\"a\":1]"), IN("[1}"), IN("{\"a\":[1,{\"b\":[]}],\"c\":{}}"),
        IN("{ \"a\" : [ 1 , { \"b\" : [ ] } ] , \"c\" : { } }"), IN(""), IN(" "), IN("\n\t"),
        IN("{"), IN("["), IN("}"), IN("]"), IN(":"), IN(","), IN("[\"a\":1]"), IN("{\"a\",1}"),
        IN("{}{}"), IN("[][]"), IN("{} x"), IN("[] ,"), IN("[]\f"), IN("\v[]"),
        IN("\xef\xbb\xbf{}"), /* a BOM is not whitespace */
        IN("{\"\":\"\"}"), IN("[\"\",\"\"]"), IN("[[],[[]],{\"a\":{}}]"),
        /* top-level scalars (accepted only with CKUBE_JP_DECODE_ANY) */
        IN("1"), IN("\"s\""), IN("true"), IN("false"), IN("null"), IN(" 1 "), IN("1 2"),
        IN("\"a\" \"b\""), IN("-"), IN("nul"), IN("truee"), IN("True"), IN("NULL"), IN("t"),
        IN("[true,false,null]"), IN("[truefalse]"), IN("[true1]"), IN("[nulls]"), IN("[fals]"),
        IN("[1true]"), IN("[1\"a\"]"), IN("[\"a\"1]"), IN("[\"a\"[]]"), IN("{\"a\":1}}"),
        IN("[1]x"), IN("[1] 1"),
    };
    /* clang-format on */
    check_table(t, sizeof t / sizeof t[0]);
}

static void test_strings(void **state)
{
    (void)state;
    /* clang-format off */
    static const struct input t[] = {
        IN("[\"plain ascii text\"]"), IN("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]"), IN("[\"\\a\"]"),
        IN("[\"\\x41\"]"), IN("[\"\\'\"]"), IN("[\"\\\"]"), IN("[\"\\\"]\"]"), IN("[\"\\u0041\"]"),
        IN("[\"\\u00e9\\u00C9\"]"), IN("[\"\\u20AC\\u20ac\"]"), IN("[\"\\uFFFF\\uFFFE\"]"),
        IN("[\"\\u0000\"]"), IN("{\"\\u0000\":1}"), IN("{\"a\\u0000b\":1}"), IN("[\"a\\u0000\"]"),
        IN("[\"\\u0001\\u001f\"]"), IN("[\"\\u007f\\u0080\\u07ff\\u0800\"]"),
        IN("[\"\\ud83d\\ude00\"]"), IN("[\"\\uD83D\\uDE00\"]"), IN("[\"\\udbff\\udfff\"]"),
        IN("[\"\\ud800\\udc00\"]"), IN("[\"\\ud83d\"]"), IN("[\"\\ude00\"]"),
        IN("[\"\\ude00\\ud83d\"]"), IN("[\"\\ud83d\\u0041\"]"), IN("[\"\\ud83d\\ud83d\"]"),
        IN("[\"\\ud83dx\"]"), IN("[\"\\ud83d\\n\"]"), IN("[\"\\ud83d\\u\"]"),
        IN("[\"\\ud83d\\uzzzz\"]"), IN("[\"\\ud83d\\udz00\"]"), IN("[\"\\u12\"]"),
        IN("[\"\\u12g4\"]"), IN("[\"\\u\"]"), IN("[\"\\U0041\"]"), IN("[\"\\u 041\"]"),
        IN("[\"\\u-041\"]"), IN("[\"\\u+041\"]"), IN("[\"\\u004"), IN("[\"\\"),
        IN("[\"abc"), IN("[\"abc\\\"]"), IN("[\"a\tb\"]"), IN("[\"a\nb\"]"), IN("[\"a\rb\"]"),
        IN("[\"\x1f\"]"), IN("[\"\x7f\"]"), IN("[\"\x01\"]"),
        /* UTF-8: good, overlong, surrogates, out of range, cut short */
        IN("[\"\xc3\xa9\"]"), IN("[\"\xe2\x82\xac\"]"), IN("[\"\xf0\x9f\x98\x80\"]"),
        IN("[\"\xf4\x8f\xbf\xbf\"]"), IN("[\"\xf4\x90\x80\x80\"]"), IN("[\"\xf5\x80\x80\x80\"]"),
        IN("[\"\xc0\x80\"]"), IN("[\"\xc1\xbf\"]"), IN("[\"\xc2\x80\"]"), IN("[\"\xe0\x80\x80\"]"),
        IN("[\"\xe0\x9f\xbf\"]"), IN("[\"\xe0\xa0\x80\"]"), IN("[\"\xed\x9f\xbf\"]"),
        IN("[\"\xed\xa0\x80\"]"), IN("[\"\xed\xbf\xbf\"]"), IN("[\"\xee\x80\x80\"]"),
        IN("[\"\xf0\x8f\xbf\xbf\"]"), IN("[\"\xf0\x90\x80\x80\"]"), IN("[\"\x80\"]"),
        IN("[\"\xbf\"]"), IN("[\"\xc3\"]"), IN("[\"\xc3\x28\"]"), IN("[\"\xe2\x82\"]"),
        IN("[\"\xe2\x82\x28\"]"), IN("[\"\xf0\x9f\x98\"]"), IN("[\"\xfe\"]"), IN("[\"\xff\"]"),
        IN("[\"\xc3"), IN("[\"\xe2\x82"), IN("[\"\xf0\x9f\x98"), IN("[\xc3\xa9]"),
        IN("[1]\xc3\xa9"), IN("{\"\xc3\xa9\":\"\xe2\x82\xac\"}"), IN("{\"\xc3\":1}"),
        /* escapes mixed with long plain runs and UTF-8 (crosses the 8-byte
         * scanning steps at every offset) */
        IN("[\"0123456789abcdef\\n0123456789abcdef\xc3\xa9xyz\\u00e9\\\\\"]"),
        IN("[\"1234567\\\"\",\"12345678\\\"\",\"123456789\\\"\"]"),
        IN("[\"1234567\xc3\xa9\",\"12345678\xc3\xa9\",\"123456789\xc3\xa9\"]"),
        IN("[\"1234567\x1f\"]"), IN("[\"12345678\x1f\"]"), IN("[\"123456789\x1f\"]"),
        IN("{\"key\\twith\\ttabs\":1,\"k\\u00e9y\":{\"\\ud83d\\ude00\":[\"\\/\"]}}"),
        IN("{\"a\\\"b\":\"c\\\"d\",\"e\":\"f\\\\\"}"),
    };
    /* clang-format on */
    check_table(t, sizeof t / sizeof t[0]);

    /* Outright: decoded bytes. */
    const char in[] = "[\"\\ud83d\\ude00\\u00e9\\n\\/\"]";
    json_t *v = ckube__json_parse(in, sizeof in - 1, 0);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_array_get(v, 0)), "\xf0\x9f\x98\x80\xc3\xa9\n/");
    json_decref(v);
    assert_null(ckube__json_parse("[\"\\u0000\"]", 10, 0));
    assert_null(ckube__json_parse("[\"\\ud800\"]", 10, 0));
    assert_null(ckube__json_parse("[\"\xed\xa0\x80\"]", 7, 0));
}

static void test_numbers(void **state)
{
    (void)state;
    /* clang-format off */
    static const struct input t[] = {
        IN("[0]"), IN("[-0]"), IN("[1]"), IN("[-1]"), IN("[123]"), IN("[01]"), IN("[-01]"),
        IN("[00]"), IN("[+1]"), IN("[.5]"), IN("[1.]"), IN("[1.5]"), IN("[-1.5]"), IN("[0.0]"),
        IN("[-0.0]"), IN("[1e2]"), IN("[1E2]"), IN("[1e+2]"), IN("[1e-2]"), IN("[1.5e-3]"),
        IN("[1.5E+3]"), IN("[1e]"), IN("[1e+]"), IN("[1e-]"), IN("[1.e2]"), IN("[1.5e]"),
        IN("[-]"), IN("[--1]"), IN("[-a]"), IN("[0x10]"), IN("[1_000]"), IN("[Infinity]"),
        IN("[NaN]"), IN("[-Infinity]"), IN("[1.5.5]"), IN("[1e2e3]"), IN("[1e2.5]"),
        IN("[0e0]"), IN("[0E-0]"), IN("[-0e+0]"), IN("[0.000001]"), IN("[1E400]"),
        IN("[-1e400]"), IN("[1e308]"), IN("[1.7976931348623157e308]"),
        IN("[1.7976931348623159e308]"), IN("[1e-400]"), IN("[-1e-400]"), IN("[4.9e-324]"),
        IN("[2.4e-324]"), IN("[1e-320]"), IN("[123456789012345678901234567890]"),
        IN("[123456789012345678901234567890.5]"), IN("[9223372036854775807]"),
        IN("[9223372036854775808]"), IN("[-9223372036854775808]"), IN("[-9223372036854775809]"),
        IN("[18446744073709551615]"), IN("[18446744073709551616]"), IN("[99999999999999999999]"),
        IN("[999999999999999999]"), IN("[-999999999999999999]"), IN("[1000000000000000000]"),
        IN("[9999999999999999999]"), IN("[-9999999999999999999]"), IN("[0.1]"),
        IN("[0.30000000000000004]"), IN("[3.141592653589793238462643383279]"),
        IN("[1e00000000000000000000000002]"), IN("[1e-0000000000000000000000002]"),
        IN("[0."
           "0000000000000000000000000000000000000000000000000000000000000000000000000000000001]"),
        IN("[1"
           "0000000000000000000000000000000000000000000000000000000000000000000000000000000.0]"),
        IN("[1,-1,1.0,-1.0,1e1,-1e1]"), IN("{\"a\":1,\"b\":-2.5e3,\"c\":0}"), IN("0"), IN("-0"),
        IN("1.5"), IN("-"), IN("1 "), IN(" 1"), IN("1."), IN("1e5"), IN("00"), IN("1x"),
        IN("[1 ]"), IN("[1\t,2\n]"),
    };
    /* clang-format on */
    check_table(t, sizeof t / sizeof t[0]);

    /* Outright: types and values. */
    json_t *v = ckube__json_parse("[-0,1E2,-9223372036854775808,2.5]", 33, 0);
    assert_non_null(v);
    assert_true(json_is_integer(json_array_get(v, 0)));
    assert_int_equal(json_integer_value(json_array_get(v, 0)), 0);
    assert_true(json_is_real(json_array_get(v, 1)));
    assert_true(json_real_value(json_array_get(v, 1)) == 100.0);
    assert_true(json_integer_value(json_array_get(v, 2)) == INT64_MIN);
    assert_true(json_real_value(json_array_get(v, 3)) == 2.5);
    json_decref(v);
    assert_null(ckube__json_parse("[9223372036854775808]", 21, 0));
    assert_null(ckube__json_parse("[1e400]", 7, 0));
    assert_null(ckube__json_parse("[01]", 4, 0));
}

/* jansson loses one NUL byte directly after a number or literal (its stream
 * uses NUL to mean "nothing pushed back"): "[1\0]" loads as [1]. We match. */
static void test_nul_after_token(void **state)
{
    (void)state;
    /* clang-format off */
    static const struct input t[] = {
        IN("[1\0]"), IN("[1\0\0]"), IN("[1 \0]"), IN("[1\0 ]"), IN("[\0 1]"), IN("[\0""1]"),
        IN("[\"a\"\0]"), IN("[\"a\0\"]"), IN("[true\0,false\0,null\0]"), IN("[tru\0e]"),
        IN("[1.5\0]"), IN("[1e5\0]"), IN("[-0\0]"), IN("[0\0""1]"), IN("[1.\0""5]"),
        IN("[1e\0""5]"), IN("[-\0""1]"), IN("{\"a\":1\0}"), IN("{\"a\"\0:1}"),
        IN("{\"a\":null\0,\"b\":2}"), IN("[]\0"), IN("{}\0"), IN("[1]\0"), IN("1\0"),
        IN("1\0 "), IN("true\0"), IN("\"s\"\0"), IN("\0"), IN("\0[]"), IN("[[1\0]\0]"),
        IN("[1\0,\0""2]"), IN("[9223372036854775808\0]"), IN("[1e400\0]"),
    };
    /* clang-format on */
    check_table(t, sizeof t / sizeof t[0]);

    /* Outright: the quirk is accepted, and only once. */
    json_t *v = ckube__json_parse("[1\0,true\0]", 10, 0);
    assert_non_null(v);
    assert_int_equal(json_array_size(v), 2);
    json_decref(v);
    assert_null(ckube__json_parse("[1\0\0]", 5, 0));
    assert_null(ckube__json_parse("[\"a\"\0]", 6, 0));
}

static void test_duplicates(void **state)
{
    (void)state;
    /* clang-format off */
    static const struct input t[] = {
        IN("{\"a\":1,\"b\":2,\"a\":3}"),
        IN("{\"a\":1,\"a\":2}"),
        IN("{\"a\":{\"x\":1},\"b\":[],\"a\":{\"y\":2}}"),
        IN("{\"a\":[1],\"b\":0,\"a\":[2,[3]],\"c\":{\"a\":1,\"a\":{}}}"),
        IN("{\"a\":1,\"\\u0061\":2}"),
        IN("{\"k\":1,\"k\":{\"k\":2,\"k\":[{\"k\":3,\"k\":4}]}}"),
        IN("[{\"a\":1},{\"a\":2}]"),
        IN("{\"a\":1,\"a\":x}"),
    };
    /* clang-format on */
    check_table(t, sizeof t / sizeof t[0]);

    /* Outright: the last value wins in the first key's place. */
    const char in[] = "{\"a\":1,\"b\":2,\"a\":3}";
    json_t *v = ckube__json_parse(in, sizeof in - 1, 0);
    assert_non_null(v);
    char *d = dump(v);
    assert_string_equal(d, "{\"a\":3,\"b\":2}");
    free(d);
    json_decref(v);
    assert_null(ckube__json_parse(in, sizeof in - 1, CKUBE_JP_REJECT_DUPLICATES));
}

/* `open` brackets around an optional scalar, closed again. */
static char *nested(size_t open, const char *inner, size_t *len)
{
    size_t in = strlen(inner), n = 2 * open + in;
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, '[', open);
    memcpy(s + open, inner, in);
    memset(s + open + in, ']', open);
    s[n] = '\0';
    *len = n;
    return s;
}

static void test_depth(void **state)
{
    (void)state;
    const size_t max = JSON_PARSER_MAX_DEPTH;
    for (size_t d = max - 2; d <= max + 2; d++) {
        size_t n;
        char *s = nested(d, "", &n);
        int ok = check_all_flags(s, n);
        /* Empty arrays: `d` nested ones are d levels deep. */
        assert_int_equal(ok, d <= max ? 4 : 0);
        free(s);
        s = nested(d, "1", &n);
        ok = check_all_flags(s, n);
        /* The scalar is one level deeper than the innermost array. */
        assert_int_equal(ok, d + 1 <= max ? 4 : 0);
        free(s);
        s = nested(d, "{\"a\":1}", &n);
        check_all_flags(s, n);
        free(s);
        s = nested(d - 1, "{\"a\":[]}", &n);
        check_all_flags(s, n);
        free(s);
        s = nested(d - 1, "{\"a\":{}}", &n);
        check_all_flags(s, n);
        free(s);
    }
    /* Objects nest the same way. */
    for (size_t d = max - 1; d <= max + 1; d++) {
        char *s = malloc(d * 6 + 8);
        assert_non_null(s);
        size_t n = 0;
        for (size_t i = 0; i < d; i++) {
            memcpy(s + n, "{\"k\":", 5);
            n += 5;
        }
        s[n++] = '0';
        memset(s + n, '}', d);
        n += d;
        check_all_flags(s, n);
        free(s);
    }
    /* A deep document that is cut short or unbalanced. */
    size_t n;
    char *s = nested(max, "", &n);
    check_all_flags(s, n - 1);
    check_all_flags(s, max);
    free(s);
}

/* Every 2-byte sequence, and every lead byte with every second byte in 3- and
 * 4-byte sequences, inside a string: validity must match jansson exactly. */
static void test_utf8_exhaustive(void **state)
{
    (void)state;
    char s[16];
    for (unsigned a = 0x80; a <= 0xff; a++) {
        for (unsigned b = 0; b <= 0xff; b++) {
            s[0] = '[';
            s[1] = '"';
            s[2] = (char)a;
            s[3] = (char)b;
            s[4] = '"';
            s[5] = ']';
            check_same(s, 6, 0);
            s[4] = (char)0x80;
            s[5] = '"';
            s[6] = ']';
            check_same(s, 7, 0);
            s[5] = (char)0xbf;
            s[6] = '"';
            s[7] = ']';
            check_same(s, 8, 0);
        }
    }
    /* Control bytes and every ASCII byte, raw and after a backslash. */
    for (unsigned c = 0; c < 0x80; c++) {
        s[0] = '[';
        s[1] = '"';
        s[2] = (char)c;
        s[3] = '"';
        s[4] = ']';
        check_same(s, 5, 0);
        s[2] = '\\';
        s[3] = (char)c;
        s[4] = '"';
        s[5] = ']';
        check_same(s, 6, 0);
        /* after a value and between tokens */
        memcpy(s, "[1", 2);
        s[2] = (char)c;
        s[3] = ']';
        check_same(s, 4, 0);
        memcpy(s, "[true", 5);
        s[5] = (char)c;
        s[6] = ']';
        check_same(s, 7, 0);
        s[0] = (char)c;
        memcpy(s + 1, "[]", 2);
        check_same(s, 3, 0);
    }
}

/* Long strings: the scratch buffer grows, scanning steps run many times. */
static void test_long_strings(void **state)
{
    (void)state;
    const size_t sizes[] = {255, 256, 257, 1000, 70000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], len = 0;
        char *s = malloc(n * 8 + 16);
        assert_non_null(s);
        s[len++] = '{';
        s[len++] = '"';
        for (size_t j = 0; j < n; j++)
            s[len++] = (char)('a' + j % 26);
        memcpy(s + len, "\\n\":\"", 5);
        len += 5;
        for (size_t j = 0; j < n; j++) {
            if (j % 7 == 0) {
                memcpy(s + len, "\\u00e9", 6);
                len += 6;
            } else if (j % 11 == 0) {
                memcpy(s + len, "\xe2\x82\xac", 3);
                len += 3;
            } else {
                s[len++] = (char)('A' + j % 26);
            }
        }
        s[len++] = '"';
        s[len++] = '}';
        assert_int_equal(check_all_flags(s, len), 4);
        free(s);
    }
}

/* xorshift: a fixed sequence, so failures reproduce. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Every prefix of each document, then many random small edits of them:
 * mostly invalid inputs, near valid ones. */
static void test_mutations(void **state)
{
    (void)state;
    const char *docs[] = {configmap, deployment, status};
    static const char interesting[] = "{}[]:,\"\\0123456789-+.eEtrufalsn \t\n\r\x00\x1f\x80\xc3\xed"
                                      "\xf0\xf4\xff/bu";
    for (size_t d = 0; d < 3; d++) {
        size_t n = strlen(docs[d]);
        for (size_t cut = 0; cut < n; cut++)
            check_same(docs[d], cut, 0);
        char *s = malloc(n + 8);
        assert_non_null(s);
        for (int iter = 0; iter < 6000; iter++) {
            memcpy(s, docs[d], n);
            size_t len = n;
            int edits = 1 + (int)(rng() % 3);
            for (int e = 0; e < edits; e++) {
                size_t at = rng() % len;
                char c = interesting[rng() % (sizeof interesting - 1)];
                switch (rng() % 3) {
                case 0: /* replace */
                    s[at] = c;
                    break;
                case 1: /* insert */
                    memmove(s + at + 1, s + at, len - at);
                    s[at] = c;
                    len++;
                    break;
                default: /* delete */
                    memmove(s + at, s + at + 1, len - at - 1);
                    len--;
                    break;
                }
            }
            static const int flag_sets[] = {0, CKUBE_JP_DECODE_ANY, CKUBE_JP_REJECT_DUPLICATES,
                                            ALL_FLAGS};
            check_same(s, len, flag_sets[rng() % 4]);
        }
        free(s);
    }
}

static void test_api_edges(void **state)
{
    (void)state;
    assert_null(ckube__json_parse(NULL, 0, 0));
    assert_null(ckube__json_parse("", 0, CKUBE_JP_DECODE_ANY));
    /* Flags this reader does not implement: declined, the caller falls
     * back to jansson. */
    assert_null(ckube__json_parse("[1]", 3, JSON_DISABLE_EOF_CHECK));
    assert_null(ckube__json_parse("[1]", 3, JSON_DECODE_INT_AS_REAL));
    assert_null(ckube__json_parse("[\"\\u0000\"]", 10, JSON_ALLOW_NUL));
    /* len bounds the input: the bytes after it are never looked at. */
    json_t *v = ckube__json_parse("[1]garbage", 3, 0);
    assert_non_null(v);
    json_decref(v);
    v = ckube__json_parse("12345", 2, CKUBE_JP_DECODE_ANY);
    assert_non_null(v);
    assert_int_equal(json_integer_value(v), 12);
    json_decref(v);
    /* Literals are singletons, as jansson's are. */
    v = ckube__json_parse("true", 4, CKUBE_JP_DECODE_ANY);
    assert_ptr_equal(v, json_true());
    json_decref(v);
}

/* ckube__json_loadb_limited: the same trees within the bound, a stop
 * with our own error text (jansson's reader never runs) past it. */
static void test_limited(void **state)
{
    (void)state;
    /* 2000 empty objects: 2000 * (224 + 16) + 128 bytes priced. */
    size_t n = 2000, cap = n * 3 + 8;
    char *doc = malloc(cap), *p = doc;
    *p++ = '[';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s{}", i ? "," : "");
    *p++ = ']';
    size_t len = (size_t)(p - doc);
    size_t need = n * (224 + 16) + 128;

    json_error_t je;
    bool too_large = true;
    size_t used = 0;
    json_t *v = ckube__json_loadb_limited(doc, len, 0, need, &used, &too_large, &je);
    assert_non_null(v);
    assert_false(too_large);
    assert_int_equal(used, need);
    assert_int_equal(json_array_size(v), n);
    json_decref(v);

    v = ckube__json_loadb_limited(doc, len, 0, need - 1, &used, &too_large, &je);
    assert_null(v);
    assert_true(too_large);
    char want[96];
    snprintf(want, sizeof want, "decoding it needs more than %zu bytes of memory", need - 1);
    assert_string_equal(je.text, want);

    /* A syntax error before the bound: jansson's own error, not "too large". */
    doc[len - 1] = ',';
    v = ckube__json_loadb_limited(doc, len, 0, need, &used, &too_large, &je);
    assert_null(v);
    assert_false(too_large);
    assert_non_null(strstr(je.text, "end of file"));
    /* ...and one past it is still "too large": the reader stops first. */
    v = ckube__json_loadb_limited(doc, len, 0, 1000, &used, &too_large, &je);
    assert_null(v);
    assert_true(too_large);

    /* Keys, strings and numbers are priced too; 0 means no bound. */
    const char *obj = "{\"abc\":\"hello\",\"n\":[1,2.5,true,null]}";
    size_t want_used = 224 + (120 + 3) + (80 + 5) + (120 + 1) + 128 + 4 * 16 + 2 * 32;
    v = ckube__json_loadb_limited(obj, strlen(obj), 0, want_used, &used, &too_large, &je);
    assert_non_null(v);
    assert_int_equal(used, want_used);
    json_decref(v);
    assert_null(
        ckube__json_loadb_limited(obj, strlen(obj), 0, want_used - 1, NULL, &too_large, &je));
    assert_true(too_large);
    v = ckube__json_loadb_limited(obj, strlen(obj), 0, 0, NULL, &too_large, &je);
    assert_non_null(v);
    assert_false(too_large);
    json_decref(v);
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_documents),       cmocka_unit_test(test_structure),
        cmocka_unit_test(test_strings),         cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_nul_after_token), cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_depth),           cmocka_unit_test(test_utf8_exhaustive),
        cmocka_unit_test(test_long_strings),    cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_api_edges),       cmocka_unit_test(test_limited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
