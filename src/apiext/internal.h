/* internal.h - what the extension API server's files share: the front
 * proxy's authentication (requestheader.c), used by server.c. */
#ifndef CKUBE_APIEXT_INTERNAL_H
#define CKUBE_APIEXT_INTERNAL_H

#include <ckube/client.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stddef.h>

#include "runtime/delegated_auth.h"

/* The front proxy as ConfigMap kube-system/extension-apiserver-
 * authentication describes it (upstream's RequestHeaderConfig): the CA
 * its client certificate chains to, the names it may have, the headers
 * that carry the user. */
typedef struct apiext_front_proxy apiext_front_proxy;

/* Reads the ConfigMap with `c`. Returns the front proxy (its CA may be
 * absent: then nothing is trusted as a front proxy) and, in *client_ca
 * (malloc'd, *len bytes; NULL when neither is published), the PEM of
 * client-ca-file and requestheader-client-ca-file together: what the TLS
 * layer verifies client certificates against. NULL with *err (malloc'd)
 * when the ConfigMap cannot be read. */
apiext_front_proxy *apiext_front_proxy_load(ckube_client *c, char **client_ca, size_t *len,
                                            char **err);
void apiext_front_proxy_free(apiext_front_proxy *fp);

/* Whether `peer` (which the TLS layer verified against either CA) chains
 * to the requestheader CA, for client authentication, and has a CN among
 * the allowed names (any, when none are listed). `ssl` gives the chain. */
bool apiext_front_proxy_trusts(const apiext_front_proxy *fp, X509 *peer, SSL *ssl);

/* The user the request headers name (the first username header present;
 * every value of each group header; X-Remote-Extra-KEY values, KEY
 * unescaped and lowercased, as upstream). 0 with *u filled (the caller
 * clears it), -1 when no username header is present. */
int apiext_front_proxy_user(const apiext_front_proxy *fp, const struct evkeyvalq *h,
                            delegated_user *u);

/* ---- OpenAPI (openapi.c) ---- */

/* What the OpenAPI document says of one kind: borrowed. */
typedef struct apiext_openapi_kind {
    const char *kind, *plural;
    bool namespaced;
    const json_t *schema; /* the kind's OpenAPI v3 schema, or NULL: any object */
} apiext_openapi_kind;

/* The OpenAPI v3 document of group/version serving `kinds` (a new
 * reference): a schema per kind and its list, tagged with
 * x-kubernetes-group-version-kind, the metadata types and the get and
 * list paths. */
json_t *apiext_openapi_v3(const char *group, const char *version, const apiext_openapi_kind *kinds,
                          size_t n);
/* kube-apiserver's form of a document's hash (SHA-512, uppercase hex;
 * malloc'd, NULL when out of memory). */
char *apiext_openapi_hash(const json_t *doc);

#endif
