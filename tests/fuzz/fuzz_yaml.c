/* Fuzz target for ckube/yaml.h.
 *
 * Loads the input as a stream and as a single document; neither may crash,
 * leak, or fail without an error message. Every loaded document must dump
 * to YAML that loads back to an equal value (load -> dump -> load is a
 * fixed point), so the dumper's quoting is fuzzed too. Loading with bounds
 * gives the same document or a bound's own error. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* json_equal that also respects object keys containing NUL bytes. */
static bool same(const json_t *a, const json_t *b)
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
            if (!bv || !same(av, bv))
                return false;
        }
        return true;
    }
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same(json_array_get(a, i), json_array_get(b, i)))
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

static void check_round_trip(const json_t *doc)
{
    char *y = ckube_yaml_dump(doc);
    if (!y) {
        fprintf(stderr, "dump failed on a loaded document\n");
        abort();
    }
    char *err = NULL;
    json_t *back = ckube_yaml_load(y, strlen(y), &err);
    if (!back || !same(back, doc)) {
        char *want = json_dumps(doc, JSON_ENCODE_ANY);
        char *got = back ? json_dumps(back, JSON_ENCODE_ANY) : NULL;
        fprintf(stderr, "round trip mismatch\nyaml:\n%s\nwant %s\ngot  %s\nerr  %s\n", y,
                want ? want : "?", got ? got : "(null)", err ? err : "(none)");
        abort();
    }
    json_decref(back);
    free(y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char *err = NULL;
    json_t *docs = NULL;
    if (ckube_yaml_load_all(buf, size, &docs, &err) == 0) {
        if (err || !json_is_array(docs))
            abort();
        size_t i;
        json_t *doc;
        json_array_foreach(docs, i, doc) check_round_trip(doc);
        json_decref(docs);
    } else {
        if (!err || strncmp(err, "yaml: ", 6) != 0 || docs)
            abort();
        free(err);
    }

    err = NULL;
    json_t *first = ckube_yaml_load(buf, size, &err);

    /* Bounded at a few times the input (as the API server bounds request
     * bodies): the same document, or refused as too large or as excessive
     * aliasing, never anything else. */
    ckube_yaml_limits lim = {.max_memory = 4096 + 16 * size,
                             .max_alias_memory = 4096 + 16 * size,
                             .max_alias_json = 4096 + 4 * size};
    bool too_large;
    char *lerr = NULL;
    json_t *bounded = ckube_yaml_load_limited(buf, size, &lim, &too_large, &lerr);
    if (bounded) {
        if (!first || !same(bounded, first))
            abort();
    } else if (!lerr || (too_large && !strstr(lerr, "document too large")) ||
               (first && !too_large &&
                strcmp(lerr, "yaml: document contains excessive aliasing"))) {
        fprintf(stderr, "bounded load failed oddly: %s\n", lerr ? lerr : "(no error)");
        abort();
    }
    json_decref(bounded);
    free(lerr);

    if (first) {
        check_round_trip(first);
        json_decref(first);
    } else if (!err) {
        abort();
    }
    free(err);
    return 0;
}
