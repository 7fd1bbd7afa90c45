/* clientbuilder.h - a client per controller, each with the credentials of
 * its own ServiceAccount: kube-controller-manager's
 * --use-service-account-credentials, after k8s.io/controller-manager
 * pkg/clientbuilder's DynamicControllerClientBuilder (the token source
 * that client-go's transport caches and resets on 401).
 *
 * clientbuilder_client(b, "namespace-controller") returns a client whose
 * requests carry a token of the ServiceAccount
 * kube-system/namespace-controller. The builder's root client (the
 * controller-manager's own identity, system:kube-controller-manager)
 * makes the ServiceAccount when it is missing and asks for the token with
 * a TokenRequest (POST .../serviceaccounts/NAME/token), as upstream's
 * getOrCreateServiceAccount and tokenSourceImpl do. The base config's
 * credentials are left out of the controllers' clients (upstream's
 * AnonymousClientConfig): only the token identifies them.
 *
 * Tokens live in memory only, behind the client's token source
 * (ckube/config.h), never in a file: a controller-manager killed outright
 * leaves no credentials behind, and there is no refresher thread. As
 * upstream's, tokens are fetched lazily: a client's first request fetches
 * its token; the first request after (100 - leeway)% of the token's
 * lifetime fetches the next (that request, and the others of that client
 * meanwhile, wait for one fetch); a 401 drops the refused token and
 * fetches another (a ServiceAccount deleted and made again, or a server
 * whose signing key changed, refuses the old ones). When a refresh fails
 * the old token goes on being used (client-go's cachingTokenSource:
 * "Unable to rotate token") and the fetch is tried again at most once a
 * second.
 *
 * Thread-safety: clientbuilder_client and clientbuilder_free from one
 * thread; the clients are shared between threads like any ckube_client.
 * Errors: libckube's (a ckube_status, or NULL on allocation failure);
 * nothing aborts.
 */
#ifndef CKUBE_CONTROLLERS_CLIENTBUILDER_H
#define CKUBE_CONTROLLERS_CLIENTBUILDER_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/config.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* upstream's defaultExpirationSeconds and defaultLeewayPercent */
#define CLIENTBUILDER_DEFAULT_LIFETIME_SECONDS 3600
#define CLIENTBUILDER_DEFAULT_LEEWAY_PERCENT 20
/* The shortest spec.expirationSeconds a TokenRequest may ask for
 * (kube-apiserver's validation: "may not specify a duration less than 10
 * minutes"). */
#define CLIENTBUILDER_MIN_EXPIRATION_SECONDS 600

typedef struct clientbuilder clientbuilder;

typedef struct clientbuilder_opts {
    const char *namespace_; /* where the ServiceAccounts live; NULL = "kube-system" */
    /* How long a token is used: what a TokenRequest asks for (at least
     * CLIENTBUILDER_MIN_EXPIRATION_SECONDS) and, when shorter than what
     * the server grants, how long the builder treats a token as living.
     * Shorter than 10 minutes only for tests, which cannot wait 8 minutes
     * for a refresh. 0 = 3600. */
    int64_t lifetime_seconds;
    int leeway_percent; /* 1..99; 0 = 20 */
    ckube_clock *clock; /* when a token is due; NULL = real; borrowed */
} clientbuilder_opts;

/* A builder. `root` (borrowed) makes the ServiceAccounts and
 * TokenRequests: it must outlive every request of the clients made here.
 * `base` (copied) is what the clients are made from: server, TLS, rate
 * limits, with its credentials removed. `o` may be NULL. NULL on
 * allocation failure. */
clientbuilder *clientbuilder_new(ckube_client *root, const ckube_config *base,
                                 const clientbuilder_opts *o);
/* The client of ServiceAccount `sa_name` (made on the first call for that
 * name, the same client afterwards). No request is made here: the first
 * request of the client makes the ServiceAccount and fetches its token.
 * Owned by the builder (borrowed by the caller until clientbuilder_free).
 * NULL with *err (a new Status the caller frees; may be NULL) when the
 * client cannot be made. */
ckube_client *clientbuilder_client(clientbuilder *b, const char *sa_name, ckube_status **err);
/* Makes the client of `sa_name` ready now: its ServiceAccount made and a
 * token fetched, unless it has one. As upstream, which does this when it
 * builds a controller's client, so that every controller's ServiceAccount
 * exists once it runs, whether it has written anything yet or not. 0, or
 * -1 with *err (a new Status; the client's next request tries again). */
int clientbuilder_prepare(clientbuilder *b, const char *sa_name, ckube_status **err);
/* How many tokens the client of `sa_name` has fetched so far (0 when
 * there is no such client): for tests and logs. */
uint64_t clientbuilder_fetches(clientbuilder *b, const char *sa_name);
/* Frees the builder and its clients. Every watch and request on them must
 * be over. NULL is a no-op. */
void clientbuilder_free(clientbuilder *b);

/* ---- the pure parts (exposed for tests) ---------------------------------- */

/* The spec.expirationSeconds a TokenRequest asks for, given the option
 * (0 = the default). */
int64_t clientbuilder_expiration_seconds(int64_t lifetime_seconds);

/* For how many seconds a token the server says expires at `expires` (Unix
 * seconds), received at `now`, is used before the next is fetched: its
 * lifetime, pinned to at least 10 minutes as upstream pins it (a shorter
 * one means the clocks disagree), then capped by `lifetime_seconds` (0 =
 * no cap), less `leeway_percent` (0 = 20) of it. Always at least 1. */
int64_t clientbuilder_use_seconds(int64_t now, int64_t expires, int64_t lifetime_seconds,
                                  int leeway_percent);

/* Whether a request must fetch a token first: there is none (`have`
 * false), or the token is due (`now` >= `due`) and no fetch failed within
 * the last second (`now` >= `retry`). Times on one clock. */
bool clientbuilder_fetch_due(bool have, uint64_t now, uint64_t due, uint64_t retry);

/* A TokenRequest answer's status.token (malloc'd into *token) and
 * status.expirationTimestamp (Unix seconds into *expires). -1 with *why
 * (a static string) when either is missing or malformed. `tr` is
 * borrowed. */
int clientbuilder_parse_token(const json_t *tr, char **token, int64_t *expires, const char **why);

#endif
