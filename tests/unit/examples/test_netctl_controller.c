/* The Network controller (examples/network-controller/controller.c)
 * against a real `ckube server`, with a backend whose failures the test
 * controls: a backend error is reported in status (Failed, BackendError)
 * and in a Warning event carrying the backend's message, retried, and
 * cleared once the backend recovers; a real network without a Network
 * (an orphan) is removed by the orphan sweep. The happy path and the
 * linux-bridge backend are driven end to end by
 * tests/e2e/test_network_controller_*.sh. */
#include "controller.h"

#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/events.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/yaml.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/server_util.h"

static const ckube_gvr CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const ckube_gvr EVENTS = {"", "v1", "events"};

static struct test_server srv;
static ckube_client *client;

/* A memory backend whose apply fails while `failing` is set. */
typedef struct flaky {
    netctl_backend base;
    netctl_backend *inner;
    atomic_bool failing;
    atomic_int applies;
} flaky;

static int fl_observe(netctl_backend *b, const char *key, netctl_actual *out, char **err)
{
    return netctl_backend_observe(((flaky *)b)->inner, key, out, err);
}
static int fl_apply(netctl_backend *b, const char *key, const netctl_want *want, char **err)
{
    flaky *f = (flaky *)b;
    atomic_fetch_add(&f->applies, 1);
    if (atomic_load(&f->failing)) {
        *err = strdup("injected: device or resource busy");
        return -1;
    }
    return netctl_backend_apply(f->inner, key, want, err);
}
static int fl_remove(netctl_backend *b, const char *key, char **err)
{
    return netctl_backend_remove(((flaky *)b)->inner, key, err);
}
static int fl_list(netctl_backend *b, char ***keys, size_t *n, char **err)
{
    return netctl_backend_list(((flaky *)b)->inner, keys, n, err);
}
static void fl_free(netctl_backend *b)
{
    (void)b;
}
static const netctl_backend_ops flaky_ops = {"flaky",   fl_observe, fl_apply,
                                             fl_remove, fl_list,    fl_free};

static int group_setup(void **state)
{
    (void)state;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    client = tsu_client(&srv);
    if (!client)
        return -1;
    /* The CRD the README applies. */
    char path[1024];
    snprintf(path, sizeof(path), "%s/examples/network-controller/manifests/crd.yaml",
             getenv("CKUBE_SRC") ? getenv("CKUBE_SRC") : "../..");
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    char *perr = NULL;
    json_t *crd = ckube_yaml_load(buf, n, &perr);
    if (!crd) {
        fprintf(stderr, "crd.yaml: %s\n", perr ? perr : "?");
        free(perr);
        return -1;
    }
    ckube_status *err = NULL;
    int rc = ckube_create(client, &CRDS, NULL, crd, NULL, NULL, &err);
    json_decref(crd);
    if (rc != 0) {
        fprintf(stderr, "create CRD: %s\n", err && err->message ? err->message : "?");
        ckube_status_free(err);
        return -1;
    }
    /* Wait until the resource is served. */
    for (int i = 0; i < 100; i++) {
        json_t *l = NULL;
        if (ckube_list(client, &NETCTL_NETWORKS, "default", NULL, &l, NULL) == 0) {
            json_decref(l);
            return 0;
        }
        usleep(100 * 1000);
    }
    return -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ckube_client_free(client);
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

static void create_network(const char *name, const char *cidr, const char *gw)
{
    json_t *o =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "samplecrd.k8s.io/v1", "kind",
                  "Network", "metadata", "name", name, "spec", "cidr", cidr, "gateway", gw);
    ckube_status *err = NULL;
    int rc = ckube_create(client, &NETCTL_NETWORKS, "default", o, NULL, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "create %s: %s\n", name, err && err->message ? err->message : "?");
    ckube_status_free(err);
    json_decref(o);
    assert_int_equal(rc, 0);
}

/* status.conditions[0].reason of default/name, or "" (malloc'd). */
static char *reason_of(const char *name)
{
    json_t *o = NULL;
    if (ckube_get(client, &NETCTL_NETWORKS, "default", name, &o, NULL) != 0)
        return strdup("");
    const char *r = json_string_value(
        json_object_get(json_array_get(ckube_json_get_path(o, "status.conditions"), 0), "reason"));
    char *s = strdup(r ? r : "");
    json_decref(o);
    return s;
}

static bool wait_reason(const char *name, const char *want)
{
    for (int i = 0; i < 200; i++) {
        char *r = reason_of(name);
        bool ok = strcmp(r, want) == 0;
        free(r);
        if (ok)
            return true;
        usleep(50 * 1000);
    }
    return false;
}

static bool has_event(const char *name, const char *type, const char *reason, const char *text)
{
    json_t *l = NULL;
    if (ckube_list(client, &EVENTS, "default", NULL, &l, NULL) != 0)
        return false;
    bool found = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(l, "items"), i, e)
    {
        const char *n = json_string_value(ckube_json_get_path(e, "involvedObject.name"));
        const char *t = json_string_value(json_object_get(e, "type"));
        const char *r = json_string_value(json_object_get(e, "reason"));
        const char *m = json_string_value(json_object_get(e, "message"));
        if (n && t && r && m && !strcmp(n, name) && !strcmp(t, type) && !strcmp(r, reason) &&
            strstr(m, text))
            found = true;
    }
    json_decref(l);
    return found;
}

static void test_backend_errors_and_orphans(void **state)
{
    (void)state;
    char *err = NULL;
    flaky fb = {.base.ops = &flaky_ops, .inner = netctl_backend_memory_new(NULL, &err)};
    assert_non_null(fb.inner);
    atomic_store(&fb.failing, true);
    /* An orphan: a real network whose Network never existed. */
    netctl_want w;
    assert_int_equal(netaddr_check_spec("10.77.0.0/24", "10.77.0.1", &w.cidr, &w.gateway, NULL), 0);
    assert_int_equal(netctl_backend_apply(fb.inner, "default/orphan", &w, &err), 0);

    ckube_informer_factory *fac = ckube_informer_factory_new(client, NULL);
    ckube_shared_informer *nets = ckube_informer_factory_for(fac, &NETCTL_NETWORKS);
    ckube_status *st = NULL;
    ckube_event_recorder_opts ro = {.component = NETCTL_COMPONENT};
    ckube_event_recorder *rec = ckube_event_recorder_new(client, &ro, &st);
    assert_non_null(rec);
    netctl_options o = {.client = client,
                        .networks = nets,
                        .backend = &fb.base,
                        .recorder = rec,
                        .resync_ns = CKUBE_SEC(1)};
    netctl *nc = netctl_new(&o, &err);
    assert_non_null(nc);
    ckube_informer_factory_start(fac);
    assert_int_equal(ckube_controller_start(netctl_network_controller(nc), CKUBE_SEC(30)), 0);

    /* The orphan sweep removes the network nobody asked for. */
    netctl_cleanup_orphans(nc);
    netctl_actual act = {.exists = true};
    for (int i = 0; i < 100 && act.exists; i++) {
        usleep(50 * 1000);
        assert_int_equal(netctl_backend_observe(fb.inner, "default/orphan", &act, &err), 0);
    }
    assert_false(act.exists);

    /* The backend fails: status and a Warning event say why; retried. */
    create_network("flaky", "10.78.0.0/24", "10.78.0.1");
    assert_true(wait_reason("flaky", "BackendError"));
    bool ev = false;
    for (int i = 0; i < 100 && !ev; i++) {
        ev = has_event("flaky", "Warning", "Failed", "injected: device or resource busy");
        if (!ev)
            usleep(50 * 1000);
    }
    assert_true(ev);
    int tries = atomic_load(&fb.applies);
    usleep(600 * 1000);
    assert_true(atomic_load(&fb.applies) > tries); /* retried with backoff */

    /* It recovers: Ready, and the network exists. */
    atomic_store(&fb.failing, false);
    assert_true(wait_reason("flaky", "NetworkReady"));
    assert_int_equal(netctl_backend_observe(fb.inner, "default/flaky", &act, &err), 0);
    assert_true(act.exists);

    /* Deleted: the finalizer removes the network, then the Network goes. */
    ckube_status *derr = NULL;
    assert_int_equal(ckube_delete(client, &NETCTL_NETWORKS, "default", "flaky", NULL, NULL, &derr),
                     0);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        json_t *obj = NULL;
        gone = ckube_get(client, &NETCTL_NETWORKS, "default", "flaky", &obj, NULL) != 0;
        json_decref(obj);
        if (!gone)
            usleep(50 * 1000);
    }
    assert_true(gone);
    assert_int_equal(netctl_backend_observe(fb.inner, "default/flaky", &act, &err), 0);
    assert_false(act.exists);

    ckube_controller_stop(netctl_network_controller(nc));
    ckube_informer_factory_shutdown(fac);
    netctl_free(nc);
    ckube_event_recorder_free(rec);
    ckube_informer_factory_free(fac);
    netctl_backend_free(fb.inner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_backend_errors_and_orphans)};
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
