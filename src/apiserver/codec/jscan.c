/* The canonical-JSON scanner; see jscan.h for what "canonical" means. */
#include "apiserver/codec/jscan.h"
#include "common/json_dump.h"
#include "common/json_plain.h"
#include "common/text.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* ---- strings ---------------------------------------------------------- */

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1; /* lowercase is valid JSON but not what jansson writes */
}

/* Validates canonical string contents from p (just after the opening
 * quote). Returns the position just past the closing quote, or NULL. */
static const unsigned char *scan_string(const unsigned char *p, const unsigned char *end)
{
    for (;;) {
        p = ckube__json_plain_end(p, end);
        if (p >= end)
            return NULL;
        unsigned char c = *p;
        if (c == '"')
            return p + 1;
        if (c == '\\') {
            if (end - p < 2)
                return NULL;
            switch (p[1]) {
            case '"':
            case '\\':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                p += 2;
                continue;
            case 'u': {
                /* Only control characters without a short escape, and
                 * never NUL (jansson rejects it without JSON_ALLOW_NUL). */
                if (end - p < 6 || p[2] != '0' || p[3] != '0')
                    return NULL;
                int hi = hexval(p[4]), lo = hexval(p[5]);
                if (hi < 0 || lo < 0)
                    return NULL;
                int cp = hi * 16 + lo;
                if (cp == 0 || cp >= 0x20 || cp == '\b' || cp == '\f' || cp == '\n' || cp == '\r' ||
                    cp == '\t')
                    return NULL;
                p += 6;
                continue;
            }
            default:
                return NULL;
            }
        }
        if (c < 0x20)
            return NULL;
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t n = ckube__utf8_decode(p, (size_t)(end - p), NULL);
        if (!n)
            return NULL;
        p += n;
    }
}

/* ---- numbers and literals -------------------------------------------- */

/* Validates a canonical integer at p; returns the position after it. */
static const unsigned char *scan_number(const unsigned char *p, const unsigned char *end)
{
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    if (p >= end)
        return NULL;
    const unsigned char *start = p;
    uint64_t v = 0;
    if (*p == '0') {
        if (neg) /* "-0" reads as the integer 0, written "0" */
            return NULL;
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            if (p - start >= 19) /* more than 19 digits overflows int64 */
                return NULL;
            v = v * 10 + (uint64_t)(*p - '0');
            p++;
        }
        if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
            return NULL;
    } else {
        return NULL;
    }
    /* A fraction or exponent makes a real (not canonical here); a digit
     * after a leading zero is invalid JSON. */
    if (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E'))
        return NULL;
    return p;
}

static const unsigned char *scan_literal(const unsigned char *p, const unsigned char *end,
                                         const char *lit, size_t n)
{
    if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0)
        return NULL;
    return p + n;
}

/* ---- duplicate keys --------------------------------------------------- */

typedef struct keyrec {
    uint64_t hash;   /* set by keys_distinct, only for objects it sorts */
    size_t off, len; /* the key's escaped bytes (equal iff the keys are) */
} keyrec;

typedef struct keyvec {
    keyrec *v;
    size_t n, cap;
    keyrec local[64];
} keyvec;

static bool keyvec_push(keyvec *kv, size_t off, size_t len)
{
    if (kv->n == kv->cap) {
        size_t cap = kv->cap * 2;
        keyrec *nv;
        if (kv->v == kv->local) {
            nv = xmalloc(cap * sizeof *nv);
            if (nv)
                memcpy(nv, kv->local, kv->n * sizeof *nv);
        } else {
            nv = xrealloc(kv->v, cap * sizeof *nv);
        }
        kv->v = nv;
        kv->cap = cap;
    }
    kv->v[kv->n++] = (keyrec){0, off, len};
    return true;
}

/* A hash of a key's bytes for sorting by it: eight bytes per step (a
 * Kubernetes object's keys are mostly under 16 bytes; byte-wise FNV-1a
 * was a third of the validator's time on a cache load). Equal bytes give
 * equal hashes, which is all keys_distinct needs. */
static uint64_t key_hash(const unsigned char *p, size_t n)
{
    const uint64_t mul = 0xff51afd7ed558ccdull;
    uint64_t h = n * 0x9e3779b97f4a7c15ull, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * mul;
        h ^= h >> 32;
    }
    if (n) {
        w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * mul;
        h ^= h >> 32;
    }
    return h;
}

static int keyrec_cmp(const void *a, const void *b)
{
    const keyrec *x = a, *y = b;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static bool same_bytes(const unsigned char *base, const keyrec *a, const keyrec *b)
{
    return a->len == b->len && !memcmp(base + a->off, base + b->off, a->len);
}

/* True if the keys v[0..n) are pairwise distinct. Reorders them. Most
 * objects have a handful of keys, compared pairwise without hashing;
 * larger ones are sorted by hash. */
static bool keys_distinct(const unsigned char *base, keyrec *v, size_t n)
{
    if (n <= 8) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (same_bytes(base, &v[i], &v[j]))
                    return false;
        return true;
    }
    for (size_t i = 0; i < n; i++)
        v[i].hash = key_hash(base + v[i].off, v[i].len);
    qsort(v, n, sizeof *v, keyrec_cmp);
    for (size_t i = 0; i + 1 < n; i++)
        for (size_t j = i + 1; j < n && v[j].hash == v[i].hash; j++)
            if (same_bytes(base, &v[i], &v[j]))
                return false;
    return true;
}

/* ---- the validator ---------------------------------------------------- */

/* What an open container is, for recording jscan_meta positions. */
enum { ROLE_NONE, ROLE_TOP, ROLE_METADATA };
/* Which recorded member a value belongs to. */
enum { TAG_NONE, TAG_METADATA, TAG_RV, TAG_LABELS };

typedef struct frame {
    bool object;
    unsigned char role;
    size_t keys_start; /* this object's keys are keys.v[keys_start..] */
} frame;

static bool key_is(const unsigned char *k, size_t klen, const char *lit, size_t n)
{
    return klen == n && !memcmp(k, lit, n);
}

/* The tag of a member with (escaped) key k in a container of `role`.
 * Canonical keys are unique byte strings, so a raw compare is exact. */
static int key_tag(int role, const unsigned char *k, size_t klen)
{
    if (role == ROLE_TOP && key_is(k, klen, "metadata", 8))
        return TAG_METADATA;
    if (role == ROLE_METADATA && key_is(k, klen, "resourceVersion", 15))
        return TAG_RV;
    if (role == ROLE_METADATA && key_is(k, klen, "labels", 6))
        return TAG_LABELS;
    return TAG_NONE;
}

static bool validate(const unsigned char *base, size_t len, keyvec *keys, jscan_meta *m)
{
    const unsigned char *p = base, *end = base + len;
    frame stack[JSCAN_MAX_DEPTH];
    size_t depth = 0;
    int tag = TAG_NONE; /* of the value about to start */
    if (!len || (*p != '{' && *p != '['))
        return false;
    for (;;) {
        /* A value starts at p. */
        if (p >= end)
            return false;
        size_t at = (size_t)(p - base);
        unsigned char role = ROLE_NONE;
        switch (tag) {
        case TAG_METADATA:
            if (*p == '{') {
                m->metadata = at;
                role = ROLE_METADATA;
            }
            break;
        case TAG_RV:
            m->rv.off = at;
            break;
        case TAG_LABELS:
            m->labels = at;
            break;
        }
        if (depth == 0 && *p == '{')
            role = ROLE_TOP;
        bool rv_value = tag == TAG_RV;
        tag = TAG_NONE;
        switch (*p) {
        case '{':
        case '[':
            if (depth == JSCAN_MAX_DEPTH)
                return false;
            stack[depth++] = (frame){*p == '{', role, keys->n};
            p++;
            if (p < end && (*p == '}' || *p == ']')) {
                if ((*p == '}') != stack[depth - 1].object)
                    return false;
                if (role == ROLE_METADATA)
                    m->metadata_end = (size_t)(p - base);
                p++;
                depth--;
                break; /* an empty container is a complete value */
            }
            if (stack[depth - 1].object)
                goto key;
            continue;
        case '"':
            p = scan_string(p + 1, end);
            break;
        case 't':
            p = scan_literal(p, end, "true", 4);
            break;
        case 'f':
            p = scan_literal(p, end, "false", 5);
            break;
        case 'n':
            p = scan_literal(p, end, "null", 4);
            break;
        default:
            if (*p == '-' || (*p >= '0' && *p <= '9'))
                p = scan_number(p, end);
            else
                return false;
            break;
        }
        if (!p)
            return false;
        if (rv_value) /* a scalar (a container's end is set when it closes) */
            m->rv.len = (size_t)(p - base) - m->rv.off;
        /* After a complete value: close containers or go on. */
        for (;;) {
            if (depth == 0)
                return p == end;
            if (p >= end)
                return false;
            frame *f = &stack[depth - 1];
            if (*p == ',') {
                p++;
                if (f->object)
                    goto key;
                break; /* next array element */
            }
            if (*p != (f->object ? '}' : ']'))
                return false;
            if (f->object && !keys_distinct(base, keys->v + f->keys_start, keys->n - f->keys_start))
                return false;
            if (f->role == ROLE_METADATA)
                m->metadata_end = (size_t)(p - base);
            keys->n = f->keys_start;
            depth--;
            p++;
            /* A container that was metadata.resourceVersion's value. */
            if (m->rv.off && !m->rv.len && depth == 2 && stack[1].role == ROLE_METADATA)
                m->rv.len = (size_t)(p - base) - m->rv.off;
        }
        continue;
    key:
        if (p >= end || *p != '"')
            return false;
        {
            const unsigned char *k = p + 1;
            p = scan_string(k, end);
            if (!p)
                return false;
            size_t klen = (size_t)(p - 1 - k);
            if (!keyvec_push(keys, (size_t)(k - base), klen))
                return false;
            tag = key_tag(stack[depth - 1].role, k, klen);
        }
        if (p >= end || *p != ':')
            return false;
        p++;
    }
}

bool jscan_canonical(const char *buf, size_t len, jscan_meta *meta)
{
    keyvec keys; /* not zeroed: local is 1.5 KB, written as keys come */
    keys.n = 0;
    keys.cap = sizeof keys.local / sizeof keys.local[0];
    keys.v = keys.local;
    jscan_meta m = {0};
    bool ok = validate((const unsigned char *)buf, len, &keys, &m);
    if (keys.v != keys.local)
        free(keys.v);
    if (meta)
        *meta = ok ? m : (jscan_meta){0};
    return ok;
}

/* ---- navigation over canonical bytes --------------------------------- */

/* Position just past the closing quote of the string whose contents start
 * at pos, or 0. */
static size_t skip_string(const char *buf, size_t len, size_t pos)
{
    while (pos < len) {
        const char *q = memchr(buf + pos, '"', len - pos);
        if (!q)
            return 0;
        size_t qpos = (size_t)(q - buf);
        const char *bs = memchr(buf + pos, '\\', qpos - pos);
        if (!bs)
            return qpos + 1;
        pos = (size_t)(bs - buf) + 2; /* skip the escaped character */
    }
    return 0;
}

size_t jscan_skip(const char *buf, size_t len, size_t pos)
{
    size_t depth = 0;
    while (pos < len) {
        char c = buf[pos];
        switch (c) {
        case '"':
            pos = skip_string(buf, len, pos + 1);
            if (!pos)
                return 0;
            break;
        case '{':
        case '[':
            depth++;
            pos++;
            continue;
        case '}':
        case ']':
            if (!depth)
                return 0;
            depth--;
            pos++;
            break;
        case ',':
        case ':':
            if (!depth)
                return 0;
            pos++;
            continue;
        default:
            /* A scalar: up to the next delimiter. */
            while (pos < len && buf[pos] != ',' && buf[pos] != '}' && buf[pos] != ']' &&
                   buf[pos] != ':' && buf[pos] != '"' && buf[pos] != '{' && buf[pos] != '[')
                pos++;
            break;
        }
        if (!depth)
            return pos;
    }
    return 0;
}

bool jscan_next_member(const char *buf, size_t len, size_t *pos, jspan *key, jspan *val)
{
    size_t p = *pos;
    if (p >= len)
        return false;
    if (buf[p] == '{' || buf[p] == ',')
        p++;
    else
        return false;
    if (p >= len || buf[p] != '"')
        return false;
    size_t kend = skip_string(buf, len, p + 1);
    if (!kend || kend >= len || buf[kend] != ':')
        return false;
    key->off = p + 1;
    key->len = kend - 1 - (p + 1);
    size_t vend = jscan_skip(buf, len, kend + 1);
    if (!vend)
        return false;
    val->off = kend + 1;
    val->len = vend - val->off;
    *pos = vend;
    return true;
}

bool jscan_str_eq(const char *buf, jspan s, const char *want)
{
    if (!memchr(buf + s.off, '\\', s.len)) {
        size_t n = strlen(want);
        return n == s.len && !memcmp(buf + s.off, want, n);
    }
    /* Rare: an escaped key. */
    char *d = jscan_str_dup(buf, s);
    bool eq = d && !strcmp(d, want);
    free(d);
    return eq;
}

static bool member_n(const char *buf, size_t len, size_t obj, const char *key, size_t keylen,
                     jspan *val)
{
    if (obj >= len || buf[obj] != '{')
        return false;
    size_t pos = obj;
    jspan k, v;
    while (jscan_next_member(buf, len, &pos, &k, &v)) {
        bool eq;
        if (!memchr(buf + k.off, '\\', k.len)) {
            eq = k.len == keylen && !memcmp(buf + k.off, key, keylen);
        } else {
            char *d = jscan_str_dup(buf, k); /* rare: an escaped key */
            eq = d && strlen(d) == keylen && !memcmp(d, key, keylen);
            free(d);
        }
        if (eq) {
            *val = v;
            return true;
        }
    }
    return false;
}

bool jscan_member(const char *buf, size_t len, size_t obj, const char *key, jspan *val)
{
    return member_n(buf, len, obj, key, strlen(key), val);
}

/* Element `idx` of the array at `arr`. */
static bool element(const char *buf, size_t len, size_t arr, long idx, jspan *val)
{
    if (arr >= len || buf[arr] != '[' || idx < 0)
        return false;
    size_t pos = arr + 1;
    if (pos < len && buf[pos] == ']')
        return false;
    for (long i = 0;; i++) {
        size_t e = jscan_skip(buf, len, pos);
        if (!e)
            return false;
        if (i == idx) {
            val->off = pos;
            val->len = e - pos;
            return true;
        }
        if (e >= len || buf[e] != ',')
            return false;
        pos = e + 1;
    }
}

bool jscan_path(const char *buf, size_t len, size_t root, const char *path, jspan *val)
{
    size_t cur = root;
    size_t e = jscan_skip(buf, len, root);
    if (!e)
        return false;
    jspan v = {root, e - root};
    const char *p = path;
    while (*p) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            /* The same reading as ckube_json_get_path: strtol, then ']'. */
            char *endp;
            long idx = strtol(p + 1, &endp, 10);
            if (*endp != ']' || !element(buf, len, cur, idx, &v))
                return false;
            cur = v.off;
            p = endp + 1;
            continue;
        }
        size_t n = strcspn(p, ".[");
        if (n >= 256) /* ckube_json_get_path's segment limit */
            return false;
        if (!member_n(buf, len, cur, p, n, &v))
            return false;
        cur = v.off;
        p += n;
    }
    *val = v;
    return true;
}

size_t jscan_str_copy(const char *buf, jspan s, char *out)
{
    char *o = out;
    const char *p = buf + s.off, *end = p + s.len;
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t run = bs ? (size_t)(bs - p) : (size_t)(end - p);
        memcpy(o, p, run);
        o += run;
        p += run;
        if (p >= end)
            break;
        /* An escape: never longer unescaped than escaped. */
        if (end - p < 2)
            break;
        char e = p[1];
        p += 2;
        switch (e) {
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            /* Only \u0001..\u001F occur in canonical bytes; anything
             * else is dropped (not canonical, so never asked for). */
            int v = 0;
            bool ok = end - p >= 4;
            for (int i = 0; ok && i < 4; i++) {
                int h = hexval((unsigned char)p[i]);
                ok = h >= 0;
                v = v * 16 + h;
            }
            if (ok) {
                if (v > 0 && v < 0x80)
                    *o++ = (char)v;
                p += 4;
            }
            break;
        }
        default: /* '"' and '\\' stand for themselves */
            *o++ = e;
            break;
        }
    }
    *o = 0;
    return (size_t)(o - out);
}

char *jscan_str_dup(const char *buf, jspan s)
{
    char *d = xmalloc(s.len + 1);
    if (d)
        jscan_str_copy(buf, s, d);
    return d;
}

char jscan_kind(const char *buf, jspan v)
{
    if (!v.len)
        return 0;
    switch (buf[v.off]) {
    case '{':
    case '[':
    case '"':
        return buf[v.off];
    case 't':
    case 'f':
        return buf[v.off];
    case 'n':
        return 'N';
    default:
        return buf[v.off] == '-' || (buf[v.off] >= '0' && buf[v.off] <= '9') ? 'n' : 0;
    }
}

static char *dup_n(const char *p, size_t n)
{
    char *d = xmalloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = 0;
    }
    return d;
}

char *jscan_scalar_dup(const char *buf, jspan v)
{
    switch (jscan_kind(buf, v)) {
    case '"':
        if (v.len < 2)
            return dup_n("", 0);
        return jscan_str_dup(buf, (jspan){v.off + 1, v.len - 2});
    case 'n':
        return dup_n(buf + v.off, v.len);
    case 't':
        return dup_n("true", 4);
    case 'f':
        return dup_n("false", 5);
    default:
        return dup_n("", 0);
    }
}

size_t jscan_set_rv(const char *buf, size_t len, const jscan_meta *m, const char *rv, char *out)
{
    static const char member[] = "\"resourceVersion\":";
    size_t rvlen = strlen(rv);
    size_t cut_from, cut_to; /* buf[cut_from, cut_to) is replaced */
    size_t ins = rvlen + 2;  /* the quoted value */
    bool comma = false, key = false;
    if (m->rv.off) {
        cut_from = m->rv.off;
        cut_to = m->rv.off + m->rv.len;
    } else {
        cut_from = cut_to = m->metadata_end;
        comma = m->metadata_end > m->metadata + 1;
        key = true;
        ins += (comma ? 1 : 0) + sizeof member - 1;
    }
    size_t n = len - (cut_to - cut_from) + ins;
    if (!out)
        return n;
    char *o = out;
    memcpy(o, buf, cut_from);
    o += cut_from;
    if (comma)
        *o++ = ',';
    if (key) {
        memcpy(o, member, sizeof member - 1);
        o += sizeof member - 1;
    }
    *o++ = '"';
    memcpy(o, rv, rvlen);
    o += rvlen;
    *o++ = '"';
    memcpy(o, buf + cut_to, len - cut_to);
    o += len - cut_to;
    *o = 0;
    return n;
}

/* ---- dumping with the positions recorded ------------------------------ */

/* Members arrive when their value is written, so metadata's own members
 * (depth 1) come before metadata itself (depth 0): they are kept as
 * candidates until the next top-level member says whose they were. */
typedef struct dump_meta {
    jscan_meta m;
    jspan rv;      /* candidate: a depth-1 resourceVersion */
    size_t labels; /* candidate: a depth-1 labels */
} dump_meta;

static void on_member(void *ctx, const ckube__dump_member *mb)
{
    dump_meta *d = ctx;
    if (mb->depth == 1) {
        if (mb->key_len == 15 && !memcmp(mb->key, "resourceVersion", 15))
            d->rv = (jspan){mb->value_off, mb->value_end - mb->value_off};
        else if (mb->key_len == 6 && !memcmp(mb->key, "labels", 6))
            d->labels = mb->value_off;
        return;
    }
    if (mb->key_len == 8 && !memcmp(mb->key, "metadata", 8) && mb->type == JSON_OBJECT) {
        d->m.metadata = mb->value_off;
        d->m.metadata_end = mb->value_end - 1;
        d->m.rv = d->rv;
        d->m.labels = d->labels;
    }
    d->rv = (jspan){0, 0};
    d->labels = 0;
}

char *jscan_dump(const json_t *v, size_t *len, jscan_meta *meta, bool *canonical)
{
    dump_meta d;
    memset(&d, 0, sizeof d);
    ckube__dump_opts o = {.max_member_depth = 1, .member = on_member, .ctx = &d};
    size_t n = 0;
    char *out = ckube__json_dumps_opts(v, &n, &o);
    *canonical = out && (json_is_object(v) || json_is_array(v)) && !o.real && !o.nul &&
                 o.containers <= JSCAN_MAX_DEPTH;
    if (*canonical && json_is_object(v))
        *meta = d.m;
    else
        memset(meta, 0, sizeof *meta);
    if (len)
        *len = n;
    return out;
}
