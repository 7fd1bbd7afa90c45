/* client.h - a webhook's clientConfig, compiled, and a POST to it: what
 * admission webhooks and CRD conversion webhooks share, as both share
 * k8s.io/apiserver/pkg/util/webhook upstream.
 *
 * A clientConfig names a URL (https://host[:port][/path]) or a Service
 * (namespace, name, path, port: reached through its Endpoints, see
 * apiserver/resolver), and optionally a caBundle (base64 of PEM CA
 * certificates) to verify the webhook's certificate against (else the
 * system's roots). Validation happened when the configuration was
 * written (admissionregistration, apiextensions); compiling trusts it.
 *
 * Threading: hook_client_post on the outbound's loop thread; a compiled
 * hook_client is read-only, so several loops may share one.
 */
#ifndef CKUBE_APISERVER_WEBHOOK_CLIENT_H
#define CKUBE_APISERVER_WEBHOOK_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "apiserver/cacher/cacher.h"
#include "apiserver/outbound/outbound.h"

typedef struct hook_client {
    /* A URL: its host (no brackets), authority (as written) and path ("" or "/..."). */
    char *url_host, *url_authority, *url_path;
    int url_port;
    /* Or a Service (svc_name non-NULL). */
    char *svc_ns, *svc_name, *svc_path;
    int svc_port;
    char *ca; /* PEM, decoded from caBundle; NULL: the system's roots */
    size_t ca_len;
} hook_client;

/* Fills c (zeroed first) from a clientConfig object (borrowed). */
void hook_client_init(hook_client *c, const json_t *client_config);
/* Frees what c holds (not c). */
void hook_client_free(hook_client *c);

/* POSTs `body` (len bytes, copied) as JSON to the webhook, with
 * `?timeout=Ns` on its path as Go's client adds it, giving up after
 * timeout_s. Service references are resolved in `cache` (borrowed).
 * Returns the call (outbound_post's contract: cb runs once, later, on
 * the loop); NULL when it could not start (the Service has no ready
 * endpoint): err (n bytes) then holds upstream's words, `Post
 * "https://NAME.NS.svc:PORT/PATH?timeout=Ns": service "NAME" not found`. */
outbound_call *hook_client_post(const hook_client *c, outbound *o, cacher *cache,
                                unsigned timeout_s, const char *body, size_t len, outbound_cb cb,
                                void *arg, char *err, size_t n);

#endif
