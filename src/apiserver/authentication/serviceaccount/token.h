/* token.h - ServiceAccount tokens as kube-apiserver issues and checks
 * them (k8s.io/kubernetes/pkg/serviceaccount): the claims of a bound
 * token (TokenRequest), their validation, and the issuer's public
 * documents (OIDC discovery and the JSON Web Key Set).
 *
 * A token's claims:
 *   iss  the issuer (--service-account-issuer)
 *   sub  system:serviceaccount:NAMESPACE:NAME
 *   aud  the audiences asked for (default: the API's, --api-audiences)
 *   iat, nbf  when it was issued; exp  when it expires
 *   jti  a random ID (the credential ID in the user's extra)
 *   kubernetes.io  {namespace, serviceaccount {name, uid},
 *                   pod {name, uid} or secret {name, uid}: the bound object}
 *
 * What this layer checks: the RS256 signature (jwt.h), the issuer, that
 * an audience is one the API accepts, expiry, not-before and an
 * issued-at not in the future (60 s of leeway, go-jose's). That the
 * ServiceAccount and the bound object still exist with those UIDs is the
 * caller's (it has the watch cache).
 *
 * Thread-safe: keys and settings are only read after sa_tokens_new.
 */
#ifndef CKUBE_APISERVER_AUTHENTICATION_SERVICEACCOUNT_TOKEN_H
#define CKUBE_APISERVER_AUTHENTICATION_SERVICEACCOUNT_TOKEN_H

#include <jansson.h>
#include <stdint.h>

typedef struct sa_tokens sa_tokens;

/* Default issuer, as k3s and kubeadm set it. */
#define SA_DEFAULT_ISSUER "https://kubernetes.default.svc.cluster.local"
/* TokenRequest's bounds and default (upstream's validation). */
#define SA_TOKEN_MIN_SECONDS 600
#define SA_TOKEN_DEFAULT_SECONDS 3600
#define SA_TOKEN_MAX_SECONDS 4294967296LL /* 2^32 */

/* key_file: the PEM private key that signs; pub_file: its public half,
 * or NULL (taken from the private key). issuer: NULL for the default.
 * audiences[0..n): what the API accepts (n 0: the issuer). NULL with
 * *err (malloc'd). */
sa_tokens *sa_tokens_new(const char *key_file, const char *pub_file, const char *issuer,
                         const char *const *audiences, size_t naudiences, char **err);
void sa_tokens_free(sa_tokens *t);

const char *sa_tokens_issuer(const sa_tokens *t);
/* The API's audiences as a new JSON array the caller owns (a copy: no
 * two threads share it). */
json_t *sa_tokens_api_audiences(const sa_tokens *t);

/* What a token is bound to. */
typedef struct sa_token_ref {
    const char *kind; /* "Pod", "Secret", or NULL: none */
    const char *name, *uid;
} sa_token_ref;

/* Signs a token for ServiceAccount ns/name (uid) with `audiences` (a
 * JSON array of strings, borrowed; NULL or empty: the API's), valid from
 * `now` (Unix seconds) for `seconds`, bound to `bound`. Returns it
 * (malloc'd) or NULL with *err. */
char *sa_tokens_issue(const sa_tokens *t, const char *ns, const char *name, const char *uid,
                      const json_t *audiences, int64_t now, int64_t seconds,
                      const sa_token_ref *bound, char **err);

/* What a valid token says. Strings point into `claims` (held). */
typedef struct sa_token_info {
    json_t *claims; /* a reference; sa_token_info_clear drops it */
    const char *ns, *name, *uid;
    const char *pod_name, *pod_uid;       /* NULL when not bound to a pod */
    const char *secret_name, *secret_uid; /* NULL when not bound to a secret */
    const char *jti;                      /* NULL when absent */
    json_t *audiences; /* the token's audiences among those asked for (a reference) */
} sa_token_info;

/* Checks `token` against `audiences` (a JSON array of strings; NULL: the
 * API's) at `now`: 1 with *out, 0 when it is not a ServiceAccount token
 * of this issuer at all (not a JWT, another issuer: other
 * authenticators may know it), -1 with *err when it is one but does not
 * hold (bad signature, expired, wrong audience: upstream's words). */
int sa_tokens_validate(const sa_tokens *t, const char *token, const json_t *audiences, int64_t now,
                       sa_token_info *out, char **err);
void sa_token_info_clear(sa_token_info *i);

/* The issuer's OpenID discovery document (/.well-known/openid-configuration)
 * and key set (/openid/v1/jwks), as kube-apiserver serves them. New
 * references. */
json_t *sa_tokens_openid_configuration(const sa_tokens *t);
json_t *sa_tokens_jwks(const sa_tokens *t);

#endif
