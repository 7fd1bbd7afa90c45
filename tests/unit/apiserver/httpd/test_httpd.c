/* Tests for the server's HTTP/1.1 layer (src/apiserver/httpd.c): raw bytes
 * over a loopback socket to an httpd whose loop this thread turns, so each
 * case controls exactly what the client sends and when. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "apiserver/httpd/httpd.h"

typedef struct fixture {
    struct event_base *base;
    httpd *h;
    int port;
    httpd_req *held;      /* a request answered later (async) */
    httpd_req *streaming; /* a streamed reply in progress */
    int closed_calls;     /* on_closed calls */
    int drained_calls;    /* on_drained calls */
    int handled;
} fixture;

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

/* Echoes the request; a few paths behave differently. */
static void handler(httpd_req *r, void *arg)
{
    fixture *f = arg;
    f->handled++;
    const char *t = httpd_req_target(r);
    if (httpd_req_body_too_large(r)) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "too large");
        httpd_send_reply(r, 413, b);
        evbuffer_free(b);
        return;
    }
    if (!strcmp(t, "/async")) {
        f->held = r;
        return;
    }
    if (!strcmp(t, "/stream")) {
        f->streaming = r;
        httpd_add_header(r, "Content-Type", "application/json");
        httpd_send_start(r, 200, on_closed, on_drained, f);
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "{\"a\":1}\n");
        httpd_send_chunk(r, b);
        evbuffer_free(b);
        httpd_notify_drained(r);
        return;
    }
    if (!strcmp(t, "/big")) {
        struct evbuffer *b = evbuffer_new();
        char *big = malloc(64 * 1024);
        memset(big, 'z', 64 * 1024);
        evbuffer_add(b, big, 64 * 1024);
        free(big);
        httpd_send_reply(r, 200, b);
        evbuffer_free(b);
        return;
    }
    if (!strcmp(t, "/close"))
        httpd_add_header(r, "Connection", "close");
    if (!strcmp(t, "/crlf")) /* a value that tries to add a header of its own */
        httpd_add_header(r, "X-Echo", "a\r\nX-Injected: 1\nb\r");
    const char *x = httpd_req_header(r, "x-test");
    struct evbuffer *b = evbuffer_new();
    struct evbuffer *body = httpd_req_body(r);
    evbuffer_add_printf(b, "%s %s x=%s body=", httpd_req_method_name(r), t, x ? x : "-");
    evbuffer_add_buffer(b, body);
    httpd_send_reply(r, 200, b);
    evbuffer_free(b);
}

static int setup_with(void **state, size_t max_body)
{
    signal(SIGPIPE, SIG_IGN); /* as the server does (httpd.h) */
    fixture *f = calloc(1, sizeof *f);
    f->base = event_base_new();
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 16), 0);
    socklen_t sl = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    f->port = ntohs(a.sin_port);
    httpd_config cfg = {.max_body = max_body, .idle_timeout = 3600};
    f->h = httpd_new(f->base, lfd, &cfg, handler, f);
    assert_non_null(f->h);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, 1000);
}

static int setup_big(void **state)
{
    return setup_with(state, 1u << 20);
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->held)
        httpd_send_reply(f->held, 500, NULL);
    if (f->streaming)
        httpd_abort(f->streaming);
    httpd_free(f->h);
    event_base_free(f->base);
    free(f);
    return 0;
}

static int client(fixture *f)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

static void turn(fixture *f)
{
    event_base_loop(f->base, EVLOOP_NONBLOCK);
}

static void send_all(fixture *f, int fd, const char *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, data + off, len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else
            turn(f);
    }
    turn(f);
}

/* Turns the loop and reads until `want` appears in what was received (or
 * EOF, with want NULL), for at most 3 s. Returns a static copy; *eof says
 * whether the server closed. */
static char rbuf[1 << 20];
static size_t rlen;

static const char *recv_until(fixture *f, int fd, const char *want, bool *eof)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *eof = false;
    for (;;) {
        turn(f);
        ssize_t n = recv(fd, rbuf + rlen, sizeof rbuf - 1 - rlen, 0);
        if (n > 0) {
            rlen += (size_t)n;
            rbuf[rlen] = 0;
        } else if (n == 0) {
            *eof = true;
            return rbuf;
        }
        if (want && strstr(rbuf, want))
            return rbuf;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= 3)
            return rbuf;
        if (n < 0)
            poll(NULL, 0, 1);
    }
}

/* Sends the NUL-terminated request, then receives as recv_until does. */
static const char *ask(fixture *f, int fd, const char *req, const char *want, bool *eof)
{
    send_all(f, fd, req, strlen(req));
    return recv_until(f, fd, want, eof);
}

static void reset(void)
{
    rlen = 0;
    rbuf[0] = 0;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_keepalive_two_requests(void **state)
{
    fixture *f = *state;
    int fd = client(f);
    bool eof;
    reset();
    const char *req = "GET /a HTTP/1.1\r\nHost: x\r\nX-Test: one\r\n\r\n";
    const char *r = ask(f, fd, req, "body=", &eof);
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "\r\nDate: "));
    assert_non_null(strstr(r, "Content-Length: 18\r\n\r\nGET /a x=one body="));
    reset();
    req = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    r = ask(f, fd, req, "body=", &eof);
    assert_false(eof);
    assert_non_null(strstr(r, "GET /b x=- body="));
    close(fd);
}

static void test_pipelined_and_fragmented(void **state)
{
    fixture *f = *state;
    int fd = client(f);
    bool eof;
    reset();
    const char *req = "GET /1 HTTP/1.1\r\nX-Test: a\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: "
                      "3\r\n\r\nabcGET /3 HTTP/1.1\r\nX-TEST: c\r\n\r\n";
    /* one byte at a time: names, values and the body arrive in pieces */
    for (const char *p = req; *p; p++)
        send_all(f, fd, p, 1);
    const char *r = recv_until(f, fd, "GET /3 x=c body=", &eof);
    const char *a = strstr(r, "GET /1 x=a body=");
    const char *b = strstr(r, "POST /2 x=- body=abc");
    const char *c = strstr(r, "GET /3 x=c body=");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_true(a < b && b < c);
    close(fd);
}

static void test_chunked_body_and_expect(void **state)
{
    fixture *f = *state;
    int fd = client(f);
    bool eof;
    reset();
    const char *h = "PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n";
    const char *r = ask(f, fd, h, "100 Continue", &eof);
    assert_non_null(strstr(r, "HTTP/1.1 100 Continue\r\n\r\n"));
    const char *body = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    r = ask(f, fd, body, "body=abcde", &eof);
    assert_non_null(strstr(r, "PUT /c x=- body=abcde"));
    close(fd);
}

static void test_too_large_closes(void **state)
{
    fixture *f = *state;
    int fd = client(f);
    bool eof;
    reset();
    /* Content-Length over max_body: answered before the body is sent */
    const char *h = "POST /big HTTP/1.1\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n";
    const char *r = ask(f, fd, h, "too large", &eof);
    assert_non_null(strstr(r, "HTTP/1.1 413 "));
    assert_non_null(strstr(r, "Connection: close\r\n"));
    assert_null(strstr(r, "100 Continue"));
    /* the body, if sent anyway, is read and dropped; then the close */
    char junk[5000];
    memset(junk, 'j', sizeof junk);
    send_all(f, fd, junk, sizeof junk);
    recv_until(f, fd, NULL, &eof);
    assert_true(eof);
    close(fd);

    /* a chunked body that grows over the limit */
    fd = client(f);
    reset();
    h = "POST /big HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(f, fd, h, strlen(h));
    char chunk[700 + 16];
    int n = snprintf(chunk, sizeof chunk, "2bc\r\n%0700d\r\n", 0);
    send_all(f, fd, chunk, (size_t)n);
    send_all(f, fd, chunk, (size_t)n);
    r = recv_until(f, fd, "too large", &eof);
    assert_non_null(strstr(r, "HTTP/1.1 413 "));
    send_all(f, fd, "0\r\n\r\n", 5);
    recv_until(f, fd, NULL, &eof);
    assert_true(eof);
    close(fd);
}

static void test_malformed_and_methods(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    int before = f->handled;
    send_all(f, fd, "GARBAGE\r\n\r\n", 11);
    const char *r = recv_until(f, fd, NULL, &eof);
    assert_non_null(strstr(r, "HTTP/1.1 400 Bad Request\r\n"));
    assert_true(eof);
    close(fd);

    fd = client(f);
    reset();
    const char *req = "PROPFIND /x HTTP/1.1\r\n\r\n";
    r = ask(f, fd, req, NULL, &eof);
    assert_non_null(strstr(r, "HTTP/1.1 405 "));
    assert_true(eof);
    close(fd);

    /* headers over 1 MiB */
    fd = client(f);
    reset();
    size_t big = (1u << 20) + 4096;
    char *hdr = malloc(big + 64);
    int n = snprintf(hdr, 64, "GET / HTTP/1.1\r\nX-Big: ");
    memset(hdr + n, 'h', big);
    memcpy(hdr + n + big, "\r\n\r\n", 4);
    size_t total = (size_t)n + big + 4, off = 0;
    while (off < total) { /* the server may close before taking it all */
        ssize_t w = send(fd, hdr + off, total - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (errno == EPIPE || errno == ECONNRESET)
            break;
        turn(f);
    }
    free(hdr);
    r = recv_until(f, fd, "431", &eof);
    assert_non_null(strstr(r, "HTTP/1.1 431 "));
    close(fd);
    assert_int_equal(f->handled, before); /* none reached the handler */
}

static void test_http10_and_head(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    send_all(f, fd, "GET /old HTTP/1.0\r\n\r\n", 21);
    const char *r = recv_until(f, fd, NULL, &eof);
    assert_non_null(strstr(r, "HTTP/1.0 200 OK\r\n"));
    assert_non_null(strstr(r, "GET /old x=- body="));
    assert_true(eof); /* no keep-alive asked: closed */
    close(fd);

    fd = client(f);
    reset();
    const char *req = "GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    r = ask(f, fd, req, "body=", &eof);
    assert_non_null(strstr(r, "Connection: keep-alive\r\n"));
    reset();
    req = "HEAD /h HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    r = ask(f, fd, req, "\r\n\r\n", &eof);
    assert_false(eof);
    assert_non_null(strstr(r, "Content-Length: 17\r\n")); /* "HEAD /h x=- body=" */
    for (int i = 0; i < 20; i++) {
        turn(f);
        poll(NULL, 0, 2);
    }
    recv_until(f, fd, "\r\n\r\n", &eof);
    assert_null(strstr(rbuf, "body=")); /* no body after a HEAD */
    close(fd);
}

static void test_connection_close_from_handler(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    const char *req = "GET /close HTTP/1.1\r\n\r\nGET /never HTTP/1.1\r\n\r\n";
    const char *r = ask(f, fd, req, NULL, &eof);
    assert_true(eof);
    assert_int_equal(count(r, "Connection: close\r\n"), 1);
    assert_null(strstr(r, "/never"));
    close(fd);
}

/* CR and LF in a header value become spaces: a value cannot end its
 * header line and start another. */
static void test_header_value_cannot_split(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    const char *r = ask(f, fd, "GET /crlf HTTP/1.1\r\n\r\n", "body=", &eof);
    assert_non_null(strstr(r, "\r\nX-Echo: a  X-Injected: 1 b \r\n"));
    assert_null(strstr(r, "\r\nX-Injected"));
    close(fd);
}

static void test_async_keeps_order(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    const char *req = "GET /async HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n";
    send_all(f, fd, req, strlen(req));
    for (int i = 0; i < 20; i++)
        turn(f);
    assert_non_null(f->held);
    const char *r = recv_until(f, fd, "/after", &eof);
    assert_null(strstr(r, "/after")); /* waits behind /async */
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "late");
    httpd_send_reply(f->held, 202, b);
    evbuffer_free(b);
    f->held = NULL;
    r = recv_until(f, fd, "GET /after", &eof);
    const char *late = strstr(r, "late");
    const char *after = strstr(r, "GET /after");
    assert_non_null(late);
    assert_non_null(after);
    assert_true(late < after);
    close(fd);
}

static void test_streaming(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    const char *req = "GET /stream HTTP/1.1\r\n\r\n";
    const char *r = ask(f, fd, req, "{\"a\":1}\n\r\n", &eof);
    assert_non_null(strstr(r, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(r, "\r\n\r\n8\r\n{\"a\":1}\n\r\n"));
    for (int i = 0; i < 5; i++)
        turn(f);
    assert_int_equal(f->drained_calls, 1);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "xy");
    httpd_send_chunk(f->streaming, b);
    evbuffer_free(b);
    httpd_send_end(f->streaming);
    f->streaming = NULL;
    r = recv_until(f, fd, "0\r\n\r\n", &eof);
    assert_non_null(strstr(r, "2\r\nxy\r\n0\r\n\r\n"));
    assert_false(eof);
    close(fd);

    /* HTTP/1.0: no chunks, the end is the connection's */
    fd = client(f);
    reset();
    send_all(f, fd, "GET /stream HTTP/1.0\r\n\r\n", 24);
    r = recv_until(f, fd, "{\"a\":1}\n", &eof);
    assert_null(strstr(r, "chunked"));
    httpd_send_end(f->streaming);
    f->streaming = NULL;
    r = recv_until(f, fd, NULL, &eof);
    assert_true(eof);
    assert_non_null(strstr(r, "\r\n\r\n{\"a\":1}\n"));
    close(fd);

    /* the client leaves mid-stream: on_closed, from the loop */
    fd = client(f);
    reset();
    ask(f, fd, req, "{\"a\":1}\n", &eof);
    assert_non_null(f->streaming);
    int closed = f->closed_calls;
    close(fd);
    for (int i = 0; i < 50 && f->streaming; i++) {
        turn(f);
        poll(NULL, 0, 2);
    }
    assert_null(f->streaming);
    assert_int_equal(f->closed_calls, closed + 1);
}

/* The client half-closes after a request whose reply comes later: the
 * reply is still written, then the server closes. */
static void test_half_close_still_answered(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    const char *req = "GET /async HTTP/1.1\r\n\r\n";
    send_all(f, fd, req, strlen(req));
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 20; i++) {
        turn(f);
        poll(NULL, 0, 1);
    }
    assert_non_null(f->held);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "later");
    httpd_send_reply(f->held, 200, b);
    evbuffer_free(b);
    f->held = NULL;
    const char *r = recv_until(f, fd, NULL, &eof);
    assert_true(eof);
    assert_non_null(strstr(r, "\r\n\r\nlater"));
    close(fd);
}

/* A client that sends far ahead of a slow reply is read no further than
 * the backlog limit; once the reply is out, everything it sent is served. */
static void test_backpressure_then_resume(void **state)
{
    fixture *f = *state;
    bool eof;
    int fd = client(f);
    reset();
    const char *req = "GET /async HTTP/1.1\r\n\r\n";
    send_all(f, fd, req, strlen(req));
    for (int i = 0; i < 20 && !f->held; i++)
        turn(f);
    assert_non_null(f->held);
    /* 120 pipelined requests of 200 KB each: 24 MB, more than the 1 MiB
     * the server reads ahead plus what the kernel buffers on both sides */
    enum { N = 120, BODY = 200 * 1000 };
    char *body = malloc(BODY);
    memset(body, 'b', BODY);
    char head[96];
    size_t sent = 0;
    int hl = snprintf(head, sizeof head, "PUT /p HTTP/1.1\r\nContent-Length: %d\r\n\r\n", BODY);
    for (int k = 0; k < N; k++) {
        for (const char *parts[2] = {head, body}, **pp = parts; pp < parts + 2; pp++) {
            size_t len = pp == parts ? (size_t)hl : BODY, off = 0;
            while (off < len) {
                ssize_t w = send(fd, *pp + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) {
                    off += (size_t)w;
                    sent += (size_t)w;
                    continue;
                }
                turn(f); /* the kernel buffers are full: the server reads what it will */
                poll(NULL, 0, 1);
                static int spins;
                if (++spins > 300)
                    goto stalled;
            }
        }
    }
stalled:
    /* the server stopped reading: not everything could be sent */
    assert_true(sent < (size_t)N * (BODY + hl));
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "first");
    httpd_send_reply(f->held, 200, b);
    evbuffer_free(b);
    f->held = NULL;
    /* the rest goes out now that the server reads again; the replies are
     * counted as they stream by (24 MB of echoes: not kept) */
    size_t total = (size_t)N * (BODY + hl);
    size_t off = sent;
    int answered = 0;
    bool first = false;
    static char win[65536 + 64];
    size_t keep = 0;
    for (int rounds = 0; (off < total || answered < N) && rounds < 500000; rounds++) {
        if (off < total) {
            size_t k = (off % (BODY + hl));
            const char *p = k < (size_t)hl ? head + k : body + (k - hl);
            size_t len = k < (size_t)hl ? hl - k : BODY - (k - hl);
            ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                off += (size_t)w;
        }
        turn(f);
        ssize_t n = recv(fd, win + keep, 65536, MSG_DONTWAIT);
        if (n == 0)
            break;
        if (n < 0)
            continue;
        size_t len = keep + (size_t)n;
        win[len] = 0;
        /* the echoes hold no NUL, so strstr sees the whole window */
        if (strstr(win, "first"))
            first = true;
        answered += count(win, "PUT /p x=- body=");
        /* keep one byte less than the marker: a marker cut by the end of
         * the window is found next time, a whole one is never counted twice */
        keep = len < 15 ? len : 15;
        memmove(win, win + len - keep, keep);
    }
    assert_true(first);
    assert_int_equal(answered, N);
    (void)eof;
    free(body);
    close(fd);
}

/* A client that pipelines requests and does not read the replies: the
 * server stops serving once 1 MiB of replies waits (the rest would pile
 * up in memory), and serves everything once the client reads. */
static void test_unread_replies_pause_serving(void **state)
{
    fixture *f = *state;
    int fd = client(f);
    enum { N = 2000 };
    const char *req = "GET /big HTTP/1.1\r\n\r\n";
    size_t rl = strlen(req);
    char *all = malloc(rl * N);
    for (int i = 0; i < N; i++)
        memcpy(all + (size_t)i * rl, req, rl);
    send_all(f, fd, all, rl * N); /* 42 KB: the kernel takes it all */
    free(all);
    for (int i = 0; i < 200; i++) {
        turn(f);
        poll(NULL, 0, 1);
    }
    /* 2000 replies are 128 MB; the kernel's buffers hold a few MB of them
     * and the server 1 MiB more, no further */
    assert_true(f->handled < 400);
    /* then read: every reply is the same size (a fixed-width Date) */
    size_t got = 0, reply = 0, hl = 0;
    static char buf[1 << 16], head[512];
    for (int rounds = 0; rounds < 1000000; rounds++) {
        turn(f);
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0)
            break;
        if (n < 0)
            continue;
        if (!reply) {
            size_t k = (size_t)n < sizeof head - 1 - hl ? (size_t)n : sizeof head - 1 - hl;
            memcpy(head + hl, buf, k);
            hl += k;
            head[hl] = 0;
            char *e = strstr(head, "\r\n\r\n");
            if (e)
                reply = (size_t)(e - head) + 4 + 64 * 1024;
        }
        got += (size_t)n;
        if (reply && got >= (size_t)N * reply)
            break;
    }
    assert_true(reply > 0);
    assert_int_equal(got, (size_t)N * reply);
    assert_int_equal(f->handled, N);
    close(fd);
}

/* Connections idle longer than the timeout are closed. */
static void test_idle_timeout(void **state)
{
    (void)state;
    fixture *f = calloc(1, sizeof *f);
    f->base = event_base_new();
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    httpd_config cfg = {.max_body = 1000, .idle_timeout = 1};
    f->h = httpd_new(f->base, -1, &cfg, handler, f);
    assert_int_equal(httpd_adopt(f->h, sv[0]), 0);
    const char *req = "GET /a HTTP/1.1\r\n\r\n";
    send(sv[1], req, strlen(req), MSG_NOSIGNAL);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    bool closed = false;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    reset();
    for (;;) {
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        ssize_t n = recv(sv[1], rbuf + rlen, sizeof rbuf - 1 - rlen, 0);
        if (n > 0) {
            rlen += (size_t)n;
            rbuf[rlen] = 0;
        } else if (n == 0) {
            closed = true;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 5)
            break;
        poll(NULL, 0, 10);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    assert_non_null(strstr(rbuf, "GET /a x=- body="));
    assert_null(strstr(rbuf, "400 Bad Request"));
    assert_true(closed);
    assert_true(t.tv_sec - t0.tv_sec >= 1); /* not before the timeout */
    close(sv[1]);
    httpd_free(f->h);
    event_base_free(f->base);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_keepalive_two_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_and_fragmented, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunked_body_and_expect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_and_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http10_and_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_value_cannot_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_close_from_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_async_keeps_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streaming, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_close_still_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backpressure_then_resume, setup_big, teardown),
        cmocka_unit_test_setup_teardown(test_unread_replies_pause_serving, setup, teardown),
        cmocka_unit_test(test_idle_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
