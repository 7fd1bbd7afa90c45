/* Who a request is from (user.h). */
#include "apiserver/authentication/user.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

auth_user *auth_user_new(const char *name, const char *uid, const char *const *groups, size_t n,
                         json_t *extra)
{
    auth_user *u = xcalloc(1, sizeof *u);
    atomic_init(&u->refs, 1);
    u->name = xstrdup(name ? name : "");
    u->uid = xstrdup(uid ? uid : "");
    for (size_t i = 0; i < n; i++)
        auth_user_add_group(u, groups[i]);
    u->extra = extra ? json_incref(extra) : NULL;
    return u;
}

void auth_user_add_group(auth_user *u, const char *group)
{
    if (auth_user_in_group(u, group))
        return;
    u->groups = xrealloc(u->groups, (u->ngroups + 1) * sizeof *u->groups);
    u->groups[u->ngroups++] = xstrdup(group);
}

int auth_user_in_group(const auth_user *u, const char *group)
{
    for (size_t i = 0; i < u->ngroups; i++)
        if (!strcmp(u->groups[i], group))
            return 1;
    return 0;
}

auth_user *auth_user_ref(auth_user *u)
{
    if (u)
        atomic_fetch_add_explicit(&u->refs, 1, memory_order_relaxed);
    return u;
}

void auth_user_unref(auth_user *u)
{
    if (!u || atomic_fetch_sub_explicit(&u->refs, 1, memory_order_acq_rel) != 1)
        return;
    free(u->name);
    free(u->uid);
    for (size_t i = 0; i < u->ngroups; i++)
        free(u->groups[i]);
    free(u->groups);
    json_decref(u->extra);
    free(u);
}

json_t *auth_user_info_json(const auth_user *u)
{
    json_t *o = json_object();
    json_object_set_new(o, "username", json_string(u->name));
    if (*u->uid)
        json_object_set_new(o, "uid", json_string(u->uid));
    if (u->ngroups) {
        json_t *g = json_array();
        for (size_t i = 0; i < u->ngroups; i++)
            json_array_append_new(g, json_string(u->groups[i]));
        json_object_set_new(o, "groups", g);
    }
    if (u->extra && json_object_size(u->extra))
        json_object_set(o, "extra", u->extra);
    return o;
}
