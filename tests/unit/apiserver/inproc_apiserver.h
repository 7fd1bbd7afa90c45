/* inproc_apiserver.h - an API server in the test's own process, and a small
 * libcurl client for it (shared by the apiextensions and discovery tests;
 * each test file is its own executable, so everything here is static).
 *
 * ips_start builds a server with the memory backend listening on a free
 * loopback port (127.0.0.1:0), as `ckube server --storage memory` would,
 * and starts it: its registry, store and CRD machinery (srv->registry,
 * srv->store, srv->crds) are then the very ones its HTTP handlers use.
 * ips_stop shuts it down in the order `ckube server` does. Call them from
 * cmocka setup and teardown so that a failed assertion still stops it.
 */
#ifndef CKUBE_TEST_APISERVER_INPROC_APISERVER_H
#define CKUBE_TEST_APISERVER_INPROC_APISERVER_H

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "apiserver/server/apiserver.h"

typedef struct ips {
    apiserver *srv;
    int port;
} ips;

static inline void ips_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline double ips_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Polls cond(arg) every 5 ms until it holds or `ms` pass; returns its
 * last value. */
static inline bool ips_wait(bool (*cond)(void *), void *arg, int ms)
{
    double until = ips_now() + ms / 1000.0;
    while (!cond(arg)) {
        if (ips_now() >= until)
            return cond(arg);
        ips_sleep_ms(5);
    }
    return true;
}

/* Group setup and teardown: libcurl's global state. */
static inline int ips_global_setup(void **state)
{
    (void)state;
    /* The server ignores SIGPIPE in `ckube server`'s main; so do we. */
    signal(SIGPIPE, SIG_IGN);
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static inline int ips_global_teardown(void **state)
{
    (void)state;
    curl_global_cleanup();
    return 0;
}

/* Starts a server on 127.0.0.1 (a free port, one loop, memory storage).
 * 0, or -1 with the reason on stderr. */
static inline int ips_start(ips *p)
{
    memset(p, 0, sizeof *p);
    apiserver_config cfg = {.data_dir = NULL, .listen_host = "127.0.0.1", .port = 0, .nloops = 1};
    char err[512] = "";
    p->srv = apiserver_new(&cfg, err, sizeof err);
    if (!p->srv) {
        fprintf(stderr, "apiserver_new: %s\n", err);
        return -1;
    }
    if (apiserver_start(p->srv, err, sizeof err) != 0) {
        fprintf(stderr, "apiserver_start: %s\n", err);
        apiserver_stop(p->srv);
        apiserver_free(p->srv);
        p->srv = NULL;
        return -1;
    }
    p->port = p->srv->port;
    return 0;
}

/* Stops and frees the server as `ckube server` does on SIGTERM: not
 * ready, listeners closed, requests in flight given (at most 2 s) to
 * finish, then stop and free. Safe on a server that never started. */
static inline void ips_stop(ips *p)
{
    if (!p || !p->srv)
        return;
    apiserver_shutdown_begin(p->srv);
    apiserver_drain_begin(p->srv);
    double until = ips_now() + 2.0;
    while (apiserver_inflight(p->srv) > 0 && ips_now() < until)
        ips_sleep_ms(5);
    apiserver_stop(p->srv);
    apiserver_free(p->srv);
    p->srv = NULL;
}

/* ---- HTTP -------------------------------------------------------------- */

typedef struct http_reply {
    long code; /* -1: no answer */
    char *body;
    size_t len;
    char *headers; /* every header line of the (last) response */
    size_t hlen;
} http_reply;

static inline size_t ips_on_bytes(char *ptr, size_t size, size_t nmemb, char **buf, size_t *len)
{
    size_t n = size * nmemb;
    char *d = realloc(*buf, *len + n + 1);
    if (!d)
        return 0;
    memcpy(d + *len, ptr, n);
    *len += n;
    d[*len] = '\0';
    *buf = d;
    return n;
}

static inline size_t ips_on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    http_reply *r = ud;
    return ips_on_bytes(ptr, size, nmemb, &r->body, &r->len);
}

static inline size_t ips_on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    http_reply *r = ud;
    /* A new status line (after a 100 Continue): keep the last response's. */
    if (size * nmemb >= 5 && !strncmp(ptr, "HTTP/", 5)) {
        free(r->headers);
        r->headers = NULL;
        r->hlen = 0;
    }
    return ips_on_bytes(ptr, size, nmemb, &r->headers, &r->hlen);
}

static inline void http_reply_free(http_reply *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

/* One request to 127.0.0.1:port: `method` on `path`, with the extra
 * header lines in `hdrs` (NULL-terminated; may be NULL) and `body` (JSON;
 * may be NULL). Fills *r (free with http_reply_free); returns r->code.
 * Bounded by a 5 s timeout. */
static inline long http_do(int port, const char *method, const char *path, const char *const *hdrs,
                           const char *body, http_reply *r)
{
    memset(r, 0, sizeof *r);
    r->code = -1;
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    if (!c)
        return -1;
    struct curl_slist *h = NULL;
    for (const char *const *p = hdrs; p && *p; p++)
        h = curl_slist_append(h, *p);
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ips_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ips_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r->body)
        r->body = strdup("");
    return r->code;
}

/* The value of header `name` in r (case-insensitive name, surrounding
 * blanks trimmed), copied into buf; NULL when absent. */
static inline const char *http_header(const http_reply *r, const char *name, char *buf, size_t n)
{
    size_t nl = strlen(name);
    for (const char *line = r->headers; line && *line;) {
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

/* The reply's body as JSON (a new reference), or NULL. */
static inline json_t *http_json(const http_reply *r)
{
    json_error_t e;
    return r->body ? json_loadb(r->body, r->len, 0, &e) : NULL;
}

#endif
