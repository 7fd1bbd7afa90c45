/* http_serve.h - an HTTP server on libevent's evhttp, driven by a thread
 * of its own, with one or more listeners, plain or TLS (not installed).
 * The manager's endpoints (manager_http.c), the webhook server
 * (webhook/server.c) and the extension API server (apiext/server.c) are
 * each one of these with their own request callbacks.
 *
 * Threading: the event base is driven by the server's thread alone; the
 * request callbacks run there. No libevent call is made from another
 * thread while it runs (the stop request arrives through a pipe), so
 * libevent needs no locking (evthread) set-up. Listeners are added before
 * http_serve_start and after http_serve_stop, from the thread that owns
 * the server. */
#ifndef CKUBE_RUNTIME_HTTP_SERVE_H
#define CKUBE_RUNTIME_HTTP_SERVE_H

#include <stddef.h>

#include <event2/http.h>

#include "runtime/secure_serving.h"

typedef struct http_serve http_serve;

/* A request of one listener, on the server's thread. It answers with
 * evhttp_send_reply (or one of its relatives) before returning. */
typedef void (*http_serve_fn)(struct evhttp_request *req, void *arg);

typedef struct http_listen_opts {
    const char *host; /* an address literal; "0.0.0.0" or "::" for every interface */
    int port;         /* 0: a free port (http_serve_listen says which) */
    /* Borrowed until the listener is closed; NULL: plain HTTP. Asked for
     * the current context at each new connection (so a rotated
     * certificate reaches the next one). */
    serving_cert *tls;
    http_serve_fn fn;
    void *arg;
    size_t max_body; /* bytes; 0: evhttp's default (no limit) */
    int methods;     /* EVHTTP_REQ_* bits allowed (others: evhttp answers 501); 0: its default */
} http_listen_opts;

/* A server with no listener; `thread_name` names its thread (top -H, gdb;
 * at most 15 characters). NULL when out of memory or descriptors. */
http_serve *http_serve_new(const char *thread_name);

/* Binds a listener on o->host:o->port. Returns the port bound, or -1
 * with *err (malloc'd): "failed to listen on HOST:PORT: why". */
int http_serve_listen(http_serve *h, const http_listen_opts *o, char **err);

/* Starts the thread (a server without listeners starts none). 0, or -1
 * with *err. */
int http_serve_start(http_serve *h, char **err);

/* Stops the thread (waits for the request it runs, if any) and closes
 * every listener and connection: their ports are free on return. The
 * server may listen and start again. Safe on a server never started. */
void http_serve_stop(http_serve *h);

/* http_serve_stop, then frees it. NULL is fine. */
void http_serve_free(http_serve *h);

#endif
