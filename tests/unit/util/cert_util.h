/* cert_util.h - a CA and a serving certificate it signed, written as PEM
 * files, for the tests of the HTTPS servers (runtime's http_serve, the
 * webhook server). Static inline, for tests that include <cmocka.h>
 * first: each test is its own program. */
#ifndef CKUBE_TEST_CERT_UTIL_H
#define CKUBE_TEST_CERT_UTIL_H

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>

#include "common/x509.h"

/* The three files of tu_make_certs. */
typedef struct tu_certs {
    char ca[512], crt[512], key[512];
} tu_certs;

/* Writes x and/or k to path as PEM: beside it first, then renamed into
 * place, as a rotation replaces files. */
static inline void tu_write_pem(const char *path, X509 *x, EVP_PKEY *k)
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
    assert_int_equal(rename(tmp, path), 0);
}

/* A CA and a serving certificate it signed for 127.0.0.1 with CN `cn`
 * (P-256 keys): DIR/NAME-ca.crt, DIR/NAME.crt, DIR/NAME.key. */
static inline tu_certs tu_make_certs(const char *dir, const char *name, const char *cn)
{
    tu_certs c;
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
    tu_write_pem(c.ca, ca, NULL);
    tu_write_pem(c.crt, x, NULL);
    tu_write_pem(c.key, NULL, key);
    X509_free(x);
    X509_free(ca);
    EVP_PKEY_free(key);
    EVP_PKEY_free(ca_key);
    return c;
}

#endif
