/* bench_fanout_floor - the watch fan-out's peer: an HTTP server that does
 * nothing but forward each POSTed body to every open watch (a program for
 * bench/run.py, not a test, and not an API server).
 *
 * What a watch fan-out costs is mostly not the server's code: on the
 * loopback each delivery is a TCP send whose receive side (and the wake of
 * the reader) also runs on the sending CPU, and the load generator that
 * reads 10,000 sockets shares the machine's CPUs. This program measures
 * that floor with the same client: bench_load --mode watch-fanout runs
 * against it unchanged, and what it does per event is the least any
 * server could do: no storage, no JSON, no filters, no encoding beyond one
 * chunk shared by all watchers, one send() per watcher per event.
 *
 * It shapes itself like ckube's HTTP side so the two are comparable: T
 * threads (default as ckube: one per online CPU, 1 to 4), each with its
 * own epoll loop accepting from the one listening socket and owning the
 * connections it accepted; a POST hands its event to every thread (an
 * eventfd wake each, as the cacher wakes ckube's loops), and each thread
 * sends it to its own watchers, queueing what a socket does not take.
 *
 * The wire is just enough of HTTP/1.1 for bench_load: keep-alive requests
 * with Content-Length bodies; a GET with "watch=1" in its target gets a
 * chunked 200 and then one chunk per event, `{"type":"ADDED","object":
 * BODY,"pad":"..."}` plus a newline (--extra bytes of pad stand for the
 * metadata a real server adds: uid, resourceVersion, managedFields); any
 * other GET gets an empty list with resourceVersion "1"; a POST gets 201
 * and its body back. Anything else closes the connection.
 *
 * Bounded: it exits after --timeout seconds (default 600), on SIGTERM or
 * SIGINT, and when its parent dies. Listens on 127.0.0.1 only.
 *
 * Usage: bench_fanout_floor --port P [--threads T] [--extra BYTES] [--timeout S]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_THREADS 16
#define RING 4096 /* events kept for threads that have not sent them yet */

/* One event's chunk, framing included, shared by every watcher. */
typedef struct {
    char *bytes;
    size_t len;
    atomic_int refs; /* threads that have not sent it yet */
} chunk;

typedef struct conn {
    int fd;
    bool watch;
    bool close_after; /* Connection: close: shut once the reply is out */
    char *in;
    size_t inlen, incap;
    char *out; /* what the socket has not taken yet */
    size_t outlen, outcap;
    struct conn *next_watch;
    struct conn *next_dead; /* closed during this turn of the loop */
} conn;

typedef struct {
    pthread_t th;
    int ep, wake;
    conn *watchers;
    conn *dead;    /* closed, freed after the turn (epoll may still name them) */
    uint64_t seen; /* events sent up to (ring sequence) */
} worker;

static struct {
    int listen_fd, nthreads;
    size_t extra;
    worker w[MAX_THREADS];
    pthread_mutex_t mu; /* guards ring and seq */
    chunk *ring[RING];
    uint64_t seq; /* events published */
    volatile sig_atomic_t stop;
} g;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p)
        die("realloc");
    return p;
}

static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n > *cap) {
        *cap = (*len + n) * 2;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
}

static void conn_close(worker *w, conn *c)
{
    if (c->watch) {
        for (conn **pp = &w->watchers; *pp; pp = &(*pp)->next_watch)
            if (*pp == c) {
                *pp = c->next_watch;
                break;
            }
    }
    epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->next_dead = w->dead;
    w->dead = c;
}

static void bury(worker *w)
{
    while (w->dead) {
        conn *c = w->dead;
        w->dead = c->next_dead;
        free(c->in);
        free(c->out);
        free(c);
    }
}

/* Writes what is queued; -1 if the connection broke. */
static int conn_flush(worker *w, conn *c)
{
    while (c->outlen > 0) {
        ssize_t n = send(c->fd, c->out, c->outlen, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0)
            return -1;
        memmove(c->out, c->out + n, c->outlen - (size_t)n);
        c->outlen -= (size_t)n;
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->outlen ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
    if (c->outlen == 0 && c->close_after)
        return -1;
    return 0;
}

/* Sends p straight to the socket when nothing is queued (the usual case),
 * queueing the rest; -1 if the connection broke. */
static int conn_write(worker *w, conn *c, const char *p, size_t n)
{
    if (c->outlen == 0) {
        ssize_t k = send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        }
        if (n == 0)
            return 0;
    }
    append(&c->out, &c->outlen, &c->outcap, p, n);
    return conn_flush(w, c);
}

/* Makes an event of a POSTed body and hands it to every thread. */
static void publish(const char *body, size_t blen)
{
    static const char head[] = "{\"type\":\"ADDED\",\"object\":";
    static const char padk[] = ",\"pad\":\"";
    size_t line = sizeof head - 1 + blen + sizeof padk - 1 + g.extra + 3; /* "}\n */
    char hex[24];
    int hl = snprintf(hex, sizeof hex, "%zx\r\n", line);
    chunk *ch = malloc(sizeof *ch);
    if (!ch)
        die("malloc");
    ch->len = (size_t)hl + line + 2;
    ch->bytes = malloc(ch->len);
    if (!ch->bytes)
        die("malloc");
    char *p = ch->bytes;
    memcpy(p, hex, (size_t)hl), p += hl;
    memcpy(p, head, sizeof head - 1), p += sizeof head - 1;
    memcpy(p, body, blen), p += blen;
    memcpy(p, padk, sizeof padk - 1), p += sizeof padk - 1;
    memset(p, 'x', g.extra), p += g.extra;
    memcpy(p, "\"}\n\r\n", 5);
    atomic_init(&ch->refs, g.nthreads);
    pthread_mutex_lock(&g.mu);
    chunk *old = g.ring[g.seq % RING];
    g.ring[g.seq % RING] = ch;
    g.seq++;
    pthread_mutex_unlock(&g.mu);
    if (old) /* a thread RING events behind: it has lost them (not expected at bench rates) */
        fprintf(stderr, "bench_fanout_floor: ring overrun\n");
    uint64_t one = 1;
    for (int i = 0; i < g.nthreads; i++)
        if (write(g.w[i].wake, &one, sizeof one) < 0)
            die("write eventfd");
}

/* Sends the events this thread has not sent yet to each of its watchers. */
static void fan_out(worker *w)
{
    for (;;) {
        pthread_mutex_lock(&g.mu);
        chunk *ch = w->seen < g.seq ? g.ring[w->seen % RING] : NULL;
        pthread_mutex_unlock(&g.mu);
        if (!ch)
            return;
        for (conn *c = w->watchers, *next; c; c = next) {
            next = c->next_watch;
            if (conn_write(w, c, ch->bytes, ch->len) < 0)
                conn_close(w, c);
        }
        w->seen++;
        if (atomic_fetch_sub(&ch->refs, 1) == 1) {
            pthread_mutex_lock(&g.mu);
            for (size_t i = 0; i < RING; i++)
                if (g.ring[i] == ch)
                    g.ring[i] = NULL;
            pthread_mutex_unlock(&g.mu);
            free(ch->bytes);
            free(ch);
        }
    }
}

static size_t header_value(const char *head, size_t hlen, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = head; p && p < head + hlen;
         p = memchr(p, '\n', (size_t)(head + hlen - p))) {
        if (*p == '\n')
            p++;
        if ((size_t)(head + hlen - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1, *e = memchr(v, '\r', (size_t)(head + hlen - v));
            while (v < e && *v == ' ')
                v++;
            size_t n = e ? (size_t)(e - v) : 0;
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return n;
        }
    }
    return 0;
}

/* Answers every complete request in c->in; -1 to close. */
static int serve(worker *w, conn *c)
{
    for (;;) {
        char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);
        if (!end)
            return 0;
        size_t hlen = (size_t)(end - c->in) + 4;
        char v[64];
        size_t body =
            header_value(c->in, hlen, "Content-Length", v, sizeof v) ? strtoul(v, NULL, 10) : 0;
        if (c->inlen < hlen + body)
            return 0;
        if (header_value(c->in, hlen, "Connection", v, sizeof v) && strcasecmp(v, "close") == 0)
            c->close_after = true;
        char *line_end = memchr(c->in, '\r', hlen);
        int rc = 0;
        if (hlen > 5 && memcmp(c->in, "POST ", 5) == 0) {
            char head[128];
            int n = snprintf(head, sizeof head,
                             "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                             "Content-Length: %zu\r\n\r\n",
                             body);
            publish(c->in + hlen, body);
            rc = conn_write(w, c, head, (size_t)n);
            if (rc == 0)
                rc = conn_write(w, c, c->in + hlen, body);
        } else if (hlen > 4 && memcmp(c->in, "GET ", 4) == 0 && !c->watch) {
            if (memmem(c->in, (size_t)(line_end - c->in), "watch=1", 7)) {
                static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                        "Transfer-Encoding: chunked\r\n\r\n";
                c->watch = true;
                c->next_watch = w->watchers;
                w->watchers = c; /* joins the thread's next fan-out */
                rc = conn_write(w, c, h, sizeof h - 1);
            } else {
                static const char list[] = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
                                           "\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[]}";
                char head[160];
                int n = snprintf(head, sizeof head,
                                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "Content-Length: %zu\r\n\r\n%s",
                                 sizeof list - 1, list);
                rc = conn_write(w, c, head, (size_t)n);
            }
        } else {
            return -1;
        }
        memmove(c->in, c->in + hlen + body, c->inlen - hlen - body);
        c->inlen -= hlen + body;
        if (rc < 0 || (c->close_after && c->outlen == 0))
            return -1; /* (with output queued, conn_flush closes once it is out) */
    }
}

static void on_readable(worker *w, conn *c)
{
    for (;;) {
        if (c->incap - c->inlen < 4096) {
            c->incap = c->incap ? c->incap * 2 : 16384;
            c->in = xrealloc(c->in, c->incap);
        }
        ssize_t n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0 || (c->inlen += (size_t)n, serve(w, c) < 0)) {
            conn_close(w, c);
            return;
        }
    }
}

static void on_accept(worker *w)
{
    for (;;) {
        int fd = accept4(g.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN: another thread took it, or none left */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = calloc(1, sizeof *c);
        if (!c)
            die("calloc");
        c->fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
}

static int listen_tag, wake_tag;

static void *worker_main(void *arg)
{
    worker *w = arg;
    struct epoll_event evs[256];
    while (!g.stop) {
        int n = epoll_wait(w->ep, evs, 256, 200);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &listen_tag) {
                on_accept(w);
            } else if (p == &wake_tag) {
                uint64_t k;
                if (read(w->wake, &k, sizeof k) < 0 && errno != EAGAIN)
                    die("read eventfd");
                fan_out(w);
            } else {
                conn *c = p;
                if (c->fd < 0)
                    continue; /* closed earlier in this turn */
                if ((evs[i].events & EPOLLOUT) && conn_flush(w, c) < 0) {
                    conn_close(w, c);
                    continue;
                }
                if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                    on_readable(w, c);
            }
        }
        bury(w);
    }
    return NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    g.stop = 1;
}

int main(int argc, char **argv)
{
    int port = 0, threads = 0;
    long timeout = 600;
    g.extra = 350;
    static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"extra", required_argument, NULL, 'x'},
                                         {"timeout", required_argument, NULL, 'T'},
                                         {NULL, 0, NULL, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (ch == 'p')
            port = atoi(optarg);
        else if (ch == 't')
            threads = atoi(optarg);
        else if (ch == 'x')
            g.extra = strtoul(optarg, NULL, 10);
        else if (ch == 'T')
            timeout = atol(optarg);
        else {
            fprintf(stderr, "usage: bench_fanout_floor --port P [--threads T] [--extra BYTES] "
                            "[--timeout S]\n");
            return 2;
        }
    }
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "bench_fanout_floor: --port is required\n");
        return 2;
    }
    if (threads <= 0) { /* as ckube sizes its loops */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus < 1 ? 1 : cpus > 4 ? 4 : (int)cpus;
    }
    g.nthreads = threads > MAX_THREADS ? MAX_THREADS : threads;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { /* 10,000 watchers */
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    pthread_mutex_init(&g.mu, NULL);
    g.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(g.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(g.listen_fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (listen(g.listen_fd, 4096) < 0)
        die("listen");
    for (int i = 0; i < g.nthreads; i++) {
        worker *w = &g.w[i];
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->ep < 0 || w->wake < 0)
            die("epoll/eventfd");
        struct epoll_event le = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_tag};
        struct epoll_event we = {.events = EPOLLIN, .data.ptr = &wake_tag};
        if (epoll_ctl(w->ep, EPOLL_CTL_ADD, g.listen_fd, &le) < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->wake, &we) < 0)
            die("epoll_ctl");
        if (pthread_create(&w->th, NULL, worker_main, w) != 0)
            die("pthread_create");
    }
    for (long t = 0; t < timeout * 10 && !g.stop; t++)
        usleep(100000);
    g.stop = 1;
    for (int i = 0; i < g.nthreads; i++)
        pthread_join(g.w[i].th, NULL);
    return 0;
}
