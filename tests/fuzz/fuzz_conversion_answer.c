/* Fuzzes how the API server reads a CRD conversion webhook's answer
 * (apiserver/apiextensions/conversion.c): each input is a
 * ConversionReview body, taken as the answer to a review of two Widgets
 * (one already in the version wanted, so only one was sent), read as v1
 * and as v1beta1 answers, as a list and as one object. Nothing may
 * crash, leak or read past the input; an answer either gives back the
 * two objects in order, both in the version wanted, each with its
 * original's name, namespace and uid (only labels and annotations may
 * have changed in metadata), or an error that is valid UTF-8 and names
 * the objects' kind. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/apiextensions/conversion.h"
#include "ckube/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WANT "conv.example.com/v2"
#define GVK "conv.example.com/v1, Kind=Widget"

static json_t *objects(void)
{
    return json_pack("[{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:{s:s}},s:{s:i}},"
                     "{s:s,s:s,s:{s:s,s:s,s:s},s:{}}]",
                     "apiVersion", "conv.example.com/v1", "kind", "Widget", "metadata", "name", "a",
                     "namespace", "default", "uid", "u-a", "resourceVersion", "7", "labels", "app",
                     "w", "spec", "size", 3, "apiVersion", WANT, "kind", "Widget", "metadata",
                     "name", "b", "namespace", "default", "uid", "u-b", "spec");
}

static const char *meta_str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(json_object_get(o, "metadata"), k));
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check(const char *version, bool list, const uint8_t *data, size_t size)
{
    json_t *objs = objects();
    json_t *before = json_deep_copy(objs);
    char *err = NULL;
    json_t *out = crd_conv__answer(version, "the-uid", objs, WANT, GVK, list, 200,
                                   (const char *)data, size, &err);
    if (!json_equal(objs, before))
        abort(); /* the originals are not touched */
    if (!out) {
        json_t *m = err ? json_string(err) : NULL; /* a Status's message must be UTF-8 */
        if (!m || !strstr(err, "conversion webhook for " GVK))
            abort();
        json_decref(m);
    } else {
        if (err || json_array_size(out) != 2)
            abort();
        for (size_t i = 0; i < 2; i++) {
            const json_t *o = json_array_get(out, i), *in = json_array_get(objs, i);
            if (strcmp(json_string_value(json_object_get(o, "apiVersion")) ?: "", WANT) ||
                !json_equal(json_object_get(o, "kind"), json_object_get(in, "kind")))
                abort();
            static const char *const keep[] = {"name", "namespace", "uid", "resourceVersion"};
            for (size_t k = 0; k < 4; k++)
                if (!same_str(meta_str(o, keep[k]), meta_str(in, keep[k])))
                    abort();
        }
        if (!json_equal(json_array_get(out, 1), json_array_get(objs, 1)))
            abort(); /* not sent, so unchanged */
    }
    free(err);
    json_decref(out);
    json_decref(objs);
    json_decref(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check("v1", true, data, size);
    check("v1", false, data, size);
    check("v1beta1", true, data, size);
    return 0;
}
