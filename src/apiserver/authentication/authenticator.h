/* authenticator.h - who a request is from, in kube-apiserver's order
 * (k8s.io/apiserver/pkg/authentication and kube-apiserver's
 * BuildAuthenticator):
 *
 *   1. the TLS client certificate (x509.h);
 *   2. a bearer token ("Authorization: Bearer ..."): the static token
 *      file (tokenfile.h), then ServiceAccount tokens (a hook, below);
 *   the first that knows the request decides; an authenticated user is
 *   also in system:authenticated;
 *   3. anonymous (--anonymous-auth, on by default as upstream's): a
 *      request that carries no credentials at all is system:anonymous in
 *      system:unauthenticated.
 *
 * Credentials that are present but wrong (a certificate that does not
 * verify, an unknown or bad bearer token) are never anonymous: the
 * request is unauthorized (401), whatever else it carries, unless an
 * earlier step already said who it is (upstream's union returns the
 * first success).
 *
 * Plain HTTP (--plain-http, loopback only): every request without a
 * bearer token is system:unsecured in system:masters, as kube-apiserver's
 * old insecure port served.
 */
#ifndef CKUBE_APISERVER_AUTHENTICATION_AUTHENTICATOR_H
#define CKUBE_APISERVER_AUTHENTICATION_AUTHENTICATOR_H

#include <openssl/x509.h>
#include <stdbool.h>

#include "apiserver/authentication/user.h"

typedef struct authenticator authenticator;

/* ServiceAccount (and other) bearer tokens beyond the token file, for
 * `audiences` (a JSON array; NULL: the API's): 1 with *out (a new user),
 * 0 when the token is not of this kind, -1 with *err (malloc'd) when it
 * is but does not hold. */
typedef int (*auth_token_fn)(void *arg, const char *token, const json_t *audiences, auth_user **out,
                             json_t **matched, char **err);
/* (matched: NULL when the caller does not want them; else, on 1, the
 * token's audiences among `audiences` or the API's, a new reference, as
 * upstream's authenticator.Response.Audiences. Hooks run on every serving
 * thread at once: the array must not share values with anything another
 * thread holds.) */

typedef struct auth_config {
    bool anonymous;         /* --anonymous-auth */
    bool plain_http;        /* no TLS: system:unsecured */
    const char *token_file; /* --token-auth-file, or NULL */
    auth_token_fn token_fn; /* NULL: none */
    void *token_arg;
    /* The API's audiences (a JSON array, borrowed: it outlives the
     * authenticator; NULL: none known). Tokens that carry no audience (the
     * token file's) are good only for these, as upstream wraps its
     * audience-agnostic authenticators. */
    const json_t *api_audiences;
} auth_config;

/* What a request presents. */
typedef struct auth_request {
    X509 *cert;                /* the client certificate, or NULL */
    long verify;               /* OpenSSL's verdict on it */
    const char *authorization; /* the Authorization header, or NULL */
    const json_t *audiences;   /* what a token must be for (TokenReview); NULL: the API's */
    /* Out (may be NULL): when a bearer token authenticated, the audiences
     * it is good for among those asked (a new reference; TokenReview's
     * status.audiences). */
    json_t **audiences_out;
} auth_request;

/* NULL with *err (malloc'd) when the token file does not load. */
authenticator *authenticator_new(const auth_config *c, char **err);

/* Who `r` is from: 1 with *out (a new reference); 0 when the request is
 * unauthorized, with *why (malloc'd) for the log when credentials were
 * wrong (left NULL when there were none, anonymous being off).
 * Thread-safe. */
int authenticator_authenticate(const authenticator *a, const auth_request *r, auth_user **out,
                               char **why);

/* The client-certificate step alone (x509.h) with the authenticated
 * group added, for callers that keep a connection's result: 1, 0 or -1
 * as auth_x509. */
int authenticator_x509(X509 *cert, long verify, auth_user **out, char **err);

/* The API's audiences (auth_config.api_audiences; borrowed; may be NULL). */
const json_t *authenticator_api_audiences(const authenticator *a);

void authenticator_free(authenticator *a);

#endif
