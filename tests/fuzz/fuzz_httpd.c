/* Fuzzes the server's HTTP/1.1 layer (src/apiserver/httpd.c): any bytes as
 * what a client sends on one connection, written in pieces whose size the
 * first byte picks, so requests, headers and bodies arrive split at every
 * point. The handler answers at once, later (paths with "async": a reply
 * that holds back pipelined requests) or as a stream ("stream"). Checks:
 * no crash, leak or sanitizer report, and the connection is always freed. */
#include <event2/buffer.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apiserver/httpd/httpd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HELD 4

static struct event_base *base;
static httpd *server;
static httpd_req *held[MAX_HELD];
static int nheld;

static void reply(httpd_req *r, int code)
{
    struct evbuffer *b = evbuffer_new();
    const char *host = httpd_req_header(r, "Host");
    evbuffer_add_printf(b, "%s %s host=%s body=%zu", httpd_req_method_name(r),
                        httpd_req_target(r), host ? host : "-",
                        evbuffer_get_length(httpd_req_body(r)));
    httpd_add_header(r, "Content-Type", "text/plain");
    httpd_send_reply(r, code, b);
    evbuffer_free(b);
}

static void on_closed(httpd_req *r, void *arg)
{
    (void)r;
    (void)arg;
}

static void handler(httpd_req *r, void *arg)
{
    (void)arg;
    const char *t = httpd_req_target(r);
    if (httpd_req_body_too_large(r)) {
        reply(r, 413);
    } else if (strstr(t, "async") && nheld < MAX_HELD) {
        held[nheld++] = r;
    } else if (strstr(t, "stream")) {
        httpd_send_start(r, 200, on_closed, NULL, NULL);
        struct evbuffer *b = evbuffer_new();
        evbuffer_add(b, t, strlen(t));
        httpd_send_chunk(r, b);
        evbuffer_free(b);
        httpd_send_end(r);
    } else {
        reply(r, strstr(t, "close") ? 201 : 200);
    }
}

static void release_held(void)
{
    for (int i = 0; i < nheld; i++)
        reply(held[i], 202);
    nheld = 0;
}

static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof buf) > 0)
        ;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base) {
        signal(SIGPIPE, SIG_IGN); /* as the server does (httpd.h) */
        base = event_base_new();
        httpd_config cfg = {.max_body = 4096, .idle_timeout = 3600};
        server = httpd_new(base, -1, &cfg, handler, NULL);
        if (!base || !server)
            abort();
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    if (httpd_adopt(server, sv[0]) != 0)
        abort();
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    size_t piece = size ? (size_t)(data[0] % 64) + 1 : 1;
    size_t off = size ? 1 : 0;
    for (int stuck = 0; off < size && stuck < 20;) {
        size_t n = size - off < piece ? size - off : piece;
        ssize_t w = write(sv[1], data + off, n);
        if (w > 0) {
            off += (size_t)w;
            stuck = 0;
        } else if (errno == EPIPE || errno == ECONNRESET) {
            break; /* the server closed the connection */
        } else {
            stuck++;
            release_held(); /* the server stopped reading behind a held reply */
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        drain(sv[1]);
    }
    release_held();
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; i < 200; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        release_held();
        char c;
        ssize_t n = read(sv[1], &c, 1);
        if (n == 0)
            break; /* the server closed its end */
        drain(sv[1]);
    }
    close(sv[1]);
    for (int i = 0; i < 4; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
    if (fcntl(sv[0], F_GETFD) != -1)
        abort(); /* the connection outlived its client */
    return 0;
}
