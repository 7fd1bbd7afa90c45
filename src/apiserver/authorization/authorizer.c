/* Whether a request may do what it asks, and upstream's 403 (authorizer.h). */
#include "apiserver/authorization/authorizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/xalloc.h"

bool authz_allowed(rbac_index *ix, const authz_attributes *at, char **reason, char **allowed_by)
{
    if (reason)
        *reason = NULL;
    if (allowed_by)
        *allowed_by = NULL;
    const auth_user *u = at->user;
    if (!u)
        return false;
    if (auth_user_in_group(u, AUTH_GROUP_MASTERS))
        return true;
    if (!ix)
        return false;
    rbac_user ru = {u->name, (const char *const *)u->groups, u->ngroups};
    rbac_request rq = {
        .verb = at->verb,
        .resource_request = at->resource_request,
        .api_group = at->api_group ? at->api_group : "",
        .resource = at->resource ? at->resource : "",
        .subresource = at->subresource ? at->subresource : "",
        .name = at->name ? at->name : "",
        .namespace_ = at->namespace_ ? at->namespace_ : "",
        .path = at->path ? at->path : "",
    };
    return rbac_authorize(ix, &ru, &rq, reason, allowed_by);
}

ckube_status *authz_forbidden(const authz_attributes *at, const char *reason)
{
    const char *user = at->user ? at->user->name : "";
    char *what;
    if (!at->resource_request) {
        what = xasprintf("User \"%s\" cannot %s path \"%s\"", user, at->verb,
                         at->path ? at->path : "");
    } else {
        const char *sub = at->subresource && *at->subresource ? at->subresource : NULL;
        const char *ns = at->namespace_ ? at->namespace_ : "";
        char *res = xasprintf("%s%s%s", at->resource, sub ? "/" : "", sub ? sub : "");
        if (*ns)
            what = xasprintf("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" in the "
                             "namespace \"%s\"",
                             user, at->verb, res, at->api_group ? at->api_group : "", ns);
        else
            what = xasprintf("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" at the "
                             "cluster scope",
                             user, at->verb, res, at->api_group ? at->api_group : "");
        free(res);
    }
    char *err = reason && *reason ? xasprintf("%s: %s", what, reason) : xstrdup(what);
    free(what);
    /* apierrors.NewForbidden: the group-qualified resource, the name. */
    const char *group = at->api_group ? at->api_group : "";
    const char *name = at->name ? at->name : "";
    ckube_status *st;
    if (!at->resource_request || !at->resource || !*at->resource)
        st = ckube_status_new(403, CKUBE_REASON_FORBIDDEN, "forbidden: %s", err);
    else if (!*name)
        st = ckube_status_new(403, CKUBE_REASON_FORBIDDEN, "%s%s%s is forbidden: %s", at->resource,
                              *group ? "." : "", group, err);
    else
        st = ckube_status_new(403, CKUBE_REASON_FORBIDDEN, "%s%s%s \"%s\" is forbidden: %s",
                              at->resource, *group ? "." : "", group, name, err);
    free(err);
    if (st && at->resource_request && at->resource && *at->resource) {
        st->group = xstrdup(group);
        st->kind = xstrdup(at->resource);
        if (*name)
            st->name = xstrdup(name);
    }
    return st;
}
