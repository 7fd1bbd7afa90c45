/* libcurl plumbing of the REST client: global init, the shared caches, the
 * pool of easy handles, per-request options, response headers, logging
 * and error construction. */
#include "client/client_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckube/json.h"
#include "ckube/log.h"
#include "common/json_parse.h"

/* ---- global init ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int ckube__curl_global_init(void)
{
    pthread_once(&global_once, global_init);
    return global_rc == CURLE_OK ? 0 : -1;
}

/* ---- shared caches and the handle pool ---- */

#define POOL_MAX 8

struct ckube__http {
    CURLSH *share;
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_mu;
    CURL *pool[POOL_MAX];
    int npool;
};

static void share_lock(CURL *e, curl_lock_data d, curl_lock_access a, void *ud)
{
    (void)e;
    (void)a;
    ckube__http *h = ud;
    if ((unsigned)d < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&h->locks[d]);
}

static void share_unlock(CURL *e, curl_lock_data d, void *ud)
{
    (void)e;
    ckube__http *h = ud;
    if ((unsigned)d < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&h->locks[d]);
}

ckube__http *ckube__http_new(void)
{
    ckube__http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&h->locks[i], NULL);
    pthread_mutex_init(&h->pool_mu, NULL);
    h->share = curl_share_init();
    if (!h->share) {
        ckube__http_free(h);
        return NULL;
    }
    curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return h;
}

void ckube__http_free(ckube__http *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->npool; i++)
        curl_easy_cleanup(h->pool[i]);
    if (h->share)
        curl_share_cleanup(h->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&h->locks[i]);
    pthread_mutex_destroy(&h->pool_mu);
    free(h);
}

CURL *ckube__http_get_handle(ckube__http *h)
{
    CURL *e = NULL;
    pthread_mutex_lock(&h->pool_mu);
    if (h->npool > 0)
        e = h->pool[--h->npool];
    pthread_mutex_unlock(&h->pool_mu);
    if (e)
        curl_easy_reset(e); /* keeps its live connections */
    else
        e = curl_easy_init();
    return e;
}

void ckube__http_put_handle(ckube__http *h, CURL *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&h->pool_mu);
    if (h->npool < POOL_MAX) {
        h->pool[h->npool++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&h->pool_mu);
    if (e)
        curl_easy_cleanup(e);
}

CURLSH *ckube__http_share(ckube__http *h)
{
    return h->share;
}

/* ---- response headers ---- */

void ckube__resp_headers_clear(ckube__resp_headers *h)
{
    ckube__strv_free(h->warnings, h->nwarnings);
    memset(h, 0, sizeof *h);
    h->retry_after = -1;
}

static const char *skip_sp(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Parses a quoted-string at *pp; returns the unescaped text (malloc'd) or
 * NULL when there is none. */
static char *quoted(const char **pp, const char *end)
{
    const char *p = *pp;
    if (p >= end || *p != '"')
        return NULL;
    p++;
    ckube__strbuf b = {0};
    ckube__sb_reserve(&b, 16);
    while (p < end && *p != '"') {
        if (*p == '\\' && p + 1 < end)
            p++;
        ckube__sb_addc(&b, *p++);
    }
    if (p >= end) {
        free(b.s);
        return NULL;
    }
    *pp = p + 1;
    return ckube__sb_take(&b);
}

/* RFC 7234 Warning: 1#(warn-code SP warn-agent SP warn-text [SP warn-date]).
 * Only code 299 ("Miscellaneous persistent warning") carries API warnings,
 * so the others are skipped, as client-go does. Parsing stops at the first
 * malformed element. */
void ckube__parse_warning_header(const char *v, size_t len, char ***out, size_t *n)
{
    const char *p = v, *end = v + len;
    for (;;) {
        p = skip_sp(p, end);
        while (p < end && (*p == ',' || *p == ' ' || *p == '\t'))
            p++;
        if (p >= end)
            return;
        if (end - p < 4 || !isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]) ||
            !isdigit((unsigned char)p[2]) || p[3] != ' ')
            return;
        int code = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
        p += 4;
        while (p < end && *p != ' ') /* warn-agent */
            p++;
        p = skip_sp(p, end);
        char *text = quoted(&p, end);
        if (!text)
            return;
        const char *q = skip_sp(p, end);
        if (q < end && *q == '"') { /* optional warn-date */
            char *date = quoted(&q, end);
            free(date);
            p = q;
        }
        if (code != 299) {
            free(text);
            continue;
        }
        char **nv = realloc(*out, (*n + 1) * sizeof *nv);
        if (!nv) {
            free(text);
            return;
        }
        *out = nv;
        nv[(*n)++] = text;
    }
}

static bool header_is(const char *line, size_t len, const char *name, const char **val,
                      size_t *vlen)
{
    size_t nl = strlen(name);
    if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
        return false;
    const char *v = line + nl + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    *val = v;
    *vlen = (size_t)(end - v);
    return true;
}

size_t ckube__header_cb(char *buf, size_t size, size_t n, void *ud)
{
    ckube__resp_headers *h = ud;
    size_t len = size * n;
    const char *v;
    size_t vl;
    if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {
        ckube__resp_headers_clear(h);
        const char *sp = memchr(buf, ' ', len);
        if (sp && (size_t)(sp - buf) + 4 <= len)
            h->code = strtol(sp + 1, NULL, 10);
    } else if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
        if (h->code >= 200)
            h->done = true;
    } else if (header_is(buf, len, "Warning", &v, &vl)) {
        ckube__parse_warning_header(v, vl, &h->warnings, &h->nwarnings);
    } else if (header_is(buf, len, "Retry-After", &v, &vl)) {
        char tmp[16];
        if (vl > 0 && vl < sizeof tmp) {
            memcpy(tmp, v, vl);
            tmp[vl] = 0;
            char *e;
            long s = strtol(tmp, &e, 10);
            if (!*e && s >= 0 && s < 1000000)
                h->retry_after = (int)s;
        }
    } else if (header_is(buf, len, "Content-Type", &v, &vl)) {
        h->text_content = vl >= 5 && !strncasecmp(v, "text/", 5);
    }
    return len;
}

/* ---- request options ---- */

static struct curl_slist *add_header(struct curl_slist *l, bool *oom, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static struct curl_slist *add_header(struct curl_slist *l, bool *oom, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0) {
        *oom = true;
        return l;
    }
    struct curl_slist *n = curl_slist_append(l, s);
    free(s);
    if (!n) {
        *oom = true;
        return l;
    }
    return n;
}

static void set_blob(CURL *e, CURLoption opt, const char *data, size_t len)
{
    struct curl_blob b = {.data = (void *)data, .len = len, .flags = CURL_BLOB_COPY};
    curl_easy_setopt(e, opt, &b);
}

int ckube__easy_setup(ckube_client *c, CURL *e, const ckube__req *rq, const ckube__creds *cr,
                      ckube__resp_headers *hdrs, struct curl_slist **slist, ckube_status **err)
{
    const ckube_config *cfg = c->cfg;
    *slist = NULL;
    char *url = NULL;
    if (asprintf(&url, "%s%s", c->curl_base, rq->path) < 0) {
        *err = ckube__local_error("out of memory");
        return -1;
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    free(url); /* libcurl copies string options */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_SHARE, ckube__http_share(c->http));
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L); /* client-go's dialer */
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
    if (!rq->watch && cfg->timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)cfg->timeout_ms);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* gzip etc., as Go's transport */
    if (cfg->proxy_url)
        curl_easy_setopt(e, CURLOPT_PROXY, cfg->proxy_url);
    if (c->connect_to_list)
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to_list);

    /* TLS */
    if (cfg->ca_data)
        set_blob(e, CURLOPT_CAINFO_BLOB, cfg->ca_data, cfg->ca_data_len);
    else if (cfg->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file);
    if (cr && cr->cert) {
        set_blob(e, CURLOPT_SSLCERT_BLOB, cr->cert, cr->cert_len);
        set_blob(e, CURLOPT_SSLKEY_BLOB, cr->key, cr->key_len);
    } else {
        if (cfg->cert_data)
            set_blob(e, CURLOPT_SSLCERT_BLOB, cfg->cert_data, cfg->cert_data_len);
        else if (cfg->cert_file)
            curl_easy_setopt(e, CURLOPT_SSLCERT, cfg->cert_file);
        if (cfg->key_data)
            set_blob(e, CURLOPT_SSLKEY_BLOB, cfg->key_data, cfg->key_data_len);
        else if (cfg->key_file)
            curl_easy_setopt(e, CURLOPT_SSLKEY, cfg->key_file);
    }
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
    if (cfg->insecure_skip_tls_verify) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }

    /* headers and auth */
    bool oom = false;
    struct curl_slist *l = NULL;
    l = add_header(l, &oom, "Accept: %s", rq->accept ? rq->accept : "application/json");
    if (rq->body)
        l = add_header(l, &oom, "Content-Type: %s",
                       rq->content_type ? rq->content_type : "application/json");
    l = add_header(l, &oom, "Expect:"); /* no 100-continue round trip */
    if (c->host_header)
        l = add_header(l, &oom, "%s", c->host_header);
    if (cr && cr->token)
        l = add_header(l, &oom, "Authorization: Bearer %s", cr->token);
    else if (cfg->username || cfg->password) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(e, CURLOPT_USERNAME, cfg->username ? cfg->username : "");
        curl_easy_setopt(e, CURLOPT_PASSWORD, cfg->password ? cfg->password : "");
    }
    if (oom) {
        curl_slist_free_all(l);
        *err = ckube__local_error("out of memory");
        return -1;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
    *slist = l;

    /* method and body */
    if (!strcmp(rq->method, "GET")) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (!strcmp(rq->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
        if (rq->body || strcmp(rq->method, "DELETE")) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(rq->body ? rq->body_len : 0));
        }
    }
    ckube__resp_headers_clear(hdrs);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, ckube__header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, hdrs);
    return 0;
}

/* ---- errors ---- */

/* Go's http.Client names the method this way in its errors ("Get", ...). */
static void go_method(char *dst, size_t n, const char *m)
{
    size_t i = 0;
    for (; m[i] && i + 1 < n; i++)
        dst[i] = (char)(i == 0 ? toupper((unsigned char)m[i]) : tolower((unsigned char)m[i]));
    dst[i] = 0;
}

ckube_status *ckube__transport_error(ckube_client *c, const ckube__req *rq, CURLcode cc,
                                     const char *errbuf)
{
    char m[16];
    go_method(m, sizeof m, rq->method);
    return ckube__local_error("%s \"%s%s\": %s", m, c->base_url, rq->path,
                              errbuf && *errbuf ? errbuf : curl_easy_strerror(cc));
}

/* client-go's errors.NewGenericServerResponse: reason and message from the
 * code, the body text kept in a cause of type UnexpectedServerResponse. */
static ckube_status *generic_error(const ckube__req *rq, long code, const char *server_msg,
                                   int retry_after)
{
    const char *reason = "";
    const char *fixed = NULL;
    char buf[512];
    switch (code) {
    case 409:
        reason = !strcmp(rq->method, "POST") ? CKUBE_REASON_ALREADY_EXISTS : CKUBE_REASON_CONFLICT;
        fixed = "the server reported a conflict";
        break;
    case 404:
        reason = CKUBE_REASON_NOT_FOUND;
        fixed = "the server could not find the requested resource";
        break;
    case 400:
        reason = CKUBE_REASON_BAD_REQUEST;
        fixed = "the server rejected our request for an unknown reason";
        break;
    case 401:
        reason = CKUBE_REASON_UNAUTHORIZED;
        fixed = "the server has asked for the client to provide credentials";
        break;
    case 403:
        reason = CKUBE_REASON_FORBIDDEN;
        fixed = server_msg;
        break;
    case 406:
        reason = CKUBE_REASON_NOT_ACCEPTABLE;
        fixed = (!*server_msg || !strcmp(server_msg, "unknown"))
                    ? "the server was unable to respond with a content type that the client "
                      "supports"
                    : server_msg;
        break;
    case 415:
        reason = CKUBE_REASON_UNSUPPORTED_MEDIA;
        fixed = server_msg;
        break;
    case 405:
        reason = CKUBE_REASON_METHOD_NOT_ALLOWED;
        fixed = "the server does not allow this method on the requested resource";
        break;
    case 422:
        reason = CKUBE_REASON_INVALID;
        fixed = "the server rejected our request due to an error in our request";
        break;
    case 503:
        reason = CKUBE_REASON_SERVICE_UNAVAILABLE;
        fixed = "the server is currently unable to handle the request";
        break;
    case 504:
        reason = CKUBE_REASON_TIMEOUT;
        fixed = "the server was unable to return a response in the time allotted, but may still "
                "be processing the request";
        break;
    case 429:
        reason = CKUBE_REASON_TOO_MANY_REQUESTS;
        fixed = "the server has received too many requests and has asked us to try again later";
        break;
    default:
        if (code >= 500) {
            reason = CKUBE_REASON_INTERNAL;
            snprintf(buf, sizeof buf,
                     "an error on the server (\"%.400s\") has prevented the request from "
                     "succeeding",
                     server_msg);
        } else {
            snprintf(buf, sizeof buf,
                     "the server responded with the status code %ld but did not return more "
                     "information",
                     code);
        }
        fixed = buf;
    }
    char verb[16];
    size_t i = 0;
    for (; rq->method[i] && i + 1 < sizeof verb; i++)
        verb[i] = (char)tolower((unsigned char)rq->method[i]);
    verb[i] = 0;
    char qr[300] = "";
    if (rq->resource)
        ckube_qualified_resource(qr, sizeof qr, rq->group, rq->resource);
    ckube_status *st;
    if (*qr && rq->name && *rq->name)
        st = ckube_status_new((int)code, *reason ? reason : NULL, "%s (%s %s %s)", fixed, verb, qr,
                              rq->name);
    else if (*qr)
        st = ckube_status_new((int)code, *reason ? reason : NULL, "%s (%s %s)", fixed, verb, qr);
    else
        st = ckube_status_new((int)code, *reason ? reason : NULL, "%s", fixed);
    if (!st)
        return NULL;
    if (*qr)
        ckube_status_set_details(st, rq->name && *rq->name ? rq->name : NULL,
                                 rq->group ? rq->group : "", rq->resource);
    ckube_status_add_cause(st, "UnexpectedServerResponse", NULL, "%s", server_msg);
    st->retry_after_seconds = retry_after > 0 ? retry_after : 0;
    return st;
}

ckube_status *ckube__status_from_response(const ckube__req *rq, long code, const char *body,
                                          size_t len, const ckube__resp_headers *h)
{
    json_t *j = body && len ? ckube__json_loadb(body, len, 0, NULL) : NULL;
    ckube_status *st = j ? ckube_status_from_json(j, (int)code) : NULL;
    json_decref(j);
    if (st) {
        if (!st->code)
            st->code = (int)code;
        if (!st->retry_after_seconds && h && h->retry_after > 0)
            st->retry_after_seconds = h->retry_after;
        return st;
    }
    /* Not a Status: keep (at most 2 KiB of) a text body as the server's
     * message, "unknown" for anything else, as client-go does. */
    char *msg = NULL;
    if (h && h->text_content && body)
        msg = ckube__strndup_trim(body, len > 2048 ? 2048 : len);
    else
        msg = strdup("unknown");
    st = generic_error(rq, code, msg ? msg : "unknown", h ? h->retry_after : 0);
    free(msg);
    return st;
}

/* ---- retries ---- */

bool ckube__should_retry(long code, const ckube__resp_headers *h, int *seconds)
{
    /* client-go's checkWait: only 429 and 5xx, and only with a
     * Retry-After the server chose. */
    if (code != 429 && code < 500)
        return false;
    if (!h || h->retry_after < 0)
        return false;
    *seconds = h->retry_after;
    return true;
}

/* Note: libcurl itself resends a request (any method) that got no byte
 * back on a *reused* connection, because the server may have closed the
 * idle connection before reading it; this policy adds client-go's retry
 * of GETs on fresh connections too. */
bool ckube__retryable_transport(const ckube__req *rq, CURLcode cc)
{
    if (strcmp(rq->method, "GET") || rq->watch)
        return false;
    return cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR;
}

/* ---- logging and warnings ---- */

static void log_body(const char *what, const char *body, size_t len)
{
    if (!body || !len)
        return;
    if (ckube_log_verbosity() >= 10 || len <= 1024)
        CKUBE_INFO("%s: %.*s", what, (int)len, body);
    else
        CKUBE_INFO("%s: %.1024s [truncated %zu chars]", what, body, len - 1024);
}

void ckube__log_request(ckube_client *c, const ckube__req *rq, long code, uint64_t ns,
                        const char *body, size_t len, const char *transport_err)
{
    if (ckube_log_verbosity() < 6)
        return;
    unsigned long long ms = (unsigned long long)(ns / 1000000u);
    if (ckube_log_verbosity() >= 8)
        log_body("Request Body", rq->body, rq->body_len);
    if (transport_err)
        CKUBE_INFO("%s %s%s  in %llu milliseconds (%s)", rq->method, c->base_url, rq->path, ms,
                   transport_err);
    else
        CKUBE_INFO("%s %s%s %ld %s in %llu milliseconds", rq->method, c->base_url, rq->path, code,
                   ckube__http_reason(code), ms);
    if (ckube_log_verbosity() >= 8)
        log_body("Response Body", body, len);
}

void ckube__emit_warnings(ckube_client *c, const ckube__resp_headers *h)
{
    for (size_t i = 0; i < h->nwarnings; i++) {
        if (c->warn_fn)
            c->warn_fn(c->warn_ud, h->warnings[i]);
        else
            CKUBE_WARN("Warning: %s", h->warnings[i]);
    }
}

/* ---- streamed responses (the informer's lists) ---- */

/* The largest body accepted, as ckube__do's. */
#define STREAM_MAX_BODY ((size_t)1 << 30)
/* Bigger reads than libcurl's 16 KiB default: fewer calls and syscalls
 * for multi-megabyte lists, still cache-sized. */
CURL *ckube__attempt_begin(ckube_client *c, const ckube__req *rq, ckube__creds *cr,
                           ckube__resp_headers *hdrs, struct curl_slist **slist,
                           ckube_status **err)
{
    ckube__throttle(c, rq);
    if (ckube__auth_get(c->auth, cr, err) != 0)
        return NULL;
    CURL *e = ckube__http_get_handle(c->http);
    if (!e) {
        ckube__creds_clear(cr);
        *err = ckube__local_error("out of memory");
        return NULL;
    }
    memset(hdrs, 0, sizeof *hdrs);
    *slist = NULL;
    if (ckube__easy_setup(c, e, rq, cr, hdrs, slist, err) != 0) {
        ckube__creds_clear(cr);
        ckube__http_put_handle(c->http, e);
        return NULL;
    }
    return e;
}

CURLcode ckube__attempt_perform(ckube_client *c, CURL *e, struct curl_slist *slist, long *code,
                                uint64_t *dt_ns)
{
    uint64_t t0 = ckube_monotonic_ns();
    CURLcode cc = curl_easy_perform(e);
    *dt_ns = ckube_monotonic_ns() - t0;
    *code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, code);
    /* Detach pointers to the caller's stack frame before the handle is
     * pooled (curl_easy_reset on reuse restores the other options). */
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    ckube__http_put_handle(c->http, e);
    curl_slist_free_all(slist);
    return cc;
}

#define STREAM_BUFFER_SIZE (128L * 1024)

typedef struct stream_ctx {
    const ckube__body_sink *sink;
    ckube__resp_headers *h;
    ckube__strbuf errbody; /* a non-2xx answer's body */
    size_t total;
    bool sink_stopped;
} stream_ctx;

static size_t stream_write(char *p, size_t size, size_t n, void *ud)
{
    stream_ctx *x = ud;
    size_t len = size * n;
    if (x->total + len > STREAM_MAX_BODY)
        return 0; /* CURLE_WRITE_ERROR */
    x->total += len;
    if (x->h->code >= 200 && x->h->code < 300) {
        if (!x->sink->feed(x->sink->ud, p, len)) {
            x->sink_stopped = true;
            return 0;
        }
        return len;
    }
    ckube__sb_addn(&x->errbody, p, len);
    return x->errbody.oom ? 0 : len;
}

int ckube__do_stream(ckube_client *c, const ckube__req *rq, const ckube__body_sink *sink,
                     ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    int retries = 0;
    bool auth_retried = false;
    for (;;) {
        ckube__creds cr;
        ckube__resp_headers h;
        struct curl_slist *sl;
        CURL *e = ckube__attempt_begin(c, rq, &cr, &h, &sl, err);
        if (!e)
            goto out_err;
        /* Every attempt starts the decoding over. */
        sink->begin(sink->ud);
        stream_ctx x = {.sink = sink, .h = &h};
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, stream_write);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &x);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, STREAM_BUFFER_SIZE);
        long code;
        uint64_t dt;
        CURLcode cc = ckube__attempt_perform(c, e, sl, &code, &dt);
        if (cc != CURLE_OK && x.sink_stopped) {
            /* The sink refused the body (it is not what it expects): its
             * own error says why. */
            ckube__log_request(c, rq, code, dt, NULL, 0, NULL);
            free(x.errbody.s);
            ckube__resp_headers_clear(&h);
            ckube__creds_clear(&cr);
            ckube_status_free(dummy);
            return -2;
        }
        bool ok = code >= 200 && code < 300;
        ckube__attempt next =
            ckube__after_attempt(c, rq, cc, code, dt, errbuf, ok ? NULL : x.errbody.s,
                                 ok ? 0 : x.errbody.len, &h, &cr, &retries, &auth_retried, err);
        if (next != CKUBE__ATTEMPT_DONE) {
            free(x.errbody.s);
            ckube__resp_headers_clear(&h);
            if (next == CKUBE__ATTEMPT_FAILED)
                goto out_err;
            continue;
        }
        if (ok) {
            free(x.errbody.s);
            ckube__resp_headers_clear(&h);
            return 0;
        }
        *err = ckube__status_from_response(rq, code, x.errbody.s ? x.errbody.s : "", x.errbody.len,
                                           &h);
        free(x.errbody.s);
        ckube__resp_headers_clear(&h);
        goto out_err;
    }
out_err:
    ckube_status_free(dummy);
    return -1;
}
