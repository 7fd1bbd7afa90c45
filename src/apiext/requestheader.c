/* The front proxy's authentication (internal.h), as k8s.io/apiserver's
 * requestheader authenticator: a client certificate from the
 * requestheader CA with an allowed name vouches for the user named in
 * the request's headers. */
#include "apiext/internal.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/queue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/text.h"
#include "runtime/secure_serving.h"

struct apiext_front_proxy {
    X509_STORE *store; /* NULL: no requestheader CA published */
    char **allowed;    /* CNs; none: any */
    char **user_headers, **group_headers, **extra_prefixes;
};

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* A ConfigMap value holding a JSON array of strings (or nothing). */
static char **strv_of(const char *json_text)
{
    json_t *a = json_text ? json_loads(json_text, 0, NULL) : NULL;
    size_t n = json_array_size(a);
    char **v = calloc(n + 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (s && *s)
            v[k++] = strdup(s);
    }
    json_decref(a);
    return v;
}

apiext_front_proxy *apiext_front_proxy_load(ckube_client *c, char **client_ca, size_t *len,
                                            char **err)
{
    *client_ca = NULL;
    *len = 0;
    json_t *data = secure_serving_auth_configmap(c, err);
    if (!data)
        return NULL;
    const char *ca = json_string_value(json_object_get(data, "client-ca-file"));
    const char *rh = json_string_value(json_object_get(data, "requestheader-client-ca-file"));
    apiext_front_proxy *fp = calloc(1, sizeof *fp);
    if (!fp) {
        json_decref(data);
        ckube__set_err(err, "out of memory");
        return NULL;
    }
    fp->store = rh && *rh ? secure_serving_client_ca_store(rh, strlen(rh), NULL) : NULL;
    fp->allowed = strv_of(json_string_value(json_object_get(data, "requestheader-allowed-names")));
    fp->user_headers =
        strv_of(json_string_value(json_object_get(data, "requestheader-username-headers")));
    fp->group_headers =
        strv_of(json_string_value(json_object_get(data, "requestheader-group-headers")));
    fp->extra_prefixes =
        strv_of(json_string_value(json_object_get(data, "requestheader-extra-headers-prefix")));
    if (asprintf(client_ca, "%s%s%s", ca ? ca : "", ca && rh && *ca ? "\n" : "", rh ? rh : "") < 0)
        *client_ca = NULL;
    if (*client_ca && !**client_ca) {
        free(*client_ca);
        *client_ca = NULL;
    }
    *len = *client_ca ? strlen(*client_ca) : 0;
    json_decref(data);
    return fp;
}

void apiext_front_proxy_free(apiext_front_proxy *fp)
{
    if (!fp)
        return;
    X509_STORE_free(fp->store);
    free_strv(fp->allowed);
    free_strv(fp->user_headers);
    free_strv(fp->group_headers);
    free_strv(fp->extra_prefixes);
    free(fp);
}

bool apiext_front_proxy_trusts(const apiext_front_proxy *fp, X509 *peer, SSL *ssl)
{
    if (!fp || !fp->store || !peer)
        return false;
    X509_STORE_CTX *x = X509_STORE_CTX_new();
    bool ok = x && X509_STORE_CTX_init(x, fp->store, peer, SSL_get_peer_cert_chain(ssl)) == 1 &&
              X509_verify_cert(x) == 1;
    X509_STORE_CTX_free(x);
    ERR_clear_error();
    if (!ok)
        return false;
    if (!fp->allowed || !fp->allowed[0])
        return true;
    char cn[256] = "";
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
    for (size_t i = 0; fp->allowed[i]; i++)
        if (!strcmp(fp->allowed[i], cn))
            return true;
    return false;
}

static int hexval(int c)
{
    return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* An extra key as upstream reads it: %-unescaped, lowercased. */
static char *extra_key(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    for (; out && *s; s++) {
        if (*s == '%' && hexval((unsigned char)s[1]) >= 0 && hexval((unsigned char)s[2]) >= 0) {
            *o++ = (char)(hexval((unsigned char)s[1]) * 16 + hexval((unsigned char)s[2]));
            s += 2;
        } else {
            *o++ = (char)tolower((unsigned char)*s);
        }
    }
    if (out)
        *o = 0;
    return out;
}

int apiext_front_proxy_user(const apiext_front_proxy *fp, const struct evkeyvalq *h,
                            delegated_user *u)
{
    memset(u, 0, sizeof *u);
    const char *name = NULL;
    for (size_t i = 0; fp->user_headers && fp->user_headers[i] && !name; i++) {
        const struct evkeyval *kv;
        TAILQ_FOREACH(kv, h, next)
        {
            if (!strcasecmp(kv->key, fp->user_headers[i]) && *kv->value) {
                name = kv->value;
                break;
            }
        }
    }
    if (!name)
        return -1;
    u->name = strdup(name);
    const struct evkeyval *kv;
    TAILQ_FOREACH(kv, h, next)
    {
        for (size_t i = 0; fp->group_headers && fp->group_headers[i]; i++)
            if (!strcasecmp(kv->key, fp->group_headers[i]) && *kv->value)
                delegated_user_add_group(u, kv->value);
        for (size_t i = 0; fp->extra_prefixes && fp->extra_prefixes[i]; i++) {
            size_t pl = strlen(fp->extra_prefixes[i]);
            if (strncasecmp(kv->key, fp->extra_prefixes[i], pl) || !kv->key[pl])
                continue;
            char *key = extra_key(kv->key + pl);
            if (!u->extra)
                u->extra = json_object();
            json_t *vals = key ? json_object_get(u->extra, key) : NULL;
            if (key && !vals) {
                vals = json_array();
                json_object_set_new(u->extra, key, vals);
            }
            if (vals)
                json_array_append_new(vals, json_string(kv->value));
            free(key);
        }
    }
    /* as every authenticated user, behind upstream's AuthenticatedGroupAdder */
    if (u->name && delegated_user_add_authenticated(u) == 0)
        return 0;
    delegated_user_clear(u); /* out of memory midway: nothing half-made */
    return -1;
}
