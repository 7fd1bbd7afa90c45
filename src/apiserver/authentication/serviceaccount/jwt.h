/* jwt.h - JSON Web Tokens as kube-apiserver issues and reads
 * ServiceAccount tokens (issue #21): compact JWS, RS256 (RSASSA-PKCS1-v1_5
 * with SHA-256) over a JSON claims set, the key named by a `kid` that is
 * the base64url SHA-256 of the public key's DER, as upstream's
 * keyIDFromPublicKey makes it.
 *
 * This layer signs and checks the signature only. What the claims must
 * say (issuer, audiences, expiry, not-before, the ServiceAccount and the
 * bound object still existing) is the authenticator's, above it.
 *
 * OpenSSL 3; thread-safe (keys are only read).
 */
#ifndef CKUBE_APISERVER_AUTHENTICATION_SERVICEACCOUNT_JWT_H
#define CKUBE_APISERVER_AUTHENTICATION_SERVICEACCOUNT_JWT_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stddef.h>

/* The longest token read: larger input is refused before any decoding
 * (upstream's bearer tokens are a few KB). */
#define JWT_MAX_LEN (64u * 1024)

/* Unpadded base64url of n bytes (malloc'd): JWT parts, JWK members. */
char *jwt_b64url_encode(const unsigned char *in, size_t n);

/* The key ID of `key` (its public half): base64url, unpadded, of the
 * SHA-256 of its SubjectPublicKeyInfo DER; 43 characters and a NUL.
 * Returns 0, or -1 when the key cannot be encoded. */
int jwt_key_id(EVP_PKEY *key, char out[44]);

/* Signs `claims` (borrowed; a JSON object) with the RSA private `key`:
 * header {"alg":"RS256","kid":...}. Returns the token (malloc'd; the
 * caller frees), or NULL with *err (malloc'd) set. */
char *jwt_sign(const json_t *claims, EVP_PKEY *key, char **err);

/* The claims of a three-part token (len bytes) WITHOUT checking anything
 * else: for seeing whose a token is before verifying it (upstream peeks
 * at the issuer). A new reference, or NULL when the token is not three
 * parts or its payload is not a JSON object. */
json_t *jwt_peek_claims(const char *token, size_t len);

/* Checks `token` (len bytes) against the RSA public `key`: three
 * base64url parts, a header naming alg RS256 (anything else, "none"
 * included, is refused), a valid signature, a JSON object as the
 * payload. A kid in the header is not compared: upstream tries each of
 * its keys in turn, whatever the token names. Returns the claims (a new
 * reference), or NULL with *err (malloc'd) saying why. */
json_t *jwt_verify(const char *token, size_t len, EVP_PKEY *key, char **err);

#endif
