/* Discovery and the RESTMapper; see ckube/discovery.h. */
#include "ckube/discovery.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckube/json.h"
#include "ckube/log.h"
#include "client/client_internal.h"

/* ---- resource lists ---- */

static void resource_clear(ckube_api_resource *r)
{
    free(r->group);
    free(r->version);
    free(r->resource);
    free(r->singular);
    free(r->kind);
    ckube__strv_free(r->verbs, r->nverbs);
    ckube__strv_free(r->short_names, r->nshort_names);
    ckube__strv_free(r->categories, r->ncategories);
    memset(r, 0, sizeof *r);
}

void ckube_api_resource_list_free(ckube_api_resource_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        resource_clear(&l->items[i]);
    free(l->items);
    free(l);
}

bool ckube_api_resource_has_verb(const ckube_api_resource *r, const char *verb)
{
    for (size_t i = 0; r && verb && i < r->nverbs; i++)
        if (!strcmp(r->verbs[i], verb))
            return true;
    return false;
}

static int resource_copy(ckube_api_resource *d, const ckube_api_resource *s)
{
    memset(d, 0, sizeof *d);
    d->group = ckube__strdup0(s->group);
    d->version = ckube__strdup0(s->version);
    d->resource = ckube__strdup0(s->resource);
    d->singular = ckube__strdup0(s->singular);
    d->kind = ckube__strdup0(s->kind);
    d->namespaced = s->namespaced;
    d->preferred = s->preferred;
    d->verbs = ckube__strv_dup(s->verbs, s->nverbs);
    d->nverbs = d->verbs ? s->nverbs : 0;
    d->short_names = ckube__strv_dup(s->short_names, s->nshort_names);
    d->nshort_names = d->short_names ? s->nshort_names : 0;
    d->categories = ckube__strv_dup(s->categories, s->ncategories);
    d->ncategories = d->categories ? s->ncategories : 0;
    if (!d->group || !d->version || !d->resource || !d->singular || !d->kind) {
        resource_clear(d);
        return -1;
    }
    return 0;
}

static int list_push(ckube_api_resource_list *l, size_t *cap, ckube_api_resource *r)
{
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        ckube_api_resource *ni = realloc(l->items, nc * sizeof *ni);
        if (!ni)
            return -1;
        l->items = ni;
        *cap = nc;
    }
    l->items[l->n++] = *r;
    return 0;
}

static char **strv_from_json(const json_t *a, size_t *n)
{
    *n = 0;
    size_t sz = json_array_size(a);
    if (!sz)
        return NULL;
    char **v = calloc(sz, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < sz; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (s)
            v[(*n)++] = strdup(s);
    }
    return v;
}

static char *lower(const char *s)
{
    char *d = strdup(s ? s : "");
    for (char *p = d; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return d;
}

/* ---- fetching ---- */

/* Aggregated discovery first (one document per root with every
 * group-version's resources), plain APIVersions/APIGroupList otherwise. */
#define ACCEPT_DISCOVERY                                                                           \
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

static int get_json(ckube_client *c, const char *path, const char *accept, json_t **out,
                    ckube_status **err)
{
    ckube__req rq = {.method = "GET", .path = path, .accept = accept};
    ckube_response resp;
    *out = NULL;
    if (ckube__do(c, &rq, &resp, err) != 0) {
        ckube_response_free(&resp);
        return -1;
    }
    char *jerr = NULL;
    *out = ckube_json_loads(resp.body, resp.body_len, &jerr);
    if (!*out)
        *err = ckube__local_error("decoding %s%s: %s", c->base_url, path,
                                  jerr ? jerr : "invalid JSON");
    free(jerr);
    ckube_response_free(&resp);
    return *out ? 0 : -1;
}

/* Appends the resources of one group-version. A 404 (the group-version
 * vanished since /apis was read, e.g. a CRD deleted) is skipped. */
static int fetch_gv(ckube_client *c, const char *group, const char *version, bool preferred,
                    bool subresources, ckube_api_resource_list *l, size_t *cap, ckube_status **err)
{
    char *path = NULL;
    if (*group ? asprintf(&path, "/apis/%s/%s", group, version) < 0
               : asprintf(&path, "/api/%s", version) < 0)
        return -1;
    json_t *doc = NULL;
    ckube_status *e = NULL;
    int rc = get_json(c, path, NULL, &doc, &e);
    free(path);
    if (rc != 0) {
        if (ckube_is_not_found(e)) {
            CKUBE_V(2, "discovery: %s%s%s vanished", group, *group ? "/" : "", version);
            ckube_status_free(e);
            return 0;
        }
        *err = e;
        return -1;
    }
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "resources"), i, r)
    {
        const char *name = json_string_value(json_object_get(r, "name"));
        const char *kind = json_string_value(json_object_get(r, "kind"));
        if (!name || !kind)
            continue;
        if (!subresources && strchr(name, '/'))
            continue;
        ckube_api_resource a = {0};
        a.group = strdup(group);
        a.version = strdup(version);
        a.resource = strdup(name);
        const char *sing = json_string_value(json_object_get(r, "singularName"));
        a.singular = sing && *sing ? strdup(sing) : lower(kind);
        a.kind = strdup(kind);
        a.namespaced = json_is_true(json_object_get(r, "namespaced"));
        a.preferred = preferred;
        a.verbs = strv_from_json(json_object_get(r, "verbs"), &a.nverbs);
        a.short_names = strv_from_json(json_object_get(r, "shortNames"), &a.nshort_names);
        a.categories = strv_from_json(json_object_get(r, "categories"), &a.ncategories);
        if (!a.group || !a.version || !a.resource || !a.singular || !a.kind ||
            list_push(l, cap, &a) != 0) {
            resource_clear(&a);
            json_decref(doc);
            *err = ckube__local_error("out of memory");
            return -1;
        }
    }
    json_decref(doc);
    return 0;
}

/* True when member `key` of object o is the string `want`. */
static bool str_is(const json_t *o, const char *key, const char *want)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && !strcmp(s, want);
}

static bool is_aggregated(const json_t *doc)
{
    return str_is(doc, "kind", "APIGroupDiscoveryList") &&
           str_is(doc, "apiVersion", "apidiscovery.k8s.io/v2");
}

/* One resource (or subresource, `parent` set) of an aggregated document.
 * An entry without a responseKind is not listed (client-go does the
 * same); a subresource takes scope and singular from its parent. */
static int push_discovered(ckube_api_resource_list *l, size_t *cap, const char *group,
                           const char *version, bool preferred, const json_t *r,
                           const json_t *parent, ckube_status **err)
{
    const char *name = json_string_value(json_object_get(r, parent ? "subresource" : "resource"));
    const char *kind =
        json_string_value(json_object_get(json_object_get(r, "responseKind"), "kind"));
    const json_t *base = parent ? parent : r;
    const char *pname = json_string_value(json_object_get(base, "resource"));
    if (!name || !pname || !kind || !*kind)
        return 0;
    ckube_api_resource a = {0};
    a.group = strdup(group);
    a.version = strdup(version);
    if (parent) {
        if (asprintf(&a.resource, "%s/%s", pname, name) < 0)
            a.resource = NULL;
    } else {
        a.resource = strdup(name);
    }
    const char *sing = json_string_value(json_object_get(base, "singularResource"));
    const char *pkind =
        json_string_value(json_object_get(json_object_get(base, "responseKind"), "kind"));
    a.singular = sing && *sing ? strdup(sing) : lower(pkind ? pkind : kind);
    a.kind = strdup(kind);
    a.namespaced = str_is(base, "scope", "Namespaced");
    a.preferred = preferred;
    a.verbs = strv_from_json(json_object_get(r, "verbs"), &a.nverbs);
    if (!parent) {
        a.short_names = strv_from_json(json_object_get(r, "shortNames"), &a.nshort_names);
        a.categories = strv_from_json(json_object_get(r, "categories"), &a.ncategories);
    }
    if (!a.group || !a.version || !a.resource || !a.singular || !a.kind ||
        list_push(l, cap, &a) != 0) {
        resource_clear(&a);
        *err = ckube__local_error("out of memory");
        return -1;
    }
    return 0;
}

/* Appends every resource of an APIGroupDiscoveryList. Versions come in
 * the server's order of preference, the first preferred. A version the
 * server marks Stale (its backing server is unreachable) fails the call,
 * as a failed request for it would. */
static int add_aggregated(const json_t *doc, bool subresources, ckube_api_resource_list *l,
                          size_t *cap, ckube_status **err)
{
    size_t i, j, k, m;
    json_t *g, *v, *r, *sub;
    json_array_foreach(json_object_get(doc, "items"), i, g)
    {
        const char *group =
            json_string_value(json_object_get(json_object_get(g, "metadata"), "name"));
        if (!group)
            group = "";
        json_array_foreach(json_object_get(g, "versions"), j, v)
        {
            const char *version = json_string_value(json_object_get(v, "version"));
            if (!version)
                continue;
            if (str_is(v, "freshness", "Stale")) {
                *err = ckube__local_error("stale GroupVersion discovery: %s%s%s", group,
                                          *group ? "/" : "", version);
                return -1;
            }
            json_array_foreach(json_object_get(v, "resources"), k, r)
            {
                if (push_discovered(l, cap, group, version, j == 0, r, NULL, err) != 0)
                    return -1;
                if (!subresources)
                    continue;
                json_array_foreach(json_object_get(r, "subresources"), m, sub)
                {
                    if (push_discovered(l, cap, group, version, j == 0, sub, r, err) != 0)
                        return -1;
                }
            }
        }
    }
    return 0;
}

/* The resources of a legacy APIVersions (/api) document. */
static int add_legacy_core(ckube_client *c, const json_t *api, bool subresources,
                           ckube_api_resource_list *l, size_t *cap, ckube_status **err)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(api, "versions"), i, v)
    {
        if (json_is_string(v) &&
            fetch_gv(c, "", json_string_value(v), i == 0, subresources, l, cap, err))
            return -1;
    }
    return 0;
}

/* The resources of a legacy APIGroupList (/apis) document: each group's
 * preferred version first, then the others in the server's order. */
static int add_legacy_groups(ckube_client *c, const json_t *apis, bool subresources,
                             ckube_api_resource_list *l, size_t *cap, ckube_status **err)
{
    size_t i, j;
    json_t *g, *v;
    json_array_foreach(json_object_get(apis, "groups"), i, g)
    {
        const char *gname = json_string_value(json_object_get(g, "name"));
        const char *pref =
            json_string_value(json_object_get(json_object_get(g, "preferredVersion"), "version"));
        if (!gname)
            continue;
        if (pref && fetch_gv(c, gname, pref, true, subresources, l, cap, err))
            return -1;
        json_array_foreach(json_object_get(g, "versions"), j, v)
        {
            const char *ver = json_string_value(json_object_get(v, "version"));
            if (!ver || (pref && !strcmp(ver, pref)))
                continue;
            if (fetch_gv(c, gname, ver, !pref && j == 0, subresources, l, cap, err))
                return -1;
        }
    }
    return 0;
}

/* Each root answers in the aggregated form or the legacy one on its own
 * (a proxy in between may strip the Accept header's first choice). */
int ckube_discovery_resources(ckube_client *c, bool include_subresources,
                              ckube_api_resource_list **out, ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    *out = NULL;
    ckube_api_resource_list *l = calloc(1, sizeof *l);
    size_t cap = 0;
    json_t *api = NULL, *apis = NULL;
    if (!l) {
        *err = ckube__local_error("out of memory");
        goto fail;
    }
    if (get_json(c, "/api", ACCEPT_DISCOVERY, &api, err) != 0)
        goto fail;
    if (is_aggregated(api) ? add_aggregated(api, include_subresources, l, &cap, err)
                           : add_legacy_core(c, api, include_subresources, l, &cap, err))
        goto fail;
    if (get_json(c, "/apis", ACCEPT_DISCOVERY, &apis, err) != 0)
        goto fail;
    if (is_aggregated(apis) ? add_aggregated(apis, include_subresources, l, &cap, err)
                            : add_legacy_groups(c, apis, include_subresources, l, &cap, err))
        goto fail;
    json_decref(api);
    json_decref(apis);
    *out = l;
    return 0;
fail:
    json_decref(api);
    json_decref(apis);
    ckube_api_resource_list_free(l);
    ckube_status_free(dummy);
    return -1;
}

/* ---- the mapper ---- */

struct ckube_rest_mapper {
    ckube_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ckube_api_resource_list *cache; /* NULL until discovered */
    uint64_t last_ns;               /* monotonic time of the last discovery */
    uint64_t min_interval_ns;
    bool refreshing;
    uint64_t epoch; /* bumped by every completed discovery */
};

ckube_rest_mapper *ckube_rest_mapper_new(ckube_client *c)
{
    ckube_rest_mapper *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->c = c;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->min_interval_ns = 1000000000u;
    return m;
}

void ckube_rest_mapper_free(ckube_rest_mapper *m)
{
    if (!m)
        return;
    ckube_api_resource_list_free(m->cache);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

void ckube_rest_mapper_set_min_refresh_interval(ckube_rest_mapper *m, uint64_t ms)
{
    pthread_mutex_lock(&m->mu);
    m->min_interval_ns = ms * 1000000u;
    pthread_mutex_unlock(&m->mu);
}

void ckube_rest_mapper_reset(ckube_rest_mapper *m)
{
    pthread_mutex_lock(&m->mu);
    ckube_api_resource_list_free(m->cache);
    m->cache = NULL;
    pthread_mutex_unlock(&m->mu);
}

/* Rediscovers (called with mu held; releases it during the requests).
 * If another thread is already discovering, waits for its result
 * instead of starting a second wave. */
static int refresh_locked(ckube_rest_mapper *m, ckube_status **err)
{
    if (m->refreshing) {
        uint64_t e = m->epoch;
        while (m->refreshing && m->epoch == e)
            pthread_cond_wait(&m->cv, &m->mu);
        if (m->cache)
            return 0;
        /* the other discovery failed: try ourselves */
    }
    m->refreshing = true;
    pthread_mutex_unlock(&m->mu);
    ckube_api_resource_list *l = NULL;
    int rc = ckube_discovery_resources(m->c, false, &l, err);
    pthread_mutex_lock(&m->mu);
    m->refreshing = false;
    m->epoch++;
    m->last_ns = ckube_monotonic_ns();
    if (rc == 0) {
        ckube_api_resource_list_free(m->cache);
        m->cache = l;
    }
    pthread_cond_broadcast(&m->cv);
    return rc;
}

static int mapping_from(ckube_rest_mapping *out, const ckube_api_resource *r)
{
    memset(out, 0, sizeof *out);
    out->group = strdup(r->group);
    out->version = strdup(r->version);
    out->resource = strdup(r->resource);
    out->kind = strdup(r->kind);
    out->singular = strdup(r->singular);
    out->namespaced = r->namespaced;
    out->short_names = ckube__strv_dup(r->short_names, r->nshort_names);
    out->nshort_names = out->short_names ? r->nshort_names : 0;
    out->gvr.group = out->group;
    out->gvr.version = out->version;
    out->gvr.resource = out->resource;
    if (!out->group || !out->version || !out->resource || !out->kind || !out->singular) {
        ckube_rest_mapping_clear(out);
        return -1;
    }
    return 0;
}

void ckube_rest_mapping_clear(ckube_rest_mapping *m)
{
    if (!m)
        return;
    free(m->group);
    free(m->version);
    free(m->resource);
    free(m->kind);
    free(m->singular);
    ckube__strv_free(m->short_names, m->nshort_names);
    memset(m, 0, sizeof *m);
}

/* A lookup over the cache: returns the matching entry or NULL. */
typedef const ckube_api_resource *(*matcher)(const ckube_api_resource_list *l, const void *q);

/* Runs `match`, discovering first when nothing is cached and again
 * (rate-limited) on a miss. 1 = found (copied to out), 0 = not found,
 * -1 = discovery failed (*err). */
static int lookup(ckube_rest_mapper *m, matcher match, const void *q, ckube_rest_mapping *out,
                  ckube_status **err)
{
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    bool refreshed = false;
    if (!m->cache) {
        if (refresh_locked(m, err) != 0) {
            pthread_mutex_unlock(&m->mu);
            return -1;
        }
        refreshed = true;
    }
    const ckube_api_resource *r = match(m->cache, q);
    if (!r && !refreshed && ckube_monotonic_ns() - m->last_ns >= m->min_interval_ns) {
        ckube_status *e = NULL;
        if (refresh_locked(m, &e) != 0) {
            /* keep answering from the old cache; report why we could not
             * look further */
            if (m->cache && !match(m->cache, q)) {
                pthread_mutex_unlock(&m->mu);
                *err = e;
                return -1;
            }
            ckube_status_free(e);
        }
        r = m->cache ? match(m->cache, q) : NULL;
    }
    if (r)
        rc = mapping_from(out, r) == 0 ? 1 : -1;
    pthread_mutex_unlock(&m->mu);
    if (rc < 0)
        *err = ckube__local_error("out of memory");
    return rc;
}

typedef struct kind_q {
    const char *group, *version; /* version NULL = any */
    const char *kind;
} kind_q;

static const ckube_api_resource *match_kind(const ckube_api_resource_list *l, const void *qp)
{
    const kind_q *q = qp;
    const ckube_api_resource *any = NULL;
    for (size_t i = 0; i < l->n; i++) {
        const ckube_api_resource *r = &l->items[i];
        if (strcmp(r->kind, q->kind))
            continue;
        if (q->version) {
            if (!strcmp(r->group, q->group) && !strcmp(r->version, q->version))
                return r;
        } else if (r->preferred) {
            return r;
        } else if (!any) {
            any = r;
        }
    }
    return any;
}

int ckube_rest_mapper_kind(ckube_rest_mapper *m, const char *api_version, const char *kind,
                           ckube_rest_mapping *out, ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    memset(out, 0, sizeof *out);
    kind_q q = {.group = "", .kind = kind ? kind : ""};
    char *g = NULL;
    if (api_version && *api_version) {
        const char *slash = strchr(api_version, '/');
        if (slash) {
            g = strndup(api_version, (size_t)(slash - api_version));
            q.group = g;
            q.version = slash + 1;
        } else {
            q.version = api_version;
        }
    }
    int rc = lookup(m, match_kind, &q, out, err);
    if (rc == 0)
        *err = ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                "no matches for kind \"%s\" in version \"%s\"", q.kind,
                                api_version ? api_version : "");
    free(g);
    ckube_status_free(dummy);
    return rc == 1 ? 0 : -1;
}

typedef struct res_q {
    const char *group;   /* NULL = any */
    const char *version; /* NULL = any (preferred first) */
    const char *name;
} res_q;

static const ckube_api_resource *match_res_pass(const ckube_api_resource_list *l, const res_q *q,
                                                int pass)
{
    const ckube_api_resource *any = NULL;
    for (size_t i = 0; i < l->n; i++) {
        const ckube_api_resource *r = &l->items[i];
        if (q->group && strcasecmp(r->group, q->group))
            continue;
        if (q->version && strcmp(r->version, q->version))
            continue;
        bool hit = false;
        switch (pass) {
        case 0:
            hit = !strcasecmp(r->resource, q->name);
            break;
        case 1:
            hit = !strcasecmp(r->singular, q->name);
            break;
        case 2:
            for (size_t k = 0; k < r->nshort_names && !hit; k++)
                hit = !strcasecmp(r->short_names[k], q->name);
            break;
        default:
            hit = !strcasecmp(r->kind, q->name);
        }
        if (!hit)
            continue;
        if (r->preferred || q->version)
            return r;
        if (!any)
            any = r;
    }
    return any;
}

static const ckube_api_resource *match_res(const ckube_api_resource_list *l, const void *qp)
{
    const res_q *q = qp;
    for (int pass = 0; pass < 4; pass++) {
        const ckube_api_resource *r = match_res_pass(l, q, pass);
        if (r)
            return r;
    }
    return NULL;
}

/* The interpretations of `name` kubectl tries, most literal first. */
typedef struct res_multi {
    res_q q[3];
    int n;
} res_multi;

static const ckube_api_resource *match_multi(const ckube_api_resource_list *l, const void *qp)
{
    const res_multi *mq = qp;
    for (int i = 0; i < mq->n; i++) {
        const ckube_api_resource *r = match_res(l, &mq->q[i]);
        if (r)
            return r;
    }
    return NULL;
}

int ckube_rest_mapper_resource(ckube_rest_mapper *m, const char *group, const char *name,
                               ckube_rest_mapping *out, ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    memset(out, 0, sizeof *out);
    if (!name || !*name) {
        *err = ckube__local_error("resource name may not be empty");
        ckube_status_free(dummy);
        return -1;
    }
    res_multi mq = {.n = 0};
    char *copy = strdup(name);
    mq.q[mq.n++] = (res_q){.group = group, .name = name};
    char *dot = copy ? strchr(copy, '.') : NULL;
    if (!group && dot) {
        /* "name.group" */
        *dot = 0;
        mq.q[mq.n++] = (res_q){.group = dot + 1, .name = copy};
        /* "name.version.group" */
        char *dot2 = strchr(dot + 1, '.');
        if (dot2) {
            *dot2 = 0;
            mq.q[mq.n++] = (res_q){.group = dot2 + 1, .version = dot + 1, .name = copy};
        }
    }
    int rc = lookup(m, match_multi, &mq, out, err);
    if (rc == 0)
        *err = ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                "the server doesn't have a resource type \"%s\"", name);
    free(copy);
    ckube_status_free(dummy);
    return rc == 1 ? 0 : -1;
}

int ckube_rest_mapper_resources(ckube_rest_mapper *m, ckube_api_resource_list **out,
                                ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    *out = NULL;
    pthread_mutex_lock(&m->mu);
    if (!m->cache && refresh_locked(m, err) != 0) {
        pthread_mutex_unlock(&m->mu);
        ckube_status_free(dummy);
        return -1;
    }
    ckube_api_resource_list *l = calloc(1, sizeof *l);
    if (l && m->cache->n) {
        l->items = calloc(m->cache->n, sizeof *l->items);
        for (size_t i = 0; l->items && i < m->cache->n; i++) {
            if (resource_copy(&l->items[l->n], &m->cache->items[i]) != 0)
                break;
            l->n++;
        }
        if (!l->items || l->n != m->cache->n) {
            ckube_api_resource_list_free(l);
            l = NULL;
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (!l) {
        *err = ckube__local_error("out of memory");
        ckube_status_free(dummy);
        return -1;
    }
    *out = l;
    return 0;
}
