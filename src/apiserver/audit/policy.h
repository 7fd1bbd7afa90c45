/* policy.h - the audit policy (--audit-policy-file): which requests are
 * audited, at which level, and which stages are left out, as
 * kube-apiserver reads and applies it (k8s.io/apiserver/pkg/audit/policy:
 * reader.go, checker.go; pkg/apis/audit/validation).
 *
 * A policy is an audit.k8s.io/v1 Policy in YAML or JSON (JSON when the
 * first byte that is not white space is '{', as upstream's decoder
 * recognizes it). Only audit.k8s.io/v1 is read: upstream dropped v1alpha1
 * and v1beta1 in 1.24 and refuses them since, with the decoder's words
 * (`no kind "Policy" is registered for version "audit.k8s.io/v1beta1" in
 * scheme "k8s.io/apiserver/pkg/audit/scheme.go:30"`); an apiVersion left
 * out is `unknown group version field audit.k8s.io/__internal,
 * Kind=Policy in policy`; a kind left out is Policy. A field of the wrong
 * JSON type fails as Go's decoder words it (`json: cannot unmarshal
 * number into Go struct field PolicyRule.rules.level of type v1.Level`);
 * unknown fields are not errors: upstream decodes strictly, then falls
 * back to a lenient decode with a warning naming them, and so does this
 * reader (a klog warning). A policy that decodes is validated (levels,
 * stages, non-resource URLs, groups, resourceNames without resources,
 * rules mixing resources and URLs; all problems in one message, as
 * field.ErrorList's aggregate prints them) and must hold a rule. Every
 * refusal of audit_policy_load ends in ": from file PATH", as upstream's.
 *
 * Deviations, all about files upstream would also have to guess at: a
 * key given twice is refused (the project's YAML and JSON readers refuse
 * duplicates; upstream warns and keeps the last); the contents of
 * metadata are only checked for unknown fields and string types; a file
 * over AUDIT_POLICY_MAX_FILE bytes is refused.
 *
 * A loaded policy is immutable: audit_policy_decide may be called from
 * any number of threads at once. Strings given to the policy are
 * borrowed for the call only.
 */
#ifndef CKUBE_APISERVER_AUDIT_POLICY_H
#define CKUBE_APISERVER_AUDIT_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/* The amount recorded (audit.k8s.io/v1 Level), ordered as upstream's
 * Level.Less orders them. */
typedef enum audit_level {
    AUDIT_LEVEL_NONE = 0,
    AUDIT_LEVEL_METADATA = 1,
    AUDIT_LEVEL_REQUEST = 2,
    AUDIT_LEVEL_REQUEST_RESPONSE = 3,
} audit_level;

/* When in a request's handling an event is made (audit.k8s.io/v1 Stage). */
typedef enum audit_stage {
    AUDIT_STAGE_REQUEST_RECEIVED = 0,
    AUDIT_STAGE_RESPONSE_STARTED = 1,
    AUDIT_STAGE_RESPONSE_COMPLETE = 2,
    AUDIT_STAGE_PANIC = 3,
} audit_stage;

#define AUDIT_STAGE_BIT(stage) (1u << (unsigned)(stage))

/* The policy file may be at most this large (a policy is a few KiB). */
#define AUDIT_POLICY_MAX_FILE (16u << 20)

/* "None", "Metadata", ...; "RequestReceived", ...: static strings ("" for
 * a value out of range). */
const char *audit_level_name(audit_level level);
const char *audit_stage_name(audit_stage stage);

typedef struct audit_policy audit_policy;

/* What a rule is matched against: upstream's authorizer.Attributes, as
 * request_info and authentication give them. Every pointer is borrowed
 * for the call; NULL reads as "". */
typedef struct audit_attributes {
    /* The authenticated user's name; NULL when there is no user at all
     * (then rules naming users or groups never match). */
    const char *user;
    const char *const *groups;
    size_t ngroups;
    /* The Kubernetes verb (get, list, watch, create, ...) of a resource
     * request, the lower-case HTTP method of any other. */
    const char *verb;
    bool resource_request;
    /* Resource requests: "" is the core group and cluster scope. */
    const char *api_group;
    const char *resource;
    const char *subresource;
    const char *namespace_;
    const char *name;
    /* Non-resource requests: the URL path (no query). */
    const char *path;
} audit_attributes;

/* What the policy says of one request (upstream's RequestAuditConfig). */
typedef struct audit_decision {
    audit_level level;
    /* AUDIT_STAGE_BIT()s of the stages that make no event: the rule's
     * omitStages with the policy's (the policy's alone when no rule
     * matched). */
    unsigned omit_stages;
    /* Whether metadata.managedFields is left out of the request and
     * response objects: the rule's omitManagedFields, else the policy's. */
    bool omit_managed_fields;
} audit_decision;

/* Parses and validates a policy from `data` (`len` bytes, need not be
 * NUL-terminated). Returns a new policy (audit_policy_free), or NULL with
 * *err (when err is non-NULL) a malloc'd message in upstream's words,
 * without the ": from file" suffix: the caller frees it. */
audit_policy *audit_policy_parse(const char *data, size_t len, char **err);

/* Reads the file at `path` and parses it as audit_policy_parse does.
 * Errors end in ": from file PATH"; an unreadable file is `failed to read
 * file path "PATH": open PATH: no such file or directory` (strerror's
 * words in lower case, as Go prints them); an empty path is "file path
 * not specified". */
audit_policy *audit_policy_load(const char *path, char **err);

/* The policy kube-apiserver runs with, from its --audit-policy-file
 * flag: with no file (NULL or "") auditing is off, which is *out NULL
 * and 0 (upstream builds no backend then, and says so at -v=2); else the
 * loaded policy in *out and 0, or -1 with *err "loading audit policy
 * file: ..." (malloc'd; the server fails to start with it). */
int audit_policy_from_flag(const char *policy_file, audit_policy **out, char **err);

/* Decides for one request (upstream's EvaluatePolicyRule): the level of
 * the first rule that matches, None when none does (a NULL policy:
 * auditing off, None and nothing omitted). Fills *out when out is
 * non-NULL and returns the level. Thread-safe, allocates nothing. */
audit_level audit_policy_decide(const audit_policy *p, const audit_attributes *at,
                                audit_decision *out);

/* Whether a decision omits `stage` (no event is made for it). */
static inline bool audit_decision_omits(const audit_decision *d, audit_stage stage)
{
    return (d->omit_stages & AUDIT_STAGE_BIT(stage)) != 0;
}

/* How many rules the policy holds (at least one once loaded). */
size_t audit_policy_rule_count(const audit_policy *p);

/* Frees the policy (NULL is fine). */
void audit_policy_free(audit_policy *p);

#endif
