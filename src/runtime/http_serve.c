/* http_serve.c - an evhttp server on a thread of its own (see
 * http_serve.h), with an optional pool of workers for deferred work.
 *
 * Deferred work travels as a job: queued by the loop (todo), taken by a
 * worker, put on the finished list (done) and the loop woken through the
 * pipe; the loop then calls each job's done, which answers. Both lists
 * are under one mutex; only the loop touches libevent. */
#include "runtime/http_serve.h"

#include "common/text.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One listener: its own evhttp (callbacks and limits are per evhttp). */
typedef struct listener {
    struct evhttp *http;
    serving_cert *tls; /* borrowed */
    struct listener *next;
} listener;

/* A deferred request (http_serve_defer). */
typedef struct job {
    struct evhttp_request *req;
    http_work_fn work;
    http_done_fn done;
    void *arg;
    struct job *next;
} job;

/* A FIFO of jobs. */
typedef struct job_list {
    job *head, **tail;
} job_list;

struct http_serve {
    char name[16];
    struct event_base *base;
    struct event *wake;
    int pipe[2]; /* wakes the loop: to stop, or to answer finished jobs */
    listener *listeners;
    pthread_t thread;
    bool running;
    atomic_bool stopping; /* set before the stop's wake-up */

    /* the workers: mu guards todo, done, quit */
    unsigned nworkers;  /* asked for */
    pthread_t *workers; /* while running: nstarted of them */
    unsigned nstarted;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* todo has a job, or quit */
    job_list todo, done;
    bool quit;
};

static void jobs_init(job_list *l)
{
    l->head = NULL;
    l->tail = &l->head;
}

static void jobs_push(job_list *l, job *j)
{
    j->next = NULL;
    *l->tail = j;
    l->tail = &j->next;
}

/* Takes the whole list. */
static job *jobs_take(job_list *l)
{
    job *j = l->head;
    jobs_init(l);
    return j;
}

static void wake_loop(http_serve *h)
{
    ssize_t w = write(h->pipe[1], "x", 1);
    (void)w; /* a full pipe already wakes it */
}

/* The loop's side of finished jobs: answers them, in the order they
 * finished. */
static void answer_done(http_serve *h)
{
    pthread_mutex_lock(&h->mu);
    job *j = jobs_take(&h->done);
    pthread_mutex_unlock(&h->mu);
    while (j) {
        job *next = j->next;
        j->done(j->req, j->arg);
        free(j);
        j = next;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    http_serve *h = arg;
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    if (atomic_load(&h->stopping))
        event_base_loopbreak(h->base);
    else
        answer_done(h);
}

static void *worker_main(void *arg)
{
    http_serve *h = arg;
    pthread_setname_np(pthread_self(), h->name);
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->quit && !h->todo.head)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->quit)
            break;
        job *j = h->todo.head;
        h->todo.head = j->next;
        if (!h->todo.head)
            h->todo.tail = &h->todo.head;
        pthread_mutex_unlock(&h->mu);
        j->work(j->arg);
        pthread_mutex_lock(&h->mu);
        bool first = !h->done.head;
        jobs_push(&h->done, j);
        if (first) /* one byte per batch: the loop takes the whole list */
            wake_loop(h);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int http_serve_set_workers(http_serve *h, unsigned n)
{
    if (h->running || n > HTTP_SERVE_MAX_WORKERS)
        return -1;
    h->nworkers = n;
    return 0;
}

void http_serve_defer(http_serve *h, struct evhttp_request *req, http_work_fn work,
                      http_done_fn done, void *arg)
{
    job *j = h->workers ? malloc(sizeof *j) : NULL;
    if (!j) {
        work(arg);
        done(req, arg);
        return;
    }
    *j = (job){.req = req, .work = work, .done = done, .arg = arg};
    pthread_mutex_lock(&h->mu);
    jobs_push(&h->todo, j);
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Stops and joins the workers (each ends the work it runs), then ends
 * every job not answered: the server's own answer to its request, done
 * with NULL. The loop is not running. */
static void stop_workers(http_serve *h)
{
    if (!h->workers)
        return;
    pthread_mutex_lock(&h->mu);
    h->quit = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    for (unsigned i = 0; i < h->nstarted; i++)
        pthread_join(h->workers[i], NULL);
    free(h->workers);
    h->workers = NULL;
    h->nstarted = 0;
    h->quit = false;
    job *lists[] = {jobs_take(&h->todo), jobs_take(&h->done)};
    for (size_t i = 0; i < 2; i++)
        for (job *j = lists[i], *next; j; j = next) {
            next = j->next;
            /* frees a request whose client went away; otherwise queues
             * an answer that evhttp_free discards with the connection */
            evhttp_send_error(j->req, 503, NULL);
            j->done(NULL, j->arg);
            free(j);
        }
}

http_serve *http_serve_new(const char *thread_name)
{
    http_serve *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    snprintf(h->name, sizeof h->name, "%s", thread_name ? thread_name : "ckube-http");
    h->pipe[0] = h->pipe[1] = -1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    jobs_init(&h->todo);
    jobs_init(&h->done);
    h->base = event_base_new();
    if (!h->base || pipe2(h->pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        http_serve_free(h);
        return NULL;
    }
    h->wake = event_new(h->base, h->pipe[0], EV_READ | EV_PERSIST, on_wake, h);
    if (!h->wake || event_add(h->wake, NULL) != 0) {
        http_serve_free(h);
        return NULL;
    }
    return h;
}

/* evhttp's bufferevent for a new connection of a TLS listener: the
 * handshake as the server, with the certificate current now. */
static struct bufferevent *tls_bufferevent(struct event_base *base, void *arg)
{
    listener *l = arg;
    SSL_CTX *ctx = serving_cert_ctx(l->tls);
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    if (!ssl)
        return NULL;
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        SSL_free(ssl);
        return NULL;
    }
    /* a client that closes without close_notify (curl, Go) is no error */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* The port a bound socket has (the one asked for, or the free one). */
static int bound_port(struct evhttp_bound_socket *bs)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) != 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int http_serve_listen(http_serve *h, const http_listen_opts *o, char **err)
{
    const char *host = o->host && *o->host ? o->host : "0.0.0.0";
    bool v6 = strchr(host, ':') != NULL;
    listener *l = calloc(1, sizeof *l);
    if (!l || !(l->http = evhttp_new(h->base))) {
        free(l);
        ckube__set_err(err, "out of memory");
        return -1;
    }
    l->tls = o->tls;
    evhttp_set_gencb(l->http, o->fn, o->arg);
    if (o->tls)
        evhttp_set_bevcb(l->http, tls_bufferevent, l);
    if (o->max_body)
        evhttp_set_max_body_size(l->http, (ev_ssize_t)o->max_body);
    if (o->methods)
        evhttp_set_allowed_methods(l->http, (ev_uint32_t)o->methods);
    struct evhttp_bound_socket *bs =
        evhttp_bind_socket_with_handle(l->http, host, (ev_uint16_t)o->port);
    int port = bs ? bound_port(bs) : -1;
    if (port < 0) {
        int e = errno;
        ckube__set_err(err, "failed to listen on %s%s%s:%d: %s", v6 ? "[" : "", host, v6 ? "]" : "",
                       o->port, strerror(e));
        evhttp_free(l->http);
        free(l);
        return -1;
    }
    l->next = h->listeners;
    h->listeners = l;
    return port;
}

static void *serve_main(void *arg)
{
    http_serve *h = arg;
    pthread_setname_np(pthread_self(), h->name);
    event_base_dispatch(h->base);
    return NULL;
}

/* Starts the workers; -1 with *err when a thread cannot start (those
 * started are stopped). */
static int start_workers(http_serve *h, char **err)
{
    if (!h->nworkers)
        return 0;
    h->workers = calloc(h->nworkers, sizeof *h->workers);
    if (!h->workers) {
        ckube__set_err(err, "out of memory");
        return -1;
    }
    for (unsigned i = 0; i < h->nworkers; i++) {
        int e = pthread_create(&h->workers[i], NULL, worker_main, h);
        if (e != 0) {
            stop_workers(h);
            ckube__set_err(err, "cannot start the %s workers: %s", h->name, strerror(e));
            return -1;
        }
        h->nstarted++;
    }
    return 0;
}

int http_serve_start(http_serve *h, char **err)
{
    if (h->running || !h->listeners)
        return 0;
    if (start_workers(h, err) != 0)
        return -1;
    atomic_store(&h->stopping, false);
    int e = pthread_create(&h->thread, NULL, serve_main, h);
    if (e != 0) {
        stop_workers(h);
        ckube__set_err(err, "cannot start the %s thread: %s", h->name, strerror(e));
        return -1;
    }
    h->running = true;
    return 0;
}

void http_serve_stop(http_serve *h)
{
    if (h->running) {
        atomic_store(&h->stopping, true);
        wake_loop(h);
        pthread_join(h->thread, NULL);
        h->running = false;
    }
    stop_workers(h);
    /* evhttp_free closes the listener and every connection of it */
    while (h->listeners) {
        listener *l = h->listeners;
        h->listeners = l->next;
        evhttp_free(l->http);
        free(l);
    }
}

void http_serve_free(http_serve *h)
{
    if (!h)
        return;
    if (h->base)
        http_serve_stop(h);
    if (h->wake)
        event_free(h->wake);
    if (h->base)
        event_base_free(h->base);
    for (int i = 0; i < 2; i++)
        if (h->pipe[i] >= 0)
            close(h->pipe[i]);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
