/* cobj.c - compact cached objects (see informer_internal.h).
 *
 * Three parts:
 *  - a validating JSON scanner that copies a Kubernetes object's text
 *    into one block, compacted (no whitespace) and without what the
 *    reflector drops (metadata.managedFields; everything but apiVersion,
 *    kind and metadata for metadata-only informers), picking up the
 *    name, namespace and resourceVersion on the way. It runs over a whole
 *    List response in one pass, so a list never becomes a jansson tree,
 *    and can do so while the response arrives (ckube__clist_stream: each
 *    chunk is scanned as it comes; only an object cut by the chunk's end
 *    is kept, and scanned again once more bytes are there);
 *  - a builder of jansson trees from that (valid, compact) text, much
 *    cheaper than json_loadb's general lexer;
 *  - a serializer of jansson trees into the same compact text, for
 *    objects that arrive as trees (other list-watch implementations).
 *
 * The scanner accepts exactly what ckube_json_loads accepts (RFC 8259
 * JSON, valid UTF-8, no \u0000, integers that fit in 64 bits, finite
 * reals, nesting up to 2048 levels), except duplicate object keys, which
 * it lets through (the last one wins when a tree is built, as in Go's
 * decoder; jansson with JSON_REJECT_DUPLICATES refuses them). */
#include "informer/informer_internal.h"

#include "ckube/json.h"
#include "common/text.h"
#include "common/utf8.h"

#include <locale.h>
#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jansson's JSON_PARSER_MAX_DEPTH. */
#define MAX_DEPTH 2048
/* glibc malloc: 8 bytes of header, 16-byte granularity, 32 at least. */
#define CHUNK(n) ((n) + 8 < 32 ? (size_t)32 : (((n) + 8 + 15) & ~(size_t)15))

/* ------------------------------------------------------------------------ */
/* The C locale for numbers (strtod and printf follow the process locale,  */
/* which may use a decimal comma).                                          */

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void c_locale_init(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static locale_t numeric_locale(void)
{
    pthread_once(&c_locale_once, c_locale_init);
    return c_locale;
}

/* strtod of exactly [p, p+n) in the C locale; *ok false on overflow. */
static double parse_real(const char *p, size_t n, bool *ok)
{
    char small[64];
    char *tmp = n < sizeof small ? small : malloc(n + 1);
    *ok = false;
    if (!tmp)
        return 0;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    locale_t loc = numeric_locale();
    double d = loc ? strtod_l(tmp, NULL, loc) : strtod(tmp, NULL);
    if (tmp != small)
        free(tmp);
    *ok = isfinite(d);
    return d;
}

/* ------------------------------------------------------------------------ */
/* Reference counting and construction.                                     */

ckube__cobj *ckube__cobj_ref(ckube__cobj *c)
{
    if (c)
        __atomic_add_fetch(&c->refcount, 1, __ATOMIC_RELAXED);
    return c;
}

void ckube__cobj_unref(ckube__cobj *c)
{
    /* acq_rel: whoever frees sees every other holder's reads. */
    if (c && __atomic_sub_fetch(&c->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
        ckube_typed_free(c->typed);
        free(c);
    }
}

static size_t cobj_alloc_size(size_t json_len, size_t key_len, size_t ns_len, size_t rv_len)
{
    return sizeof(ckube__cobj) + json_len + key_len + ns_len + rv_len + 4;
}

size_t ckube__cobj_bytes(const ckube__cobj *c)
{
    return CHUNK(cobj_alloc_size(c->json_len, c->key_len, c->ns_len, c->rv_len));
}

/* A string field picked up for the block: bytes (decoded already). */
typedef struct field {
    const char *p;
    size_t n;
} field;

/* Builds the block. The key is "ns/name" (or "name"), none without a
 * name. NULL when out of memory or a part does not fit 32 bits. */
static ckube__cobj *cobj_build(const char *json, size_t json_len, field ns, field name, field rv,
                               int64_t generation)
{
    size_t key_len = name.n ? (ns.n ? ns.n + 1 + name.n : name.n) : 0;
    if (json_len > UINT32_MAX / 2 || key_len > UINT32_MAX / 4 || rv.n > UINT32_MAX / 8)
        return NULL;
    ckube__cobj *c = malloc(cobj_alloc_size(json_len, key_len, ns.n, rv.n));
    if (!c)
        return NULL;
    c->refcount = 1;
    c->typed = NULL;
    c->generation = generation;
    c->json_len = (uint32_t)json_len;
    c->key_len = (uint32_t)key_len;
    c->ns_len = (uint32_t)ns.n;
    c->rv_len = (uint32_t)rv.n;
    char *p = c->data;
    memcpy(p, json, json_len);
    p[json_len] = '\0';
    p += json_len + 1;
    if (name.n) {
        if (ns.n) {
            memcpy(p, ns.p, ns.n);
            p[ns.n] = '/';
            memcpy(p + ns.n + 1, name.p, name.n);
        } else {
            memcpy(p, name.p, name.n);
        }
    }
    p[key_len] = '\0';
    p += key_len + 1;
    if (ns.n)
        memcpy(p, ns.p, ns.n);
    p[ns.n] = '\0';
    p += ns.n + 1;
    if (rv.n)
        memcpy(p, rv.p, rv.n);
    p[rv.n] = '\0';
    return c;
}

/* ------------------------------------------------------------------------ */
/* Strings: word-at-a-time scanning and escape decoding.                    */

#ifndef __SSE2__
/* Word-at-a-time fallback where SSE2 is missing (only used there: clang
 * warns about unused static functions). */
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

static inline uint64_t load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

/* Non-zero when one of the 8 bytes is '"' or '\\' (false positives only
 * in bytes above a true match). */
static inline uint64_t has_quote_or_backslash(uint64_t x)
{
    uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
    return (((q - ONES) & ~q) | ((b - ONES) & ~b)) & HIGHS;
}

/* Non-zero when one of the 8 bytes needs a closer look inside a string:
 * '"', '\\', a control character or a non-ASCII byte. */
static inline uint64_t string_special(uint64_t x)
{
    return has_quote_or_backslash(x) | ((x - ONES * 0x20) & HIGHS) | (x & HIGHS);
}

/* Non-zero when one of the 8 bytes is '"', '\\' or a control character
 * (what the serializer must escape). */
static inline uint64_t needs_escape(uint64_t x)
{
    return has_quote_or_backslash(x) | ((x - ONES * 0x20) & ~x & HIGHS);
}
#endif

/* Skips string bytes that need no closer look: returns the first of
 * [q, end) that is '"', '\\', a control character or (with `ascii`) a
 * non-ASCII byte, or end. */
static inline const char *skip_plain(const char *q, const char *end, bool ascii)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
    while (end - q >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
        __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bs));
        /* Signed: below 0x20 is a control character or, negative, a byte
         * of 0x80 and above. */
        __m128i low = _mm_cmplt_epi8(v, sp);
        if (!ascii)
            low = _mm_andnot_si128(_mm_cmplt_epi8(v, _mm_setzero_si128()), low);
        int mask = _mm_movemask_epi8(_mm_or_si128(m, low));
        if (mask)
            return q + __builtin_ctz((unsigned)mask);
        q += 16;
    }
#else
    while (end - q >= 8 && !(ascii ? string_special(load8(q)) : needs_escape(load8(q))))
        q += 8;
#endif
    while (q < end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"' || c == '\\' || c < 0x20 || (ascii && c >= 0x80))
            break;
        q++;
    }
    return q;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The value of 4 hex digits at p (p+4 <= end checked by the caller), or
 * -1. */
static long hex4(const char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the content of a JSON string (between the quotes, escapes
 * intact) into out, which needs room for n bytes (decoding never
 * expands). Tolerant: what is not a valid escape is copied as it is.
 * Returns the decoded length. */
static size_t decode_string(const char *raw, size_t n, char *out)
{
    const char *p = raw, *end = raw + n;
    char *o = out;
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        if (!bs) {
            memcpy(o, p, (size_t)(end - p));
            o += end - p;
            break;
        }
        memcpy(o, p, (size_t)(bs - p));
        o += bs - p;
        p = bs;
        if (end - p < 2) {
            *o++ = *p++;
            continue;
        }
        char e = p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            *o++ = repl[simple - "\"\\/bfnrt"];
            p += 2;
            continue;
        }
        long v = (e == 'u' && end - p >= 6) ? hex4(p + 2) : -1;
        if (v < 0) {
            *o++ = *p++;
            continue;
        }
        p += 6;
        unsigned long cp = (unsigned long)v;
        if (v >= 0xD800 && v <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            long lo = hex4(p + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + (((unsigned long)v - 0xD800) << 10) + ((unsigned long)lo - 0xDC00);
                p += 6;
            }
        }
        o += put_utf8(o, cp);
    }
    return (size_t)(o - out);
}

/* Whether the non-ASCII sequence at p is cut short by end (and valid as
 * far as it goes): more input may complete it. */
static bool utf8_truncated(const unsigned char *p, const unsigned char *end)
{
    size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
    if (!n || p[0] >= 0xF5 || (size_t)(end - p) >= n)
        return false;
    for (const unsigned char *q = p + 1; q < end; q++)
        if ((*q & 0xC0) != 0x80)
            return false;
    return true;
}

/* ------------------------------------------------------------------------ */
/* The scanner.                                                             */

typedef struct scan {
    const char *buf, *p, *end;
    char *err; /* the first error (malloc'd) */
    const char *err_at;
    bool eof; /* the error is that the input ended (more may come) */
    int depth;
    /* Output (the compact copy of the object being scanned). */
    char *out;
    size_t olen, ocap;
    bool oom;
} scan;

static bool fail(scan *s, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(scan *s, const char *at, const char *fmt, ...)
{
    if (!s->err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&s->err, fmt, ap) < 0)
            s->err = NULL;
        va_end(ap);
        s->err_at = at;
        s->eof = at >= s->end;
        if (!s->err)
            s->oom = true;
    }
    return false;
}

/* "line L, column C: message" (malloc'd) for the recorded error. */
static char *error_text(scan *s)
{
    if (s->oom && !s->err)
        return strdup("out of memory");
    const char *at = s->err_at && s->err_at <= s->end ? s->err_at : s->end;
    int line = 1;
    const char *bol = s->buf;
    for (const char *q = s->buf; q < at; q++)
        if (*q == '\n') {
            line++;
            bol = q + 1;
        }
    char *msg = NULL;
    if (asprintf(&msg, "line %d, column %d: %s", line, (int)(at - bol) + 1,
                 s->err ? s->err : "invalid JSON") < 0)
        msg = NULL;
    return msg;
}

static bool out_grow(scan *s, size_t n)
{
    size_t cap = s->ocap ? s->ocap : 4096;
    while (cap < s->olen + n)
        cap *= 2;
    char *o = realloc(s->out, cap);
    if (!o) {
        s->oom = true;
        return false;
    }
    s->out = o;
    s->ocap = cap;
    return true;
}

static inline void out_put(scan *s, const char *p, size_t n)
{
    if (s->olen + n > s->ocap && !out_grow(s, n))
        return;
    memcpy(s->out + s->olen, p, n);
    s->olen += n;
}

static inline void out_c(scan *s, char c)
{
    if (s->olen + 1 > s->ocap && !out_grow(s, 1))
        return;
    s->out[s->olen++] = c;
}

static inline void ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

static inline bool at(scan *s, char c)
{
    return s->p < s->end && *s->p == c;
}

/* Checks the escape at *qp ('\\') and moves past it. */
static bool check_escape(scan *s, const char **qp)
{
    const char *q = *qp;
    if (s->end - q < 2)
        return fail(s, s->end, "premature end of input");
    switch (q[1]) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        *qp = q + 2;
        return true;
    case 'u':
        break;
    default:
        return fail(s, q, "invalid escape");
    }
    if (s->end - q < 6)
        return fail(s, s->end, "premature end of input");
    long v = hex4(q + 2);
    if (v < 0)
        return fail(s, q, "invalid escape");
    if (v == 0)
        return fail(s, q, "\\u0000 is not allowed without JSON_ALLOW_NUL");
    if (v >= 0xDC00 && v <= 0xDFFF)
        return fail(s, q, "invalid Unicode '\\u%04lX'", v);
    if (v >= 0xD800 && v <= 0xDBFF) {
        if (s->end - q < 12)
            return fail(s, s->end, "premature end of input");
        long lo = (q[6] == '\\' && q[7] == 'u') ? hex4(q + 8) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return fail(s, q, "invalid Unicode '\\u%04lX'", v);
        *qp = q + 12;
        return true;
    }
    *qp = q + 6;
    return true;
}

/* Validates the string at s->p (a quote) and moves past it; *raw, *rawlen get
 * the bytes between the quotes and *esc whether they hold escapes (each
 * may be NULL). Emits the string, quotes included, when `emit`. */
static bool scan_string(scan *s, bool emit, const char **raw, size_t *rawlen, bool *esc)
{
    const char *start = s->p + 1, *q = start, *end = s->end;
    bool e = false;
    for (;;) {
        q = skip_plain(q, end, true);
        if (q >= end)
            return fail(s, q, "premature end of input");
        unsigned char ch = (unsigned char)*q;
        if (ch == '"')
            break;
        if (ch == '\\') {
            e = true;
            if (!check_escape(s, &q))
                return false;
            continue;
        }
        if (ch < 0x20)
            return fail(s, q, "control character 0x%x", ch);
        if (ch < 0x80) {
            q++;
            continue;
        }
        size_t n = ckube__utf8_decode((const unsigned char *)q, (size_t)(end - q), NULL);
        if (!n && utf8_truncated((const unsigned char *)q, (const unsigned char *)end))
            return fail(s, end, "premature end of input");
        if (!n)
            return fail(s, q, "unable to decode byte 0x%x", ch);
        q += n;
    }
    if (emit)
        out_put(s, s->p, (size_t)(q + 1 - s->p));
    if (raw) {
        *raw = start;
        *rawlen = (size_t)(q - start);
    }
    if (esc)
        *esc = e;
    s->p = q + 1;
    return true;
}

static inline bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether the integer text (no leading zeros, optional '-') fits int64. */
static bool int_fits(const char *p, size_t n)
{
    bool neg = *p == '-';
    const char *d = p + neg;
    size_t nd = n - neg;
    if (nd < 19)
        return true;
    if (nd > 19)
        return false;
    return memcmp(d, neg ? "9223372036854775808" : "9223372036854775807", 19) <= 0;
}

static bool scan_number(scan *s, bool emit)
{
    const char *q = s->p, *end = s->end;
    if (*q == '-')
        q++;
    if (q >= end)
        return fail(s, end, "premature end of input");
    if (!is_digit(*q))
        return fail(s, s->p, "invalid token");
    if (*q == '0')
        q++;
    else
        while (q < end && is_digit(*q))
            q++;
    bool real = false;
    if (q < end && *q == '.') {
        q++;
        if (q >= end)
            return fail(s, end, "premature end of input");
        if (!is_digit(*q))
            return fail(s, q, "invalid token");
        while (q < end && is_digit(*q))
            q++;
        real = true;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (q >= end)
            return fail(s, end, "premature end of input");
        if (!is_digit(*q))
            return fail(s, q, "invalid token");
        while (q < end && is_digit(*q))
            q++;
        real = true;
    }
    size_t n = (size_t)(q - s->p);
    /* A number that runs to the end of the input may go on in the next
     * chunk of a streamed body ("111...1" + "E2" is a fine real): its
     * range errors are reported at the end, which the streaming decoder
     * takes as "more input needed", not as invalid. */
    const char *err_at = q >= end ? end : s->p;
    if (!real && !int_fits(s->p, n))
        return fail(s, err_at, *s->p == '-' ? "too big negative integer" : "too big integer");
    if (real) {
        bool ok;
        parse_real(s->p, n, &ok);
        if (!ok)
            return fail(s, err_at, "real number overflow");
    }
    if (emit)
        out_put(s, s->p, n);
    s->p = q;
    return true;
}

static bool scan_value(scan *s, bool emit);

static bool enter(scan *s)
{
    if (++s->depth > MAX_DEPTH)
        return fail(s, s->p, "maximum parsing depth reached");
    return true;
}

/* After a member or element: ',' (moves past it, true with *more) or the
 * closing `close` (moves past it, true with !*more). */
static bool next_or_close(scan *s, char close, bool *more)
{
    ws(s);
    if (at(s, ',')) {
        s->p++;
        ws(s);
        *more = true;
        return true;
    }
    if (at(s, close)) {
        s->p++;
        *more = false;
        return true;
    }
    return fail(s, s->p, close == '}' ? "'}' expected" : "']' expected");
}

/* Any object, emitted as it is (compacted) when `emit`. */
static bool scan_object(scan *s, bool emit)
{
    if (!enter(s))
        return false;
    s->p++;
    if (emit)
        out_c(s, '{');
    ws(s);
    bool more = !at(s, '}');
    if (!more)
        s->p++;
    bool first = true;
    while (more) {
        if (!at(s, '"'))
            return fail(s, s->p, first ? "string or '}' expected" : "string expected");
        first = false;
        if (!scan_string(s, emit, NULL, NULL, NULL))
            return false;
        ws(s);
        if (!at(s, ':'))
            return fail(s, s->p, "':' expected");
        s->p++;
        if (emit)
            out_c(s, ':');
        ws(s);
        if (!scan_value(s, emit) || !next_or_close(s, '}', &more))
            return false;
        if (more && emit)
            out_c(s, ',');
    }
    if (emit)
        out_c(s, '}');
    s->depth--;
    return true;
}

static bool scan_array(scan *s, bool emit)
{
    if (!enter(s))
        return false;
    s->p++;
    if (emit)
        out_c(s, '[');
    ws(s);
    bool more = !at(s, ']');
    if (!more)
        s->p++;
    while (more) {
        if (!scan_value(s, emit) || !next_or_close(s, ']', &more))
            return false;
        if (more && emit)
            out_c(s, ',');
    }
    if (emit)
        out_c(s, ']');
    s->depth--;
    return true;
}

static bool scan_literal(scan *s, bool emit, const char *lit, size_t n)
{
    size_t have = (size_t)(s->end - s->p);
    if (have < n && memcmp(s->p, lit, have) == 0)
        return fail(s, s->end, "premature end of input");
    if (have < n || memcmp(s->p, lit, n) != 0)
        return fail(s, s->p, "invalid token");
    if (emit)
        out_put(s, lit, n);
    s->p += n;
    return true;
}

static bool scan_value(scan *s, bool emit)
{
    if (s->p >= s->end)
        return fail(s, s->p, "premature end of input");
    switch (*s->p) {
    case '{':
        return scan_object(s, emit);
    case '[':
        return scan_array(s, emit);
    case '"':
        return scan_string(s, emit, NULL, NULL, NULL);
    case 't':
        return scan_literal(s, emit, "true", 4);
    case 'f':
        return scan_literal(s, emit, "false", 5);
    case 'n':
        return scan_literal(s, emit, "null", 4);
    default:
        if (*s->p == '-' || is_digit(*s->p))
            return scan_number(s, emit);
        return fail(s, s->p, "invalid token");
    }
}

/* Checks that only whitespace follows. */
static bool scan_eof(scan *s)
{
    ws(s);
    if (s->p != s->end)
        return fail(s, s->p, "end of file expected");
    return true;
}

/* ---- Kubernetes objects ---- */

/* A string value picked up while scanning: raw bytes in the input. */
typedef struct capture {
    const char *raw;
    size_t n;
    bool esc, set;
} capture;

typedef struct item_ctx {
    const ckube__cobj_opts *o;
    capture name, ns, rv;
    capture gen; /* raw: the value's text, whatever it is */
} item_ctx;

enum member_role { M_KEEP, M_DROP, M_METADATA, M_NAME, M_NS, M_RV, M_GEN };

static bool key_is(const char *k, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(k, lit, n) == 0;
}

/* What to do with member `k` of an object at `level` (0: the object,
 * 1: its metadata). */
static enum member_role classify(const item_ctx *ic, int level, const char *k, size_t n)
{
    if (level == 0) {
        if (key_is(k, n, "metadata"))
            return M_METADATA;
        if (ic->o && ic->o->metadata_only && !key_is(k, n, "apiVersion") && !key_is(k, n, "kind"))
            return M_DROP;
        return M_KEEP;
    }
    if (key_is(k, n, "name"))
        return M_NAME;
    if (key_is(k, n, "namespace"))
        return M_NS;
    if (key_is(k, n, "resourceVersion"))
        return M_RV;
    if (key_is(k, n, "generation"))
        return M_GEN;
    if (key_is(k, n, "managedFields") && !(ic->o && ic->o->keep_managed_fields))
        return M_DROP;
    return M_KEEP;
}

/* An object (level 0) or its metadata (level 1): emitted without the
 * dropped members, capturing name, namespace and resourceVersion. */
static bool scan_kobject(scan *s, bool emit, int level, item_ctx *ic)
{
    if (!enter(s))
        return false;
    s->p++;
    if (emit)
        out_c(s, '{');
    ws(s);
    bool more = !at(s, '}');
    if (!more)
        s->p++;
    size_t emitted = 0;
    bool first = true;
    while (more) {
        if (!at(s, '"'))
            return fail(s, s->p, first ? "string or '}' expected" : "string expected");
        first = false;
        const char *kstart = s->p, *kraw;
        size_t klen;
        bool kesc;
        if (!scan_string(s, false, &kraw, &klen, &kesc))
            return false;
        const char *kend = s->p;
        /* Every key we look for is under 16 bytes, so 6x that in escapes. */
        char kbuf[128];
        const char *k = kraw;
        size_t kn = klen;
        if (kesc) {
            if (klen < sizeof kbuf) {
                kn = decode_string(kraw, klen, kbuf);
                k = kbuf;
            } else {
                k = "";
                kn = 0;
            }
        }
        ws(s);
        if (!at(s, ':'))
            return fail(s, s->p, "':' expected");
        s->p++;
        ws(s);
        enum member_role role = classify(ic, level, k, kn);
        bool em = emit && role != M_DROP;
        if (em) {
            if (emitted++)
                out_c(s, ',');
            out_put(s, kstart, (size_t)(kend - kstart));
            out_c(s, ':');
        }
        bool ok;
        if (role == M_METADATA) {
            /* A later metadata replaces an earlier one (last key wins). */
            ic->name = ic->ns = ic->rv = ic->gen = (capture){0};
            ok = at(s, '{') ? scan_kobject(s, em, 1, ic) : scan_value(s, em);
        } else if (role == M_NAME || role == M_NS || role == M_RV) {
            capture *c = role == M_NAME ? &ic->name : role == M_NS ? &ic->ns : &ic->rv;
            *c = (capture){0};
            if (at(s, '"')) {
                ok = scan_string(s, em, &c->raw, &c->n, &c->esc);
                c->set = ok;
            } else {
                ok = scan_value(s, em);
            }
        } else if (role == M_GEN) {
            const char *v = s->p;
            ok = scan_value(s, em);
            ic->gen = (capture){.raw = v, .n = (size_t)(s->p - v), .set = ok};
        } else {
            ok = scan_value(s, em);
        }
        if (!ok || !next_or_close(s, '}', &more))
            return false;
    }
    if (emit)
        out_c(s, '}');
    s->depth--;
    return true;
}

/* The decoded bytes of a capture, in *buf (malloc'd when escaped; caller
 * frees *buf). False when out of memory. */
static bool capture_field(const capture *c, field *f, char **buf)
{
    *buf = NULL;
    *f = (field){0};
    if (!c->set)
        return true;
    if (!c->esc) {
        *f = (field){c->raw, c->n};
        return true;
    }
    *buf = malloc(c->n + 1);
    if (!*buf)
        return false;
    *f = (field){*buf, decode_string(c->raw, c->n, *buf)};
    return true;
}

/* metadata.generation from its raw JSON text: an integer that fits
 * int64, else 0 (as the tree readers treat anything else). */
static int64_t capture_generation(const capture *c)
{
    if (!c->set || !c->n)
        return 0;
    const char *p = c->raw, *e = c->raw + c->n;
    bool neg = *p == '-';
    p += neg;
    if (p == e)
        return 0;
    uint64_t v = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9')
            return 0; /* a fraction, an exponent, or not a number */
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (neg)
        return v <= (uint64_t)INT64_MAX + 1 ? (int64_t)(0 - v) : 0;
    return v <= INT64_MAX ? (int64_t)v : 0;
}

/* The decoded namespace, name and resourceVersion of a scanned object. */
typedef struct item_fields {
    field ns, name, rv;
    char *bufs[3]; /* malloc'd decodings of escaped ones */
} item_fields;

/* Fills *f from the captures (free with item_fields_free, also after a
 * failure). False when out of memory. */
static bool item_fields_get(const item_ctx *ic, item_fields *f)
{
    bool ok = capture_field(&ic->ns, &f->ns, &f->bufs[0]);
    ok = capture_field(&ic->name, &f->name, &f->bufs[1]) && ok;
    ok = capture_field(&ic->rv, &f->rv, &f->bufs[2]) && ok;
    /* Same rule as ckube_meta_namespace_key: a key needs a non-empty
     * name; an embedded NUL ends a C string there. */
    f->name.n = strnlen(f->name.p ? f->name.p : "", f->name.n);
    f->ns.n = strnlen(f->ns.p ? f->ns.p : "", f->ns.n);
    f->rv.n = strnlen(f->rv.p ? f->rv.p : "", f->rv.n);
    return ok;
}

static void item_fields_free(item_fields *f)
{
    for (int i = 0; i < 3; i++)
        free(f->bufs[i]);
}

/* The block for the object just scanned into s->out. */
static ckube__cobj *build_from_scan(scan *s, const item_ctx *ic)
{
    item_fields f = {0};
    ckube__cobj *c = NULL;
    if (item_fields_get(ic, &f) && !s->oom)
        c = cobj_build(s->out, s->olen, f.ns, f.name, f.rv, capture_generation(&ic->gen));
    item_fields_free(&f);
    return c;
}

/* Scans the object at s->p into s->out (reused), its fields into *ic. */
static bool scan_item_text(scan *s, const ckube__cobj_opts *o, item_ctx *ic)
{
    *ic = (item_ctx){.o = o};
    s->olen = 0;
    return scan_kobject(s, true, 0, ic);
}

/* Scans the object at s->p into a new block (s->out is reused). */
static ckube__cobj *scan_item(scan *s, const ckube__cobj_opts *o)
{
    item_ctx ic;
    if (!scan_item_text(s, o, &ic))
        return NULL;
    ckube__cobj *c = build_from_scan(s, &ic);
    if (!c)
        fail(s, s->p, "out of memory");
    return c;
}

ckube__cobj *ckube__cobj_parse(const char *buf, size_t len, const ckube__cobj_opts *o, char **err)
{
    scan s = {.buf = buf, .p = buf, .end = buf + len};
    ckube__cobj *c = NULL;
    if (err)
        *err = NULL;
    ws(&s);
    if (!at(&s, '{')) {
        if (scan_value(&s, false) && scan_eof(&s))
            fail(&s, buf, "not a JSON object");
    } else {
        c = scan_item(&s, o);
        if (c && !scan_eof(&s)) {
            ckube__cobj_unref(c);
            c = NULL;
        }
    }
    if (!c && err)
        *err = error_text(&s);
    free(s.out);
    free(s.err);
    return c;
}

/* ---- List responses ---- */

void ckube__clist_clear(ckube__clist *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        ckube__cobj_unref(l->items[i]);
    free(l->items);
    free(l->resource_version);
    free(l->continue_token);
    memset(l, 0, sizeof(*l));
}

void ckube__clist_clear_items(ckube__clist *l)
{
    for (size_t i = 0; i < l->n; i++)
        ckube__cobj_unref(l->items[i]);
    l->n = 0;
}

int ckube__clist_push(ckube__clist *l, ckube__cobj *c)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        ckube__cobj **n = realloc(l->items, cap * sizeof(*n));
        if (!n)
            return -1;
        l->items = n;
        l->cap = cap;
    }
    l->items[l->n++] = c;
    return 0;
}

/* A copy of a captured string (NULL when none or empty). */
static char *capture_dup(const capture *c)
{
    if (!c->set || !c->n)
        return NULL;
    char *s = malloc(c->n + 1);
    if (!s)
        return NULL;
    size_t n = c->esc ? decode_string(c->raw, c->n, s) : (memcpy(s, c->raw, c->n), c->n);
    s[n] = '\0';
    return s;
}

/* The list's metadata: resourceVersion and continue. */
static bool scan_list_meta(scan *s, capture *rv, capture *cont)
{
    if (!enter(s))
        return false;
    s->p++;
    ws(s);
    bool more = !at(s, '}');
    if (!more)
        s->p++;
    *rv = *cont = (capture){0};
    while (more) {
        const char *kraw;
        size_t klen;
        if (!at(s, '"'))
            return fail(s, s->p, "string expected");
        if (!scan_string(s, false, &kraw, &klen, NULL))
            return false;
        ws(s);
        if (!at(s, ':'))
            return fail(s, s->p, "':' expected");
        s->p++;
        ws(s);
        capture *c = key_is(kraw, klen, "resourceVersion") ? rv
                     : key_is(kraw, klen, "continue")      ? cont
                                                           : NULL;
        bool ok;
        if (c && at(s, '"')) {
            ok = scan_string(s, false, &c->raw, &c->n, &c->esc);
            c->set = ok;
        } else {
            if (c)
                *c = (capture){0};
            ok = scan_value(s, false);
        }
        if (!ok || !next_or_close(s, '}', &more))
            return false;
    }
    s->depth--;
    return true;
}

/* The items array: each object becomes a block appended to l. */
static bool scan_items(scan *s, const ckube__cobj_opts *o, ckube__clist *l)
{
    if (!enter(s))
        return false;
    s->p++;
    ws(s);
    bool more = !at(s, ']');
    if (!more)
        s->p++;
    while (more) {
        if (at(s, '{')) {
            ckube__cobj *c = scan_item(s, o);
            if (!c)
                return false;
            if (ckube__clist_push(l, c) != 0) {
                ckube__cobj_unref(c);
                return fail(s, s->p, "out of memory");
            }
        } else {
            if (!scan_value(s, false))
                return false;
            l->skipped++;
        }
        if (!next_or_close(s, ']', &more))
            return false;
    }
    s->depth--;
    return true;
}

int ckube__cobj_parse_list(const char *buf, size_t len, const ckube__cobj_opts *o,
                           ckube__clist *out, char **err)
{
    scan s = {.buf = buf, .p = buf, .end = buf + len};
    ckube__clist page = {0};
    capture rv = {0}, cont = {0};
    bool not_list = false, ok;
    if (err)
        *err = NULL;
    ws(&s);
    if (!at(&s, '{')) {
        ok = scan_value(&s, false) && scan_eof(&s);
        not_list = true;
        goto done;
    }
    ok = enter(&s);
    s.p++;
    ws(&s);
    bool more = ok && !at(&s, '}');
    if (ok && !more)
        s.p++;
    while (ok && more) {
        const char *kraw;
        size_t klen;
        bool kesc;
        char kbuf[64];
        if (!at(&s, '"')) {
            ok = fail(&s, s.p, "string expected");
            break;
        }
        if (!(ok = scan_string(&s, false, &kraw, &klen, &kesc)))
            break;
        if (kesc && klen < sizeof kbuf) {
            klen = decode_string(kraw, klen, kbuf);
            kraw = kbuf;
        }
        ws(&s);
        if (!at(&s, ':')) {
            ok = fail(&s, s.p, "':' expected");
            break;
        }
        s.p++;
        ws(&s);
        if (key_is(kraw, klen, "items")) {
            /* A repeated "items" replaces the earlier one. */
            ckube__clist_clear(&page);
            not_list = false;
            if (at(&s, '['))
                ok = scan_items(&s, o, &page);
            else if (at(&s, 'n'))
                ok = scan_literal(&s, false, "null", 4);
            else {
                ok = scan_value(&s, false);
                not_list = true;
            }
        } else if (key_is(kraw, klen, "metadata") && at(&s, '{')) {
            ok = scan_list_meta(&s, &rv, &cont);
        } else {
            if (key_is(kraw, klen, "metadata"))
                rv = cont = (capture){0};
            ok = scan_value(&s, false);
        }
        ok = ok && next_or_close(&s, '}', &more);
    }
    ok = ok && scan_eof(&s);
done:
    if (!ok) {
        if (err)
            *err = error_text(&s);
        ckube__clist_clear(&page);
        free(s.out);
        free(s.err);
        return -1;
    }
    free(s.out);
    free(s.err);
    if (not_list) {
        ckube__clist_clear(&page);
        return -2;
    }
    /* Move this page's items over, then its resourceVersion/continue. */
    char *new_rv = capture_dup(&rv), *new_cont = capture_dup(&cont);
    bool oom = (rv.set && rv.n && !new_rv) || (cont.set && cont.n && !new_cont);
    for (size_t i = 0; !oom && i < page.n; i++) {
        if (ckube__clist_push(out, page.items[i]) != 0) {
            /* Undo what was moved: out stays as it was. */
            out->n -= i;
            for (size_t j = 0; j < i; j++)
                page.items[j] = out->items[out->n + j];
            oom = true;
            break;
        }
    }
    if (oom) {
        free(new_rv);
        free(new_cont);
        ckube__clist_clear(&page);
        if (err)
            *err = strdup("out of memory");
        return -1;
    }
    out->skipped += page.skipped;
    page.n = 0;
    ckube__clist_clear(&page);
    free(out->resource_version);
    free(out->continue_token);
    out->resource_version = new_rv;
    out->continue_token = new_cont;
    return 0;
}

/* ---- The block builder of a large streamed list ---- */

/* Decoding a list is two jobs of about equal cost: scanning the text,
 * and building the blocks and handing them on (malloc, the page faults
 * of 100+ MB of fresh memory, the FIFO). Once a stream with an on_item
 * callback has decoded BUILDER_FROM bytes, a thread of its own does the
 * second job while the stream's thread scans on, so the two overlap on
 * a machine with a second CPU. The scanner copies each object's compact
 * text and fields into a batch; full batches go to the builder one at a
 * time, in order (two batches: the one being filled and the one being
 * built, their buffers swapped and reused). on_item runs on the builder
 * thread then, one call at a time and in list order as before. */
#define BUILDER_FROM ((size_t)1 << 20)
#define BATCH_TEXT (256u * 1024) /* hand a batch over at this much text */

typedef struct raw_item {
    size_t off; /* of the JSON text in the batch; the fields follow it */
    uint32_t json_len, ns_len, name_len, rv_len;
    int64_t generation;
} raw_item;

typedef struct raw_batch {
    ckube__strbuf text; /* each object's JSON text, then its fields */
    raw_item *items;
    size_t n, items_cap;
} raw_batch;

typedef struct builder {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* any change of busy, quit or failed */
    raw_batch fill;      /* the scanner's (not locked) */
    raw_batch work;      /* the builder's while busy (mu) */
    bool busy, quit, failed;
    int (*on_item)(void *ud, ckube__cobj *c);
    void *ud;
} builder;

static void raw_batch_free(raw_batch *b)
{
    free(b->text.s);
    free(b->items);
}

/* Appends the object scanned into s->out. False when out of memory (or
 * s->out is incomplete for that reason). */
static bool raw_batch_add(raw_batch *b, const scan *s, const item_ctx *ic)
{
    item_fields f = {0};
    bool ok = !s->oom && item_fields_get(ic, &f) && s->olen <= UINT32_MAX / 2;
    if (ok && b->n == b->items_cap) {
        size_t cap = b->items_cap ? b->items_cap * 2 : 256;
        raw_item *items = realloc(b->items, cap * sizeof(*items));
        ok = items != NULL;
        if (ok) {
            b->items = items;
            b->items_cap = cap;
        }
    }
    size_t off = b->text.len;
    ckube__sb_reserve(&b->text, s->olen + f.ns.n + f.name.n + f.rv.n);
    if (ok && !b->text.oom) {
        b->items[b->n++] = (raw_item){.off = off,
                                      .json_len = (uint32_t)s->olen,
                                      .ns_len = (uint32_t)f.ns.n,
                                      .name_len = (uint32_t)f.name.n,
                                      .rv_len = (uint32_t)f.rv.n,
                                      .generation = capture_generation(&ic->gen)};
        ckube__sb_addn(&b->text, s->out, s->olen);
        const field parts[] = {f.ns, f.name, f.rv};
        for (size_t i = 0; i < 3; i++)
            if (parts[i].n) /* p may be NULL then */
                ckube__sb_addn(&b->text, parts[i].p, parts[i].n);
    }
    item_fields_free(&f);
    return ok && !b->text.oom;
}

/* Builds and hands on the batch's objects; false when one could not be
 * built or on_item refused one (the rest are dropped then). */
static bool build_batch(builder *bd, const raw_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        const raw_item *it = &b->items[i];
        const char *p = b->text.s + it->off;
        field ns = {p + it->json_len, it->ns_len};
        field name = {ns.p + ns.n, it->name_len};
        field rv = {name.p + name.n, it->rv_len};
        ckube__cobj *c = cobj_build(p, it->json_len, ns, name, rv, it->generation);
        if (!c)
            return false;
        int rc = bd->on_item(bd->ud, c);
        ckube__cobj_unref(c);
        if (rc != 0)
            return false;
    }
    return true;
}

static void *builder_main(void *arg)
{
    builder *bd = arg;
    pthread_setname_np(pthread_self(), "ckube-builder"); /* top -H, perf, gdb */
    pthread_mutex_lock(&bd->mu);
    for (;;) {
        while (!bd->busy && !bd->quit)
            pthread_cond_wait(&bd->cond, &bd->mu);
        if (!bd->busy)
            break;
        bool skip = bd->failed;
        pthread_mutex_unlock(&bd->mu);
        /* work is ours until busy is cleared. */
        bool ok = skip || build_batch(bd, &bd->work);
        bd->work.text.len = bd->work.n = 0;
        pthread_mutex_lock(&bd->mu);
        if (!ok)
            bd->failed = true;
        bd->busy = false;
        pthread_cond_broadcast(&bd->cond);
    }
    pthread_mutex_unlock(&bd->mu);
    return NULL;
}

/* A running builder, or NULL (no thread: the caller builds inline). */
static builder *builder_start(int (*on_item)(void *ud, ckube__cobj *c), void *ud)
{
    builder *bd = calloc(1, sizeof(*bd));
    if (!bd)
        return NULL;
    bd->on_item = on_item;
    bd->ud = ud;
    pthread_mutex_init(&bd->mu, NULL);
    pthread_cond_init(&bd->cond, NULL);
    if (pthread_create(&bd->thread, NULL, builder_main, bd) != 0) {
        pthread_cond_destroy(&bd->cond);
        pthread_mutex_destroy(&bd->mu);
        free(bd);
        return NULL;
    }
    return bd;
}

/* Waits until the builder is idle. FALSE once it has failed. */
static bool builder_wait_idle(builder *bd)
{
    pthread_mutex_lock(&bd->mu);
    while (bd->busy)
        pthread_cond_wait(&bd->cond, &bd->mu);
    bool ok = !bd->failed;
    pthread_mutex_unlock(&bd->mu);
    return ok;
}

/* Hands the filled batch over (once the previous one is built) and
 * takes the emptied one back. False once the builder has failed. */
static bool builder_handoff(builder *bd)
{
    if (!bd->fill.n)
        return builder_wait_idle(bd);
    pthread_mutex_lock(&bd->mu);
    while (bd->busy)
        pthread_cond_wait(&bd->cond, &bd->mu);
    raw_batch t = bd->work;
    bd->work = bd->fill;
    bd->fill = t;
    bd->busy = true;
    bool ok = !bd->failed;
    pthread_cond_broadcast(&bd->cond);
    pthread_mutex_unlock(&bd->mu);
    return ok;
}

/* Everything handed over and built: false when something failed. */
static bool builder_drain(builder *bd)
{
    return builder_handoff(bd) && builder_wait_idle(bd);
}

/* Drains, stops and frees the builder (NULL is fine). */
static void builder_stop(builder *bd)
{
    if (!bd)
        return;
    builder_drain(bd);
    pthread_mutex_lock(&bd->mu);
    bd->quit = true;
    pthread_cond_broadcast(&bd->cond);
    pthread_mutex_unlock(&bd->mu);
    pthread_join(bd->thread, NULL);
    raw_batch_free(&bd->fill);
    raw_batch_free(&bd->work);
    pthread_cond_destroy(&bd->cond);
    pthread_mutex_destroy(&bd->mu);
    free(bd);
}

/* ---- List responses, decoded as they arrive ---- */

/* Where the decoder is in the List object. */
enum phase {
    P_START,        /* before the top-level value */
    P_MEMBER,       /* a top-level member (or '}') next */
    P_AFTER_MEMBER, /* ',' or '}' next */
    P_ITEM,         /* an element of items (or ']') next */
    P_AFTER_ITEM,   /* ',' or ']' next */
    P_WHOLE,        /* the top-level value is not an object: validate it */
    P_END,          /* only whitespace may follow */
};

struct ckube__clist_stream {
    ckube__cobj_opts o;
    /* The window: received bytes not consumed yet are buf[start, len). */
    char *buf;
    size_t start, len, cap;
    uint64_t consumed; /* bytes dropped before buf[0] (error offsets) */
    /* Do not try the unit at start again before this many bytes are
     * there (it ran out of input with half as many): a value larger than
     * a chunk is scanned O(1) times, not once per chunk. */
    size_t retry_at;
    enum phase ph;
    bool first; /* the next member/element is the container's first */
    ckube__clist page;
    char *rv, *cont;
    bool not_list;
    int failed; /* 0, or -1 once invalid (err set) */
    char *err;
    /* Where items go as they are decoded (else into page). */
    int (*on_item)(void *ud, ckube__cobj *c);
    void *on_item_ud;
    /* Scratch for the compact copy of an item (kept between items). */
    char *out;
    size_t ocap;
    /* The builder thread (see above), once the stream is large enough;
     * started after builder_from bytes. */
    builder *bld;
    size_t builder_from;
};

ckube__clist_stream *ckube__clist_stream_new(const ckube__cobj_opts *o)
{
    ckube__clist_stream *st = calloc(1, sizeof(*st));
    if (st && o)
        st->o = *o;
    if (st)
        st->builder_from = BUILDER_FROM;
    return st;
}

void ckube__clist_stream_builder_from(ckube__clist_stream *st, size_t bytes)
{
    st->builder_from = bytes;
}

void ckube__clist_stream_on_item(ckube__clist_stream *st, int (*fn)(void *ud, ckube__cobj *c),
                                 void *ud)
{
    st->on_item = fn;
    st->on_item_ud = ud;
}

void ckube__clist_stream_reset(ckube__clist_stream *st)
{
    /* What was decoded is handed over (as it would have been inline). */
    builder_stop(st->bld);
    st->bld = NULL;
    ckube__clist_clear(&st->page);
    free(st->rv);
    free(st->cont);
    free(st->err);
    st->rv = st->cont = st->err = NULL;
    st->start = st->len = 0;
    st->consumed = 0;
    st->retry_at = 0;
    st->ph = P_START;
    st->first = false;
    st->not_list = false;
    st->failed = 0;
}

void ckube__clist_stream_free(ckube__clist_stream *st)
{
    if (!st)
        return;
    ckube__clist_stream_reset(st);
    free(st->buf);
    free(st->out);
    free(st);
}

/* Records the first error, at byte offset `at` of the window. */
/* Position i of the window; NULL while nothing was ever buffered (no
 * arithmetic on a null pointer). */
static const char *window_at(const ckube__clist_stream *st, size_t i)
{
    return st->buf ? st->buf + i : NULL;
}

static int stream_fail(ckube__clist_stream *st, const char *at, const char *msg)
{
    if (!st->failed) {
        uint64_t off = st->consumed + (at ? (uint64_t)(at - st->buf) : 0);
        if (asprintf(&st->err, "byte %llu: %s", (unsigned long long)off, msg) < 0)
            st->err = NULL;
        st->failed = -1;
    }
    return -1;
}

static void skip_ws_window(ckube__clist_stream *st)
{
    while (st->start < st->len) {
        char c = st->buf[st->start];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
            break;
        st->start++;
    }
}

/* Whether items go through the builder thread (starting it when the
 * stream has just become large enough). */
static bool use_builder(ckube__clist_stream *st)
{
    if (st->bld)
        return true;
    if (!st->on_item || st->consumed + st->start < st->builder_from)
        return false;
    st->bld = builder_start(st->on_item, st->on_item_ud);
    return st->bld != NULL;
}

/* One unit of the List at the window's start: 1 when consumed, 0 when
 * more input is needed (nothing consumed), -1 when invalid. With `final`
 * no more input will come, so running out of it is an error. */
static int stream_step(ckube__clist_stream *st, bool final)
{
    skip_ws_window(st);
    if (st->ph == P_END) {
        if (st->start < st->len)
            return stream_fail(st, window_at(st, st->start), "end of file expected");
        return 0;
    }
    if (st->start >= st->len) {
        if (final)
            return stream_fail(st, window_at(st, st->len), "premature end of input");
        return 0;
    }
    scan s = {.buf = st->buf,
              .p = st->buf + st->start,
              .end = st->buf + st->len,
              .out = st->out,
              .ocap = st->ocap};
    char c = *s.p;
    bool ok = true, skipped_item = false;
    enum phase next = st->ph;
    switch (st->ph) {
    case P_START:
        if (c == '{') {
            s.p++;
            next = P_MEMBER;
            st->first = true;
        } else {
            next = P_WHOLE;
            st->not_list = true;
        }
        break;
    case P_WHOLE:
        ok = scan_value(&s, false);
        next = P_END;
        break;
    case P_AFTER_MEMBER:
    case P_AFTER_ITEM: {
        char close = st->ph == P_AFTER_MEMBER ? '}' : ']';
        s.p++;
        if (c == ',') {
            next = st->ph == P_AFTER_MEMBER ? P_MEMBER : P_ITEM;
            st->first = false;
        } else if (c == close) {
            next = st->ph == P_AFTER_MEMBER ? P_END : P_AFTER_MEMBER;
        } else {
            ok = fail(&s, s.p - 1, close == '}' ? "'}' expected" : "']' expected");
        }
        break;
    }
    case P_ITEM:
        s.depth = 2;
        if (st->first && c == ']') {
            s.p++;
            next = P_AFTER_MEMBER;
        } else if (c == '{' && use_builder(st)) {
            item_ctx ic;
            ok = scan_item_text(&s, &st->o, &ic);
            if (ok && !raw_batch_add(&st->bld->fill, &s, &ic))
                ok = fail(&s, s.p, "out of memory");
            else if (ok && st->bld->fill.text.len >= BATCH_TEXT && !builder_handoff(st->bld))
                ok = fail(&s, s.p, "out of memory");
            next = P_AFTER_ITEM;
        } else if (c == '{') {
            ckube__cobj *item = scan_item(&s, &st->o);
            ok = item != NULL;
            if (ok && st->on_item) {
                if (st->on_item(st->on_item_ud, item) != 0)
                    ok = fail(&s, s.p, "out of memory");
                ckube__cobj_unref(item);
            } else if (ok && ckube__clist_push(&st->page, item) != 0) {
                ckube__cobj_unref(item);
                ok = fail(&s, s.p, "out of memory");
            }
            next = P_AFTER_ITEM;
        } else {
            /* Counted below, once the item is known to be complete. */
            ok = skipped_item = scan_value(&s, false);
            next = P_AFTER_ITEM;
        }
        break;
    case P_MEMBER: {
        if (st->first && c == '}') {
            s.p++;
            next = P_END;
            break;
        }
        const char *kraw;
        size_t klen;
        bool kesc;
        char kbuf[64];
        s.depth = 1;
        if (c != '"') {
            ok = fail(&s, s.p, "string expected");
            break;
        }
        if (!(ok = scan_string(&s, false, &kraw, &klen, &kesc)))
            break;
        if (kesc && klen < sizeof kbuf) {
            klen = decode_string(kraw, klen, kbuf);
            kraw = kbuf;
        }
        ws(&s);
        if (!at(&s, ':')) {
            ok = fail(&s, s.p, "':' expected");
            break;
        }
        s.p++;
        ws(&s);
        next = P_AFTER_MEMBER;
        if (s.p >= s.end) {
            ok = fail(&s, s.end, "premature end of input");
        } else if (key_is(kraw, klen, "items")) {
            /* A repeated "items" replaces the earlier one. */
            bool is_list = true;
            if (at(&s, '[')) {
                s.p++;
                next = P_ITEM;
                st->first = true;
            } else if (at(&s, 'n')) {
                ok = scan_literal(&s, false, "null", 4);
            } else {
                ok = scan_value(&s, false);
                is_list = false;
            }
            if (ok) {
                ckube__clist_clear(&st->page);
                st->not_list = !is_list;
            }
        } else if (key_is(kraw, klen, "metadata")) {
            capture rv = {0}, cont = {0};
            ok = at(&s, '{') ? scan_list_meta(&s, &rv, &cont) : scan_value(&s, false);
            if (ok) {
                free(st->rv);
                free(st->cont);
                st->rv = capture_dup(&rv);
                st->cont = capture_dup(&cont);
            }
        } else {
            ok = scan_value(&s, false);
        }
        break;
    }
    case P_END:
        break;
    }
    st->out = s.out;
    st->ocap = s.ocap;
    int rc;
    /* A unit that ends in a digit at the end of the window may not have
     * ended: the number can go on in the next chunk. */
    bool cut_number =
        ok && !final && s.p == s.end && s.p > st->buf + st->start && is_digit(s.p[-1]);
    if (cut_number && !s.oom) {
        st->retry_at = st->len - st->start + 1;
        rc = 0;
    } else if (ok && !s.oom) {
        if (skipped_item)
            st->page.skipped++;
        st->start = (size_t)(s.p - st->buf);
        st->ph = next;
        st->retry_at = 0;
        rc = 1;
    } else if (s.eof && !final && !s.oom) {
        st->retry_at = 2 * (st->len - st->start);
        rc = 0;
    } else {
        rc = stream_fail(st, s.err_at ? s.err_at : s.p,
                         s.err ? s.err : (s.oom ? "out of memory" : "invalid JSON"));
    }
    free(s.err);
    return rc;
}

/* Runs steps while they make progress (or until more input is needed). */
static int stream_run(ckube__clist_stream *st, bool final)
{
    while (!st->failed) {
        if (!final && st->len - st->start < st->retry_at)
            return 0;
        int rc = stream_step(st, final);
        if (rc <= 0)
            return rc;
    }
    return st->failed;
}

/* Appends to the owned window (after dropping what was consumed). */
static int window_append(ckube__clist_stream *st, const char *p, size_t n)
{
    if (st->start > 0) {
        memmove(st->buf, st->buf + st->start, st->len - st->start);
        st->len -= st->start;
        st->consumed += st->start;
        st->start = 0; /* retry_at counts from start: still right */
    }
    if (st->len + n > st->cap) {
        size_t cap = st->cap ? st->cap : 65536;
        while (cap < st->len + n)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (!b)
            return stream_fail(st, window_at(st, st->len), "out of memory");
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, p, n);
    st->len += n;
    return 0;
}

int ckube__clist_stream_feed(ckube__clist_stream *st, const char *p, size_t n)
{
    if (st->failed)
        return -1;
    if (st->start < st->len) {
        /* Something is pending: it continues in this chunk. */
        if (window_append(st, p, n) != 0)
            return -1;
        return stream_run(st, false);
    }
    /* Nothing pending: decode straight from the caller's chunk, and keep
     * only its unfinished tail. */
    char *owned = st->buf;
    size_t owned_cap = st->cap;
    st->consumed += st->len;
    st->buf = (char *)p; /* read only while it is the view */
    st->start = 0;
    st->len = n;
    st->cap = n;
    int rc = stream_run(st, false);
    size_t tail = st->len - st->start;
    const char *rest = st->buf + st->start;
    st->consumed += st->start;
    st->buf = owned;
    st->cap = owned_cap;
    st->start = st->len = 0;
    if (rc == 0 && tail && window_append(st, rest, tail) != 0)
        return -1;
    return rc;
}

int ckube__clist_stream_finish(ckube__clist_stream *st, ckube__clist *out, char **err)
{
    if (err)
        *err = NULL;
    if (!st->failed)
        stream_run(st, true);
    if (st->bld && !builder_drain(st->bld))
        stream_fail(st, window_at(st, st->len), "out of memory");
    if (!st->failed && st->ph != P_END)
        stream_fail(st, window_at(st, st->len), "premature end of input");
    if (st->failed) {
        if (err)
            *err = st->err ? strdup(st->err) : strdup("invalid JSON");
        return -1;
    }
    if (st->not_list)
        return -2;
    char *rv = st->rv, *cont = st->cont;
    bool oom = false;
    size_t moved = 0;
    for (; moved < st->page.n; moved++)
        if (ckube__clist_push(out, st->page.items[moved]) != 0) {
            oom = true;
            break;
        }
    if (oom) {
        /* Give the moved ones back: out stays as it was. */
        out->n -= moved;
        if (err)
            *err = strdup("out of memory");
        return -1;
    }
    out->skipped += st->page.skipped;
    st->page.n = 0;
    free(out->resource_version);
    free(out->continue_token);
    out->resource_version = rv;
    out->continue_token = cont;
    st->rv = st->cont = NULL;
    return 0;
}

/* ---- Watch events ---- */

static ckube_watch_event_type event_type(const char *s, size_t n)
{
    static const char *const names[] = {NULL, "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    for (int i = 1; i <= CKUBE_WATCH_ERROR; i++)
        if (key_is(s, n, names[i]))
            return (ckube_watch_event_type)i;
    return 0;
}

int ckube__cobj_parse_event(const char *buf, size_t len, const ckube__cobj_opts *o,
                            ckube__cevent *ev, char **err)
{
    scan s = {.buf = buf, .p = buf, .end = buf + len};
    capture type = {0};
    const char *obj = NULL, *obj_end = NULL;
    bool ok;
    *ev = (ckube__cevent){0};
    if (err)
        *err = NULL;
    /* Pass 1: validate, find "type" and "object". */
    ws(&s);
    if (!at(&s, '{')) {
        ok = scan_value(&s, false) && scan_eof(&s);
    } else {
        ok = enter(&s);
        s.p++;
        ws(&s);
        bool more = ok && !at(&s, '}');
        if (ok && !more)
            s.p++;
        while (ok && more) {
            const char *kraw;
            size_t klen;
            if (!at(&s, '"')) {
                ok = fail(&s, s.p, "string expected");
                break;
            }
            if (!(ok = scan_string(&s, false, &kraw, &klen, NULL)))
                break;
            ws(&s);
            if (!at(&s, ':')) {
                ok = fail(&s, s.p, "':' expected");
                break;
            }
            s.p++;
            ws(&s);
            if (key_is(kraw, klen, "type")) {
                type = (capture){0};
                if (at(&s, '"')) {
                    ok = scan_string(&s, false, &type.raw, &type.n, &type.esc);
                    type.set = ok;
                } else {
                    ok = scan_value(&s, false);
                }
            } else if (key_is(kraw, klen, "object")) {
                obj = at(&s, '{') ? s.p : NULL;
                ok = scan_value(&s, false);
                obj_end = s.p;
            } else {
                ok = scan_value(&s, false);
            }
            ok = ok && next_or_close(&s, '}', &more);
        }
        ok = ok && scan_eof(&s);
    }
    if (!ok) {
        if (err)
            *err = error_text(&s);
        free(s.out);
        free(s.err);
        return -1;
    }
    free(s.err);
    s.err = NULL;
    char *ts = capture_dup(&type);
    ckube_watch_event_type t = ts ? event_type(ts, strlen(ts)) : 0;
    int rc = -2;
    if (!t || !obj) {
        if (err &&
            asprintf(err,
                     t ? "watch event %s without an object" : "got invalid watch event type: %s",
                     ts ? ts : "(none)") < 0)
            *err = NULL;
    } else if (t == CKUBE_WATCH_ERROR) {
        /* A Status: wanted as a tree, whole. */
        ev->status = ckube_json_loads(obj, (size_t)(obj_end - obj), err);
        rc = ev->status ? 0 : -2;
    } else {
        /* Pass 2: the object into its block (BOOKMARKs too: their
         * resourceVersion is all that is read). */
        scan s2 = {.buf = obj, .p = obj, .end = obj_end};
        ev->obj = scan_item(&s2, o);
        if (!ev->obj && err)
            *err = error_text(&s2);
        free(s2.out);
        free(s2.err);
        rc = ev->obj ? 0 : -2;
    }
    if (rc == 0)
        ev->type = t;
    free(ts);
    free(s.out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Building trees from compact text.                                        */

typedef struct mat {
    const char *p, *end;
    int depth;
} mat;

static inline void mws(mat *m)
{
    while (m->p < m->end && (*m->p == ' ' || *m->p == '\n' || *m->p == '\r' || *m->p == '\t'))
        m->p++;
}

/* The string at m->p ('"'): raw bytes and whether escaped; moves past. */
static bool mat_str(mat *m, const char **raw, size_t *n, bool *esc)
{
    const char *q = m->p + 1, *end = m->end;
    bool e = false;
    for (;;) {
        /* Text built by the scanner or the serializer: no bare control
         * characters, so the first special byte is a quote or a
         * backslash (or, from a tree with odd strings, one to step over). */
        q = skip_plain(q, end, false);
        if (q >= end)
            return false;
        if (*q == '"')
            break;
        if (*q == '\\') {
            e = true;
            q += 2;
            continue;
        }
        q++; /* a control character */
    }
    if (q >= end)
        return false;
    *raw = m->p + 1;
    *n = (size_t)(q - *raw);
    *esc = e;
    m->p = q + 1;
    return true;
}

/* Decodes an escaped string into a buffer (stack when small). */
typedef struct decoded {
    char small[256];
    char *p;
    size_t n;
} decoded;

static bool decode(decoded *d, const char *raw, size_t n)
{
    d->p = n <= sizeof d->small ? d->small : malloc(n);
    if (!d->p)
        return false;
    d->n = decode_string(raw, n, d->p);
    return true;
}

static void decoded_free(decoded *d)
{
    if (d->p != d->small)
        free(d->p);
}

static json_t *mat_value(mat *m);

static json_t *mat_string(mat *m)
{
    const char *raw;
    size_t n;
    bool esc;
    if (!mat_str(m, &raw, &n, &esc))
        return NULL;
    if (!esc)
        return json_stringn_nocheck(raw, n);
    decoded d;
    if (!decode(&d, raw, n))
        return NULL;
    json_t *v = json_stringn_nocheck(d.p, d.n);
    decoded_free(&d);
    return v;
}

static json_t *mat_object(mat *m)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    m->p++;
    mws(m);
    if (m->p < m->end && *m->p == '}') {
        m->p++;
        return obj;
    }
    for (;;) {
        const char *raw;
        size_t n;
        bool esc;
        mws(m);
        if (m->p >= m->end || *m->p != '"' || !mat_str(m, &raw, &n, &esc))
            goto bad;
        mws(m);
        if (m->p >= m->end || *m->p != ':')
            goto bad;
        m->p++;
        mws(m);
        json_t *v = mat_value(m);
        if (!v)
            goto bad;
        int rc;
        if (!esc) {
            rc = json_object_setn_new_nocheck(obj, raw, n, v);
        } else {
            decoded d;
            if (!decode(&d, raw, n)) {
                json_decref(v);
                goto bad;
            }
            rc = json_object_setn_new_nocheck(obj, d.p, d.n, v);
            decoded_free(&d);
        }
        if (rc != 0)
            goto bad;
        mws(m);
        if (m->p < m->end && *m->p == ',') {
            m->p++;
            continue;
        }
        if (m->p < m->end && *m->p == '}') {
            m->p++;
            return obj;
        }
        goto bad;
    }
bad:
    json_decref(obj);
    return NULL;
}

static json_t *mat_array(mat *m)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    m->p++;
    mws(m);
    if (m->p < m->end && *m->p == ']') {
        m->p++;
        return arr;
    }
    for (;;) {
        mws(m);
        json_t *v = mat_value(m);
        if (!v || json_array_append_new(arr, v) != 0)
            goto bad;
        mws(m);
        if (m->p < m->end && *m->p == ',') {
            m->p++;
            continue;
        }
        if (m->p < m->end && *m->p == ']') {
            m->p++;
            return arr;
        }
        goto bad;
    }
bad:
    json_decref(arr);
    return NULL;
}

static json_t *mat_number(mat *m)
{
    const char *q = m->p, *end = m->end;
    bool neg = false, real = false;
    if (q < end && *q == '-') {
        neg = true;
        q++;
    }
    uint64_t v = 0;
    bool overflow = false;
    const char *digits = q;
    while (q < end && is_digit(*q)) {
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
        q++;
    }
    if (q == digits)
        return NULL;
    while (q < end &&
           (is_digit(*q) || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' || *q == '-')) {
        real = true;
        q++;
    }
    size_t n = (size_t)(q - m->p);
    const char *start = m->p;
    m->p = q;
    if (!real && !overflow && (neg ? v <= (uint64_t)INT64_MAX + 1 : v <= (uint64_t)INT64_MAX))
        return json_integer(neg ? (json_int_t)(0 - v) : (json_int_t)v);
    bool ok;
    double d = parse_real(start, n, &ok);
    return ok ? json_real(d) : NULL;
}

static json_t *mat_value(mat *m)
{
    if (m->p >= m->end || m->depth > MAX_DEPTH + 8)
        return NULL;
    json_t *v;
    switch (*m->p) {
    case '{':
        m->depth++;
        v = mat_object(m);
        m->depth--;
        return v;
    case '[':
        m->depth++;
        v = mat_array(m);
        m->depth--;
        return v;
    case '"':
        return mat_string(m);
    case 't':
        if (m->end - m->p < 4 || memcmp(m->p, "true", 4) != 0)
            return NULL;
        m->p += 4;
        return json_true();
    case 'f':
        if (m->end - m->p < 5 || memcmp(m->p, "false", 5) != 0)
            return NULL;
        m->p += 5;
        return json_false();
    case 'n':
        if (m->end - m->p < 4 || memcmp(m->p, "null", 4) != 0)
            return NULL;
        m->p += 4;
        return json_null();
    default:
        return mat_number(m);
    }
}

size_t ckube__cobj_trees_built;

json_t *ckube__cobj_tree(const ckube__cobj *c)
{
    if (!c)
        return NULL;
    __atomic_add_fetch(&ckube__cobj_trees_built, 1, __ATOMIC_RELAXED);
    mat m = {.p = c->data, .end = c->data + c->json_len};
    mws(&m);
    return mat_value(&m);
}

/* Moves past the value at m->p (valid compact JSON). */
static bool skip_value(mat *m)
{
    int depth = 0;
    do {
        mws(m);
        if (m->p >= m->end)
            return false;
        char ch = *m->p;
        if (ch == '"') {
            const char *raw;
            size_t n;
            bool esc;
            if (!mat_str(m, &raw, &n, &esc))
                return false;
        } else if (ch == '{' || ch == '[') {
            depth++;
            m->p++;
        } else if (ch == '}' || ch == ']') {
            depth--;
            m->p++;
        } else if (ch == ',' || ch == ':') {
            m->p++;
        } else {
            while (m->p < m->end && *m->p != ',' && *m->p != '}' && *m->p != ']' && *m->p != ':')
                m->p++;
        }
    } while (depth > 0);
    return true;
}

/* Moves m to the value of member `key` of the object at m->p; false when
 * there is none. The last of duplicate keys wins, as in the tree. */
static bool find_member(mat *m, const char *key)
{
    mws(m);
    if (m->p >= m->end || *m->p != '{')
        return false;
    m->p++;
    const char *found = NULL;
    for (;;) {
        mws(m);
        if (m->p >= m->end || *m->p == '}')
            break;
        const char *raw;
        size_t n;
        bool esc;
        if (*m->p != '"' || !mat_str(m, &raw, &n, &esc))
            return false;
        mws(m);
        if (m->p >= m->end || *m->p != ':')
            return false;
        m->p++;
        mws(m);
        bool match;
        if (esc) {
            decoded d;
            if (!decode(&d, raw, n))
                return false;
            match = key_is(d.p, d.n, key);
            decoded_free(&d);
        } else {
            match = key_is(raw, n, key);
        }
        if (match)
            found = m->p;
        if (!skip_value(m))
            return false;
        mws(m);
        if (m->p < m->end && *m->p == ',')
            m->p++;
    }
    if (!found)
        return false;
    m->p = found;
    return true;
}

json_t *ckube__cobj_labels(const ckube__cobj *c)
{
    mat m = {.p = c->data, .end = c->data + c->json_len};
    if (!find_member(&m, "metadata") || !find_member(&m, "labels"))
        return NULL;
    return mat_value(&m);
}

/* ------------------------------------------------------------------------ */
/* Serializing trees.                                                       */

static void ser_string(ckube__strbuf *b, const char *s, size_t n)
{
    ckube__sb_reserve(b, n + 2);
    ckube__sb_addc(b, '"');
    const char *p = s, *end = s + n;
    while (p < end) {
        const char *run = p;
        p = skip_plain(p, end, false);
        if (p > run)
            ckube__sb_addn(b, run, (size_t)(p - run));
        if (p >= end)
            break;
        unsigned char ch = (unsigned char)*p++;
        char esc[8];
        switch (ch) {
        case '"':
            ckube__sb_add(b, "\\\"");
            break;
        case '\\':
            ckube__sb_add(b, "\\\\");
            break;
        case '\b':
            ckube__sb_add(b, "\\b");
            break;
        case '\f':
            ckube__sb_add(b, "\\f");
            break;
        case '\n':
            ckube__sb_add(b, "\\n");
            break;
        case '\r':
            ckube__sb_add(b, "\\r");
            break;
        case '\t':
            ckube__sb_add(b, "\\t");
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            ckube__sb_add(b, esc);
        }
    }
    ckube__sb_addc(b, '"');
}

/* jansson's format for reals: %.17g, with ".0" when it looks integral. */
static void ser_real(ckube__strbuf *b, double d)
{
    char buf[64];
    locale_t loc = numeric_locale(), old = loc ? uselocale(loc) : (locale_t)0;
    snprintf(buf, sizeof buf, "%.17g", d);
    if (loc)
        uselocale(old);
    if (!strpbrk(buf, ".eE"))
        strcat(buf, ".0");
    ckube__sb_add(b, buf);
}

/* level: 0 the object, 1 its metadata, 2 anything deeper. */
static void ser_value(ckube__strbuf *b, const json_t *v, int level, const ckube__cobj_opts *o)
{
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        ckube__sb_addc(b, '{');
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            const char *k = json_object_iter_key(it);
            size_t kn = json_object_iter_key_len(it);
            int child = 2;
            if (level == 0) {
                if (key_is(k, kn, "metadata"))
                    child = 1;
                else if (o && o->metadata_only && !key_is(k, kn, "apiVersion") &&
                         !key_is(k, kn, "kind"))
                    continue;
            } else if (level == 1 && key_is(k, kn, "managedFields") &&
                       !(o && o->keep_managed_fields)) {
                continue;
            }
            if (!first)
                ckube__sb_addc(b, ',');
            first = false;
            ser_string(b, k, kn);
            ckube__sb_addc(b, ':');
            ser_value(b, json_object_iter_value(it), child, o);
        }
        ckube__sb_addc(b, '}');
        break;
    }
    case JSON_ARRAY: {
        ckube__sb_addc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                ckube__sb_addc(b, ',');
            ser_value(b, json_array_get(v, i), 2, o);
        }
        ckube__sb_addc(b, ']');
        break;
    }
    case JSON_STRING:
        ser_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        ckube__sb_add(b, num);
        break;
    case JSON_REAL:
        ser_real(b, json_real_value(v));
        break;
    case JSON_TRUE:
        ckube__sb_add(b, "true");
        break;
    case JSON_FALSE:
        ckube__sb_add(b, "false");
        break;
    case JSON_NULL:
        ckube__sb_add(b, "null");
        break;
    }
}

static field str_field(const char *s)
{
    return (field){s ? s : "", s ? strlen(s) : 0};
}

ckube__cobj *ckube__cobj_from_json(const json_t *obj, const ckube__cobj_opts *o)
{
    if (!json_is_object(obj))
        return NULL;
    ckube__strbuf b = {0};
    ckube__sb_reserve(&b, 1024);
    ser_value(&b, obj, 0, o);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    json_t *gen = ckube_json_get_path(obj, "metadata.generation");
    ckube__cobj *c =
        cobj_build(b.s, b.len, str_field(ckube_obj_namespace(obj)), str_field(ckube_obj_name(obj)),
                   str_field(ckube_obj_resource_version(obj)),
                   json_is_integer(gen) ? json_integer_value(gen) : 0);
    free(b.s);
    return c;
}

/* ------------------------------------------------------------------------ */
/* Objects in either form.                                                  */

ckube__obj ckube__obj_ref(ckube__obj o)
{
    ckube_obj_ref(o.j);
    ckube__cobj_ref(o.c);
    return o;
}

void ckube__obj_unref(ckube__obj o)
{
    ckube_obj_unref(o.j);
    ckube__cobj_unref(o.c);
}

const char *ckube__obj_key(ckube__obj o, char **tofree)
{
    *tofree = NULL;
    if (o.c)
        return o.c->key_len ? ckube__cobj_key(o.c) : NULL;
    if (o.j)
        return *tofree = ckube_meta_namespace_key(o.j);
    return NULL;
}

const char *ckube__obj_rv(ckube__obj o)
{
    if (o.c)
        return ckube__cobj_rv(o.c);
    return o.j ? ckube_obj_resource_version(o.j) : NULL;
}

json_t *ckube__obj_tree(ckube__obj o)
{
    if (o.j)
        return ckube_obj_ref(o.j);
    return ckube__cobj_tree(o.c);
}
