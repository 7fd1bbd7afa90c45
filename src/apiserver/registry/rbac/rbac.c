/* rbac.authorization.k8s.io/v1: roles, clusterroles, rolebindings and
 * clusterrolebindings, with upstream's defaulting (a subject's and a
 * roleRef's apiGroup), validation (rules, aggregation selectors,
 * subjects, an immutable roleRef) and printer columns, and rbac_install,
 * which serves them. Nothing here decides requests: that is
 * authorization/rbac's, fed with these objects. */
#include "apiserver/registry/rbac/rbac.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* ---- small helpers ---------------------------------------------------- */

static const char *str_or_empty(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

static const char *member_str(const json_t *obj, const char *key)
{
    return str_or_empty(json_object_get(obj, key));
}

/* Go's %#v of a []string: []string{"a", "b"}. Malloc'd. */
static char *go_string_slice(const json_t *list)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "[]string{");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        char *q = ckube_go_quote(str_or_empty(v));
        ckube__sb_printf(&b, "%s%s", i ? ", " : "", q ? q : "\"\"");
        free(q);
    }
    ckube__sb_add(&b, "}");
    return ckube__sb_take(&b);
}

/* FieldValueNotSupported, as upstream's field.NotSupported words it:
 * `Unsupported value: "X": supported values: "a", "b"`. */
static void field_not_supported(ckube_status *st, const char *field, const char *value,
                                const char *const *supported)
{
    ckube__strbuf b = {0};
    for (size_t i = 0; supported[i]; i++) {
        char *q = ckube_go_quote(supported[i]);
        ckube__sb_printf(&b, "%s%s", i ? ", " : "", q ? q : "\"\"");
        free(q);
    }
    char *list = ckube__sb_take(&b);
    char *q = ckube_go_quote(value);
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, field,
                           "Unsupported value: %s: supported values: %s", q ? q : "\"\"",
                           list ? list : "");
    free(q);
    free(list);
}

/* ---- defaulting ------------------------------------------------------- */

/* SetDefaults_Subject: a User's or Group's apiGroup is this group's, a
 * ServiceAccount's stays empty. Empty apiGroup and namespace are left
 * out, as Go's omitempty leaves them out of every answer. */
static void default_subjects(json_t *obj)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(obj, "subjects"), i, s)
    {
        if (!json_is_object(s))
            continue;
        json_t *group = json_object_get(s, "apiGroup");
        if (!group || json_is_null(group) ||
            (json_is_string(group) && !*json_string_value(group))) {
            const char *kind = member_str(s, "kind");
            if (!strcmp(kind, "User") || !strcmp(kind, "Group"))
                json_object_set_new(s, "apiGroup", json_string(RBAC_GROUP));
            else if (group)
                json_object_del(s, "apiGroup");
        }
        json_t *ns = json_object_get(s, "namespace");
        if (json_is_string(ns) && !*json_string_value(ns))
            json_object_del(s, "namespace");
    }
}

/* SetDefaults_RoleBinding and _ClusterRoleBinding: roleRef.apiGroup is
 * this group when empty (roleRef is a struct upstream: always there; null
 * decodes to its zero value, as a null apiGroup does to ""). */
static void binding_defaults(json_t *obj)
{
    json_t *ref = json_object_get(obj, "roleRef");
    if (!ref || json_is_null(ref)) {
        ref = json_object();
        json_object_set_new(obj, "roleRef", ref);
    }
    if (json_is_object(ref)) {
        json_t *group = json_object_get(ref, "apiGroup");
        if (!group || json_is_null(group) || (json_is_string(group) && !*json_string_value(group)))
            json_object_set_new(ref, "apiGroup", json_string(RBAC_GROUP));
    }
    default_subjects(obj);
}

static void binding_prepare_create(const resource_type *t, json_t *obj)
{
    (void)t;
    binding_defaults(obj);
}

static void binding_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    (void)t;
    (void)old;
    binding_defaults(obj);
}

/* ---- roles ------------------------------------------------------------ */

/* ValidatePolicyRule: verbs always; then either non-resource URLs alone
 * (cluster roles only) or API groups and resources. */
static void validate_rule(const json_t *rule, size_t i, bool namespaced, ckube_status *st)
{
    char field[96];
    if (!json_array_size(json_object_get(rule, "verbs"))) {
        snprintf(field, sizeof field, "rules[%zu].verbs", i);
        ckube_field_required(st, field, "verbs must contain at least one value");
    }
    json_t *urls = json_object_get(rule, "nonResourceURLs");
    if (json_array_size(urls)) {
        snprintf(field, sizeof field, "rules[%zu].nonResourceURLs", i);
        char *v = go_string_slice(urls);
        if (namespaced)
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field,
                                   "Invalid value: %s: namespaced rules cannot apply to "
                                   "non-resource URLs",
                                   v ? v : "[]string{}");
        if (json_array_size(json_object_get(rule, "apiGroups")) ||
            json_array_size(json_object_get(rule, "resources")) ||
            json_array_size(json_object_get(rule, "resourceNames")))
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field,
                                   "Invalid value: %s: rules cannot apply to both regular "
                                   "resources and non-resource URLs",
                                   v ? v : "[]string{}");
        free(v);
        return;
    }
    if (!json_array_size(json_object_get(rule, "apiGroups"))) {
        snprintf(field, sizeof field, "rules[%zu].apiGroups", i);
        ckube_field_required(st, field, "resource rules must supply at least one api group");
    }
    if (!json_array_size(json_object_get(rule, "resources"))) {
        snprintf(field, sizeof field, "rules[%zu].resources", i);
        ckube_field_required(st, field, "resource rules must supply at least one resource");
    }
}

static void validate_rules(const json_t *obj, bool namespaced, ckube_status *st)
{
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(obj, "rules"), i, rule)
        validate_rule(rule, i, namespaced, st);
}

static void role_validate(const resource_type *t, const json_t *obj, const json_t *old,
                          ckube_status *st)
{
    (void)t;
    (void)old;
    validate_rules(obj, true, st);
}

/* metav1 ValidateLabelSelector at `path`; then, as upstream's
 * ValidateClusterRole adds, "invalid label selector." when the selector
 * cannot be turned into one (which is exactly when anything above was
 * wrong). */
static void validate_label_selector(const json_t *sel, const char *path, ckube_status *st)
{
    if (ckube_validate_label_selector(sel, path, false, st))
        ckube_field_invalid(st, path, "null", "invalid label selector.");
}

static void clusterrole_validate(const resource_type *t, const json_t *obj, const json_t *old,
                                 ckube_status *st)
{
    (void)t;
    (void)old;
    validate_rules(obj, false, st);
    json_t *agg = json_object_get(obj, "aggregationRule");
    if (!json_is_object(agg))
        return;
    json_t *sels = json_object_get(agg, "clusterRoleSelectors");
    if (!json_array_size(sels))
        ckube_field_required(st, "aggregationRule.clusterRoleSelectors",
                             "at least one clusterRoleSelector required if aggregationRule is "
                             "non-nil");
    size_t i;
    json_t *sel;
    json_array_foreach(sels, i, sel)
    {
        char path[96];
        snprintf(path, sizeof path, "aggregationRule.clusterRoleSelectors[%zu]", i);
        validate_label_selector(sel, path, st);
    }
}

/* ---- bindings --------------------------------------------------------- */

/* ValidateRoleBindingSubject; `namespaced`: a RoleBinding's subject (a
 * ServiceAccount's namespace defaults to the binding's). */
static void validate_subject(const json_t *s, size_t i, bool namespaced, ckube_status *st)
{
    static const char *const kinds[] = {"ServiceAccount", "User", "Group", NULL};
    static const char *const rbac_group[] = {RBAC_GROUP, NULL};
    static const char *const no_group[] = {"", NULL};
    char field[96];
    const char *name = member_str(s, "name");
    const char *kind = member_str(s, "kind");
    const char *group = member_str(s, "apiGroup");
    if (!*name) {
        snprintf(field, sizeof field, "subjects[%zu].name", i);
        ckube_field_required(st, field, NULL);
    }
    if (!strcmp(kind, "ServiceAccount")) {
        if (*name) {
            snprintf(field, sizeof field, "subjects[%zu].name", i);
            ckube_validate_name_field(st, field, name, CKUBE_NAME_DNS1123_SUBDOMAIN, false);
        }
        if (*group) {
            snprintf(field, sizeof field, "subjects[%zu].apiGroup", i);
            field_not_supported(st, field, group, no_group);
        }
        if (!namespaced && !*member_str(s, "namespace")) {
            snprintf(field, sizeof field, "subjects[%zu].namespace", i);
            ckube_field_required(st, field, NULL);
        }
    } else if (!strcmp(kind, "User") || !strcmp(kind, "Group")) {
        if (strcmp(group, RBAC_GROUP)) {
            snprintf(field, sizeof field, "subjects[%zu].apiGroup", i);
            field_not_supported(st, field, group, rbac_group);
        }
    } else {
        snprintf(field, sizeof field, "subjects[%zu].kind", i);
        field_not_supported(st, field, kind, kinds);
    }
}

/* ValidateRoleBinding / ValidateClusterRoleBinding, and on update the
 * roleRef that cannot change (shown as upstream's %#v of the internal
 * struct). */
static void validate_binding(const json_t *obj, const json_t *old, bool namespaced,
                             ckube_status *st)
{
    static const char *const rbac_group[] = {RBAC_GROUP, NULL};
    static const char *const role_kinds[] = {"Role", "ClusterRole", NULL};
    static const char *const cluster_kinds[] = {"ClusterRole", NULL};
    const json_t *ref = json_object_get(obj, "roleRef");
    const char *group = member_str(ref, "apiGroup");
    const char *kind = member_str(ref, "kind");
    const char *name = member_str(ref, "name");
    if (strcmp(group, RBAC_GROUP))
        field_not_supported(st, "roleRef.apiGroup", group, rbac_group);
    if (namespaced ? strcmp(kind, "Role") && strcmp(kind, "ClusterRole")
                   : strcmp(kind, "ClusterRole"))
        field_not_supported(st, "roleRef.kind", kind, namespaced ? role_kinds : cluster_kinds);
    if (!*name)
        ckube_field_required(st, "roleRef.name", NULL);
    else
        ckube_validate_name_field(st, "roleRef.name", name, CKUBE_NAME_PATH_SEGMENT, false);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(obj, "subjects"), i, s)
        validate_subject(s, i, namespaced, st);
    if (!old)
        return;
    const json_t *oref = json_object_get(old, "roleRef");
    if (!strcmp(group, member_str(oref, "apiGroup")) && !strcmp(kind, member_str(oref, "kind")) &&
        !strcmp(name, member_str(oref, "name")))
        return;
    char *qg = ckube_go_quote(group), *qk = ckube_go_quote(kind), *qn = ckube_go_quote(name);
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "roleRef",
                           "Invalid value: rbac.RoleRef{APIGroup:%s, Kind:%s, Name:%s}: cannot "
                           "change roleRef",
                           qg ? qg : "\"\"", qk ? qk : "\"\"", qn ? qn : "\"\"");
    free(qg);
    free(qk);
    free(qn);
}

static void rolebinding_validate(const resource_type *t, const json_t *obj, const json_t *old,
                                 ckube_status *st)
{
    (void)t;
    validate_binding(obj, old, true, st);
}

static void clusterrolebinding_validate(const resource_type *t, const json_t *obj,
                                        const json_t *old, ckube_status *st)
{
    (void)t;
    validate_binding(obj, old, false, st);
}

/* ---- printing ----------------------------------------------------------- */

/* Roles print their creation time itself (RFC 3339, UTC), not an age. */
static json_t *cell_created_at(const json_t *obj)
{
    const char *ts = json_string_value(ckube_json_get_path(obj, "metadata.creationTimestamp"));
    return json_string(ts ? ts : "0001-01-01T00:00:00Z");
}

static json_t *cell_role_ref(const json_t *obj)
{
    const json_t *ref = json_object_get(obj, "roleRef");
    ckube__strbuf b = {0};
    ckube__sb_printf(&b, "%s/%s", member_str(ref, "kind"), member_str(ref, "name"));
    char *text = ckube__sb_take(&b);
    json_t *cell = json_string(text ? text : "");
    free(text);
    return cell;
}

/* The subjects of one kind, joined with ", " (upstream's SubjectsStrings:
 * users and groups by name, ServiceAccounts as namespace/name). */
static json_t *subjects_of_kind(const json_t *obj, const char *want)
{
    ckube__strbuf b = {0};
    size_t i, n = 0;
    json_t *s;
    json_array_foreach(json_object_get(obj, "subjects"), i, s)
    {
        if (strcmp(member_str(s, "kind"), want))
            continue;
        if (!strcmp(want, "ServiceAccount"))
            ckube__sb_printf(&b, "%s%s/%s", n ? ", " : "", member_str(s, "namespace"),
                             member_str(s, "name"));
        else
            ckube__sb_printf(&b, "%s%s", n ? ", " : "", member_str(s, "name"));
        n++;
    }
    char *text = ckube__sb_take(&b);
    json_t *cell = json_string(text ? text : "");
    free(text);
    return cell;
}

static json_t *cell_users(const json_t *obj)
{
    return subjects_of_kind(obj, "User");
}

static json_t *cell_groups(const json_t *obj)
{
    return subjects_of_kind(obj, "Group");
}

static json_t *cell_service_accounts(const json_t *obj)
{
    return subjects_of_kind(obj, "ServiceAccount");
}

static const col_def cols_role[] = {
    NAME_COL,
    {"Created At", "date", "", NULL, cell_created_at, 0, "When the object was created (RFC 3339)."},
    END_COL};

static const col_def cols_binding[] = {
    NAME_COL,
    {"Role", "string", "", NULL, cell_role_ref, 0, "The role granted, as kind/name."},
    AGE_COL,
    {"Users", "string", "", NULL, cell_users, 1, "Users in the binding."},
    {"Groups", "string", "", NULL, cell_groups, 1, "Groups in the binding."},
    {"ServiceAccounts", "string", "", NULL, cell_service_accounts, 1,
     "ServiceAccounts in the binding, as namespace/name."},
    END_COL};

/* No short names and no categories, as upstream. Names are path segment
 * names ("system:controller:x" is one). */
static const builtin types[] = {
    {RBAC_GROUP,     "v1",      "roles", "Role", "role", true,
     {NULL},         {NULL},    false,   false,  false,  CKUBE_NAME_PATH_SEGMENT,
     patchmeta_role, cols_role, NULL,    NULL,   NULL,   role_validate,
     NULL,           NULL,      true,    false},
    {RBAC_GROUP,
     "v1",
     "clusterroles",
     "ClusterRole",
     "clusterrole",
     false,
     {NULL},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_PATH_SEGMENT,
     patchmeta_clusterrole,
     cols_role,
     NULL,
     NULL,
     NULL,
     clusterrole_validate,
     NULL,
     NULL,
     true,
     false},
    {RBAC_GROUP,
     "v1",
     "rolebindings",
     "RoleBinding",
     "rolebinding",
     true,
     {NULL},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_PATH_SEGMENT,
     patchmeta_rolebinding,
     cols_binding,
     NULL,
     binding_prepare_create,
     binding_prepare_update,
     rolebinding_validate,
     NULL,
     NULL,
     true,
     false},
    {RBAC_GROUP,
     "v1",
     "clusterrolebindings",
     "ClusterRoleBinding",
     "clusterrolebinding",
     false,
     {NULL},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_PATH_SEGMENT,
     patchmeta_clusterrolebinding,
     cols_binding,
     NULL,
     binding_prepare_create,
     binding_prepare_update,
     clusterrolebinding_validate,
     NULL,
     NULL,
     true,
     false},
};

int rbac_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}
