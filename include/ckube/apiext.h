/* ckube/apiext.h - a small extension API server: what an aggregated API
 * (seed 003's third way to extend the API: a server of its own behind
 * the main one, which proxies to it through an APIService) needs from
 * k8s.io/apiserver's generic server, for read-only resources served
 * from memory, as metrics-server serves metrics.k8s.io.
 *
 * What it does, as a server built on k8s.io/apiserver with
 * RecommendedOptions' delegated authentication and authorization:
 *  - HTTPS on its own thread (the serving certificate from files, read
 *    again when they change, so a rotation reaches the next connection
 *    without a restart; or a self-signed one made in memory);
 *  - authentication: first the front proxy (a client certificate signed
 *    by requestheader-client-ca-file with a CN among
 *    requestheader-allowed-names, both read from ConfigMap
 *    kube-system/extension-apiserver-authentication: the user is then
 *    the X-Remote-User header, groups X-Remote-Group, extra
 *    X-Remote-Extra-*), then a client certificate signed by the
 *    client-ca-file (CN user, O groups), then a bearer token through a
 *    TokenReview, else anonymous; 401 for credentials that fail;
 *  - authorization: system:masters and /healthz, /livez, /readyz
 *    always allowed, anything else through a SubjectAccessReview to the
 *    main API server (cached 10 s); 403 in upstream's words;
 *  - discovery: /apis, /apis/GROUP, /apis/GROUP/VERSION (what the
 *    aggregator checks before it marks the APIService Available);
 *  - OpenAPI v3: /openapi/v3 naming /openapi/v3/apis/GROUP/VERSION, the
 *    document of the resources' kinds (their schemas), which the
 *    aggregator fetches and serves for `kubectl explain`;
 *  - each resource's get and list (JSON), from a provider callback;
 *    other verbs get upstream's 405 MethodNotAllowed, unknown paths 404.
 *
 * The reviews go through the ckube_client the options give (the
 * server's own identity; it needs the ClusterRole
 * system:auth-delegator and to read the ConfigMap, as upstream's
 * extension servers do).
 *
 * Threading: one event loop on the server's thread accepts, does the TLS
 * handshakes and reads and sends. By default (workers 0) it also serves
 * each request, one at a time: a review or a provider that waits holds
 * up the rest. With workers N, N threads of the server authenticate,
 * authorize and call the providers, up to N requests at once (upstream's
 * servers: a goroutine per request); the providers must then be safe to
 * call concurrently. new/add/start/stop from one thread.
 */
#ifndef CKUBE_APIEXT_H
#define CKUBE_APIEXT_H

#include <ckube/client.h>
#include <ckube/manager.h>
#include <jansson.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_apiext_server ckube_apiext_server;

typedef struct ckube_apiext_options {
    ckube_client *client;     /* borrowed; must outlive the server */
    const char *group;        /* "metrics.example.com" (copied) */
    const char *version;      /* "v1alpha1" (copied) */
    const char *bind_address; /* NULL: "0.0.0.0" */
    int port;                 /* 0: any free port (ckube_apiext_server_port) */
    /* The serving certificate and key (PEM files, read at start and
     * again when either changes, as the manager's secure serving); both
     * NULL: a self-signed certificate for localhost and 127.0.0.1 made at
     * start (then the APIService needs insecureSkipTLSVerify). */
    const char *cert_file, *key_file;
    /* Threads serving requests, at most CKUBE_APIEXT_MAX_WORKERS; 0:
     * none, the loop serves them one at a time (Threading, above). */
    unsigned workers;
} ckube_apiext_options;

#define CKUBE_APIEXT_MAX_WORKERS 1024

/* The objects of a resource in namespace `ns` ("" for every namespace,
 * or a cluster-scoped resource): a new JSON array of objects, each with
 * at least metadata.name (and metadata.namespace when namespaced). The
 * server fills in apiVersion and kind. NULL fails the request with a 500
 * and *message (malloc'd, or NULL) as its message. Runs on the server's
 * loop, or on its workers (options.workers), then several at once. */
typedef json_t *(*ckube_apiext_list_fn)(void *ctx, const char *ns, char **message);

typedef struct ckube_apiext_resource {
    const char *plural;   /* "podstats" (copied) */
    const char *singular; /* "podstat" (copied; NULL: the kind lowercased) */
    const char *kind;     /* "PodStat" (copied; lists are kind + "List") */
    bool namespaced;
    const char *const *short_names; /* NULL-terminated, copied; may be NULL */
    ckube_apiext_list_fn list;
    void *ctx;
    /* The kind's OpenAPI v3 schema (copied; may be NULL: any object):
     * its type, description and properties, as a CRD version's
     * openAPIV3Schema; apiVersion, kind and metadata are added. Served in
     * the group/version's OpenAPI document (/openapi/v3/apis/G/V, named
     * by /openapi/v3), which the aggregator hands to clients: `kubectl
     * explain` reads it. */
    const json_t *schema;
} ckube_apiext_resource;

/* A server with no resources yet. NULL with *err (malloc'd) on bad
 * options. */
ckube_apiext_server *ckube_apiext_server_new(const ckube_apiext_options *o, char **err);
/* Adds a resource (copied) before start. 0, or -1 (a duplicate plural,
 * a missing name or callback, or already started). */
int ckube_apiext_server_add_resource(ckube_apiext_server *s, const ckube_apiext_resource *r);
/* Reads the ConfigMap, binds, and starts serving on a thread of its own.
 * 0, or -1 with *err (malloc'd). */
int ckube_apiext_server_start(ckube_apiext_server *s, char **err);
/* The port bound (after start), or 0. */
int ckube_apiext_server_port(const ckube_apiext_server *s);
/* Stops serving (waits for the thread); safe if never started. */
void ckube_apiext_server_stop(ckube_apiext_server *s);
/* Stops and frees (NULL is fine). */
void ckube_apiext_server_free(ckube_apiext_server *s);
/* A manager runnable (borrowed from s) that starts and stops it; no
 * leader election needed. */
const ckube_runnable *ckube_apiext_server_runnable(ckube_apiext_server *s);

#ifdef __cplusplus
}
#endif

#endif
