/* Who a request is from (apiserver/authentication): the client
 * certificate authenticator (x509.h) over real certificates and real
 * OpenSSL verdicts (from X509_verify_cert as the TLS server runs it, and
 * from whole handshakes with the server's TLS configuration), the order
 * and group rules of authenticator.h, and the UserInfo JSON (user.h). */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "apiserver/authentication/authenticator.h"
#include "apiserver/authentication/tokenfile.h"
#include "apiserver/authentication/user.h"
#include "apiserver/authentication/x509.h"
#include "apiserver/httpd/tls.h"
#include "apiserver/pki/pki.h"

/* ---- certificates (made once for the group) ----------------------------- */

static struct {
    char root[512]; /* a temporary directory, removed at the end */
    pki_files a, b; /* two unrelated clusters: b's CA is foreign to a */
    X509 *ca_a, *ca_b, *admin_a, *admin_b, *serving_a;
    EVP_PKEY *ca_a_key, *ca_b_key, *admin_a_key, *admin_b_key, *serving_a_key;
    EVP_PKEY *leaf_key;   /* for the certificates made here */
    httpd_tls *tls;       /* serving a's certificate, trusting a's CA for clients */
    char token_file[600]; /* the token file of the authenticator tests */
} pk;

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return x;
}

static EVP_PKEY *load_key(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    return k;
}

static int make_pki(const char *sub, pki_files *out)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", pk.root, sub);
    static const char *const sans[] = {"127.0.0.1", "localhost"};
    pki_options o = {.dir = dir, .sans = sans, .nsans = 2};
    char *err = NULL;
    if (pki_ensure(&o, out, &err) != 0) {
        fprintf(stderr, "pki_ensure %s: %s\n", dir, err ? err : "?");
        free(err);
        return -1;
    }
    return 0;
}

static const char token_csv[] = "admintok,token-admin,uid-1,\"system:masters\"\n"
                                "plaintok,token-user,uid-2\n"
                                "authtok,already,uid-3,\"dev,system:authenticated\"\n"
                                "unauthtok,weird,uid-4,system:unauthenticated\n"
                                "anontok,system:anonymous,uid-5,dev\n";

static int group_setup(void **state)
{
    (void)state;
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(pk.root, sizeof pk.root, "%s/authn-XXXXXX", tmp);
    if (!mkdtemp(pk.root) || make_pki("a", &pk.a) || make_pki("b", &pk.b))
        return -1;
    pk.ca_a = load_cert(pk.a.ca_crt);
    pk.ca_b = load_cert(pk.b.ca_crt);
    pk.admin_a = load_cert(pk.a.admin_crt);
    pk.admin_b = load_cert(pk.b.admin_crt);
    pk.serving_a = load_cert(pk.a.serving_crt);
    pk.ca_a_key = load_key(pk.a.ca_key);
    pk.ca_b_key = load_key(pk.b.ca_key);
    pk.admin_a_key = load_key(pk.a.admin_key);
    pk.admin_b_key = load_key(pk.b.admin_key);
    pk.serving_a_key = load_key(pk.a.serving_key);
    pk.leaf_key = EVP_EC_gen("P-256");
    if (!pk.ca_a || !pk.ca_b || !pk.admin_a || !pk.admin_b || !pk.serving_a || !pk.ca_a_key ||
        !pk.ca_b_key || !pk.admin_a_key || !pk.admin_b_key || !pk.serving_a_key || !pk.leaf_key)
        return -1;
    httpd_tls_files tf = {pk.a.serving_crt, pk.a.serving_key, {pk.a.ca_crt, NULL}};
    char *err = NULL;
    if (!(pk.tls = httpd_tls_new(&tf, &err))) {
        fprintf(stderr, "httpd_tls_new: %s\n", err ? err : "?");
        free(err);
        return -1;
    }
    snprintf(pk.token_file, sizeof pk.token_file, "%s/tokens.csv", pk.root);
    FILE *f = fopen(pk.token_file, "w");
    if (!f || fputs(token_csv, f) < 0 || fclose(f) != 0)
        return -1;
    return 0;
}

static void remove_pki(const pki_files *f, const char *sub)
{
    const char *const files[] = {f->ca_crt,    f->ca_key,    f->serving_crt, f->serving_key,
                                 f->admin_crt, f->admin_key, f->sa_key,      f->sa_pub};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(files[i]);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/%s", pk.root, sub);
    rmdir(dir);
}

static int group_teardown(void **state)
{
    (void)state;
    httpd_tls_free(pk.tls);
    X509 *certs[] = {pk.ca_a, pk.ca_b, pk.admin_a, pk.admin_b, pk.serving_a};
    for (size_t i = 0; i < sizeof certs / sizeof *certs; i++)
        X509_free(certs[i]);
    EVP_PKEY *keys[] = {pk.ca_a_key,    pk.ca_b_key,      pk.admin_a_key,
                        pk.admin_b_key, pk.serving_a_key, pk.leaf_key};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        EVP_PKEY_free(keys[i]);
    unlink(pk.token_file);
    remove_pki(&pk.a, "a");
    remove_pki(&pk.b, "b");
    rmdir(pk.root);
    return 0;
}

/* A certificate for `key` signed by `ca`/`ca_key`, valid from now+nb to
 * now+na seconds, with subject O=orgs[0..n) then the CommonName `cn`
 * (NULL: none; "": an empty one), and extended key usage `eku` (NULL:
 * an intermediate CA instead, CA:TRUE with keyCertSign). */
static X509 *make_cert(EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key, const char *cn,
                       const char *const *orgs, size_t n, long nb, long na, const char *eku)
{
    static long serial = 1000;
    X509 *x = X509_new();
    assert_non_null(x);
    assert_int_equal(X509_set_version(x, 2), 1);
    assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), serial++), 1);
    assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), nb));
    assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), na));
    assert_int_equal(X509_set_pubkey(x, key), 1);
    X509_NAME *name = X509_get_subject_name(x);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                                    (const unsigned char *)orgs[i], -1, -1, 0),
                         1);
    /* As a UTF8String set directly: OpenSSL's string table would refuse
     * an empty CommonName. */
    if (cn)
        assert_int_equal(X509_NAME_add_entry_by_NID(name, NID_commonName, V_ASN1_UTF8STRING,
                                                    (const unsigned char *)cn, (int)strlen(cn), -1,
                                                    0),
                         1);
    assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(ca)), 1);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
    const int nids[] = {NID_basic_constraints, eku ? NID_ext_key_usage : NID_key_usage,
                        NID_subject_key_identifier, NID_authority_key_identifier};
    const char *vals[] = {eku ? "critical,CA:FALSE" : "critical,CA:TRUE",
                          eku ? eku : "critical,digitalSignature,keyCertSign", "hash",
                          "keyid:always"};
    for (size_t i = 0; i < 4; i++) {
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nids[i], vals[i]);
        assert_non_null(ext);
        assert_int_equal(X509_add_ext(x, ext, -1), 1);
        X509_EXTENSION_free(ext);
    }
    assert_true(X509_sign(x, ca_key, EVP_sha256()) > 0);
    return x;
}

/* A client certificate for pk.leaf_key (make_cert). */
static X509 *make_leaf(X509 *ca, EVP_PKEY *ca_key, const char *cn, const char *const *orgs,
                       size_t n, long nb, long na, const char *eku)
{
    return make_cert(pk.leaf_key, ca, ca_key, cn, orgs, n, nb, na, eku);
}

static X509 *make_client(const char *cn, const char *const *orgs, size_t n)
{
    return make_leaf(pk.ca_a, pk.ca_a_key, cn, orgs, n, -3600, 86400, "clientAuth");
}

/* Lets verification go on past every error, as httpd/tls.c's callback
 * does: what SSL_get_verify_result then says is the last error found. */
static int accept_any(int ok, X509_STORE_CTX *ctx)
{
    (void)ok;
    (void)ctx;
    return 1;
}

/* OpenSSL's verdict on `leaf` and the certificates the client sent with
 * it (`chain`, NULL: none), as the TLS server gets it (httpd/tls.c):
 * ssl_verify_cert_chain with the peer's whole chain, leaf first, as the
 * untrusted certificates, X509_STORE_CTX_set_default "ssl_client" (the
 * sslclient purpose), and the server's callback that accepts everything;
 * `ca` (NULL: none) trusted, at time `at` (0: now). */
static long verdict_chain(X509 *leaf, STACK_OF(X509) * chain, X509 *ca, time_t at)
{
    STACK_OF(X509) *sent = sk_X509_new_null();
    assert_non_null(sent);
    sk_X509_push(sent, leaf);
    for (int i = 0; chain && i < sk_X509_num(chain); i++)
        sk_X509_push(sent, sk_X509_value(chain, i));
    X509_STORE *store = X509_STORE_new();
    assert_non_null(store);
    if (ca)
        assert_int_equal(X509_STORE_add_cert(store, ca), 1);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    assert_non_null(ctx);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, sent), 1);
    assert_int_equal(X509_STORE_CTX_set_default(ctx, "ssl_client"), 1);
    X509_STORE_CTX_set_verify_cb(ctx, accept_any);
    if (at)
        X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), at);
    X509_verify_cert(ctx); /* 1 whatever it found: the callback accepted */
    long v = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    sk_X509_free(sent);
    return v;
}

static long verdict(X509 *leaf, X509 *ca, time_t at)
{
    return verdict_chain(leaf, NULL, ca, at);
}

/* A whole TLS handshake with the server's configuration (pk.tls: a's
 * serving certificate, a's CA for clients) over a socket pair, the
 * client presenting cert/key (NULL: none) and `extra` after it (NULL:
 * nothing more). Returns the certificate the server got (a new
 * reference, or NULL) and *verify as SSL_get_verify_result says. */
static X509 *handshake_chain(X509 *cert, EVP_PKEY *key, X509 *extra, long *verify)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(fcntl(sv[i], F_SETFL, fcntl(sv[i], F_GETFL) | O_NONBLOCK), 0);
    SSL *srv = httpd_tls_accept(pk.tls, sv[0]);
    assert_non_null(srv);
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(cctx);
    if (cert) {
        assert_int_equal(SSL_CTX_use_certificate(cctx, cert), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey(cctx, key), 1);
        if (extra)
            assert_int_equal(SSL_CTX_add1_chain_cert(cctx, extra), 1);
    }
    SSL *cli = SSL_new(cctx);
    assert_non_null(cli);
    assert_int_equal(SSL_set_fd(cli, sv[1]), 1);
    SSL_set_connect_state(cli);
    bool sdone = false, cdone = false;
    for (int turn = 0; !(sdone && cdone); turn++) {
        if (turn > 2000)
            fail_msg("handshake did not finish");
        SSL *ends[2] = {cli, srv};
        bool *done[2] = {&cdone, &sdone};
        for (int i = 0; i < 2; i++) {
            if (*done[i])
                continue;
            int r = SSL_do_handshake(ends[i]);
            if (r == 1) {
                *done[i] = true;
                continue;
            }
            int e = SSL_get_error(ends[i], r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                fail_msg("%s handshake failed: SSL error %d", i ? "server" : "client", e);
        }
        struct pollfd p[2] = {{sv[0], POLLIN, 0}, {sv[1], POLLIN, 0}};
        poll(p, 2, 10);
    }
    X509 *peer = SSL_get1_peer_certificate(srv);
    *verify = SSL_get_verify_result(srv);
    SSL_free(cli);
    SSL_free(srv);
    SSL_CTX_free(cctx);
    close(sv[0]);
    close(sv[1]);
    return peer;
}

static X509 *handshake(X509 *cert, EVP_PKEY *key, long *verify)
{
    return handshake_chain(cert, key, NULL, verify);
}

/* ---- helpers for users ---------------------------------------------------- */

/* Checks u is name/uid in exactly the groups given (NULL-terminated). */
static void expect_user(const auth_user *u, const char *name, const char *uid, ...)
{
    assert_non_null(u);
    assert_string_equal(u->name, name);
    assert_string_equal(u->uid, uid);
    va_list ap;
    va_start(ap, uid);
    size_t n = 0;
    for (const char *g; (g = va_arg(ap, const char *)); n++) {
        if (n >= u->ngroups)
            fail_msg("user %s: group %zu (%s) missing", u->name, n, g);
        if (strcmp(u->groups[n], g))
            fail_msg("user %s: group %zu is \"%s\", not \"%s\"", u->name, n, u->groups[n], g);
    }
    va_end(ap);
    if (u->ngroups != n)
        fail_msg("user %s: %zu groups, not %zu", u->name, u->ngroups, n);
}

static authenticator *new_authn(bool anonymous, bool plain_http, auth_token_fn fn, void *arg)
{
    auth_config c = {.anonymous = anonymous,
                     .plain_http = plain_http,
                     .token_file = pk.token_file,
                     .token_fn = fn,
                     .token_arg = arg};
    char *err = NULL;
    authenticator *a = authenticator_new(&c, &err);
    if (!a)
        fail_msg("authenticator_new: %s", err ? err : "?");
    assert_null(err);
    return a;
}

/* authenticator_authenticate, which must succeed. */
static auth_user *authn_ok(const authenticator *a, X509 *cert, long verify, const char *authz)
{
    auth_request r = {.cert = cert, .verify = verify, .authorization = authz};
    auth_user *u = NULL;
    char *why = NULL;
    int rc = authenticator_authenticate(a, &r, &u, &why);
    if (rc != 1)
        fail_msg("authenticate (authorization \"%s\"): %d, %s", authz ? authz : "(none)", rc,
                 why ? why : "(no reason)");
    assert_null(why);
    assert_non_null(u);
    return u;
}

/* authenticator_authenticate, which must refuse without a reason (no
 * certificate: nothing was wrong, there was nothing at all). */
static void expect_unauthorized_silently(const authenticator *a, const char *authz)
{
    auth_request r = {.authorization = authz};
    auth_user *u = (auth_user *)1;
    char *why = NULL;
    assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 0);
    assert_null(u);
    if (why)
        fail_msg("reason \"%s\" for no credentials", why);
}

/* authenticator_authenticate, which must refuse; returns *why. */
static char *authn_refused(const authenticator *a, X509 *cert, long verify, const char *authz)
{
    auth_request r = {.cert = cert, .verify = verify, .authorization = authz};
    auth_user *u = (auth_user *)1;
    char *why = NULL;
    int rc = authenticator_authenticate(a, &r, &u, &why);
    if (rc != 0)
        fail_msg("authenticate (authorization \"%s\") let %s in", authz ? authz : "(none)",
                 u ? u->name : "?");
    assert_null(u);
    assert_non_null(why);
    return why;
}

static void expect_refused(const authenticator *a, X509 *cert, long verify, const char *authz,
                           const char *words)
{
    char *why = authn_refused(a, cert, verify, authz);
    if (!strstr(why, words))
        fail_msg("reason \"%s\" lacks \"%s\"", why, words);
    free(why);
}

static void expect_anonymous(const authenticator *a, X509 *cert, long verify, const char *authz)
{
    auth_user *u = authn_ok(a, cert, verify, authz);
    expect_user(u, AUTH_USER_ANONYMOUS, "", AUTH_GROUP_UNAUTHENTICATED, NULL);
    auth_user_unref(u);
}

/* ---- auth_x509 ------------------------------------------------------------- */

static void test_x509_admin(void **state)
{
    (void)state;
    long v = verdict(pk.admin_a, pk.ca_a, 0);
    assert_int_equal(v, X509_V_OK);
    auth_user *u = NULL;
    char *err = NULL;
    assert_int_equal(auth_x509(pk.admin_a, v, &u, &err), 1);
    assert_null(err);
    /* The groups as the certificate says: system:authenticated is the
     * caller's to add. */
    expect_user(u, "system:admin", "", AUTH_GROUP_MASTERS, NULL);
    assert_null(u->extra);
    auth_user_unref(u);

    /* authenticator_x509 adds it. */
    assert_int_equal(authenticator_x509(pk.admin_a, v, &u, &err), 1);
    expect_user(u, "system:admin", "", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
}

static void expect_x509_refused(X509 *cert, long v, const char *msg)
{
    auth_user *u = (auth_user *)1;
    char *err = NULL;
    assert_int_equal(auth_x509(cert, v, &u, &err), -1);
    assert_null(u);
    assert_non_null(err);
    assert_string_equal(err, msg);
    free(err);
    err = NULL;
    u = (auth_user *)1;
    assert_int_equal(authenticator_x509(cert, v, &u, &err), -1);
    assert_null(u);
    assert_string_equal(err, msg);
    free(err);
}

static void test_x509_other_ca(void **state)
{
    (void)state;
    /* b's admin certificate alone (what a client sends) against a's CA:
     * OpenSSL cannot check the leaf's signature. */
    long v = verdict(pk.admin_b, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE);
    expect_x509_refused(pk.admin_b, v,
                        "x509: certificate signed by unknown authority (unable to verify the "
                        "first certificate)");
    /* No CA at all. */
    v = verdict(pk.admin_a, NULL, 0);
    assert_int_equal(v, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE);
    /* b's CA itself, self-signed, presented as a client certificate. */
    v = verdict(pk.ca_b, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT);
    expect_x509_refused(pk.ca_b, v,
                        "x509: certificate signed by unknown authority (self-signed certificate)");
    /* b's admin sent with b's CA: a self-signed root nobody trusts. */
    STACK_OF(X509) *chain = sk_X509_new_null();
    sk_X509_push(chain, pk.ca_b);
    v = verdict_chain(pk.admin_b, chain, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN);
    expect_x509_refused(pk.admin_b, v,
                        "x509: certificate signed by unknown authority (self-signed certificate "
                        "in certificate chain)");
    sk_X509_free(chain);
    /* A leaf sent with its intermediate, whose issuer (b's CA) is not
     * sent: the issuer cannot be found. */
    EVP_PKEY *ikey = EVP_EC_gen("P-256");
    assert_non_null(ikey);
    X509 *inter =
        make_cert(ikey, pk.ca_b, pk.ca_b_key, "intermediate", NULL, 0, -3600, 86400, NULL);
    X509 *leaf = make_cert(pk.leaf_key, inter, ikey, "jane", NULL, 0, -3600, 86400, "clientAuth");
    chain = sk_X509_new_null();
    sk_X509_push(chain, inter);
    v = verdict_chain(leaf, chain, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    expect_x509_refused(leaf, v,
                        "x509: certificate signed by unknown authority (unable to get local "
                        "issuer certificate)");
    /* (trusting b's CA, the same chain verifies) */
    assert_int_equal(verdict_chain(leaf, chain, pk.ca_b, 0), X509_V_OK);
    sk_X509_free(chain);
    X509_free(leaf);
    X509_free(inter);
    EVP_PKEY_free(ikey);
}

static void test_x509_expired(void **state)
{
    (void)state;
    /* The admin certificate is valid for a year: two years on it has
     * expired (the CA, ten years, has not). */
    long v = verdict(pk.admin_a, pk.ca_a, time(NULL) + 2 * 366 * 86400L);
    assert_int_equal(v, X509_V_ERR_CERT_HAS_EXPIRED);
    expect_x509_refused(pk.admin_a, v,
                        "x509: certificate has expired or is not yet valid (certificate has "
                        "expired)");
    /* A certificate whose validity ended yesterday, now. */
    X509 *old = make_leaf(pk.ca_a, pk.ca_a_key, "old", NULL, 0, -2 * 86400L, -86400L, "clientAuth");
    v = verdict(old, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_CERT_HAS_EXPIRED);
    expect_x509_refused(old, v,
                        "x509: certificate has expired or is not yet valid (certificate has "
                        "expired)");
    X509_free(old);
    /* One valid from tomorrow. */
    X509 *early =
        make_leaf(pk.ca_a, pk.ca_a_key, "early", NULL, 0, 86400L, 2 * 86400L, "clientAuth");
    v = verdict(early, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_CERT_NOT_YET_VALID);
    expect_x509_refused(early, v,
                        "x509: certificate has expired or is not yet valid (certificate is not "
                        "yet valid)");
    X509_free(early);
}

static void test_x509_other_verdicts(void **state)
{
    (void)state;
    /* The serving certificate is for serverAuth only. */
    long v = verdict(pk.serving_a, pk.ca_a, 0);
    assert_int_equal(v, X509_V_ERR_INVALID_PURPOSE);
    expect_x509_refused(pk.serving_a, v,
                        "x509: certificate specifies an incompatible key usage (unsuitable "
                        "certificate purpose)");
    /* What Go has no words of its own for. */
    expect_x509_refused(pk.admin_a, X509_V_ERR_CERT_REVOKED,
                        "x509: certificate is not valid (certificate revoked)");
    expect_x509_refused(pk.admin_a, X509_V_ERR_CERT_SIGNATURE_FAILURE,
                        "x509: certificate is not valid (certificate signature failure)");
}

static void test_x509_no_cert(void **state)
{
    (void)state;
    auth_user *u = (auth_user *)1;
    char *err = NULL;
    assert_int_equal(auth_x509(NULL, X509_V_OK, &u, &err), 0);
    assert_null(u);
    assert_null(err);
    /* No certificate: no verdict to judge either. */
    u = (auth_user *)1;
    assert_int_equal(auth_x509(NULL, X509_V_ERR_CERT_HAS_EXPIRED, &u, &err), 0);
    assert_null(u);
    assert_null(err);
    u = (auth_user *)1;
    assert_int_equal(authenticator_x509(NULL, X509_V_OK, &u, &err), 0);
    assert_null(u);
    assert_null(err);
}

static void test_x509_subjects(void **state)
{
    (void)state;
    auth_user *u = NULL;
    char *err = NULL;

    /* Organizations in order, then the CommonName. */
    const char *const orgs[] = {"dev", "system:masters", "ops"};
    X509 *x = make_client("jane", orgs, 3);
    long v = verdict(x, pk.ca_a, 0);
    assert_int_equal(v, X509_V_OK);
    assert_int_equal(auth_x509(x, v, &u, &err), 1);
    expect_user(u, "jane", "", "dev", "system:masters", "ops", NULL);
    auth_user_unref(u);
    X509_free(x);

    /* No Organization: no groups. */
    x = make_client("solo", NULL, 0);
    assert_int_equal(auth_x509(x, verdict(x, pk.ca_a, 0), &u, &err), 1);
    expect_user(u, "solo", "", NULL);
    auth_user_unref(u);
    X509_free(x);

    /* UTF-8 names, and a CommonName that is a BMPString (UCS-2). */
    const char *const uorgs[] = {"grüppe"};
    x = make_client("jöhn", uorgs, 1);
    assert_int_equal(auth_x509(x, verdict(x, pk.ca_a, 0), &u, &err), 1);
    expect_user(u, "jöhn", "", "grüppe", NULL);
    auth_user_unref(u);
    X509_free(x);
    x = make_client(NULL, NULL, 0);
    static const unsigned char bmp[] = {0, 'j', 0, 0xf6, 0, 'h', 0, 'n'};
    assert_int_equal(X509_NAME_add_entry_by_NID(X509_get_subject_name(x), NID_commonName,
                                                V_ASN1_BMPSTRING, bmp, sizeof bmp, -1, 0),
                     1);
    assert_int_equal(auth_x509(x, X509_V_OK, &u, &err), 1);
    expect_user(u, "jöhn", "", NULL);
    auth_user_unref(u);
    X509_free(x);

    /* No CommonName, or an empty one: nobody (0), even when it verifies
     * and has organizations. */
    const char *const masters[] = {"system:masters"};
    x = make_client(NULL, masters, 1);
    v = verdict(x, pk.ca_a, 0);
    assert_int_equal(v, X509_V_OK);
    u = (auth_user *)1;
    assert_int_equal(auth_x509(x, v, &u, &err), 0);
    assert_null(u);
    assert_null(err);
    X509_free(x);
    x = make_client("", masters, 1);
    v = verdict(x, pk.ca_a, 0);
    assert_int_equal(v, X509_V_OK);
    u = (auth_user *)1;
    assert_int_equal(auth_x509(x, v, &u, &err), 0);
    assert_null(u);
    assert_null(err);
    X509_free(x);
    /* An empty subject. */
    x = make_client(NULL, NULL, 0);
    assert_int_equal(auth_x509(x, X509_V_OK, &u, &err), 0);
    assert_null(err);
    X509_free(x);
}

/* ---- real handshakes -------------------------------------------------------- */

static void test_handshake_verdicts(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    long v;

    /* a's admin: verified during the handshake. */
    X509 *peer = handshake(pk.admin_a, pk.admin_a_key, &v);
    assert_non_null(peer);
    assert_int_equal(v, X509_V_OK);
    auth_user *u = authn_ok(a, peer, v, NULL);
    expect_user(u, "system:admin", "", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    X509_free(peer);

    /* b's admin: the handshake goes through, the certificate does not
     * verify, the request is unauthorized even with anonymous on. */
    peer = handshake(pk.admin_b, pk.admin_b_key, &v);
    assert_non_null(peer);
    assert_int_equal(v, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE);
    assert_int_equal(X509_cmp(peer, pk.admin_b), 0);
    expect_refused(a, peer, v, NULL, "x509: certificate signed by unknown authority");
    /* A valid bearer token beside it still says who it is. */
    u = authn_ok(a, peer, v, "Bearer plaintok");
    expect_user(u, "token-user", "uid-2", AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    X509_free(peer);

    /* b's admin sent with b's CA: a root a does not trust. */
    peer = handshake_chain(pk.admin_b, pk.admin_b_key, pk.ca_b, &v);
    assert_non_null(peer);
    assert_int_equal(v, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN);
    expect_refused(a, peer, v, NULL, "x509: certificate signed by unknown authority");
    X509_free(peer);

    /* The serving certificate as a client's: wrong key usage. */
    peer = handshake(pk.serving_a, pk.serving_a_key, &v);
    assert_non_null(peer);
    assert_int_equal(v, X509_V_ERR_INVALID_PURPOSE);
    expect_refused(a, peer, v, NULL, "x509: certificate specifies an incompatible key usage");
    X509_free(peer);

    /* A certificate that expired yesterday. */
    X509 *old = make_leaf(pk.ca_a, pk.ca_a_key, "old", NULL, 0, -2 * 86400L, -86400L, "clientAuth");
    peer = handshake(old, pk.leaf_key, &v);
    assert_non_null(peer);
    assert_int_equal(v, X509_V_ERR_CERT_HAS_EXPIRED);
    expect_refused(a, peer, v, NULL, "x509: certificate has expired or is not yet valid");
    X509_free(peer);
    X509_free(old);

    /* Expired and from b's CA: refused (OpenSSL's last error is the
     * expiry; Go would name the authority first). */
    old = make_leaf(pk.ca_b, pk.ca_b_key, "old", NULL, 0, -2 * 86400L, -86400L, "clientAuth");
    peer = handshake(old, pk.leaf_key, &v);
    assert_non_null(peer);
    assert_int_not_equal(v, X509_V_OK);
    assert_int_equal(v, verdict(old, pk.ca_a, 0));
    expect_refused(a, peer, v, NULL, "x509: certificate ");
    X509_free(peer);
    X509_free(old);

    /* No client certificate: anonymous. */
    peer = handshake(NULL, NULL, &v);
    assert_null(peer);
    expect_anonymous(a, peer, v, NULL);
    authenticator_free(a);
}

/* ---- the authenticator ------------------------------------------------------ */

static void test_cert_user_authenticated(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    auth_user *u = authn_ok(a, pk.admin_a, X509_V_OK, NULL);
    expect_user(u, "system:admin", "", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    /* A certificate already in system:authenticated gets it once. */
    const char *const orgs[] = {AUTH_GROUP_AUTHENTICATED, "dev"};
    X509 *x = make_client("jane", orgs, 2);
    u = authn_ok(a, x, X509_V_OK, NULL);
    expect_user(u, "jane", "", AUTH_GROUP_AUTHENTICATED, "dev", NULL);
    auth_user_unref(u);
    X509_free(x);
    authenticator_free(a);
}

static void test_cert_beats_token(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    /* A valid certificate decides: the token is not looked at, valid
     * or not (upstream's union returns the first success). */
    auth_user *u = authn_ok(a, pk.admin_a, X509_V_OK, "Bearer plaintok");
    expect_user(u, "system:admin", "", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    u = authn_ok(a, pk.admin_a, X509_V_OK, "Bearer no-such-token");
    assert_string_equal(u->name, "system:admin");
    auth_user_unref(u);
    authenticator_free(a);
}

static void test_bad_cert_and_token(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    long v = verdict(pk.admin_b, pk.ca_a, 0);
    /* A bad certificate and a valid token: the token's user. */
    auth_user *u = authn_ok(a, pk.admin_b, v, "Bearer admintok");
    expect_user(u, "token-admin", "uid-1", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    /* A bad certificate alone: unauthorized, not anonymous. */
    char *why = authn_refused(a, pk.admin_b, v, NULL);
    assert_string_equal(why, "x509: certificate signed by unknown authority (unable to verify "
                             "the first certificate)");
    free(why);
    /* A bad certificate and a non-bearer Authorization: the same. */
    expect_refused(a, pk.admin_b, v, "Basic YWxpY2U6cGFzcw==", "unknown authority");
    /* Both bad: both reasons. */
    why = authn_refused(a, pk.admin_b, v, "Bearer wrong");
    assert_string_equal(why, "x509: certificate signed by unknown authority (unable to verify "
                             "the first certificate); invalid bearer token");
    free(why);
    authenticator_free(a);
}

static void test_nameless_cert_falls_through(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    /* A verified certificate without a CommonName names nobody: the
     * request goes on as if it had none. */
    const char *const masters[] = {AUTH_GROUP_MASTERS};
    X509 *x = make_client(NULL, masters, 1);
    expect_anonymous(a, x, X509_V_OK, NULL);
    auth_user *u = authn_ok(a, x, X509_V_OK, "Bearer plaintok");
    expect_user(u, "token-user", "uid-2", AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    X509_free(x);
    authenticator_free(a);
}

static void test_anonymous(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    expect_anonymous(a, NULL, X509_V_OK, NULL);
    /* The verdict of no certificate is not looked at. */
    expect_anonymous(a, NULL, X509_V_ERR_CERT_HAS_EXPIRED, NULL);
    /* Each request gets a reference to one shared user. */
    auth_user *u1 = authn_ok(a, NULL, X509_V_OK, NULL);
    auth_user *u2 = authn_ok(a, NULL, X509_V_OK, NULL);
    assert_ptr_equal(u1, u2);
    auth_user_unref(u1);
    auth_user_unref(u2);
    authenticator_free(a);

    /* --anonymous-auth=false: unauthorized, with no reason to log (no
     * credentials were wrong), as upstream. */
    a = new_authn(false, false, NULL, NULL);
    expect_unauthorized_silently(a, NULL);
    expect_unauthorized_silently(a, "Basic YWxpY2U6cGFzcw==");
    expect_unauthorized_silently(a, "Bearer ");
    /* A wrong credential still says why. */
    expect_refused(a, NULL, X509_V_OK, "Bearer wrong", "invalid bearer token");
    /* A credential still works. */
    auth_user *u = authn_ok(a, NULL, X509_V_OK, "Bearer plaintok");
    assert_string_equal(u->name, "token-user");
    auth_user_unref(u);
    u = authn_ok(a, pk.admin_a, X509_V_OK, NULL);
    assert_string_equal(u->name, "system:admin");
    auth_user_unref(u);
    authenticator_free(a);
}

static void test_plain_http(void **state)
{
    (void)state;
    authenticator *a = new_authn(false, true, NULL, NULL);
    auth_user *u = authn_ok(a, NULL, X509_V_OK, NULL);
    expect_user(u, AUTH_USER_UNSECURED, "", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    u = authn_ok(a, NULL, X509_V_OK, "Basic YWxpY2U6cGFzcw==");
    assert_string_equal(u->name, AUTH_USER_UNSECURED);
    auth_user_unref(u);
    /* A bearer token is still read: a good one is its user, a bad one
     * is refused. */
    u = authn_ok(a, NULL, X509_V_OK, "Bearer plaintok");
    expect_user(u, "token-user", "uid-2", AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);
    expect_refused(a, NULL, X509_V_OK, "Bearer wrong", "invalid bearer token");
    authenticator_free(a);
    /* With anonymous on too, plain HTTP is still system:unsecured. */
    a = new_authn(true, true, NULL, NULL);
    u = authn_ok(a, NULL, X509_V_OK, NULL);
    assert_string_equal(u->name, AUTH_USER_UNSECURED);
    auth_user_unref(u);
    authenticator_free(a);
}

static void test_bearer_header_forms(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    static const char *const good[] = {"Bearer plaintok", "bearer plaintok", "BEARER plaintok",
                                       "BeArEr plaintok",
                                       /* as Go's SplitN(auth, " ", 3): the rest is dropped */
                                       "Bearer plaintok extra", "Bearer plaintok "};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        auth_user *u = authn_ok(a, NULL, X509_V_OK, good[i]);
        if (strcmp(u->name, "token-user"))
            fail_msg("\"%s\": user %s", good[i], u->name);
        auth_user_unref(u);
    }
    /* No bearer token at all: anonymous, as upstream's bearertoken
     * answers "not mine". */
    static const char *const none[] = {"",
                                       "Basic YWxpY2U6cGFzcw==",
                                       "Bearer",
                                       "Bearer ",
                                       "Bearer  plaintok", /* Go: an empty token then the rest */
                                       "Bearerplaintok",
                                       "Bearer\tplaintok",
                                       "Token plaintok",
                                       "plaintok"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        expect_anonymous(a, NULL, X509_V_OK, none[i]);
    /* A token the file does not hold: unauthorized, in upstream's words. */
    char *why = authn_refused(a, NULL, X509_V_OK, "Bearer no-such-token");
    assert_string_equal(why, "invalid bearer token");
    free(why);
    /* Case matters in the token. */
    expect_refused(a, NULL, X509_V_OK, "Bearer PLAINTOK", "invalid bearer token");
    authenticator_free(a);
}

/* ---- the token hook ----------------------------------------------------------- */

typedef struct hook {
    int rc;          /* what to answer */
    char aud[256];   /* the audiences it was asked for, as JSON ("-": NULL) */
    const char *err; /* with rc -1 or 0: set *err to this (NULL: none) */
    int calls;
    char last[128];    /* the token it was given */
    auth_user *keep;   /* a user it answers with and keeps a reference to */
    bool fresh_groups; /* answer a new user in system:serviceaccounts */
} hook;

static int token_hook(void *arg, const char *token, const json_t *audiences, auth_user **out,
                      json_t **matched, char **err)
{
    (void)matched; /* (left unset: the authenticator then reports none) */
    hook *h = arg;
    h->calls++;
    snprintf(h->last, sizeof h->last, "%s", token);
    char *aud = audiences ? json_dumps(audiences, JSON_COMPACT) : NULL;
    snprintf(h->aud, sizeof h->aud, "%s", aud ? aud : "-");
    free(aud);
    if (h->rc == 1) {
        if (h->keep) {
            *out = auth_user_ref(h->keep);
        } else {
            const char *groups[] = {"system:serviceaccounts", "system:serviceaccounts:ns"};
            *out = auth_user_new("system:serviceaccount:ns:sa", "sa-uid", groups, 2, NULL);
        }
        return 1;
    }
    if (h->err)
        *err = strdup(h->err);
    return h->rc;
}

static void test_token_hook(void **state)
{
    (void)state;
    hook h = {.rc = 1};
    authenticator *a = new_authn(true, false, token_hook, &h);

    /* A token of the file: the hook is not asked. */
    auth_user *u = authn_ok(a, NULL, X509_V_OK, "Bearer plaintok");
    assert_string_equal(u->name, "token-user");
    auth_user_unref(u);
    assert_int_equal(h.calls, 0);
    /* No bearer token: not asked either. */
    expect_anonymous(a, NULL, X509_V_OK, "Basic abc");
    assert_int_equal(h.calls, 0);
    /* A valid certificate decides before it. */
    u = authn_ok(a, pk.admin_a, X509_V_OK, "Bearer sa.jwt.token");
    assert_string_equal(u->name, "system:admin");
    auth_user_unref(u);
    assert_int_equal(h.calls, 0);

    /* 1: its user, in system:authenticated. */
    u = authn_ok(a, NULL, X509_V_OK, "Bearer sa.jwt.token");
    assert_int_equal(h.calls, 1);
    assert_string_equal(h.last, "sa.jwt.token");
    expect_user(u, "system:serviceaccount:ns:sa", "sa-uid", "system:serviceaccounts",
                "system:serviceaccounts:ns", AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(u);

    /* 0: not its kind of token: "invalid bearer token". */
    h.rc = 0;
    char *why = authn_refused(a, NULL, X509_V_OK, "Bearer other");
    assert_string_equal(why, "invalid bearer token");
    free(why);
    /* -1 with its error: that error. */
    h.rc = -1;
    h.err = "service account token has expired";
    why = authn_refused(a, NULL, X509_V_OK, "Bearer expired.jwt");
    assert_string_equal(why, "service account token has expired");
    free(why);
    assert_string_equal(h.last, "expired.jwt");
    /* -1 without one: the default. */
    h.err = NULL;
    why = authn_refused(a, NULL, X509_V_OK, "Bearer bad.jwt");
    assert_string_equal(why, "invalid bearer token");
    free(why);
    /* After a bad certificate, both reasons. */
    h.err = "token is not valid yet";
    why = authn_refused(a, pk.admin_b, verdict(pk.admin_b, pk.ca_a, 0), "Bearer early.jwt");
    assert_string_equal(why, "x509: certificate signed by unknown authority (unable to verify "
                             "the first certificate); token is not valid yet");
    free(why);
    /* Asked once for each token the file does not hold. */
    assert_int_equal(h.calls, 5);
    authenticator_free(a);
}

static void test_hook_user_not_mutated(void **state)
{
    (void)state;
    /* A hook that answers with a user it keeps (a cache): the group is
     * added to a copy. */
    const char *groups[] = {"system:serviceaccounts"};
    hook h = {.rc = 1};
    h.keep = auth_user_new("system:serviceaccount:ns:cached", "uid-c", groups, 1, NULL);
    authenticator *a = new_authn(true, false, token_hook, &h);
    for (int i = 0; i < 3; i++) {
        auth_user *u = authn_ok(a, NULL, X509_V_OK, "Bearer cached.jwt");
        expect_user(u, "system:serviceaccount:ns:cached", "uid-c", "system:serviceaccounts",
                    AUTH_GROUP_AUTHENTICATED, NULL);
        assert_ptr_not_equal(u, h.keep);
        auth_user_unref(u);
    }
    expect_user(h.keep, "system:serviceaccount:ns:cached", "uid-c", "system:serviceaccounts", NULL);
    assert_int_equal(atomic_load(&h.keep->refs), 1);
    auth_user_unref(h.keep);
    authenticator_free(a);
}

static void test_token_file_users_not_mutated(void **state)
{
    (void)state;
    authenticator *a = new_authn(true, false, NULL, NULL);
    /* The same token twice (and more): the group once each time. */
    auth_user *first = authn_ok(a, NULL, X509_V_OK, "Bearer admintok");
    for (int i = 0; i < 5; i++) {
        auth_user *u = authn_ok(a, NULL, X509_V_OK, "Bearer admintok");
        expect_user(u, "token-admin", "uid-1", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
        /* A copy of its own, not the file's user. */
        assert_ptr_not_equal(u, first);
        assert_int_equal(atomic_load(&u->refs), 1);
        auth_user_unref(u);
    }
    expect_user(first, "token-admin", "uid-1", AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED, NULL);
    auth_user_unref(first);

    /* The file's users as read: a fresh read of the same file sees them
     * as written, and a user already in system:authenticated is handed
     * out as it is (the file's own, shared). */
    char *err = NULL;
    tokenfile *t = tokenfile_load(pk.token_file, &err);
    assert_non_null(t);
    auth_user *fu = tokenfile_lookup(t, "admintok");
    expect_user(fu, "token-admin", "uid-1", AUTH_GROUP_MASTERS, NULL);
    auth_user_unref(fu);
    tokenfile_free(t);
    auth_user *u1 = authn_ok(a, NULL, X509_V_OK, "Bearer authtok");
    auth_user *u2 = authn_ok(a, NULL, X509_V_OK, "Bearer authtok");
    expect_user(u1, "already", "uid-3", "dev", AUTH_GROUP_AUTHENTICATED, NULL);
    assert_ptr_equal(u1, u2);
    auth_user_unref(u1);
    auth_user_unref(u2);

    /* Upstream's adder leaves alone a user in system:unauthenticated and
     * one named system:anonymous. */
    auth_user *u = authn_ok(a, NULL, X509_V_OK, "Bearer unauthtok");
    expect_user(u, "weird", "uid-4", AUTH_GROUP_UNAUTHENTICATED, NULL);
    auth_user_unref(u);
    u = authn_ok(a, NULL, X509_V_OK, "Bearer anontok");
    expect_user(u, AUTH_USER_ANONYMOUS, "uid-5", "dev", NULL);
    auth_user_unref(u);
    authenticator_free(a);
}

/* Many threads authenticating the same token at once (the file's user is
 * shared and must be copied, never changed). */
typedef struct worker {
    const authenticator *a;
    int bad;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 2000; i++) {
        /* every other pair asks for the token's audiences, as a
         * TokenReview does */
        json_t *matched = NULL;
        auth_request r = {.authorization = i % 2 ? "Bearer admintok" : "Bearer authtok",
                          .audiences_out = i % 4 < 2 ? &matched : NULL};
        auth_user *u = NULL;
        char *why = NULL;
        if (authenticator_authenticate(w->a, &r, &u, &why) != 1 || u->ngroups != 2 ||
            strcmp(u->groups[1], AUTH_GROUP_AUTHENTICATED) ||
            (r.audiences_out && json_array_size(matched) != 1))
            w->bad++;
        json_decref(matched);
        auth_user_unref(u);
        free(why);
    }
    return NULL;
}

static void test_concurrent_lookups(void **state)
{
    (void)state;
    json_t *api = json_pack("[s]", "api");
    auth_config c = {.anonymous = true, .token_file = pk.token_file, .api_audiences = api};
    char *err = NULL;
    authenticator *a = authenticator_new(&c, &err);
    assert_non_null(a);
    enum { N = 4 };
    pthread_t th[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){a, 0};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].bad, 0);
    }
    authenticator_free(a);
    json_decref(api);
}

/* Audiences: the token file's tokens carry none, so they answer only
 * for the API's (a TokenReview for another audience is not theirs); the
 * hook is asked with the audiences wanted. */
static void test_audiences(void **state)
{
    (void)state;
    json_t *api = json_pack("[ss]", "https://kubernetes.default.svc.cluster.local", "api");
    hook h = {.rc = 0};
    auth_config c = {.anonymous = true,
                     .token_file = pk.token_file,
                     .token_fn = token_hook,
                     .token_arg = &h,
                     .api_audiences = api};
    char *err = NULL;
    authenticator *a = authenticator_new(&c, &err);
    assert_non_null(a);
    assert_ptr_equal(authenticator_api_audiences(a), api);

    json_t *aud_api = json_pack("[s]", "api");
    json_t *aud_vault = json_pack("[s]", "vault");
    json_t *aud_both = json_pack("[ss]", "vault", "api");
    const json_t *ok[] = {NULL, aud_api, aud_both};
    for (size_t i = 0; i < 3; i++) {
        auth_request r = {.authorization = "Bearer plaintok", .audiences = ok[i]};
        auth_user *u = NULL;
        char *why = NULL;
        assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 1);
        expect_user(u, "token-user", "uid-2", AUTH_GROUP_AUTHENTICATED, NULL);
        auth_user_unref(u);
    }
    assert_int_equal(h.calls, 0);

    /* Asked for them (a TokenReview), the file's token is good for the
     * API's audiences among those wanted: new strings, never references
     * to the configured ones, which every serving thread shares. */
    for (size_t i = 0; i < 3; i++) {
        json_t *matched = NULL;
        auth_request r = {
            .authorization = "Bearer plaintok", .audiences = ok[i], .audiences_out = &matched};
        auth_user *u = NULL;
        char *why = NULL;
        assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 1);
        char *got = json_dumps(matched, JSON_COMPACT);
        assert_string_equal(got, i ? "[\"api\"]"
                                   : "[\"https://kubernetes.default.svc.cluster.local\",\"api\"]");
        free(got);
        for (size_t j = 0; j < json_array_size(api); j++)
            assert_int_equal(json_array_get(api, j)->refcount, 1);
        json_decref(matched);
        auth_user_unref(u);
    }

    /* For another audience the file is not asked; the hook is. */
    auth_request r = {.authorization = "Bearer plaintok", .audiences = aud_vault};
    auth_user *u = (auth_user *)1;
    char *why = NULL;
    assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 0);
    assert_null(u);
    assert_string_equal(why, "invalid bearer token");
    free(why);
    assert_int_equal(h.calls, 1);
    assert_string_equal(h.aud, "[\"vault\"]");
    h.rc = 1;
    why = NULL;
    assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 1);
    assert_string_equal(u->name, "system:serviceaccount:ns:sa");
    auth_user_unref(u);
    /* Without audiences wanted, the hook gets NULL (the API's). */
    r = (auth_request){.authorization = "Bearer sa.jwt"};
    assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 1);
    assert_string_equal(h.aud, "-");
    auth_user_unref(u);
    authenticator_free(a);

    /* No API audiences known: the file answers only when none is asked. */
    c = (auth_config){.anonymous = true, .token_file = pk.token_file};
    a = authenticator_new(&c, &err);
    assert_non_null(a);
    assert_null(authenticator_api_audiences(a));
    r = (auth_request){.authorization = "Bearer plaintok", .audiences = aud_api};
    u = (auth_user *)1;
    assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 0);
    assert_string_equal(why, "invalid bearer token");
    free(why);
    r.audiences = NULL;
    assert_int_equal(authenticator_authenticate(a, &r, &u, &why), 1);
    auth_user_unref(u);
    authenticator_free(a);
    json_decref(aud_api);
    json_decref(aud_vault);
    json_decref(aud_both);
    json_decref(api);
}

static void test_token_file_errors(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/missing.csv", pk.root);
    auth_config c = {.anonymous = true, .token_file = path};
    char *err = NULL;
    assert_null(authenticator_new(&c, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, path));
    free(err);
    err = NULL;

    /* No token file: every bearer token is unknown. */
    c.token_file = NULL;
    authenticator *a = authenticator_new(&c, &err);
    assert_non_null(a);
    assert_null(err);
    expect_refused(a, NULL, X509_V_OK, "Bearer admintok", "invalid bearer token");
    expect_anonymous(a, NULL, X509_V_OK, NULL);
    authenticator_free(a);
    authenticator_free(NULL);
}

/* ---- users ---------------------------------------------------------------------- */

static void expect_json(const auth_user *u, const char *want)
{
    json_t *got = auth_user_info_json(u);
    json_t *w = json_loads(want, 0, NULL);
    assert_non_null(w);
    if (!json_equal(got, w)) {
        char *s = json_dumps(got, JSON_SORT_KEYS);
        fail_msg("UserInfo %s, want %s", s, want);
    }
    json_decref(got);
    json_decref(w);
}

static void test_user_info_json(void **state)
{
    (void)state;
    /* Only the name: the rest left out (omitempty). */
    auth_user *u = auth_user_new("alice", NULL, NULL, 0, NULL);
    expect_json(u, "{\"username\": \"alice\"}");
    auth_user_unref(u);
    json_t *none = json_object();
    u = auth_user_new("alice", "", NULL, 0, none);
    json_decref(none);
    expect_json(u, "{\"username\": \"alice\"}");
    auth_user_unref(u);

    /* Everything. */
    const char *groups[] = {"g1", "g2"};
    json_t *extra = json_pack("{s:[s]}", "authentication.kubernetes.io/pod-name", "p1");
    u = auth_user_new("system:serviceaccount:ns:sa", "u-1", groups, 2, extra);
    json_decref(extra);
    expect_json(u, "{\"username\": \"system:serviceaccount:ns:sa\", \"uid\": \"u-1\","
                   " \"groups\": [\"g1\", \"g2\"],"
                   " \"extra\": {\"authentication.kubernetes.io/pod-name\": [\"p1\"]}}");
    auth_user_unref(u);

    /* An authenticated token user as the server would show it. */
    authenticator *a = new_authn(true, false, NULL, NULL);
    u = authn_ok(a, NULL, X509_V_OK, "Bearer admintok");
    expect_json(u, "{\"username\": \"token-admin\", \"uid\": \"uid-1\","
                   " \"groups\": [\"system:masters\", \"system:authenticated\"]}");
    auth_user_unref(u);
    u = authn_ok(a, NULL, X509_V_OK, NULL);
    expect_json(u, "{\"username\": \"system:anonymous\", \"groups\": "
                   "[\"system:unauthenticated\"]}");
    auth_user_unref(u);
    u = authn_ok(a, pk.admin_a, X509_V_OK, NULL);
    expect_json(u, "{\"username\": \"system:admin\","
                   " \"groups\": [\"system:masters\", \"system:authenticated\"]}");
    auth_user_unref(u);
    authenticator_free(a);
}

static void test_user_groups(void **state)
{
    (void)state;
    const char *groups[] = {"a", "b", "a"};
    auth_user *u = auth_user_new(NULL, NULL, groups, 3, NULL);
    expect_user(u, "", "", "a", "b", NULL);
    auth_user_add_group(u, "b");
    auth_user_add_group(u, "c");
    expect_user(u, "", "", "a", "b", "c", NULL);
    assert_true(auth_user_in_group(u, "c"));
    assert_false(auth_user_in_group(u, "d"));
    assert_ptr_equal(auth_user_ref(u), u);
    assert_int_equal(atomic_load(&u->refs), 2);
    auth_user_unref(u);
    auth_user_unref(u);
    auth_user_unref(NULL);
    assert_null(auth_user_ref(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_x509_admin),
        cmocka_unit_test(test_x509_other_ca),
        cmocka_unit_test(test_x509_expired),
        cmocka_unit_test(test_x509_other_verdicts),
        cmocka_unit_test(test_x509_no_cert),
        cmocka_unit_test(test_x509_subjects),
        cmocka_unit_test(test_handshake_verdicts),
        cmocka_unit_test(test_cert_user_authenticated),
        cmocka_unit_test(test_cert_beats_token),
        cmocka_unit_test(test_bad_cert_and_token),
        cmocka_unit_test(test_nameless_cert_falls_through),
        cmocka_unit_test(test_anonymous),
        cmocka_unit_test(test_plain_http),
        cmocka_unit_test(test_bearer_header_forms),
        cmocka_unit_test(test_token_hook),
        cmocka_unit_test(test_hook_user_not_mutated),
        cmocka_unit_test(test_token_file_users_not_mutated),
        cmocka_unit_test(test_concurrent_lookups),
        cmocka_unit_test(test_audiences),
        cmocka_unit_test(test_token_file_errors),
        cmocka_unit_test(test_user_info_json),
        cmocka_unit_test(test_user_groups),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
