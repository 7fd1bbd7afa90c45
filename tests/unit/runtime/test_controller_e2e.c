/* test_controller_e2e.c - a controller over a custom resource against a
 * real `ckube server`: For(Gizmo) + Owns(ConfigMap), the finalizer flow,
 * status writes, read-your-writes and informer metrics.
 *
 * A Gizmo (test.ckube.io/v1, spec.size) wants a ConfigMap "gizmo-<name>"
 * with data.size = spec.size, owned by it (controller ownerReference);
 * the controller reports status.observedSize, keeps a finalizer on the
 * Gizmo and deletes the ConfigMap in its cleanup. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/controller.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/metrics.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/server_util.h"

#define FINALIZER "test.ckube.io/cleanup"

static const ckube_gvr CRD = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const ckube_gvr GIZMOS = {"test.ckube.io", "v1", "gizmos"};
static const ckube_gvr CMS = {"", "v1", "configmaps"};

struct app {
    ckube_client *client;
    ckube_shared_informer *gizmos, *cms;
    pthread_mutex_t mu;
    int reconciles, cleanups, already_exists, errors;
};

static int cleanup(void *ctx, const json_t *gizmo)
{
    struct app *app = ctx;
    char cm[300];
    snprintf(cm, sizeof(cm), "gizmo-%s", ckube_obj_name(gizmo));
    ckube_status *err = NULL;
    int rc = ckube_delete(app->client, &CMS, ckube_obj_namespace(gizmo), cm, NULL, NULL, &err);
    if (rc != 0 && !ckube_is_not_found(err)) {
        ckube_status_free(err);
        return -1;
    }
    ckube_status_free(err);
    pthread_mutex_lock(&app->mu);
    app->cleanups++;
    pthread_mutex_unlock(&app->mu);
    return 0;
}

static void count(struct app *app, int *field)
{
    pthread_mutex_lock(&app->mu);
    (*field)++;
    pthread_mutex_unlock(&app->mu);
}

/* Makes the owned ConfigMap match; returns 0 or -1. */
static int ensure_configmap(struct app *app, ckube_reconcile_ctx *rc, const json_t *gizmo,
                            const char *size)
{
    const char *ns = ckube_obj_namespace(gizmo), *name = ckube_obj_name(gizmo);
    char cmname[300];
    snprintf(cmname, sizeof(cmname), "gizmo-%s", name);
    ckube_lister l = ckube_shared_informer_lister(app->cms);
    json_t *cm = ckube_lister_get(&l, ns, cmname);
    json_t *out = NULL;
    ckube_status *err = NULL;
    int res = 0;
    if (!cm) {
        json_t *want = json_pack("{s:s,s:s,s:{s:s,s:[{s:s,s:s,s:s,s:s,s:b,s:b}]},s:{s:s}}",
                                 "apiVersion", "v1", "kind", "ConfigMap", "metadata", "name",
                                 cmname, "ownerReferences", "apiVersion", "test.ckube.io/v1",
                                 "kind", "Gizmo", "name", name, "uid", ckube_obj_uid(gizmo),
                                 "controller", 1, "blockOwnerDeletion", 1, "data", "size", size);
        res = ckube_create(app->client, &CMS, ns, want, NULL, &out, &err);
        json_decref(want);
    } else {
        const char *have = json_string_value(ckube_json_get_path(cm, "data.size"));
        if (!have || strcmp(have, size) != 0) {
            char patch[128];
            snprintf(patch, sizeof(patch), "{\"data\":{\"size\":\"%s\"}}", size);
            res = ckube_patch(app->client, &CMS, ns, cmname, CKUBE_PATCH_MERGE, patch,
                              strlen(patch), NULL, &out, &err);
        }
        ckube_obj_unref(cm);
    }
    if (res != 0) {
        if (err && err->code == 409)
            count(app, &app->already_exists);
        ckube_status_free(err);
        return -1;
    }
    if (out)
        ckube_reconcile_wrote(rc, app->cms, out);
    json_decref(out);
    return 0;
}

static ckube_result reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns, const char *name)
{
    struct app *app = ctx;
    count(app, &app->reconciles);
    ckube_lister l = ckube_shared_informer_lister(app->gizmos);
    json_t *gizmo = ckube_lister_get(&l, ns, name);
    if (!gizmo)
        return ckube_result_ok();
    json_t *updated = NULL;
    ckube_status *err = NULL;
    int fr = ckube_finalizer_handle(app->client, &GIZMOS, gizmo, FINALIZER, cleanup, app, &updated,
                                    &err);
    if (fr <= 0) {
        if (updated)
            ckube_reconcile_wrote(rc, app->gizmos, updated);
        json_decref(updated);
        ckube_status_free(err);
        ckube_obj_unref(gizmo);
        if (fr < 0)
            count(app, &app->errors);
        return fr < 0 ? ckube_result_error() : ckube_result_ok();
    }
    if (updated)
        ckube_reconcile_wrote(rc, app->gizmos, updated);
    const json_t *cur = updated ? updated : gizmo;
    char size[32];
    snprintf(size, sizeof(size), "%" JSON_INTEGER_FORMAT,
             json_integer_value(ckube_json_get_path(cur, "spec.size")));
    ckube_result res = ckube_result_ok();
    if (ensure_configmap(app, rc, cur, size) != 0) {
        res = ckube_result_error();
    } else if (json_integer_value(ckube_json_get_path(cur, "status.observedSize")) !=
               json_integer_value(ckube_json_get_path(cur, "spec.size"))) {
        char patch[96];
        snprintf(patch, sizeof(patch), "{\"status\":{\"observedSize\":%s}}", size);
        ckube_write_opts wo = {.subresource = "status"};
        json_t *out = NULL;
        if (ckube_patch(app->client, &GIZMOS, ns, name, CKUBE_PATCH_MERGE, patch, strlen(patch),
                        &wo, &out, &err) != 0) {
            ckube_status_free(err);
            res = ckube_result_error();
        } else {
            ckube_reconcile_wrote(rc, app->gizmos, out);
        }
        json_decref(out);
    }
    json_decref(updated);
    ckube_obj_unref(gizmo);
    return res;
}

/* ---- polling helpers ---- */

static json_t *get(struct app *app, const ckube_gvr *r, const char *name)
{
    json_t *o = NULL;
    ckube_status *err = NULL;
    if (ckube_get(app->client, r, "default", name, &o, &err) != 0) {
        ckube_status_free(err);
        return NULL;
    }
    return o;
}

static bool wait_value(struct app *app, const ckube_gvr *r, const char *name, const char *path,
                       const char *want)
{
    for (int i = 0; i < 200; i++) {
        json_t *o = get(app, r, name);
        json_t *v = o ? ckube_json_get_path(o, path) : NULL;
        char buf[64] = "";
        if (json_is_string(v))
            snprintf(buf, sizeof(buf), "%s", json_string_value(v));
        else if (json_is_integer(v))
            snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        json_decref(o);
        if (strcmp(buf, want) == 0)
            return true;
        usleep(50000);
    }
    return false;
}

static bool wait_gone(struct app *app, const ckube_gvr *r, const char *name)
{
    for (int i = 0; i < 200; i++) {
        json_t *o = get(app, r, name);
        if (!o)
            return true;
        json_decref(o);
        usleep(50000);
    }
    return false;
}

static void test_gizmo_controller(void **state)
{
    (void)state;
    struct test_server srv = {0};
    assert_int_equal(tsu_start(&srv, "memory"), 0);
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = srv.kubeconfig};
    assert_int_equal(ckube_config_load(&ov, &cfg, &err), 0);
    cfg->qps = -1;
    struct app app = {0};
    pthread_mutex_init(&app.mu, NULL);
    app.client = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    assert_non_null(app.client);

    const char *crd =
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"gizmos.test.ckube.io\"},\"spec\":{\"group\":\"test.ckube.io\","
        "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"gizmos\",\"singular\":\"gizmo\","
        "\"kind\":\"Gizmo\"},\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
        "\"subresources\":{\"status\":{}},\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\","
        "\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{\"size\":{\"type\":"
        "\"integer\"}}},\"status\":{\"type\":\"object\",\"properties\":{\"observedSize\":{"
        "\"type\":\"integer\"}}}}}}}]}}";
    json_t *crdj = json_loads(crd, 0, NULL);
    assert_int_equal(ckube_create(app.client, &CRD, NULL, crdj, NULL, NULL, &err), 0);
    json_decref(crdj);

    ckube_metrics_registry *reg = ckube_metrics_registry_new();
    ckube_informer_factory *f = ckube_informer_factory_new(app.client, NULL);
    app.gizmos = ckube_informer_factory_for(f, &GIZMOS);
    app.cms = ckube_informer_factory_for(f, &CMS);
    ckube_informer_metrics *im1 = ckube_informer_metrics_register(reg, app.gizmos);
    ckube_informer_metrics *im2 = ckube_informer_metrics_register(reg, app.cms);
    assert_non_null(im1);
    assert_non_null(im2);

    ckube_controller_options co = {.name = "gizmo", .max_concurrent_reconciles = 2, .metrics = reg};
    ckube_controller *ctl = ckube_controller_new(&co, reconcile, &app);
    ckube_watch_spec self = {.map = CKUBE_MAP_SELF, .label = "gizmos"};
    ckube_watch_spec owns = {.map = CKUBE_MAP_OWNER,
                             .owner_group = "test.ckube.io",
                             .owner_kind = "Gizmo",
                             .label = "owned configmaps"};
    assert_int_equal(ckube_controller_watch(ctl, app.gizmos, &self), 0);
    assert_int_equal(ckube_controller_watch(ctl, app.cms, &owns), 0);
    assert_int_equal(ckube_informer_factory_start(f), 0);
    assert_int_equal(ckube_controller_start(ctl, CKUBE_SEC(30)), 0);

    /* Create: ConfigMap, finalizer and status follow. */
    json_t *g = json_pack("{s:s,s:s,s:{s:s},s:{s:i}}", "apiVersion", "test.ckube.io/v1", "kind",
                          "Gizmo", "metadata", "name", "g1", "spec", "size", 3);
    assert_int_equal(ckube_create(app.client, &GIZMOS, "default", g, NULL, NULL, &err), 0);
    json_decref(g);
    assert_true(wait_value(&app, &CMS, "gizmo-g1", "data.size", "3"));
    assert_true(wait_value(&app, &GIZMOS, "g1", "status.observedSize", "3"));
    json_t *live = get(&app, &GIZMOS, "g1");
    assert_true(ckube_has_finalizer(live, FINALIZER));
    json_decref(live);

    /* Spec change: the ConfigMap follows. */
    const char *p = "{\"spec\":{\"size\":5}}";
    assert_int_equal(ckube_patch(app.client, &GIZMOS, "default", "g1", CKUBE_PATCH_MERGE, p,
                                 strlen(p), NULL, NULL, &err),
                     0);
    assert_true(wait_value(&app, &CMS, "gizmo-g1", "data.size", "5"));
    assert_true(wait_value(&app, &GIZMOS, "g1", "status.observedSize", "5"));

    /* The owned ConfigMap deleted by hand: recreated through the owner watch. */
    assert_int_equal(ckube_delete(app.client, &CMS, "default", "gizmo-g1", NULL, NULL, &err), 0);
    assert_true(wait_value(&app, &CMS, "gizmo-g1", "data.size", "5"));

    /* Drift corrected. */
    p = "{\"data\":{\"size\":\"99\"}}";
    assert_int_equal(ckube_patch(app.client, &CMS, "default", "gizmo-g1", CKUBE_PATCH_MERGE, p,
                                 strlen(p), NULL, NULL, &err),
                     0);
    assert_true(wait_value(&app, &CMS, "gizmo-g1", "data.size", "5"));

    /* Informer metrics. */
    char *text = ckube_metrics_render(reg, NULL);
    assert_non_null(strstr(text, "ckube_informer_objects{informer=\"gizmos.test.ckube.io\"} 1"));
    assert_non_null(strstr(text, "ckube_informer_synced{informer=\"configmaps\"} 1"));
    assert_non_null(strstr(text, "ckube_informer_bytes{informer=\"gizmos.test.ckube.io\"} "));
    assert_null(strstr(text, "ckube_informer_bytes{informer=\"gizmos.test.ckube.io\"} 0\n"));
    assert_non_null(strstr(text, "controller_runtime_reconcile_total{controller=\"gizmo\","
                                 "result=\"success\"}"));
    free(text);

    /* Delete: the cleanup removes the ConfigMap, then the finalizer goes
     * and the Gizmo with it. */
    assert_int_equal(ckube_delete(app.client, &GIZMOS, "default", "g1", NULL, NULL, &err), 0);
    assert_true(wait_gone(&app, &GIZMOS, "g1"));
    assert_true(wait_gone(&app, &CMS, "gizmo-g1"));
    pthread_mutex_lock(&app.mu);
    assert_int_equal(app.cleanups, 1);
    /* Read-your-writes: the controller never re-created a ConfigMap it had
     * just created because its cache lagged. */
    assert_int_equal(app.already_exists, 0);
    fprintf(stderr, "reconciles: %d, errors: %d\n", app.reconciles, app.errors);
    pthread_mutex_unlock(&app.mu);

    ckube_controller_free(ctl);
    ckube_informer_metrics_unregister(im1);
    ckube_informer_metrics_unregister(im2);
    ckube_informer_factory_free(f);
    ckube_metrics_registry_free(reg);
    ckube_client_free(app.client);
    pthread_mutex_destroy(&app.mu);
    assert_int_equal(tsu_stop(&srv, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gizmo_controller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
