/* RBAC's matching (rules.h). Each function mirrors one of upstream's
 * helpers; the comments say where upstream's semantics are easy to get
 * wrong. */
#include "apiserver/authorization/rbac/rules.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

/* A string list of `rule`'s `key` as a NULL-terminated array with its
 * strings, in one allocation; NULL when the key is absent or not an
 * array. */
static char **compile_list(const json_t *rule, const char *key)
{
    const json_t *list = json_object_get(rule, key);
    if (!json_is_array(list))
        return NULL;
    size_t n = 0, bytes = 0, i;
    const json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v)) {
            n++;
            bytes += json_string_length(v) + 1;
        }
    }
    char **out = xmalloc((n + 1) * sizeof *out + bytes);
    char *p = (char *)(out + n + 1);
    size_t k = 0;
    json_array_foreach(list, i, v)
    {
        if (!json_is_string(v))
            continue;
        size_t len = json_string_length(v);
        memcpy(p, json_string_value(v), len + 1);
        out[k++] = p;
        p += len + 1;
    }
    out[k] = NULL;
    return out;
}

int rbac_rules_compile(const json_t *rules, rbac_rule **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!json_is_array(rules))
        return -1;
    rbac_rule *r = xcalloc(json_array_size(rules), sizeof *r);
    size_t i, k = 0;
    const json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        if (!json_is_object(rule))
            continue;
        r[k].verbs = compile_list(rule, "verbs");
        r[k].api_groups = compile_list(rule, "apiGroups");
        r[k].resources = compile_list(rule, "resources");
        r[k].resource_names = compile_list(rule, "resourceNames");
        r[k].non_resource_urls = compile_list(rule, "nonResourceURLs");
        k++;
    }
    *out = r;
    *n = k;
    return 0;
}

void rbac_rules_free(rbac_rule *rules, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rules[i].verbs);
        free(rules[i].api_groups);
        free(rules[i].resources);
        free(rules[i].resource_names);
        free(rules[i].non_resource_urls);
    }
    free(rules);
}

/* "*" or the value itself (VerbMatches, APIGroupMatches). */
static bool list_matches(char *const *list, const char *want)
{
    for (; list && *list; list++)
        if (!strcmp(*list, "*") || !strcmp(*list, want))
            return true;
    return false;
}

/* ResourceMatches: "*", the combined "resource/subresource", or
 * "<star>/subresource" for a request of that subresource of any resource.
 * Neither "pods" matches pods/status nor "pods/<star>" any subresource
 * (it is the subresource literally named "*"). */
static bool resource_matches(char *const *list, const char *resource, const char *sub)
{
    size_t rlen = strlen(resource), slen = strlen(sub);
    for (; list && *list; list++) {
        const char *r = *list;
        size_t len = strlen(r);
        if (!strcmp(r, "*"))
            return true;
        if (!slen) {
            if (!strcmp(r, resource))
                return true;
            continue;
        }
        if (len == rlen + 1 + slen && !strncmp(r, resource, rlen) && r[rlen] == '/' &&
            !strcmp(r + rlen + 1, sub))
            return true;
        if (len == slen + 2 && r[0] == '*' && r[1] == '/' && !strcmp(r + 2, sub))
            return true;
    }
    return false;
}

/* ResourceNameMatches: no names means any name. */
static bool name_matches(char *const *list, const char *name)
{
    if (!list || !*list)
        return true;
    for (; *list; list++)
        if (!strcmp(*list, name))
            return true;
    return false;
}

/* NonResourceURLMatches: "*", the path itself, or a prefix ending in
 * "*": "/healthz/<star>" matches "/healthz/etcd", and "/healthz<star>"
 * "/healthzfoo" too, as upstream. Case-sensitive, as upstream. */
static bool url_matches(char *const *list, const char *path)
{
    for (; list && *list; list++) {
        const char *u = *list;
        size_t len = strlen(u);
        if (!strcmp(u, "*") || !strcmp(u, path))
            return true;
        if (len && u[len - 1] == '*') {
            size_t plen = len;
            while (plen && u[plen - 1] == '*') /* strings.TrimRight(u, "*") */
                plen--;
            if (!strncmp(path, u, plen))
                return true;
        }
    }
    return false;
}

bool rbac_rule_allows(const rbac_rule *rule, const rbac_request *req)
{
    if (!list_matches(rule->verbs, req->verb))
        return false;
    if (!req->resource_request)
        return url_matches(rule->non_resource_urls, req->path ? req->path : "");
    return list_matches(rule->api_groups, req->api_group ? req->api_group : "") &&
           resource_matches(rule->resources, req->resource ? req->resource : "",
                            req->subresource ? req->subresource : "") &&
           name_matches(rule->resource_names, req->name ? req->name : "");
}

bool rbac_subject_applies(const json_t *subject, const rbac_user *user, const char *ns)
{
    const char *kind = json_string_value(json_object_get(subject, "kind"));
    const char *name = json_string_value(json_object_get(subject, "name"));
    if (!kind || !name || !user->name)
        return false;
    if (!strcmp(kind, "User"))
        return !strcmp(user->name, name);
    if (!strcmp(kind, "Group")) {
        for (size_t i = 0; i < user->ngroups; i++)
            if (user->groups[i] && !strcmp(user->groups[i], name))
                return true;
        return false;
    }
    if (!strcmp(kind, "ServiceAccount")) {
        /* The subject's namespace defaults to the binding's, so a
         * RoleBinding can name its own namespace's accounts unqualified. */
        const char *sa_ns = json_string_value(json_object_get(subject, "namespace"));
        if (!sa_ns || !*sa_ns)
            sa_ns = ns ? ns : "";
        if (!*sa_ns)
            return false;
        static const char prefix[] = "system:serviceaccount:";
        size_t pl = sizeof prefix - 1, nl = strlen(sa_ns);
        const char *u = user->name;
        return !strncmp(u, prefix, pl) && !strncmp(u + pl, sa_ns, nl) && u[pl + nl] == ':' &&
               !strcmp(u + pl + nl + 1, name);
    }
    return false;
}

/* ---- coverage (escalation checks) -------------------------------------------- */

/* One atomic right, as upstream's BreakdownRule makes them: a verb on a
 * group's resource (optionally one name), or a verb on one URL. */
typedef struct atom {
    const char *verb, *group, *resource, *name, *url;
} atom;

static bool list_has(char *const *list, const char *want)
{
    for (; list && *list; list++)
        if (!strcmp(*list, want))
            return true;
    return false;
}

static bool list_empty(char *const *list)
{
    return !list || !*list;
}

/* ruleCovers for one atom. A "*" the owner has covers anything; a "*"
 * the atom asks for is covered only by a "*". */
static bool atom_covered(const rbac_rule *o, const atom *a)
{
    if (!list_has(o->verbs, "*") && !list_has(o->verbs, a->verb))
        return false;
    if (a->name ? !list_empty(o->resource_names) && !list_has(o->resource_names, a->name)
                : !list_empty(o->resource_names))
        return false;
    if (a->url) { /* nonResourceURLCovers: equal, or a prefix ending in "*" */
        for (char *const *u = o->non_resource_urls; u && *u; u++) {
            size_t len = strlen(*u), plen = len;
            while (plen && (*u)[plen - 1] == '*')
                plen--;
            if (!strcmp(*u, a->url) || (plen < len && !strncmp(a->url, *u, plen)))
                return true;
        }
        return false;
    }
    if (!list_has(o->api_groups, "*") && !list_has(o->api_groups, a->group))
        return false;
    /* resourceCoversAll: "*", the resource itself, or "<star>/sub". */
    if (list_has(o->resources, "*") || list_has(o->resources, a->resource))
        return true;
    const char *slash = strchr(a->resource, '/');
    if (!slash)
        return false;
    char *any = xasprintf("*%s", slash);
    bool ok = list_has(o->resources, any);
    free(any);
    return ok;
}

/* Go's %q of a []string: ["a" "b"]. */
static void go_quote_list(ckube__strbuf *sb, const json_t *list)
{
    size_t i;
    const json_t *v;
    ckube__sb_addc(sb, '[');
    json_array_foreach(list, i, v)
    {
        char *q = ckube_go_quote(json_string_value(v));
        ckube__sb_printf(sb, "%s%s", i ? " " : "", q);
        free(q);
    }
    ckube__sb_addc(sb, ']');
}

/* rbacv1helpers.CompactString: the rule's non-empty lists in a fixed
 * order. */
static char *compact_string(const json_t *rule)
{
    static const char *const keys[][2] = {{"apiGroups", "APIGroups"},
                                          {"resources", "Resources"},
                                          {"nonResourceURLs", "NonResourceURLs"},
                                          {"resourceNames", "ResourceNames"},
                                          {"verbs", "Verbs"}};
    ckube__strbuf sb = {0};
    bool first = true;
    ckube__sb_addc(&sb, '{');
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const json_t *list = json_object_get(rule, keys[k][0]);
        if (!json_array_size(list))
            continue;
        ckube__sb_printf(&sb, "%s%s:", first ? "" : ", ", keys[k][1]);
        go_quote_list(&sb, list);
        first = false;
    }
    ckube__sb_addc(&sb, '}');
    if (sb.oom)
        xalloc_die();
    return ckube__sb_take(&sb);
}

/* The atom as upstream's BreakdownRule writes it: a PolicyRule of one
 * verb and one group, resource (and name) or URL, members in the order
 * Go writes a PolicyRule. */
static json_t *atom_rule(const atom *a)
{
    json_t *r = json_pack("{s:[s]}", "verbs", a->verb);
    if (a->url) {
        json_object_set_new(r, "nonResourceURLs", json_pack("[s]", a->url));
        return r;
    }
    json_object_set_new(r, "apiGroups", json_pack("[s]", a->group));
    json_object_set_new(r, "resources", json_pack("[s]", a->resource));
    if (a->name)
        json_object_set_new(r, "resourceNames", json_pack("[s]", a->name));
    return r;
}

static void check_atom(const rbac_rule *owner, size_t n, const atom *a, json_t *missing)
{
    for (size_t i = 0; i < n; i++)
        if (atom_covered(&owner[i], a))
            return;
    json_array_append_new(missing, atom_rule(a));
}

json_t *rbac_uncovered_rules(const rbac_rule *owner, size_t n, const json_t *wanted)
{
    json_t *missing = json_array();
    size_t i;
    const json_t *rule;
    json_array_foreach(wanted, i, rule)
    {
        const json_t *verbs = json_object_get(rule, "verbs");
        const json_t *groups = json_object_get(rule, "apiGroups");
        const json_t *resources = json_object_get(rule, "resources");
        const json_t *names = json_object_get(rule, "resourceNames");
        const json_t *urls = json_object_get(rule, "nonResourceURLs");
        size_t g, r, v, k;
        const json_t *gv, *rv, *vv, *kv;
        json_array_foreach(groups, g, gv) json_array_foreach(resources, r, rv)
            json_array_foreach(verbs, v, vv)
        {
            atom a = {json_string_value(vv), json_string_value(gv), json_string_value(rv), NULL,
                      NULL};
            if (!a.verb || !a.group || !a.resource)
                continue;
            if (!json_array_size(names))
                check_atom(owner, n, &a, missing);
            json_array_foreach(names, k, kv)
            {
                a.name = json_string_value(kv);
                if (a.name)
                    check_atom(owner, n, &a, missing);
            }
        }
        json_array_foreach(urls, k, kv) json_array_foreach(verbs, v, vv)
        {
            atom a = {json_string_value(vv), "", "", NULL, json_string_value(kv)};
            if (a.verb && a.url)
                check_atom(owner, n, &a, missing);
        }
    }
    return missing;
}

/* CompactRules: broken-down resource rules of one group, resource and
 * name become one, their verbs in order; URL rules stay as they are. */
static json_t *compact(const json_t *atoms)
{
    json_t *out = json_array();
    size_t i, j;
    const json_t *a;
    json_t *r;
    json_array_foreach(atoms, i, a)
    {
        bool merged = false;
        if (!json_object_get(a, "nonResourceURLs")) {
            json_array_foreach(out, j, r)
            {
                if (json_object_get(r, "nonResourceURLs") ||
                    !json_equal(json_object_get(r, "apiGroups"), json_object_get(a, "apiGroups")) ||
                    !json_equal(json_object_get(r, "resources"), json_object_get(a, "resources")))
                    continue;
                const json_t *rn = json_object_get(r, "resourceNames");
                const json_t *an = json_object_get(a, "resourceNames");
                if ((rn == NULL) != (an == NULL) || (rn && !json_equal(rn, an)))
                    continue;
                json_array_extend(json_object_get(r, "verbs"), json_object_get(a, "verbs"));
                merged = true;
                break;
            }
        }
        if (!merged)
            json_array_append_new(out, json_deep_copy(a));
    }
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *rbac_uncovered_rights(const rbac_rule *owner, size_t n, const json_t *wanted)
{
    json_t *atoms = rbac_uncovered_rules(owner, n, wanted);
    json_t *missing = compact(atoms);
    json_decref(atoms);
    size_t i;
    const json_t *rule;
    size_t nm = json_array_size(missing);
    if (!nm) {
        json_decref(missing);
        return NULL;
    }
    char **lines = xcalloc(nm, sizeof *lines);
    json_array_foreach(missing, i, rule) lines[i] = compact_string(rule);
    json_decref(missing);
    qsort(lines, nm, sizeof *lines, cmp_str);
    ckube__strbuf sb = {0};
    for (i = 0; i < nm; i++)
        if (!i || strcmp(lines[i], lines[i - 1])) /* a set: each line once */
            ckube__sb_printf(&sb, "%s%s", sb.len ? "\n" : "", lines[i]);
    for (i = 0; i < nm; i++)
        free(lines[i]);
    free(lines);
    if (sb.oom)
        xalloc_die();
    return ckube__sb_take(&sb);
}
