/* The server's asynchronous HTTPS client (outbound.h): HTTP/1.1 over
 * libevent's OpenSSL bufferevents, answers read with http_parser (the
 * parser httpd uses for requests), connections pooled per target.
 *
 * Why not evhttp's client: it reconnects a closed connection by reusing
 * its bufferevent, which an OpenSSL bufferevent cannot do (its SSL object
 * is spent), and it offers no way to tell "the peer closed an idle
 * connection" from a failed call, which the retry below needs. A client
 * exchange is small: a request written in one go, an answer parsed as it
 * arrives.
 *
 * Lifetimes: a call (outbound_call) lives from outbound_post until its
 * callback returns or it is cancelled. A connection (conn) lives in the
 * pool's list of all connections until it is closed; it serves at most
 * one call at a time and sits on its target's idle list in between. */
#include "apiserver/outbound/outbound.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <ctype.h>
#include <errno.h>
#include <http_parser.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/xalloc.h"

#define IDLE_TIMEOUT_S 90              /* Go's http.Transport IdleConnTimeout */
#define MAX_ANSWER (16u * 1024 * 1024) /* an answer larger than this fails the call */
#define MAX_IDLE_PER_TARGET 256 /* idle connections kept per target: as many as a burst
                                  * of a loop's writes uses, so none pays a handshake */

typedef struct conn conn;
typedef struct target target;

/* One target's TLS context and idle connections. */
struct target {
    char *key; /* target_key: host, port, server name, insecure, the PEMs */
    size_t key_len;
    SSL_CTX *ctx;
    char *ctx_error; /* the CA bundle could not be read: every call fails so */
    TAILQ_HEAD(, conn) idle;
    size_t nidle;
    LIST_ENTRY(target) link;
};

struct conn {
    outbound *o;
    target *t;
    struct bufferevent *bev; /* owns the SSL and the socket */
    SSL *ssl;                /* borrowed from bev */
    outbound_call *call;     /* the call it serves; NULL while idle */
    bool connected;          /* the TLS handshake is done */
    bool reused;             /* it served a call before this one */
    bool idle;               /* on its target's idle list */
    struct event *idle_timer;
    TAILQ_ENTRY(conn) idle_link;
    LIST_ENTRY(conn) all_link;
};

struct outbound_call {
    outbound *o;
    target *t;
    conn *c;
    /* the request */
    char *host, *server_name, *authority, *path;
    char *method;
    char *head_lines; /* the caller's header lines, "Name: value\r\n" each */
    int port;
    char *body;
    size_t len;
    bool send_length; /* Content-Length: 0 too */
    char *url;        /* https://AUTHORITY/PATH, for errors */
    char op[16];      /* Go's url.Error Op: "Post", "Get", ... */
    bool retried;
    /* the answer */
    http_parser parser;
    struct evbuffer *answer; /* whole answers */
    char *answer_ctype;
    char **hnames, **hvalues; /* its headers as they arrive */
    size_t nh;
    bool in_value; /* the last header piece was a value */
    bool got_bytes;
    bool head_sent; /* streamed: head() ran */
    bool complete;
    /* ending */
    struct event *ev; /* the deadline, and a deferred failure */
    char *pending_error;
    outbound_cb cb;                       /* whole answers */
    const outbound_stream_callbacks *scb; /* streamed ones */
    void *arg;
    LIST_ENTRY(outbound_call) link; /* the outbound's calls */
};

struct outbound {
    struct event_base *base;
    struct evdns_base *dns; /* made when a DNS name is first dialled */
    LIST_HEAD(, target) targets;
    LIST_HEAD(, conn) conns;
    LIST_HEAD(, outbound_call) calls;
    size_t nconns;
    unsigned long handshakes;
};

static const http_parser_settings answer_settings;

/* ---- targets ----------------------------------------------------------------- */

/* The client certificate (and its chain) and key of t, from PEM. */
static bool use_client_cert(SSL_CTX *ctx, const outbound_target *t)
{
    BIO *b = BIO_new_mem_buf(t->client_cert_pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    bool ok = x && SSL_CTX_use_certificate(ctx, x) == 1;
    X509_free(x);
    while (ok && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add_extra_chain_cert(ctx, x) != 1) /* takes x */
            X509_free(x);
    BIO_free(b);
    b = BIO_new_mem_buf(t->client_key_pem, -1);
    EVP_PKEY *k = ok && b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(k);
    BIO_free(b);
    ERR_clear_error();
    return ok;
}

/* The system's roots, or the bundle's certificates (PEM). NULL with *err
 * (malloc'd) when the bundle holds none, in the words Go's x509 pool
 * uses for what kube-apiserver reports. */
static SSL_CTX *make_ctx(const outbound_target *t, char **err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        *err = xstrdup("tls: cannot make a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (t->client_cert_pem && t->client_key_pem && !use_client_cert(ctx, t)) {
        SSL_CTX_free(ctx);
        *err = xstrdup("tls: failed to find any PEM data in certificate input");
        return NULL;
    }
    if (t->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return ctx;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (!t->ca_pem || !t->ca_len) {
        SSL_CTX_set_default_verify_paths(ctx);
        return ctx;
    }
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    BIO *bio = BIO_new_mem_buf(t->ca_pem, (int)t->ca_len);
    int n = 0;
    X509 *x;
    while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        if (X509_STORE_add_cert(store, x) == 1)
            n++;
        X509_free(x);
    }
    BIO_free(bio);
    ERR_clear_error();
    if (!n) {
        SSL_CTX_free(ctx);
        *err = xstrdup("unable to load root certificates: unable to parse bytes as PEM block");
        return NULL;
    }
    return ctx;
}

/* The key of a target: every field that makes its connections
 * different, the PEM texts in full (compared, not hashed: OpenSSL 3's
 * digest fetch per call cost more than the webhook call's TLS). */
static char *target_key(const outbound_target *t, size_t *len)
{
    char head[1100];
    int n = snprintf(head, sizeof head, "%s|%d|%s|%d|%zu|", t->host, t->port,
                     t->server_name ? t->server_name : "", t->insecure, t->ca_len);
    size_t hn = n < 0 ? 0 : (size_t)n < sizeof head ? (size_t)n : sizeof head - 1;
    size_t cl = t->client_cert_pem ? strlen(t->client_cert_pem) : 0;
    size_t kl = t->client_key_pem ? strlen(t->client_key_pem) : 0;
    *len = hn + t->ca_len + 1 + cl + 1 + kl;
    char *k = xmalloc(*len + 1);
    char *w = k;
    memcpy(w, head, hn);
    w += hn;
    if (t->ca_len)
        memcpy(w, t->ca_pem, t->ca_len);
    w += t->ca_len;
    *w++ = '|';
    if (cl)
        memcpy(w, t->client_cert_pem, cl);
    w += cl;
    *w++ = '|';
    if (kl)
        memcpy(w, t->client_key_pem, kl);
    w += kl;
    *w = 0;
    return k;
}

static target *target_get(outbound *o, const outbound_target *t)
{
    size_t len;
    char *key = target_key(t, &len);
    target *tg;
    LIST_FOREACH(tg, &o->targets, link)
    {
        if (tg->key_len == len && !memcmp(tg->key, key, len)) {
            free(key);
            return tg;
        }
    }
    tg = xcalloc(1, sizeof *tg);
    tg->key = key;
    tg->key_len = len;
    TAILQ_INIT(&tg->idle);
    tg->ctx = make_ctx(t, &tg->ctx_error);
    LIST_INSERT_HEAD(&o->targets, tg, link);
    return tg;
}

/* ---- connections ------------------------------------------------------------- */

static void conn_close(conn *c)
{
    if (c->call)
        c->call->c = NULL;
    if (c->idle) {
        TAILQ_REMOVE(&c->t->idle, c, idle_link);
        c->t->nidle--;
    }
    if (c->idle_timer)
        event_free(c->idle_timer);
    LIST_REMOVE(c, all_link);
    c->o->nconns--;
    if (c->bev)
        bufferevent_free(c->bev);
    free(c);
}

static bool is_ip(const char *host)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static void conn_read(struct bufferevent *bev, void *arg);
static void conn_event(struct bufferevent *bev, short what, void *arg);

/* A request and its answer are each written as a few TLS records: with
 * Nagle's algorithm on, the second waits for the peer's delayed ACK of
 * the first (40 ms on Linux), per direction. Go sets TCP_NODELAY on
 * every connection; so do we. */
static void nodelay(conn *c)
{
    int fd = (int)bufferevent_getfd(c->bev);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A new connection to the call's target, dialling; NULL with the call
 * failed (deferred) when it cannot even start. */
static conn *conn_open(outbound_call *call, char **err)
{
    outbound *o = call->o;
    target *t = call->t;
    SSL *ssl = SSL_new(t->ctx);
    if (!ssl) {
        *err = xstrdup("tls: cannot make a TLS connection");
        return NULL;
    }
    const char *name = call->server_name;
    if (!is_ip(name)) {
        SSL_set_tlsext_host_name(ssl, name);
        X509_VERIFY_PARAM_set1_host(SSL_get0_param(ssl), name, 0);
    } else {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
    }
    struct bufferevent *bev =
        bufferevent_openssl_socket_new(o->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                       BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (!bev) {
        SSL_free(ssl);
        *err = xstrdup("tls: cannot make a TLS connection");
        return NULL;
    }
    conn *c = xcalloc(1, sizeof *c);
    c->o = o;
    c->t = t;
    c->bev = bev;
    c->ssl = ssl;
    LIST_INSERT_HEAD(&o->conns, c, all_link);
    o->nconns++;
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    bufferevent_setcb(bev, conn_read, NULL, conn_event, c);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    struct evdns_base *dns = NULL;
    if (!is_ip(call->host)) {
        if (!o->dns) {
            o->dns = evdns_base_new(o->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                                 EVDNS_BASE_DISABLE_WHEN_INACTIVE);
            if (o->dns)
                evdns_base_load_hosts(o->dns, NULL);
        }
        dns = o->dns;
    }
    int rc = bufferevent_socket_connect_hostname(bev, dns, AF_UNSPEC, call->host, call->port);
    if (rc == 0)
        nodelay(c); /* the handshake's records too (an IP: the socket exists now) */
    if (rc < 0) {
        /* The failure was reported through conn_event when it could be;
         * otherwise say so here. */
        if (!*err && asprintf(err, "dial tcp %s:%d: %s", call->host, call->port,
                              strerror(errno ? errno : ECONNREFUSED)) < 0)
            abort();
        c->bev = NULL;
        bufferevent_free(bev);
        LIST_REMOVE(c, all_link);
        o->nconns--;
        free(c);
        return NULL;
    }
    return c;
}

/* ---- calls ------------------------------------------------------------------- */

static void call_free(outbound_call *call)
{
    LIST_REMOVE(call, link);
    if (call->ev)
        event_free(call->ev);
    free(call->host);
    free(call->server_name);
    free(call->authority);
    free(call->path);
    free(call->method);
    free(call->head_lines);
    free(call->body);
    for (size_t i = 0; i < call->nh; i++) {
        free(call->hnames[i]);
        free(call->hvalues[i]);
    }
    free(call->hnames);
    free(call->hvalues);
    free(call->url);
    free(call->pending_error);
    free(call->answer_ctype);
    if (call->answer)
        evbuffer_free(call->answer);
    free(call);
}

/* Ends the call with an answer (error NULL) or Go's words for what went
 * wrong (`Post "URL": ERROR`), and frees it. */
static void call_end(outbound_call *call, const char *error)
{
    char *msg = NULL;
    if (error && asprintf(&msg, "%s \"%s\": %s", call->op, call->url, error) < 0)
        abort();
    void *arg = call->arg;
    if (call->c) {
        call->c->call = NULL;
        call->c = NULL;
    }
    if (call->scb) {
        const outbound_stream_callbacks *scb = call->scb;
        call_free(call);
        scb->end(arg, msg);
        free(msg);
        return;
    }
    outbound_result r = {.status = error ? 0 : (int)call->parser.status_code,
                         .error = msg,
                         .body = call->answer,
                         .content_type = call->answer_ctype ? call->answer_ctype : ""};
    outbound_cb cb = call->cb;
    cb(arg, &r);
    free(msg);
    call_free(call);
}

static void conn_idle_event(struct bufferevent *bev, short what, void *arg);
static void conn_idle_read(struct bufferevent *bev, void *arg);
static void conn_idle_timeout(evutil_socket_t fd, short what, void *arg);

/* The call on `c` is answered: the connection goes idle (or closes, when
 * the answer said so) and the call ends. */
static void call_answered(outbound_call *call)
{
    conn *c = call->c;
    bool keep = http_should_keep_alive(&call->parser) && call->t->nidle < MAX_IDLE_PER_TARGET;
    c->call = NULL;
    call->c = NULL;
    if (keep) {
        c->reused = true;
        bufferevent_setcb(c->bev, conn_idle_read, NULL, conn_idle_event, c);
        if (!c->idle_timer)
            c->idle_timer = evtimer_new(c->o->base, conn_idle_timeout, c);
        struct timeval tv = {IDLE_TIMEOUT_S, 0};
        evtimer_add(c->idle_timer, &tv);
        TAILQ_INSERT_HEAD(&c->t->idle, c, idle_link);
        c->t->nidle++;
        c->idle = true;
    } else {
        conn_close(c);
    }
    call_end(call, NULL);
}

static void call_send(outbound_call *call);

/* The connection failed under the call: the call fails, or starts again
 * once on a new connection when a reused one had been closed by the peer
 * before anything came back. */
static void call_conn_failed(outbound_call *call, const char *error)
{
    conn *c = call->c;
    bool retry = c && c->reused && !call->got_bytes && !call->retried;
    if (c)
        conn_close(c);
    call->c = NULL;
    if (retry) {
        call->retried = true;
        call_send(call);
        return;
    }
    call_end(call, error);
}

/* Go's words for a failed connection. */
static void dial_error(outbound_call *call, conn *c, char *buf, size_t n)
{
    int dns_err = bufferevent_socket_get_dns_error(c->bev);
    if (dns_err) {
        snprintf(buf, n, "dial tcp: lookup %s: no such host", call->host);
        return;
    }
    int e = EVUTIL_SOCKET_ERROR();
    if (e != ECONNREFUSED && e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH &&
        e != EADDRNOTAVAIL)
        e = ECONNREFUSED; /* the errno is gone with deferred callbacks: the usual cause */
    const char *h = call->host;
    bool v6 = strchr(h, ':') != NULL;
    snprintf(buf, n, "dial tcp %s%s%s:%d: connect: %s", v6 ? "[" : "", h, v6 ? "]" : "", call->port,
             e ? evutil_socket_error_to_string(e) : "connection refused");
    /* Go writes errno texts in lower case ("connection refused"). */
    char *colon = strstr(buf, "connect: ");
    if (colon)
        colon[9] = (char)(colon[9] >= 'A' && colon[9] <= 'Z' ? colon[9] + 32 : colon[9]);
}

/* Go's words for a failed handshake: the certificate's fault when
 * verification failed, else OpenSSL's reason. */
static void tls_error(conn *c, const char *name, char *buf, size_t n)
{
    long v = c->ssl ? SSL_get_verify_result(c->ssl) : X509_V_OK;
    unsigned long e = bufferevent_get_openssl_error(c->bev);
    switch (v) {
    case X509_V_OK:
        break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        snprintf(buf, n,
                 "tls: failed to verify certificate: x509: certificate signed by unknown "
                 "authority");
        return;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        snprintf(buf, n, "tls: failed to verify certificate: x509: certificate is not valid for %s",
                 name);
        return;
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
        snprintf(buf, n,
                 "tls: failed to verify certificate: x509: certificate has expired or is "
                 "not yet valid");
        return;
    default:
        snprintf(buf, n, "tls: failed to verify certificate: x509: %s",
                 X509_verify_cert_error_string(v));
        return;
    }
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, n, "remote error: tls: %s", r ? r : "handshake failure");
    ERR_clear_error();
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    conn *c = arg;
    outbound_call *call = c->call;
    if (what & BEV_EVENT_CONNECTED) {
        nodelay(c);
        c->connected = true;
        c->o->handshakes++;
        return;
    }
    if (!call) { /* nothing waits on it */
        conn_close(c);
        return;
    }
    char buf[512];
    if (!c->connected) {
        /* Nothing written: the TCP connection never came up (the
         * ClientHello is the first thing sent on it). */
        BIO *wbio = SSL_get_wbio(c->ssl);
        bool dial =
            bufferevent_socket_get_dns_error(c->bev) || !wbio || BIO_number_written(wbio) == 0;
        if (dial)
            dial_error(call, c, buf, sizeof buf);
        else
            tls_error(c, call->server_name, buf, sizeof buf);
        call_conn_failed(call, buf);
        return;
    }
    /* The peer closed, or the connection broke, while the call waited. An
     * answer that runs to the end of the connection ends here. */
    if (call->got_bytes && !call->complete)
        http_parser_execute(&call->parser, &answer_settings, NULL, 0);
    if (call->complete) {
        call_answered(call);
        return;
    }
    call_conn_failed(call, call->got_bytes ? "unexpected EOF" : "EOF");
}

static void conn_read(struct bufferevent *bev, void *arg)
{
    conn *c = arg;
    outbound_call *call = c->call;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (!call) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    while (evbuffer_get_length(in) && !call->complete) {
        struct evbuffer_iovec v;
        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        call->got_bytes = true;
        size_t used = http_parser_execute(&call->parser, &answer_settings, v.iov_base, v.iov_len);
        if (HTTP_PARSER_ERRNO(&call->parser) != HPE_OK && !call->complete) {
            conn_close(c);
            call->c = NULL;
            call_end(call, HTTP_PARSER_ERRNO(&call->parser) == HPE_CB_body
                               ? "http: response body too large"
                               : "net/http: HTTP/1.x transport connection broken: malformed "
                                 "HTTP response");
            return;
        }
        evbuffer_drain(in, used);
    }
    if (call->complete) {
        evbuffer_drain(in, evbuffer_get_length(in)); /* nothing may follow an answer */
        call_answered(call);
    }
}

/* ---- idle connections ------------------------------------------------------- */

static void conn_idle_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_close(arg); /* bytes nobody asked for: the connection is not to be trusted */
}

static void conn_idle_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    (void)what;
    conn_close(arg);
}

static void conn_idle_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_close(arg);
}

/* ---- the answer ------------------------------------------------------------- */

static int on_message_begin(http_parser *p)
{
    outbound_call *call = p->data;
    evbuffer_drain(call->answer, evbuffer_get_length(call->answer));
    for (size_t i = 0; i < call->nh; i++) { /* after a 100 Continue */
        free(call->hnames[i]);
        free(call->hvalues[i]);
    }
    call->nh = 0;
    free(call->answer_ctype);
    call->answer_ctype = NULL;
    return 0;
}

/* Appends at[0..len) to *s (header names and values may come in pieces). */
static void append(char **s, const char *at, size_t len)
{
    size_t have = *s ? strlen(*s) : 0;
    char *n = xrealloc(*s, have + len + 1);
    memcpy(n + have, at, len);
    n[have + len] = 0;
    *s = n;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    outbound_call *call = p->data;
    if (!call->nh || call->in_value) {
        if (call->nh >= 256)
            return -1; /* no answer needs more */
        call->hnames = xrealloc(call->hnames, (call->nh + 1) * sizeof *call->hnames);
        call->hvalues = xrealloc(call->hvalues, (call->nh + 1) * sizeof *call->hvalues);
        call->hnames[call->nh] = NULL;
        call->hvalues[call->nh] = xstrdup("");
        call->nh++;
        call->in_value = false;
    }
    append(&call->hnames[call->nh - 1], at, len);
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    outbound_call *call = p->data;
    if (!call->nh)
        return -1;
    append(&call->hvalues[call->nh - 1], at, len);
    call->in_value = true;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    outbound_call *call = p->data;
    for (size_t i = 0; i < call->nh && !call->answer_ctype; i++)
        if (!strcasecmp(call->hnames[i], "Content-Type"))
            call->answer_ctype = xstrdup(call->hvalues[i]);
    if (call->scb && p->status_code != 100) {
        outbound_header h[256];
        for (size_t i = 0; i < call->nh; i++)
            h[i] = (outbound_header){call->hnames[i], call->hvalues[i]};
        call->head_sent = true;
        call->scb->head(call->arg, (int)p->status_code, h, call->nh);
    }
    return !strcmp(call->method, "HEAD") ? 1 : 0; /* a HEAD answer has no body */
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    outbound_call *call = p->data;
    if (call->scb) {
        call->scb->data(call->arg, at, len);
        return 0;
    }
    if (evbuffer_get_length(call->answer) + len > MAX_ANSWER)
        return -1;
    evbuffer_add(call->answer, at, len);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    outbound_call *call = p->data;
    if (p->status_code == 100) /* 100 Continue: the real answer follows */
        return 0;
    call->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings answer_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- sending ----------------------------------------------------------------- */

/* Writes the call's request on a connection: an idle one of its target
 * when there is one, else a new one. */
static void call_send(outbound_call *call)
{
    target *t = call->t;
    conn *c = TAILQ_FIRST(&t->idle);
    if (c) {
        TAILQ_REMOVE(&t->idle, c, idle_link);
        t->nidle--;
        c->idle = false;
        evtimer_del(c->idle_timer);
        bufferevent_setcb(c->bev, conn_read, NULL, conn_event, c);
    } else {
        char *err = NULL;
        c = conn_open(call, &err);
        if (!c) {
            call->pending_error = err;
            event_active(call->ev, EV_READ, 0);
            return;
        }
    }
    c->call = call;
    call->c = c;
    call->got_bytes = false;
    call->complete = false;
    http_parser_init(&call->parser, HTTP_RESPONSE);
    call->parser.data = call;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n%s", call->method, call->path,
                        call->authority, call->head_lines);
    if (call->len || call->send_length)
        evbuffer_add_printf(out, "Content-Length: %zu\r\n", call->len);
    evbuffer_add(out, "\r\n", 2);
    evbuffer_add(out, call->body, call->len);
}

/* The call's event: its deadline, or a failure found while starting. */
static void call_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    outbound_call *call = arg;
    if (call->pending_error) {
        char *e = call->pending_error;
        call->pending_error = NULL;
        call_end(call, e);
        free(e);
        return;
    }
    (void)what;
    if (call->c) {
        conn_close(call->c);
        call->c = NULL;
    }
    call_end(call, "context deadline exceeded");
}

/* Go's url.Error Op for a method: "Post", "Get", ... */
static void op_of(char *op, size_t n, const char *method)
{
    size_t i = 0;
    for (; method[i] && i + 1 < n; i++)
        op[i] = (char)(i ? tolower((unsigned char)method[i]) : method[i]);
    op[i] = 0;
}

static bool has_header(const outbound_request *rq, const char *name)
{
    for (size_t i = 0; i < rq->nheaders; i++)
        if (!strcasecmp(rq->headers[i].name, name))
            return true;
    return false;
}

static outbound_call *call_start(outbound *o, const outbound_target *t, const outbound_request *rq,
                                 outbound_cb cb, const outbound_stream_callbacks *scb, void *arg)
{
    outbound_call *call = xcalloc(1, sizeof *call);
    call->o = o;
    call->cb = cb;
    call->scb = scb;
    call->arg = arg;
    call->host = xstrdup(t->host);
    call->port = t->port;
    call->server_name = xstrdup(t->server_name ? t->server_name : t->host);
    call->method = xstrdup(rq->method ? rq->method : "POST");
    op_of(call->op, sizeof call->op, call->method);
    bool v6 = strchr(call->server_name, ':') != NULL;
    if (asprintf(&call->authority, "%s%s%s:%d", v6 ? "[" : "", call->server_name, v6 ? "]" : "",
                 t->url_port ? t->url_port : t->port) < 0 ||
        asprintf(&call->url, "https://%s%s", call->authority, rq->path) < 0)
        abort();
    call->path = xstrdup(rq->path);
    struct evbuffer *lines = evbuffer_new();
    if (!has_header(rq, "User-Agent"))
        evbuffer_add_printf(lines, "User-Agent: ckube-apiserver\r\n");
    for (size_t i = 0; i < rq->nheaders; i++)
        evbuffer_add_printf(lines, "%s: %s\r\n", rq->headers[i].name, rq->headers[i].value);
    size_t n = evbuffer_get_length(lines);
    call->head_lines = xmalloc(n + 1);
    evbuffer_remove(lines, call->head_lines, n);
    call->head_lines[n] = 0;
    evbuffer_free(lines);
    call->send_length = !strcmp(call->method, "POST") || !strcmp(call->method, "PUT") ||
                        !strcmp(call->method, "PATCH");
    call->body = xmalloc(rq->len ? rq->len : 1);
    if (rq->len)
        memcpy(call->body, rq->body, rq->len);
    call->len = rq->len;
    call->answer = evbuffer_new();
    call->ev = event_new(o->base, -1, 0, call_event, call);
    call->t = target_get(o, t);
    LIST_INSERT_HEAD(&o->calls, call, link);
    if (rq->timeout_ms) {
        struct timeval tv = {rq->timeout_ms / 1000, (rq->timeout_ms % 1000) * 1000};
        evtimer_add(call->ev, &tv);
    }
    if (call->t->ctx_error) {
        call->pending_error = xstrdup(call->t->ctx_error);
        event_active(call->ev, EV_READ, 0);
        return call;
    }
    call_send(call);
    return call;
}

outbound_call *outbound_post(outbound *o, const outbound_target *t, const char *path,
                             const char *content_type, const void *body, size_t len,
                             unsigned timeout_ms, outbound_cb cb, void *arg)
{
    outbound_header h[2] = {{"Content-Type", content_type}, {"Accept", "application/json, */*"}};
    outbound_request rq = {.method = "POST",
                           .path = path,
                           .headers = h,
                           .nheaders = 2,
                           .body = body,
                           .len = len,
                           .timeout_ms = timeout_ms};
    return call_start(o, t, &rq, cb, NULL, arg);
}

outbound_call *outbound_send(outbound *o, const outbound_target *t, const outbound_request *rq,
                             outbound_cb cb, void *arg)
{
    return call_start(o, t, rq, cb, NULL, arg);
}

outbound_call *outbound_stream(outbound *o, const outbound_target *t, const outbound_request *rq,
                               const outbound_stream_callbacks *cb, void *arg)
{
    return call_start(o, t, rq, NULL, cb, arg);
}

void outbound_pause(outbound_call *call, bool paused)
{
    if (!call->c || !call->c->bev)
        return;
    if (paused)
        bufferevent_disable(call->c->bev, EV_READ);
    else
        bufferevent_enable(call->c->bev, EV_READ);
}

void outbound_cancel(outbound_call *call)
{
    if (call->c)
        conn_close(call->c);
    call->c = NULL;
    call_free(call);
}

outbound *outbound_new(struct event_base *base)
{
    outbound *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->base = base;
    LIST_INIT(&o->targets);
    LIST_INIT(&o->conns);
    LIST_INIT(&o->calls);
    return o;
}

void outbound_free(outbound *o)
{
    if (!o)
        return;
    outbound_call *call;
    while ((call = LIST_FIRST(&o->calls)) != NULL)
        outbound_cancel(call);
    conn *c;
    while ((c = LIST_FIRST(&o->conns)) != NULL)
        conn_close(c);
    target *t;
    while ((t = LIST_FIRST(&o->targets)) != NULL) {
        LIST_REMOVE(t, link);
        if (t->ctx)
            SSL_CTX_free(t->ctx);
        free(t->ctx_error);
        free(t->key);
        free(t);
    }
    if (o->dns)
        evdns_base_free(o->dns, 0);
    free(o);
}

struct event_base *outbound_base(const outbound *o)
{
    return o->base;
}

unsigned long outbound_handshakes(const outbound *o)
{
    return o->handshakes;
}

size_t outbound_open_connections(const outbound *o)
{
    return o->nconns;
}
