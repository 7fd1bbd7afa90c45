/* bench_load - ckube's load generator for bench/run.py (a program, not a test).
 *
 * One process, one thread, epoll over non-blocking keep-alive sockets and a
 * minimal HTTP/1.1 client of our own (status line, Content-Length, chunked).
 * It only ever talks to a server on the loopback that bench/run.py started
 * (ckube, or etcd's v3 JSON gateway), so it does not try to be a general
 * HTTP client: no redirects, no proxies, no pipelining. An https:// URL
 * speaks TLS (OpenSSL, non-blocking handshakes in the same loop) with
 * --cacert, and --cert/--key for a client certificate; --new-conn makes
 * every get a new connection (a full handshake each: handshakes/s).
 *
 * Every run is bounded: by --duration and/or --count, and always by
 * --timeout (a hard wall-clock cap, default duration + 60 s). It prints ONE
 * JSON object on stdout; diagnostics go to stderr. Latencies go into a
 * log-linear histogram (128 sub-buckets per power of two, < 0.8 % error),
 * never into a sorted sample array.
 *
 * Modes:
 *   create        C connections POST unique ~1 KiB ConfigMaps (or, with
 *                 --flavour etcd, POST /v3/kv/put of the same bytes, base64)
 *                 until --count objects or --duration seconds.
 *   get           C connections GET --path. Closed loop (max throughput) by
 *                 default; with --rate R, open loop at R requests/s where a
 *                 request's latency starts at its *scheduled* send time, so
 *                 a stalled server is not hidden (no coordinated omission).
 *   watch-fanout  W watchers on ?watch=1 of --namespace from the list's
 *                 resourceVersion; a writer creates R objects/s, each
 *                 carrying its CLOCK_REALTIME send time in data.bench-ts;
 *                 every receipt records now - bench-ts.
 *   list          K connections each run --repeat full lists of --path;
 *                 per-list time from send to the last byte.
 *
 * Example: bench_load --mode get --url http://127.0.0.1:6443 \
 *              --path /api/v1/namespaces/default/configmaps/x --conns 64 --duration 5
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* ---------------------------------------------------------------- clocks */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------- histogram */

/* Values are nanoseconds. Below 2^H_SUB_BITS a bucket is one value; above,
 * each power of two [2^k, 2^(k+1)) is split into H_SUB equal buckets. */
#define H_SUB_BITS 7
#define H_SUB (1u << H_SUB_BITS)
#define H_MAX_EXP 42 /* 2^43 ns is about 2.4 hours: far beyond any run */
#define H_BUCKETS (H_SUB * (H_MAX_EXP - H_SUB_BITS + 2))

typedef struct hist {
    uint64_t c[H_BUCKETS];
    uint64_t n, min, max;
    double sum;
} hist;

static unsigned h_index(uint64_t v)
{
    if (v < H_SUB)
        return (unsigned)v;
    unsigned k = 63u - (unsigned)__builtin_clzll(v);
    if (k > H_MAX_EXP) {
        k = H_MAX_EXP;
        v = (1ull << (H_MAX_EXP + 1)) - 1;
    }
    unsigned shift = k - H_SUB_BITS;
    unsigned sub = (unsigned)(v >> shift) - H_SUB;
    return H_SUB + shift * H_SUB + sub;
}

/* The middle of bucket i (its values are within +-0.4 % of it). */
static uint64_t h_value(unsigned i)
{
    if (i < H_SUB)
        return i;
    unsigned j = i - H_SUB, shift = j / H_SUB, sub = j % H_SUB;
    uint64_t lo = (uint64_t)(H_SUB + sub) << shift;
    return lo + ((1ull << shift) >> 1);
}

static void h_add(hist *h, uint64_t v)
{
    h->c[h_index(v)]++;
    if (h->n == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->n++;
    h->sum += (double)v;
}

/* The p-th percentile (0 < p <= 100) in ns, clamped to the exact min/max. */
static uint64_t h_pct(const hist *h, double p)
{
    if (h->n == 0)
        return 0;
    uint64_t want = (uint64_t)((p / 100.0) * (double)h->n + 0.999999);
    if (want < 1)
        want = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < H_BUCKETS; i++) {
        seen += h->c[i];
        if (seen >= want) {
            uint64_t v = h_value(i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

static void print_hist_ms(const char *prefix, const hist *h)
{
    double ms = 1e6;
    printf("\"%sn\": %" PRIu64 ", \"%sp50_ms\": %.4f, \"%sp90_ms\": %.4f, \"%sp99_ms\": %.4f, "
           "\"%sp999_ms\": %.4f, \"%smax_ms\": %.4f, \"%smin_ms\": %.4f, \"%smean_ms\": %.4f",
           prefix, h->n, prefix, (double)h_pct(h, 50) / ms, prefix, (double)h_pct(h, 90) / ms,
           prefix, (double)h_pct(h, 99) / ms, prefix, (double)h_pct(h, 99.9) / ms, prefix,
           (double)h->max / ms, prefix, (double)h->min / ms, prefix,
           h->n ? h->sum / (double)h->n / ms : 0.0);
}

/* ------------------------------------------------------------ connections */

enum ps { PS_HEAD, PS_BODY_CL, PS_CHUNK_SIZE, PS_CHUNK_DATA, PS_CHUNK_CRLF, PS_TRAILER, PS_EOF };
enum role { R_REQ, R_WATCH, R_WRITER };

typedef struct conn {
    int fd;
    SSL *ssl;       /* TLS, or NULL */
    bool hs;        /* the TLS handshake is under way */
    int role;
    bool busy;      /* a request is in flight */
    bool out_armed; /* EPOLLOUT is registered */
    /* request bytes being written, owned */
    char *w;
    size_t wlen, woff, wcap;
    /* receive buffer, owned; [rpos, rlen) is unparsed */
    char *r;
    size_t rcap, rlen, rpos;
    /* response parser */
    int ps;
    int status;
    bool chunked, has_cl, conn_close;
    uint64_t remaining;
    uint64_t t0;    /* monotonic ns latency start (send or scheduled time) */
    uint64_t bytes; /* body bytes of this response */
    uint64_t items; /* list mode: objects seen in this response */
    char carry[16]; /* list mode: tail of the previous piece for matching */
    size_t carry_len;
    /* watch mode: the partial event line, owned */
    char *line;
    size_t llen, lcap;
    int left;            /* list mode: lists still to run on this connection */
    char first_err[200]; /* first bytes of a non-2xx body */
    size_t first_err_len;
} conn;

/* --------------------------------------------------------------- options */

static struct opts {
    const char *mode, *flavour, *host, *path, *ns, *prefix;
    const char *cacert, *cert, *key;
    int port, conns, watchers, writers, repeat, match_every, size;
    bool quickack, tls, new_conn;
    long count;
    double duration, warmup, rate, timeout, drain;
} o = {
    .mode = NULL,
    .flavour = "ckube",
    .host = "127.0.0.1",
    .ns = "default",
    .prefix = "bench",
    .port = 0,
    .conns = 64,
    .watchers = 1000,
    .writers = 8,
    .repeat = 1,
    .match_every = 0,
    .size = 1024,
    .count = 0,
    .duration = 0,
    .warmup = 0,
    .rate = 0,
    .timeout = 0,
    .drain = 5,
};

/* ------------------------------------------------------------ run state */

static struct state {
    int ep, tfd;
    SSL_CTX *tls;
    long handshakes; /* completed TLS handshakes */
    conn *c; /* o.conns request connections (or writers in watch mode) */
    int nc;
    conn *wc; /* watchers */
    int nw;
    uint64_t start, warm_end, end, hard_end;
    bool issuing; /* new requests may still be started */
    bool stop;
    /* counters */
    long issued, ok, err, measured;
    int last_bad_status;
    long bad_status_count;
    char first_err[256];
    hist lat;                    /* request latency (create/get/list), or write latency (watch) */
    hist wlat;                   /* watch: send -> receipt (upper bound of commit -> receipt) */
    hist flat;                   /* watch: receipt - min(ack, first receipt) (lower bound) */
    uint64_t *first_rx, *ack_at; /* watch: per object index, monotonic ns */
    long nobj;
    /* open loop */
    uint64_t interval, next_sched;
    uint64_t *backlog; /* ring of scheduled times waiting for a connection */
    size_t bl_cap, bl_head, bl_len, bl_max;
    int *free_stack;
    int free_len;
    long late_sched; /* scheduled requests that found no free connection */
    /* create */
    long next_index;
    char *pad;
    /* watch */
    long watch_headers_ok, watch_headers_bad, watch_closed, watch_errors, received, bookmarks;
    long write_ok;
    bool writing_done;
    uint64_t list_bytes, list_items_min, list_items_max;
    char rv[32];
} s;

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    (void)sig;
    got_signal = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_load: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "bench_load: out of memory\n");
        exit(1);
    }
    return q;
}

/* --------------------------------------------------------------- sockets */

static void ep_mod(conn *c, bool want_out)
{
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(s.ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl mod");
    c->out_armed = want_out;
}

static int conn_flush(conn *c);

/* Drives c's TLS handshake as far as the socket allows; once it is done,
 * sends what waits. 0, or -1 (with errno) when it failed. */
static int tls_handshake(conn *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        c->hs = false;
        s.handshakes++;
        if (c->out_armed)
            ep_mod(c, false);
        return c->woff < c->wlen ? conn_flush(c) : 0;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
        if (c->out_armed)
            ep_mod(c, false);
        return 0;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        if (!c->out_armed)
            ep_mod(c, true);
        return 0;
    }
    if (!s.first_err[0]) {
        unsigned long err = ERR_peek_last_error();
        snprintf(s.first_err, sizeof s.first_err, "TLS handshake: %s",
                 err ? ERR_reason_error_string(err) : strerror(errno));
    }
    errno = EPROTO;
    return -1;
}

/* Opens c's socket: a blocking connect (bounded by a 5 s send timeout; the
 * server is on the loopback) then non-blocking for the event loop. Returns
 * 0 or -1 with errno set. */
static int conn_open(conn *c, size_t rcap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    if (inet_pton(AF_INET, o.host, &sa.sin_addr) != 1) {
        errno = EINVAL;
        close(fd);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    if (c->rcap < rcap) {
        c->r = xrealloc(c->r, rcap);
        c->rcap = rcap;
    }
    c->rlen = c->rpos = 0;
    c->ps = PS_HEAD;
    c->busy = false;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(s.ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll_ctl add");
    c->out_armed = false;
    if (s.tls) {
        if (!(c->ssl = SSL_new(s.tls)) || SSL_set_fd(c->ssl, fd) != 1)
            die("SSL_new");
        SSL_set_connect_state(c->ssl);
        c->hs = true;
        return tls_handshake(c);
    }
    return 0;
}

static void conn_close(conn *c)
{
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
        c->hs = false;
        ERR_clear_error();
    }
    if (c->fd >= 0) {
        epoll_ctl(s.ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->busy = false;
}

static void conn_free(conn *c)
{
    conn_close(c);
    free(c->w);
    free(c->r);
    free(c->line);
}

/* Writes what it can of c's pending request; arms EPOLLOUT for the rest. */
static int conn_flush(conn *c)
{
    if (c->hs)
        return 0; /* sent when the handshake completes */
    while (c->ssl && c->woff < c->wlen) {
        ERR_clear_error();
        int n = SSL_write(c->ssl, c->w + c->woff, (int)(c->wlen - c->woff));
        if (n > 0) {
            c->woff += (size_t)n;
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
            if (!c->out_armed)
                ep_mod(c, true);
            return 0;
        }
        return -1;
    }
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->w + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->out_armed)
                ep_mod(c, true);
            return 0;
        } else {
            return -1;
        }
    }
    if (c->out_armed)
        ep_mod(c, false);
    return 0;
}

/* Starts the request already formatted in c->w; latency starts at t0. */
static int conn_send(conn *c, uint64_t t0)
{
    c->woff = 0;
    c->busy = true;
    c->ps = PS_HEAD;
    c->bytes = c->items = 0;
    c->carry_len = 0;
    c->first_err_len = 0;
    c->t0 = t0;
    return conn_flush(c);
}

/* printf into c->w (replacing it). */
static void wfmt(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wfmt(conn *c, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(c->w, c->wcap, fmt, ap);
        va_end(ap);
        if (n < 0) {
            fprintf(stderr, "bench_load: format error\n");
            exit(1);
        }
        if ((size_t)n < c->wcap) {
            c->wlen = (size_t)n;
            return;
        }
        c->wcap = (size_t)n + 1;
        c->w = xrealloc(c->w, c->wcap);
    }
}

/* ------------------------------------------------------- mode callbacks */

/* Per-mode hooks. body may be called many times per response; done once
 * per complete response (after which c is idle, and may be reused). */
static void (*on_headers)(conn *c);
static void (*on_body)(conn *c, const char *p, size_t n);
static void (*on_done)(conn *c);
static void (*on_eof)(conn *c);
static void (*on_reconnected)(conn *c);

static void parse_headers(conn *c, const char *p, size_t n)
{
    c->status = 0;
    c->chunked = c->has_cl = c->conn_close = false;
    c->remaining = 0;
    if (n > 12 && strncmp(p, "HTTP/1.", 7) == 0)
        c->status = atoi(p + 9);
    const char *end = p + n;
    const char *line = memchr(p, '\n', n);
    while (line && line + 1 < end) {
        line++;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        size_t len = eol ? (size_t)(eol - line) : (size_t)(end - line);
        if (len > 15 && strncasecmp(line, "content-length:", 15) == 0) {
            c->has_cl = true;
            c->remaining = strtoull(line + 15, NULL, 10);
        } else if (len > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0) {
            c->chunked = memmem(line, len, "chunked", 7) != NULL;
        } else if (len > 11 && strncasecmp(line, "connection:", 11) == 0) {
            c->conn_close = memmem(line, len, "close", 5) != NULL;
        }
        line = eol;
    }
}

static void deliver(conn *c, const char *p, size_t n)
{
    c->bytes += n;
    if (c->status >= 300 && c->first_err_len < sizeof c->first_err - 1) {
        size_t k = sizeof c->first_err - 1 - c->first_err_len;
        if (k > n)
            k = n;
        memcpy(c->first_err + c->first_err_len, p, k);
        c->first_err_len += k;
        c->first_err[c->first_err_len] = 0;
    }
    if (on_body)
        on_body(c, p, n);
}

static void finish(conn *c)
{
    c->busy = false;
    c->ps = PS_HEAD;
    on_done(c);
}

/* The first CRLF in p[0, n), or NULL. (A loop, not memmem: chunk-size
 * and trailer lines are short, and GCC's -Wnonnull misfires on memmem
 * here under -fsanitize=undefined.) */
static const char *find_crlf(const char *p, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i] == '\r' && p[i + 1] == '\n')
            return p + i;
    return NULL;
}

/* Parses what is buffered; calls the hooks. Returns -1 if c was closed. */
static int parse(conn *c)
{
    for (;;) {
        if (c->fd < 0)
            return -1;
        char *p = c->r + c->rpos;
        size_t avail = c->rlen - c->rpos;
        if (avail == 0)
            return 0;
        switch (c->ps) {
        case PS_HEAD: {
            char *e = memmem(p, avail, "\r\n\r\n", 4);
            if (!e)
                return 0;
            size_t hl = (size_t)(e - p) + 4;
            parse_headers(c, p, hl);
            c->rpos += hl;
            if (on_headers)
                on_headers(c);
            if ((c->status >= 100 && c->status < 200) || c->status == 204 || c->status == 304) {
                finish(c);
            } else if (c->chunked) {
                c->ps = PS_CHUNK_SIZE;
            } else if (c->has_cl) {
                c->ps = PS_BODY_CL;
                if (c->remaining == 0)
                    finish(c);
            } else {
                c->ps = PS_EOF;
            }
            break;
        }
        case PS_BODY_CL:
        case PS_CHUNK_DATA: {
            size_t n = avail < c->remaining ? avail : (size_t)c->remaining;
            c->rpos += n;
            c->remaining -= n;
            deliver(c, p, n);
            if (c->remaining == 0) {
                if (c->ps == PS_BODY_CL)
                    finish(c);
                else
                    c->ps = PS_CHUNK_CRLF;
            }
            break;
        }
        case PS_CHUNK_SIZE: {
            const char *e = find_crlf(p, avail);
            if (!e)
                return 0;
            c->remaining = strtoull(p, NULL, 16);
            c->rpos += (size_t)(e - p) + 2;
            c->ps = c->remaining ? PS_CHUNK_DATA : PS_TRAILER;
            break;
        }
        case PS_CHUNK_CRLF:
            if (avail < 2)
                return 0;
            c->rpos += 2;
            c->ps = PS_CHUNK_SIZE;
            break;
        case PS_TRAILER: {
            const char *e = find_crlf(p, avail);
            if (!e)
                return 0;
            c->rpos += (size_t)(e - p) + 2;
            if (e == p)
                finish(c);
            break;
        }
        case PS_EOF:
            c->rpos += avail;
            deliver(c, p, avail);
            break;
        }
    }
}

/* recv() through TLS when there is TLS. */
static ssize_t conn_recv(conn *c, char *buf, size_t n)
{
    if (!c->ssl)
        return recv(c->fd, buf, n, 0);
    ERR_clear_error();
    int r = SSL_read(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
    if (r > 0)
        return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    errno = ECONNRESET;
    return e == SSL_ERROR_SYSCALL ? 0 : -1;
}

static void conn_readable(conn *c)
{
    if (c->hs) {
        if (tls_handshake(c) < 0) {
            on_eof(c);
            return;
        }
        if (c->hs)
            return;
    }
    /* TLS: read until OpenSSL has nothing left (records it holds are not
     * announced by epoll again). */
    for (int rounds = 0; (rounds < 8 || c->ssl) && c->fd >= 0; rounds++) {
        if (c->rlen == c->rcap) {
            if (c->rpos > 0) {
                memmove(c->r, c->r + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            } else {
                c->rcap *= 2;
                c->r = xrealloc(c->r, c->rcap);
            }
        }
        size_t space = c->rcap - c->rlen;
        ssize_t n = conn_recv(c, c->r + c->rlen, space);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            if (c->ps == PS_EOF && c->busy) {
                /* the body ended with the connection: a complete response;
                 * the done hooks reopen a connection marked close */
                c->conn_close = true;
                finish(c);
            } else {
                on_eof(c);
            }
            return;
        }
        c->rlen += (size_t)n;
        if (o.quickack) {
            /* diagnosis only: ACK at once, so a server's Nagle-delayed
             * segment is not held for our delayed ACK (~40 ms) */
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
        }
        if (parse(c) < 0)
            return;
        if (c->rpos == c->rlen)
            c->rpos = c->rlen = 0;
        else if (c->rpos > c->rcap / 2) {
            memmove(c->r, c->r + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        /* A short read drained the socket: epoll is level-triggered and
         * will report more, so skip the recv that would only say EAGAIN
         * (one syscall less per response). */
        if ((size_t)n < space && !(c->ssl && SSL_pending(c->ssl)))
            return;
    }
}

/* ---------------------------------------------------------- accounting */

static void note_status(conn *c)
{
    s.last_bad_status = c->status;
    s.bad_status_count++;
    if (!s.first_err[0]) {
        snprintf(s.first_err, sizeof s.first_err, "HTTP %d: %s", c->status,
                 c->first_err_len ? c->first_err : "");
    }
}

/* Records the end of a request on c; true if it succeeded (2xx). */
static bool account(conn *c, uint64_t now)
{
    bool good = c->status >= 200 && c->status < 300;
    if (good)
        s.ok++;
    else {
        s.err++;
        note_status(c);
    }
    if (good && c->t0 >= s.warm_end && c->t0 < s.end) {
        h_add(&s.lat, now - c->t0);
        s.measured++;
    }
    return good;
}

/* Generic EOF handling for request connections: count the loss, reconnect
 * so the run goes on (a server may close keep-alive connections). */
static void req_eof(conn *c)
{
    if (c->busy) {
        s.err++;
        if (!s.first_err[0])
            snprintf(s.first_err, sizeof s.first_err, "connection closed mid-request");
    }
    conn_close(c);
    if (!s.issuing)
        return;
    if (conn_open(c, c->rcap) < 0) {
        if (!s.first_err[0])
            snprintf(s.first_err, sizeof s.first_err, "reconnect: %s", strerror(errno));
        return;
    }
    if (s.free_stack)
        s.free_stack[s.free_len++] = (int)(c - s.c); /* open loop: free again */
    else if (on_reconnected)
        on_reconnected(c); /* closed loop: the mode issues the next request */
}

/* ----------------------------------------------------------------- create */

/* Deterministic filler, different for every object (seeded by its
 * index), of letters and digits: not all one byte and not shared between
 * objects, so nothing downstream can accidentally win by compressing or
 * by keeping equal strings once. Fills s.pad (single-threaded). */
static void make_pad(void)
{
    s.pad = xrealloc(NULL, (size_t)o.size + 1);
    s.pad[o.size] = 0;
}

static const char *pad_for(long index)
{
    static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t x = ((uint64_t)index + 1) * 0x9E3779B97F4A7C15u;
    for (int i = 0; i < o.size;) {
        /* xorshift64*: ten base-36 digits from each 64-bit step */
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t r = x * 0x2545F4914F6CDD1Du;
        for (int k = 0; k < 10 && i < o.size; k++, r /= 36)
            s.pad[i++] = al[r % 36];
    }
    return s.pad;
}

static const char b64al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64 of src into a malloc'd string (caller frees). */
static char *b64(const char *src, size_t n)
{
    char *out = xrealloc(NULL, (n + 2) / 3 * 4 + 1), *q = out;
    const unsigned char *p = (const unsigned char *)src;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *q++ = b64al[v >> 18];
        *q++ = b64al[(v >> 12) & 63];
        *q++ = b64al[(v >> 6) & 63];
        *q++ = b64al[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *q++ = b64al[v >> 18];
        *q++ = b64al[(v >> 12) & 63];
        *q++ = i + 1 < n ? b64al[(v >> 6) & 63] : '=';
        *q++ = '=';
    }
    *q = 0;
    return out;
}

/* The ConfigMap JSON for object i into buf (malloc'd, caller frees);
 * ts_ns != 0 adds data.bench-ts (watch mode). */
static char *configmap_json(long i, uint64_t ts_ns)
{
    char labels[128] = "";
    if (o.match_every > 0)
        snprintf(labels, sizeof labels, ",\"bench-match\":\"%s\"",
                 i % o.match_every == 0 ? "true" : "false");
    char ts[80] = "";
    if (ts_ns)
        snprintf(ts, sizeof ts, "\"bench-ts\":\"%" PRIu64 "\",\"bench-i\":\"%ld\",", ts_ns, i);
    char *out = NULL;
    if (asprintf(&out,
                 "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s-%ld\","
                 "\"namespace\":\"%s\",\"labels\":{\"app\":\"bench\"%s}},"
                 "\"data\":{%s\"pad\":\"%s\"}}",
                 o.prefix, i, o.ns, labels, ts, pad_for(i)) < 0) {
        fprintf(stderr, "bench_load: out of memory\n");
        exit(1);
    }
    return out;
}

/* Formats the create request for object i into c->w. */
static void format_create(conn *c, long i, uint64_t ts_ns)
{
    char *body = configmap_json(i, ts_ns);
    size_t blen = strlen(body);
    if (strcmp(o.flavour, "etcd") == 0) {
        char key[256];
        int kl = snprintf(key, sizeof key, "/registry/configmaps/%s/%s-%ld", o.ns, o.prefix, i);
        char *k64 = b64(key, (size_t)kl), *v64 = b64(body, blen), *put = NULL;
        if (asprintf(&put, "{\"key\":\"%s\",\"value\":\"%s\"}", k64, v64) < 0) {
            fprintf(stderr, "bench_load: out of memory\n");
            exit(1);
        }
        wfmt(c,
             "POST /v3/kv/put HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: bench_load\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             o.host, o.port, strlen(put), put);
        free(k64);
        free(v64);
        free(put);
    } else {
        wfmt(c,
             "POST /api/v1/namespaces/%s/configmaps HTTP/1.1\r\nHost: %s:%d\r\n"
             "User-Agent: bench_load\r\nContent-Type: application/json\r\n"
             "Accept: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             o.ns, o.host, o.port, blen, body);
    }
    free(body);
}

static bool create_can_issue(void)
{
    if (!s.issuing)
        return false;
    if (o.count > 0 && s.next_index >= o.count)
        return false;
    if (o.duration > 0 && mono_ns() >= s.end)
        return false;
    return true;
}

static void create_next(conn *c)
{
    if (c->fd < 0 || !create_can_issue())
        return;
    format_create(c, s.next_index++, 0);
    s.issued++;
    if (conn_send(c, mono_ns()) < 0)
        req_eof(c);
}

static void create_done(conn *c)
{
    account(c, mono_ns());
    if (c->conn_close) {
        conn_close(c);
        if (conn_open(c, c->rcap) < 0)
            return;
    }
    create_next(c);
}

/* -------------------------------------------------------------------- get */

static void format_get(conn *c)
{
    wfmt(c,
         "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: bench_load\r\n"
         "Accept: application/json\r\n\r\n",
         o.path, o.host, o.port);
}

static void closed_next(conn *c)
{
    uint64_t now = mono_ns();
    if (!s.issuing || now >= s.end || (o.count > 0 && s.issued >= o.count))
        return;
    s.issued++;
    if (conn_send(c, now) < 0)
        req_eof(c);
}

static void closed_done(conn *c)
{
    account(c, mono_ns());
    if (c->conn_close || o.new_conn) {
        conn_close(c);
        if (conn_open(c, c->rcap) < 0)
            return;
    }
    closed_next(c);
}

static void bl_push(uint64_t t)
{
    if (s.bl_len == s.bl_cap) {
        size_t ncap = s.bl_cap ? s.bl_cap * 2 : 4096;
        uint64_t *nb = xrealloc(NULL, ncap * sizeof *nb);
        for (size_t i = 0; i < s.bl_len; i++)
            nb[i] = s.backlog[(s.bl_head + i) % s.bl_cap];
        free(s.backlog);
        s.backlog = nb;
        s.bl_cap = ncap;
        s.bl_head = 0;
    }
    s.backlog[(s.bl_head + s.bl_len) % s.bl_cap] = t;
    s.bl_len++;
    if (s.bl_len > s.bl_max)
        s.bl_max = s.bl_len;
}

static uint64_t bl_pop(void)
{
    uint64_t t = s.backlog[s.bl_head];
    s.bl_head = (s.bl_head + 1) % s.bl_cap;
    s.bl_len--;
    return t;
}

/* Open loop: sends the request scheduled at t on connection c. */
static void open_send(conn *c, uint64_t t)
{
    s.issued++;
    if (conn_send(c, t) < 0)
        req_eof(c);
}

static void open_done(conn *c)
{
    account(c, mono_ns());
    if (c->conn_close) {
        conn_close(c);
        if (conn_open(c, c->rcap) < 0)
            return;
    }
    if (s.bl_len > 0)
        open_send(c, bl_pop());
    else
        s.free_stack[s.free_len++] = (int)(c - s.c);
}

static void arm_timer(uint64_t at)
{
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(at / 1000000000ull),
                                          .tv_nsec = (long)(at % 1000000000ull)}};
    if (at == 0)
        its.it_value.tv_nsec = 0;
    if (timerfd_settime(s.tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
        die("timerfd_settime");
}

/* Fires every request whose scheduled time has come. `send` starts one on
 * a free connection (get: a GET; watch: a create with a timestamp). */
static void open_tick(void (*send)(conn *c, uint64_t t))
{
    uint64_t buf;
    if (read(s.tfd, &buf, sizeof buf) < 0 && errno != EAGAIN) {
        /* nothing: the timer is level-checked against the clock below */
    }
    uint64_t now = mono_ns();
    while (s.issuing && s.next_sched <= now && s.next_sched < s.end) {
        if (s.free_len > 0) {
            send(&s.c[s.free_stack[--s.free_len]], s.next_sched);
        } else {
            s.late_sched++;
            bl_push(s.next_sched);
        }
        s.next_sched += s.interval;
    }
    if (s.issuing && s.next_sched < s.end)
        arm_timer(s.next_sched);
}

/* ------------------------------------------------------------------ list */

/* Counts `"uid":"` in the stream: one per object in a list response. The
 * last few bytes of each piece are carried so a match may straddle pieces. */
static void list_body(conn *c, const char *p, size_t n)
{
    static const char pat[] = "\"uid\":\"";
    const size_t pl = sizeof pat - 1;
    if (c->carry_len) {
        char tmp[32];
        size_t k = n < pl - 1 ? n : pl - 1;
        memcpy(tmp, c->carry, c->carry_len);
        memcpy(tmp + c->carry_len, p, k);
        if (memmem(tmp, c->carry_len + k, pat, pl))
            c->items++;
    }
    const char *q = p, *end = p + n;
    while ((q = memmem(q, (size_t)(end - q), pat, pl)) != NULL) {
        c->items++;
        q += pl;
    }
    /* the new carry: the last pl - 1 bytes of (old carry + this piece) */
    if (n >= pl - 1) {
        memcpy(c->carry, end - (pl - 1), pl - 1);
        c->carry_len = pl - 1;
    } else {
        char all[32];
        size_t total = c->carry_len + n, keep;
        memcpy(all, c->carry, c->carry_len);
        memcpy(all + c->carry_len, p, n);
        keep = total < pl - 1 ? total : pl - 1;
        memcpy(c->carry, all + total - keep, keep);
        c->carry_len = keep;
    }
}

static void list_done(conn *c)
{
    uint64_t now = mono_ns();
    bool good = c->status >= 200 && c->status < 300;
    if (good) {
        s.ok++;
        h_add(&s.lat, now - c->t0);
        s.list_bytes += c->bytes;
        if (s.list_items_min == 0 || c->items < s.list_items_min)
            s.list_items_min = c->items;
        if (c->items > s.list_items_max)
            s.list_items_max = c->items;
    } else {
        s.err++;
        note_status(c);
    }
    if (c->conn_close) {
        conn_close(c);
        if (conn_open(c, c->rcap) < 0)
            return;
    }
    if (--c->left > 0 && s.issuing) {
        if (conn_send(c, mono_ns()) < 0)
            req_eof(c);
    }
}

/* ----------------------------------------------------------------- watch */

static void watch_line(const char *p, size_t n)
{
    static const char pat[] = "\"bench-ts\":\"";
    if (n >= 16 && memcmp(p, "{\"type\":\"ERROR\"", 15) == 0) {
        s.watch_errors++;
        if (!s.first_err[0])
            snprintf(s.first_err, sizeof s.first_err, "watch ERROR: %.*s", (int)(n < 200 ? n : 200),
                     p);
        return;
    }
    if (n >= 19 && memcmp(p, "{\"type\":\"BOOKMARK\"", 18) == 0) {
        s.bookmarks++;
        return;
    }
    const char *q = memmem(p, n, pat, sizeof pat - 1);
    if (!q)
        return;
    char *e;
    uint64_t ts = strtoull(q + sizeof pat - 1, &e, 10);
    uint64_t now = real_ns(), mnow = mono_ns();
    s.received++;
    h_add(&s.wlat, now > ts ? now - ts : 0);
    /* The commit happened before both the write's ack and the first
     * receipt of the object by any watcher, so now - min(those) is a lower
     * bound of commit -> receipt (exact online: both are already past). */
    static const char ipat[] = "\"bench-i\":\"";
    size_t rest = n - (size_t)(e - p);
    const char *qi = memmem(e, rest, ipat, sizeof ipat - 1);
    if (qi) {
        long i = strtol(qi + sizeof ipat - 1, NULL, 10);
        if (i >= 0 && i < s.nobj) {
            if (!s.first_rx[i])
                s.first_rx[i] = mnow;
            uint64_t ref = s.first_rx[i];
            if (s.ack_at[i] && s.ack_at[i] < ref)
                ref = s.ack_at[i];
            h_add(&s.flat, mnow - ref);
        }
    }
}

static void watch_body(conn *c, const char *p, size_t n)
{
    if (c->status != 200)
        return;
    const char *end = p + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            size_t k = (size_t)(end - p);
            if (c->llen + k > c->lcap) {
                c->lcap = (c->llen + k) * 2;
                c->line = xrealloc(c->line, c->lcap);
            }
            memcpy(c->line + c->llen, p, k);
            c->llen += k;
            return;
        }
        size_t k = (size_t)(nl - p);
        if (c->llen == 0) {
            watch_line(p, k);
        } else {
            if (c->llen + k > c->lcap) {
                c->lcap = (c->llen + k) * 2;
                c->line = xrealloc(c->line, c->lcap);
            }
            memcpy(c->line + c->llen, p, k);
            watch_line(c->line, c->llen + k);
            c->llen = 0;
        }
        p = nl + 1;
    }
}

static void watch_headers(conn *c)
{
    if (c->role != R_WATCH)
        return;
    if (c->status == 200)
        s.watch_headers_ok++;
    else {
        s.watch_headers_bad++;
        note_status(c);
    }
}

static void writer_send(conn *c, uint64_t t)
{
    (void)t;
    c->items = (uint64_t)s.next_index; /* the object index being written */
    format_create(c, s.next_index++, real_ns());
    s.issued++;
    if (conn_send(c, mono_ns()) < 0)
        req_eof(c);
}

static void watch_done(conn *c)
{
    if (c->role == R_WATCH) {
        /* a watch stream ended (timeout or error) */
        s.watch_closed++;
        conn_close(c);
        return;
    }
    uint64_t now = mono_ns();
    bool good = c->status >= 200 && c->status < 300;
    if (good) {
        s.write_ok++;
        s.ok++;
        h_add(&s.lat, now - c->t0);
        if ((long)c->items < s.nobj)
            s.ack_at[c->items] = now;
    } else {
        s.err++;
        note_status(c);
    }
    if (c->conn_close) {
        conn_close(c);
        if (conn_open(c, c->rcap) < 0)
            return;
    }
    if (s.bl_len > 0) {
        bl_pop();
        writer_send(c, 0);
    } else {
        s.free_stack[s.free_len++] = (int)(c - s.c);
    }
}

static void watch_eof(conn *c)
{
    if (c->role == R_WATCH) {
        s.watch_closed++;
        conn_close(c);
        return;
    }
    req_eof(c);
}

/* A blocking GET on a fresh socket for the list's resourceVersion. */
static int fetch_list_rv(void)
{
    conn tmp = {.fd = -1};
    if (conn_open(&tmp, 1 << 16) < 0)
        return -1;
    epoll_ctl(s.ep, EPOLL_CTL_DEL, tmp.fd, NULL);
    fcntl(tmp.fd, F_SETFL, fcntl(tmp.fd, F_GETFL) & ~O_NONBLOCK);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(tmp.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET /api/v1/namespaces/%s/configmaps?limit=1 HTTP/1.1\r\nHost: %s:%d\r\n"
                     "User-Agent: bench_load\r\nConnection: close\r\n\r\n",
                     o.ns, o.host, o.port);
    if (send(tmp.fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        conn_free(&tmp);
        return -1;
    }
    size_t len = 0;
    for (;;) {
        ssize_t k = recv(tmp.fd, tmp.r + len, tmp.rcap - len - 1, 0);
        if (k <= 0)
            break;
        len += (size_t)k;
        if (len + 1 >= tmp.rcap)
            break;
    }
    tmp.r[len] = 0;
    int rc = -1;
    const char *q = strstr(tmp.r, "\"resourceVersion\":\"");
    if (q) {
        q += 19;
        size_t i = 0;
        while (i + 1 < sizeof s.rv && q[i] >= '0' && q[i] <= '9') {
            s.rv[i] = q[i];
            i++;
        }
        s.rv[i] = 0;
        rc = i > 0 ? 0 : -1;
    }
    if (rc < 0)
        fprintf(stderr, "bench_load: no resourceVersion in: %.200s\n", tmp.r);
    conn_free(&tmp);
    return rc;
}

/* ------------------------------------------------------------ event loop */

static int tfd_tag;

static void loop_once(int timeout_ms, void (*tick)(void (*)(conn *, uint64_t)),
                      void (*send)(conn *, uint64_t))
{
    struct epoll_event evs[512];
    int n = epoll_wait(s.ep, evs, 512, timeout_ms);
    if (n < 0 && errno != EINTR)
        die("epoll_wait");
    for (int i = 0; i < n; i++) {
        if (evs[i].data.ptr == &tfd_tag) {
            if (tick)
                tick(send);
            continue;
        }
        conn *c = evs[i].data.ptr;
        if (c->fd < 0)
            continue;
        if ((evs[i].events & EPOLLOUT) && c->hs) {
            if (tls_handshake(c) < 0) {
                on_eof(c);
                continue;
            }
        }
        if ((evs[i].events & EPOLLOUT) && c->woff < c->wlen) {
            if (conn_flush(c) < 0) {
                on_eof(c);
                continue;
            }
        }
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            conn_readable(c);
    }
    if (got_signal)
        s.stop = true;
    if (mono_ns() >= s.hard_end) {
        if (!s.stop)
            fprintf(stderr, "bench_load: hard timeout reached\n");
        s.stop = true;
    }
}

static int busy_count(void)
{
    int b = 0;
    for (int i = 0; i < s.nc; i++)
        b += s.c[i].busy;
    return b;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void json_str(const char *v)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void open_conns(int n, size_t rcap)
{
    s.nc = n;
    s.c = calloc((size_t)n, sizeof *s.c);
    if (!s.c)
        die("calloc");
    for (int i = 0; i < n; i++) {
        s.c[i].fd = -1;
        s.c[i].role = R_REQ;
        if (conn_open(&s.c[i], rcap) < 0)
            die("connect");
    }
}

static void common_tail(uint64_t t_begin, double cpu0)
{
    double wall = (double)(mono_ns() - t_begin) / 1e9;
    printf(", \"errors\": %ld, \"bad_status\": %d, \"bad_status_count\": %ld, \"first_error\": ",
           s.err, s.last_bad_status, s.bad_status_count);
    json_str(s.first_err);
    printf(", \"tls_handshakes\": %ld, \"timed_out\": %s, \"wall_s\": %.3f, "
           "\"loadgen_cpu_pct\": %.1f}\n",
           s.handshakes, mono_ns() >= s.hard_end ? "true" : "false", wall,
           wall > 0 ? (cpu_seconds() - cpu0) / wall * 100.0 : 0.0);
}

/* ------------------------------------------------------------------ modes */

static void run_create(void)
{
    make_pad();
    open_conns(o.conns, 1 << 14);
    on_done = create_done;
    on_eof = req_eof;
    on_reconnected = create_next;
    double cpu0 = cpu_seconds();
    s.start = mono_ns();
    s.warm_end = s.start;
    s.end = o.duration > 0 ? s.start + (uint64_t)(o.duration * 1e9) : UINT64_MAX;
    s.hard_end = s.start + (uint64_t)(o.timeout * 1e9);
    s.issuing = true;
    for (int i = 0; i < s.nc; i++)
        create_next(&s.c[i]);
    while (!s.stop && busy_count() > 0)
        loop_once(100, NULL, NULL);
    uint64_t t1 = mono_ns();
    double secs = (double)(t1 - s.start) / 1e9;
    printf("{\"mode\": \"create\", \"flavour\": ");
    json_str(o.flavour);
    printf(", \"conns\": %d, \"size\": %d, \"issued\": %ld, \"ok\": %ld, \"seconds\": %.3f, "
           "\"per_s\": %.1f, ",
           o.conns, o.size, s.issued, s.ok, secs, secs > 0 ? (double)s.ok / secs : 0.0);
    print_hist_ms("", &s.lat);
    common_tail(s.start, cpu0);
}

static void run_get(void)
{
    bool open = o.rate > 0;
    open_conns(o.conns, 1 << 16);
    for (int i = 0; i < s.nc; i++)
        format_get(&s.c[i]);
    double cpu0 = cpu_seconds();
    s.start = mono_ns();
    s.warm_end = s.start + (uint64_t)(o.warmup * 1e9);
    s.end = s.warm_end + (uint64_t)(o.duration * 1e9);
    s.hard_end = s.start + (uint64_t)(o.timeout * 1e9);
    s.issuing = true;
    on_eof = req_eof;
    if (open) {
        on_done = open_done;
        s.free_stack = calloc(s.nc > 0 ? (size_t)s.nc : 1, sizeof(int));
        for (int i = s.nc - 1; i >= 0; i--)
            s.free_stack[s.free_len++] = i;
        s.interval = (uint64_t)(1e9 / o.rate);
        if (s.interval == 0)
            s.interval = 1;
        s.next_sched = s.start;
        arm_timer(s.next_sched);
    } else {
        on_done = closed_done;
        on_reconnected = closed_next;
        for (int i = 0; i < s.nc; i++) {
            s.issued++;
            if (conn_send(&s.c[i], s.start) < 0)
                req_eof(&s.c[i]);
        }
    }
    for (;;) {
        loop_once(open ? 50 : 100, open ? open_tick : NULL, open_send);
        if (s.stop)
            break;
        uint64_t now = mono_ns();
        if (now >= s.end) {
            if (open && s.issuing) {
                s.issuing = false;
            }
            if (busy_count() == 0 && (!open || s.bl_len == 0))
                break;
            /* give stragglers 10 s at most, then stop (they count as lost) */
            if (now >= s.end + 10000000000ull)
                break;
        }
    }
    uint64_t t1 = mono_ns();
    /* Requests still queued or in flight when we give up count with the
     * latency they have reached so far (a lower bound), so a stalled
     * server cannot hide in requests that never completed. */
    int unfinished = 0;
    for (int i = 0; i < s.nc; i++) {
        if (s.c[i].busy && s.c[i].t0 >= s.warm_end && s.c[i].t0 < s.end) {
            h_add(&s.lat, t1 - s.c[i].t0);
            unfinished++;
        }
    }
    while (s.bl_len > 0) {
        uint64_t t = bl_pop();
        if (t >= s.warm_end && t < s.end) {
            h_add(&s.lat, t1 - t);
            unfinished++;
        }
    }
    double win = (double)(s.end - s.warm_end) / 1e9;
    printf("{\"mode\": \"get\", \"loop\": \"%s\", \"conns\": %d, \"rate\": %.0f, "
           "\"issued\": %ld, \"ok\": %ld, \"seconds\": %.3f, \"per_s\": %.1f, "
           "\"late_scheduled\": %ld, \"backlog_max\": %zu, \"unfinished\": %d, ",
           open ? "open" : "closed", o.conns, o.rate, s.issued, s.ok, win,
           win > 0 ? (double)s.measured / win : 0.0, s.late_sched, s.bl_max, unfinished);
    print_hist_ms("", &s.lat);
    common_tail(s.start, cpu0);
}

static void list_resend(conn *c)
{
    if (c->left > 0 && s.issuing && !c->busy) {
        if (conn_send(c, mono_ns()) < 0)
            req_eof(c);
    }
}

static void run_list(void)
{
    open_conns(o.conns, 1 << 18);
    on_body = list_body;
    on_done = list_done;
    on_eof = req_eof;
    on_reconnected = list_resend;
    double cpu0 = cpu_seconds();
    s.start = mono_ns();
    s.warm_end = s.start;
    s.end = UINT64_MAX;
    s.hard_end = s.start + (uint64_t)(o.timeout * 1e9);
    s.issuing = true;
    for (int i = 0; i < s.nc; i++) {
        format_get(&s.c[i]);
        s.c[i].left = o.repeat;
        s.issued++;
        if (conn_send(&s.c[i], s.start) < 0)
            req_eof(&s.c[i]);
    }
    /* each connection runs `repeat` lists back to back (list_done re-sends) */
    while (!s.stop && busy_count() > 0)
        loop_once(100, NULL, NULL);
    double secs = (double)(mono_ns() - s.start) / 1e9;
    printf("{\"mode\": \"list\", \"path\": ");
    json_str(o.path);
    printf(", \"conns\": %d, \"repeat\": %d, \"ok\": %ld, \"seconds\": %.3f, "
           "\"bytes_per_list\": %.0f, \"items_min\": %" PRIu64 ", \"items_max\": %" PRIu64 ", ",
           o.conns, o.repeat, s.ok, secs, s.ok ? (double)s.list_bytes / (double)s.ok : 0.0,
           s.list_items_min, s.list_items_max);
    print_hist_ms("", &s.lat);
    common_tail(s.start, cpu0);
}

static void run_watch(void)
{
    make_pad();
    if (fetch_list_rv() < 0) {
        printf("{\"mode\": \"watch-fanout\", \"error\": \"could not read the list's "
               "resourceVersion\"}\n");
        exit(1);
    }
    on_headers = watch_headers;
    on_body = watch_body;
    on_done = watch_done;
    on_eof = watch_eof;
    double cpu0 = cpu_seconds();
    uint64_t t_begin = mono_ns();
    s.hard_end = t_begin + (uint64_t)(o.timeout * 1e9);
    s.issuing = true;

    /* watchers: connect and send all the watch requests, then wait until
     * every one has its 200 headers (or 30 s) before writing */
    s.nw = o.watchers;
    s.wc = calloc((size_t)s.nw, sizeof *s.wc);
    if (!s.wc)
        die("calloc");
    long wtimeout = (long)(o.duration + o.drain + 60);
    int opened = 0;
    for (int i = 0; i < s.nw; i++) {
        conn *c = &s.wc[i];
        c->fd = -1;
        c->role = R_WATCH;
        if (conn_open(c, 1 << 14) < 0) {
            fprintf(stderr, "bench_load: watcher %d: connect: %s\n", i, strerror(errno));
            break;
        }
        opened++;
        wfmt(
            c,
            "GET /api/v1/namespaces/%s/configmaps?watch=1&resourceVersion=%s&timeoutSeconds=%ld "
            "HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: bench_load\r\nAccept: application/json\r\n\r\n",
            o.ns, s.rv, wtimeout, o.host, o.port);
        if (conn_send(c, mono_ns()) < 0)
            conn_close(c);
        if (i % 64 == 63)
            loop_once(0, NULL, NULL);
    }
    uint64_t wait_end = mono_ns() + 30000000000ull;
    while (!s.stop && s.watch_headers_ok + s.watch_headers_bad < opened && mono_ns() < wait_end)
        loop_once(10, NULL, NULL);
    uint64_t t_ready = mono_ns();
    /* a short settle so every watch is registered in its loop */
    while (!s.stop && mono_ns() < t_ready + 200000000ull)
        loop_once(10, NULL, NULL);

    /* writers: open loop at o.rate creates/s */
    open_conns(o.writers, 1 << 14);
    for (int i = 0; i < s.nc; i++)
        s.c[i].role = R_WRITER;
    s.free_stack = calloc(s.nc > 0 ? (size_t)s.nc : 1, sizeof(int));
    for (int i = s.nc - 1; i >= 0; i--)
        s.free_stack[s.free_len++] = i;
    s.nobj = (long)(o.duration * (o.rate > 0 ? o.rate : 100) * 2) + 1024;
    s.first_rx = calloc((size_t)s.nobj, sizeof(uint64_t));
    s.ack_at = calloc((size_t)s.nobj, sizeof(uint64_t));
    if (!s.first_rx || !s.ack_at)
        die("calloc");
    s.start = mono_ns();
    s.warm_end = s.start;
    s.end = s.start + (uint64_t)(o.duration * 1e9);
    s.interval = (uint64_t)(1e9 / (o.rate > 0 ? o.rate : 100));
    s.next_sched = s.start;
    arm_timer(s.next_sched);
    while (!s.stop) {
        loop_once(20, open_tick, writer_send);
        if (mono_ns() >= s.end && s.bl_len == 0 && busy_count() == 0)
            break;
        if (mono_ns() >= s.end + 10000000000ull)
            break;
    }
    s.issuing = false;
    uint64_t t_written = mono_ns();
    long expected = s.write_ok * (long)s.watch_headers_ok;
    uint64_t drain_end = t_written + (uint64_t)(o.drain * 1e9);
    while (!s.stop && s.received < expected && mono_ns() < drain_end)
        loop_once(10, NULL, NULL);
    double write_secs = (double)(t_written - s.start) / 1e9;
    printf("{\"mode\": \"watch-fanout\", \"watchers\": %d, \"watchers_ok\": %ld, "
           "\"watchers_closed\": %ld, \"watch_errors\": %ld, \"connect_s\": %.3f, "
           "\"rate\": %.1f, \"writes_ok\": %ld, \"write_seconds\": %.3f, \"writes_per_s\": %.1f, "
           "\"late_scheduled\": %ld, \"expected\": %ld, \"received\": %ld, \"bookmarks\": %ld, "
           "\"drain_s\": %.3f, ",
           opened, s.watch_headers_ok, s.watch_closed, s.watch_errors,
           (double)(t_ready - t_begin) / 1e9, o.rate, s.write_ok, write_secs,
           write_secs > 0 ? (double)s.write_ok / write_secs : 0.0, s.late_sched, expected,
           s.received, s.bookmarks, (double)(mono_ns() - t_written) / 1e9);
    print_hist_ms("", &s.flat);
    printf(", ");
    print_hist_ms("e2e_", &s.wlat);
    printf(", ");
    print_hist_ms("write_", &s.lat);
    common_tail(t_begin, cpu0);
    for (int i = 0; i < s.nw; i++)
        conn_free(&s.wc[i]);
    free(s.wc);
    free(s.first_rx);
    free(s.ack_at);
}

/* ------------------------------------------------------------------- main */

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_load --mode create|get|list|watch-fanout --url http://127.0.0.1:PORT\n"
            "  [--path P] [--namespace NS] [--prefix NAME] [--flavour ckube|etcd]\n"
            "  [--conns C] [--count N] [--duration S] [--warmup S] [--rate R/s]\n"
            "  [--size BYTES] [--match-every M] [--repeat K] [--watchers W] [--writers N]\n"
            "  [--drain S] [--timeout S] [--quickack]\n"
            "  [--cacert FILE] [--cert FILE --key FILE] [--new-conn]   (https:// URLs)\n");
    exit(2);
}

static void parse_url(const char *url)
{
    static char host[64];
    const char *p = url;
    if (strncmp(p, "http://", 7) == 0)
        p += 7;
    else if (strncmp(p, "https://", 8) == 0) {
        p += 8;
        o.tls = true;
    }
    const char *colon = strchr(p, ':');
    if (!colon || (size_t)(colon - p) >= sizeof host)
        usage();
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = 0;
    o.host = host;
    o.port = atoi(colon + 1);
    if (o.port <= 0 || o.port > 65535)
        usage();
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"mode", required_argument, NULL, 'm'},
        {"url", required_argument, NULL, 'u'},
        {"path", required_argument, NULL, 'p'},
        {"namespace", required_argument, NULL, 'n'},
        {"prefix", required_argument, NULL, 'P'},
        {"flavour", required_argument, NULL, 'f'},
        {"conns", required_argument, NULL, 'c'},
        {"count", required_argument, NULL, 'N'},
        {"duration", required_argument, NULL, 'd'},
        {"warmup", required_argument, NULL, 'W'},
        {"rate", required_argument, NULL, 'r'},
        {"size", required_argument, NULL, 's'},
        {"match-every", required_argument, NULL, 'M'},
        {"repeat", required_argument, NULL, 'k'},
        {"watchers", required_argument, NULL, 'w'},
        {"writers", required_argument, NULL, 'x'},
        {"drain", required_argument, NULL, 'D'},
        {"timeout", required_argument, NULL, 't'},
        {"quickack", no_argument, NULL, 'Q'},
        {"cacert", required_argument, NULL, 'A'},
        {"cert", required_argument, NULL, 'C'},
        {"key", required_argument, NULL, 'K'},
        {"new-conn", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    bool have_url = false;
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            o.mode = optarg;
            break;
        case 'u':
            parse_url(optarg);
            have_url = true;
            break;
        case 'p':
            o.path = optarg;
            break;
        case 'n':
            o.ns = optarg;
            break;
        case 'P':
            o.prefix = optarg;
            break;
        case 'f':
            o.flavour = optarg;
            break;
        case 'c':
            o.conns = atoi(optarg);
            break;
        case 'N':
            o.count = atol(optarg);
            break;
        case 'd':
            o.duration = atof(optarg);
            break;
        case 'W':
            o.warmup = atof(optarg);
            break;
        case 'r':
            o.rate = atof(optarg);
            break;
        case 's':
            o.size = atoi(optarg);
            break;
        case 'M':
            o.match_every = atoi(optarg);
            break;
        case 'k':
            o.repeat = atoi(optarg);
            break;
        case 'w':
            o.watchers = atoi(optarg);
            break;
        case 'x':
            o.writers = atoi(optarg);
            break;
        case 'D':
            o.drain = atof(optarg);
            break;
        case 't':
            o.timeout = atof(optarg);
            break;
        case 'Q':
            o.quickack = true;
            break;
        case 'A':
            o.cacert = optarg;
            break;
        case 'C':
            o.cert = optarg;
            break;
        case 'K':
            o.key = optarg;
            break;
        case 'R':
            o.new_conn = true;
            break;
        default:
            usage();
        }
    }
    if (!o.mode || !have_url || o.conns < 1 || o.conns > 10000 || o.size < 0 || o.repeat < 1 ||
        o.watchers < 0 || o.writers < 1)
        usage();
    bool is_create = strcmp(o.mode, "create") == 0, is_get = strcmp(o.mode, "get") == 0;
    bool is_list = strcmp(o.mode, "list") == 0, is_watch = strcmp(o.mode, "watch-fanout") == 0;
    if (!is_create && !is_get && !is_list && !is_watch)
        usage();
    if ((is_get || is_list) && !o.path)
        usage();
    if (is_create && o.count <= 0 && o.duration <= 0)
        usage();
    if ((is_get || is_watch) && o.duration <= 0)
        usage();
    if (o.timeout <= 0)
        o.timeout = o.duration + o.warmup + o.drain + 60;

    /* 1000 watchers + writers need more descriptors than the usual 1024 */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    if (o.tls) {
        /* Full handshakes every time (no session reuse): what a new client
         * costs. */
        s.tls = SSL_CTX_new(TLS_client_method());
        if (!s.tls)
            die("SSL_CTX_new");
        SSL_CTX_set_session_cache_mode(s.tls, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(s.tls, SSL_OP_NO_TICKET);
        SSL_CTX_set_mode(s.tls, SSL_MODE_ENABLE_PARTIAL_WRITE);
        SSL_CTX_set_verify(s.tls, SSL_VERIFY_PEER, NULL);
        if (o.cacert && SSL_CTX_load_verify_locations(s.tls, o.cacert, NULL) != 1) {
            fprintf(stderr, "bench_load: cannot load %s\n", o.cacert);
            exit(2);
        }
        if (o.cert && (SSL_CTX_use_certificate_chain_file(s.tls, o.cert) != 1 ||
                       SSL_CTX_use_PrivateKey_file(s.tls, o.key ? o.key : o.cert,
                                                   SSL_FILETYPE_PEM) != 1)) {
            fprintf(stderr, "bench_load: cannot load the client certificate %s\n", o.cert);
            exit(2);
        }
    }
    s.ep = epoll_create1(EPOLL_CLOEXEC);
    if (s.ep < 0)
        die("epoll_create1");
    s.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (s.tfd < 0)
        die("timerfd_create");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tfd_tag};
    if (epoll_ctl(s.ep, EPOLL_CTL_ADD, s.tfd, &ev) < 0)
        die("epoll_ctl timer");

    if (is_create)
        run_create();
    else if (is_get)
        run_get();
    else if (is_list)
        run_list();
    else
        run_watch();
    fflush(stdout);

    for (int i = 0; i < s.nc; i++)
        conn_free(&s.c[i]);
    free(s.c);
    free(s.free_stack);
    free(s.backlog);
    free(s.pad);
    close(s.tfd);
    close(s.ep);
    SSL_CTX_free(s.tls);
    return 0;
}
