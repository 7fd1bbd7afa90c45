/* The webhook server (ckube/webhook.h): HTTPS on libevent's evhttp with
 * OpenSSL bufferevents (as the manager's secure port, runtime/
 * manager_http.c), on a thread of its own; the reviews themselves are
 * review.c's. The serving certificate is read again when its files
 * change, at most once a second and only when a connection comes, so an
 * idle server does no work (controller-runtime's certwatcher polls and
 * watches; the effect for a client is the same: the next connection
 * after a rotation gets the new certificate). */
#include "webhook/internal.h"

#include <ckube/log.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the certificate --------------------------------------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Loads the certificate and key into a new context. NULL with *err. */
static SSL_CTX *load_ctx(const char *cert, const char *key, char **err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        *err = strdup("out of memory");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        unsigned long e = ERR_get_error();
        const char *r = e ? ERR_reason_error_string(e) : NULL;
        if (asprintf(err, "loading certificate %s and key %s: %s", cert, key,
                     r ? r : "unreadable") < 0)
            *err = NULL;
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* The current context, read again if the files changed. */
static SSL_CTX *current_ctx(ckube_webhook_server *s)
{
    time_t now = time(NULL);
    if (s->ctx && now == s->checked)
        return s->ctx;
    s->checked = now;
    struct stat c, k;
    if (stat(s->cert_path, &c) != 0 || stat(s->key_path, &k) != 0)
        return s->ctx; /* mid-rotation: keep what works */
    if (s->ctx && same_file(&c, &s->cert_st) && same_file(&k, &s->key_st))
        return s->ctx;
    char *err = NULL;
    SSL_CTX *ctx = load_ctx(s->cert_path, s->key_path, &err);
    if (!ctx) {
        CKUBE_ERROR("webhook server: %s; keeping the previous certificate", err ? err : "");
        free(err);
        return s->ctx;
    }
    if (s->ctx) {
        CKUBE_INFO("Updated current TLS certificate");
        SSL_CTX_free(s->ctx);
    }
    s->ctx = ctx;
    s->cert_st = c;
    s->key_st = k;
    return ctx;
}

static struct bufferevent *tls_bufferevent(struct event_base *base, void *arg)
{
    ckube_webhook_server *s = arg;
    SSL_CTX *ctx = current_ctx(s);
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    if (!ssl)
        return NULL;
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        SSL_free(ssl);
        return NULL;
    }
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* ---- requests ---------------------------------------------------------------- */

static wh_handler *find(ckube_webhook_server *s, const char *path)
{
    for (size_t i = 0; i < s->nhandlers; i++)
        if (!strcmp(s->handlers[i].path, path))
            return &s->handlers[i];
    return NULL;
}

static void send_json(struct evhttp_request *req, int code, const char *body, size_t len)
{
    struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
    evhttp_add_header(hdr, "Content-Type", "application/json");
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, body, len);
    evhttp_send_reply(req, code, code == 200 ? "OK" : NULL, b);
    if (b)
        evbuffer_free(b);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    ckube_webhook_server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    wh_handler *h = path ? find(s, path) : NULL;
    if (!h) {
        static const char nf[] = "404 page not found\n";
        struct evbuffer *b = evbuffer_new();
        evbuffer_add(b, nf, sizeof nf - 1);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; charset=utf-8");
        evhttp_send_reply(req, 404, "Not Found", b);
        evbuffer_free(b);
        return;
    }
    double start = now_s();
    ckube_gauge_inc(h->in_flight);
    /* the reply goes out as a few TLS records: no Nagle delay between
     * them (the API server waits for the whole answer) */
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    int fd = bev ? (int)bufferevent_getfd(bev) : -1;
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = (const char *)evbuffer_pullup(in, -1);
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    wh_reply out = {0};
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
        wh_bad_request(h, &out, "only POST is accepted");
    else if (!ctype || strncmp(ctype, "application/json", 16))
        wh_bad_request(h, &out, "contentType=%s, expected application/json", ctype ? ctype : "");
    else
        wh_serve(h, body ? body : "", len, &out);
    send_json(req, out.code, out.body ? out.body : "{}", out.body ? out.len : 2);
    char code[8];
    snprintf(code, sizeof code, "%d", out.code);
    const char *labels[] = {h->path, code};
    ckube_counter_inc(ckube_metric_with(s->requests, labels));
    ckube_histogram_observe(h->latency, now_s() - start);
    ckube_gauge_dec(h->in_flight);
    free(out.body);
}

/* ---- life cycle -------------------------------------------------------------- */

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    char buf[16];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    event_base_loopbreak(arg);
}

static char *path_join(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        return NULL;
    return p;
}

ckube_webhook_server *ckube_webhook_server_new(const ckube_webhook_server_options *opts, char **err)
{
    ckube_webhook_server_options o = opts ? *opts : (ckube_webhook_server_options){0};
    if (o.port < CKUBE_WEBHOOK_ANY_PORT || o.port > 65535) {
        if (err && asprintf(err, "invalid webhook server port %d", o.port) < 0)
            *err = NULL;
        return NULL;
    }
    ckube_webhook_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pipe[0] = s->pipe[1] = -1;
    s->host = strdup(o.host && *o.host ? o.host : "0.0.0.0");
    s->port = o.port == 0                        ? CKUBE_WEBHOOK_DEFAULT_PORT
              : o.port == CKUBE_WEBHOOK_ANY_PORT ? 0
                                                 : o.port;
    s->bound_port = -1;
    char defdir[512];
    if (!o.cert_dir) {
        const char *tmp = getenv("TMPDIR");
        snprintf(defdir, sizeof defdir, "%s/k8s-webhook-server/serving-certs",
                 tmp && *tmp ? tmp : "/tmp");
    }
    const char *dir = o.cert_dir ? o.cert_dir : defdir;
    s->cert_path = path_join(dir, o.cert_name ? o.cert_name : "tls.crt");
    s->key_path = path_join(dir, o.key_name ? o.key_name : "tls.key");
    ckube_metrics_registry *reg = o.metrics ? o.metrics : ckube_metrics_default();
    static const char *const wc[] = {"webhook", "code", NULL};
    static const char *const w[] = {"webhook", NULL};
    s->requests =
        ckube_metrics_counter(reg, "controller_runtime_webhook_requests_total",
                              "Total number of admission requests by HTTP status code.", wc);
    s->latency_fam = ckube_metrics_histogram(reg, "controller_runtime_webhook_latency_seconds",
                                             "Histogram of the latency of processing admission "
                                             "requests",
                                             w, NULL, 0);
    s->in_flight_fam = ckube_metrics_gauge(reg, "controller_runtime_webhook_requests_in_flight",
                                           "Current number of admission requests being served.", w);
    s->runnable = (ckube_runnable){.name = "webhook-server",
                                   .start = wh_runnable_start,
                                   .stop = wh_runnable_stop,
                                   .ctx = s,
                                   .needs_leader_election = false};
    if (!s->host || !s->cert_path || !s->key_path) {
        ckube_webhook_server_free(s);
        return NULL;
    }
    return s;
}

int wh_add_handler(ckube_webhook_server *s, const wh_handler *h)
{
    if (s->running || !h->path || h->path[0] != '/' || find(s, h->path))
        return -1;
    wh_handler *v = realloc(s->handlers, (s->nhandlers + 1) * sizeof *v);
    if (!v)
        return -1;
    s->handlers = v;
    wh_handler *n = &s->handlers[s->nhandlers];
    *n = *h;
    n->path = strdup(h->path);
    if (!n->path)
        return -1;
    n->server = s;
    const char *labels[] = {n->path};
    n->latency = ckube_metric_with(s->latency_fam, labels);
    n->in_flight = ckube_metric_with(s->in_flight_fam, labels);
    s->nhandlers++;
    return 0;
}

static void *server_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-webhook");
    ckube_webhook_server *s = arg;
    event_base_dispatch(s->base);
    return NULL;
}

int ckube_webhook_server_start(ckube_webhook_server *s, char **err)
{
    char *e = NULL;
    if (s->running)
        return 0;
    s->ctx = load_ctx(s->cert_path, s->key_path, &e);
    if (!s->ctx)
        goto fail;
    struct stat st;
    stat(s->cert_path, &s->cert_st);
    stat(s->key_path, &s->key_st);
    s->checked = time(NULL);
    (void)st;
    s->base = event_base_new();
    if (!s->base || pipe2(s->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        e = strdup("out of memory");
        goto fail;
    }
    s->wake = event_new(s->base, s->pipe[0], EV_READ | EV_PERSIST, on_wake, s->base);
    event_add(s->wake, NULL);
    s->http = evhttp_new(s->base);
    evhttp_set_gencb(s->http, on_request, s);
    evhttp_set_bevcb(s->http, tls_bufferevent, s);
    evhttp_set_max_body_size(s->http, 64 * 1024 * 1024);
    struct evhttp_bound_socket *bs =
        evhttp_bind_socket_with_handle(s->http, s->host, (ev_uint16_t)s->port);
    if (!bs) {
        if (asprintf(&e, "failed to listen on %s:%d: %s", s->host, s->port, strerror(errno)) < 0)
            e = NULL;
        goto fail;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) == 0)
        s->bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                                 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
        e = strdup("cannot start the webhook server's thread");
        goto fail;
    }
    s->running = true;
    atomic_store(&s->serving, true);
    CKUBE_INFO("Serving webhook server on %s:%d (certificate %s)", s->host, s->bound_port,
               s->cert_path);
    return 0;
fail:
    if (err)
        *err = e;
    else
        free(e);
    ckube_webhook_server_stop(s);
    return -1;
}

void ckube_webhook_server_stop(ckube_webhook_server *s)
{
    if (s->running) {
        ssize_t w = write(s->pipe[1], "x", 1);
        (void)w;
        pthread_join(s->thread, NULL);
        s->running = false;
    }
    atomic_store(&s->serving, false);
    if (s->http)
        evhttp_free(s->http);
    s->http = NULL;
    if (s->wake)
        event_free(s->wake);
    s->wake = NULL;
    if (s->base)
        event_base_free(s->base);
    s->base = NULL;
    for (int i = 0; i < 2; i++) {
        if (s->pipe[i] >= 0)
            close(s->pipe[i]);
        s->pipe[i] = -1;
    }
    SSL_CTX_free(s->ctx);
    s->ctx = NULL;
    s->bound_port = -1;
}

void ckube_webhook_server_free(ckube_webhook_server *s)
{
    if (!s)
        return;
    ckube_webhook_server_stop(s);
    for (size_t i = 0; i < s->nhandlers; i++)
        free(s->handlers[i].path);
    free(s->handlers);
    free(s->host);
    free(s->cert_path);
    free(s->key_path);
    free(s);
}

int ckube_webhook_server_port(const ckube_webhook_server *s)
{
    return s->bound_port;
}

int ckube_webhook_server_started_check(void *ctx, char **reason)
{
    ckube_webhook_server *s = ctx;
    if (atomic_load(&s->serving))
        return 0;
    if (reason)
        *reason = strdup("webhook server has not been started yet");
    return -1;
}

int wh_runnable_start(void *ctx)
{
    char *err = NULL;
    int rc = ckube_webhook_server_start(ctx, &err);
    if (rc)
        CKUBE_ERROR("webhook server: %s", err ? err : "cannot start");
    free(err);
    return rc;
}

void wh_runnable_stop(void *ctx)
{
    ckube_webhook_server_stop(ctx);
}

const ckube_runnable *ckube_webhook_server_runnable(ckube_webhook_server *s)
{
    return &s->runnable;
}
