/* Fuzzes ckube_json_dumps (src/common/json_dump.c) against jansson's
 * json_dumps(JSON_COMPACT | JSON_ENCODE_ANY), its reference:
 *  - any input jansson parses (any top-level value, NUL escapes allowed)
 *    serializes to the same bytes with both;
 *  - the raw input as a string built without UTF-8 checks (the only way
 *    to get invalid UTF-8 into a tree) serializes the same with both, or
 *    fails with both;
 *  - as an object key, the same when ours succeeds; where ours fails the
 *    key is invalid UTF-8 (jansson then ignores its own failure and emits
 *    a string cut short, which is no reference). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const json_t *v, const char *what, int ours_may_fail)
{
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = 0;
    char *got = ckube_json_dumps(v, &n);
    if (!got && ours_may_fail) {
        free(want);
        return;
    }
    if ((want == NULL) != (got == NULL) ||
        (want && (strlen(want) != n || memcmp(want, got, n) != 0))) {
        fprintf(stderr, "fuzz_json_dump: %s differs:\n jansson: %s\n ours:    %s\n", what,
                want ? want : "(fail)", got ? got : "(fail)");
        abort();
    }
    free(want);
    free(got);
}

/* Whether jansson's checked constructor accepts the bytes as UTF-8. */
static int utf8_valid(const uint8_t *data, size_t size)
{
    json_t *s = json_stringn((const char *)data, size);
    json_decref(s);
    return s != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (v) {
        same(v, "parsed value", 0);
        json_decref(v);
    }
    json_t *s = json_stringn_nocheck((const char *)data, size);
    if (s) {
        same(s, "unchecked string", 0);
        json_t *o = json_object();
        /* ...and as an object key (keys are escaped like strings). */
        if (o && json_object_setn_nocheck(o, (const char *)data, size, json_true()) == 0)
            same(o, "unchecked key", !utf8_valid(data, size));
        json_decref(o);
        json_decref(s);
    }
    return 0;
}
