/* The webhook server (ckube/webhook.h): HTTPS on an http_serve of its
 * own (runtime/http_serve.h: evhttp on a thread); the reviews themselves
 * are review.c's. The serving certificate is read again when its files
 * change, at most once a second and only when a connection comes, so an
 * idle server does no work (runtime's serving_cert; controller-runtime's
 * certwatcher polls and watches; the effect for a client is the same:
 * the next connection after a rotation gets the new certificate). */
#include "webhook/internal.h"

#include <ckube/log.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* the public limit is one http_serve honours */
_Static_assert(CKUBE_WEBHOOK_MAX_WORKERS <= HTTP_SERVE_MAX_WORKERS,
               "workers beyond http_serve's limit");

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

/* One review on its way: read on the loop, answered by wh_serve on a
 * worker (or the loop, without workers), sent from the loop. */
typedef struct wh_call {
    ckube_webhook_server *s;
    wh_handler *h;
    const char *body; /* the request's input buffer: lives until it is answered */
    size_t len;
    double start;
    wh_reply out;
} wh_call;

static void call_work(void *arg)
{
    wh_call *c = arg;
    wh_serve(c->h, c->body, c->len, &c->out);
}

static void call_done(struct evhttp_request *req, void *arg)
{
    wh_call *c = arg;
    if (req) {
        send_json(req, c->out.code, c->out.body ? c->out.body : "{}", c->out.body ? c->out.len : 2);
        char code[8];
        snprintf(code, sizeof code, "%d", c->out.code);
        const char *labels[] = {c->h->path, code};
        ckube_counter_inc(ckube_metric_with(c->s->requests, labels));
        ckube_histogram_observe(c->h->latency, now_s() - c->start);
    }
    ckube_gauge_dec(c->h->in_flight);
    free(c->out.body);
    free(c);
}

static void not_found(struct evhttp_request *req)
{
    static const char nf[] = "404 page not found\n";
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, nf, sizeof nf - 1);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    evhttp_send_reply(req, 404, "Not Found", b);
    if (b)
        evbuffer_free(b);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    ckube_webhook_server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    wh_handler *h = path ? find(s, path) : NULL;
    wh_call *c = h ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        if (h)
            evhttp_send_error(req, 500, NULL);
        else
            not_found(req);
        return;
    }
    *c = (wh_call){.s = s, .h = h, .start = now_s()};
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
    c->len = evbuffer_get_length(in);
    const char *body = (const char *)evbuffer_pullup(in, -1);
    c->body = body ? body : "";
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        wh_bad_request(h, &c->out, "only POST is accepted");
    } else if (!ctype || strncmp(ctype, "application/json", 16)) {
        wh_bad_request(h, &c->out, "contentType=%s, expected application/json", ctype ? ctype : "");
    } else {
        /* the handler's call: on a worker when there are workers */
        http_serve_defer(s->serve, req, call_work, call_done, c);
        return;
    }
    call_done(req, c);
}

/* ---- life cycle -------------------------------------------------------------- */

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
    if (o.workers > CKUBE_WEBHOOK_MAX_WORKERS) {
        if (err && asprintf(err, "invalid webhook server workers %u: at most %d", o.workers,
                            CKUBE_WEBHOOK_MAX_WORKERS) < 0)
            *err = NULL;
        return NULL;
    }
    ckube_webhook_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->host = strdup(o.host && *o.host ? o.host : "0.0.0.0");
    s->port = o.port == 0                        ? CKUBE_WEBHOOK_DEFAULT_PORT
              : o.port == CKUBE_WEBHOOK_ANY_PORT ? 0
                                                 : o.port;
    s->bound_port = -1;
    s->workers = o.workers;
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
    if (s->serve || !h->path || h->path[0] != '/' || find(s, h->path))
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

int ckube_webhook_server_start(ckube_webhook_server *s, char **err)
{
    char *e = NULL;
    if (s->serve)
        return 0;
    s->tls = serving_cert_new(s->cert_path, s->key_path, NULL, 0, "webhook server", &e);
    if (!s->tls)
        goto fail;
    s->serve = http_serve_new("ckube-webhook");
    if (!s->serve || http_serve_set_workers(s->serve, s->workers) != 0) {
        e = strdup("out of memory");
        goto fail;
    }
    http_listen_opts o = {.host = s->host,
                          .port = s->port,
                          .tls = s->tls,
                          .fn = on_request,
                          .arg = s,
                          .max_body = 64 * 1024 * 1024};
    s->bound_port = http_serve_listen(s->serve, &o, &e);
    if (s->bound_port < 0 || http_serve_start(s->serve, &e) != 0)
        goto fail;
    atomic_store(&s->serving, true);
    CKUBE_INFO("Serving webhook server on %s:%d (certificate %s, %u workers)", s->host,
               s->bound_port, s->cert_path, s->workers);
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
    atomic_store(&s->serving, false);
    http_serve_free(s->serve); /* joins the thread; the port is free after */
    s->serve = NULL;
    serving_cert_free(s->tls);
    s->tls = NULL;
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
