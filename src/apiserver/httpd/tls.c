/* The server's TLS configuration (tls.h), with OpenSSL 3. */
#include "apiserver/httpd/tls.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

#define NFILES 4 /* cert, key, two client CA files */

/* What identifies a file's contents without reading it. */
typedef struct file_id {
    bool present;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} file_id;

struct httpd_tls {
    char *path[NFILES]; /* cert, key, client CAs (NULL: none) */
    pthread_mutex_t mu;
    SSL_CTX *ctx;         /* current; guarded by mu */
    file_id seen[NFILES]; /* what ctx (or the last failed try) was made from */
    time_t checked;       /* when the files were last looked at */
    unsigned generation;
};

/* OpenSSL's error queue as one message (and the queue emptied). */
static void ssl_errors(char *buf, size_t n)
{
    buf[0] = 0;
    unsigned long e;
    size_t used = 0;
    while ((e = ERR_get_error()) != 0) {
        const char *r = ERR_reason_error_string(e);
        int k = snprintf(buf + used, n - used, "%s%s", used ? "; " : "", r ? r : "unknown error");
        if (k < 0 || (size_t)k >= n - used)
            break;
        used += (size_t)k;
    }
    if (!used)
        snprintf(buf, n, "unknown error");
}

static file_id stat_id(const char *path)
{
    file_id id = {0};
    struct stat st;
    if (path && stat(path, &st) == 0) {
        id.present = true;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        id.size = st.st_size;
        id.mtime = st.st_mtim;
        id.ctime = st.st_ctim;
    }
    return id;
}

static bool same_id(const file_id *a, const file_id *b)
{
    return a->present == b->present && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Client certificates are asked for and always let through the handshake;
 * OpenSSL still records the verification's outcome, which
 * SSL_get_verify_result reports to the authenticator. */
static int accept_any(int ok, X509_STORE_CTX *store)
{
    (void)ok;
    (void)store;
    return 1;
}

/* ALPN: HTTP/1.1 when offered; with no overlap, no ALPN at all (as Go,
 * which then serves HTTP/1.1 anyway). */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    unsigned char sellen = 0;
    if (SSL_select_next_proto(&sel, &sellen, h11, sizeof h11 - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    *outlen = sellen;
    return SSL_TLSEXT_ERR_OK;
}

/* OpenSSL works out a certificate's extensions (key identifiers, key
 * usage, purposes) when first asked and caches them in the X509 under
 * its lock, after which readers test a flag (an atomic in the
 * uninstrumented library) and read the cache without it. The CAs and the
 * serving chain are shared by every loop's handshakes, so the first two
 * client-certificate handshakes at once (a controller-manager opening
 * its clients) look like a race on the CA's cached key identifier to
 * ThreadSanitizer. Computing them here, while the context is built and
 * before any loop can use it, leaves the handshakes only reads. */
static void warm_certificates(SSL_CTX *ctx)
{
    STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
    for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
        X509 *x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));
        if (x)
            X509_check_purpose(x, -1, 0);
    }
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    if (leaf)
        X509_check_purpose(leaf, -1, 0);
    STACK_OF(X509) *chain = NULL;
    if (SSL_CTX_get0_chain_certs(ctx, &chain) == 1)
        for (int i = 0; i < sk_X509_num(chain); i++)
            X509_check_purpose(sk_X509_value(chain, i), -1, 0);
}

/* A context from the files as they are now. NULL with *err. */
static SSL_CTX *load_ctx(char *const path[NFILES], char **err)
{
    char why[512];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_errors(why, sizeof why);
        ckube__set_err(err, "TLS: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* Writes go out of an evbuffer that may move between a write that
     * would block and its retry; idle connections (watches) give their
     * record buffers back. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    /* Read whole socket buffers, not a record header then its body: one
     * read() per request instead of two (httpd looks for what is left). */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    /* One TLS 1.3 session ticket, as Go sends (OpenSSL: two). */
    SSL_CTX_set_num_tickets(ctx, 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, path[0]) != 1) {
        ssl_errors(why, sizeof why);
        ckube__set_err(err, "cannot load the TLS certificate %s: %s", path[0], why);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, path[1], SSL_FILETYPE_PEM) != 1) {
        ssl_errors(why, sizeof why);
        ckube__set_err(err, "cannot load the TLS private key %s: %s", path[1], why);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        ckube__set_err(err, "the TLS private key %s does not match the certificate %s", path[1],
                       path[0]);
        goto fail;
    }
    STACK_OF(X509_NAME) *names = NULL;
    for (int i = 2; i < NFILES; i++) {
        if (!path[i])
            continue;
        if (SSL_CTX_load_verify_locations(ctx, path[i], NULL) != 1) {
            ssl_errors(why, sizeof why);
            ckube__set_err(err, "cannot load the client CA file %s: %s", path[i], why);
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            goto fail;
        }
        /* The CAs a client may pick its certificate by. */
        if (!names)
            names = sk_X509_NAME_new_null();
        if (names)
            SSL_add_file_cert_subjects_to_stack(names, path[i]);
    }
    if (names) {
        SSL_CTX_set_client_CA_list(ctx, names); /* takes it */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
    }
    /* Resumption within this process (tickets for TLS 1.3, a cache for
     * 1.2): a client that reconnects skips the key exchange. */
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"ckube", 5);
    warm_certificates(ctx);
    ERR_clear_error();
    return ctx;
fail:
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return NULL;
}

httpd_tls *httpd_tls_new(const httpd_tls_files *files, char **err)
{
    if (!files->cert || !files->key) {
        ckube__set_err(err, "TLS needs a certificate and a private key");
        return NULL;
    }
    httpd_tls *t = xcalloc(1, sizeof *t);
    t->path[0] = xstrdup(files->cert);
    t->path[1] = xstrdup(files->key);
    for (int i = 0; i < 2; i++)
        t->path[2 + i] = files->client_ca[i] ? xstrdup(files->client_ca[i]) : NULL;
    for (int i = 0; i < NFILES; i++)
        t->seen[i] = stat_id(t->path[i]);
    if (!(t->ctx = load_ctx(t->path, err))) {
        httpd_tls_free(t);
        return NULL;
    }
    t->generation = 1;
    t->checked = time(NULL);
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

/* Reloads the files if they changed since they were last looked at.
 * Called with mu held. */
static void maybe_reload(httpd_tls *t)
{
    time_t now = time(NULL);
    if (now == t->checked)
        return;
    t->checked = now;
    file_id cur[NFILES];
    bool changed = false;
    for (int i = 0; i < NFILES; i++) {
        cur[i] = stat_id(t->path[i]);
        if (!same_id(&cur[i], &t->seen[i]))
            changed = true;
    }
    if (!changed)
        return;
    /* Noted either way: a change that fails is reported once, and tried
     * again at the next change. */
    memcpy(t->seen, cur, sizeof cur);
    char *err = NULL;
    SSL_CTX *ctx = load_ctx(t->path, &err);
    if (!ctx) {
        CKUBE_ERROR("TLS files changed but did not load, serving the previous ones: %s",
                    err ? err : "out of memory");
        free(err);
        return;
    }
    SSL_CTX_free(t->ctx);
    t->ctx = ctx;
    t->generation++;
    CKUBE_INFO("reloaded TLS certificate %s and key %s (and the client CAs)", t->path[0],
               t->path[1]);
}

struct ssl_st *httpd_tls_accept(httpd_tls *t, int fd)
{
    pthread_mutex_lock(&t->mu);
    maybe_reload(t);
    SSL *ssl = SSL_new(t->ctx); /* holds its own reference to the context */
    pthread_mutex_unlock(&t->mu);
    if (!ssl)
        return NULL;
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_accept_state(ssl);
    return ssl;
}

unsigned httpd_tls_generation(httpd_tls *t)
{
    pthread_mutex_lock(&t->mu);
    unsigned g = t->generation;
    pthread_mutex_unlock(&t->mu);
    return g;
}

void httpd_tls_free(httpd_tls *t)
{
    if (!t)
        return;
    if (t->generation)
        pthread_mutex_destroy(&t->mu);
    SSL_CTX_free(t->ctx);
    for (int i = 0; i < NFILES; i++)
        free(t->path[i]);
    free(t);
}
