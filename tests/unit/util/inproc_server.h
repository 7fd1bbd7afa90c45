/* inproc_server.h - an API server run inside the test process, and a
 * small libcurl client for it (each test file is its own executable, so
 * everything here is static inline).
 *
 * ips_start builds a server over the memory backend listening on a free
 * port of 127.0.0.1 with one loop thread, as `ckube server --storage
 * memory` would, and starts it: apiserver_start returns once the default
 * namespaces exist and the loop threads run, so requests can follow at
 * once, and its registry, store, cache and CRD machinery (s->srv->registry,
 * ->store, ->cache, ->crds) are the very ones its HTTP handlers use.
 * ips_stop ends it the way `ckube server` does on SIGTERM. Call them from
 * cmocka setup and teardown so that a failed assertion still stops it,
 * and run the group with ips_global_setup/ips_global_teardown (libcurl's
 * global state).
 *
 * Every request has a deadline (IPS_REQ_TIMEOUT_MS), and a watch is read
 * through curl's multi interface, each wait bounded by the caller's
 * timeout, so a test never hangs on a server that does not answer.
 *
 * Who owns what the helpers return:
 *   ips_start          fills *s; s->srv and s->curl belong to s until
 *                      ips_stop (the caller owns s itself).
 *   http_call, HGET..  a new http_resp, never NULL: free it with
 *                      resp_free; r->json (and the buffers) go with it
 *                      (json_incref to keep the document longer).
 *   http_header        copies the value into the caller's buffer and
 *                      returns that buffer (NULL when absent).
 *   ips_json_parse     a new reference (json_decref), or NULL.
 *   jstr               a string borrowed from the document (or a static
 *                      ""): valid while the document lives.
 *   watch_open         a new watch_stream, never NULL: watch_close it.
 *   watch_next,        a new reference to the event (json_decref), NULL
 *   expect_event       on timeout or at the end of the stream.
 *
 * The helpers that assert are macros (or take __FILE__/__LINE__), so a
 * failure names the test's line.
 */
#ifndef CKUBE_TEST_INPROC_SERVER_H
#define CKUBE_TEST_INPROC_SERVER_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <errno.h>
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

/* ---- time ------------------------------------------------------------------ */

static inline int64_t ips_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void ips_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Polls cond(arg) every 5 ms until it holds or `ms` pass; returns its
 * last value. */
static inline bool ips_wait(bool (*cond)(void *), void *arg, int ms)
{
    int64_t until = ips_now_ms() + ms;
    while (!cond(arg)) {
        if (ips_now_ms() >= until)
            return cond(arg);
        ips_sleep_ms(5);
    }
    return true;
}

/* ---- the server ------------------------------------------------------------- */

typedef struct ips {
    apiserver *srv;
    int port;
    CURL *curl; /* one handle: its connection is kept alive between requests */
} ips;

/* Group setup and teardown: libcurl's global state. */
static inline int ips_global_setup(void **state)
{
    (void)state;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static inline int ips_global_teardown(void **state)
{
    (void)state;
    curl_global_cleanup();
    return 0;
}

static inline void ips_stop(ips *s);

/* Starts a server (watch_ring: events kept per resource, 0 for the
 * default). Returns 0, or -1 after printing why (nothing is left
 * running). */
static inline int ips_start(ips *s, size_t watch_ring)
{
    signal(SIGPIPE, SIG_IGN); /* as `ckube server` does */
    memset(s, 0, sizeof *s);
    apiserver_config cfg = {.data_dir = NULL,
                            .listen_host = "127.0.0.1",
                            .port = 0,
                            .nloops = 1,
                            .watch_ring = watch_ring};
    char *err = NULL;
    s->srv = apiserver_new(&cfg, &err);
    if (!s->srv) {
        fprintf(stderr, "apiserver_new: %s\n", err ? err : "?");
        free(err);
        return -1;
    }
    if (apiserver_start(s->srv, &err) != 0) {
        fprintf(stderr, "apiserver_start: %s\n", err ? err : "?");
        free(err);
        apiserver_stop(s->srv);
        apiserver_free(s->srv);
        s->srv = NULL;
        return -1;
    }
    s->port = s->srv->port;
    s->curl = curl_easy_init();
    if (s->port <= 0 || !s->curl) {
        fprintf(stderr, "ips_start: no port or no curl handle\n");
        ips_stop(s);
        return -1;
    }
    return 0;
}

/* Stops and frees the server as `ckube server` does on SIGTERM: not
 * ready, listeners closed, requests in flight given (at most 2 s) to
 * finish, then stop (which ends the watches) and free (which joins the
 * loop threads). Safe to call twice, and on a server that never started. */
static inline void ips_stop(ips *s)
{
    if (!s)
        return;
    if (s->curl)
        curl_easy_cleanup(s->curl); /* closes its connection first */
    s->curl = NULL;
    if (!s->srv)
        return;
    apiserver_shutdown_begin(s->srv);
    apiserver_drain_begin(s->srv);
    int64_t until = ips_now_ms() + 2000;
    while (apiserver_inflight(s->srv) > 0 && ips_now_ms() < until)
        ips_sleep_ms(5);
    apiserver_stop(s->srv);
    apiserver_free(s->srv);
    s->srv = NULL;
}

/* ---- buffers and JSON -------------------------------------------------------- */

typedef struct ips_buf {
    char *p; /* NUL-terminated once anything is added */
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

static inline size_t ips_on_body(char *data, size_t size, size_t n, void *arg)
{
    ips_buf_add(arg, data, size * n);
    return size * n;
}

/* Header lines: a new status line (after a 100 Continue) starts the block
 * again, so it holds the last response's. */
static inline size_t ips_on_header(char *data, size_t size, size_t n, void *arg)
{
    ips_buf *b = arg;
    if (size * n >= 5 && !strncmp(data, "HTTP/", 5))
        b->len = 0;
    ips_buf_add(b, data, size * n);
    return size * n;
}

/* text[0, len) decoded as JSON: a new reference, or NULL (the reason in
 * *err when err is given). */
static inline json_t *ips_json_parse(const char *text, size_t len, json_error_t *err)
{
    json_error_t mine;
    if (!err)
        err = &mine;
    if (!text) {
        snprintf(err->text, sizeof err->text, "no text");
        return NULL;
    }
    return json_loadb(text, len, 0, err);
}

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

/* ---- one request --------------------------------------------------------------- */

typedef struct http_resp {
    long code;       /* 0: no answer (the transfer failed) */
    ips_buf body;    /* after http_call body.p is never NULL ("" when empty) */
    ips_buf headers; /* the raw header lines of the (last) response */
    json_t *json;    /* the body decoded, or NULL */
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

/* The value of header `name` in r (the name matched case-insensitively,
 * the value's surrounding blanks trimmed), copied into buf; returns buf,
 * or NULL when r has no such header. */
static inline const char *http_header(const http_resp *r, const char *name, char *buf, size_t n)
{
    size_t nl = strlen(name);
    for (const char *line = r->headers.p; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len > nl && !strncasecmp(line, name, nl) && line[nl] == ':') {
            const char *v = line + nl + 1;
            const char *end = line + len;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            while (end > v && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
                end--;
            snprintf(buf, n, "%.*s", (int)(end - v), v);
            return buf;
        }
        line = eol ? eol + 1 : NULL;
    }
    return NULL;
}

/* The options every transfer to the server shares: the URL of `path` on
 * s's port, the deadlines, where the body and the header lines go, and
 * the header list h (NULL for none). */
static inline void ips_easy_setup(CURL *c, const ips *s, const char *path, struct curl_slist *h,
                                  long timeout_ms, ips_buf *body, ips_buf *headers)
{
    char url[2200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ips_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ips_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ckube-unit-test/1.0");
    if (h)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
}

/* Appends the header lines of hdrs (NULL-terminated; may be NULL) to h. */
static inline struct curl_slist *ips_add_headers(struct curl_slist *h, const char *const *hdrs)
{
    for (const char *const *p = hdrs; p && *p; p++)
        h = curl_slist_append(h, *p);
    return h;
}

/* Builds a NULL-terminated list of header lines in place. */
#define IPS_HEADERS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Sends one request to the server: `method` on the path (a printf
 * format), with `body` (NULL: none) as `ctype` (NULL: application/json)
 * and the extra header lines `hdrs` (NULL-terminated, e.g.
 * IPS_HEADERS("Accept: ..."); NULL for none). Returns the response (never
 * NULL; code 0 when the transfer failed), which the caller frees with
 * resp_free. */
static inline __attribute__((format(printf, 6, 7))) http_resp *
http_call(ips *s, const char *method, const char *ctype, const char *body, const char *const *hdrs,
          const char *pathfmt, ...)
{
    char path[2048];
    va_list ap;
    va_start(ap, pathfmt);
    vsnprintf(path, sizeof path, pathfmt, ap);
    va_end(ap);
    http_resp *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    CURL *c = s->curl;
    curl_easy_reset(c);                                        /* keeps the connection cache */
    struct curl_slist *h = curl_slist_append(NULL, "Expect:"); /* no 100-continue round trip */
    if (body) {
        char line[512];
        snprintf(line, sizeof line, "Content-Type: %s", ctype ? ctype : "application/json");
        h = curl_slist_append(h, line);
    }
    h = ips_add_headers(h, hdrs);
    ips_easy_setup(c, s, path, h, IPS_REQ_TIMEOUT_MS, &r->body, &r->headers);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    if (rc != CURLE_OK)
        fprintf(stderr, "%s %s: %s\n", method, path, curl_easy_strerror(rc));
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
    if (!r->body.p)
        ips_buf_add(&r->body, "", 0);
    r->json = ips_json_parse(r->body.p, r->body.len, NULL);
    return r;
}

#define HGET(s, ...) http_call((s), "GET", NULL, NULL, NULL, __VA_ARGS__)
#define HDELETE(s, ...) http_call((s), "DELETE", NULL, NULL, NULL, __VA_ARGS__)
#define HPOST(s, body, ...) http_call((s), "POST", "application/json", (body), NULL, __VA_ARGS__)
#define HPUT(s, body, ...) http_call((s), "PUT", "application/json", (body), NULL, __VA_ARGS__)
#define HPATCH(s, ctype, body, ...) http_call((s), "PATCH", (ctype), (body), NULL, __VA_ARGS__)

/* Asserts that r has header `name` with the value `want`. */
#define assert_header(r, name, want)                                                               \
    do {                                                                                           \
        char hv_[1024];                                                                            \
        const char *v_ = http_header((r), (name), hv_, sizeof hv_);                                \
        if (!v_)                                                                                   \
            fail_msg("no %s header", (const char *)(name));                                        \
        assert_string_equal(v_, (want));                                                           \
    } while (0)

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
        assert_header((r), "Content-Type", "application/json");                                    \
        assert_string_equal(jstr((r)->json, "kind"), "Status");                                    \
        assert_string_equal(jstr((r)->json, "apiVersion"), "v1");                                  \
        assert_string_equal(jstr((r)->json, "status"), "Failure");                                 \
        assert_int_equal(jint((r)->json, "code"), (want_code));                                    \
        assert_string_equal(jstr((r)->json, "reason"), (want_reason));                             \
        if ((const char *)(want_msg) != NULL)                                                      \
            assert_string_equal(jstr((r)->json, "message"), (const char *)(want_msg));             \
    } while (0)

/* ---- watches ------------------------------------------------------------------- */

/* A streaming request read as it arrives. */
typedef struct watch_stream {
    CURLM *multi;
    CURL *easy;
    struct curl_slist *hdrs;
    http_resp resp; /* code, header lines, and the body so far (json unused) */
    size_t pos;     /* bytes of resp.body consumed as events */
    bool done;      /* the transfer ended */
    CURLcode result;
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
    if (!w->resp.code)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->resp.code);
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

/* Starts a GET of the path (a printf format) with the extra header lines
 * `hdrs` (as http_call's) and waits (up to 5 s) for the response's status
 * line and headers. */
static inline __attribute__((format(printf, 3, 4))) watch_stream *
watch_open(ips *s, const char *const *hdrs, const char *pathfmt, ...)
{
    char path[2048];
    va_list ap;
    va_start(ap, pathfmt);
    vsnprintf(path, sizeof path, pathfmt, ap);
    va_end(ap);
    watch_stream *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->multi = curl_multi_init();
    w->easy = curl_easy_init();
    w->hdrs = ips_add_headers(NULL, hdrs);
    /* A backstop only: every wait below has its own, shorter deadline. */
    ips_easy_setup(w->easy, s, path, w->hdrs, 30000L, &w->resp.body, &w->resp.headers);
    curl_multi_add_handle(w->multi, w->easy);
    int64_t deadline = ips_now_ms() + 5000;
    while (!w->done && !w->resp.code && ips_now_ms() < deadline)
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
    free(w->resp.body.p);
    free(w->resp.headers.p);
    json_decref(w->resp.json);
    free(w);
}

/* The next complete line, decoded (json_null() when it is not JSON), when
 * one arrives within ms; NULL on timeout or at the end of the stream. */
static inline json_t *watch_next(watch_stream *w, int ms)
{
    int64_t deadline = ips_now_ms() + ms;
    for (;;) {
        ips_buf *d = &w->resp.body;
        char *start = d->p ? d->p + w->pos : NULL;
        char *nl = start ? memchr(start, '\n', d->len - w->pos) : NULL;
        if (nl) {
            json_error_t je;
            json_t *ev = ips_json_parse(start, (size_t)(nl - start), &je);
            if (!ev)
                fprintf(stderr, "undecodable watch line: %.*s (%s)\n", (int)(nl - start), start,
                        je.text);
            w->pos = (size_t)(nl - d->p) + 1;
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
