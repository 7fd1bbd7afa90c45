/* ckube/discovery.h - API discovery and the RESTMapper.
 *
 * Discovery asks /api and /apis for aggregated discovery
 * (apidiscovery.k8s.io/v2: every resource in two requests, as client-go
 * 1.30+ does) and falls back, per root, to the legacy documents every
 * Kubernetes server serves: /api (APIVersions), /apis (APIGroupList) and
 * one APIResourceList per group-version (/api/v1, /apis/G/V).
 *
 * The RESTMapper answers "which resource serves kind K of apiVersion G/V"
 * and "what does the user mean by `deploy` / `deployments.apps` /
 * `Deployment`", from a cache of discovery. On a miss it rediscovers
 * (at most once per minimum interval, 1 s by default, and only one
 * request wave at a time however many threads miss together), so a kind
 * from a CustomResourceDefinition created a moment ago is found without
 * restarting anything. Thread-safe.
 *
 * Ownership: every struct filled or returned here owns its strings;
 * free with the matching _free/_clear function.
 */
#ifndef CKUBE_DISCOVERY_H
#define CKUBE_DISCOVERY_H

#include <ckube/client.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of an APIResourceList, with its group-version. */
typedef struct ckube_api_resource {
    char *group;    /* "" for the core group */
    char *version;  /* "v1" */
    char *resource; /* plural ("deployments"); "deployments/status" for a subresource */
    char *singular; /* "deployment" (the lowercased kind when the server sent none) */
    char *kind;     /* "Deployment" */
    bool namespaced;
    bool preferred; /* `version` is the group's preferred version */
    char **verbs;   /* "get", "list", "watch", "create", "update", "patch", "delete",
                       "deletecollection" ... */
    size_t nverbs;
    char **short_names;
    size_t nshort_names;
    char **categories;
    size_t ncategories;
} ckube_api_resource;

/* Resources in discovery order: the core group first, then groups as
 * /apis lists them, each group's preferred version first. */
typedef struct ckube_api_resource_list {
    ckube_api_resource *items;
    size_t n;
} ckube_api_resource_list;

void ckube_api_resource_list_free(ckube_api_resource_list *l);
/* True when the resource lists `verb`. NULL-safe. */
bool ckube_api_resource_has_verb(const ckube_api_resource *r, const char *verb);

/* Every resource of every served group-version. Subresources ("pods/log")
 * only with include_subresources. All or nothing: any failed request
 * (except a 404 for a group-version that disappeared meanwhile) fails the
 * call, so a caller that must act on everything (the namespace
 * controller) never skips what it could not see. *out: free with
 * ckube_api_resource_list_free. */
int ckube_discovery_resources(ckube_client *c, bool include_subresources,
                              ckube_api_resource_list **out, ckube_status **err);

/* The answer of a RESTMapper lookup. All strings owned; gvr's fields
 * point at group/version/resource (valid until ckube_rest_mapping_clear). */
typedef struct ckube_rest_mapping {
    ckube_gvr gvr;
    char *group;
    char *version;
    char *resource;
    char *kind;
    char *singular;
    bool namespaced;
    char **short_names;
    size_t nshort_names;
} ckube_rest_mapping;

void ckube_rest_mapping_clear(ckube_rest_mapping *m);

typedef struct ckube_rest_mapper ckube_rest_mapper;

/* A mapper over client `c` (borrowed: free the mapper first). Discovery
 * happens on first use. NULL only on allocation failure. */
ckube_rest_mapper *ckube_rest_mapper_new(ckube_client *c);
void ckube_rest_mapper_free(ckube_rest_mapper *m);
/* Minimum time between two rediscoveries caused by misses (default
 * 1000 ms; 0 = rediscover on every miss). */
void ckube_rest_mapper_set_min_refresh_interval(ckube_rest_mapper *m, uint64_t ms);
/* Forgets the cache: the next lookup rediscovers. */
void ckube_rest_mapper_reset(ckube_rest_mapper *m);

/* Kind `kind` of `api_version` ("v1", "apps/v1"; NULL or "" = any version
 * of any group, preferred versions first). On a miss after rediscovery:
 * -1 with *err code 404, reason NotFound,
 * message `no matches for kind "K" in version "G/V"`. */
int ckube_rest_mapper_kind(ckube_rest_mapper *m, const char *api_version, const char *kind,
                           ckube_rest_mapping *out, ckube_status **err);
/* What a user typed: a plural, singular, short name or kind, matched
 * case-insensitively in that order of preference, within `group` (NULL =
 * any group). With group NULL, "name.group" and "name.version.group" are
 * understood as kubectl does ("deployments.apps", "deploy.v1.apps").
 * On a miss: -1 with *err code 404, reason NotFound, message
 * `the server doesn't have a resource type "x"`. */
int ckube_rest_mapper_resource(ckube_rest_mapper *m, const char *group, const char *name,
                               ckube_rest_mapping *out, ckube_status **err);
/* A copy of the cached main resources (no subresources) of every
 * version, discovering first if needed. Free with
 * ckube_api_resource_list_free. */
int ckube_rest_mapper_resources(ckube_rest_mapper *m, ckube_api_resource_list **out,
                                ckube_status **err);

#ifdef __cplusplus
}
#endif
#endif
