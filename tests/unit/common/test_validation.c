/* Name, label and annotation validation with upstream's messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/status.h"
#include "ckube/validation.h"

#define SUBDOMAIN_MSG                                                                              \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "   \
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "  \
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define LABEL_1123_MSG                                                                             \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "   \
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "     \
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
#define LABEL_1035_MSG                                                                             \
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "   \
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "           \
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
#define NAME_PART_MSG                                                                              \
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "  \
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for " \
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define LABEL_VALUE_MSG                                                                            \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "    \
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', " \
    " or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"

/* Checks a NULL-or-message result and frees it. */
static void expect_msg(char *got, const char *want)
{
    if (!want) {
        if (got)
            fail_msg("expected valid, got: %s", got);
        return;
    }
    if (!got)
        fail_msg("expected error: %s", want);
    if (strcmp(got, want) != 0)
        fail_msg("\n got: %s\nwant: %s", got, want);
    free(got);
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = 0;
    return s;
}

static void test_dns1123_subdomain(void **state)
{
    (void)state;
    expect_msg(ckube_is_dns1123_subdomain("example.com"), NULL);
    expect_msg(ckube_is_dns1123_subdomain("a"), NULL);
    expect_msg(ckube_is_dns1123_subdomain("0-0.a-b.c"), NULL);
    expect_msg(ckube_is_dns1123_subdomain("X"), SUBDOMAIN_MSG);
    expect_msg(ckube_is_dns1123_subdomain(""), SUBDOMAIN_MSG);
    expect_msg(ckube_is_dns1123_subdomain("-a"), SUBDOMAIN_MSG);
    expect_msg(ckube_is_dns1123_subdomain("a-"), SUBDOMAIN_MSG);
    expect_msg(ckube_is_dns1123_subdomain("a..b"), SUBDOMAIN_MSG);
    expect_msg(ckube_is_dns1123_subdomain(".a"), SUBDOMAIN_MSG);
    expect_msg(ckube_is_dns1123_subdomain("a_b"), SUBDOMAIN_MSG);

    char *s = repeat('a', 253);
    expect_msg(ckube_is_dns1123_subdomain(s), NULL);
    free(s);
    s = repeat('a', 254);
    expect_msg(ckube_is_dns1123_subdomain(s), "must be no more than 253 characters");
    s[0] = 'X';
    expect_msg(ckube_is_dns1123_subdomain(s),
               "must be no more than 253 characters; " SUBDOMAIN_MSG);
    free(s);
}

static void test_dns_labels(void **state)
{
    (void)state;
    expect_msg(ckube_is_dns1123_label("my-name"), NULL);
    expect_msg(ckube_is_dns1123_label("123-abc"), NULL);
    expect_msg(ckube_is_dns1123_label("a.b"), "must not contain dots");
    expect_msg(ckube_is_dns1123_label("My"), LABEL_1123_MSG);
    expect_msg(ckube_is_dns1123_label(""), LABEL_1123_MSG);
    char *s = repeat('a', 63);
    expect_msg(ckube_is_dns1123_label(s), NULL);
    free(s);
    s = repeat('a', 64);
    expect_msg(ckube_is_dns1123_label(s), "must be no more than 63 characters");
    expect_msg(ckube_is_dns1035_label(s), "must be no more than 63 characters");
    free(s);

    expect_msg(ckube_is_dns1035_label("abc-123"), NULL);
    expect_msg(ckube_is_dns1035_label("1abc"), LABEL_1035_MSG);
    expect_msg(ckube_is_dns1035_label("a.b"), LABEL_1035_MSG);
    expect_msg(ckube_is_dns1035_label("abc-"), LABEL_1035_MSG);
}

static void test_path_segment(void **state)
{
    (void)state;
    expect_msg(ckube_is_path_segment_name("Any_Name:x", false), NULL);
    expect_msg(ckube_is_path_segment_name(".", false), "may not be '.'");
    expect_msg(ckube_is_path_segment_name("..", false), "may not be '..'");
    expect_msg(ckube_is_path_segment_name("...", false), NULL);
    expect_msg(ckube_is_path_segment_name("a/b", false), "may not contain '/'");
    expect_msg(ckube_is_path_segment_name("a/b%c", false),
               "may not contain '/'; may not contain '%'");
    /* As a generateName only the "may not contain" rules apply. */
    expect_msg(ckube_is_path_segment_name(".", true), NULL);
    expect_msg(ckube_is_path_segment_name("%", true), "may not contain '%'");
}

static void test_qualified_name_and_label_value(void **state)
{
    (void)state;
    expect_msg(ckube_is_qualified_name("app"), NULL);
    expect_msg(ckube_is_qualified_name("app.kubernetes.io/name"), NULL);
    expect_msg(ckube_is_qualified_name("My_Key-1.x"), NULL);
    expect_msg(ckube_is_qualified_name("-a"), NAME_PART_MSG);
    expect_msg(ckube_is_qualified_name("a b"), NAME_PART_MSG);
    expect_msg(ckube_is_qualified_name(""), "name part must be non-empty; " NAME_PART_MSG);
    expect_msg(ckube_is_qualified_name("/a"), "prefix part must be non-empty");
    expect_msg(ckube_is_qualified_name("Example.com/a"), "prefix part " SUBDOMAIN_MSG);
    expect_msg(ckube_is_qualified_name("a/b/c"),
               "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name', "
               " or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
               "and '/' (e.g. 'example.com/MyName')");
    char *name = repeat('n', 64);
    expect_msg(ckube_is_qualified_name(name), "name part must be no more than 63 characters");
    char *prefix = repeat('p', 254);
    char key[400];
    snprintf(key, sizeof key, "%s/%s", prefix, "ok");
    expect_msg(ckube_is_qualified_name(key), "prefix part must be no more than 253 characters");
    free(prefix);

    expect_msg(ckube_is_label_value(""), NULL);
    expect_msg(ckube_is_label_value("v1.2_3-x"), NULL);
    expect_msg(ckube_is_label_value("-x"), LABEL_VALUE_MSG);
    expect_msg(ckube_is_label_value("a/b"), LABEL_VALUE_MSG);
    expect_msg(ckube_is_label_value(name), "must be no more than 63 characters");
    name[0] = '_';
    expect_msg(ckube_is_label_value(name), "must be no more than 63 characters; " LABEL_VALUE_MSG);
    free(name);
}

static void test_validate_name_kinds(void **state)
{
    (void)state;
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_SUBDOMAIN, "my.config", false), NULL);
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_SUBDOMAIN, "X", false), SUBDOMAIN_MSG);
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_LABEL, "my.ns", false),
               "must not contain dots");
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1035_LABEL, "1svc", false), LABEL_1035_MSG);
    expect_msg(ckube_validate_name(CKUBE_NAME_PATH_SEGMENT, "..", false), "may not be '..'");
    expect_msg(ckube_validate_name(99, "X", false), SUBDOMAIN_MSG);
    /* generateName: a trailing dash is allowed... */
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_SUBDOMAIN, "web-", true), NULL);
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1035_LABEL, "svc-", true), NULL);
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_SUBDOMAIN, "web-", false), SUBDOMAIN_MSG);
    /* ...but the rest must still be valid */
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_SUBDOMAIN, "Web-", true), SUBDOMAIN_MSG);
    expect_msg(ckube_validate_name(CKUBE_NAME_DNS1123_SUBDOMAIN, "-", true), SUBDOMAIN_MSG);
}

static void test_go_quote(void **state)
{
    (void)state;
    char *q = ckube_go_quote("plain");
    assert_string_equal(q, "\"plain\"");
    free(q);
    q = ckube_go_quote("a\"b\\c\n\t\x01\x7f");
    assert_string_equal(q, "\"a\\\"b\\\\c\\n\\t\\x01\\x7f\"");
    free(q);
    q = ckube_go_quote("caf\xc3\xa9 \xff \xc2\xa0");
    assert_string_equal(q, "\"caf\xc3\xa9 \\xff \\u00a0\"");
    free(q);
}

/* ---- object metadata into a Status ---- */

static json_t *obj(const char *json)
{
    json_error_t e;
    json_t *j = json_loads(json, 0, &e);
    if (!j)
        fail_msg("bad test JSON: %s", e.text);
    return j;
}

static ckube_status *validate(const char *json, bool namespaced, int kind)
{
    json_t *o = obj(json);
    ckube_status *st = ckube_status_invalid_begin("", "ConfigMap", "x");
    assert_non_null(st);
    ckube_validate_object_meta(o, namespaced, kind, st);
    json_decref(o);
    return st;
}

static void expect_cause(const ckube_status *st, size_t i, const char *type, const char *field,
                         const char *message)
{
    assert_true(i < st->ncauses);
    assert_string_equal(st->causes[i].type, type);
    assert_string_equal(st->causes[i].field, field);
    if (strcmp(st->causes[i].message, message) != 0)
        fail_msg("cause %zu\n got: %s\nwant: %s", i, st->causes[i].message, message);
}

static void test_meta_valid(void **state)
{
    (void)state;
    ckube_status *st = validate("{\"metadata\":{\"name\":\"cm-1\",\"namespace\":\"default\","
                                "\"labels\":{\"app\":\"web\",\"example.com/tier\":\"\"},"
                                "\"annotations\":{\"Example.COM/Note\":\"anything at all\"}}}",
                                true, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"node-1\"}}", false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);

    /* generateName alone is fine before the name is generated */
    st = validate("{\"metadata\":{\"generateName\":\"web-\",\"namespace\":\"ns\"}}", true,
                  CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);
}

static void test_meta_name(void **state)
{
    (void)state;
    ckube_status *st = validate("{\"metadata\":{\"name\":\"X\",\"namespace\":\"default\"}}", true,
                                CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.name",
                 "Invalid value: \"X\": " SUBDOMAIN_MSG);
    ckube_status_invalid_finish(st);
    assert_string_equal(
        st->message,
        "ConfigMap \"x\" is invalid: metadata.name: Invalid value: \"X\": " SUBDOMAIN_MSG);
    assert_int_equal(st->code, 422);
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"namespace\":\"default\"}}", true, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_REQUIRED, "metadata.name",
                 "Required value: name or generateName is required");
    ckube_status_free(st);

    /* no metadata at all: name and namespace are required */
    st = validate("{}", true, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 2);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_REQUIRED, "metadata.name",
                 "Required value: name or generateName is required");
    expect_cause(st, 1, CKUBE_CAUSE_FIELD_REQUIRED, "metadata.namespace", "Required value");
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"1svc\",\"namespace\":\"default\"}}", true,
                  CKUBE_NAME_DNS1035_LABEL);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.name",
                 "Invalid value: \"1svc\": " LABEL_1035_MSG);
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"a.b\"}}", false, CKUBE_NAME_DNS1123_LABEL);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.name",
                 "Invalid value: \"a.b\": must not contain dots");
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"a/b\"}}", false, CKUBE_NAME_PATH_SEGMENT);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.name",
                 "Invalid value: \"a/b\": may not contain '/'");
    ckube_status_free(st);

    /* a bad generateName and the bad name generated from it */
    st = validate("{\"metadata\":{\"generateName\":\"Web-\",\"name\":\"Web-abcde\"}}", false,
                  CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 2);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.generateName",
                 "Invalid value: \"Web-\": " SUBDOMAIN_MSG);
    expect_cause(st, 1, CKUBE_CAUSE_FIELD_INVALID, "metadata.name",
                 "Invalid value: \"Web-abcde\": " SUBDOMAIN_MSG);
    ckube_status_invalid_finish(st);
    assert_non_null(strstr(st->message, "is invalid: [metadata.generateName: Invalid value: "));
    ckube_status_free(st);

    char big[400] = "{\"metadata\":{\"name\":\"";
    size_t off = strlen(big);
    memset(big + off, 'a', 254);
    strcpy(big + off + 254, "\"}}");
    st = validate(big, false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    assert_non_null(strstr(st->causes[0].message, "\": must be no more than 253 characters"));
    ckube_status_free(st);
}

static void test_meta_namespace(void **state)
{
    (void)state;
    ckube_status *st = validate("{\"metadata\":{\"name\":\"n\",\"namespace\":\"default\"}}", false,
                                CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_FORBIDDEN, "metadata.namespace",
                 "Forbidden: not allowed on this type");
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"n\"}}", true, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_REQUIRED, "metadata.namespace", "Required value");
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"n\",\"namespace\":\"Bad_NS\"}}", true,
                  CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.namespace",
                 "Invalid value: \"Bad_NS\": " LABEL_1123_MSG);
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"n\",\"generation\":-1}}", false,
                  CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.generation",
                 "Invalid value: -1: must be greater than or equal to 0");
    ckube_status_free(st);
}

static void test_meta_labels(void **state)
{
    (void)state;
    ckube_status *st = validate("{\"metadata\":{\"name\":\"n\",\"labels\":{\"-bad\":\"ok\","
                                "\"good\":\"bad value\",\"x/y/z\":\"\"}}}",
                                false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 3);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.labels",
                 "Invalid value: \"-bad\": " NAME_PART_MSG);
    expect_cause(st, 1, CKUBE_CAUSE_FIELD_INVALID, "metadata.labels",
                 "Invalid value: \"bad value\": " LABEL_VALUE_MSG);
    assert_non_null(strstr(st->causes[2].message, "Invalid value: \"x/y/z\": a qualified name"));
    ckube_status_free(st);
}

static void test_meta_annotations(void **state)
{
    (void)state;
    ckube_status *st = validate("{\"metadata\":{\"name\":\"n\",\"annotations\":{"
                                "\"UPPER.Example.COM/Key\":\"ok\",\"a b\":\"x\"}}}",
                                false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1); /* keys are checked case-insensitively */
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.annotations",
                 "Invalid value: \"a b\": " NAME_PART_MSG);
    ckube_status_free(st);

    /* total size: keys + values may be 256 KiB, not more */
    json_t *o = obj("{\"metadata\":{\"name\":\"n\",\"annotations\":{}}}");
    json_t *ann = json_object_get(json_object_get(o, "metadata"), "annotations");
    char *v = repeat('v', CKUBE_ANNOTATIONS_SIZE_MAX - 2);
    json_object_set_new(ann, "k1", json_string(v));
    free(v);
    ckube_status *ok = ckube_status_invalid_begin("", "ConfigMap", "n");
    ckube_validate_object_meta(o, false, CKUBE_NAME_DNS1123_SUBDOMAIN, ok);
    assert_int_equal(ok->ncauses, 0);
    ckube_status_free(ok);
    json_object_set_new(ann, "k", json_string(""));
    st = ckube_status_invalid_begin("", "ConfigMap", "n");
    ckube_validate_object_meta(o, false, CKUBE_NAME_DNS1123_SUBDOMAIN, st);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_TOO_LONG, "metadata.annotations",
                 "Too long: may not be more than 262144 bytes");
    ckube_status_free(st);
    json_decref(o);
}

static void test_meta_owner_references(void **state)
{
    (void)state;
    /* every field missing or empty; the index is not in the field name */
    ckube_status *st =
        validate("{\"metadata\":{\"name\":\"n\",\"ownerReferences\":["
                 "{\"apiVersion\":\"v1\",\"kind\":\"A\",\"name\":\"a\",\"uid\":\"1\"},"
                 "{\"apiVersion\":\"apps/\",\"name\":\"\"}]}}",
                 false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 4);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.ownerReferences.apiVersion",
                 "Invalid value: \"apps/\": version must not be empty");
    expect_cause(st, 1, CKUBE_CAUSE_FIELD_INVALID, "metadata.ownerReferences.kind",
                 "Invalid value: \"\": kind must not be empty");
    expect_cause(st, 2, CKUBE_CAUSE_FIELD_INVALID, "metadata.ownerReferences.name",
                 "Invalid value: \"\": name must not be empty");
    expect_cause(st, 3, CKUBE_CAUSE_FIELD_INVALID, "metadata.ownerReferences.uid",
                 "Invalid value: \"\": uid must not be empty");
    ckube_status_free(st);

    /* an Event cannot own; one controller at most */
    st = validate("{\"metadata\":{\"name\":\"n\",\"ownerReferences\":["
                  "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"1\"},"
                  "{\"apiVersion\":\"apps/v1\",\"kind\":\"D\",\"name\":\"x\",\"uid\":\"2\","
                  "\"controller\":true},"
                  "{\"apiVersion\":\"apps/v1\",\"kind\":\"D\",\"name\":\"y\",\"uid\":\"3\","
                  "\"controller\":true}]}}",
                  false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 2);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.ownerReferences",
                 "Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\","
                 "\"uid\":\"1\"}: /v1, Kind=Event is disallowed from being an owner");
    assert_string_equal(st->causes[1].field, "metadata.ownerReferences");
    assert_non_null(strstr(st->causes[1].message,
                           ": Only one reference can have Controller set to true. Found "
                           "\"true\" in references for x and y"));
    ckube_status_free(st);

    /* a controller false and an events.k8s.io Event are fine */
    st = validate("{\"metadata\":{\"name\":\"n\",\"ownerReferences\":["
                  "{\"apiVersion\":\"events.k8s.io/v1\",\"kind\":\"Event\",\"name\":\"e\","
                  "\"uid\":\"1\",\"controller\":false},"
                  "{\"apiVersion\":\"v1\",\"kind\":\"A\",\"name\":\"a\",\"uid\":\"2\","
                  "\"controller\":true}]}}",
                  false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);
}

static void test_meta_finalizers(void **state)
{
    (void)state;
    ckube_status *st = validate("{\"metadata\":{\"name\":\"n\",\"finalizers\":["
                                "\"kubernetes\",\"example.com/cleanup\",\"a b\",7]}}",
                                false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.finalizers",
                 "Invalid value: \"a b\": " NAME_PART_MSG);
    ckube_status_free(st);

    st = validate("{\"metadata\":{\"name\":\"n\",\"finalizers\":[\"orphan\","
                  "\"foregroundDeletion\"]}}",
                  false, CKUBE_NAME_DNS1123_SUBDOMAIN);
    assert_int_equal(st->ncauses, 1);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "metadata.finalizers",
                 "Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and "
                 "foregroundDeletion cannot be both set");
    ckube_status_free(st);
}

/* metav1 ValidateLabelSelector: each kind of problem in upstream's words
 * and field paths, values left alone when the caller allows invalid ones,
 * and the count of causes it added. */
static void test_label_selector(void **state)
{
    (void)state;
    json_t *sel = json_loads("{\"matchLabels\":{\"app\":\"bad value\"},\"matchExpressions\":["
                             "{\"key\":\"a\",\"operator\":\"In\"},"
                             "{\"key\":\"b\",\"operator\":\"Exists\",\"values\":[\"x\"]},"
                             "{\"key\":\"c d\",\"operator\":\"Near\",\"values\":[\"-v\"]},"
                             "{\"key\":\"ok\",\"operator\":\"NotIn\",\"values\":[\"fine\"]}]}",
                             0, NULL);
    assert_non_null(sel);
    ckube_status *st = ckube_status_invalid_begin("", "Thing", "t");
    ckube_field_required(st, "before", ""); /* not counted */
    assert_int_equal(ckube_validate_label_selector(sel, "spec.selector", false, st), 6);
    assert_int_equal(st->ncauses, 7);
    expect_cause(st, 1, CKUBE_CAUSE_FIELD_INVALID, "spec.selector.matchLabels",
                 "Invalid value: \"bad value\": " LABEL_VALUE_MSG);
    expect_cause(st, 2, CKUBE_CAUSE_FIELD_REQUIRED, "spec.selector.matchExpressions[0].values",
                 "Required value: must be specified when `operator` is 'In' or 'NotIn'");
    expect_cause(st, 3, CKUBE_CAUSE_FIELD_FORBIDDEN, "spec.selector.matchExpressions[1].values",
                 "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
    expect_cause(st, 4, CKUBE_CAUSE_FIELD_INVALID, "spec.selector.matchExpressions[2].operator",
                 "Invalid value: \"Near\": not a valid selector operator");
    expect_cause(st, 5, CKUBE_CAUSE_FIELD_INVALID, "spec.selector.matchExpressions[2].key",
                 "Invalid value: \"c d\": " NAME_PART_MSG);
    expect_cause(st, 6, CKUBE_CAUSE_FIELD_INVALID, "spec.selector.matchExpressions[2].values[0]",
                 "Invalid value: \"-v\": " LABEL_VALUE_MSG);
    ckube_status_free(st);

    /* AllowInvalidLabelValueInSelector: the expressions' values pass */
    st = ckube_status_invalid_begin("", "Thing", "t");
    assert_int_equal(ckube_validate_label_selector(sel, "s", true, st), 5);
    for (size_t i = 0; i < st->ncauses; i++)
        assert_null(strstr(st->causes[i].field, "].values["));
    ckube_status_free(st);

    /* nothing to check: no selector, or a valid one */
    st = ckube_status_invalid_begin("", "Thing", "t");
    assert_int_equal(ckube_validate_label_selector(NULL, "s", false, st), 0);
    json_t *good = json_pack("{s:{s:s},s:[{s:s,s:s}]}", "matchLabels", "app", "web",
                             "matchExpressions", "key", "tier", "operator", "Exists");
    assert_int_equal(ckube_validate_label_selector(good, "s", false, st), 0);
    assert_int_equal(st->ncauses, 0);
    ckube_status_free(st);
    json_decref(good);
    json_decref(sel);
}

static void test_field_helpers(void **state)
{
    (void)state;
    ckube_status *st = ckube_status_invalid_begin("", "Pod", "p");
    ckube_field_invalid(st, "spec.x", "q\"v", NULL);
    ckube_field_required(st, "spec.y", "");
    ckube_field_forbidden(st, "spec.z", NULL);
    ckube_field_too_long(st, "spec.w", 1);
    ckube_field_invalid_int(st, "spec.n", 5, "bad");
    assert_int_equal(st->ncauses, 5);
    expect_cause(st, 0, CKUBE_CAUSE_FIELD_INVALID, "spec.x", "Invalid value: \"q\\\"v\"");
    expect_cause(st, 1, CKUBE_CAUSE_FIELD_REQUIRED, "spec.y", "Required value");
    expect_cause(st, 2, CKUBE_CAUSE_FIELD_FORBIDDEN, "spec.z", "Forbidden");
    expect_cause(st, 3, CKUBE_CAUSE_FIELD_TOO_LONG, "spec.w",
                 "Too long: may not be more than 1 byte");
    expect_cause(st, 4, CKUBE_CAUSE_FIELD_INVALID, "spec.n", "Invalid value: 5: bad");
    ckube_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dns1123_subdomain),
        cmocka_unit_test(test_dns_labels),
        cmocka_unit_test(test_path_segment),
        cmocka_unit_test(test_qualified_name_and_label_value),
        cmocka_unit_test(test_validate_name_kinds),
        cmocka_unit_test(test_go_quote),
        cmocka_unit_test(test_meta_valid),
        cmocka_unit_test(test_meta_name),
        cmocka_unit_test(test_meta_namespace),
        cmocka_unit_test(test_meta_labels),
        cmocka_unit_test(test_meta_annotations),
        cmocka_unit_test(test_meta_owner_references),
        cmocka_unit_test(test_meta_finalizers),
        cmocka_unit_test(test_label_selector),
        cmocka_unit_test(test_field_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
