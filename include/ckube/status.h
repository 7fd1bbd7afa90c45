/* ckube/status.h - the one error model: a Kubernetes meta/v1 Status.
 *
 * Every error the server sends and every error the client receives is a
 * ckube_status. It round-trips to the JSON body Kubernetes uses:
 *   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
 *    "message":"...","reason":"NotFound","details":{...},"code":404}
 * Messages follow upstream's wording byte for byte, because kubectl and
 * client test suites compare them.
 */
#ifndef CKUBE_STATUS_H
#define CKUBE_STATUS_H

#include <jansson.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reason strings (metav1.StatusReason). */
#define CKUBE_REASON_NOT_FOUND "NotFound"
#define CKUBE_REASON_ALREADY_EXISTS "AlreadyExists"
#define CKUBE_REASON_CONFLICT "Conflict"
#define CKUBE_REASON_INVALID "Invalid"
#define CKUBE_REASON_GONE "Gone"
#define CKUBE_REASON_EXPIRED "Expired"
#define CKUBE_REASON_BAD_REQUEST "BadRequest"
#define CKUBE_REASON_FORBIDDEN "Forbidden"
#define CKUBE_REASON_UNAUTHORIZED "Unauthorized"
#define CKUBE_REASON_METHOD_NOT_ALLOWED "MethodNotAllowed"
#define CKUBE_REASON_NOT_ACCEPTABLE "NotAcceptable"
#define CKUBE_REASON_TOO_LARGE "RequestEntityTooLarge"
#define CKUBE_REASON_UNSUPPORTED_MEDIA "UnsupportedMediaType"
#define CKUBE_REASON_TIMEOUT "Timeout"
#define CKUBE_REASON_TOO_MANY_REQUESTS "TooManyRequests"
#define CKUBE_REASON_INTERNAL "InternalError"
#define CKUBE_REASON_SERVICE_UNAVAILABLE "ServiceUnavailable"

/* Cause types (metav1.CauseType). */
#define CKUBE_CAUSE_FIELD_INVALID "FieldValueInvalid"
#define CKUBE_CAUSE_FIELD_REQUIRED "FieldValueRequired"
#define CKUBE_CAUSE_FIELD_DUPLICATE "FieldValueDuplicate"
#define CKUBE_CAUSE_FIELD_NOT_SUPPORTED "FieldValueNotSupported"
#define CKUBE_CAUSE_FIELD_FORBIDDEN "FieldValueForbidden"
#define CKUBE_CAUSE_FIELD_TOO_LONG "FieldValueTooLong"
#define CKUBE_CAUSE_FIELD_TOO_MANY "FieldValueTooMany"
#define CKUBE_CAUSE_FIELD_TYPE_INVALID "FieldValueTypeInvalid"
#define CKUBE_CAUSE_UNKNOWN_FIELD "UnknownField"
#define CKUBE_CAUSE_FIELD_MANAGER_CONFLICT "FieldManagerConflict"

typedef struct ckube_status_cause {
    char *type;    /* owned; may be NULL */
    char *message; /* owned; may be NULL */
    char *field;   /* owned; may be NULL */
} ckube_status_cause;

typedef struct ckube_status {
    int code;      /* HTTP status code, e.g. 404 */
    char *status;  /* owned: "Success" or "Failure" */
    char *reason;  /* owned; may be NULL (no reason) */
    char *message; /* owned; may be NULL */
    /* details; every string owned and may be NULL */
    char *name;
    char *group;
    char *kind;
    char *uid;
    int retry_after_seconds; /* 0 = absent */
    ckube_status_cause *causes;
    size_t ncauses;
    /* Causes past CKUBE_STATUS_MAX_CAUSES, counted but not kept. */
    size_t ncauses_dropped;
    int has_details; /* set when any details field is set */
    /* metadata.continue: an expired paginated list's token for the rest
     * of the list, inconsistently (410 Expired); owned, may be NULL. */
    char *list_continue;
} ckube_status;

/* Allocates a Failure status with a printf-formatted message.
 * Returns NULL only on allocation failure. Free with ckube_status_free. */
ckube_status *ckube_status_new(int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A Success status (code 200) with no message. */
ckube_status *ckube_status_success(void);
void ckube_status_free(ckube_status *st);

/* Sets details.{name,group,kind}; copies the strings (NULL leaves as is). */
void ckube_status_set_details(ckube_status *st, const char *name, const char *group,
                              const char *kind);
/* The most causes a Status keeps: a body with a hundred thousand invalid
 * values gets the first thousand, and the message says how many more
 * there were (upstream lists them all, in a Status as large as the body
 * allows). */
#define CKUBE_STATUS_MAX_CAUSES 1000

/* Appends a cause; copies the strings. Past CKUBE_STATUS_MAX_CAUSES the
 * cause is only counted (ncauses_dropped). */
void ckube_status_add_cause(ckube_status *st, const char *type, const char *field, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

/* Encodes as a Status object. Returns a new reference (caller decrefs). */
json_t *ckube_status_to_json(const ckube_status *st);
/* Decodes a Status object. `http_code` is used when the body has no code.
 * Returns NULL if `j` is not a Status (kind != "Status"). Caller frees. */
ckube_status *ckube_status_from_json(const json_t *j, int http_code);

/* Upstream-worded constructors. `resource` is the plural resource name
 * ("configmaps"), `group` the API group ("" for core). Callers own the
 * result. */
ckube_status *ckube_status_not_found(const char *group, const char *resource, const char *name);
ckube_status *ckube_status_already_exists(const char *group, const char *resource,
                                          const char *name);
ckube_status *ckube_status_conflict(const char *group, const char *resource, const char *name,
                                    const char *why);
ckube_status *ckube_status_bad_request(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
ckube_status *ckube_status_internal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 422 Invalid: message "Kind \"name\" is invalid: [<cause1>, <cause2>]"
 * (with dropped causes: "[<cause1>, ..., <cause1000>, and N more errors]").
 * Add causes first with ckube_status_add_cause on a status from
 * ckube_status_invalid_begin, then call ckube_status_invalid_finish to
 * compose the message from them. */
ckube_status *ckube_status_invalid_begin(const char *group, const char *kind, const char *name);
void ckube_status_invalid_finish(ckube_status *st);

/* "<resource>" or "<resource>.<group>" as upstream's qualified resource. */
void ckube_qualified_resource(char *buf, size_t n, const char *group, const char *resource);

#ifdef __cplusplus
}
#endif
#endif
