/* Calling admission webhooks (admission.h): which webhooks match a
 * request (upstream's predicates: rules, namespaceSelector,
 * objectSelector), the AdmissionReview sent, the answer checked, and the
 * mutating and validating dispatch with upstream's failure handling
 * (k8s.io/apiserver/pkg/admission/plugin/webhook/{mutating,validating}).
 *
 * A run never calls back from inside admission_run: it starts on its own
 * event, made active at once, and goes on from outbound's callbacks. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/admission/internal.h"
#include "ckube/json.h"
#include "ckube/metrics.h"
#include "ckube/patch.h"
#include "common/text.h"
#include "common/xalloc.h"

/* ---- matching ----------------------------------------------------------------- */

static bool exact_or_wildcard(char **items, size_t n, const char *want)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(items[i], "*") || !strcmp(items[i], want))
            return true;
    return false;
}

static unsigned op_bit(const char *op)
{
    return !strcmp(op, "CREATE")   ? ADM_OP_CREATE
           : !strcmp(op, "UPDATE") ? ADM_OP_UPDATE
           : !strcmp(op, "DELETE") ? ADM_OP_DELETE
                                   : ADM_OP_CONNECT;
}

static bool is_namespace_resource(const adm_attrs *at)
{
    return !*at->group && !strcmp(at->resource, "namespaces");
}

static bool rule_matches(const adm_rule *r, const adm_attrs *at)
{
    bool cluster = is_namespace_resource(at) || !at->ns || !*at->ns;
    if ((r->scope == ADM_SCOPE_CLUSTER && !cluster) ||
        (r->scope == ADM_SCOPE_NAMESPACED && cluster) || r->scope == ADM_SCOPE_NONE)
        return false;
    if (!(r->ops & op_bit(at->operation)) || !exact_or_wildcard(r->groups, r->ngroups, at->group) ||
        !exact_or_wildcard(r->versions, r->nversions, at->version))
        return false;
    for (size_t i = 0; i < r->nresources; i++) {
        const char *res = r->resources[i];
        const char *slash = strchr(res, '/');
        size_t rlen = slash ? (size_t)(slash - res) : strlen(res);
        const char *sub = slash ? slash + 1 : "";
        bool res_match = (rlen == 1 && *res == '*') ||
                         (strlen(at->resource) == rlen && !strncmp(res, at->resource, rlen));
        bool sub_match = !strcmp(sub, "*") || !strcmp(sub, at->subresource);
        if (res_match && sub_match)
            return true;
    }
    return false;
}

static const char *label_of(void *ctx, const char *key)
{
    return json_string_value(json_object_get(ctx, key));
}

static bool labels_match(const ckube_selector *sel, const json_t *obj)
{
    json_t *labels = ckube_json_get_path(obj, "metadata.labels");
    json_t *empty = NULL;
    if (!labels)
        labels = empty = json_object();
    bool m = ckube_selector_matches(sel, label_of, labels);
    json_decref(empty);
    return m;
}

/* The namespace's labels: of the object itself for a namespace, of the
 * request's namespace otherwise; cluster-scoped objects always match. */
static bool namespace_matches(admission *a, const adm_hook *h, const adm_attrs *at,
                              const json_t *obj, const json_t *old)
{
    if (!h->ns_sel)
        return true;
    if (is_namespace_resource(at))
        return labels_match(h->ns_sel, obj ? obj : old);
    if (!at->ns || !*at->ns)
        return true;
    char key[512];
    snprintf(key, sizeof key, "/registry/core/namespaces/%s", at->ns);
    cobj *ns = cacher_get(a->cache, key);
    json_t *nsobj = ns ? cobj_decode(ns) : NULL;
    cobj_unref(ns);
    bool m = labels_match(h->ns_sel, nsobj);
    json_decref(nsobj);
    return m;
}

static bool object_matches(const adm_hook *h, const json_t *obj, const json_t *old)
{
    if (!h->obj_sel)
        return true;
    return (obj && labels_match(h->obj_sel, obj)) || (old && labels_match(h->obj_sel, old));
}

/* Upstream never sends these to webhooks (rules.IsExemptAdmissionConfigurationResource). */
static bool exempt(const adm_attrs *at)
{
    if (strcmp(at->group, "admissionregistration.k8s.io"))
        return false;
    static const char *const kinds[] = {
        "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",      "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",        "MutatingAdmissionPolicyBinding"};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        if (!strcmp(at->kind, kinds[i]))
            return true;
    return false;
}

/* The other versions of the request's resource (upstream's
 * EquivalentResourceMapper): a CRD's other served versions. Listed once
 * per run, when a webhook asks. */
typedef struct equivalents {
    bool found;
    resource_type **all; /* registry_list's snapshot */
    size_t nall;
} equivalents;

static bool is_equivalent(const resource_type *t, const resource_type *o)
{
    return o != t && t->is_custom && o->is_custom && t->crd_name && o->crd_name &&
           !strcmp(t->crd_name, o->crd_name) && !strcmp(o->group, t->group) &&
           !strcmp(o->resource, t->resource) && strcmp(o->version, t->version);
}

/* Whether h matches: its rules against the request, then (matchPolicy
 * Equivalent) rule by rule against the resource's other versions, as
 * upstream's ShouldCallHook; *eq is the version matched that way (NULL:
 * the request's own). */
static bool hook_matches(admission *a, const adm_hook *h, const adm_attrs *at, const json_t *obj,
                         const json_t *old, equivalents *eqs, const resource_type **eq)
{
    bool any = false;
    *eq = NULL;
    for (size_t i = 0; i < h->nrules && !any; i++)
        any = rule_matches(&h->rules[i], at);
    /* (a /scale write's Scale is the same in every version: no conversion) */
    if (!any && !h->exact && at->type && at->reg && at->type->is_custom && !at->kind_group) {
        if (!eqs->found) {
            eqs->found = true;
            eqs->all = registry_list(at->reg, &eqs->nall);
        }
        for (size_t i = 0; i < h->nrules && !any; i++) {
            for (size_t k = 0; k < eqs->nall && !any; k++) {
                const resource_type *o = eqs->all[k];
                if (!is_equivalent(at->type, o))
                    continue;
                adm_attrs at2 = *at;
                at2.version = o->version;
                at2.kind = o->kind;
                if (rule_matches(&h->rules[i], &at2)) {
                    any = true;
                    *eq = o;
                }
            }
        }
    }
    return any && namespace_matches(a, h, at, obj, old) && object_matches(h, obj, old);
}

/* ---- a run -------------------------------------------------------------------- */

/* Outcomes of one webhook call. */
typedef enum {
    OUT_PENDING,
    OUT_ALLOWED,
    OUT_CALLING, /* could not get a usable answer: failurePolicy decides */
    OUT_REFUSED, /* denied, or an error no policy forgives */
} outcome;

typedef struct slot {
    adm_run *run;
    const adm_hook *h;
    int index;  /* for annotation keys */
    bool again; /* mutating: to be asked again in round 1 */
    bool asked; /* mutating: asked in round 0 */
    outbound_call *call;
    char uid[40];
    outcome out;
    ckube_status *st; /* OUT_CALLING / OUT_REFUSED */
    /* For the metrics (observe): when the call started and answered
     * (0: settled without a call), the HTTP code upstream reports for
     * the outcome, and whether a refusal is the webhook's own (a denial)
     * or the server's (a patch that does not apply, a conversion). */
    double t0, t_end;
    int code;
    bool denied, observed;
    /* Matched through an equivalent version (a type of the run's
     * snapshot), the objects converted to it, and a conversion running
     * for the slot (through conv_type's hooks). */
    const resource_type *eq;
    json_t *vobj, *vold;
    resource_conversion *conv;
    const resource_type *conv_type;
} slot;

struct adm_run {
    admission *a;
    outbound *o;
    adm_snapshot *snap;
    bool mutating;
    adm_attrs at;
    json_t *obj;
    const json_t *old;
    const adm_callbacks *cb;
    void *arg;
    slot *slots;
    size_t n, next, pending;
    int round;
    struct event *ev;
    char *name;      /* at.name, kept: a patch may free the object's own */
    json_t *options; /* at.options' result, built once a webhook matched */
    equivalents eqs;
    double t0; /* when admission was asked (the step's metrics) */
};

static void run_free(adm_run *r)
{
    for (size_t i = 0; i < r->n; i++) {
        slot *s = &r->slots[i];
        if (s->call)
            outbound_cancel(s->call);
        if (s->conv)
            s->conv_type->convert_cancel(s->conv);
        json_decref(s->vobj);
        json_decref(s->vold);
        ckube_status_free(s->st);
    }
    registry_list_free(r->eqs.all, r->eqs.nall);
    free(r->slots);
    free(r->name);
    json_decref(r->options);
    if (r->ev)
        event_free(r->ev);
    adm_snapshot_unref(r->snap);
    free(r);
}

/* ---- the step's metrics ------------------------------------------------------- */

static double now_s(void);

/* A child of fam for `labels`, resolved once into *cached (any thread
 * may be first; the registry hands both the same child). */
static ckube_metric *phase_child(ckube_metric_family *fam, _Atomic(ckube_metric *) *cached,
                                 const char *const *labels)
{
    ckube_metric *m = atomic_load_explicit(cached, memory_order_acquire);
    if (!m) {
        m = ckube_metric_with(fam, labels);
        atomic_store_explicit(cached, m, memory_order_release);
    }
    return m;
}

/* Upstream's step and controller metrics for one ask of admission: the
 * time from the ask to the answer, rejected when it refused. */
static void observe_phase(admission *a, bool mutating, const char *operation, bool rejected,
                          double seconds)
{
    if (!a || !a->m_step)
        return;
    static const char *const ops[] = {"CREATE", "UPDATE", "DELETE", "CONNECT"};
    int op = (int)op_bit(operation);
    int oi = op == ADM_OP_CREATE ? 0 : op == ADM_OP_UPDATE ? 1 : op == ADM_OP_DELETE ? 2 : 3;
    const char *type = mutating ? "admit" : "validate";
    const char *rej = rejected ? "true" : "false";
    const char *name = mutating ? "MutatingAdmissionWebhook" : "ValidatingAdmissionWebhook";
    ckube_histogram_observe(phase_child(a->m_step, &a->step_child[mutating][oi][rejected],
                                        (const char *[]){type, ops[oi], rej}),
                            seconds);
    ckube_histogram_observe(
        phase_child(a->m_controller, &a->controller_child[mutating][oi][rejected],
                    (const char *[]){name, type, ops[oi], rej}),
        seconds);
}

static void run_finish(adm_run *r, ckube_status *st)
{
    const adm_callbacks *cb = r->cb;
    void *arg = r->arg;
    observe_phase(r->a, r->mutating, r->at.operation, st != NULL, now_s() - r->t0);
    run_free(r);
    cb->done(arg, st);
}

static void annotate(adm_run *r, const char *key, const char *value)
{
    if (r->cb->annotate)
        r->cb->annotate(r->arg, key, value);
}

/* upstream's apierrors.NewInternalError(err). */
static ckube_status *internal_error(const char *msg)
{
    ckube_status *st = ckube_status_internal("Internal error occurred: %s", msg);
    ckube_status_add_cause(st, NULL, NULL, "%s", msg);
    return st;
}

/* A failure to get a usable answer (webhookutil.ErrCallingWebhook). */
/* `code` is the HTTP code upstream's metrics give the failure: 503 (its
 * "error calling webhook" ServiceUnavailable) for a transport failure or
 * an answer that is no usable review, the answer's own code when the
 * webhook answered with an error, 400 when no review could be made. */
static void calling_error(slot *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void calling_error(slot *s, int code, const char *fmt, ...)
{
    char reason[4096], msg[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    /* a parser's error may quote the answer's bytes: keep the message
     * UTF-8, as a Status must be */
    json_t *probe = json_string(reason);
    if (!probe)
        for (unsigned char *p = (unsigned char *)reason; *p; p++)
            if (*p >= 0x80 || *p < 0x20)
                *p = '?';
    json_decref(probe);
    snprintf(msg, sizeof msg, "failed calling webhook \"%s\": %s", s->h->name, reason);
    ckube_status_free(s->st);
    s->st = internal_error(msg);
    s->out = OUT_CALLING;
    s->code = code;
}

/* A refusal of the server's own (an internal error, a dry run the
 * webhook cannot take): upstream's metrics count it with code 0. */
static void refused(slot *s, ckube_status *st)
{
    ckube_status_free(s->st);
    s->st = st;
    s->out = OUT_REFUSED;
    s->code = 0;
    s->denied = false;
}

/* The webhook said no: its Status, its code. */
static void denied(slot *s, ckube_status *st)
{
    refused(s, st);
    s->code = st ? st->code : 400;
    s->denied = true;
}

/* webhookerrors.ToStatusErr: the webhook's Status, its message prefixed. */
static ckube_status *denial(const adm_hook *h, const json_t *result)
{
    const char *msg = json_string_value(json_object_get(result, "message"));
    const char *reason = json_string_value(json_object_get(result, "reason"));
    json_t *code = json_object_get(result, "code");
    int c = json_is_integer(code) ? (int)json_integer_value(code) : 0;
    if (c < 400)
        c = 400;
    ckube_status *st;
    if (msg && *msg)
        st = ckube_status_new(c, NULL, "admission webhook \"%s\" denied the request: %s", h->name,
                              msg);
    else if (reason && *reason)
        st = ckube_status_new(c, NULL, "admission webhook \"%s\" denied the request: %s", h->name,
                              reason);
    else
        st = ckube_status_new(c, NULL,
                              "admission webhook \"%s\" denied the request without "
                              "explanation",
                              h->name);
    if (reason && *reason)
        st->reason = xstrdup(reason);
    const json_t *d = json_object_get(result, "details");
    if (json_is_object(d)) {
        const char *n = json_string_value(json_object_get(d, "name"));
        const char *g = json_string_value(json_object_get(d, "group"));
        const char *k = json_string_value(json_object_get(d, "kind"));
        if (n || g || k) {
            st->has_details = 1;
            st->name = n ? xstrdup(n) : NULL;
            st->group = g ? xstrdup(g) : NULL;
            st->kind = k ? xstrdup(k) : NULL;
        }
        size_t i;
        json_t *cause;
        json_array_foreach(json_object_get(d, "causes"), i, cause)
        {
            ckube_status_add_cause(st, json_string_value(json_object_get(cause, "reason")),
                                   json_string_value(json_object_get(cause, "field")), "%s",
                                   json_string_value(json_object_get(cause, "message"))
                                       ? json_string_value(json_object_get(cause, "message"))
                                       : "");
        }
    }
    return st;
}

/* ---- the AdmissionReview ------------------------------------------------------ */

static json_t *gvk(const char *g, const char *v, const char *k)
{
    return json_pack("{s:s,s:s,s:s}", "group", g, "version", v, "kind", k);
}

static json_t *gvr(const char *g, const char *v, const char *r)
{
    return json_pack("{s:s,s:s,s:s}", "group", g, "version", v, "resource", r);
}

static char *review_body(const slot *s, size_t *len)
{
    const adm_run *r = s->run;
    const adm_attrs *at = &r->at;
    json_t *req = json_object();
    json_object_set_new(req, "uid", json_string(s->uid));
    /* kind and resource: what the webhook matched; requestKind and
     * requestResource: what the client asked for */
    const char *v = s->eq ? s->eq->version : at->version;
    const char *kg = at->kind_group ? at->kind_group : at->group;
    const char *kv = at->kind_version ? at->kind_version : v;
    json_object_set_new(req, "kind", gvk(kg, kv, s->eq ? s->eq->kind : at->kind));
    json_object_set_new(req, "resource", gvr(at->group, v, at->resource));
    if (*at->subresource)
        json_object_set_new(req, "subResource", json_string(at->subresource));
    json_object_set_new(req, "requestKind",
                        gvk(kg, at->kind_version ? at->kind_version : at->version, at->kind));
    json_object_set_new(req, "requestResource", gvr(at->group, at->version, at->resource));
    if (*at->subresource)
        json_object_set_new(req, "requestSubResource", json_string(at->subresource));
    if (at->name && *at->name)
        json_object_set_new(req, "name", json_string(at->name));
    if (at->ns && *at->ns)
        json_object_set_new(req, "namespace", json_string(at->ns));
    json_object_set_new(req, "operation", json_string(at->operation));
    json_object_set_new(req, "userInfo",
                        at->user ? auth_user_info_json(at->user)
                                 : json_pack("{s:s}", "username", ""));
    const json_t *obj = s->eq ? s->vobj : r->obj, *old = s->eq ? s->vold : r->old;
    json_object_set(req, "object", obj ? (json_t *)obj : json_null());
    json_object_set(req, "oldObject", old ? (json_t *)old : json_null());
    json_object_set_new(req, "dryRun", json_boolean(at->dry_run));
    json_object_set(req, "options", r->options ? r->options : json_null());
    json_t *review = json_pack("{s:s,s:s,s:o}", "kind", "AdmissionReview", "apiVersion",
                               !strcmp(s->h->review_version, "v1") ? "admission.k8s.io/v1"
                                                                   : "admission.k8s.io/v1beta1",
                               "request", req);
    char *body = ckube_json_dumps(review, len);
    json_decref(review);
    return body;
}

/* {"configuration":..,"webhook":..,...} as upstream's annotation values. */
static void annotate_json(adm_run *r, const char *prefix, const slot *s, json_t *extra)
{
    char key[160];
    snprintf(key, sizeof key, "%sround_%d_index_%d", prefix, r->round, s->index);
    json_t *v = json_pack("{s:s,s:s}", "configuration", s->h->config, "webhook", s->h->name);
    json_object_update(v, extra);
    json_decref(extra);
    char *text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    annotate(r, key, text);
    free(text);
    json_decref(v);
}

/* Applies a mutating webhook's JSON Patch to the run's object. Returns
 * whether it changed the object; a failure is recorded in s. */
static bool apply_patch(slot *s, const json_t *resp)
{
    adm_run *r = s->run;
    /* the object in the version the webhook was sent */
    json_t *target = s->eq ? s->vobj : r->obj;
    const char *b64 = json_string_value(json_object_get(resp, "patch"));
    size_t plen = 0;
    char *raw = b64 ? ckube__base64_decode(b64, strlen(b64), &plen) : NULL;
    json_error_t jerr;
    json_t *patch = raw ? json_loadb(raw, plen, 0, &jerr) : NULL;
    free(raw);
    if (!json_is_array(patch)) {
        calling_error(s, 503, "received undecodable patch in webhook response: %s",
                      !b64 || !patch ? "illegal base64 data or invalid JSON"
                                     : "json: cannot unmarshal object into Go value of type "
                                       "jsonpatch.Patch");
        json_decref(patch);
        return false;
    }
    if (!json_array_size(patch)) {
        json_decref(patch);
        return false;
    }
    if (!target) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "admission webhook \"%s\" attempted to modify the object, which is not supported "
                 "for this operation",
                 s->h->name);
        refused(s, internal_error(msg));
        json_decref(patch);
        return false;
    }
    char *err = NULL;
    json_t *out = ckube_json_patch_apply(target, patch, &err);
    if (!out || !json_is_object(out)) {
        refused(s, internal_error(err ? err : "the patch did not produce an object"));
        free(err);
        json_decref(out);
        json_decref(patch);
        return false;
    }
    const char *keep[] = {"apiVersion", "kind"};
    for (size_t i = 0; i < 2; i++) {
        if (!json_equal(json_object_get(out, keep[i]), json_object_get(target, keep[i]))) {
            char msg[512];
            snprintf(msg, sizeof msg, "admission webhook \"%s\" changed the object's %s",
                     s->h->name, keep[i]);
            refused(s, internal_error(msg));
            json_decref(out);
            json_decref(patch);
            return false;
        }
    }
    bool changed = !json_equal(out, target);
    annotate_json(r, "patch.webhook.admission.k8s.io/", s,
                  json_pack("{s:O,s:s}", "patch", patch, "patchType", "JSONPatch"));
    json_object_clear(target);
    json_object_update(target, out);
    json_decref(out);
    json_decref(patch);
    return changed;
}

/* The webhook's answer: allowed, denied, or not usable. Returns whether a
 * mutating webhook changed the object. */
static bool take_answer(slot *s, const outbound_result *res)
{
    adm_run *r = s->run;
    if (res->error) {
        calling_error(s, 503, "failed to call webhook: %s", res->error);
        return false;
    }
    size_t blen = evbuffer_get_length(res->body);
    const char *bytes = (const char *)evbuffer_pullup(res->body, -1);
    json_error_t jerr;
    json_t *review = blen ? json_loadb(bytes, blen, 0, &jerr) : NULL;
    if (res->status < 200 || res->status > 299) {
        const char *m = json_string_value(json_object_get(review, "message"));
        /* client-go's error for it: the answer's Status (with its code)
         * when it is one, else the HTTP code */
        const json_t *c = json_object_get(review, "code");
        int code = json_is_integer(c) && json_integer_value(c) > 0 && json_integer_value(c) < 1000
                       ? (int)json_integer_value(c)
                       : res->status;
        if (m)
            calling_error(s, code, "failed to call webhook: %s", m);
        else
            calling_error(s, code,
                          "failed to call webhook: the server responded with the status code %d "
                          "but did not return more information",
                          res->status);
        json_decref(review);
        return false;
    }
    if (!json_is_object(review)) {
        calling_error(s, 503,
                      "failed to call webhook: couldn't get version/kind; json parse error: %s",
                      review ? "not a JSON object" : jerr.text);
        json_decref(review);
        return false;
    }
    const char *want =
        !strcmp(s->h->review_version, "v1") ? "admission.k8s.io/v1" : "admission.k8s.io/v1beta1";
    const char *av = json_string_value(json_object_get(review, "apiVersion"));
    const char *kind = json_string_value(json_object_get(review, "kind"));
    const json_t *resp = json_object_get(review, "response");
    bool changed = false;
    if (!json_is_object(resp)) {
        calling_error(s, 503, "received invalid webhook response: webhook response was absent");
    } else if (strcmp(json_string_value(json_object_get(resp, "uid")) ?: "", s->uid)) {
        calling_error(s, 503,
                      "received invalid webhook response: expected response.uid=\"%s\", got \"%s\"",
                      s->uid, json_string_value(json_object_get(resp, "uid")) ?: "");
    } else if (!av || !kind || strcmp(av, want) || strcmp(kind, "AdmissionReview")) {
        calling_error(s, 503,
                      "received invalid webhook response: expected webhook response of %s, "
                      "Kind=AdmissionReview, got %s, Kind=%s",
                      want, av ? av : "", kind ? kind : "");
    } else {
        const json_t *patch = json_object_get(resp, "patch");
        const json_t *ptype = json_object_get(resp, "patchType");
        bool has_patch = json_string_length(patch) > 0;
        if (r->mutating && has_patch && !ptype)
            calling_error(s, 503,
                          "received invalid webhook response: webhook returned response.patch "
                          "but not response.patchType");
        else if (r->mutating && !has_patch && ptype)
            calling_error(s, 503,
                          "received invalid webhook response: webhook returned "
                          "response.patchType but not response.patch");
        else if (!r->mutating && has_patch)
            calling_error(s, 503,
                          "received invalid webhook response: validating webhook may not "
                          "return response.patch");
        else if (!r->mutating && ptype)
            calling_error(s, 503,
                          "received invalid webhook response: validating webhook may not "
                          "return response.patchType");
        else {
            const char *k;
            json_t *v;
            json_object_foreach((json_t *)json_object_get(resp, "auditAnnotations"), k, v)
            {
                char key[512];
                snprintf(key, sizeof key, "%s/%s", s->h->name, k);
                if (json_is_string(v))
                    annotate(r, key, json_string_value(v));
            }
            size_t i;
            json_array_foreach(json_object_get(resp, "warnings"), i, v)
            {
                if (json_is_string(v) && r->cb->warn)
                    r->cb->warn(r->arg, json_string_value(v));
            }
            if (!json_is_true(json_object_get(resp, "allowed"))) {
                denied(s, denial(s->h, json_object_get(resp, "status")));
            } else if (has_patch) {
                const char *pt = json_string_value(ptype);
                /* upstream's code for it: the response's Status's, at
                 * least 400 (webhookerrors.ToStatusErr) */
                const json_t *c = json_object_get(json_object_get(resp, "status"), "code");
                int code = json_is_integer(c) && json_integer_value(c) >= 400 &&
                                   json_integer_value(c) < 1000
                               ? (int)json_integer_value(c)
                               : 400;
                if (!pt || strcmp(pt, "JSONPatch"))
                    calling_error(s, code, "unsupported patch type \"%s\"", pt ? pt : "");
                else
                    changed = apply_patch(s, resp);
                if (s->out == OUT_PENDING)
                    s->out = OUT_ALLOWED;
            } else {
                s->out = OUT_ALLOWED;
            }
        }
    }
    json_decref(review);
    return changed;
}

/* ---- calling ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void step(adm_run *r);

/* The end of a slot's answer: annotations, reinvocation, the next step. */
static void answered(slot *s, bool changed)
{
    adm_run *r = s->run;
    if (r->mutating) {
        annotate_json(r, "mutation.webhook.admission.k8s.io/", s,
                      json_pack("{s:b}", "mutated", changed));
        /* A change makes every earlier IfNeeded webhook worth asking again. */
        if (changed && r->round == 0)
            for (size_t i = 0; i < r->n; i++)
                if (&r->slots[i] != s && r->slots[i].asked && r->slots[i].h->reinvoke)
                    r->slots[i].again = true;
    }
    r->pending--;
    step(r);
}

/* Objects converted for a webhook matched through another version:
 * the conversion's array, or NULL when it failed (the slot is then
 * refused with an internal error; st taken). */
static json_t *conversion_result(slot *s, json_t *objs, ckube_status *st)
{
    s->conv = NULL;
    if (objs)
        return objs;
    refused(s, internal_error(st && st->message ? st->message : "conversion failed"));
    ckube_status_free(st);
    return NULL;
}

/* The patched object, back in the request's version, replaces the run's. */
static void converted_back(void *arg, json_t *objs, ckube_status *st)
{
    slot *s = arg;
    adm_run *r = s->run;
    s->conv_type = NULL;
    objs = conversion_result(s, objs, st);
    json_t *o = json_array_get(objs, 0);
    if (o && r->obj) {
        json_object_clear(r->obj);
        json_object_update(r->obj, o);
    }
    json_decref(objs);
    answered(s, o != NULL);
}

/* Converts objs (taken) to `to`'s version for slot s, then cb: at once
 * for types without a convert hook (a CRD whose conversion strategy is
 * None: versions differ only in apiVersion), else through to->convert
 * (cb runs later). */
static void convert_for(slot *s, const resource_type *to, json_t *objs, resource_convert_cb cb)
{
    adm_run *r = s->run;
    if (to->convert) {
        s->conv_type = to;
        s->conv = to->convert(to, r->o, r->a->cache, objs, false, false, cb, s);
        json_decref(objs);
        return;
    }
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        json_t *c = json_deep_copy(o);
        json_object_set_new(c, "apiVersion", json_string(to->api_version));
        json_array_set_new(objs, i, c);
    }
    cb(s, objs, NULL);
}

static void on_answer(void *arg, const outbound_result *res)
{
    slot *s = arg;
    adm_run *r = s->run;
    s->call = NULL;
    s->t_end = now_s();
    bool changed = take_answer(s, res);
    if (changed && s->eq && r->obj && r->at.type) {
        convert_for(s, r->at.type, json_pack("[O]", s->vobj), converted_back);
        return;
    }
    answered(s, changed);
}

/* Sends slot s's review (its objects ready), or settles it (a Service
 * that does not resolve). */
static void post_review(slot *s)
{
    adm_run *r = s->run;
    const adm_hook *h = s->h;
    ckube_uuid4(s->uid, sizeof s->uid);
    char err[2600];
    size_t len;
    char *body = review_body(s, &len);
    s->call = hook_client_post(&h->client, r->o, r->a->cache, h->timeout_s, body, len, on_answer, s,
                               err, sizeof err);
    free(body);
    if (!s->call) {
        calling_error(s, 503, "failed to call webhook: %s", err);
        return;
    }
    r->pending++;
}

/* The objects in the webhook's version: the review goes out. */
static void converted_to(void *arg, json_t *objs, ckube_status *st)
{
    slot *s = arg;
    adm_run *r = s->run;
    bool async = s->conv_type != NULL;
    s->conv_type = NULL;
    objs = conversion_result(s, objs, st);
    if (objs) {
        size_t k = 0;
        s->vobj = r->obj ? json_incref(json_array_get(objs, k++)) : NULL;
        s->vold = r->old ? json_incref(json_array_get(objs, k)) : NULL;
        json_decref(objs);
        post_review(s);
    }
    if (async) {
        r->pending--; /* the conversion's; the call's is counted by post_review */
        if (!s->call)
            step(r); /* settled without a call */
    }
}

/* Starts slot s's call, or settles it at once (a dry run it cannot take,
 * a Service that does not resolve). A webhook matched through another
 * version gets the objects converted to it first. */
static void start_call(slot *s)
{
    adm_run *r = s->run;
    const adm_hook *h = s->h;
    s->out = OUT_PENDING;
    s->asked = true;
    s->t0 = now_s();
    s->t_end = 0;
    s->observed = s->denied = false;
    s->code = 0;
    if (r->at.dry_run) {
        if (!h->side_effects_set) {
            calling_error(s, 400, "Webhook SideEffects is nil");
            return;
        }
        if (!h->side_effects_none) {
            refused(s, ckube_status_bad_request("admission webhook \"%s\" does not support dry run",
                                                h->name));
            return;
        }
    }
    if (!h->review_version) {
        calling_error(s, 400,
                      "could not create admission objects: webhook does not accept known "
                      "AdmissionReview versions (v1, v1beta1)");
        return;
    }
    if (!s->eq) {
        post_review(s);
        return;
    }
    /* the objects as they are now (a reinvocation sees earlier patches) */
    json_decref(s->vobj);
    json_decref(s->vold);
    s->vobj = s->vold = NULL;
    json_t *objs = json_array();
    if (r->obj)
        json_array_append(objs, r->obj);
    if (r->old)
        json_array_append(objs, (json_t *)r->old);
    if (s->eq->convert)
        r->pending++; /* until converted_to */
    convert_for(s, s->eq, objs, converted_to);
}

/* A settled slot under its failure policy: true when the run goes on. */
static bool settle(adm_run *r, slot *s)
{
    if (s->out == OUT_ALLOWED)
        return true;
    if (s->out == OUT_CALLING && s->h->ignore) {
        char key[160];
        snprintf(key, sizeof key, "failed-open.%s.webhook.admission.k8s.io/round_%d_index_%d",
                 r->mutating ? "mutation" : "validating", r->round, s->index);
        annotate(r, key, s->h->name);
        return true;
    }
    return false;
}

/* Counts a settled call as upstream's dispatchers do (admission/metrics:
 * ObserveWebhook, ObserveWebhookRejection, ObserveWebhookFailOpen): once
 * per call, reinvocations included; "rejected" when the call ends the
 * request (a denial, a server error, a failure under failurePolicy
 * Fail), type "admit" for mutating webhooks and "validating" for
 * validating ones, codes above 600 reported as 600. */
static void observe(adm_run *r, slot *s)
{
    admission *a = r->a;
    if (!a || !a->m_requests || s->observed || s->out == OUT_PENDING)
        return;
    s->observed = true;
    const char *type = r->mutating ? "admit" : "validating";
    const char *op = r->at.operation ? r->at.operation : "";
    bool calling = s->out == OUT_CALLING;
    bool rejected = s->out == OUT_REFUSED || (calling && !s->h->ignore);
    int code = s->out == OUT_ALLOWED ? 200 : s->code > 600 ? 600 : s->code;
    char cs[16];
    snprintf(cs, sizeof cs, "%d", code);
    const char *rej = rejected ? "true" : "false";
    ckube_counter_inc(
        ckube_metric_with(a->m_requests, (const char *[]){s->h->name, type, op, cs, rej}));
    double end = s->t_end > 0 ? s->t_end : s->t0;
    ckube_histogram_observe(
        ckube_metric_with(a->m_latency, (const char *[]){s->h->name, type, op, rej}),
        end > s->t0 ? end - s->t0 : 0);
    if (rejected) {
        const char *et = calling     ? "calling_webhook_error"
                         : s->denied ? "no_error"
                                     : "apiserver_internal_error";
        ckube_counter_inc(
            ckube_metric_with(a->m_rejections, (const char *[]){s->h->name, type, op, et, cs}));
    } else if (calling) {
        ckube_counter_inc(ckube_metric_with(a->m_fail_open, (const char *[]){s->h->name, type}));
    }
}

static void step_mutating(adm_run *r)
{
    for (;;) {
        if (r->pending)
            return;
        if (r->next > 0) {
            slot *prev = &r->slots[r->next - 1];
            observe(r, prev);
            if (prev->out != OUT_PENDING && !settle(r, prev)) {
                ckube_status *st = prev->st;
                prev->st = NULL;
                run_finish(r, st);
                return;
            }
        }
        /* The next webhook to ask in this round. */
        while (r->next < r->n && r->round == 1 && !r->slots[r->next].again)
            r->next++;
        if (r->next == r->n) {
            bool again = false;
            for (size_t i = 0; i < r->n && r->round == 0; i++)
                again |= r->slots[i].again;
            if (!again) {
                run_finish(r, NULL);
                return;
            }
            r->round = 1;
            r->next = 0;
            continue;
        }
        slot *s = &r->slots[r->next++];
        start_call(s);
        if (s->out == OUT_PENDING && s->call)
            return; /* on_answer goes on */
    }
}

static void step_validating(adm_run *r)
{
    if (r->next == 0) {
        r->next = r->n;
        for (size_t i = 0; i < r->n; i++)
            start_call(&r->slots[i]);
    }
    if (r->pending)
        return;
    for (size_t i = 0; i < r->n; i++)
        observe(r, &r->slots[i]);
    for (size_t i = 0; i < r->n; i++) {
        if (!settle(r, &r->slots[i])) {
            ckube_status *st = r->slots[i].st;
            r->slots[i].st = NULL;
            run_finish(r, st);
            return;
        }
    }
    run_finish(r, NULL);
}

static void step(adm_run *r)
{
    if (r->mutating)
        step_mutating(r);
    else
        step_validating(r);
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    step(arg);
}

/* Whether obj (may be NULL) is in another version than t's. */
static bool not_in(const resource_type *t, const json_t *obj)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    return obj && (!av || strcmp(av, t->api_version));
}

adm_run *admission_run(admission *a, outbound *o, bool mutating, const adm_attrs *at, json_t *obj,
                       const json_t *old, const adm_callbacks *cb, void *arg)
{
    double t0 = a->m_step ? now_s() : 0;
    if (exempt(at)) {
        observe_phase(a, mutating, at->operation, false, a->m_step ? now_s() - t0 : 0);
        return NULL;
    }
    adm_snapshot *snap = adm_snapshot_get(a);
    const adm_hook *hooks = mutating ? snap->mutating : snap->validating;
    size_t nhooks = mutating ? snap->nmutating : snap->nvalidating;
    adm_run *r = NULL;
    equivalents eqs = {0};
    for (size_t i = 0; i < nhooks; i++) {
        const resource_type *eq = NULL;
        if (!hook_matches(a, &hooks[i], at, obj, old, &eqs, &eq))
            continue;
        if (!r) {
            r = xcalloc(1, sizeof *r);
            r->slots = xcalloc(nhooks, sizeof *r->slots);
        }
        slot *s = &r->slots[r->n];
        s->run = r;
        s->h = &hooks[i];
        s->eq = eq;
        /* an object not in the request's version (a delete's, as stored,
         * of a CRD that converts through a webhook) goes to the webhook
         * converted to it */
        if (!eq && at->type && at->type->convert &&
            (not_in(at->type, obj) || not_in(at->type, old)))
            s->eq = at->type;
        /* upstream's keys count every mutating webhook, only the matched
         * validating ones */
        s->index = mutating ? (int)i : (int)r->n;
        r->n++;
    }
    if (!r) {
        registry_list_free(eqs.all, eqs.nall);
        adm_snapshot_unref(snap);
        observe_phase(a, mutating, at->operation, false, a->m_step ? now_s() - t0 : 0);
        return NULL;
    }
    r->t0 = t0;
    r->eqs = eqs;
    r->a = a;
    r->o = o;
    r->snap = snap;
    r->mutating = mutating;
    r->at = *at;
    r->name = xstrdup(at->name ? at->name : "");
    r->at.name = r->name;
    r->options = at->options ? at->options(at->options_ctx, at->operation) : NULL;
    r->obj = obj;
    r->old = old;
    r->cb = cb;
    r->arg = arg;
    r->ev = event_new(outbound_base(o), -1, 0, on_start, r);
    event_active(r->ev, EV_TIMEOUT, 0);
    return r;
}

void adm_run_cancel(adm_run *r)
{
    run_free(r);
}

/* ---- for the fuzzer ----------------------------------------------------------- */

static void no_done(void *arg, ckube_status *st)
{
    (void)arg;
    ckube_status_free(st);
}

bool adm__answer(bool mutating, int status, const char *body, size_t len, json_t *obj,
                 ckube_status **st)
{
    static const adm_callbacks cbs = {.done = no_done};
    adm_hook h = {
        .config = "fuzz", .name = "fuzz.example.com", .mutating = mutating, .review_version = "v1"};
    adm_run r = {.mutating = mutating, .obj = obj, .cb = &cbs};
    slot s = {.run = &r, .h = &h};
    snprintf(s.uid, sizeof s.uid, "%s", ADM_FUZZ_UID);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, body, len);
    outbound_result res = {.status = status, .body = b, .content_type = "application/json"};
    bool changed = take_answer(&s, &res);
    evbuffer_free(b);
    *st = s.st;
    return changed;
}
