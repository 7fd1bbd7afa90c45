/* List continuation tokens; see continue_token.h. */
#include "apiserver/codec/continue_token.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "common/json_parse.h"
#include "common/text.h"
#include "common/utf8.h"
#include "common/xalloc.h"

#define TOKEN_MAX_DECODED ((size_t)64 << 10)

#define ERR_GENERIC "continue key is not valid"
#define ERR_INVALID_RV                                                                             \
    "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
#define ERR_EMPTY_START                                                                            \
    "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
#define ERR_VERSION "continue key is not valid: server does not recognize this encoded version"

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Go-compatible JSON string encoding.                                      */

/* As encoding/json with HTML escaping: <, >, & and controls as \u00XX,
 * invalid UTF-8 as \ufffd, U+2028/U+2029 escaped. */
static void put_json_string(ckube__strbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    ckube__sb_addn(b, "\"", 1);
    while (*p) {
        unsigned char c = *p;
        if (c < 0x80) {
            if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
                ckube__sb_addn(b, (const char *)p, 1);
            } else {
                char esc[6];
                ckube__sb_addn(b, esc, ckube__json_escape_ascii(c, hex, esc));
            }
            p++;
            continue;
        }
        uint32_t r;
        /* NUL-terminated: the terminator is never a continuation byte, so
         * the decoder stops there whatever length it is told. */
        size_t n = ckube__utf8_decode(p, 4, &r);
        if (n == 0) {
            ckube__sb_add(b, "\\ufffd");
            p++;
        } else if (r == 0x2028 || r == 0x2029) {
            ckube__sb_add(b, r == 0x2028 ? "\\u2028" : "\\u2029");
            p += n;
        } else {
            ckube__sb_addn(b, (const char *)p, n);
            p += n;
        }
    }
    ckube__sb_addn(b, "\"", 1);
}

/* ------------------------------------------------------------------------ */
/* base64url without padding (Go's base64.RawURLEncoding).                  */

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64url_encode(const unsigned char *in, size_t len)
{
    char *out = xmalloc(len / 3 * 4 + 4 + 1);
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *o++ = B64URL[v >> 18 & 63];
        *o++ = B64URL[v >> 12 & 63];
        *o++ = B64URL[v >> 6 & 63];
        *o++ = B64URL[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        *o++ = B64URL[v >> 18 & 63];
        *o++ = B64URL[v >> 12 & 63];
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        *o++ = B64URL[v >> 18 & 63];
        *o++ = B64URL[v >> 12 & 63];
        *o++ = B64URL[v >> 6 & 63];
    }
    *o = 0;
    return out;
}

static int b64url_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

/* Decodes `in`; CR and LF are skipped, anything else outside the alphabet
 * (padding included) is an error, as is a lone trailing character. Trailing
 * bits need not be zero (Go's non-strict mode). On error returns NULL with
 * *bad_at = the offending input offset (or -1 on allocation failure). */
static unsigned char *b64url_decode(const char *in, size_t *out_len, long *bad_at)
{
    size_t len = strlen(in);
    unsigned char *out = xmalloc(len / 4 * 3 + 3);
    size_t n = 0;
    uint32_t acc = 0;
    int have = 0;
    size_t last = 0;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '\r' || in[i] == '\n')
            continue;
        int v = b64url_value(in[i]);
        if (v < 0) {
            free(out);
            *bad_at = (long)i;
            return NULL;
        }
        last = i;
        acc = acc << 6 | (uint32_t)v;
        if (++have == 4) {
            out[n++] = (unsigned char)(acc >> 16);
            out[n++] = (unsigned char)(acc >> 8);
            out[n++] = (unsigned char)acc;
            acc = 0;
            have = 0;
        }
    }
    if (have == 1) {
        free(out);
        *bad_at = (long)last;
        return NULL;
    }
    if (have == 2) {
        out[n++] = (unsigned char)(acc >> 4);
    } else if (have == 3) {
        out[n++] = (unsigned char)(acc >> 10);
        out[n++] = (unsigned char)(acc >> 2);
    }
    *out_len = n;
    return out;
}

/* ------------------------------------------------------------------------ */

char *continue_token_encode(int64_t rv, const char *start_key_suffix)
{
    ckube__strbuf b = {0};
    char num[32];
    snprintf(num, sizeof num, "%" PRId64, rv);
    ckube__sb_add(&b, "{\"v\":\"" CONTINUE_TOKEN_VERSION "\",\"rv\":");
    ckube__sb_add(&b, num);
    ckube__sb_add(&b, ",\"start\":");
    put_json_string(&b, start_key_suffix ? start_key_suffix : "");
    ckube__sb_add(&b, "}");
    char *json = ckube__sb_take(&b);
    if (!json)
        return NULL;
    char *tok = b64url_encode((const unsigned char *)json, strlen(json));
    free(json);
    return tok;
}

/* Go's json type names for "cannot unmarshal X into ..." messages. */
static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "number";
    }
}

/* The decoded fields; strings borrowed from the JSON document. */
typedef struct token_fields {
    const char *v;
    int64_t rv;
    const char *start;
} token_fields;

/* Like json.Unmarshal into upstream's struct: keys match case-insensitively,
 * later keys win, null leaves a field alone, unknown keys are ignored. */
static int read_fields(const json_t *doc, token_fields *f, char **err)
{
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)doc, k, val)
    {
        if (json_is_null(val))
            continue;
        if (strcasecmp(k, "v") == 0 || strcasecmp(k, "start") == 0) {
            bool is_v = strcasecmp(k, "v") == 0;
            if (!json_is_string(val)) {
                ckube__set_err(err,
                               ERR_GENERIC ": json: cannot unmarshal %s into Go struct field "
                                           "continueToken.%s of type string",
                               json_kind(val), is_v ? "v" : "start");
                return -1;
            }
            *(is_v ? &f->v : &f->start) = json_string_value(val);
        } else if (strcasecmp(k, "rv") == 0) {
            if (!json_is_integer(val)) {
                ckube__set_err(err,
                               ERR_GENERIC ": json: cannot unmarshal %s into Go struct field "
                                           "continueToken.rv of type int64",
                               json_kind(val));
                return -1;
            }
            f->rv = (int64_t)json_integer_value(val);
        }
    }
    return 0;
}

/* True when "/" + key is what Go's path.Clean would return unchanged and
 * the key is relative: non-empty segments, none "." or "..". */
static bool start_key_clean(const char *key)
{
    if (*key == '/')
        return false;
    const char *seg = key;
    for (const char *p = key;; p++) {
        if (*p == '/' || *p == 0) {
            size_t n = (size_t)(p - seg);
            if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                return false;
            if (*p == 0)
                return true;
            seg = p + 1;
        }
    }
}

static int check_fields(const token_fields *f, char **err)
{
    if (!f->v || strcmp(f->v, CONTINUE_TOKEN_VERSION) != 0) {
        ckube__set_err(err, ERR_VERSION " %s", f->v ? f->v : "");
        return -1;
    }
    if (f->rv == 0) { /* (negative: an inconsistent continuation, as upstream) */
        ckube__set_err(err, ERR_INVALID_RV);
        return -1;
    }
    if (!f->start || !*f->start) {
        ckube__set_err(err, ERR_EMPTY_START);
        return -1;
    }
    if (!start_key_clean(f->start)) {
        ckube__set_err(err, ERR_GENERIC ": %s", f->start);
        return -1;
    }
    return 0;
}

int continue_token_decode(const char *tok, int64_t *rv, char **start, char **err)
{
    if (err)
        *err = NULL;
    *start = NULL;
    size_t len = 0;
    long bad_at = 0;
    unsigned char *raw = b64url_decode(tok ? tok : "", &len, &bad_at);
    if (!raw) {
        if (bad_at < 0)
            ckube__set_err(err, "out of memory");
        else
            ckube__set_err(err, ERR_GENERIC ": illegal base64 data at input byte %ld", bad_at);
        return -1;
    }
    /* A token is a few hundred bytes of JSON; a hostile one as long as a
     * request line may be is read within 64 KiB of memory. */
    json_error_t jerr;
    json_t *doc = ckube__json_loadb_limited((const char *)raw, len, JSON_DECODE_ANY,
                                            TOKEN_MAX_DECODED, NULL, NULL, &jerr);
    free(raw);
    if (!doc) {
        ckube__set_err(err, ERR_GENERIC ": %s", jerr.text);
        return -1;
    }
    token_fields f = {0};
    int rc = 0;
    if (json_is_object(doc)) {
        rc = read_fields(doc, &f, err);
    } else if (!json_is_null(doc)) {
        ckube__set_err(err,
                       ERR_GENERIC ": json: cannot unmarshal %s into Go value of type "
                                   "storage.continueToken",
                       json_kind(doc));
        rc = -1;
    }
    if (rc == 0)
        rc = check_fields(&f, err);
    if (rc == 0) {
        *start = xstrdup(f.start);
        *rv = f.rv;
        if (!*start) {
            ckube__set_err(err, "out of memory");
            rc = -1;
        }
    }
    json_decref(doc);
    return rc;
}
