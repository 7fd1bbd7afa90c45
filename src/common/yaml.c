/* YAML <-> JSON conversion on libyaml; see ckube/yaml.h for the rules.
 *
 * Loading walks libyaml's event stream (never its recursive-free but
 * unbounded document loader) with an explicit stack of open collections,
 * so nesting depth is checked before anything recurses. Scalar resolution
 * mirrors go-yaml v2's resolve() as used by sigs.k8s.io/yaml; the code is
 * our own, written from the documented behaviour.
 */
#include "ckube/yaml.h"
#include "common/json_cost.h"
#include "common/text.h"
#include "common/utf8.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define TAG_PREFIX "tag:yaml.org,2002:"
/* Longest scalar text quoted in an error message. */
#define ERR_SNIPPET 64
/* Dump recursion limit (jansson values built by hand may be deep). */
#define DUMP_MAX_DEPTH 10000

/* ------------------------------------------------------------------ */
/* Scalar resolution                                                    */
/* ------------------------------------------------------------------ */

enum scalar_kind {
    SK_NULL,
    SK_BOOL,
    SK_INT,   /* fits int64 */
    SK_UINT,  /* above INT64_MAX, fits uint64 */
    SK_BIG,   /* beyond uint64 (go-yaml's big.Int); only `approx` kept */
    SK_FLOAT, /* may be inf/nan */
    SK_STR,
};

struct scalar {
    enum scalar_kind kind;
    bool b;
    int64_t i;
    uint64_t u;
    double f;      /* SK_FLOAT value; SK_BIG approximation */
    const char *s; /* SK_STR text (borrowed, or `owned`) */
    size_t len;
    char *owned; /* SK_STR decoded from !!binary (owned) */
};

static void scalar_clear(struct scalar *sc)
{
    free(sc->owned);
    sc->owned = NULL;
}

enum word_value { W_TRUE, W_FALSE, W_NULL, W_NAN, W_PINF, W_NINF };

/* go-yaml v2's table of plain scalars with fixed meanings (YAML 1.1). */
static const struct {
    const char *text;
    enum word_value value;
} resolve_words[] = {
    {"y", W_TRUE},      {"Y", W_TRUE},      {"yes", W_TRUE},    {"Yes", W_TRUE},
    {"YES", W_TRUE},    {"true", W_TRUE},   {"True", W_TRUE},   {"TRUE", W_TRUE},
    {"on", W_TRUE},     {"On", W_TRUE},     {"ON", W_TRUE},     {"n", W_FALSE},
    {"N", W_FALSE},     {"no", W_FALSE},    {"No", W_FALSE},    {"NO", W_FALSE},
    {"false", W_FALSE}, {"False", W_FALSE}, {"FALSE", W_FALSE}, {"off", W_FALSE},
    {"Off", W_FALSE},   {"OFF", W_FALSE},   {"", W_NULL},       {"~", W_NULL},
    {"null", W_NULL},   {"Null", W_NULL},   {"NULL", W_NULL},   {".nan", W_NAN},
    {".NaN", W_NAN},    {".NAN", W_NAN},    {".inf", W_PINF},   {".Inf", W_PINF},
    {".INF", W_PINF},   {"+.inf", W_PINF},  {"+.Inf", W_PINF},  {"+.INF", W_PINF},
    {"-.inf", W_NINF},  {"-.Inf", W_NINF},  {"-.INF", W_NINF},
};

static bool lookup_word(const char *s, size_t n, struct scalar *out)
{
    if (n > 5) /* the longest words: "false", "+.inf" */
        return false;
    for (size_t k = 0; k < sizeof resolve_words / sizeof resolve_words[0]; k++) {
        const char *w = resolve_words[k].text;
        if (strlen(w) != n || memcmp(w, s, n) != 0)
            continue;
        switch (resolve_words[k].value) {
        case W_TRUE:
        case W_FALSE:
            out->kind = SK_BOOL;
            out->b = resolve_words[k].value == W_TRUE;
            break;
        case W_NULL:
            out->kind = SK_NULL;
            break;
        case W_NAN:
            out->kind = SK_FLOAT;
            out->f = NAN;
            break;
        case W_PINF:
        case W_NINF:
            out->kind = SK_FLOAT;
            out->f = resolve_words[k].value == W_PINF ? INFINITY : -INFINITY;
            break;
        }
        return true;
    }
    return false;
}

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'Z')
        return c - 'A' + 10;
    return 99;
}

enum parse_result { P_OK = 0, P_RANGE = 1, P_SYNTAX = -1 };

/* Unsigned digits in `base`, or with base 0 Go's prefixes: 0x/0X hex,
 * 0o/0O octal, 0b/0B binary, a lone leading 0 octal, else decimal (Go's
 * strconv.ParseUint with base 0). No sign, no underscores. P_RANGE when the
 * syntax is valid but the value exceeds uint64; *approx always receives the
 * value as a double when the syntax is valid. */
static enum parse_result parse_go_uint(const char *s, size_t n, int base, uint64_t *out,
                                       double *approx)
{
    if (n == 0)
        return P_SYNTAX;
    if (base == 0) {
        base = 10;
        if (s[0] == '0') {
            char p = n >= 3 ? (char)(s[1] | 0x20) : 0;
            base = p == 'x' ? 16 : p == 'b' ? 2 : 8;
            size_t skip = (p == 'x' || p == 'b' || p == 'o') ? 2 : 1;
            s += skip;
            n -= skip;
        }
    }
    uint64_t v = 0;
    double d = 0;
    bool overflow = false;
    for (size_t k = 0; k < n; k++) {
        int dv = digit_value(s[k]);
        if (dv >= base)
            return P_SYNTAX;
        d = d * base + dv;
        if (v > (UINT64_MAX - (uint64_t)dv) / (uint64_t)base)
            overflow = true;
        else
            v = v * (uint64_t)base + (uint64_t)dv;
    }
    *out = v;
    *approx = d;
    return overflow ? P_RANGE : P_OK;
}

/* Go's strconv.ParseInt: optional sign, then parse_go_uint, within int64. */
static enum parse_result parse_go_int(const char *s, size_t n, int base, int64_t *out)
{
    bool neg = false;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        s++;
        n--;
    }
    uint64_t mag;
    double approx;
    enum parse_result r = parse_go_uint(s, n, base, &mag, &approx);
    if (r != P_OK)
        return r;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return P_RANGE;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return P_RANGE;
        *out = (int64_t)mag;
    }
    return P_OK;
}

static size_t count_digits(const char *s, size_t n, size_t k)
{
    size_t start = k;
    while (k < n && s[k] >= '0' && s[k] <= '9')
        k++;
    return k - start;
}

/* go-yaml's float pattern: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static bool is_yaml_float(const char *s, size_t n)
{
    size_t k = 0;
    if (k < n && (s[k] == '+' || s[k] == '-'))
        k++;
    if (k < n && s[k] == '.') {
        size_t d = count_digits(s, n, k + 1);
        if (d == 0)
            return false;
        k += 1 + d;
    } else {
        size_t d = count_digits(s, n, k);
        if (d == 0)
            return false;
        k += d;
        if (k < n && s[k] == '.')
            k += 1 + count_digits(s, n, k + 1);
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        size_t d = count_digits(s, n, k);
        if (d == 0)
            return false;
        k += d;
    }
    return k == n;
}

/* Like Go's ParseFloat on text already matched by is_yaml_float: fails on
 * overflow to infinity (underflow to 0 is fine, as in Go). `s` must be
 * NUL-terminated. */
static bool parse_finite_float(const char *s, double *out)
{
    char *end;
    double d = strtod(s, &end);
    if (*end != '\0' || isinf(d))
        return false;
    *out = d;
    return true;
}

static void set_int(struct scalar *out, int64_t v)
{
    out->kind = SK_INT;
    out->i = v;
}

/* The digit/sign branch of go-yaml's resolve(), on `plain` (the scalar with
 * every '_' removed, NUL-terminated). */
static void resolve_number(const char *plain, size_t n, struct scalar *out)
{
    int64_t iv;
    uint64_t uv;
    double approx;
    if (parse_go_int(plain, n, 0, &iv) == P_OK) {
        set_int(out, iv);
        return;
    }
    enum parse_result ur = parse_go_uint(plain, n, 0, &uv, &approx);
    if (ur == P_OK) {
        out->kind = SK_UINT;
        out->u = uv;
        return;
    }
    if (is_yaml_float(plain, n) && parse_finite_float(plain, &out->f)) {
        out->kind = SK_FLOAT;
        return;
    }
    if (n >= 2 && plain[0] == '0' && plain[1] == 'b') {
        /* go-yaml's own binary fallback, which also takes a sign after
         * the prefix ("0b-101"). */
        if (parse_go_int(plain + 2, n - 2, 2, &iv) == P_OK) {
            set_int(out, iv);
            return;
        }
        if (parse_go_uint(plain + 2, n - 2, 2, &uv, &approx) == P_OK) {
            out->kind = SK_UINT;
            out->u = uv;
            return;
        }
    } else if (n >= 3 && plain[0] == '-' && plain[1] == '0' && plain[2] == 'b') {
        /* ParseInt("-" + rest, 2): the rest may not carry its own sign. */
        const char *d = plain + 3;
        size_t dn = n - 3;
        if (!(dn > 0 && (d[0] == '+' || d[0] == '-')) &&
            parse_go_uint(d, dn, 2, &uv, &approx) == P_OK && uv <= (uint64_t)INT64_MAX + 1) {
            set_int(out, uv == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)uv);
            return;
        }
    }
    if (ur == P_RANGE) {
        out->kind = SK_BIG;
        out->f = approx;
    }
}

/* Resolves a plain (untagged, or tagged with a resolvable type) scalar the
 * way go-yaml v2 does. Returns 0, or -1 when out of memory. */
static int resolve_plain(const char *s, size_t n, struct scalar *out)
{
    memset(out, 0, sizeof *out);
    out->kind = SK_STR;
    out->s = s;
    out->len = n;
    if (lookup_word(s, n, out))
        return 0;
    char c = s[0]; /* n > 0: "" is in the word table */
    if (c == '.') {
        /* Go's ParseFloat on the raw text: no '_', no sign here. */
        if (!is_yaml_float(s, n) || memchr(s, '\0', n))
            return 0;
        char *tmp = strndup(s, n);
        if (!tmp)
            return -1;
        if (parse_finite_float(tmp, &out->f))
            out->kind = SK_FLOAT;
        free(tmp);
        return 0;
    }
    if (!(c == '+' || c == '-' || (c >= '0' && c <= '9')))
        return 0;
    if (memchr(s, '\0', n))
        return 0;
    char *plain = malloc(n + 1);
    if (!plain)
        return -1;
    size_t pn = 0;
    for (size_t k = 0; k < n; k++)
        if (s[k] != '_')
            plain[pn++] = s[k];
    plain[pn] = '\0';
    resolve_number(plain, pn, out);
    free(plain);
    if (out->kind == SK_STR) {
        out->s = s;
        out->len = n;
    }
    return 0;
}

static const char *kind_tag(enum scalar_kind k)
{
    switch (k) {
    case SK_NULL:
        return "!!null";
    case SK_BOOL:
        return "!!bool";
    case SK_INT:
    case SK_UINT:
    case SK_BIG:
        return "!!int";
    case SK_FLOAT:
        return "!!float";
    case SK_STR:
        break;
    }
    return "!!str";
}

/* Parses 1 or 2 digits (Go's getnum) into *v. */
static bool take_num(const char *s, size_t n, size_t *k, int maxdigits, int *v)
{
    int d = 0, val = 0;
    while (*k < n && d < maxdigits && s[*k] >= '0' && s[*k] <= '9') {
        val = val * 10 + (s[*k] - '0');
        (*k)++;
        d++;
    }
    *v = val;
    return d > 0;
}

static int days_in_month(int month, int year)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* The timestamp shapes go-yaml accepts: "2006-1-2", "2006-1-2T15:4:5[.f]Z"
 * or with a +07:00 offset (also lower-case 't'), "2006-1-2 15:4:5[.f]". */
static bool is_timestamp(const char *s, size_t n)
{
    size_t k = 0;
    int year, month, day, hour, min, sec;
    if (n < 4 || count_digits(s, n, 0) < 4)
        return false;
    take_num(s, n, &k, 4, &year);
    if (k >= n || s[k] != '-')
        return false;
    k++;
    if (!take_num(s, n, &k, 2, &month) || k >= n || s[k] != '-')
        return false;
    k++;
    if (!take_num(s, n, &k, 2, &day) || month < 1 || month > 12 || day < 1 ||
        day > days_in_month(month, year))
        return false;
    if (k == n)
        return true;
    char sep = s[k++];
    if (sep != 'T' && sep != 't' && sep != ' ')
        return false;
    if (!take_num(s, n, &k, 2, &hour) || hour > 23 || k >= n || s[k++] != ':')
        return false;
    if (!take_num(s, n, &k, 2, &min) || min > 59 || k >= n || s[k++] != ':')
        return false;
    if (!take_num(s, n, &k, 2, &sec) || sec > 59)
        return false;
    if (k + 1 < n && (s[k] == '.' || s[k] == ',') && s[k + 1] >= '0' && s[k + 1] <= '9')
        k += 1 + count_digits(s, n, k + 1);
    if (sep == ' ')
        return k == n;
    if (k < n && s[k] == 'Z')
        return k + 1 == n;
    int oh, om;
    if (k < n && (s[k] == '+' || s[k] == '-') && n - k == 6) {
        k++;
        return count_digits(s, n, k) == 2 && take_num(s, n, &k, 2, &oh) && s[k] == ':' &&
               (k++, count_digits(s, n, k) == 2) && take_num(s, n, &k, 2, &om);
    }
    return false;
}

/* YAML 1.1 sexagesimal numbers ("1:20", "-1:30:00.5"), which go-yaml reads
 * as strings but other YAML 1.1 parsers read as numbers; dumped quoted. */
static bool is_base60(const char *s, size_t n)
{
    size_t k = 0;
    if (k < n && (s[k] == '+' || s[k] == '-'))
        k++;
    if (k >= n || s[k] < '0' || s[k] > '9')
        return false;
    while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_'))
        k++;
    int groups = 0;
    while (k < n && s[k] == ':') {
        k++;
        size_t d = count_digits(s, n, k);
        if (d == 0 || d > 2 || (d == 2 && s[k] > '5'))
            return false;
        k += d;
        groups++;
    }
    if (groups == 0)
        return false;
    if (k < n && s[k] == '.') {
        k++;
        while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_'))
            k++;
    }
    return k == n;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes padded standard base64, skipping '\r' and '\n' anywhere as Go's
 * decoder does. Returns malloc'd bytes (NUL-terminated for convenience)
 * with *out_len, or NULL when the input is invalid or memory runs out. */
char *ckube__base64_decode(const char *s, size_t n, size_t *out_len)
{
    unsigned char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned quad[4];
    int q = 0, pad = 0;
    bool ended = false;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '\r' || c == '\n')
            continue;
        if (ended)
            goto bad;
        if (c == '=') {
            if (q < 2)
                goto bad;
            quad[q++] = 0;
            pad++;
        } else {
            int v = b64_value(c);
            if (v < 0 || pad)
                goto bad;
            quad[q++] = (unsigned)v;
        }
        if (q == 4) {
            unsigned bits = quad[0] << 18 | quad[1] << 12 | quad[2] << 6 | quad[3];
            unsigned char b[3] = {(unsigned char)(bits >> 16), (unsigned char)(bits >> 8),
                                  (unsigned char)bits};
            for (int j = 0; j < 3 - pad; j++)
                out[o++] = b[j];
            ended = pad > 0;
            q = 0;
        }
    }
    if (q != 0)
        goto bad;
    out[o] = '\0';
    *out_len = o;
    return (char *)out;
bad:
    free(out);
    return NULL;
}

/* Copies bytes replacing each invalid UTF-8 byte with U+FFFD, as Go's JSON
 * encoder does for strings. Returns malloc'd text or NULL (no memory). */
static char *utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    char *out = malloc(n * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t k = 0; k < n;) {
        size_t l = ckube__utf8_decode(p + k, n - k, NULL);
        if (l == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            k++;
        } else {
            memcpy(out + o, p + k, l);
            o += l;
            k += l;
        }
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}

/* ------------------------------------------------------------------ */
/* Loader state                                                         */
/* ------------------------------------------------------------------ */

/* One open collection. */
struct frame {
    json_t *node; /* object or array being built (owned) */
    bool is_map;
    long anchor;          /* index of this collection's anchor, or -1 */
    size_t start_decodes; /* loader.decodes before this collection */
    size_t start_cmem;    /* loader.cmem before this collection */
    size_t json;          /* JSON text of the members or elements so far */
    int child_height;     /* max height of the children added so far */
    /* Mappings only. */
    bool have_key; /* a key was read; the next node is its value */
    bool merge;    /* ...and that key is the merge key `<<` */
    char *key;     /* the key (owned) unless merge */
    size_t key_len;
    json_t *merges; /* objects to merge in at the end (owned), or NULL */
};

/* One anchor definition of the current document, with what an alias to it
 * costs: the figures are taken when its node ends. */
struct anchor {
    char *name; /* owned */
    bool done;  /* false while its collection is still open */
    bool is_collection;
    json_t *value; /* owned; NULL when JSON cannot hold it (e.g. .inf) */
    char *key;     /* scalar as a mapping key (owned), NULL if unusable */
    size_t key_len;
    size_t decodes; /* go-yaml decode operations of the node (its subtree) */
    size_t cmem;    /* memory of its collections and slots: what a copy takes */
    size_t json;    /* its compact JSON text */
    int height;     /* collection nesting of the subtree, 0 for scalars */
};

struct loader {
    yaml_parser_t parser;
    const char *buf;
    size_t len;
    struct frame *frames;
    size_t depth, frames_cap;
    struct anchor *anchors;
    size_t nanchors, anchors_cap;
    json_t *anchor_index; /* name -> index into anchors (latest definition) */
    json_t *root;         /* finished value of the current document (owned) */
    /* go-yaml v2's counters for its aliasing ratio rule, per document:
     * decode operations, and those made inside an alias's expansion. */
    size_t decodes, alias_decodes;
    /* Estimated memory (json_cost.h) of what this call built; the part in
     * collections and their slots (what copying a subtree repeats: its
     * scalars are shared); what alias expansion added, in memory and in
     * JSON text. */
    size_t mem, cmem, alias_mem, alias_json;
    ckube_yaml_limits lim;
    bool too_large; /* failed on lim.max_memory */
    char *err;      /* first error (owned) */
};

__attribute__((format(printf, 3, 4))) static int fail(struct loader *l, size_t line,
                                                      const char *fmt, ...)
{
    if (l->err)
        return -1;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (rc < 0)
        msg = NULL;
    if (asprintf(&l->err, "yaml: line %zu: %s", line, msg ? msg : "out of memory") < 0)
        l->err = NULL;
    free(msg);
    return -1;
}

static int fail_oom(struct loader *l, size_t line)
{
    return fail(l, line, "out of memory");
}

/* go-yaml reports aliasing without a line. */
static int fail_aliasing(struct loader *l)
{
    if (!l->err && !(l->err = strdup("yaml: document contains excessive aliasing")))
        return -1;
    return -1;
}

/* ------------------------------------------------------------------ */
/* Bounds                                                               */
/* ------------------------------------------------------------------ */

/* go-yaml v2's allowedAliasRatio: the share of a document's decode
 * operations that may come from aliases, by the document's size. */
static double allowed_alias_ratio(size_t decodes)
{
    const double low = 400000, high = 4000000;
    if (decodes <= low)
        return 0.99;
    if (decodes >= high)
        return 0.10;
    return 0.99 - 0.89 * (((double)decodes - low) / (high - low));
}

/* go-yaml v2 checks its rule at every decode operation. Within one event
 * both counters only grow (an alias adds as many aliased operations as
 * operations, less one), which raises the ratio while the allowed ratio
 * falls, so checking after the event's counts is checking at each of
 * them. */
static int check_ratio(struct loader *l)
{
    size_t d = l->decodes, a = l->alias_decodes;
    if (a > 100 && d > 1000 && (double)a / (double)d > allowed_alias_ratio(d))
        return fail_aliasing(l);
    return 0;
}

static bool over(size_t have, size_t add, size_t max)
{
    return max && (add > max || have > max - add);
}

/* Accounts `bytes` of memory about to be allocated for a node. */
static int charge(struct loader *l, size_t bytes, bool container, size_t line)
{
    if (over(l->mem, bytes, l->lim.max_memory)) {
        l->too_large = true;
        return fail(l, line, "document too large: decoding it needs more than %zu bytes of memory",
                    l->lim.max_memory);
    }
    l->mem += bytes;
    if (container)
        l->cmem += bytes;
    return 0;
}

/* Accounts what an alias is about to add: memory `bytes` (collections
 * copied, or a key's text) and `json` bytes of text. */
static int charge_alias(struct loader *l, size_t bytes, size_t json)
{
    if (over(l->alias_mem, bytes, l->lim.max_alias_memory) ||
        over(l->alias_json, json, l->lim.max_alias_json) || over(l->mem, bytes, l->lim.max_memory))
        return fail_aliasing(l);
    l->alias_mem += bytes;
    l->alias_json += json;
    l->mem += bytes;
    l->cmem += bytes;
    return 0;
}

/* Length of `s` as a JSON string: quotes, and escapes as encoders write
 * them (\n and friends in two bytes, other control bytes in six). */
static size_t json_text_len(const char *s, size_t n)
{
    size_t len = n + 2;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            len += 1;
        else if (c < 0x20)
            len += 5;
    }
    return len;
}

/* JSON text of a scalar value. */
static size_t value_json_len(const json_t *v)
{
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_STRING:
        return json_text_len(json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return (size_t)snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL:
        return 24; /* at most "-1.2345678901234567e-308" */
    case JSON_TRUE:
    case JSON_NULL:
        return 4;
    case JSON_FALSE:
        return 5;
    default:
        return 2;
    }
}

/* Number of lines in the input; a final newline does not start a line. */
static size_t input_lines(const struct loader *l)
{
    size_t n = 0;
    for (size_t k = 0; k < l->len; k++)
        n += l->buf[k] == '\n';
    if (l->len > 0 && l->buf[l->len - 1] != '\n')
        n++;
    return n ? n : 1;
}

/* 1-based line of a libyaml mark. libyaml puts end-of-stream problems on a
 * line after the last one; those are reported on the last line. */
static size_t mark_line(const struct loader *l, const yaml_mark_t *m)
{
    size_t line = m->line + 1, last = input_lines(l);
    return line > last ? last : line;
}

/* Reports libyaml's own error with a 1-based line, plus where the construct
 * it was reading started when that was on another line ("while scanning a
 * quoted scalar at line 2"). */
static int parser_fail(struct loader *l)
{
    const yaml_parser_t *p = &l->parser;
    const char *problem = p->problem ? p->problem : "unknown problem parsing YAML content";
    if (p->error == YAML_MEMORY_ERROR)
        return fail(l, mark_line(l, &p->mark), "out of memory");
    size_t line;
    if (p->error == YAML_READER_ERROR) {
        /* Reader errors carry a byte offset, not a mark. */
        size_t end = p->problem_offset < l->len ? p->problem_offset : l->len;
        line = 1;
        for (size_t k = 0; k < end; k++)
            line += l->buf[k] == '\n';
    } else {
        line = mark_line(l, &p->problem_mark);
    }
    size_t ctx_line = mark_line(l, &p->context_mark);
    if (p->context && ctx_line != line)
        return fail(l, line, "%s (%s at line %zu)", problem, p->context, ctx_line);
    return fail(l, line, "%s", problem);
}

static void anchors_reset(struct loader *l)
{
    for (size_t k = 0; k < l->nanchors; k++) {
        free(l->anchors[k].name);
        free(l->anchors[k].key);
        json_decref(l->anchors[k].value);
    }
    l->nanchors = 0;
    json_object_clear(l->anchor_index);
}

static void frame_clear(struct frame *f)
{
    json_decref(f->node);
    free(f->key);
    json_decref(f->merges);
}

static void loader_free(struct loader *l)
{
    while (l->depth > 0)
        frame_clear(&l->frames[--l->depth]);
    free(l->frames);
    anchors_reset(l);
    free(l->anchors);
    json_decref(l->anchor_index);
    json_decref(l->root);
    yaml_parser_delete(&l->parser);
}

static int loader_init(struct loader *l, const char *buf, size_t len, const ckube_yaml_limits *lim)
{
    memset(l, 0, sizeof *l);
    if (lim)
        l->lim = *lim;
    l->buf = buf ? buf : "";
    l->len = buf ? len : 0;
    l->anchor_index = json_object();
    if (!l->anchor_index)
        return -1;
    if (!yaml_parser_initialize(&l->parser)) {
        json_decref(l->anchor_index);
        return -1;
    }
    yaml_parser_set_input_string(&l->parser, (const unsigned char *)l->buf, l->len);
    return 0;
}

static struct anchor *anchor_find(struct loader *l, const char *name)
{
    json_t *idx = json_object_get(l->anchor_index, name);
    return idx ? &l->anchors[json_integer_value(idx)] : NULL;
}

/* Adds a definition (shadowing earlier ones of the same name). Returns its
 * index, or -1 when out of memory. */
static long anchor_add(struct loader *l, const char *name)
{
    if (l->nanchors == l->anchors_cap) {
        size_t cap = l->anchors_cap ? l->anchors_cap * 2 : 16;
        struct anchor *a = realloc(l->anchors, cap * sizeof *a);
        if (!a)
            return -1;
        l->anchors = a;
        l->anchors_cap = cap;
    }
    struct anchor *a = &l->anchors[l->nanchors];
    memset(a, 0, sizeof *a);
    a->name = strdup(name);
    if (!a->name)
        return -1;
    if (json_object_set_new(l->anchor_index, name, json_integer((json_int_t)l->nanchors)) < 0) {
        free(a->name);
        return -1;
    }
    return (long)l->nanchors++;
}

/* ------------------------------------------------------------------ */
/* Scalars to JSON values and keys                                       */
/* ------------------------------------------------------------------ */

/* Resolves a scalar event: tags first, then go-yaml's implicit rules. */
static int resolve_event(struct loader *l, const yaml_event_t *ev, struct scalar *out)
{
    const char *tag = (const char *)ev->data.scalar.tag;
    const char *val = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    size_t line = ev->start_mark.line + 1;

    memset(out, 0, sizeof *out);
    out->kind = SK_STR;
    out->s = val;
    out->len = len;
    if (!tag) {
        /* Quoted and block scalars are strings; plain ones are resolved. */
        if (ev->data.scalar.plain_implicit && resolve_plain(val, len, out) < 0)
            return fail_oom(l, line);
        return 0;
    }
    if (strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)) != 0)
        return 0; /* `!`, `!foo`, %TAG'd local tags: the text as is */
    const char *t = tag + strlen(TAG_PREFIX);
    if (strcmp(t, "binary") == 0) {
        size_t n;
        char *raw = ckube__base64_decode(val, len, &n);
        if (!raw)
            return fail(l, line, "!!binary value contains invalid base64 data");
        out->owned = utf8_sanitize(raw, n, &out->len);
        free(raw);
        if (!out->owned)
            return fail_oom(l, line);
        out->s = out->owned;
        return 0;
    }
    enum scalar_kind want;
    bool timestamp = false;
    if (strcmp(t, "bool") == 0)
        want = SK_BOOL;
    else if (strcmp(t, "int") == 0)
        want = SK_INT;
    else if (strcmp(t, "float") == 0)
        want = SK_FLOAT;
    else if (strcmp(t, "null") == 0)
        want = SK_NULL;
    else if (strcmp(t, "timestamp") == 0)
        timestamp = true, want = SK_STR;
    else
        return 0; /* !!str, !!merge, !!map on a scalar, unknown: a string */

    if (timestamp && is_timestamp(val, len))
        return 0; /* timestamps stay strings, as go-yaml gives interface{} */
    if (resolve_plain(val, len, out) < 0)
        return fail_oom(l, line);
    enum scalar_kind got = out->kind;
    if (!timestamp && (got == want || (want == SK_INT && (got == SK_UINT || got == SK_BIG))))
        return 0;
    if (want == SK_FLOAT && got == SK_INT) {
        out->kind = SK_FLOAT;
        out->f = (double)out->i;
        return 0;
    }
    return fail(l, line, "cannot decode %s `%.*s%s` as a !!%s", kind_tag(got),
                (int)(len > ERR_SNIPPET ? ERR_SNIPPET : len), val, len > ERR_SNIPPET ? "..." : "",
                t);
}

/* The JSON value sigs.k8s.io/yaml would print for a scalar. Returns a new
 * reference, or NULL with *why set to the reason. */
static json_t *scalar_json(const struct scalar *sc, const char **why)
{
    json_t *v = NULL;
    *why = "out of memory";
    switch (sc->kind) {
    case SK_NULL:
        return json_null();
    case SK_BOOL:
        return json_boolean(sc->b);
    case SK_INT:
        return json_integer((json_int_t)sc->i);
    case SK_UINT:
        return json_real((double)sc->u);
    case SK_BIG:
        if (!isfinite(sc->f)) {
            *why = "integer is too large to represent";
            return NULL;
        }
        return json_real(sc->f);
    case SK_FLOAT:
        if (isnan(sc->f) || isinf(sc->f)) {
            *why = ".inf and .nan cannot be represented in JSON";
            return NULL;
        }
        /* Go's JSON encoder prints integral floats below 1e21 without a
         * fraction ("1" for 1.0), which then reads back as an integer. */
        if (sc->f == trunc(sc->f) && fabs(sc->f) < 1e21 && sc->f >= -0x1p63 && sc->f < 0x1p63)
            return json_integer((json_int_t)sc->f);
        return json_real(sc->f);
    case SK_STR:
        v = json_stringn(sc->s, sc->len);
        if (!v)
            *why = "string is not valid UTF-8";
        return v;
    }
    return NULL;
}

/* Formats like Go's strconv.FormatFloat(d, 'g', -1, 32), which
 * sigs.k8s.io/yaml uses for float keys: the shortest digits that round-trip
 * through float32, exponent form when the exponent is < -4 or >= 6. */
static void format_go_float32(double d, char *out, size_t n)
{
    /* Out-of-range double -> float conversion is undefined in C; Go rounds
     * it to infinity. */
    float f = isfinite(d) && fabs(d) >= 0x1.ffffffp127 ? (d > 0 ? INFINITY : -INFINITY) : (float)d;
    if (isnan(f)) {
        snprintf(out, n, ".nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, n, f > 0 ? ".inf" : "-.inf");
        return;
    }
    if (f == 0) {
        snprintf(out, n, signbit(f) ? "-0" : "0");
        return;
    }
    char tmp[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, (double)f);
        if (strtof(tmp, NULL) == f)
            break;
    }
    /* tmp is "[-]D[.DDD]e[+-]XX": collect the digits and the exponent. */
    bool neg = tmp[0] == '-';
    char digits[16];
    int nd = 0;
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && nd < (int)sizeof digits - 1)
            digits[nd++] = *p;
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    size_t o = 0;
    char buf[64];
    if (neg)
        buf[o++] = '-';
    if (exp < -4 || exp >= 6) {
        buf[o++] = digits[0];
        if (nd > 1) {
            buf[o++] = '.';
            for (int k = 1; k < nd; k++)
                buf[o++] = digits[k];
        }
        o += (size_t)snprintf(buf + o, sizeof buf - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
    } else {
        int dp = exp + 1; /* digits before the decimal point */
        if (dp <= 0)
            buf[o++] = '0';
        /* exp is in [-4, 6) here and nd < 16, so at most 24 characters;
         * the bounds only let the compiler see that too. */
        for (int k = 0; k < dp && o < sizeof buf - 2; k++)
            buf[o++] = k < nd ? digits[k] : '0';
        if (nd > dp) {
            buf[o++] = '.';
            for (int k = dp; k < nd && o < sizeof buf - 1; k++)
                buf[o++] = k < 0 ? '0' : digits[k];
        }
        buf[o] = '\0';
    }
    snprintf(out, n, "%s", buf);
}

/* The mapping-key string for a scalar, as sigs.k8s.io/yaml converts keys.
 * Returns a malloc'd key (*len set), or NULL: *unsupported tells whether the
 * key type cannot be converted (null, integers beyond int64) rather than
 * memory running out. */
static char *scalar_key(const struct scalar *sc, size_t *len, bool *unsupported)
{
    char buf[64];
    *unsupported = false;
    switch (sc->kind) {
    case SK_STR: {
        char *k = malloc(sc->len + 1);
        if (!k)
            return NULL;
        memcpy(k, sc->s, sc->len);
        k[sc->len] = '\0';
        *len = sc->len;
        return k;
    }
    case SK_INT:
        snprintf(buf, sizeof buf, "%" PRId64, sc->i);
        break;
    case SK_BOOL:
        snprintf(buf, sizeof buf, "%s", sc->b ? "true" : "false");
        break;
    case SK_FLOAT:
        format_go_float32(sc->f, buf, sizeof buf);
        break;
    case SK_NULL:
    case SK_UINT:
    case SK_BIG:
        *unsupported = true;
        return NULL;
    }
    *len = strlen(buf);
    return strdup(buf);
}

/* ------------------------------------------------------------------ */
/* Building the tree                                                    */
/* ------------------------------------------------------------------ */

static struct frame *top_frame(struct loader *l)
{
    return l->depth ? &l->frames[l->depth - 1] : NULL;
}

static bool expecting_key(const struct frame *f)
{
    return f && f->is_map && !f->have_key;
}

/* Records the next mapping key (takes ownership of `key`). */
static int set_key(struct loader *l, struct frame *f, char *key, size_t len, size_t line)
{
    if (json_object_getn(f->node, key, len)) {
        fail(l, line, "mapping key \"%.*s%s\" already defined",
             (int)(len > ERR_SNIPPET ? ERR_SNIPPET : len), key, len > ERR_SNIPPET ? "..." : "");
        free(key);
        return -1;
    }
    f->key = key;
    f->key_len = len;
    f->have_key = true;
    f->merge = false;
    return 0;
}

/* Queues the value of a `<<` key: a mapping or a sequence of mappings. */
static int add_merge(struct loader *l, struct frame *f, json_t *v, size_t line)
{
    bool ok = json_is_object(v);
    if (json_is_array(v)) {
        ok = true;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) ok = ok && json_is_object(e);
    }
    if (!ok) {
        json_decref(v);
        return fail(l, line, "map merge requires map or sequence of maps as the value");
    }
    if (!f->merges && !(f->merges = json_array())) {
        json_decref(v);
        return fail_oom(l, line);
    }
    int rc = json_is_object(v) ? json_array_append(f->merges, v) : json_array_extend(f->merges, v);
    json_decref(v);
    return rc < 0 ? fail_oom(l, line) : 0;
}

/* Places a finished value (stolen) of collection height `height` and
 * `json` bytes of JSON text into the open collection, or makes it the
 * document's root. The slot that holds it is charged here. */
static int add_value(struct loader *l, json_t *v, int height, size_t json, size_t line)
{
    struct frame *f = top_frame(l);
    if (!f) {
        json_decref(l->root);
        l->root = v;
        return 0;
    }
    if (height > f->child_height)
        f->child_height = height;
    if (!f->is_map) {
        f->json += json + 1; /* and a comma */
        if (charge(l, JCOST_ELEMENT, true, line) < 0) {
            json_decref(v);
            return -1;
        }
        return json_array_append_new(f->node, v) < 0 ? fail_oom(l, line) : 0;
    }
    f->have_key = false;
    if (f->merge) {
        /* Its members are charged when they are merged in; the whole
         * source's text counts, an upper bound of what is taken. */
        f->merge = false;
        f->json += json;
        return add_merge(l, f, v, line);
    }
    f->json += json_text_len(f->key, f->key_len) + 1 + json + 1;
    int rc = charge(l, JCOST_MEMBER(f->key_len), true, line);
    if (rc < 0)
        json_decref(v);
    else
        rc = json_object_setn_new(f->node, f->key, f->key_len, v);
    free(f->key);
    f->key = NULL;
    if (rc < 0 && !l->err)
        return fail(l, line, "invalid mapping key");
    return rc;
}

/* A scalar in key position: the merge key, or a key converted to text. */
static int on_key_scalar(struct loader *l, const yaml_event_t *ev, struct frame *f)
{
    size_t line = ev->start_mark.line + 1;
    const char *tag = (const char *)ev->data.scalar.tag;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    bool is_merge =
        ev->data.scalar.length == 2 && memcmp(ev->data.scalar.value, "<<", 2) == 0 &&
        ((!tag && ev->data.scalar.plain_implicit) || (tag && strcmp(tag, TAG_PREFIX "merge") == 0));
    struct scalar sc;
    if (is_merge) {
        memset(&sc, 0, sizeof sc);
        sc.kind = SK_STR;
        sc.s = "<<";
        sc.len = 2;
    } else if (resolve_event(l, ev, &sc) < 0) {
        return -1;
    }
    if (!is_merge) {
        l->decodes++; /* go-yaml decodes keys too; not the merge key */
        if (check_ratio(l) < 0) {
            scalar_clear(&sc);
            return -1;
        }
    }
    /* An anchored key keeps a value and a key copy of its text. */
    if (anchor && charge(l, JCOST_STRING(sc.len) + sc.len, false, line) < 0) {
        scalar_clear(&sc);
        return -1;
    }
    size_t len = 0;
    bool unsupported;
    char *key = scalar_key(&sc, &len, &unsupported);
    if (anchor) {
        long idx = anchor_add(l, anchor);
        if (idx < 0) {
            free(key);
            scalar_clear(&sc);
            return fail_oom(l, line);
        }
        struct anchor *a = &l->anchors[idx];
        const char *why;
        a->value = scalar_json(&sc, &why); /* NULL is fine: only an alias to it fails */
        if (key && (a->key = malloc(len + 1)))
            memcpy(a->key, key, len + 1); /* may contain NUL: not strdup */
        a->key_len = len;
        a->decodes = 1;
        a->json = a->value ? value_json_len(a->value) : 0;
        a->done = true;
    }
    scalar_clear(&sc);
    if (is_merge) {
        free(key);
        f->have_key = true;
        f->merge = true;
        return 0;
    }
    if (!key) {
        if (!unsupported)
            return fail_oom(l, line);
        return fail(
            l, line,
            "unsupported map key `%.*s` (null and integers beyond int64 cannot be object keys)",
            (int)(ev->data.scalar.length > ERR_SNIPPET ? ERR_SNIPPET : ev->data.scalar.length),
            (const char *)ev->data.scalar.value);
    }
    return set_key(l, f, key, len, line);
}

static int on_scalar(struct loader *l, const yaml_event_t *ev)
{
    struct frame *f = top_frame(l);
    if (expecting_key(f))
        return on_key_scalar(l, ev, f);
    size_t line = ev->start_mark.line + 1;
    l->decodes++;
    if (check_ratio(l) < 0)
        return -1;
    struct scalar sc;
    if (resolve_event(l, ev, &sc) < 0)
        return -1;
    const char *anchor = (const char *)ev->data.scalar.anchor;
    size_t cost = sc.kind == SK_STR                          ? JCOST_STRING(sc.len)
                  : sc.kind == SK_NULL || sc.kind == SK_BOOL ? 0
                                                             : JCOST_NUMBER;
    /* An anchored scalar also keeps a copy of its text as a key. */
    if (charge(l, cost + (anchor ? sc.len : 0), false, line) < 0) {
        scalar_clear(&sc);
        return -1;
    }
    const char *why;
    json_t *v = scalar_json(&sc, &why);
    if (!v) {
        scalar_clear(&sc);
        return fail(l, line, "%s", why);
    }
    size_t json = value_json_len(v);
    if (anchor) {
        long idx = anchor_add(l, anchor);
        if (idx < 0) {
            json_decref(v);
            scalar_clear(&sc);
            return fail_oom(l, line);
        }
        struct anchor *a = &l->anchors[idx];
        bool unsupported;
        a->key = scalar_key(&sc, &a->key_len, &unsupported);
        a->value = json_incref(v);
        a->decodes = 1;
        a->json = json;
        a->done = true;
    }
    scalar_clear(&sc);
    return add_value(l, v, 0, json, line);
}

static int on_collection_start(struct loader *l, const yaml_event_t *ev, bool is_map)
{
    size_t line = ev->start_mark.line + 1;
    const char *anchor =
        (const char *)(is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor);
    if (expecting_key(top_frame(l)))
        return fail(l, line, "invalid map key: a %s cannot be a mapping key",
                    is_map ? "mapping" : "sequence");
    if (l->depth + 1 > CKUBE_YAML_MAX_DEPTH)
        return fail(l, line, "exceeded max depth of %d", CKUBE_YAML_MAX_DEPTH);
    if (l->depth == l->frames_cap) {
        size_t cap = l->frames_cap ? l->frames_cap * 2 : 16;
        struct frame *fr = realloc(l->frames, cap * sizeof *fr);
        if (!fr)
            return fail_oom(l, line);
        l->frames = fr;
        l->frames_cap = cap;
    }
    /* go-yaml decodes every collection but the sequence of a merge key's
     * sources (`<<: [*a, *b]`): it merges each source on its own. */
    struct frame *parent = top_frame(l);
    size_t start_decodes = l->decodes;
    if (is_map || !parent || !parent->merge) {
        l->decodes++;
        if (check_ratio(l) < 0)
            return -1;
    }
    size_t start_cmem = l->cmem;
    if (charge(l, is_map ? JCOST_OBJECT : JCOST_ARRAY, true, line) < 0)
        return -1;
    struct frame *f = &l->frames[l->depth];
    memset(f, 0, sizeof *f);
    f->is_map = is_map;
    f->anchor = -1;
    f->start_decodes = start_decodes;
    f->start_cmem = start_cmem;
    f->node = is_map ? json_object() : json_array();
    if (!f->node)
        return fail_oom(l, line);
    l->depth++;
    if (anchor) {
        /* Registered now so that an alias inside it is reported as
         * self-reference rather than picking an older definition. */
        f->anchor = anchor_add(l, anchor);
        if (f->anchor < 0)
            return fail_oom(l, line);
        l->anchors[f->anchor].is_collection = true;
    }
    return 0;
}

static int on_collection_end(struct loader *l, const yaml_event_t *ev)
{
    size_t line = ev->start_mark.line + 1;
    if (l->depth == 0)
        return fail(l, line, "unbalanced collection end");
    struct frame f = l->frames[--l->depth];
    if (f.merges) {
        /* Explicit keys win over merged ones, earlier sources over later. */
        size_t i;
        json_t *src;
        json_array_foreach(f.merges, i, src)
        {
            /* By hand: jansson's update_missing ignores key lengths. */
            const char *key;
            size_t key_len;
            json_t *val;
            json_object_keylen_foreach(src, key, key_len, val)
            {
                if (json_object_getn(f.node, key, key_len))
                    continue;
                if (charge(l, JCOST_MEMBER(key_len), true, line) < 0) {
                    frame_clear(&f);
                    return -1;
                }
                if (json_object_setn(f.node, key, key_len, val) < 0) {
                    frame_clear(&f);
                    return fail_oom(l, line);
                }
            }
        }
    }
    int height = f.child_height + 1;
    size_t json = f.json + 2; /* brackets; the last comma stands for nothing */
    if (f.anchor >= 0) {
        struct anchor *a = &l->anchors[f.anchor];
        a->value = json_incref(f.node);
        a->decodes = l->decodes - f.start_decodes;
        a->cmem = l->cmem - f.start_cmem;
        a->json = json;
        a->height = height;
        a->done = true;
    }
    json_t *node = f.node;
    f.node = NULL;
    frame_clear(&f);
    return add_value(l, node, height, json, line);
}

/* What an alias to a collection builds: a copy of its collections (keys
 * containing NUL kept, which jansson's json_deep_copy drops) sharing its
 * scalars, which nothing changes once built. Recursion depth is bounded
 * by CKUBE_YAML_MAX_DEPTH. */
static json_t *copy_value(const json_t *v)
{
    json_t *out;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        out = json_object();
        if (!out)
            return NULL;
        const char *key;
        size_t key_len;
        json_t *val;
        json_object_keylen_foreach((json_t *)v, key, key_len, val)
        {
            /* setn_new consumes the copy even when it fails */
            json_t *c = copy_value(val);
            if (!c || json_object_setn_new_nocheck(out, key, key_len, c) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    case JSON_ARRAY: {
        out = json_array();
        if (!out)
            return NULL;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            json_t *c = copy_value(e);
            if (!c || json_array_append_new(out, c) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    default:
        return json_incref((json_t *)v);
    }
}

static int on_alias(struct loader *l, const yaml_event_t *ev)
{
    size_t line = ev->start_mark.line + 1;
    const char *name = (const char *)ev->data.alias.anchor;
    struct anchor *a = anchor_find(l, name);
    if (!a)
        return fail(l, line, "unknown anchor '%s' referenced", name);
    if (!a->done)
        return fail(l, line, "anchor '%s' value contains itself", name);
    struct frame *f = top_frame(l);
    if (expecting_key(f)) {
        if (a->is_collection)
            return fail(l, line, "invalid map key: alias '%s' refers to a collection", name);
        if (!a->key)
            return fail(l, line, "unsupported map key: alias '%s'", name);
        /* go-yaml: the alias node, then the scalar it stands for. */
        l->decodes += 2;
        l->alias_decodes += 1;
        if (check_ratio(l) < 0 ||
            charge_alias(l, a->key_len, json_text_len(a->key, a->key_len)) < 0)
            return -1;
        char *key = malloc(a->key_len + 1);
        if (!key)
            return fail_oom(l, line);
        memcpy(key, a->key, a->key_len + 1);
        return set_key(l, f, key, a->key_len, line);
    }
    if (!a->value)
        return fail(l, line, "alias '%s' refers to a value JSON cannot represent", name);
    /* go-yaml: the alias node, then everything under the anchor again,
     * all of it inside an alias. Refused before anything is copied. */
    l->decodes += 1 + a->decodes;
    l->alias_decodes += a->decodes;
    if (check_ratio(l) < 0 || charge_alias(l, a->cmem, a->json) < 0)
        return -1;
    if (l->depth + (size_t)a->height > CKUBE_YAML_MAX_DEPTH)
        return fail(l, line, "exceeded max depth of %d", CKUBE_YAML_MAX_DEPTH);
    json_t *copy = copy_value(a->value);
    if (!copy)
        return fail_oom(l, line);
    return add_value(l, copy, a->height, a->json, line);
}

/* Reads events through the end of the next document. Returns 1 with *out
 * set to a new reference (null for an empty document), 0 at the end of the
 * stream, -1 on error (l->err set). */
static int next_document(struct loader *l, json_t **out)
{
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&l->parser, &ev))
            return parser_fail(l);
        int rc = 0;
        yaml_event_type_t type = ev.type;
        switch (type) {
        case YAML_SCALAR_EVENT:
            rc = on_scalar(l, &ev);
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            rc = on_collection_start(l, &ev, type == YAML_MAPPING_START_EVENT);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            rc = on_collection_end(l, &ev);
            break;
        case YAML_ALIAS_EVENT:
            rc = on_alias(l, &ev);
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
        if (rc < 0)
            return -1;
        if (type == YAML_STREAM_END_EVENT || type == YAML_NO_EVENT)
            return 0;
        if (type == YAML_DOCUMENT_START_EVENT)
            l->decodes = 1; /* go-yaml's document node */
        if (type == YAML_DOCUMENT_END_EVENT) {
            *out = l->root ? l->root : json_null();
            l->root = NULL;
            anchors_reset(l); /* anchors do not cross documents */
            l->decodes = l->alias_decodes = 0;
            return 1;
        }
    }
}

static void set_err(char **err, char *msg)
{
    if (err)
        *err = msg ? msg : strdup("yaml: out of memory");
    else
        free(msg);
}

/* The bounds of ckube_yaml_load and ckube_yaml_load_all. */
static const ckube_yaml_limits default_limits = {
    .max_alias_memory = CKUBE_YAML_MAX_ALIAS_BYTES,
    .max_alias_json = CKUBE_YAML_MAX_ALIAS_BYTES,
};

json_t *ckube_yaml_load_limited(const char *buf, size_t len, const ckube_yaml_limits *lim,
                                bool *too_large, char **err)
{
    if (err)
        *err = NULL;
    if (too_large)
        *too_large = false;
    struct loader l;
    if (loader_init(&l, buf, len, lim) < 0) {
        set_err(err, NULL);
        return NULL;
    }
    json_t *doc = NULL;
    int rc = next_document(&l, &doc);
    if (rc == 0)
        doc = json_null();
    if (rc < 0) {
        set_err(err, l.err);
        l.err = NULL;
        if (too_large)
            *too_large = l.too_large;
    }
    loader_free(&l);
    return doc;
}

json_t *ckube_yaml_load(const char *buf, size_t len, char **err)
{
    return ckube_yaml_load_limited(buf, len, &default_limits, NULL, err);
}

int ckube_yaml_load_all(const char *buf, size_t len, json_t **docs_out, char **err)
{
    if (err)
        *err = NULL;
    *docs_out = NULL;
    struct loader l;
    if (loader_init(&l, buf, len, &default_limits) < 0) {
        set_err(err, NULL);
        return -1;
    }
    json_t *docs = json_array();
    int rc = docs ? 1 : -1;
    while (rc == 1) {
        json_t *doc = NULL;
        rc = next_document(&l, &doc);
        if (rc == 1 && !json_is_null(doc) && json_array_append(docs, doc) < 0)
            rc = fail_oom(&l, 0);
        json_decref(doc);
    }
    if (rc < 0) {
        set_err(err, l.err);
        l.err = NULL;
        json_decref(docs);
    } else {
        *docs_out = docs;
    }
    loader_free(&l);
    return rc < 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Dumping                                                              */
/* ------------------------------------------------------------------ */

struct outbuf {
    char *data;
    size_t len, cap;
};

static int out_write(void *data, unsigned char *bytes, size_t size)
{
    struct outbuf *o = data;
    if (o->len + size + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + size + 1)
            cap *= 2;
        char *d = realloc(o->data, cap);
        if (!d)
            return 0;
        o->data = d;
        o->cap = cap;
    }
    memcpy(o->data + o->len, bytes, size);
    o->len += size;
    return 1;
}

/* Whether a plain scalar with this text would load as something other
 * than this string, or be read as a number/date by other YAML 1.1 tools. */
static bool needs_quotes(const char *s, size_t n)
{
    if (n == 0 || (n == 2 && memcmp(s, "<<", 2) == 0))
        return true;
    struct scalar sc;
    if (resolve_plain(s, n, &sc) < 0 || sc.kind != SK_STR)
        return true;
    /* Number-shaped text that go-yaml keeps as a string only because it
     * overflows ("1e400") would still read as a number elsewhere. */
    return is_timestamp(s, n) || is_base60(s, n) || is_yaml_float(s, n);
}

/* 1 if the text has only '\n' line breaks, 2 if it has other YAML line
 * breaks (CR, NEL, LS, PS) that block scalars would not keep, 0 if none. */
static int line_breaks(const char *s, size_t n)
{
    int found = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '\n')
            found = 1;
        else if (c == '\r' || (c == 0xC2 && k + 1 < n && (unsigned char)s[k + 1] == 0x85) ||
                 (c == 0xE2 && k + 2 < n && (unsigned char)s[k + 1] == 0x80 &&
                  ((unsigned char)s[k + 2] == 0xA8 || (unsigned char)s[k + 2] == 0xA9)))
            return 2;
    }
    return found;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, size_t n, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)n, 1, 1, style))
        return -1;
    return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

/* Strings: plain when that loads back as the same string (libyaml falls
 * back to quotes when plain is not allowed), literal blocks for multi-line
 * values, double quotes otherwise. */
static int emit_string(yaml_emitter_t *em, const char *s, size_t n, bool is_key)
{
    if (n > INT32_MAX)
        return -1;
    yaml_scalar_style_t style = YAML_PLAIN_SCALAR_STYLE;
    int breaks = line_breaks(s, n);
    if (breaks == 1 && !is_key)
        style = YAML_LITERAL_SCALAR_STYLE;
    else if (breaks || needs_quotes(s, n))
        style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    return emit_scalar(em, s, n, style);
}

/* Shortest text that reads back as the same double, always float-shaped. */
static void format_real(double d, char *buf, size_t n)
{
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    if (!strpbrk(buf, ".eE"))
        strncat(buf, ".0", n - strlen(buf) - 1);
}

static int emit_value(yaml_emitter_t *em, const json_t *v, int depth)
{
    char buf[64];
    yaml_event_t ev;
    if (depth > DUMP_MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return -1;
        const char *key;
        size_t key_len;
        json_t *val;
        json_object_keylen_foreach((json_t *)v, key, key_len, val)
        {
            if (emit_string(em, key, key_len, true) < 0 || emit_value(em, val, depth + 1) < 0)
                return -1;
        }
        if (!yaml_mapping_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
            return -1;
        return 0;
    }
    case JSON_ARRAY: {
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return -1;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (emit_value(em, e, depth + 1) < 0)
                return -1;
        }
        if (!yaml_sequence_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
            return -1;
        return 0;
    }
    case JSON_STRING:
        return emit_string(em, json_string_value(v), json_string_length(v), false);
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        format_real(json_real_value(v), buf, sizeof buf);
        break;
    case JSON_TRUE:
        snprintf(buf, sizeof buf, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, sizeof buf, "false");
        break;
    case JSON_NULL:
        snprintf(buf, sizeof buf, "null");
        break;
    }
    return emit_scalar(em, buf, strlen(buf), YAML_PLAIN_SCALAR_STYLE);
}

static int emit_document(yaml_emitter_t *em, const json_t *v)
{
    yaml_event_t ev;
    if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) || !yaml_emitter_emit(em, &ev))
        return -1;
    if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
        !yaml_emitter_emit(em, &ev))
        return -1;
    if (emit_value(em, v, 0) < 0)
        return -1;
    if (!yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(em, &ev))
        return -1;
    if (!yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
        return -1;
    return yaml_emitter_flush(em) ? 0 : -1;
}

char *ckube_yaml_dump(const json_t *v)
{
    if (!v)
        return NULL;
    yaml_emitter_t em;
    if (!yaml_emitter_initialize(&em))
        return NULL;
    struct outbuf out = {0};
    yaml_emitter_set_output(&em, out_write, &out);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    yaml_emitter_set_indent(&em, 2);
    int rc = emit_document(&em, v);
    yaml_emitter_delete(&em);
    if (rc < 0 || !out.data) {
        free(out.data);
        return NULL;
    }
    out.data[out.len] = '\0';
    return out.data;
}
