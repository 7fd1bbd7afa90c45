/* Acting as another user (impersonation.h). */
#include "apiserver/endpoints/filters/impersonation.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apiserver/authorization/authorizer.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

#define EXTRA_PREFIX "Impersonate-Extra-"
#define SA_PREFIX "system:serviceaccount:"

/* One thing asked for (upstream's ObjectReference per request). */
typedef struct ask {
    const char *kind; /* "User", "ServiceAccount", "Group", "UserExtra", "UID" */
    char *ns, *name;  /* owned */
    char *key;        /* UserExtra: the extra's key (owned) */
} ask;

typedef struct asks {
    ask *v;
    size_t n, cap;
} asks;

static ask *add(asks *a, const char *kind, const char *name)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 8;
        a->v = xrealloc(a->v, a->cap * sizeof *a->v);
    }
    ask *k = &a->v[a->n++];
    *k = (ask){.kind = kind, .name = xstrdup(name)};
    return k;
}

static void asks_free(asks *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->v[i].ns);
        free(a->v[i].name);
        free(a->v[i].key);
    }
    free(a->v);
}

/* serviceaccount.SplitUsername: system:serviceaccount:NS:NAME with a
 * namespace name and a ServiceAccount name. */
static bool split_sa(const char *user, char **ns, char **name)
{
    if (strncmp(user, SA_PREFIX, strlen(SA_PREFIX)))
        return false;
    const char *rest = user + strlen(SA_PREFIX);
    const char *colon = strchr(rest, ':');
    if (!colon || strchr(colon + 1, ':'))
        return false;
    char *n = xstrndup(rest, (size_t)(colon - rest));
    char *bad1 = ckube_is_dns1123_label(n), *bad2 = ckube_is_dns1123_subdomain(colon + 1);
    bool ok = !bad1 && !bad2;
    free(bad1);
    free(bad2);
    if (!ok) {
        free(n);
        return false;
    }
    *ns = n;
    *name = xstrdup(colon + 1);
    return true;
}

/* url.PathUnescape of the lowercased key; a malformed one is kept as
 * sent (unescapeExtraKey). */
static char *extra_key(const char *raw)
{
    char *low = xstrdup(raw);
    for (char *p = low; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    char *out = xmalloc(strlen(low) + 1), *o = out;
    for (const char *p = low; *p; p++) {
        if (*p != '%') {
            *o++ = *p;
            continue;
        }
        if (!isxdigit((unsigned char)p[1]) || !isxdigit((unsigned char)p[2])) {
            free(out);
            return low;
        }
        char hex[3] = {p[1], p[2], 0};
        *o++ = (char)strtol(hex, NULL, 16);
        p += 2;
    }
    *o = '\0';
    free(low);
    return out;
}

/* Go's %v of the []ObjectReference asked: each as {Kind Namespace Name
 * UID APIVersion ResourceVersion FieldPath}. */
static char *describe(const asks *a)
{
    ckube__strbuf sb = {0};
    ckube__sb_addc(&sb, '[');
    for (size_t i = 0; i < a->n; i++) {
        const ask *k = &a->v[i];
        bool authn = !strcmp(k->kind, "UserExtra") || !strcmp(k->kind, "UID");
        ckube__sb_printf(&sb, "%s{%s %s %s  %s  %s}", i ? " " : "", k->kind, k->ns ? k->ns : "",
                         k->name, authn ? "authentication.k8s.io/v1" : "", k->key ? k->key : "");
    }
    ckube__sb_addc(&sb, ']');
    if (sb.oom)
        xalloc_die();
    return ckube__sb_take(&sb);
}

/* responsewriters.InternalError's body: the URI %q'd, HTML-escaped. */
static char *internal_error(const char *uri, const char *msg)
{
    char *q = ckube_go_quote(uri);
    char *raw = xasprintf("Internal Server Error: %s: %s", q, msg);
    free(q);
    ckube__strbuf sb = {0};
    for (const char *p = raw; *p; p++) {
        switch (*p) {
        case '&':
            ckube__sb_add(&sb, "&amp;");
            break;
        case '<':
            ckube__sb_add(&sb, "&lt;");
            break;
        case '>':
            ckube__sb_add(&sb, "&gt;");
            break;
        case '"':
            ckube__sb_add(&sb, "&#34;");
            break;
        case '\'':
            ckube__sb_add(&sb, "&#39;");
            break;
        default:
            ckube__sb_addc(&sb, *p);
        }
    }
    ckube__sb_addc(&sb, '\n'); /* http.Error's Fprintln */
    free(raw);
    if (sb.oom)
        xalloc_die();
    return ckube__sb_take(&sb);
}

/* What the headers ask, in upstream's order: the user, the groups, the
 * extras, the uid. */
static void collect(const httpd_req *req, asks *a, bool *has_user, bool *groups_given)
{
    const char *user = httpd_req_header(req, "Impersonate-User");
    *has_user = user && *user;
    if (*has_user) {
        char *ns, *name;
        if (split_sa(user, &ns, &name)) {
            ask *k = add(a, "ServiceAccount", name);
            k->ns = ns;
            free(name);
        } else {
            add(a, "User", user);
        }
    }
    *groups_given = false;
    size_t n = httpd_req_header_count(req);
    for (size_t i = 0; i < n; i++) {
        const char *hn, *hv;
        httpd_req_header_at(req, i, &hn, &hv);
        if (!strcasecmp(hn, "Impersonate-Group")) {
            *groups_given = true;
            add(a, "Group", hv);
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *hn, *hv;
        httpd_req_header_at(req, i, &hn, &hv);
        if (!strncasecmp(hn, EXTRA_PREFIX, strlen(EXTRA_PREFIX)))
            add(a, "UserExtra", hv)->key = extra_key(hn + strlen(EXTRA_PREFIX));
    }
    const char *uid = httpd_req_header(req, "Impersonate-Uid");
    if (uid && *uid)
        add(a, "UID", uid);
}

/* The authorizer's question for one thing asked. */
static void attributes(const auth_user *requester, const ask *k, authz_attributes *at)
{
    *at = (authz_attributes){.user = requester,
                             .verb = "impersonate",
                             .resource_request = true,
                             .api_group = "",
                             .api_version = "v1",
                             .subresource = "",
                             .namespace_ = "",
                             .name = k->name};
    if (!strcmp(k->kind, "ServiceAccount")) {
        at->resource = "serviceaccounts";
        at->namespace_ = k->ns;
    } else if (!strcmp(k->kind, "User")) {
        at->resource = "users";
    } else if (!strcmp(k->kind, "Group")) {
        at->resource = "groups";
    } else {
        at->api_group = "authentication.k8s.io";
        at->resource = !strcmp(k->kind, "UID") ? "uids" : "userextras";
        at->subresource = k->key ? k->key : "";
    }
}

/* The user to act as, from what was asked (all of it allowed). */
static auth_user *build_user(const asks *a, bool groups_given)
{
    const char *name = "", *uid = "";
    const char **groups = xcalloc(a->n + 3, sizeof *groups);
    size_t ng = 0;
    char *sa_group = NULL;
    json_t *extra = json_object();
    for (size_t i = 0; i < a->n; i++) {
        const ask *k = &a->v[i];
        if (!strcmp(k->kind, "ServiceAccount")) {
            if (!groups_given) {
                sa_group = xasprintf("system:serviceaccounts:%s", k->ns);
                groups[ng++] = "system:serviceaccounts";
                groups[ng++] = sa_group;
            }
        } else if (!strcmp(k->kind, "Group")) {
            groups[ng++] = k->name;
        } else if (!strcmp(k->kind, "UserExtra")) {
            json_t *vals = json_object_get(extra, k->key);
            if (!vals)
                json_object_set_new(extra, k->key, vals = json_array());
            json_array_append_new(vals, json_string(k->name));
        } else if (!strcmp(k->kind, "UID")) {
            uid = k->name;
        }
    }
    char *sa_name = NULL;
    for (size_t i = 0; i < a->n; i++) {
        if (!strcmp(a->v[i].kind, "User"))
            name = a->v[i].name;
        else if (!strcmp(a->v[i].kind, "ServiceAccount"))
            name = sa_name = xasprintf(SA_PREFIX "%s:%s", a->v[i].ns, a->v[i].name);
    }
    /* system:authenticated unless the groups say which; for the
     * anonymous user, system:unauthenticated. */
    bool anon = !strcmp(name, AUTH_USER_ANONYMOUS), have = false;
    for (size_t i = 0; i < ng; i++)
        have |= !strcmp(groups[i], AUTH_GROUP_UNAUTHENTICATED) ||
                (!anon && !strcmp(groups[i], AUTH_GROUP_AUTHENTICATED));
    if (!have)
        groups[ng++] = anon ? AUTH_GROUP_UNAUTHENTICATED : AUTH_GROUP_AUTHENTICATED;
    auth_user *u = auth_user_new(name, uid, groups, ng, json_object_size(extra) ? extra : NULL);
    json_decref(extra);
    free(groups);
    free(sa_group);
    free(sa_name);
    return u;
}

impersonate_result impersonate(rbac_index *ix, const auth_user *requester, const httpd_req *req,
                               const char *uri, auth_user **as, ckube_status **denied, char **text)
{
    asks a = {0};
    bool has_user, groups_given;
    collect(req, &a, &has_user, &groups_given);
    if (!a.n)
        return IMPERSONATE_NONE;
    impersonate_result r = IMPERSONATE_AS;
    if (!has_user) {
        char *what = describe(&a);
        char *msg = xasprintf("requested %s without impersonating a user", what);
        *text = internal_error(uri, msg);
        free(what);
        free(msg);
        r = IMPERSONATE_INVALID;
    }
    for (size_t i = 0; r == IMPERSONATE_AS && i < a.n; i++) {
        authz_attributes at;
        attributes(requester, &a.v[i], &at);
        char *reason = NULL;
        if (!authz_allowed(ix, &at, &reason, NULL)) {
            *denied = authz_forbidden(&at, reason);
            r = IMPERSONATE_DENIED;
        }
        free(reason);
    }
    if (r == IMPERSONATE_AS)
        *as = build_user(&a, groups_given);
    asks_free(&a);
    return r;
}
