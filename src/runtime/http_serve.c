/* http_serve.c - an evhttp server on a thread of its own (see
 * http_serve.h). */
#include "runtime/http_serve.h"

#include "common/text.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One listener: its own evhttp (callbacks and limits are per evhttp). */
typedef struct listener {
    struct evhttp *http;
    serving_cert *tls; /* borrowed */
    struct listener *next;
} listener;

struct http_serve {
    char name[16];
    struct event_base *base;
    struct event *wake;
    int pipe[2];
    listener *listeners;
    pthread_t thread;
    bool running;
};

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    char buf[16];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    event_base_loopbreak(arg);
}

http_serve *http_serve_new(const char *thread_name)
{
    http_serve *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    snprintf(h->name, sizeof h->name, "%s", thread_name ? thread_name : "ckube-http");
    h->pipe[0] = h->pipe[1] = -1;
    h->base = event_base_new();
    if (!h->base || pipe2(h->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        http_serve_free(h);
        return NULL;
    }
    h->wake = event_new(h->base, h->pipe[0], EV_READ | EV_PERSIST, on_wake, h->base);
    if (!h->wake || event_add(h->wake, NULL) != 0) {
        http_serve_free(h);
        return NULL;
    }
    return h;
}

/* evhttp's bufferevent for a new connection of a TLS listener: the
 * handshake as the server, with the certificate current now. */
static struct bufferevent *tls_bufferevent(struct event_base *base, void *arg)
{
    listener *l = arg;
    SSL_CTX *ctx = serving_cert_ctx(l->tls);
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    if (!ssl)
        return NULL;
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        SSL_free(ssl);
        return NULL;
    }
    /* a client that closes without close_notify (curl, Go) is no error */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* The port a bound socket has (the one asked for, or the free one). */
static int bound_port(struct evhttp_bound_socket *bs)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) != 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int http_serve_listen(http_serve *h, const http_listen_opts *o, char **err)
{
    const char *host = o->host && *o->host ? o->host : "0.0.0.0";
    bool v6 = strchr(host, ':') != NULL;
    listener *l = calloc(1, sizeof *l);
    if (!l || !(l->http = evhttp_new(h->base))) {
        free(l);
        ckube__set_err(err, "out of memory");
        return -1;
    }
    l->tls = o->tls;
    evhttp_set_gencb(l->http, o->fn, o->arg);
    if (o->tls)
        evhttp_set_bevcb(l->http, tls_bufferevent, l);
    if (o->max_body)
        evhttp_set_max_body_size(l->http, (ev_ssize_t)o->max_body);
    if (o->methods)
        evhttp_set_allowed_methods(l->http, (ev_uint32_t)o->methods);
    struct evhttp_bound_socket *bs =
        evhttp_bind_socket_with_handle(l->http, host, (ev_uint16_t)o->port);
    int port = bs ? bound_port(bs) : -1;
    if (port < 0) {
        int e = errno;
        ckube__set_err(err, "failed to listen on %s%s%s:%d: %s", v6 ? "[" : "", host, v6 ? "]" : "",
                       o->port, strerror(e));
        evhttp_free(l->http);
        free(l);
        return -1;
    }
    l->next = h->listeners;
    h->listeners = l;
    return port;
}

static void *serve_main(void *arg)
{
    http_serve *h = arg;
    pthread_setname_np(pthread_self(), h->name);
    event_base_dispatch(h->base);
    return NULL;
}

int http_serve_start(http_serve *h, char **err)
{
    if (h->running || !h->listeners)
        return 0;
    int e = pthread_create(&h->thread, NULL, serve_main, h);
    if (e != 0) {
        ckube__set_err(err, "cannot start the %s thread: %s", h->name, strerror(e));
        return -1;
    }
    h->running = true;
    return 0;
}

void http_serve_stop(http_serve *h)
{
    if (h->running) {
        ssize_t w = write(h->pipe[1], "x", 1);
        (void)w;
        pthread_join(h->thread, NULL);
        h->running = false;
    }
    /* evhttp_free closes the listener and every connection of it */
    while (h->listeners) {
        listener *l = h->listeners;
        h->listeners = l->next;
        evhttp_free(l->http);
        free(l);
    }
}

void http_serve_free(http_serve *h)
{
    if (!h)
        return;
    if (h->base)
        http_serve_stop(h);
    if (h->wake)
        event_free(h->wake);
    if (h->base)
        event_base_free(h->base);
    for (int i = 0; i < 2; i++)
        if (h->pipe[i] >= 0)
            close(h->pipe[i]);
    free(h);
}
