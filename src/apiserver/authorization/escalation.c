/* RBAC's escalation guard (escalation.h). */
#include "apiserver/authorization/escalation.h"

#include <stdlib.h>
#include <string.h>

#include "apiserver/authorization/authorizer.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* IsOnlyMutatingGCFields: obj equals old once old takes obj's
 * ownerReferences and finalizers. What the server itself moves on an
 * update (resourceVersion, managedFields, generation) is left out of the
 * comparison: upstream compares before those change. */
static bool only_gc_fields(const json_t *obj, const json_t *old)
{
    static const char *const gc[] = {"ownerReferences", "finalizers"};
    static const char *const server[] = {"resourceVersion", "managedFields", "generation"};
    json_t *a = json_deep_copy(obj), *b = json_deep_copy(old);
    json_t *ma = json_object_get(a, "metadata"), *mb = json_object_get(b, "metadata");
    for (size_t i = 0; i < sizeof gc / sizeof *gc && json_is_object(mb); i++) {
        json_t *v = json_object_get(ma, gc[i]);
        if (v)
            json_object_set(mb, gc[i], v);
        else
            json_object_del(mb, gc[i]);
    }
    for (size_t i = 0; i < sizeof server / sizeof *server; i++) {
        json_object_del(ma, server[i]);
        json_object_del(mb, server[i]);
    }
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

/* Whether the authorizer allows `verb` on RBAC `resource` ns/name
 * (RoleEscalationAuthorized, BindingAuthorized). */
static bool may(rbac_index *ix, const auth_user *user, const char *verb, const char *resource,
                const char *ns, const char *name)
{
    authz_attributes at = {.user = user,
                           .verb = verb,
                           .resource_request = true,
                           .api_group = RBAC_GROUP,
                           .api_version = "v1",
                           .resource = resource,
                           .subresource = "",
                           .name = name ? name : "",
                           .namespace_ = ns ? ns : ""};
    return authz_allowed(ix, &at, NULL, NULL);
}

/* ConfirmNoEscalation: NULL when the user's own rules in ns cover
 * `rules`, else the message of the 403 (malloc'd). */
static char *escalation(rbac_index *ix, const auth_user *user, const char *ns, const json_t *rules)
{
    rbac_user ru = {user->name, (const char *const *)user->groups, user->ngroups};
    char *errors = NULL;
    json_t *own = rbac_rules_for(ix, &ru, ns, true, &errors);
    rbac_rule *owner;
    size_t n;
    rbac_rules_compile(own, &owner, &n);
    json_decref(own);
    char *missing = rbac_uncovered_rights(owner, n, rules);
    rbac_rules_free(owner, n);
    if (!missing) {
        free(errors);
        return NULL;
    }
    ckube__strbuf sb = {0};
    char *qname = ckube_go_quote(user->name);
    ckube__sb_printf(&sb, "user %s (groups=[", qname);
    free(qname);
    for (size_t i = 0; i < user->ngroups; i++) {
        char *q = ckube_go_quote(user->groups[i]);
        ckube__sb_printf(&sb, "%s%s", i ? " " : "", q);
        free(q);
    }
    ckube__sb_printf(&sb,
                     "]) is attempting to grant RBAC permissions not currently held:\n%s", missing);
    /* Go's %v of a []error holding upstream's aggregate. */
    if (errors)
        ckube__sb_printf(&sb, "; resolution errors: [%s]", errors);
    free(missing);
    free(errors);
    if (sb.oom)
        xalloc_die();
    return ckube__sb_take(&sb);
}

static ckube_status *forbidden(const char *resource, const char *name, const char *msg)
{
    ckube_status *st = ckube_status_new(403, CKUBE_REASON_FORBIDDEN,
                                        "%s." RBAC_GROUP " \"%s\" is forbidden: %s", resource,
                                        name, msg);
    if (st) {
        st->group = xstrdup(RBAC_GROUP);
        st->kind = xstrdup(resource);
        st->name = xstrdup(name);
    }
    return st;
}

/* Upstream's rule set for "every right", which an aggregationRule needs. */
static json_t *full_authority(void)
{
    return json_pack("[{s:[s],s:[s],s:[s]},{s:[s],s:[s]}]", "verbs", "*", "apiGroups", "*",
                     "resources", "*", "verbs", "*", "nonResourceURLs", "*");
}

static ckube_status *check_role(rbac_index *ix, const auth_user *user, const char *resource,
                                const char *ns, const char *name, const json_t *obj,
                                const json_t *old)
{
    if (may(ix, user, "escalate", resource, ns, name))
        return NULL;
    char *msg = escalation(ix, user, ns, json_object_get(obj, "rules"));
    ckube_status *st = msg ? forbidden(resource, name, msg) : NULL;
    free(msg);
    if (st || strcmp(resource, "clusterroles"))
        return st;
    /* An aggregationRule gathers anything (and a removed one could keep
     * rules from being tightened): only with every right. */
    if (json_object_get(obj, "aggregationRule") || (old && json_object_get(old, "aggregationRule"))) {
        json_t *all = full_authority();
        msg = escalation(ix, user, ns, all);
        json_decref(all);
        if (msg)
            st = forbidden(resource, name,
                           "must have cluster-admin privileges to use the aggregationRule");
        free(msg);
    }
    return st;
}

static ckube_status *check_binding(rbac_index *ix, const auth_user *user, const char *resource,
                                   const char *ns, const char *name, const json_t *obj)
{
    const json_t *ref = json_object_get(obj, "roleRef");
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *role = json_string_value(json_object_get(ref, "name"));
    if (!kind || !role)
        return NULL; /* validation has refused it already */
    bool cluster = !strcmp(kind, "ClusterRole");
    if (may(ix, user, "bind", cluster ? "clusterroles" : "roles", ns, role))
        return NULL;
    json_t *rules = rbac_role_rules(ix, cluster, ns, role);
    if (!rules) { /* GetRoleReferenceRules' error, from the roles' storage */
        char *q = ckube_go_quote(role);
        char *msg = xasprintf("%s." RBAC_GROUP " %s not found", cluster ? "clusterroles" : "roles",
                              q);
        ckube_status *st = forbidden(resource, name, msg);
        free(q);
        free(msg);
        return st;
    }
    char *msg = escalation(ix, user, ns, rules);
    json_decref(rules);
    ckube_status *st = msg ? forbidden(resource, name, msg) : NULL;
    free(msg);
    return st;
}

ckube_status *authz_check_rbac_write(rbac_index *ix, const auth_user *user, const char *resource,
                                     const char *ns, const json_t *obj, const json_t *old)
{
    bool role = !strcmp(resource, "roles") || !strcmp(resource, "clusterroles");
    bool binding = !strcmp(resource, "rolebindings") || !strcmp(resource, "clusterrolebindings");
    if (!(role || binding) || !user)
        return NULL;
    /* EscalationAllowed: the privileged group, which the server's own
     * loopback requests use. */
    if (auth_user_in_group(user, AUTH_GROUP_MASTERS))
        return NULL;
    if (old && only_gc_fields(obj, old))
        return NULL;
    const char *name = ckube_obj_name(obj);
    if (!name)
        name = "";
    if (!ns)
        ns = "";
    return role ? check_role(ix, user, resource, ns, name, obj, old)
                : check_binding(ix, user, resource, ns, name, obj);
}
