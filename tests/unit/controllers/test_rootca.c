/* test_rootca.c - the root CA certificate publisher against a real
 * `ckube server` without its own controller-manager: namespaces that
 * exist at start and new ones get a "kube-root-ca.crt" ConfigMap with
 * the CA and the description; a deleted one is made again; one changed
 * by someone is put back as upstream does (data and the description set
 * on the existing object, its other labels and annotations kept); other
 * ConfigMaps are left alone, and a Terminating namespace gets nothing.
 * Then the controller-manager's wiring: the CA of its kubeconfig when
 * none is given, and --controllers. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/informer.h>
#include <ckube/json.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controllers/controller_manager.h"
#include "controllers/rootca.h"
#include "util/server_util.h"

static const ckube_gvr NAMESPACES = {"", "v1", "namespaces"};
static const ckube_gvr CMS = {"", "v1", "configmaps"};

/* Not a certificate: the controller publishes bytes, it does not parse
 * them (the --root-ca-file flag does). */
static const char CA[] = "-----BEGIN CERTIFICATE-----\nTUlJQ2Zha2U=\n-----END CERTIFICATE-----\n";

static struct test_server srv;
static ckube_client *client;

static int group_setup(void **state)
{
    (void)state;
    srv.no_controller_manager = true;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    client = tsu_client(&srv);
    return client ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ckube_client_free(client);
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

static void create_namespace(const char *name, bool with_finalizer)
{
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", name);
    if (with_finalizer)
        json_object_set_new(json_object_get(ns, "metadata"), "finalizers",
                            json_pack("[s]", "example.com/hold"));
    ckube_status *err = NULL;
    assert_int_equal(ckube_create(client, &NAMESPACES, NULL, ns, NULL, NULL, &err), 0);
    json_decref(ns);
}

/* ns/name, or NULL when there is none. */
static json_t *get_cm(const char *ns, const char *name)
{
    json_t *obj = NULL;
    ckube_status *err = NULL;
    if (ckube_get(client, &CMS, ns, name, &obj, &err) != 0) {
        assert_true(ckube_is_not_found(err));
        ckube_status_free(err);
        return NULL;
    }
    return obj;
}

static const char *annotation(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(ckube_json_get_path(obj, "metadata.annotations"), key));
}

/* Whether obj is what the publisher makes: data exactly {"ca.crt": ca}
 * and the description annotation. */
static bool published(const json_t *obj, const char *ca)
{
    const json_t *data = json_object_get(obj, "data");
    const char *v = json_string_value(json_object_get(data, ROOTCA_KEY));
    const char *d = annotation(obj, ROOTCA_DESCRIPTION_ANNOTATION);
    return json_object_size(data) == 1 && v && !strcmp(v, ca) && d &&
           !strcmp(d, ROOTCA_DESCRIPTION);
}

/* Waits (up to 10 s) for ns/kube-root-ca.crt published with `ca` and a
 * uid other than `old_uid` (NULL: any); returns it or NULL. */
static json_t *wait_published(const char *ns, const char *ca, const char *old_uid)
{
    for (int i = 0; i < 200; i++) {
        json_t *obj = get_cm(ns, ROOTCA_CONFIGMAP);
        if (obj && published(obj, ca) && (!old_uid || strcmp(ckube_obj_uid(obj), old_uid) != 0))
            return obj;
        json_decref(obj);
        usleep(50000);
    }
    return NULL;
}

static void delete_cm(const char *ns, const char *name)
{
    ckube_status *err = NULL;
    assert_int_equal(ckube_delete(client, &CMS, ns, name, NULL, NULL, &err), 0);
}

static void put_cm(const char *ns, json_t *obj)
{
    ckube_status *err = NULL;
    int rc = ckube_update(client, &CMS, ns, obj, NULL, NULL, &err);
    if (rc != 0)
        fail_msg("update %s/%s: %s", ns, ckube_obj_name(obj),
                 err && err->message ? err->message : "?");
}

static void test_publisher(void **state)
{
    (void)state;
    create_namespace("before", false);
    /* a kube-root-ca.crt made before the controller runs, with other
     * data, a label and an annotation of its own: put back, the label
     * and the other annotation kept */
    create_namespace("mine", false);
    json_t *mine =
        json_pack("{s:s,s:s,s:{s:s,s:{s:s},s:{s:s}},s:{s:s,s:s}}", "apiVersion", "v1", "kind",
                  "ConfigMap", "metadata", "name", ROOTCA_CONFIGMAP, "labels", "owner", "me",
                  "annotations", "note", "mine", "data", "ca.crt", "stale", "extra", "x");
    ckube_status *err = NULL;
    assert_int_equal(ckube_create(client, &CMS, "mine", mine, NULL, NULL, &err), 0);
    json_decref(mine);
    /* another ConfigMap, which nobody touches */
    json_t *other = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                              "metadata", "name", "other", "data", "ca.crt", "not a CA");
    json_t *other_out = NULL;
    assert_int_equal(ckube_create(client, &CMS, "before", other, NULL, &other_out, &err), 0);
    json_decref(other);
    char *other_rv = strdup(ckube_obj_resource_version(other_out));
    json_decref(other_out);
    /* without the controller nothing makes them */
    json_t *none = get_cm("before", ROOTCA_CONFIGMAP);
    assert_null(none);

    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    rootca *r = rootca_new(client, f, &(rootca_opts){.ca = CA, .ca_len = strlen(CA)});
    assert_non_null(r);
    assert_int_equal(ckube_informer_factory_start(f), 0);
    assert_int_equal(rootca_start(r), 0);
    assert_int_equal(rootca_start(r), -1); /* only once */

    const char *existing[] = {"default", "kube-system", "kube-public", "kube-node-lease", "before"};
    for (size_t i = 0; i < sizeof existing / sizeof *existing; i++) {
        json_t *obj = wait_published(existing[i], CA, NULL);
        if (!obj)
            fail_msg("no kube-root-ca.crt in %s", existing[i]);
        json_decref(obj);
    }

    /* the stale one: updated in place (same uid), data replaced whole */
    json_t *m = wait_published("mine", CA, NULL);
    assert_non_null(m);
    assert_string_equal(json_string_value(ckube_json_get_path(m, "metadata.labels.owner")), "me");
    assert_string_equal(annotation(m, "note"), "mine");
    json_decref(m);

    /* a new namespace */
    create_namespace("after", false);
    json_t *c1 = wait_published("after", CA, NULL);
    assert_non_null(c1);
    char *uid1 = strdup(ckube_obj_uid(c1));
    json_decref(c1);

    /* deleted: made again (a new object) */
    delete_cm("after", ROOTCA_CONFIGMAP);
    json_t *c2 = wait_published("after", CA, uid1);
    assert_non_null(c2);
    char *uid2 = strdup(ckube_obj_uid(c2));

    /* changed data (and a label): put back on the same object, the label
     * kept */
    json_object_set_new(json_object_get(c2, "data"), ROOTCA_KEY, json_string("tampered"));
    json_object_set_new(ckube_json_object_ensure(json_object_get(c2, "metadata"), "labels"), "team",
                        json_string("a"));
    put_cm("after", c2);
    json_decref(c2);
    json_t *c3 = wait_published("after", CA, NULL);
    assert_non_null(c3);
    assert_string_equal(ckube_obj_uid(c3), uid2);
    assert_string_equal(json_string_value(ckube_json_get_path(c3, "metadata.labels.team")), "a");

    /* the description removed: set again */
    json_object_del(json_object_get(c3, "metadata"), "annotations");
    put_cm("after", c3);
    json_decref(c3);
    json_t *c4 = wait_published("after", CA, NULL);
    assert_non_null(c4);
    assert_string_equal(ckube_obj_uid(c4), uid2);

    /* upstream only asks for a non-empty description: another text with
     * the right data stays as it is */
    json_object_set_new(ckube_json_get_path(c4, "metadata.annotations"),
                        ROOTCA_DESCRIPTION_ANNOTATION, json_string("ours"));
    put_cm("after", c4);
    json_decref(c4);
    usleep(1000000);
    json_t *c5 = get_cm("after", ROOTCA_CONFIGMAP);
    assert_non_null(c5);
    assert_string_equal(annotation(c5, ROOTCA_DESCRIPTION_ANNOTATION), "ours");
    json_decref(c5);

    /* other ConfigMaps are left alone */
    json_t *o = get_cm("before", "other");
    assert_non_null(o);
    assert_string_equal(ckube_obj_resource_version(o), other_rv);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "data"), "ca.crt")),
                        "not a CA");
    json_decref(o);

    /* a Terminating namespace (held by a finalizer nobody removes) gets
     * nothing back */
    create_namespace("going", true);
    json_t *g = wait_published("going", CA, NULL);
    assert_non_null(g);
    json_decref(g);
    assert_int_equal(ckube_delete(client, &NAMESPACES, NULL, "going", NULL, NULL, &err), 0);
    delete_cm("going", ROOTCA_CONFIGMAP);
    usleep(1000000);
    json_t *back = get_cm("going", ROOTCA_CONFIGMAP);
    assert_null(back);

    rootca_stop(r);
    rootca_stop(r); /* idempotent */
    /* stopped: a deletion is not answered any more */
    delete_cm("before", ROOTCA_CONFIGMAP);
    usleep(500000);
    json_t *after_stop = get_cm("before", ROOTCA_CONFIGMAP);
    assert_null(after_stop);

    rootca_free(r);
    ckube_informer_factory_free(f);
    free(other_rv);
    free(uid1);
    free(uid2);
}

/* The whole of `path` as a string (malloc'd). */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    char *buf = calloc(1, 65536);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65535, fp);
    fclose(fp);
    assert_true(n > 0);
    return buf;
}

static ckube_config *server_config(void)
{
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = srv.kubeconfig};
    assert_int_equal(ckube_config_load(&ov, &cfg, &err), 0);
    cfg->qps = -1;
    return cfg;
}

/* obj with only root-ca-cert-publisher and no CA of its own takes its
 * kubeconfig's (the server's cluster CA), and replaces what the test
 * above published with the other CA. */
static void test_controller_manager_ca(void **state)
{
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/data/pki/ca.crt", srv.dir);
    char *ca = slurp(path);
    ckube_config *cfg = server_config();
    assert_true(cfg->ca_data || cfg->ca_file);
    cm_opts o = {.config = cfg,
                 .controllers = "root-ca-cert-publisher",
                 .metrics_bind_address = "0",
                 .health_bind_address = "0"};
    char *err = NULL;
    cm *c = cm_new(&o, &err);
    assert_null(err);
    assert_non_null(c);
    assert_int_equal(cm_start(c), 0);
    const char *nss[] = {"default", "after", "mine"};
    for (size_t i = 0; i < sizeof nss / sizeof *nss; i++) {
        json_t *obj = wait_published(nss[i], ca, NULL);
        if (!obj)
            fail_msg("kube-root-ca.crt in %s does not hold %s", nss[i], path);
        json_decref(obj);
    }
    /* and a given CA wins over the kubeconfig's */
    cm_free(c);
    o.root_ca = CA;
    o.root_ca_len = strlen(CA);
    c = cm_new(&o, &err);
    assert_non_null(c);
    assert_int_equal(cm_start(c), 0);
    json_t *obj = wait_published("default", CA, NULL);
    assert_non_null(obj);
    json_decref(obj);
    cm_free(c);

    /* no CA at all: the controller-manager starts without it */
    free(cfg->ca_file);
    free(cfg->ca_data);
    cfg->ca_file = cfg->ca_data = NULL;
    cfg->ca_data_len = 0;
    cfg->insecure_skip_tls_verify = true;
    o.root_ca = NULL;
    o.root_ca_len = 0;
    c = cm_new(&o, &err);
    assert_null(err);
    assert_non_null(c);
    cm_free(c);

    ckube_config_free(cfg);
    free(ca);
}

static void test_controllers_flag(void **state)
{
    (void)state;
    assert_true(cm_controller_enabled(NULL, "root-ca-cert-publisher"));
    assert_true(cm_controller_enabled("*", "root-ca-cert-publisher"));
    assert_false(cm_controller_enabled("*,-root-ca-cert-publisher", "root-ca-cert-publisher"));
    assert_true(cm_controller_enabled("*,-root-ca-cert-publisher", "serviceaccount"));
    assert_false(cm_controller_enabled("serviceaccount", "root-ca-cert-publisher"));
    assert_non_null(strstr(CM_CONTROLLERS, "root-ca-cert-publisher"));
    ckube_config *cfg = server_config();
    cm_opts o = {.config = cfg,
                 .controllers = "-root-ca-cert-publisher",
                 .metrics_bind_address = "0",
                 .health_bind_address = "0"};
    char *err = NULL;
    cm *c = cm_new(&o, &err);
    assert_non_null(c);
    cm_free(c);
    o.controllers = "root-ca-publisher";
    assert_null(cm_new(&o, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "unknown controller \"root-ca-publisher\""));
    free(err);
    ckube_config_free(cfg);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    rootca_opts o = {.ca = CA, .ca_len = strlen(CA)};
    assert_null(rootca_new(NULL, f, &o));
    assert_null(rootca_new(client, NULL, &o));
    assert_null(rootca_new(client, f, NULL));
    assert_null(rootca_new(client, f, &(rootca_opts){.ca = NULL, .ca_len = 3}));
    assert_null(rootca_new(client, f, &(rootca_opts){.ca = CA, .ca_len = 0}));
    /* not text: a NUL inside, or bytes that are not UTF-8 */
    assert_null(rootca_new(client, f, &(rootca_opts){.ca = "a\0b", .ca_len = 3}));
    assert_null(rootca_new(client, f, &(rootca_opts){.ca = "\xff\xfe", .ca_len = 2}));
    assert_int_equal(rootca_start(NULL), -1);
    rootca_stop(NULL);
    rootca_free(NULL);
    ckube_informer_factory_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publisher),
        cmocka_unit_test(test_controller_manager_ca),
        cmocka_unit_test(test_controllers_flag),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
