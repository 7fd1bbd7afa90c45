/* Small helpers of the REST client; see client_internal.h. */
#include "client/client_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

char *ckube__b64_decode(const char *s, size_t n, size_t *out_len, size_t *bad_at)
{
    char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    size_t pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\r' || c == '\n' || c == ' ' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad) { /* bad character, or data after padding */
            if (bad_at)
                *bad_at = i;
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    /* 6 leftover bits can never come from whole bytes: a truncated input. */
    if (bits >= 6 || pad > 2) {
        if (bad_at)
            *bad_at = n;
        free(out);
        return NULL;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

char *ckube__b64_encode(const void *data, size_t n)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[o++] = tbl[(v >> 18) & 63];
        out[o++] = tbl[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    out[o] = 0;
    return out;
}

void ckube__sb_add_escaped(ckube__strbuf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            ckube__sb_addc(b, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            ckube__sb_addn(b, e, 3);
        }
    }
}

char *ckube__read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return NULL;
    }
    ckube__strbuf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        ckube__sb_addn(&b, chunk, n);
        if (b.len > (64u << 20)) {
            b.oom = true;
            break;
        }
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr || b.oom) {
        free(b.s);
        errno = rerr ? EIO : EFBIG;
        return NULL;
    }
    if (len)
        *len = b.len;
    return ckube__sb_take(&b);
}

char *ckube__strdup0(const char *s)
{
    return s ? strdup(s) : NULL;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

char *ckube__strndup_trim(const char *s, size_t n)
{
    while (n && is_space(*s)) {
        s++;
        n--;
    }
    while (n && is_space(s[n - 1]))
        n--;
    return strndup(s, n);
}

void ckube__sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

ckube_status *ckube__local_error(const char *fmt, ...)
{
    ckube_status *st = ckube_status_new(0, NULL, NULL);
    if (!st)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&st->message, fmt, ap) < 0)
        st->message = NULL;
    va_end(ap);
    return st;
}

void ckube__strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

char **ckube__strv_dup(char *const *v, size_t n)
{
    if (!v || n == 0)
        return NULL;
    char **out = calloc(n, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i] = ckube__strdup0(v[i]);
        if (v[i] && !out[i]) {
            ckube__strv_free(out, n);
            return NULL;
        }
    }
    return out;
}
