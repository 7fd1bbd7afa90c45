/* test_http_serve.c - runtime's HTTP server on a thread of its own
 * (runtime/http_serve.c) and the serving certificate read again when its
 * files change (serving_cert, runtime/secure_serving.c), which the
 * manager's endpoints, the webhook server and the extension API server
 * stand on:
 *  - a plain and a TLS listener on one server, each with its callback; a
 *    body over the listener's limit is 413, a method it does not allow
 *    501 (evhttp's answers);
 *  - a rotated certificate (the files replaced by rename, as kubelet and
 *    cert-manager do) reaches the next connection; a half-written
 *    rotation (a certificate that does not parse, a key that is not the
 *    certificate's) keeps the one that works;
 *  - a port in use is refused in the server's words; after stop the
 *    ports are free and the server listens and serves again;
 *  - deferred work (http_serve_defer): on N workers N requests' work runs
 *    at once and the answers go out from the loop; without workers it
 *    runs on the loop; a client that left loses only its answer; stopping
 *    waits for the work running, drops the work queued and ends both
 *    requests (done with NULL), and the workers start again. */
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include "common/x509.h"
#include "runtime/http_serve.h"
#include "runtime/secure_serving.h"
#include "util/cert_util.h"
#include "util/curl_util.h"
#include "util/meet_util.h"
#include "util/rotate_util.h"

/* ---- certificates ------------------------------------------------------------ */

static void write_text(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static char dir[256]; /* the test's files, under CKUBE_TEST_TMP */

/* DIR/NAME.crt and DIR/NAME.key: copies of c's (into crt and key, 512
 * bytes each), and a serving_cert reading them. */
static serving_cert *serve_copies(const tu_certs *c, const char *name, char *crt, char *key)
{
    snprintf(crt, 512, "%s/%s.crt", dir, name);
    snprintf(key, 512, "%s/%s.key", dir, name);
    tu_replace_file(c->crt, crt);
    tu_replace_file(c->key, key);
    char *err = NULL;
    serving_cert *sc = serving_cert_new(crt, key, NULL, 0, "test server", &err);
    if (!sc)
        fail_msg("serving_cert_new: %s", err);
    return sc;
}

/* The CN of a context's certificate. */
static const char *cn_of(SSL_CTX *ctx, char *buf, size_t n)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    assert_non_null(x);
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, (int)n);
    return buf;
}

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CKUBE_TEST_TMP");
    snprintf(dir, sizeof dir, "%s/http_serve-XXXXXX", base && *base ? base : "/tmp");
    char mk[300];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", base && *base ? base : "/tmp");
    if (system(mk) != 0 || !mkdtemp(dir))
        return -1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    int rc = system(rm);
    curl_global_cleanup();
    return rc == 0 ? 0 : -1;
}

/* ---- the serving certificate ------------------------------------------------- */

static void test_serving_cert_reload(void **state)
{
    (void)state;
    tu_certs a = tu_make_certs(dir, "a", "server-a"), b = tu_make_certs(dir, "b", "server-b");
    char crt[512], key[512], cn[64];
    serving_cert *c = serve_copies(&a, "tls", crt, key);
    char *err = NULL;
    SSL_CTX *first = serving_cert_ctx(c);
    assert_string_equal(cn_of(first, cn, sizeof cn), "server-a");

    /* unchanged files: the same context, however long */
    tu_next_second();
    assert_ptr_equal(serving_cert_ctx(c), first);

    /* rotated: the next look makes a new one */
    tu_replace_file(b.crt, crt);
    tu_replace_file(b.key, key);
    tu_next_second();
    SSL_CTX *second = serving_cert_ctx(c);
    assert_string_equal(cn_of(second, cn, sizeof cn), "server-b");

    /* a certificate that does not parse: the one that works stays */
    write_text(crt, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    tu_next_second();
    assert_ptr_equal(serving_cert_ctx(c), second);
    /* half a rotation (a's certificate, b's key): still b */
    tu_replace_file(a.crt, crt);
    tu_next_second();
    assert_ptr_equal(serving_cert_ctx(c), second);
    /* the rest of it: a again */
    tu_replace_file(a.key, key);
    tu_next_second();
    assert_string_equal(cn_of(serving_cert_ctx(c), cn, sizeof cn), "server-a");
    /* a file gone (a rotation between its renames): what works stays */
    assert_int_equal(unlink(key), 0);
    tu_next_second();
    assert_string_equal(cn_of(serving_cert_ctx(c), cn, sizeof cn), "server-a");
    serving_cert_free(c);

    /* the first certificate must load */
    assert_null(serving_cert_new(crt, key, NULL, 0, "test server", &err));
    assert_non_null(strstr(err, "cannot load the serving key"));
    free(err);
    err = NULL;
    assert_null(serving_cert_new(crt, NULL, NULL, 0, "test server", &err));
    assert_string_equal(err, "a serving certificate and its key go together: both or neither");
    free(err);

    /* self-signed: made once, never looked for on disk */
    c = serving_cert_new(NULL, NULL, NULL, 0, "test server", NULL);
    assert_non_null(c);
    first = serving_cert_ctx(c);
    assert_true(strncmp(cn_of(first, cn, sizeof cn), "localhost@", 10) == 0);
    tu_next_second();
    assert_ptr_equal(serving_cert_ctx(c), first);
    serving_cert_free(c);
}

/* ---- the server -------------------------------------------------------------- */

/* Answers "<name> <method> <body bytes>". */
static void answer(struct evhttp_request *req, void *arg)
{
    const char *name = arg;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "%s %d %zu", name, (int)evhttp_request_get_command(req),
                        evbuffer_get_length(evhttp_request_get_input_buffer(req)));
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

typedef struct reply {
    long code;
    tu_body body;
    CURLcode rc;
} reply;

/* A request to 127.0.0.1:port (https when ca is not NULL, verified
 * against it); body: a POST of it, else a GET. */
static reply call(int port, const char *ca, const char *body)
{
    reply r = {0};
    CURL *e = curl_easy_init();
    assert_non_null(e);
    char url[128];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d/x", ca ? "https" : "http", port);
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (ca)
        curl_easy_setopt(e, CURLOPT_CAINFO, ca);
    if (body)
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, tu_collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    r.rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.code);
    curl_easy_cleanup(e);
    return r;
}

/* Whether a socket can bind 127.0.0.1:port now. */
static bool port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

static void test_listeners(void **state)
{
    (void)state;
    tu_certs a = tu_make_certs(dir, "la", "listener-a"), b = tu_make_certs(dir, "lb", "listener-b");
    char crt[512], key[512];
    serving_cert *tls = serve_copies(&a, "serving", crt, key);
    char *err = NULL;

    http_serve *h = http_serve_new("test-http");
    assert_non_null(h);
    http_listen_opts plain = {.host = "127.0.0.1", .fn = answer, .arg = "plain", .max_body = 16};
    http_listen_opts secure = {
        .host = "127.0.0.1", .tls = tls, .fn = answer, .arg = "secure", .methods = EVHTTP_REQ_GET};
    int pp = http_serve_listen(h, &plain, &err), sp = http_serve_listen(h, &secure, &err);
    assert_true(pp > 0);
    assert_true(sp > 0);
    assert_int_equal(http_serve_start(h, &err), 0);

    /* each listener its callback; GET is EVHTTP_REQ_GET (1), POST 2 */
    reply r = call(pp, NULL, NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body.text, "plain 1 0");
    r = call(pp, NULL, "0123456789");
    assert_string_equal(r.body.text, "plain 2 10");
    r = call(sp, a.ca, NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_string_equal(r.body.text, "secure 1 0");
    /* the limits: a body over 16 bytes, a method not allowed */
    r = call(pp, NULL, "0123456789abcdefg");
    assert_int_equal(r.code, 413);
    r = call(sp, a.ca, "x");
    assert_int_equal(r.code, 501); /* evhttp: Not Implemented */
    /* plain HTTP to the TLS port is no request */
    r = call(sp, NULL, NULL);
    assert_int_not_equal(r.code, 200);

    /* a rotation reaches the next connection: b's CA verifies it, a's no
     * longer does */
    tu_replace_file(b.crt, crt);
    tu_replace_file(b.key, key);
    tu_next_second();
    r = call(sp, b.ca, NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_string_equal(r.body.text, "secure 1 0");
    r = call(sp, a.ca, NULL);
    assert_int_equal(r.rc, CURLE_PEER_FAILED_VERIFICATION);

    /* a port in use */
    http_listen_opts taken = {.host = "127.0.0.1", .port = pp, .fn = answer, .arg = "x"};
    http_serve *h2 = http_serve_new("test-http2");
    assert_int_equal(http_serve_listen(h2, &taken, &err), -1);
    char want[128];
    snprintf(want, sizeof want, "failed to listen on 127.0.0.1:%d: Address already in use", pp);
    assert_string_equal(err, want);
    free(err);
    err = NULL;
    http_serve_free(h2);

    /* stopped: the ports are free; it serves again on a new listener */
    http_serve_stop(h);
    assert_true(port_free(pp));
    assert_true(port_free(sp));
    r = call(pp, NULL, NULL);
    assert_int_equal(r.rc, CURLE_COULDNT_CONNECT);
    plain.port = pp;
    assert_int_equal(http_serve_listen(h, &plain, &err), pp);
    assert_int_equal(http_serve_start(h, &err), 0);
    r = call(pp, NULL, NULL);
    assert_string_equal(r.body.text, "plain 1 0");
    http_serve_free(h);
    serving_cert_free(tls);

    /* never started, nothing bound: stop and free are fine */
    h = http_serve_new(NULL);
    assert_non_null(h);
    assert_int_equal(http_serve_start(h, &err), 0);
    http_serve_stop(h);
    http_serve_free(h);
    http_serve_free(NULL);
}

/* ---- work off the loop (http_serve_defer) ------------------------------------- */

/* The deferred tests' work waits at a meeting point (util/meet_util.h):
 * until `want` works have started (proof they run at once) or the gate
 * opens, for 5 s at most. Counts under m.mu. */
typedef struct gate {
    tu_meet m;
    http_serve *h;
    int worked, answered, ended; /* work calls; done with a request; done with NULL */
    pthread_t work_thread, done_thread;
} gate;

typedef struct gate_job {
    gate *g;
    int seen;
    bool timed_out;
} gate_job;

static void gate_init(gate *g, http_serve *h, int want)
{
    memset(g, 0, sizeof *g);
    tu_meet_init(&g->m, want, 5000);
    g->h = h;
}

static void gate_work(void *arg)
{
    gate_job *j = arg;
    gate *g = j->g;
    pthread_mutex_lock(&g->m.mu);
    g->work_thread = pthread_self();
    g->worked++;
    pthread_mutex_unlock(&g->m.mu);
    j->seen = tu_meet_wait(&g->m, &j->timed_out);
}

static void gate_done(struct evhttp_request *req, void *arg)
{
    gate_job *j = arg;
    gate *g = j->g;
    pthread_mutex_lock(&g->m.mu);
    g->done_thread = pthread_self();
    if (req)
        g->answered++;
    else
        g->ended++;
    pthread_cond_broadcast(&g->m.cv);
    pthread_mutex_unlock(&g->m.mu);
    if (req) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "seen %d%s", j->seen, j->timed_out ? " timed out" : "");
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
    }
    free(j);
}

static void gate_request(struct evhttp_request *req, void *arg)
{
    gate *g = arg;
    gate_job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->g = g;
    http_serve_defer(g->h, req, gate_work, gate_done, j);
}

/* Waits (5 s at most) until *count (under g->m.mu) reaches n. */
static void gate_wait(gate *g, const int *count, int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&g->m.mu);
    int rc = 0;
    while (*count < n && rc == 0)
        rc = pthread_cond_timedwait(&g->m.cv, &g->m.mu, &until);
    int got = *count;
    pthread_mutex_unlock(&g->m.mu);
    assert_int_equal(got, n);
}

/* A GET on a connection of its own that the server closes after its
 * answer (so several can be in flight from one thread). */
static int send_get(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    static const char get[] = "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    assert_int_equal(write(fd, get, sizeof get - 1), (ssize_t)(sizeof get - 1));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Everything the server sends on fd until it closes; the body after the
 * headers into body (n bytes), "" when nothing came. Closes fd. */
static void read_answer(int fd, char *body, size_t n)
{
    char buf[2048];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = '\0';
    close(fd);
    const char *p = strstr(buf, "\r\n\r\n");
    snprintf(body, n, "%s", p ? p + 4 : "");
}

static http_serve *gate_server(gate *g, unsigned workers, int want, int *port)
{
    char *err = NULL;
    http_serve *h = http_serve_new("test-defer");
    assert_non_null(h);
    gate_init(g, h, want);
    assert_int_equal(http_serve_set_workers(h, workers), 0);
    http_listen_opts o = {.host = "127.0.0.1", .fn = gate_request, .arg = g};
    *port = http_serve_listen(h, &o, &err);
    assert_true(*port > 0);
    assert_int_equal(http_serve_start(h, &err), 0);
    return h;
}

static void gate_free(gate *g)
{
    tu_meet_free(&g->m);
}

/* Three workers run three requests' work at once (each waits for the
 * other two); the answers go out from the loop's thread. Workers cannot
 * change while the server runs. */
static void test_defer_workers(void **state)
{
    (void)state;
    gate g;
    int port;
    http_serve *h = gate_server(&g, 3, 3, &port);
    assert_int_equal(http_serve_set_workers(h, 5), -1);
    int fds[3];
    for (int i = 0; i < 3; i++)
        fds[i] = send_get(port);
    char body[256];
    for (int i = 0; i < 3; i++) {
        read_answer(fds[i], body, sizeof body);
        assert_string_equal(body, "seen 3");
    }
    http_serve_free(h); /* its threads joined: their writes are seen */
    assert_int_equal(g.m.max_at_once, 3);
    assert_int_equal(g.answered, 3);
    assert_false(pthread_equal(g.work_thread, g.done_thread));
    assert_false(pthread_equal(g.done_thread, pthread_self()));
    gate_free(&g);
    h = http_serve_new(NULL);
    assert_int_equal(http_serve_set_workers(h, 1025), -1);
    assert_int_equal(http_serve_set_workers(h, 1024), 0);
    http_serve_free(h);
}

/* Without workers the work runs on the loop, one request at a time. */
static void test_defer_inline(void **state)
{
    (void)state;
    gate g;
    int port;
    http_serve *h = gate_server(&g, 0, 1, &port);
    char one[256], two[256];
    int a = send_get(port), b = send_get(port);
    read_answer(a, one, sizeof one);
    read_answer(b, two, sizeof two);
    /* one after the other, whichever the loop read first */
    assert_true((!strcmp(one, "seen 1") && !strcmp(two, "seen 2")) ||
                (!strcmp(one, "seen 2") && !strcmp(two, "seen 1")));
    http_serve_free(h);
    assert_int_equal(g.m.max_at_once, 1);
    assert_true(pthread_equal(g.work_thread, g.done_thread));
    assert_false(pthread_equal(g.done_thread, pthread_self()));
    gate_free(&g);
}

/* A client that leaves before its answer: the answer is dropped with its
 * connection (ASan: nothing leaks) and the server serves on. */
static void test_defer_client_gone(void **state)
{
    (void)state;
    gate g;
    int port;
    http_serve *h = gate_server(&g, 1, 99, &port);
    int fd = send_get(port);
    gate_wait(&g, &g.m.arrived, 1);
    close(fd);
    tu_meet_open(&g.m);
    gate_wait(&g, &g.answered, 1);
    char body[256];
    read_answer(send_get(port), body, sizeof body);
    assert_string_equal(body, "seen 2");
    http_serve_free(h);
    gate_free(&g);
}

/* Stopping with one request's work running and another's queued: stop
 * waits for the running work; both end without an answer (done with
 * NULL), the queued work never runs; the server starts again with its
 * workers. */
static void test_defer_stop(void **state)
{
    (void)state;
    gate g;
    int port;
    http_serve *h = gate_server(&g, 1, 99, &port);
    int a = send_get(port), b = send_get(port);
    gate_wait(&g, &g.m.arrived, 1);
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, tu_meet_open_later, &g.m), 0);
    http_serve_stop(h); /* returns once the gate opened and the work ended */
    pthread_join(opener, NULL);
    assert_int_equal(g.worked, 1);
    assert_int_equal(g.ended, 2);
    assert_int_equal(g.answered, 0);
    char body[256];
    read_answer(a, body, sizeof body);
    assert_string_equal(body, "");
    read_answer(b, body, sizeof body);
    assert_string_equal(body, "");
    assert_true(port_free(port));

    char *err = NULL;
    http_listen_opts o = {.host = "127.0.0.1", .port = port, .fn = gate_request, .arg = &g};
    assert_int_equal(http_serve_listen(h, &o, &err), port);
    assert_int_equal(http_serve_start(h, &err), 0);
    read_answer(send_get(port), body, sizeof body);
    assert_string_equal(body, "seen 2");
    http_serve_free(h);
    assert_int_equal(g.answered, 1);
    gate_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serving_cert_reload), cmocka_unit_test(test_listeners),
        cmocka_unit_test(test_defer_workers),       cmocka_unit_test(test_defer_inline),
        cmocka_unit_test(test_defer_client_gone),   cmocka_unit_test(test_defer_stop),
    };
    signal(SIGPIPE, SIG_IGN); /* answers to clients that left */
    return cmocka_run_group_tests(tests, setup, teardown);
}
