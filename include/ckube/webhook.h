/* ckube/webhook.h - the webhook server of a manager (seed 001; issue #25),
 * as controller-runtime's pkg/webhook: an HTTPS server that answers the
 * API server's AdmissionReview and ConversionReview requests with the
 * handlers registered on its paths.
 *
 *   ckube_webhook_server *ws = ckube_webhook_server_new(&opts, &err);
 *   ckube_webhook_server_admission(ws, "/validate-network", validate, ctx);
 *   ckube_webhook_server_defaulter(ws, "/default-network", scheme, def, ctx);
 *   ckube_webhook_server_conversion(ws, "/convert", convert, ctx);
 *   ckube_manager_add(mgr, ckube_webhook_server_runnable(ws));
 *   ckube_manager_add_readyz_check(mgr, "webhook", ckube_webhook_server_started_check, ws);
 *
 * Serving: TLS 1.2+ with tls.crt and tls.key from a certificate directory
 * (controller-runtime's CertDir, CertName, KeyName and defaults), read
 * again when they change on disk (checked at most every second, on new
 * connections), as its certwatcher does for cert-manager's rotations; a
 * certificate that cannot be read keeps the last good one (logged).
 * Every request is a POST of JSON; anything else is answered as
 * controller-runtime answers it (400 for a body that is not a review,
 * with the review's uid when it had one).
 *
 * Metrics (controller-runtime's names, in the registry given or the
 * default one): controller_runtime_webhook_requests_total{webhook,code},
 * controller_runtime_webhook_latency_seconds{webhook},
 * controller_runtime_webhook_requests_in_flight{webhook}.
 *
 * Threading: the server runs on a thread of its own (one event loop,
 * which accepts, does the TLS handshakes and reads and sends). By default
 * (workers 0) handlers are called there, one at a time: a handler that
 * waits holds up every other request. With workers N, handlers run on N
 * threads of the server, up to N at once (controller-runtime serves each
 * request on a goroutine of its own, so any number at once): then they
 * must be safe to call concurrently, the same handler included. Either
 * way the API server waits at most the webhook's timeoutSeconds. Register
 * handlers before starting.
 */
#ifndef CKUBE_WEBHOOK_H
#define CKUBE_WEBHOOK_H

#include <ckube/manager.h>
#include <ckube/metrics.h>
#include <ckube/scheme.h>
#include <jansson.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_webhook_server ckube_webhook_server;

#define CKUBE_WEBHOOK_DEFAULT_PORT 9443
#define CKUBE_WEBHOOK_ANY_PORT (-1) /* tests: a free port, see ckube_webhook_server_port */
#define CKUBE_WEBHOOK_MAX_WORKERS 1024

typedef struct ckube_webhook_server_options {
    const char *host; /* address to bind; NULL or "": every address */
    int port;         /* 0: 9443; CKUBE_WEBHOOK_ANY_PORT: a free one */
    /* Where tls.crt and tls.key are; NULL: TMPDIR (or /tmp)
     * /k8s-webhook-server/serving-certs. Copied. */
    const char *cert_dir;
    const char *cert_name;           /* NULL: "tls.crt" */
    const char *key_name;            /* NULL: "tls.key" */
    ckube_metrics_registry *metrics; /* NULL: ckube_metrics_default() */
    /* Threads calling the handlers, at most CKUBE_WEBHOOK_MAX_WORKERS;
     * 0: none, the server's loop calls them, one at a time (Threading,
     * above). A request waits for a free worker in the order it came. */
    unsigned workers;
} ckube_webhook_server_options;

/* A server (not yet listening). NULL with *err (malloc'd; err may be
 * NULL) when an option is wrong. */
ckube_webhook_server *ckube_webhook_server_new(const ckube_webhook_server_options *opts,
                                               char **err);
/* Stops it if running and frees it. */
void ckube_webhook_server_free(ckube_webhook_server *s);

/* Binds, reads the certificate and starts serving on the server's
 * thread. 0, or -1 with *err (malloc'd) naming the file or address. */
int ckube_webhook_server_start(ckube_webhook_server *s, char **err);
/* Stops accepting and waits for the thread and for the handlers running
 * to return; requests not answered by then end without an answer (their
 * connections close), those waiting for a worker without their handler
 * being called. */
void ckube_webhook_server_stop(ckube_webhook_server *s);
/* The bound port (after start), or -1. */
int ckube_webhook_server_port(const ckube_webhook_server *s);
/* controller-runtime's StartedChecker, as a manager health check: fails
 * until the server serves. ctx is the server. */
int ckube_webhook_server_started_check(void *ctx, char **reason);
/* The server as a manager runnable (not needing leader election: every
 * replica answers webhooks). The struct is the server's. */
const ckube_runnable *ckube_webhook_server_runnable(ckube_webhook_server *s);

/* ---- admission ------------------------------------------------------------ */

/* The AdmissionReview's request (admission.k8s.io/v1 or v1beta1); every
 * pointer borrowed for the handler call. */
typedef struct ckube_admission_request {
    const char *uid;
    const char *operation; /* "CREATE", "UPDATE", "DELETE", "CONNECT" */
    const char *group, *version, *kind, *resource, *subresource;
    const char *name, *namespace_;
    const char *username;
    const json_t *user_info; /* {username, uid, groups, extra} */
    bool dry_run;
    const json_t *object;     /* NULL on DELETE */
    const json_t *old_object; /* NULL on CREATE */
    const json_t *options;
    const json_t *raw; /* the whole request member */
} ckube_admission_request;

/* The answer a handler builds (allowed unless it says otherwise). */
typedef struct ckube_admission_response ckube_admission_response;

/* Refuses, with the Status the API server passes on: its code (0: 403,
 * controller-runtime's Denied) and message (printf). The API server
 * prefixes it: `admission webhook "NAME" denied the request: MESSAGE`. */
void ckube_admission_deny(ckube_admission_response *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A warning for the client (kubectl prints "Warning: TEXT"). */
void ckube_admission_warn(ckube_admission_response *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An audit annotation (the API server prefixes the webhook's name). */
void ckube_admission_annotate(ckube_admission_response *r, const char *key, const char *value);
/* Mutating webhooks: the object as it should be (taken). The answer is
 * the JSON Patch from the request's object to it (ckube_json_patch_diff),
 * as controller-runtime's PatchResponseFromRaw. */
void ckube_admission_set_object(ckube_admission_response *r, json_t *obj);

typedef void (*ckube_admission_fn)(void *ctx, const ckube_admission_request *req,
                                   ckube_admission_response *resp);

/* Serves admission reviews on `path` (copied) with fn. 0, or -1 when the
 * path is taken or the server started. */
int ckube_webhook_server_admission(ckube_webhook_server *s, const char *path, ckube_admission_fn fn,
                                   void *ctx);

/* Typed handlers (controller-runtime's CustomDefaulter and
 * CustomValidator) for kinds the scheme knows (ckube-gen's
 * NAME_add_to_scheme); the scheme is borrowed and must outlive the
 * server. An object of a kind it does not know is refused (400).
 *
 * A defaulter changes `obj` in place; the answer is the patch. Returning
 * non-zero refuses the request with *msg (malloc'd, or NULL) and 403. */
typedef int (*ckube_typed_default_fn)(void *ctx, const ckube_admission_request *req,
                                      ckube_typed *obj, char **msg);
int ckube_webhook_server_defaulter(ckube_webhook_server *s, const char *path,
                                   const ckube_scheme *scheme, ckube_typed_default_fn fn,
                                   void *ctx);

/* A validator judges `obj` (NULL on DELETE) against `old` (NULL on
 * CREATE): 0 allows, non-zero denies with *msg (malloc'd) and 403, as
 * controller-runtime's validator answers a returned error. Warnings go
 * through resp. */
typedef int (*ckube_typed_validate_fn)(void *ctx, const ckube_admission_request *req,
                                       const ckube_typed *obj, const ckube_typed *old,
                                       ckube_admission_response *resp, char **msg);
int ckube_webhook_server_validator(ckube_webhook_server *s, const char *path,
                                   const ckube_scheme *scheme, ckube_typed_validate_fn fn,
                                   void *ctx);

/* ---- conversion ------------------------------------------------------------- */

/* Converts one object (borrowed) to `desired_api_version`
 * ("group/version"): returns the converted object (a new reference), or
 * NULL with *msg (malloc'd) to fail the whole review (result Failure with
 * the message, as ConversionReview answers one). Objects already in the
 * desired version are not passed; the library sets apiVersion on what
 * the function returns. The API server refuses answers that change an
 * object's uid, name, namespace, labels or annotations other than as
 * upstream allows: keep them. */
typedef json_t *(*ckube_conversion_fn)(void *ctx, const json_t *obj,
                                       const char *desired_api_version, char **msg);
int ckube_webhook_server_conversion(ckube_webhook_server *s, const char *path,
                                    ckube_conversion_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
