/* inproc_server.h - an API server run inside the test process, and a
 * small libcurl client for it (test_handlers.c, test_watch.c).
 *
 * ips_start builds a server over the memory backend, listening on a free
 * port of 127.0.0.1 with one loop thread; apiserver_start returns once
 * the default namespaces exist and the loop threads run, so requests can
 * follow at once. ips_stop ends it the way `ckube server` does
 * (drain, stop, wait, free: apiserver_free joins the loop threads).
 *
 * Every request has a deadline (IPS_REQ_TIMEOUT_MS), and a watch is read
 * through curl's multi interface, each wait bounded by the caller's
 * timeout, so a test never hangs on a server that does not answer.
 *
 * The helpers that assert are macros, so a failure names the test's line.
 */
#ifndef CKUBE_TEST_INPROC_SERVER_H
#define CKUBE_TEST_INPROC_SERVER_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "apiserver/server/apiserver.h"
#include "ckube/json.h"

#define IPS_REQ_TIMEOUT_MS 10000L

typedef struct ips {
    apiserver *srv;
    int port;
    CURL *curl; /* one handle: its connection is kept alive between requests */
} ips;

/* Starts a server (watch_ring: events kept per resource, 0 for the
 * default). Returns 0, or -1 after printing why. */
static inline int ips_start(ips *s, size_t watch_ring)
{
    signal(SIGPIPE, SIG_IGN); /* as `ckube server` does */
    memset(s, 0, sizeof *s);
    apiserver_config cfg = {.data_dir = NULL,
                            .listen_host = "127.0.0.1",
                            .port = 0,
                            .nloops = 1,
                            .watch_ring = watch_ring};
    char err[256] = "";
    s->srv = apiserver_new(&cfg, err, sizeof err);
    if (!s->srv) {
        fprintf(stderr, "apiserver_new: %s\n", err);
        return -1;
    }
    if (apiserver_start(s->srv, err, sizeof err) != 0) {
        fprintf(stderr, "apiserver_start: %s\n", err);
        apiserver_stop(s->srv);
        apiserver_free(s->srv);
        s->srv = NULL;
        return -1;
    }
    s->port = s->srv->port;
    s->curl = curl_easy_init();
    return s->port > 0 && s->curl ? 0 : -1;
}

static inline void ips_stop(ips *s)
{
    if (s->curl)
        curl_easy_cleanup(s->curl); /* closes its connection first */
    s->curl = NULL;
    if (!s->srv)
        return;
    apiserver_shutdown_begin(s->srv);
    apiserver_drain_begin(s->srv);
    apiserver_stop(s->srv);
    apiserver_wait(s->srv); /* returns at once: stop has signalled */
    apiserver_free(s->srv); /* joins the loop threads */
    s->srv = NULL;
}

/* ---- buffers ------------------------------------------------------------ */

typedef struct ips_buf {
    char *p;
    size_t len, cap;
} ips_buf;

static inline void ips_buf_add(ips_buf *b, const char *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            abort();
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static inline size_t ips_buf_cb(char *data, size_t size, size_t n, void *arg)
{
    ips_buf_add(arg, data, size * n);
    return size * n;
}

/* The value of the last header `name` among raw header lines (a 100
 * Continue's block comes first), copied into out; NULL when absent. */
static inline const char *ips_header_in(const char *headers, const char *name, char *out,
                                        size_t outlen)
{
    const char *found = NULL;
    size_t nl = strlen(name);
    for (const char *p = headers; p && *p;) {
        const char *eol = strstr(p, "\r\n");
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            snprintf(out, outlen, "%.*s", (int)(len - (size_t)(v - p)), v);
            found = out;
        }
        p = eol ? eol + 2 : NULL;
    }
    return found;
}

/* ---- one request -------------------------------------------------------------- */

typedef struct http_resp {
    long code; /* 0: no answer (the transfer failed) */
    ips_buf body;
    ips_buf headers;
    json_t *json; /* the body decoded, or NULL */
} http_resp;

static inline void resp_free(http_resp *r)
{
    if (!r)
        return;
    free(r->body.p);
    free(r->headers.p);
    json_decref(r->json);
    free(r);
}

/* A header of the response ("" when absent; the buffer is per call site
 * use: copy it if it must outlive the next call). */
static inline const char *resp_header(const http_resp *r, const char *name)
{
    static char buf[1024];
    return ips_header_in(r->headers.p, name, buf, sizeof buf) ? buf : "";
}

/* Sends one request; `ctype`, `body` and `accept` may be NULL. The path
 * is a printf format. Returns the response (never NULL; code 0 when the
 * transfer failed). */
static inline __attribute__((format(printf, 6, 7))) http_resp *
http_call(ips *s, const char *method, const char *ctype, const char *body, const char *accept,
          const char *pathfmt, ...)
{
    char path[2048], url[2200];
    va_list ap;
    va_start(ap, pathfmt);
    vsnprintf(path, sizeof path, pathfmt, ap);
    va_end(ap);
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    http_resp *r = calloc(1, sizeof *r);
    CURL *c = s->curl;
    curl_easy_reset(c); /* keeps the connection cache */
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, IPS_REQ_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ips_buf_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ips_buf_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ckube-unit-test/1.0");
    struct curl_slist *h = curl_slist_append(NULL, "Expect:");
    char line[512];
    if (ctype) {
        snprintf(line, sizeof line, "Content-Type: %s", ctype);
        h = curl_slist_append(h, line);
    }
    if (accept) {
        snprintf(line, sizeof line, "Accept: %s", accept);
        h = curl_slist_append(h, line);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "%s %s: %s\n", method, path, curl_easy_strerror(rc));
        return r;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
    if (r->body.len)
        r->json = json_loadb(r->body.p, r->body.len, 0, NULL);
    return r;
}

#define HGET(s, ...) http_call((s), "GET", NULL, NULL, NULL, __VA_ARGS__)
#define HDELETE(s, ...) http_call((s), "DELETE", NULL, NULL, NULL, __VA_ARGS__)
#define HPOST(s, body, ...) http_call((s), "POST", "application/json", (body), NULL, __VA_ARGS__)
#define HPUT(s, body, ...) http_call((s), "PUT", "application/json", (body), NULL, __VA_ARGS__)
#define HPATCH(s, ctype, body, ...) http_call((s), "PATCH", (ctype), (body), NULL, __VA_ARGS__)

/* A string (or "" when missing or not a string) at a ckube_json_get_path
 * path, and an integer (or -1). */
static inline const char *jstr(const json_t *j, const char *path)
{
    const char *v = json_string_value(ckube_json_get_path(j, path));
    return v ? v : "";
}

static inline long long jint(const json_t *j, const char *path)
{
    const json_t *v = ckube_json_get_path(j, path);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* Asserts the code and a decoded JSON body. */
#define assert_http(r, want)                                                                       \
    do {                                                                                           \
        if ((r)->code != (want))                                                                   \
            fprintf(stderr, "unexpected HTTP %ld (want %d): %.*s\n", (r)->code, (int)(want),       \
                    (int)((r)->body.len > 2000 ? 2000 : (r)->body.len),                            \
                    (r)->body.p ? (r)->body.p : "");                                               \
        assert_int_equal((r)->code, (want));                                                       \
        assert_non_null((r)->json);                                                                \
    } while (0)

/* Asserts a Status reply: HTTP code, the Status's code, reason and
 * message (exact, or NULL to skip) and the JSON content type. */
#define assert_status(r, want_code, want_reason, want_msg)                                         \
    do {                                                                                           \
        assert_http((r), (want_code));                                                             \
        assert_string_equal(resp_header((r), "Content-Type"), "application/json");                 \
        assert_string_equal(jstr((r)->json, "kind"), "Status");                                    \
        assert_string_equal(jstr((r)->json, "apiVersion"), "v1");                                  \
        assert_string_equal(jstr((r)->json, "status"), "Failure");                                 \
        assert_int_equal(jint((r)->json, "code"), (want_code));                                    \
        assert_string_equal(jstr((r)->json, "reason"), (want_reason));                             \
        if ((const char *)(want_msg) != NULL)                                                      \
            assert_string_equal(jstr((r)->json, "message"), (const char *)(want_msg));             \
    } while (0)

/* ---- watches ------------------------------------------------------------------- */

static inline int64_t ips_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A streaming request read as it arrives. */
typedef struct watch_stream {
    CURLM *multi;
    CURL *easy;
    struct curl_slist *hdrs;
    ips_buf data;
    ips_buf headers;
    size_t pos; /* bytes of data consumed as events */
    bool done;  /* the transfer ended */
    CURLcode result;
    long code;
} watch_stream;

static inline void watch_check_done(watch_stream *w)
{
    int left;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == w->easy) {
            w->done = true;
            w->result = m->data.result;
        }
    if (!w->code)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->code);
}

/* Moves the transfer on, waiting at most ms for something to happen. */
static inline void watch_pump(watch_stream *w, int ms)
{
    int running;
    curl_multi_perform(w->multi, &running);
    watch_check_done(w);
    if (w->done || ms <= 0)
        return;
    curl_multi_poll(w->multi, NULL, 0, ms, NULL);
    curl_multi_perform(w->multi, &running);
    watch_check_done(w);
}

/* Starts a GET of `path` (a printf format) and waits (up to 5 s) for the
 * response's status line and headers. */
static inline __attribute__((format(printf, 3, 4))) watch_stream *
watch_open(ips *s, const char *accept, const char *pathfmt, ...)
{
    char path[2048], url[2200];
    va_list ap;
    va_start(ap, pathfmt);
    vsnprintf(path, sizeof path, pathfmt, ap);
    va_end(ap);
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    watch_stream *w = calloc(1, sizeof *w);
    w->multi = curl_multi_init();
    w->easy = curl_easy_init();
    curl_easy_setopt(w->easy, CURLOPT_URL, url);
    curl_easy_setopt(w->easy, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(w->easy, CURLOPT_NOSIGNAL, 1L);
    /* A backstop only: every wait below has its own, shorter deadline. */
    curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, ips_buf_cb);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, &w->data);
    curl_easy_setopt(w->easy, CURLOPT_HEADERFUNCTION, ips_buf_cb);
    curl_easy_setopt(w->easy, CURLOPT_HEADERDATA, &w->headers);
    if (accept) {
        char line[512];
        snprintf(line, sizeof line, "Accept: %s", accept);
        w->hdrs = curl_slist_append(NULL, line);
        curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->hdrs);
    }
    curl_multi_add_handle(w->multi, w->easy);
    int64_t deadline = ips_now_ms() + 5000;
    while (!w->done && !w->code && ips_now_ms() < deadline)
        watch_pump(w, 50);
    return w;
}

static inline void watch_close(watch_stream *w)
{
    if (!w)
        return;
    curl_multi_remove_handle(w->multi, w->easy);
    curl_easy_cleanup(w->easy);
    curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->hdrs);
    free(w->data.p);
    free(w->headers.p);
    free(w);
}

/* The next complete line, decoded, when one arrives within ms; NULL on
 * timeout or at the end of the stream. */
static inline json_t *watch_next(watch_stream *w, int ms)
{
    int64_t deadline = ips_now_ms() + ms;
    for (;;) {
        char *start = w->data.p ? w->data.p + w->pos : NULL;
        char *nl = start ? memchr(start, '\n', w->data.len - w->pos) : NULL;
        if (nl) {
            json_error_t je;
            json_t *ev = json_loadb(start, (size_t)(nl - start), 0, &je);
            if (!ev)
                fprintf(stderr, "undecodable watch line: %.*s (%s)\n", (int)(nl - start), start,
                        je.text);
            w->pos = (size_t)(nl - w->data.p) + 1;
            return ev ? ev : json_null();
        }
        int64_t left = deadline - ips_now_ms();
        if (w->done || left <= 0)
            return NULL;
        watch_pump(w, left > 100 ? 100 : (int)left);
    }
}

/* Waits up to ms for the stream to end; true if it did. */
static inline bool watch_wait_end(watch_stream *w, int ms)
{
    int64_t deadline = ips_now_ms() + ms;
    while (!w->done && ips_now_ms() < deadline)
        watch_pump(w, 100);
    return w->done;
}

/* Asserts the next event's type and object name (NULL: any name) within
 * 3 s; returns the event (the caller json_decref's it). */
static inline json_t *expect_event_at(watch_stream *w, const char *type, const char *name,
                                      const char *file, int line)
{
    json_t *ev = watch_next(w, 3000);
    if (!ev)
        fprintf(stderr, "no %s event for %s within 3 s\n", type, name ? name : "(any)");
    _assert_true(ev != NULL, "event", file, line);
    _assert_string_equal(jstr(ev, "type"), type, file, line);
    if (name)
        _assert_string_equal(jstr(ev, "object.metadata.name"), name, file, line);
    return ev;
}
#define expect_event(w, type, name) expect_event_at((w), (type), (name), __FILE__, __LINE__)

/* Asserts that no event arrives within ms. */
#define expect_no_event(w, ms)                                                                     \
    do {                                                                                           \
        json_t *ev_ = watch_next((w), (ms));                                                       \
        if (ev_) {                                                                                 \
            char *s_ = json_dumps(ev_, JSON_COMPACT);                                              \
            fprintf(stderr, "unexpected watch event: %s\n", s_ ? s_ : "?");                        \
            free(s_);                                                                              \
        }                                                                                          \
        assert_null(ev_);                                                                          \
    } while (0)

#endif
