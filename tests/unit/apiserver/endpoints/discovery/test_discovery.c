/* Discovery (endpoints/discovery/discovery.c) as clients read it, over
 * HTTP from an API server running in-process (util/inproc_server.h): the
 * legacy documents (/api, /apis, /apis/G, /api/v1, /apis/G/V), a CRD's
 * group-version coming and going, the aggregated APIGroupDiscoveryList
 * (apidiscovery.k8s.io v2 and v2beta1) with its ETag, and the 404s and
 * 406s around them. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckube/json.h"
#include "util/inproc_server.h"
#include "util/quoted_json.h"

#define WAIT_MS 5000
#define V2 "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
#define V2BETA1 "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
#define NOT_FOUND_MESSAGE "the server could not find the requested resource"
#define ALL_VERBS "['create','delete','deletecollection','get','list','patch','update','watch']"

/* ---- helpers ------------------------------------------------------------- */

/* The element of array `arr` whose `key` is the string `value`; NULL. */
static json_t *find_by(const json_t *arr, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *v = json_string_value(json_object_get(e, key));
        if (v && !strcmp(v, value))
            return e;
    }
    return NULL;
}

static long index_by(const json_t *arr, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *v = json_string_value(json_object_get(e, key));
        if (v && !strcmp(v, value))
            return (long)i;
    }
    return -1;
}

/* An aggregated document's group item by name ("" for core). */
static json_t *find_group_item(const json_t *doc, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "items"), i, e)
    {
        const char *n = json_string_value(ckube_json_get_path(e, "metadata.name"));
        if (!strcmp(n ? n : "", name))
            return e;
    }
    return NULL;
}

static int setup(void **state)
{
    ips *p = calloc(1, sizeof *p);
    if (!p || ips_start(p, 0) != 0) {
        free(p);
        return -1;
    }
    *state = p;
    return 0;
}

static int teardown(void **state)
{
    ips *p = *state;
    ips_stop(p);
    free(p);
    return 0;
}

/* GET path with an Accept header (NULL: none); returns the status code
 * and the JSON body in *out (NULL when not JSON), the reply in *r when
 * given (else freed). */
static long get(ips *p, const char *path, const char *accept, json_t **out, http_resp **r)
{
    char hdr[512];
    const char *hdrs[2] = {NULL, NULL};
    if (accept) {
        snprintf(hdr, sizeof hdr, "Accept: %s", accept);
        hdrs[0] = hdr;
    }
    http_resp *rr = http_call(p, "GET", NULL, NULL, hdrs, "%s", path);
    long code = rr->code;
    if (out)
        *out = json_incref(rr->json);
    if (r)
        *r = rr;
    else
        resp_free(rr);
    return code;
}

/* GET path expecting 200 JSON; returns the body. */
static json_t *get_ok(ips *p, const char *path, const char *accept)
{
    json_t *j = NULL;
    http_resp *r;
    long code = get(p, path, accept, &j, &r);
    if (code != 200 || !j)
        fail_msg("GET %s: %ld %s", path, code, r->body.p);
    resp_free(r);
    return j;
}

/* ---- legacy documents ---------------------------------------------------- */

static void test_api_versions(void **state)
{
    ips *p = *state;
    json_t *j = NULL;
    http_resp *r;
    assert_int_equal(get(p, "/api", NULL, &j, &r), 200);
    assert_header(r, "Content-Type", "application/json");
    assert_header(r, "Vary", "Accept");
    resp_free(r);
    char want[512];
    snprintf(want, sizeof want,
             "{'kind':'APIVersions','versions':['v1'],'serverAddressByClientCIDRs':"
             "[{'clientCIDR':'0.0.0.0/0','serverAddress':'127.0.0.1:%d'}]}",
             p->port);
    tu_assert_json(j, want);
    json_decref(j);
    /* The same with a plain JSON Accept header. */
    j = get_ok(p, "/api", "application/json");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIVersions");
    json_decref(j);
}

static void test_api_group_list(void **state)
{
    ips *p = *state;
    json_t *j = NULL;
    http_resp *r;
    assert_int_equal(get(p, "/apis", NULL, &j, &r), 200);
    assert_header(r, "Content-Type", "application/json");
    assert_header(r, "Vary", "Accept");
    resp_free(r);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIGroupList");
    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")), "v1");
    json_t *groups = json_object_get(j, "groups");
    assert_true(json_array_size(groups) > 3);
    /* The core group is /api's, not a group here. */
    assert_null(find_by(groups, "name", ""));
    tu_assert_json(find_by(groups, "name", "apps"),
                   "{'name':'apps','versions':[{'groupVersion':'apps/v1','version':'v1'}],"
                   "'preferredVersion':{'groupVersion':'apps/v1','version':'v1'}}");
    tu_assert_json(find_by(groups, "name", "apiextensions.k8s.io"),
                   "{'name':'apiextensions.k8s.io','versions':["
                   "{'groupVersion':'apiextensions.k8s.io/v1','version':'v1'},"
                   "{'groupVersion':'apiextensions.k8s.io/v1beta1','version':'v1beta1'}],"
                   "'preferredVersion':{'groupVersion':'apiextensions.k8s.io/v1','version':'v1'}}");
    /* GA is preferred to beta. */
    json_t *authn = find_by(groups, "name", "authentication.k8s.io");
    assert_non_null(authn);
    tu_assert_json(json_object_get(authn, "preferredVersion"),
                   "{'groupVersion':'authentication.k8s.io/v1','version':'v1'}");
    /* kube-apiserver's group order: the aggregator's own group first,
     * then apps, built-in groups by priority. */
    assert_int_equal(index_by(groups, "name", "apiregistration.k8s.io"), 0);
    assert_int_equal(index_by(groups, "name", "apps"), 1);
    long ev = index_by(groups, "name", "events.k8s.io");
    long ae = index_by(groups, "name", "apiextensions.k8s.io");
    long co = index_by(groups, "name", "coordination.k8s.io");
    assert_true(ev > 0 && ae > ev && co > ae);
    json_decref(j);

    /* One group: its APIGroup. */
    j = get_ok(p, "/apis/apps", NULL);
    tu_assert_json(j, "{'kind':'APIGroup','apiVersion':'v1','name':'apps','versions':"
                      "[{'groupVersion':'apps/v1','version':'v1'}],"
                      "'preferredVersion':{'groupVersion':'apps/v1','version':'v1'}}");
    json_decref(j);
}

static void test_core_resource_list(void **state)
{
    ips *p = *state;
    json_t *j = get_ok(p, "/api/v1", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIResourceList");
    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")), "v1");
    assert_string_equal(json_string_value(json_object_get(j, "groupVersion")), "v1");
    json_t *res = json_object_get(j, "resources");
    tu_assert_json(find_by(res, "name", "configmaps"),
                   "{'name':'configmaps','singularName':'configmap','namespaced':true,"
                   "'kind':'ConfigMap','verbs':" ALL_VERBS ",'shortNames':['cm']}");
    tu_assert_json(find_by(res, "name", "namespaces"),
                   "{'name':'namespaces','singularName':'namespace','namespaced':false,"
                   "'kind':'Namespace','verbs':" ALL_VERBS ",'shortNames':['ns']}");
    /* Subresources follow their resource, status first. */
    long ns = index_by(res, "name", "namespaces");
    tu_assert_json(json_array_get(res, (size_t)ns + 1),
                   "{'name':'namespaces/status','singularName':'','namespaced':false,"
                   "'kind':'Namespace','verbs':['get','patch','update']}");
    tu_assert_json(json_array_get(res, (size_t)ns + 2),
                   "{'name':'namespaces/finalize','singularName':'','namespaced':false,"
                   "'kind':'Namespace','verbs':['update']}");
    /* Only core types: nothing of apps. */
    assert_null(find_by(res, "name", "deployments"));
    json_decref(j);
}

static void test_apps_resource_list(void **state)
{
    ips *p = *state;
    json_t *j = get_ok(p, "/apis/apps/v1", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIResourceList");
    assert_string_equal(json_string_value(json_object_get(j, "groupVersion")), "apps/v1");
    json_t *res = json_object_get(j, "resources");
    tu_assert_json(find_by(res, "name", "deployments"),
                   "{'name':'deployments','singularName':'deployment','namespaced':true,"
                   "'kind':'Deployment','verbs':" ALL_VERBS ",'shortNames':['deploy'],"
                   "'categories':['all']}");
    tu_assert_json(find_by(res, "name", "deployments/status"),
                   "{'name':'deployments/status','singularName':'','namespaced':true,"
                   "'kind':'Deployment','verbs':['get','patch','update']}");
    /* /scale answers autoscaling/v1 Scale, which it names. */
    tu_assert_json(find_by(res, "name", "deployments/scale"),
                   "{'name':'deployments/scale','singularName':'','namespaced':true,"
                   "'group':'autoscaling','version':'v1','kind':'Scale',"
                   "'verbs':['get','patch','update']}");
    assert_null(find_by(res, "name", "configmaps"));
    json_decref(j);
}

static void test_not_found(void **state)
{
    ips *p = *state;
    const char *paths[] = {"/apis/nonexistent.group/v1", "/apis/nonexistent.group", "/api/v2",
                           "/apis/apps/v2", "/apis/nonexistent.group/v1/things"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        json_t *j = NULL;
        http_resp *r;
        long code = get(p, paths[i], NULL, &j, &r);
        if (code != 404)
            fail_msg("GET %s: %ld %s", paths[i], code, r->body.p);
        assert_header(r, "Content-Type", "application/json");
        resp_free(r);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "kind")), "Status");
        assert_string_equal(json_string_value(json_object_get(j, "apiVersion")), "v1");
        assert_string_equal(json_string_value(json_object_get(j, "status")), "Failure");
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "NotFound");
        assert_string_equal(json_string_value(json_object_get(j, "message")), NOT_FOUND_MESSAGE);
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 404);
        json_decref(j);
    }
}

/* ---- a CRD's group-version ------------------------------------------------ */

#define DISCO_SCHEMA                                                                               \
    "'schema':{'openAPIV3Schema':{'type':'object','x-kubernetes-preserve-unknown-fields':true}}"
#define DISCO_SUBRESOURCES                                                                         \
    "'subresources':{'status':{},'scale':{'specReplicasPath':'.spec.replicas',"                    \
    "'statusReplicasPath':'.status.replicas'}}"
#define DISCO_VERSION(name, served, storage)                                                       \
    "{'name':'" name "','served':" served ",'storage':" storage "," DISCO_SCHEMA                   \
    "," DISCO_SUBRESOURCES "}"
/* v1 stored, v2 preferred (kube-aware order), v1alpha1 not served. */
#define DISCO_V1BETA1 DISCO_VERSION("v1beta1", "true", "false")
#define DISCO_V1 DISCO_VERSION("v1", "true", "true")
#define DISCO_V2 DISCO_VERSION("v2", "true", "false")
#define DISCO_V1ALPHA1 DISCO_VERSION("v1alpha1", "false", "false")
#define DISCO_CRD                                                                                  \
    "{'apiVersion':'apiextensions.k8s.io/v1','kind':'CustomResourceDefinition',"                   \
    "'metadata':{'name':'gadgets.disco.example.com'},'spec':{'group':'disco.example.com',"         \
    "'scope':'Namespaced','names':{'plural':'gadgets','singular':'gadget','kind':'Gadget',"        \
    "'shortNames':['gd'],'categories':['all']},'versions':[" DISCO_V1BETA1 "," DISCO_V1            \
    "," DISCO_V2 "," DISCO_V1ALPHA1 "]}}"

static void create_disco_crd(ips *p)
{
    json_t *crd = tu_json(DISCO_CRD);
    char *body = json_dumps(crd, JSON_COMPACT);
    json_decref(crd);
    http_resp *r = HPOST(p, body, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    long code = r->code;
    free(body);
    if (code != 201)
        fail_msg("creating the CRD: %ld %s", code, r->body.p);
    resp_free(r);
}

static void delete_disco_crd(ips *p)
{
    http_resp *r = HDELETE(p, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                              "gadgets.disco.example.com");
    long code = r->code;
    if (code != 200)
        fail_msg("deleting the CRD: %ld %s", code, r->body.p);
    resp_free(r);
}

/* Whether disco.example.com is discovered (`want`) or not: listed in
 * /apis, and /apis/disco.example.com/v2 answering 200, or neither. */
typedef struct disco_probe {
    ips *p;
    bool want;
} disco_probe;

static bool group_listed(ips *p, const char *group)
{
    json_t *j = NULL;
    if (get(p, "/apis", NULL, &j, NULL) != 200)
        fail_msg("GET /apis failed");
    bool found = find_by(json_object_get(j, "groups"), "name", group) != NULL;
    json_decref(j);
    return found;
}

static bool disco_is(void *arg)
{
    disco_probe *d = arg;
    bool listed = group_listed(d->p, "disco.example.com");
    long code = get(d->p, "/apis/disco.example.com/v2", NULL, NULL, NULL);
    return listed == d->want && code == (d->want ? 200 : 404);
}

static void test_crd_group_version_comes_and_goes(void **state)
{
    ips *p = *state;
    assert_false(group_listed(p, "disco.example.com"));
    assert_int_equal(get(p, "/apis/disco.example.com/v1", NULL, NULL, NULL), 404);

    create_disco_crd(p);
    disco_probe d = {p, true};
    assert_true(ips_wait(disco_is, &d, WAIT_MS));

    json_t *j = get_ok(p, "/apis", NULL);
    json_t *g = find_by(json_object_get(j, "groups"), "name", "disco.example.com");
    tu_assert_json(g, "{'name':'disco.example.com','versions':["
                      "{'groupVersion':'disco.example.com/v2','version':'v2'},"
                      "{'groupVersion':'disco.example.com/v1','version':'v1'},"
                      "{'groupVersion':'disco.example.com/v1beta1','version':'v1beta1'}],"
                      "'preferredVersion':{'groupVersion':'disco.example.com/v2','version':'v2'}}");
    /* A CRD's group comes after every built-in group. */
    json_t *groups = json_object_get(j, "groups");
    assert_int_equal(index_by(groups, "name", "disco.example.com"),
                     (long)json_array_size(groups) - 1);
    json_decref(j);

    j = get_ok(p, "/apis/disco.example.com", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIGroup");
    assert_string_equal(json_string_value(ckube_json_get_path(j, "preferredVersion.version")),
                        "v2");
    json_decref(j);

    const char *versions[] = {"v1beta1", "v1", "v2"};
    for (size_t i = 0; i < 3; i++) {
        char path[128], gv[64];
        snprintf(path, sizeof path, "/apis/disco.example.com/%s", versions[i]);
        snprintf(gv, sizeof gv, "disco.example.com/%s", versions[i]);
        j = get_ok(p, path, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "groupVersion")), gv);
        json_t *res = json_object_get(j, "resources");
        assert_int_equal(json_array_size(res), 3);
        tu_assert_json(json_array_get(res, 0),
                       "{'name':'gadgets','singularName':'gadget','namespaced':true,"
                       "'kind':'Gadget','verbs':" ALL_VERBS ",'shortNames':['gd'],"
                       "'categories':['all']}");
        tu_assert_json(find_by(res, "name", "gadgets/status"),
                       "{'name':'gadgets/status','singularName':'','namespaced':true,"
                       "'kind':'Gadget','verbs':['get','patch','update']}");
        tu_assert_json(find_by(res, "name", "gadgets/scale"),
                       "{'name':'gadgets/scale','singularName':'','namespaced':true,"
                       "'group':'autoscaling','version':'v1','kind':'Scale',"
                       "'verbs':['get','patch','update']}");
        json_decref(j);
    }
    /* served: false is not discovered. */
    assert_int_equal(get(p, "/apis/disco.example.com/v1alpha1", NULL, NULL, NULL), 404);
    /* The aggregated document has it too. */
    j = get_ok(p, "/apis", V2);
    json_t *item = find_group_item(j, "disco.example.com");
    assert_non_null(item);
    json_t *iv = json_object_get(item, "versions");
    assert_int_equal(json_array_size(iv), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(iv, 0), "version")), "v2");
    assert_non_null(
        find_by(json_object_get(json_array_get(iv, 0), "resources"), "resource", "gadgets"));
    json_decref(j);

    delete_disco_crd(p);
    d.want = false;
    assert_true(ips_wait(disco_is, &d, WAIT_MS));
    for (size_t i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "/apis/disco.example.com/%s", versions[i]);
        assert_int_equal(get(p, path, NULL, NULL, NULL), 404);
    }
    assert_int_equal(get(p, "/apis/disco.example.com", NULL, NULL, NULL), 404);
    j = get_ok(p, "/apis", V2);
    assert_null(find_group_item(j, "disco.example.com"));
    json_decref(j);
}

/* ---- aggregated discovery ----------------------------------------------- */

static bool is_etag(const char *e)
{
    /* A strong ETag: the document's SHA-512 in upper-case hex, quoted. */
    if (!e || strlen(e) != 130 || e[0] != '"' || e[129] != '"')
        return false;
    for (int i = 1; i < 129; i++)
        if (!isdigit((unsigned char)e[i]) && !(e[i] >= 'A' && e[i] <= 'F'))
            return false;
    return true;
}

static void test_aggregated_v2(void **state)
{
    ips *p = *state;
    json_t *j = NULL;
    http_resp *r;
    assert_int_equal(get(p, "/apis", V2, &j, &r), 200);
    assert_header(r, "Content-Type", V2);
    assert_header(r, "Vary", "Accept");
    char etag[256];
    assert_true(is_etag(http_header(r, "ETag", etag, sizeof etag)));
    resp_free(r);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIGroupDiscoveryList");
    assert_string_equal(json_string_value(json_object_get(j, "apiVersion")),
                        "apidiscovery.k8s.io/v2");
    tu_assert_json(json_object_get(j, "metadata"), "{}");
    /* /apis: every group but core, in kube-apiserver's order. */
    assert_null(find_group_item(j, ""));
    json_t *items = json_object_get(j, "items");
    assert_string_equal(
        json_string_value(ckube_json_get_path(json_array_get(items, 0), "metadata.name")),
        "apiregistration.k8s.io");
    assert_string_equal(
        json_string_value(ckube_json_get_path(json_array_get(items, 1), "metadata.name")), "apps");
    json_t *apps = find_group_item(j, "apps");
    json_t *versions = json_object_get(apps, "versions");
    assert_int_equal(json_array_size(versions), 1);
    json_t *v1 = json_array_get(versions, 0);
    assert_string_equal(json_string_value(json_object_get(v1, "version")), "v1");
    assert_string_equal(json_string_value(json_object_get(v1, "freshness")), "Current");
    tu_assert_json(find_by(json_object_get(v1, "resources"), "resource", "deployments"),
                   "{'resource':'deployments','responseKind':{'group':'apps','version':'v1',"
                   "'kind':'Deployment'},'scope':'Namespaced','singularResource':'deployment',"
                   "'verbs':" ALL_VERBS ",'shortNames':['deploy'],'categories':['all'],"
                   "'subresources':[{'subresource':'scale','responseKind':{'group':'autoscaling',"
                   "'version':'v1','kind':'Scale'},'verbs':['get','patch','update']},"
                   "{'subresource':'status','responseKind':{'group':'apps','version':'v1',"
                   "'kind':'Deployment'},'verbs':['get','patch','update']}]}");
    /* Versions by priority, as the legacy group list has them. */
    json_t *ext = find_group_item(j, "apiextensions.k8s.io");
    assert_non_null(ext);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(ext, "versions"), 0), "version")),
                        "v1");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(ext, "versions"), 1), "version")),
                        "v1beta1");
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        size_t k;
        json_t *v;
        json_array_foreach(json_object_get(it, "versions"), k, v)
        {
            assert_string_equal(json_string_value(json_object_get(v, "freshness")), "Current");
        }
    }
    json_decref(j);

    /* /api: the core group alone, metadata without a name. */
    assert_int_equal(get(p, "/api", V2, &j, &r), 200);
    assert_header(r, "Content-Type", V2);
    resp_free(r);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIGroupDiscoveryList");
    items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 1);
    json_t *core = json_array_get(items, 0);
    tu_assert_json(json_object_get(core, "metadata"), "{}");
    assert_int_equal(json_array_size(json_object_get(core, "versions")), 1);
    json_t *cv1 = json_array_get(json_object_get(core, "versions"), 0);
    assert_string_equal(json_string_value(json_object_get(cv1, "version")), "v1");
    json_t *res = json_object_get(cv1, "resources");
    tu_assert_json(find_by(res, "resource", "configmaps"),
                   "{'resource':'configmaps','responseKind':{'group':'','version':'v1',"
                   "'kind':'ConfigMap'},'scope':'Namespaced','singularResource':'configmap',"
                   "'verbs':" ALL_VERBS ",'shortNames':['cm']}");
    tu_assert_json(find_by(res, "resource", "namespaces"),
                   "{'resource':'namespaces','responseKind':{'group':'','version':'v1',"
                   "'kind':'Namespace'},'scope':'Cluster','singularResource':'namespace',"
                   "'verbs':" ALL_VERBS ",'shortNames':['ns'],"
                   "'subresources':[{'subresource':'finalize','responseKind':{'group':'',"
                   "'version':'v1','kind':'Namespace'},'verbs':['update']},"
                   "{'subresource':'status','responseKind':{'group':'','version':'v1',"
                   "'kind':'Namespace'},'verbs':['get','patch','update']}]}");
    json_decref(j);
}

static void test_aggregated_v2beta1(void **state)
{
    ips *p = *state;
    const char *roots[] = {"/api", "/apis"};
    for (size_t i = 0; i < 2; i++) {
        json_t *b1 = NULL;
        http_resp *r;
        assert_int_equal(get(p, roots[i], V2BETA1, &b1, &r), 200);
        assert_header(r, "Content-Type", V2BETA1);
        assert_header(r, "Vary", "Accept");
        char etag[256];
        assert_true(is_etag(http_header(r, "ETag", etag, sizeof etag)));
        resp_free(r);
        assert_string_equal(json_string_value(json_object_get(b1, "kind")),
                            "APIGroupDiscoveryList");
        assert_string_equal(json_string_value(json_object_get(b1, "apiVersion")),
                            "apidiscovery.k8s.io/v2beta1");
        /* The same groups and resources as v2. */
        json_t *v2 = get_ok(p, roots[i], V2);
        assert_true(json_equal(json_object_get(b1, "items"), json_object_get(v2, "items")));
        json_decref(v2);
        json_decref(b1);
    }
}

static void test_aggregated_etag(void **state)
{
    ips *p = *state;
    http_resp *r;
    char etag[256], etag2[256], buf[256];
    json_t *j = NULL;
    assert_int_equal(get(p, "/apis", V2, &j, &r), 200);
    assert_non_null(http_header(r, "ETag", etag, sizeof etag));
    char *body = strdup(r->body.p);
    resp_free(r);
    json_decref(j);

    /* The ETag the client has: 304, no body, the same ETag. */
    char inm[300];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *hdrs[] = {"Accept: " V2, inm, NULL};
    r = http_call(p, "GET", NULL, NULL, hdrs, "/apis");
    assert_int_equal(r->code, 304);
    assert_int_equal(r->body.len, 0);
    assert_non_null(http_header(r, "ETag", buf, sizeof buf));
    assert_string_equal(buf, etag);
    resp_free(r);
    /* Another: the document again. */
    const char *stale[] = {"Accept: " V2, "If-None-Match: \"stale\"", NULL};
    r = http_call(p, "GET", NULL, NULL, stale, "/apis");
    assert_int_equal(r->code, 200);
    assert_string_equal(r->body.p, body);
    assert_non_null(http_header(r, "ETag", buf, sizeof buf));
    assert_string_equal(buf, etag);
    resp_free(r);
    /* The same ETag twice: the document is stable. */
    assert_int_equal(get(p, "/apis", V2, NULL, &r), 200);
    assert_non_null(http_header(r, "ETag", buf, sizeof buf));
    assert_string_equal(buf, etag);
    resp_free(r);
    /* Each document has its own: /api, and v2beta1. */
    assert_int_equal(get(p, "/api", V2, NULL, &r), 200);
    assert_non_null(http_header(r, "ETag", buf, sizeof buf));
    assert_string_not_equal(buf, etag);
    resp_free(r);
    assert_int_equal(get(p, "/apis", V2BETA1, NULL, &r), 200);
    assert_non_null(http_header(r, "ETag", buf, sizeof buf));
    assert_string_not_equal(buf, etag);
    resp_free(r);
    /* The legacy documents have none. */
    assert_int_equal(get(p, "/apis", NULL, NULL, &r), 200);
    assert_null(http_header(r, "ETag", buf, sizeof buf));
    resp_free(r);

    /* A new CRD changes the document: the old ETag no longer matches. */
    create_disco_crd(p);
    disco_probe d = {p, true};
    assert_true(ips_wait(disco_is, &d, WAIT_MS));
    r = http_call(p, "GET", NULL, NULL, hdrs, "/apis");
    assert_int_equal(r->code, 200);
    assert_non_null(http_header(r, "ETag", etag2, sizeof etag2));
    assert_true(is_etag(etag2));
    assert_string_not_equal(etag2, etag);
    assert_string_not_equal(r->body.p, body);
    resp_free(r);
    free(body);
}

static void test_negotiation(void **state)
{
    ips *p = *state;
    json_t *j = NULL;
    http_resp *r;
    /* The aggregated form only where it is served: elsewhere 406... */
    const char *paths[] = {"/api/v1", "/apis/apps", "/apis/apps/v1"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(get(p, paths[i], V2, &j, &r), 406);
        assert_string_equal(json_string_value(json_object_get(j, "reason")), "NotAcceptable");
        json_decref(j);
        resp_free(r);
        /* ...or the next acceptable entry. */
        assert_int_equal(get(p, paths[i], V2 ",application/json", &j, &r), 200);
        assert_header(r, "Content-Type", "application/json");
        assert_null(json_object_get(j, "items"));
        json_decref(j);
        resp_free(r);
    }
    /* The first acceptable entry wins. */
    j = get_ok(p, "/apis", V2 ",application/json");
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIGroupDiscoveryList");
    json_decref(j);
    j = get_ok(p, "/apis", "application/json," V2);
    assert_string_equal(json_string_value(json_object_get(j, "kind")), "APIGroupList");
    json_decref(j);
    /* Only v2 and v2beta1, the whole document ("nopeer" is the same). */
    assert_int_equal(get(p, "/apis",
                         "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
                         NULL, NULL),
                     406);
    assert_int_equal(get(p, "/apis", V2 ";profile=bogus", NULL, NULL), 406);
    assert_int_equal(get(p, "/apis", V2 ";profile=nopeer", NULL, &r), 200);
    assert_header(r, "Content-Type", V2);
    resp_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_api_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_group_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_resource_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apps_resource_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crd_group_version_comes_and_goes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregated_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregated_v2beta1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregated_etag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiation, setup, teardown),
    };
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
