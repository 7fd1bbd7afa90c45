/* test_namespace_controller.c - the namespace lifecycle controller against
 * a real `ckube server`: content of every kind (custom resources too) is
 * deleted, the namespace finalized; content held by a finalizer keeps the
 * namespace Terminating with upstream's conditions; only our token is
 * removed from spec.finalizers. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/informer.h>
#include <ckube/json.h>

#include "controllers/namespace.h"

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
static const ckube_gvr CMS = {"", "v1", "configmaps"};
static const ckube_gvr SECRETS = {"", "v1", "secrets"};
static const ckube_gvr NSS = {"", "v1", "namespaces"};

struct env {
    struct test_server srv;
    ckube_client *client;
    ckube_informer_factory *factory;
    nsctl *ctl;
};

static struct env E;

static int setup(void **state)
{
    memset(&E, 0, sizeof(E));
    /* this test's namespace controller only (the child's would run one
     * too, and root-ca-cert-publisher add a ConfigMap to each namespace) */
    E.srv.no_controller_manager = true;
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
    E.factory = ckube_informer_factory_new(E.client, NULL);
    nsctl_opts o = {.content_requeue_ns = CKUBE_MS(200), .finalizer_requeue_ns = CKUBE_MS(300)};
    E.ctl = nsctl_new(E.client, E.factory, &o);
    if (!E.ctl || ckube_informer_factory_start(E.factory) != 0 || nsctl_start(E.ctl) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    nsctl_free(E.ctl);
    ckube_informer_factory_free(E.factory);
    ckube_client_free(E.client);
    return tsu_stop(&E.srv, SIGTERM) == 0 ? 0 : -1;
}

/* ---- helpers ---- */

static void create(const ckube_gvr *r, const char *ns, const char *json)
{
    json_error_t je;
    json_t *obj = json_loads(json, 0, &je);
    assert_non_null(obj);
    ckube_status *err = NULL;
    int rc = ckube_create(E.client, r, ns, obj, NULL, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "create failed: %s\n", err && err->message ? err->message : "?");
    assert_int_equal(rc, 0);
    json_decref(obj);
}

static json_t *get(const ckube_gvr *r, const char *ns, const char *name)
{
    json_t *o = NULL;
    ckube_status *err = NULL;
    if (ckube_get(E.client, r, ns, name, &o, &err) != 0) {
        assert_true(ckube_is_not_found(err));
        ckube_status_free(err);
        return NULL;
    }
    return o;
}

static size_t count(const ckube_gvr *r, const char *ns)
{
    json_t *l = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_list_all(E.client, r, ns, NULL, &l, &err), 0);
    size_t n = json_array_size(json_object_get(l, "items"));
    json_decref(l);
    return n;
}

static bool wait_gone(const ckube_gvr *r, const char *ns, const char *name, int seconds)
{
    for (int i = 0; i < seconds * 20; i++) {
        json_t *o = get(r, ns, name);
        if (!o)
            return true;
        json_decref(o);
        usleep(50000);
    }
    return false;
}

/* The condition of `type` of namespace `name`, copied (caller decrefs). */
static json_t *condition(const char *name, const char *type)
{
    json_t *ns = get(&NSS, NULL, name);
    json_t *found = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(ns, "status.conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            found = json_deep_copy(c);
    }
    json_decref(ns);
    return found;
}

static bool wait_condition(const char *ns, const char *type, const char *status, const char *reason,
                           const char *message_part)
{
    for (int i = 0; i < 400; i++) {
        json_t *c = condition(ns, type);
        bool ok = c && strcmp(json_string_value(json_object_get(c, "status")), status) == 0 &&
                  strcmp(json_string_value(json_object_get(c, "reason")), reason) == 0 &&
                  (!message_part ||
                   strstr(json_string_value(json_object_get(c, "message")), message_part));
        if (!ok && i == 399) {
            char *d = c ? json_dumps(c, JSON_COMPACT) : NULL;
            fprintf(stderr, "condition %s: %s\n", type, d ? d : "(none)");
            free(d);
        }
        json_decref(c);
        if (ok)
            return true;
        usleep(50000);
    }
    return false;
}

static void delete_ns(const char *name)
{
    ckube_status *err = NULL;
    assert_int_equal(ckube_delete(E.client, &NSS, NULL, name, NULL, NULL, &err), 0);
}

static void create_ns(const char *name, const char *finalizers)
{
    char buf[512];
    if (finalizers)
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"},"
                 "\"spec\":{\"finalizers\":%s}}",
                 name, finalizers);
    else
        snprintf(buf, sizeof(buf),
                 "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
                 name);
    create(&NSS, NULL, buf);
}

static void create_cm(const char *ns, const char *name, const char *finalizer)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"%s%s%s},"
             "\"data\":{\"k\":\"v\"}}",
             name, finalizer ? ",\"finalizers\":[\"" : "", finalizer ? finalizer : "",
             finalizer ? "\"]" : "");
    create(&CMS, ns, buf);
}

static void create_secret(const char *ns, const char *name)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"%s\"},"
             "\"stringData\":{\"k\":\"v\"}}",
             name);
    create(&SECRETS, ns, buf);
}

static void create_gizmo_crd(void)
{
    create(&CRD, NULL,
           "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
           "\"metadata\":{\"name\":\"gizmos.test.ckube.io\"},\"spec\":{\"group\":\"test.ckube.io\","
           "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"gizmos\",\"singular\":\"gizmo\","
           "\"kind\":\"Gizmo\"},\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
           "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\","
           "\"x-kubernetes-preserve-unknown-fields\":true}}}]}}");
}

/* ---- tests ---- */

static void test_deletes_all_content_then_namespace(void **state)
{
    create_gizmo_crd();
    create_ns("doomed", NULL);
    create_ns("bystander", NULL);
    create_cm("doomed", "a", NULL);
    create_cm("doomed", "b", NULL);
    create_secret("doomed", "s");
    create(&GIZMOS, "doomed",
           "{\"apiVersion\":\"test.ckube.io/v1\",\"kind\":\"Gizmo\",\"metadata\":{\"name\":\"g\"},"
           "\"spec\":{\"size\":1}}");
    create_cm("bystander", "a", NULL);
    assert_int_equal(count(&CMS, "doomed"), 2);

    /* A live namespace is left alone. */
    usleep(300000);
    assert_int_equal(count(&CMS, "doomed"), 2);

    delete_ns("doomed");
    assert_true(wait_gone(&NSS, NULL, "doomed", 20));
    assert_int_equal(count(&CMS, "doomed"), 0);
    assert_int_equal(count(&SECRETS, "doomed"), 0);
    assert_int_equal(count(&GIZMOS, "doomed"), 0);
    /* Nothing outside the namespace was touched. */
    json_t *o = get(&CMS, "bystander", "a");
    assert_non_null(o);
    json_decref(o);
    o = get(&NSS, NULL, "bystander");
    assert_non_null(o);
    assert_null(ckube_json_get_path(o, "metadata.deletionTimestamp"));
    json_decref(o);
}

static void test_finalizer_keeps_namespace_terminating(void **state)
{
    create_ns("held", NULL);
    create_cm("held", "keep", "test.ckube.io/hold");
    create_cm("held", "plain", NULL);
    create_secret("held", "s");
    delete_ns("held");

    assert_true(wait_condition("held", "NamespaceFinalizersRemaining", "True",
                               "SomeFinalizersRemain",
                               "Some content in the namespace has finalizers remaining: "
                               "test.ckube.io/hold in 1 resource instances"));
    assert_true(wait_condition("held", "NamespaceContentRemaining", "True", "SomeResourcesRemain",
                               "Some resources are remaining: configmaps. has 1 resource "
                               "instances"));
    assert_true(wait_condition("held", "NamespaceDeletionDiscoveryFailure", "False",
                               "ResourcesDiscovered", "All resources successfully discovered"));
    assert_true(
        wait_condition("held", "NamespaceDeletionContentFailure", "False", "ContentDeleted", NULL));
    assert_true(wait_condition("held", "NamespaceDeletionGroupVersionParsingFailure", "False",
                               "ParsedGroupVersions", NULL));
    /* Everything without a finalizer is gone; the held one is deleting. */
    assert_true(wait_gone(&CMS, "held", "plain", 5));
    assert_true(wait_gone(&SECRETS, "held", "s", 5));
    json_t *keep = get(&CMS, "held", "keep");
    assert_non_null(keep);
    assert_non_null(ckube_json_get_path(keep, "metadata.deletionTimestamp"));
    json_decref(keep);

    /* Several passes later the namespace is still Terminating. */
    usleep(1000000);
    json_t *ns = get(&NSS, NULL, "held");
    assert_non_null(ns);
    assert_string_equal(json_string_value(ckube_json_get_path(ns, "status.phase")), "Terminating");
    assert_string_equal(json_string_value(ckube_json_get_path(ns, "spec.finalizers[0]")),
                        "kubernetes");
    json_decref(ns);

    /* Creating in a Terminating namespace is refused (server side). */
    json_t *cm = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata",
                           "name", "late");
    ckube_status *err = NULL;
    assert_int_equal(ckube_create(E.client, &CMS, "held", cm, NULL, NULL, &err), -1);
    assert_true(ckube_status_is(err, 403));
    ckube_status_free(err);
    err = NULL;
    json_decref(cm);

    /* The finalizer goes: so does the ConfigMap, then the namespace. */
    const char *p = "{\"metadata\":{\"finalizers\":null}}";
    assert_int_equal(ckube_patch(E.client, &CMS, "held", "keep", CKUBE_PATCH_MERGE, p, strlen(p),
                                 NULL, NULL, &err),
                     0);
    assert_true(wait_gone(&NSS, NULL, "held", 20));
}

static void test_only_our_finalizer_is_removed(void **state)
{
    create_ns("shared", "[\"kubernetes\",\"example.com/other\"]");
    create_cm("shared", "c", NULL);
    delete_ns("shared");
    /* Content removed, our token gone, the other one kept. */
    bool ok = false;
    for (int i = 0; i < 400 && !ok; i++) {
        json_t *ns = get(&NSS, NULL, "shared");
        assert_non_null(ns);
        json_t *fin = ckube_json_get_path(ns, "spec.finalizers");
        ok = json_array_size(fin) == 1 &&
             strcmp(json_string_value(json_array_get(fin, 0)), "example.com/other") == 0;
        json_decref(ns);
        if (!ok)
            usleep(50000);
    }
    assert_true(ok);
    assert_int_equal(count(&CMS, "shared"), 0);
    assert_true(wait_condition("shared", "NamespaceContentRemaining", "False", "ContentRemoved",
                               "All content successfully removed"));
    assert_true(wait_condition("shared", "NamespaceFinalizersRemaining", "False",
                               "ContentHasNoFinalizers", NULL));

    /* Whoever owns the other token finalizes it: the namespace goes. */
    json_t *ns = get(&NSS, NULL, "shared");
    json_object_set_new(json_object_get(ns, "spec"), "finalizers", json_array());
    ckube_write_opts wo = {.subresource = "finalize"};
    ckube_status *err = NULL;
    assert_int_equal(ckube_update(E.client, &NSS, NULL, ns, &wo, NULL, &err), 0);
    json_decref(ns);
    assert_true(wait_gone(&NSS, NULL, "shared", 10));
}

static void test_bad_arguments(void **state)
{
    assert_null(nsctl_new(NULL, E.factory, NULL));
    assert_null(nsctl_new(E.client, NULL, NULL));
    assert_int_equal(nsctl_start(NULL), -1);
    nsctl_stop(NULL);
    nsctl_free(NULL);
    /* Started twice: refused. */
    assert_int_equal(nsctl_start(E.ctl), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deletes_all_content_then_namespace),
        cmocka_unit_test(test_finalizer_keeps_namespace_terminating),
        cmocka_unit_test(test_only_our_finalizer_is_removed),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
