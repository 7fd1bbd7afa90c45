/* The cluster's certificates and keys (pki.h), with OpenSSL 3.
 *
 * Certificates are X.509 v3, SHA-256 signed, with a random 127-bit serial
 * and notBefore an hour in the past (clients with a clock a little behind
 * still accept a certificate made a moment ago). Extensions as
 * kube-apiserver's and k3s's: the CA is critical CA:TRUE with keyCertSign;
 * leaves are CA:FALSE with digitalSignature and keyEncipherment, and
 * serverAuth or clientAuth. */
#include "apiserver/pki/pki.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/text.h"
#include "common/x509.h"
#include "common/xalloc.h"

#define CA_DAYS 3650
#define LEAF_DAYS 365

/* OpenSSL's most recent error, for a message. */
static const char *ssl_error(void)
{
    unsigned long e = ERR_peek_last_error();
    return e ? ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "unknown error"
             : "unknown error";
}

/* ---- files ------------------------------------------------------------------ */

/* Writes what `bio` holds to `path` with `mode`, through a temporary
 * file renamed into place. */
static int write_bio(const char *path, BIO *bio, mode_t mode, char **err)
{
    char *data = NULL;
    long len = BIO_get_mem_data(bio, &data);
    char *tmp = xasprintf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    int rc = -1;
    if (fd < 0) {
        ckube__set_err(err, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    /* The mode asked for, whatever the umask. */
    if (fchmod(fd, mode) != 0 || write(fd, data, (size_t)len) != len || fsync(fd) != 0) {
        ckube__set_err(err, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        goto out;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        ckube__set_err(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(tmp);
    return rc;
}

static int write_key(const char *path, EVP_PKEY *key, char **err)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int rc = PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1
                 ? write_bio(path, bio, 0600, err)
                 : -1;
    if (rc && err && !*err)
        ckube__set_err(err, "cannot encode %s: %s", path, ssl_error());
    BIO_free(bio);
    return rc;
}

static int write_pub(const char *path, EVP_PKEY *key, char **err)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int rc = PEM_write_bio_PUBKEY(bio, key) == 1 ? write_bio(path, bio, 0644, err) : -1;
    if (rc && err && !*err)
        ckube__set_err(err, "cannot encode %s: %s", path, ssl_error());
    BIO_free(bio);
    return rc;
}

static int write_cert(const char *path, X509 *x, char **err)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int rc = PEM_write_bio_X509(bio, x) == 1 ? write_bio(path, bio, 0644, err) : -1;
    if (rc && err && !*err)
        ckube__set_err(err, "cannot encode %s: %s", path, ssl_error());
    BIO_free(bio);
    return rc;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Reads a PEM certificate or key; NULL with *err when the file is there
 * but unusable. */
static X509 *read_cert(const char *path, char **err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ckube__set_err(err, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!x)
        ckube__set_err(err, "%s is not a PEM certificate: %s", path, ssl_error());
    return x;
}

static EVP_PKEY *read_key(const char *path, char **err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ckube__set_err(err, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!k)
        ckube__set_err(err, "%s is not a PEM private key: %s", path, ssl_error());
    return k;
}

/* ---- certificates ------------------------------------------------------------ */

/* Whether x's subjectAltName holds `name` (an IP or a DNS name). */
static bool has_san(X509 *x, const char *name)
{
    unsigned char ip[16];
    int iplen = inet_pton(AF_INET, name, ip) == 1 ? 4 : inet_pton(AF_INET6, name, ip) == 1 ? 16 : 0;
    GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    bool found = false;
    for (int i = 0; gens && i < sk_GENERAL_NAME_num(gens) && !found; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        if (iplen && g->type == GEN_IPADD)
            found = g->d.ip->length == iplen && !memcmp(g->d.ip->data, ip, (size_t)iplen);
        else if (!iplen && g->type == GEN_DNS)
            found = (size_t)g->d.dNSName->length == strlen(name) &&
                    !strncasecmp((const char *)g->d.dNSName->data, name, strlen(name));
    }
    GENERAL_NAMES_free(gens);
    return found;
}

/* Why a leaf certificate must be made again, or NULL when it fits. */
static const char *leaf_unfit(X509 *x, X509 *ca, const pki_options *o, bool serving)
{
    EVP_PKEY *ca_pub = X509_get0_pubkey(ca);
    if (!ca_pub || X509_verify(x, ca_pub) != 1)
        return "not signed by the CA";
    time_t soon = time(NULL) + (time_t)(o->renew_days > 0 ? o->renew_days : 90) * 86400;
    if (X509_cmp_time(X509_get0_notAfter(x), &soon) <= 0)
        return "expires soon";
    for (size_t i = 0; serving && i < o->nsans; i++)
        if (!has_san(x, o->sans[i]))
            return "lacks a name asked for";
    return NULL;
}

/* ---- the files ------------------------------------------------------------------ */

/* Loads the CA, making it first when neither file exists. */
/* The CA at crt/key (its CN "PREFIX@TIME" when made): kept if there,
 * made if not. */
static int ensure_ca_at(const char *crt, const char *key, const char *prefix, bool *made,
                        X509 **ca, EVP_PKEY **ca_key, char **err);

static int ensure_ca(pki_files *f, X509 **ca, EVP_PKEY **ca_key, char **err)
{
    return ensure_ca_at(f->ca_crt, f->ca_key, "ckube-ca", &f->made_ca, ca, ca_key, err);
}

static int ensure_ca_at(const char *crt_path, const char *key_path, const char *prefix, bool *made,
                        X509 **ca, EVP_PKEY **ca_key, char **err)
{
    bool have_crt = exists(crt_path), have_key = exists(key_path);
    if (have_crt != have_key) {
        ckube__set_err(err, "%s exists without %s: put both back or remove it",
                       have_crt ? crt_path : key_path, have_crt ? key_path : crt_path);
        return -1;
    }
    if (have_crt) {
        *ca = read_cert(crt_path, err);
        *ca_key = *ca ? read_key(key_path, err) : NULL;
        if (*ca_key && X509_check_private_key(*ca, *ca_key) != 1) {
            ckube__set_err(err, "%s does not belong to %s", key_path, crt_path);
            return -1;
        }
        return *ca_key ? 0 : -1;
    }
    char cn[64];
    snprintf(cn, sizeof cn, "%s@%lld", prefix, (long long)time(NULL));
    *ca_key = EVP_EC_gen("P-256");
    *ca = *ca_key ? ckube__x509_make(*ca_key, cn, NULL, NULL, NULL, 'c', CA_DAYS, NULL, 0) : NULL;
    if (!*ca) {
        ckube__set_err(err, "cannot make %s: %s", crt_path, ssl_error());
        return -1;
    }
    if (write_key(key_path, *ca_key, err) || write_cert(crt_path, *ca, err))
        return -1;
    *made = true;
    return 0;
}

/* Keeps the leaf at crt/key if it fits, else makes it again. */
static int ensure_leaf(const char *crt, const char *key, X509 *ca, EVP_PKEY *ca_key,
                       const pki_options *o, char kind, const char *cn, const char *org, bool *made,
                       char **err)
{
    bool serving = kind == 's';
    if (exists(crt) && exists(key)) {
        X509 *x = read_cert(crt, err);
        if (!x)
            return -1;
        bool fits = !leaf_unfit(x, ca, o, serving);
        X509_free(x);
        if (fits)
            return 0;
    }
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = k ? ckube__x509_make(k, cn, org, ca, ca_key, kind, LEAF_DAYS,
                                   serving ? o->sans : NULL, serving ? o->nsans : 0)
                : NULL;
    int rc = -1;
    if (!x)
        ckube__set_err(err, "cannot make %s: %s", crt, ssl_error());
    else if (write_key(key, k, err) == 0 && write_cert(crt, x, err) == 0)
        rc = 0;
    *made = rc == 0;
    X509_free(x);
    EVP_PKEY_free(k);
    return rc;
}

/* The ServiceAccount signing key: kept if there, made if not. */
static int ensure_sa(pki_files *f, char **err)
{
    if (exists(f->sa_key)) {
        EVP_PKEY *k = read_key(f->sa_key, err);
        int rc = k && (exists(f->sa_pub) || write_pub(f->sa_pub, k, err) == 0) ? 0 : -1;
        EVP_PKEY_free(k);
        return rc;
    }
    EVP_PKEY *k = EVP_RSA_gen(2048);
    int rc = -1;
    if (!k)
        ckube__set_err(err, "cannot make the ServiceAccount key: %s", ssl_error());
    else if (write_key(f->sa_key, k, err) == 0 && write_pub(f->sa_pub, k, err) == 0)
        rc = 0;
    f->made_sa = rc == 0;
    EVP_PKEY_free(k);
    return rc;
}

static void set_paths(pki_files *f, const char *dir)
{
    snprintf(f->ca_crt, sizeof f->ca_crt, "%s/ca.crt", dir);
    snprintf(f->ca_key, sizeof f->ca_key, "%s/ca.key", dir);
    snprintf(f->serving_crt, sizeof f->serving_crt, "%s/serving.crt", dir);
    snprintf(f->serving_key, sizeof f->serving_key, "%s/serving.key", dir);
    snprintf(f->admin_crt, sizeof f->admin_crt, "%s/admin.crt", dir);
    snprintf(f->admin_key, sizeof f->admin_key, "%s/admin.key", dir);
    snprintf(f->cm_crt, sizeof f->cm_crt, "%s/controller-manager.crt", dir);
    snprintf(f->cm_key, sizeof f->cm_key, "%s/controller-manager.key", dir);
    snprintf(f->sa_key, sizeof f->sa_key, "%s/sa.key", dir);
    snprintf(f->sa_pub, sizeof f->sa_pub, "%s/sa.pub", dir);
    snprintf(f->fp_ca_crt, sizeof f->fp_ca_crt, "%s/front-proxy-ca.crt", dir);
    snprintf(f->fp_ca_key, sizeof f->fp_ca_key, "%s/front-proxy-ca.key", dir);
    snprintf(f->fp_client_crt, sizeof f->fp_client_crt, "%s/front-proxy-client.crt", dir);
    snprintf(f->fp_client_key, sizeof f->fp_client_key, "%s/front-proxy-client.key", dir);
}

int pki_ensure(const pki_options *o, pki_files *out, char **err)
{
    memset(out, 0, sizeof *out);
    if (!o->dir || !*o->dir || strlen(o->dir) > 4000) {
        ckube__set_err(err, "no directory for the certificates");
        return -1;
    }
    if (mkdir(o->dir, 0700) != 0 && errno != EEXIST) {
        ckube__set_err(err, "cannot create %s: %s", o->dir, strerror(errno));
        return -1;
    }
    set_paths(out, o->dir);
    X509 *ca = NULL;
    EVP_PKEY *ca_key = NULL;
    int rc = ensure_ca(out, &ca, &ca_key, err);
    if (rc == 0)
        rc = ensure_leaf(out->serving_crt, out->serving_key, ca, ca_key, o, 's', "kube-apiserver",
                         NULL, &out->made_serving, err);
    if (rc == 0)
        rc = ensure_leaf(out->admin_crt, out->admin_key, ca, ca_key, o, 'u', "system:admin",
                         "system:masters", &out->made_admin, err);
    /* No organization: system:kube-controller-manager holds what the
     * bootstrap policy binds to that user, and no group's rights. */
    if (rc == 0)
        rc = ensure_leaf(out->cm_crt, out->cm_key, ca, ca_key, o, 'u',
                         "system:kube-controller-manager", NULL, &out->made_cm, err);
    if (rc == 0)
        rc = ensure_sa(out, err);
    /* The front proxy's CA and client, apart from the cluster's: what it
     * signs is trusted only to say who a proxied request is from. */
    X509 *fp_ca = NULL;
    EVP_PKEY *fp_key = NULL;
    if (rc == 0)
        rc = ensure_ca_at(out->fp_ca_crt, out->fp_ca_key, "front-proxy-ca", &out->made_fp_ca,
                          &fp_ca, &fp_key, err);
    if (rc == 0)
        rc = ensure_leaf(out->fp_client_crt, out->fp_client_key, fp_ca, fp_key, o, 'u',
                         "front-proxy-client", NULL, &out->made_fp_client, err);
    X509_free(fp_ca);
    EVP_PKEY_free(fp_key);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    ERR_clear_error();
    return rc;
}
