/* test_gc.c - the garbage collector against a real `ckube server`:
 * background collection, dangling references next to a live owner, a
 * custom resource owner (CRD created after the collector started), an
 * owner not yet known to any monitor, the orphan and foreground finalizer
 * flows, and a reused name with a new uid. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/controller.h>
#include <ckube/json.h>

#include "controllers/gc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/server_util.h"

static const ckube_gvr CRD = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const ckube_gvr GIZMOS = {"test.ckube.io", "v1", "gizmos"};
static const ckube_gvr WIDGETS = {"test.ckube.io", "v1", "widgets"};
static const ckube_gvr CMS = {"", "v1", "configmaps"};
static const ckube_gvr SECRETS = {"", "v1", "secrets"};

#define NS "default"

struct env {
    struct test_server srv;
    ckube_client *client;
    gc *g;
};

static struct env E;

static int setup(void **state)
{
    memset(&E, 0, sizeof(E));
    if (tsu_start(&E.srv, "memory") != 0)
        return -1;
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = E.srv.kubeconfig};
    if (ckube_config_load(&ov, &cfg, &err) != 0)
        return -1;
    cfg->qps = -1;
    E.client = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    if (!E.client)
        return -1;
    gc_opts o = {.delete_workers = 2};
    E.g = gc_new(E.client, &o);
    if (!E.g || gc_start(E.g) != 0)
        return -1;
    for (int i = 0; i < 600 && !gc_ready(E.g); i++)
        usleep(50000);
    return gc_ready(E.g) ? 0 : -1;
}

static int teardown(void **state)
{
    gc_free(E.g);
    ckube_client_free(E.client);
    return tsu_stop(&E.srv, SIGTERM) == 0 ? 0 : -1;
}

/* ---- helpers ---- */

/* Creates obj (taken) and returns the stored object's uid (malloc'd). */
static char *create(const ckube_gvr *r, json_t *obj)
{
    assert_non_null(obj);
    json_t *out = NULL;
    ckube_status *err = NULL;
    const char *ns = ckube_obj_namespace(obj);
    int rc = ckube_create(E.client, r, ns ? ns : NS, obj, NULL, &out, &err);
    if (rc != 0)
        fprintf(stderr, "create failed: %s\n", err && err->message ? err->message : "?");
    assert_int_equal(rc, 0);
    json_decref(obj);
    char *uid = strdup(ckube_obj_uid(out));
    json_decref(out);
    return uid;
}

/* A ConfigMap, with finalizers (a JSON array text) or NULL. */
static char *create_cm(const char *name, const char *finalizers, json_t *owner_refs)
{
    json_t *obj = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                            "metadata", "name", name, "data", "k", "v");
    json_t *meta = json_object_get(obj, "metadata");
    if (finalizers)
        json_object_set_new(meta, "finalizers", json_loads(finalizers, 0, NULL));
    if (owner_refs)
        json_object_set_new(meta, "ownerReferences", owner_refs);
    return create(&CMS, obj);
}

/* A Secret owned through owner_refs (taken), with an optional finalizer. */
static char *create_secret(const char *name, json_t *owner_refs, const char *finalizer)
{
    json_t *obj =
        json_pack("{s:s,s:s,s:{s:s,s:o},s:{s:s}}", "apiVersion", "v1", "kind", "Secret", "metadata",
                  "name", name, "ownerReferences", owner_refs, "stringData", "k", "v");
    if (finalizer)
        json_object_set_new(json_object_get(obj, "metadata"), "finalizers",
                            json_pack("[s]", finalizer));
    return create(&SECRETS, obj);
}

static json_t *ref(const char *api_version, const char *kind, const char *name, const char *uid,
                   bool block)
{
    json_t *r = json_pack("{s:s,s:s,s:s,s:s}", "apiVersion", api_version, "kind", kind, "name",
                          name, "uid", uid);
    if (block)
        json_object_set_new(r, "blockOwnerDeletion", json_true());
    return r;
}

static json_t *refs1(json_t *r)
{
    json_t *a = json_array();
    json_array_append_new(a, r);
    return a;
}

static json_t *get(const ckube_gvr *r, const char *name)
{
    json_t *o = NULL;
    ckube_status *err = NULL;
    if (ckube_get(E.client, r, NS, name, &o, &err) != 0) {
        assert_true(ckube_is_not_found(err));
        ckube_status_free(err);
        return NULL;
    }
    return o;
}

static bool exists(const ckube_gvr *r, const char *name)
{
    json_t *o = get(r, name);
    json_decref(o);
    return o != NULL;
}

static bool wait_gone(const ckube_gvr *r, const char *name, int seconds)
{
    for (int i = 0; i < seconds * 20; i++) {
        if (!exists(r, name))
            return true;
        usleep(50000);
    }
    fprintf(stderr, "%s %s still exists\n", r->resource, name);
    return false;
}

static void del(const ckube_gvr *r, const char *name, const char *policy)
{
    ckube_delete_opts o = {.propagation_policy = policy};
    ckube_status *err = NULL;
    assert_int_equal(ckube_delete(E.client, r, NS, name, &o, NULL, &err), 0);
}

static size_t nrefs(const ckube_gvr *r, const char *name)
{
    json_t *o = get(r, name);
    assert_non_null(o);
    size_t n = json_array_size(ckube_json_get_path(o, "metadata.ownerReferences"));
    json_decref(o);
    return n;
}

static void drop_finalizers(const ckube_gvr *r, const char *name)
{
    const char *p = "{\"metadata\":{\"finalizers\":null}}";
    ckube_status *err = NULL;
    assert_int_equal(
        ckube_patch(E.client, r, NS, name, CKUBE_PATCH_MERGE, p, strlen(p), NULL, NULL, &err), 0);
}

static void create_crd(const char *plural, const char *kind)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
             "\"metadata\":{\"name\":\"%s.test.ckube.io\"},\"spec\":{\"group\":\"test.ckube.io\","
             "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"%s\",\"kind\":\"%s\"},"
             "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
             "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\","
             "\"x-kubernetes-preserve-unknown-fields\":true}}}]}}",
             plural, plural, kind);
    json_t *crd = json_loads(buf, 0, NULL);
    ckube_status *err = NULL;
    assert_int_equal(ckube_create(E.client, &CRD, NULL, crd, NULL, NULL, &err), 0);
    json_decref(crd);
}

static char *create_custom(const ckube_gvr *r, const char *kind, const char *name)
{
    return create(r, json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "test.ckube.io/v1", "kind", kind,
                               "metadata", "name", name));
}

/* ---- tests ---- */

static void test_background(void **state)
{
    char *owner = create_cm("bg-owner", NULL, NULL);
    char *other = create_cm("bg-other", NULL, NULL);
    free(create_secret("bg-1", refs1(ref("v1", "ConfigMap", "bg-owner", owner, false)), NULL));
    free(create_secret("bg-2", refs1(ref("v1", "ConfigMap", "bg-owner", owner, true)), NULL));
    /* Two owners, one stays: survives, minus the dangling reference. */
    json_t *two = json_array();
    json_array_append_new(two, ref("v1", "ConfigMap", "bg-owner", owner, false));
    json_array_append_new(two, ref("v1", "ConfigMap", "bg-other", other, false));
    free(create_secret("bg-3", two, NULL));

    /* Owners alive: nothing happens. */
    usleep(500000);
    assert_true(exists(&SECRETS, "bg-1"));
    assert_true(exists(&SECRETS, "bg-2"));

    del(&CMS, "bg-owner", NULL);
    assert_true(wait_gone(&SECRETS, "bg-1", 10));
    assert_true(wait_gone(&SECRETS, "bg-2", 10));
    bool ok = false;
    for (int i = 0; i < 200 && !ok; i++) {
        ok = nrefs(&SECRETS, "bg-3") == 1;
        if (!ok)
            usleep(50000);
    }
    assert_true(ok);
    json_t *s3 = get(&SECRETS, "bg-3");
    assert_string_equal(
        json_string_value(ckube_json_get_path(s3, "metadata.ownerReferences[0].uid")), other);
    json_decref(s3);
    free(owner);
    free(other);
}

static void test_custom_resource_owner(void **state)
{
    /* The CRD appears after the collector started: it must notice. */
    create_crd("gizmos", "Gizmo");
    char *g1 = create_custom(&GIZMOS, "Gizmo", "g1");
    char *g2 = create_custom(&GIZMOS, "Gizmo", "g2");
    free(create_cm("cr-dep-1", NULL, refs1(ref("test.ckube.io/v1", "Gizmo", "g1", g1, true))));
    free(create_cm("cr-dep-2", NULL, refs1(ref("test.ckube.io/v1", "Gizmo", "g2", g2, true))));
    /* A reference to a kind no server serves: never collected. */
    free(create_cm("cr-unknown", NULL,
                   refs1(ref("nope.example.com/v1", "Nothing", "x", "0000-1111", false))));
    /* Wait for a monitor of gizmos to see g1's uid. */
    bool seen = false;
    for (int i = 0; i < 200 && !seen; i++) {
        seen = gc_monitor_count(E.g) > 0 && gc_graph_size(E.g) > 0;
        usleep(50000);
    }
    del(&GIZMOS, "g1", NULL);
    assert_true(wait_gone(&CMS, "cr-dep-1", 15));
    usleep(500000);
    assert_true(exists(&CMS, "cr-dep-2"));
    assert_true(exists(&CMS, "cr-unknown"));
    del(&GIZMOS, "g2", "Background");
    assert_true(wait_gone(&CMS, "cr-dep-2", 15));
    assert_true(exists(&CMS, "cr-unknown"));
    free(g1);
    free(g2);
}

static void test_owner_not_yet_in_cache(void **state)
{
    /* The owner's kind is brand new: no monitor has it when the dependent
     * shows up. The collector must ask the server, not delete. */
    create_crd("widgets", "Widget");
    char *w = create_custom(&WIDGETS, "Widget", "w1");
    free(create_cm("w-dep", NULL, refs1(ref("test.ckube.io/v1", "Widget", "w1", w, false))));
    for (int i = 0; i < 30; i++) {
        assert_true(exists(&CMS, "w-dep"));
        usleep(100000);
    }
    del(&WIDGETS, "w1", NULL);
    assert_true(wait_gone(&CMS, "w-dep", 15));
    free(w);
}

static void test_orphan(void **state)
{
    char *owner = create_cm("or-owner", "[\"orphan\"]", NULL);
    free(create_secret("or-1", refs1(ref("v1", "ConfigMap", "or-owner", owner, true)), NULL));
    free(create_secret("or-2", refs1(ref("v1", "ConfigMap", "or-owner", owner, false)), NULL));
    usleep(300000);
    /* The server keeps the owner for its "orphan" finalizer; the
     * collector removes the references, then the finalizer. */
    del(&CMS, "or-owner", NULL);
    assert_true(wait_gone(&CMS, "or-owner", 15));
    assert_true(exists(&SECRETS, "or-1"));
    assert_true(exists(&SECRETS, "or-2"));
    assert_int_equal(nrefs(&SECRETS, "or-1"), 0);
    assert_int_equal(nrefs(&SECRETS, "or-2"), 0);
    /* And they stay. */
    usleep(500000);
    assert_true(exists(&SECRETS, "or-1"));
    assert_true(exists(&SECRETS, "or-2"));
    free(owner);
}

static void test_foreground(void **state)
{
    char *owner = create_cm("fg-owner", "[\"foregroundDeletion\"]", NULL);
    /* fg-1 blocks and is itself held by a finalizer; fg-2 blocks; fg-3
     * does not block. */
    free(create_secret("fg-1", refs1(ref("v1", "ConfigMap", "fg-owner", owner, true)),
                       "test.ckube.io/hold"));
    free(create_secret("fg-2", refs1(ref("v1", "ConfigMap", "fg-owner", owner, true)), NULL));
    free(create_secret("fg-3", refs1(ref("v1", "ConfigMap", "fg-owner", owner, false)), NULL));
    usleep(300000);
    del(&CMS, "fg-owner", NULL);
    /* Every dependent is deleted... */
    assert_true(wait_gone(&SECRETS, "fg-2", 10));
    assert_true(wait_gone(&SECRETS, "fg-3", 10));
    bool deleting = false;
    for (int i = 0; i < 200 && !deleting; i++) {
        json_t *s = get(&SECRETS, "fg-1");
        deleting = s && ckube_json_get_path(s, "metadata.deletionTimestamp");
        json_decref(s);
        if (!deleting)
            usleep(50000);
    }
    assert_true(deleting);
    /* ...and the owner waits for the blocking one still there. */
    usleep(1000000);
    json_t *o = get(&CMS, "fg-owner");
    assert_non_null(o);
    assert_true(ckube_has_finalizer(o, "foregroundDeletion"));
    json_decref(o);
    /* The last blocking dependent goes: so does the owner. */
    drop_finalizers(&SECRETS, "fg-1");
    assert_true(wait_gone(&SECRETS, "fg-1", 10));
    assert_true(wait_gone(&CMS, "fg-owner", 15));
    free(owner);
}

static void test_reused_name(void **state)
{
    char *old = create_cm("reused", NULL, NULL);
    del(&CMS, "reused", NULL);
    assert_true(wait_gone(&CMS, "reused", 5));
    char *cur = create_cm("reused", NULL, NULL);
    assert_string_not_equal(old, cur);
    free(create_secret("re-old", refs1(ref("v1", "ConfigMap", "reused", old, false)), NULL));
    free(create_secret("re-new", refs1(ref("v1", "ConfigMap", "reused", cur, false)), NULL));
    assert_true(wait_gone(&SECRETS, "re-old", 10));
    usleep(500000);
    assert_true(exists(&SECRETS, "re-new"));
    assert_true(exists(&CMS, "reused"));
    free(old);
    free(cur);
}

static void test_bad_arguments(void **state)
{
    assert_null(gc_new(NULL, NULL));
    assert_int_equal(gc_start(NULL), -1);
    assert_int_equal(gc_start(E.g), -1); /* already started */
    gc_stop(NULL);
    gc_free(NULL);
    /* A collector stopped before it ever synced shuts down cleanly. */
    gc *g = gc_new(E.client, NULL);
    assert_non_null(g);
    assert_int_equal(gc_start(g), 0);
    gc_stop(g);
    gc_stop(g);
    gc_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_background),
        cmocka_unit_test(test_custom_resource_owner),
        cmocka_unit_test(test_owner_not_yet_in_cache),
        cmocka_unit_test(test_orphan),
        cmocka_unit_test(test_foreground),
        cmocka_unit_test(test_reused_name),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
