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
 *    ports are free and the server listens and serves again. */
#include <curl/curl.h>
#include <setjmp.h>
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
#include "util/rotate_util.h"

/* ---- certificates ------------------------------------------------------------ */

/* A CA and a serving certificate it signed for 127.0.0.1, its CN `cn`:
 * DIR/NAME-ca.crt, DIR/NAME.crt, DIR/NAME.key. */
typedef struct certs {
    char ca[512], crt[512], key[512];
} certs;

static void write_pem(const char *path, X509 *x, EVP_PKEY *k)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    if (x)
        assert_int_equal(PEM_write_X509(f, x), 1);
    if (k)
        assert_int_equal(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
    assert_int_equal(fclose(f), 0);
    /* replaced whole, as a rotation does */
    assert_int_equal(rename(tmp, path), 0);
}

static certs make_certs(const char *dir, const char *name, const char *cn)
{
    certs c;
    snprintf(c.ca, sizeof c.ca, "%s/%s-ca.crt", dir, name);
    snprintf(c.crt, sizeof c.crt, "%s/%s.crt", dir, name);
    snprintf(c.key, sizeof c.key, "%s/%s.key", dir, name);
    EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *key = EVP_EC_gen("P-256");
    assert_non_null(ca_key);
    assert_non_null(key);
    char ca_cn[64];
    snprintf(ca_cn, sizeof ca_cn, "%s-ca", cn);
    X509 *ca = ckube__x509_make(ca_key, ca_cn, NULL, NULL, NULL, CKUBE__CERT_CA, 1, NULL, 0);
    static const char *const sans[] = {"127.0.0.1"};
    X509 *x = ckube__x509_make(key, cn, NULL, ca, ca_key, CKUBE__CERT_SERVER, 1, sans, 1);
    assert_non_null(ca);
    assert_non_null(x);
    write_pem(c.ca, ca, NULL);
    write_pem(c.crt, x, NULL);
    write_pem(c.key, NULL, key);
    X509_free(x);
    X509_free(ca);
    EVP_PKEY_free(key);
    EVP_PKEY_free(ca_key);
    return c;
}

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
static serving_cert *serve_copies(const certs *c, const char *name, char *crt, char *key)
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
    certs a = make_certs(dir, "a", "server-a"), b = make_certs(dir, "b", "server-b");
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
    char body[512];
    size_t len;
    CURLcode rc;
} reply;

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t len = size * n, room = sizeof r->body - 1 - r->len;
    memcpy(r->body + r->len, p, len < room ? len : room);
    r->len += len < room ? len : room;
    r->body[r->len] = '\0';
    return len;
}

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
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
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
    certs a = make_certs(dir, "la", "listener-a"), b = make_certs(dir, "lb", "listener-b");
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
    assert_string_equal(r.body, "plain 1 0");
    r = call(pp, NULL, "0123456789");
    assert_string_equal(r.body, "plain 2 10");
    r = call(sp, a.ca, NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_string_equal(r.body, "secure 1 0");
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
    assert_string_equal(r.body, "secure 1 0");
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
    assert_string_equal(r.body, "plain 1 0");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serving_cert_reload),
        cmocka_unit_test(test_listeners),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
