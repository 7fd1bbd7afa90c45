/* delegated_auth.h - authentication and authorization delegated to the API
 * server, for the manager's secure serving (not installed): after
 * k8s.io/apiserver's DelegatingAuthenticatorConfig (client certificate,
 * then a TokenReview of the bearer token, then anonymous; the
 * authenticated group added) and DelegatingAuthorizerConfig (always-allowed
 * groups, always-allowed paths, then a SubjectAccessReview), each review's
 * answer cached for a TTL as upstream's cached token authenticator and
 * webhook authorizer cache theirs.
 *
 * Thread-safe: the caches have a mutex; reviews are made with it released,
 * on the calling thread, through the borrowed client (which blocks for as
 * long as the API server takes, bounded by the client's timeout). */
#ifndef CKUBE_RUNTIME_DELEGATED_AUTH_H
#define CKUBE_RUNTIME_DELEGATED_AUTH_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/status.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <openssl/x509.h>

/* A user as authentication found it. Every pointer is owned. */
typedef struct delegated_user {
    char *name;
    char *uid; /* NULL when none */
    char **groups;
    size_t ngroups;
    json_t *extra; /* an object of string arrays, or NULL */
} delegated_user;

void delegated_user_clear(delegated_user *u);
/* Appends a copy of group g to u's groups. 0, or -1 out of memory. */
int delegated_user_add_group(delegated_user *u, const char *g);
/* upstream's AuthenticatedGroupAdder: adds system:authenticated unless u
 * has it. 0, or -1 out of memory. */
int delegated_user_add_authenticated(delegated_user *u);

typedef struct delegated_auth_opts {
    ckube_client *client; /* borrowed; makes the reviews */
    /* NULL-terminated, copied. NULL = "/healthz", "/readyz", "/livez" and
     * "system:masters" (upstream's defaults). */
    const char *const *always_allow_paths;
    const char *const *always_allow_groups;
    int64_t cache_ttl_ns; /* 0 = 10 s; < 0 = no caching */
    ckube_clock *clock;   /* NULL = real; borrowed */
} delegated_auth_opts;

typedef struct delegated_auth delegated_auth;

/* NULL on allocation failure or without a client. */
delegated_auth *delegated_auth_new(const delegated_auth_opts *o);
void delegated_auth_free(delegated_auth *a);

/* Authenticates a request: `peer` (borrowed; may be NULL) is the client
 * certificate the TLS layer verified against the client CA; `verified`
 * says whether it did; `authorization` is the Authorization header (may
 * be NULL). Returns 0 with *out filled (the caller clears it), or -1
 * when the request is unauthenticated (401): a certificate that did not
 * verify, a token the TokenReview refused or could not be asked about. */
int delegated_authenticate(delegated_auth *a, X509 *peer, bool verified, const char *authorization,
                           delegated_user *out);

/* Authorizes `verb` (lowercase HTTP method) on non-resource `path` for
 * `u`. 1 allowed; 0 denied, with *reason (malloc'd, or NULL when the
 * reviewer gave none); -1 when the SubjectAccessReview failed, with *err
 * (a new Status). */
int delegated_authorize(delegated_auth *a, const delegated_user *u, const char *verb,
                        const char *path, char **reason, ckube_status **err);

/* What a resource request asks for (all borrowed; group "" is core,
 * namespace_ and name may be NULL or ""). */
typedef struct delegated_resource {
    const char *verb; /* get, list, watch, create, ... */
    const char *group, *version, *resource, *subresource;
    const char *namespace_, *name;
} delegated_resource;

/* Authorizes a resource request (always-allowed groups, then a
 * SubjectAccessReview with resourceAttributes, cached as
 * delegated_authorize's). Returns as delegated_authorize. */
int delegated_authorize_resource(delegated_auth *a, const delegated_user *u,
                                 const delegated_resource *r, char **reason, ckube_status **err);

/* ---- the pure parts (exposed for tests) ---------------------------------- */

/* Whether `path` matches one of the patterns (upstream's path authorizer:
 * an exact path, or a prefix when the pattern ends in '*'; a pattern's
 * leading '/' is optional). */
bool delegated_path_matches(const char *const *patterns, const char *path);

/* The user a verified client certificate names: CN the name, each O a
 * group, then system:authenticated. -1 when it has no CN. */
int delegated_user_from_cert(X509 *x, delegated_user *out);

/* The user a TokenReview answer names, with system:authenticated added
 * when missing (upstream's AuthenticatedGroupAdder). -1 when the answer
 * says it is not authenticated or has no username. `tr` is borrowed. */
int delegated_user_from_token_review(const json_t *tr, delegated_user *out);

/* The SubjectAccessReview asked for `u`, `verb` and `path`: a new object. */
json_t *delegated_sar_new(const delegated_user *u, const char *verb, const char *path);

/* The SubjectAccessReview asked for `u` and resource request `r`. */
json_t *delegated_sar_new_resource(const delegated_user *u, const delegated_resource *r);
/* upstream's responsewriters.Forbidden for a resource request: 403
 * Forbidden, `RESOURCE.GROUP "NAME" is forbidden: User "U" cannot VERB
 * resource "RESOURCE[/SUB]" in API group "GROUP" in the namespace "NS"`
 * (or `at the cluster scope`), and ": REASON". A new Status. */
ckube_status *delegated_forbidden_resource(const delegated_user *u, const delegated_resource *r,
                                           const char *reason);
/* upstream's responsewriters.Forbidden for a non-resource request: 403,
 * `forbidden: User "NAME" cannot VERB path "PATH"` and ": REASON" when
 * there is one. A new Status. */
ckube_status *delegated_forbidden(const delegated_user *u, const char *verb, const char *path,
                                  const char *reason);

#endif
