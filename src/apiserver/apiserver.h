/* apiserver.h - the API server: life cycle and the pieces its modules
 * share (event loops, per-request context, reply helpers).
 *
 * Threads: N HTTP loop threads (libevent; each has its own event_base and
 * httpd accepting from its duplicate of the listening socket), the
 * storage's committer thread, and the
 * caller's thread that waits for shutdown. Request handlers run on their
 * loop thread and never block: reads come from the cacher, writes go to
 * storage asynchronously and their completion is posted back to the loop.
 */
#ifndef CKUBE_APISERVER_H
#define CKUBE_APISERVER_H

#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "apiserver/httpd/httpd.h"
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "apiserver/cacher/cacher.h"
#include "apiserver/registry/rest/registry.h"
#include "apiserver/endpoints/request/request_info.h"
#include "ckube/status.h"
#include "common/json_cost.h"
#include "storage/storage.h"

#define APISERVER_MAX_BODY (3u * 1024 * 1024) /* 413 above this */
#define APISERVER_MAX_OBJECT (1536u * 1024)   /* etcd's object limit */

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
    const char *data_dir;        /* SQLite directory; NULL: memory backend */
    const char *listen_host;     /* "127.0.0.1" */
    int port;                    /* 6443; 0 picks a free port */
    const char *kubeconfig_path; /* written when ready; NULL: none */
    int nloops;                  /* HTTP threads; 0: number of CPUs (max 4) */
    size_t watch_ring;           /* events kept per resource; 0: default */
    unsigned compact_interval;   /* seconds between compactions; 0: 300 */
} apiserver_config;

typedef struct apiserver apiserver;
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
    httpd *http; /* connections accepted by this loop */
    pthread_t thread;
    struct event *wake;
    pthread_mutex_t mu;
    loop_task *tasks, *tasks_tail;   /* guarded by mu */
    LIST_HEAD(, http_watch) watches; /* loop thread only */
    LIST_HEAD(, list_stream) lists;  /* streaming list replies; loop thread only */
    unsigned long crd_retired_seen;  /* crd_retired_generation at the last flush */
    apimetrics_cache *mcache;        /* metric children by labels; loop thread only */
    bool exiting;                    /* stopping: watches closed; loop thread only */
};

struct apiserver {
    apiserver_config cfg;
    storage *st;
    cacher *cache;
    struct compactor *compactor;
    loop *loops;
    int nloops;
    int port; /* bound port */
    int listen_fds[16];
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
    apimetrics *metrics; /* /metrics (apiserver_metrics.c) */
};

/* Warnings to send, as upstream's recorder keeps them (http.c): each text
 * once, at most ~4096 characters in all. */
typedef struct req_warnings {
    char **texts; /* owned */
    size_t n, cap;
    size_t runes; /* characters of the texts counted against the bound */
    bool truncating;
} req_warnings;

/* Per-request context: lives from the request's arrival until its reply is
 * sent (possibly later, after a storage write). Freed by reply_*(). */
typedef struct req_ctx {
    apiserver *srv;
    loop *lp;
    httpd_req *req;
    request_info ri;
    struct evkeyvalq query;
    resource_type *type; /* reference; NULL for non-resource paths */
    bool want_table;
    int include_object;              /* 0 none, 1 metadata (default), 2 object */
    int want_partial;                /* PARTIAL_NONE, _OBJECT or _LIST (partial.c) */
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
} req_ctx;

/* Life cycle. apiserver_start binds and starts the loops; apiserver_stop
 * may be called from any thread (it only signals); apiserver_wait blocks
 * until stopped; apiserver_free joins and frees. */
apiserver *apiserver_new(const apiserver_config *cfg, char *err, size_t errlen);
int apiserver_start(apiserver *s, char *err, size_t errlen);
void apiserver_stop(apiserver *s);
void apiserver_wait(apiserver *s);

/* Graceful shutdown, in kube-apiserver's order. apiserver_shutdown_begin
 * makes /readyz fail at once (its "shutdown" check) while every request
 * is still served, so load balancers move away during the delay that
 * follows (--shutdown-delay-duration). apiserver_drain_begin then closes
 * the listeners (new connections are refused) and answers what comes in
 * on open connections with "Connection: close"; the caller waits, as long
 * as it allows, for apiserver_inflight (the requests in flight that are
 * not long-running: a write waiting for its commit, a list being
 * streamed) to reach 0. apiserver_stop then ends the watches. Callable
 * from any thread but the loops', in this order, before apiserver_stop. */
void apiserver_shutdown_begin(apiserver *s);
void apiserver_drain_begin(apiserver *s);
long apiserver_inflight(apiserver *s);

/* Marks a request long-running (a watch) once its reply has started: the
 * long-running gauge goes up and it leaves apiserver_inflight's count. */
void req_long_running(req_ctx *rc);
/* Adds "Connection: close" to the reply's headers while draining. */
void req_close_if_draining(req_ctx *rc);
/* Content-Type, Cache-Control, a Warning if any, Connection: close when
 * draining: what every reply carries. */
void req_add_common_headers(req_ctx *rc, const char *content_type);
void apiserver_free(apiserver *s);

/* Runs fn(arg) on loop `lp`'s thread soon. Thread-safe. */
void loop_post(loop *lp, void (*fn)(void *), void *arg);

/* Query parameter value (borrowed) or NULL. */
const char *req_query(req_ctx *rc, const char *key);
/* A boolean query parameter as apimachinery reads it: absent, "0" and
 * "false" in any case are false; anything else, "" included, is true. */
bool req_query_bool(req_ctx *rc, const char *key);

/* Replies and frees rc. */
void reply_json(req_ctx *rc, int code, json_t *body); /* steals body */
void reply_raw(req_ctx *rc, int code, const char *content_type, const char *data, size_t len);
void reply_status(req_ctx *rc, ckube_status *st);                 /* steals st */
void reply_evbuffer(req_ctx *rc, int code, struct evbuffer *buf); /* JSON body */
void req_ctx_free(req_ctx *rc);
void req_add_warning(req_ctx *rc, const char *msg);

/* Module entry points (handlers.c, discovery.c, watch.c, table.c). */
void handle_resource(req_ctx *rc);
bool handle_discovery(req_ctx *rc); /* false: not a discovery path */
/* /api or /apis: where aggregated discovery (APIGroupDiscoveryList) is served. */
bool discovery_aggregated_path(const request_info *ri);
bool handle_openapi(req_ctx *rc, const char *path);
/* /healthz, /livez, /readyz and their checks (health.c); false: not one. */
bool handle_health(req_ctx *rc, const char *path);
void handle_watch(req_ctx *rc);
void watch_loop_flush(loop *lp); /* deliver new events to the loop's watchers */
void watch_loop_close_all(loop *lp);

/* Metrics (apiserver_metrics.c), served at /metrics. apimetrics_request_done
 * counts a finished request (req_ctx_free calls it; nothing when no reply
 * started); apimetrics_watch_started holds the long-running gauge up
 * until then. The per-loop cache is the loop's own (no lock). */
apimetrics *apimetrics_new(apiserver *srv);
void apimetrics_free(apimetrics *m);
apimetrics_cache *apimetrics_cache_new(void);
void apimetrics_cache_free(apimetrics_cache *c);
void apimetrics_request_done(req_ctx *rc);
void apimetrics_watch_started(req_ctx *rc);
void handle_metrics(req_ctx *rc);

/* Large lists (list_stream.c). list_stream_wanted: whether a list of these
 * objects (borrowed) is big enough to stream. list_stream_start replies
 * with the list, streamed: head is the JSON up to and including
 * "\"items\":[" (or a Table's "\"rows\":[" when rc->want_table: then
 * each object is rendered as a row as the stream reaches it) (owned,
 * freed), objs and its references are taken; rc is freed when the stream
 * ends. list_stream_close_all drops the loop's streams at shutdown. */
bool list_stream_wanted(req_ctx *rc, cobj *const *objs, size_t n);
void list_stream_start(req_ctx *rc, char *head, size_t head_len, cobj **objs, size_t n);
void list_stream_close_all(loop *lp);

/* Parses labelSelector and fieldSelector, checking field selector keys
 * against the type's selectable fields. On error returns a 400 Status. */
ckube_status *request_selectors(req_ctx *rc, ckube_selector **ls, ckube_selector **fs);

/* Storage key of an object; buf gets "/registry/G/R/[NS/]NAME". */
void object_key(const resource_type *t, const char *ns, const char *name, char *buf, size_t n);

/* PartialObjectMetadata (partial.c). partial_append writes the object's
 * PartialObjectMetadata form, from its stored bytes, to out;
 * partial_refused is the 406 for a list asked for as one object, or an
 * object asked for as a list (NULL when the request is consistent;
 * handle_resource asks it once per request). */
enum { PARTIAL_NONE, PARTIAL_OBJECT, PARTIAL_LIST };
void partial_append(struct evbuffer *out, const req_ctx *rc, const cobj *o);
ckube_status *partial_refused(const req_ctx *rc, bool is_list);
/* A write's answer in PartialObjectMetadata form: takes body, returns
 * the new body (body itself when it is a Status or has no metadata). */
json_t *partial_of(const req_ctx *rc, json_t *body);
/* The kind and apiVersion the request is answered in, for a list or one
 * object: PartialObjectMetadata[List] when asked, else the type's own.
 * Static strings or the type's; not owned. */
void served_kind(const req_ctx *rc, bool list, const char **kind, const char **api_version);

/* Tables (table.c). table_head: a Table list's JSON up to and including
 * "\"rows\":[" (malloc'd, *len set; NULL when out of memory), with its
 * resourceVersion, and continue/remainingItemCount when `cont` is not
 * NULL. table_row_append: an object's row, encoded, appended to out. */
json_t *table_for_objects(req_ctx *rc, cobj **objs, size_t n); /* new reference */
json_t *table_row(req_ctx *rc, const json_t *obj);             /* new reference */
char *table_head(req_ctx *rc, int64_t rev, const char *cont, size_t more, size_t *len);
void table_row_append(struct evbuffer *out, req_ctx *rc, const cobj *o);
json_t *table_column_definitions(const resource_type *t);
void human_duration(int64_t seconds, char *buf, size_t n);

/* Bootstrap objects (default namespaces) created at first start. */
int apiserver_bootstrap(apiserver *s);

#endif
