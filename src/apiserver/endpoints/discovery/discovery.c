/* Discovery, built from the registry on every request so a CRD appears
 * (and goes) at once:
 *  - legacy: /api (APIVersions), /api/v1 and /apis/G/V (APIResourceList),
 *    /apis (APIGroupList), /apis/G (APIGroup);
 *  - aggregated (apidiscovery.k8s.io v2, and v2beta1 for clients up to
 *    1.29) at /api and /apis when the Accept header asks for
 *    APIGroupDiscoveryList: every group, version and resource in one
 *    answer, so kubectl discovers with two requests instead of one per
 *    group-version. It carries an ETag; If-None-Match gets 304.
 *
 * Order, as kube-apiserver's: groups by the upstream group priority
 * (built-in groups first), then by name; a group's versions by
 * "kube-aware" version priority (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 >
 * anything else, alphabetically), the first being the preferred one. */
#include <ctype.h>
#include <sha512.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/endpoints/discovery/discovery.h"
#include "apiserver/aggregator/aggregator.h"
#include "ckube/json.h"
#include "common/xalloc.h"

/* ---- ordering ---------------------------------------------------------- */

/* A version's rank: GA before beta before alpha before other strings. */
typedef struct kube_version {
    int stage; /* 3 GA, 2 beta, 1 alpha, 0 not kube-like */
    long major, minor;
} kube_version;

static kube_version parse_kube_version(const char *v)
{
    kube_version k = {0, 0, 0};
    if (v[0] != 'v' || !isdigit((unsigned char)v[1]) || v[1] == '0')
        return k;
    char *end;
    k.major = strtol(v + 1, &end, 10);
    if (!*end) {
        k.stage = 3;
        return k;
    }
    int stage = !strncmp(end, "beta", 4) ? 2 : !strncmp(end, "alpha", 5) ? 1 : 0;
    const char *p = end + (stage == 2 ? 4 : 5);
    if (!stage || !isdigit((unsigned char)*p) || *p == '0')
        return k;
    k.minor = strtol(p, &end, 10);
    if (*end)
        return k;
    k.stage = stage;
    return k;
}

/* <0 when version a is preferred to b. */
static int kube_version_cmp(const char *a, const char *b)
{
    kube_version x = parse_kube_version(a), y = parse_kube_version(b);
    if (x.stage != y.stage)
        return y.stage - x.stage;
    if (!x.stage)
        return strcmp(a, b);
    if (x.major != y.major)
        return x.major > y.major ? -1 : 1;
    if (x.minor != y.minor)
        return x.minor > y.minor ? -1 : 1;
    return 0;
}

/* kube-apiserver's group priorities (kube-aggregator); any other group,
 * a CRD's, has the lowest. Equal priorities sort by name. The
 * aggregator's own group comes first of all: /apis lists it before the
 * APIServices' groups, and aggregated discovery gives it 20001, above
 * any APIService's (kube-aggregator's APIRegistrationGroupPriority). */
static int group_priority(const char *group)
{
    static const struct {
        const char *group;
        int priority;
    } table[] = {
        {"apiregistration.k8s.io", 20001},
        {"apps", 17800},
        {"events.k8s.io", 17750},
        {"authentication.k8s.io", 17700},
        {"authorization.k8s.io", 17600},
        {"autoscaling", 17500},
        {"batch", 17400},
        {"certificates.k8s.io", 17300},
        {"networking.k8s.io", 17200},
        {"policy", 17100},
        {"rbac.authorization.k8s.io", 17000},
        {"storage.k8s.io", 16800},
        {"admissionregistration.k8s.io", 16700},
        {"apiextensions.k8s.io", 16700},
        {"scheduling.k8s.io", 16600},
        {"coordination.k8s.io", 16500},
        {"node.k8s.io", 16300},
        {"discovery.k8s.io", 16200},
        {"flowcontrol.apiserver.k8s.io", 16100},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i].group, group))
            return table[i].priority;
    return 1000;
}

static int cmp_group(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int px = group_priority(x), py = group_priority(y);
    return px != py ? py - px : strcmp(x, y);
}

static int cmp_version(const void *a, const void *b)
{
    return kube_version_cmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct names picked by `field` from types[] (filtered to `group`
 * when given), sorted by cmp. Returns a malloc'd array of borrowed strings
 * (they live as long as the types snapshot) and its length in *nout. */
static const char **distinct(resource_type **types, size_t n, const char *group, bool versions,
                             size_t *nout)
{
    const char **out = xmalloc((n ? n : 1) * sizeof *out);
    size_t k = 0;
    for (size_t i = 0; out && i < n; i++) {
        if (group && strcmp(types[i]->group, group))
            continue;
        const char *name = versions ? types[i]->version : types[i]->group;
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++)
            seen = !strcmp(out[j], name);
        if (!seen)
            out[k++] = name;
    }
    if (out)
        qsort(out, k, sizeof *out, versions ? cmp_version : cmp_group);
    *nout = k;
    return out;
}

/* ---- legacy ------------------------------------------------------------ */

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

static bool is_core_namespaces(const resource_type *t)
{
    return !*t->group && !strcmp(t->resource, "namespaces");
}

/* A subresource's verbs. */
enum sub_verbs { SUB_GET_PATCH_UPDATE, SUB_UPDATE, SUB_CREATE };

/* A subresource of a type, as both discovery forms describe it: the kind
 * it answers with, and its verbs. */
typedef struct subresource {
    const char *name;
    const char *group, *version, *kind;
    enum sub_verbs verbs;
} subresource;

/* t's subresources, by name; returns how many (at most 3). */
static size_t subresources_of(const resource_type *t, subresource out[3])
{
    size_t n = 0;
    if (is_core_namespaces(t))
        out[n++] = (subresource){"finalize", "", t->version, "Namespace", SUB_UPDATE};
    if (t->scale_subresource)
        out[n++] = (subresource){"scale", "autoscaling", "v1", "Scale", SUB_GET_PATCH_UPDATE};
    if (t->status_subresource)
        out[n++] = (subresource){"status", t->group, t->version, t->kind, SUB_GET_PATCH_UPDATE};
    /* TokenRequest (endpoints/handlers/tokenrequest.c) */
    if (!*t->group && !strcmp(t->resource, "serviceaccounts"))
        out[n++] =
            (subresource){"token", "authentication.k8s.io", "v1", "TokenRequest", SUB_CREATE};
    return n;
}

static json_t *subresource_verbs(const subresource *sr)
{
    return sr->verbs == SUB_UPDATE   ? json_pack("[s]", "update")
           : sr->verbs == SUB_CREATE ? json_pack("[s]", "create")
                                     : json_pack("[s,s,s]", "get", "patch", "update");
}

static json_t *resource_list(registry *reg, const char *group, const char *version)
{
    size_t n;
    resource_type **types = registry_list(reg, &n);
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
        /* (this list has them status first, as it always has) */
        subresource subs[3];
        for (size_t k = subresources_of(t, subs); k-- > 0;) {
            const subresource *sr = &subs[k];
            char name[256];
            snprintf(name, sizeof name, "%s/%s", t->resource, sr->name);
            json_t *e = json_pack("{s:s,s:s,s:b}", "name", name, "singularName", "", "namespaced",
                                  t->namespaced);
            if (strcmp(sr->group, t->group) || strcmp(sr->version, t->version)) {
                json_object_set_new(e, "group", json_string(sr->group));
                json_object_set_new(e, "version", json_string(sr->version));
            }
            json_object_set_new(e, "kind", json_string(sr->kind));
            json_object_set_new(e, "verbs", subresource_verbs(sr));
            json_array_append_new(res, e);
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

/* APIGroup of a non-core group (NULL if it has no type): its versions by
 * priority, the first preferred. */
static json_t *group_json(resource_type **types, size_t n, const char *group)
{
    size_t nv;
    const char **vs = distinct(types, n, group, true, &nv);
    if (!vs || !nv) {
        free(vs);
        return NULL;
    }
    json_t *versions = json_array();
    for (size_t i = 0; i < nv; i++) {
        char gv[256];
        snprintf(gv, sizeof gv, "%s/%s", group, vs[i]);
        json_array_append_new(versions,
                              json_pack("{s:s,s:s}", "groupVersion", gv, "version", vs[i]));
    }
    free(vs);
    return json_pack("{s:s,s:o,s:O}", "name", group, "versions", versions, "preferredVersion",
                     json_array_get(versions, 0));
}

/* ---- aggregated -------------------------------------------------------- */


static json_t *gvk_json(const char *group, const char *version, const char *kind)
{
    return json_pack("{s:s,s:s,s:s}", "group", group, "version", version, "kind", kind);
}

/* APIResourceDiscovery of one type. */
static json_t *resource_discovery(const resource_type *t)
{
    json_t *r = json_pack("{s:s,s:o,s:s,s:s,s:o}", "resource", t->resource, "responseKind",
                          gvk_json(t->group, t->version, t->kind), "scope",
                          t->namespaced ? "Namespaced" : "Cluster", "singularResource",
                          t->singular ? t->singular : "", "verbs", verbs_json(t->verbs));
    if (t->short_names)
        json_object_set_new(r, "shortNames", strv_json(t->short_names));
    if (t->categories)
        json_object_set_new(r, "categories", strv_json(t->categories));
    /* Subresources by name, as upstream. */
    json_t *subs = json_array();
    subresource list[3];
    size_t ns = subresources_of(t, list);
    for (size_t k = 0; k < ns; k++)
        json_array_append_new(
            subs, json_pack("{s:s,s:o,s:o}", "subresource", list[k].name, "responseKind",
                            gvk_json(list[k].group, list[k].version, list[k].kind), "verbs",
                            subresource_verbs(&list[k])));
    if (json_array_size(subs))
        json_object_set_new(r, "subresources", subs);
    else
        json_decref(subs);
    return r;
}

/* APIGroupDiscovery of `group` ("" for core): its versions by priority,
 * each with its resources (the registry keeps them sorted by name). */
static json_t *group_discovery(resource_type **types, size_t n, const char *group)
{
    size_t nv;
    const char **vs = distinct(types, n, group, true, &nv);
    json_t *versions = json_array();
    for (size_t i = 0; vs && i < nv; i++) {
        json_t *resources = json_array();
        for (size_t j = 0; j < n; j++)
            if (!strcmp(types[j]->group, group) && !strcmp(types[j]->version, vs[i]))
                json_array_append_new(resources, resource_discovery(types[j]));
        json_array_append_new(versions, json_pack("{s:s,s:o,s:s}", "version", vs[i], "resources",
                                                  resources, "freshness", "Current"));
    }
    free(vs);
    json_t *meta = *group ? json_pack("{s:s}", "name", group) : json_object();
    return json_pack("{s:o,s:o}", "metadata", meta, "versions", versions);
}

/* ---- aggregated API servers' groups (apiserver/aggregator) -------------- */

/* The groups of Available APIServices with a service that this server
 * does not serve itself: {group: [entry, ...]} in discovery order (an
 * entry as aggregator_discovery gives it). A new reference. */
static json_t *remote_groups(apiserver *srv, resource_type **types, size_t n)
{
    json_t *out = json_object();
    if (!srv->aggregator)
        return out;
    json_t *entries = aggregator_discovery(srv->aggregator);
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        const char *g = json_string_value(json_object_get(e, "group"));
        bool local = false;
        for (size_t j = 0; j < n && !local; j++)
            local = !strcmp(types[j]->group, g);
        if (!g || !*g || local)
            continue;
        json_t *list = json_object_get(out, g);
        if (!list)
            json_object_set_new(out, g, list = json_array());
        json_array_append(list, e);
    }
    json_decref(entries);
    return out;
}

/* APIGroup of a remote group's entries (versions by priority). */
static json_t *remote_group_json(const char *group, const json_t *list)
{
    json_t *versions = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *v = json_string_value(json_object_get(e, "version"));
        char gv[256];
        snprintf(gv, sizeof gv, "%s/%s", group, v);
        json_array_append_new(versions, json_pack("{s:s,s:s}", "groupVersion", gv, "version", v));
    }
    return json_pack("{s:s,s:o,s:O}", "name", group, "versions", versions, "preferredVersion",
                     json_array_get(versions, 0));
}

/* APIGroupDiscovery of a remote group, from the APIResourceLists its
 * server answered the availability check with. */
static json_t *remote_group_discovery(const char *group, const json_t *list)
{
    json_t *versions = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *v = json_string_value(json_object_get(e, "version"));
        json_t *resources = json_array();
        size_t k;
        json_t *r;
        json_array_foreach(json_object_get(e, "resources"), k, r)
        {
            const char *name = json_string_value(json_object_get(r, "name"));
            const char *kind = json_string_value(json_object_get(r, "kind"));
            if (!name || !kind)
                continue;
            const char *slash = strchr(name, '/');
            const char *rg = json_string_value(json_object_get(r, "group"));
            const char *rv = json_string_value(json_object_get(r, "version"));
            json_t *gvk = gvk_json(rg ? rg : group, rv ? rv : v, kind);
            if (slash) { /* a subresource: under its resource, listed before */
                size_t j;
                json_t *parent;
                json_array_foreach(resources, j, parent)
                {
                    const char *pn = json_string_value(json_object_get(parent, "resource"));
                    if (pn && strlen(pn) == (size_t)(slash - name) &&
                        !strncmp(pn, name, (size_t)(slash - name))) {
                        json_t *subs = json_object_get(parent, "subresources");
                        if (!subs)
                            json_object_set_new(parent, "subresources", subs = json_array());
                        json_array_append_new(
                            subs, json_pack("{s:s,s:O,s:O}", "subresource", slash + 1,
                                            "responseKind", gvk, "verbs",
                                            json_object_get(r, "verbs")));
                        break;
                    }
                }
                json_decref(gvk);
                continue;
            }
            json_t *d = json_pack("{s:s,s:o,s:s,s:s,s:O}", "resource", name, "responseKind", gvk,
                                  "scope",
                                  json_is_true(json_object_get(r, "namespaced")) ? "Namespaced"
                                                                                 : "Cluster",
                                  "singularResource",
                                  json_string_value(json_object_get(r, "singularName")) ?: "",
                                  "verbs", json_object_get(r, "verbs"));
            if (json_array_size(json_object_get(r, "shortNames")))
                json_object_set(d, "shortNames", json_object_get(r, "shortNames"));
            if (json_array_size(json_object_get(r, "categories")))
                json_object_set(d, "categories", json_object_get(r, "categories"));
            json_array_append_new(resources, d);
        }
        json_array_append_new(versions, json_pack("{s:s,s:o,s:s}", "version", v, "resources",
                                                  resources, "freshness", "Current"));
    }
    return json_pack("{s:{s:s},s:o}", "metadata", "name", group, "versions", versions);
}

/* The APIGroupDiscoveryList of /api (core only) or /apis (every other
 * group), in apidiscovery.k8s.io/`version`. */
static json_t *aggregated_list(apiserver *srv, bool core, const char *version)
{
    size_t n, ng;
    resource_type **types = registry_list(srv->registry, &n);
    json_t *items = json_array();
    const char **groups = distinct(types, n, NULL, false, &ng);
    for (size_t i = 0; groups && i < ng; i++) {
        if ((*groups[i] == '\0') == core)
            json_array_append_new(items, group_discovery(types, n, groups[i]));
    }
    free(groups);
    if (!core) {
        json_t *remote = remote_groups(srv, types, n);
        const char *g;
        json_t *list;
        json_object_foreach(remote, g, list)
            json_array_append_new(items, remote_group_discovery(g, list));
        json_decref(remote);
    }
    registry_list_free(types, n);
    char api_version[64];
    snprintf(api_version, sizeof api_version, "apidiscovery.k8s.io/%s", version);
    return json_pack("{s:s,s:s,s:{},s:o}", "kind", "APIGroupDiscoveryList", "apiVersion",
                     api_version, "metadata", "items", items);
}

/* Sends the aggregated document, or 304 when the client's If-None-Match
 * names it already. */
static void reply_aggregated(req_ctx *rc, bool core)
{
    json_t *doc = aggregated_list(rc->srv, core, rc->want_discovery);
    size_t len = 0;
    char *body = ckube_json_dumps(doc, &len);
    json_decref(doc);
    if (!body) {
        reply_status(rc, ckube_status_new(500, CKUBE_REASON_INTERNAL,
                                          "discovery document could not be encoded"));
        return;
    }
    /* A strong ETag: the document's SHA-512, quoted, as kube-apiserver's. */
    char hex[SHA512_DIGEST_STRING_LENGTH], etag[SHA512_DIGEST_STRING_LENGTH + 2];
    SHA512Data((const uint8_t *)body, len, hex);
    for (char *p = hex; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    snprintf(etag, sizeof etag, "\"%s\"", hex);
    httpd_add_header(rc->req, "ETag", etag);
    httpd_add_header(rc->req, "Vary", "Accept");
    const char *inm = httpd_req_header(rc->req, "If-None-Match");
    char ctype[128];
    snprintf(ctype, sizeof ctype, "application/json;g=apidiscovery.k8s.io;v=%s;as=%s",
             rc->want_discovery, "APIGroupDiscoveryList");
    if (inm && !strcmp(inm, etag))
        reply_raw(rc, 304, ctype, "", 0);
    else
        reply_raw(rc, 200, ctype, body, len);
    free(body);
}

/* ---- dispatch ---------------------------------------------------------- */

bool discovery_aggregated_path(const request_info *ri)
{
    return ri->is_discovery && !*ri->version && (!strcmp(ri->prefix, "api") || !*ri->group);
}

bool handle_discovery(req_ctx *rc)
{
    request_info *ri = &rc->ri;
    if (rc->want_discovery && discovery_aggregated_path(ri)) {
        reply_aggregated(rc, !strcmp(ri->prefix, "api"));
        return true;
    }
    if (!strcmp(ri->prefix, "api")) {
        if (!*ri->version) {
            char addr[128];
            snprintf(addr, sizeof addr, "%s:%d", rc->srv->cfg.listen_host, rc->srv->port);
            httpd_add_header(rc->req, "Vary", "Accept");
            reply_json(rc, 200,
                       json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "kind", "APIVersions", "versions",
                                 "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                 "serverAddress", addr));
            return true;
        }
        json_t *l = resource_list(rc->srv->registry, "", ri->version);
        if (!l)
            return false;
        reply_json(rc, 200, l);
        return true;
    }
    size_t n;
    resource_type **types = registry_list(rc->srv->registry, &n);
    if (!*ri->group) {
        size_t ng;
        const char **names = distinct(types, n, NULL, false, &ng);
        json_t *groups = json_array();
        for (size_t i = 0; names && i < ng; i++)
            if (*names[i])
                json_array_append_new(groups, group_json(types, n, names[i]));
        free(names);
        json_t *remote = remote_groups(rc->srv, types, n);
        const char *g;
        json_t *list;
        json_object_foreach(remote, g, list)
            json_array_append_new(groups, remote_group_json(g, list));
        json_decref(remote);
        registry_list_free(types, n);
        httpd_add_header(rc->req, "Vary", "Accept");
        reply_json(rc, 200,
                   json_pack("{s:s,s:s,s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
                             groups));
        return true;
    }
    if (!*ri->version) {
        json_t *g = group_json(types, n, ri->group);
        if (!g) { /* an aggregated API server's group */
            json_t *remote = remote_groups(rc->srv, types, n);
            json_t *list = json_object_get(remote, ri->group);
            g = list ? remote_group_json(ri->group, list) : NULL;
            json_decref(remote);
        }
        registry_list_free(types, n);
        if (!g)
            return false;
        json_object_set_new(g, "kind", json_string("APIGroup"));
        json_object_set_new(g, "apiVersion", json_string("v1"));
        reply_json(rc, 200, g);
        return true;
    }
    registry_list_free(types, n);
    json_t *l = resource_list(rc->srv->registry, ri->group, ri->version);
    if (!l)
        return false;
    reply_json(rc, 200, l);
    return true;
}
