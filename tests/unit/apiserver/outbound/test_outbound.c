/* Tests for the server's calls out (src/apiserver/outbound): an outbound
 * and an httpd serving TLS (apiserver/pki's certificates) on one event
 * loop that this thread turns, so each case controls what the far end
 * does: answers, holds a request (timeouts, cancel), closes after an
 * answer or while idle. Checked: answers and their bodies, one handshake
 * for many calls (the pool), a fresh connection when the peer closed the
 * idle one, timeouts in Go's words, refused connections, certificates
 * from an unknown CA or for another name, a bad CA bundle, cancel, and
 * that freeing the outbound with calls running calls nobody back. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <ftw.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/objects.h>

#include "apiserver/httpd/httpd.h"
#include "apiserver/httpd/tls.h"
#include "apiserver/outbound/outbound.h"
#include "apiserver/pki/pki.h"

static struct {
    char root[512];
    pki_files a, b;            /* b: another CA, and a certificate for another name */
    httpd_tls *tls, *tls_mtls; /* the second asks for client certificates */
    char *ca_pem, *other_ca_pem, *admin_crt, *admin_key;
} pk;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

static void make_pki(const char *sub, const char *const *sans, size_t n, pki_files *out)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", pk.root, sub);
    pki_options o = {.dir = dir, .sans = sans, .nsans = n};
    char *err = NULL;
    if (pki_ensure(&o, out, &err) != 0)
        fail_msg("pki_ensure: %s", err ? err : "?");
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(pk.root, sizeof pk.root, "%s/outbound-XXXXXX", tmp);
    if (!mkdtemp(pk.root))
        return -1;
    static const char *const sans[] = {"127.0.0.1", "hook.default.svc"};
    make_pki("a", sans, 2, &pk.a);
    static const char *const other[] = {"elsewhere.example.com"};
    make_pki("b", other, 1, &pk.b);
    httpd_tls_files files = {.cert = pk.a.serving_crt, .key = pk.a.serving_key};
    char *err = NULL;
    pk.tls = httpd_tls_new(&files, &err);
    if (!pk.tls)
        return -1;
    httpd_tls_files mfiles = {
        .cert = pk.a.serving_crt, .key = pk.a.serving_key, .client_ca = {pk.a.ca_crt, NULL}};
    pk.tls_mtls = httpd_tls_new(&mfiles, &err);
    if (!pk.tls_mtls)
        return -1;
    pk.admin_crt = slurp(pk.a.admin_crt);
    pk.admin_key = slurp(pk.a.admin_key);
    pk.ca_pem = slurp(pk.a.ca_crt);
    pk.other_ca_pem = slurp(pk.b.ca_crt);
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
    httpd_tls_free(pk.tls_mtls);
    free(pk.admin_crt);
    free(pk.admin_key);
    free(pk.ca_pem);
    free(pk.other_ca_pem);
    nftw(pk.root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ---- the far end ------------------------------------------------------- */

typedef struct fixture {
    struct event_base *base;
    httpd *h;
    int port;
    outbound *o;
    httpd_req *held; /* a request the server does not answer yet */
    int served;
    /* the last result */
    int calls;
    int status;
    char error[1024];
    char body[1024];
} fixture;

/* /echo answers the body back; /close answers and closes the connection;
 * /hold keeps the request. */
static void handle(httpd_req *req, void *arg)
{
    fixture *f = arg;
    f->served++;
    const char *t = httpd_req_target(req);
    if (!strncmp(t, "/hold", 5)) {
        f->held = req;
        return;
    }
    if (!strncmp(t, "/stream", 7)) { /* three chunks, then the end */
        httpd_add_header(req, "Content-Type", "application/json;stream=watch");
        httpd_add_header(req, "X-Seen-User", httpd_req_header(req, "X-Remote-User") ?: "");
        httpd_send_start(req, 200, NULL, NULL, NULL);
        for (int i = 0; i < 3; i++) {
            struct evbuffer *b = evbuffer_new();
            evbuffer_add_printf(b, "{\"n\":%d}\n", i);
            httpd_send_chunk(req, b);
            evbuffer_free(b);
        }
        httpd_send_end(req);
        return;
    }
    if (!strncmp(t, "/whoami", 7)) { /* the client certificate's subject */
        struct ssl_st *ssl = httpd_req_ssl(req);
        X509 *peer = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
        char cn[256] = "none";
        if (peer)
            X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "%s %s", httpd_req_method_name(req), cn);
        httpd_send_reply(req, 200, b);
        evbuffer_free(b);
        return;
    }
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_buffer(b, httpd_req_body(req));
    httpd_add_header(req, "Content-Type", "application/json");
    if (!strncmp(t, "/close", 6))
        httpd_add_header(req, "Connection", "close");
    httpd_send_reply(req, 200, b);
    evbuffer_free(b);
}

static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static int setup_with(void **state, httpd_tls *tls)
{
    fixture *f = calloc(1, sizeof *f);
    f->base = event_base_new();
    int fd = listen_loopback(&f->port);
    httpd_config cfg = {.max_body = 1 << 20, .tls = tls};
    f->h = httpd_new(f->base, fd, &cfg, handle, f);
    f->o = outbound_new(f->base);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, pk.tls);
}

static int setup_mtls(void **state)
{
    return setup_with(state, pk.tls_mtls);
}

static int teardown(void **state)
{
    fixture *f = *state;
    outbound_free(f->o);
    if (f->held)
        httpd_abort(f->held);
    httpd_free(f->h);
    event_base_free(f->base);
    free(f);
    return 0;
}

static void on_result(void *arg, const outbound_result *r)
{
    fixture *f = arg;
    f->calls++;
    f->status = r->status;
    snprintf(f->error, sizeof f->error, "%s", r->error ? r->error : "");
    size_t n = evbuffer_get_length(r->body);
    if (n >= sizeof f->body)
        n = sizeof f->body - 1;
    evbuffer_remove(r->body, f->body, n);
    f->body[n] = 0;
}

/* Turns the loop until `calls` results came (or 10 s went by). */
static void wait_calls(fixture *f, int calls)
{
    for (int i = 0; i < 10000 && f->calls < calls; i++) {
        struct timeval tv = {0, 1000};
        event_base_loopexit(f->base, &tv);
        event_base_dispatch(f->base);
    }
    assert_int_equal(f->calls, calls);
}

static void turn(fixture *f, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(f->base, &tv);
    event_base_dispatch(f->base);
}

static outbound_target target(fixture *f, const char *name, const char *ca)
{
    return (outbound_target){.host = "127.0.0.1",
                             .port = f->port,
                             .server_name = name,
                             .ca_pem = ca,
                             .ca_len = ca ? strlen(ca) : 0};
}

static void post(fixture *f, const outbound_target *t, const char *path, const char *body,
                 unsigned timeout_ms)
{
    outbound_post(f->o, t, path, "application/json", body, strlen(body), timeout_ms, on_result, f);
}

/* ---- cases --------------------------------------------------------------- */

static void test_answers_over_one_connection(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    for (int i = 0; i < 20; i++) {
        char body[64];
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        post(f, &t, "/echo?timeout=10s", body, 5000);
        wait_calls(f, i + 1);
        assert_int_equal(f->status, 200);
        assert_string_equal(f->error, "");
        assert_string_equal(f->body, body);
    }
    /* one TLS handshake for twenty calls: the connection is kept */
    assert_int_equal(outbound_handshakes(f->o), 1);
    assert_int_equal(outbound_open_connections(f->o), 1);
    /* a service's name, verified on its own SAN, is another target */
    outbound_target svc = target(f, "hook.default.svc", pk.ca_pem);
    post(f, &svc, "/echo", "{}", 5000);
    wait_calls(f, 21);
    assert_int_equal(f->status, 200);
    assert_int_equal(outbound_handshakes(f->o), 2);
}

static void test_peer_closing_is_a_new_connection(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    post(f, &t, "/close", "{\"a\":1}", 5000);
    wait_calls(f, 1);
    assert_int_equal(f->status, 200);
    turn(f, 20);
    assert_int_equal(outbound_open_connections(f->o), 0);
    post(f, &t, "/echo", "{\"b\":2}", 5000);
    wait_calls(f, 2);
    assert_string_equal(f->body, "{\"b\":2}");
    assert_int_equal(outbound_handshakes(f->o), 2);
}

static void test_timeout_in_gos_words(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    post(f, &t, "/hold?timeout=1s", "{}", 300);
    wait_calls(f, 1);
    assert_int_equal(f->status, 0);
    char want[256];
    snprintf(want, sizeof want,
             "Post \"https://127.0.0.1:%d/hold?timeout=1s\": context deadline exceeded", f->port);
    assert_string_equal(f->error, want);
    assert_int_equal(outbound_open_connections(f->o), 0); /* a half-done exchange is not reused */
}

static void test_refused(void **state)
{
    fixture *f = *state;
    int port;
    int fd = listen_loopback(&port);
    close(fd); /* nothing listens there now */
    outbound_target t = {
        .host = "127.0.0.1", .port = port, .ca_pem = pk.ca_pem, .ca_len = strlen(pk.ca_pem)};
    post(f, &t, "/x", "{}", 5000);
    wait_calls(f, 1);
    char want[256];
    snprintf(want, sizeof want,
             "Post \"https://127.0.0.1:%d/x\": dial tcp 127.0.0.1:%d: connect: connection refused",
             port, port);
    assert_string_equal(f->error, want);
}

static void test_certificate_checks(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.other_ca_pem);
    post(f, &t, "/echo", "{}", 5000);
    wait_calls(f, 1);
    assert_non_null(strstr(f->error, "tls: failed to verify certificate: x509: certificate signed "
                                     "by unknown authority"));
    /* the right CA, the wrong name */
    outbound_target n = target(f, "other.default.svc", pk.ca_pem);
    post(f, &n, "/echo", "{}", 5000);
    wait_calls(f, 2);
    assert_non_null(strstr(f->error, "x509: certificate is not valid for other.default.svc"));
    /* a bundle with no certificate in it */
    outbound_target bad = target(f, "127.0.0.1", "not a certificate");
    post(f, &bad, "/echo", "{}", 5000);
    wait_calls(f, 3);
    assert_non_null(strstr(f->error, "unable to load root certificates"));
    /* no verification at all */
    outbound_target insecure = target(f, "127.0.0.1", NULL);
    insecure.insecure = true;
    post(f, &insecure, "/echo", "{\"ok\":1}", 5000);
    wait_calls(f, 4);
    assert_string_equal(f->body, "{\"ok\":1}");
}

static void test_cancel_and_free_with_calls_running(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    outbound_call *c =
        outbound_post(f->o, &t, "/hold", "application/json", "{}", 2, 5000, on_result, f);
    for (int i = 0; i < 2000 && !f->held; i++)
        turn(f, 1);
    assert_non_null(f->held);
    outbound_cancel(c);
    turn(f, 20);
    assert_int_equal(f->calls, 0);
    httpd_abort(f->held);
    f->held = NULL;
    /* a call started and never settled: freeing the outbound ends it
     * without a callback */
    post(f, &t, "/hold", "{}", 5000);
    for (int i = 0; i < 2000 && !f->held; i++)
        turn(f, 1);
    assert_non_null(f->held);
    outbound_free(f->o);
    f->o = outbound_new(f->base);
    turn(f, 20);
    assert_int_equal(f->calls, 0);
}

/* ---- streamed calls -------------------------------------------------------- */

typedef struct streamed {
    fixture *f;
    int status, heads, ends;
    char ctype[128], seen_user[128];
    char body[512];
    char error[512];
} streamed;

static void s_head(void *arg, int status, const outbound_header *h, size_t n)
{
    streamed *s = arg;
    s->heads++;
    s->status = status;
    for (size_t i = 0; i < n; i++) {
        if (!strcasecmp(h[i].name, "Content-Type"))
            snprintf(s->ctype, sizeof s->ctype, "%s", h[i].value);
        if (!strcasecmp(h[i].name, "X-Seen-User"))
            snprintf(s->seen_user, sizeof s->seen_user, "%s", h[i].value);
    }
}

static void s_data(void *arg, const char *bytes, size_t len)
{
    streamed *s = arg;
    size_t have = strlen(s->body);
    if (have + len < sizeof s->body) {
        memcpy(s->body + have, bytes, len);
        s->body[have + len] = 0;
    }
}

static void s_end(void *arg, const char *error)
{
    streamed *s = arg;
    s->ends++;
    snprintf(s->error, sizeof s->error, "%s", error ? error : "");
    s->f->calls++;
}

static const outbound_stream_callbacks scb = {s_head, s_data, s_end};

static void test_streamed_answer(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    streamed st = {.f = f};
    outbound_header h[] = {{"X-Remote-User", "alice"}, {"Accept", "application/json"}};
    outbound_request rq = {.method = "GET", .path = "/stream?watch=1", .headers = h, .nheaders = 2};
    outbound_stream(f->o, &t, &rq, &scb, &st);
    wait_calls(f, 1);
    assert_int_equal(st.heads, 1);
    assert_int_equal(st.ends, 1);
    assert_int_equal(st.status, 200);
    assert_string_equal(st.error, "");
    assert_string_equal(st.ctype, "application/json;stream=watch");
    assert_string_equal(st.seen_user, "alice");
    assert_string_equal(st.body, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
    /* the connection is kept for the next call, whole or streamed */
    post(f, &t, "/echo", "{\"x\":1}", 5000);
    wait_calls(f, 2);
    assert_string_equal(f->body, "{\"x\":1}");
    assert_int_equal(outbound_handshakes(f->o), 1);
    /* a failure before the head is an end alone, in Go's words for a GET */
    int port;
    close(listen_loopback(&port));
    outbound_target dead = {.host = "127.0.0.1", .port = port};
    streamed st2 = {.f = f};
    outbound_request get = {.method = "GET", .path = "/x"};
    outbound_stream(f->o, &dead, &get, &scb, &st2);
    wait_calls(f, 3);
    assert_int_equal(st2.heads, 0);
    assert_int_equal(st2.ends, 1);
    char want[128];
    snprintf(want, sizeof want, "Get \"https://127.0.0.1:%d/x\": dial tcp", port);
    assert_non_null(strstr(st2.error, want));
}

static void test_paused_stream_waits(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    streamed st = {.f = f};
    outbound_request rq = {.method = "GET", .path = "/stream"};
    outbound_call *c = outbound_stream(f->o, &t, &rq, &scb, &st);
    outbound_pause(c, true); /* not connected yet: nothing to pause */
    for (int i = 0; i < 200 && !st.heads; i++)
        turn(f, 2);
    /* the whole answer may already be in: pause and resume, and it ends */
    outbound_pause(c, true);
    turn(f, 20);
    outbound_pause(c, false);
    wait_calls(f, 1);
    assert_int_equal(st.ends, 1);
    assert_string_equal(st.error, "");
}

static void test_client_certificate(void **state)
{
    fixture *f = *state;
    outbound_target t = target(f, "127.0.0.1", pk.ca_pem);
    t.client_cert_pem = pk.admin_crt;
    t.client_key_pem = pk.admin_key;
    streamed st = {.f = f};
    outbound_request rq = {.method = "PUT", .path = "/whoami", .body = "{}", .len = 2};
    outbound_stream(f->o, &t, &rq, &scb, &st);
    wait_calls(f, 1);
    assert_string_equal(st.body, "PUT system:admin");
    /* without one, the same server sees nobody (a target of its own) */
    outbound_target anon = target(f, "127.0.0.1", pk.ca_pem);
    streamed st2 = {.f = f};
    outbound_request get = {.method = "GET", .path = "/whoami"};
    outbound_stream(f->o, &anon, &get, &scb, &st2);
    wait_calls(f, 2);
    assert_string_equal(st2.body, "GET none");
    /* a key that does not parse fails the call */
    outbound_target bad = t;
    bad.client_key_pem = "junk";
    streamed st3 = {.f = f};
    outbound_stream(f->o, &bad, &get, &scb, &st3);
    wait_calls(f, 3);
    assert_non_null(strstr(st3.error, "tls: failed to find any PEM data"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_answers_over_one_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_closing_is_a_new_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_in_gos_words, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_certificate_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_free_with_calls_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streamed_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_paused_stream_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_certificate, setup_mtls, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
