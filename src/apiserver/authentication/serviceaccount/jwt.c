/* JSON Web Tokens, RS256 (jwt.h). base64url is OpenSSL's base64 with
 * the URL-safe alphabet and no padding (RFC 7515, section 2); input with
 * padding or characters outside the alphabet is refused, as go-jose's
 * RawURLEncoding refuses it. */
#include "apiserver/authentication/serviceaccount/jwt.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "ckube/json.h"
#include "common/text.h"
#include "common/xalloc.h"

char *jwt_b64url_encode(const unsigned char *in, size_t n)
{
    char *out = xmalloc(4 * ((n + 2) / 3) + 1);
    int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    while (len > 0 && out[len - 1] == '=')
        len--;
    out[len] = '\0';
    for (int i = 0; i < len; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    return out;
}

/* Decodes unpadded base64url (malloc'd bytes, *out_len set), or NULL. */
static unsigned char *b64url_decode(const char *in, size_t n, size_t *out_len)
{
    if (n % 4 == 1)
        return NULL;
    size_t padded = n + (4 - n % 4) % 4;
    char *std = xmalloc(padded + 1);
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
            free(std);
            return NULL;
        }
        std[i] = c;
    }
    for (size_t i = n; i < padded; i++)
        std[i] = '=';
    std[padded] = '\0';
    unsigned char *out = xmalloc(padded / 4 * 3 + 1);
    int len = padded ? EVP_DecodeBlock(out, (const unsigned char *)std, (int)padded) : 0;
    free(std);
    if (len < 0) {
        free(out);
        return NULL;
    }
    /* EVP_DecodeBlock counts the padding's zero bytes. */
    *out_len = (size_t)len - (padded - n);
    return out;
}

int jwt_key_id(EVP_PKEY *key, char out[44])
{
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(key, &der);
    if (n <= 0)
        return -1;
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(der, (size_t)n, digest);
    OPENSSL_free(der);
    char *id = jwt_b64url_encode(digest, sizeof digest);
    snprintf(out, 44, "%s", id);
    free(id);
    return 0;
}

/* RS256 over data with `key`: the signature (malloc'd, *len), or NULL. */
static unsigned char *rs256_sign(EVP_PKEY *key, const char *data, size_t n, size_t *len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *sig = NULL;
    *len = 0;
    if (ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
        EVP_DigestSign(ctx, NULL, len, (const unsigned char *)data, n) == 1) {
        sig = xmalloc(*len);
        if (EVP_DigestSign(ctx, sig, len, (const unsigned char *)data, n) != 1) {
            free(sig);
            sig = NULL;
        }
    }
    EVP_MD_CTX_free(ctx);
    return sig;
}

char *jwt_sign(const json_t *claims, EVP_PKEY *key, char **err)
{
    char kid[44];
    if (!json_is_object(claims) || EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA ||
        jwt_key_id(key, kid) != 0) {
        ckube__set_err(err, "jwt: claims must be an object and the key an RSA key");
        return NULL;
    }
    json_t *header = json_pack("{s:s,s:s}", "alg", "RS256", "kid", kid);
    size_t hlen, plen;
    char *h = ckube_json_dumps(header, &hlen), *p = ckube_json_dumps(claims, &plen);
    json_decref(header);
    if (!h || !p)
        xalloc_die();
    char *h64 = jwt_b64url_encode((const unsigned char *)h, hlen);
    char *p64 = jwt_b64url_encode((const unsigned char *)p, plen);
    free(h);
    free(p);
    char *signing = xasprintf("%s.%s", h64, p64);
    free(h64);
    free(p64);
    size_t slen;
    unsigned char *sig = rs256_sign(key, signing, strlen(signing), &slen);
    char *token = NULL;
    if (!sig) {
        const char *why = ERR_reason_error_string(ERR_peek_last_error());
        ckube__set_err(err, "jwt: signing failed: %s", why ? why : "unknown error");
    } else {
        char *s64 = jwt_b64url_encode(sig, slen);
        token = xasprintf("%s.%s", signing, s64);
        free(s64);
    }
    free(sig);
    free(signing);
    ERR_clear_error();
    return token;
}

/* Decodes a base64url part holding a JSON object; NULL if it does not. */
static json_t *json_part(const char *p, size_t n)
{
    size_t len;
    unsigned char *raw = b64url_decode(p, n, &len);
    if (!raw)
        return NULL;
    json_t *v = json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, NULL);
    free(raw);
    if (v && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

json_t *jwt_peek_claims(const char *token, size_t len)
{
    const char *end = token + len;
    const char *dot = memchr(token, '.', len);
    const char *dot2 = dot ? memchr(dot + 1, '.', (size_t)(end - dot - 1)) : NULL;
    if (!dot || !dot2 || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1)))
        return NULL;
    return json_part(dot + 1, (size_t)(dot2 - dot - 1));
}

json_t *jwt_verify(const char *token, size_t len, EVP_PKEY *key, char **err)
{
    if (len > JWT_MAX_LEN) {
        ckube__set_err(err, "jwt: token longer than %u bytes", JWT_MAX_LEN);
        return NULL;
    }
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot2 || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token))) {
        ckube__set_err(err, "jwt: not a compact JWS (three dot-separated parts)");
        return NULL;
    }
    json_t *header = json_part(token, (size_t)(dot1 - token));
    if (!header) {
        ckube__set_err(err, "jwt: the header is not base64url JSON");
        return NULL;
    }
    const char *alg = json_string_value(json_object_get(header, "alg"));
    bool rs256 = alg && !strcmp(alg, "RS256");
    json_decref(header);
    if (!rs256) {
        ckube__set_err(err, "jwt: unexpected signing algorithm (only RS256 is accepted)");
        return NULL;
    }
    size_t slen;
    const char *sig64 = dot2 + 1;
    unsigned char *sig = b64url_decode(sig64, len - (size_t)(sig64 - token), &slen);
    if (!sig) {
        ckube__set_err(err, "jwt: the signature is not base64url");
        return NULL;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok =
        ctx && EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA &&
        EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
        EVP_DigestVerify(ctx, sig, slen, (const unsigned char *)token, (size_t)(dot2 - token)) == 1;
    EVP_MD_CTX_free(ctx);
    free(sig);
    ERR_clear_error();
    if (!ok) {
        ckube__set_err(err, "jwt: invalid signature");
        return NULL;
    }
    json_t *claims = json_part(dot1 + 1, (size_t)(dot2 - dot1 - 1));
    if (!claims)
        ckube__set_err(err, "jwt: the payload is not a base64url JSON object");
    return claims;
}
