/* Legacy discovery: /api, /api/v1, /apis, /apis/G, /apis/G/V, built from
 * the registry on every request so CRDs appear at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/apiserver.h"

static json_t *verbs_json(unsigned v)
{
    static const char *const names[] = {"get",    "list",  "watch",  "create",
                                        "update", "patch", "delete", "deletecollection"};
    static const unsigned bits[] = {VERB_GET,    VERB_LIST,  VERB_WATCH,  VERB_CREATE,
                                    VERB_UPDATE, VERB_PATCH, VERB_DELETE, VERB_DELETECOLLECTION};
    /* Upstream lists verbs alphabetically. */
    static const int order[] = {3, 6, 7, 0, 1, 5, 4, 2};
    json_t *a = json_array();
    for (size_t i = 0; i < 8; i++) {
        if (v & bits[order[i]])
            json_array_append_new(a, json_string(names[order[i]]));
    }
    return a;
}

static json_t *strv_json(char **v)
{
    json_t *a = json_array();
    for (; v && *v; v++)
        json_array_append_new(a, json_string(*v));
    return a;
}

static json_t *resource_list(const char *group, const char *version)
{
    size_t n;
    resource_type **types = registry_list(&n);
    json_t *res = json_array();
    bool found = false;
    char gv[256];
    snprintf(gv, sizeof gv, "%s%s%s", group, *group ? "/" : "", version);
    for (size_t i = 0; i < n; i++) {
        resource_type *t = types[i];
        if (strcmp(t->group, group) || strcmp(t->version, version))
            continue;
        found = true;
        json_t *r = json_pack("{s:s,s:s,s:b,s:s,s:o}", "name", t->resource, "singularName",
                              t->singular ? t->singular : "", "namespaced", t->namespaced, "kind",
                              t->kind, "verbs", verbs_json(t->verbs));
        if (t->short_names)
            json_object_set_new(r, "shortNames", strv_json(t->short_names));
        if (t->categories)
            json_object_set_new(r, "categories", strv_json(t->categories));
        json_array_append_new(res, r);
        char sub[256];
        if (t->status_subresource) {
            snprintf(sub, sizeof sub, "%s/status", t->resource);
            json_array_append_new(res,
                                  json_pack("{s:s,s:s,s:b,s:s,s:[s,s,s]}", "name", sub,
                                            "singularName", "", "namespaced", t->namespaced, "kind",
                                            t->kind, "verbs", "get", "patch", "update"));
        }
        if (t->scale_subresource) {
            snprintf(sub, sizeof sub, "%s/scale", t->resource);
            json_array_append_new(res, json_pack("{s:s,s:s,s:b,s:s,s:s,s:s,s:[s,s,s]}", "name", sub,
                                                 "singularName", "", "namespaced", t->namespaced,
                                                 "group", "autoscaling", "version", "v1", "kind",
                                                 "Scale", "verbs", "get", "patch", "update"));
        }
        if (!strcmp(t->resource, "namespaces") && !*t->group) {
            json_array_append_new(res,
                                  json_pack("{s:s,s:s,s:b,s:s,s:[s]}", "name",
                                            "namespaces/finalize", "singularName", "", "namespaced",
                                            false, "kind", "Namespace", "verbs", "update"));
        }
    }
    registry_list_free(types, n);
    if (!found) {
        json_decref(res);
        return NULL;
    }
    return json_pack("{s:s,s:s,s:s,s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", gv, "resources", res);
}

/* Every group with its versions (in registry order), core excluded. */
static json_t *group_json(resource_type **types, size_t n, const char *group)
{
    json_t *versions = json_array();
    for (size_t i = 0; i < n; i++) {
        if (strcmp(types[i]->group, group))
            continue;
        bool dup = false;
        size_t j;
        json_t *v;
        json_array_foreach(versions, j, v)
        {
            dup |= !strcmp(json_string_value(json_object_get(v, "version")), types[i]->version);
        }
        if (dup)
            continue;
        char gv[256];
        snprintf(gv, sizeof gv, "%s/%s", group, types[i]->version);
        json_array_append_new(
            versions, json_pack("{s:s,s:s}", "groupVersion", gv, "version", types[i]->version));
    }
    if (!json_array_size(versions)) {
        json_decref(versions);
        return NULL;
    }
    /* Preferred: the storage version of a CRD, else the first. */
    json_t *pref = json_array_get(versions, 0);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(types[i]->group, group) && types[i]->is_custom && types[i]->storage_version) {
            size_t j;
            json_t *v;
            json_array_foreach(versions, j, v)
            {
                if (!strcmp(json_string_value(json_object_get(v, "version")), types[i]->version))
                    pref = v;
            }
        }
    }
    return json_pack("{s:s,s:o,s:O}", "name", group, "versions", versions, "preferredVersion",
                     pref);
}

bool handle_discovery(req_ctx *rc)
{
    request_info *ri = &rc->ri;
    if (!strcmp(ri->prefix, "api")) {
        if (!*ri->version) {
            char addr[128];
            snprintf(addr, sizeof addr, "%s:%d", rc->srv->cfg.listen_host, rc->srv->port);
            reply_json(rc, 200,
                       json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "kind", "APIVersions", "versions",
                                 "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                 "serverAddress", addr));
            return true;
        }
        json_t *l = resource_list("", ri->version);
        if (!l)
            return false;
        reply_json(rc, 200, l);
        return true;
    }
    size_t n;
    resource_type **types = registry_list(&n);
    if (!*ri->group) {
        json_t *groups = json_array();
        for (size_t i = 0; i < n; i++) {
            if (!*types[i]->group)
                continue;
            bool seen = false;
            for (size_t j = 0; j < i; j++)
                seen |= !strcmp(types[j]->group, types[i]->group);
            if (!seen)
                json_array_append_new(groups, group_json(types, n, types[i]->group));
        }
        registry_list_free(types, n);
        reply_json(rc, 200,
                   json_pack("{s:s,s:s,s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
                             groups));
        return true;
    }
    if (!*ri->version) {
        json_t *g = group_json(types, n, ri->group);
        registry_list_free(types, n);
        if (!g)
            return false;
        json_object_set_new(g, "kind", json_string("APIGroup"));
        json_object_set_new(g, "apiVersion", json_string("v1"));
        reply_json(rc, 200, g);
        return true;
    }
    registry_list_free(types, n);
    json_t *l = resource_list(ri->group, ri->version);
    if (!l)
        return false;
    reply_json(rc, 200, l);
    return true;
}
