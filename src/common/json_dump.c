/* Compact JSON serialization of jansson trees, byte-identical to
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) and several times faster.
 *
 * Why not json_dumps: it emits through a callback per token, decodes
 * every character of every string as UTF-8 to find the ones to escape,
 * and records every object and array in a hashtable (keyed by the
 * printed pointer) to detect cycles. Objects are serialized on every
 * write the server stores and every reply it builds from a tree, so that
 * cost is on the hot path. Here: one growing buffer, ASCII runs copied
 * whole, UTF-8 checked only where a byte is >= 0x80, and a depth limit
 * instead of the cycle set (a cyclic tree is a programming error; it
 * fails here as in jansson, by the depth limit rather than the set).
 *
 * The contract is json_dumps's: same bytes (keys in insertion order,
 * integers as %lld, reals through jansson's own formatter, \uXXXX escapes
 * in uppercase hex for control characters), and failure (NULL) where it
 * fails: invalid UTF-8 in a string (possible only with *_nocheck
 * constructors) or a cycle. tests/unit/test_json_dump.c and
 * tests/fuzz/fuzz_json_dump.c hold it to that against the library. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"
#include "common/json_dump.h"
#include "common/json_plain.h"
#include "common/text.h"
#include "common/utf8.h"

/* Deeper trees than any parser builds (jansson stops at 2048), so only a
 * cycle reaches it. */
#define DUMP_MAX_DEPTH 4096

typedef struct dbuf {
    char *p;
    size_t len, cap;
    bool bad;            /* OOM, invalid UTF-8 or too deep: the result is NULL */
    ckube__dump_opts *o; /* NULL: a plain dump */
} dbuf;

static bool grow(dbuf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < need) {
        if (cap > SIZE_MAX / 2) {
            b->bad = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->bad = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

/* Room for `need` more bytes (the terminating NUL is reserved apart). */
static inline bool room(dbuf *b, size_t need)
{
    return b->cap - b->len > need || grow(b, need + 1);
}

static inline void put(dbuf *b, const char *s, size_t n)
{
    if (room(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

static inline void putc1(dbuf *b, char c)
{
    if (room(b, 1))
        b->p[b->len++] = c;
}

static void dump_string(dbuf *b, const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str, *end = s + len;
    /* Usually nothing needs escaping: reserve for the plain case once. */
    if (!room(b, len + 2))
        return;
    b->p[b->len++] = '"';
    while (s < end) {
        const unsigned char *run = s;
        s = ckube__json_plain_end(s, end);
        put(b, (const char *)run, (size_t)(s - run));
        if (s == end)
            break;
        unsigned char c = *s;
        if (c >= 0x80) {
            size_t n = ckube__utf8_decode(s, (size_t)(end - s), NULL);
            if (!n) {
                b->bad = true;
                return;
            }
            put(b, (const char *)s, n);
            s += n;
            continue;
        }
        if (!c && b->o)
            b->o->nul = true;
        char esc[6];
        put(b, esc, ckube__json_escape_ascii(c, "0123456789ABCDEF", esc));
        s++;
    }
    putc1(b, '"');
}

static void dump_integer(dbuf *b, json_int_t v)
{
    char tmp[24];
    char *e = tmp + sizeof tmp, *p = e;
    /* Negate in unsigned arithmetic: INT64_MIN has no positive twin. */
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    put(b, p, (size_t)(e - p));
}

static void dump_real(dbuf *b, const json_t *v)
{
    /* Rare in API objects: jansson's own formatter keeps the bytes its
     * (precision, "1.0" for integral values) rules give. */
    if (b->o)
        b->o->real = true;
    char tmp[128];
    size_t n = json_dumpb(v, tmp, sizeof tmp, JSON_ENCODE_ANY | JSON_COMPACT);
    if (n == 0 || n > sizeof tmp) {
        b->bad = true;
        return;
    }
    put(b, tmp, n);
}

static void dump_value(dbuf *b, const json_t *v, int depth)
{
    if (b->bad)
        return;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (depth >= DUMP_MAX_DEPTH) {
            b->bad = true;
            return;
        }
        if (b->o && depth + 1 > b->o->containers)
            b->o->containers = depth + 1;
        putc1(b, '{');
        bool first = true, report = b->o && b->o->member && depth <= b->o->max_member_depth;
        for (void *it = json_object_iter((json_t *)v); it && !b->bad;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                putc1(b, ',');
            first = false;
            const char *key = json_object_iter_key(it);
            size_t key_len = json_object_iter_key_len(it);
            dump_string(b, key, key_len);
            putc1(b, ':');
            const json_t *val = json_object_iter_value(it);
            size_t off = b->len;
            dump_value(b, val, depth + 1);
            if (report && !b->bad)
                b->o->member(b->o->ctx, &(ckube__dump_member){depth, key, key_len, off, b->len,
                                                              json_typeof(val)});
        }
        putc1(b, '}');
        return;
    }
    case JSON_ARRAY: {
        if (depth >= DUMP_MAX_DEPTH) {
            b->bad = true;
            return;
        }
        if (b->o && depth + 1 > b->o->containers)
            b->o->containers = depth + 1;
        putc1(b, '[');
        size_t n = json_array_size(v);
        for (size_t i = 0; i < n && !b->bad; i++) {
            if (i)
                putc1(b, ',');
            dump_value(b, json_array_get(v, i), depth + 1);
        }
        putc1(b, ']');
        return;
    }
    case JSON_STRING:
        dump_string(b, json_string_value(v), json_string_length(v));
        return;
    case JSON_INTEGER:
        dump_integer(b, json_integer_value(v));
        return;
    case JSON_REAL:
        dump_real(b, v);
        return;
    case JSON_TRUE:
        put(b, "true", 4);
        return;
    case JSON_FALSE:
        put(b, "false", 5);
        return;
    case JSON_NULL:
        put(b, "null", 4);
        return;
    }
    b->bad = true;
}

char *ckube_json_dumps(const json_t *v, size_t *len)
{
    return ckube__json_dumps_opts(v, len, NULL);
}

char *ckube__json_dumps_opts(const json_t *v, size_t *len, ckube__dump_opts *o)
{
    if (o) {
        o->real = o->nul = false;
        o->containers = 0;
    }
    if (!v)
        return NULL;
    dbuf b = {.o = o};
    dump_value(&b, v, 0);
    if (!b.bad && !room(&b, 0))
        b.bad = true;
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    b.p[b.len] = 0;
    /* Callers may keep the text (stored objects): give back the slack
     * doubling left, which glibc does in place. */
    if (b.cap - b.len > 64) {
        char *p = realloc(b.p, b.len + 1);
        if (p)
            b.p = p;
    }
    if (len)
        *len = b.len;
    return b.p;
}
