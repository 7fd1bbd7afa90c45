/* RBAC's matching (rules.h). Each function mirrors one of upstream's
 * helpers; the comments say where upstream's semantics are easy to get
 * wrong. */
#include "apiserver/authorization/rbac/rules.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
