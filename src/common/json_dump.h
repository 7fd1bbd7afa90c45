/* json_dump.h - ckube_json_dumps with a view of what it wrote (internal,
 * not public API): for callers that index the output as they make it
 * (codec/jscan.c's jscan_dump) instead of scanning it again. */
#ifndef CKUBE_COMMON_JSON_DUMP_H
#define CKUBE_COMMON_JSON_DUMP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A member of an object, reported once its value is written. */
typedef struct ckube__dump_member {
    int depth;                   /* containers around its object: 0 = the top level */
    const char *key;             /* borrowed for the call */
    size_t key_len;              /* bytes, unescaped */
    size_t value_off, value_end; /* the value's bytes in the output: [off, end) */
    json_type type;              /* the value's */
} ckube__dump_member;

typedef struct ckube__dump_opts {
    /* Set by the caller: member() sees the members of objects at depth
     * <= max_member_depth (NULL: none). */
    int max_member_depth;
    void (*member)(void *ctx, const ckube__dump_member *m);
    void *ctx;
    /* Set by the dump. */
    bool real;      /* a real number was written */
    bool nul;       /* a string held U+0000 (written as \u0000) */
    int containers; /* the most containers open at once (0: a scalar) */
} ckube__dump_opts;

/* ckube_json_dumps (same bytes, same failures), reporting into *o. */
char *ckube__json_dumps_opts(const json_t *v, size_t *len, ckube__dump_opts *o);

#endif
