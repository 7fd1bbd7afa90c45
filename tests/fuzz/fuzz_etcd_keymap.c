/* Fuzzes the etcd key mapping (storage/etcd/keymap.h).
 *
 * Invariants, under several --etcd-prefix values: an etcd key that maps
 * back to an internal key maps forward to exactly the same bytes (so no
 * two etcd keys share an internal key, and skipped keys are the only
 * ones lost); an internal key that maps to an etcd key maps back to
 * itself (so no two internal keys share an etcd key); every result lies
 * under its root. The input is tried as an etcd key, as an internal key,
 * and, when it starts with "/registry/", re-rooted under each prefix, so
 * one corpus reaches every prefix. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/etcd/keymap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const PREFIXES[] = {"/registry", "/", "/a/b", "ckube/"};
#define NPREFIXES (sizeof PREFIXES / sizeof *PREFIXES)

/* etcd key -> internal -> etcd is the identity wherever the first step
 * succeeds. */
static void from_then_to(const etcd_keymap *m, const char *key, size_t len)
{
    char *in = etcd_key_from_etcd(m, key, len);
    if (!in)
        return;
    if (strncmp(in, ETCD_KEYMAP_INTERNAL_ROOT, strlen(ETCD_KEYMAP_INTERNAL_ROOT)) != 0) {
        fprintf(stderr, "internal key %s outside the root\n", in);
        abort();
    }
    char *back = etcd_key_to_etcd(m, in);
    if (!back || strlen(back) != len || memcmp(back, key, len) != 0) {
        fprintf(stderr, "etcd key %.*s -> %s -> %s\n", (int)len, key, in, back ? back : "NULL");
        abort();
    }
    free(back);
    free(in);
}

/* internal -> etcd -> internal, likewise; a prefix (ending in '/') never
 * maps back, as only object keys are stored. */
static void to_then_from(const etcd_keymap *m, const char *key)
{
    char *e = etcd_key_to_etcd(m, key);
    if (!e)
        return;
    size_t n = strlen(e);
    if (n < m->prefix_len || memcmp(e, m->prefix, m->prefix_len) != 0) {
        fprintf(stderr, "etcd key %s outside %s\n", e, m->prefix);
        abort();
    }
    char *back = etcd_key_from_etcd(m, e, n);
    bool dir = key[strlen(key) - 1] == '/';
    if (dir ? back != NULL : !back || strcmp(back, key) != 0) {
        fprintf(stderr, "internal key %s -> %s -> %s\n", key, e, back ? back : "NULL");
        abort();
    }
    free(back);
    free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static etcd_keymap *maps[NPREFIXES];
    if (!maps[0])
        for (size_t i = 0; i < NPREFIXES; i++)
            maps[i] = etcd_keymap_new(PREFIXES[i]);

    const char *key = (const char *)data;
    const char *root = ETCD_KEYMAP_INTERNAL_ROOT;
    size_t rlen = strlen(root);
    bool rooted = size >= rlen && memcmp(data, root, rlen) == 0;
    char *str = NULL; /* the input as a C string, when it holds no NUL */
    if (!memchr(data, 0, size)) {
        str = malloc(size + 1);
        if (!str)
            return 0;
        memcpy(str, data, size);
        str[size] = 0;
    }
    for (size_t i = 0; i < NPREFIXES; i++) {
        const etcd_keymap *m = maps[i];
        from_then_to(m, key, size);
        if (str)
            to_then_from(m, str);
        if (rooted) { /* the same relative key under this prefix */
            size_t n = m->prefix_len + size - rlen;
            char *k = malloc(n + 1);
            if (!k)
                break;
            memcpy(k, m->prefix, m->prefix_len);
            memcpy(k + m->prefix_len, data + rlen, size - rlen);
            k[n] = 0;
            from_then_to(m, k, n);
            free(k);
        }
    }
    free(str);
    return 0;
}
