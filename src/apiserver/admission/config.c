/* The webhook configurations, compiled (internal.h): a snapshot of every
 * Mutating- and ValidatingWebhookConfiguration's webhooks, made again
 * when the cacher reports a change under the group's keys, shared by
 * every loop (reference counted, immutable once made). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/admission/internal.h"
#include "ckube/json.h"
#include "common/text.h"
#include "common/xalloc.h"

#define PREFIX "/registry/admissionregistration.k8s.io/"
#define MUTATING_PREFIX PREFIX "mutatingwebhookconfigurations/"
#define VALIDATING_PREFIX PREFIX "validatingwebhookconfigurations/"

static char **strings_of(const json_t *arr, size_t *n)
{
    *n = json_array_size(arr);
    char **out = xcalloc(*n ? *n : 1, sizeof *out);
    for (size_t i = 0; i < *n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        out[i] = xstrdup(s ? s : "");
    }
    return out;
}

static void strings_free(char **s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

static unsigned ops_of(const json_t *arr)
{
    unsigned ops = 0;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        if (!strcmp(s, "*"))
            ops |= ADM_OP_ALL;
        else if (!strcmp(s, "CREATE"))
            ops |= ADM_OP_CREATE;
        else if (!strcmp(s, "UPDATE"))
            ops |= ADM_OP_UPDATE;
        else if (!strcmp(s, "DELETE"))
            ops |= ADM_OP_DELETE;
        else if (!strcmp(s, "CONNECT"))
            ops |= ADM_OP_CONNECT;
    }
    return ops;
}

/* A LabelSelector, or NULL when it selects everything (absent or empty). */
static ckube_selector *selector_of(const json_t *ls)
{
    if (!json_is_object(ls) || !json_object_size(ls))
        return NULL;
    ckube_selector *sel = NULL;
    if (ckube_label_selector_from_json(ls, &sel, NULL) != 0)
        return NULL; /* validation refused it on the way in */
    if (ckube_selector_empty(sel)) {
        ckube_selector_free(sel);
        return NULL;
    }
    return sel;
}

static void compile_hook(adm_hook *h, const char *config, const json_t *w, bool mutating)
{
    h->config = xstrdup(config);
    const char *name = json_string_value(json_object_get(w, "name"));
    h->name = xstrdup(name ? name : "");
    h->mutating = mutating;
    const json_t *rules = json_object_get(w, "rules");
    h->nrules = json_array_size(rules);
    h->rules = xcalloc(h->nrules ? h->nrules : 1, sizeof *h->rules);
    for (size_t i = 0; i < h->nrules; i++) {
        const json_t *r = json_array_get(rules, i);
        adm_rule *ar = &h->rules[i];
        ar->ops = ops_of(json_object_get(r, "operations"));
        ar->groups = strings_of(json_object_get(r, "apiGroups"), &ar->ngroups);
        ar->versions = strings_of(json_object_get(r, "apiVersions"), &ar->nversions);
        ar->resources = strings_of(json_object_get(r, "resources"), &ar->nresources);
        const char *scope = json_string_value(json_object_get(r, "scope"));
        ar->scope = !scope || !strcmp(scope, "*")  ? ADM_SCOPE_ALL
                    : !strcmp(scope, "Cluster")    ? ADM_SCOPE_CLUSTER
                    : !strcmp(scope, "Namespaced") ? ADM_SCOPE_NAMESPACED
                                                   : ADM_SCOPE_NONE;
    }
    const char *fp = json_string_value(json_object_get(w, "failurePolicy"));
    h->ignore = fp && !strcmp(fp, "Ignore");
    h->ns_sel = selector_of(json_object_get(w, "namespaceSelector"));
    h->obj_sel = selector_of(json_object_get(w, "objectSelector"));
    const char *se = json_string_value(json_object_get(w, "sideEffects"));
    h->side_effects_none = se && (!strcmp(se, "None") || !strcmp(se, "NoneOnDryRun"));
    h->side_effects_set = se != NULL;
    json_t *to = json_object_get(w, "timeoutSeconds");
    h->timeout_s =
        json_is_integer(to) && json_integer_value(to) > 0 ? (unsigned)json_integer_value(to) : 10;
    h->review_version = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(w, "admissionReviewVersions"), i, v)
    {
        const char *s = json_string_value(v);
        if (s && (!strcmp(s, "v1") || !strcmp(s, "v1beta1"))) {
            h->review_version = !strcmp(s, "v1") ? "v1" : "v1beta1";
            break;
        }
    }
    const char *rp = json_string_value(json_object_get(w, "reinvocationPolicy"));
    h->reinvoke = mutating && rp && !strcmp(rp, "IfNeeded");
    const char *mp = json_string_value(json_object_get(w, "matchPolicy"));
    h->exact = mp && !strcmp(mp, "Exact");
    h->has_match_conditions = json_array_size(json_object_get(w, "matchConditions")) > 0;
    hook_client_init(&h->client, json_object_get(w, "clientConfig"));
}

static void hook_free(adm_hook *h)
{
    free(h->config);
    free(h->name);
    for (size_t i = 0; i < h->nrules; i++) {
        strings_free(h->rules[i].groups, h->rules[i].ngroups);
        strings_free(h->rules[i].versions, h->rules[i].nversions);
        strings_free(h->rules[i].resources, h->rules[i].nresources);
    }
    free(h->rules);
    ckube_selector_free(h->ns_sel);
    ckube_selector_free(h->obj_sel);
    hook_client_free(&h->client);
}

/* Every webhook of the configurations under `prefix`, configurations in
 * name order (the cache's key order), webhooks in their order. */
static adm_hook *compile_kind(cacher *c, const char *prefix, bool mutating, size_t *n)
{
    size_t nobjs = 0, more = 0;
    int64_t rev = 0;
    cobj **objs = cacher_list(c, prefix, NULL, NULL, 0, &nobjs, &rev, &more);
    size_t cap = 0, used = 0;
    adm_hook *hooks = NULL;
    for (size_t i = 0; i < nobjs; i++) {
        json_t *cfg = cobj_decode(objs[i]);
        const char *name = ckube_obj_name(cfg);
        size_t k;
        json_t *w;
        json_array_foreach(json_object_get(cfg, "webhooks"), k, w)
        {
            if (used == cap) {
                cap = cap ? 2 * cap : 8;
                hooks = xrealloc(hooks, cap * sizeof *hooks);
            }
            memset(&hooks[used], 0, sizeof *hooks);
            compile_hook(&hooks[used++], name ? name : "", w, mutating);
        }
        json_decref(cfg);
    }
    cacher_objs_free(objs, nobjs);
    *n = used;
    return hooks;
}

static void snapshot_unref(adm_snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (size_t i = 0; i < s->nmutating; i++)
        hook_free(&s->mutating[i]);
    for (size_t i = 0; i < s->nvalidating; i++)
        hook_free(&s->validating[i]);
    free(s->mutating);
    free(s->validating);
    free(s);
}

void adm_snapshot_unref(adm_snapshot *s)
{
    snapshot_unref(s);
}

static void on_change(void *arg, cevent_type type, const cobj *obj)
{
    (void)type;
    (void)obj;
    admission *a = arg;
    atomic_fetch_add(&a->generation, 1);
}

admission *admission_new(cacher *c)
{
    admission *a = xcalloc(1, sizeof *a);
    a->cache = c;
    atomic_init(&a->generation, 1);
    pthread_mutex_init(&a->mu, NULL);
    cacher_add_listener(c, PREFIX, on_change, a);
    return a;
}

void admission_set_metrics(admission *a, ckube_metrics_registry *reg)
{
    /* upstream's help texts and buckets (admission/metrics/metrics.go) */
    static const char *const req[] = {"name", "type", "operation", "code", "rejected", NULL};
    static const char *const lat[] = {"name", "type", "operation", "rejected", NULL};
    static const char *const rej[] = {"name",       "type",           "operation",
                                      "error_type", "rejection_code", NULL};
    static const char *const open[] = {"name", "type", NULL};
    static const double buckets[] = {0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25};
    a->m_requests = ckube_metrics_counter(
        reg, "apiserver_admission_webhook_request_total",
        "Admission webhook request total, identified by name and broken out for each admission "
        "type (validating or mutating) and operation. Additional labels specify whether the "
        "request was rejected or not and an HTTP status code. Codes greater than 600 are "
        "truncated to 600, to keep the metrics cardinality bounded.",
        req);
    a->m_latency = ckube_metrics_histogram(
        reg, "apiserver_admission_webhook_admission_duration_seconds",
        "Admission webhook latency histogram in seconds, identified by name and broken out for "
        "each operation and API resource and type (validate or admit).",
        lat, buckets, sizeof buckets / sizeof *buckets);
    a->m_rejections = ckube_metrics_counter(
        reg, "apiserver_admission_webhook_rejection_count",
        "Admission webhook rejection count, identified by name and broken out for each admission "
        "type (validating or admit) and operation. Additional labels specify an error type "
        "(calling_webhook_error or apiserver_internal_error if an error occurred; no_error "
        "otherwise) and optionally a non-zero rejection code if the webhook rejects the request "
        "with an HTTP status code (honored by the apiserver when the code is greater or equal to "
        "400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality "
        "bounded.",
        rej);
    a->m_fail_open = ckube_metrics_counter(
        reg, "apiserver_admission_webhook_fail_open_count",
        "Admission webhook fail open count, identified by name and broken out for each admission "
        "type (validating or mutating).",
        open);
    static const char *const step[] = {"type", "operation", "rejected", NULL};
    static const char *const ctl[] = {"name", "type", "operation", "rejected", NULL};
    static const double phase_buckets[] = {0.005, 0.025, 0.1, 0.5, 1.0, 2.5};
    a->m_step = ckube_metrics_histogram(
        reg, "apiserver_admission_step_admission_duration_seconds",
        "Admission sub-step latency histogram in seconds, broken out for each operation and API "
        "resource and step type (validate or admit).",
        step, phase_buckets, sizeof phase_buckets / sizeof *phase_buckets);
    a->m_controller = ckube_metrics_histogram(
        reg, "apiserver_admission_controller_admission_duration_seconds",
        "Admission controller latency histogram in seconds, identified by name and broken out for "
        "each operation and API resource and type (validate or admit).",
        ctl, phase_buckets, sizeof phase_buckets / sizeof *phase_buckets);
}

void admission_free(admission *a)
{
    if (!a)
        return;
    snapshot_unref(a->snap);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

adm_snapshot *adm_snapshot_get(admission *a)
{
    unsigned long gen = atomic_load(&a->generation);
    pthread_mutex_lock(&a->mu);
    if (!a->snap || a->snap_generation != gen) {
        /* The generation is read before listing: a change that lands
         * while listing bumps it again, and the next write compiles. */
        adm_snapshot *s = xcalloc(1, sizeof *s);
        atomic_init(&s->refs, 1);
        s->mutating = compile_kind(a->cache, MUTATING_PREFIX, true, &s->nmutating);
        s->validating = compile_kind(a->cache, VALIDATING_PREFIX, false, &s->nvalidating);
        snapshot_unref(a->snap);
        a->snap = s;
        a->snap_generation = gen;
    }
    adm_snapshot *s = a->snap;
    atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&a->mu);
    return s;
}

size_t admission_webhook_count(admission *a)
{
    adm_snapshot *s = adm_snapshot_get(a);
    size_t n = s->nmutating + s->nvalidating;
    snapshot_unref(s);
    return n;
}
