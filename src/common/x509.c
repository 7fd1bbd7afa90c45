/* x509.c - making X.509 certificates with OpenSSL 3 (see x509.h). */
#include "common/x509.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdlib.h>

#include <openssl/bn.h>
#include <openssl/x509v3.h>

#include "common/text.h"

/* notBefore is an hour back, so that a peer whose clock is a little
 * behind accepts a certificate made a moment ago. */
#define BACKDATE_SECONDS 3600

/* Adds extension `nid` = `value` (OpenSSL's config syntax) to x. */
static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* The subjectAltName value for `sans`: "DNS:a,IP:1.2.3.4" (malloc'd),
 * or NULL when out of memory (common/ is libckube's too: no abort). */
static char *san_value(const char *const *sans, size_t n)
{
    ckube__strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned char ip[16];
        bool is_ip = inet_pton(AF_INET, sans[i], ip) == 1 || inet_pton(AF_INET6, sans[i], ip) == 1;
        ckube__sb_printf(&b, "%s%s:%s", i ? "," : "", is_ip ? "IP" : "DNS", sans[i]);
    }
    return ckube__sb_take(&b);
}

X509 *ckube__x509_make(EVP_PKEY *key, const char *cn, const char *org, X509 *ca, EVP_PKEY *ca_key,
                       char kind, int days, const char *const *sans, size_t nsans)
{
    X509 *x = X509_new();
    bool ok = x && X509_set_version(x, 2) == 1;
    BIGNUM *serial = BN_new();
    ok = ok && serial && BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
         BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) != NULL;
    BN_free(serial);
    ok = ok && X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_SECONDS) &&
         X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400) && X509_set_pubkey(x, key) == 1;
    X509_NAME *name = ok ? X509_get_subject_name(x) : NULL;
    ok = ok &&
         (!org || X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *)org,
                                             -1, -1, 0) == 1) &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                    0) == 1;
    ok = ok && X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name) == 1;
    X509 *issuer = ca ? ca : x;
    if (kind == 'c') {
        ok = ok && add_ext(x, issuer, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(x, issuer, NID_key_usage,
                     "critical,digitalSignature,keyEncipherment,keyCertSign");
    } else {
        ok = ok && add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
             add_ext(x, issuer, NID_ext_key_usage, kind == 's' ? "serverAuth" : "clientAuth");
    }
    ok = ok && add_ext(x, issuer, NID_subject_key_identifier, "hash");
    if (ca)
        ok = ok && add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
    if (ok && nsans) {
        char *v = san_value(sans, nsans);
        ok = v && add_ext(x, issuer, NID_subject_alt_name, v);
        free(v);
    }
    ok = ok && X509_sign(x, ca_key ? ca_key : key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}
