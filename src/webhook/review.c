/* Answering reviews (ckube/webhook.h): AdmissionReview (admission.k8s.io
 * v1 and v1beta1, answered in the version asked) and ConversionReview
 * (apiextensions.k8s.io/v1), the way controller-runtime's admission and
 * conversion handlers answer them: a denial is a Status with code 403
 * and reason Forbidden unless the handler says otherwise, a mutation is
 * the JSON Patch from the object received to the object wanted, a
 * request that cannot be read is a 400 review answer carrying the
 * error. */
#include "webhook/internal.h"

#include <ckube/patch.h>

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ckube_admission_response {
    bool denied;
    int code;
    char *message;
    json_t *warnings;    /* array */
    json_t *annotations; /* object */
    json_t *object;      /* set_object's, or NULL */
};

static char *vfmt(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        return NULL;
    return s;
}

void ckube_admission_deny(ckube_admission_response *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(r->message);
    r->message = vfmt(fmt, ap);
    va_end(ap);
    r->denied = true;
    r->code = code ? code : 403;
}

void ckube_admission_warn(ckube_admission_response *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *w = vfmt(fmt, ap);
    va_end(ap);
    if (w)
        json_array_append_new(r->warnings, json_string(w));
    free(w);
}

void ckube_admission_annotate(ckube_admission_response *r, const char *key, const char *value)
{
    json_object_set_new(r->annotations, key, json_string(value));
}

void ckube_admission_set_object(ckube_admission_response *r, json_t *obj)
{
    json_decref(r->object);
    r->object = obj;
}

/* ---- replies ------------------------------------------------------------------ */

static void reply_json(wh_reply *out, int code, json_t *doc)
{
    out->code = code;
    out->body = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    out->len = out->body ? strlen(out->body) : 0;
    json_decref(doc);
}

/* A JSON string of s; bytes that are not UTF-8 (a parser's error may
 * quote the request's own) become '?', so the answer is always sent. */
static json_t *text(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j)
        return j;
    char *copy = strdup(s);
    for (unsigned char *p = (unsigned char *)copy; copy && *p; p++)
        if (*p >= 0x80 || *p < 0x20)
            *p = '?';
    j = json_string(copy ? copy : "");
    free(copy);
    return j;
}

static json_t *failure_status(int code, const char *reason, const char *message)
{
    json_t *st = json_pack("{s:{},s:s,s:o,s:i}", "metadata", "status", "Failure", "message",
                           text(message), "code", code);
    if (reason)
        json_object_set_new(st, "reason", json_string(reason));
    return st;
}

/* An AdmissionReview answer or a ConversionReview one, for a request
 * that could not be served: allowed false (or result Failure) with the
 * error, HTTP 200 as controller-runtime writes them... except that it
 * writes the HTTP status it means for reviews it cannot decode; so do we. */
void wh_bad_request(wh_handler *h, wh_reply *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = vfmt(fmt, ap);
    va_end(ap);
    json_t *doc;
    if (h->kind == WH_CONVERSION)
        doc = json_pack("{s:s,s:s,s:{s:s,s:o}}", "apiVersion", "apiextensions.k8s.io/v1", "kind",
                        "ConversionReview", "response", "uid", "", "result",
                        failure_status(400, NULL, msg));
    else
        doc = json_pack("{s:s,s:s,s:{s:s,s:b,s:o}}", "apiVersion", "admission.k8s.io/v1", "kind",
                        "AdmissionReview", "response", "uid", "", "allowed", 0, "status",
                        failure_status(400, NULL, msg));
    free(msg);
    reply_json(out, 400, doc);
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static const json_t *obj_or_null(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_object(v) ? v : NULL;
}

/* ---- admission ---------------------------------------------------------------- */

static void fill_request(ckube_admission_request *r, const json_t *req)
{
    const json_t *kind = json_object_get(req, "kind");
    const json_t *res = json_object_get(req, "resource");
    const json_t *ui = json_object_get(req, "userInfo");
    *r = (ckube_admission_request){
        .uid = str(req, "uid"),
        .operation = str(req, "operation"),
        .group = str(kind, "group"),
        .version = str(kind, "version"),
        .kind = str(kind, "kind"),
        .resource = str(res, "resource"),
        .subresource = str(req, "subResource"),
        .name = str(req, "name"),
        .namespace_ = str(req, "namespace"),
        .username = str(ui, "username"),
        .user_info = ui,
        .dry_run = json_is_true(json_object_get(req, "dryRun")),
        .object = obj_or_null(req, "object"),
        .old_object = obj_or_null(req, "oldObject"),
        .options = obj_or_null(req, "options"),
        .raw = req,
    };
}

static ckube_typed *decode_typed(const ckube_scheme *scheme, const json_t *obj, char **msg)
{
    if (!obj)
        return NULL;
    ckube_typed *t = NULL;
    ckube_status *st = NULL;
    if (ckube_scheme_from_json(scheme, obj, &t, &st) != 0) {
        if (asprintf(msg, "%s", st && st->message ? st->message : "cannot decode the object") < 0)
            *msg = NULL;
        ckube_status_free(st);
        return NULL;
    }
    return t;
}

static void run_defaulter(wh_handler *h, const ckube_admission_request *req,
                          ckube_admission_response *resp)
{
    if (!req->object)
        return; /* nothing to default on a delete */
    char *msg = NULL;
    ckube_typed *t = decode_typed(h->scheme, req->object, &msg);
    if (!t) {
        ckube_admission_deny(resp, 400, "%s", msg ? msg : "cannot decode the object");
        free(msg);
        return;
    }
    if (h->defaulter(h->ctx, req, t, &msg) != 0) {
        ckube_admission_deny(resp, 403, "%s", msg ? msg : "denied");
    } else {
        json_t *out = ckube_typed_to_json(t);
        if (out)
            ckube_admission_set_object(resp, out);
    }
    free(msg);
    ckube_typed_free(t);
}

static void run_validator(wh_handler *h, const ckube_admission_request *req,
                          ckube_admission_response *resp)
{
    char *msg = NULL;
    ckube_typed *obj = decode_typed(h->scheme, req->object, &msg);
    ckube_typed *old = !msg ? decode_typed(h->scheme, req->old_object, &msg) : NULL;
    if (msg) {
        ckube_admission_deny(resp, 400, "%s", msg);
    } else if (h->validator(h->ctx, req, obj, old, resp, &msg) != 0) {
        ckube_admission_deny(resp, 403, "%s", msg ? msg : "denied");
    }
    free(msg);
    ckube_typed_free(obj);
    ckube_typed_free(old);
}

static char *base64(const char *s, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    return out;
}

static void serve_admission(wh_handler *h, const json_t *review, wh_reply *out)
{
    const json_t *req = json_object_get(review, "request");
    if (!json_is_object(req)) {
        wh_bad_request(h, out, "got an empty AdmissionRequest");
        return;
    }
    ckube_admission_request r;
    fill_request(&r, req);
    ckube_admission_response resp = {.warnings = json_array(), .annotations = json_object()};
    switch (h->kind) {
    case WH_DEFAULTER:
        run_defaulter(h, &r, &resp);
        break;
    case WH_VALIDATOR:
        run_validator(h, &r, &resp);
        break;
    default:
        h->admission(h->ctx, &r, &resp);
        break;
    }
    json_t *response = json_pack("{s:s,s:b}", "uid", r.uid, "allowed", !resp.denied);
    if (resp.denied) {
        json_object_set_new(
            response, "status",
            failure_status(resp.code, resp.code == 403 ? "Forbidden" : NULL, resp.message));
    } else if (resp.object && r.object) {
        json_t *patch = ckube_json_patch_diff(r.object, resp.object);
        if (json_array_size(patch)) {
            char *text = json_dumps(patch, JSON_COMPACT);
            char *b64 = text ? base64(text, strlen(text)) : NULL;
            if (b64) {
                json_object_set_new(response, "patch", json_string(b64));
                json_object_set_new(response, "patchType", json_string("JSONPatch"));
            }
            free(b64);
            free(text);
        }
        json_decref(patch);
    }
    if (json_array_size(resp.warnings))
        json_object_set(response, "warnings", resp.warnings);
    if (json_object_size(resp.annotations))
        json_object_set(response, "auditAnnotations", resp.annotations);
    const char *av = str(review, "apiVersion");
    json_t *doc = json_pack("{s:s,s:s,s:o}", "apiVersion",
                            !strcmp(av, "admission.k8s.io/v1beta1") ? av : "admission.k8s.io/v1",
                            "kind", "AdmissionReview", "response", response);
    json_decref(resp.warnings);
    json_decref(resp.annotations);
    json_decref(resp.object);
    free(resp.message);
    reply_json(out, 200, doc);
}

/* ---- conversion --------------------------------------------------------------- */

static void serve_conversion(wh_handler *h, const json_t *review, wh_reply *out)
{
    const json_t *req = json_object_get(review, "request");
    if (!json_is_object(req)) {
        wh_bad_request(h, out, "conversion request is nil");
        return;
    }
    const char *uid = str(req, "uid");
    const char *want = str(req, "desiredAPIVersion");
    json_t *converted = json_array();
    char *msg = NULL;
    size_t i;
    json_t *obj;
    json_array_foreach(json_object_get(req, "objects"), i, obj)
    {
        const char *have = str(obj, "apiVersion");
        json_t *c = !strcmp(have, want) ? json_incref(obj) : h->conversion(h->ctx, obj, want, &msg);
        if (!c) {
            if (!msg && asprintf(&msg, "conversion from %s to %s failed", have, want) < 0)
                msg = NULL;
            break;
        }
        if (json_is_object(c))
            json_object_set_new(c, "apiVersion", json_string(want));
        json_array_append_new(converted, c);
    }
    json_t *response = json_pack("{s:s}", "uid", uid);
    if (msg) {
        json_object_set_new(response, "result", failure_status(0, NULL, msg));
        json_object_del(json_object_get(response, "result"), "code");
        json_decref(converted);
    } else {
        json_object_set_new(response, "convertedObjects", converted);
        json_object_set_new(response, "result",
                            json_pack("{s:{},s:s}", "metadata", "status", "Success"));
    }
    free(msg);
    json_t *doc = json_pack("{s:s,s:s,s:o}", "apiVersion", "apiextensions.k8s.io/v1", "kind",
                            "ConversionReview", "response", response);
    reply_json(out, 200, doc);
}

void wh_serve(wh_handler *h, const char *body, size_t len, wh_reply *out)
{
    json_error_t jerr;
    json_t *review = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(review)) {
        wh_bad_request(h, out, "couldn't decode the review: %s",
                       review ? "not an object" : jerr.text);
        json_decref(review);
        return;
    }
    if (h->kind == WH_CONVERSION)
        serve_conversion(h, review, out);
    else
        serve_admission(h, review, out);
    json_decref(review);
}

/* ---- registration ------------------------------------------------------------- */

int ckube_webhook_server_admission(ckube_webhook_server *s, const char *path, ckube_admission_fn fn,
                                   void *ctx)
{
    if (!fn)
        return -1;
    wh_handler h = {.path = (char *)path, .kind = WH_ADMISSION, .admission = fn, .ctx = ctx};
    return wh_add_handler(s, &h);
}

int ckube_webhook_server_defaulter(ckube_webhook_server *s, const char *path,
                                   const ckube_scheme *scheme, ckube_typed_default_fn fn, void *ctx)
{
    if (!fn || !scheme)
        return -1;
    wh_handler h = {
        .path = (char *)path, .kind = WH_DEFAULTER, .defaulter = fn, .scheme = scheme, .ctx = ctx};
    return wh_add_handler(s, &h);
}

int ckube_webhook_server_validator(ckube_webhook_server *s, const char *path,
                                   const ckube_scheme *scheme, ckube_typed_validate_fn fn,
                                   void *ctx)
{
    if (!fn || !scheme)
        return -1;
    wh_handler h = {
        .path = (char *)path, .kind = WH_VALIDATOR, .validator = fn, .scheme = scheme, .ctx = ctx};
    return wh_add_handler(s, &h);
}

int ckube_webhook_server_conversion(ckube_webhook_server *s, const char *path,
                                    ckube_conversion_fn fn, void *ctx)
{
    if (!fn)
        return -1;
    wh_handler h = {.path = (char *)path, .kind = WH_CONVERSION, .conversion = fn, .ctx = ctx};
    return wh_add_handler(s, &h);
}
