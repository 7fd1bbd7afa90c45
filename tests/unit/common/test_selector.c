/* Label and field selector parsing, matching and error wording. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <jansson.h>

#include "ckube/selector.h"

/* An object's labels (or fields): NULL-terminated key/value pairs. */
typedef struct kv {
    const char *k, *v;
} kv;

static const char *lookup(void *ctx, const char *key)
{
    for (const kv *p = ctx; p && p->k; p++)
        if (strcmp(p->k, key) == 0)
            return p->v;
    return NULL;
}

static ckube_selector *label(const char *s)
{
    ckube_selector *sel = NULL;
    char *err = NULL;
    int rc = ckube_label_selector_parse(s, &sel, &err);
    if (rc != 0)
        fail_msg("parse of '%s' failed: %s", s, err ? err : "(null)");
    assert_null(err);
    assert_non_null(sel);
    return sel;
}

static ckube_selector *field(const char *s)
{
    ckube_selector *sel = NULL;
    char *err = NULL;
    int rc = ckube_field_selector_parse(s, &sel, &err);
    if (rc != 0)
        fail_msg("parse of '%s' failed: %s", s, err ? err : "(null)");
    assert_non_null(sel);
    return sel;
}

static void expect_label_error(const char *s, const char *want)
{
    ckube_selector *sel = (ckube_selector *)1;
    char *err = NULL;
    assert_int_equal(ckube_label_selector_parse(s, &sel, &err), -1);
    assert_null(sel);
    assert_non_null(err);
    if (strcmp(err, want) != 0)
        fail_msg("selector '%s'\n got: %s\nwant: %s", s, err, want);
    free(err);
    /* A NULL err pointer is allowed and must not leak. */
    assert_int_equal(ckube_label_selector_parse(s, &sel, NULL), -1);
}

static void expect_field_error(const char *s, const char *want)
{
    ckube_selector *sel = (ckube_selector *)1;
    char *err = NULL;
    assert_int_equal(ckube_field_selector_parse(s, &sel, &err), -1);
    assert_null(sel);
    assert_non_null(err);
    if (strcmp(err, want) != 0)
        fail_msg("selector '%s'\n got: %s\nwant: %s", s, err, want);
    free(err);
    assert_int_equal(ckube_field_selector_parse(s, &sel, NULL), -1);
}

static void expect_str(const ckube_selector *sel, const char *want)
{
    char *s = ckube_selector_string(sel);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
}

static bool matches(const ckube_selector *sel, const kv *obj)
{
    return ckube_selector_matches(sel, lookup, (void *)obj);
}

static const kv NONE[] = {{NULL, NULL}};
static const kv PROD[] = {{"env", "prod"}, {"tier", "fe"}, {NULL, NULL}};
static const kv DEV[] = {{"env", "dev"}, {NULL, NULL}};
static const kv QA[] = {{"env", "qa"}, {NULL, NULL}};
static const kv EMPTY_ENV[] = {{"env", ""}, {NULL, NULL}};

static void test_empty(void **state)
{
    (void)state;
    const char *inputs[] = {"", "   ", " \t\r\n ", NULL};
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        ckube_selector *sel = label(inputs[i]);
        assert_true(ckube_selector_empty(sel));
        assert_true(matches(sel, NONE));
        assert_true(matches(sel, PROD));
        expect_str(sel, "");
        ckube_selector_free(sel);
    }
    ckube_selector *f = field(",,");
    assert_true(ckube_selector_empty(f));
    assert_true(matches(f, PROD));
    ckube_selector_free(f);
    assert_true(ckube_selector_empty(NULL));
}

static void test_equals(void **state)
{
    (void)state;
    const char *forms[] = {"env=prod", "env==prod", " env = prod ", "\tenv\n==\rprod"};
    for (size_t i = 0; i < 4; i++) {
        ckube_selector *sel = label(forms[i]);
        assert_false(ckube_selector_empty(sel));
        assert_int_equal(sel->nreqs, 1);
        assert_int_equal(sel->reqs[0].op, CKUBE_SEL_EQUALS);
        assert_true(matches(sel, PROD));
        assert_false(matches(sel, DEV));
        assert_false(matches(sel, NONE));
        expect_str(sel, "env=prod");
        assert_string_equal(ckube_selector_required_value(sel, "env"), "prod");
        assert_null(ckube_selector_required_value(sel, "tier"));
        ckube_selector_free(sel);
    }
    /* An empty exact value matches only an empty label, not a missing one. */
    ckube_selector *sel = label("env=");
    assert_true(matches(sel, EMPTY_ENV));
    assert_false(matches(sel, NONE));
    assert_false(matches(sel, DEV));
    expect_str(sel, "env=");
    ckube_selector_free(sel);
}

static void test_not_equals(void **state)
{
    (void)state;
    ckube_selector *sel = label("env!=prod");
    assert_int_equal(sel->reqs[0].op, CKUBE_SEL_NOT_EQUALS);
    assert_false(matches(sel, PROD));
    assert_true(matches(sel, DEV));
    assert_true(matches(sel, NONE)); /* objects without the key match */
    expect_str(sel, "env!=prod");
    assert_null(ckube_selector_required_value(sel, "env"));
    ckube_selector_free(sel);
}

static void test_in_notin(void **state)
{
    (void)state;
    ckube_selector *sel = label("env in ( prod , dev,prod )");
    assert_int_equal(sel->reqs[0].op, CKUBE_SEL_IN);
    assert_int_equal(sel->reqs[0].nvalues, 2); /* sorted, deduplicated */
    assert_string_equal(sel->reqs[0].values[0], "dev");
    assert_string_equal(sel->reqs[0].values[1], "prod");
    assert_true(matches(sel, PROD));
    assert_true(matches(sel, DEV));
    assert_false(matches(sel, QA));
    assert_false(matches(sel, NONE));
    expect_str(sel, "env in (dev,prod)");
    assert_null(ckube_selector_required_value(sel, "env"));
    ckube_selector_free(sel);

    sel = label("env notin (prod)");
    assert_int_equal(sel->reqs[0].op, CKUBE_SEL_NOT_IN);
    assert_false(matches(sel, PROD));
    assert_true(matches(sel, DEV));
    assert_true(matches(sel, NONE)); /* objects without the key match */
    expect_str(sel, "env notin (prod)");
    ckube_selector_free(sel);

    /* One value pins the key. */
    sel = label("env in (prod)");
    assert_string_equal(ckube_selector_required_value(sel, "env"), "prod");
    ckube_selector_free(sel);
}

static void test_in_empty_values(void **state)
{
    (void)state;
    /* Upstream accepts empty values: "()" is the set {""}, and empty
     * elements between commas are "" too. */
    ckube_selector *sel = label("env in ()");
    assert_int_equal(sel->reqs[0].nvalues, 1);
    assert_string_equal(sel->reqs[0].values[0], "");
    assert_true(matches(sel, EMPTY_ENV));
    assert_false(matches(sel, NONE));
    assert_false(matches(sel, PROD));
    expect_str(sel, "env in ()");
    ckube_selector_free(sel);

    sel = label("env in (a,,b)");
    assert_int_equal(sel->reqs[0].nvalues, 3);
    assert_string_equal(sel->reqs[0].values[0], "");
    expect_str(sel, "env in (,a,b)");
    ckube_selector_free(sel);

    sel = label("env notin (,prod,)");
    assert_int_equal(sel->reqs[0].nvalues, 2);
    assert_false(matches(sel, EMPTY_ENV));
    assert_false(matches(sel, PROD));
    assert_true(matches(sel, DEV));
    ckube_selector_free(sel);
}

static void test_exists(void **state)
{
    (void)state;
    ckube_selector *sel = label("env");
    assert_int_equal(sel->reqs[0].op, CKUBE_SEL_EXISTS);
    assert_int_equal(sel->reqs[0].nvalues, 0);
    assert_true(matches(sel, PROD));
    assert_true(matches(sel, EMPTY_ENV));
    assert_false(matches(sel, NONE));
    expect_str(sel, "env");
    ckube_selector_free(sel);

    sel = label("! env");
    assert_int_equal(sel->reqs[0].op, CKUBE_SEL_DOES_NOT_EXIST);
    assert_false(matches(sel, PROD));
    assert_true(matches(sel, NONE));
    expect_str(sel, "!env");
    ckube_selector_free(sel);
}

static void test_gt_lt(void **state)
{
    (void)state;
    const kv seven[] = {{"n", "7"}, {NULL, NULL}};
    const kv five[] = {{"n", "5"}, {NULL, NULL}};
    const kv word[] = {{"n", "abc"}, {NULL, NULL}};
    const kv big[] = {{"n", "99999999999999999999"}, {NULL, NULL}};
    const kv neg[] = {{"n", "-3"}, {NULL, NULL}};
    ckube_selector *sel = label("n>5,n<10");
    assert_int_equal(sel->nreqs, 2);
    assert_true(matches(sel, seven));
    assert_false(matches(sel, five)); /* strictly greater */
    assert_false(matches(sel, word)); /* not an integer: no match */
    assert_false(matches(sel, big));  /* out of int64 range */
    assert_false(matches(sel, NONE)); /* missing key: no match */
    expect_str(sel, "n>5,n<10");
    ckube_selector_free(sel);

    sel = label("n<0");
    assert_true(matches(sel, neg));
    assert_false(matches(sel, five));
    ckube_selector_free(sel);
}

static void test_multiple_sorted(void **state)
{
    (void)state;
    ckube_selector *sel = label("tier in (fe), env=prod, !debug, app");
    assert_int_equal(sel->nreqs, 4);
    expect_str(sel, "app,!debug,env=prod,tier in (fe)");
    const kv ok[] = {{"app", "x"}, {"env", "prod"}, {"tier", "fe"}, {NULL, NULL}};
    const kv debug[] = {
        {"app", "x"}, {"env", "prod"}, {"tier", "fe"}, {"debug", "1"}, {NULL, NULL}};
    assert_true(matches(sel, ok));
    assert_false(matches(sel, debug));
    assert_false(matches(sel, PROD)); /* no app */
    assert_string_equal(ckube_selector_required_value(sel, "tier"), "fe");
    assert_string_equal(ckube_selector_required_value(sel, "env"), "prod");
    assert_null(ckube_selector_required_value(sel, "app"));
    ckube_selector_free(sel);

    /* Equal keys keep their order; the first decides the exact match. */
    sel = label("a!=b,a=c");
    expect_str(sel, "a!=b,a=c");
    assert_null(ckube_selector_required_value(sel, "a"));
    ckube_selector_free(sel);
}

static void test_keywords_and_keys(void **state)
{
    (void)state;
    /* `in`/`notin` are plain identifiers as keys and values. */
    ckube_selector *sel = label("in in (in,notin),notin=in");
    assert_int_equal(sel->nreqs, 2);
    expect_str(sel, "in in (in,notin),notin=in");
    ckube_selector_free(sel);

    sel = label("example.com/My_key.1=V-1.x_Y");
    const kv obj[] = {{"example.com/My_key.1", "V-1.x_Y"}, {NULL, NULL}};
    assert_true(matches(sel, obj));
    ckube_selector_free(sel);

    char key[80];
    memset(key, 'k', 63);
    strcpy(key + 63, "=v");
    sel = label(key);
    ckube_selector_free(sel);
}

#define NAME_PART_REGEX                                                                            \
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "  \
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for " \
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define LABEL_VALUE_REGEX                                                                          \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "    \
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', " \
    " or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_label_error("a=b=c", "found '=', expected: ',' or 'end of string'");
    expect_label_error("a=b c", "found 'c', expected: ',' or 'end of string'");
    expect_label_error("a,", "found '', expected: identifier after ','");
    expect_label_error("a,,b", "found ',', expected: identifier after ','");
    expect_label_error(",a", "found ',', expected: !, identifier, or 'end of string'");
    expect_label_error("(", "found '(', expected: !, identifier, or 'end of string'");
    expect_label_error("a b",
                       "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, "
                       "gt, lt");
    expect_label_error("!", "unable to parse requirement: found '', expected: identifier");
    expect_label_error("!!a", "unable to parse requirement: found '!', expected: identifier");
    expect_label_error("!a=b", "found '=', expected: ',' or 'end of string'");
    expect_label_error("a=(", "unable to parse requirement: found '(', expected: identifier");
    expect_label_error("a===b", "unable to parse requirement: found '=', expected: identifier");
    /* unbalanced or missing parentheses */
    expect_label_error("x in (a", "unable to parse requirement: found '', expected: ',' or ')'");
    expect_label_error("x in (a,", "unable to parse requirement: found '', expected: ',', or "
                                   "identifier");
    expect_label_error("x in a)", "unable to parse requirement: found 'a' expected: '('");
    expect_label_error("x in", "unable to parse requirement: found '' expected: '('");
    expect_label_error("x in (a))", "found ')', expected: ',' or 'end of string'");
    expect_label_error("x in ((a)", "unable to parse requirement: found '(', expected: ',', ')' "
                                    "or identifier");
    expect_label_error("x in (a b)",
                       "unable to parse requirement: found 'b', expected: ',' or ')'");
    expect_label_error("x in (=)", "unable to parse requirement: found '=', expected: ',', ')' or "
                                   "identifier");
    expect_label_error("x notin (a,=)", "unable to parse requirement: found '=', expected: ',', "
                                        "or identifier");
}

static void test_invalid_keys_values(void **state)
{
    (void)state;
    expect_label_error(
        "-a=b", "unable to parse requirement: <nil>: Invalid value: \"-a\": " NAME_PART_REGEX);
    expect_label_error("a/b/c",
                       "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified "
                       "name must consist of alphanumeric characters, '-', '_' or '.', and must "
                       "start and end with an alphanumeric character (e.g. 'MyName',  or "
                       "'my.name',  or '123-abc', regex used for validation is "
                       "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
                       "subdomain prefix and '/' (e.g. 'example.com/MyName')");
    expect_label_error("Example.com/a=b",
                       "unable to parse requirement: <nil>: Invalid value: \"Example.com/a\": "
                       "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                       "alphanumeric characters, '-' or '.', and must start and end with an "
                       "alphanumeric character (e.g. 'example.com', regex used for validation is "
                       "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
    expect_label_error("/a", "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix "
                             "part must be non-empty");
    expect_label_error("a/", "unable to parse requirement: <nil>: Invalid value: \"a/\": name part "
                             "must be non-empty; " NAME_PART_REGEX);
    char key[80];
    memset(key, 'k', 64);
    strcpy(key + 64, "=v");
    char want[256];
    snprintf(want, sizeof want,
             "unable to parse requirement: <nil>: Invalid value: \"%.64s\": name part must be no "
             "more than 63 characters",
             key);
    expect_label_error(key, want);

    expect_label_error(
        "a=-b",
        "unable to parse requirement: values[0][a]: Invalid value: \"-b\": " LABEL_VALUE_REGEX);
    expect_label_error("a in (zz_,ok)", "unable to parse requirement: values[1][a]: Invalid value: "
                                        "\"zz_\": " LABEL_VALUE_REGEX);
    char val[80] = "a=";
    memset(val + 2, 'v', 64);
    val[66] = 0;
    expect_label_error(val, "unable to parse requirement: values[0][a]: Invalid value: "
                            "\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\": "
                            "must be no more than 63 characters");
    expect_label_error("n>abc", "unable to parse requirement: values[0]: Invalid value: \"abc\": "
                                "for 'Gt', 'Lt' operators, the value must be an integer");
    expect_label_error("n<", "unable to parse requirement: values[0]: Invalid value: \"\": for "
                             "'Gt', 'Lt' operators, the value must be an integer");
    /* -1 is an integer but not a valid label value */
    expect_label_error(
        "n>-1",
        "unable to parse requirement: values[0][n]: Invalid value: \"-1\": " LABEL_VALUE_REGEX);
    /* several problems are aggregated in brackets */
    expect_label_error("n>a-", "unable to parse requirement: [values[0]: Invalid value: \"a-\": "
                               "for 'Gt', 'Lt' operators, the value must be an integer, "
                               "values[0][n]: Invalid value: \"a-\": " LABEL_VALUE_REGEX "]");
}

static void test_null_input(void **state)
{
    (void)state;
    ckube_selector *sel = NULL;
    assert_int_equal(ckube_label_selector_parse(NULL, &sel, NULL), 0);
    assert_true(ckube_selector_empty(sel));
    ckube_selector_free(sel);
    assert_int_equal(ckube_field_selector_parse(NULL, &sel, NULL), 0);
    assert_true(ckube_selector_empty(sel));
    ckube_selector_free(sel);
    ckube_selector_free(NULL);
}

/* ---- LabelSelector objects (metav1.LabelSelectorAsSelector) ---- */

static ckube_selector *from_json(const char *text)
{
    json_error_t je;
    json_t *ls = json_loads(text, 0, &je);
    assert_non_null(ls);
    ckube_selector *sel = NULL;
    char *err = NULL;
    if (ckube_label_selector_from_json(ls, &sel, &err) != 0)
        fail_msg("%s: %s", text, err ? err : "(null)");
    json_decref(ls);
    assert_null(err);
    assert_non_null(sel);
    return sel;
}

static void expect_json_error(const char *text, const char *want)
{
    json_t *ls = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    assert_true(ls || !text);
    ckube_selector *sel = (ckube_selector *)1;
    char *err = NULL;
    assert_int_equal(ckube_label_selector_from_json(ls, &sel, &err), -1);
    assert_null(sel);
    assert_non_null(err);
    if (strcmp(err, want) != 0)
        fail_msg("selector %s\n got: %s\nwant: %s", text ? text : "NULL", err, want);
    free(err);
    assert_int_equal(ckube_label_selector_from_json(ls, &sel, NULL), -1);
    json_decref(ls);
}

static void test_from_json(void **state)
{
    (void)state;
    /* empty: everything */
    const char *everything[] = {"{}", "{\"matchLabels\":{},\"matchExpressions\":[]}",
                                "{\"matchLabels\":null,\"matchExpressions\":null}"};
    for (size_t i = 0; i < sizeof everything / sizeof *everything; i++) {
        ckube_selector *sel = from_json(everything[i]);
        assert_true(ckube_selector_empty(sel));
        assert_true(matches(sel, NONE));
        ckube_selector_free(sel);
    }
    /* matchLabels and matchExpressions ANDed, sorted by key as upstream's
     * Add, values sorted */
    ckube_selector *sel =
        from_json("{\"matchLabels\":{\"env\":\"prod\"},\"matchExpressions\":["
                  "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"fe\",\"be\"]},"
                  "{\"key\":\"canary\",\"operator\":\"DoesNotExist\"},"
                  "{\"key\":\"env\",\"operator\":\"Exists\",\"values\":null}]}");
    expect_str(sel, "!canary,env=prod,env,tier in (be,fe)");
    assert_true(matches(sel, PROD));
    assert_false(matches(sel, DEV));
    const kv canary[] = {{"env", "prod"}, {"tier", "fe"}, {"canary", "1"}, {NULL, NULL}};
    assert_false(matches(sel, canary));
    ckube_selector_free(sel);
    sel = from_json("{\"matchExpressions\":[{\"key\":\"env\",\"operator\":\"NotIn\","
                    "\"values\":[\"prod\",\"qa\"]}]}");
    assert_true(matches(sel, NONE)); /* NotIn matches a missing key */
    assert_true(matches(sel, DEV));
    assert_false(matches(sel, QA));
    ckube_selector_free(sel);
    sel = from_json("{\"matchLabels\":{\"env\":\"\"}}");
    assert_true(matches(sel, EMPTY_ENV));
    assert_false(matches(sel, NONE));
    ckube_selector_free(sel);

    /* NewRequirement's errors */
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}",
                      "values: Invalid value: []string(nil): for 'in', 'notin' operators, "
                      "values set can't be empty");
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"NotIn\","
                      "\"values\":[]}]}",
                      "values: Invalid value: []string(nil): for 'in', 'notin' operators, "
                      "values set can't be empty");
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\","
                      "\"values\":[\"x\",\"y\"]}]}",
                      "values: Invalid value: []string{\"x\", \"y\"}: values set must be empty "
                      "for exists and does not exist");
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\","
                      "\"values\":[\"1\"]}]}",
                      "\"Gt\" is not a valid label selector operator");
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\"}]}",
                      "\"\" is not a valid label selector operator");
    expect_json_error("{\"matchLabels\":{\"-a\":\"b\"}}",
                      "key: Invalid value: \"-a\": " NAME_PART_REGEX);
    expect_json_error("{\"matchLabels\":{\"a\":\"-b\"}}",
                      "values[0][a]: Invalid value: \"-b\": " LABEL_VALUE_REGEX);
    expect_json_error("{\"matchLabels\":{\"-a\":\"-b\"}}",
                      "[key: Invalid value: \"-a\": " NAME_PART_REGEX
                      ", values[0][-a]: Invalid value: \"-b\": " LABEL_VALUE_REGEX "]");
    /* not the API's types */
    expect_json_error(NULL, "a LabelSelector must be an object");
    expect_json_error("null", "a LabelSelector must be an object");
    expect_json_error("[]", "a LabelSelector must be an object");
    expect_json_error("{\"matchLabels\":[]}", "matchLabels: must be an object of strings");
    expect_json_error("{\"matchLabels\":{\"a\":1}}", "matchLabels[a]: must be a string");
    expect_json_error("{\"matchExpressions\":{}}", "matchExpressions: must be an array");
    expect_json_error("{\"matchExpressions\":[1]}", "matchExpressions[0]: must be an object");
    expect_json_error("{\"matchExpressions\":[{\"key\":1,\"operator\":\"In\"}]}",
                      "matchExpressions[0]: key and operator must be strings");
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\","
                      "\"values\":\"x\"}]}",
                      "matchExpressions[0].values: must be an array of strings");
    expect_json_error("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\","
                      "\"values\":[\"x\",2]}]}",
                      "matchExpressions[0].values[1]: must be a string");
}

/* ---- field selectors ---- */

static void test_field_basic(void **state)
{
    (void)state;
    const kv pod[] = {{"metadata.name", "web-1"}, {"metadata.namespace", "default"}, {NULL, NULL}};
    const kv other[] = {
        {"metadata.name", "db"}, {"metadata.namespace", "kube-system"}, {NULL, NULL}};
    ckube_selector *sel = field("metadata.namespace!=kube-system,metadata.name==web-1");
    assert_true(sel->is_field);
    assert_int_equal(sel->nreqs, 2);
    /* terms are sorted */
    expect_str(sel, "metadata.name=web-1,metadata.namespace!=kube-system");
    assert_true(matches(sel, pod));
    assert_false(matches(sel, other));
    assert_string_equal(ckube_selector_required_value(sel, "metadata.name"), "web-1");
    assert_null(ckube_selector_required_value(sel, "metadata.namespace"));
    ckube_selector_free(sel);

    /* A != term does not hide a later = term on the same field. */
    sel = field("a!=b,a=c");
    assert_string_equal(ckube_selector_required_value(sel, "a"), "c");
    ckube_selector_free(sel);

    /* Whitespace is part of keys and values; keys are not validated. */
    sel = field(" a = b ");
    assert_string_equal(sel->reqs[0].key, " a ");
    assert_string_equal(sel->reqs[0].values[0], " b ");
    ckube_selector_free(sel);

    /* An empty key is accepted, as upstream does. */
    sel = field("=x");
    assert_string_equal(sel->reqs[0].key, "");
    ckube_selector_free(sel);
}

static void test_field_missing_is_empty(void **state)
{
    (void)state;
    const kv cluster_scoped[] = {{"metadata.name", "n1"}, {NULL, NULL}};
    ckube_selector *sel = field("metadata.namespace=");
    assert_true(matches(sel, cluster_scoped));
    ckube_selector_free(sel);
    sel = field("metadata.namespace!=");
    assert_false(matches(sel, cluster_scoped));
    ckube_selector_free(sel);
    sel = field("spec.nodeName!=n1");
    assert_true(matches(sel, cluster_scoped));
    ckube_selector_free(sel);
}

static void test_field_escapes(void **state)
{
    (void)state;
    /* value x,y=z\ written with escapes */
    ckube_selector *sel = field("a=x\\,y\\=z\\\\");
    assert_int_equal(sel->nreqs, 1);
    assert_string_equal(sel->reqs[0].values[0], "x,y=z\\");
    expect_str(sel, "a=x\\,y\\=z\\\\");
    const kv obj[] = {{"a", "x,y=z\\"}, {NULL, NULL}};
    assert_true(matches(sel, obj));
    ckube_selector_free(sel);

    /* an escaped comma does not split terms */
    sel = field("a=1\\,2,b=3");
    assert_int_equal(sel->nreqs, 2);
    assert_string_equal(sel->reqs[0].values[0], "1,2");
    ckube_selector_free(sel);

    sel = field("a!=\\=");
    assert_int_equal(sel->reqs[0].op, CKUBE_SEL_NOT_EQUALS);
    assert_string_equal(sel->reqs[0].values[0], "=");
    ckube_selector_free(sel);
}

static void test_field_errors(void **state)
{
    (void)state;
    expect_field_error("a", "invalid selector: 'a'; can't understand 'a'");
    expect_field_error("b=1,a", "invalid selector: 'b=1,a'; can't understand 'a'");
    expect_field_error("a=b=c", "invalid field selector: unescaped character in value: 61");
    expect_field_error("a==b=c", "invalid field selector: unescaped character in value: 61");
    expect_field_error("a=b\\x", "invalid field selector: invalid escape sequence: \\x");
    expect_field_error("a=b\\!", "invalid field selector: invalid escape sequence: \\!");
    expect_field_error("a=b\\", "invalid field selector: invalid escape sequence: \\");
    expect_field_error("a=\\\xc3\xa9",
                       "invalid field selector: invalid escape sequence: \\\xc3\xa9");
    /* label-only operators are not field operators */
    expect_field_error("a in (b)", "invalid selector: 'a in (b)'; can't understand 'a in (b)'");
}

/* A selector as long as a request line allows: values and requirements in
 * reverse order are sorted once (they were insertion-sorted: quadratic),
 * values deduplicated, requirements with equal keys kept in input order. */
static void test_large_selectors(void **state)
{
    (void)state;
    size_t n = 60000;
    char *s = malloc(n * 9 + 32), *p = s;
    p += sprintf(p, "a in (");
    for (size_t i = n; i-- > 0;)
        p += sprintf(p, "v%06zu,", i / 2); /* each value twice */
    p[-1] = ')';
    ckube_selector *sel = NULL;
    char *err = NULL;
    clock_t t0 = clock();
    assert_int_equal(ckube_label_selector_parse(s, &sel, &err), 0);
    assert_int_equal(sel->nreqs, 1);
    assert_int_equal(sel->reqs[0].nvalues, n / 2);
    for (size_t i = 0; i < n / 2; i++) {
        char want[32];
        snprintf(want, sizeof want, "v%06zu", i);
        assert_string_equal(sel->reqs[0].values[i], want);
    }
    ckube_selector_free(sel);

    p = s;
    for (size_t i = 20000; i-- > 0;)
        p += sprintf(p, "k%05zu%s,", i / 2, i % 2 ? "" : "=x");
    p[-1] = '\0';
    assert_int_equal(ckube_label_selector_parse(s, &sel, &err), 0);
    assert_int_equal(sel->nreqs, 20000);
    for (size_t i = 0; i < 20000; i += 2) {
        char want[32];
        snprintf(want, sizeof want, "k%05zu", i / 2);
        assert_string_equal(sel->reqs[i].key, want);
        assert_string_equal(sel->reqs[i + 1].key, want);
        /* "k" came before "k=x" in the input, so it stays first. */
        assert_int_equal(sel->reqs[i].op, CKUBE_SEL_EXISTS);
        assert_int_equal(sel->reqs[i + 1].op, CKUBE_SEL_EQUALS);
    }
    ckube_selector_free(sel);
    /* Generous: both parse in a few ms, the quadratic sorts took seconds. */
    assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 2.0);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_equals),
        cmocka_unit_test(test_not_equals),
        cmocka_unit_test(test_in_notin),
        cmocka_unit_test(test_in_empty_values),
        cmocka_unit_test(test_exists),
        cmocka_unit_test(test_gt_lt),
        cmocka_unit_test(test_multiple_sorted),
        cmocka_unit_test(test_keywords_and_keys),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_invalid_keys_values),
        cmocka_unit_test(test_null_input),
        cmocka_unit_test(test_from_json),
        cmocka_unit_test(test_field_basic),
        cmocka_unit_test(test_field_missing_is_empty),
        cmocka_unit_test(test_field_escapes),
        cmocka_unit_test(test_field_errors),
        cmocka_unit_test(test_large_selectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
