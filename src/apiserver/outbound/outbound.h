/* outbound.h - the server's calls out: HTTPS requests to webhooks (and,
 * later, aggregated API servers), made from a loop thread without
 * blocking it (docs/webhooks.md, "One problem under all four").
 *
 * One outbound per loop (the pool of that loop's connections). A call
 * is started with a callback and the loop goes on; the callback runs on
 * the same loop, once, unless the call is cancelled first. Connections
 * are kept alive and reused per target (host, port, server name, CA
 * bundle), so a webhook costs one TLS handshake per connection, not per
 * call, as Go's http.Transport keeps them for kube-apiserver; an idle
 * connection is closed after 90 s (Go's IdleConnTimeout) or when the
 * peer closes it. A call that fails on a reused connection before any
 * byte of the answer came (the peer closed it while idle) is sent again
 * on a new one, as Go retries errServerClosedIdle.
 *
 * TLS: the server's certificate is verified against the target's CA
 * bundle (PEM), or the system's roots when it has none, and its names
 * against `server_name` (a DNS name, or an IP address); SNI is sent for
 * DNS names. Errors are worded as Go's client words them, since clients
 * see them inside upstream's webhook messages: `Post
 * "https://svc.ns.svc:443/p?timeout=10s": context deadline exceeded`,
 * `... dial tcp 127.0.0.1:1: connect: connection refused`, `...
 * tls: failed to verify certificate: x509: certificate signed by unknown
 * authority`.
 *
 * Threading: every call on the outbound's loop thread.
 */
#ifndef CKUBE_APISERVER_OUTBOUND_OUTBOUND_H
#define CKUBE_APISERVER_OUTBOUND_OUTBOUND_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct outbound outbound;
typedef struct outbound_call outbound_call;

/* A pool of connections on `base` (borrowed; outlives the pool). NULL on
 * out of memory. */
outbound *outbound_new(struct event_base *base);
/* Closes every connection; calls still running are cancelled (no
 * callbacks). */
void outbound_free(outbound *o);

/* Where a call goes. Every string is copied by outbound_post. */
typedef struct outbound_target {
    const char *host; /* what to connect to: an IP address or a DNS name */
    int port;
    /* The name the certificate must carry, sent as SNI when it is a DNS
     * name, and the host of the URL errors show; NULL: `host`. */
    const char *server_name;
    /* PEM CA certificates to verify against (NULL or empty: the system's
     * roots) and their length. */
    const char *ca_pem;
    size_t ca_len;
    bool insecure; /* no verification at all (APIService insecureSkipTLSVerify) */
    /* The port the URL in errors and the Host header name (a Service's
     * port, when `port` is its endpoint's); 0: `port`. */
    int url_port;
    /* A client certificate (PEM, its chain may follow) and its key (PEM)
     * to present, e.g. the aggregator's front-proxy identity; NULL: none. */
    const char *client_cert_pem, *client_key_pem;
} outbound_target;

/* A header line (both strings borrowed). */
typedef struct outbound_header {
    const char *name, *value;
} outbound_header;

/* How a call ended (borrowed by the callback; valid during it). */
typedef struct outbound_result {
    int status;               /* the HTTP status; 0: no answer (see error) */
    const char *error;        /* NULL on an answer, else Go's words with the URL */
    struct evbuffer *body;    /* the answer's body (may be drained) */
    const char *content_type; /* the answer's Content-Type, or "" */
} outbound_result;

typedef void (*outbound_cb)(void *arg, const outbound_result *r);

/* POSTs `body` (len bytes, copied) as `content_type` to
 * https://TARGET/path (path with its query: "/validate?timeout=10s"),
 * giving up after timeout_ms. cb runs once on the loop, never from inside
 * this call. Returns the call, usable for outbound_cancel until cb runs. */
outbound_call *outbound_post(outbound *o, const outbound_target *t, const char *path,
                             const char *content_type, const void *body, size_t len,
                             unsigned timeout_ms, outbound_cb cb, void *arg);

/* Any request, its answer streamed (the aggregator's proxy). Strings
 * and the body are copied. The client writes Host, Content-Length (when
 * there is a body, or the method is POST, PUT or PATCH) and User-Agent
 * unless given; headers must not repeat Host or Content-Length. */
typedef struct outbound_request {
    const char *method; /* "GET", "POST", ...; NULL: "POST" */
    const char *path;   /* with its query */
    const outbound_header *headers;
    size_t nheaders;
    const void *body;
    size_t len;
    unsigned timeout_ms; /* 0: no deadline (a watch) */
} outbound_request;

/* How a streamed answer arrives, on the loop, in this order: head once
 * (the status and the headers, borrowed for the call), data for each
 * piece of the body (de-chunked; borrowed), then end once (error NULL:
 * the answer ended as HTTP says; else Go's words, as outbound_result's).
 * A call that fails before its head gets end alone. The callbacks must
 * not cancel their own call (outbound_pause is fine); after end the call
 * is gone. */
typedef struct outbound_stream_callbacks {
    void (*head)(void *arg, int status, const outbound_header *h, size_t n);
    void (*data)(void *arg, const char *bytes, size_t len);
    void (*end)(void *arg, const char *error);
} outbound_stream_callbacks;

/* Starts a streamed call (cb borrowed; it must outlive the call). Never
 * calls back from inside this call. */
outbound_call *outbound_stream(outbound *o, const outbound_target *t, const outbound_request *rq,
                               const outbound_stream_callbacks *cb, void *arg);

/* Any request (rq as outbound_stream's), its answer whole to cb (as
 * outbound_post's). */
outbound_call *outbound_send(outbound *o, const outbound_target *t, const outbound_request *rq,
                             outbound_cb cb, void *arg);

/* Stops (paused) or resumes reading a streamed answer: the peer then
 * waits on TCP's flow control, as a slow client makes it. */
void outbound_pause(outbound_call *c, bool paused);

/* Stops a call whose callback has not run: it will not run. Its
 * connection is closed (a half-sent or half-read exchange cannot be
 * reused). */
void outbound_cancel(outbound_call *c);

/* The loop's event base (borrowed), for callers that defer work. */
struct event_base *outbound_base(const outbound *o);

/* Counters for tests and benchmarks: TLS handshakes completed, and
 * connections open now. */
unsigned long outbound_handshakes(const outbound *o);
size_t outbound_open_connections(const outbound *o);

#endif
