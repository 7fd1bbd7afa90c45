/* ServiceAccount tokens (token.h). */
#include "apiserver/authentication/serviceaccount/token.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "apiserver/authentication/serviceaccount/jwt.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

#define LEEWAY 60 /* seconds: go-jose's DefaultLeeway for exp and nbf */

struct sa_tokens {
    EVP_PKEY *priv; /* signs */
    EVP_PKEY *pub;  /* checks */
    char kid[44];
    char *issuer;
    json_t *audiences; /* the API's */
};

static EVP_PKEY *read_key(const char *path, bool private_key, char **err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        ckube__set_err(err, "cannot open %s", path);
        return NULL;
    }
    EVP_PKEY *k = private_key ? PEM_read_PrivateKey(f, NULL, NULL, NULL)
                              : PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    ERR_clear_error();
    if (!k)
        ckube__set_err(err, "%s holds no PEM %s key", path, private_key ? "private" : "public");
    else if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA) {
        ckube__set_err(err, "%s: ServiceAccount tokens are signed RS256: an RSA key is needed",
                       path);
        EVP_PKEY_free(k);
        k = NULL;
    }
    return k;
}

sa_tokens *sa_tokens_new(const char *key_file, const char *pub_file, const char *issuer,
                         const char *const *audiences, size_t naudiences, char **err)
{
    sa_tokens *t = xcalloc(1, sizeof *t);
    if (!(t->priv = read_key(key_file, true, err)))
        goto fail;
    if (pub_file) {
        if (!(t->pub = read_key(pub_file, false, err)))
            goto fail;
    } else {
        EVP_PKEY_up_ref(t->priv);
        t->pub = t->priv;
    }
    if (jwt_key_id(t->pub, t->kid) != 0) {
        ckube__set_err(err, "cannot encode the ServiceAccount public key");
        goto fail;
    }
    t->issuer = xstrdup(issuer ? issuer : SA_DEFAULT_ISSUER);
    t->audiences = json_array();
    for (size_t i = 0; i < naudiences; i++)
        json_array_append_new(t->audiences, json_string(audiences[i]));
    if (!naudiences)
        json_array_append_new(t->audiences, json_string(t->issuer));
    return t;
fail:
    sa_tokens_free(t);
    return NULL;
}

void sa_tokens_free(sa_tokens *t)
{
    if (!t)
        return;
    EVP_PKEY_free(t->priv);
    EVP_PKEY_free(t->pub);
    free(t->issuer);
    json_decref(t->audiences);
    free(t);
}

const char *sa_tokens_issuer(const sa_tokens *t)
{
    return t->issuer;
}

json_t *sa_tokens_api_audiences(const sa_tokens *t)
{
    /* A copy, not a reference: the loops call this at once, and jansson
     * reads a shared value's count without an atomic before changing it
     * atomically, a race ThreadSanitizer reports (and the C memory model
     * agrees with). Values shared between threads are only read here. */
    json_t *a = json_deep_copy(t->audiences);
    if (!a)
        xalloc_die();
    return a;
}

static json_t *name_uid(const char *name, const char *uid)
{
    return json_pack("{s:s,s:s}", "name", name ? name : "", "uid", uid ? uid : "");
}

char *sa_tokens_issue(const sa_tokens *t, const char *ns, const char *name, const char *uid,
                      const json_t *audiences, int64_t now, int64_t seconds,
                      const sa_token_ref *bound, char **err)
{
    char jti[40];
    ckube_uuid4(jti, sizeof jti);
    json_t *k8s = json_pack("{s:s,s:o}", "namespace", ns, "serviceaccount", name_uid(name, uid));
    if (bound && bound->kind && !strcmp(bound->kind, "Pod"))
        json_object_set_new(k8s, "pod", name_uid(bound->name, bound->uid));
    else if (bound && bound->kind && !strcmp(bound->kind, "Secret"))
        json_object_set_new(k8s, "secret", name_uid(bound->name, bound->uid));
    char *sub = xasprintf("system:serviceaccount:%s:%s", ns, name);
    json_t *aud = json_deep_copy(json_array_size(audiences) ? audiences : t->audiences);
    json_t *claims =
        json_pack("{s:o,s:I,s:I,s:s,s:s,s:o,s:I,s:s}", "aud", aud, "exp",
                  (json_int_t)(now + seconds), "iat", (json_int_t)now, "iss", t->issuer, "jti", jti,
                  "kubernetes.io", k8s, "nbf", (json_int_t)now, "sub", sub);
    free(sub);
    char *token = jwt_sign(claims, t->priv, err);
    json_decref(claims);
    return token;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

/* Whether one of the token's audiences is one of `want`. */
static bool audience_ok(const json_t *aud, const json_t *want)
{
    size_t i, j;
    json_t *a, *w;
    if (json_is_string(aud)) {
        json_array_foreach(want, j, w) if (json_equal(aud, w)) return true;
        return false;
    }
    json_array_foreach(aud, i, a) json_array_foreach(want, j, w) if (json_equal(a, w)) return true;
    return false;
}

/* Go's %q of a string array, for upstream's audience message. */
static char *quoted_list(const json_t *arr)
{
    ckube__strbuf b = {0};
    ckube__sb_addc(&b, '[');
    size_t i;
    json_t *v;
    if (json_is_string(arr)) {
        char *q = ckube_go_quote(json_string_value(arr));
        ckube__sb_add(&b, q);
        free(q);
    } else {
        json_array_foreach(arr, i, v)
        {
            char *q = ckube_go_quote(json_is_string(v) ? json_string_value(v) : "");
            if (i)
                ckube__sb_addc(&b, ' ');
            ckube__sb_add(&b, q);
            free(q);
        }
    }
    ckube__sb_addc(&b, ']');
    return b.s;
}

/* The issuer claim of an unverified token: whether it is ours decides if
 * this authenticator owns it (as upstream peeks before verifying). */
static bool issued_here(const sa_tokens *t, const char *token)
{
    json_t *c = jwt_peek_claims(token, strlen(token));
    const char *iss = json_string_value(json_object_get(c, "iss"));
    bool ours = iss && !strcmp(iss, t->issuer);
    json_decref(c);
    return ours;
}

int sa_tokens_validate(const sa_tokens *t, const char *token, const json_t *audiences, int64_t now,
                       sa_token_info *out, char **err)
{
    memset(out, 0, sizeof *out);
    size_t len = strlen(token);
    if (len > JWT_MAX_LEN || !issued_here(t, token))
        return 0;
    char *why = NULL;
    json_t *c = jwt_verify(token, len, t->pub, &why);
    if (!c) {
        ckube__set_err(err, "invalid service account token: %s", why ? why : "bad signature");
        free(why);
        return -1;
    }
    const json_t *want = audiences ? audiences : t->audiences;
    json_t *aud = json_object_get(c, "aud");
    json_t *exp = json_object_get(c, "exp"), *nbf = json_object_get(c, "nbf");
    json_t *iat = json_object_get(c, "iat");
    int rc = -1;
    if (!audience_ok(aud, want)) {
        char *have = quoted_list(aud), *target = quoted_list(want);
        ckube__set_err(err, "token audiences %s is invalid for the target audiences %s", have,
                       target);
        free(have);
        free(target);
    } else if (!json_is_integer(exp) && !json_is_real(exp)) {
        ckube__set_err(err, "service account token has no expiry");
    } else if ((int64_t)json_number_value(exp) + LEEWAY < now) {
        ckube__set_err(err, "service account token has expired");
    } else if (json_is_number(nbf) && (int64_t)json_number_value(nbf) - LEEWAY > now) {
        ckube__set_err(err, "service account token is not valid yet");
    } else if (json_is_number(iat) && (int64_t)json_number_value(iat) - LEEWAY > now) {
        /* go-jose's ErrIssuedInTheFuture, in upstream's words */
        ckube__set_err(err, "service account token is issued in the future");
    } else {
        out->ns = str_at(c, "kubernetes.io", "namespace");
        const json_t *k = json_object_get(c, "kubernetes.io");
        out->name = str_at(k, "serviceaccount", "name");
        out->uid = str_at(k, "serviceaccount", "uid");
        out->pod_name = str_at(k, "pod", "name");
        out->pod_uid = str_at(k, "pod", "uid");
        out->secret_name = str_at(k, "secret", "name");
        out->secret_uid = str_at(k, "secret", "uid");
        out->jti = json_string_value(json_object_get(c, "jti"));
        if (!out->ns || !*out->ns || !out->name || !*out->name) {
            ckube__set_err(err, "service account token does not name its service account");
        } else {
            out->claims = c;
            out->audiences = json_array();
            size_t i;
            json_t *w;
            /* `want` may be shared between the loops (the API's
             * audiences): its strings are copied, never referenced, so
             * no thread touches their counts (sa_tokens_api_audiences). */
            json_array_foreach(want, i, w)
            {
                json_t *one = json_pack("[s]", json_string_value(w));
                if (one && audience_ok(aud, one))
                    json_array_append_new(out->audiences, json_string(json_string_value(w)));
                json_decref(one);
            }
            return 1;
        }
    }
    json_decref(c);
    memset(out, 0, sizeof *out);
    return rc;
}

void sa_token_info_clear(sa_token_info *i)
{
    json_decref(i->claims);
    json_decref(i->audiences);
    memset(i, 0, sizeof *i);
}

json_t *sa_tokens_openid_configuration(const sa_tokens *t)
{
    char *jwks = xasprintf("%s/openid/v1/jwks", t->issuer);
    json_t *d = json_pack("{s:s,s:s,s:[s],s:[s],s:[s]}", "issuer", t->issuer, "jwks_uri", jwks,
                          "response_types_supported", "id_token", "subject_types_supported",
                          "public", "id_token_signing_alg_values_supported", "RS256");
    free(jwks);
    return d;
}

/* A big number of the key as unpadded base64url (malloc'd). */
static char *bn_param(const EVP_PKEY *k, const char *name)
{
    BIGNUM *bn = NULL;
    if (!EVP_PKEY_get_bn_param(k, name, &bn))
        return xstrdup("");
    int n = BN_num_bytes(bn);
    unsigned char *raw = xmalloc(n > 0 ? (size_t)n : 1);
    BN_bn2bin(bn, raw);
    char *s = jwt_b64url_encode(raw, (size_t)n);
    free(raw);
    BN_free(bn);
    return s;
}

json_t *sa_tokens_jwks(const sa_tokens *t)
{
    char *n = bn_param(t->pub, OSSL_PKEY_PARAM_RSA_N);
    char *e = bn_param(t->pub, OSSL_PKEY_PARAM_RSA_E);
    json_t *d = json_pack("{s:[{s:s,s:s,s:s,s:s,s:s,s:s}]}", "keys", "use", "sig", "kty", "RSA",
                          "kid", t->kid, "alg", "RS256", "n", n, "e", e);
    free(n);
    free(e);
    return d;
}
