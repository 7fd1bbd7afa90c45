/* The cluster's certificates and keys (apiserver/pki): what is made on
 * first start, checked with OpenSSL itself; what is kept, what is made
 * again, and what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "apiserver/pki/pki.h"

static char dir[512];

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(dir, sizeof dir, "%s/pki-XXXXXX", tmp);
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {"ca.crt",    "ca.key",    "serving.crt", "serving.key",
                                        "admin.crt", "admin.key", "sa.key",      "sa.pub"};
    char path[600];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/pki/%s", dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/pki", dir);
    rmdir(path);
    rmdir(dir);
    return 0;
}

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(x);
    return x;
}

static EVP_PKEY *load_key(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(k);
    return k;
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 0777;
}

/* Whether `leaf` verifies against `ca` for `purpose`. */
static bool chain_ok(X509 *ca, X509 *leaf, int purpose)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_add_cert(store, ca);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf, NULL);
    X509_STORE_CTX_set_purpose(ctx, purpose);
    bool ok = X509_verify_cert(ctx) == 1;
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return ok;
}

static char *subject_field(X509 *x, int nid)
{
    static char buf[256];
    buf[0] = '\0';
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), nid, buf, sizeof buf);
    return buf;
}

static const char *const sans[] = {"localhost", "127.0.0.1", "::1", "ckube.example.com",
                                   "10.1.2.3"};

static void ensure(const char *const *names, size_t n, pki_files *f)
{
    char path[600];
    snprintf(path, sizeof path, "%s/pki", dir);
    pki_options o = {.dir = path, .sans = names, .nsans = n};
    char *err = NULL;
    int rc = pki_ensure(&o, f, &err);
    if (rc != 0)
        fail_msg("pki_ensure: %s", err ? err : "?");
    assert_null(err);
}

static void test_first_start_makes_everything(void **state)
{
    (void)state;
    pki_files f;
    ensure(sans, 5, &f);
    assert_true(f.made_ca && f.made_serving && f.made_admin && f.made_cm && f.made_sa);
    assert_true(f.made_fp_ca && f.made_fp_client);
    /* The front proxy's own CA (not the cluster's) signs its client,
     * CN=front-proxy-client, a client certificate. */
    {
        X509 *fpca = load_cert(f.fp_ca_crt), *fpc = load_cert(f.fp_client_crt);
        X509 *cca = load_cert(f.ca_crt);
        assert_int_equal(X509_check_ca(fpca), 1);
        assert_non_null(strstr(subject_field(fpca, NID_commonName), "front-proxy-ca@"));
        assert_string_equal(subject_field(fpc, NID_commonName), "front-proxy-client");
        assert_int_equal(X509_check_issued(fpca, fpc), X509_V_OK);
        assert_int_not_equal(X509_check_issued(cca, fpc), X509_V_OK);
        assert_int_equal(mode_of(f.fp_ca_key), 0600);
        assert_int_equal(mode_of(f.fp_client_key), 0600);
        X509_free(fpca);
        X509_free(fpc);
        X509_free(cca);
    }
    /* Keys 0600, certificates 0644, the directory 0700. */
    assert_int_equal(mode_of(f.ca_key), 0600);
    assert_int_equal(mode_of(f.serving_key), 0600);
    assert_int_equal(mode_of(f.admin_key), 0600);
    assert_int_equal(mode_of(f.cm_key), 0600);
    assert_int_equal(mode_of(f.cm_crt), 0644);
    assert_int_equal(mode_of(f.sa_key), 0600);
    assert_int_equal(mode_of(f.ca_crt), 0644);
    assert_int_equal(mode_of(f.serving_crt), 0644);
    char path[600];
    snprintf(path, sizeof path, "%s/pki", dir);
    assert_int_equal(mode_of(path), 0700);

    X509 *ca = load_cert(f.ca_crt), *srv = load_cert(f.serving_crt), *adm = load_cert(f.admin_crt);
    /* The CA is a CA, self-signed, matching its key. */
    assert_int_equal(X509_check_ca(ca), 1);
    EVP_PKEY *cak = load_key(f.ca_key);
    assert_int_equal(X509_check_private_key(ca, cak), 1);
    assert_non_null(strstr(subject_field(ca, NID_commonName), "ckube-ca@"));
    /* The serving certificate: for servers, from the CA, with every SAN. */
    assert_true(chain_ok(ca, srv, X509_PURPOSE_SSL_SERVER));
    assert_false(chain_ok(ca, srv, X509_PURPOSE_SSL_CLIENT));
    assert_int_equal(X509_check_ca(srv), 0);
    assert_int_equal(X509_check_host(srv, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(srv, "ckube.example.com", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(srv, "other.example.com", 0, 0, NULL), 0);
    assert_int_equal(X509_check_ip_asc(srv, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_ip_asc(srv, "::1", 0), 1);
    assert_int_equal(X509_check_ip_asc(srv, "10.1.2.3", 0), 1);
    assert_int_equal(X509_check_ip_asc(srv, "10.1.2.4", 0), 0);
    EVP_PKEY *sk = load_key(f.serving_key);
    assert_int_equal(X509_check_private_key(srv, sk), 1);
    /* The admin certificate: a client in system:masters. */
    assert_true(chain_ok(ca, adm, X509_PURPOSE_SSL_CLIENT));
    assert_false(chain_ok(ca, adm, X509_PURPOSE_SSL_SERVER));
    assert_string_equal(subject_field(adm, NID_commonName), "system:admin");
    assert_string_equal(subject_field(adm, NID_organizationName), "system:masters");
    /* The controller-manager's: a client, system:kube-controller-manager
     * and in no group (no O), so not system:masters. */
    X509 *cm = load_cert(f.cm_crt);
    assert_true(chain_ok(ca, cm, X509_PURPOSE_SSL_CLIENT));
    assert_false(chain_ok(ca, cm, X509_PURPOSE_SSL_SERVER));
    assert_string_equal(subject_field(cm, NID_commonName), "system:kube-controller-manager");
    assert_int_equal(
        X509_NAME_get_index_by_NID(X509_get_subject_name(cm), NID_organizationName, -1), -1);
    EVP_PKEY *cmk = load_key(f.cm_key);
    assert_int_equal(X509_check_private_key(cm, cmk), 1);
    EVP_PKEY_free(cmk);
    X509_free(cm);
    /* Valid now (backdated an hour), for about a year. */
    time_t now = time(NULL), year = now + 364 * 86400, later = now + 366 * 86400;
    assert_true(X509_cmp_time(X509_get0_notBefore(srv), &now) < 0);
    assert_true(X509_cmp_time(X509_get0_notAfter(srv), &year) > 0);
    assert_true(X509_cmp_time(X509_get0_notAfter(srv), &later) < 0);
    /* The ServiceAccount key: RSA 2048, its public half beside it. */
    EVP_PKEY *sa = load_key(f.sa_key);
    assert_int_equal(EVP_PKEY_get_base_id(sa), EVP_PKEY_RSA);
    assert_int_equal(EVP_PKEY_get_bits(sa), 2048);
    FILE *pf = fopen(f.sa_pub, "r");
    assert_non_null(pf);
    EVP_PKEY *pub = PEM_read_PUBKEY(pf, NULL, NULL, NULL);
    fclose(pf);
    assert_non_null(pub);
    assert_int_equal(EVP_PKEY_eq(sa, pub), 1);
    EVP_PKEY_free(pub);
    EVP_PKEY_free(sa);
    EVP_PKEY_free(sk);
    EVP_PKEY_free(cak);
    X509_free(ca);
    X509_free(srv);
    X509_free(adm);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_second_start_keeps_everything(void **state)
{
    (void)state;
    pki_files f;
    ensure(sans, 5, &f);
    char *ca = slurp(f.ca_crt), *srv = slurp(f.serving_crt), *sa = slurp(f.sa_key);
    ensure(sans, 5, &f);
    assert_false(f.made_ca || f.made_serving || f.made_admin || f.made_cm || f.made_sa);
    assert_false(f.made_fp_ca || f.made_fp_client);
    char *ca2 = slurp(f.ca_crt), *srv2 = slurp(f.serving_crt), *sa2 = slurp(f.sa_key);
    assert_string_equal(ca, ca2);
    assert_string_equal(srv, srv2);
    assert_string_equal(sa, sa2);
    /* Fewer SANs than the certificate has: still fits. */
    ensure(sans, 2, &f);
    assert_false(f.made_serving);
    free(ca);
    free(srv);
    free(sa);
    free(ca2);
    free(srv2);
    free(sa2);
}

static void test_new_san_makes_serving_again(void **state)
{
    (void)state;
    pki_files f;
    ensure(sans, 3, &f);
    char *ca = slurp(f.ca_crt);
    const char *more[] = {"localhost", "127.0.0.1", "::1", "192.168.7.9"};
    ensure(more, 4, &f);
    assert_true(f.made_serving);
    assert_false(f.made_ca || f.made_admin || f.made_sa);
    char *ca2 = slurp(f.ca_crt);
    assert_string_equal(ca, ca2); /* same CA: kubeconfigs stay valid */
    X509 *srv = load_cert(f.serving_crt), *cax = load_cert(f.ca_crt);
    assert_int_equal(X509_check_ip_asc(srv, "192.168.7.9", 0), 1);
    assert_true(chain_ok(cax, srv, X509_PURPOSE_SSL_SERVER));
    X509_free(srv);
    X509_free(cax);
    free(ca);
    free(ca2);
}

/* A leaf that expires within renew_days is made again, the client
 * certificates as the serving one; the CA and the keys of others stay. */
static void test_expiring_leaves_are_renewed(void **state)
{
    (void)state;
    pki_files f;
    ensure(sans, 1, &f);
    char *ca = slurp(f.ca_crt), *cm = slurp(f.cm_crt);
    char path[600];
    snprintf(path, sizeof path, "%s/pki", dir);
    /* Every leaf lives a year: all expire within 400 days. */
    pki_options o = {.dir = path, .sans = sans, .nsans = 1, .renew_days = 400};
    char *err = NULL;
    assert_int_equal(pki_ensure(&o, &f, &err), 0);
    assert_true(f.made_serving && f.made_admin && f.made_cm);
    assert_false(f.made_ca || f.made_sa);
    char *ca2 = slurp(f.ca_crt), *cm2 = slurp(f.cm_crt);
    assert_string_equal(ca, ca2);
    assert_string_not_equal(cm, cm2);
    assert_int_equal(mode_of(f.cm_key), 0600);
    free(ca);
    free(cm);
    free(ca2);
    free(cm2);
}

static void test_leaf_from_another_ca_is_made_again(void **state)
{
    (void)state;
    pki_files f;
    ensure(sans, 1, &f);
    /* A user replaces the CA (both files): the leaves follow it. */
    unlink(f.ca_crt);
    unlink(f.ca_key);
    ensure(sans, 1, &f);
    assert_true(f.made_ca && f.made_serving && f.made_admin && f.made_cm);
    assert_false(f.made_sa);
    X509 *ca = load_cert(f.ca_crt), *srv = load_cert(f.serving_crt);
    assert_true(chain_ok(ca, srv, X509_PURPOSE_SSL_SERVER));
    X509_free(ca);
    X509_free(srv);
}

static void test_bad_files_are_refused_not_replaced(void **state)
{
    (void)state;
    pki_files f;
    ensure(sans, 1, &f);
    char path[600];
    snprintf(path, sizeof path, "%s/pki", dir);
    pki_options o = {.dir = path, .sans = sans, .nsans = 1};
    char *err = NULL;
    /* A damaged CA certificate: an error naming it; the file is kept. */
    FILE *w = fopen(f.ca_crt, "w");
    fputs("not a certificate\n", w);
    fclose(w);
    assert_int_equal(pki_ensure(&o, &f, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "ca.crt is not a PEM certificate"));
    free(err);
    err = NULL;
    char *kept = slurp(f.ca_crt);
    assert_string_equal(kept, "not a certificate\n");
    free(kept);
    /* A CA key without its certificate. */
    unlink(f.ca_crt);
    assert_int_equal(pki_ensure(&o, &f, &err), -1);
    assert_non_null(strstr(err, "ca.key exists without"));
    free(err);
    err = NULL;
    /* No directory. */
    pki_options none = {.dir = ""};
    assert_int_equal(pki_ensure(&none, &f, &err), -1);
    assert_non_null(err);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_start_makes_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_start_keeps_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_san_makes_serving_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiring_leaves_are_renewed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_from_another_ca_is_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_files_are_refused_not_replaced, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
