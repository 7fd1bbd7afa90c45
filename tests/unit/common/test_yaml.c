/* Tests for ckube/yaml.h: YAML 1.1 (go-yaml v2 / sigs.k8s.io/yaml) loading
 * rules, limits, errors with line numbers, and dump -> load round trips. */
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

#include "ckube/yaml.h"

/* ---- helpers ---- */

/* Loads the first document, failing the test on error. */
static json_t *load_ok(const char *y)
{
    char *err = NULL;
    json_t *v = ckube_yaml_load(y, strlen(y), &err);
    if (!v)
        print_error("unexpected error for %s: %s\n", y, err ? err : "(none)");
    assert_non_null(v);
    assert_null(err);
    return v;
}

/* Deep equality that, unlike json_equal, respects keys with NUL bytes. */
static bool json_same(const json_t *a, const json_t *b)
{
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *key;
        size_t key_len;
        json_t *av;
        json_object_keylen_foreach((json_t *)a, key, key_len, av)
        {
            json_t *bv = json_object_getn(b, key, key_len);
            if (!bv || !json_same(av, bv))
                return false;
        }
        return true;
    }
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!json_same(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_INTEGER:
        return json_integer_value(a) == json_integer_value(b);
    case JSON_REAL:
        return json_real_value(a) == json_real_value(b);
    default:
        return true;
    }
}

/* The YAML must load as exactly the value of `want_json` (integers stay
 * integers, reals reals). */
static void assert_loads_as(const char *y, const char *want_json)
{
    json_error_t je;
    json_t *want = json_loads(want_json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!want)
        print_error("bad expectation %s: %s\n", want_json, je.text);
    assert_non_null(want);
    json_t *got = load_ok(y);
    if (!json_same(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
        print_error("yaml %s\n  got  %s\n  want %s\n", y, g, want_json);
        free(g);
    }
    assert_true(json_same(got, want));
    json_decref(got);
    json_decref(want);
}

/* Loading must fail with an error message containing `want`. */
static void assert_load_error(const char *y, const char *want)
{
    char *err = NULL;
    json_t *v = ckube_yaml_load(y, strlen(y), &err);
    if (v) {
        char *s = json_dumps(v, JSON_ENCODE_ANY);
        print_error("expected error for %s, got %s\n", y, s);
        free(s);
    }
    assert_null(v);
    assert_non_null(err);
    if (!strstr(err, want))
        print_error("error for %s\n  got  %s\n  want substring %s\n", y, err, want);
    assert_non_null(strstr(err, want));
    free(err);
}

/* Follows "a.b.0.c" through objects and arrays (digits index arrays). */
static json_t *at(json_t *v, const char *path)
{
    char *copy = strdup(path), *save = NULL;
    for (char *tok = strtok_r(copy, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save)) {
        if (json_is_array(v))
            v = json_array_get(v, strtoul(tok, NULL, 10));
        else
            v = json_object_get(v, tok);
    }
    free(copy);
    return v;
}

static const char *str_at(json_t *v, const char *path)
{
    json_t *s = at(v, path);
    assert_true(json_is_string(s));
    return json_string_value(s);
}

static json_int_t int_at(json_t *v, const char *path)
{
    json_t *i = at(v, path);
    assert_true(json_is_integer(i));
    return json_integer_value(i);
}

/* dump(v) then load must give back an equal value. Returns the YAML. */
static char *assert_round_trip(json_t *v)
{
    char *y = ckube_yaml_dump(v);
    assert_non_null(y);
    char *err = NULL;
    json_t *back = ckube_yaml_load(y, strlen(y), &err);
    if (!back || !json_same(back, v)) {
        char *want = json_dumps(v, JSON_ENCODE_ANY);
        char *got = back ? json_dumps(back, JSON_ENCODE_ANY) : NULL;
        print_error("round trip failed\nyaml:\n%s\nwant %s\ngot  %s\nerr %s\n", y, want,
                    got ? got : "(null)", err ? err : "(none)");
        free(want);
        free(got);
    }
    assert_non_null(back);
    assert_true(json_same(back, v));
    json_decref(back);
    free(err);
    return y;
}

/* ---- real-world shapes ---- */

static const char kubeconfig[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "clusters:\n"
    "- cluster:\n"
    "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n"
    "    server: https://127.0.0.1:6443\n"
    "  name: local\n"
    "contexts:\n"
    "- context:\n"
    "    cluster: local\n"
    "    namespace: default\n"
    "    user: admin\n"
    "  name: admin@local\n"
    "current-context: admin@local\n"
    "preferences: {}\n"
    "users:\n"
    "- name: admin\n"
    "  user:\n"
    "    token: 0123456789abcdef  # a comment\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1\n"
    "      command: get-token\n"
    "      args: [\"--cluster\", local]\n"
    "      env: null\n"
    "      provideClusterInfo: true\n";

static void test_kubeconfig(void **state)
{
    (void)state;
    json_t *v = load_ok(kubeconfig);
    assert_string_equal(str_at(v, "kind"), "Config");
    assert_string_equal(str_at(v, "clusters.0.cluster.server"), "https://127.0.0.1:6443");
    assert_string_equal(str_at(v, "clusters.0.cluster.certificate-authority-data"),
                        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==");
    assert_string_equal(str_at(v, "clusters.0.name"), "local");
    assert_string_equal(str_at(v, "contexts.0.context.user"), "admin");
    assert_string_equal(str_at(v, "current-context"), "admin@local");
    assert_true(json_is_object(at(v, "preferences")));
    assert_int_equal(json_object_size(at(v, "preferences")), 0);
    /* A token of digits and letters stays a string; comments are dropped. */
    assert_string_equal(str_at(v, "users.0.user.token"), "0123456789abcdef");
    assert_string_equal(str_at(v, "users.0.user.exec.args.0"), "--cluster");
    assert_string_equal(str_at(v, "users.0.user.exec.args.1"), "local");
    assert_true(json_is_null(at(v, "users.0.user.exec.env")));
    assert_true(json_is_true(at(v, "users.0.user.exec.provideClusterInfo")));
    /* Key order follows the document. */
    const char *first = json_object_iter_key(json_object_iter(v));
    assert_string_equal(first, "apiVersion");
    json_decref(v);
}

static const char deployment[] = "apiVersion: apps/v1\n"
                                 "kind: Deployment\n"
                                 "metadata:\n"
                                 "  name: web\n"
                                 "  labels:\n"
                                 "    app: web\n"
                                 "    version: \"1.0\"\n"
                                 "    enabled: \"true\"\n"
                                 "  annotations:\n"
                                 "    port: \"8080\"\n"
                                 "    note: 'it''s quoted'\n"
                                 "spec:\n"
                                 "  replicas: 3\n"
                                 "  paused: false\n"
                                 "  progressDeadlineSeconds: 6_00\n"
                                 "  template:\n"
                                 "    spec:\n"
                                 "      containers:\n"
                                 "      - name: web\n"
                                 "        image: nginx:1.25\n"
                                 "        ports:\n"
                                 "        - containerPort: 8080\n"
                                 "          protocol: TCP\n"
                                 "        env:\n"
                                 "        - name: DEBUG\n"
                                 "          value: \"yes\"\n"
                                 "        - name: RATIO\n"
                                 "          value: \"0.5\"\n"
                                 "        resources:\n"
                                 "          limits: {cpu: 500m, memory: 128Mi}\n"
                                 "          requests:\n"
                                 "            cpu: 0.25\n"
                                 "      volumes:\n"
                                 "      - name: cfg\n"
                                 "        configMap:\n"
                                 "          defaultMode: 0644\n"
                                 "          optional: yes\n";

static void test_manifest_types(void **state)
{
    (void)state;
    json_t *v = load_ok(deployment);
    assert_int_equal(int_at(v, "spec.replicas"), 3);
    assert_true(json_is_false(at(v, "spec.paused")));
    assert_int_equal(int_at(v, "spec.progressDeadlineSeconds"), 600);
    /* Quoted numbers and booleans stay strings. */
    assert_string_equal(str_at(v, "metadata.labels.version"), "1.0");
    assert_string_equal(str_at(v, "metadata.labels.enabled"), "true");
    assert_string_equal(str_at(v, "metadata.annotations.port"), "8080");
    assert_string_equal(str_at(v, "metadata.annotations.note"), "it's quoted");
    assert_string_equal(str_at(v, "spec.template.spec.containers.0.image"), "nginx:1.25");
    assert_int_equal(int_at(v, "spec.template.spec.containers.0.ports.0.containerPort"), 8080);
    assert_string_equal(str_at(v, "spec.template.spec.containers.0.env.0.value"), "yes");
    assert_string_equal(str_at(v, "spec.template.spec.containers.0.resources.limits.cpu"), "500m");
    json_t *cpu = at(v, "spec.template.spec.containers.0.resources.requests.cpu");
    assert_true(json_is_real(cpu));
    assert_true(json_real_value(cpu) == 0.25);
    /* YAML 1.1: 0644 is octal, yes is true. */
    assert_int_equal(int_at(v, "spec.template.spec.volumes.0.configMap.defaultMode"), 420);
    assert_true(json_is_true(at(v, "spec.template.spec.volumes.0.configMap.optional")));
    json_decref(v);
}

/* ---- scalar resolution ---- */

static void test_plain_scalars(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *json;
    } cases[] = {
        /* booleans, every spelling go-yaml v2 accepts */
        {"[y, Y, yes, Yes, YES, true, True, TRUE, on, On, ON]",
         "[true,true,true,true,true,true,true,true,true,true,true]"},
        {"[n, N, no, No, NO, false, False, FALSE, off, Off, OFF]",
         "[false,false,false,false,false,false,false,false,false,false,false]"},
        {"[yES, tRUE, oN, nO]", "[\"yES\",\"tRUE\",\"oN\",\"nO\"]"},
        /* nulls */
        {"[~, null, Null, NULL, nULL, '', \"\"]", "[null,null,null,null,\"nULL\",\"\",\"\"]"},
        {"a:\nb: ~\n", "{\"a\":null,\"b\":null}"},
        /* integers */
        {"[0, 7, -7, +7, 1_000_000, 0x1F, 0X1f, -0x10, +0x10, 0x_0A_74_AE]",
         "[0,7,-7,7,1000000,31,31,-16,16,685230]"},
        {"[0o17, 0O17, 017, 02472256, 0b101, 0B101, -0b101010, 0b1010_0111_0100_1010_1110]",
         "[15,15,15,685230,5,5,-42,685230]"},
        {"[9223372036854775807, -9223372036854775808]",
         "[9223372036854775807,-9223372036854775808]"},
        /* go-yaml's own fallback accepts a sign after 0b */
        {"[0b-101, 0b+11]", "[-5,3]"},
        /* not integers: prefixes without digits, bad digits */
        {"[0x, 0b, 0o, 0xg, 0b2, 1_a, _1, 1e, 1.2.3, 0x1p3, 1:20, 190:20:30.15]",
         "[\"0x\",\"0b\",\"0o\",\"0xg\",\"0b2\",\"1_a\",\"_1\",\"1e\",\"1.2.3\",\"0x1p3\","
         "\"1:20\",\"190:20:30.15\"]"},
        /* 08 is not octal; it matches the float pattern and is 8.0 */
        {"[08, 09.5]", "[8,9.5]"},
        /* floats; integral ones print like Go's JSON encoder (no fraction) */
        {"[1.5, -1.5, .5, -.5, +.5, 1., 1e3, 1E3, 6.8523e+5, 685.230_15e+03, 685_230.15]",
         "[1.5,-1.5,0.5,-0.5,0.5,1,1000,1000,685230,685230.15,685230.15]"},
        {"[1.0, -0.0, 123456e1, 0.1e-2]", "[1,0,1234560,0.001]"},
        /* overflowing floats stay strings, as Go's ParseFloat fails */
        {"[1e400, .5e999, -1e400]", "[\"1e400\",\".5e999\",\"-1e400\"]"},
        /* integers beyond int64 become reals (jansson cannot hold them) */
        {"[18446744073709551615, 99999999999999999999]", "[1.8446744073709552e19,1e20]"},
        /* strings */
        {"[-, +, ., -b_c, +b_c, 50cent, 2015-01-01, 2015-02-24T18:19:39Z, <<, .inf_, 1 2]",
         "[\"-\",\"+\",\".\",\"-b_c\",\"+b_c\",\"50cent\",\"2015-01-01\","
         "\"2015-02-24T18:19:39Z\",\"<<\",\".inf_\",\"1 2\"]"},
        /* quoted and block scalars are never resolved */
        {"['1', \"true\", '~', \"0x1F\", 'null', \"1e3\"]",
         "[\"1\",\"true\",\"~\",\"0x1F\",\"null\",\"1e3\"]"},
        {"a: |\n  123\nb: >\n  true\n", "{\"a\":\"123\\n\",\"b\":\"true\\n\"}"},
        /* a bare scalar document */
        {"42", "42"},
        {"hello", "\"hello\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_loads_as(cases[i].yaml, cases[i].json);
}

static void test_nan_inf_rejected(void **state)
{
    (void)state;
    const char *bad[] = {"a: .inf", "a: -.Inf",        "a: +.INF", "a: .nan",
                         "a: .NaN", "a: !!float .inf", "[1, .NAN]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_load_error(bad[i], "cannot be represented in JSON");
    /* As keys they are fine: sigs.k8s.io/yaml prints them. */
    assert_loads_as("{.inf: a, -.inf: b, .nan: c}",
                    "{\".inf\":\"a\",\"-.inf\":\"b\",\".nan\":\"c\"}");
}

static void test_tags(void **state)
{
    (void)state;
    assert_loads_as("[!!str 123, !!str true, !!str ~, !!str 1.5]",
                    "[\"123\",\"true\",\"~\",\"1.5\"]");
    assert_loads_as("a: !!str\nb: !!null\n", "{\"a\":\"\",\"b\":null}");
    assert_loads_as("[!!int \"12\", !!int '0x10', !!int 1_0]", "[12,16,10]");
    assert_loads_as("[!!float 1, !!float '1.1', !!float -1]", "[1,1.1,-1]");
    assert_loads_as("[!!bool \"yes\", !!bool 'off', !!null '', !!null ~, !!null null]",
                    "[true,false,null,null,null]");
    assert_loads_as("[!!timestamp 2015-01-01, !!timestamp \"2015-02-24T18:19:39.12Z\"]",
                    "[\"2015-01-01\",\"2015-02-24T18:19:39.12Z\"]");
    assert_loads_as("[!<tag:yaml.org,2002:int> '7']", "[7]");
    assert_loads_as("%TAG !y! tag:yaml.org,2002:\n---\nv: !y!int '1'\n", "{\"v\":1}");
    /* Unknown and non-specific tags leave the text a string. */
    assert_loads_as("[!foo 12, ! 12, !bar true, !!merge x]", "[\"12\",\"12\",\"true\",\"x\"]");
    /* Tags on collections are ignored. */
    assert_loads_as("!!map {a: !!seq [1]}", "{\"a\":[1]}");
    /* !!binary decodes base64 (newlines ignored); invalid UTF-8 -> U+FFFD. */
    assert_loads_as("a: !!binary aGVsbG8gd29ybGQ=", "{\"a\":\"hello world\"}");
    assert_loads_as("a: !!binary |\n  aGVsbG8g\n  d29ybGQ=\n", "{\"a\":\"hello world\"}");
    assert_loads_as("a: !!binary gIGC", "{\"a\":\"\\ufffd\\ufffd\\ufffd\"}");
    assert_loads_as("a: !!binary ''", "{\"a\":\"\"}");

    assert_load_error("v: !!float 'error'", "line 1: cannot decode !!str `error` as a !!float");
    assert_load_error("v: !!int 1.5", "cannot decode !!float `1.5` as a !!int");
    assert_load_error("v: !!int abc", "cannot decode !!str `abc` as a !!int");
    assert_load_error("v: !!bool 1", "cannot decode !!int `1` as a !!bool");
    assert_load_error("v: !!null x", "cannot decode !!str `x` as a !!null");
    assert_load_error("v: !!timestamp 12", "cannot decode !!int `12` as a !!timestamp");
    assert_load_error("v: !!timestamp 2015-02-30", "as a !!timestamp");
    assert_load_error("a: !!binary ==", "!!binary value contains invalid base64 data");
    assert_load_error("a: !!binary aGVsbG8", "!!binary value contains invalid base64 data");
    assert_load_error("a: !!binary 'aGVs bG8='", "invalid base64");
    assert_load_error("a: !!binary 'aGU=bG8='", "invalid base64");
}

static void test_keys(void **state)
{
    (void)state;
    /* Non-string keys become strings as sigs.k8s.io/yaml converts them. */
    assert_loads_as(
        "{1: a, -2: b, 0x10: c, yes: d, n: e, 1.5: f, 1e6: g, 2.0: h, 0.1: i, "
        "3.14159265358979: j, 1e-05: k, 123456: l, 1234567.0: m, 2015-01-01: o}",
        "{\"1\":\"a\",\"-2\":\"b\",\"16\":\"c\",\"true\":\"d\",\"false\":\"e\","
        "\"1.5\":\"f\",\"1e+06\":\"g\",\"2\":\"h\",\"0.1\":\"i\",\"3.1415927\":\"j\","
        "\"1e-05\":\"k\",\"123456\":\"l\",\"1.234567e+06\":\"m\",\"2015-01-01\":\"o\"}");
    /* Float keys go through float32, as sigs.k8s.io/yaml formats them. */
    assert_loads_as("{1e300: a, -1e300: b, 0.000123: c, 16777217.0: d}",
                    "{\".inf\":\"a\",\"-.inf\":\"b\",\"0.000123\":\"c\",\"1.6777216e+07\":\"d\"}");
    /* Keys may hold any text, including NUL. */
    json_t *v = load_ok("\"a\\0b\": 1\n");
    assert_non_null(json_object_getn(v, "a\0b", 3));
    json_decref(v);
}

static void test_key_errors(void **state)
{
    (void)state;
    assert_load_error("~: null key", "line 1: unsupported map key `~`");
    assert_load_error("a: 1\n? \n: empty key\n", "line 2: unsupported map key");
    assert_load_error("18446744073709551615: x", "unsupported map key");
    assert_load_error("{[a]: 1}", "line 1: invalid map key: a sequence cannot be a mapping key");
    assert_load_error("? {a: 1}\n: x\n", "invalid map key: a mapping cannot be a mapping key");
    assert_load_error("a: &x [1]\n*x : 2\n", "line 2: invalid map key: alias 'x' refers to a");
    assert_load_error("a: &n ~\n*n : 2\n", "unsupported map key: alias 'n'");
    /* A complex key that is a scalar is fine. */
    assert_loads_as("? |\n  multi\n: v\n", "{\"multi\\n\":\"v\"}");
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    assert_load_error("a: 1\nb: 2\na: 3\n", "line 3: mapping key \"a\" already defined");
    assert_load_error("{a: 1, a: 1}", "mapping key \"a\" already defined");
    /* Duplicates after key conversion count too. */
    assert_load_error("\"1\": a\n1: b\n", "line 2: mapping key \"1\" already defined");
    assert_load_error("true: a\nyes: b\n", "mapping key \"true\" already defined");
    assert_load_error("x:\n  p: 1\n  q: 2\n  p: 3\n", "line 4: mapping key \"p\"");
    /* YAML 1.1: the keys y and Y are both the boolean true. */
    assert_load_error("y: 1\nY: 2\n", "line 2: mapping key \"true\" already defined");
    /* Same key in different mappings is fine. */
    assert_loads_as("a: {k: 1}\nb: {k: 2}\n", "{\"a\":{\"k\":1},\"b\":{\"k\":2}}");
}

static void test_block_scalars(void **state)
{
    (void)state;
    assert_loads_as("a: |\n  line1\n    indented\n  line3\n",
                    "{\"a\":\"line1\\n  indented\\nline3\\n\"}");
    assert_loads_as("a: >\n  folded\n  text\n\n  next\n", "{\"a\":\"folded text\\nnext\\n\"}");
    assert_loads_as("a: |-\n  strip\n\n", "{\"a\":\"strip\"}");
    assert_loads_as("a: |+\n  keep\n\nb: 1\n", "{\"a\":\"keep\\n\\n\",\"b\":1}");
    assert_loads_as("a: >-\n  one\n  two\n", "{\"a\":\"one two\"}");
    assert_loads_as("a: |2\n    four\n  two\n", "{\"a\":\"  four\\ntwo\\n\"}");
    /* From the YAML spec via go-yaml's tests. */
    assert_loads_as("scalar: | # Comment\n\n literal\n\n \ttext\n\n",
                    "{\"scalar\":\"\\nliteral\\n\\n\\ttext\\n\"}");
    assert_loads_as("scalar: > # Comment\n\n folded\n line\n \n next\n line\n  * one\n  * two\n\n"
                    " last\n line\n\n",
                    "{\"scalar\":\"\\nfolded line\\nnext line\\n * one\\n * two\\n\\nlast "
                    "line\\n\"}");
    /* Multi-line flow scalars fold. */
    assert_loads_as("v:\n- A\n- 'B\n\n  C'\n- \"x\n  y\"\n", "{\"v\":[\"A\",\"B\\nC\",\"x y\"]}");
    /* Double-quoted escapes, including JSON's \\/ and unicode. */
    assert_loads_as("s: \"tab\\t\\u00e9\\U0001F600\\x41\\/\\0\"",
                    "{\"s\":\"tab\\t\\u00e9\\ud83d\\ude00A/\\u0000\"}");
}

static void test_flow_and_json(void **state)
{
    (void)state;
    assert_loads_as(
        "{a: [1, two, {three: 3}], b: {}, c: [], d: [a,b,c,]}",
        "{\"a\":[1,\"two\",{\"three\":3}],\"b\":{},\"c\":[],\"d\":[\"a\",\"b\",\"c\"]}");
    assert_loads_as("{a: {b: https://github.com/x/y}, c: [http://h:8080/p]}",
                    "{\"a\":{\"b\":\"https://github.com/x/y\"},\"c\":[\"http://h:8080/p\"]}");
    /* JSON is YAML. */
    const char *json = "{\"kind\":\"Pod\",\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":"
                       "[{\"containerPort\":80}]}],\"x\":null,\"y\":1.25,\"z\":false}}";
    json_error_t je;
    json_t *want = json_loads(json, 0, &je);
    json_t *got = load_ok(json);
    assert_true(json_equal(want, got));
    json_decref(want);
    json_decref(got);
}

static void test_anchors_and_merge(void **state)
{
    (void)state;
    assert_loads_as("a: &x 1\nb: &y two\nc: *x\nd: *y\n",
                    "{\"a\":1,\"b\":\"two\",\"c\":1,\"d\":\"two\"}");
    assert_loads_as("a: &a {c: [1, 2]}\nb: *a\n", "{\"a\":{\"c\":[1,2]},\"b\":{\"c\":[1,2]}}");
    /* Later definitions shadow earlier ones. */
    assert_loads_as(
        "First: &anchor Foo\nSecond: *anchor\nOverride: &anchor Bar\nReuse: *anchor\n",
        "{\"First\":\"Foo\",\"Second\":\"Foo\",\"Override\":\"Bar\",\"Reuse\":\"Bar\"}");
    /* Anchored keys can be reused as keys and values. */
    assert_loads_as("&k key: v\nother: *k\n", "{\"key\":\"v\",\"other\":\"key\"}");
    assert_loads_as("a: &k 5\n*k : five\n", "{\"a\":5,\"5\":\"five\"}");

    /* Aliases of collections are independent copies. */
    json_t *v = load_ok("a: &x {m: 1}\nb: *x\n");
    json_object_set_new(at(v, "b"), "m", json_integer(2));
    assert_int_equal(int_at(v, "a.m"), 1);
    json_decref(v);

    /* The merge examples from yaml.org/type/merge.html all equal `want`. */
    const char *merge = "anchors:\n"
                        "  - &CENTER { x: 1, 'y': 2 }\n"
                        "  - &LEFT   { x: 0, 'y': 2 }\n"
                        "  - &BIG    { r: 10 }\n"
                        "  - &SMALL  { r: 1 }\n"
                        "one:\n  << : *CENTER\n  r: 10\n  label: center/big\n"
                        "multiple:\n  << : [ *CENTER, *BIG ]\n  label: center/big\n"
                        "override:\n  << : [ *BIG, *LEFT, *SMALL ]\n  x: 1\n  label: center/big\n"
                        "shortTag:\n  !!merge \"<<\" : [ *CENTER, *BIG ]\n  label: center/big\n"
                        "inline:\n  << : {x: 1, 'y': 2, r: 10}\n  label: center/big\n"
                        "mixed:\n  << : [ *CENTER, {r: 10} ]\n  label: center/big\n"
                        "keyBefore:\n  label: center/big\n  r: 10\n  << : *CENTER\n";
    json_t *doc = load_ok(merge);
    json_t *want = json_pack("{s:i,s:i,s:i,s:s}", "x", 1, "y", 2, "r", 10, "label", "center/big");
    const char *names[] = {"one",    "multiple", "override", "shortTag",
                           "inline", "mixed",    "keyBefore"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!json_equal(at(doc, names[i]), want))
            print_error("merge case %s differs\n", names[i]);
        assert_true(json_equal(at(doc, names[i]), want));
    }
    json_decref(want);
    json_decref(doc);
    /* Anchored keys may contain NUL. */
    v = load_ok("m: {&k \"a\\0b\": 1}\np: {*k : 2}\n");
    assert_int_equal(json_integer_value(json_object_getn(at(v, "p"), "a\0b", 3)), 2);
    json_decref(v);
    /* Merged keys may contain NUL. */
    v = load_ok("m: &m {\"a\\0b\": 1, a: 2}\nx: {<<: *m, a: 3}\n");
    assert_int_equal(json_object_size(at(v, "x")), 2);
    assert_int_equal(json_integer_value(json_object_getn(at(v, "x"), "a\0b", 3)), 1);
    assert_int_equal(int_at(v, "x.a"), 3);
    json_decref(v);
    /* A quoted "<<" is an ordinary key. */
    assert_loads_as("\"<<\": {a: 1}\n", "{\"<<\":{\"a\":1}}");

    assert_load_error("a: *b\n", "line 1: unknown anchor 'b' referenced");
    assert_load_error("b: *a\na: &a {c: 1}\n", "unknown anchor 'a' referenced");
    assert_load_error("a: &a\n  b: *a\n", "line 2: anchor 'a' value contains itself");
    assert_load_error("a: &x null\n<<:\n- *x\n", "map merge requires map or sequence of maps");
    assert_load_error("<<: 1\n", "line 1: map merge requires map or sequence of maps");
    assert_load_error("a: &x .inf_x\nb: &y .inf\n", "cannot be represented");
    /* Anchors do not cross documents. */
    char *err = NULL;
    json_t *docs = NULL;
    const char *two = "a: &x 1\n---\nb: *x\n";
    assert_int_equal(ckube_yaml_load_all(two, strlen(two), &docs, &err), -1);
    assert_null(docs);
    assert_non_null(strstr(err, "line 3: unknown anchor 'x'"));
    free(err);
}

static void test_multi_document(void **state)
{
    (void)state;
    const char *stream = "# leading comment\n"
                         "---\n"
                         "---\n"
                         "apiVersion: apiextensions.k8s.io/v1\n"
                         "kind: CustomResourceDefinition\n"
                         "metadata: {name: widgets.example.com}\n"
                         "---\n"
                         "# only a comment\n"
                         "---\n"
                         "~\n"
                         "...\n"
                         "---\n"
                         "apiVersion: example.com/v1\n"
                         "kind: Widget\n"
                         "spec: {size: 3}\n"
                         "...\n"
                         "--- plain\n";
    json_t *docs = NULL;
    char *err = NULL;
    assert_int_equal(ckube_yaml_load_all(stream, strlen(stream), &docs, &err), 0);
    assert_null(err);
    assert_int_equal(json_array_size(docs), 3);
    assert_string_equal(str_at(docs, "0.kind"), "CustomResourceDefinition");
    assert_string_equal(str_at(docs, "1.kind"), "Widget");
    assert_int_equal(int_at(docs, "1.spec.size"), 3);
    assert_string_equal(str_at(docs, "2"), "plain");
    json_decref(docs);

    /* load reads only the first document: an empty one is null... */
    json_t *v = load_ok("---\n---\na: 1\n");
    assert_true(json_is_null(v));
    json_decref(v);
    /* ...and garbage after the first document is not read. */
    assert_loads_as("---\nhello\n...\n}not yaml", "\"hello\"");
    assert_loads_as("a: 1\n---\nb: [", "{\"a\":1}");

    /* Empty input. */
    v = ckube_yaml_load("", 0, NULL);
    assert_true(json_is_null(v));
    json_decref(v);
    v = ckube_yaml_load(NULL, 0, NULL);
    assert_true(json_is_null(v));
    json_decref(v);
    assert_int_equal(ckube_yaml_load_all("# nothing\n", 10, &docs, NULL), 0);
    assert_int_equal(json_array_size(docs), 0);
    json_decref(docs);

    /* An error in a later document fails the whole stream. */
    const char *bad = "a: 1\n---\nb: 2\n---\nc: [\n";
    assert_int_equal(ckube_yaml_load_all(bad, strlen(bad), &docs, &err), -1);
    assert_null(docs);
    assert_non_null(strstr(err, "yaml: line"));
    free(err);
    /* err may be NULL. */
    assert_int_equal(ckube_yaml_load_all(bad, strlen(bad), &docs, NULL), -1);
    assert_null(ckube_yaml_load("a: [", 4, NULL));

    /* UTF-16 with a byte order mark is accepted, as by go-yaml. */
    static const char utf16le[] = "\xff\xfe"
                                  "a\0:\0 \0\xf1\0o\0\n\0";
    v = ckube_yaml_load(utf16le, sizeof utf16le - 1, NULL);
    assert_string_equal(str_at(v, "a"), "\xc3\xb1o");
    json_decref(v);

    /* Input need not be NUL-terminated: only len bytes are read. */
    const char buf[] = {'a', ':', ' ', '1', 'x', 'y', 'z'};
    assert_loads_as("a: 1", "{\"a\":1}");
    v = ckube_yaml_load(buf, 4, NULL);
    assert_int_equal(int_at(v, "a"), 1);
    json_decref(v);
}

static void test_errors_have_lines(void **state)
{
    (void)state;
    assert_load_error("a: 1\nb: 2\nc: d: e\n",
                      "yaml: line 3: mapping values are not allowed in this context");
    assert_load_error("v: [A,", "yaml: line 1: did not find expected node content");
    assert_load_error("v:\n- [A,", "yaml: line 2: did not find expected node content");
    assert_load_error("a:\n- b: *,", "yaml: line 2: did not find expected alphabetic or numeric");
    assert_load_error("value: -", "block sequence entries are not allowed in this context");
    assert_load_error("a:\n  b: 1\n c: 2\n", "yaml: line 3:");
    assert_load_error("a: 1\nb: \"unterminated\n\n",
                      "yaml: line 3: found unexpected end of stream (while scanning a quoted "
                      "scalar at line 2)");
    assert_load_error("v:\n- [A,\n", "yaml: line 2: did not find expected node content");
    assert_load_error("a: 1\n\tb: 2\n", "yaml: line 2:");
    /* Reader errors report the line of the bad byte. */
    assert_load_error("a: 1\nb: 2\nc: \xff\n", "yaml: line 3:");
    assert_load_error("a: 1\nb: \x01\n", "yaml: line 2: control characters are not allowed");
    assert_load_error("a: 1\nb: 2\n\nc: !!int x\n", "yaml: line 4: cannot decode");
}

/* ---- limits ---- */

/* The bomb: a 1000-byte scalar, then `levels - 1` levels of nine
 * aliases each of the level before (malloc'd). */
static char *alias_bomb(int levels, const char *first)
{
    size_t cap = strlen(first) + (size_t)levels * 64 + 16;
    char *s = malloc(cap);
    size_t n = (size_t)snprintf(s, cap, "%s\n", first);
    for (int i = 1; i < levels; i++) {
        char me = (char)('a' + i), prev = (char)('a' + i - 1);
        n += (size_t)snprintf(s + n, cap - n, "%c: &%c [", me, me);
        for (int k = 0; k < 9; k++)
            n += (size_t)snprintf(s + n, cap - n, "%s*%c", k ? "," : "", prev);
        n += (size_t)snprintf(s + n, cap - n, "]\n");
    }
    return s;
}

static double seconds_since(clock_t t0)
{
    return (double)(clock() - t0) / CLOCKS_PER_SEC;
}

static void test_billion_laughs(void **state)
{
    (void)state;
    /* The bodies that took a server to 1.3 and 1.9 GB: refused with
     * go-yaml's words (no line: go-yaml reports none) before anything
     * large is built. */
    char x1000[1008];
    memcpy(x1000, "a: &a ", 6);
    memset(x1000 + 6, 'x', 1000);
    x1000[1006] = '\0';
    for (int levels = 7; levels <= 8; levels++) {
        char *bomb = alias_bomb(levels, x1000);
        char *err = NULL;
        clock_t t0 = clock();
        json_t *v = ckube_yaml_load(bomb, strlen(bomb), &err);
        assert_null(v);
        assert_string_equal(err, "yaml: document contains excessive aliasing");
        assert_true(seconds_since(t0) < 1.0); /* generous: ~0.1 ms */
        free(err);
        free(bomb);
    }
    /* fuzz_yaml's slow unit, and the classic nine-level one. */
    char *lol = alias_bomb(7, "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]");
    assert_load_error(lol, "document contains excessive aliasing");
    free(lol);
    lol = alias_bomb(9, "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]");
    assert_load_error(lol, "document contains excessive aliasing");
    free(lol);
    /* Nine by nine by nine arrays of one anchor are fine (about 1000 of
     * go-yaml's decodes, 90% through aliases). */
    lol = alias_bomb(3, "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]");
    json_t *one = load_ok(lol);
    assert_string_equal(str_at(one, "c.8.8.8"), "lol");
    json_decref(one);
    free(lol);
    /* A stream does not reset the byte bounds: each document below adds
     * 10 MB of JSON text through aliases (fine alone), two add 20 MB. */
    size_t big = 100000, cap = 2 * (big + 100 * 4 + 64);
    char *stream = malloc(cap), *p = stream;
    for (int d = 0; d < 2; d++) {
        p += sprintf(p, "a: &a ");
        memset(p, 'y', big);
        p += big;
        p += sprintf(p, "\nb: [");
        for (int i = 0; i < 100; i++)
            p += sprintf(p, "%s*a", i ? "," : "");
        p += sprintf(p, "]\n---\n");
    }
    json_t *docs = NULL;
    char *err = NULL;
    assert_int_equal(ckube_yaml_load_all(stream, strlen(stream) / 2, &docs, &err), 0);
    json_decref(docs);
    assert_int_equal(ckube_yaml_load_all(stream, strlen(stream), &docs, &err), -1);
    assert_string_equal(err, "yaml: document contains excessive aliasing");
    free(err);
    free(stream);

    /* Map-based bombs through merge keys are bounded the same way. */
    const char *mbomb = "a: &a {a1: x, a2: x, a3: x, a4: x, a5: x, a6: x, a7: x, a8: x}\n"
                        "b: &b {b1: *a, b2: *a, b3: *a, b4: *a, b5: *a, b6: *a, b7: *a, b8: *a}\n"
                        "c: &c {c1: *b, c2: *b, c3: *b, c4: *b, c5: *b, c6: *b, c7: *b, c8: *b}\n"
                        "d: &d {d1: *c, d2: *c, d3: *c, d4: *c, d5: *c, d6: *c, d7: *c, d8: *c}\n"
                        "e: &e {e1: *d, e2: *d, e3: *d, e4: *d, e5: *d, e6: *d, e7: *d, e8: *d}\n"
                        "f: &f {f1: *e, f2: *e, f3: *e, f4: *e, f5: *e, f6: *e, f7: *e, f8: *e}\n"
                        "g: &g {<<: [*f, *f], g1: *f, g2: *f, g3: *f, g4: *f, g5: *f}\n";
    assert_load_error(mbomb, "excessive aliasing");
}

/* go-yaml v2's ratio rule, at its edge: `plain` zeros, an anchor on a
 * sequence of 199 items, and 1500 aliases of it. go-yaml counts the
 * document (1), the root mapping (1), three keys, three sequences, the
 * items, and per alias the alias node plus the anchor's 200 nodes, all of
 * them aliased: 300,000 aliased of 301,707 + plain decodes. The rule
 * allows 99% below 400,000 decodes: 1324 zeros are enough, 1323 are not. */
static char *ratio_doc(int plain)
{
    size_t cap = (size_t)plain * 2 + 199 * 2 + 1500 * 4 + 64;
    char *s = malloc(cap), *p = s;
    p += sprintf(p, "p: [");
    for (int i = 0; i < plain; i++)
        p += sprintf(p, "%s0", i ? "," : "");
    p += sprintf(p, "]\na: &a [");
    for (int i = 0; i < 199; i++)
        p += sprintf(p, "%sx", i ? "," : "");
    p += sprintf(p, "]\nb: [");
    for (int i = 0; i < 1500; i++)
        p += sprintf(p, "%s*a", i ? "," : "");
    sprintf(p, "]\n");
    return s;
}

static void test_alias_ratio_rule(void **state)
{
    (void)state;
    char *ok = ratio_doc(1324), *bad = ratio_doc(1323);
    json_t *v = load_ok(ok);
    assert_int_equal(json_array_size(at(v, "b")), 1500);
    assert_string_equal(str_at(v, "b.1499.198"), "x");
    json_decref(v);
    assert_load_error(bad, "yaml: document contains excessive aliasing");
    free(ok);
    free(bad);
    /* Below 100 aliased nodes or 1000 decodes the rule does not apply. */
    v = load_ok("a: &a [x,x,x,x,x,x,x,x,x]\nb: [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n");
    json_decref(v);
}

/* Aliases share scalars and copy collections; what they add is bounded in
 * memory and in JSON text, not only by go-yaml's rule. */
static void test_alias_sharing_and_bytes(void **state)
{
    (void)state;
    /* An alias to a scalar is the anchor's value itself. */
    json_t *v = load_ok("a: &s some text\nb: *s\nc: &m {k: [1, 2], t: *s}\nd: *m\n");
    assert_ptr_equal(at(v, "a"), at(v, "b"));
    assert_ptr_equal(at(v, "a"), at(v, "c.t"));
    /* Collections are copies (the server edits what it decodes) with
     * their scalars shared. */
    assert_ptr_not_equal(at(v, "c"), at(v, "d"));
    assert_ptr_not_equal(at(v, "c.k"), at(v, "d.k"));
    assert_ptr_equal(at(v, "c.k.0"), at(v, "d.k.0"));
    json_object_set_new(at(v, "d"), "k", json_integer(7));
    assert_int_equal(int_at(v, "c.k.1"), 2);
    json_decref(v);

    /* 100 KB repeated: 150 times (15 MB of JSON text) is within the
     * default 16 MiB, 200 times (20 MB) is not, though shared either way. */
    size_t big = 100000;
    for (int reps = 150; reps <= 200; reps += 50) {
        char *doc = malloc(big + (size_t)reps * 24 + 64), *p = doc;
        p += sprintf(p, "a: &a ");
        memset(p, 'y', big);
        p += big;
        p += sprintf(p, "\nb: [");
        for (int i = 0; i < reps; i++)
            p += sprintf(p, "%s*a", i ? "," : "");
        sprintf(p, "]\n");
        char *err = NULL;
        v = ckube_yaml_load(doc, strlen(doc), &err);
        if (reps == 150) {
            assert_non_null(v);
            assert_int_equal(json_string_length(at(v, "b.149")), big);
            assert_ptr_equal(at(v, "a"), at(v, "b.149"));
        } else {
            assert_null(v);
            assert_string_equal(err, "yaml: document contains excessive aliasing");
        }
        json_decref(v);
        free(err);
        /* Used as a key, the same text is copied each time. */
        p = doc + 6 + big;
        p += sprintf(p, "\nb:\n");
        for (int i = 0; i < reps; i++)
            p += sprintf(p, "- {*a : %d}\n", i);
        v = ckube_yaml_load(doc, strlen(doc), &err);
        if (reps == 150) {
            assert_non_null(v);
            assert_int_equal(json_object_size(at(v, "b.149")), 1);
        } else {
            assert_null(v);
            assert_string_equal(err, "yaml: document contains excessive aliasing");
        }
        json_decref(v);
        free(err);
        free(doc);
    }
}

/* ckube_yaml_load_limited: a memory bound on everything, told apart from
 * excessive aliasing. */
static void test_load_limited(void **state)
{
    (void)state;
    /* 1000 empty mappings: ~224 bytes each, whatever the text. */
    size_t cap = 1000 * 5 + 16;
    char *doc = malloc(cap), *p = doc;
    for (int i = 0; i < 1000; i++)
        p += sprintf(p, "- {}\n");
    ckube_yaml_limits lim = {.max_memory = 100000};
    char *err = NULL;
    bool too_large = false;
    json_t *v = ckube_yaml_load_limited(doc, strlen(doc), &lim, &too_large, &err);
    assert_null(v);
    assert_true(too_large);
    assert_non_null(strstr(err, "document too large: decoding it needs more than 100000 bytes"));
    free(err);
    lim.max_memory = 300000;
    v = ckube_yaml_load_limited(doc, strlen(doc), &lim, &too_large, &err);
    assert_non_null(v);
    assert_false(too_large);
    assert_null(err);
    assert_int_equal(json_array_size(v), 1000);
    json_decref(v);
    free(doc);

    /* An alias passing the bound is aliasing, not size. */
    lim = (ckube_yaml_limits){.max_memory = 20000};
    const char *al = "a: &a [[1],[2],[3],[4],[5],[6],[7],[8],[9],[10]]\nb: *a\nc: *a\nd: *a\n"
                     "e: *a\nf: *a\ng: *a\nh: *a\ni: *a\nj: *a\nk: *a\n";
    v = ckube_yaml_load_limited(al, strlen(al), &lim, &too_large, &err);
    assert_null(v);
    assert_false(too_large);
    assert_string_equal(err, "yaml: document contains excessive aliasing");
    free(err);
    lim = (ckube_yaml_limits){.max_alias_json = 100};
    v = ckube_yaml_load_limited(al, strlen(al), &lim, &too_large, &err);
    assert_null(v);
    assert_string_equal(err, "yaml: document contains excessive aliasing");
    free(err);
    /* NULL limits: only go-yaml's rule. */
    v = ckube_yaml_load_limited(al, strlen(al), NULL, &too_large, &err);
    assert_non_null(v);
    assert_int_equal(json_array_size(at(v, "k.9")), 1);
    json_decref(v);
}

static char *nested(size_t depth, const char *open, const char *close, const char *inner)
{
    size_t lo = strlen(open), lc = strlen(close), li = strlen(inner);
    char *s = malloc(depth * (lo + lc) + li + 1), *p = s;
    for (size_t i = 0; i < depth; i++, p += lo)
        memcpy(p, open, lo);
    memcpy(p, inner, li);
    p += li;
    for (size_t i = 0; i < depth; i++, p += lc)
        memcpy(p, close, lc);
    *p = '\0';
    return s;
}

static void test_deep_nesting(void **state)
{
    (void)state;
    /* Exactly the limit is fine. */
    char *s = nested(CKUBE_YAML_MAX_DEPTH, "[", "]", "1");
    json_t *v = load_ok(s);
    json_t *p = v;
    for (int i = 0; i < CKUBE_YAML_MAX_DEPTH; i++)
        p = json_array_get(p, 0);
    assert_int_equal(json_integer_value(p), 1);
    json_decref(v);
    free(s);

    s = nested(CKUBE_YAML_MAX_DEPTH + 1, "[", "]", "1");
    assert_load_error(s, "exceeded max depth of 1000");
    free(s);
    s = nested(CKUBE_YAML_MAX_DEPTH + 1, "{a: ", "}", "1");
    assert_load_error(s, "exceeded max depth");
    free(s);
    /* Far too deep (and unterminated): an error, never a crash. */
    s = nested(200000, "[", "", "");
    assert_load_error(s, "exceeded max depth");
    free(s);
    /* Block style nesting. */
    size_t depth = CKUBE_YAML_MAX_DEPTH + 5;
    char *b = malloc(depth * (depth + 4) + 16), *q = b;
    for (size_t i = 0; i < depth; i++) {
        memset(q, ' ', i);
        q += i;
        q += sprintf(q, "k:\n");
    }
    *q = '\0';
    assert_load_error(b, "exceeded max depth");
    free(b);

    /* Aliases cannot be used to nest deeper than the limit. */
    char *inner = nested(600, "[", "]", "1");
    char *outer = nested(600, "[", "]", "*x");
    char *doc = malloc(strlen(inner) + strlen(outer) + 32);
    sprintf(doc, "a: &x %s\nb: %s\n", inner, outer);
    assert_load_error(doc, "exceeded max depth");
    free(doc);
    free(outer);
    outer = nested(300, "[", "]", "*x");
    doc = malloc(strlen(inner) + strlen(outer) + 32);
    sprintf(doc, "a: &x %s\nb: %s\n", inner, outer);
    v = load_ok(doc);
    json_decref(v);
    free(doc);
    free(outer);
    free(inner);
}

/* ---- dump ---- */

static void test_dump_format(void **state)
{
    (void)state;
    json_t *v = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:i, s:[{s:s, s:[{s:i}]}]}, s:[], "
                          "s:{}, s:n, s:b, s:f}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", "web", "labels",
                          "app", "web", "spec", "replicas", 3, "containers", "name", "c", "ports",
                          "containerPort", 8080, "finalizers", "annotations", "deletionTimestamp",
                          "hostNetwork", 0, "ratio", 0.5);
    char *y = ckube_yaml_dump(v);
    assert_non_null(y);
    assert_string_equal(y, "apiVersion: v1\n"
                           "kind: Pod\n"
                           "metadata:\n"
                           "  name: web\n"
                           "  labels:\n"
                           "    app: web\n"
                           "spec:\n"
                           "  replicas: 3\n"
                           "  containers:\n"
                           "  - name: c\n"
                           "    ports:\n"
                           "    - containerPort: 8080\n"
                           "finalizers: []\n"
                           "annotations: {}\n"
                           "deletionTimestamp: null\n"
                           "hostNetwork: false\n"
                           "ratio: 0.5\n");
    free(y);
    json_decref(v);

    /* Strings that would load as something else are double-quoted. */
    static const struct {
        const char *s, *yaml;
    } quoted[] = {
        {"true", "v: \"true\"\n"},
        {"yes", "v: \"yes\"\n"},
        {"y", "v: \"y\"\n"},
        {"Off", "v: \"Off\"\n"},
        {"1", "v: \"1\"\n"},
        {"", "v: \"\"\n"},
        {"null", "v: \"null\"\n"},
        {"~", "v: \"~\"\n"},
        {"0x1", "v: \"0x1\"\n"},
        {"1_000", "v: \"1_000\"\n"},
        {"1e3", "v: \"1e3\"\n"},
        {".5", "v: \".5\"\n"},
        {"0755", "v: \"0755\"\n"},
        {"1e400", "v: \"1e400\"\n"},
        {".inf", "v: \".inf\"\n"},
        {"1:20", "v: \"1:20\"\n"},
        {"<<", "v: \"<<\"\n"},
        {"2024-01-01T00:00:00Z", "v: \"2024-01-01T00:00:00Z\"\n"},
        {"plain text", "v: plain text\n"},
        {"nginx:1.25", "v: nginx:1.25\n"},
        {"a: b", "v: 'a: b'\n"},
        {"- x", "v: '- x'\n"},
        {"line1\nline2\n", "v: |\n  line1\n  line2\n"},
        {"no newline\nat end", "v: |-\n  no newline\n  at end\n"},
    };
    for (size_t i = 0; i < sizeof quoted / sizeof quoted[0]; i++) {
        json_t *o = json_pack("{s:s}", "v", quoted[i].s);
        y = ckube_yaml_dump(o);
        if (strcmp(y, quoted[i].yaml) != 0)
            print_error("dump of %s\n  got  %s\n  want %s\n", quoted[i].s, y, quoted[i].yaml);
        assert_string_equal(y, quoted[i].yaml);
        free(y);
        free(assert_round_trip(o));
        json_decref(o);
    }

    /* Keys are quoted by the same rules. */
    v = json_pack("{s:i, s:i, s:i}", "1", 1, "on", 2, "", 3);
    y = ckube_yaml_dump(v);
    assert_string_equal(y, "\"1\": 1\n\"on\": 2\n\"\": 3\n");
    free(y);
    json_decref(v);

    /* Scalars at the root; reals keep a float shape. */
    v = json_pack("[f, f, f, I]", 1.0, 1e300, -2.5, (json_int_t)-9223372036854775807LL - 1);
    y = ckube_yaml_dump(v);
    assert_string_equal(y, "- 1.0\n- 1e+300\n- -2.5\n- -9223372036854775808\n");
    free(y);
    json_decref(v);
    v = json_string("hi");
    y = ckube_yaml_dump(v);
    assert_string_equal(y, "hi\n");
    free(y);
    json_decref(v);

    assert_null(ckube_yaml_dump(NULL));
}

static void test_dump_round_trip(void **state)
{
    (void)state;
#define S(x)                                                                                       \
    {                                                                                              \
        x, sizeof(x) - 1                                                                           \
    }
    static const struct {
        const char *s;
        size_t n;
    } strings[] = {
        S("true"),
        S("False"),
        S("yes"),
        S("NO"),
        S("on"),
        S("y"),
        S("N"),
        S("null"),
        S("Null"),
        S("~"),
        S(""),
        S(" "),
        S("  lead"),
        S("trail  "),
        S("0"),
        S("-0"),
        S("+1"),
        S("1.5"),
        S(".5"),
        S("1e3"),
        S("1e400"),
        S("0x1F"),
        S("0o17"),
        S("0b101"),
        S("017"),
        S("08"),
        S("1_000"),
        S(".inf"),
        S("-.Inf"),
        S(".nan"),
        S("1:20"),
        S("2024-01-01"),
        S("2024-01-01 10:00:00"),
        S("<<"),
        S("="),
        S("a: b"),
        S("a:b"),
        S("a #b"),
        S("#c"),
        S("- x"),
        S("-"),
        S("--"),
        S("---"),
        S("..."),
        S("? x"),
        S("?"),
        S(":x"),
        S("[a]"),
        S("{a}"),
        S("a, b"),
        S("*x"),
        S("&x"),
        S("!x"),
        S("|"),
        S(">"),
        S("'"),
        S("\""),
        S("%x"),
        S("@x"),
        S("`x"),
        S("x\n"),
        S("\n"),
        S("\n\n"),
        S("x\n\n"),
        S("\nx"),
        S("a\nb"),
        S(" a\nb"),
        S("a \nb"),
        S("a\n b\n"),
        S("a\r\nb"),
        S("a\rb"),
        S("tab\there"),
        S("\t"),
        S("nul\0byte"),
        S("caf\xc3\xa9"),
        S("\xe2\x80\xa8"),
        S("\xc2\x85"),
        S("emoji \xf0\x9f\x98\x80"),
        S("\xef\xbb\xbf"
          "bom"),
        S("\x7f"),
        S("\x01\x02"),
        S("\\"),
        S("\\n"),
        S("a\n---\nb"),
        S("a\n...\nb"),
        S("key: |\n  x"),
        S("very long xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx with: colon # hash"),
    };
#undef S
    json_t *obj = json_object();
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        const char *str = strings[i].s;
        size_t n = strings[i].n;
        json_t *s = json_stringn(str, n);
        assert_non_null(s);
        /* Each string as a value, as a key and inside a sequence. */
        json_t *one = json_pack("{s:O}", "v", s);
        free(assert_round_trip(one));
        json_decref(one);
        json_t *k = json_object();
        json_object_setn(k, str, n, s);
        free(assert_round_trip(k));
        json_decref(k);
        json_object_setn(obj, str, n, s);
        json_array_append(arr, s);
        json_decref(s);
    }
    free(assert_round_trip(obj));
    free(assert_round_trip(arr));
    json_t *both = json_pack("{s:o, s:o, s:[i, f, f, b, n, {}, []]}", "o", obj, "a", arr, "n",
                             (json_int_t)-5, 0.1, 123456789.125, 1);
    free(assert_round_trip(both));
    json_decref(both);

    /* Loaded manifests survive dump -> load unchanged. */
    json_t *k = load_ok(kubeconfig);
    free(assert_round_trip(k));
    json_decref(k);
    json_t *d = load_ok(deployment);
    free(assert_round_trip(d));
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubeconfig),
        cmocka_unit_test(test_manifest_types),
        cmocka_unit_test(test_plain_scalars),
        cmocka_unit_test(test_nan_inf_rejected),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_key_errors),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_block_scalars),
        cmocka_unit_test(test_flow_and_json),
        cmocka_unit_test(test_anchors_and_merge),
        cmocka_unit_test(test_multi_document),
        cmocka_unit_test(test_errors_have_lines),
        cmocka_unit_test(test_billion_laughs),
        cmocka_unit_test(test_alias_ratio_rule),
        cmocka_unit_test(test_alias_sharing_and_bytes),
        cmocka_unit_test(test_load_limited),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_dump_format),
        cmocka_unit_test(test_dump_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
