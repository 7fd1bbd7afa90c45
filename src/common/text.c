/* Shared text helpers; see text.h. */
#include <inttypes.h>
#include "common/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ckube__sb_reserve(ckube__strbuf *b, size_t extra)
{
    if (b->oom || b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *n = realloc(b->s, cap);
    if (!n) {
        b->oom = true;
        return;
    }
    b->s = n;
    b->cap = cap;
}

void ckube__sb_addn(ckube__strbuf *b, const char *s, size_t n)
{
    ckube__sb_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void ckube__sb_add(ckube__strbuf *b, const char *s)
{
    ckube__sb_addn(b, s, strlen(s));
}

void ckube__sb_addc(ckube__strbuf *b, char c)
{
    ckube__sb_addn(b, &c, 1);
}

void ckube__sb_printf(ckube__strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    ckube__sb_reserve(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *ckube__sb_take(ckube__strbuf *b)
{
    if (b->oom) {
        free(b->s);
        return NULL;
    }
    return b->s ? b->s : strdup("");
}

void ckube__set_err(char **err, const char *fmt, ...)
{
    if (!err || *err)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

const char *ckube__http_reason(long code)
{
    switch (code) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Request Entity Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "";
    }
}

size_t ckube__json_escape_ascii(unsigned char c, const char *hex, char out[6])
{
    static const char short_form[] = {['"'] = '"',  ['\\'] = '\\', ['\b'] = 'b', ['\f'] = 'f',
                                      ['\n'] = 'n', ['\r'] = 'r',  ['\t'] = 't'};
    out[0] = '\\';
    if (c < sizeof short_form && short_form[c]) {
        out[1] = short_form[c];
        return 2;
    }
    memcpy(out + 1, "u00", 3);
    out[4] = hex[c >> 4];
    out[5] = hex[c & 15];
    return 6;
}

/* Human-readable durations as kubectl prints ages: "45s", "3m12s", "5h",
 * "2d3h", "400d", "3y20d". */
size_t ckube__concat(char *buf, size_t n, ...)
{
    va_list ap;
    va_start(ap, n);
    size_t len = 0;
    for (const char *part; (part = va_arg(ap, const char *));) {
        size_t k = strlen(part);
        if (len + 1 < n) {
            size_t room = n - 1 - len;
            memcpy(buf + len, part, k < room ? k : room);
        }
        len += k;
    }
    va_end(ap);
    if (n)
        buf[len < n ? len : n - 1] = '\0';
    return len;
}

void ckube__human_duration(int64_t s, char *buf, size_t n)
{
    if (s < -1) {
        snprintf(buf, n, "<invalid>");
        return;
    }
    if (s < 0)
        s = 0;
    int64_t m = s / 60, h = s / 3600, d = s / 86400, y = d / 365;
    if (s < 120)
        snprintf(buf, n, "%" PRId64 "s", s);
    else if (m < 10)
        s % 60 ? snprintf(buf, n, "%" PRId64 "m%" PRId64 "s", m, s % 60)
               : snprintf(buf, n, "%" PRId64 "m", m);
    else if (m < 180)
        snprintf(buf, n, "%" PRId64 "m", m);
    else if (h < 8)
        m % 60 ? snprintf(buf, n, "%" PRId64 "h%" PRId64 "m", h, m % 60)
               : snprintf(buf, n, "%" PRId64 "h", h);
    else if (h < 48)
        snprintf(buf, n, "%" PRId64 "h", h);
    else if (h < 192)
        h % 24 ? snprintf(buf, n, "%" PRId64 "d%" PRId64 "h", d, h % 24)
               : snprintf(buf, n, "%" PRId64 "d", d);
    else if (y < 2)
        snprintf(buf, n, "%" PRId64 "d", d);
    else if (y < 8)
        d % 365 ? snprintf(buf, n, "%" PRId64 "y%" PRId64 "d", y, d % 365)
                : snprintf(buf, n, "%" PRId64 "y", y);
    else
        snprintf(buf, n, "%" PRId64 "y", y);
}

void ckube__reverse_dns(const char *name, char *buf, size_t n)
{
    if (!n)
        return;
    buf[0] = '\0';
    size_t end = strlen(name), used = 0;
    for (;;) {
        size_t start = end;
        while (start > 0 && name[start - 1] != '.')
            start--;
        int w = snprintf(buf + used, n - used, "%s%.*s", used ? "." : "", (int)(end - start),
                         name + start);
        if (w < 0 || (size_t)w >= n - used) {
            buf[used] = '\0'; /* whole labels only */
            return;
        }
        used += (size_t)w;
        if (start == 0)
            return;
        end = start - 1;
    }
}
