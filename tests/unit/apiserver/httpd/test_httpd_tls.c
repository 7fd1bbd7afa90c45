/* Tests for TLS in the server's HTTP/1.1 layer (src/apiserver/httpd/httpd.c
 * and tls.c): an OpenSSL client over a loopback socket to an httpd whose
 * loop this thread turns. The client is non-blocking and turns the loop
 * whenever OpenSSL wants the socket, so both ends progress in one thread:
 * each case controls exactly what is sent and when, and no wait is longer
 * than a millisecond poll (every wait is bounded by a deadline).
 *
 * The certificates come from apiserver/pki: "A" serves and is the client
 * CA; "B" is another cluster whose admin certificate the server must not
 * trust.
 *
 * Client and server share this thread's OpenSSL error queue, which
 * SSL_get_error() reads: the client leaves it empty after each of its
 * calls, so that nothing it does is taken for the server's failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "apiserver/httpd/httpd.h"
#include "apiserver/httpd/tls.h"
#include "apiserver/pki/pki.h"
#include "util/rotate_util.h"

#define WAIT_SECS 10.0 /* a generous bound for anything that should be quick */
#define TURN_LIMIT 2   /* seconds one non-blocking turn of the loop may take */
#define MAX_CLIENTS 16

/* ---- certificates (made once for the group) ------------------------------ */

static struct {
    char root[512]; /* a temporary directory, removed at the end */
    pki_files a, b; /* two unrelated clusters */
    httpd_tls *tls; /* serving A's certificate, trusting A's CA for clients */
} pk;

static void make_pki(const char *sub, const char *const *sans, size_t nsans, pki_files *out)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", pk.root, sub);
    pki_options o = {.dir = dir, .sans = sans, .nsans = nsans};
    char *err = NULL;
    if (pki_ensure(&o, out, &err) != 0)
        fail_msg("pki_ensure %s: %s", dir, err ? err : "?");
}

static const char *const local_sans[] = {"127.0.0.1", "localhost"};

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* as the server does (httpd.h) */
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(pk.root, sizeof pk.root, "%s/httpd-tls-XXXXXX", tmp);
    if (!mkdtemp(pk.root))
        return -1;
    make_pki("a", local_sans, 2, &pk.a);
    make_pki("b", local_sans, 2, &pk.b);
    httpd_tls_files files = {
        .cert = pk.a.serving_crt, .key = pk.a.serving_key, .client_ca = {pk.a.ca_crt, NULL}};
    char *err = NULL;
    pk.tls = httpd_tls_new(&files, &err);
    if (!pk.tls) {
        fprintf(stderr, "httpd_tls_new: %s\n", err ? err : "?");
        free(err);
        return -1;
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    httpd_tls_free(pk.tls);
    if (pk.root[0])
        nftw(pk.root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- the server --------------------------------------------------------- */

typedef struct tclient tclient;

typedef struct fixture {
    struct event_base *base;
    struct event *watchdog; /* breaks a turn of the loop that does not end */
    bool stuck;             /* it did */
    httpd *h;
    httpd_tls *own_tls; /* a test's own configuration, freed after the httpd */
    int port;
    httpd_req *streaming; /* a streamed reply in progress */
    int closed_calls, drained_calls, handled;
    /* What the handler saw of the last request's connection. */
    struct {
        SSL *ssl;
        bool peer;        /* a client certificate */
        long verify;      /* its verification */
        char cn[128];     /* its subject's CN */
        int fd;           /* httpd_req_fd */
        bool has_output;  /* httpd_req_output != NULL */
        bool body_intact; /* /sum: the body is the expected pattern */
    } seen;
    tclient *clients[MAX_CLIENTS]; /* open, freed by the teardown if a test fails */
} fixture;

/* The bytes of every large body: not a repetition of a short string, so
 * a record lost, doubled or reordered shows. */
static char pattern_at(size_t i)
{
    return (char)('a' + (i * 7 + i / 1021) % 26);
}

static void fill_pattern(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern_at(i);
}

static bool is_pattern(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern_at(i))
            return false;
    return true;
}

static void on_closed(httpd_req *r, void *arg)
{
    (void)r;
    fixture *f = arg;
    f->closed_calls++;
    f->streaming = NULL;
}

static void on_drained(httpd_req *r, void *arg)
{
    (void)r;
    fixture *f = arg;
    f->drained_calls++;
}

static void reply_text(httpd_req *r, int code, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, text, strlen(text));
    httpd_send_reply(r, code, b);
    evbuffer_free(b);
}

static void handler(httpd_req *r, void *arg)
{
    fixture *f = arg;
    f->handled++;
    const char *t = httpd_req_target(r);
    SSL *ssl = httpd_req_ssl(r);
    memset(&f->seen, 0, sizeof f->seen);
    f->seen.ssl = ssl;
    f->seen.fd = httpd_req_fd(r);
    f->seen.has_output = httpd_req_output(r) != NULL;
    X509 *peer = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    if (peer) {
        f->seen.peer = true;
        f->seen.verify = SSL_get_verify_result(ssl);
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, f->seen.cn,
                                  sizeof f->seen.cn);
    }
    if (!strcmp(t, "/stream")) {
        f->streaming = r;
        httpd_send_start(r, 200, on_closed, on_drained, f);
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "{\"a\":1}\n");
        httpd_send_chunk(r, b);
        evbuffer_free(b);
        httpd_notify_drained(r);
        return;
    }
    if (!strncmp(t, "/big?n=", 7)) {
        if (strstr(t, "&stale")) {
            /* As a handler may leave it: a PEM parse that failed, its
             * error still queued ("no start line"). */
            BIO *none = BIO_new(BIO_s_mem());
            X509 *x = PEM_read_bio_X509(none, NULL, NULL, NULL);
            X509_free(x);
            BIO_free(none);
            assert_int_not_equal(ERR_peek_error(), 0);
        }
        size_t n = strtoul(t + 7, NULL, 10);
        char *p = malloc(n);
        fill_pattern(p, n);
        struct evbuffer *b = evbuffer_new();
        evbuffer_add(b, p, n);
        free(p);
        httpd_send_reply(r, 200, b);
        evbuffer_free(b);
        return;
    }
    if (!strcmp(t, "/sum")) {
        struct evbuffer *body = httpd_req_body(r);
        size_t n = evbuffer_get_length(body);
        const char *p = n ? (const char *)evbuffer_pullup(body, -1) : "";
        f->seen.body_intact = is_pattern(p, n);
        char text[96];
        snprintf(text, sizeof text, "len=%zu intact=%d", n, f->seen.body_intact);
        reply_text(r, 200, text);
        return;
    }
    if (!strcmp(t, "/framed")) {
        /* As the watch fan-out writes: its own chunk framing appended to
         * the connection's queue, then httpd_flush. */
        httpd_send_start(r, 200, NULL, NULL, NULL);
        struct evbuffer *out = httpd_req_output(r);
        if (out && httpd_req_chunked(r)) {
            evbuffer_add(out, "5\r\nhello\r\n", 10);
            httpd_flush(r);
        }
        httpd_send_end(r);
        return;
    }
    char text[256];
    snprintf(text, sizeof text, "%s %s cn=%s verify=%ld body=%zu", httpd_req_method_name(r), t,
             f->seen.peer ? f->seen.cn : "-", f->seen.verify,
             evbuffer_get_length(httpd_req_body(r)));
    reply_text(r, 200, text);
}

static void on_stuck(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fixture *f = arg;
    f->stuck = true;
    event_base_loopbreak(f->base);
}

static fixture *fixture_new(const httpd_config *cfg)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    /* A connection whose event re-activates itself forever would keep
     * even a non-blocking event_base_loop from returning, and the test
     * would hang instead of failing. Limited to a few callbacks between
     * checks for timers, the loop lets the watchdog (turn) break in. */
    struct event_config *ec = event_config_new();
    assert_non_null(ec);
    assert_int_equal(event_config_set_max_dispatch_interval(ec, NULL, 32, 0), 0);
    f->base = event_base_new_with_config(ec);
    event_config_free(ec);
    assert_non_null(f->base);
    f->watchdog = evtimer_new(f->base, on_stuck, f);
    assert_non_null(f->watchdog);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 16), 0);
    socklen_t sl = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    f->port = ntohs(a.sin_port);
    f->h = httpd_new(f->base, lfd, cfg, handler, f);
    assert_non_null(f->h);
    return f;
}

static int setup(void **state)
{
    httpd_config cfg = {.max_body = 2u << 20, .tls = pk.tls};
    *state = fixture_new(&cfg);
    return 0;
}

static int setup_header_timeout(void **state)
{
    httpd_config cfg = {.max_body = 2u << 20, .header_timeout = 1, .tls = pk.tls};
    *state = fixture_new(&cfg);
    return 0;
}

static void tc_free(fixture *f, tclient *c);

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f)
        return 0;
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (f->clients[i])
            tc_free(f, f->clients[i]);
    if (f->streaming)
        httpd_abort(f->streaming);
    httpd_free(f->h);
    httpd_tls_free(f->own_tls); /* (the httpd borrowed it) */
    event_free(f->watchdog);
    event_base_free(f->base);
    free(f);
    return 0;
}

/* Runs what is ready on the server's loop, without waiting. */
static void turn(fixture *f)
{
    struct timeval limit = {TURN_LIMIT, 0};
    evtimer_add(f->watchdog, &limit);
    event_base_loop(f->base, EVLOOP_NONBLOCK);
    evtimer_del(f->watchdog);
    if (f->stuck)
        fail_msg("BUG: one non-blocking turn of the server's loop ran for %d s without "
                 "returning: a connection's event keeps re-activating itself (a busy loop "
                 "that starves every other connection and timer on the loop; see the KNOWN "
                 "BUG note at test_partial_record)",
                 TURN_LIMIT);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One step of waiting for the client socket: the server's turn, then at
 * most a millisecond for `events` on fd. */
static void pump(fixture *f, int fd, short events)
{
    turn(f);
    struct pollfd p = {.fd = fd, .events = events};
    poll(&p, 1, 1);
}

/* ---- the client ---------------------------------------------------------- */

typedef struct copts {
    const char *cert, *key;       /* a client certificate to present; NULL: none */
    int min_version, max_version; /* 0: OpenSSL's defaults */
    const char *alpn;             /* protocols offered, in wire format; NULL: none */
    size_t alpn_len;
    int rcvbuf; /* SO_RCVBUF before connect (a slow reader); 0: the default */
    /* Nonzero: the server's end is accepted here, given this SO_SNDBUF
     * and handed to httpd_adopt. The kernel then holds little of a reply
     * (a default send buffer grows to megabytes), so the server's writes
     * wait on the client whatever the host's TCP tuning. */
    int server_sndbuf;
    bool verify; /* verify the server's certificate against CA A, for 127.0.0.1 */
} copts;

struct tclient {
    int fd;
    SSL *ssl;  /* NULL: a raw TCP client */
    char *buf; /* what was received (plaintext), NUL-terminated */
    size_t len, cap;
    bool closed;              /* reading ended: the peer closed, or an error */
    int end_err;              /* SSL_get_error then (raw: 0) */
    unsigned long end_reason; /* OpenSSL's error then (0: none) */
    int end_errno;
};

/* A TCP client of the httpd (see copts for the two buffer sizes). */
static tclient *tc_tcp_with(fixture *f, int rcvbuf, int server_sndbuf)
{
    tclient *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c->fd >= 0);
    if (rcvbuf) /* before connect, so the window is small from the start */
        assert_int_equal(setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int lfd = -1;
    if (server_sndbuf) {
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        a.sin_port = 0;
        assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
        assert_int_equal(listen(lfd, 1), 0);
        socklen_t sl = sizeof a;
        getsockname(lfd, (struct sockaddr *)&a, &sl);
    }
    /* The kernel completes it from the listen backlog: no loop turn. */
    assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
    if (server_sndbuf) {
        int sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(sfd >= 0);
        close(lfd);
        assert_int_equal(
            setsockopt(sfd, SOL_SOCKET, SO_SNDBUF, &server_sndbuf, sizeof server_sndbuf), 0);
        assert_int_equal(httpd_adopt(f->h, sfd), 0);
    }
    c->cap = 4096;
    c->buf = calloc(1, c->cap);
    int i = 0;
    while (i < MAX_CLIENTS && f->clients[i])
        i++;
    assert_true(i < MAX_CLIENTS);
    f->clients[i] = c;
    return c;
}

static tclient *tc_tcp(fixture *f, int rcvbuf)
{
    return tc_tcp_with(f, rcvbuf, 0);
}

static void tc_free(fixture *f, tclient *c)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (f->clients[i] == c)
            f->clients[i] = NULL;
    SSL_free(c->ssl);
    close(c->fd);
    free(c->buf);
    free(c);
}

/* A TLS client, connected over TCP, its handshake not started. */
static tclient *tc_open(fixture *f, const copts *o)
{
    static const copts none = {0};
    if (!o)
        o = &none;
    tclient *c = tc_tcp_with(f, o->rcvbuf, o->server_sndbuf);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    if (o->min_version)
        SSL_CTX_set_min_proto_version(ctx, o->min_version);
    if (o->max_version)
        SSL_CTX_set_max_proto_version(ctx, o->max_version);
    if (o->max_version && o->max_version < TLS1_2_VERSION) {
        /* OpenSSL 3 allows TLS 1.1 at security level 0 only: without
         * this the client would not even send its hello, and the server
         * would be tested for nothing. */
        SSL_CTX_set_security_level(ctx, 0);
        assert_int_equal(SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0"), 1);
    }
    if (o->cert) {
        assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, o->cert), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM), 1);
    }
    if (o->verify) {
        assert_int_equal(SSL_CTX_load_verify_locations(ctx, pk.a.ca_crt, NULL), 1);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    if (o->alpn) /* (0 is success here) */
        assert_int_equal(
            SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)o->alpn, (unsigned)o->alpn_len), 0);
    c->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    assert_non_null(c->ssl);
    if (o->verify)
        assert_int_equal(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), "127.0.0.1"), 1);
    assert_int_equal(SSL_set_fd(c->ssl, c->fd), 1);
    SSL_set_connect_state(c->ssl);
    ERR_clear_error(); /* (what loading the files may have left) */
    return c;
}

static const char *reason_string(unsigned long e)
{
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "-";
}

/* Runs the handshake; false with end_err/end_reason when it fails. */
static bool tc_handshake(fixture *f, tclient *c)
{
    double end = now_s() + WAIT_SECS;
    for (;;) {
        ERR_clear_error();
        int r = SSL_do_handshake(c->ssl);
        if (r == 1)
            return true;
        int e = SSL_get_error(c->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            c->end_err = e;
            c->end_reason = ERR_peek_last_error();
            ERR_clear_error();
            return false;
        }
        if (now_s() > end)
            fail_msg("the TLS handshake did not finish in %.0f s", WAIT_SECS);
        pump(f, c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
    }
}

static tclient *tc_connect(fixture *f, const copts *o)
{
    tclient *c = tc_open(f, o);
    if (!tc_handshake(f, c))
        fail_msg("handshake failed: SSL error %d, %s", c->end_err, reason_string(c->end_reason));
    return c;
}

/* Sends len bytes in one SSL_write (so a large one is many records in a
 * single call), turning the loop while the socket is full. */
static void tc_write(fixture *f, tclient *c, const void *data, size_t len)
{
    double end = now_s() + WAIT_SECS;
    for (;;) {
        ERR_clear_error();
        int r = SSL_write(c->ssl, data, (int)len);
        if (r > 0) {
            assert_int_equal((size_t)r, len); /* (no partial writes asked for) */
            turn(f);
            return;
        }
        int e = SSL_get_error(c->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            fail_msg("SSL_write: SSL error %d, %s", e, reason_string(ERR_peek_last_error()));
        if (now_s() > end)
            fail_msg("SSL_write did not finish in %.0f s", WAIT_SECS);
        pump(f, c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
    }
}

static void tc_send(fixture *f, tclient *c, const char *s)
{
    tc_write(f, c, s, strlen(s));
}

static void raw_send(fixture *f, tclient *c, const void *data, size_t len)
{
    size_t off = 0;
    double end = now_s() + WAIT_SECS;
    while (off < len) {
        ssize_t n = send(c->fd, (const char *)data + off, len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (now_s() > end)
            fail_msg("send did not finish");
        else
            pump(f, c->fd, POLLOUT);
    }
    turn(f);
}

/* Reads once (at most `max` bytes): > 0 bytes read, 0 nothing yet, -1
 * reading has ended (closed set, with how). */
static int tc_read_some(tclient *c, size_t max)
{
    if (c->closed)
        return -1;
    if (c->len + max + 1 > c->cap) {
        while (c->len + max + 1 > c->cap)
            c->cap *= 2;
        c->buf = realloc(c->buf, c->cap);
        assert_non_null(c->buf);
    }
    if (!c->ssl) {
        ssize_t n = recv(c->fd, c->buf + c->len, max, 0);
        if (n > 0) {
            c->len += (size_t)n;
            c->buf[c->len] = 0;
            return (int)n;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        c->closed = true;
        c->end_errno = n < 0 ? errno : 0;
        return -1;
    }
    ERR_clear_error();
    errno = 0;
    int r = SSL_read(c->ssl, c->buf + c->len, (int)max);
    if (r > 0) {
        c->len += (size_t)r;
        c->buf[c->len] = 0;
        return r;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    c->closed = true;
    c->end_err = e;
    c->end_errno = errno;
    c->end_reason = ERR_peek_last_error();
    ERR_clear_error();
    return -1;
}

/* Reads until `want` is in what was received (NULL: until reading ends),
 * for at most `secs`. Whether it was. */
static bool tc_until(fixture *f, tclient *c, const char *want, double secs)
{
    double end = now_s() + secs;
    for (;;) {
        while (tc_read_some(c, 16384) > 0)
            ;
        if (want ? strstr(c->buf, want) != NULL : c->closed)
            return true;
        if (c->closed || now_s() > end)
            return false;
        pump(f, c->fd, POLLIN);
    }
}

static void tc_reset(tclient *c)
{
    c->len = 0;
    c->buf[0] = 0;
}

/* Whether buf holds a whole reply with a Content-Length body; its body. */
static bool whole_reply(const tclient *c, const char **body, size_t *blen)
{
    const char *e = strstr(c->buf, "\r\n\r\n");
    const char *cl = strstr(c->buf, "Content-Length: ");
    if (!e || !cl || cl > e)
        return false;
    size_t n = strtoul(cl + 16, NULL, 10);
    size_t hl = (size_t)(e - c->buf) + 4;
    if (c->len < hl + n)
        return false;
    *body = c->buf + hl;
    *blen = n;
    return true;
}

/* Sends a request and reads its whole reply; returns the reply's body
 * (NUL-terminated: the buffer's tail) and checks the status. */
static const char *tc_request(fixture *f, tclient *c, const char *req, int status)
{
    tc_reset(c);
    tc_send(f, c, req);
    const char *body = NULL;
    size_t blen = 0;
    double end = now_s() + WAIT_SECS;
    while (!whole_reply(c, &body, &blen)) {
        while (tc_read_some(c, 16384) > 0)
            ;
        if (whole_reply(c, &body, &blen))
            break;
        if (c->closed || now_s() > end)
            fail_msg("no whole reply to \"%.40s\" (%s); got: %.300s", req,
                     c->closed ? "closed" : "timed out", c->buf);
        pump(f, c->fd, POLLIN);
    }
    char line[32];
    snprintf(line, sizeof line, " %d ", status);
    if (strncmp(c->buf, "HTTP/1.", 7) || strncmp(c->buf + 8, line, strlen(line)))
        fail_msg("expected status %d, got: %.200s", status, c->buf);
    return body;
}

/* Reads all that arrives without turning the server's loop (what the
 * kernel holds of what the server wrote), until 20 ms pass in silence. */
static void tc_drain_kernel(tclient *c)
{
    for (;;) {
        while (tc_read_some(c, 4096) > 0)
            ;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (c->closed || poll(&p, 1, 20) <= 0)
            return;
    }
}

/* Whether the connection ended with a TLS close_notify. */
static bool clean_close(const tclient *c)
{
    return c->closed && c->end_err == SSL_ERROR_ZERO_RETURN;
}

static const char alpn_h2_h11[] = "\x02h2\x08http/1.1";

/* ---- 1. handshake, versions, ALPN, keep-alive ---------------------------- */

static void test_keepalive_versions_alpn(void **state)
{
    fixture *f = *state;
    copts o = {.alpn = alpn_h2_h11, .alpn_len = sizeof alpn_h2_h11 - 1, .verify = true};
    tclient *c = tc_connect(f, &o);
    /* The server's certificate verified for 127.0.0.1 against the CA. */
    assert_int_equal(SSL_get_verify_result(c->ssl), X509_V_OK);
    int v = SSL_version(c->ssl);
    assert_true(v == TLS1_2_VERSION || v == TLS1_3_VERSION);
    const unsigned char *proto = NULL;
    unsigned plen = 0;
    SSL_get0_alpn_selected(c->ssl, &proto, &plen);
    assert_int_equal(plen, 8);
    assert_memory_equal(proto, "http/1.1", 8);

    /* Two requests on the one connection: both answered, by one server
     * connection. */
    const char *b = tc_request(f, c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", 200);
    assert_string_equal(b, "GET /a cn=- verify=0 body=0");
    SSL *first = f->seen.ssl;
    assert_non_null(first);
    b = tc_request(f, c, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", 200);
    assert_string_equal(b, "GET /b cn=- verify=0 body=0");
    assert_ptr_equal(f->seen.ssl, first);
    assert_false(c->closed);
    assert_int_equal(f->handled, 2);
    tc_free(f, c);

    /* TLS 1.2 exactly, and TLS 1.3 exactly: both served. */
    static const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION};
    for (size_t i = 0; i < 2; i++) {
        copts ov = {.min_version = versions[i], .max_version = versions[i], .verify = true};
        c = tc_connect(f, &ov);
        assert_int_equal(SSL_version(c->ssl), versions[i]);
        b = tc_request(f, c, "GET /v HTTP/1.1\r\n\r\n", 200);
        assert_string_equal(b, "GET /v cn=- verify=0 body=0");
        tc_free(f, c);
    }

    /* A client offering only h2: no ALPN (the server does not speak it),
     * and the handshake goes on; HTTP/1.1 is served anyway, as Go does. */
    copts oh2 = {.alpn = "\x02h2", .alpn_len = 3};
    c = tc_connect(f, &oh2);
    SSL_get0_alpn_selected(c->ssl, &proto, &plen);
    assert_int_equal(plen, 0);
    tc_request(f, c, "GET /h2 HTTP/1.1\r\n\r\n", 200);
    tc_free(f, c);

    /* A client limited to TLS 1.1: the server refuses its hello (the
     * client hears a protocol_version alert, so it did send one), and
     * closes; no request is served. */
    int handled = f->handled;
    copts o11 = {.min_version = TLS1_VERSION, .max_version = TLS1_1_VERSION};
    c = tc_open(f, &o11);
    assert_false(tc_handshake(f, c));
    assert_int_equal(c->end_err, SSL_ERROR_SSL);
    assert_int_equal(ERR_GET_REASON(c->end_reason), SSL_R_TLSV1_ALERT_PROTOCOL_VERSION);
    /* The server's side is gone too: the raw socket reaches its end. */
    char junk[256];
    double end = now_s() + WAIT_SECS;
    ssize_t n;
    while ((n = recv(c->fd, junk, sizeof junk, 0)) != 0 && !(n < 0 && errno == ECONNRESET)) {
        assert_true(now_s() < end);
        pump(f, c->fd, POLLIN);
    }
    assert_int_equal(f->handled, handled);
    tc_free(f, c);
}

/* ---- 2. client certificates ---------------------------------------------- */

static void test_client_certificates(void **state)
{
    fixture *f = *state;
    static const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION};
    for (size_t i = 0; i < 2; i++) {
        int v = versions[i];
        /* From the configured client CA: verified. */
        copts oa = {
            .cert = pk.a.admin_crt, .key = pk.a.admin_key, .min_version = v, .max_version = v};
        tclient *c = tc_connect(f, &oa);
        tc_request(f, c, "GET /who HTTP/1.1\r\n\r\n", 200);
        assert_non_null(f->seen.ssl);
        assert_true(f->seen.peer);
        assert_int_equal(f->seen.verify, X509_V_OK);
        assert_string_equal(f->seen.cn, "system:admin");
        tc_free(f, c);

        /* From another CA: the handshake still succeeds (the
         * authenticator answers 401, not the TLS layer), the certificate
         * is there, and its verification failed. */
        copts ob = {
            .cert = pk.b.admin_crt, .key = pk.b.admin_key, .min_version = v, .max_version = v};
        c = tc_connect(f, &ob);
        tc_request(f, c, "GET /who HTTP/1.1\r\n\r\n", 200);
        assert_true(f->seen.peer);
        assert_int_not_equal(f->seen.verify, X509_V_OK);
        assert_string_equal(f->seen.cn, "system:admin");
        tc_free(f, c);

        /* None: no peer certificate. */
        copts on = {.min_version = v, .max_version = v};
        c = tc_connect(f, &on);
        tc_request(f, c, "GET /who HTTP/1.1\r\n\r\n", 200);
        assert_non_null(f->seen.ssl);
        assert_false(f->seen.peer);
        assert_null(SSL_get0_peer_certificate(f->seen.ssl));
        tc_free(f, c);
    }
}

/* ---- 3. large bodies ------------------------------------------------------ */

#define MIB (1u << 20)

static void test_big_request_bodies(void **state)
{
    fixture *f = *state;
    tclient *c = tc_connect(f, NULL);
    static const char head[] = "POST /sum HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n";
    static const char second[] = "GET /after HTTP/1.1\r\n\r\n";
    size_t hl = sizeof head - 1, sl = sizeof second - 1;
    char *req = malloc(hl + MIB + sl);
    memcpy(req, head, hl);
    fill_pattern(req + hl, MIB);
    memcpy(req + hl + MIB, second, sl);

    /* One request: 1 MiB in 64 records. */
    tc_reset(c);
    tc_write(f, c, req, hl + MIB);
    assert_true(tc_until(f, c, "intact=", WAIT_SECS));
    assert_non_null(strstr(c->buf, "len=1048576 intact=1"));

    /* The same, pipelined with a second request in the same write: the
     * second is served after the first, on the same connection. */
    tc_reset(c);
    tc_write(f, c, req, hl + MIB + sl);
    assert_true(tc_until(f, c, "GET /after ", WAIT_SECS));
    const char *sum = strstr(c->buf, "len=1048576 intact=1");
    const char *after = strstr(c->buf, "GET /after ");
    assert_non_null(sum);
    assert_true(sum < after);
    assert_false(c->closed);
    free(req);
    tc_free(f, c);
}

static void test_big_reply_slow_reader(void **state)
{
    fixture *f = *state;
    enum { N = 4 * MIB };
    copts o = {.rcvbuf = 8192, .server_sndbuf = 16384};
    tclient *c = tc_connect(f, &o);
    tc_reset(c);
    int handled = f->handled;
    tc_send(f, c, "GET /big?n=4194304 HTTP/1.1\r\n\r\n");
    double end = now_s() + WAIT_SECS;
    while (f->handled == handled) {
        assert_true(now_s() < end);
        pump(f, c->fd, POLLIN);
    }
    /* The server has written what the kernel takes; without its loop,
     * read all that arrives: far from everything, so its SSL_write must
     * have been told to wait. */
    for (int i = 0; i < 20; i++)
        turn(f);
    tc_drain_kernel(c);
    assert_false(c->closed);
    assert_true(c->len < MIB);
    /* Then slowly, 4 KiB at a time, with the server's loop: it resumes
     * each time the socket drains. */
    const char *body = NULL;
    size_t blen = 0;
    end = now_s() + 60; /* 4 MiB through an 8 KiB window, sanitizers included */
    while (!whole_reply(c, &body, &blen)) {
        if (tc_read_some(c, 4096) == 0)
            pump(f, c->fd, POLLIN);
        assert_false(c->closed);
        if (now_s() > end)
            fail_msg("only %zu bytes of the reply arrived", c->len);
    }
    assert_non_null(strstr(c->buf, "Content-Length: 4194304\r\n"));
    assert_int_equal(blen, N);
    assert_int_equal(c->len, (size_t)(body - c->buf) + N); /* nothing after it */
    assert_true(is_pattern(body, blen));
    /* and the connection goes on */
    assert_string_equal(tc_request(f, c, "GET /next HTTP/1.1\r\n\r\n", 200),
                        "GET /next cn=- verify=0 body=0");
    tc_free(f, c);
}

/* Code that runs on the loop's thread (handlers, among them the
 * authenticators, which parse certificates and check signatures) may
 * leave errors in OpenSSL's per-thread error queue, and SSL_get_error()
 * reads that queue: the httpd must not take such a leftover for a failure
 * of its own connection.
 *
 * KNOWN BUG in the working tree (not in HEAD 95e1bb2, which passes):
 * httpd.c tls_flush() and tls_read() no longer call ERR_clear_error()
 * before SSL_write()/SSL_read() ("every failure path below empties it").
 * Here the handler leaves one error and replies 1 MiB to a slow reader:
 * the first SSL_write that would block returns -1, SSL_get_error() sees
 * the stale error and says SSL_ERROR_SSL instead of WANT_WRITE, and
 * tls_flush() dooms the connection: the client gets 32 KiB, then the
 * connection ends without close_notify ("unexpected eof while reading").
 * OpenSSL's rule (SSL_get_error(3)): the queue must be empty before the
 * I/O call; clearing it there, or ERR_set_mark()/ERR_pop_to_mark()
 * around it, would do. */
static void test_stale_openssl_error(void **state)
{
    fixture *f = *state;
    copts o = {.rcvbuf = 8192, .server_sndbuf = 16384};
    tclient *c = tc_connect(f, &o);
    tc_reset(c);
    tc_send(f, c, "GET /big?n=1048576&stale HTTP/1.1\r\n\r\n");
    const char *body = NULL;
    size_t blen = 0;
    double end = now_s() + 60;
    while (!whole_reply(c, &body, &blen)) {
        if (tc_read_some(c, 16384) == 0)
            pump(f, c->fd, POLLIN);
        if (c->closed)
            fail_msg("KNOWN BUG: the reply was cut after %zu bytes (SSL error %d, %s): the "
                     "server took an error left in the thread's OpenSSL queue for its own",
                     c->len, c->end_err, reason_string(c->end_reason));
        if (now_s() > end)
            fail_msg("only %zu bytes of the reply arrived", c->len);
    }
    assert_int_equal(blen, MIB);
    assert_true(is_pattern(body, blen));
    tc_request(f, c, "GET /next HTTP/1.1\r\n\r\n", 200);
    tc_free(f, c);
}

/* ---- 3b. a record split between reads (a known bug, below) ------------------ */

/* The bytes the client would send for `s` (its record), not sent. */
static size_t tc_seal(tclient *c, const char *s, char *out, size_t cap)
{
    BIO *sock = SSL_get_wbio(c->ssl);
    BIO_up_ref(sock);
    BIO *mem = BIO_new(BIO_s_mem());
    assert_non_null(mem);
    SSL_set0_wbio(c->ssl, mem); /* (takes mem, drops a reference to sock) */
    assert_int_equal(SSL_write(c->ssl, s, (int)strlen(s)), (int)strlen(s));
    char *p;
    long n = BIO_get_mem_data(mem, &p);
    assert_true(n > 0 && (size_t)n <= cap);
    memcpy(out, p, (size_t)n);
    SSL_set0_wbio(c->ssl, sock); /* (frees mem) */
    return (size_t)n;
}

/* A record that arrives in two TCP segments (as a 16 KiB record does on
 * any real network, or from a client that stalls): the server has read
 * all there is and must wait for the socket, serving everyone else
 * meanwhile; a client that never sends the rest is cut by the header
 * timeout (1 s here).
 *
 * KNOWN BUG (fails until fixed): httpd.c read_some() ends with
 *     if (c->ssl && ... && SSL_has_pending(c->ssl))
 *         event_active(c->rev, EV_READ, 1);
 * but SSL_has_pending() is also true for the unprocessed bytes of an
 * incomplete record (OpenSSL documents this; with read-ahead they sit in
 * its read buffer). SSL_read then says WANT_READ, the event is activated
 * again, and so on: the loop spins at 100% CPU inside one dispatch, no
 * other connection or timer (the header timeout's sweep included) runs,
 * until the rest of the record comes, which a hostile client never
 * sends. Re-activating only after a read that returned data (n > 0)
 * would do: after WANT_READ the socket announces the rest. */
static void test_partial_record(void **state)
{
    fixture *f = *state; /* header_timeout = 1 */
    /* C: a request served (no header deadline since), then half a record. */
    tclient *c = tc_connect(f, NULL);
    tc_request(f, c, "GET /first HTTP/1.1\r\n\r\n", 200);
    char rec[512];
    size_t n = tc_seal(c, "GET /half HTTP/1.1\r\n\r\n", rec, sizeof rec);
    tc_reset(c);
    raw_send(f, c, rec, n / 2); /* (turns the loop) */
    turn(f);
    /* H: half of its first record, and never the rest. */
    double t0 = now_s();
    tclient *h = tc_connect(f, NULL);
    char hrec[512];
    size_t hn = tc_seal(h, "GET /never HTTP/1.1\r\n\r\n", hrec, sizeof hrec);
    raw_send(f, h, hrec, hn / 2);
    turn(f);

    /* Others are served meanwhile. */
    tclient *other = tc_connect(f, NULL);
    tc_request(f, other, "GET /other HTTP/1.1\r\n\r\n", 200);
    tc_free(f, other);
    assert_null(strstr(c->buf, "GET /half"));

    /* The rest of C's record: its request is served. */
    raw_send(f, c, rec + n / 2, n - n / 2);
    assert_true(tc_until(f, c, "GET /half ", WAIT_SECS));

    /* H is cut by the header timeout. */
    assert_true(tc_until(f, h, NULL, 6 - (now_s() - t0)));
    assert_int_equal(h->len, 0);
    assert_false(c->closed);
    tc_free(f, h);
    tc_free(f, c);
}

/* Plain HTTP that arrives in pieces, the first shorter than a TLS record
 * header: still Go's answer. (Fails with the busy loop above until it is
 * fixed: the two bytes wait in OpenSSL's buffer.) */
static void test_plain_http_in_pieces(void **state)
{
    fixture *f = *state;
    tclient *r = tc_tcp(f, 0);
    raw_send(f, r, "GE", 2);
    turn(f);
    static const char rest[] = "T /api HTTP/1.1\r\nHost: localhost\r\n\r\n";
    raw_send(f, r, rest, sizeof rest - 1);
    assert_true(tc_until(f, r, NULL, WAIT_SECS));
    assert_string_equal(r->buf, "HTTP/1.0 400 Bad Request\r\n\r\n"
                                "Client sent an HTTP request to an HTTPS server.\n");
    tc_free(f, r);
}

/* ---- 4. streamed replies --------------------------------------------------- */

static void test_streaming(void **state)
{
    fixture *f = *state;
    /* HTTP/1.1: chunked, and the connection stays. */
    tclient *c = tc_connect(f, NULL);
    tc_reset(c);
    tc_send(f, c, "GET /stream HTTP/1.1\r\n\r\n");
    assert_true(tc_until(f, c, "{\"a\":1}\n\r\n", WAIT_SECS));
    assert_non_null(strstr(c->buf, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(c->buf, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\n8\r\n{\"a\":1}\n\r\n"));
    for (int i = 0; i < 5 && !f->drained_calls; i++)
        turn(f);
    assert_int_equal(f->drained_calls, 1);
    assert_non_null(f->streaming);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "xy");
    httpd_send_chunk(f->streaming, b);
    httpd_send_end(f->streaming);
    f->streaming = NULL;
    assert_true(tc_until(f, c, "0\r\n\r\n", WAIT_SECS));
    assert_non_null(strstr(c->buf, "\r\n2\r\nxy\r\n0\r\n\r\n"));
    tc_request(f, c, "GET /again HTTP/1.1\r\n\r\n", 200);
    assert_false(c->closed);
    tc_free(f, c);

    /* HTTP/1.0: the body runs to the end of the connection, which the
     * client must be able to tell from a cut one: close_notify. A large
     * last chunk to a slow reader: the close waits for it. */
    copts slow = {.rcvbuf = 8192, .server_sndbuf = 16384};
    c = tc_connect(f, &slow);
    tc_reset(c);
    tc_send(f, c, "GET /stream HTTP/1.0\r\n\r\n");
    assert_true(tc_until(f, c, "{\"a\":1}\n", WAIT_SECS));
    assert_null(strstr(c->buf, "chunked"));
    assert_non_null(f->streaming);
    char *big = malloc(MIB);
    fill_pattern(big, MIB);
    evbuffer_add(b, big, MIB);
    free(big);
    httpd_send_chunk(f->streaming, b);
    httpd_send_end(f->streaming);
    f->streaming = NULL;
    evbuffer_free(b);
    for (int i = 0; i < 20; i++)
        turn(f);
    tc_drain_kernel(c); /* not all there yet, so not closed yet */
    assert_false(c->closed);
    assert_true(c->len < MIB);
    assert_true(tc_until(f, c, NULL, 60));
    if (!clean_close(c))
        fail_msg("the HTTP/1.0 stream did not end with close_notify: SSL error %d, %s, errno %d",
                 c->end_err, reason_string(c->end_reason), c->end_errno);
    const char *body = strstr(c->buf, "\r\n\r\n{\"a\":1}\n");
    assert_non_null(body);
    body += 12;
    assert_int_equal(c->len - (size_t)(body - c->buf), MIB);
    assert_true(is_pattern(body, MIB));
    tc_free(f, c);

    /* The client leaves mid-stream (no close_notify): on_closed. */
    c = tc_connect(f, NULL);
    tc_reset(c);
    tc_send(f, c, "GET /stream HTTP/1.1\r\n\r\n");
    assert_true(tc_until(f, c, "{\"a\":1}\n\r\n", WAIT_SECS));
    assert_non_null(f->streaming);
    int closed = f->closed_calls;
    tc_free(f, c);
    double end = now_s() + WAIT_SECS;
    while (f->streaming && now_s() < end) {
        turn(f);
        poll(NULL, 0, 1);
    }
    assert_null(f->streaming);
    assert_int_equal(f->closed_calls, closed + 1);
}

/* ---- 5. not TLS ------------------------------------------------------------ */

static void test_plain_http_and_garbage(void **state)
{
    fixture *f = *state;
    /* Plain HTTP: Go's answer, byte for byte, then the close. */
    tclient *r = tc_tcp(f, 0);
    static const char get[] = "GET /api HTTP/1.1\r\nHost: localhost\r\n\r\n";
    raw_send(f, r, get, sizeof get - 1);
    assert_true(tc_until(f, r, NULL, WAIT_SECS));
    assert_int_equal(r->end_errno, 0); /* a FIN, not a reset */
    assert_string_equal(r->buf, "HTTP/1.0 400 Bad Request\r\n\r\n"
                                "Client sent an HTTP request to an HTTPS server.\n");
    tc_free(f, r);

    /* A TLS client is served afterwards. */
    tclient *c = tc_connect(f, NULL);
    tc_request(f, c, "GET /ok HTTP/1.1\r\n\r\n", 200);
    tc_free(f, c);

    /* Garbage (reproducible; not a TLS record type, not SSLv2): closed,
     * without any HTTP. */
    unsigned char junk[300];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof junk; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        junk[i] = (unsigned char)x;
    }
    junk[0] = 0x01;
    junk[1] = 0x7f;
    r = tc_tcp(f, 0);
    raw_send(f, r, junk, sizeof junk);
    assert_true(tc_until(f, r, NULL, WAIT_SECS));
    assert_null(strstr(r->buf, "HTTP/"));
    tc_free(f, r);

    c = tc_connect(f, NULL);
    tc_request(f, c, "GET /ok HTTP/1.1\r\n\r\n", 200);
    tc_free(f, c);
    assert_int_equal(f->handled, 2);
}

/* ---- 6. the header timeout ---------------------------------------------- */

static void test_header_timeout(void **state)
{
    fixture *f = *state; /* header_timeout = 1 */
    /* Opened first, so that the deadlines they would have are no later
     * than those of the connections that must be cut:
     *  - D: its headers complete (the 100 Continue says the server has
     *    them), half of its body sent;
     *  - E: a request served, then idle (idle_timeout is an hour). */
    tclient *d = tc_connect(f, NULL);
    tc_send(f, d, "PUT /d HTTP/1.1\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n01234");
    assert_true(tc_until(f, d, "HTTP/1.1 100 Continue\r\n\r\n", WAIT_SECS));
    tclient *e = tc_connect(f, NULL);
    tc_request(f, e, "GET /e HTTP/1.1\r\n\r\n", 200);

    /* Then those to be cut:
     *  - A: TCP only, no handshake ever;
     *  - B: a handshake, then half a request line;
     *  - C: a request served, then half of the next request line (its
     *    deadline runs from that request's first byte). */
    double t0 = now_s();
    tclient *a = tc_tcp(f, 0);
    tclient *b = tc_connect(f, NULL);
    tc_send(f, b, "GET /slo");
    tclient *c = tc_connect(f, NULL);
    tc_request(f, c, "GET /c HTTP/1.1\r\n\r\n", 200);
    tc_reset(c);
    tc_send(f, c, "GET /sec");

    bool a_gone = false, b_gone = false, c_gone = false;
    while (!(a_gone && b_gone && c_gone)) {
        a_gone = a_gone || tc_read_some(a, 4096) < 0;
        b_gone = b_gone || tc_read_some(b, 4096) < 0;
        c_gone = c_gone || tc_read_some(c, 4096) < 0;
        if (now_s() - t0 > 6)
            fail_msg("not closed within 6 s: %s%s%s", a_gone ? "" : "A (no handshake) ",
                     b_gone ? "" : "B (half a request line) ",
                     c_gone ? "" : "C (half of a second request line)");
        turn(f);
        poll(NULL, 0, 5);
    }
    double took = now_s() - t0;
    assert_true(took >= 0.9); /* (not before the timeout) */
    assert_int_equal(a->len, 0);
    assert_int_equal(b->len, 0);
    assert_int_equal(c->len, 0);

    /* D and E were there for the same sweeps, and are still open. */
    turn(f);
    assert_int_equal(tc_read_some(d, 4096), 0);
    assert_int_equal(tc_read_some(e, 4096), 0);
    tc_reset(d);
    tc_send(f, d, "56789");
    assert_true(tc_until(f, d, "body=10", WAIT_SECS));
    assert_non_null(strstr(d->buf, "HTTP/1.1 200 OK\r\n"));
    assert_string_equal(tc_request(f, e, "GET /e2 HTTP/1.1\r\n\r\n", 200),
                        "GET /e2 cn=- verify=0 body=0");
    tc_free(f, a);
    tc_free(f, b);
    tc_free(f, c);
    tc_free(f, d);
    tc_free(f, e);
}

/* ---- 7. reloading the certificate ------------------------------------------ */

static ASN1_INTEGER *file_serial(const char *path)
{
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    X509 *x = PEM_read_X509(fp, NULL, NULL, NULL);
    fclose(fp);
    assert_non_null(x);
    ASN1_INTEGER *s = ASN1_INTEGER_dup(X509_get0_serialNumber(x));
    X509_free(x);
    return s;
}

static bool has_dns_san(X509 *x, const char *name)
{
    GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    bool found = false;
    for (int i = 0; gens && i < sk_GENERAL_NAME_num(gens) && !found; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        found = g->type == GEN_DNS && (size_t)g->d.dNSName->length == strlen(name) &&
                !memcmp(g->d.dNSName->data, name, strlen(name));
    }
    GENERAL_NAMES_free(gens);
    return found;
}

/* Connects, checks the served certificate's serial is `want`, and that a
 * request is served; returns whether the certificate has `san`. */
static bool served(fixture *f, const ASN1_INTEGER *want, const char *san)
{
    tclient *c = tc_connect(f, NULL);
    X509 *x = SSL_get0_peer_certificate(c->ssl);
    assert_non_null(x);
    assert_int_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(x), want), 0);
    bool has = has_dns_san(x, san);
    tc_request(f, c, "GET /r HTTP/1.1\r\n\r\n", 200);
    tc_free(f, c);
    return has;
}

static void test_reload(void **state)
{
    (void)state;
    pki_files p;
    make_pki("reload", local_sans, 2, &p);
    httpd_tls_files files = {.cert = p.serving_crt, .key = p.serving_key};
    char *err = NULL;
    httpd_tls *tls = httpd_tls_new(&files, &err);
    if (!tls)
        fail_msg("httpd_tls_new: %s", err ? err : "?");
    httpd_config cfg = {.max_body = 1000, .tls = tls};
    fixture *f = fixture_new(&cfg);
    f->own_tls = tls;
    *state = f;
    assert_int_equal(httpd_tls_generation(tls), 1);
    ASN1_INTEGER *s1 = file_serial(p.serving_crt);
    assert_false(served(f, s1, "reload.example"));
    tclient *old = tc_connect(f, NULL); /* made from the first certificate */

    /* A renewed certificate (and key), with another name. */
    static const char *const more[] = {"127.0.0.1", "localhost", "reload.example"};
    pki_files p2;
    make_pki("reload", more, 3, &p2);
    assert_true(p2.made_serving);
    ASN1_INTEGER *s2 = file_serial(p.serving_crt);
    assert_int_not_equal(ASN1_INTEGER_cmp(s1, s2), 0);
    tu_next_second();
    assert_true(served(f, s2, "reload.example"));
    assert_int_equal(httpd_tls_generation(tls), 2);
    /* A connection made before goes on with what it had. */
    assert_string_equal(tc_request(f, old, "GET /old HTTP/1.1\r\n\r\n", 200),
                        "GET /old cn=- verify=0 body=0");
    X509 *ox = SSL_get0_peer_certificate(old->ssl);
    assert_int_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(ox), s1), 0);
    tc_free(f, old);

    /* A key that does not match: the previous pair stays served. */
    char saved[4200];
    snprintf(saved, sizeof saved, "%s.good", p.serving_key);
    tu_replace_file(p.serving_key, saved);
    tu_replace_file(p.admin_key, p.serving_key);
    tu_next_second();
    assert_true(served(f, s2, "reload.example"));
    assert_int_equal(httpd_tls_generation(tls), 2);

    /* ... and the next change is tried again. */
    tu_replace_file(saved, p.serving_key);
    tu_next_second();
    assert_true(served(f, s2, "reload.example"));
    assert_int_equal(httpd_tls_generation(tls), 3);
    unlink(saved);
    ASN1_INTEGER_free(s1);
    ASN1_INTEGER_free(s2);
}

/* ---- 8. direct writers ---------------------------------------------------- */

static void test_fd_and_output(void **state)
{
    fixture *f = *state;
    tclient *c = tc_connect(f, NULL);
    tc_request(f, c, "GET /x HTTP/1.1\r\n\r\n", 200);
    assert_non_null(f->seen.ssl);
    assert_int_equal(f->seen.fd, -1); /* bytes must go through the queue */
    assert_true(f->seen.has_output);

    /* A writer's own framing through the queue arrives decrypted and in
     * order. */
    tc_reset(c);
    tc_send(f, c, "GET /framed HTTP/1.1\r\n\r\n");
    assert_true(tc_until(f, c, "0\r\n\r\n", WAIT_SECS));
    assert_non_null(strstr(c->buf, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    assert_int_equal(f->seen.fd, -1);
    assert_true(f->seen.has_output);
    tc_free(f, c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keepalive_versions_alpn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_certificates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_request_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_reply_slow_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_openssl_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_record, setup_header_timeout, teardown),
        cmocka_unit_test_setup_teardown(test_streaming, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_http_and_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plain_http_in_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_timeout, setup_header_timeout, teardown),
        cmocka_unit_test_teardown(test_reload, teardown),
        cmocka_unit_test_setup_teardown(test_fd_and_output, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
