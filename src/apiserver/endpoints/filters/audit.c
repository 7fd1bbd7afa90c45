/* The request path's audit filter (audit.h). */
#include "apiserver/endpoints/filters/audit.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apiserver/codec/k8s_protobuf.h"
#include "apiserver/endpoints/request/context.h"
#include "ckube/yaml.h"
#include "common/json_parse.h"
#include "common/xalloc.h"

/* An audited user's info in the event's terms, with the arrays it
 * needs (owned). */
typedef struct user_info {
    audit_user_info info;
    audit_user_extra *extra;
    const char ***values; /* per extra key, the NULL-terminated values */
} user_info;

static void user_info_fill(user_info *u, const auth_user *au)
{
    memset(u, 0, sizeof *u);
    u->info.username = au->name;
    u->info.uid = au->uid;
    u->info.groups = (const char *const *)au->groups;
    u->info.ngroups = au->ngroups;
    size_t n = json_object_size(au->extra);
    if (!n)
        return;
    u->extra = xcalloc(n, sizeof *u->extra);
    u->values = xcalloc(n, sizeof *u->values);
    const char *key;
    json_t *vals;
    size_t k = 0;
    json_object_foreach(au->extra, key, vals)
    {
        size_t nv = json_array_size(vals), i;
        u->values[k] = xcalloc(nv + 1, sizeof **u->values);
        for (i = 0; i < nv; i++)
            u->values[k][i] = json_string_value(json_array_get(vals, i));
        u->extra[k] = (audit_user_extra){key, u->values[k], nv};
        k++;
    }
    u->info.extra = u->extra;
    u->info.nextra = k;
}

static void user_info_clear(user_info *u)
{
    for (size_t i = 0; i < u->info.nextra; i++)
        free(u->values[i]);
    free(u->values);
    free(u->extra);
}

/* objectRef's fields, owned; NULL: not set (written as absent). */
typedef struct owned_ref {
    char *resource, *namespace_, *name, *uid, *api_group, *api_version, *resource_version,
        *subresource;
} owned_ref;

struct audit_req {
    audit_log *log;
    audit_decision decision;
    char *audit_id, *uri, *verb, *user_agent;
    auth_user *user, *as; /* references */
    char **source_ips;
    size_t nsource_ips;
    bool has_ref; /* a resource request: objectRef is written */
    owned_ref ref;
    struct timespec received;
    json_t *request_object;
    char *decision_text, *reason;
    bool started; /* ResponseStarted written */
    char **ann_keys, **ann_values; /* audit_req_annotate's, owned */
    size_t nann;
};

static char *dup0(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

/* NULL for NULL and "" (an omitempty field either way). */
static char *dup_set(const char *s)
{
    return s && *s ? xstrdup(s) : NULL;
}

/* The event's view of r (borrowed from it). */
static audit_object_ref ref_view(const owned_ref *r)
{
    return (audit_object_ref){
        .resource = r->resource,
        .namespace_ = r->namespace_,
        .name = r->name,
        .uid = r->uid,
        .api_group = r->api_group,
        .api_version = r->api_version,
        .resource_version = r->resource_version,
        .subresource = r->subresource,
    };
}

static void ref_clear(owned_ref *r)
{
    char **f[] = {&r->resource,    &r->namespace_,       &r->name,       &r->uid, &r->api_group,
                  &r->api_version, &r->resource_version, &r->subresource};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        free(*f[i]);
        *f[i] = NULL;
    }
}

static void fill_attributes(const audit_req_info *in, audit_attributes *at)
{
    *at = (audit_attributes){
        .user = in->user ? in->user->name : NULL,
        .groups = in->user ? (const char *const *)in->user->groups : NULL,
        .ngroups = in->user ? in->user->ngroups : 0,
        .verb = in->verb,
        .resource_request = in->resource_request,
        .api_group = in->api_group,
        .resource = in->resource,
        .subresource = in->subresource,
        .namespace_ = in->namespace_,
        .name = in->name,
        .path = in->path,
    };
}

/* Writes the event of `stage` with what a knows; status NULL before the
 * reply. */
static void emit(audit_req *a, audit_stage stage, const audit_response_status *status,
                 const json_t *response)
{
    if (audit_decision_omits(&a->decision, stage))
        return;
    user_info u, as;
    user_info_fill(&u, a->user);
    if (a->as)
        user_info_fill(&as, a->as);
    audit_object_ref ref = ref_view(&a->ref);
    audit_annotation *ann = xcalloc(2 + a->nann, sizeof *ann);
    size_t nann = 0;
    for (size_t i = 0; i < a->nann; i++)
        ann[nann++] = (audit_annotation){a->ann_keys[i], a->ann_values[i]};
    if (a->decision_text) {
        ann[nann++] = (audit_annotation){AUDIT_ANNOTATION_DECISION, a->decision_text};
        if (a->reason && *a->reason)
            ann[nann++] = (audit_annotation){AUDIT_ANNOTATION_REASON, a->reason};
    }
    audit_event e = {
        .level = a->decision.level,
        .audit_id = a->audit_id,
        .stage = stage,
        .request_uri = a->uri,
        .verb = a->verb,
        .user = u.info,
        .impersonated_user = a->as ? &as.info : NULL,
        .source_ips = (const char *const *)a->source_ips,
        .nsource_ips = a->nsource_ips,
        .user_agent = a->user_agent,
        .object_ref = a->has_ref ? &ref : NULL,
        .response_status = status,
        .request_object = a->request_object,
        .response_object = response,
        .omit_managed_fields = a->decision.omit_managed_fields,
        .request_received = a->received,
        .annotations = ann,
        .nannotations = nann,
    };
    if (stage == AUDIT_STAGE_REQUEST_RECEIVED)
        e.stage_timestamp = a->received;
    else
        clock_gettime(CLOCK_REALTIME, &e.stage_timestamp);
    audit_log_write_event(a->log, &e);
    free(ann);
    user_info_clear(&u);
    if (a->as)
        user_info_clear(&as);
}

static audit_req *req_new(audit_log *log, const audit_req_info *in, const audit_decision *d)
{
    audit_req *a = xcalloc(1, sizeof *a);
    a->log = log;
    a->decision = *d;
    a->audit_id = dup0(in->audit_id);
    a->uri = dup0(in->uri);
    a->verb = dup0(in->verb);
    a->user_agent = dup0(in->user_agent);
    a->user =
        in->user ? auth_user_ref((auth_user *)in->user) : auth_user_new("", "", NULL, 0, NULL);
    a->source_ips = audit_source_ips(in->x_forwarded_for, in->x_real_ip, in->peer, &a->nsource_ips);
    a->received = in->received;
    if (in->resource_request) {
        a->has_ref = true;
        a->ref = (owned_ref){
            .resource = dup_set(in->resource),
            .namespace_ = dup_set(in->namespace_),
            .name = dup_set(in->name),
            .api_group = dup_set(in->api_group),
            .api_version = dup_set(in->api_version),
            .subresource = dup_set(in->subresource),
        };
    }
    return a;
}

audit_req *audit_req_begin(const audit_policy *p, audit_log *log, const audit_req_info *in)
{
    if (!p || !log)
        return NULL;
    audit_attributes at;
    fill_attributes(in, &at);
    audit_decision d;
    if (audit_policy_decide(p, &at, &d) == AUDIT_LEVEL_NONE)
        return NULL;
    audit_req *a = req_new(log, in, &d);
    emit(a, AUDIT_STAGE_REQUEST_RECEIVED, NULL, NULL);
    return a;
}

audit_level audit_req_level(const audit_req *a)
{
    return a->decision.level;
}

static void keep_request_object(audit_req *a, json_t *obj)
{
    json_decref(a->request_object);
    a->request_object = json_incref(obj);
}

/* *dst, when still unset, takes a copy of src. */
static void ref_fill_unset(char **dst, const char *src)
{
    if (!*dst)
        *dst = dup_set(src);
}

void audit_req_log_request_object(audit_req *a, json_t *obj)
{
    /* Upstream makes an empty objectRef if there was none; only resource
     * handlers call it, and their requests always have one. */
    a->has_ref = true;
    audit_object_ref view = ref_view(&a->ref);
    audit_object_ref_fill(&view, obj);
    ref_fill_unset(&a->ref.namespace_, view.namespace_);
    ref_fill_unset(&a->ref.name, view.name);
    ref_fill_unset(&a->ref.uid, view.uid);
    ref_fill_unset(&a->ref.resource_version, view.resource_version);
    if (a->decision.level >= AUDIT_LEVEL_REQUEST)
        keep_request_object(a, obj);
}

void audit_req_log_request_patch(audit_req *a, json_t *patch)
{
    if (a->decision.level >= AUDIT_LEVEL_REQUEST)
        keep_request_object(a, patch);
}

/* The handlers' body types (endpoints/handlers' content_type): the media
 * type without parameters, case-insensitive. */
typedef enum { BODY_JSON, BODY_YAML, BODY_PROTOBUF, BODY_OTHER } body_kind;

static body_kind body_kind_of(const char *ct)
{
    if (!ct || !*ct)
        return BODY_JSON;
    size_t n = strcspn(ct, ";");
    while (n && ct[n - 1] == ' ')
        n--;
    static const struct {
        const char *type;
        body_kind kind;
    } types[] = {
        {"application/json", BODY_JSON},
        {"*/*", BODY_JSON},
        {"application/json-patch+json", BODY_JSON},
        {"application/merge-patch+json", BODY_JSON},
        {"application/strategic-merge-patch+json", BODY_JSON},
        {"application/yaml", BODY_YAML},
        {"application/x-yaml", BODY_YAML},
        {"text/yaml", BODY_YAML},
        {"application/apply-patch+yaml", BODY_YAML},
        {"application/apply-patch+json", BODY_YAML},
        {K8S_PROTOBUF_CONTENT_TYPE, BODY_PROTOBUF},
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strlen(types[i].type) == n && !strncasecmp(ct, types[i].type, n))
            return types[i].kind;
    return BODY_OTHER;
}

static json_t *decode(body_kind kind, const void *data, size_t len)
{
    size_t budget = apiserver_decode_budget(len);
    switch (kind) {
    case BODY_JSON: {
        json_error_t je;
        return ckube__json_loadb_limited(data, len, 0, budget, NULL, NULL, &je);
    }
    case BODY_YAML: {
        ckube_yaml_limits lim = {
            .max_memory = budget, .max_alias_memory = budget, .max_alias_json = APISERVER_MAX_BODY};
        return ckube_yaml_load_limited(data, len, &lim, NULL, NULL);
    }
    case BODY_PROTOBUF:
        return k8s_protobuf_decode(data, len, budget, NULL, NULL);
    case BODY_OTHER:
        break;
    }
    return NULL;
}

json_t *audit_decode_request_body(const char *content_type, const void *data, size_t len)
{
    json_t *v = decode(body_kind_of(content_type), data, len);
    /* A body the handlers take is an object (a patch may be an array);
     * anything else they refuse. */
    if (v && !json_is_object(v) && !json_is_array(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

void audit_req_impersonated(audit_req *a, const auth_user *as)
{
    auth_user_unref(a->as);
    a->as = auth_user_ref((auth_user *)as);
}

void audit_req_authorized(audit_req *a, bool allowed, const char *reason)
{
    free(a->decision_text);
    free(a->reason);
    a->decision_text = xstrdup(allowed ? AUDIT_DECISION_ALLOW : AUDIT_DECISION_FORBID);
    a->reason = dup0(reason);
}

void audit_req_started(audit_req *a, int code)
{
    if (a->started)
        return;
    a->started = true;
    audit_response_status st = {.code = code};
    emit(a, AUDIT_STAGE_RESPONSE_STARTED, &st, NULL);
}

/* responseStatus: the whole Status for a Status reply, else the code. */
static void status_of(int code, const json_t *reply, audit_response_status *st)
{
    *st = (audit_response_status){.code = code};
    const char *kind = json_string_value(json_object_get(reply, "kind"));
    if (!kind || strcmp(kind, "Status"))
        return;
    st->status = json_string_value(json_object_get(reply, "status"));
    st->message = json_string_value(json_object_get(reply, "message"));
    st->reason = json_string_value(json_object_get(reply, "reason"));
    st->details = json_object_get(reply, "details");
}

void audit_req_complete(audit_req *a, int code, const json_t *reply)
{
    audit_response_status st;
    status_of(code, reply, &st);
    emit(a, AUDIT_STAGE_RESPONSE_COMPLETE, &st,
         a->decision.level >= AUDIT_LEVEL_REQUEST_RESPONSE ? reply : NULL);
}

void audit_req_free(audit_req *a)
{
    if (!a)
        return;
    free(a->audit_id);
    free(a->uri);
    free(a->verb);
    free(a->user_agent);
    auth_user_unref(a->user);
    auth_user_unref(a->as);
    free(a->source_ips);
    ref_clear(&a->ref);
    json_decref(a->request_object);
    free(a->decision_text);
    free(a->reason);
    for (size_t i = 0; i < a->nann; i++) {
        free(a->ann_keys[i]);
        free(a->ann_values[i]);
    }
    free(a->ann_keys);
    free(a->ann_values);
    free(a);
}

void audit_req_annotate(audit_req *a, const char *key, const char *value)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->nann; i++) {
        if (!strcmp(a->ann_keys[i], key))
            return; /* upstream keeps the first value of a key */
    }
    a->ann_keys = xrealloc(a->ann_keys, (a->nann + 1) * sizeof *a->ann_keys);
    a->ann_values = xrealloc(a->ann_values, (a->nann + 1) * sizeof *a->ann_values);
    a->ann_keys[a->nann] = xstrdup(key);
    a->ann_values[a->nann] = xstrdup(value);
    a->nann++;
}

void audit_unauthenticated(const audit_policy *p, audit_log *log, const audit_req_info *in)
{
    if (!p || !log)
        return;
    audit_req_info info = *in;
    info.user = NULL;
    audit_attributes at;
    fill_attributes(&info, &at);
    audit_decision d;
    if (audit_policy_decide(p, &at, &d) == AUDIT_LEVEL_NONE)
        return;
    audit_req *a = req_new(log, &info, &d);
    audit_response_status st = {
        .code = 401, .status = "Failure", .message = "Unauthorized", .reason = "Unauthorized"};
    emit(a, AUDIT_STAGE_RESPONSE_STARTED, &st, NULL);
    audit_req_free(a);
}
