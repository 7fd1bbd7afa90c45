/* Who a request is from (authenticator.h). */
#include "apiserver/authentication/authenticator.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apiserver/authentication/tokenfile.h"
#include "apiserver/authentication/x509.h"
#include "common/text.h"
#include "common/xalloc.h"

struct authenticator {
    auth_config cfg;
    tokenfile *tokens;
    auth_user *anonymous, *unsecured;
};

authenticator *authenticator_new(const auth_config *c, char **err)
{
    authenticator *a = xcalloc(1, sizeof *a);
    a->cfg = *c;
    a->cfg.token_file = NULL; /* (not kept: borrowed) */
    if (c->token_file && !(a->tokens = tokenfile_load(c->token_file, err))) {
        free(a);
        return NULL;
    }
    const char *anon_groups[] = {AUTH_GROUP_UNAUTHENTICATED};
    a->anonymous = auth_user_new(AUTH_USER_ANONYMOUS, NULL, anon_groups, 1, NULL);
    const char *unsecured_groups[] = {AUTH_GROUP_MASTERS, AUTH_GROUP_AUTHENTICATED};
    a->unsecured = auth_user_new(AUTH_USER_UNSECURED, NULL, unsecured_groups, 2, NULL);
    return a;
}

const json_t *authenticator_api_audiences(const authenticator *a)
{
    return a->cfg.api_audiences;
}

void authenticator_free(authenticator *a)
{
    if (!a)
        return;
    tokenfile_free(a->tokens);
    auth_user_unref(a->anonymous);
    auth_user_unref(a->unsecured);
    free(a);
}

/* Upstream's AuthenticatedGroupAdder: every authenticated user but the
 * anonymous one is in system:authenticated. A user someone else holds
 * too (the token file's) is copied, never changed: users are immutable
 * once shared. Takes u's reference; returns one. */
static auth_user *add_authenticated(auth_user *u)
{
    if (!strcmp(u->name, AUTH_USER_ANONYMOUS) || auth_user_in_group(u, AUTH_GROUP_AUTHENTICATED) ||
        auth_user_in_group(u, AUTH_GROUP_UNAUTHENTICATED))
        return u;
    if (atomic_load(&u->refs) != 1) {
        auth_user *copy =
            auth_user_new(u->name, u->uid, (const char *const *)u->groups, u->ngroups, u->extra);
        auth_user_unref(u);
        u = copy;
    }
    auth_user_add_group(u, AUTH_GROUP_AUTHENTICATED);
    return u;
}

int authenticator_x509(X509 *cert, long verify, auth_user **out, char **err)
{
    int rc = auth_x509(cert, verify, out, err);
    if (rc == 1)
        *out = add_authenticated(*out);
    return rc;
}

/* The token of "Bearer <token>" (as upstream's bearertoken: the scheme
 * case-insensitive, one space, a non-empty token without spaces), or
 * NULL when the header carries no bearer token. */
static char *bearer_token(const char *h)
{
    if (!h || strncasecmp(h, "bearer ", 7))
        return NULL;
    const char *t = h + 7;
    size_t n = strcspn(t, " ");
    if (!n)
        return NULL;
    return xstrndup(t, n);
}

/* Whether tokens without audiences (the token file's) may answer for
 * `want`: they are the API's, so `want` must name one of its audiences. */
static bool api_audience_ok(const authenticator *a, const json_t *want)
{
    if (!want)
        return true;
    size_t i, j;
    json_t *w, *api;
    json_array_foreach(want, i, w)
        json_array_foreach(a->cfg.api_audiences, j, api) if (json_equal(w, api)) return true;
    return false;
}

/* The API's audiences among `want` (all of them when want is NULL): what
 * an audience-agnostic token is good for. A new array of new strings:
 * the configured ones are shared by every serving thread, and jansson
 * reads a value's count without an atomic before changing it, so no
 * request may take a reference to them. */
static json_t *api_audiences_among(const authenticator *a, const json_t *want)
{
    json_t *out = json_array();
    size_t i, j;
    json_t *api, *w;
    json_array_foreach(a->cfg.api_audiences, i, api)
    {
        bool keep = !want;
        json_array_foreach(want, j, w) if (json_equal(w, api)) keep = true;
        if (keep)
            json_array_append_new(out, json_string(json_string_value(api)));
    }
    return out;
}

int authenticator_authenticate(const authenticator *a, const auth_request *r, auth_user **out,
                               char **why)
{
    *out = NULL;
    char *errs = NULL; /* the failures so far, "; "-separated */
    if (r->cert) {
        char *err = NULL;
        int rc = authenticator_x509(r->cert, r->verify, out, &err);
        if (rc == 1)
            return 1;
        if (rc < 0) {
            errs = err;
            err = NULL;
        }
    }
    char *token = bearer_token(r->authorization);
    if (token) {
        auth_user *u = api_audience_ok(a, r->audiences) ? tokenfile_lookup(a->tokens, token) : NULL;
        int rc = u ? 1 : 0;
        char *err = NULL;
        json_t *matched = NULL; /* only when the caller asks (a TokenReview) */
        json_t **want_matched = r->audiences_out ? &matched : NULL;
        if (u && want_matched)
            matched = api_audiences_among(a, r->audiences);
        else if (!u && a->cfg.token_fn)
            rc = a->cfg.token_fn(a->cfg.token_arg, token, r->audiences, &u, want_matched, &err);
        if (r->audiences_out && rc == 1)
            *r->audiences_out = matched;
        else
            json_decref(matched);
        free(token);
        if (rc == 1) {
            *out = add_authenticated(u);
            free(errs);
            return 1;
        }
        char *msg = xasprintf("%s%s%s", errs ? errs : "", errs ? "; " : "",
                              err ? err : "invalid bearer token");
        free(errs);
        free(err);
        errs = msg;
    }
    if (errs) {
        *why = errs;
        return 0;
    }
    if (a->cfg.plain_http) {
        *out = auth_user_ref(a->unsecured);
        return 1;
    }
    if (a->cfg.anonymous) {
        *out = auth_user_ref(a->anonymous);
        return 1;
    }
    /* No credentials and no anonymous: unauthorized without an error, as
     * upstream (which logs nothing then). */
    return 0;
}
