/* bench_aggregated - an aggregated API server for `make bench`'s
 * aggregation phase: HTTPS (the certificate and key given) on 127.0.0.1
 * and a free port, answering every GET with a fixed object of about the
 * size of a ConfigMap (and /apis/bench.ckube.io/v1 with its resource
 * list, for the API server's availability check). One thread, as small
 * as a backend can be, so the figures are the proxy's. Prints
 * {"port": N} once serving, and serves until stdin closes.
 *
 *   bench_aggregated CERT KEY */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char RESOURCES[] =
    "{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"bench.ckube.io/v1\","
    "\"resources\":[{\"name\":\"things\",\"singularName\":\"thing\",\"namespaced\":true,"
    "\"kind\":\"Thing\",\"verbs\":[\"get\",\"list\"]}]}";

static char object[1100];

static struct bufferevent *tls_bev(struct event_base *base, void *arg)
{
    SSL *ssl = SSL_new(arg);
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evhttp_connection *conn = evhttp_request_get_connection(req);
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    int fd = bev ? (int)bufferevent_getfd(bev) : -1, one = 1;
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const char *uri = evhttp_request_get_uri(req);
    struct evbuffer *b = evbuffer_new();
    if (!strncmp(uri, "/apis/bench.ckube.io/v1", 23) && (uri[23] == 0 || uri[23] == '?'))
        evbuffer_add(b, RESOURCES, sizeof RESOURCES - 1);
    else
        evbuffer_add(b, object, strlen(object));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* Ends the process when stdin closes (the bench's way to stop it). */
static void *stdin_watch(void *arg)
{
    (void)arg;
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    _exit(0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_aggregated CERT KEY\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (SSL_CTX_use_certificate_chain_file(ctx, argv[1]) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, argv[2], SSL_FILETYPE_PEM) != 1) {
        fprintf(stderr, "bench_aggregated: cannot load %s / %s\n", argv[1], argv[2]);
        return 1;
    }
    char data[800];
    memset(data, 'x', sizeof data - 1);
    data[sizeof data - 1] = 0;
    snprintf(object, sizeof object,
             "{\"kind\":\"Thing\",\"apiVersion\":\"bench.ckube.io/v1\",\"metadata\":{\"name\":"
             "\"t\",\"namespace\":\"default\",\"resourceVersion\":\"1\"},\"data\":\"%s\"}",
             data);
    struct event_base *base = event_base_new();
    struct evhttp *http = evhttp_new(base);
    evhttp_set_gencb(http, on_request, NULL);
    evhttp_set_bevcb(http, tls_bev, ctx);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    if (!bs) {
        fprintf(stderr, "bench_aggregated: cannot listen\n");
        return 1;
    }
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sa, &sl);
    printf("{\"port\": %d}\n", ntohs(sa.sin_port));
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, NULL, stdin_watch, base);
    event_base_dispatch(base);
    return 0;
}
