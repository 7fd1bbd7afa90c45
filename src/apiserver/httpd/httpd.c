/* httpd.c - HTTP/1.1 connections on a libevent loop (see httpd.h).
 *
 * A connection's life: accepted non-blocking; its read event is
 * registered once and stays (EV_PERSIST) so that every request costs one
 * read(). Bytes are parsed straight from the loop's scratch buffer; only
 * what arrives while a request is being served (pipelined requests, or a
 * client's EOF), or while over 1 MiB of replies waits for a client that
 * does not read, is kept, in `in`, and parsed when the connection can go
 * on (each of the two waits is bounded: reading stops at 1 MiB of `in`).
 * A reply is appended to `out` and written at once (one writev); the write
 * event is armed only while the kernel does not take everything.
 *
 * Re-entrancy: owners call httpd_* from handlers, from loop tasks and
 * from httpd's own callbacks. None of those calls frees a connection or
 * calls back: a connection that must die is marked `dead` and its write
 * event activated, and the event callback (on_write) frees it. Event
 * callbacks hold `busy` while they run, so a connection is never freed
 * under them.
 */
#include "apiserver/httpd/httpd.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "apiserver/httpd/tls.h"
#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

#define READ_SCRATCH (64u * 1024)
#define MAX_HEADER_BYTES (1u << 20)   /* Go's DefaultMaxHeaderBytes */
#define MAX_PENDING_INPUT (1u << 20)  /* unparsed bytes kept while serving */
#define MAX_PENDING_OUTPUT (1u << 20) /* replies queued before parsing pauses */
#define ACCEPT_BATCH 64               /* connections accepted per wake-up */
#define SWEEP_INTERVAL 30             /* seconds between idle checks */
#define TLS_RECORD 16384              /* plaintext per SSL_write: one full record */

typedef struct httpd_conn httpd_conn;

struct httpd {
    struct event_base *base;
    int lfd;
    struct event *lev;
    struct event *sweep;
    httpd_handler handler;
    void *arg;
    httpd_config cfg;
    LIST_HEAD(, httpd_conn) conns;
    char scratch[READ_SCRATCH];
    char wscratch[TLS_RECORD]; /* TLS: the plaintext of the record being written */
    time_t date_sec;
    char date[40]; /* "Date: ...\r\n" for date_sec */
    size_t date_len;
};

struct httpd_conn {
    LIST_ENTRY(httpd_conn) link;
    httpd *h;
    int fd;
    SSL *ssl;   /* NULL: plain */
    void *slot; /* the owner's (httpd_req_conn_slot) */
    struct event *rev, *wev;
    http_parser parser;
    struct evbuffer *in;  /* unparsed input */
    struct evbuffer *out; /* queued output */
    httpd_req *parsing;   /* being received */
    httpd_req *cur;       /* dispatched, not finished */
    time_t last_active;
    time_t header_deadline; /* a request's headers (and TLS handshake) due by; 0: none */
    int busy;               /* event callbacks on the stack */
    bool wev_armed;         /* wev is pending */
    bool read_off;          /* rev removed: input backlog or EOF */
    bool close_after;       /* close once the current reply is out */
    bool dead;              /* to be freed by the next callback */
    bool peer_eof;
    bool ready;      /* `parsing` is ready to dispatch (parser paused) */
    bool discarding; /* the body being received is dropped (too large) */
    /* TLS: an SSL_read that needs the socket writable, an SSL_write that
     * needs it readable (retried from the other event), and a fatal
     * error (no close_notify may follow). */
    bool rd_wants_write, wr_wants_read, tls_fatal;
};

struct httpd_req {
    httpd_conn *conn; /* NULL once detached (connection gone) */
    httpd_method method;
    unsigned char vmajor, vminor;
    bool keep_alive;
    bool too_large;
    /* received: the target, and the headers as "name\0value\0"... */
    ckube__strbuf target;
    ckube__strbuf hbuf;
    size_t *hnames; /* offsets of header names in hbuf */
    size_t nh, hncap;
    bool in_value; /* the parser is inside a header value */
    struct evbuffer *body;
    /* reply */
    ckube__strbuf ohdr; /* "Name: value\r\n"... */
    bool chunked, streaming, want_drained;
    bool said_close; /* the owner added "Connection: close" */
    void (*on_closed)(httpd_req *, void *);
    void (*on_drained)(httpd_req *, void *);
    void *cb_arg;
};

/* Appends n bytes (NULs included) to b; 0, or -1 once out of memory (a
 * parser callback's failure). */
static int append(ckube__strbuf *b, const char *p, size_t n)
{
    ckube__sb_addn(b, p, n);
    return b->oom ? -1 : 0;
}

static bool is_head(const httpd_req *r)
{
    return r->method == HTTPD_HEAD;
}

/* ---- requests ----------------------------------------------------------- */

static httpd_req *req_new(httpd_conn *c)
{
    httpd_req *r = xcalloc(1, sizeof *r);
    r->conn = c;
    r->body = evbuffer_new();
    if (!r->body) {
        free(r);
        return NULL;
    }
    return r;
}

static void req_free(httpd_req *r)
{
    if (!r)
        return;
    evbuffer_free(r->body);
    free(r->target.s);
    free(r->hbuf.s);
    free(r->hnames);
    free(r->ohdr.s);
    free(r);
}

httpd_method httpd_req_method(const httpd_req *r)
{
    return r->method;
}

const char *httpd_req_method_name(const httpd_req *r)
{
    static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    return names[r->method];
}

const char *httpd_req_target(const httpd_req *r)
{
    return r->target.s ? r->target.s : "/";
}

const char *httpd_req_header(const httpd_req *r, const char *name)
{
    for (size_t i = 0; i < r->nh; i++) {
        const char *n = r->hbuf.s + r->hnames[i];
        if (!strcasecmp(n, name))
            return n + strlen(n) + 1;
    }
    return NULL;
}

void httpd_req_peer(const httpd_req *r, char *buf, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN];
    buf[0] = '\0';
    if (!r->conn || getpeername(r->conn->fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip))
            snprintf(buf, n, "%s:%u", ip, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip))
            snprintf(buf, n, "[%s]:%u", ip, ntohs(a->sin6_port));
    }
}

size_t httpd_req_header_count(const httpd_req *r)
{
    return r->nh;
}

void httpd_req_header_at(const httpd_req *r, size_t i, const char **name, const char **value)
{
    const char *n = r->hbuf.s + r->hnames[i];
    *name = n;
    *value = n + strlen(n) + 1;
}

struct evbuffer *httpd_req_body(httpd_req *r)
{
    return r->body;
}

bool httpd_req_body_too_large(const httpd_req *r)
{
    return r->too_large;
}

/* ---- parser callbacks ------------------------------------------------- */

static time_t loop_now(httpd *h)
{
    struct timeval tv;
    event_base_gettimeofday_cached(h->base, &tv);
    return tv.tv_sec;
}

static int on_message_begin(http_parser *p)
{
    httpd_conn *c = p->data;
    if (!c->header_deadline)
        c->header_deadline = loop_now(c->h) + (time_t)c->h->cfg.header_timeout;
    if (!c->parsing && !(c->parsing = req_new(c)))
        return -1;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    httpd_req *r = ((httpd_conn *)p->data)->parsing;
    return append(&r->target, at, len);
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    httpd_req *r = ((httpd_conn *)p->data)->parsing;
    if (r->in_value || r->nh == 0) {
        /* A new header: close the previous value, note the name. */
        if (r->nh && append(&r->hbuf, "", 1) != 0)
            return -1;
        if (r->nh == r->hncap) {
            size_t n = r->hncap ? r->hncap * 2 : 16;
            size_t *p2 = xrealloc(r->hnames, n * sizeof *p2);
            r->hnames = p2;
            r->hncap = n;
        }
        r->hnames[r->nh++] = r->hbuf.len;
        r->in_value = false;
    }
    return append(&r->hbuf, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    httpd_req *r = ((httpd_conn *)p->data)->parsing;
    if (!r->in_value) {
        if (append(&r->hbuf, "", 1) != 0) /* ends the name */
            return -1;
        r->in_value = true;
    }
    return append(&r->hbuf, at, len);
}

static bool method_of(unsigned m, httpd_method *out)
{
    switch (m) {
    case HTTP_GET:
        *out = HTTPD_GET;
        return true;
    case HTTP_HEAD:
        *out = HTTPD_HEAD;
        return true;
    case HTTP_POST:
        *out = HTTPD_POST;
        return true;
    case HTTP_PUT:
        *out = HTTPD_PUT;
        return true;
    case HTTP_PATCH:
        *out = HTTPD_PATCH;
        return true;
    case HTTP_DELETE:
        *out = HTTPD_DELETE;
        return true;
    case HTTP_OPTIONS:
        *out = HTTPD_OPTIONS;
        return true;
    default:
        return false;
    }
}

static void queue_error(httpd_conn *c, int code);

static int on_headers_complete(http_parser *p)
{
    httpd_conn *c = p->data;
    httpd_req *r = c->parsing;
    c->header_deadline = 0;
    if (r->nh && !r->in_value && append(&r->hbuf, "", 1) != 0)
        return -1; /* a last name without a value */
    if (r->nh && append(&r->hbuf, "", 1) != 0)
        return -1;
    if (!method_of(p->method, &r->method)) {
        queue_error(c, 405);
        return -1;
    }
    r->vmajor = (unsigned char)p->http_major;
    r->vminor = (unsigned char)p->http_minor;
    r->keep_alive = http_should_keep_alive(p) != 0;
    bool has_body =
        (p->flags & F_CHUNKED) || (p->content_length > 0 && p->content_length != UINT64_MAX);
    if (p->content_length != UINT64_MAX && p->content_length > c->h->cfg.max_body) {
        /* Answer now, without reading the body (a client that sent
         * Expect: 100-continue does not send it); what arrives anyway is
         * read and dropped, then the connection closes. */
        r->too_large = true;
        c->discarding = true;
        c->ready = true;
        http_parser_pause(p, 1);
        return 0;
    }
    if (has_body && r->vmajor == 1 && r->vminor >= 1) {
        const char *expect = httpd_req_header(r, "Expect");
        if (expect && !strcasecmp(expect, "100-continue"))
            evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    httpd_conn *c = p->data;
    if (c->discarding)
        return 0;
    httpd_req *r = c->parsing;
    if (evbuffer_get_length(r->body) + len > c->h->cfg.max_body) {
        /* A chunked body over the limit: stop keeping it and answer. */
        evbuffer_drain(r->body, evbuffer_get_length(r->body));
        r->too_large = true;
        c->discarding = true;
        c->ready = true;
        http_parser_pause(p, 1);
        return 0;
    }
    return evbuffer_add(r->body, at, len);
}

static int on_message_complete(http_parser *p)
{
    httpd_conn *c = p->data;
    if (c->discarding) {
        /* The rejected request's body is over: nothing more is read. */
        c->discarding = false;
        c->close_after = true;
        http_parser_pause(p, 1);
        return 0;
    }
    c->ready = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- writing ------------------------------------------------------------ */

/* Marks the connection for freeing by its next event callback. */
static void conn_doom(httpd_conn *c)
{
    c->dead = true;
    if (!c->busy)
        event_active(c->wev, EV_WRITE, 1);
}

static void arm_write(httpd_conn *c)
{
    if (!c->wev_armed) {
        event_add(c->wev, NULL);
        c->wev_armed = true;
    }
}

/* A TLS connection's OpenSSL error, for the log (and the queue emptied). */
static const char *tls_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "connection failed";
}

/* The error queue: SSL_get_error reads the thread's whole queue, so it
 * must be empty before each SSL_read/SSL_write, whatever else ran on this
 * thread (a handler parsing a certificate leaves errors behind: a write
 * that would block then reads as a fatal error and the reply is cut). It
 * costs about 800 instructions a call; skipping it was tried and was
 * wrong (test_httpd_tls: test_stale_openssl_error). */

/* conn_flush on TLS: a record at a time. A write that would block is
 * retried with at least as many bytes, which out (appended to only) has:
 * OpenSSL wants the same bytes again, and allows the buffer to move
 * (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER). */
static void tls_flush(httpd_conn *c)
{
    size_t len;
    while ((len = evbuffer_get_length(c->out)) > 0) {
        size_t n = len < TLS_RECORD ? len : TLS_RECORD;
        evbuffer_copyout(c->out, c->h->wscratch, n);
        ERR_clear_error();
        int r = SSL_write(c->ssl, c->h->wscratch, (int)n);
        if (r > 0) {
            evbuffer_drain(c->out, (size_t)r);
            continue;
        }
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_WRITE) {
            arm_write(c);
            return;
        }
        if (e == SSL_ERROR_WANT_READ) {
            /* (Only mid-handshake.) on_read retries; it must run. */
            c->wr_wants_read = true;
            if (c->read_off && !c->peer_eof) {
                event_add(c->rev, NULL);
                c->read_off = false;
            }
            return;
        }
        c->tls_fatal = true;
        CKUBE_V(5, "http: TLS write: %s", e == SSL_ERROR_SYSCALL ? strerror(errno) : tls_reason());
        ERR_clear_error();
        conn_doom(c);
        return;
    }
    if (c->wev_armed) {
        event_del(c->wev);
        c->wev_armed = false;
    }
}

/* Writes as much of `out` as the socket takes; arms the write event for
 * the rest. A failed socket dooms the connection. */
static void conn_flush(httpd_conn *c)
{
    if (c->ssl) {
        tls_flush(c);
        return;
    }
    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->fd);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            arm_write(c);
            return;
        }
        CKUBE_V(5, "http: write: %s", n < 0 ? strerror(errno) : "closed");
        conn_doom(c);
        return;
    }
    if (c->wev_armed) {
        event_del(c->wev);
        c->wev_armed = false;
    }
}

static void refresh_date(httpd *h)
{
    struct timeval tv;
    event_base_gettimeofday_cached(h->base, &tv);
    if (tv.tv_sec == h->date_sec && h->date_len)
        return;
    h->date_sec = tv.tv_sec;
    struct tm tm;
    gmtime_r(&h->date_sec, &tm);
    h->date_len = strftime(h->date, sizeof h->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
}

/* Writes v in base 10 or 16 (lower case) at p; returns the digits. */
static size_t put_uint(char *p, unsigned long long v, unsigned base)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Queues the status line and headers. `length` < 0: a streamed body. */
static void queue_head(httpd_req *r, int code, long long length)
{
    httpd_conn *c = r->conn;
    httpd *h = c->h;
    bool http11 = r->vmajor == 1 && r->vminor >= 1;
    if (!r->keep_alive)
        c->close_after = true;
    if (length < 0 && !http11)
        c->close_after = true; /* the body ends with the connection */
    char line[96];
    size_t n = 0;
    memcpy(line, http11 ? "HTTP/1.1 " : "HTTP/1.0 ", 9);
    n = 9;
    n += put_uint(line + n, (unsigned)code, 10);
    line[n++] = ' ';
    const char *reason = ckube__http_reason(code);
    size_t rl = strlen(reason);
    if (rl > sizeof line - n - 2)
        rl = sizeof line - n - 2;
    memcpy(line + n, reason, rl);
    n += rl;
    line[n++] = '\r';
    line[n++] = '\n';
    evbuffer_add(c->out, line, n);
    if (r->ohdr.len)
        evbuffer_add(c->out, r->ohdr.s, r->ohdr.len);
    refresh_date(h);
    evbuffer_add(c->out, h->date, h->date_len);
    char tail[96];
    n = 0;
    if (length >= 0) {
        memcpy(tail, "Content-Length: ", 16);
        n = 16;
        n += put_uint(tail + n, (unsigned long long)length, 10);
        tail[n++] = '\r';
        tail[n++] = '\n';
    } else if (http11) {
        memcpy(tail, "Transfer-Encoding: chunked\r\n", 28);
        n = 28;
        r->chunked = true;
    }
    bool closing = c->close_after || r->too_large;
    if (closing && !r->said_close) {
        memcpy(tail + n, "Connection: close\r\n", 19);
        n += 19;
    } else if (!closing && !http11) {
        memcpy(tail + n, "Connection: keep-alive\r\n", 24);
        n += 24;
    }
    tail[n++] = '\r';
    tail[n++] = '\n';
    evbuffer_add(c->out, tail, n);
}

void httpd_add_header(httpd_req *r, const char *name, const char *value)
{
    if (r->conn && !strcasecmp(name, "Connection") && !strcasecmp(value, "close")) {
        r->conn->close_after = true;
        r->said_close = true;
    }
    /* Room for the whole line first, so that a header is added whole or
     * (out of memory) not at all. */
    ckube__sb_reserve(&r->ohdr, strlen(name) + strlen(value) + 4);
    if (r->ohdr.oom)
        return;
    ckube__sb_add(&r->ohdr, name);
    ckube__sb_addn(&r->ohdr, ": ", 2);
    /* A value never ends a header early (no CR or LF passes): runs
     * without them are copied whole, each CR or LF becomes a space. */
    for (const char *v = value; *v;) {
        size_t run = strcspn(v, "\r\n");
        ckube__sb_addn(&r->ohdr, v, run);
        v += run;
        if (*v) {
            ckube__sb_addc(&r->ohdr, ' ');
            v++;
        }
    }
    ckube__sb_addn(&r->ohdr, "\r\n", 2);
}

/* The request is finished: the connection goes on with the next one. */
static void finish(httpd_req *r)
{
    httpd_conn *c = r->conn;
    req_free(r);
    if (!c)
        return;
    c->cur = NULL;
    conn_flush(c);
    if (c->dead)
        return;
    /* Pipelined input, a close to do, or reading to resume: the event
     * callback does it (unless one is on the stack and will). */
    if (!c->busy && (c->close_after || c->read_off || evbuffer_get_length(c->in)))
        event_active(c->wev, EV_WRITE, 1);
}

void httpd_send_reply(httpd_req *r, int code, struct evbuffer *body)
{
    httpd_conn *c = r->conn;
    if (!c || c->dead) {
        if (body)
            evbuffer_drain(body, evbuffer_get_length(body));
        finish(r);
        return;
    }
    size_t len = body ? evbuffer_get_length(body) : 0;
    queue_head(r, code, (long long)len);
    if (body) {
        if (is_head(r))
            evbuffer_drain(body, len);
        else
            evbuffer_add_buffer(c->out, body);
    }
    finish(r);
}

void httpd_send_start(httpd_req *r, int code, void (*on_closed)(httpd_req *, void *),
                      void (*on_drained)(httpd_req *, void *), void *arg)
{
    r->streaming = true;
    r->on_closed = on_closed;
    r->on_drained = on_drained;
    r->cb_arg = arg;
    httpd_conn *c = r->conn;
    if (!c)
        return;
    queue_head(r, code, -1);
    conn_flush(c);
}

size_t httpd_chunk_line(char *buf, size_t len)
{
    size_t n = put_uint(buf, len, 16);
    buf[n] = '\r';
    buf[n + 1] = '\n';
    return n + 2;
}

void httpd_send_chunk(httpd_req *r, struct evbuffer *buf)
{
    httpd_conn *c = r->conn;
    size_t len = evbuffer_get_length(buf);
    if (!c || c->dead || is_head(r) || !len) {
        evbuffer_drain(buf, len);
        return;
    }
    if (r->chunked) {
        char line[24];
        evbuffer_add(c->out, line, httpd_chunk_line(line, len));
        evbuffer_add_buffer(c->out, buf);
        evbuffer_add(c->out, "\r\n", 2);
    } else {
        evbuffer_add_buffer(c->out, buf);
    }
    conn_flush(c);
}

void httpd_notify_drained(httpd_req *r)
{
    r->want_drained = true;
    httpd_conn *c = r->conn;
    if (c && !c->dead && evbuffer_get_length(c->out) == 0)
        event_active(c->wev, EV_WRITE, 1);
}

void httpd_send_end(httpd_req *r)
{
    httpd_conn *c = r->conn;
    if (c && !c->dead && r->chunked && !is_head(r))
        evbuffer_add(c->out, "0\r\n\r\n", 5);
    finish(r);
}

void httpd_abort(httpd_req *r)
{
    httpd_conn *c = r->conn;
    if (c) {
        c->cur = NULL;
        conn_doom(c);
    }
    req_free(r);
}

int httpd_req_fd(const httpd_req *r)
{
    return r->conn && !r->conn->dead && !r->conn->ssl ? r->conn->fd : -1;
}

struct ssl_st *httpd_req_ssl(const httpd_req *r)
{
    return r->conn && !r->conn->dead ? r->conn->ssl : NULL;
}

void **httpd_req_conn_slot(httpd_req *r)
{
    return r->conn && !r->conn->dead ? &r->conn->slot : NULL;
}

struct evbuffer *httpd_req_output(httpd_req *r)
{
    return r->conn && !r->conn->dead ? r->conn->out : NULL;
}

bool httpd_req_chunked(const httpd_req *r)
{
    return r->chunked && !is_head(r);
}

void httpd_flush(httpd_req *r)
{
    if (r->conn && !r->conn->dead)
        conn_flush(r->conn);
}

/* A reply to a request that never reached a handler (malformed). */
static void queue_error(httpd_conn *c, int code)
{
    char buf[160];
    const char *reason = ckube__http_reason(code);
    int n = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Connection: close\r\nContent-Length: %zu\r\n\r\n%d %s",
                     code, reason, strlen(reason) + 4, code, reason);
    evbuffer_add(c->out, buf, (size_t)n);
    c->close_after = true;
}

/* ---- connections --------------------------------------------------------- */

static void conn_free(httpd_conn *c)
{
    LIST_REMOVE(c, link);
    httpd_req *r = c->cur;
    c->cur = NULL;
    if (r) {
        r->conn = NULL;
        if (r->streaming && r->on_closed) {
            r->on_closed(r, r->cb_arg);
            req_free(r);
        }
        /* otherwise the owner still holds it and frees it by replying */
    }
    req_free(c->parsing);
    event_free(c->rev);
    event_free(c->wev);
    if (c->slot && c->h->cfg.slot_free)
        c->h->cfg.slot_free(c->slot);
    if (c->ssl) {
        /* close_notify, best effort: a client reading to the end of the
         * connection (an HTTP/1.0 stream) learns it was not cut. */
        if (!c->tls_fatal && SSL_is_init_finished(c->ssl))
            SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
        ERR_clear_error();
    }
    close(c->fd);
    evbuffer_free(c->in);
    evbuffer_free(c->out);
    free(c);
}

static void conn_kill(httpd_conn *c)
{
    c->dead = true;
    if (!c->busy)
        conn_free(c);
}

/* The client is not reading its replies: serve no more requests until it
 * does (a pipelining client that never reads would otherwise make the
 * queue grow without bound; Go's server writes each reply before reading
 * the next request, evhttp did too). */
static bool output_full(const httpd_conn *c)
{
    return evbuffer_get_length(c->out) > MAX_PENDING_OUTPUT;
}

/* Dispatches the request the parser completed, if any. */
static void dispatch(httpd_conn *c)
{
    c->ready = false;
    httpd_req *r = c->parsing;
    c->parsing = NULL;
    if (!r)
        return;
    if (c->parser.upgrade)
        c->close_after = true; /* no protocol switch is offered */
    c->cur = r;
    c->h->handler(r, c->h->arg);
}

/* Parses data[0..len) while no request is being served; returns the bytes
 * consumed (the rest waits in `in`). */
static size_t feed(httpd_conn *c, const char *data, size_t len)
{
    size_t done = 0;
    while (done < len && !c->cur && !c->dead && !c->close_after && !output_full(c)) {
        size_t n = http_parser_execute(&c->parser, &parser_settings, data + done, len - done);
        done += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            if (c->ready)
                dispatch(c);
            continue;
        }
        if (e != HPE_OK) {
            if (!c->close_after) /* (a 405 was queued already) */
                queue_error(c, e == HPE_HEADER_OVERFLOW ? 431 : 400);
            CKUBE_V(4, "http: bad request: %s", http_errno_name(e));
            req_free(c->parsing);
            c->parsing = NULL;
            c->close_after = true;
            return len;
        }
        if (n == 0)
            break;
    }
    return done;
}

/* Parses what waits in `in`, as far as the connection may go on. */
static void process_input(httpd_conn *c)
{
    while (!c->cur && !c->dead && !c->close_after && !output_full(c) &&
           evbuffer_get_length(c->in)) {
        size_t len = evbuffer_get_length(c->in);
        const char *p = (const char *)evbuffer_pullup(c->in, (ssize_t)len);
        size_t n = feed(c, p, len);
        evbuffer_drain(c->in, n);
        if (n == 0)
            break;
    }
}

/* After an event: writes what was queued, closes a connection that is
 * done, and resumes reading when the backlog allows. */
static void settle(httpd_conn *c)
{
    if (c->dead)
        return;
    if (!c->wev_armed && evbuffer_get_length(c->out))
        conn_flush(c);
    if (c->dead)
        return;
    if (!c->cur && (c->close_after || c->peer_eof) && evbuffer_get_length(c->out) == 0) {
        conn_kill(c);
        return;
    }
    if (c->read_off && !c->peer_eof && !c->close_after &&
        ((!c->cur && !output_full(c)) || evbuffer_get_length(c->in) < MAX_PENDING_INPUT / 2)) {
        event_add(c->rev, NULL);
        c->read_off = false;
        if (c->ssl) /* records may wait inside OpenSSL already */
            event_active(c->rev, EV_READ, 1);
    }
}

/* The end of every event callback: settle the connection, and free it
 * if it died meanwhile (never earlier: see `busy`). */
static void callback_end(httpd_conn *c)
{
    if (!c->dead)
        settle(c);
    c->busy--;
    if (c->dead)
        conn_free(c);
}

/* Go's answer to plain HTTP on a TLS port (net/http's server). */
static void answer_plain_http(httpd_conn *c)
{
    static const char reply[] = "HTTP/1.0 400 Bad Request\r\n\r\n"
                                "Client sent an HTTP request to an HTTPS server.\n";
    ssize_t n = send(c->fd, reply, sizeof reply - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* best effort: the connection closes either way */
}

static void log_tls_error(httpd_conn *c, const char *what, const char *reason)
{
    if (!ckube_log_v(2, __FILE__))
        return;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[INET6_ADDRSTRLEN + 8] = "?";
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
        char ip[INET6_ADDRSTRLEN] = "";
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
            snprintf(addr, sizeof addr, "%s:%u", ip, ntohs(a->sin_port));
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
            snprintf(addr, sizeof addr, "[%s]:%u", ip, ntohs(a->sin6_port));
        }
    }
    ckube_log_write(CKUBE_LOG_INFO, __FILE__, __LINE__, "http: TLS %s error from %s: %s", what,
                    addr, reason);
}

/* read() through TLS: > 0 bytes, 0 at the end, -1 with errno (EAGAIN:
 * nothing yet, the handshake included). */
static ssize_t tls_read(httpd_conn *c, char *buf, size_t len)
{
    ERR_clear_error(); /* (see tls_flush) */
    int r = SSL_read(c->ssl, buf, (int)len);
    if (r > 0)
        return r;
    int e = SSL_get_error(c->ssl, r);
    int saved = errno;
    switch (e) {
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE: /* a handshake message, or a session ticket */
        c->rd_wants_write = true;
        arm_write(c);
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify */
        return 0;
    case SSL_ERROR_SYSCALL:
        c->tls_fatal = true;
        ERR_clear_error();
        if (saved == 0)
            return 0;
        errno = saved;
        return -1;
    default: {
        c->tls_fatal = true;
        unsigned long err = ERR_peek_last_error();
        if (ERR_GET_LIB(err) == ERR_LIB_SSL &&
            ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            ERR_clear_error();
            return 0; /* a client that closed without close_notify */
        }
        bool plain = ERR_GET_LIB(err) == ERR_LIB_SSL && ERR_GET_REASON(err) == SSL_R_HTTP_REQUEST;
        if (plain)
            answer_plain_http(c);
        log_tls_error(c, SSL_is_init_finished(c->ssl) ? "read" : "handshake",
                      plain ? "client sent an HTTP request to an HTTPS server" : tls_reason());
        ERR_clear_error();
        errno = EPROTO;
        return -1;
    }
    }
}

/* Reads what the socket has (one read, or one TLS record) and serves it. */
static void read_some(httpd_conn *c)
{
    httpd *h = c->h;
    if (c->wr_wants_read) {
        c->wr_wants_read = false;
        conn_flush(c);
        if (c->dead)
            return;
    }
    ssize_t n = c->ssl ? tls_read(c, h->scratch, sizeof h->scratch)
                       : read(c->fd, h->scratch, sizeof h->scratch);
    if (n > 0) {
        struct timeval now;
        event_base_gettimeofday_cached(h->base, &now);
        c->last_active = now.tv_sec;
        if (c->cur || c->close_after || evbuffer_get_length(c->in)) {
            if (!c->close_after) /* (after a close, input is dropped) */
                evbuffer_add(c->in, h->scratch, (size_t)n);
            process_input(c);
        } else {
            size_t used = feed(c, h->scratch, (size_t)n);
            if (used < (size_t)n && !c->close_after)
                evbuffer_add(c->in, h->scratch + used, (size_t)n - used);
        }
        if (!c->dead && (c->cur || output_full(c)) &&
            evbuffer_get_length(c->in) >= MAX_PENDING_INPUT) {
            event_del(c->rev); /* the client sends far ahead: wait */
            c->read_off = true;
        }
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        /* The peer closed (or reset). A streamed reply has lost its
         * reader; a reply still being prepared is written all the same
         * (a client that half-closed reads it), then the connection
         * closes. */
        c->peer_eof = true;
        event_del(c->rev);
        c->read_off = true;
        if (n < 0 || (c->cur && c->cur->streaming))
            c->dead = true;
        else
            process_input(c);
    }
    /* TLS reads ahead: a record already read from the socket is not
     * announced by it again. Only after a read that returned data: the
     * start of a record still incomplete is "pending" too, and waking for
     * it would spin the loop until the rest arrives (a client that never
     * sends it would hold the loop). */
    if (c->ssl && n > 0 && !c->dead && !c->read_off && SSL_has_pending(c->ssl))
        event_active(c->rev, EV_READ, 1);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    httpd_conn *c = arg;
    c->busy++;
    read_some(c);
    callback_end(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    httpd_conn *c = arg;
    c->busy++;
    bool reread = c->rd_wants_write;
    c->rd_wants_write = false;
    if (!c->dead)
        conn_flush(c);
    if (reread && !c->dead && !c->read_off)
        read_some(c);
    if (!c->dead && c->cur && c->cur->want_drained && evbuffer_get_length(c->out) == 0) {
        httpd_req *r = c->cur;
        r->want_drained = false;
        if (r->on_drained)
            r->on_drained(r, r->cb_arg);
    }
    if (!c->dead && !c->cur)
        process_input(c);
    callback_end(c);
}

int httpd_adopt(httpd *h, int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        close(fd);
        return -1;
    }
    httpd_conn *c = xcalloc(1, sizeof *c);
    if (c) {
        c->h = h;
        c->fd = fd;
        c->in = evbuffer_new();
        c->out = evbuffer_new();
        c->rev = event_new(h->base, fd, EV_READ | EV_PERSIST, on_read, c);
        c->wev = event_new(h->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    }
    if (!c || !c->in || !c->out || !c->rev || !c->wev || event_add(c->rev, NULL) != 0) {
        CKUBE_ERROR("http: out of memory accepting a connection");
        if (c) {
            if (c->rev)
                event_free(c->rev);
            if (c->wev)
                event_free(c->wev);
            if (c->in)
                evbuffer_free(c->in);
            if (c->out)
                evbuffer_free(c->out);
            free(c);
        }
        close(fd);
        return -1;
    }
    if (h->cfg.tls && !(c->ssl = httpd_tls_accept(h->cfg.tls, fd))) {
        CKUBE_ERROR("http: cannot start TLS on an accepted connection: %s", tls_reason());
        event_free(c->rev);
        event_free(c->wev);
        evbuffer_free(c->in);
        evbuffer_free(c->out);
        free(c);
        close(fd);
        return -1;
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->last_active = time(NULL);
    c->header_deadline = c->last_active + (time_t)h->cfg.header_timeout;
    LIST_INSERT_HEAD(&h->conns, c, link);
    return 0;
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    (void)what;
    httpd *h = arg;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                CKUBE_V(2, "http: accept: %s", strerror(errno));
            return;
        }
        httpd_adopt(h, fd);
    }
}

/* Closes connections idle (no request in service) for longer than the
 * timeout, as evhttp and Go's IdleTimeout do, and those whose request
 * headers (or TLS handshake) are late, as Go's ReadHeaderTimeout. */
static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    httpd *h = arg;
    time_t now = time(NULL);
    httpd_conn *c = LIST_FIRST(&h->conns), *next;
    for (; c; c = next) {
        next = LIST_NEXT(c, link);
        if (c->cur || c->busy)
            continue;
        if (now - c->last_active > (time_t)h->cfg.idle_timeout ||
            (c->header_deadline && now > c->header_deadline)) {
            CKUBE_V(4, "http: closing a connection: %s",
                    c->header_deadline && now > c->header_deadline ? "request headers too late"
                                                                   : "idle");
            conn_kill(c);
        }
    }
}

static void set_header_limit(void)
{
    http_parser_set_max_header_size(MAX_HEADER_BYTES);
}

httpd *httpd_new(struct event_base *base, int listen_fd, const httpd_config *cfg,
                 httpd_handler handler, void *arg)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, set_header_limit); /* process-wide in http_parser */
    httpd *h = xcalloc(1, sizeof *h);
    h->base = base;
    h->lfd = listen_fd;
    h->handler = handler;
    h->arg = arg;
    h->cfg = *cfg;
    if (!h->cfg.idle_timeout)
        h->cfg.idle_timeout = 3600;
    if (!h->cfg.header_timeout)
        h->cfg.header_timeout = 32;
    LIST_INIT(&h->conns);
    /* Checked every SWEEP_INTERVAL seconds, or as often as the shorter
     * timeout: a connection goes at most one interval late. */
    unsigned every = SWEEP_INTERVAL;
    if (h->cfg.idle_timeout < every)
        every = h->cfg.idle_timeout;
    if (h->cfg.header_timeout < every)
        every = h->cfg.header_timeout;
    struct timeval iv = {every, 0};
    if (listen_fd >= 0 &&
        (!(h->lev = event_new(base, listen_fd, EV_READ | EV_PERSIST, on_accept, h)) ||
         event_add(h->lev, NULL) != 0))
        goto fail;
    if (!(h->sweep = event_new(base, -1, EV_PERSIST, on_sweep, h)) || event_add(h->sweep, &iv) != 0)
        goto fail;
    return h;
fail:
    if (h->lev)
        event_free(h->lev);
    if (h->sweep)
        event_free(h->sweep);
    free(h);
    return NULL;
}

void httpd_stop_accepting(httpd *h)
{
    if (h->lev) {
        event_free(h->lev);
        h->lev = NULL;
    }
    if (h->lfd >= 0) {
        close(h->lfd);
        h->lfd = -1;
    }
}

void httpd_free(httpd *h)
{
    if (!h)
        return;
    httpd_stop_accepting(h);
    event_free(h->sweep);
    httpd_conn *c;
    while ((c = LIST_FIRST(&h->conns))) {
        c->busy = 0;
        conn_free(c);
    }
    free(h);
}
