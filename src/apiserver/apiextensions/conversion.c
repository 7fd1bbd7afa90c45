/* CRD conversion webhooks; see conversion.h. */
#include "apiserver/apiextensions/conversion.h"

#include <event2/event.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/outbound/outbound.h"
#include "apiserver/webhook/client.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/xalloc.h"

/* Upstream's webhook client gives conversion calls 30 s. */
#define CONVERSION_TIMEOUT_S 30

struct crd_conv {
    atomic_int refs;
    hook_client client;
    const char *review_version; /* "v1", "v1beta1" (static), NULL: none known */
    char *group, *stor;
    char *name; /* the CRD's, for the metrics */
    crd_conv_metrics m;
};

void crd_conv_metrics_init(crd_conv_metrics *m, ckube_metrics_registry *reg)
{
    static const char *const crd[] = {"crd_name", "from_version", "to_version", "succeeded", NULL};
    static const char *const call[] = {"result", "failure_type", NULL};
    /* upstream's buckets: 1 ms doubling 15 times, and 5 ms to 60 s */
    double exp[15];
    for (int i = 0; i < 15; i++)
        exp[i] = 0.001 * (double)(1 << i);
    static const double lat[] = {0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1,
                                 2,     5,    10,   20,   30,  45,  60};
    m->crd_duration =
        ckube_metrics_histogram(reg, "apiserver_crd_conversion_webhook_duration_seconds",
                                "CRD webhook conversion duration in seconds", crd, exp, 15);
    m->requests = ckube_metrics_counter(
        reg, "apiserver_conversion_webhook_request_total",
        "Counter for conversion webhook requests with success/failure and failure error type",
        call);
    m->latency = ckube_metrics_histogram(reg, "apiserver_conversion_webhook_duration_seconds",
                                         "Conversion webhook request latency", call, lat,
                                         sizeof lat / sizeof *lat);
}

crd_conv *crd_conv_new(const json_t *crd, const char *stor, const crd_conv_metrics *m)
{
    const json_t *conv = ckube_json_get_path(crd, "spec.conversion");
    const char *strategy = json_string_value(json_object_get(conv, "strategy"));
    if (!strategy || strcmp(strategy, "Webhook") || !stor)
        return NULL;
    crd_conv *c = xcalloc(1, sizeof *c);
    atomic_init(&c->refs, 1);
    const json_t *hook = json_object_get(conv, "webhook");
    hook_client_init(&c->client, json_object_get(hook, "clientConfig"));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(hook, "conversionReviewVersions"), i, v)
    {
        const char *s = json_string_value(v);
        if (s && (!strcmp(s, "v1") || !strcmp(s, "v1beta1"))) {
            c->review_version = !strcmp(s, "v1") ? "v1" : "v1beta1";
            break;
        }
    }
    c->group = xstrdup(json_string_value(ckube_json_get_path(crd, "spec.group")) ?: "");
    c->stor = xstrdup(stor);
    c->name = xstrdup(json_string_value(ckube_json_get_path(crd, "metadata.name")) ?: "");
    if (m)
        c->m = *m;
    return c;
}

crd_conv *crd_conv_ref(crd_conv *c)
{
    if (c)
        atomic_fetch_add(&c->refs, 1);
    return c;
}

void crd_conv_unref(crd_conv *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    hook_client_free(&c->client);
    free(c->group);
    free(c->stor);
    free(c->name);
    free(c);
}

void cr_priv_free(void *p)
{
    cr_priv *cp = p;
    if (!cp)
        return;
    free(cp->stor);
    crd_conv_unref(cp->conv);
    free(cp);
}

/* ---- reading the answer ------------------------------------------------------ */

/* Go's %T of a decoded JSON value, as upstream's messages print it. */
static const char *go_type(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "map[string]interface {}";
    case JSON_ARRAY:
        return "[]interface {}";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "int64";
    case JSON_REAL:
        return "float64";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "<nil>";
    }
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

/* A field error list's ToAggregate().Error(): one error alone, several
 * in brackets. */
static char *aggregate(const ckube_status *st)
{
    size_t cap = 64;
    for (size_t i = 0; i < st->ncauses; i++)
        cap += strlen(st->causes[i].field ?: "") + strlen(st->causes[i].message ?: "") + 4;
    char *out = xmalloc(cap), *p = out;
    if (st->ncauses > 1)
        *p++ = '[';
    for (size_t i = 0; i < st->ncauses; i++)
        p += sprintf(p, "%s%s: %s", i ? ", " : "", st->causes[i].field ?: "",
                     st->causes[i].message ?: "");
    if (st->ncauses > 1)
        *p++ = ']';
    *p = 0;
    return out;
}

/* upstream's restoreObjectMeta: the original's metadata, with the
 * converted object's labels and annotations (validated when changed).
 * Edits conv; NULL or what is wrong. */
static char *restore_meta(const json_t *orig, json_t *conv)
{
    json_t *cm = json_object_get(conv, "metadata");
    if (!cm)
        return xstrdup("missing metadata in converted object");
    if (!json_is_object(cm))
        return fmt("invalid metadata of type %s in converted object", go_type(cm));
    json_t *om = json_object_get(orig, "metadata");
    json_t *meta = json_is_object(om) ? json_deep_copy(om) : json_object();
    static const char *const fields[] = {"labels", "annotations"};
    for (size_t k = 0; k < 2; k++) {
        const char *fld = fields[k];
        json_t *resp = json_object_get(cm, fld);
        if (!resp || json_is_null(resp)) {
            json_object_del(meta, fld);
            continue;
        }
        if (!json_is_object(resp)) {
            json_decref(meta);
            return fmt("invalid metadata.%s of type %s in converted object", fld, go_type(resp));
        }
        json_t *was = json_object_get(meta, fld);
        if (was && !json_is_null(was) && !json_is_object(was)) {
            json_decref(meta);
            return fmt("invalid metadata.%s of type %s in original object", fld, go_type(was));
        }
        const char *key;
        json_t *val;
        json_object_foreach(resp, key, val)
        {
            if (!json_is_string(val)) {
                json_decref(meta);
                return fmt("metadata.%s[%s] must be a string, but is %s in converted object", fld,
                           key, go_type(val));
            }
        }
        if (!json_equal(was ? was : json_null(), resp) &&
            !(json_object_size(resp) == 0 && json_object_size(was) == 0)) {
            ckube_status *st = ckube_status_new(422, "Invalid", "invalid");
            /* upstream reports annotations at "metadata.annotation" */
            if (k == 0)
                ckube_validate_labels(resp, "metadata.labels", st);
            else
                ckube_validate_annotations(resp, "metadata.annotation", st);
            if (st->ncauses) {
                char *m = aggregate(st);
                ckube_status_free(st);
                json_decref(meta);
                return m;
            }
            ckube_status_free(st);
        }
        json_object_set(meta, fld, resp);
    }
    json_object_set_new(conv, "metadata", meta);
    return NULL;
}

static const char *str_at(const json_t *o, const char *path)
{
    return json_string_value(ckube_json_get_path(o, path)) ?: "";
}

/* upstream's validateConvertedObject. */
static char *same_identity(const json_t *in, const json_t *out)
{
    static const char *const what[][2] = {{"kind", "kind"},
                                          {"metadata.name", "name"},
                                          {"metadata.namespace", "namespace"},
                                          {"metadata.uid", "UID"}};
    for (size_t i = 0; i < 4; i++) {
        const char *a = str_at(in, what[i][0]), *b = str_at(out, what[i][0]);
        if (strcmp(a, b))
            return fmt("must have the same %s: %s != %s", what[i][1], a, b);
    }
    return NULL;
}

/* One converted object checked against its original: NULL (conv edited
 * into what is served) or the message. */
static char *check_converted(const json_t *orig, json_t *conv, const char *want, const char *gvk,
                             bool list, size_t index)
{
    char at[64];
    snprintf(at, sizeof at, list ? "converted object at index %zu" : "object at index %zu", index);
    if (!json_is_object(conv))
        return fmt("conversion webhook for %s returned invalid %s: Object 'Kind' is missing in "
                   "'%s'",
                   gvk, at, json_is_null(conv) ? "null" : go_type(conv));
    const char *av = str_at(conv, "apiVersion");
    if (strcmp(av, want))
        return fmt("conversion webhook for %s returned invalid %s: invalid groupVersion "
                   "(expected %s, received %s)",
                   gvk, at, want, av);
    const char *k0 = str_at(orig, "kind"), *k1 = str_at(conv, "kind");
    if (strcmp(k0, k1))
        return fmt("conversion webhook for %s returned invalid %s: invalid kind (expected %s, "
                   "received %s)",
                   gvk, at, k0, k1);
    char *why = same_identity(orig, conv);
    if (why) {
        char *m = list ? fmt("conversion webhook for %s returned invalid converted object at "
                             "index %zu: %s",
                             gvk, index, why)
                       : fmt("conversion webhook for %s returned invalid object: %s", gvk, why);
        free(why);
        return m;
    }
    why = restore_meta(orig, conv);
    if (why) {
        char *m = list ? fmt("conversion webhook for %s returned invalid metadata in object at "
                             "index %zu: %s",
                             gvk, index, why)
                       : fmt("conversion webhook for %s returned invalid metadata: %s", gvk, why);
        free(why);
        return m;
    }
    return NULL;
}

/* The objects the webhook sent back (a new reference), or NULL and *why
 * (the part after "failed: "). */
static json_t *converted_of(const char *review_version, const char *uid, const json_t *review,
                            char **why)
{
    const char *av = json_string_value(json_object_get(review, "apiVersion")) ?: "";
    const char *kind = json_string_value(json_object_get(review, "kind")) ?: "";
    bool v1 = !strcmp(review_version, "v1");
    const char *expect = v1 ? "apiextensions.k8s.io/v1" : "apiextensions.k8s.io/v1beta1";
    /* v1beta1 answers were never checked for their kind or uid upstream */
    if (v1 && (strcmp(av, expect) || strcmp(kind, "ConversionReview"))) {
        *why = fmt("expected webhook response of %s, Kind=ConversionReview, got %s, Kind=%s",
                   expect, av, kind);
        return NULL;
    }
    const json_t *resp = json_object_get(review, "response");
    if (!json_is_object(resp)) {
        *why = xstrdup("no response provided");
        return NULL;
    }
    const char *got = json_string_value(json_object_get(resp, "uid")) ?: "";
    if (v1 && strcmp(got, uid)) {
        *why = fmt("expected response.uid=\"%s\", got \"%s\"", uid, got);
        return NULL;
    }
    const json_t *result = json_object_get(resp, "result");
    const char *status = json_string_value(json_object_get(result, "status")) ?: "";
    if (strcmp(status, "Success")) {
        const char *m = json_string_value(json_object_get(result, "message"));
        *why = m && *m ? xstrdup(m) : fmt("response.result.status was '%s', not 'Success'", status);
        return NULL;
    }
    const json_t *objs = json_object_get(resp, "convertedObjects");
    return json_is_array(objs) ? json_incref((json_t *)objs) : json_array();
}

/* Makes a message valid UTF-8 (a webhook's words may not be). */
static char *utf8(char *s)
{
    if (!s)
        return xstrdup("conversion failed");
    json_t *probe = json_string(s);
    if (probe) {
        json_decref(probe);
        return s;
    }
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p >= 0x80 || *p < 0x20)
            *p = '?';
    return s;
}

/* The first half of reading an answer: the review itself (the HTTP
 * status, JSON, kind, uid, result). Returns its convertedObjects (a new
 * reference), or NULL with *err. What upstream's metrics count as the
 * webhook call's success or failure. */
static json_t *review_objects(const char *review_version, const char *uid, const char *gvk,
                              int status, const char *body, size_t len, char **err)
{
    *err = NULL;
    json_error_t jerr;
    json_t *review = len ? json_loadb(body, len, 0, &jerr) : NULL;
    if (status < 200 || status > 299) {
        const char *m = json_string_value(json_object_get(review, "message"));
        *err = m ? fmt("conversion webhook for %s failed: %s", gvk, m)
                 : fmt("conversion webhook for %s failed: the server responded with the status "
                       "code %d but did not return more information",
                       gvk, status);
        json_decref(review);
        *err = utf8(*err);
        return NULL;
    }
    if (!json_is_object(review)) {
        *err = fmt("conversion webhook for %s failed: couldn't get version/kind; json parse "
                   "error: %s",
                   gvk,
                   review ? "not a JSON object"
                   : len  ? jerr.text
                          : "unexpected end of JSON input");
        json_decref(review);
        *err = utf8(*err);
        return NULL;
    }
    char *why = NULL;
    json_t *got = converted_of(review_version, uid, review, &why);
    if (!got)
        *err = utf8(fmt("conversion webhook for %s failed: %s", gvk, why));
    free(why);
    json_decref(review);
    return got;
}

/* The second half: the objects sent back (`got`, borrowed) checked
 * against those sent and merged with the ones not sent, or NULL with
 * *err. */
static json_t *merge_objects(const json_t *objs, const json_t *got, const char *want,
                             const char *gvk, bool list, char **err)
{
    *err = NULL;
    size_t sent = 0, i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        if (strcmp(str_at(o, "apiVersion"), want))
            sent++;
    }
    if (json_array_size(got) != sent) {
        *err = fmt("conversion webhook for %s returned %zu objects, expected %zu", gvk,
                   json_array_size(got), sent);
        return NULL;
    }
    json_t *out = json_array();
    size_t next = 0;
    json_array_foreach(objs, i, o)
    {
        if (!strcmp(str_at(o, "apiVersion"), want)) {
            json_array_append(out, o);
            continue;
        }
        json_t *c = json_deep_copy(json_array_get(got, next));
        char *m = c ? check_converted(o, c, want, gvk, list, next)
                    : fmt("conversion webhook for %s returned invalid %s at index %zu: "
                          "Object 'Kind' is missing in 'null'",
                          gvk, list ? "converted object" : "object", next);
        next++;
        if (m) {
            json_decref(c);
            json_decref(out);
            *err = utf8(m);
            return NULL;
        }
        json_array_append_new(out, c);
    }
    return out;
}

json_t *crd_conv__answer(const char *review_version, const char *uid, const json_t *objs,
                         const char *want, const char *gvk, bool list, int status, const char *body,
                         size_t len, char **err)
{
    json_t *got = review_objects(review_version, uid, gvk, status, body, len, err);
    if (!got)
        return NULL;
    json_t *out = merge_objects(objs, got, want, gvk, list, err);
    json_decref(got);
    return out;
}

/* ---- the call ---------------------------------------------------------------- */

struct resource_conversion {
    resource_type *t; /* reference */
    crd_conv *conv;   /* reference */
    json_t *objs;
    char want[300];
    char gvk[400];
    char uid[40];
    bool list;
    resource_convert_cb cb;
    void *arg;
    outbound_call *call;
    struct event *ev; /* a result known before any call: delivered from here */
    json_t *result;   /* for ev */
    ckube_status *st; /* for ev */
    /* for the metrics: the versions converted from and to (empty when
     * nothing needs converting), when the conversion and its call began */
    char from[64], to[64];
    double t0, call_t0;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The webhook call's outcome (apiserver_conversion_webhook_*): "success"
 * once its answer is a good review, else a call failure. */
static void observe_call(resource_conversion *c, bool ok)
{
    const crd_conv_metrics *m = &c->conv->m;
    if (!m->requests)
        return;
    const char *labels[] = {ok ? "success" : "failure",
                            ok ? "" : "conversion_webhook_call_failure"};
    ckube_counter_inc(ckube_metric_with(m->requests, labels));
    ckube_histogram_observe(ckube_metric_with(m->latency, labels), now_s() - c->call_t0);
}

/* The whole conversion's (apiserver_crd_conversion_webhook_duration_seconds),
 * when it converted anything. */
static void observe_conversion(resource_conversion *c, bool ok)
{
    const crd_conv_metrics *m = &c->conv->m;
    if (!m->crd_duration || !c->from[0])
        return;
    const char *labels[] = {c->conv->name, c->from, c->to, ok ? "true" : "false"};
    ckube_histogram_observe(ckube_metric_with(m->crd_duration, labels), now_s() - c->t0);
}

static void conversion_free(resource_conversion *c)
{
    if (c->ev)
        event_free(c->ev);
    json_decref(c->objs);
    json_decref(c->result);
    ckube_status_free(c->st);
    crd_conv_unref(c->conv);
    resource_type_unref(c->t);
    free(c);
}

static ckube_status *failure(char *msg)
{
    ckube_status *st = ckube_status_new(500, NULL, "%s", msg ? msg : "conversion failed");
    free(msg);
    return st;
}

static void deliver(resource_conversion *c, json_t *objs, ckube_status *st)
{
    resource_convert_cb cb = c->cb;
    void *arg = c->arg;
    conversion_free(c);
    cb(arg, objs, st);
}

static void on_deferred(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    resource_conversion *c = arg;
    json_t *objs = c->result;
    ckube_status *st = c->st;
    c->result = NULL;
    c->st = NULL;
    deliver(c, objs, st);
}

static void on_answer(void *arg, const outbound_result *r)
{
    resource_conversion *c = arg;
    c->call = NULL;
    if (r->error) {
        observe_call(c, false);
        observe_conversion(c, false);
        deliver(c, NULL,
                failure(utf8(fmt("conversion webhook for %s failed: %s", c->gvk, r->error))));
        return;
    }
    size_t len = evbuffer_get_length(r->body);
    const char *body = (const char *)evbuffer_pullup(r->body, -1);
    char *err = NULL;
    json_t *out = NULL, *got = review_objects(c->conv->review_version, c->uid, c->gvk, r->status,
                                              body, len, &err);
    observe_call(c, got != NULL);
    if (got)
        out = merge_objects(c->objs, got, c->want, c->gvk, c->list, &err);
    json_decref(got);
    observe_conversion(c, out != NULL);
    deliver(c, out, out ? NULL : failure(err));
}

static char *review_body(resource_conversion *c, size_t *len)
{
    json_t *sent = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(c->objs, i, o)
    {
        if (strcmp(str_at(o, "apiVersion"), c->want))
            json_array_append(sent, o);
    }
    json_t *review =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:o}}", "kind", "ConversionReview", "apiVersion",
                  !strcmp(c->conv->review_version, "v1") ? "apiextensions.k8s.io/v1"
                                                         : "apiextensions.k8s.io/v1beta1",
                  "request", "uid", c->uid, "desiredAPIVersion", c->want, "objects", sent);
    char *s = ckube_json_dumps(review, len);
    json_decref(review);
    return s;
}

static resource_conversion *convert(const resource_type *t, outbound *o, cacher *cache,
                                    json_t *objs, bool to_storage, bool list,
                                    resource_convert_cb cb, void *arg)
{
    cr_priv *p = t->priv;
    resource_conversion *c = xcalloc(1, sizeof *c);
    c->t = resource_type_ref((resource_type *)t);
    c->conv = crd_conv_ref(p->conv);
    c->objs = json_incref(objs);
    c->list = list;
    c->cb = cb;
    c->arg = arg;
    snprintf(c->want, sizeof c->want, "%s/%s", c->conv->group,
             to_storage ? c->conv->stor : t->version);
    const json_t *first = NULL;
    size_t i, n = 0;
    json_t *obj;
    json_array_foreach(objs, i, obj)
    {
        if (strcmp(str_at(obj, "apiVersion"), c->want) && !n++)
            first = obj;
    }
    c->t0 = now_s();
    if (first) {
        snprintf(c->gvk, sizeof c->gvk, "%s, Kind=%s", str_at(first, "apiVersion"),
                 str_at(first, "kind"));
        const char *fv = strrchr(str_at(first, "apiVersion"), '/');
        snprintf(c->from, sizeof c->from, "%s", fv ? fv + 1 : str_at(first, "apiVersion"));
        snprintf(c->to, sizeof c->to, "%s", strrchr(c->want, '/') + 1);
    }
    if (!n) {
        c->result = json_incref(objs);
    } else if (!c->conv->review_version) {
        c->st = failure(xstrdup("no supported conversion review versions"));
        observe_conversion(c, false);
    } else {
        ckube_uuid4(c->uid, sizeof c->uid);
        size_t len;
        char *body = review_body(c, &len);
        char err[2600];
        c->call_t0 = now_s();
        c->call = hook_client_post(&c->conv->client, o, cache, CONVERSION_TIMEOUT_S, body, len,
                                   on_answer, c, err, sizeof err);
        free(body);
        if (c->call)
            return c;
        observe_call(c, false);
        observe_conversion(c, false);
        c->st = failure(utf8(fmt("conversion webhook for %s failed: %s", c->gvk, err)));
    }
    c->ev = event_new(outbound_base(o), -1, 0, on_deferred, c);
    event_active(c->ev, 0, 0);
    return c;
}

static void convert_cancel(resource_conversion *c)
{
    if (!c)
        return;
    if (c->call)
        outbound_cancel(c->call);
    conversion_free(c);
}

void crd_conv_attach(resource_type *t)
{
    t->present = NULL;
    t->to_storage = NULL;
    t->convert = convert;
    t->convert_cancel = convert_cancel;
}
