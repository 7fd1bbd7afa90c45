/* Fuzzes continue token decoding (and encoding).
 *
 * Invariants: decoding never crashes or leaks; a token that decodes
 * re-encodes to a token that decodes to the same revision and key; any
 * input used as a key encodes to a token that decodes back to it whenever
 * the key is a clean relative path of ASCII bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/codec/continue_token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(int64_t rv, const char *key, int must_succeed)
{
    char *tok = continue_token_encode(rv, key);
    if (!tok)
        abort();
    int64_t rv2 = 0;
    char *key2 = NULL, *err = NULL;
    int rc = continue_token_decode(tok, &rv2, &key2, &err);
    if (rc == 0 && (rv2 != rv || strcmp(key2, key) != 0)) {
        fprintf(stderr, "round trip changed the token: %s\n", tok);
        abort();
    }
    if (rc != 0 && must_succeed) {
        fprintf(stderr, "re-encoded token rejected: %s: %s\n", tok, err);
        abort();
    }
    free(err);
    free(key2);
    free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size + 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    in[size] = 0;

    int64_t rv = 0;
    char *start = NULL, *err = NULL;
    if (continue_token_decode(in, &rv, &start, &err) == 0) {
        /* accepted keys are relative, non-empty and never climb up; the
         * revision is never 0 (upstream's ErrInvalidStartRV) and may be
         * negative: any negative one means "the latest", as upstream's
         * store reads it (the -1 of an inconsistent continuation). */
        if (err || !start || rv == 0 || !*start || start[0] == '/' ||
            strncmp(start, "../", 3) == 0 || strcmp(start, "..") == 0 || strstr(start, "/../"))
            abort();
        round_trip(rv, start, 1);
    } else if (!err || start) {
        abort();
    }
    free(start);
    free(err);

    /* The input as a key: must round-trip when it is plain ASCII (invalid
     * UTF-8 is replaced by U+FFFD, as Go does, so it cannot). */
    int ascii = 1;
    for (size_t i = 0; in[i]; i++)
        if ((unsigned char)in[i] >= 0x80)
            ascii = 0;
    if (ascii)
        round_trip(1 + (int64_t)(size % 1000), in, 0);
    free(in);
    return 0;
}
