/* context.h - what a request runs in: its loop, the server's parts it
 * reads and writes through, its own context, and the reply writers
 * (kube-apiserver's request context and responsewriters).
 *
 * Threads: N HTTP loop threads (libevent; each has its own event_base and
 * httpd accepting from its duplicate of the listening socket), the
 * storage's committer thread, and the caller's thread that waits for
 * shutdown. Request handlers run on their loop thread and never block:
 * reads come from the cacher, writes go to storage asynchronously and
 * their completion is posted back to the loop (loop_post).
 *
 * The server module (server/) builds and runs these; the endpoints above
 * this module use them. What this module must tell the layers above (a
 * request ended, a watch started) goes through the hooks in struct
 * apiserver, never by including their headers. */
#ifndef CKUBE_APISERVER_ENDPOINTS_REQUEST_CONTEXT_H
#define CKUBE_APISERVER_ENDPOINTS_REQUEST_CONTEXT_H

#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "apiserver/cacher/cacher.h"
#include "apiserver/endpoints/request/request_info.h"
#include "apiserver/httpd/httpd.h"
#include "apiserver/registry/generic/store.h"
#include "apiserver/registry/rest/registry.h"
#include "ckube/status.h"
#include "common/json_cost.h"
#include "storage/storage.h"

#define APISERVER_MAX_BODY (3u * 1024 * 1024) /* 413 above this */

/* What one request body may decode into, in bytes of memory as
 * common/json_cost.h estimates jansson's: 1 MiB plus 64 times the body's
 * size, and never more than APISERVER_MAX_DECODED. JSON takes at most ~25
 * times its size in well-formed objects (dense managedFields); 64 leaves
 * room, while a body of nothing but `{}` (80x) or a YAML alias bomb is
 * refused with 413 (or 400 "excessive aliasing") before the allocation
 * that would pass the bound. docs/design.md, "Bounded memory per
 * request", lists what holds the rest of a request's memory. */
#define APISERVER_MAX_DECODED JCOST_MAX_DECODED
static inline size_t apiserver_decode_budget(size_t body_len)
{
    return ckube__decode_budget(body_len);
}

typedef struct apiserver_config {
    const char *data_dir; /* SQLite directory; NULL: memory backend */
    /* An opened store (the etcd module's, say), taken by the server and
     * closed with it; NULL: data_dir says which built-in backend. */
    struct storage *storage;
    const char *listen_host;     /* "127.0.0.1" */
    int port;                    /* 6443; 0 picks a free port */
    const char *kubeconfig_path; /* written when ready; NULL: none */
    int nloops;                  /* HTTP threads; 0: number of CPUs (max 4) */
    size_t watch_ring;           /* events kept per resource; 0: default */
    unsigned compact_interval;   /* seconds between compactions; 0: 300 */
    bool no_compaction;          /* --etcd-compaction-interval 0: none */
    /* HTTPS (PEM files, reloaded when they change: httpd/tls.h): the
     * serving certificate and key, and the CAs client certificates are
     * verified against: the user's and the cluster's own (either NULL).
     * tls_cert_file NULL: plain HTTP. */
    const char *tls_cert_file, *tls_key_file, *client_ca_file, *cluster_ca_file;
    /* The aggregator's front proxy (kube-apiserver's
     * --requestheader-client-ca-file, --proxy-client-cert-file and
     * --proxy-client-key-file): the CA published for extension API
     * servers to check the proxy's client certificate against, and that
     * certificate and key, presented on proxied requests. NULL: no
     * proxying identity (plain HTTP). */
    const char *front_proxy_ca_file, *proxy_client_cert_file, *proxy_client_key_file;
    /* Authentication (authentication/authenticator.h): anonymous requests
     * allowed (--anonymous-auth), the static token file or NULL. */
    bool anonymous_auth;
    const char *token_auth_file;
    /* ServiceAccount tokens (authentication/serviceaccount/token.h): the
     * signing key and its public half (NULL: no tokens are issued or
     * accepted), the issuer (NULL: the default) and the API's audiences
     * (none: the issuer). */
    const char *sa_key_file, *sa_pub_file, *sa_issuer;
    const char *const *api_audiences;
    size_t napi_audiences;
    /* Auditing (audit/, endpoints/filters/audit.h): the policy and the
     * log, both borrowed (they outlive the server); either NULL: off. */
    const struct audit_policy *audit_policy;
    struct audit_log *audit_log;
} apiserver_config;

typedef struct apiserver apiserver;
typedef struct req_ctx req_ctx;
typedef struct loop loop;
typedef struct apimetrics apimetrics;
typedef struct apimetrics_cache apimetrics_cache;
typedef struct http_watch http_watch;
typedef struct list_stream list_stream;

/* Work posted to a loop from another thread. */
typedef struct loop_task {
    void (*fn)(void *arg);
    void *arg;
    struct loop_task *next;
} loop_task;

struct loop {
    apiserver *srv;
    int index;
    struct event_base *base;
    httpd *http;          /* connections accepted by this loop */
    struct outbound *out; /* calls out (admission webhooks) from this loop */
    pthread_t thread;
    struct event *wake;
    /* A flush round in slices (watch.c, watch_loop_flush): `more` is a
     * zero timer that goes on with the round after the loop has polled
     * its sockets; loop thread only. */
    struct event *more;
    struct timeval flush_pause;  /* `more`'s delay: zero, but see apiserver.c */
    bool flush_active;           /* a round is under way */
    uint64_t flush_gen;          /* the round's number */
    int64_t flush_rev;           /* the cache's revision when the round began */
    unsigned long flush_retired; /* crd_retired_generation then */
    pthread_mutex_t mu;
    loop_task *tasks, *tasks_tail;   /* guarded by mu */
    LIST_HEAD(, http_watch) watches; /* loop thread only */
    LIST_HEAD(, list_stream) lists;  /* streaming list replies; loop thread only */
    unsigned long crd_retired_seen;  /* crd_retired_generation at the last flush */
    apimetrics_cache *mcache;        /* metric children by labels; loop thread only */
    bool exiting;                    /* stopping: watches closed; loop thread only */
    /* Watches of this loop, counted from before a watch reads the cache
     * until it is freed: the cacher's wake after each applied batch
     * (server's wake_loops) skips a loop without any, which has nothing
     * to flush. Written by the loop thread, read by the storage's. */
    atomic_int nwatches;
};

struct apiserver {
    apiserver_config cfg;
    storage *st;
    cacher *cache;
    store *store;           /* the generic store every write goes through (owned) */
    registry *registry;     /* the served types (owned) */
    struct crd_state *crds; /* the CRD machinery (owned; apiextensions) */
    struct compactor *compactor;
    struct storage_prober *prober; /* a shared store's health (health.c); NULL if unshared */
    loop *loops;
    int nloops;
    int port; /* bound port */
    int listen_fds[16];
    httpd_tls *tls;                /* NULL: plain HTTP (owned) */
    struct authenticator *authn;   /* who requests are from (owned) */
    struct sa_tokens *sa;          /* ServiceAccount tokens, NULL: not served (owned) */
    json_t *api_audiences;         /* the audiences the API accepts (owned) */
    struct admission *admission;   /* admission webhooks' configurations (owned) */
    struct aggregator *aggregator; /* API aggregation: the proxy and APIService status (owned) */
    struct rbac_index *rbac;       /* RBAC's view of the cluster's roles and bindings, fed
                                    * by the watch cache (owned; authorization/rbac) */
    /* Graceful shutdown (apiserver_shutdown_begin, apiserver_drain_begin): */
    atomic_bool shutting_down; /* /readyz fails; everything is still served */
    atomic_bool draining;      /* listeners closed, replies close connections */
    atomic_long inflight;      /* requests alive that are not long-running */
    atomic_bool stopping;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stopped;
    /* OpenAPI documents, rebuilt when the registry changes. */
    pthread_mutex_t openapi_mu;
    unsigned long openapi_gen;
    json_t *openapi_v3_index;
    json_t *openapi_v3_docs; /* "api/v1" -> document */
    json_t *openapi_v2;
    apimetrics *metrics; /* /metrics (endpoints/metrics) */
    /* What the request context tells the layers above it (set by the
     * server; NULL: nothing): a request ended (once: just before a whole
     * reply goes out, or when a stream or watch ends), a watch started
     * streaming (req_long_running). The metrics count them. */
    void (*on_request_done)(req_ctx *rc);
    void (*on_watch_started)(req_ctx *rc);
};

/* Warnings to send, as upstream's recorder keeps them (context.c): each text
 * once, at most ~4096 characters in all. */
typedef struct req_warnings {
    char **texts; /* owned */
    size_t n, cap;
    size_t runes; /* characters of the texts counted against the bound */
    bool truncating;
} req_warnings;

/* Per-request context: lives from the request's arrival until its reply is
 * sent (possibly later, after a storage write). Freed by reply_*(). */
struct req_ctx {
    apiserver *srv;
    loop *lp;
    httpd_req *req;
    request_info ri;
    struct evkeyvalq query;
    auth_user *user;           /* who the request is from (a reference; authentication/user.h) */
    const char *cache_control; /* the reply's Cache-Control (static); NULL: no-cache, private */
    resource_type *type;       /* reference; NULL for non-resource paths */
    bool want_table;
    int include_object;              /* 0 none, 1 metadata (default), 2 object */
    int want_partial;                /* PARTIAL_NONE, _OBJECT or _LIST */
    const char *partial_api_version; /* "meta.k8s.io/v1" or ".../v1beta1" (static) */
    const char *want_discovery;      /* aggregated discovery: "v2", "v2beta1" or NULL */
    req_warnings warnings;
    /* For the request metrics: when it arrived (monotonic ns), the status
     * answered (0 until a reply starts), whether a patch was an apply (set
     * by do_patch, which reads the body type anyway), and the long-running
     * gauge a watch holds up while open. */
    uint64_t start_ns;
    const char *method; /* "GET", ... (static) */
    int code;
    bool is_apply;
    struct ckube_metric *longrunning_gauge;
    bool long_running; /* a watch (req_long_running): not counted in inflight */
    /* Auditing: the request's state when it is audited (owned; the
     * server's request-done hook ends it), and the JSON reply the reply
     * writer keeps for it: every Status (code >= 300), every reply at
     * RequestResponse (audit_keep_reply). */
    struct audit_req *audit;
    bool audit_keep_reply;
    json_t *audit_reply;
    bool reported; /* on_request_done has run (req_report) */
    /* A shared storage: the request has waited for the cache to reach the
     * revision it must see (handlers.c's wait_for_cache), and how that
     * ended (FRESH_*, the revision wanted and the cache's). */
    bool cache_waited;
    bool create_stale; /* a create found something missing: it waits, again */
    int cache_wait_rc;
    int64_t cache_want, cache_have;
};

/* What a PartialObjectMetadata request asked for (req_ctx.want_partial). */
enum { PARTIAL_NONE, PARTIAL_OBJECT, PARTIAL_LIST };

/* Runs fn(arg) on loop `lp`'s thread soon. Thread-safe. */
void loop_post(loop *lp, void (*fn)(void *), void *arg);

/* Query parameter value (borrowed) or NULL. */
const char *req_query(req_ctx *rc, const char *key);
/* A boolean query parameter as apimachinery reads it: absent, "0" and
 * "false" in any case are false; anything else, "" included, is true. */
bool req_query_bool(req_ctx *rc, const char *key);

/* Marks a request long-running (a watch) once its reply has started: the
 * long-running gauge goes up and it leaves apiserver_inflight's count. */
void req_long_running(req_ctx *rc);
/* Adds "Connection: close" to the reply's headers while draining. */
void req_close_if_draining(req_ctx *rc);
/* Content-Type, Cache-Control, a Warning if any, Connection: close when
 * draining: what every reply carries. */
void req_add_common_headers(req_ctx *rc, const char *content_type);
/* Records a warning for the reply's Warning header (see req_warnings). */
void req_add_warning(req_ctx *rc, const char *msg);

/* Replies and frees rc. */
void reply_json(req_ctx *rc, int code, json_t *body); /* steals body */
/* An encoded JSON body: takes `bytes` (malloc'd; NULL: empty). For
 * documents shared between threads, encoded by the caller under its own
 * rules. */
void reply_json_bytes(req_ctx *rc, int code, char *bytes, size_t len);
void reply_raw(req_ctx *rc, int code, const char *content_type, const char *data, size_t len);
void reply_status(req_ctx *rc, ckube_status *st);                 /* steals st */
void reply_evbuffer(req_ctx *rc, int code, struct evbuffer *buf); /* JSON body */
/* Frees a request (replies do): tells on_request_done, releases its
 * count in inflight unless long-running. */
void req_ctx_free(req_ctx *rc);

#endif
