/* delegated_auth.c - authentication and authorization delegated to the API
 * server through TokenReview and SubjectAccessReview (see
 * delegated_auth.h). */
#include "runtime/delegated_auth.h"

#include "common/text.h"

#include <ckube/json.h>
#include <ckube/log.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#define GROUP_AUTHENTICATED "system:authenticated"
#define DEFAULT_TTL_NS CKUBE_SEC(10)
/* Upstream keeps 1,024 tokens and 1,024 authorization decisions (LRU);
 * a manager's endpoints see a handful of scrapers, so fewer suffice and
 * the oldest entry makes room. */
#define CACHE_SIZE 256

static const char *const DEFAULT_PATHS[] = {"/healthz", "/readyz", "/livez", NULL};
static const char *const DEFAULT_GROUPS[] = {"system:masters", NULL};

/* ---- a small TTL cache keyed by SHA-256 ------------------------------------- */

/* One cached answer. The key is the digest of what was asked (a token is
 * never kept in the clear). */
typedef struct entry {
    unsigned char key[32];
    uint64_t expires_ns; /* 0 = empty slot */
    bool ok;             /* authenticated / allowed */
    delegated_user user; /* a token's user */
    char *reason;        /* a denial's reason */
} entry;

typedef struct cache {
    entry v[CACHE_SIZE];
} cache;

static void digest(const char *s, size_t n, unsigned char out[32])
{
    unsigned int len = 32;
    if (EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) != 1)
        memset(out, 0, 32); /* never matches a live entry: see lookup */
}

static void entry_clear(entry *e)
{
    delegated_user_clear(&e->user);
    free(e->reason);
    memset(e, 0, sizeof *e);
}

static entry *lookup(cache *c, const unsigned char key[32], uint64_t now)
{
    static const unsigned char zero[32];
    if (!memcmp(key, zero, 32))
        return NULL;
    for (size_t i = 0; i < CACHE_SIZE; i++)
        if (c->v[i].expires_ns > now && !memcmp(c->v[i].key, key, 32))
            return &c->v[i];
    return NULL;
}

/* The slot a new answer goes to: an empty or expired one, else the one
 * that expires first. Cleared. */
static entry *slot(cache *c, uint64_t now)
{
    entry *best = &c->v[0];
    for (size_t i = 0; i < CACHE_SIZE && best->expires_ns > now; i++)
        if (c->v[i].expires_ns < best->expires_ns)
            best = &c->v[i];
    entry_clear(best);
    return best;
}

/* ---- users -------------------------------------------------------------------- */

void delegated_user_clear(delegated_user *u)
{
    if (!u)
        return;
    free(u->name);
    free(u->uid);
    for (size_t i = 0; i < u->ngroups; i++)
        free(u->groups[i]);
    free(u->groups);
    json_decref(u->extra);
    memset(u, 0, sizeof *u);
}

int delegated_user_add_group(delegated_user *u, const char *g)
{
    char **v = realloc(u->groups, (u->ngroups + 1) * sizeof *v);
    if (!v)
        return -1;
    u->groups = v;
    if (!(v[u->ngroups] = strdup(g)))
        return -1;
    u->ngroups++;
    return 0;
}

static bool has_group(const delegated_user *u, const char *g)
{
    for (size_t i = 0; i < u->ngroups; i++)
        if (!strcmp(u->groups[i], g))
            return true;
    return false;
}

int delegated_user_add_authenticated(delegated_user *u)
{
    return has_group(u, GROUP_AUTHENTICATED) ? 0 : delegated_user_add_group(u, GROUP_AUTHENTICATED);
}

static int user_copy(delegated_user *dst, const delegated_user *src)
{
    memset(dst, 0, sizeof *dst);
    if (!(dst->name = strdup(src->name)) || (src->uid && !(dst->uid = strdup(src->uid))))
        goto fail;
    for (size_t i = 0; i < src->ngroups; i++)
        if (delegated_user_add_group(dst, src->groups[i]) != 0)
            goto fail;
    if (src->extra && !(dst->extra = json_deep_copy(src->extra)))
        goto fail;
    return 0;
fail:
    delegated_user_clear(dst);
    return -1;
}

/* One X509_NAME entry's text (UTF-8, malloc'd), or NULL. */
static char *name_entry(X509_NAME *n, int i)
{
    unsigned char *utf8 = NULL;
    int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, i)));
    if (len < 0)
        return NULL;
    char *s = strndup((const char *)utf8, (size_t)len);
    OPENSSL_free(utf8);
    return s;
}

int delegated_user_from_cert(X509 *x, delegated_user *out)
{
    memset(out, 0, sizeof *out);
    X509_NAME *n = x ? X509_get_subject_name(x) : NULL;
    int cn = n ? X509_NAME_get_index_by_NID(n, NID_commonName, -1) : -1;
    if (cn < 0 || !(out->name = name_entry(n, cn)) || !*out->name)
        goto fail;
    for (int i = -1; (i = X509_NAME_get_index_by_NID(n, NID_organizationName, i)) >= 0;) {
        char *g = name_entry(n, i);
        int rc = g ? delegated_user_add_group(out, g) : -1;
        free(g);
        if (rc != 0)
            goto fail;
    }
    if (delegated_user_add_authenticated(out) == 0)
        return 0;
fail:
    delegated_user_clear(out);
    return -1;
}

int delegated_user_from_token_review(const json_t *tr, delegated_user *out)
{
    memset(out, 0, sizeof *out);
    const json_t *st = json_object_get(tr, "status");
    const json_t *user = json_object_get(st, "user");
    const char *name = json_string_value(json_object_get(user, "username"));
    if (!json_is_true(json_object_get(st, "authenticated")) || !name || !*name)
        return -1;
    const char *uid = json_string_value(json_object_get(user, "uid"));
    if (!(out->name = strdup(name)) || (uid && *uid && !(out->uid = strdup(uid))))
        goto fail;
    size_t i;
    const json_t *g;
    json_array_foreach(json_object_get(user, "groups"), i, g)
    {
        if (json_is_string(g) && delegated_user_add_group(out, json_string_value(g)) != 0)
            goto fail;
    }
    const json_t *extra = json_object_get(user, "extra");
    if (json_is_object(extra) && json_object_size(extra) && !(out->extra = json_deep_copy(extra)))
        goto fail;
    if (delegated_user_add_authenticated(out) == 0)
        return 0;
fail:
    delegated_user_clear(out);
    return -1;
}

/* ---- the pure parts -------------------------------------------------------------- */

bool delegated_path_matches(const char *const *patterns, const char *path)
{
    for (; patterns && *patterns; patterns++) {
        const char *p = **patterns == '/' ? *patterns + 1 : *patterns;
        const char *q = *path == '/' ? path + 1 : path;
        size_t n = strlen(p);
        if (n && p[n - 1] == '*') {
            if (!strncmp(q, p, n - 1))
                return true;
        } else if (!strcmp(q, p)) {
            return true;
        }
    }
    return false;
}

json_t *delegated_sar_new(const delegated_user *u, const char *verb, const char *path)
{
    json_t *groups = json_array();
    for (size_t i = 0; groups && i < u->ngroups; i++)
        json_array_append_new(groups, json_string(u->groups[i]));
    json_t *spec = json_pack("{s:s,s:o,s:{s:s,s:s}}", "user", u->name, "groups", groups,
                             "nonResourceAttributes", "path", path, "verb", verb);
    if (spec && u->uid)
        json_object_set_new(spec, "uid", json_string(u->uid));
    if (spec && u->extra)
        json_object_set(spec, "extra", u->extra);
    return spec ? json_pack("{s:s,s:s,s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
                            "SubjectAccessReview", "spec", spec)
                : NULL;
}

json_t *delegated_sar_new_resource(const delegated_user *u, const delegated_resource *r)
{
    json_t *groups = json_array();
    for (size_t i = 0; groups && i < u->ngroups; i++)
        json_array_append_new(groups, json_string(u->groups[i]));
    json_t *ra = json_pack("{s:s,s:s,s:s,s:s}", "verb", r->verb, "group", r->group ? r->group : "",
                           "version", r->version ? r->version : "", "resource", r->resource);
    if (ra && r->subresource && *r->subresource)
        json_object_set_new(ra, "subresource", json_string(r->subresource));
    if (ra && r->namespace_ && *r->namespace_)
        json_object_set_new(ra, "namespace", json_string(r->namespace_));
    if (ra && r->name && *r->name)
        json_object_set_new(ra, "name", json_string(r->name));
    json_t *spec =
        ra ? json_pack("{s:s,s:o,s:o}", "user", u->name, "groups", groups, "resourceAttributes", ra)
           : NULL;
    if (!spec)
        json_decref(groups);
    if (spec && u->uid)
        json_object_set_new(spec, "uid", json_string(u->uid));
    if (spec && u->extra)
        json_object_set(spec, "extra", u->extra);
    return spec ? json_pack("{s:s,s:s,s:o}", "apiVersion", "authorization.k8s.io/v1", "kind",
                            "SubjectAccessReview", "spec", spec)
                : NULL;
}

ckube_status *delegated_forbidden_resource(const delegated_user *u, const delegated_resource *r,
                                           const char *reason)
{
    char res[512];
    snprintf(res, sizeof res, "%s%s%s", r->resource, r->subresource && *r->subresource ? "/" : "",
             r->subresource ? r->subresource : "");
    char where[400];
    if (r->namespace_ && *r->namespace_)
        snprintf(where, sizeof where, "in the namespace \"%s\"", r->namespace_);
    else
        snprintf(where, sizeof where, "at the cluster scope");
    char gr[400];
    snprintf(gr, sizeof gr, "%s%s%s", r->resource, r->group && *r->group ? "." : "",
             r->group ? r->group : "");
    char who[600];
    if (r->name && *r->name)
        snprintf(who, sizeof who, "%s \"%s\"", gr, r->name);
    else
        snprintf(who, sizeof who, "%s", gr);
    ckube_status *st =
        ckube_status_new(403, "Forbidden",
                         "%s is forbidden: User \"%s\" cannot %s resource \"%s\" in API group "
                         "\"%s\" %s%s%s",
                         who, u->name, r->verb, res, r->group ? r->group : "", where,
                         reason && *reason ? ": " : "", reason && *reason ? reason : "");
    if (st)
        ckube_status_set_details(st, r->name && *r->name ? r->name : NULL, r->group ? r->group : "",
                                 r->resource);
    return st;
}

ckube_status *delegated_forbidden(const delegated_user *u, const char *verb, const char *path,
                                  const char *reason)
{
    bool r = reason && *reason;
    return ckube_status_new(
        403, CKUBE_REASON_FORBIDDEN, "forbidden: User \"%s\" cannot %s path \"%s\"%s%s",
        u && u->name ? u->name : "", verb, path, r ? ": " : "", r ? reason : "");
}

/* ---- the authenticator and authorizer ---------------------------------------------- */

struct delegated_auth {
    ckube_client *client;
    char **paths, **groups; /* NULL-terminated copies */
    int64_t ttl_ns;         /* <= 0: no caching */
    ckube_clock *clock;
    pthread_mutex_t mu; /* guards the caches */
    cache tokens, decisions;
};

static char **copy_list(const char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    return out;
}

static void free_list(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

delegated_auth *delegated_auth_new(const delegated_auth_opts *o)
{
    if (!o || !o->client)
        return NULL;
    delegated_auth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->client = o->client;
    a->paths = copy_list(o->always_allow_paths ? o->always_allow_paths : DEFAULT_PATHS);
    a->groups = copy_list(o->always_allow_groups ? o->always_allow_groups : DEFAULT_GROUPS);
    a->ttl_ns = o->cache_ttl_ns ? o->cache_ttl_ns : (int64_t)DEFAULT_TTL_NS;
    a->clock = ckube_clock_or_real(o->clock);
    pthread_mutex_init(&a->mu, NULL);
    if (!a->paths || !a->groups) {
        delegated_auth_free(a);
        return NULL;
    }
    return a;
}

void delegated_auth_free(delegated_auth *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < CACHE_SIZE; i++) {
        entry_clear(&a->tokens.v[i]);
        entry_clear(&a->decisions.v[i]);
    }
    free_list(a->paths);
    free_list(a->groups);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* POSTs `obj` (stolen) to `path` and parses the answer into *out. 0, or
 * -1 with *err. */
static int review(delegated_auth *a, const char *path, json_t *obj, json_t **out,
                  ckube_status **err)
{
    *out = NULL;
    char *body = obj ? ckube_json_dumps(obj, NULL) : NULL;
    json_decref(obj);
    if (!body) {
        *err = ckube_status_internal("out of memory");
        return -1;
    }
    ckube_request rq = {.method = "POST", .path = path, .body = body, .body_len = strlen(body)};
    ckube_response resp = {0};
    int rc = ckube_client_do(a->client, &rq, &resp, err);
    free(body);
    if (rc == 0) {
        char *jerr = NULL;
        *out = ckube_json_loads(resp.body, resp.body_len, &jerr);
        if (!*out) {
            *err = ckube_status_internal("cannot read the review's answer: %s",
                                         jerr ? jerr : "out of memory");
            rc = -1;
        }
        free(jerr);
    }
    ckube_response_free(&resp);
    return rc;
}

/* A bearer token's user, from the cache or a TokenReview. */
static int authenticate_token(delegated_auth *a, const char *token, delegated_user *out)
{
    unsigned char key[32];
    digest(token, strlen(token), key);
    pthread_mutex_lock(&a->mu);
    entry *e = a->ttl_ns > 0 ? lookup(&a->tokens, key, ckube_clock_now(a->clock)) : NULL;
    int rc = !e ? 1 : e->ok ? user_copy(out, &e->user) : -1;
    pthread_mutex_unlock(&a->mu);
    if (rc <= 0)
        return rc;

    json_t *tr = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "authentication.k8s.io/v1", "kind",
                           "TokenReview", "spec", "token", token);
    json_t *answer = NULL;
    ckube_status *err = NULL;
    if (review(a, "/apis/authentication.k8s.io/v1/tokenreviews", tr, &answer, &err) != 0) {
        /* upstream: an error from the webhook fails the request (401) and
         * is not cached */
        CKUBE_ERROR("Unable to authenticate the request due to an error: %s",
                    err && err->message ? err->message : "unknown error");
        ckube_status_free(err);
        return -1;
    }
    rc = delegated_user_from_token_review(answer, out);
    if (rc != 0) {
        const char *why =
            json_string_value(json_object_get(json_object_get(answer, "status"), "error"));
        CKUBE_V(4, "token refused by the TokenReview: %s", why ? why : "not authenticated");
    }
    json_decref(answer);
    if (a->ttl_ns > 0) {
        pthread_mutex_lock(&a->mu);
        uint64_t now = ckube_clock_now(a->clock);
        entry *s = slot(&a->tokens, now);
        if (rc == 0 && user_copy(&s->user, out) != 0) {
            pthread_mutex_unlock(&a->mu);
            return rc; /* not cached: out of memory */
        }
        memcpy(s->key, key, 32);
        s->ok = rc == 0;
        s->expires_ns = now + (uint64_t)a->ttl_ns;
        pthread_mutex_unlock(&a->mu);
    }
    return rc;
}

int delegated_authenticate(delegated_auth *a, X509 *peer, bool verified, const char *authorization,
                           delegated_user *out)
{
    memset(out, 0, sizeof *out);
    /* upstream's union: the x509 authenticator first. A certificate that
     * does not verify is an error there, and the request fails. */
    if (peer) {
        if (!verified) {
            CKUBE_V(4, "client certificate refused: it does not verify against the client CA");
            return -1;
        }
        return delegated_user_from_cert(peer, out);
    }
    /* then the bearer token: "Bearer" (any case), one space or more, the
     * token; a header of another scheme is no token (anonymous) */
    if (authorization && !strncasecmp(authorization, "bearer ", 7)) {
        const char *t = authorization + 7;
        while (*t == ' ')
            t++;
        if (*t)
            return authenticate_token(a, t, out);
    }
    /* anonymous (upstream's delegating authenticator always allows it) */
    if (!(out->name = strdup("system:anonymous")) ||
        delegated_user_add_group(out, "system:unauthenticated")) {
        delegated_user_clear(out);
        return -1;
    }
    return 0;
}

/* Asks (or remembers) a SubjectAccessReview (taken). */
static int authorize_sar(delegated_auth *a, json_t *sar, char **reason, ckube_status **err);

int delegated_authorize(delegated_auth *a, const delegated_user *u, const char *verb,
                        const char *path, char **reason, ckube_status **err)
{
    *reason = NULL;
    *err = NULL;
    for (size_t i = 0; a->groups[i]; i++)
        if (has_group(u, a->groups[i]))
            return 1;
    if (delegated_path_matches((const char *const *)a->paths, path))
        return 1;
    return authorize_sar(a, delegated_sar_new(u, verb, path), reason, err);
}

int delegated_authorize_resource(delegated_auth *a, const delegated_user *u,
                                 const delegated_resource *r, char **reason, ckube_status **err)
{
    *reason = NULL;
    *err = NULL;
    for (size_t i = 0; a->groups[i]; i++)
        if (has_group(u, a->groups[i]))
            return 1;
    return authorize_sar(a, delegated_sar_new_resource(u, r), reason, err);
}

static int authorize_sar(delegated_auth *a, json_t *sar, char **reason, ckube_status **err)
{
    *reason = NULL;
    *err = NULL;
    char *spec = sar ? ckube_json_dumps(json_object_get(sar, "spec"), NULL) : NULL;
    if (!spec) {
        json_decref(sar);
        *err = ckube_status_internal("out of memory");
        return -1;
    }
    unsigned char key[32];
    digest(spec, strlen(spec), key);
    free(spec);
    pthread_mutex_lock(&a->mu);
    entry *e = a->ttl_ns > 0 ? lookup(&a->decisions, key, ckube_clock_now(a->clock)) : NULL;
    int rc = e ? e->ok : -2;
    if (e && e->reason)
        *reason = strdup(e->reason);
    pthread_mutex_unlock(&a->mu);
    if (rc != -2) {
        json_decref(sar);
        return rc;
    }

    json_t *answer = NULL;
    if (review(a, "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar, &answer, err) != 0)
        return -1; /* upstream: an error is 500 and not cached */
    const json_t *st = json_object_get(answer, "status");
    rc = json_is_true(json_object_get(st, "allowed")) ? 1 : 0;
    const char *why = json_string_value(json_object_get(st, "reason"));
    if (!rc && why && *why)
        *reason = strdup(why);
    json_decref(answer);
    if (a->ttl_ns > 0) {
        pthread_mutex_lock(&a->mu);
        uint64_t now = ckube_clock_now(a->clock);
        entry *s = slot(&a->decisions, now);
        memcpy(s->key, key, 32);
        s->ok = rc == 1;
        s->reason = *reason ? strdup(*reason) : NULL;
        s->expires_ns = now + (uint64_t)a->ttl_ns;
        pthread_mutex_unlock(&a->mu);
    }
    return rc;
}
