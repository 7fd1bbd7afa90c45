/* How the API server reads a CRD conversion webhook's answer
 * (apiextensions/conversion.c, crd_conv__answer): objects merged back in
 * order (those already in the version wanted were not sent), metadata
 * restored but for labels and annotations, and every malformed answer
 * refused in apiextensions-apiserver's words, for one object and for a
 * list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/apiextensions/conversion.h"
#include "ckube/json.h"

#define WANT "conv.example.com/v2"
#define GVK "conv.example.com/v1, Kind=Widget"

static json_t *widget(const char *name, const char *av)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:i,s:{s:s}},s:{s:i}}", "apiVersion", av, "kind",
                     "Widget", "metadata", "name", name, "namespace", "default", "uid", name,
                     "generation", 1, "labels", "app", "w", "spec", "size", 3);
}

/* An answer converting `objs` (those not in WANT) with `edit` applied
 * to each converted object (a JSON object merged into metadata), as
 * review `version` answering uid. */
static char *answer(const char *version, const char *uid, const json_t *objs, const char *meta)
{
    json_t *conv = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        if (!strcmp(json_string_value(json_object_get(o, "apiVersion")), WANT))
            continue;
        json_t *c = json_deep_copy(o);
        json_object_set_new(c, "apiVersion", json_string(WANT));
        json_object_set_new(c, "spec", json_pack("{s:{s:i}}", "dims", "size", 3));
        if (meta) {
            json_t *m = json_loads(meta, 0, NULL);
            json_object_update(json_object_get(c, "metadata"), m);
            json_decref(m);
        }
        json_array_append_new(conv, c);
    }
    json_t *r = json_pack("{s:s,s:s,s:{s:s,s:{s:s},s:o}}", "apiVersion",
                          !strcmp(version, "v1") ? "apiextensions.k8s.io/v1"
                                                 : "apiextensions.k8s.io/v1beta1",
                          "kind", "ConversionReview", "response", "uid", uid, "result", "status",
                          "Success", "convertedObjects", conv);
    char *s = json_dumps(r, 0);
    json_decref(r);
    return s;
}

static json_t *read_answer(const json_t *objs, bool list, const char *body, char **err)
{
    return crd_conv__answer("v1", "u1", objs, WANT, GVK, list, 200, body, strlen(body), err);
}

static void expect_error(const json_t *objs, bool list, const char *body, const char *words)
{
    char *err = NULL;
    json_t *out = read_answer(objs, list, body, &err);
    assert_null(out);
    assert_non_null(err);
    if (!strstr(err, words))
        fail_msg("got \"%s\", want \"%s\"", err, words);
    free(err);
}

static void test_merged_in_order(void **state)
{
    (void)state;
    json_t *objs = json_pack("[o,o,o]", widget("a", "conv.example.com/v1"), widget("b", WANT),
                             widget("c", "conv.example.com/v1"));
    /* the webhook changes labels (kept), generation and resourceVersion (not) */
    char *body =
        answer("v1", "u1", objs,
               "{\"generation\":9,\"labels\":{\"x\":\"y\"},\"annotations\":{\"n\":\"m\"}}");
    char *err = NULL;
    json_t *out = read_answer(objs, true, body, &err);
    assert_null(err);
    assert_int_equal(json_array_size(out), 3);
    const char *names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        json_t *o = json_array_get(out, i);
        assert_string_equal(json_string_value(json_object_get(o, "apiVersion")), WANT);
        assert_string_equal(ckube_obj_name(o), names[i]);
        json_int_t gen = json_integer_value(ckube_json_get_path(o, "metadata.generation"));
        assert_int_equal(gen, 1);
    }
    /* b was not sent: the same object */
    assert_true(json_equal(json_array_get(out, 1), json_array_get(objs, 1)));
    assert_string_equal(
        json_string_value(ckube_json_get_path(json_array_get(out, 0), "metadata.labels.x")), "y");
    assert_null(ckube_json_get_path(json_array_get(out, 0), "metadata.labels.app"));
    free(body);
    json_decref(out);
    json_decref(objs);
}

static void test_refused_in_upstream_words(void **state)
{
    (void)state;
    json_t *one = json_pack("[o]", widget("a", "conv.example.com/v1"));
    char *ok = answer("v1", "u1", one, NULL);
    char *wrong_uid = answer("v1", "other", one, NULL);
    char *renamed = answer("v1", "u1", one, "{\"name\":\"z\"}");
    char *bad_label = answer("v1", "u1", one, "{\"labels\":{\"x\":\"not ok!\"}}");
    char *num_label = answer("v1", "u1", one, "{\"labels\":{\"x\":1}}");
    json_t *empty = json_array();
    char *none = answer("v1", "u1", empty, NULL);
    json_decref(empty);
    char *beta = answer("v1beta1", "u1", one, NULL);

    expect_error(one, false, "nope",
                 "conversion webhook for " GVK " failed: couldn't get "
                 "version/kind; json parse error: ");
    expect_error(one, false, wrong_uid,
                 "conversion webhook for " GVK " failed: expected response.uid=\"u1\", got "
                 "\"other\"");
    expect_error(one, false, beta,
                 "conversion webhook for " GVK " failed: expected webhook response of "
                 "apiextensions.k8s.io/v1, Kind=ConversionReview, got "
                 "apiextensions.k8s.io/v1beta1, Kind=ConversionReview");
    expect_error(one, false, renamed,
                 "conversion webhook for " GVK " returned invalid object: must have the same "
                 "name: a != z");
    expect_error(one, true, renamed,
                 "conversion webhook for " GVK " returned invalid converted object at index 0: "
                 "must have the same name: a != z");
    expect_error(one, false, bad_label,
                 "conversion webhook for " GVK " returned invalid metadata: metadata.labels: "
                 "Invalid value: \"not ok!\"");
    expect_error(one, true, num_label,
                 "conversion webhook for " GVK " returned invalid metadata in object at index 0: "
                 "metadata.labels[x] must be a string, but is int64 in converted object");
    expect_error(one, false, none, "conversion webhook for " GVK " returned 0 objects, expected 1");
    expect_error(one, false,
                 "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
                 "\"response\":{\"uid\":\"u1\",\"result\":{\"status\":\"Failure\","
                 "\"message\":\"no way\"}}}",
                 "conversion webhook for " GVK " failed: no way");
    expect_error(one, false,
                 "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
                 "\"response\":{\"uid\":\"u1\",\"result\":{}}}",
                 "conversion webhook for " GVK " failed: response.result.status was '', not "
                 "'Success'");
    expect_error(one, false,
                 "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\"}",
                 "conversion webhook for " GVK " failed: no response provided");
    /* wrong version and kind of the object */
    char *v3 = answer("v1", "u1", one, NULL);
    char *p = strstr(v3, "conv.example.com/v2");
    p[strlen("conv.example.com/v")] = '3';
    expect_error(one, false, v3,
                 "conversion webhook for " GVK " returned invalid object at index 0: invalid "
                 "groupVersion (expected conv.example.com/v2, received conv.example.com/v3)");
    /* a 500 without a Status */
    char *err = NULL;
    assert_null(crd_conv__answer("v1", "u1", one, WANT, GVK, false, 500, "x", 1, &err));
    assert_string_equal(err, "conversion webhook for " GVK " failed: the server responded with "
                             "the status code 500 but did not return more information");
    free(err);
    /* v1beta1 answers are not held to their uid */
    char *beta_other = answer("v1beta1", "other", one, NULL);
    json_t *out = crd_conv__answer("v1beta1", "u1", one, WANT, GVK, false, 200, beta_other,
                                   strlen(beta_other), &err);
    assert_non_null(out);
    json_decref(out);
    char *good = ok;
    out = read_answer(one, false, good, &err);
    assert_non_null(out);
    json_decref(out);
    free(ok);
    free(wrong_uid);
    free(renamed);
    free(bad_label);
    free(num_label);
    free(none);
    free(beta);
    free(beta_other);
    free(v3);
    json_decref(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merged_in_order),
        cmocka_unit_test(test_refused_in_upstream_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
