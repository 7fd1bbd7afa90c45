/* client_internal.h - what the REST client's files share (not public API).
 *
 * Layout of src/client:
 *   util.c       base64, URL encoding, files, sleeping, small string arrays
 *   ratelimit.c  the client-side token bucket (QPS/burst)
 *   auth.c       bearer token, token file, basic auth, exec plugins
 *   http.c       libcurl: global init, the shared DNS/TLS-session cache,
 *                the pool of easy handles, one request, logging, errors
 *   client.c     ckube_client_new/free, ckube_client_do (retries)
 *   dynamic.c    paths, query strings, get/list/create/... helpers
 *   watch.c      streaming watches on the curl multi interface
 *   config.c, kubeconfig.c, incluster.c   ckube_config loading
 *   discovery.c  discovery and the RESTMapper
 */
#ifndef CKUBE_CLIENT_INTERNAL_H
#define CKUBE_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckube/client.h"
#include "ckube/config.h"
#include "common/text.h"

/* ---- util.c ---- */

/* Decodes standard base64 (padding optional, '\r' '\n' ' ' '\t' skipped).
 * Returns a malloc'd NUL-terminated buffer (caller frees) with *out_len
 * bytes, or NULL on invalid input (with *bad_at = offending input offset). */
char *ckube__b64_decode(const char *s, size_t n, size_t *out_len, size_t *bad_at);
/* Deep copy of an exec plugin config (NULL for NULL); sets *oom when any
 * part could not be copied. Free with ckube__exec_config_free. */
ckube_exec_config *ckube__exec_config_dup(const ckube_exec_config *e, bool *oom);
void ckube__exec_config_free(ckube_exec_config *e);
/* Standard padded base64; malloc'd, caller frees. */
char *ckube__b64_encode(const void *data, size_t n);
/* Appends `s` percent-encoded for a URL query value or path segment:
 * only A-Z a-z 0-9 - . _ ~ stay literal. */
void ckube__sb_add_escaped(ckube__strbuf *b, const char *s);
/* Reads a whole file (at most 64 MiB). Returns malloc'd NUL-terminated
 * bytes with *len, or NULL with errno set. */
char *ckube__read_file(const char *path, size_t *len);
/* strdup that tolerates NULL. */
char *ckube__strdup0(const char *s);
/* Copy of [s, s+n) with leading/trailing ASCII whitespace removed. */
char *ckube__strndup_trim(const char *s, size_t n);
/* Sleeps (restarting after signals). */
void ckube__sleep_ns(uint64_t ns);
/* A status with code 0 and no reason: errors with no server answer. */
ckube_status *ckube__local_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Frees an array of n malloc'd strings and the array. */
void ckube__strv_free(char **v, size_t n);
/* Deep copy of n strings; NULL only on allocation failure (or n == 0). */
char **ckube__strv_dup(char *const *v, size_t n);

/* ---- ratelimit.c ---- */

typedef struct ckube__ratelimit {
    pthread_mutex_t mu;
    bool disabled;
    double qps;
    double burst;
    double tokens;    /* may go negative: reservations of waiting callers */
    uint64_t last_ns; /* monotonic time of the last refill */
} ckube__ratelimit;

/* qps <= 0 or burst < 1 would never admit anything: pass disabled=true
 * instead to admit everything. */
void ckube__ratelimit_init(ckube__ratelimit *rl, double qps, int burst, bool disabled);
void ckube__ratelimit_destroy(ckube__ratelimit *rl);
/* Takes one token, returning how long the caller must wait before using
 * it (0 = now). Reservations are first come, first served. */
uint64_t ckube__ratelimit_reserve(ckube__ratelimit *rl);

/* ---- auth.c ---- */

/* Credentials for one request: a snapshot, owned by whoever filled it. */
typedef struct ckube__creds {
    char *token;      /* bearer token; NULL = none */
    char *cert, *key; /* client certificate/key PEM from an exec plugin */
    size_t cert_len, key_len;
    uint64_t generation; /* which exec result / token file read this was */
} ckube__creds;

typedef struct ckube__auth ckube__auth;

/* Builds the authenticator for cfg (borrowed for the call; what is needed
 * is copied). Fails when a token file is unreadable and no static token is
 * set (as client-go does). */
ckube__auth *ckube__auth_new(const ckube_config *cfg, ckube_status **err);
void ckube__auth_free(ckube__auth *a);
/* Fills *out with the credentials to use now: the token source's token
 * when the config has one; else the cached exec result (re-running the
 * plugin when it expired), else the token file's content (re-read when
 * older than the refresh period), else the static token. Thread-safe. -1
 * with *err when an exec plugin or the token source fails. */
int ckube__auth_get(ckube__auth *a, ckube__creds *out, ckube_status **err);
/* After a 401 answered a request made with `used`: refreshes the source
 * (re-runs the exec plugin / re-reads the token file / tells the token
 * source which token was refused) unless another thread already did.
 * Returns true when the credentials now differ from `used`, i.e. one
 * retry is worthwhile. */
bool ckube__auth_unauthorized(ckube__auth *a, const ckube__creds *used);
void ckube__creds_clear(ckube__creds *c);
/* Test hook: how often a token file is re-read (default 60 s). */
extern _Atomic uint64_t ckube__token_file_period_ns;

/* ---- http.c ---- */

/* One libcurl global init for the process (pthread_once). 0 on success. */
int ckube__curl_global_init(void);

typedef struct ckube__http ckube__http;

/* The shared DNS + TLS-session cache and the pool of idle easy handles
 * (each keeps its own live connections, so reusing a handle reuses its
 * connections; libcurl does not support sharing one connection cache
 * between concurrently running threads). */
ckube__http *ckube__http_new(void);
void ckube__http_free(ckube__http *h);
/* A handle from the pool (or a new one) / back to the pool. */
CURL *ckube__http_get_handle(ckube__http *h);
void ckube__http_put_handle(ckube__http *h, CURL *e);
CURLSH *ckube__http_share(ckube__http *h);

/* What the header callback collects. Reset at every status line, so
 * only the final response's headers (after 1xx) remain. */
typedef struct ckube__resp_headers {
    long code;         /* from the status line; 0 until one arrived */
    bool done;         /* the blank line after a final (>= 200) status */
    int retry_after;   /* Retry-After seconds; -1 when absent/unparsable */
    bool text_content; /* Content-Type text/... */
    char **warnings;   /* 299 warning texts */
    size_t nwarnings;
} ckube__resp_headers;

void ckube__resp_headers_clear(ckube__resp_headers *h);
/* CURLOPT_HEADERFUNCTION for a ckube__resp_headers userdata. */
size_t ckube__header_cb(char *buf, size_t size, size_t n, void *ud);
/* Parses one Warning header value into texts of code 299 (appended to
 * *out / *n). Exposed for tests. */
void ckube__parse_warning_header(const char *v, size_t len, char ***out, size_t *n);

/* Accept headers of ckube_list_opts.partial_metadata: what client-go's
 * metadata client sends, minus protobuf (the JSON form, then whole
 * objects from a server that does not convert). */
#define CKUBE__ACCEPT_PARTIAL                                                                      \
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
#define CKUBE__ACCEPT_PARTIAL_LIST                                                                 \
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

/* The request as the client layer hands it to http.c. */
typedef struct ckube__req {
    const char *method;
    const char *path; /* absolute path + query */
    const char *body;
    size_t body_len;
    const char *content_type;
    const char *accept;
    bool watch; /* no total timeout */
    /* What the request is about, for messages of non-Status errors
     * ("... (get configmaps foo)"); may be NULL. */
    const char *group, *resource, *name;
} ckube__req;

/* Sets every option of `e` for rq (URL, TLS, auth, headers, timeouts,
 * header callback into `hdrs`). *slist receives the header list the
 * caller must curl_slist_free_all after the transfer. */
int ckube__easy_setup(ckube_client *c, CURL *e, const ckube__req *rq, const ckube__creds *cr,
                      ckube__resp_headers *hdrs, struct curl_slist **slist, ckube_status **err);
/* The start of one attempt of rq, shared by the buffered and the
 * streaming request loops: waits for the client-side rate limiter, gets
 * credentials into *cr and a pooled handle set up for rq (headers into
 * *hdrs, zeroed here; *slist as ckube__easy_setup's). Returns the handle,
 * or NULL with *err set and nothing left to release. */
CURL *ckube__attempt_begin(ckube_client *c, const ckube__req *rq, ckube__creds *cr,
                           ckube__resp_headers *hdrs, struct curl_slist **slist,
                           ckube_status **err);
/* Runs the transfer of an attempt begun with ckube__attempt_begin, then
 * detaches the caller's stack buffers, returns the handle to the pool and
 * frees slist. Sets *code (0: no response) and *dt_ns. */
CURLcode ckube__attempt_perform(ckube_client *c, CURL *e, struct curl_slist *slist, long *code,
                                uint64_t *dt_ns);
/* "Get \"URL\": <curl error>" as a code-0 status. */
ckube_status *ckube__transport_error(ckube_client *c, const ckube__req *rq, CURLcode cc,
                                     const char *errbuf);
/* The error of a non-2xx answer: the Status body when it is one, else a
 * status built like client-go's NewGenericServerResponse. */
ckube_status *ckube__status_from_response(const ckube__req *rq, long code, const char *body,
                                          size_t len, const ckube__resp_headers *h);
/* Logs "GET URL 200 OK in 3 milliseconds" at -v 6 and bodies at -v 8. */
void ckube__log_request(ckube_client *c, const ckube__req *rq, long code, uint64_t ns,
                        const char *body, size_t len, const char *transport_err);
/* Logs each warning and hands it to the client's warning handler. */
void ckube__emit_warnings(ckube_client *c, const ckube__resp_headers *h);
/* Whether a 429/5xx answer may be retried, and after how many seconds. */
bool ckube__should_retry(long code, const ckube__resp_headers *h, int *seconds);
/* Transport errors after which a GET may be retried (connection reset,
 * nothing received), as client-go retries them. */
bool ckube__retryable_transport(const ckube__req *rq, CURLcode cc);

/* ---- dynamic.c ---- */

/* Path and query of a watch request (malloc'd), NULL on a bad gvr. */
char *ckube__watch_path(const ckube_gvr *r, const char *ns, const ckube_list_opts *opts);

/* ---- client.c ---- */

struct ckube_client {
    ckube_config *cfg;                  /* owned copy */
    char *base_url;                     /* scheme://host:port[/prefix], no trailing '/'; logged */
    char *curl_base;                    /* what curl connects to (differs with tls_server_name) */
    struct curl_slist *connect_to_list; /* CURLOPT_CONNECT_TO (tls_server_name) or NULL */
    char *host_header;                  /* "Host: ..." when curl_base differs, else NULL */
    char *user_agent;
    const char *ns; /* points into cfg or a literal */
    bool tls;       /* https */
    int max_retries;
    ckube__http *http;
    ckube__ratelimit rl;
    ckube__auth *auth;
    ckube_warning_handler warn_fn;
    void *warn_ud;
};

/* Waits for the rate limiter (logging long waits like client-go). */
void ckube__throttle(ckube_client *c, const ckube__req *rq);
/* ckube_client_do with the resource context for error messages. */
int ckube__do(ckube_client *c, const ckube__req *rq, ckube_response *resp, ckube_status **err);

/* What a request loop does after one attempt (ckube__do, ckube__do_stream). */
typedef enum {
    CKUBE__ATTEMPT_DONE,   /* a final HTTP answer: the caller handles `code` */
    CKUBE__ATTEMPT_AGAIN,  /* try again (already waited as required) */
    CKUBE__ATTEMPT_FAILED, /* a transport error not retried: *err is set */
} ckube__attempt;

/* The retry rules shared by the request loops, applied to an attempt that
 * ended with curl code `cc` and HTTP status `code` after `ns`: logs it
 * (log_body/log_len: the body to show at -v 8, may be NULL), emits its
 * warnings, and decides: a retryable transport error (1 s), a 401 once
 * with refreshed credentials, a 429/5xx with Retry-After, each within
 * c->max_retries (counted in *retries; *auth_retried for the 401). Clears
 * *cr in every case; the caller still owns its body and `h` (and frees
 * them before trying again). */
ckube__attempt ckube__after_attempt(ckube_client *c, const ckube__req *rq, CURLcode cc, long code,
                                    uint64_t ns, const char *errbuf, const char *log_body,
                                    size_t log_len, const ckube__resp_headers *h, ckube__creds *cr,
                                    int *retries, bool *auth_retried, ckube_status **err);

/* ======================================================================
 * What the informer's list-watch takes from the client (implemented in
 * src/client/dynamic.c and watch.c; used by src/informer/)
 * ====================================================================== */

/* Where a streamed response body goes: begin at the start of every
 * attempt (forget what an earlier one fed), feed with each chunk of a
 * 2xx answer's body (false stops the transfer). */
typedef struct ckube__body_sink {
    void (*begin)(void *ud);
    bool (*feed)(void *ud, const char *p, size_t n);
    void *ud;
} ckube__body_sink;
/* ckube__do (same throttling, credentials, retries, logging and errors)
 * for a request whose successful answer is handed to `sink` chunk by
 * chunk instead of being collected. 0 once the whole body was fed; -1
 * with *err; -2 when the sink stopped it (the sink knows why). */
struct ckube__req;
int ckube__do_stream(ckube_client *c, const struct ckube__req *rq, const ckube__body_sink *sink,
                     ckube_status **err);
/* The informer's list: ckube_list's request, with the body streamed into
 * `sink`; *what = "GET <url>" (malloc'd, for messages) on 0 and -2. */
int ckube__list_stream(ckube_client *c, const ckube_gvr *r, const char *ns,
                       const ckube_list_opts *opts, const ckube__body_sink *sink, char **what,
                       ckube_status **err);
/* ckube_watch_next, but returns the text of the next event (borrowed
 * until the next call on w) instead of decoding it. */
int ckube__watch_next_raw(ckube_watch *w, const char **text, size_t *len, ckube_status **err);
/* "<base url><path>" of the watch (borrowed). */
const char *ckube__watch_url(ckube_watch *w);

#endif
