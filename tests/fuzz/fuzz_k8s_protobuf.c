/* Fuzzes the Kubernetes protobuf decoder (src/apiserver/k8s_protobuf.c).
 *
 * Input starting with "k8s\0" is decoded as a whole request body. Any other
 * input selects a supported type with its first byte and is wrapped as that
 * type's object (rest of the input), so the fuzzer reaches the message
 * converter without first having to forge an envelope.
 *
 * Invariants: no crash, leak or UB; failure always comes with a message;
 * success yields an object whose first members are apiVersion and kind
 * (matching the envelope) and which serializes to JSON that parses back to
 * an equal value (so every string is valid UTF-8). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/codec/k8s_protobuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const types[][2] = {
    {"v1", "ConfigMap"},
    {"v1", "Secret"},
    {"v1", "Namespace"},
    {"v1", "ServiceAccount"},
    {"v1", "Service"},
    {"v1", "Endpoints"},
    {"v1", "Event"},
    {"v1", "Node"},
    {"v1", "Pod"},
    {"v1", "Binding"},
    {"apps/v1", "Deployment"},
    {"apps/v1", "ReplicaSet"},
    {"coordination.k8s.io/v1", "Lease"},
    {"events.k8s.io/v1", "Event"},
    {"autoscaling/v1", "Scale"},
    {"v1", "DeleteOptions"},
};

/* Appends a length-delimited field (lengths here stay below 2^28). */
static size_t put_field(uint8_t *out, int field, const void *d, size_t n)
{
    size_t o = 0;
    out[o++] = (uint8_t)(field << 3 | 2);
    size_t v = n;
    while (v >= 0x80) {
        out[o++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[o++] = (uint8_t)v;
    memcpy(out + o, d, n);
    return o + n;
}

/* "k8s\0" + Unknown{typeMeta, raw}: a malloc'd body of *len bytes. */
static uint8_t *wrap(const char *api_version, const char *kind, const uint8_t *raw, size_t n,
                     size_t *len)
{
    uint8_t tm[128];
    size_t tl = put_field(tm, 1, api_version, strlen(api_version));
    tl += put_field(tm + tl, 2, kind, strlen(kind));
    uint8_t *out = malloc(4 + 8 + tl + 8 + n);
    if (!out)
        abort();
    memcpy(out, "k8s", 4);
    size_t o = 4;
    o += put_field(out + o, 1, tm, tl);
    o += put_field(out + o, 2, raw, n);
    *len = o;
    return out;
}

static void check(const uint8_t *body, size_t len)
{
    char *err = NULL;
    bool too_large;
    json_t *j = k8s_protobuf_decode(body, len, 0, &too_large, &err);
    /* Bounded at a few times the input: the same result, or refused as too
     * large and nothing else. */
    char *lerr = NULL;
    json_t *lim = k8s_protobuf_decode(body, len, 1024 + 8 * len, &too_large, &lerr);
    if (too_large ? lim || !lerr || !strstr(lerr, "bytes of memory")
                  : !lim != !j || (lim && !json_equal(lim, j)))
        abort();
    json_decref(lim);
    free(lerr);
    if (!j) {
        if (!err)
            abort();
        free(err);
        return;
    }
    if (err || !json_is_object(j))
        abort();
    void *it = json_object_iter(j);
    if (!it || strcmp(json_object_iter_key(it), "apiVersion") != 0)
        abort();
    it = json_object_iter_next(j, it);
    if (!it || strcmp(json_object_iter_key(it), "kind") != 0)
        abort();
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        abort();
    json_t *back = json_loads(s, 0, NULL);
    if (!back || !json_equal(back, j)) {
        fprintf(stderr, "output does not round-trip: %s\n", s);
        abort();
    }
    json_decref(back);
    free(s);
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 4 && memcmp(data, "k8s", 4) == 0) {
        check(data, size);
        return 0;
    }
    if (size == 0)
        return 0;
    size_t ntypes = sizeof types / sizeof types[0];
    const char *const *t = types[data[0] % ntypes];
    if (!k8s_protobuf_supports(t[0], t[1]))
        abort();
    size_t len;
    uint8_t *body = wrap(t[0], t[1], data + 1, size - 1, &len);
    check(body, len);
    free(body);
    return 0;
}
