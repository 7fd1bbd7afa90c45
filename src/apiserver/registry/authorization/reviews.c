/* reviews.c - the create-only "review" resources that clients ask
 * questions with, answered and never stored:
 *
 *   authorization.k8s.io/v1 selfsubjectaccessreviews, subjectaccessreviews,
 *       localsubjectaccessreviews  (kubectl auth can-i; dashboards such as
 *       k9s ask before they offer an action)
 *   authorization.k8s.io/v1 selfsubjectrulesreviews  (kubectl auth can-i --list)
 *   authentication.k8s.io/v1 (and v1beta1) selfsubjectreviews  (kubectl auth whoami)
 *
 * ckube authenticates requests but does not authorize them yet, so the
 * access answers are those of a kube-apiserver with the AlwaysAllow
 * authorizer: every access is allowed, the rules are "*". The
 * SelfSubjectReview tells the requester who authentication found. The requests are decoded against
 * the types' schemas (builtin_schemas.c) and validated as upstream validates them. */
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/authorization/reviews.h"
#include "apiserver/authentication/authenticator.h"
#include "apiserver/authentication/user.h"
#include "apiserver/registry/rest/registry.h"
#include <stdatomic.h>
#include "apiserver/registry/definitions/builtin_schemas.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/xalloc.h"

/* Exactly one of resourceAttributes and nonResourceAttributes. */
static void check_attributes(const json_t *spec, ckube_status *st)
{
    bool res = json_is_object(json_object_get(spec, "resourceAttributes"));
    bool nonres = json_is_object(json_object_get(spec, "nonResourceAttributes"));
    if (res == nonres)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "spec.resourceAttributes",
                               "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                               "resourceAttributes must be specified");
}

static void allow(json_t *obj)
{
    json_object_set_new(obj, "status", json_pack("{s:b}", "allowed", 1));
}

static void self_access_review(const resource_type *t, json_t *obj, const char *ns,
                               const auth_user *user, ckube_status *st)
{
    (void)t;
    (void)ns;
    check_attributes(json_object_get(obj, "spec"), st);
    allow(obj);
}

/* SubjectAccessReview and LocalSubjectAccessReview ask about someone:
 * a user or groups must be named. */
static void access_review(const resource_type *t, json_t *obj, const char *ns,
                          const auth_user *asker, ckube_status *st)
{
    (void)asker;
    json_t *spec = json_object_get(obj, "spec");
    check_attributes(spec, st);
    const char *user = json_string_value(json_object_get(spec, "user"));
    if ((!user || !*user) && !json_array_size(json_object_get(spec, "groups")))
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "spec.user",
                               "Invalid value: \"\": at least one of user or group must be "
                               "specified");
    if (t->namespaced) {
        /* A local review is about its own namespace (defaulted to it). */
        json_t *ra = json_object_get(spec, "resourceAttributes");
        const char *rns = json_string_value(json_object_get(ra, "namespace"));
        if (json_is_object(ra) && (!rns || !*rns))
            json_object_set_new(ra, "namespace", json_string(ns));
        else if (json_is_object(ra) && strcmp(rns, ns))
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID,
                                   "spec.resourceAttributes.namespace",
                                   "Invalid value: \"%s\": must match metadata.namespace", rns);
        if (json_object_get(spec, "nonResourceAttributes"))
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "spec.nonResourceAttributes",
                                   "Invalid value: \"\": disallowed on this kind of request");
    }
    allow(obj);
}

static void rules_review(const resource_type *t, json_t *obj, const char *ns, const auth_user *user,
                         ckube_status *st)
{
    (void)t;
    (void)ns;
    (void)st;
    json_object_set_new(obj, "status",
                        json_pack("{s:[{s:[s],s:[s],s:[s]}],s:[{s:[s],s:[s]}],s:b}",
                                  "resourceRules", "verbs", "*", "apiGroups", "*", "resources", "*",
                                  "nonResourceRules", "verbs", "*", "nonResourceURLs", "*",
                                  "incomplete", 0));
}

static void self_subject_review(const resource_type *t, json_t *obj, const char *ns,
                                const auth_user *user, ckube_status *st)
{
    (void)t;
    (void)ns;
    (void)st;
    /* Who asks, as authentication found them (kubectl auth whoami). */
    json_object_set_new(obj, "status", json_pack("{s:o}", "userInfo", auth_user_info_json(user)));
}

/* TokenReview: who a bearer token is, asked of the authenticator the
 * server hands over (review_arg), for spec.audiences or the API's.
 * Upstream answers a missing token with a 400, and a token that does not
 * authenticate with authenticated false and the reason in status.error. */
static void token_review(const resource_type *t, json_t *obj, const char *ns,
                         const auth_user *asker, ckube_status *st)
{
    (void)ns;
    (void)asker;
    json_t *spec = json_object_get(obj, "spec");
    const char *token = json_string_value(json_object_get(spec, "token"));
    if (!token || !*token) {
        st->code = 400;
        free(st->reason);
        st->reason = xstrdup(CKUBE_REASON_BAD_REQUEST);
        free(st->message);
        st->message = xstrdup("token is required for TokenReview in authentication");
        return;
    }
    const authenticator *a = t->review_arg;
    json_t *aud = json_object_get(spec, "audiences");
    if (!json_array_size(aud))
        aud = NULL;
    char *header = xasprintf("Bearer %s", token);
    json_t *matched = NULL;
    auth_request r = {.authorization = header, .audiences = aud, .audiences_out = &matched};
    auth_user *u = NULL;
    char *why = NULL;
    int ok = a && authenticator_authenticate(a, &r, &u, &why) == 1 &&
             strcmp(u->name, AUTH_USER_ANONYMOUS) && strcmp(u->name, AUTH_USER_UNSECURED);
    free(header);
    json_t *status = json_object();
    if (ok) {
        json_object_set_new(status, "authenticated", json_true());
        json_object_set_new(status, "user", auth_user_info_json(u));
        /* the token's audiences among those asked (upstream's
         * authenticator.Response.Audiences) */
        json_object_set_new(status, "audiences", matched ? matched : json_array());
        matched = NULL;
    } else {
        json_object_set_new(status, "user", json_object());
        json_object_set_new(status, "error", json_string(why ? why : "invalid bearer token"));
    }
    json_decref(matched);
    auth_user_unref(u);
    free(why);
    json_object_set_new(obj, "status", status);
}

static const struct review_def {
    const char *group, *version, *resource, *kind, *singular;
    bool namespaced;
    void (*review)(const resource_type *, json_t *, const char *, const auth_user *,
                   ckube_status *);
} reviews[] = {
    {"authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
     "selfsubjectaccessreview", false, self_access_review},
    {"authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
     "subjectaccessreview", false, access_review},
    {"authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview",
     "localsubjectaccessreview", true, access_review},
    {"authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview",
     "selfsubjectrulesreview", false, rules_review},
    {"authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", "selfsubjectreview",
     false, self_subject_review},
    {"authentication.k8s.io", "v1", "tokenreviews", "TokenReview", "tokenreview", false,
     token_review},
    /* kubectl up to 1.27 asks v1beta1 (GA in 1.28) */
    {"authentication.k8s.io", "v1beta1", "selfsubjectreviews", "SelfSubjectReview",
     "selfsubjectreview", false, self_subject_review},
};

int authorization_install(registry *reg)
{
    for (size_t i = 0; i < sizeof reviews / sizeof *reviews; i++) {
        const struct review_def *d = &reviews[i];
        resource_type *t = xcalloc(1, sizeof *t);
        atomic_init(&t->refs, 1);
        t->group = xstrdup(d->group);
        t->version = xstrdup(d->version);
        t->resource = xstrdup(d->resource);
        t->kind = xstrdup(d->kind);
        t->singular = xstrdup(d->singular);
        t->namespaced = d->namespaced;
        t->verbs = VERB_CREATE;
        t->review = d->review;
        t->name_kind = CKUBE_NAME_DNS1123_SUBDOMAIN;
        t->schema = builtin_schema(d->group, d->version, d->kind); /* explain, /openapi */
        if (!t->schema || !t->group || !t->version || !t->resource || !t->kind || !t->singular ||
            registry_add(reg, t) != 0) {
            resource_type_unref(t);
            return -1;
        }
    }
    return 0;
}
