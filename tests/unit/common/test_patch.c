/* Tests of the three patch formats (ckube/patch.h) and of the built-in
 * strategic-merge-patch metadata (apiserver/builtin_patchmeta.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/patch.h"

/* ---- helpers ------------------------------------------------------------ */

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!v)
        fail_msg("bad test JSON (%s): %s", e.text, text);
    return v;
}

static char *dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}

/* Fails unless `got` equals the JSON text `want` (ckube_patch_json_equal:
 * object member order is ignored, list order is not). */
static void expect_json(const json_t *got, const char *want)
{
    json_t *w = J(want);
    if (!ckube_patch_json_equal(got, w)) {
        char *g = dump(got);
        print_error("got:  %s\nwant: %s\n", g ? g : "(null)", want);
        free(g);
        json_decref(w);
        fail();
    }
    json_decref(w);
}

enum fmt { JSONP, MERGEP, SMP };

typedef struct run {
    json_t *out;
    char *err;
} run;

/* Applies a patch and checks that the inputs were not modified. */
static run apply(enum fmt f, const ckube_patch_meta_entry *meta, const char *doc_s,
                 const char *patch_s)
{
    json_t *doc = J(doc_s), *patch = J(patch_s);
    char *before_doc = dump(doc), *before_patch = dump(patch);
    run r = {NULL, NULL};
    switch (f) {
    case JSONP:
        r.out = ckube_json_patch_apply(doc, patch, &r.err);
        break;
    case MERGEP:
        r.out = ckube_merge_patch_apply(doc, patch, &r.err);
        break;
    case SMP:
        r.out = ckube_strategic_merge_patch_apply(doc, patch, meta ? ckube_patch_meta_table : NULL,
                                                  (void *)meta, &r.err);
        break;
    }
    char *after_doc = dump(doc), *after_patch = dump(patch);
    assert_string_equal(before_doc, after_doc);
    assert_string_equal(before_patch, after_patch);
    free(before_doc);
    free(before_patch);
    free(after_doc);
    free(after_patch);
    json_decref(doc);
    json_decref(patch);
    return r;
}

static void ok(enum fmt f, const ckube_patch_meta_entry *meta, const char *doc, const char *patch,
               const char *want)
{
    run r = apply(f, meta, doc, patch);
    if (!r.out)
        fail_msg("patch %s failed: %s", patch, r.err ? r.err : "(no message)");
    assert_null(r.err);
    expect_json(r.out, want);
    json_decref(r.out);
}

/* Expects failure with a message containing `msg`. */
static void bad(enum fmt f, const ckube_patch_meta_entry *meta, const char *doc, const char *patch,
                const char *msg)
{
    run r = apply(f, meta, doc, patch);
    if (r.out) {
        char *g = dump(r.out);
        print_error("unexpected success: %s\n", g);
        free(g);
        json_decref(r.out);
        fail();
    }
    assert_non_null(r.err);
    if (!strstr(r.err, msg))
        fail_msg("error \"%s\" does not contain \"%s\"", r.err, msg);
    free(r.err);
}

#define JP_OK(doc, patch, want) ok(JSONP, NULL, doc, patch, want)
#define JP_BAD(doc, patch, msg) bad(JSONP, NULL, doc, patch, msg)
#define MP_OK(doc, patch, want) ok(MERGEP, NULL, doc, patch, want)
#define SMP_OK(meta, doc, patch, want) ok(SMP, meta, doc, patch, want)
#define SMP_BAD(meta, doc, patch, msg) bad(SMP, meta, doc, patch, msg)

/* ---- equality ----------------------------------------------------------- */

static void test_json_equal(void **state)
{
    (void)state;
    json_t *a = J("{\"x\":[1,2.0,{\"y\":\"z\"}],\"t\":true,\"n\":null}");
    json_t *b = J("{\"n\":null,\"t\":true,\"x\":[1.0,2,{\"y\":\"z\"}]}");
    json_t *c = J("{\"n\":null,\"t\":true,\"x\":[2,1,{\"y\":\"z\"}]}");
    json_t *d = J("{\"n\":null,\"t\":false,\"x\":[1,2,{\"y\":\"z\"}]}");
    assert_true(ckube_patch_json_equal(a, b));
    assert_false(ckube_patch_json_equal(a, c));
    assert_false(ckube_patch_json_equal(a, d));
    assert_false(ckube_patch_json_equal(a, NULL));
    assert_true(ckube_patch_json_equal(NULL, NULL));
    json_t *s1 = json_stringn("a\0b", 3), *s2 = json_stringn("a\0c", 3);
    assert_false(ckube_patch_json_equal(s1, s2));
    json_t *n1 = json_integer(10), *n2 = J("\"10\"");
    assert_false(ckube_patch_json_equal(n1, n2));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    json_decref(s1);
    json_decref(s2);
    json_decref(n1);
    json_decref(n2);
}

/* ---- RFC 6902 ----------------------------------------------------------- */

/* The RFC 6902 appendix A scenarios. */
static void test_jsonpatch_rfc_examples(void **state)
{
    (void)state;
    /* A.1 add an object member */
    JP_OK("{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]",
          "{\"baz\":\"qux\",\"foo\":\"bar\"}");
    /* A.2 add an array element */
    JP_OK("{\"foo\":[\"bar\",\"baz\"]}", "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
          "{\"foo\":[\"bar\",\"qux\",\"baz\"]}");
    /* A.3 remove an object member */
    JP_OK("{\"baz\":\"qux\",\"foo\":\"bar\"}", "[{\"op\":\"remove\",\"path\":\"/baz\"}]",
          "{\"foo\":\"bar\"}");
    /* A.4 remove an array element */
    JP_OK("{\"foo\":[\"bar\",\"qux\",\"baz\"]}", "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]",
          "{\"foo\":[\"bar\",\"baz\"]}");
    /* A.5 replace a value */
    JP_OK("{\"baz\":\"qux\",\"foo\":\"bar\"}",
          "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]",
          "{\"baz\":\"boo\",\"foo\":\"bar\"}");
    /* A.6 move a value */
    JP_OK("{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
          "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
          "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}");
    /* A.7 move an array element */
    JP_OK("{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
          "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
          "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}");
    /* A.8 test a value: success */
    JP_OK("{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
          "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},"
          "{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
          "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}");
    /* A.9 test a value: error */
    JP_BAD("{\"baz\":\"qux\"}", "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]",
           "testing value /baz failed");
    /* A.10 add a nested member object */
    JP_OK("{\"foo\":\"bar\"}",
          "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
          "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}");
    /* A.11 ignore unrecognized elements */
    JP_OK("{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]",
          "{\"foo\":\"bar\",\"baz\":\"qux\"}");
    /* A.12 add to a nonexistent target */
    JP_BAD("{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]",
           "add operation does not apply: doc is missing path: \"/baz/bat\"");
    /* A.14 ~ escape ordering */
    JP_OK("{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]",
          "{\"/\":9,\"~1\":10}");
    /* A.15 comparing strings and numbers */
    JP_BAD("{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]",
           "testing value /~01 failed");
    /* A.16 adding an array value */
    JP_OK("{\"foo\":[\"bar\"]}",
          "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
          "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}");
}

static void test_jsonpatch_pointers(void **state)
{
    (void)state;
    /* ~1 is '/', ~0 is '~' */
    JP_OK("{\"a/b\":1,\"m~n\":2}",
          "[{\"op\":\"replace\",\"path\":\"/a~1b\",\"value\":3},"
          "{\"op\":\"remove\",\"path\":\"/m~0n\"}]",
          "{\"a/b\":3}");
    /* the empty key */
    JP_OK("{}", "[{\"op\":\"add\",\"path\":\"/\",\"value\":1}]", "{\"\":1}");
    /* "" is the whole document */
    JP_OK("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":[1,2]}]", "[1,2]");
    JP_OK("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"\",\"value\":{\"b\":2}}]", "{\"b\":2}");
    JP_OK("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"\",\"value\":{\"a\":1.0}}]", "{\"a\":1}");
    JP_BAD("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"\"}]", "cannot remove the whole document");
    JP_BAD("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"a\",\"value\":1}]",
           "invalid JSON pointer \"a\"");
    JP_BAD("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a~2\",\"value\":1}]",
           "'~' must be followed by '0' or '1'");
    JP_BAD("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a~\",\"value\":1}]",
           "'~' must be followed by '0' or '1'");
    /* through a scalar */
    JP_BAD("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a/b\",\"value\":1}]",
           "doc is missing path: \"/a/b\"");
    /* numeric keys address object members, not indices */
    JP_OK("{\"a\":{\"0\":\"x\"}}", "[{\"op\":\"replace\",\"path\":\"/a/0\",\"value\":\"y\"}]",
          "{\"a\":{\"0\":\"y\"}}");
    JP_BAD("{\"spec\":{}}", "[{\"op\":\"remove\",\"path\":\"/spec/x\"}]",
           "remove operation does not apply: doc is missing path: \"/spec/x\"");
}

static void test_jsonpatch_array_indices(void **state)
{
    (void)state;
    const char *doc = "{\"a\":[0,1,2]}";
    JP_OK(doc, "[{\"op\":\"add\",\"path\":\"/a/3\",\"value\":3}]", "{\"a\":[0,1,2,3]}");
    JP_OK(doc, "[{\"op\":\"add\",\"path\":\"/a/0\",\"value\":9}]", "{\"a\":[9,0,1,2]}");
    JP_OK(doc, "[{\"op\":\"add\",\"path\":\"/a/-\",\"value\":3}]", "{\"a\":[0,1,2,3]}");
    JP_OK(doc, "[{\"op\":\"remove\",\"path\":\"/a/2\"}]", "{\"a\":[0,1]}");
    JP_OK(doc, "[{\"op\":\"replace\",\"path\":\"/a/0\",\"value\":7}]", "{\"a\":[7,1,2]}");
    JP_BAD(doc, "[{\"op\":\"add\",\"path\":\"/a/4\",\"value\":3}]", "invalid array index \"4\"");
    JP_BAD(doc, "[{\"op\":\"add\",\"path\":\"/a/01\",\"value\":3}]", "invalid array index \"01\"");
    JP_BAD(doc, "[{\"op\":\"add\",\"path\":\"/a/-1\",\"value\":3}]", "invalid array index \"-1\"");
    JP_BAD(doc, "[{\"op\":\"add\",\"path\":\"/a/1x\",\"value\":3}]", "invalid array index \"1x\"");
    JP_BAD(doc, "[{\"op\":\"add\",\"path\":\"/a/99999999999999999999\",\"value\":3}]",
           "invalid array index");
    JP_BAD(doc, "[{\"op\":\"remove\",\"path\":\"/a/3\"}]", "invalid array index \"3\"");
    JP_BAD(doc, "[{\"op\":\"remove\",\"path\":\"/a/-\"}]", "invalid array index \"-\"");
    JP_BAD(doc, "[{\"op\":\"replace\",\"path\":\"/a/3\",\"value\":1}]", "invalid array index");
    JP_BAD(doc, "[{\"op\":\"test\",\"path\":\"/a/-\",\"value\":1}]", "invalid array index");
    JP_BAD(doc, "[{\"op\":\"add\",\"path\":\"/a/-/x\",\"value\":1}]", "doc is missing path");
}

static void test_jsonpatch_ops(void **state)
{
    (void)state;
    /* add replaces an existing member */
    JP_OK("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a\",\"value\":{\"b\":null}}]",
          "{\"a\":{\"b\":null}}");
    /* replace needs an existing target */
    JP_BAD("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":1}]",
           "replace operation does not apply: doc is missing path: \"/b\"");
    /* value may be null, but must be present */
    JP_OK("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":null}]", "{\"a\":null}");
    JP_BAD("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\"}]", "missing \"value\"");
    JP_BAD("{\"a\":1}", "[{\"op\":\"add\",\"path\":\"/a\"}]", "missing \"value\"");
    JP_BAD("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\"}]", "missing \"value\"");
    /* copy */
    JP_OK("{\"a\":{\"x\":[1]},\"b\":[]}",
          "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b/0\"},"
          "{\"op\":\"add\",\"path\":\"/a/x/-\",\"value\":2}]",
          "{\"a\":{\"x\":[1,2]},\"b\":[{\"x\":[1]}]}");
    JP_OK("{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"\",\"path\":\"/b\"}]",
          "{\"a\":1,\"b\":{\"a\":1}}");
    JP_BAD("{\"a\":1}", "[{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/b\"}]",
           "copy operation does not apply: doc is missing path: \"/x\"");
    JP_BAD("{\"a\":1}", "[{\"op\":\"copy\",\"path\":\"/b\"}]", "missing \"from\"");
    /* move */
    JP_OK("{\"a\":{\"b\":1}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]",
          "{\"a\":{\"b\":1}}");
    JP_OK("{\"a\":{\"b\":1},\"ab\":2}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/ab\"}]",
          "{\"ab\":{\"b\":1}}");
    JP_OK("{\"a\":{\"b\":{\"c\":1}}}", "[{\"op\":\"move\",\"from\":\"/a/b\",\"path\":\"\"}]",
          "{\"c\":1}");
    JP_BAD("{\"a\":{\"b\":1}}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b/c\"}]",
           "cannot move \"/a\" into its own child \"/a/b/c\"");
    JP_BAD("{\"a\":{\"b\":1}}", "[{\"op\":\"move\",\"from\":\"\",\"path\":\"/x\"}]",
           "into its own child");
    JP_BAD("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/x\",\"path\":\"/y\"}]",
           "move operation does not apply: doc is missing path: \"/x\"");
    JP_BAD("{\"a\":1}", "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/q/r\"}]",
           "move operation does not apply: doc is missing path: \"/q/r\"");
    /* test compares numbers by value and objects regardless of order */
    JP_OK("{\"a\":{\"x\":1,\"y\":[true,null]}}",
          "[{\"op\":\"test\",\"path\":\"/a\",\"value\":{\"y\":[true,null],\"x\":1.0}}]",
          "{\"a\":{\"x\":1,\"y\":[true,null]}}");
    JP_BAD("{\"a\":[1,2]}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":[2,1]}]",
           "testing value /a failed: test failed");
    JP_BAD("{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/b\",\"value\":null}]",
           "test operation does not apply: doc is missing path: \"/b\"");
    /* operations apply in order; a later failure fails the whole patch */
    JP_OK("{}",
          "[{\"op\":\"add\",\"path\":\"/a\",\"value\":{}},{\"op\":\"add\",\"path\":\"/a/b\","
          "\"value\":1},{\"op\":\"test\",\"path\":\"/a/b\",\"value\":1}]",
          "{\"a\":{\"b\":1}}");
    JP_BAD("{}",
           "[{\"op\":\"add\",\"path\":\"/a\",\"value\":1},{\"op\":\"remove\",\"path\":\"/z\"}]",
           "doc is missing path: \"/z\"");
    /* empty patch */
    JP_OK("{\"a\":1}", "[]", "{\"a\":1}");
}

static void test_jsonpatch_malformed(void **state)
{
    (void)state;
    JP_BAD("{}", "{\"op\":\"add\"}", "expected a JSON array of operations");
    JP_BAD("{}", "[1]", "operation 0 is not a JSON object");
    JP_BAD("{}", "[{\"path\":\"/a\"}]", "operation 0 has no \"op\"");
    JP_BAD("{}", "[{\"op\":\"frobnicate\",\"path\":\"/a\"}]", "Unexpected kind: frobnicate");
    JP_BAD("{}", "[{\"op\":\"add\",\"value\":1}]", "add operation: missing \"path\"");
    JP_BAD("{}", "[{\"op\":\"add\",\"path\":5,\"value\":1}]", "non-string \"path\"");
    JP_BAD("{}", "[{\"op\":\"move\",\"from\":[],\"path\":\"/a\"}]", "non-string \"from\"");
}

static void test_jsonpatch_limits(void **state)
{
    (void)state;
    /* too many operations */
    json_t *ops = json_array();
    for (int i = 0; i < CKUBE_JSON_PATCH_MAX_OPS + 1; i++)
        json_array_append_new(ops, J("{\"op\":\"test\",\"path\":\"\",\"value\":{}}"));
    char *err = NULL;
    json_t *doc = json_object();
    assert_null(ckube_json_patch_apply(doc, ops, &err));
    assert_non_null(strstr(err, "The allowed maximum operations in a JSON patch is 10000"));
    free(err);
    json_decref(ops);

    /* copies that double the document must stop early */
    ops = json_array();
    for (int i = 0; i < 40; i++)
        json_array_append_new(ops, J("{\"op\":\"copy\",\"from\":\"\",\"path\":\"/x/-\"}"));
    json_object_set_new(doc, "x", json_array());
    err = NULL;
    assert_null(ckube_json_patch_apply(doc, ops, &err));
    assert_non_null(strstr(err, "copies more than"));
    free(err);
    json_decref(ops);
    json_decref(doc);

    /* Copies are counted in memory, not text: 5000 empty objects are 10 KB
     * of JSON but ~1.2 MB of memory, so the third copy passes 3 MiB. */
    doc = json_object();
    json_t *x = json_array();
    for (int i = 0; i < 5000; i++)
        json_array_append_new(x, json_object());
    json_object_set_new(doc, "x", x);
    ops = J("[{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/a\"},"
            "{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/b\"}]");
    json_t *out = ckube_json_patch_apply(doc, ops, &err);
    assert_non_null(out);
    assert_int_equal(json_array_size(json_object_get(out, "b")), 5000);
    json_decref(out);
    json_decref(ops);
    ops = J("[{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/a\"},"
            "{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/b\"},"
            "{\"op\":\"copy\",\"from\":\"/x\",\"path\":\"/c\"}]");
    err = NULL;
    assert_null(ckube_json_patch_apply(doc, ops, &err));
    assert_non_null(strstr(err, "copies more than 3145728 bytes"));
    free(err);
    json_decref(ops);
    json_decref(doc);

    /* err may be NULL */
    json_t *p = J("[{\"op\":\"remove\",\"path\":\"/x\"}]");
    doc = json_object();
    assert_null(ckube_json_patch_apply(doc, p, NULL));
    json_decref(p);
    json_decref(doc);
}

/* ---- RFC 7386 ----------------------------------------------------------- */

/* The RFC 7386 appendix A test cases. */
static void test_mergepatch_rfc_examples(void **state)
{
    (void)state;
    MP_OK("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    MP_OK("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
    MP_OK("{\"a\":\"b\"}", "{\"a\":null}", "{}");
    MP_OK("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
    MP_OK("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    MP_OK("{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}");
    MP_OK("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}");
    MP_OK("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
    MP_OK("[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]");
    MP_OK("{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]");
    MP_OK("{\"a\":\"foo\"}", "null", "null");
    MP_OK("{\"a\":\"foo\"}", "\"bar\"", "\"bar\"");
    MP_OK("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
    MP_OK("[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}");
    MP_OK("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
}

static void test_mergepatch_rfc_section3(void **state)
{
    (void)state;
    MP_OK("{\"title\":\"Goodbye!\",\"author\":{\"givenName\":\"John\",\"familyName\":\"Doe\"},"
          "\"tags\":[\"example\",\"sample\"],\"content\":\"This will be unchanged\"}",
          "{\"title\":\"Hello!\",\"phoneNumber\":\"+01-123-456-7890\",\"author\":{\"familyName\":"
          "null},"
          "\"tags\":[\"example\"]}",
          "{\"title\":\"Hello!\",\"author\":{\"givenName\":\"John\"},\"tags\":[\"example\"],"
          "\"content\":\"This will be unchanged\",\"phoneNumber\":\"+01-123-456-7890\"}");
}

static void test_mergepatch_details(void **state)
{
    (void)state;
    /* key order: old keys first in old order, new keys after */
    run r = apply(MERGEP, NULL, "{\"z\":1,\"a\":2,\"m\":3}", "{\"b\":4,\"a\":5,\"z\":null}");
    assert_non_null(r.out);
    char *s = dump(r.out);
    assert_string_equal(s, "{\"a\":5,\"m\":3,\"b\":4}");
    free(s);
    json_decref(r.out);
    /* lists are replaced, nulls inside lists kept */
    MP_OK("{\"a\":[1,2,3]}", "{\"a\":[null,{\"x\":null}]}", "{\"a\":[null,{\"x\":null}]}");
    /* a NULL doc is absent */
    json_t *p = J("{\"a\":{\"b\":null,\"c\":1}}");
    char *err = NULL;
    json_t *out = ckube_merge_patch_apply(NULL, p, &err);
    expect_json(out, "{\"a\":{\"c\":1}}");
    assert_null(err);
    json_decref(out);
    assert_null(ckube_merge_patch_apply(NULL, NULL, &err));
    assert_non_null(err);
    free(err);
    json_decref(p);
}

/* ---- strategic merge patch ---------------------------------------------- */

static const char *POD =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labels\":{\"app\":"
    "\"x\","
    "\"tier\":\"web\"},\"finalizers\":[\"a\",\"b\"]},"
    "\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\",\"ports\":[{\"containerPort\":80,"
    "\"name\":\"http\"},{\"containerPort\":443}],\"env\":[{\"name\":\"X\",\"value\":\"1\"},{"
    "\"name\":\"Y\",\"value\":\"2\"}]},{\"name\":\"b\",\"image\":\"b:1\"}],"
    "\"tolerations\":[{\"key\":\"k1\",\"operator\":\"Exists\"}],"
    "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}]}}";

static void test_smp_maps(void **state)
{
    (void)state;
    /* maps merge recursively; null deletes */
    SMP_OK(NULL, "{\"a\":{\"b\":1,\"c\":2},\"d\":3}", "{\"a\":{\"b\":null,\"e\":4},\"d\":null}",
           "{\"a\":{\"c\":2,\"e\":4}}");
    /* a null for a missing field is ignored, nulls in new maps dropped */
    SMP_OK(NULL, "{}", "{\"x\":null,\"y\":{\"z\":null,\"w\":1}}", "{\"y\":{\"w\":1}}");
    /* type change replaces */
    SMP_OK(NULL, "{\"a\":[1],\"b\":{\"c\":1},\"c\":\"s\"}",
           "{\"a\":{\"x\":1},\"b\":[1],\"c\":{\"d\":null,\"e\":2}}",
           "{\"a\":{\"x\":1},\"b\":[1],\"c\":{\"e\":2}}");
    /* a NULL or null document is empty */
    SMP_OK(NULL, "null", "{\"a\":1}", "{\"a\":1}");
    /* key order: old first, new after */
    run r = apply(SMP, NULL, "{\"z\":1,\"a\":2}", "{\"b\":3,\"z\":4}");
    char *s = dump(r.out);
    assert_string_equal(s, "{\"z\":4,\"a\":2,\"b\":3}");
    free(s);
    json_decref(r.out);
}

static void test_smp_map_directives(void **state)
{
    (void)state;
    /* $patch: replace on a map */
    SMP_OK(patchmeta_pod, POD,
           "{\"metadata\":{\"labels\":{\"$patch\":\"replace\",\"only\":\"me\"}}}",
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labels\":{"
           "\"only\":\"me\"},\"finalizers\":[\"a\",\"b\"]},\"spec\":"
           "{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\",\"ports\":[{\"containerPort\":80,"
           "\"name\":\"http\"},{\"containerPort\":443}],\"env\":[{\"name\":\"X\",\"value\":\"1\"},"
           "{\"name\":\"Y\",\"value\":\"2\"}]},{\"name\":\"b\",\"image\":\"b:1\"}],"
           "\"tolerations\":[{\"key\":\"k1\",\"operator\":\"Exists\"}],"
           "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}]}}");
    /* $patch: delete on a map empties it */
    SMP_OK(NULL, "{\"a\":{\"b\":1},\"c\":2}", "{\"a\":{\"$patch\":\"delete\"}}",
           "{\"a\":{},\"c\":2}");
    /* $patch: merge is the default made explicit */
    SMP_OK(NULL, "{\"a\":{\"b\":1},\"c\":2}", "{\"a\":{\"$patch\":\"merge\",\"d\":3}}",
           "{\"a\":{\"b\":1,\"d\":3},\"c\":2}");
    /* at the root */
    SMP_OK(NULL, "{\"a\":1}", "{\"$patch\":\"replace\",\"b\":2}", "{\"b\":2}");
    SMP_OK(NULL, "{\"a\":1}", "{\"$patch\":\"delete\"}", "{}");
    SMP_BAD(NULL, "{\"a\":{}}", "{\"a\":{\"$patch\":\"explode\"}}",
            "unknown patch type: \"explode\" in map");
    SMP_BAD(NULL, "{\"a\":{}}", "{\"a\":{\"$patch\":1}}", "unknown patch type: 1");
}

/* The Deployment container image change kubectl patch sends. */
static void test_smp_deployment_image(void **state)
{
    (void)state;
    const char *dep =
        "{\"kind\":\"Deployment\",\"spec\":{\"replicas\":2,\"template\":{\"metadata\":{\"labels\":"
        "{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:1\",\"ports\":[{"
        "\"containerPort\":8080}]},{\"name\":\"side\",\"image\":\"s:1\"}]}}}}";
    SMP_OK(
        patchmeta_deployment, dep,
        "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:2\"}]}}}"
        "}",
        "{\"kind\":\"Deployment\",\"spec\":{\"replicas\":2,\"template\":{\"metadata\":{\"labels\":"
        "{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:2\",\"ports\":[{"
        "\"containerPort\":8080}]},{\"name\":\"side\",\"image\":\"s:1\"}]}}}}");
    /* the same patch on a table without merge metadata replaces the list */
    SMP_OK(
        patchmeta_metadata_only, dep,
        "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:2\"}]}}}"
        "}",
        "{\"kind\":\"Deployment\",\"spec\":{\"replicas\":2,\"template\":{\"metadata\":{\"labels\":"
        "{\"app\":\"d\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x:2\"}]}}}}");
}

static void test_smp_merge_by_key(void **state)
{
    (void)state;
    const char *doc = "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\"},{\"name\":"
                      "\"b\",\"image\":\"b:1\"}]}}";
    /* a new element comes before the server's elements (upstream order) */
    SMP_OK(patchmeta_pod, doc, "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"c:1\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"c:1\"},{\"name\":\"a\","
           "\"image\":\"a:1\"},{\"name\":\"b\",\"image\":\"b:1\"}]}}");
    /* merging the second keeps the first in front */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":null,"
           "\"args\":[\"x\"]}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\"},{\"name\":\"b\","
           "\"args\":[\"x\"]}]}}");
    /* patch order wins for the elements it names */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"b:2\"},{\"name\":\"a\","
           "\"image\":\"a:2\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"b:2\"},{\"name\":\"a\","
           "\"image\":\"a:2\"}]}}");
    /* an empty patch list leaves a merged list alone */
    SMP_OK(patchmeta_pod, doc, "{\"spec\":{\"containers\":[]}}", doc);
    /* nested merge lists: ports by containerPort, env by name */
    SMP_OK(patchmeta_pod, POD,
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":80,\"name\":"
           "\"web\"}],\"env\":[{\"name\":\"Z\",\"value\":\"3\"},{\"name\":\"X\",\"$patch\":"
           "\"delete\"}]}]}}",
           "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"labels\":{"
           "\"app\":\"x\",\"tier\":\"web\"},\"finalizers\":[\"a\",\"b\"]},\"spec\":"
           "{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\",\"ports\":[{\"containerPort\":80,"
           "\"name\":\"web\"},{\"containerPort\":443}],\"env\":[{\"name\":\"Z\",\"value\":\"3\"},"
           "{\"name\":\"Y\",\"value\":\"2\"}]},{\"name\":\"b\",\"image\":\"b:1\"}],"
           "\"tolerations\":[{\"key\":\"k1\",\"operator\":\"Exists\"}],"
           "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}]}}");
    /* a list without metadata (tolerations) is replaced */
    SMP_OK(patchmeta_pod, "{\"spec\":{\"tolerations\":[{\"key\":\"k1\"},{\"key\":\"k2\"}]}}",
           "{\"spec\":{\"tolerations\":[{\"key\":\"k3\"}]}}",
           "{\"spec\":{\"tolerations\":[{\"key\":\"k3\"}]}}");
    /* without any metadata every list is replaced */
    SMP_OK(NULL, doc, "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
    /* merge key values compare as JSON values (80 == 80.0) */
    SMP_OK(
        patchmeta_service, "{\"spec\":{\"ports\":[{\"port\":80,\"name\":\"a\"},{\"port\":81}]}}",
        "{\"spec\":{\"ports\":[{\"port\":80.0,\"targetPort\":8080}]}}",
        "{\"spec\":{\"ports\":[{\"port\":80,\"name\":\"a\",\"targetPort\":8080},{\"port\":81}]}}");
    /* a new list field is merged into nothing: directives are dropped */
    SMP_OK(patchmeta_pod, "{\"spec\":{}}",
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"E\",\"value\":null}]},"
           "{\"name\":\"gone\",\"$patch\":\"delete\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"E\"}]}]}}");
    /* duplicates in the patch merge into one element */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:2\"},{\"name\":\"a\","
           "\"tty\":true}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:2\",\"tty\":true},{\"name\":"
           "\"b\",\"image\":\"b:1\"}]}}");
}

static void test_smp_list_directives(void **state)
{
    (void)state;
    const char *doc = "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\"},{\"name\":"
                      "\"b\",\"image\":\"b:1\"}]}}";
    /* $patch: delete on an element */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"b:1\"}]}}");
    /* deleting a missing element is fine */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"q\",\"$patch\":\"delete\"}]}}", doc);
    /* $patch: replace makes the list exactly the rest of the patch list */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"z\",\"image\":\"z:1\"},{\"$patch\":"
           "\"replace\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"z\",\"image\":\"z:1\"}]}}");
    SMP_OK(patchmeta_pod, doc, "{\"spec\":{\"containers\":[{\"$patch\":\"replace\"}]}}",
           "{\"spec\":{\"containers\":[]}}");
    /* $patch: merge on an element merges it; a bare one does nothing */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"containers\":[{\"name\":\"b\",\"image\":\"b:2\",\"$patch\":\"merge\"},"
           "{\"$patch\":\"merge\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"a:1\"},{\"name\":\"b\","
           "\"image\":\"b:2\"}]}}");
    SMP_BAD(patchmeta_pod, doc,
            "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"nope\"}]}}",
            "unknown patch type: \"nope\"");
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"containers\":[{\"$patch\":\"delete\"}]}}",
            "does not contain declared merge key: name");
}

static void test_smp_primitive_lists(void **state)
{
    (void)state;
    const char *doc = "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}";
    /* set union; new values first, as upstream orders them */
    SMP_OK(patchmeta_configmap, doc, "{\"metadata\":{\"finalizers\":[\"b\",\"c\"]}}",
           "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}");
    SMP_OK(patchmeta_configmap, doc, "{\"metadata\":{\"finalizers\":[\"c\"]}}",
           "{\"metadata\":{\"finalizers\":[\"c\",\"a\",\"b\"]}}");
    SMP_OK(patchmeta_configmap, doc, "{\"metadata\":{\"finalizers\":[\"a\",\"a\"]}}", doc);
    /* $deleteFromPrimitiveList */
    SMP_OK(patchmeta_configmap, "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
           "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\",\"zz\"]}}",
           "{\"metadata\":{\"finalizers\":[\"a\",\"c\"]}}");
    /* ...together with additions */
    SMP_OK(
        patchmeta_configmap, doc,
        "{\"metadata\":{\"finalizers\":[\"c\"],\"$deleteFromPrimitiveList/finalizers\":[\"a\"]}}",
        "{\"metadata\":{\"finalizers\":[\"c\",\"b\"]}}");
    /* ...for an absent list: nothing happens */
    SMP_OK(patchmeta_configmap, "{\"metadata\":{}}",
           "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"a\"]}}", "{\"metadata\":{}}");
    SMP_BAD(patchmeta_configmap, doc,
            "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":\"a\"}}",
            "invalid patch format of primitive list");
    SMP_BAD(patchmeta_configmap, doc,
            "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[{\"a\":1}]}}",
            "invalid patch format of primitive list");
    SMP_BAD(patchmeta_configmap, doc, "{\"metadata\":{\"$deleteFromPrimitiveListX\":[\"a\"]}}",
            "invalid patch format of primitive list");
    /* node podCIDRs merge too */
    SMP_OK(patchmeta_node, "{\"spec\":{\"podCIDRs\":[\"10.0.0.0/24\"]}}",
           "{\"spec\":{\"podCIDRs\":[\"fd00::/64\"]}}",
           "{\"spec\":{\"podCIDRs\":[\"fd00::/64\",\"10.0.0.0/24\"]}}");
}

static void test_smp_set_element_order(void **state)
{
    (void)state;
    const char *doc = "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":"
                      "\"c\"}]}}";
    /* reorder only */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"c\"},{\"name\":\"a\"},{"
           "\"name\":\"b\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"c\"},{\"name\":\"a\"},{\"name\":\"b\"}]}}");
    /* with a change and an addition */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"},{\"name\":\"d\"},{"
           "\"name\":\"b\"},{\"name\":\"c\"}],\"containers\":[{\"name\":\"d\",\"image\":\"d\"},{"
           "\"name\":\"b\",\"image\":\"b\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"d\",\"image\":\"d\"},{\"name\":"
           "\"b\",\"image\":\"b\"},{\"name\":\"c\"}]}}");
    /* with a deletion */
    SMP_OK(patchmeta_pod, doc,
           "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"c\"},{\"name\":\"a\"}],"
           "\"containers\":[{\"name\":\"b\",\"$patch\":\"delete\"}]}}",
           "{\"spec\":{\"containers\":[{\"name\":\"c\"},{\"name\":\"a\"}]}}");
    /* primitives */
    SMP_OK(patchmeta_configmap, "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
           "{\"metadata\":{\"$setElementOrder/finalizers\":[\"c\",\"b\",\"a\"]}}",
           "{\"metadata\":{\"finalizers\":[\"c\",\"b\",\"a\"]}}");
    /* the patch list must follow the order list */
    SMP_BAD(patchmeta_pod, doc,
            "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"},{\"name\":\"b\"}],"
            "\"containers\":[{\"name\":\"b\"},{\"name\":\"a\"}]}}",
            "doesn't match $setElementOrder list");
    SMP_BAD(patchmeta_pod, doc,
            "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"a\"}],"
            "\"containers\":[{\"name\":\"x\"}]}}",
            "doesn't match $setElementOrder list");
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"$setElementOrder/containers\":[{\"image\":\"a\"}]}}",
            "does not contain declared merge key: name");
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"$setElementOrder/containers\":{}}}",
            "invalid patch format of setElementOrder list");
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"$setElementOrderX\":[]}}",
            "invalid patch format of setElementOrder list");
    /* ignored for lists that are not merged */
    SMP_OK(patchmeta_pod, "{\"spec\":{\"tolerations\":[{\"key\":\"a\"},{\"key\":\"b\"}]}}",
           "{\"spec\":{\"$setElementOrder/tolerations\":[{\"key\":\"b\"},{\"key\":\"a\"}]}}",
           "{\"spec\":{\"tolerations\":[{\"key\":\"a\"},{\"key\":\"b\"}]}}");
}

static void test_smp_retain_keys(void **state)
{
    (void)state;
    const char *dep = "{\"spec\":{\"replicas\":1,\"strategy\":{\"type\":\"RollingUpdate\","
                      "\"rollingUpdate\":{\"maxSurge\":1,\"maxUnavailable\":0}}}}";
    /* what kubectl apply sends when switching to Recreate */
    SMP_OK(patchmeta_deployment, dep,
           "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\","
           "\"rollingUpdate\":null}}}",
           "{\"spec\":{\"replicas\":1,\"strategy\":{\"type\":\"Recreate\"}}}");
    SMP_OK(patchmeta_deployment, dep,
           "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\",\"rollingUpdate\"],"
           "\"rollingUpdate\":{\"maxSurge\":2}}}}",
           "{\"spec\":{\"replicas\":1,\"strategy\":{\"type\":\"RollingUpdate\","
           "\"rollingUpdate\":{\"maxSurge\":2,\"maxUnavailable\":0}}}}");
    SMP_BAD(patchmeta_deployment, dep,
            "{\"spec\":{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\","
            "\"rollingUpdate\":{}}}}",
            "field \"rollingUpdate\" is set at \"spec.strategy\" but is not listed in $retainKeys");
    SMP_BAD(patchmeta_deployment, dep, "{\"spec\":{\"strategy\":{\"$retainKeys\":\"type\"}}}",
            "invalid patch format of retainKeys");
    /* inside a list element: a volume switching its source */
    SMP_OK(patchmeta_pod,
           "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}},{\"name\":\"w\","
           "\"hostPath\":{\"path\":\"/x\"}}]}}",
           "{\"spec\":{\"volumes\":[{\"$retainKeys\":[\"configMap\",\"name\"],\"name\":\"v\","
           "\"configMap\":{\"name\":\"cm\"}}]}}",
           "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"configMap\":{\"name\":\"cm\"}},{\"name\":"
           "\"w\",\"hostPath\":{\"path\":\"/x\"}}]}}");
}

static void test_smp_metadata_lists(void **state)
{
    (void)state;
    SMP_OK(patchmeta_metadata_only,
           "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"1\",\"name\":\"a\"},{\"uid\":\"2\","
           "\"name\":\"b\"}]}}",
           "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"2\",\"controller\":true},{\"uid\":\"1\","
           "\"$patch\":\"delete\"}]}}",
           "{\"metadata\":{\"ownerReferences\":[{\"uid\":\"2\",\"name\":\"b\",\"controller\":true}"
           "]}}");
    /* conditions merge by type (Node status) */
    SMP_OK(patchmeta_node,
           "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"},{\"type\":"
           "\"DiskPressure\",\"status\":\"False\"}],\"addresses\":[{\"type\":\"InternalIP\","
           "\"address\":\"10.0.0.1\"}]}}",
           "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}],\"addresses\":[{"
           "\"type\":\"Hostname\",\"address\":\"n1\"}]}}",
           "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":"
           "\"DiskPressure\",\"status\":\"False\"}],\"addresses\":[{\"type\":\"Hostname\","
           "\"address\":\"n1\"},{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}");
    /* ServiceAccount secrets by name */
    SMP_OK(patchmeta_serviceaccount, "{\"secrets\":[{\"name\":\"t1\"}]}",
           "{\"secrets\":[{\"name\":\"t2\"}]}",
           "{\"secrets\":[{\"name\":\"t2\"},{\"name\":\"t1\"}]}");
}

static void test_smp_malformed(void **state)
{
    (void)state;
    const char *doc = "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}";
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}",
            "map: {\"image\":\"x\"} does not contain declared merge key: name (in list "
            "\"spec.containers\")");
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"containers\":[[1]]}}", "lists of lists");
    SMP_BAD(patchmeta_pod, doc, "{\"spec\":{\"containers\":[\"x\"]}}",
            "list element types are not identical");
    SMP_BAD(patchmeta_configmap, "{\"metadata\":{\"finalizers\":[\"a\"]}}",
            "{\"metadata\":{\"finalizers\":[1]}}", "list element types are not identical");
    /* merging a list of maps needs a merge key */
    static const ckube_patch_meta_entry nokey[] = {{"items", CKUBE_STRATEGY_MERGE, NULL}, {0}};
    SMP_BAD(nokey, "{\"items\":[{\"a\":1}]}", "{\"items\":[{\"a\":2}]}",
            "cannot merge lists without merge key");
    SMP_BAD(NULL, "{}", "[]", "the patch must be a JSON object");
    SMP_BAD(NULL, "[]", "{}", "the document must be a JSON object");
}

/* What kubectl apply sends for a ConfigMap whose data changed. */
static void test_smp_kubectl_apply_configmap(void **state)
{
    (void)state;
    const char *live =
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\","
        "\"namespace\":\"default\",\"resourceVersion\":\"5\",\"uid\":\"u1\",\"labels\":{\"app\":"
        "\"x\"},\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":\"{old}\\n\","
        "\"team\":\"t\"}},\"data\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"}}";
    const char *patch =
        "{\"data\":{\"b\":\"20\",\"c\":null,\"d\":\"4\"},\"metadata\":{\"annotations\":{"
        "\"kubectl.kubernetes.io/last-applied-configuration\":\"{new}\\n\"}}}";
    SMP_OK(patchmeta_configmap, live, patch,
           "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\","
           "\"namespace\":\"default\",\"resourceVersion\":\"5\",\"uid\":\"u1\",\"labels\":{\"app\":"
           "\"x\"},\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
           "\"{new}\\n\",\"team\":\"t\"}},\"data\":{\"a\":\"1\",\"b\":\"20\",\"d\":\"4\"}}");
}

/* What kubectl apply sends for a Deployment whose first container's image
 * changed: $setElementOrder plus the changed element. */
static void test_smp_kubectl_apply_deployment(void **state)
{
    (void)state;
    const char *live =
        "{\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"x:1\",\"env\":[{\"name\":\"A\",\"value\":"
        "\"1\"}]},{\"name\":\"d\",\"image\":\"y:1\"}],\"restartPolicy\":\"Always\"}}}}";
    SMP_OK(patchmeta_deployment, live,
           "{\"spec\":{\"template\":{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"c\"},{"
           "\"name\":\"d\"}],\"containers\":[{\"image\":\"x:2\",\"name\":\"c\"}]}}}}",
           "{\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{"
           "\"containers\":[{\"name\":\"c\",\"image\":\"x:2\",\"env\":[{\"name\":\"A\",\"value\":"
           "\"1\"}]},{\"name\":\"d\",\"image\":\"y:1\"}],\"restartPolicy\":\"Always\"}}}}");
    /* removing container d and env A the way kubectl apply does */
    SMP_OK(patchmeta_deployment, live,
           "{\"spec\":{\"template\":{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"c\"}],"
           "\"containers\":[{\"$setElementOrder/env\":[],\"env\":[{\"$patch\":\"delete\",\"name\":"
           "\"A\"}],\"name\":\"c\"},{\"$patch\":\"delete\",\"name\":\"d\"}]}}}}",
           "{\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"app\":\"d\"}},\"spec\":{"
           "\"containers\":[{\"name\":\"c\",\"image\":\"x:1\",\"env\":[]}],"
           "\"restartPolicy\":\"Always\"}}}}");
}

static void test_patchmeta_tables(void **state)
{
    (void)state;
    const char *mk = "junk";
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_pod, "spec.containers", &mk),
                     CKUBE_STRATEGY_MERGE);
    assert_string_equal(mk, "name");
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_pod, "spec.containers.ports", &mk),
                     CKUBE_STRATEGY_MERGE);
    assert_string_equal(mk, "containerPort");
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_pod, "spec.volumes", &mk),
                     CKUBE_STRATEGY_MERGE | CKUBE_STRATEGY_RETAIN_KEYS);
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_pod, "spec.tolerations", &mk),
                     CKUBE_STRATEGY_REPLACE);
    assert_null(mk);
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_pod, "metadata.finalizers", &mk),
                     CKUBE_STRATEGY_MERGE);
    assert_null(mk);
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_deployment,
                                            "spec.template.spec.initContainers.env", &mk),
                     CKUBE_STRATEGY_MERGE);
    assert_string_equal(mk, "name");
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_deployment, "spec.strategy", &mk),
                     CKUBE_STRATEGY_RETAIN_KEYS);
    assert_int_equal(ckube_patch_meta_table((void *)patchmeta_service, "spec.ports", &mk),
                     CKUBE_STRATEGY_MERGE);
    assert_string_equal(mk, "port");
    assert_int_equal(ckube_patch_meta_table(NULL, "spec.ports", &mk), CKUBE_STRATEGY_REPLACE);

    assert_ptr_equal(builtin_patchmeta_for("", "Pod"), patchmeta_pod);
    assert_ptr_equal(builtin_patchmeta_for("apps", "Deployment"), patchmeta_deployment);
    assert_ptr_equal(builtin_patchmeta_for("", "ConfigMap"), patchmeta_metadata_only);
    assert_ptr_equal(builtin_patchmeta_for("events.k8s.io", "Event"), patchmeta_metadata_only);
    assert_ptr_equal(builtin_patchmeta_for("coordination.k8s.io", "Lease"),
                     patchmeta_metadata_only);
    assert_null(builtin_patchmeta_for("apps", "Pod"));
    assert_null(builtin_patchmeta_for("example.com", "Widget"));
    assert_null(builtin_patchmeta_for(NULL, "Pod"));
}

/* Results never share values with the inputs. */
static void test_results_are_independent(void **state)
{
    (void)state;
    json_t *doc = J("{\"a\":{\"b\":[1,{\"c\":2}]},\"d\":\"x\"}");
    json_t *mp = J("{\"e\":{\"f\":[3]}}");
    json_t *jp = J("[{\"op\":\"add\",\"path\":\"/e\",\"value\":{\"f\":[3]}}]");
    json_t *outs[3];
    outs[0] = ckube_merge_patch_apply(doc, mp, NULL);
    outs[1] = ckube_strategic_merge_patch_apply(doc, mp, NULL, NULL, NULL);
    outs[2] = ckube_json_patch_apply(doc, jp, NULL);
    for (int i = 0; i < 3; i++) {
        assert_non_null(outs[i]);
        assert_ptr_not_equal(json_object_get(outs[i], "a"), json_object_get(doc, "a"));
        json_t *f = json_object_get(json_object_get(outs[i], "e"), "f");
        assert_ptr_not_equal(f, json_object_get(json_object_get(mp, "e"), "f"));
        json_array_append_new(f, json_integer(4));
        json_decref(outs[i]);
    }
    expect_json(mp, "{\"e\":{\"f\":[3]}}");
    json_decref(doc);
    json_decref(mp);
    json_decref(jp);
}


/* ---- ckube_json_patch_diff ---------------------------------------------------- */

/* diff(a, b) applied to a gives b; and the ops are the ones expected. */
static void check_diff(const char *a, const char *b, const char *want_ops)
{
    json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
    assert_non_null(ja);
    assert_non_null(jb);
    json_t *ops = ckube_json_patch_diff(ja, jb);
    assert_non_null(ops);
    char *err = NULL;
    json_t *out = ckube_json_patch_apply(ja, ops, &err);
    assert_non_null(out);
    assert_true(json_equal(out, jb));
    if (want_ops) {
        json_t *want = json_loads(want_ops, 0, NULL);
        assert_non_null(want);
        if (!json_equal(want, ops)) {
            char *got = json_dumps(ops, JSON_COMPACT);
            fail_msg("ops %s, want %s", got, want_ops);
        }
        json_decref(want);
    }
    json_decref(out);
    json_decref(ops);
    json_decref(ja);
    json_decref(jb);
}

static void test_diff(void **state)
{
    (void)state;
    check_diff("{\"a\":1}", "{\"a\":1}", "[]");
    check_diff("{\"spec\":{\"cidr\":\"10.0.0.0/8\"}}",
               "{\"spec\":{\"cidr\":\"10.0.0.0/8\",\"gateway\":\"10.0.0.1\"}}",
               "[{\"op\":\"add\",\"path\":\"/spec/gateway\",\"value\":\"10.0.0.1\"}]");
    check_diff("{\"a\":1,\"b\":2}", "{\"b\":3}",
               "[{\"op\":\"remove\",\"path\":\"/a\"},"
               "{\"op\":\"replace\",\"path\":\"/b\",\"value\":3}]");
    /* keys with / and ~ (label keys) are escaped */
    check_diff("{\"metadata\":{\"labels\":{}}}",
               "{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"x\",\"a~b\":\"y\"}}}",
               "[{\"op\":\"add\",\"path\":\"/metadata/labels/app.kubernetes.io~1name\","
               "\"value\":\"x\"},{\"op\":\"add\",\"path\":\"/metadata/labels/a~0b\","
               "\"value\":\"y\"}]");
    /* arrays: element by element when the length stays, whole otherwise */
    check_diff("{\"l\":[1,{\"x\":1},3]}", "{\"l\":[1,{\"x\":2},3]}",
               "[{\"op\":\"replace\",\"path\":\"/l/1/x\",\"value\":2}]");
    check_diff("{\"l\":[1,2]}", "{\"l\":[1,2,3]}",
               "[{\"op\":\"replace\",\"path\":\"/l\",\"value\":[1,2,3]}]");
    /* types changing, nulls, the whole document */
    check_diff("{\"a\":{\"b\":1}}", "{\"a\":[1]}", NULL);
    check_diff("{\"a\":null}", "{\"a\":0}", NULL);
    check_diff("[1]", "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"a\":1}}]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_equal),
        cmocka_unit_test(test_jsonpatch_rfc_examples),
        cmocka_unit_test(test_jsonpatch_pointers),
        cmocka_unit_test(test_jsonpatch_array_indices),
        cmocka_unit_test(test_jsonpatch_ops),
        cmocka_unit_test(test_jsonpatch_malformed),
        cmocka_unit_test(test_jsonpatch_limits),
        cmocka_unit_test(test_mergepatch_rfc_examples),
        cmocka_unit_test(test_mergepatch_rfc_section3),
        cmocka_unit_test(test_mergepatch_details),
        cmocka_unit_test(test_smp_maps),
        cmocka_unit_test(test_smp_map_directives),
        cmocka_unit_test(test_smp_deployment_image),
        cmocka_unit_test(test_smp_merge_by_key),
        cmocka_unit_test(test_smp_list_directives),
        cmocka_unit_test(test_smp_primitive_lists),
        cmocka_unit_test(test_smp_set_element_order),
        cmocka_unit_test(test_smp_retain_keys),
        cmocka_unit_test(test_smp_metadata_lists),
        cmocka_unit_test(test_smp_malformed),
        cmocka_unit_test(test_smp_kubectl_apply_configmap),
        cmocka_unit_test(test_smp_kubectl_apply_deployment),
        cmocka_unit_test(test_patchmeta_tables),
        cmocka_unit_test(test_results_are_independent),
        cmocka_unit_test(test_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
