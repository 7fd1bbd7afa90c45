/* secure_serving.c - the serving certificate and client CA of the
 * manager's secure serving (see secure_serving.h). */
#include "runtime/secure_serving.h"

#include "common/text.h"
#include "common/x509.h"

#include <ckube/log.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

/* upstream's self-signed serving certificate lives a year */
#define SELF_SIGNED_DAYS 365

static const char *ssl_error(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *s = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return s ? s : "unknown OpenSSL error";
}

/* The self-signed CA and certificate: installed on ctx. */
static int use_self_signed(SSL_CTX *ctx, char **err)
{
    long long now = (long long)time(NULL);
    char ca_cn[64], cn[64];
    snprintf(ca_cn, sizeof ca_cn, "localhost-ca@%lld", now);
    snprintf(cn, sizeof cn, "localhost@%lld", now);
    static const char *const sans[] = {"localhost", "127.0.0.1"};
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *key = ca_key ? EVP_EC_gen("P-256") : NULL;
    X509 *ca = key ? ckube__x509_make(ca_key, ca_cn, NULL, NULL, NULL, CKUBE__CERT_CA,
                                      SELF_SIGNED_DAYS, NULL, 0)
                   : NULL;
    X509 *x = ca ? ckube__x509_make(key, cn, NULL, ca, ca_key, CKUBE__CERT_SERVER, SELF_SIGNED_DAYS,
                                    sans, 2)
                 : NULL;
    int rc = x && SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_use_PrivateKey(ctx, key) == 1 &&
                     SSL_CTX_add1_chain_cert(ctx, ca) == 1
                 ? 0
                 : -1;
    if (rc != 0)
        ckube__set_err(err, "cannot make a self-signed serving certificate: %s", ssl_error());
    else
        CKUBE_INFO("Generated self-signed cert (%s, in memory)", cn);
    X509_free(x);
    X509_free(ca);
    EVP_PKEY_free(key);
    EVP_PKEY_free(ca_key);
    return rc;
}

static int use_files(SSL_CTX *ctx, const char *cert_file, const char *key_file, char **err)
{
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        ckube__set_err(err, "cannot load the serving certificate %s: %s", cert_file, ssl_error());
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        ckube__set_err(err, "cannot load the serving key %s: %s", key_file, ssl_error());
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ckube__set_err(err, "the serving key %s does not belong to %s", key_file, cert_file);
        return -1;
    }
    return 0;
}

/* Lets the handshake go on whatever the verification found: the request
 * reads SSL_get_verify_result and answers 401 itself, as upstream's
 * x509 authenticator fails the request rather than the handshake. */
static int keep_going(int ok, X509_STORE_CTX *x)
{
    (void)ok;
    (void)x;
    return 1;
}

X509_STORE *secure_serving_client_ca_store(const char *pem, size_t len,
                                           STACK_OF(X509_NAME) * *names_out)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509_NAME) *names = sk_X509_NAME_new_null();
    size_t n = 0;
    X509 *x;
    while (bio && store && names && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
        if (X509_STORE_add_cert(store, x) == 1) {
            X509_NAME *name = X509_NAME_dup(X509_get_subject_name(x));
            if (name && !sk_X509_NAME_push(names, name))
                X509_NAME_free(name);
            n++;
        }
        X509_free(x);
    }
    ERR_clear_error(); /* the end of the bundle */
    BIO_free(bio);
    if (!n || !store || !names) {
        X509_STORE_free(store);
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return NULL;
    }
    /* client certificates must be for client authentication, as upstream's
     * verify options (ExtKeyUsageClientAuth) */
    X509_STORE_set_purpose(store, X509_PURPOSE_SSL_CLIENT);
    if (names_out)
        *names_out = names;
    else
        sk_X509_NAME_pop_free(names, X509_NAME_free);
    return store;
}

/* Trusts the CAs of a PEM bundle for client certificates. */
static int use_client_ca(SSL_CTX *ctx, const char *pem, size_t len, char **err)
{
    STACK_OF(X509_NAME) *names = NULL;
    X509_STORE *store = secure_serving_client_ca_store(pem, len, &names);
    if (!store) {
        ckube__set_err(err, "the client CA bundle holds no PEM certificate");
        return -1;
    }
    SSL_CTX_set_cert_store(ctx, store);     /* takes the store */
    SSL_CTX_set_client_CA_list(ctx, names); /* takes the names */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, keep_going);
    return 0;
}

SSL_CTX *secure_serving_ctx_new(const char *cert_file, const char *key_file, const char *client_ca,
                                size_t len, char **err)
{
    if (!cert_file != !key_file) {
        ckube__set_err(err, "a serving certificate and its key go together: both or neither");
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ckube__set_err(err, "cannot make a TLS context: %s", ssl_error());
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    int rc = cert_file ? use_files(ctx, cert_file, key_file, err) : use_self_signed(ctx, err);
    if (rc == 0 && client_ca)
        rc = use_client_ca(ctx, client_ca, len, err);
    if (rc != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* ---- the serving certificate, read again when its files change ---- */

struct serving_cert {
    char *cert_file, *key_file; /* NULL: self-signed, never made again */
    char *client_ca;            /* NULL: none */
    size_t ca_len;
    char *who;
    SSL_CTX *ctx;
    struct stat cert_st, key_st; /* of the files ctx was made from */
    time_t checked;              /* when the files were last looked at */
};

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

serving_cert *serving_cert_new(const char *cert_file, const char *key_file, const char *client_ca,
                               size_t len, const char *who, char **err)
{
    serving_cert *c = calloc(1, sizeof *c);
    if (!c) {
        ckube__set_err(err, "out of memory");
        return NULL;
    }
    c->who = strdup(who ? who : "server");
    c->cert_file = cert_file ? strdup(cert_file) : NULL;
    c->key_file = key_file ? strdup(key_file) : NULL;
    c->client_ca = client_ca ? malloc(len ? len : 1) : NULL;
    if (!c->who || (cert_file && !c->cert_file) || (key_file && !c->key_file) ||
        (client_ca && !c->client_ca)) {
        ckube__set_err(err, "out of memory");
        serving_cert_free(c);
        return NULL;
    }
    if (client_ca)
        memcpy(c->client_ca, client_ca, len);
    c->ca_len = len;
    /* the files' identities first: a rotation between the stat and the
     * load is seen (and loaded again) at the next look */
    if (cert_file && key_file) {
        stat(cert_file, &c->cert_st);
        stat(key_file, &c->key_st);
    }
    c->ctx = secure_serving_ctx_new(cert_file, key_file, client_ca, len, err);
    if (!c->ctx) {
        serving_cert_free(c);
        return NULL;
    }
    c->checked = time(NULL);
    return c;
}

SSL_CTX *serving_cert_ctx(serving_cert *c)
{
    time_t now = time(NULL);
    if (!c->cert_file || now == c->checked)
        return c->ctx;
    c->checked = now;
    struct stat cs, ks;
    if (stat(c->cert_file, &cs) != 0 || stat(c->key_file, &ks) != 0)
        return c->ctx; /* mid-rotation (a file replaced by rename): keep what works */
    if (same_file(&cs, &c->cert_st) && same_file(&ks, &c->key_st))
        return c->ctx;
    char *err = NULL;
    SSL_CTX *ctx = secure_serving_ctx_new(c->cert_file, c->key_file, c->client_ca, c->ca_len, &err);
    if (!ctx) {
        CKUBE_ERROR("%s: %s; keeping the previous certificate", c->who, err ? err : "");
        free(err);
        /* not looked at again until the files change once more */
        c->cert_st = cs;
        c->key_st = ks;
        return c->ctx;
    }
    CKUBE_INFO("%s: loaded a new serving certificate from %s and %s", c->who, c->cert_file,
               c->key_file);
    SSL_CTX_free(c->ctx); /* connections made from it hold their own reference */
    c->ctx = ctx;
    c->cert_st = cs;
    c->key_st = ks;
    return ctx;
}

void serving_cert_free(serving_cert *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ctx);
    free(c->cert_file);
    free(c->key_file);
    free(c->client_ca);
    free(c->who);
    free(c);
}

json_t *secure_serving_auth_configmap(ckube_client *c, char **err)
{
    static const ckube_gvr CONFIGMAPS = {"", "v1", "configmaps"};
    json_t *cm = NULL;
    ckube_status *st = NULL;
    if (ckube_get(c, &CONFIGMAPS, "kube-system", "extension-apiserver-authentication", &cm, &st) !=
        0) {
        ckube__set_err(err,
                       "cannot read configmap/extension-apiserver-authentication in "
                       "kube-system: %s",
                       st && st->message ? st->message : "unknown error");
        ckube_status_free(st);
        return NULL;
    }
    json_t *data = json_incref(json_object_get(cm, "data"));
    json_decref(cm);
    return data ? data : json_object();
}

char *secure_serving_lookup_client_ca(ckube_client *c, size_t *len, char **err)
{
    json_t *data = secure_serving_auth_configmap(c, err);
    if (!data)
        return NULL;
    const char *pem = json_string_value(json_object_get(data, "client-ca-file"));
    char *out = pem && *pem ? strdup(pem) : NULL;
    if (out)
        *len = strlen(out);
    else
        ckube__set_err(err, "configmap/extension-apiserver-authentication in kube-system has no "
                            "client-ca-file");
    json_decref(data);
    return out;
}
