/* http_serve.h - an HTTP server on libevent's evhttp, driven by a thread
 * of its own, with one or more listeners, plain or TLS (not installed).
 * The manager's endpoints (manager_http.c), the webhook server
 * (webhook/server.c) and the extension API server (apiext/server.c) are
 * each one of these with their own request callbacks.
 *
 * Threading: the event base is driven by the server's thread alone; the
 * request callbacks run there. No libevent call is made from another
 * thread while it runs (the stop request and finished work arrive through
 * a pipe), so libevent needs no locking (evthread) set-up. Listeners and
 * workers are set before http_serve_start and after http_serve_stop, from
 * the thread that owns the server.
 *
 * Work that may take long (a webhook's handler) can leave the loop:
 * http_serve_defer runs it on one of the server's worker threads and
 * answers on the loop when it is done, so the loop goes on accepting,
 * handshaking and answering other connections meanwhile. */
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

/* Stops the thread (waits for the request it runs, if any) and the
 * workers (each finishes the work it runs; queued work is dropped), ends
 * every deferred request (done with req NULL), and closes every listener
 * and connection: their ports are free on return. The server may listen
 * and start again. Safe on a server never started. */
void http_serve_stop(http_serve *h);

/* ---- work off the loop ---------------------------------------------------- */

/* Runs on a worker thread: computes the answer into arg (no libevent
 * call, no access to the request). */
typedef void (*http_work_fn)(void *arg);
/* Runs on the loop's thread after the work: answers req (evhttp_send_reply
 * or a relative) and frees arg. req is NULL when the server stopped first:
 * then it only frees arg, on the thread stopping the server, and the work
 * may or may not have run (the server ends the request itself; its
 * connection closes without an answer, as for a request the loop was
 * running when it stopped). */
typedef void (*http_done_fn)(struct evhttp_request *req, void *arg);

#define HTTP_SERVE_MAX_WORKERS 1024

/* The number of worker threads for http_serve_defer (0, the default: no
 * workers, deferred work runs at once on the loop). Before start, or
 * after stop. 0, or -1 when n is over HTTP_SERVE_MAX_WORKERS. */
int http_serve_set_workers(http_serve *h, unsigned n);

/* From a request callback, on the loop's thread: queues work(arg) for a
 * worker and returns; done(req, arg) follows on the loop. Work is taken
 * in the order it was queued, by as many workers as there are; a
 * connection's next request is read only after its answer (evhttp), so
 * one client's requests are answered in order. Without workers, or out of
 * memory, work and done run here before this returns. */
void http_serve_defer(http_serve *h, struct evhttp_request *req, http_work_fn work,
                      http_done_fn done, void *arg);

/* http_serve_stop, then frees it. NULL is fine. */
void http_serve_free(http_serve *h);

#endif
