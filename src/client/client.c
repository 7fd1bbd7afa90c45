/* The REST client: creation from a ckube_config and one request with
 * client-go's policies (rate limit, 429/Retry-After retries, GET retries
 * after a dropped connection, one retry with fresh credentials after 401). */
#include "client/client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckube/json.h"
#include "ckube/log.h"

#ifndef CKUBE_VERSION
#define CKUBE_VERSION "0.0.0"
#endif

#if defined(__x86_64__)
#define CKUBE_ARCH "amd64"
#elif defined(__aarch64__)
#define CKUBE_ARCH "arm64"
#elif defined(__i386__)
#define CKUBE_ARCH "386"
#elif defined(__arm__)
#define CKUBE_ARCH "arm"
#elif defined(__powerpc64__)
#define CKUBE_ARCH "ppc64le"
#elif defined(__s390x__)
#define CKUBE_ARCH "s390x"
#elif defined(__riscv)
#define CKUBE_ARCH "riscv64"
#else
#define CKUBE_ARCH "unknown"
#endif

/* Response bodies larger than this are refused (a 1 GiB list is a bug). */
#define MAX_BODY ((size_t)1 << 30)

/* Splits cfg->host into the URL pieces. The host may be a URL or a
 * host[:port] (then https when any TLS setting is present, else http, as
 * client-go's DefaultServerURL decides). */
static int parse_host(ckube_client *c, ckube_status **err)
{
    const ckube_config *cfg = c->cfg;
    const char *h = cfg->host;
    if (!h || !*h) {
        *err = ckube__local_error("invalid configuration: no server found (host is empty)");
        return -1;
    }
    const char *scheme;
    const char *rest;
    const char *sep = strstr(h, "://");
    if (sep) {
        size_t sl = (size_t)(sep - h);
        if (sl == 5 && !strncasecmp(h, "https", 5))
            scheme = "https";
        else if (sl == 4 && !strncasecmp(h, "http", 4))
            scheme = "http";
        else {
            *err = ckube__local_error("host must be a URL or a host:port pair: \"%s\"", h);
            return -1;
        }
        rest = sep + 3;
    } else {
        bool tls = cfg->ca_file || cfg->ca_data || cfg->cert_file || cfg->cert_data ||
                   cfg->insecure_skip_tls_verify;
        scheme = tls ? "https" : "http";
        rest = h;
    }
    c->tls = !strcmp(scheme, "https");
    size_t hl = strcspn(rest, "/?#");
    if (hl == 0) {
        *err = ckube__local_error("host must be a URL or a host:port pair: \"%s\"", h);
        return -1;
    }
    char *hostport = strndup(rest, hl);
    const char *path = rest + hl;
    size_t pl = strcspn(path, "?#");
    while (pl > 0 && path[pl - 1] == '/')
        pl--;
    /* host name and port, for CONNECT_TO */
    char *name = NULL;
    const char *port = NULL;
    if (hostport[0] == '[') {
        char *rb = strchr(hostport, ']');
        if (!rb) {
            free(hostport);
            *err = ckube__local_error("host must be a URL or a host:port pair: \"%s\"", h);
            return -1;
        }
        name = strndup(hostport, (size_t)(rb - hostport) + 1);
        if (rb[1] == ':')
            port = rb + 2;
    } else {
        char *colon = strrchr(hostport, ':');
        name = colon ? strndup(hostport, (size_t)(colon - hostport)) : strdup(hostport);
        if (colon)
            port = colon + 1;
    }
    if (!port || !*port)
        port = c->tls ? "443" : "80";
    int rc = 0;
    if (asprintf(&c->base_url, "%s://%s%.*s", scheme, hostport, (int)pl, path) < 0)
        c->base_url = NULL, rc = -1;
    const char *sni = cfg->tls_server_name;
    if (rc == 0 && c->tls && sni && *sni && strcmp(sni, name)) {
        /* Connect to the configured host but present and verify `sni`:
         * curl takes the TLS name from the URL, so the URL names `sni`,
         * CONNECT_TO redirects the connection, and the Host header keeps
         * the real host as client-go (tls.Config.ServerName) would. */
        char *ct = NULL;
        if (asprintf(&c->curl_base, "https://%s:%s%.*s", sni, port, (int)pl, path) < 0)
            c->curl_base = NULL, rc = -1;
        if (rc == 0 && asprintf(&ct, "%s:%s:%s:%s", sni, port, name, port) < 0)
            ct = NULL, rc = -1;
        if (rc == 0 && asprintf(&c->host_header, "Host: %s", hostport) < 0)
            c->host_header = NULL, rc = -1;
        if (ct) {
            c->connect_to_list = curl_slist_append(NULL, ct);
            if (!c->connect_to_list)
                rc = -1;
        }
        free(ct);
    } else if (rc == 0) {
        c->curl_base = strdup(c->base_url);
        if (!c->curl_base)
            rc = -1;
    }
    free(hostport);
    free(name);
    if (rc)
        *err = ckube__local_error("out of memory");
    return rc;
}

static int check_readable(const char *path, const char *what, ckube_status **err)
{
    if (!path)
        return 0;
    size_t n;
    char *d = ckube__read_file(path, &n);
    if (!d) {
        *err = ckube__local_error("unable to read %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    free(d);
    return 0;
}

/* The checks client-go's transport makes before the first request. */
static int validate(const ckube_config *cfg, ckube_status **err)
{
    if (check_readable(cfg->ca_data ? NULL : cfg->ca_file, "certificate-authority", err) ||
        check_readable(cfg->cert_data ? NULL : cfg->cert_file, "client-cert", err) ||
        check_readable(cfg->key_data ? NULL : cfg->key_file, "client-key", err))
        return -1;
    bool cert = cfg->cert_file || cfg->cert_data, key = cfg->key_file || cfg->key_data;
    if (cert != key) {
        *err = ckube__local_error(cert ? "client certificate set without a client key"
                                       : "client key set without a client certificate");
        return -1;
    }
    if ((cfg->ca_file || cfg->ca_data) && cfg->insecure_skip_tls_verify) {
        *err = ckube__local_error(
            "specifying a root certificates file with the insecure flag is not allowed");
        return -1;
    }
    bool token = (cfg->bearer_token && *cfg->bearer_token) ||
                 (cfg->bearer_token_file && *cfg->bearer_token_file);
    if (token && ((cfg->username && *cfg->username) || (cfg->password && *cfg->password))) {
        *err = ckube__local_error("username/password or bearer token may be set, but not both");
        return -1;
    }
    /* A token source replaces every other way to get a token; mixing
     * them would leave which one a request carries to precedence rules
     * nobody asked for. */
    if (cfg->token_source && (token || cfg->exec || (cfg->username && *cfg->username) ||
                              (cfg->password && *cfg->password))) {
        *err = ckube__local_error(
            "a token source may not be set with a bearer token, token file, exec plugin or "
            "username/password");
        return -1;
    }
    return 0;
}

ckube_client *ckube_client_new(const ckube_config *cfg, ckube_status **err)
{
    ckube_status *e = NULL;
    ckube_client *c = NULL;
    if (!cfg) {
        e = ckube__local_error("no configuration");
        goto fail;
    }
    if (ckube__curl_global_init() != 0) {
        e = ckube__local_error("libcurl global initialization failed");
        goto fail;
    }
    if (validate(cfg, &e) != 0)
        goto fail;
    c = calloc(1, sizeof *c);
    if (!c || !(c->cfg = ckube_config_dup(cfg))) {
        e = ckube__local_error("out of memory");
        goto fail;
    }
    if (parse_host(c, &e) != 0)
        goto fail;
    if (cfg->user_agent && *cfg->user_agent)
        c->user_agent = strdup(cfg->user_agent);
    else if (asprintf(&c->user_agent, "ckube/%s (linux/%s)", CKUBE_VERSION, CKUBE_ARCH) < 0)
        c->user_agent = NULL;
    c->ns = cfg->namespace_ && *cfg->namespace_ ? c->cfg->namespace_ : "default";
    c->max_retries = cfg->max_retries == 0 ? 10 : cfg->max_retries < 0 ? 0 : cfg->max_retries;
    c->http = ckube__http_new();
    if (!c->user_agent || !c->http) {
        e = ckube__local_error("out of memory");
        goto fail;
    }
    double qps = cfg->qps == 0 ? 5 : cfg->qps;
    int burst = cfg->burst == 0 ? 10 : cfg->burst;
    ckube__ratelimit_init(&c->rl, qps, burst, cfg->qps < 0);
    c->auth = ckube__auth_new(cfg, &e);
    if (!c->auth) {
        ckube__ratelimit_destroy(&c->rl);
        if (!e)
            e = ckube__local_error("out of memory");
        goto fail;
    }
    return c;
fail:
    if (c) {
        ckube__http_free(c->http);
        ckube_config_free(c->cfg);
        free(c->base_url);
        free(c->curl_base);
        free(c->host_header);
        curl_slist_free_all(c->connect_to_list);
        free(c->user_agent);
        free(c);
    }
    if (err)
        *err = e;
    else
        ckube_status_free(e);
    return NULL;
}

void ckube_client_free(ckube_client *c)
{
    if (!c)
        return;
    ckube__auth_free(c->auth);
    ckube__ratelimit_destroy(&c->rl);
    ckube__http_free(c->http);
    ckube_config_free(c->cfg);
    free(c->base_url);
    free(c->curl_base);
    free(c->host_header);
    curl_slist_free_all(c->connect_to_list);
    free(c->user_agent);
    free(c);
}

const char *ckube_client_namespace(const ckube_client *c)
{
    return c->ns;
}

const char *ckube_client_host(const ckube_client *c)
{
    return c->base_url;
}

void ckube_client_set_warning_handler(ckube_client *c, ckube_warning_handler fn, void *ud)
{
    c->warn_fn = fn;
    c->warn_ud = fn ? ud : NULL;
}

void ckube__throttle(ckube_client *c, const ckube__req *rq)
{
    uint64_t wait = ckube__ratelimit_reserve(&c->rl);
    if (!wait)
        return;
    ckube__sleep_ns(wait);
    int level = wait > 1000000000u ? 1 : wait > 50000000u ? 3 : 100;
    CKUBE_V(level,
            "Waited for %.3fs due to client-side throttling, not priority and fairness, "
            "request: %s:%s%s",
            (double)wait / 1e9, rq->method, c->base_url, rq->path);
}

typedef struct sink {
    ckube__strbuf b;
} sink;

static size_t write_cb(char *p, size_t size, size_t n, void *ud)
{
    sink *s = ud;
    size_t len = size * n;
    if (s->b.len + len > MAX_BODY)
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    ckube__sb_addn(&s->b, p, len);
    return s->b.oom ? 0 : len;
}

ckube__attempt ckube__after_attempt(ckube_client *c, const ckube__req *rq, CURLcode cc, long code,
                                    uint64_t ns, const char *errbuf, const char *log_body,
                                    size_t log_len, const ckube__resp_headers *h, ckube__creds *cr,
                                    int *retries, bool *auth_retried, ckube_status **err)
{
    if (cc != CURLE_OK) {
        ckube__log_request(c, rq, 0, ns, NULL, 0, *errbuf ? errbuf : curl_easy_strerror(cc));
        ckube__creds_clear(cr);
        if (!ckube__retryable_transport(rq, cc) || *retries >= c->max_retries) {
            *err = ckube__transport_error(c, rq, cc, errbuf);
            return CKUBE__ATTEMPT_FAILED;
        }
        (*retries)++;
        CKUBE_V(4, "Got a Retry-After 1s response for attempt %d to %s%s", *retries, c->base_url,
                rq->path);
        ckube__sleep_ns(1000000000u);
        return CKUBE__ATTEMPT_AGAIN;
    }
    ckube__log_request(c, rq, code, ns, log_body, log_len, NULL);
    ckube__emit_warnings(c, h);
    if (code == 401 && !*auth_retried && ckube__auth_unauthorized(c->auth, cr)) {
        *auth_retried = true;
        CKUBE_V(4, "401 Unauthorized from %s%s: retrying once with refreshed credentials",
                c->base_url, rq->path);
        ckube__creds_clear(cr);
        return CKUBE__ATTEMPT_AGAIN;
    }
    ckube__creds_clear(cr);
    int secs = 0;
    if (ckube__should_retry(code, h, &secs) && *retries < c->max_retries) {
        (*retries)++;
        CKUBE_V(4, "Got a Retry-After %ds response for attempt %d to %s%s", secs, *retries,
                c->base_url, rq->path);
        ckube__sleep_ns((uint64_t)secs * 1000000000u);
        return CKUBE__ATTEMPT_AGAIN;
    }
    return CKUBE__ATTEMPT_DONE;
}

int ckube__do(ckube_client *c, const ckube__req *rq, ckube_response *resp, ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    memset(resp, 0, sizeof *resp);
    if (!rq->path || rq->path[0] != '/') {
        *err = ckube__local_error("request path must start with '/': \"%s\"",
                                  rq->path ? rq->path : "");
        goto out_err;
    }
    int retries = 0;
    bool auth_retried = false;
    for (;;) {
        ckube__creds cr;
        ckube__resp_headers h;
        struct curl_slist *sl;
        CURL *e = ckube__attempt_begin(c, rq, &cr, &h, &sl, err);
        if (!e)
            goto out_err;
        sink s = {{0}};
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        long code;
        uint64_t dt;
        CURLcode cc = ckube__attempt_perform(c, e, sl, &code, &dt);
        ckube__attempt next = ckube__after_attempt(c, rq, cc, code, dt, errbuf, s.b.s, s.b.len, &h,
                                                   &cr, &retries, &auth_retried, err);
        if (next != CKUBE__ATTEMPT_DONE) {
            free(s.b.s);
            ckube__resp_headers_clear(&h);
            if (next == CKUBE__ATTEMPT_FAILED)
                goto out_err;
            continue;
        }
        resp->code = (int)code;
        resp->body_len = s.b.len;
        resp->body = ckube__sb_take(&s.b);
        resp->warnings = h.warnings;
        resp->nwarnings = h.nwarnings;
        h.warnings = NULL;
        h.nwarnings = 0;
        if (!resp->body) {
            ckube__resp_headers_clear(&h);
            ckube_response_free(resp);
            *err = ckube__local_error("out of memory");
            goto out_err;
        }
        if (code >= 200 && code < 300) {
            ckube__resp_headers_clear(&h);
            return 0;
        }
        *err = ckube__status_from_response(rq, code, resp->body, resp->body_len, &h);
        ckube__resp_headers_clear(&h);
        goto out_err;
    }
out_err:
    ckube_status_free(dummy);
    return -1;
}

int ckube_client_do(ckube_client *c, const ckube_request *req, ckube_response *resp,
                    ckube_status **err)
{
    ckube__req rq = {
        .method = req->method ? req->method : "GET",
        .path = req->path,
        .body = req->body,
        .body_len = req->body ? req->body_len : 0,
        .content_type = req->content_type,
        .accept = req->accept,
    };
    return ckube__do(c, &rq, resp, err);
}

void ckube_response_free(ckube_response *resp)
{
    if (!resp)
        return;
    free(resp->body);
    ckube__strv_free(resp->warnings, resp->nwarnings);
    memset(resp, 0, sizeof *resp);
}

bool ckube_status_is(const ckube_status *err, int code)
{
    return err && err->code == code;
}
