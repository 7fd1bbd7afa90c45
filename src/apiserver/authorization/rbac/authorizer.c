/* RBAC's decision over an index (authorizer.h).
 *
 * Three ordered trees (libbsd's RB trees, keyed by string):
 *   roles     "ns/name" for Roles, "/name" for ClusterRoles -> compiled rules
 *   bindings  "ns/name" for RoleBindings, "/name" for ClusterRoleBindings
 *   subjects  "u:<user name>" or "g:<group>" -> the bindings naming it
 * A ServiceAccount subject is indexed under its user name,
 * "u:system:serviceaccount:NS:NAME", its namespace defaulting to the
 * binding's (an unqualified one in a ClusterRoleBinding names nobody, as
 * upstream). A decision looks up "u:<user>" and "g:<group>" for each
 * group: a handful of tree lookups whatever the number of bindings. */
#include "apiserver/authorization/rbac/authorizer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* libbsd's tree.h marks generated static functions __unused, which glibc
 * does not define. */
#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <sys/tree.h>

#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

/* A role's node stays where it is while bindings refer to it, stored or
 * not (present false: a binding names a role that does not exist), so a
 * binding holds a pointer to it and a decision never looks roles up. */
typedef struct role {
    RB_ENTRY(role) node;
    char *key;
    bool present;
    size_t refs; /* bindings referring to it */
    rbac_rule *rules;
    size_t nrules;
    bool any_resource, any_url; /* whether some rule names resources / URLs */
    json_t *rules_json;         /* the rules as stored, for rbac_rules_for */
} role;

typedef struct binding {
    RB_ENTRY(binding) node;
    char *key;
    char *name;      /* metadata.name */
    char *ns;        /* "" for a ClusterRoleBinding */
    bool to_cluster; /* roleRef is a ClusterRole */
    char *role_name;
    role *role;          /* the role it refers to (a reference: role.refs) */
    char **subject_keys; /* the subjects' index keys */
    char **subject_desc; /* and how upstream names them: `User "x"`, ... */
    size_t nsubjects;
} binding;

typedef struct subject {
    RB_ENTRY(subject) node;
    char *key;
    binding **bindings;
    size_t n, cap;
} subject;

static int role_cmp(const role *a, const role *b)
{
    return strcmp(a->key, b->key);
}
static int binding_cmp(const binding *a, const binding *b)
{
    return strcmp(a->key, b->key);
}
static int subject_cmp(const subject *a, const subject *b)
{
    return strcmp(a->key, b->key);
}

RB_HEAD(role_tree, role);
RB_HEAD(binding_tree, binding);
RB_HEAD(subject_tree, subject);
RB_GENERATE_STATIC(role_tree, role, node, role_cmp)
RB_GENERATE_STATIC(binding_tree, binding, node, binding_cmp)
RB_GENERATE_STATIC(subject_tree, subject, node, subject_cmp)

struct rbac_index {
    pthread_rwlock_t lock;
    struct role_tree roles;
    struct binding_tree bindings;
    struct subject_tree subjects;
};

rbac_index *rbac_index_new(void)
{
    rbac_index *ix = xcalloc(1, sizeof *ix);
    pthread_rwlock_init(&ix->lock, NULL);
    RB_INIT(&ix->roles);
    RB_INIT(&ix->bindings);
    RB_INIT(&ix->subjects);
    return ix;
}

static void role_clear(role *r)
{
    rbac_rules_free(r->rules, r->nrules);
    json_decref(r->rules_json);
    r->rules = NULL;
    r->nrules = 0;
    r->rules_json = NULL;
    r->present = r->any_resource = r->any_url = false;
}

static void role_free(role *r)
{
    role_clear(r);
    free(r->key);
    free(r);
}

static void binding_free(binding *b)
{
    for (size_t i = 0; i < b->nsubjects; i++) {
        free(b->subject_keys[i]);
        free(b->subject_desc[i]);
    }
    free(b->subject_keys);
    free(b->subject_desc);
    free(b->key);
    free(b->name);
    free(b->ns);
    free(b->role_name);
    free(b);
}

void rbac_index_free(rbac_index *ix)
{
    if (!ix)
        return;
    role *r, *rn;
    RB_FOREACH_SAFE(r, role_tree, &ix->roles, rn)
    {
        RB_REMOVE(role_tree, &ix->roles, r);
        role_free(r);
    }
    binding *b, *bn;
    RB_FOREACH_SAFE(b, binding_tree, &ix->bindings, bn)
    {
        RB_REMOVE(binding_tree, &ix->bindings, b);
        binding_free(b);
    }
    subject *s, *sn;
    RB_FOREACH_SAFE(s, subject_tree, &ix->subjects, sn)
    {
        RB_REMOVE(subject_tree, &ix->subjects, s);
        free(s->bindings);
        free(s->key);
        free(s);
    }
    pthread_rwlock_destroy(&ix->lock);
    free(ix);
}

/* "ns/name" ("/name" when cluster-scoped). */
static char *object_key(const json_t *obj, bool cluster)
{
    const char *ns =
        cluster ? "" : json_string_value(ckube_json_get_path(obj, "metadata.namespace"));
    const char *name = json_string_value(ckube_json_get_path(obj, "metadata.name"));
    return xasprintf("%s/%s", ns ? ns : "", name ? name : "");
}

/* ---- roles ------------------------------------------------------------------- */

/* The node of role `key` (taken), made absent when there is none. */
static role *role_node(rbac_index *ix, char *key)
{
    role probe = {.key = key};
    role *r = RB_FIND(role_tree, &ix->roles, &probe);
    if (r) {
        free(key);
        return r;
    }
    r = xcalloc(1, sizeof *r);
    r->key = key;
    RB_INSERT(role_tree, &ix->roles, r);
    return r;
}

/* Drops an absent role nothing refers to. */
static void role_gc(rbac_index *ix, role *r)
{
    if (!r->present && !r->refs) {
        RB_REMOVE(role_tree, &ix->roles, r);
        role_free(r);
    }
}

static void apply_role(rbac_index *ix, const json_t *obj, bool cluster, bool deleted)
{
    role *r = role_node(ix, object_key(obj, cluster));
    role_clear(r);
    if (deleted) {
        role_gc(ix, r);
        return;
    }
    r->present = true;
    /* A ClusterRole with an aggregationRule carries the aggregated rules
     * in `rules` (its controller keeps them): they count as any rules. */
    const json_t *rules = json_object_get(obj, "rules");
    rbac_rules_compile(rules, &r->rules, &r->nrules);
    for (size_t i = 0; i < r->nrules; i++) {
        r->any_resource |= r->rules[i].resources && r->rules[i].resources[0];
        r->any_url |= r->rules[i].non_resource_urls && r->rules[i].non_resource_urls[0];
    }
    r->rules_json = json_is_array(rules) ? json_deep_copy(rules) : json_array();
}

/* ---- bindings ---------------------------------------------------------------- */

static subject *subject_get(rbac_index *ix, const char *key, bool create)
{
    subject probe = {.key = (char *)key};
    subject *s = RB_FIND(subject_tree, &ix->subjects, &probe);
    if (s || !create)
        return s;
    s = xcalloc(1, sizeof *s);
    s->key = xstrdup(key);
    RB_INSERT(subject_tree, &ix->subjects, s);
    return s;
}

/* The index key of a binding's subject, or NULL when it names nobody. */
static char *subject_key(const json_t *subj, const char *binding_ns)
{
    const char *kind = json_string_value(json_object_get(subj, "kind"));
    const char *name = json_string_value(json_object_get(subj, "name"));
    if (!kind || !name)
        return NULL;
    if (!strcmp(kind, "User"))
        return xasprintf("u:%s", name);
    if (!strcmp(kind, "Group"))
        return xasprintf("g:%s", name);
    if (!strcmp(kind, "ServiceAccount")) {
        const char *ns = json_string_value(json_object_get(subj, "namespace"));
        if (!ns || !*ns)
            ns = binding_ns;
        return *ns ? xasprintf("u:system:serviceaccount:%s:%s", ns, name) : NULL;
    }
    return NULL;
}

/* How upstream's describeSubject names a subject in an allow reason:
 * `User "x"`, `Group "x"`, `ServiceAccount "name/ns"` (the namespace
 * defaulting to the binding's, "" in a ClusterRoleBinding's reason). */
static char *subject_describe(const json_t *subj, const char *binding_ns)
{
    const char *kind = json_string_value(json_object_get(subj, "kind"));
    const char *name = json_string_value(json_object_get(subj, "name"));
    char *out, *q;
    if (!strcmp(kind, "ServiceAccount")) {
        const char *ns = json_string_value(json_object_get(subj, "namespace"));
        char *nn = xasprintf("%s/%s", name, ns && *ns ? ns : binding_ns);
        q = ckube_go_quote(nn);
        free(nn);
    } else {
        q = ckube_go_quote(name);
    }
    out = xasprintf("%s %s", kind, q);
    free(q);
    return out;
}

static void unlink_binding(rbac_index *ix, binding *b)
{
    for (size_t i = 0; i < b->nsubjects; i++) {
        subject *s = subject_get(ix, b->subject_keys[i], false);
        if (!s)
            continue;
        for (size_t j = 0; j < s->n; j++) {
            if (s->bindings[j] == b) {
                s->bindings[j] = s->bindings[--s->n];
                break;
            }
        }
        if (!s->n) {
            RB_REMOVE(subject_tree, &ix->subjects, s);
            free(s->bindings);
            free(s->key);
            free(s);
        }
    }
    RB_REMOVE(binding_tree, &ix->bindings, b);
    role *r = b->role;
    binding_free(b);
    if (r) {
        r->refs--;
        role_gc(ix, r);
    }
}

static void apply_binding(rbac_index *ix, const json_t *obj, bool cluster, bool deleted)
{
    binding probe = {.key = object_key(obj, cluster)};
    binding *old = RB_FIND(binding_tree, &ix->bindings, &probe);
    if (old)
        unlink_binding(ix, old);
    const json_t *ref = json_object_get(obj, "roleRef");
    const char *ref_kind = json_string_value(json_object_get(ref, "kind"));
    const char *ref_name = json_string_value(json_object_get(ref, "name"));
    if (deleted || !ref_kind || !ref_name) {
        free(probe.key);
        return;
    }
    binding *b = xcalloc(1, sizeof *b);
    b->key = probe.key;
    const char *ns =
        cluster ? "" : json_string_value(ckube_json_get_path(obj, "metadata.namespace"));
    const char *name = json_string_value(ckube_json_get_path(obj, "metadata.name"));
    b->ns = xstrdup(ns ? ns : "");
    b->name = xstrdup(name ? name : "");
    b->to_cluster = !strcmp(ref_kind, "ClusterRole");
    b->role_name = xstrdup(ref_name);
    b->role = role_node(ix, xasprintf("%s/%s", b->to_cluster ? "" : b->ns, ref_name));
    b->role->refs++;
    const json_t *subjects = json_object_get(obj, "subjects");
    b->subject_keys = xcalloc(json_array_size(subjects) + 1, sizeof *b->subject_keys);
    b->subject_desc = xcalloc(json_array_size(subjects) + 1, sizeof *b->subject_desc);
    RB_INSERT(binding_tree, &ix->bindings, b);
    size_t i;
    const json_t *subj;
    json_array_foreach(subjects, i, subj)
    {
        char *key = subject_key(subj, b->ns);
        if (!key)
            continue;
        subject *s = subject_get(ix, key, true);
        bool listed = false;
        for (size_t j = 0; j < s->n && !listed; j++)
            listed = s->bindings[j] == b;
        if (listed) { /* the same subject twice in one binding */
            free(key);
            continue;
        }
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 4;
            s->bindings = xrealloc(s->bindings, s->cap * sizeof *s->bindings);
        }
        s->bindings[s->n++] = b;
        b->subject_desc[b->nsubjects] = subject_describe(subj, cluster ? "" : b->ns);
        b->subject_keys[b->nsubjects++] = key;
    }
}

void rbac_index_apply(rbac_index *ix, rbac_kind kind, const json_t *obj, bool deleted)
{
    pthread_rwlock_wrlock(&ix->lock);
    switch (kind) {
    case RBAC_ROLE:
    case RBAC_CLUSTER_ROLE:
        apply_role(ix, obj, kind == RBAC_CLUSTER_ROLE, deleted);
        break;
    case RBAC_ROLE_BINDING:
    case RBAC_CLUSTER_ROLE_BINDING:
        apply_binding(ix, obj, kind == RBAC_CLUSTER_ROLE_BINDING, deleted);
        break;
    }
    pthread_rwlock_unlock(&ix->lock);
}

/* ---- decisions --------------------------------------------------------------- */

/* a followed by b (and c) in buf when it fits, else malloc'd: a lookup
 * key is never cut short (a cut key could name another subject). Free
 * the result with key_free(result, buf). */
static char *key_join(char *buf, size_t n, const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *out = la + lb + lc < n ? buf : xmalloc(la + lb + lc + 1);
    memcpy(out, a, la); /* not snprintf: this is on every decision's path */
    memcpy(out + la, b, lb);
    memcpy(out + la + lb, c, lc + 1);
    return out;
}

static void key_free(char *key, char *buf)
{
    if (key != buf)
        free(key);
}

/* The errors a denial reports, deduplicated as upstream's aggregate. */
typedef struct missing {
    char *msgs[8];
    size_t n;
    /* Name the roles as their storage does ("clusterroles.rbac..."),
     * not as the informers' listers ("clusterrole.rbac..."). */
    bool storage_names;
} missing;

static void note_missing(missing *m, const binding *b)
{
    char *msg = xasprintf("%s%s.rbac.authorization.k8s.io \"%s\" not found",
                          b->to_cluster ? "clusterrole" : "role", m->storage_names ? "s" : "",
                          b->role_name);
    for (size_t i = 0; i < m->n; i++) {
        if (!strcmp(m->msgs[i], msg)) {
            free(msg);
            return;
        }
    }
    if (m->n < sizeof m->msgs / sizeof *m->msgs)
        m->msgs[m->n++] = msg;
    else
        free(msg);
}

/* The role binding b refers to, or NULL (noted in m when given). */
static const role *binding_role(const binding *b, missing *m)
{
    if (b->role->present)
        return b->role;
    if (m)
        note_missing(m, b);
    return NULL;
}

/* Whether binding b applies to a request in namespace ns: every
 * ClusterRoleBinding, the RoleBindings of ns. */
static bool binding_in_scope(const binding *b, const char *ns)
{
    return !*b->ns || !strcmp(b->ns, ns ? ns : "");
}

/* Whether binding b (one that names the user) allows req. */
static bool binding_allows(rbac_index *ix, const binding *b, const rbac_request *req, missing *m)
{
    if (!binding_in_scope(b, req->namespace_))
        return false; /* a RoleBinding of another namespace */
    const role *r = binding_role(b, m);
    if (!r || !(req->resource_request ? r->any_resource : r->any_url))
        return false;
    for (size_t i = 0; i < r->nrules; i++)
        if (rbac_rule_allows(&r->rules[i], req))
            return true;
    return false;
}

/* Upstream's allow reason: `RBAC: allowed by ClusterRoleBinding "b" of
 * ClusterRole "r" to Group "g"` (a RoleBinding as "name/ns"). */
static char *allow_reason(const binding *b, const char *subject_key)
{
    const char *desc = "";
    for (size_t i = 0; i < b->nsubjects; i++)
        if (!strcmp(b->subject_keys[i], subject_key))
            desc = b->subject_desc[i];
    char *bn = *b->ns ? xasprintf("%s/%s", b->name, b->ns) : xstrdup(b->name);
    char *qb = ckube_go_quote(bn), *qr = ckube_go_quote(b->role_name);
    char *out = xasprintf("RBAC: allowed by %s %s of %s %s to %s",
                          *b->ns ? "RoleBinding" : "ClusterRoleBinding", qb,
                          b->to_cluster ? "ClusterRole" : "Role", qr, desc);
    free(bn);
    free(qb);
    free(qr);
    return out;
}

/* Whether any binding of subject `key` allows req; ClusterRoleBindings
 * are tried in the first pass, RoleBindings in the second (upstream
 * visits cluster-wide bindings first). The allowing binding goes to
 * *by. */
static bool subject_allows(rbac_index *ix, const char *key, const rbac_request *req, bool cluster,
                           missing *m, const binding **by)
{
    subject probe = {.key = (char *)key};
    const subject *s = RB_FIND(subject_tree, &ix->subjects, &probe);
    for (size_t i = 0; s && i < s->n; i++) {
        const binding *b = s->bindings[i];
        if ((*b->ns == '\0') == cluster && binding_allows(ix, b, req, m)) {
            *by = b;
            return true;
        }
    }
    return false;
}

static char *reason_of(missing *m)
{
    char *reason = NULL;
    if (m->n == 1) {
        reason = xasprintf("RBAC: %s", m->msgs[0]);
    } else if (m->n > 1) {
        ckube__strbuf sb = {0};
        ckube__sb_printf(&sb, "RBAC: [");
        for (size_t i = 0; i < m->n; i++)
            ckube__sb_printf(&sb, "%s%s", i ? ", " : "", m->msgs[i]);
        ckube__sb_printf(&sb, "]");
        if (sb.oom)
            xalloc_die();
        reason = ckube__sb_take(&sb);
    }
    for (size_t i = 0; i < m->n; i++)
        free(m->msgs[i]);
    return reason;
}

bool rbac_authorize(rbac_index *ix, const rbac_user *user, const rbac_request *req, char **reason,
                    char **allowed_by)
{
    if (reason)
        *reason = NULL;
    if (allowed_by)
        *allowed_by = NULL;
    if (!user->name)
        return false;
    missing m = {.n = 0};
    const binding *by = NULL;
    char *by_key = NULL;
    char buf[512];
    pthread_rwlock_rdlock(&ix->lock);
    for (int pass = 0; pass < 2 && !by; pass++) {
        bool cluster = pass == 0;
        if (!cluster && !(req->namespace_ && *req->namespace_))
            break; /* no RoleBinding applies outside a namespace */
        for (size_t g = 0; g <= user->ngroups && !by; g++) {
            const char *who = g ? user->groups[g - 1] : user->name;
            if (!who)
                continue;
            char *key = key_join(buf, sizeof buf, g ? "g:" : "u:", who, "");
            if (subject_allows(ix, key, req, cluster, &m, &by) && allowed_by)
                by_key = xstrdup(key);
            key_free(key, buf);
        }
    }
    /* Read under the lock: the binding may go once it is released. */
    if (by && allowed_by)
        *allowed_by = allow_reason(by, by_key);
    pthread_rwlock_unlock(&ix->lock);
    free(by_key);
    if (by) {
        for (size_t i = 0; i < m.n; i++)
            free(m.msgs[i]);
        return true;
    }
    char *r = reason_of(&m);
    if (reason)
        *reason = r;
    else
        free(r);
    return false;
}

/* ---- the rules that apply ------------------------------------------------------ */

/* Adds the rules of the bindings of subject `key` in scope of ns to
 * out, each binding once (seen). */
static void collect_subject(rbac_index *ix, const char *key, const char *ns, json_t *out,
                            missing *m, const binding ***seen, size_t *nseen, size_t *cap)
{
    subject probe = {.key = (char *)key};
    const subject *s = RB_FIND(subject_tree, &ix->subjects, &probe);
    for (size_t i = 0; s && i < s->n; i++) {
        const binding *b = s->bindings[i];
        if (!binding_in_scope(b, ns))
            continue;
        bool dup = false;
        for (size_t j = 0; j < *nseen && !dup; j++)
            dup = (*seen)[j] == b;
        if (dup)
            continue;
        if (*nseen == *cap) {
            *cap = *cap ? 2 * *cap : 8;
            *seen = xrealloc(*seen, *cap * sizeof **seen);
        }
        (*seen)[(*nseen)++] = b;
        const role *r = binding_role(b, m);
        size_t k;
        json_t *rule;
        if (r)
            json_array_foreach(r->rules_json, k, rule)
                json_array_append_new(out, json_deep_copy(rule));
    }
}

json_t *rbac_rules_for(rbac_index *ix, const rbac_user *user, const char *ns, bool storage_names,
                       char **errors)
{
    json_t *out = json_array();
    missing m = {.n = 0, .storage_names = storage_names};
    const binding **seen = NULL;
    size_t nseen = 0, cap = 0;
    char buf[512];
    if (!ns)
        ns = "";
    pthread_rwlock_rdlock(&ix->lock);
    for (size_t g = 0; user->name && g <= user->ngroups; g++) {
        const char *who = g ? user->groups[g - 1] : user->name;
        if (!who)
            continue;
        char *key = key_join(buf, sizeof buf, g ? "g:" : "u:", who, "");
        collect_subject(ix, key, ns, out, &m, &seen, &nseen, &cap);
        key_free(key, buf);
    }
    pthread_rwlock_unlock(&ix->lock);
    free(seen);
    char *r = reason_of(&m); /* "RBAC: ..." */
    if (errors)
        *errors = r ? xstrdup(r + strlen("RBAC: ")) : NULL;
    free(r);
    return out;
}

json_t *rbac_role_rules(rbac_index *ix, bool cluster, const char *ns, const char *name)
{
    char *key = xasprintf("%s/%s", cluster ? "" : ns ? ns : "", name);
    role probe = {.key = key};
    pthread_rwlock_rdlock(&ix->lock);
    const role *r = RB_FIND(role_tree, &ix->roles, &probe);
    json_t *out = r && r->present ? json_deep_copy(r->rules_json) : NULL;
    pthread_rwlock_unlock(&ix->lock);
    free(key);
    return out;
}
