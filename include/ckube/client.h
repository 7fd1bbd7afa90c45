/* ckube/client.h - REST client for any Kubernetes API server (libcurl).
 *
 * The C counterpart of client-go's rest + dynamic clients. A ckube_client
 * is built from a ckube_config (see config.h), is safe to share between
 * threads from the first call (libcurl's global init happens inside, once),
 * reuses connections, speaks HTTP/2 where the server offers it over TLS,
 * applies a client-side QPS/burst limit and retries 429/Retry-After.
 *
 * Objects are jansson values. Functions that return an object return a
 * new reference the caller must json_decref(). Functions that take an
 * object borrow it (they never steal or modify it).
 *
 * Errors: every function that can fail returns 0 on success and -1 on
 * failure, and on failure stores a newly allocated ckube_status in *err
 * (when err is not NULL; the caller frees it with ckube_status_free). When
 * the server answered, the status is the server's own Status body (code,
 * reason, message, details, causes), never a paraphrase. When no answer
 * arrived (connection refused, TLS failure, timeout) the status has code 0,
 * no reason, and a message naming the URL and the transport error
 * ("Get \"https://h:6443/api/v1/pods\": Failed to connect ..."). Code 0 is
 * also used for problems found before anything was sent (invalid
 * arguments, a failing exec credential plugin: "getting credentials: ...").
 * A non-2xx answer whose body is not a Status gets the status client-go
 * builds (e.g. 404 "the server could not find the requested resource
 * (get configmaps x)"), the body text kept as a cause of type
 * UnexpectedServerResponse.
 *
 * Requests wait for the client-side rate limiter, are retried after 429
 * (and 5xx) answers that carry Retry-After (up to max_retries times,
 * sleeping the given seconds), GETs after a dropped connection, and any
 * request once after a 401 when refreshed credentials (exec plugin, token
 * file, token source) differ from the ones used. Each request is logged at -v 6
 * ("GET https://... 200 OK in 3 milliseconds"), bodies at -v 8.
 */
#ifndef CKUBE_CLIENT_H
#define CKUBE_CLIENT_H

#include <ckube/config.h>
#include <ckube/status.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_client ckube_client;

/* Creates a client. `cfg` is copied (the caller keeps ownership of it).
 * Returns NULL with *err on an unusable configuration (no host, unreadable
 * CA or client certificate file). Free with ckube_client_free. */
ckube_client *ckube_client_new(const ckube_config *cfg, ckube_status **err);
/* Frees the client. Every watch opened on it must be closed first. */
void ckube_client_free(ckube_client *c);
/* The default namespace from the configuration ("default" when unset).
 * Borrowed; valid for the client's lifetime. */
const char *ckube_client_namespace(const ckube_client *c);

/* Receives the text of every Warning header (code 299) the server sends,
 * e.g. deprecation notices and fieldValidation=Warn findings. `text` is
 * borrowed for the call. May run on any thread that uses the client. */
typedef void (*ckube_warning_handler)(void *ud, const char *text);
/* Replaces the default handler (which logs each text at warning level,
 * "Warning: <text>", like kubectl). NULL restores the default. Call it
 * before the client is shared between threads. */
void ckube_client_set_warning_handler(ckube_client *c, ckube_warning_handler fn, void *ud);
/* The server URL requests go to (scheme://host:port[/prefix]). Borrowed. */
const char *ckube_client_host(const ckube_client *c);

/* A group/version/resource. Strings are borrowed by every call that takes
 * one. group "" (or NULL) is the core group. */
typedef struct ckube_gvr {
    const char *group;
    const char *version;
    const char *resource;
} ckube_gvr;

/* An optional integer with explicit presence: { .set = true, .value = 0 }
 * sends 0; { 0 } sends nothing. */
typedef struct ckube_opt_int {
    bool set;
    int64_t value;
} ckube_opt_int;

/* Query options of list and watch calls. Every string is borrowed and may
 * be NULL (absent). A zero-initialised struct means "no options". */
typedef struct ckube_list_opts {
    const char *label_selector;
    const char *field_selector;
    const char *resource_version;       /* "" is sent as absent */
    const char *resource_version_match; /* "NotOlderThan" | "Exact" */
    int64_t limit;                      /* 0 = no limit */
    const char *continue_token;
    ckube_opt_int timeout_seconds; /* watch: server-side timeout */
    bool allow_watch_bookmarks;
    bool send_initial_events;
    /* Ask for objects as meta.k8s.io/v1 PartialObjectMetadata (lists as
     * PartialObjectMetadataList), metadata only, as client-go's metadata
     * client does. A server that does not serve that form answers with
     * whole objects: callers must accept either. */
    bool partial_metadata;
} ckube_list_opts;

/* Options of create/update/patch calls. Zero-initialised = none. */
typedef struct ckube_write_opts {
    const char *field_manager;    /* fieldManager */
    const char *field_validation; /* "Strict" | "Warn" | "Ignore" */
    bool dry_run;                 /* dryRun=All */
    bool force;                   /* apply only: force=true */
    const char *subresource;      /* e.g. "status", "scale"; NULL = main */
} ckube_write_opts;

/* Options of delete calls, sent as a DeleteOptions body. */
typedef struct ckube_delete_opts {
    const char *propagation_policy; /* "Background" | "Foreground" | "Orphan" */
    ckube_opt_int grace_period_seconds;
    const char *precondition_uid;
    const char *precondition_resource_version;
    bool dry_run;
} ckube_delete_opts;

typedef enum ckube_patch_type {
    CKUBE_PATCH_JSON = 1,  /* application/json-patch+json */
    CKUBE_PATCH_MERGE,     /* application/merge-patch+json */
    CKUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
    CKUBE_PATCH_APPLY,     /* application/apply-patch+yaml (server-side apply) */
} ckube_patch_type;

/* ---- typed-less ("dynamic") operations on any resource ----
 * `ns` is the namespace for namespaced resources and NULL for
 * cluster-scoped ones; for list, watch and deletecollection NULL on a
 * namespaced resource means all namespaces. */

int ckube_get(ckube_client *c, const ckube_gvr *r, const char *ns, const char *name, json_t **out,
              ckube_status **err);
/* One page: *out is the List object (items, metadata.continue,
 * metadata.resourceVersion). */
int ckube_list(ckube_client *c, const ckube_gvr *r, const char *ns, const ckube_list_opts *opts,
               json_t **out, ckube_status **err);
/* Every page (opts->limit per page, 500 when 0), following continue
 * tokens; *out is one List with all items and the first page's
 * resourceVersion. */
int ckube_list_all(ckube_client *c, const ckube_gvr *r, const char *ns, const ckube_list_opts *opts,
                   json_t **out, ckube_status **err);
/* `out` may be NULL when the caller does not want the stored object. */
int ckube_create(ckube_client *c, const ckube_gvr *r, const char *ns, const json_t *obj,
                 const ckube_write_opts *wo, json_t **out, ckube_status **err);
/* PUT of obj (name taken from obj's metadata); wo->subresource "status"
 * for an update of the status subresource. */
int ckube_update(ckube_client *c, const ckube_gvr *r, const char *ns, const json_t *obj,
                 const ckube_write_opts *wo, json_t **out, ckube_status **err);
int ckube_update_status(ckube_client *c, const ckube_gvr *r, const char *ns, const json_t *obj,
                        const ckube_write_opts *wo, json_t **out, ckube_status **err);
/* `patch` is `len` bytes in the format `type` names. */
int ckube_patch(ckube_client *c, const ckube_gvr *r, const char *ns, const char *name,
                ckube_patch_type type, const char *patch, size_t len, const ckube_write_opts *wo,
                json_t **out, ckube_status **err);
/* `out` (may be NULL) receives what the server answered: the object when
 * it is kept by finalizers or graceful deletion, else a Status. */
int ckube_delete(ckube_client *c, const ckube_gvr *r, const char *ns, const char *name,
                 const ckube_delete_opts *o, json_t **out, ckube_status **err);
int ckube_delete_collection(ckube_client *c, const ckube_gvr *r, const char *ns,
                            const ckube_list_opts *sel, const ckube_delete_opts *o,
                            ckube_status **err);

/* ---- watch ---- */

typedef enum ckube_watch_event_type {
    CKUBE_WATCH_ADDED = 1,
    CKUBE_WATCH_MODIFIED,
    CKUBE_WATCH_DELETED,
    CKUBE_WATCH_BOOKMARK,
    CKUBE_WATCH_ERROR, /* object is a Status (e.g. 410 Expired) */
} ckube_watch_event_type;

typedef struct ckube_watch ckube_watch;

/* Opens a watch (GET ...?watch=true&...). Returns once the server has
 * answered the request: a non-2xx answer fails here with the server's
 * Status. Waits at most timeout_ms (60 s when the config sets none) for
 * the answer's headers; the stream itself has no client-side timeout
 * (use opts->timeout_seconds). Free with ckube_watch_close. */
int ckube_watch_open(ckube_client *c, const ckube_gvr *r, const char *ns,
                     const ckube_list_opts *opts, ckube_watch **out, ckube_status **err);
/* Blocks for the next event. Returns 1 with *type and *obj (new reference)
 * set; 0 when the stream ended cleanly (server timeout or close, or
 * ckube_watch_stop was called); -1 on a transport or decoding error with
 * *err. After 0 or -1 every further call returns 0. */
int ckube_watch_next(ckube_watch *w, ckube_watch_event_type *type, json_t **obj,
                     ckube_status **err);
/* Makes a blocked (or the next) ckube_watch_next return 0 promptly. Safe
 * to call from any thread, any number of times, until close. (No helper
 * thread exists: next drives the transfer itself and stop wakes it.) */
void ckube_watch_stop(ckube_watch *w);
/* Stops (if needed) and frees the watch. Not concurrently with next. */
void ckube_watch_close(ckube_watch *w);

/* Event type name ("ADDED", ...) and back (0 when unknown). */
const char *ckube_watch_event_type_name(ckube_watch_event_type t);
ckube_watch_event_type ckube_watch_event_type_parse(const char *s);

/* ---- raw requests (for anything the helpers above do not cover) ---- */

typedef struct ckube_request {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* absolute path with query, e.g. "/api/v1/pods?limit=5" */
    const char *body;   /* may be NULL */
    size_t body_len;
    const char *content_type; /* default application/json when body set */
    const char *accept;       /* default application/json */
} ckube_request;

typedef struct ckube_response {
    int code;   /* HTTP status */
    char *body; /* malloc'd, NUL-terminated; caller frees */
    size_t body_len;
    char **warnings; /* malloc'd array of malloc'd Warning header texts */
    size_t nwarnings;
} ckube_response;

/* Sends one request (with the client's auth, rate limit and 429 retries).
 * Returns 0 when a 2xx answer arrived (resp filled; free with
 * ckube_response_free), else -1 with *err (the server's Status when it
 * answered non-2xx; resp is still filled in that case). */
int ckube_client_do(ckube_client *c, const ckube_request *req, ckube_response *resp,
                    ckube_status **err);
void ckube_response_free(ckube_response *resp);

/* Builds the path of a resource:
 * /api/v1/namespaces/NS/configmaps/NAME or /apis/G/V/.../NAME[/SUB].
 * ns and name and sub may be NULL. Returns malloc'd string. */
char *ckube_resource_path(const ckube_gvr *r, const char *ns, const char *name, const char *sub);

/* True when err is a server answer with that code / reason. NULL-safe. */
bool ckube_status_is(const ckube_status *err, int code);
#define ckube_is_not_found(e) ckube_status_is((e), 404)
#define ckube_is_conflict(e) ckube_status_is((e), 409)
#define ckube_is_gone(e) ckube_status_is((e), 410)

#ifdef __cplusplus
}
#endif
#endif
