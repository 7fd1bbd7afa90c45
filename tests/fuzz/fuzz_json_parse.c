/* Fuzzes the fast JSON reader (src/common/json_parse.c) against jansson's
 * json_loadb, which defines what it must do.
 *
 * The first byte picks the flags (bit 0: CKUBE_JP_DECODE_ANY, bit 1:
 * CKUBE_JP_REJECT_DUPLICATES); the rest is the JSON text, passed in a buffer
 * of exactly its length so ASan catches any read past the end.
 *
 * Invariants checked (abort on violation):
 *  - ckube__json_parse accepts exactly when json_loadb does;
 *  - when both accept, the trees are json_equal and json_dumps(JSON_COMPACT |
 *    JSON_ENCODE_ANY) of both is byte-identical (key order, integer vs real).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what, const char *text, size_t len, int flags)
{
    if (cond)
        return;
    fprintf(stderr, "fuzz_json_parse: %s (flags %d, %zu bytes)\n", what, flags, len);
    fwrite(text, 1, len < 400 ? len : 400, stderr);
    fputc('\n', stderr);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int flags = 0;
    if (data[0] & 1)
        flags |= CKUBE_JP_DECODE_ANY;
    if (data[0] & 2)
        flags |= CKUBE_JP_REJECT_DUPLICATES;
    size_t len = size - 1;
    char *text = malloc(len ? len : 1);
    if (!text)
        return 0;
    memcpy(text, data + 1, len);

    json_error_t err;
    json_t *ours = ckube__json_parse(text, len, flags);
    json_t *ref = json_loadb(text, len, (size_t)flags, &err);
    check(!ours == !ref, ours ? "accepted what jansson rejects" : "rejected what jansson accepts",
          text, len, flags);
    if (ours) {
        char *a = json_dumps(ours, JSON_COMPACT | JSON_ENCODE_ANY);
        char *b = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
        check(json_equal(ours, ref), "trees differ (json_equal)", text, len, flags);
        check(a && b && strcmp(a, b) == 0, "trees dump differently", text, len, flags);
        free(a);
        free(b);
    }
    /* With a memory bound (a few hundred bytes up to a few times the
     * input, from the second byte): the same outcome, or "too large" (the
     * input may still turn out invalid further on). */
    size_t bound = 200 + (size > 1 ? data[1] : 0) * (len + 1);
    bool too_large;
    size_t used = 0;
    json_error_t lerr;
    json_t *lim = ckube__json_loadb_limited(text, len, flags, bound, &used, &too_large, &lerr);
    if (too_large)
        check(!lim && strstr(lerr.text, "bytes of memory"), "too large, yet a tree", text, len,
              flags);
    else
        check(!lim == !ref && (!lim || (json_equal(lim, ref) && used <= bound)),
              "bounded reader differs within its bound", text, len, flags);
    json_decref(lim);
    json_decref(ours);
    json_decref(ref);
    free(text);
    return 0;
}
