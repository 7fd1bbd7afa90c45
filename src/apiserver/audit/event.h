/* event.h - one audit.k8s.io/v1 Event, written as kube-apiserver's log
 * backend writes it (k8s.io/apiserver/pkg/apis/audit/v1 types.go,
 * pkg/audit/request.go, context.go, format.go), and the small pieces of
 * a request that go into one: its audit ID, its source IPs.
 *
 * The caller (the request path) fills an audit_event with borrowed
 * strings and jansson values and asks for the line; nothing is kept past
 * the call, so an event may live on the stack and the same one may be
 * encoded again at a later stage. Every function is reentrant.
 *
 * The line is what Go's encoding/json gives for the Event struct, which
 * upstream's log backend writes: fields in the struct's order (kind,
 * apiVersion, level, auditID, stage, requestURI, verb, user,
 * impersonatedUser, authenticationMetadata, sourceIPs, userAgent,
 * objectRef, responseStatus, requestObject, responseObject,
 * requestReceivedTimestamp, stageTimestamp, annotations), the omitempty
 * ones left out when empty, map keys (annotations, user extra) sorted,
 * strings escaped as encoding/json escapes them (\u003c, \u003e, \u0026
 * for < > &, \u2028 and \u2029, invalid UTF-8 as \ufffd), numbers as Go
 * prints a float64, timestamps as metav1.MicroTime (RFC 3339 in UTC with
 * six fractional digits), and a final newline. requestObject and
 * responseObject are written from the given trees, keys in the trees'
 * order (upstream writes its typed objects in their structs' order; for
 * an object ckube stores, the order it was stored in).
 */
#ifndef CKUBE_APISERVER_AUDIT_EVENT_H
#define CKUBE_APISERVER_AUDIT_EVENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "apiserver/audit/policy.h"

/* The request header carrying an audit ID (in and out). */
#define AUDIT_HEADER_AUDIT_ID "Audit-ID"
/* The authorization filter's annotations (upstream's filters/authorization.go). */
#define AUDIT_ANNOTATION_DECISION "authorization.k8s.io/decision"
#define AUDIT_ANNOTATION_REASON "authorization.k8s.io/reason"
#define AUDIT_DECISION_ALLOW "allow"
#define AUDIT_DECISION_FORBID "forbid"
/* The reason annotated when the authorizer failed. */
#define AUDIT_REASON_ERROR "internal error"
/* A User-Agent longer than this is cut and AUDIT_USER_AGENT_TRUNCATED
 * appended (upstream's maybeTruncateUserAgent; the encoder does it). */
#define AUDIT_USER_AGENT_MAX 1024
#define AUDIT_USER_AGENT_TRUNCATED "...TRUNCATED"

/* One key of a user's extra. values NULL is written as null, as Go writes
 * a nil slice; nvalues 0 with non-NULL values as []. */
typedef struct audit_user_extra {
    const char *key;
    const char *const *values;
    size_t nvalues;
} audit_user_extra;

/* authentication.k8s.io/v1 UserInfo; every field omitempty. */
typedef struct audit_user_info {
    const char *username;
    const char *uid;
    const char *const *groups;
    size_t ngroups;
    const audit_user_extra *extra; /* any order: written sorted by key */
    size_t nextra;
} audit_user_info;

/* The object a resource request is about (audit.k8s.io/v1
 * ObjectReference); every field omitempty, "" for the core group. */
typedef struct audit_object_ref {
    const char *resource;
    const char *namespace_;
    const char *name;
    const char *uid;
    const char *api_group;
    const char *api_version;
    const char *resource_version;
    const char *subresource;
} audit_object_ref;

/* responseStatus (a metav1.Status: always "metadata":{}, the rest
 * omitempty). For a reply that is not a Status, upstream records only the
 * code; for a Status reply (errors, a delete's Success) the whole Status:
 * status, message, reason, details and code. */
typedef struct audit_response_status {
    int code;           /* 0: left out */
    const char *status; /* "Success", "Failure" */
    const char *message;
    const char *reason;    /* "Forbidden", "NotFound", ... */
    const json_t *details; /* a StatusDetails object, written as is */
} audit_response_status;

/* An annotation; several with one key keep the first (upstream keeps the
 * value set first and warns about the later one). */
typedef struct audit_annotation {
    const char *key;
    const char *value;
} audit_annotation;

typedef struct audit_event {
    audit_level level;
    const char *audit_id;
    audit_stage stage;
    /* The request target as the client sent it (path and query). */
    const char *request_uri;
    const char *verb;
    audit_user_info user;
    /* The impersonated user, when the request impersonated (NULL: none);
     * a non-empty constraint adds authenticationMetadata. */
    const audit_user_info *impersonated_user;
    const char *impersonation_constraint;
    const char *const *source_ips;
    size_t nsource_ips;
    /* The User-Agent header as received (cut by the encoder). */
    const char *user_agent;
    /* NULL for non-resource requests. */
    const audit_object_ref *object_ref;
    /* NULL until the reply's status is known (RequestReceived). */
    const audit_response_status *response_status;
    /* Borrowed trees, written only at the levels that record them:
     * request_object at Request and RequestResponse, response_object at
     * RequestResponse. For a PATCH the request object is the patch. */
    const json_t *request_object;
    const json_t *response_object;
    /* Leave metadata.managedFields out of both objects (the decision's
     * omit_managed_fields): an object's own, a list's items', a Table's
     * rows' objects', as upstream's copyWithoutManagedFields. */
    bool omit_managed_fields;
    /* {0, 0} is written as null (metav1.MicroTime's zero). At the
     * RequestReceived stage upstream gives both the same value. */
    struct timespec request_received;
    struct timespec stage_timestamp;
    const audit_annotation *annotations;
    size_t nannotations;
} audit_event;

/* The event as one JSON line ending in "\n". Returns a malloc'd
 * NUL-terminated string the caller frees, its length (newline included)
 * in *len when len is non-NULL. Never NULL (aborts on out of memory, the
 * server's rule); a string that is not UTF-8 is written with U+FFFD as
 * Go writes it. */
char *audit_event_encode(const audit_event *e, size_t *len);

/* The event in the log backend's "legacy" format (upstream's
 * audit.EventString), one line ending in "\n":
 *   2026-11-27T09:00:00.123456789Z AUDIT: id="..." stage="..." ip="..."
 *   method="get" user="..." groups="\"a\",\"b\"" as="<self>"
 *   asgroups="<lookup>" user-agent="..." namespace="..." uri="..."
 *   response="200"
 * (the timestamp in local time, RFC 3339 with nanoseconds). Same
 * ownership as audit_event_encode. */
char *audit_event_encode_legacy(const audit_event *e, size_t *len);

/* `obj` (borrowed) without metadata.managedFields, as the encoder leaves
 * it out with omit_managed_fields: a new reference the caller
 * json_decref()s; `obj` itself (a new reference to it) when there is
 * nothing to leave out. Containers on the way are copied, the rest is
 * shared, `obj` is not changed. NULL gives NULL. */
json_t *audit_without_managed_fields(const json_t *obj);

/* The objectRef part of upstream's LogRequestObject (pkg/audit/
 * request.go), which the create, update and delete handlers call with
 * the body they decoded: each of namespace, name, uid and
 * resourceVersion that *ref does not have yet (NULL or "") is taken from
 * obj's metadata when it is a non-empty string there. What is set is
 * borrowed from obj. The other fields stay as the URL gave them (upstream
 * fills them only when empty, and a resource request always has them).
 * So a create records the name of its body (none for a generateName: the
 * name is made later) and an update the uid and resourceVersion the
 * client sent, not the stored object's. obj NULL or without metadata (a
 * DeleteOptions): nothing. */
void audit_object_ref_fill(audit_object_ref *ref, const json_t *obj);

/* A new audit ID: a random (version 4) UUID, as upstream's uuid.New(),
 * into buf (at least 37 bytes). */
#define AUDIT_ID_SIZE 37
void audit_id_new(char *buf, size_t size);

/* The request's audit ID (upstream's WithAuditInit): the Audit-ID header
 * the client sent when it is not empty (kept as sent, no truncation),
 * else a new one written to buf (AUDIT_ID_SIZE bytes). Returns `header`
 * (borrowed) or buf. The server echoes it in the reply's Audit-ID header
 * whether or not the request is audited. */
const char *audit_id_for_request(const char *header, char *buf, size_t size);

/* The sourceIPs of a request, as upstream's utilnet.SourceIPs: each valid
 * IP of X-Forwarded-For (comma-separated, spaces trimmed, invalid ones
 * skipped), then X-Real-Ip unless already in that list, then the
 * connection's address (`remote`: "ip", "ip:port" or "[ipv6]:port")
 * unless it equals the last one; IPs written as Go prints them (IPv4 and
 * IPv4-mapped as dotted quads, IPv6 compressed, lower case). Header values
 * may be NULL. Returns a NULL-terminated array in one allocation (one
 * free()), its length in *n; never NULL (an empty list when nothing is
 * valid). */
char **audit_source_ips(const char *x_forwarded_for, const char *x_real_ip, const char *remote,
                        size_t *n);

#endif
