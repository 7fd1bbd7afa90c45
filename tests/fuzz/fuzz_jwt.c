/* Fuzzes the RS256 JWT reader (apiserver/authentication/serviceaccount).
 *
 * Each input is read as a token against a fixed RSA key; nothing may
 * crash or leak, and no input may verify (the fuzzer cannot forge an
 * RS256 signature, so a success would mean the check is broken). Inputs
 * that are JSON objects are also signed and read back: the claims must
 * come back equal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "apiserver/authentication/serviceaccount/jwt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static EVP_PKEY *key(void)
{
    static EVP_PKEY *k;
    if (!k)
        k = EVP_RSA_gen(2048); /* once per process */
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
