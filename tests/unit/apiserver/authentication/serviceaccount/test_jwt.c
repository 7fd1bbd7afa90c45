/* RS256 JSON Web Tokens (apiserver/authentication/serviceaccount/jwt.h):
 * signing, the key ID, and every way a token is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "apiserver/authentication/serviceaccount/jwt.h"

static EVP_PKEY *key, *other;

static int group_setup(void **state)
{
    (void)state;
    key = EVP_RSA_gen(2048);
    other = EVP_RSA_gen(2048);
    return key && other ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(key);
    EVP_PKEY_free(other);
    return 0;
}

static char *sign(const char *claims_json)
{
    json_t *c = json_loads(claims_json, 0, NULL);
    assert_non_null(c);
    char *err = NULL;
    char *t = jwt_sign(c, key, &err);
    json_decref(c);
    assert_null(err);
    assert_non_null(t);
    return t;
}

/* jwt_verify's error for `token`, which must be refused. */
static char *refusal(const char *token, EVP_PKEY *k)
{
    char *err = NULL;
    json_t *c = jwt_verify(token, strlen(token), k, &err);
    assert_null(c);
    assert_non_null(err);
    return err;
}

static void expect_refused(const char *token, EVP_PKEY *k, const char *words)
{
    char *err = refusal(token, k);
    if (!strstr(err, words))
        fail_msg("refusal \"%s\" lacks \"%s\"", err, words);
    free(err);
}

/* base64url of n bytes, unpadded (for forging parts and the key ID). */
static char *b64url_n(const unsigned char *s, size_t n)
{
    char *out = calloc(1, 4 * ((n + 2) / 3) + 1);
    int len = EVP_EncodeBlock((unsigned char *)out, s, (int)n);
    while (len > 0 && out[len - 1] == '=')
        out[--len] = '\0';
    for (int i = 0; i < len; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    return out;
}

static char *b64url(const char *s)
{
    return b64url_n((const unsigned char *)s, strlen(s));
}

static void test_round_trip(void **state)
{
    (void)state;
    char *t = sign("{\"iss\":\"https://kubernetes.default.svc.cluster.local\","
                   "\"sub\":\"system:serviceaccount:default:bot\",\"aud\":[\"api\"],"
                   "\"exp\":4102444800,\"kubernetes.io\":{\"namespace\":\"default\"}}");
    /* Three unpadded base64url parts. */
    assert_null(strchr(t, '='));
    assert_null(strchr(t, '+'));
    assert_null(strchr(t, '/'));
    char *dot = strchr(t, '.');
    assert_non_null(dot);
    assert_non_null(strchr(dot + 1, '.'));
    char *err = NULL;
    json_t *c = jwt_verify(t, strlen(t), key, &err);
    assert_null(err);
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "sub")),
                        "system:serviceaccount:default:bot");
    assert_int_equal(json_integer_value(json_object_get(c, "exp")), 4102444800LL);
    json_decref(c);
    /* The header: RS256 and the key's ID. */
    char header64[512];
    snprintf(header64, sizeof header64, "%.*s", (int)(dot - t), t);
    char kid[44];
    assert_int_equal(jwt_key_id(key, kid), 0);
    assert_int_equal(strlen(kid), 43);
    size_t n = strlen(header64);
    char *std = calloc(1, n + 4);
    for (size_t i = 0; i < n; i++)
        std[i] = header64[i] == '-' ? '+' : header64[i] == '_' ? '/' : header64[i];
    while (strlen(std) % 4)
        strcat(std, "=");
    unsigned char raw[512];
    int len = EVP_DecodeBlock(raw, (unsigned char *)std, (int)strlen(std));
    assert_true(len > 0);
    json_t *h = json_loadb(
        (const char *)raw,
        strlen((const char *)raw) < (size_t)len ? strlen((const char *)raw) : (size_t)len, 0, NULL);
    assert_non_null(h);
    assert_string_equal(json_string_value(json_object_get(h, "alg")), "RS256");
    assert_string_equal(json_string_value(json_object_get(h, "kid")), kid);
    json_decref(h);
    free(std);
    free(t);
}

static void test_key_id_is_sha256_of_der(void **state)
{
    (void)state;
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(key, &der);
    assert_true(n > 0);
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(der, (size_t)n, d);
    OPENSSL_free(der);
    char kid[44], kid3[44];
    assert_int_equal(jwt_key_id(key, kid), 0);
    char *want = b64url_n(d, sizeof d);
    assert_string_equal(kid, want);
    free(want);
    assert_int_equal(jwt_key_id(other, kid3), 0);
    assert_string_not_equal(kid, kid3);
}

static void test_refusals(void **state)
{
    (void)state;
    char *t = sign("{\"sub\":\"x\"}");
    /* Another key's signature. */
    expect_refused(t, other, "invalid signature");
    /* A changed payload. */
    char *dot1 = strchr(t, '.'), *dot2 = strchr(dot1 + 1, '.');
    char *body = b64url("{\"sub\":\"admin\"}");
    char forged[4096];
    snprintf(forged, sizeof forged, "%.*s.%s%s", (int)(dot1 - t), t, body, dot2);
    expect_refused(forged, key, "invalid signature");
    free(body);
    /* A flipped signature byte. */
    char *bad = strdup(t);
    char *last = bad + strlen(bad) - 2;
    *last = *last == 'A' ? 'B' : 'A';
    expect_refused(bad, key, "invalid signature");
    free(bad);
    /* alg none (with or without a signature), and other algorithms. */
    char *none = b64url("{\"alg\":\"none\"}"), *payload = b64url("{\"sub\":\"admin\"}");
    snprintf(forged, sizeof forged, "%s.%s.", none, payload);
    expect_refused(forged, key, "only RS256");
    snprintf(forged, sizeof forged, "%s.%s%s", none, payload, dot2);
    expect_refused(forged, key, "only RS256");
    char *hs = b64url("{\"alg\":\"HS256\"}");
    snprintf(forged, sizeof forged, "%s.%s%s", hs, payload, dot2);
    expect_refused(forged, key, "only RS256");
    char *noalg = b64url("{\"typ\":\"JWT\"}");
    snprintf(forged, sizeof forged, "%s.%s%s", noalg, payload, dot2);
    expect_refused(forged, key, "only RS256");
    free(none);
    free(hs);
    free(noalg);
    /* A payload that is not an object, under a valid signature. */
    json_t *arr = json_array();
    char *err = NULL;
    assert_null(jwt_sign(arr, key, &err));
    assert_non_null(err);
    free(err);
    err = NULL;
    json_decref(arr);
    /* Shape: parts, padding, alphabet, length. */
    expect_refused("", key, "three");
    expect_refused("a.b", key, "three");
    expect_refused("a.b.c.d", key, "three");
    expect_refused("!!!.b.c", key, "header");
    snprintf(forged, sizeof forged, "%.*s=%s", (int)(dot2 - t), t, dot2);
    expect_refused(forged, key, "invalid signature");
    snprintf(forged, sizeof forged, "%s=", t);
    expect_refused(forged, key, "signature is not base64url");
    char *huge = malloc(JWT_MAX_LEN + 2);
    memset(huge, 'a', JWT_MAX_LEN + 1);
    huge[JWT_MAX_LEN + 1] = '\0';
    expect_refused(huge, key, "longer than");
    free(huge);
    /* An EC key is not an RS256 key. */
    EVP_PKEY *ec = EVP_EC_gen("P-256");
    expect_refused(t, ec, "invalid signature");
    json_t *obj = json_object();
    assert_null(jwt_sign(obj, ec, &err));
    assert_non_null(err);
    free(err);
    json_decref(obj);
    EVP_PKEY_free(ec);
    free(payload);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_key_id_is_sha256_of_der),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
