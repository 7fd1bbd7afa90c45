/* manager_http.c - the manager's HTTP endpoints on libevent's evhttp:
 * /metrics (Prometheus text exposition) and /healthz, /readyz with named
 * checks, answering as controller-runtime's pkg/healthz does:
 *
 *   GET /readyz            200 "ok" when every check passes, else 500 with
 *                          one line per check and "healthz check failed"
 *   GET /readyz?verbose    one "[+]name ok" / "[-]name failed: reason
 *                          withheld" line per check (sorted), then
 *                          "healthz check passed" (or failed)
 *   GET /readyz?exclude=x  skips check x ("[+]x excluded: ok")
 *   GET /readyz/<name>     that check alone: 200 "ok", 500 "internal
 *                          server error: <reason>", 404 when unknown
 * With no checks registered a "ping" check always passes.
 *
 * The secure listener (kube-controller-manager's --secure-port) serves
 * both over HTTPS, each request authenticated and authorized through the
 * API server first (delegated_auth.c): 401 and 403 as upstream's Status.
 * Its reviews are made on the loop's thread and block it for as long as
 * the API server takes to answer one (cached for 10 s, so a scraper pays
 * this once per TTL); a manager's endpoints see a few scrapers and
 * probes, which upstream's always-allowed health paths never send
 * through a review.
 *
 * The listeners share one http_serve (runtime/http_serve.h): one event
 * loop on one thread. The secure listener's certificate is read again
 * when its files change (serving_cert, secure_serving.h). */
#include "manager_internal.h"

#include "common/text.h"
#include "runtime/delegated_auth.h"
#include "runtime/http_serve.h"

#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/status.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <openssl/ssl.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Checks
 * ====================================================================== */

void manager_checks_init(manager_checks *c, const char *endpoint)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    c->endpoint = endpoint;
}

void manager_checks_destroy(manager_checks *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].name);
    free(c->v);
    pthread_mutex_destroy(&c->mu);
}

int manager_checks_add(manager_checks *c, const char *name, ckube_health_check_fn fn, void *ctx)
{
    if (!name || !*name || !fn || strchr(name, '/'))
        return -1;
    pthread_mutex_lock(&c->mu);
    int rc = -1;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0)
            goto out;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        manager_check *v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            goto out;
        c->v = v;
        c->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        goto out;
    c->v[c->n++] = (manager_check){copy, fn, ctx};
    rc = 0;
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* A snapshot of the checks (names are copied: checks are never removed,
 * but the array may move while a request runs). */
static manager_check *checks_snapshot(manager_checks *c, size_t *n)
{
    pthread_mutex_lock(&c->mu);
    manager_check *v = calloc(c->n ? c->n : 1, sizeof(*v));
    size_t k = 0;
    for (size_t i = 0; v && i < c->n; i++) {
        v[k] = c->v[i];
        v[k].name = strdup(c->v[i].name);
        if (v[k].name)
            k++;
    }
    pthread_mutex_unlock(&c->mu);
    *n = k;
    return v;
}

static void snapshot_free(manager_check *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

static int cmp_check(const void *a, const void *b)
{
    return strcmp(((const manager_check *)a)->name, ((const manager_check *)b)->name);
}

/* ======================================================================
 * Server
 * ====================================================================== */

enum listener_kind { L_METRICS, L_HEALTH, L_SECURE };

struct listener {
    enum listener_kind kind;
    int port; /* 0: not bound */
    ckube_metrics_registry *reg;
    manager_checks *healthz, *readyz;
    serving_cert *tls;    /* L_SECURE: owned */
    delegated_auth *auth; /* L_SECURE: borrowed */
};

struct manager_http {
    http_serve *serve;
    struct listener metrics, health, secure;
};

manager_http *manager_http_new(void)
{
    manager_http *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->serve = http_serve_new("ckube-mgr-http"); /* top -H, perf, gdb */
    if (!h->serve) {
        free(h);
        return NULL;
    }
    return h;
}

static void reply(struct evhttp_request *req, int code, const char *reason, const char *ctype,
                  const char *body, size_t len)
{
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    evhttp_add_header(hdr, "Content-Type", ctype);
    evhttp_add_header(hdr, "X-Content-Type-Options", "nosniff");
    struct evbuffer *b = evbuffer_new();
    if (b && body)
        evbuffer_add(b, body, len);
    evhttp_send_reply(req, code, reason, b);
    if (b)
        evbuffer_free(b);
}

static void not_found(struct evhttp_request *req)
{
    static const char msg[] = "404 page not found\n";
    reply(req, 404, "Not Found", "text/plain; charset=utf-8", msg, sizeof(msg) - 1);
}

static void serve_metrics(struct listener *l, struct evhttp_request *req, const char *path)
{
    if (strcmp(path, "/metrics") != 0) {
        not_found(req);
        return;
    }
    size_t len = 0;
    char *text = ckube_metrics_render(l->reg, &len);
    if (!text) {
        static const char msg[] = "out of memory\n";
        reply(req, 500, "Internal Server Error", "text/plain; charset=utf-8", msg, sizeof(msg) - 1);
        return;
    }
    reply(req, 200, "OK", CKUBE_METRICS_CONTENT_TYPE, text, len);
    free(text);
}

/* Query parameters we care about: verbose (present at all) and every
 * exclude=<name>. Parsed by hand: evhttp's parser rejects "?verbose". */
struct query {
    bool verbose;
    char *excludes[16];
    bool used[16];
    size_t nex;
};

static void parse_query(const char *q, struct query *out)
{
    memset(out, 0, sizeof(*out));
    if (!q)
        return;
    char *copy = strdup(q), *save = NULL;
    for (char *tok = copy ? strtok_r(copy, "&", &save) : NULL; tok;
         tok = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = '\0';
        if (strcmp(tok, "verbose") == 0) {
            out->verbose = true;
        } else if (strcmp(tok, "exclude") == 0 && eq && out->nex < 16) {
            char *v = evhttp_uridecode(eq + 1, 1, NULL);
            if (v)
                out->excludes[out->nex++] = v;
        }
    }
    free(copy);
}

static bool excluded(struct query *q, const char *name)
{
    bool hit = false;
    for (size_t i = 0; i < q->nex; i++) {
        if (strcmp(q->excludes[i], name) == 0) {
            q->used[i] = true;
            hit = true;
        }
    }
    return hit;
}

static void query_free(struct query *q)
{
    for (size_t i = 0; i < q->nex; i++)
        free(q->excludes[i]);
}

static void serve_aggregated(manager_checks *c, struct evhttp_request *req, const char *query)
{
    struct query q;
    parse_query(query, &q);
    size_t n = 0;
    manager_check *v = checks_snapshot(c, &n);
    qsort(v, n, sizeof(*v), cmp_check);
    struct evbuffer *lines = evbuffer_new();
    bool failed = false;
    if (n == 0)
        evbuffer_add_printf(lines, "[+]ping ok\n");
    for (size_t i = 0; i < n; i++) {
        if (excluded(&q, v[i].name)) {
            evbuffer_add_printf(lines, "[+]%s excluded: ok\n", v[i].name);
            continue;
        }
        char *reason = NULL;
        if (v[i].fn(v[i].ctx, &reason) != 0) {
            failed = true;
            CKUBE_V(1, "%s check failed: %s: %s", c->endpoint, v[i].name,
                    reason ? reason : "(no reason)");
            /* The reason stays out of the public aggregated answer (as
             * upstream); /<endpoint>/<name> shows it. */
            evbuffer_add_printf(lines, "[-]%s failed: reason withheld\n", v[i].name);
        } else {
            evbuffer_add_printf(lines, "[+]%s ok\n", v[i].name);
        }
        free(reason);
    }
    bool unknown = false;
    for (size_t i = 0; i < q.nex; i++) {
        if (!q.used[i]) {
            evbuffer_add_printf(lines, "%s\"%s\"",
                                unknown ? ", "
                                        : "warn: some health checks cannot be excluded: "
                                          "no matches for ",
                                q.excludes[i]);
            unknown = true;
        }
    }
    if (unknown)
        evbuffer_add_printf(lines, "\n");
    if (!failed && !q.verbose) {
        reply(req, 200, "OK", "text/plain; charset=utf-8", "ok", 2);
    } else {
        evbuffer_add_printf(lines, "%s check %s\n", c->endpoint, failed ? "failed" : "passed");
        size_t len = evbuffer_get_length(lines);
        const char *body = (const char *)evbuffer_pullup(lines, -1);
        reply(req, failed ? 500 : 200, failed ? "Internal Server Error" : "OK",
              "text/plain; charset=utf-8", body, len);
    }
    if (failed)
        CKUBE_INFO("%s check failed", c->endpoint);
    evbuffer_free(lines);
    snapshot_free(v, n);
    query_free(&q);
}

static void serve_single(manager_checks *c, struct evhttp_request *req, const char *name)
{
    size_t n = 0;
    manager_check *v = checks_snapshot(c, &n);
    manager_check *hit = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            hit = &v[i];
    if (!hit && n == 0 && strcmp(name, "ping") == 0) {
        reply(req, 200, "OK", "text/plain; charset=utf-8", "ok", 2);
    } else if (!hit) {
        not_found(req);
    } else {
        char *reason = NULL;
        if (hit->fn(hit->ctx, &reason) != 0) {
            char *msg = NULL;
            int len =
                asprintf(&msg, "internal server error: %s\n", reason ? reason : "check failed");
            if (len < 0)
                msg = NULL;
            reply(req, 500, "Internal Server Error", "text/plain; charset=utf-8", msg,
                  msg ? (size_t)len : 0);
            free(msg);
        } else {
            reply(req, 200, "OK", "text/plain; charset=utf-8", "ok", 2);
        }
        free(reason);
    }
    snapshot_free(v, n);
}

static void serve_health(struct listener *l, struct evhttp_request *req, const char *path,
                         const char *query)
{
    manager_checks *c = NULL;
    const char *rest = NULL;
    if (strncmp(path, "/healthz", 8) == 0) {
        c = l->healthz;
        rest = path + 8;
    } else if (strncmp(path, "/readyz", 7) == 0) {
        c = l->readyz;
        rest = path + 7;
    }
    if (!c || (*rest && *rest != '/')) {
        not_found(req);
        return;
    }
    if (!*rest || strcmp(rest, "/") == 0)
        serve_aggregated(c, req, query);
    else
        serve_single(c, req, rest + 1);
}

/* A Status as upstream's responsewriters write it (JSON). Takes st. */
static void reply_status(struct evhttp_request *req, ckube_status *st)
{
    json_t *j = st ? ckube_status_to_json(st) : NULL;
    char *body = j ? ckube_json_dumps(j, NULL) : NULL;
    int code = st ? st->code : 500;
    reply(req, code, ckube__http_reason(code), "application/json", body ? body : "",
          body ? strlen(body) : 0);
    free(body);
    json_decref(j);
    ckube_status_free(st);
}

/* The verb of a non-resource request: the method in lowercase, as
 * upstream's request info resolver names it. */
static const char *method_verb(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        return "get";
    case EVHTTP_REQ_POST:
        return "post";
    case EVHTTP_REQ_HEAD:
        return "head";
    case EVHTTP_REQ_PUT:
        return "put";
    case EVHTTP_REQ_DELETE:
        return "delete";
    case EVHTTP_REQ_OPTIONS:
        return "options";
    case EVHTTP_REQ_TRACE:
        return "trace";
    case EVHTTP_REQ_CONNECT:
        return "connect";
    case EVHTTP_REQ_PATCH:
        return "patch";
    }
    return "get";
}

/* Upstream's WithAuthentication then WithAuthorization: true when the
 * request may go on; otherwise it has been answered. */
static bool admit(struct listener *l, struct evhttp_request *req, const char *path)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    X509 *peer = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    bool verified = peer && SSL_get_verify_result(ssl) == X509_V_OK;
    const char *authz = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    delegated_user u;
    if (delegated_authenticate(l->auth, peer, verified, authz, &u) != 0) {
        reply_status(req, ckube_status_new(401, CKUBE_REASON_UNAUTHORIZED, "Unauthorized"));
        return false;
    }
    const char *verb = method_verb(req);
    char *reason = NULL;
    ckube_status *err = NULL;
    int rc = delegated_authorize(l->auth, &u, verb, path, &reason, &err);
    if (rc == 0) {
        CKUBE_V(4, "Forbidden: \"%s\", Reason: \"%s\"", path, reason ? reason : "");
        reply_status(req, delegated_forbidden(&u, verb, path, reason));
    } else if (rc < 0) {
        /* upstream's responsewriters.InternalError: plain text */
        char *msg = NULL;
        int len = asprintf(&msg, "Internal Server Error: \"%s\": %s\n", evhttp_request_get_uri(req),
                           err && err->message ? err->message : "authorization failed");
        reply(req, 500, "Internal Server Error", "text/plain; charset=utf-8", msg,
              len > 0 ? (size_t)len : 0);
        free(msg);
    }
    ckube_status_free(err);
    free(reason);
    delegated_user_clear(&u);
    return rc == 1;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct listener *l = arg;
    struct evhttp_uri *uri = evhttp_uri_parse(evhttp_request_get_uri(req));
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || !*path)
        path = "/";
    if (l->kind == L_METRICS)
        serve_metrics(l, req, path);
    else if (l->kind == L_HEALTH)
        serve_health(l, req, path, uri ? evhttp_uri_get_query(uri) : NULL);
    else if (admit(l, req, path)) {
        if (!strcmp(path, "/metrics"))
            serve_metrics(l, req, path);
        else
            serve_health(l, req, path, uri ? evhttp_uri_get_query(uri) : NULL);
    }
    if (uri)
        evhttp_uri_free(uri);
}

/* Splits "host:port" / "[v6]:port" / ":port". Returns 0 or -1. */
static int split_addr(const char *addr, char *host, size_t hn, int *port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1])
        return -1;
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return -1;
    size_t len = (size_t)(colon - addr);
    const char *h = addr;
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']') {
        h++;
        len -= 2;
    }
    if (len >= hn)
        return -1;
    if (len == 0) {
        snprintf(host, hn, "0.0.0.0");
    } else {
        memcpy(host, h, len);
        host[len] = '\0';
    }
    *port = (int)p;
    return 0;
}

static int bind_listener(manager_http *h, struct listener *l, const char *addr, char **err)
{
    char host[256];
    int port = 0;
    if (split_addr(addr, host, sizeof(host), &port) != 0) {
        if (asprintf(err, "invalid bind address \"%s\": want host:port", addr) < 0)
            *err = NULL;
        return -1;
    }
    http_listen_opts o = {.host = host, .port = port, .tls = l->tls, .fn = on_request, .arg = l};
    int bound = http_serve_listen(h->serve, &o, err);
    if (bound < 0)
        return -1;
    l->port = bound;
    return 0;
}

int manager_http_listen_metrics(manager_http *h, const char *addr, ckube_metrics_registry *reg,
                                char **err)
{
    h->metrics.kind = L_METRICS;
    h->metrics.reg = reg;
    if (bind_listener(h, &h->metrics, addr, err) != 0)
        return -1;
    CKUBE_INFO("Serving metrics server on %s (port %d)", addr, h->metrics.port);
    return 0;
}

int manager_http_listen_health(manager_http *h, const char *addr, manager_checks *healthz,
                               manager_checks *readyz, char **err)
{
    h->health.kind = L_HEALTH;
    h->health.healthz = healthz;
    h->health.readyz = readyz;
    if (bind_listener(h, &h->health, addr, err) != 0)
        return -1;
    CKUBE_INFO("Starting health probe server on %s (port %d)", addr, h->health.port);
    return 0;
}

int manager_http_listen_secure(manager_http *h, const char *addr, serving_cert *tls,
                               delegated_auth *auth, ckube_metrics_registry *reg,
                               manager_checks *healthz, manager_checks *readyz, char **err)
{
    h->secure.kind = L_SECURE;
    serving_cert_free(h->secure.tls); /* a listener of an earlier start */
    h->secure.tls = tls;
    h->secure.auth = auth;
    h->secure.reg = reg;
    h->secure.healthz = healthz;
    h->secure.readyz = readyz;
    if (bind_listener(h, &h->secure, addr, err) != 0)
        return -1;
    CKUBE_INFO("Serving securely on %s (port %d)", addr, h->secure.port);
    return 0;
}

int manager_http_start(manager_http *h, char **err)
{
    return http_serve_start(h->serve, err);
}

void manager_http_stop(manager_http *h)
{
    /* the listeners are closed: the ports are free once stop returns */
    http_serve_stop(h->serve);
    h->metrics.port = h->health.port = h->secure.port = 0;
}

void manager_http_free(manager_http *h)
{
    if (!h)
        return;
    http_serve_free(h->serve);
    serving_cert_free(h->secure.tls);
    free(h);
}

int manager_http_metrics_port(const manager_http *h)
{
    return h ? h->metrics.port : 0;
}

int manager_http_health_port(const manager_http *h)
{
    return h ? h->health.port : 0;
}

int manager_http_secure_port(const manager_http *h)
{
    return h ? h->secure.port : 0;
}
