/* audit.h - the request path's audit filter, as kube-apiserver's
 * WithAudit and WithFailedAuthenticationAudit (k8s.io/apiserver/pkg/
 * endpoints/filters/audit.go): it asks the policy (audit/policy.h) what
 * to record of a request, and writes its events (audit/event.h) to the
 * log (audit/log.h) at each stage:
 *
 *   RequestReceived   when the request is decided (after authentication)
 *   ResponseStarted   watches only, when their stream begins
 *   ResponseComplete  when the reply has been given (a watch: ends)
 *
 * The level and the user are the authenticated user's, decided before
 * impersonation and authorization, as upstream; the impersonated user
 * and the authorizer's decision are added as they become known. See
 * docs/audit.md for the contract stage by stage.
 *
 * One audit_req per audited request, used by one thread at a time (the
 * request's loop); the policy and the log are shared and thread-safe.
 */
#ifndef CKUBE_APISERVER_ENDPOINTS_FILTERS_AUDIT_H
#define CKUBE_APISERVER_ENDPOINTS_FILTERS_AUDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "apiserver/audit/log.h"
#include "apiserver/audit/policy.h"
#include "apiserver/authentication/user.h"

/* What the request is, as the filter records it. Borrowed for the call;
 * the audit_req copies what it keeps. */
typedef struct audit_req_info {
    const char *audit_id;
    const char *uri;        /* the request target as sent */
    const char *verb;       /* request_info's verb, or the lowercased method */
    const auth_user *user;  /* NULL: authentication failed */
    const char *user_agent; /* may be NULL */
    const char *x_forwarded_for, *x_real_ip, *peer; /* may be NULL */
    bool resource_request;
    const char *api_group, *api_version, *resource, *subresource, *namespace_, *name;
    const char *path;         /* the URL path */
    struct timespec received; /* CLOCK_REALTIME */
} audit_req_info;

typedef struct audit_req audit_req;

/* Decides for the request; NULL when the policy records nothing of it
 * (or p is NULL: auditing off). Otherwise writes RequestReceived (unless
 * omitted) and returns the request's state, which the caller owns
 * (audit_req_free). */
audit_req *audit_req_begin(const audit_policy *p, audit_log *log, const audit_req_info *info);

/* The level decided (Metadata and above; a begun request is never None). */
audit_level audit_req_level(const audit_req *a);

/* The decoded body of a create, an update or a delete (DeleteOptions),
 * once the request has reached its handler (upstream's
 * LogRequestObject, which the handlers call after decoding): objectRef's
 * namespace, name, uid and resourceVersion that the URL did not give are
 * taken from its metadata (audit_object_ref_fill), and at the Request
 * levels it is the requestObject (a new reference is taken). Neither
 * before: RequestReceived has the URL's objectRef alone. */
void audit_req_log_request_object(audit_req *a, json_t *obj);

/* A PATCH's body, as JSON (upstream's LogRequestPatch): the
 * requestObject at the Request levels; objectRef is left as the URL
 * gave it. A new reference is taken. */
void audit_req_log_request_patch(audit_req *a, json_t *patch);

/* A request body decoded as the handlers decode it, for the two calls
 * above: JSON (also with no Content-Type), YAML (application/yaml,
 * application/x-yaml, text/yaml, and the apply patches, whose JSON form
 * is YAML too), the Kubernetes protobuf encoding, and the JSON patch
 * types. `content_type` may be NULL and carry parameters; `data`
 * borrowed. The decode is bounded as the handlers bound it
 * (apiserver_decode_budget). NULL when the type is none of these or the
 * body does not decode to an object or an array: the handler refuses
 * such a request before upstream would log anything. A new reference
 * otherwise. */
json_t *audit_decode_request_body(const char *content_type, const void *data, size_t len);

/* The user the request acts as (Impersonate-*). */
void audit_req_impersonated(audit_req *a, const auth_user *as);

/* The authorizer's decision: authorization.k8s.io/decision "allow" or
 * "forbid", and authorization.k8s.io/reason when there is one. */
void audit_req_authorized(audit_req *a, bool allowed, const char *reason);

/* A long-running request's stream began with `code`: ResponseStarted. */
void audit_req_started(audit_req *a, int code);

/* The reply was given: ResponseComplete with `code` and, when `reply` is
 * a Status, the whole Status (otherwise the code alone); `reply` is also
 * the responseObject at RequestResponse. `reply` borrowed, may be NULL. */
void audit_req_complete(audit_req *a, int code, const json_t *reply);

void audit_req_free(audit_req *a);
/* An annotation on the request's later events (admission's: a webhook's
 * auditAnnotations, failed-open and patch records). Copied; a key given
 * again keeps its first value, as upstream's AddAnnotation. NULL a:
 * nothing. */
void audit_req_annotate(audit_req *a, const char *key, const char *value);

/* Authentication failed (a 401): one ResponseStarted event with no user
 * when the policy records requests without one. */
void audit_unauthenticated(const audit_policy *p, audit_log *log, const audit_req_info *info);

#endif
