/* ServiceAccount tokens (apiserver/authentication/serviceaccount/token.h)
 * as kube-apiserver issues and checks them: a token's claims and what
 * validation reads back (the ServiceAccount, its UID, the JTI, the bound
 * pod or secret), the audiences (the API's by default, --api-audiences,
 * a token's own list, upstream's message when they do not meet), go-jose's
 * 60 s of leeway on exp and nbf, tokens that are not this issuer's (0:
 * another authenticator may know them) and those that are but do not hold
 * (-1: another key, a changed payload, alg none), sa_tokens_new's
 * refusals, and the issuer's documents (the JWKS's n and e make the
 * public key that verifies a token). The keys are pki_ensure's sa.key and
 * sa.pub, and throwaway ones written to PEM files here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include "apiserver/authentication/serviceaccount/jwt.h"
#include "apiserver/authentication/serviceaccount/token.h"
#include "apiserver/pki/pki.h"
#include "util/client_test_util.h"

#define ISSUER SA_DEFAULT_ISSUER
#define NOW ((int64_t)1700000000)

static char *g_dir;
static pki_files g_pki;
static char *g_other_key; /* another RSA key, PEM */
static char *g_ec_key;    /* an EC key, PEM */
static sa_tokens *g_sa;   /* sa.key/sa.pub, the default issuer and audiences */

static char *write_key(EVP_PKEY *k, const char *name)
{
    char *p = ctu_fmt("%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    if (!f || !PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL)) {
        if (f)
            fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    return p;
}

static int group_setup(void **state)
{
    (void)state;
    g_dir = ctu_tmpdir("sa-token");
    if (!g_dir)
        return -1;
    pki_options o = {.dir = g_dir};
    char *err = NULL;
    if (pki_ensure(&o, &g_pki, &err) != 0) {
        fprintf(stderr, "pki_ensure: %s\n", err);
        free(err);
        return -1;
    }
    EVP_PKEY *other = EVP_RSA_gen(2048), *ec = EVP_EC_gen("P-256");
    g_other_key = other ? write_key(other, "other.key") : NULL;
    g_ec_key = ec ? write_key(ec, "ec.key") : NULL;
    EVP_PKEY_free(other);
    EVP_PKEY_free(ec);
    g_sa = sa_tokens_new(g_pki.sa_key, g_pki.sa_pub, NULL, NULL, 0, &err);
    if (!g_sa) {
        fprintf(stderr, "sa_tokens_new: %s\n", err);
        free(err);
    }
    return g_other_key && g_ec_key && g_sa ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    sa_tokens_free(g_sa);
    char *cmd = ctu_fmt("rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    free(cmd);
    free(g_dir);
    free(g_other_key);
    free(g_ec_key);
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static sa_tokens *tokens(const char *key, const char *pub, const char *issuer,
                         const char *const *auds, size_t n)
{
    char *err = NULL;
    sa_tokens *t = sa_tokens_new(key, pub, issuer, auds, n, &err);
    if (!t)
        fail_msg("sa_tokens_new(%s): %s", key, err ? err : "?");
    return t;
}

static char *issue(const sa_tokens *t, const json_t *auds, int64_t now, int64_t secs,
                   const sa_token_ref *bound)
{
    char *err = NULL;
    char *tok = sa_tokens_issue(t, "team", "bot", "uid-bot", auds, now, secs, bound, &err);
    if (!tok)
        fail_msg("sa_tokens_issue: %s", err ? err : "?");
    return tok;
}

/* sa_tokens_validate's answer; *err_out (when asked) gets its error. */
static int validate(const sa_tokens *t, const char *tok, const json_t *auds, int64_t now,
                    sa_token_info *info, char **err_out)
{
    sa_token_info local;
    char *err = NULL;
    int rc = sa_tokens_validate(t, tok, auds, now, info ? info : &local, &err);
    if (rc == 1)
        assert_null(err);
    if (rc == -1)
        assert_non_null(err);
    if (rc == 0)
        assert_null(err);
    if (!info && rc == 1)
        sa_token_info_clear(&local);
    if (err_out)
        *err_out = err;
    else
        free(err);
    return rc;
}

static void expect_refusal(const sa_tokens *t, const char *tok, const json_t *auds, int64_t now,
                           const char *want)
{
    char *err = NULL;
    int rc = validate(t, tok, auds, now, NULL, &err);
    if (rc != -1)
        fail_msg("want -1 (\"%s\"), got %d", want, rc);
    if (strcmp(err, want))
        fail_msg("want \"%s\", got \"%s\"", want, err);
    free(err);
}

static char *b64url_raw(const unsigned char *in, size_t n)
{
    return jwt_b64url_encode(in, n);
}

static char *b64url(const char *s)
{
    return b64url_raw((const unsigned char *)s, strlen(s));
}

/* Decodes unpadded base64url (malloc'd, *n set). */
static unsigned char *b64url_decode(const char *in, size_t len, size_t *n)
{
    char *std = calloc(1, len + 4);
    for (size_t i = 0; i < len; i++)
        std[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
    size_t padded = len;
    while (padded % 4)
        std[padded++] = '=';
    unsigned char *out = calloc(1, padded / 4 * 3 + 1);
    int got = EVP_DecodeBlock(out, (unsigned char *)std, (int)padded);
    assert_true(got >= 0);
    *n = (size_t)got - (padded - len);
    free(std);
    return out;
}

/* Part i (0: header, 1: payload) of a token, decoded as JSON. */
static json_t *part(const char *tok, int i)
{
    const char *p = tok;
    for (int k = 0; k < i; k++)
        p = strchr(p, '.') + 1;
    size_t len = strcspn(p, "."), n;
    unsigned char *raw = b64url_decode(p, len, &n);
    json_t *j = json_loadb((const char *)raw, n, 0, NULL);
    free(raw);
    assert_non_null(j);
    return j;
}

/* A token made by hand: base64url(header).base64url(payload).sig */
static char *forge(const char *header, const char *payload, const char *sig)
{
    char *h = b64url(header), *p = b64url(payload);
    char *t = ctu_fmt("%s.%s.%s", h, p, sig);
    free(h);
    free(p);
    return t;
}

/* The signature part (after the second dot) of a token. */
static const char *sig_of(const char *tok)
{
    return strrchr(tok, '.') + 1;
}

/* Signs `claims_json` with the PEM private key at `key_file`, as jwt_sign
 * does (RS256 and the key's kid): for claims sa_tokens_issue does not make. */
static char *sign_claims(const char *key_file, const char *claims_json)
{
    FILE *f = fopen(key_file, "r");
    assert_non_null(f);
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(k);
    json_t *c = json_loads(claims_json, 0, NULL);
    assert_non_null(c);
    char *err = NULL;
    char *t = jwt_sign(c, k, &err);
    if (!t)
        fail_msg("jwt_sign: %s", err ? err : "?");
    json_decref(c);
    EVP_PKEY_free(k);
    return t;
}

static json_t *strs(const char *a, const char *b)
{
    json_t *j = json_array();
    if (a)
        json_array_append_new(j, json_string(a));
    if (b)
        json_array_append_new(j, json_string(b));
    return j;
}

/* ---- tests -------------------------------------------------------------- */

static void test_fresh_token_claims(void **state)
{
    (void)state;
    sa_token_ref pod = {"Pod", "web-0", "uid-pod"};
    char *tok = issue(g_sa, NULL, NOW, 3600, &pod);
    /* Three unpadded base64url parts, RS256 and the key's ID. */
    assert_null(strchr(tok, '='));
    json_t *h = part(tok, 0), *c = part(tok, 1);
    assert_string_equal(json_string_value(json_object_get(h, "alg")), "RS256");
    assert_int_equal(strlen(json_string_value(json_object_get(h, "kid"))), 43);
    /* The claims kube-apiserver puts in a bound token. */
    json_t *want = json_pack("{s:[s],s:I,s:I,s:s,s:s,s:{s:s,s:{s:s,s:s},s:{s:s,s:s}},s:I,s:s}",
                             "aud", ISSUER, "exp", (json_int_t)(NOW + 3600), "iat", (json_int_t)NOW,
                             "iss", ISSUER, "jti", json_string_value(json_object_get(c, "jti")),
                             "kubernetes.io", "namespace", "team", "pod", "name", "web-0", "uid",
                             "uid-pod", "serviceaccount", "name", "bot", "uid", "uid-bot", "nbf",
                             (json_int_t)NOW, "sub", "system:serviceaccount:team:bot");
    assert_non_null(want);
    if (!json_equal(c, want)) {
        char *got = json_dumps(c, JSON_SORT_KEYS);
        fail_msg("claims: %s", got);
    }
    json_decref(want);
    /* The JTI is a random UUID. */
    const char *jti = json_string_value(json_object_get(c, "jti"));
    assert_int_equal(strlen(jti), 36);
    assert_true(jti[8] == '-' && jti[13] == '-' && jti[14] == '4' && jti[18] == '-' &&
                jti[23] == '-');

    sa_token_info ti;
    assert_int_equal(validate(g_sa, tok, NULL, NOW + 1, &ti, NULL), 1);
    assert_string_equal(ti.ns, "team");
    assert_string_equal(ti.name, "bot");
    assert_string_equal(ti.uid, "uid-bot");
    assert_string_equal(ti.jti, jti);
    assert_string_equal(ti.pod_name, "web-0");
    assert_string_equal(ti.pod_uid, "uid-pod");
    assert_null(ti.secret_name);
    assert_null(ti.secret_uid);
    assert_true(json_equal(ti.claims, c));
    sa_token_info_clear(&ti);
    assert_null(ti.claims);

    /* Another token: another JTI. */
    char *tok2 = issue(g_sa, NULL, NOW, 3600, &pod);
    json_t *c2 = part(tok2, 1);
    assert_string_not_equal(json_string_value(json_object_get(c2, "jti")), jti);
    json_decref(c2);
    free(tok2);

    /* Bound to a secret; and to nothing. */
    sa_token_ref secret = {"Secret", "creds", "uid-secret"};
    tok2 = issue(g_sa, NULL, NOW, 600, &secret);
    assert_int_equal(validate(g_sa, tok2, NULL, NOW, &ti, NULL), 1);
    assert_null(ti.pod_name);
    assert_null(ti.pod_uid);
    assert_string_equal(ti.secret_name, "creds");
    assert_string_equal(ti.secret_uid, "uid-secret");
    assert_non_null(ti.jti);
    sa_token_info_clear(&ti);
    free(tok2);
    tok2 = issue(g_sa, NULL, NOW, 600, NULL);
    assert_int_equal(validate(g_sa, tok2, NULL, NOW, &ti, NULL), 1);
    assert_null(ti.pod_name);
    assert_null(ti.secret_name);
    assert_null(json_object_get(json_object_get(ti.claims, "kubernetes.io"), "pod"));
    assert_null(json_object_get(json_object_get(ti.claims, "kubernetes.io"), "secret"));
    sa_token_info_clear(&ti);
    free(tok2);
    json_decref(h);
    json_decref(c);
    free(tok);
}

static void test_public_half_from_private_key(void **state)
{
    (void)state;
    /* No public file: the private key's public half checks. */
    sa_tokens *t = tokens(g_pki.sa_key, NULL, NULL, NULL, 0);
    char *tok = issue(t, NULL, NOW, 3600, NULL);
    assert_int_equal(validate(g_sa, tok, NULL, NOW, NULL, NULL), 1);
    free(tok);
    tok = issue(g_sa, NULL, NOW, 3600, NULL);
    assert_int_equal(validate(t, tok, NULL, NOW, NULL, NULL), 1);
    free(tok);
    sa_tokens_free(t);
}

static void test_audiences(void **state)
{
    (void)state;
    /* The default: the issuer is the API's only audience. */
    assert_string_equal(sa_tokens_issuer(g_sa), ISSUER);
    json_t *api = sa_tokens_api_audiences(g_sa), *want = strs(ISSUER, NULL);
    assert_true(json_equal(api, want));
    json_decref(api);
    json_decref(want);

    /* --service-account-issuer and --api-audiences. */
    const char *auds[] = {"api-a", "api-b"};
    sa_tokens *t = tokens(g_pki.sa_key, g_pki.sa_pub, "https://issuer.example", auds, 2);
    assert_string_equal(sa_tokens_issuer(t), "https://issuer.example");
    api = sa_tokens_api_audiences(t);
    want = strs("api-a", "api-b");
    assert_true(json_equal(api, want));
    json_decref(api);
    /* A token without audiences of its own gets the API's. */
    char *tok = issue(t, NULL, NOW, 3600, NULL);
    json_t *c = part(tok, 1);
    assert_true(json_equal(json_object_get(c, "aud"), want));
    assert_string_equal(json_string_value(json_object_get(c, "iss")), "https://issuer.example");
    json_decref(c);
    json_decref(want);
    assert_int_equal(validate(t, tok, NULL, NOW, NULL, NULL), 1);
    json_t *b = strs("api-b", NULL);
    assert_int_equal(validate(t, tok, b, NOW, NULL, NULL), 1);
    json_decref(b);
    free(tok);
    /* An empty list is none: the API's too. */
    json_t *empty = json_array();
    tok = issue(t, empty, NOW, 3600, NULL);
    c = part(tok, 1);
    assert_int_equal(json_array_size(json_object_get(c, "aud")), 2);
    json_decref(c);
    json_decref(empty);
    free(tok);

    /* A token's own audiences: one in common is enough. */
    json_t *x = strs("x", NULL), *y = strs("y", NULL), *xz = strs("x", "z"), *yz = strs("y", "z");
    tok = issue(t, x, NOW, 3600, NULL);
    expect_refusal(t, tok, y, NOW,
                   "token audiences [\"x\"] is invalid for the target audiences [\"y\"]");
    /* ... and against the API's (upstream's %q of a []string) */
    expect_refusal(
        t, tok, NULL, NOW,
        "token audiences [\"x\"] is invalid for the target audiences [\"api-a\" \"api-b\"]");
    assert_int_equal(validate(t, tok, x, NOW, NULL, NULL), 1);
    free(tok);
    tok = issue(t, xz, NOW, 3600, NULL);
    assert_int_equal(validate(t, tok, yz, NOW, NULL, NULL), 1);
    expect_refusal(t, tok, y, NOW,
                   "token audiences [\"x\" \"z\"] is invalid for the target audiences [\"y\"]");
    free(tok);
    /* The default issuer's tokens are not good for this API (nor the other way). */
    tok = issue(g_sa, xz, NOW, 3600, NULL);
    assert_int_equal(validate(t, tok, NULL, NOW, NULL, NULL), 0); /* another issuer */
    free(tok);

    /* aud as one string (RFC 7519 allows it; go-jose reads it as a list). */
    char *claims =
        ctu_fmt("{\"iss\":\"%s\",\"aud\":\"y\",\"sub\":\"system:serviceaccount:team:bot\","
                "\"exp\":%lld,\"nbf\":%lld,\"kubernetes.io\":{\"namespace\":\"team\","
                "\"serviceaccount\":{\"name\":\"bot\",\"uid\":\"u\"}}}",
                ISSUER, (long long)NOW + 600, (long long)NOW);
    tok = sign_claims(g_pki.sa_key, claims);
    assert_int_equal(validate(g_sa, tok, y, NOW, NULL, NULL), 1);
    expect_refusal(g_sa, tok, x, NOW,
                   "token audiences [\"y\"] is invalid for the target audiences [\"x\"]");
    free(tok);
    free(claims);
    json_decref(x);
    json_decref(y);
    json_decref(xz);
    json_decref(yz);
    sa_tokens_free(t);
}

static void test_leeway(void **state)
{
    (void)state;
    /* exp = NOW+600, nbf = iat = NOW; go-jose allows 60 s either way. */
    char *tok = issue(g_sa, NULL, NOW, 600, NULL);
    assert_int_equal(validate(g_sa, tok, NULL, NOW + 600, NULL, NULL), 1);
    assert_int_equal(validate(g_sa, tok, NULL, NOW + 660, NULL, NULL), 1);
    expect_refusal(g_sa, tok, NULL, NOW + 661, "service account token has expired");
    expect_refusal(g_sa, tok, NULL, NOW + 100000, "service account token has expired");
    assert_int_equal(validate(g_sa, tok, NULL, NOW - 60, NULL, NULL), 1);
    expect_refusal(g_sa, tok, NULL, NOW - 61, "service account token is not valid yet");
    expect_refusal(g_sa, tok, NULL, NOW - 3600, "service account token is not valid yet");
    free(tok);

    /* nbf beyond the leeway, in a token made by hand (exp far ahead). */
    char *claims =
        ctu_fmt("{\"iss\":\"%s\",\"aud\":[\"%s\"],\"exp\":%lld,\"nbf\":%lld,"
                "\"iat\":%lld,\"kubernetes.io\":{\"namespace\":\"team\","
                "\"serviceaccount\":{\"name\":\"bot\",\"uid\":\"u\"}}}",
                ISSUER, ISSUER, (long long)NOW + 7200, (long long)NOW + 61, (long long)NOW);
    tok = sign_claims(g_pki.sa_key, claims);
    expect_refusal(g_sa, tok, NULL, NOW, "service account token is not valid yet");
    assert_int_equal(validate(g_sa, tok, NULL, NOW + 1, NULL, NULL), 1);
    free(tok);
    free(claims);

    /* iat beyond the leeway without an nbf: go-jose's ErrIssuedInTheFuture,
     * upstream's "service account token is issued in the future". */
    claims = ctu_fmt("{\"iss\":\"%s\",\"aud\":[\"%s\"],\"exp\":%lld,\"iat\":%lld,"
                     "\"kubernetes.io\":{\"namespace\":\"team\","
                     "\"serviceaccount\":{\"name\":\"bot\",\"uid\":\"u\"}}}",
                     ISSUER, ISSUER, (long long)NOW + 7200, (long long)NOW + 61);
    tok = sign_claims(g_pki.sa_key, claims);
    expect_refusal(g_sa, tok, NULL, NOW, "service account token is issued in the future");
    assert_int_equal(validate(g_sa, tok, NULL, NOW + 1, NULL, NULL), 1);
    free(tok);
    free(claims);
}

static void test_not_ours(void **state)
{
    (void)state;
    /* Another issuer's token (even signed with this key): not this
     * authenticator's to judge. */
    sa_tokens *t = tokens(g_pki.sa_key, g_pki.sa_pub, "https://elsewhere.example", NULL, 0);
    char *tok = issue(t, NULL, NOW, 3600, NULL);
    assert_int_equal(validate(g_sa, tok, NULL, NOW, NULL, NULL), 0);
    assert_int_equal(validate(t, tok, NULL, NOW, NULL, NULL), 1);
    free(tok);
    sa_tokens_free(t);
    /* Not JWTs at all. */
    const char *junk[] = {"", "hello", "tok-alice", "a.b", "a.b.c.d", "...", "!!!.@@@.###",
                          "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln",
                          /* a payload that is JSON but no object, or has no iss */
                          "eyJhbGciOiJSUzI1NiJ9.WzFd.c2ln", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
        if (validate(g_sa, junk[i], NULL, NOW, NULL, NULL) != 0)
            fail_msg("\"%s\" is not ours, yet not 0", junk[i]);
    /* Two and four parts made of a real token. */
    tok = issue(g_sa, NULL, NOW, 3600, NULL);
    char *two = ctu_fmt("%.*s", (int)(strrchr(tok, '.') - tok), tok);
    char *four = ctu_fmt("%s.%s", tok, sig_of(tok));
    assert_int_equal(validate(g_sa, two, NULL, NOW, NULL, NULL), 0);
    assert_int_equal(validate(g_sa, four, NULL, NOW, NULL, NULL), 0);
    free(two);
    free(four);
    free(tok);

    /* Oversized: refused before any decoding, even a genuine signature
     * over this issuer's claims. */
    char *pad = malloc(JWT_MAX_LEN + 1);
    memset(pad, 'p', JWT_MAX_LEN);
    pad[JWT_MAX_LEN] = '\0';
    char *claims = ctu_fmt("{\"iss\":\"%s\",\"aud\":[\"%s\"],\"exp\":%lld,\"pad\":\"%s\","
                           "\"kubernetes.io\":{\"namespace\":\"team\","
                           "\"serviceaccount\":{\"name\":\"bot\",\"uid\":\"u\"}}}",
                           ISSUER, ISSUER, (long long)NOW + 600, pad);
    tok = sign_claims(g_pki.sa_key, claims);
    assert_true(strlen(tok) > JWT_MAX_LEN);
    assert_int_equal(validate(g_sa, tok, NULL, NOW, NULL, NULL), 0);
    free(tok);
    free(claims);
    /* ... and one byte under the bound is read (and checked) */
    tok = issue(g_sa, NULL, NOW, 600, NULL);
    assert_true(strlen(tok) < JWT_MAX_LEN);
    assert_int_equal(validate(g_sa, tok, NULL, NOW, NULL, NULL), 1);
    free(tok);
    free(pad);
}

static void test_ours_but_bad(void **state)
{
    (void)state;
    /* Signed by another key with this issuer's claims. */
    sa_tokens *t = tokens(g_other_key, NULL, NULL, NULL, 0);
    char *tok = issue(t, NULL, NOW, 3600, NULL);
    char *err = NULL;
    assert_int_equal(validate(g_sa, tok, NULL, NOW, NULL, &err), -1);
    assert_non_null(strstr(err, "invalid signature"));
    free(err);
    free(tok);
    sa_tokens_free(t);

    tok = issue(g_sa, NULL, NOW, 3600, NULL);
    const char *dot1 = strchr(tok, '.');
    /* A changed payload under the old signature: another ServiceAccount. */
    json_t *c = part(tok, 1);
    json_object_set_new(c, "sub", json_string("system:serviceaccount:kube-system:admin"));
    json_object_set_new(json_object_get(json_object_get(c, "kubernetes.io"), "serviceaccount"),
                        "name", json_string("admin"));
    char *payload = json_dumps(c, JSON_COMPACT);
    char *p64 = b64url(payload);
    char *forged = ctu_fmt("%.*s.%s.%s", (int)(dot1 - tok), tok, p64, sig_of(tok));
    assert_int_equal(validate(g_sa, forged, NULL, NOW, NULL, &err), -1);
    assert_non_null(strstr(err, "invalid signature"));
    free(err);
    free(forged);
    /* A later expiry, same signature. */
    json_decref(c);
    c = part(tok, 1);
    json_object_set_new(c, "exp", json_integer(NOW + 10 * 365 * 86400LL));
    free(payload);
    free(p64);
    payload = json_dumps(c, JSON_COMPACT);
    p64 = b64url(payload);
    forged = ctu_fmt("%.*s.%s.%s", (int)(dot1 - tok), tok, p64, sig_of(tok));
    assert_int_equal(validate(g_sa, forged, NULL, NOW, NULL, NULL), -1);
    free(forged);
    /* A flipped signature byte. */
    char *flipped = strdup(tok);
    char *last = flipped + strlen(flipped) - 3;
    *last = *last == 'A' ? 'B' : 'A';
    assert_int_equal(validate(g_sa, flipped, NULL, NOW, NULL, NULL), -1);
    free(flipped);

    /* alg none: the claims as they are, with no signature, with the real
     * one, and under a header that still names the key. */
    const char *headers[] = {"{\"alg\":\"none\",\"typ\":\"JWT\"}", "{\"alg\":\"none\"}",
                             "{\"alg\":\"None\"}", "{\"alg\":\"HS256\"}", "{\"typ\":\"JWT\"}"};
    json_t *h = part(tok, 0);
    char *kid_header =
        ctu_fmt("{\"alg\":\"none\",\"kid\":\"%s\"}", json_string_value(json_object_get(h, "kid")));
    json_decref(h);
    json_decref(c);
    c = part(tok, 1);
    free(payload);
    payload = json_dumps(c, JSON_COMPACT);
    for (size_t i = 0; i <= sizeof headers / sizeof headers[0]; i++) {
        const char *hd = i < sizeof headers / sizeof headers[0] ? headers[i] : kid_header;
        for (int withsig = 0; withsig < 2; withsig++) {
            forged = forge(hd, payload, withsig ? sig_of(tok) : "");
            err = NULL;
            int rc = validate(g_sa, forged, NULL, NOW, NULL, &err);
            if (rc != -1)
                fail_msg("header %s (signature %d): want -1, got %d", hd, withsig, rc);
            assert_non_null(strstr(err, "RS256"));
            free(err);
            free(forged);
        }
    }
    free(kid_header);
    json_decref(c);
    free(payload);
    free(p64);
    free(tok);

    /* A genuine signature over claims that name no ServiceAccount. */
    char *claims = ctu_fmt("{\"iss\":\"%s\",\"aud\":[\"%s\"],\"exp\":%lld,\"sub\":\"x\"}", ISSUER,
                           ISSUER, (long long)NOW + 600);
    tok = sign_claims(g_pki.sa_key, claims);
    assert_int_equal(validate(g_sa, tok, NULL, NOW, NULL, NULL), -1);
    free(tok);
    free(claims);
}

static void test_new_refusals(void **state)
{
    (void)state;
    char *err = NULL;
    char *missing = ctu_fmt("%s/no-such.key", g_dir);
    assert_null(sa_tokens_new(missing, NULL, NULL, NULL, 0, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "no-such.key"));
    free(err);
    err = NULL;
    /* a good private key, a missing public one */
    assert_null(sa_tokens_new(g_pki.sa_key, missing, NULL, NULL, 0, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "no-such.key"));
    free(err);
    err = NULL;
    /* not RSA: RS256 needs an RSA key */
    assert_null(sa_tokens_new(g_ec_key, NULL, NULL, NULL, 0, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "RSA"));
    free(err);
    err = NULL;
    /* not PEM at all; a public key where the private one goes; a
     * certificate where the public key goes */
    char *junk = ctu_write(g_dir, "junk.pem", "not a key\n");
    assert_null(sa_tokens_new(junk, NULL, NULL, NULL, 0, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "junk.pem"));
    free(err);
    err = NULL;
    assert_null(sa_tokens_new(g_pki.sa_pub, NULL, NULL, NULL, 0, &err));
    assert_non_null(err);
    free(err);
    err = NULL;
    assert_null(sa_tokens_new(g_pki.sa_key, g_pki.ca_crt, NULL, NULL, 0, &err));
    assert_non_null(err);
    free(err);
    free(junk);
    free(missing);
}

/* The RSA public key a JWK's n and e make. */
static EVP_PKEY *key_from_jwk(const json_t *jwk)
{
    size_t nlen, elen;
    const char *n64 = json_string_value(json_object_get(jwk, "n"));
    const char *e64 = json_string_value(json_object_get(jwk, "e"));
    assert_non_null(n64);
    assert_non_null(e64);
    unsigned char *n = b64url_decode(n64, strlen(n64), &nlen);
    unsigned char *e = b64url_decode(e64, strlen(e64), &elen);
    BIGNUM *bn = BN_bin2bn(n, (int)nlen, NULL), *be = BN_bin2bn(e, (int)elen, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    assert_int_equal(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn), 1);
    assert_int_equal(OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be), 1);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    EVP_PKEY *k = NULL;
    assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
    assert_int_equal(EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params), 1);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    /* Unpadded base64url, n without a leading zero byte (RFC 7518 6.3.1). */
    assert_null(strchr(n64, '='));
    assert_int_equal(nlen, 256);
    assert_true(n[0] != 0);
    free(n);
    free(e);
    return k;
}

static void test_jwks_round_trip(void **state)
{
    (void)state;
    json_t *jwks = sa_tokens_jwks(g_sa);
    json_t *keys = json_object_get(jwks, "keys");
    assert_int_equal(json_array_size(keys), 1);
    json_t *jwk = json_array_get(keys, 0);
    assert_string_equal(json_string_value(json_object_get(jwk, "kty")), "RSA");
    assert_string_equal(json_string_value(json_object_get(jwk, "use")), "sig");
    assert_string_equal(json_string_value(json_object_get(jwk, "alg")), "RS256");
    assert_string_equal(json_string_value(json_object_get(jwk, "e")), "AQAB");
    assert_int_equal(json_object_size(jwk), 6);

    /* n and e make sa.pub */
    EVP_PKEY *k = key_from_jwk(jwk);
    FILE *f = fopen(g_pki.sa_pub, "r");
    assert_non_null(f);
    EVP_PKEY *pub = PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(pub);
    assert_int_equal(EVP_PKEY_eq(k, pub), 1);
    EVP_PKEY_free(pub);

    /* ... the kid is the token header's and the key's (jwt_key_id) */
    char *tok = issue(g_sa, NULL, NOW, 3600, NULL);
    json_t *h = part(tok, 0);
    assert_string_equal(json_string_value(json_object_get(h, "kid")),
                        json_string_value(json_object_get(jwk, "kid")));
    char kid[44];
    assert_int_equal(jwt_key_id(k, kid), 0);
    assert_string_equal(kid, json_string_value(json_object_get(jwk, "kid")));
    json_decref(h);

    /* ... and verifies a token's signature by itself (RS256 over
     * "header.payload"), and jwt_verify's too */
    const char *dot2 = strrchr(tok, '.');
    size_t slen;
    unsigned char *sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &slen);
    assert_int_equal(slen, 256);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k), 1);
    assert_int_equal(
        EVP_DigestVerify(md, sig, slen, (const unsigned char *)tok, (size_t)(dot2 - tok)), 1);
    EVP_MD_CTX_free(md);
    /* a changed byte of the signed text does not verify */
    char *changed = strdup(tok);
    changed[5] = changed[5] == 'a' ? 'b' : 'a';
    md = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k), 1);
    assert_int_not_equal(
        EVP_DigestVerify(md, sig, slen, (const unsigned char *)changed, (size_t)(dot2 - tok)), 1);
    EVP_MD_CTX_free(md);
    free(changed);
    free(sig);
    char *err = NULL;
    json_t *c = jwt_verify(tok, strlen(tok), k, &err);
    assert_null(err);
    assert_non_null(c);
    json_decref(c);
    free(tok);
    EVP_PKEY_free(k);

    /* Another key's JWKS: another n, another kid. */
    sa_tokens *t = tokens(g_other_key, NULL, NULL, NULL, 0);
    json_t *other = sa_tokens_jwks(t);
    json_t *ojwk = json_array_get(json_object_get(other, "keys"), 0);
    assert_string_not_equal(json_string_value(json_object_get(ojwk, "kid")),
                            json_string_value(json_object_get(jwk, "kid")));
    assert_string_not_equal(json_string_value(json_object_get(ojwk, "n")),
                            json_string_value(json_object_get(jwk, "n")));
    json_decref(other);
    sa_tokens_free(t);
    json_decref(jwks);
}

static void test_openid_configuration(void **state)
{
    (void)state;
    json_t *d = sa_tokens_openid_configuration(g_sa);
    json_t *want = json_pack("{s:s,s:s,s:[s],s:[s],s:[s]}", "issuer", ISSUER, "jwks_uri",
                             ISSUER "/openid/v1/jwks", "response_types_supported", "id_token",
                             "subject_types_supported", "public",
                             "id_token_signing_alg_values_supported", "RS256");
    assert_true(json_equal(d, want));
    json_decref(want);
    json_decref(d);
    sa_tokens *t =
        tokens(g_pki.sa_key, g_pki.sa_pub, "https://issuer.example:8443/cluster-a", NULL, 0);
    d = sa_tokens_openid_configuration(t);
    assert_string_equal(json_string_value(json_object_get(d, "issuer")),
                        "https://issuer.example:8443/cluster-a");
    assert_string_equal(json_string_value(json_object_get(d, "jwks_uri")),
                        "https://issuer.example:8443/cluster-a/openid/v1/jwks");
    json_decref(d);
    sa_tokens_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_token_claims),
        cmocka_unit_test(test_public_half_from_private_key),
        cmocka_unit_test(test_audiences),
        cmocka_unit_test(test_leeway),
        cmocka_unit_test(test_not_ours),
        cmocka_unit_test(test_ours_but_bad),
        cmocka_unit_test(test_new_refusals),
        cmocka_unit_test(test_jwks_round_trip),
        cmocka_unit_test(test_openid_configuration),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
