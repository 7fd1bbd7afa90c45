/* The request path's audit filter (audit.h). */
#include "apiserver/endpoints/filters/audit.h"

#include <stdlib.h>
#include <string.h>

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

struct audit_req {
    audit_log *log;
    audit_decision decision;
    char *audit_id, *uri, *verb, *user_agent;
    auth_user *user, *as; /* references */
    char **source_ips;
    size_t nsource_ips;
    bool has_ref;
    char *ref[6]; /* resource, namespace, name, group, version, subresource */
    struct timespec received;
    json_t *request_object;
    char *decision_text, *reason;
    bool started; /* ResponseStarted written */
};

static char *dup0(const char *s)
{
    return s ? xstrdup(s) : NULL;
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
    audit_object_ref ref = {a->ref[0], a->ref[1], a->ref[2], NULL,
                            a->ref[3], a->ref[4], NULL,      a->ref[5]};
    audit_annotation ann[2];
    size_t nann = 0;
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
        const char *r[6] = {in->resource,  in->namespace_,  in->name,
                            in->api_group, in->api_version, in->subresource};
        for (int i = 0; i < 6; i++)
            a->ref[i] = r[i] && *r[i] ? xstrdup(r[i]) : NULL;
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

void audit_req_set_request_object(audit_req *a, json_t *obj)
{
    json_decref(a->request_object);
    a->request_object = json_incref(obj);
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
    for (int i = 0; i < 6; i++)
        free(a->ref[i]);
    json_decref(a->request_object);
    free(a->decision_text);
    free(a->reason);
    free(a);
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
