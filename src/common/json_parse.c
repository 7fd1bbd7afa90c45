/* json_parse.c - a fast JSON reader that builds jansson trees.
 *
 * jansson's json_loadb reads its input one byte at a time through a stream
 * callback and appends every byte of every token to a growing buffer. This
 * reader works on the whole buffer instead: string runs are scanned eight
 * bytes at a time, strings and keys without escapes are handed to jansson
 * straight from the input (jansson copies them once, as it must), and
 * containers are tracked on an explicit stack rather than by recursion.
 *
 * The accepted language is jansson 2.14's, not RFC 8259's, wherever the two
 * differ (see tests/unit/test_json_parse.c, which checks each point against
 * the installed library):
 *  - strings must be well-formed UTF-8 (no overlong forms, no UTF-8-encoded
 *    surrogates, nothing above U+10FFFF), hold no raw byte below 0x20, and
 *    hold no \u0000; a \u escaped surrogate must be half of a pair;
 *  - an integer outside long long, or a real that overflows to infinity, is
 *    an error; a real that underflows is 0 or subnormal, as strtod gives;
 *  - every value, scalars included, counts one level of nesting, and a value
 *    deeper than JSON_PARSER_MAX_DEPTH (2048) is an error;
 *  - one NUL byte directly after a number or a literal is skipped. jansson
 *    reads one byte past such a token and pushes it back; its stream marks
 *    "no byte pushed back" with a NUL, so a pushed-back NUL is lost and
 *    "[1\0]" loads as [1]. We accept the same inputs on purpose.
 */
#include "common/json_parse.h"
#include "common/json_cost.h"
#include "common/json_plain.h"
#include "common/utf8.h"

#include <limits.h>
#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JP_FLAGS (CKUBE_JP_DECODE_ANY | CKUBE_JP_REJECT_DUPLICATES)
#define JP_STACK_INLINE 32
#define JP_BUF_INLINE 256
#if JSON_INTEGER_IS_LONG_LONG
#define JP_INT_MAX LLONG_MAX
#else
#define JP_INT_MAX LONG_MAX
#endif

/* A scratch buffer for strings that hold escapes; starts inline. */
struct jp_buf {
    char *data;
    size_t cap;
    char inline_data[JP_BUF_INLINE];
};

struct jp {
    const unsigned char *p, *end;
    int flags;
    json_t *root; /* owns every value built so far */
    /* Open containers, innermost last: borrowed from root's tree. */
    json_t **stack;
    size_t depth, stack_cap;
    /* The key of the value being parsed in the innermost object: borrowed
     * from the input or from keybuf, valid until the value is attached. */
    const char *key;
    size_t key_len;
    struct jp_buf keybuf, valbuf;
    /* Estimated memory of the tree (json_cost.h) and its bound (0: none). */
    size_t mem, max_mem;
    bool too_large; /* stopped at max_mem */
    json_t *stack_inline[JP_STACK_INLINE];
};

/* Accounts `bytes` about to be allocated; false once past the bound. */
static inline bool jp_charge(struct jp *jp, size_t bytes)
{
    if (jp->max_mem && (bytes > jp->max_mem || jp->mem > jp->max_mem - bytes)) {
        jp->too_large = true;
        return false;
    }
    jp->mem += bytes;
    return true;
}

/* The slot that will hold the next value, in the innermost container. */
static inline bool jp_charge_slot(struct jp *jp)
{
    if (!jp->depth)
        return true;
    json_t *top = jp->stack[jp->depth - 1];
    return jp_charge(jp, json_is_array(top) ? JCOST_ELEMENT : JCOST_MEMBER(jp->key_len));
}

static inline int jp_isdigit(unsigned c)
{
    return c - '0' < 10u;
}

static inline void jp_skip_ws(struct jp *jp)
{
    const unsigned char *p = jp->p, *end = jp->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    jp->p = p;
}

/* jansson loses a NUL byte pushed back after a number or literal (see the
 * top of the file): skip one, as it does. */
static inline void jp_skip_lost_nul(struct jp *jp)
{
    if (jp->p < jp->end && *jp->p == '\0')
        jp->p++;
}

/* Makes room for `need` bytes in b, keeping its contents. */
static int jp_buf_reserve(struct jp_buf *b, size_t need)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap * 2;
    if (cap < need)
        cap = need;
    char *d;
    if (b->data == b->inline_data) {
        d = malloc(cap);
        if (d)
            memcpy(d, b->data, b->cap);
    } else {
        d = realloc(b->data, cap);
    }
    if (!d)
        return -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* The value of the four hex digits at q (q + 4 <= end checked by caller),
 * or -1. */
static long jp_hex4(const unsigned char *q)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = q[i], d;
        if (jp_isdigit(c))
            d = c - '0';
        else if ((c | 0x20) - 'a' < 6u)
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        v = v * 16 + (long)d;
    }
    return v;
}

/* Decodes the \u escape at q ("\uXXXX", plus a second one for a surrogate
 * pair) into out (room for 4 bytes). Returns the input bytes consumed and
 * sets *out_len, or returns 0 for an escape jansson rejects: bad hex, an
 * unpaired surrogate, or U+0000 (jansson refuses NUL in strings and keys
 * without JSON_ALLOW_NUL, which we do not support). */
static size_t jp_unicode_escape(const unsigned char *q, const unsigned char *end, char *out,
                                size_t *out_len)
{
    size_t used = 6;
    if (end - q < 6)
        return 0;
    long cp = jp_hex4(q + 2);
    if (cp <= 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
        return 0;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (end - q < 12 || q[6] != '\\' || q[7] != 'u')
            return 0;
        long lo = jp_hex4(q + 8);
        if (lo < 0xDC00 || lo > 0xDFFF)
            return 0;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        used = 12;
    }
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        *out_len = 1;
    } else if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        *out_len = 2;
    } else if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        *out_len = 3;
    } else {
        o[0] = (unsigned char)(0xF0 | (cp >> 18));
        o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (unsigned char)(0x80 | (cp & 0x3F));
        *out_len = 4;
    }
    return used;
}

/* The one-character escape after a backslash, or -1. */
static int jp_simple_escape(unsigned c)
{
    switch (c) {
    case '"':
    case '\\':
    case '/':
        return (int)c;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return -1;
    }
}

/* The slow half of jp_string: the string that began at start holds an
 * escape at q. Decodes the whole string into b. */
static int jp_string_escaped(struct jp *jp, struct jp_buf *b, const unsigned char *start,
                             const unsigned char *q, const char **out, size_t *out_len)
{
    const unsigned char *end = jp->end;
    size_t n = (size_t)(q - start);
    if (jp_buf_reserve(b, n + 16))
        return -1;
    memcpy(b->data, start, n);
    for (;;) {
        if (q == end)
            return -1;
        unsigned c = *q;
        const unsigned char *run = q;
        if (c == '"')
            break;
        if (c == '\\') {
            if (jp_buf_reserve(b, n + 4) || end - q < 2)
                return -1;
            int e = jp_simple_escape(q[1]);
            if (e >= 0) {
                b->data[n++] = (char)e;
                q += 2;
            } else if (q[1] == 'u') {
                size_t w, used = jp_unicode_escape(q, end, b->data + n, &w);
                if (!used)
                    return -1;
                n += w;
                q += used;
            } else {
                return -1;
            }
            continue;
        }
        if (c < 0x20)
            return -1;
        if (c >= 0x80) {
            size_t k = ckube__utf8_decode(q, (size_t)(end - q), NULL);
            if (!k)
                return -1;
            q += k;
        } else {
            q = ckube__json_plain_end(q, end);
        }
        size_t k = (size_t)(q - run);
        if (jp_buf_reserve(b, n + k))
            return -1;
        memcpy(b->data + n, run, k);
        n += k;
    }
    jp->p = q + 1;
    *out = b->data;
    *out_len = n;
    return 0;
}

/* Parses the string whose opening quote is at jp->p and moves past it. On
 * success *out and *out_len give its decoded bytes, borrowed from the input
 * when it holds no escape, else from b (valid until b's next use). */
static int jp_string(struct jp *jp, struct jp_buf *b, const char **out, size_t *out_len)
{
    const unsigned char *start = jp->p + 1, *q = start, *end = jp->end;
    for (;;) {
        q = ckube__json_plain_end(q, end);
        if (q == end)
            return -1;
        unsigned c = *q;
        if (c == '"') {
            *out = (const char *)start;
            *out_len = (size_t)(q - start);
            jp->p = q + 1;
            return 0;
        }
        if (c == '\\')
            return jp_string_escaped(jp, b, start, q, out, out_len);
        if (c < 0x20)
            return -1;
        size_t k = ckube__utf8_decode(q, (size_t)(end - q), NULL);
        if (!k)
            return -1;
        q += k;
    }
}

/* The integer whose ndig decimal digits (no leading zero unless alone) are at
 * d, as strtoll would read it; NULL when it overflows long long (jansson's
 * "too big integer"). */
static json_t *jp_integer(const unsigned char *d, size_t ndig, int neg)
{
    uint64_t v = 0, limit = neg ? (uint64_t)JP_INT_MAX + 1 : (uint64_t)JP_INT_MAX;
    if (ndig <= 18) {
        for (size_t i = 0; i < ndig; i++)
            v = v * 10 + (d[i] - '0');
    } else {
        for (size_t i = 0; i < ndig; i++) {
            unsigned dig = d[i] - '0';
            if (v > (limit - dig) / 10)
                return NULL;
            v = v * 10 + dig;
        }
    }
    if (!neg)
        return json_integer((json_int_t)v);
    if (v == (uint64_t)JP_INT_MAX + 1)
        return json_integer(-JP_INT_MAX - 1);
    return json_integer(-(json_int_t)v);
}

static locale_t jp_c_locale;
static pthread_once_t jp_c_locale_once = PTHREAD_ONCE_INIT;

static void jp_c_locale_init(void)
{
    jp_c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* The real spelled by the n bytes at s (already checked against the JSON
 * grammar), read by strtod in the C locale: jansson swaps '.' for the
 * current locale's decimal point and calls strtod, which comes to the same.
 * NULL on overflow to infinity (jansson's "real number overflow"). */
static json_t *jp_real(const unsigned char *s, size_t n)
{
    char small[64], *text = small;
    pthread_once(&jp_c_locale_once, jp_c_locale_init);
    if (!jp_c_locale)
        return NULL;
    if (n >= sizeof small && !(text = malloc(n + 1)))
        return NULL;
    memcpy(text, s, n);
    text[n] = '\0';
    double v = strtod_l(text, NULL, jp_c_locale);
    if (text != small)
        free(text);
    return isinf(v) ? NULL : json_real(v);
}

/* Parses the number at jp->p (which is '-' or a digit) by JSON's grammar. */
static json_t *jp_number(struct jp *jp)
{
    const unsigned char *s = jp->p, *q = s, *end = jp->end, *digits;
    int neg = 0, real = 0;

    if (*q == '-') {
        neg = 1;
        q++;
    }
    digits = q;
    if (q == end || !jp_isdigit(*q))
        return NULL;
    if (*q == '0') {
        q++;
        if (q < end && jp_isdigit(*q))
            return NULL; /* leading zero */
    } else {
        while (q < end && jp_isdigit(*q))
            q++;
    }
    size_t ndig = (size_t)(q - digits);
    if (q < end && *q == '.') {
        real = 1;
        q++;
        if (q == end || !jp_isdigit(*q))
            return NULL;
        while (q < end && jp_isdigit(*q))
            q++;
    }
    if (q < end && (*q | 0x20) == 'e') {
        real = 1;
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q == end || !jp_isdigit(*q))
            return NULL;
        while (q < end && jp_isdigit(*q))
            q++;
    }
    jp->p = q;
    jp_skip_lost_nul(jp);
    return real ? jp_real(s, (size_t)(q - s)) : jp_integer(digits, ndig, neg);
}

/* true, false or null at jp->p; NULL for anything else. */
static json_t *jp_literal(struct jp *jp)
{
    size_t avail = (size_t)(jp->end - jp->p);
    json_t *v = NULL;
    size_t n = 0;
    if (avail >= 4 && !memcmp(jp->p, "true", 4)) {
        v = json_true();
        n = 4;
    } else if (avail >= 4 && !memcmp(jp->p, "null", 4)) {
        v = json_null();
        n = 4;
    } else if (avail >= 5 && !memcmp(jp->p, "false", 5)) {
        v = json_false();
        n = 5;
    }
    jp->p += n;
    if (v)
        jp_skip_lost_nul(jp);
    return v;
}

/* Puts v (a new reference, consumed even on failure) in its place: the root,
 * the end of the innermost array, or the innermost object under jp->key.
 * jansson sets keys with json_object_setn_new_nocheck too, so a repeated key
 * keeps its first position and takes the last value, as in json_loadb. */
static int jp_attach(struct jp *jp, json_t *v)
{
    if (!v)
        return -1;
    if (!jp->depth) {
        jp->root = v;
        return 0;
    }
    json_t *top = jp->stack[jp->depth - 1];
    if (json_is_array(top))
        return json_array_append_new(top, v);
    if (!(jp->flags & CKUBE_JP_REJECT_DUPLICATES))
        return json_object_setn_new_nocheck(top, jp->key, jp->key_len, v);
    size_t before = json_object_size(top);
    if (json_object_setn_new_nocheck(top, jp->key, jp->key_len, v))
        return -1;
    return json_object_size(top) == before ? -1 : 0; /* replaced: a duplicate */
}

static int jp_push(struct jp *jp, json_t *container)
{
    if (jp->depth == jp->stack_cap) {
        size_t cap = jp->stack_cap * 2;
        json_t **s;
        if (jp->stack == jp->stack_inline) {
            s = malloc(cap * sizeof *s);
            if (s)
                memcpy(s, jp->stack, jp->depth * sizeof *s);
        } else {
            s = realloc(jp->stack, cap * sizeof *s);
        }
        if (!s)
            return -1;
        jp->stack = s;
        jp->stack_cap = cap;
    }
    jp->stack[jp->depth++] = container;
    return 0;
}

/* Parses `"key" :` at jp->p and the whitespace after it. (jansson refuses a
 * key holding NUL; jp_string already refuses \u0000 and raw NULs.) */
static int jp_key(struct jp *jp)
{
    if (jp->p == jp->end || *jp->p != '"')
        return -1;
    if (jp_string(jp, &jp->keybuf, &jp->key, &jp->key_len))
        return -1;
    jp_skip_ws(jp);
    if (jp->p == jp->end || *jp->p != ':')
        return -1;
    jp->p++;
    jp_skip_ws(jp);
    return 0;
}

/* Parses the scalar at jp->p and attaches it. */
static int jp_scalar(struct jp *jp)
{
    unsigned c = *jp->p;
    if (!jp_charge_slot(jp))
        return -1;
    if (c == '"') {
        const char *s;
        size_t n;
        if (jp_string(jp, &jp->valbuf, &s, &n) || !jp_charge(jp, JCOST_STRING(n)))
            return -1;
        return jp_attach(jp, json_stringn_nocheck(s, n));
    }
    if (c == '-' || jp_isdigit(c))
        return jp_charge(jp, JCOST_NUMBER) ? jp_attach(jp, jp_number(jp)) : -1;
    return jp_attach(jp, jp_literal(jp));
}

/* After a value: consumes the ',' or closing brackets that follow it. Returns
 * 1 when another value follows (at jp->p, its key already read), 0 at the end
 * of the top-level value, -1 on error. */
static int jp_after_value(struct jp *jp)
{
    while (jp->depth) {
        jp_skip_ws(jp);
        if (jp->p == jp->end)
            return -1;
        json_t *top = jp->stack[jp->depth - 1];
        int is_obj = json_is_object(top);
        unsigned c = *jp->p++;
        if (c == ',') {
            jp_skip_ws(jp);
            if (is_obj && jp_key(jp))
                return -1;
            return 1;
        }
        if (c != (is_obj ? '}' : ']'))
            return -1;
        jp->depth--;
    }
    return 0;
}

/* Parses the value at jp->p (whitespace skipped) and everything nested in
 * it. */
static int jp_run(struct jp *jp)
{
    for (;;) {
        /* jansson counts every value, scalars too, one level deep. */
        if (jp->p == jp->end || jp->depth >= JSON_PARSER_MAX_DEPTH)
            return -1;
        unsigned c = *jp->p;
        if (c == '{' || c == '[') {
            if (!jp_charge_slot(jp) || !jp_charge(jp, c == '{' ? JCOST_OBJECT : JCOST_ARRAY))
                return -1;
            json_t *v = c == '{' ? json_object() : json_array();
            if (jp_attach(jp, v))
                return -1;
            jp->p++;
            jp_skip_ws(jp);
            if (jp->p < jp->end && *jp->p == (c == '{' ? '}' : ']')) {
                jp->p++; /* empty: done with it */
            } else {
                if (jp_push(jp, v) || (c == '{' && jp_key(jp)))
                    return -1;
                continue;
            }
        } else if (jp_scalar(jp)) {
            return -1;
        }
        int more = jp_after_value(jp);
        if (more <= 0)
            return more;
    }
}

/* The reader, with a bound on the tree's estimated memory (0: none). */
static json_t *jp_parse(const char *buf, size_t len, int flags, size_t max_mem, bool *too_large,
                        size_t *used)
{
    *too_large = false;
    if (!buf || (flags & ~JP_FLAGS))
        return NULL;
    struct jp jp = {
        .p = (const unsigned char *)buf,
        .end = (const unsigned char *)buf + len,
        .flags = flags,
        .stack_cap = JP_STACK_INLINE,
        .max_mem = max_mem,
    };
    jp.stack = jp.stack_inline;
    jp.keybuf.data = jp.keybuf.inline_data;
    jp.keybuf.cap = JP_BUF_INLINE;
    jp.valbuf.data = jp.valbuf.inline_data;
    jp.valbuf.cap = JP_BUF_INLINE;

    jp_skip_ws(&jp);
    int ok = jp.p < jp.end && ((flags & CKUBE_JP_DECODE_ANY) || *jp.p == '{' || *jp.p == '[') &&
             !jp_run(&jp);
    if (ok) {
        jp_skip_ws(&jp);
        ok = jp.p == jp.end;
    }
    if (jp.stack != jp.stack_inline)
        free(jp.stack);
    if (jp.keybuf.data != jp.keybuf.inline_data)
        free(jp.keybuf.data);
    if (jp.valbuf.data != jp.valbuf.inline_data)
        free(jp.valbuf.data);
    *used = jp.mem;
    if (!ok) {
        *too_large = jp.too_large;
        json_decref(jp.root);
        return NULL;
    }
    return jp.root;
}

json_t *ckube__json_parse(const char *buf, size_t len, int flags)
{
    bool too_large;
    size_t used;
    return jp_parse(buf, len, flags, 0, &too_large, &used);
}

json_t *ckube__json_loadb(const char *buf, size_t len, int flags, json_error_t *error)
{
    json_t *v = ckube__json_parse(buf, len, flags);
    return v ? v : json_loadb(buf, len, (size_t)flags, error);
}

json_t *ckube__json_loadb_limited(const char *buf, size_t len, int flags, size_t max_memory,
                                  size_t *used, bool *too_large, json_error_t *error)
{
    bool over;
    size_t mem = 0;
    json_t *v = jp_parse(buf, len, flags, max_memory, &over, &mem);
    if (too_large)
        *too_large = over;
    if (used)
        *used = mem;
    if (v)
        return v;
    if (over) {
        if (error) {
            memset(error, 0, sizeof *error);
            snprintf(error->text, sizeof error->text,
                     "decoding it needs more than %zu bytes of memory", max_memory);
        }
        return NULL;
    }
    /* jansson builds what it reads before it finds the error: no more
     * than the bound allowed us, as we read as far as it does. (When we
     * declined for want of memory and it succeeds, its tree's cost is not
     * known: the whole bound is reported used.) */
    v = json_loadb(buf, len, (size_t)flags, error);
    if (v && used)
        *used = max_memory;
    return v;
}
