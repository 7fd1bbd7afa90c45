/* TokenRequest: POST /api/v1/namespaces/NS/serviceaccounts/NAME/token, as
 * kube-apiserver's serviceaccounts/token subresource (what `kubectl
 * create token` and the kubelet ask): a signed, bound, expiring
 * ServiceAccount token (authentication/serviceaccount/token.h), answered
 * 201 and never stored.
 *
 * Upstream's checks and words: the ServiceAccount must exist (404);
 * spec.expirationSeconds defaults to 3600 and must be at least 600 and at
 * most 2^32 (422); spec.audiences defaults to the API's; a
 * spec.boundObjectRef names a core Pod or Secret (else 400) in the
 * namespace that exists (404), a pod running as this ServiceAccount
 * (400), with that UID if one is given (409), and the token is valid only
 * while it does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/authentication/serviceaccount/token.h"
#include "apiserver/endpoints/handlers/handlers.h"
#include "apiserver/registry/generic/store.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/validation.h"
#include "common/xalloc.h"

static const char *uid_of(const json_t *o)
{
    const char *u = json_string_value(json_object_get(json_object_get(o, "metadata"), "uid"));
    return u ? u : "";
}

/* Checks spec.boundObjectRef and fills in its UID; NULL, or the Status.
 * Upstream's order and words: a kind other than a core Pod or Secret is a
 * 400 naming its group, version and kind; the object must exist (404); a
 * pod must run as this ServiceAccount (400; a pod without
 * serviceAccountName runs as "default", as the ServiceAccount admission
 * plugin sets it); a UID given must be the object's (409). */
static ckube_status *check_bound(req_ctx *rc, json_t *ref, sa_token_ref *out)
{
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *name = json_string_value(json_object_get(ref, "name"));
    const char *uid = json_string_value(json_object_get(ref, "uid"));
    const char *av = json_string_value(json_object_get(ref, "apiVersion"));
    /* schema.FromAPIVersionAndKind: "GROUP/VERSION", or a core "VERSION" */
    const char *slash = av ? strchr(av, '/') : NULL;
    const char *resource = !kind || slash            ? NULL
                           : !strcmp(kind, "Pod")    ? "pods"
                           : !strcmp(kind, "Secret") ? "secrets"
                                                     : NULL;
    if (!resource) {
        int glen = slash ? (int)(slash - av) : 0;
        const char *version = slash ? slash + 1 : av ? av : "";
        return ckube_status_bad_request("cannot bind token to object of type %.*s/%s, Kind=%s",
                                        glen, av ? av : "", version, kind ? kind : "");
    }
    json_t *obj = handlers_cached_core(rc->srv, resource, rc->ri.ns, name ? name : "");
    if (!obj)
        return ckube_status_not_found("", resource, name ? name : "");
    if (!strcmp(kind, "Pod")) {
        const char *sa =
            json_string_value(json_object_get(json_object_get(obj, "spec"), "serviceAccountName"));
        if (strcmp(sa && *sa ? sa : "default", rc->ri.name)) {
            json_decref(obj);
            char *q = ckube_go_quote(rc->ri.name);
            ckube_status *st = ckube_status_bad_request(
                "cannot bind token for serviceaccount %s to pod running with different "
                "serviceaccount name.",
                q);
            free(q);
            return st;
        }
    }
    const char *have = uid_of(obj);
    if (uid && *uid && strcmp(uid, have)) {
        json_decref(obj);
        char *why = xasprintf("the UID in the bound object reference (%s) does not match the UID "
                              "in record. The object might have been deleted and then recreated",
                              uid);
        /* errors.NewConflict(GroupResource{Resource: the kind}, name, ...) */
        ckube_status *st = ckube_status_conflict("", kind, name ? name : "", why);
        free(why);
        return st;
    }
    json_object_set_new(ref, "uid", json_string(have));
    out->kind = kind;
    out->name = json_string_value(json_object_get(ref, "name"));
    out->uid = json_string_value(json_object_get(ref, "uid"));
    json_decref(obj);
    return NULL;
}

/* RFC 3339 of a Unix time. */
static void rfc3339(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void handle_token_request(req_ctx *rc)
{
    ckube_status *st = NULL;
    json_t *obj = handlers_read_object(rc, "TokenRequest", &st);
    if (!obj) {
        if (st)
            reply_status(rc, st);
        return;
    }
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    if ((kind && *kind && strcmp(kind, "TokenRequest")) ||
        (av && *av && strcmp(av, "authentication.k8s.io/v1"))) {
        reply_status(rc, ckube_status_bad_request(
                             "the API version in the data (%s) does not match the expected API "
                             "version (authentication.k8s.io/v1) or kind (%s) is not TokenRequest",
                             av ? av : "", kind ? kind : ""));
        json_decref(obj);
        return;
    }
    /* upstream: a name or namespace in the body must be the URL's */
    const json_t *meta = json_object_get(obj, "metadata");
    static const char *const fields[][2] = {{"name", "name"}, {"namespace", "namespace"}};
    for (size_t i = 0; i < 2; i++) {
        const char *v = json_string_value(json_object_get(meta, fields[i][0]));
        const char *want = i ? rc->ri.ns : rc->ri.name;
        if (v && *v && strcmp(v, want ? want : "")) {
            ckube_status *inv =
                ckube_status_invalid_begin("authentication.k8s.io", "TokenRequest", rc->ri.name);
            char *q = ckube_go_quote(v);
            ckube_status_add_cause(inv, CKUBE_CAUSE_FIELD_INVALID,
                                   i ? "metadata.namespace" : "metadata.name",
                                   "Invalid value: %s: must match the service account %s if "
                                   "specified",
                                   q, fields[i][1]);
            free(q);
            ckube_status_invalid_finish(inv);
            reply_status(rc, inv);
            json_decref(obj);
            return;
        }
    }
    json_t *sa = handlers_cached_core(rc->srv, "serviceaccounts", rc->ri.ns, rc->ri.name);
    if (!sa) {
        reply_status(rc, ckube_status_not_found("", "serviceaccounts", rc->ri.name));
        json_decref(obj);
        return;
    }
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    json_t *exp = json_object_get(spec, "expirationSeconds");
    int64_t seconds =
        json_is_integer(exp) ? (int64_t)json_integer_value(exp) : SA_TOKEN_DEFAULT_SECONDS;
    if (seconds < SA_TOKEN_MIN_SECONDS || seconds > SA_TOKEN_MAX_SECONDS) {
        /* upstream: errors.NewInvalid(gvk.GroupKind(), "", errs) */
        ckube_status *inv =
            ckube_status_invalid_begin("authentication.k8s.io", "TokenRequest", NULL);
        ckube_status_add_cause(inv, CKUBE_CAUSE_FIELD_INVALID, "spec.expirationSeconds",
                               "Invalid value: %" PRId64 ": may not specify a duration %s", seconds,
                               seconds < SA_TOKEN_MIN_SECONDS ? "less than 10 minutes"
                                                              : "larger than 2^32 seconds");
        ckube_status_invalid_finish(inv);
        reply_status(rc, inv);
        json_decref(sa);
        json_decref(obj);
        return;
    }
    json_object_set_new(spec, "expirationSeconds", json_integer((json_int_t)seconds));
    if (!json_array_size(json_object_get(spec, "audiences")))
        json_object_set_new(spec, "audiences", sa_tokens_api_audiences(rc->srv->sa));
    sa_token_ref bound = {0};
    json_t *ref = json_object_get(spec, "boundObjectRef");
    if (json_is_object(ref) && (st = check_bound(rc, ref, &bound))) {
        reply_status(rc, st);
        json_decref(sa);
        json_decref(obj);
        return;
    }
    if (!json_is_object(ref))
        json_object_set_new(spec, "boundObjectRef", json_null());
    int64_t now = (int64_t)time(NULL);
    char *err = NULL;
    char *token = sa_tokens_issue(rc->srv->sa, rc->ri.ns, rc->ri.name, uid_of(sa),
                                  json_object_get(spec, "audiences"), now, seconds, &bound, &err);
    json_decref(sa);
    if (!token) {
        reply_status(rc, ckube_status_new(500, CKUBE_REASON_INTERNAL, "failed to sign token: %s",
                                          err ? err : "unknown error"));
        free(err);
        json_decref(obj);
        return;
    }
    char created[32], expires[32];
    rfc3339(now, created, sizeof created);
    rfc3339(now + seconds, expires, sizeof expires);
    json_object_set_new(obj, "kind", json_string("TokenRequest"));
    json_object_set_new(obj, "apiVersion", json_string("authentication.k8s.io/v1"));
    json_object_set_new(obj, "metadata",
                        json_pack("{s:s,s:s,s:s}", "name", rc->ri.name, "namespace", rc->ri.ns,
                                  "creationTimestamp", created));
    json_object_set_new(obj, "status",
                        json_pack("{s:s,s:s}", "token", token, "expirationTimestamp", expires));
    free(token);
    reply_json(rc, 201, obj);
}

json_t *handlers_cached_core(apiserver *s, const char *resource, const char *ns, const char *name)
{
    resource_type *t = registry_lookup(s->registry, "", "v1", resource);
    if (!t)
        return NULL;
    char key[STORE_KEY_MAX];
    store_object_key(t, ns, name, key, sizeof key);
    resource_type_unref(t);
    cobj *o = cacher_get(s->cache, key);
    json_t *j = o ? cobj_decode(o) : NULL;
    cobj_unref(o);
    return j;
}
