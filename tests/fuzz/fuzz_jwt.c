/* Fuzzes the RS256 JWT reader (apiserver/authentication/serviceaccount).
 *
 * Each input is read as a token against a fixed RSA key, by the JWT
 * reader and by the ServiceAccount token validator (token.h: the issuer
 * peek, claims, audiences); nothing may crash or leak, and no input may
 * verify (the fuzzer cannot forge an RS256 signature, so a success would
 * mean the check is broken). Inputs that are JSON objects are also
 * signed and read back: the claims must come back equal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <openssl/pem.h>
#include <stdio.h>
#include <unistd.h>

#include "apiserver/authentication/serviceaccount/jwt.h"
#include "apiserver/authentication/serviceaccount/token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static EVP_PKEY *key(void)
{
    static EVP_PKEY *k;
    if (!k)
        k = EVP_RSA_gen(2048); /* once per process */
    return k;
}

/* The validator over the same key (it reads PEM files: written once). */
static sa_tokens *validator(void)
{
    static sa_tokens *t;
    if (t)
        return t;
    char path[] = "/tmp/fuzz_jwt_keyXXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || !PEM_write_PrivateKey(f, key(), NULL, NULL, 0, NULL, NULL))
        abort();
    fclose(f);
    char *err = NULL;
    t = sa_tokens_new(path, NULL, NULL, NULL, 0, &err);
    unlink(path);
    if (!t)
        abort();
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    sa_token_info ti;
    char *verr = NULL;
    if (sa_tokens_validate(validator(), text, NULL, 0, &ti, &verr) == 1)
        abort(); /* a forged ServiceAccount token was accepted */
    free(verr);
    free(text);
    char *err = NULL;
    json_t *c = jwt_verify((const char *)data, size, key(), &err);
    if (c)
        abort(); /* a forged token verified */
    free(err);
    json_t *claims = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (json_is_object(claims)) {
        err = NULL;
        char *t = jwt_sign(claims, key(), &err);
        if (!t)
            abort();
        json_t *back = jwt_verify(t, strlen(t), key(), &err);
        if (!back || !json_equal(back, claims))
            abort();
        json_decref(back);
        free(t);
    }
    json_decref(claims);
    return 0;
}
