/* JSON, time and identifier helpers; see ckube/json.h. */
#include "ckube/json.h"
#include "common/json_parse.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

const char *ckube_obj_name(const json_t *obj)
{
    return meta_str(obj, "name");
}
const char *ckube_obj_namespace(const json_t *obj)
{
    return meta_str(obj, "namespace");
}
const char *ckube_obj_resource_version(const json_t *obj)
{
    return meta_str(obj, "resourceVersion");
}
const char *ckube_obj_uid(const json_t *obj)
{
    return meta_str(obj, "uid");
}
const char *ckube_obj_kind(const json_t *obj)
{
    return json_string_value(json_object_get(obj, "kind"));
}
const char *ckube_obj_api_version(const json_t *obj)
{
    return json_string_value(json_object_get(obj, "apiVersion"));
}

json_t *ckube_json_get_path(const json_t *obj, const char *path)
{
    json_t *cur = (json_t *)obj;
    const char *p = path;
    char seg[256];
    while (cur && *p) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            char *end;
            long idx = strtol(p + 1, &end, 10);
            if (*end != ']' || !json_is_array(cur))
                return NULL;
            cur = json_array_get(cur, (size_t)idx);
            p = end + 1;
            continue;
        }
        size_t n = strcspn(p, ".[");
        if (n >= sizeof seg)
            return NULL;
        memcpy(seg, p, n);
        seg[n] = 0;
        cur = json_is_object(cur) ? json_object_get(cur, seg) : NULL;
        p += n;
    }
    return cur;
}

json_t *ckube_json_object_ensure(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_object(v)) {
        v = json_object();
        json_object_set_new(obj, key, v);
    }
    return v;
}

json_t *ckube_json_loads(const char *buf, size_t len, char **err)
{
    json_error_t e;
    json_t *v = ckube__json_loadb(buf, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
    if (!v && err) {
        if (asprintf(err, "line %d, column %d: %s", e.line, e.column, e.text) < 0)
            *err = NULL;
    }
    return v;
}

void ckube_now_rfc3339(char *buf, size_t n)
{
    /* Every write stamps a time or two (creationTimestamp, managedFields)
     * and most come within the same second as the one before on their
     * thread: format a second once. */
    static _Thread_local time_t last = (time_t)-1;
    static _Thread_local char text[32];
    time_t t = time(NULL);
    if (t != last) {
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
        last = t;
    }
    if (n) { /* snprintf's truncation, without its cost */
        size_t len = strlen(text), k = len < n - 1 ? len : n - 1;
        memcpy(buf, text, k);
        buf[k] = '\0';
    }
}

void ckube_now_rfc3339_micro(char *buf, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tmp[32];
    strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%06ldZ", tmp, ts.tv_nsec / 1000);
}

int64_t ckube_parse_rfc3339(const char *s)
{
    struct tm tm = {0};
    if (!s)
        return -1;
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return -1;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        /* exactly "+hh:mm" (sscanf's %2d would take "+1:5" and the six
         * bytes skipped below would run past the end) */
        for (int i = 1; i <= 5; i++)
            if (i == 3 ? p[i] != ':' : (p[i] < '0' || p[i] > '9'))
                return -1;
        int hh = (p[1] - '0') * 10 + (p[2] - '0'), mm = (p[4] - '0') * 10 + (p[5] - '0');
        off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
        p += 6;
    } else {
        return -1;
    }
    if (*p)
        return -1;
    return (int64_t)timegm(&tm) - off;
}

static void random_bytes(unsigned char *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            /* getrandom cannot fail on Linux >= 3.17 with a sane buffer; fall
             * back to rand() so ids are at least unique-ish. */
            for (; got < n; got++)
                b[got] = (unsigned char)rand();
            return;
        }
        got += (size_t)r;
    }
}

/* Random bytes for uids, one getrandom() per 32 of them rather than per
 * object created. Per thread; a forked child starts with an empty pool so
 * it never repeats its parent's ids. */
static _Thread_local unsigned char uid_pool[512];
static _Thread_local size_t uid_left;
static pthread_once_t uid_once = PTHREAD_ONCE_INIT;

static void uid_pool_forget(void)
{
    explicit_bzero(uid_pool, sizeof uid_pool);
    uid_left = 0;
}

static void uid_pool_init(void)
{
    pthread_atfork(NULL, NULL, uid_pool_forget);
}

static void uid_bytes(unsigned char *b, size_t n)
{
    pthread_once(&uid_once, uid_pool_init);
    if (uid_left < n) {
        random_bytes(uid_pool, sizeof uid_pool);
        uid_left = sizeof uid_pool;
    }
    unsigned char *p = uid_pool + sizeof uid_pool - uid_left;
    memcpy(b, p, n);
    explicit_bzero(p, n); /* handed out once */
    uid_left -= n;
}

void ckube_uuid4(char *buf, size_t n)
{
    unsigned char b[16];
    uid_bytes(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    /* 8-4-4-4-12 lowercase hex (one per object created: no printf). */
    static const char hex[] = "0123456789abcdef";
    char out[37];
    size_t o = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = 0;
    if (n >= sizeof out) {
        memcpy(buf, out, sizeof out);
    } else if (n) {
        memcpy(buf, out, n - 1);
        buf[n - 1] = 0;
    }
}

void ckube_random_suffix(char *buf, size_t n)
{
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    unsigned char b[64];
    if (n > sizeof b)
        n = sizeof b;
    random_bytes(b, n);
    for (size_t i = 0; i < n; i++)
        buf[i] = alphabet[b[i] % (sizeof alphabet - 1)];
    buf[n] = 0;
}

uint64_t ckube_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
