/* reviews.c - the create-only "review" resources that clients ask
 * questions with, answered and never stored:
 *
 *   authorization.k8s.io/v1 selfsubjectaccessreviews, subjectaccessreviews,
 *       localsubjectaccessreviews  (kubectl auth can-i; dashboards such as
 *       k9s ask before they offer an action)
 *   authorization.k8s.io/v1 selfsubjectrulesreviews  (kubectl auth can-i --list)
 *   authentication.k8s.io/v1 (and v1beta1) selfsubjectreviews  (kubectl auth whoami)
 *
 * The access reviews ask the server's authorizer (authorization/
 * authorizer.h, handed over by the server as the types' review_arg);
 * the rules review lists the asker's RBAC rules. The SelfSubjectReview
 * tells the requester who authentication found. The requests are decoded
 * against the types' schemas (builtin_schemas.c) and validated as
 * upstream validates them. */
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/authorization/reviews.h"
#include "apiserver/authentication/authenticator.h"
#include "apiserver/authentication/user.h"
#include "apiserver/authorization/authorizer.h"
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

static const char *str_or_empty(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* The question a review's spec asks (authorizationutil's
 * ResourceAttributesFrom / NonResourceAttributesFrom), strings borrowed
 * from spec. */
static void review_attributes(const json_t *spec, const auth_user *user, authz_attributes *at)
{
    *at = (authz_attributes){.user = user};
    const json_t *ra = json_object_get(spec, "resourceAttributes");
#define S(o, k) str_or_empty(json_object_get((o), (k)))
    if (json_is_object(ra)) {
        at->resource_request = true;
        at->verb = S(ra, "verb");
        at->api_group = S(ra, "group");
        at->api_version = S(ra, "version");
        at->resource = S(ra, "resource");
        at->subresource = S(ra, "subresource");
        at->name = S(ra, "name");
        at->namespace_ = S(ra, "namespace");
    } else {
        const json_t *nra = json_object_get(spec, "nonResourceAttributes");
        at->verb = S(nra, "verb");
        at->path = S(nra, "path");
    }
#undef S
}

/* Asks the authorizer (the index the server hands over as review_arg)
 * and answers as upstream's SubjectAccessReview REST: allowed, and the
 * reason when there is one. RBAC has no opinion rather than a denial, so
 * "denied" is never set. */
static void answer_access(const resource_type *t, json_t *obj, const auth_user *user)
{
    authz_attributes at;
    review_attributes(json_object_get(obj, "spec"), user, &at);
    char *reason = NULL;
    bool ok = authz_allowed(t->review_arg, &at, &reason, &reason);
    json_t *status = json_pack("{s:b}", "allowed", ok);
    if (reason && *reason)
        json_object_set_new(status, "reason", json_string(reason));
    free(reason);
    json_object_set_new(obj, "status", status);
}

static void self_access_review(const resource_type *t, json_t *obj, const char *ns,
                               const auth_user *user, ckube_status *st)
{
    (void)ns;
    check_attributes(json_object_get(obj, "spec"), st);
    if (!st->ncauses)
        answer_access(t, obj, user);
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
    if (st->ncauses)
        return;
    /* The user the spec describes, exactly (no groups added). */
    const json_t *groups = json_object_get(spec, "groups");
    size_t ng = json_array_size(groups);
    const char **gv = xcalloc(ng + 1, sizeof *gv);
    size_t k = 0;
    for (size_t i = 0; i < ng; i++)
        if (json_string_value(json_array_get(groups, i)))
            gv[k++] = json_string_value(json_array_get(groups, i));
    const char *uid = json_string_value(json_object_get(spec, "uid"));
    json_t *extra = json_object_get(spec, "extra");
    auth_user *u = auth_user_new(user ? user : "", uid ? uid : "", gv, k,
                                 json_is_object(extra) ? extra : NULL);
    free(gv);
    answer_access(t, obj, u);
    auth_user_unref(u);
}

/* A PolicyRule's lists as SelfSubjectRulesReview's ResourceRule or
 * NonResourceRule carries them: the keys given, empty lists left out
 * (omitempty), verbs always. */
static json_t *rule_info(const json_t *rule, const char *const *keys)
{
    json_t *out = json_object();
    json_t *verbs = json_object_get(rule, "verbs");
    json_object_set_new(out, "verbs", verbs ? json_incref(verbs) : json_array());
    for (; *keys; keys++) {
        json_t *v = json_object_get(rule, *keys);
        if (json_array_size(v))
            json_object_set(out, *keys, v);
    }
    return out;
}

/* SelfSubjectRulesReview: the asker's rules in spec.namespace, as
 * upstream's RBAC RulesFor splits them. */
static void rules_review(const resource_type *t, json_t *obj, const char *ns, const auth_user *user,
                         ckube_status *st)
{
    (void)ns;
    (void)st;
    static const char *const res_keys[] = {"apiGroups", "resources", "resourceNames", NULL};
    static const char *const url_keys[] = {"nonResourceURLs", NULL};
    const char *rns = json_string_value(ckube_json_get_path(obj, "spec.namespace"));
    rbac_user ru = {user->name, (const char *const *)user->groups, user->ngroups};
    char *errors = NULL;
    json_t *rules =
        t->review_arg ? rbac_rules_for(t->review_arg, &ru, rns, false, &errors) : json_array();
    json_t *res = json_array(), *urls = json_array();
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        if (json_array_size(json_object_get(rule, "resources")))
            json_array_append_new(res, rule_info(rule, res_keys));
        if (json_array_size(json_object_get(rule, "nonResourceURLs")))
            json_array_append_new(urls, rule_info(rule, url_keys));
    }
    json_decref(rules);
    json_t *status =
        json_pack("{s:o,s:o,s:b}", "resourceRules", res, "nonResourceRules", urls, "incomplete", 0);
    if (errors)
        json_object_set_new(status, "evaluationError", json_string(errors));
    free(errors);
    json_object_set_new(obj, "status", status);
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

void authorization_set_authorizer(registry *reg, rbac_index *ix)
{
    for (size_t i = 0; i < sizeof reviews / sizeof *reviews; i++) {
        if (strcmp(reviews[i].group, "authorization.k8s.io"))
            continue;
        resource_type *t =
            registry_lookup(reg, reviews[i].group, reviews[i].version, reviews[i].resource);
        if (t) {
            t->review_arg = ix;
            resource_type_unref(t);
        }
    }
}
