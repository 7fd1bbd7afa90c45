/* httpd.h - the server's HTTP/1.1 connections, on a libevent loop.
 *
 * One httpd per event loop: it accepts from a listening socket, reads and
 * parses requests (with the http_parser library), hands each complete
 * request to the loop's handler, and writes the replies. It replaces
 * libevent's evhttp, whose per-request costs (an epoll_ctl pair to toggle
 * the connection's events, an ioctl before every read, stdio formatting
 * of every header line, a malloc per header) were half the server's CPU
 * for a GET from the watch cache. Here a keep-alive request costs one
 * read() and one writev(): the read event stays registered for the life
 * of the connection, and the write event is only armed when the kernel
 * does not take a reply at once.
 *
 * Behaviour as clients expect from kube-apiserver (Go's net/http):
 * keep-alive and pipelining (one request served at a time, in order),
 * HTTP/1.0 (no keep-alive unless asked; streamed replies end with the
 * connection), chunked request bodies, `Expect: 100-continue`, HEAD,
 * a 400 for malformed requests and a 431 for headers over 1 MiB (then the
 * connection closes), idle connections closed after an hour.
 *
 * Writes use writev(), so the process must ignore SIGPIPE (the server
 * does): a client that vanishes is then an EPIPE, not a signal.
 *
 * TLS (httpd_config.tls): every connection is a server-side OpenSSL
 * connection; the handshake is driven by the first reads, replies are
 * encrypted a full record (16 KiB) at a time, and a connection that ends
 * normally sends close_notify. Plain HTTP sent to a TLS port gets Go's
 * answer ("400 Bad Request ... Client sent an HTTP request to an HTTPS
 * server."), then the connection closes.
 *
 * Threading: everything runs on the loop's thread. Callbacks are never
 * made from inside an httpd_* call: a connection that fails while the
 * owner writes to it is reported from the loop afterwards.
 */
#ifndef CKUBE_HTTPD_H
#define CKUBE_HTTPD_H

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct httpd httpd;
typedef struct httpd_req httpd_req;

typedef enum httpd_method {
    HTTPD_GET,
    HTTPD_HEAD,
    HTTPD_POST,
    HTTPD_PUT,
    HTTPD_PATCH,
    HTTPD_DELETE,
    HTTPD_OPTIONS,
} httpd_method;

/* Called on the loop thread for each complete request. The handler owns
 * the request until it finishes it with httpd_send_reply, httpd_send_end
 * or httpd_abort (now or later, from the same loop thread). */
typedef void (*httpd_handler)(httpd_req *req, void *arg);

typedef struct httpd_tls httpd_tls;

typedef struct httpd_config {
    size_t max_body;       /* larger bodies: dispatched at once, body_too_large */
    unsigned idle_timeout; /* seconds a connection may sit idle; 0: 3600 */
    /* Seconds from a connection's start (its TLS handshake included), or
     * from a request's first byte, to the end of that request's headers;
     * 0: 32, kube-apiserver's ReadHeaderTimeout. A slower client is
     * disconnected (checked every few seconds, so up to twice as late). */
    unsigned header_timeout;
    /* TLS on every connection (tls.h; borrowed, shared by loops, outlives
     * the httpd); NULL: plain HTTP. */
    httpd_tls *tls;
    /* Frees what the owner keeps in a connection's slot
     * (httpd_req_conn_slot) when the connection goes; NULL: nothing is
     * kept there. */
    void (*slot_free)(void *);
} httpd_config;

/* Serves connections accepted from `listen_fd` (non-blocking; the httpd
 * owns it and closes it; -1: none, connections come from httpd_adopt) on
 * `base`. NULL on failure (out of memory). */
httpd *httpd_new(struct event_base *base, int listen_fd, const httpd_config *cfg,
                 httpd_handler handler, void *arg);

/* Serves `fd`, a connected stream socket, as if it had been accepted (the
 * httpd owns it from here on, and sets it non-blocking). -1 on failure
 * (out of memory; fd is closed). */
int httpd_adopt(httpd *h, int fd);

/* Closes the listening socket; open connections stay. */
void httpd_stop_accepting(httpd *h);

/* Closes every connection and frees the httpd. Requests still held by
 * their owners stay valid (detached: replying to them frees them);
 * streamed replies must have been ended or aborted first. */
void httpd_free(httpd *h);

/* ---- the request ------------------------------------------------------ */

httpd_method httpd_req_method(const httpd_req *r);
const char *httpd_req_method_name(const httpd_req *r); /* "GET", ... (static) */
const char *httpd_req_target(const httpd_req *r);      /* as received: path?query */
/* The first value of header `name` (case-insensitive), or NULL. Borrowed:
 * valid while the request lives. */
const char *httpd_req_header(const httpd_req *r, const char *name);
/* Every header line in order of arrival: the count, and line i's name
 * and value (borrowed, as above). A header sent on several lines is
 * several entries, as Go's http.Header keeps its values. */
size_t httpd_req_header_count(const httpd_req *r);
void httpd_req_header_at(const httpd_req *r, size_t i, const char **name, const char **value);
/* The connection's peer address as "ip:port" ("[ipv6]:port") into buf;
 * "" when the connection is gone or the address cannot be read. */
void httpd_req_peer(const httpd_req *r, char *buf, size_t n);
/* The body (de-chunked). Borrowed; the owner may drain it. */
struct evbuffer *httpd_req_body(httpd_req *r);
/* The body was over max_body: it is not kept (the handler answers 413,
 * and the connection closes after the reply). */
bool httpd_req_body_too_large(const httpd_req *r);

/* ---- the reply ---------------------------------------------------------
 * Headers first (copied), then either one whole reply or a streamed one.
 * "Connection: close" among them closes the connection after the reply. */
void httpd_add_header(httpd_req *r, const char *name, const char *value);

/* Sends status `code` and `body` (its contents are moved out; NULL: no
 * body) with Content-Length, and frees the request. */
void httpd_send_reply(httpd_req *r, int code, struct evbuffer *body);

/* A streamed reply: chunked on HTTP/1.1; on HTTP/1.0 the body runs to the
 * end of the connection. `on_closed` is called (from the loop) if the
 * connection fails or the peer closes it before httpd_send_end; the
 * request is freed after it returns and must not be used in it or after.
 * `on_drained` (may be NULL) is called after httpd_notify_drained once
 * everything written so far is in the kernel. */
void httpd_send_start(httpd_req *r, int code, void (*on_closed)(httpd_req *, void *),
                      void (*on_drained)(httpd_req *, void *), void *arg);
/* Sends the contents of `buf` (moved out) as one chunk. */
void httpd_send_chunk(httpd_req *r, struct evbuffer *buf);
/* Asks for one on_drained call once the output is empty (at the latest on
 * the loop's next turn). */
void httpd_notify_drained(httpd_req *r);
/* Ends the streamed reply (the terminating chunk) and frees the request. */
void httpd_send_end(httpd_req *r);

/* Drops the connection without another byte (the peer sees the stream cut)
 * and frees the request. No callback follows. */
void httpd_abort(httpd_req *r);

/* For writers that frame chunks themselves (the watch fan-out): the
 * descriptor, the connection's queued output (bytes must go after it; an
 * empty queue means the socket may be written directly), whether the reply
 * is chunked, and httpd_flush to write what was appended to the queue.
 * -1/NULL/false once the connection is gone. The descriptor is -1 on a
 * TLS connection too: bytes must then go through the queue (and
 * httpd_flush), which encrypts them. */
int httpd_req_fd(const httpd_req *r);
struct evbuffer *httpd_req_output(httpd_req *r);
bool httpd_req_chunked(const httpd_req *r);
void httpd_flush(httpd_req *r);
/* Writes the size line of a chunk of `len` bytes ("%zx\r\n") into buf (at
 * least 19 bytes); returns its length. For direct writers' framing. */
size_t httpd_chunk_line(char *buf, size_t len);

/* The connection's OpenSSL object (TLS: the client's certificate and its
 * verification, SSL_get0_peer_certificate / SSL_get_verify_result), or
 * NULL on plain HTTP or once the connection is gone. Borrowed. */
struct ssl_st *httpd_req_ssl(const httpd_req *r);

/* The owner's slot on the request's connection (what stays true for
 * every request on it, such as who its client certificate names): NULL
 * on a new connection; what is put there is the connection's, freed with
 * httpd_config.slot_free when it goes. NULL once the connection is gone. */
void **httpd_req_conn_slot(httpd_req *r);

#endif
