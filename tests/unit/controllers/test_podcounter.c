/* test_podcounter.c - the pod counter controller (article 002) against a
 * real `ckube server`: control-plane nodes get ckube.io/pod-count, other
 * nodes do not, every pod gets the Event "pod count is N"; the label
 * follows new pods and is not rewritten when unchanged; runs follow the
 * period on the controller's clock. */
#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/config.h>
#include <ckube/events.h>
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

#include "controllers/podcounter.h"
#include "util/server_util.h"

static const ckube_gvr PODS = {"", "v1", "pods"};
static const ckube_gvr NODES = {"", "v1", "nodes"};
static const ckube_gvr EVENTS = {"", "v1", "events"};

static struct test_server srv;
static ckube_client *client;

static int group_setup(void **state)
{
    (void)state;
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

static void create_node(const char *name, const char *role_label)
{
    json_t *n = json_pack("{s:s,s:s,s:{s:s,s:{}}}", "apiVersion", "v1", "kind", "Node", "metadata",
                          "name", name, "labels");
    if (role_label)
        json_object_set_new(ckube_json_get_path(n, "metadata.labels"), role_label, json_string(""));
    ckube_status *err = NULL;
    int rc = ckube_create(client, &NODES, NULL, n, NULL, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "create node %s: %s\n", name, err ? err->message : "?");
    assert_int_equal(rc, 0);
    json_decref(n);
}

static void create_pod(const char *ns, const char *name)
{
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind",
                          "Pod", "metadata", "name", name, "namespace", ns, "spec", "containers",
                          "name", "c", "image", "busybox");
    ckube_status *err = NULL;
    int rc = ckube_create(client, &PODS, ns, p, NULL, NULL, &err);
    if (rc != 0)
        fprintf(stderr, "create pod %s: %s\n", name, err ? err->message : "?");
    assert_int_equal(rc, 0);
    json_decref(p);
}

/* The node's pod-count label (malloc'd; NULL when absent), and its
 * resourceVersion in *rv when rv is not NULL. */
static char *node_label(const char *node, char **rv)
{
    json_t *n = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_get(client, &NODES, NULL, node, &n, &err), 0);
    const char *v = json_string_value(
        json_object_get(ckube_json_get_path(n, "metadata.labels"), PODCOUNTER_LABEL));
    char *out = v ? strdup(v) : NULL;
    if (rv)
        *rv = strdup(ckube_obj_resource_version(n));
    json_decref(n);
    return out;
}

static bool wait_label(const char *node, const char *want)
{
    for (int i = 0; i < 300; i++) {
        char *v = node_label(node, NULL);
        bool ok = v && strcmp(v, want) == 0;
        free(v);
        if (ok)
            return true;
        usleep(50000);
    }
    return false;
}

/* True when the pod ns/name has an Event with reason SuccessCalculatePod
 * and message `msg` from the pod counter. */
static bool pod_has_event(const char *ns, const char *name, const char *msg)
{
    json_t *list = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_list(client, &EVENTS, ns, NULL, &list, &err), 0);
    bool found = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(list, "items"), i, e)
    {
        const char *io = json_string_value(ckube_json_get_path(e, "involvedObject.name"));
        const char *kind = json_string_value(ckube_json_get_path(e, "involvedObject.kind"));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        const char *m = json_string_value(json_object_get(e, "message"));
        const char *type = json_string_value(json_object_get(e, "type"));
        if (io && strcmp(io, name) == 0 && kind && strcmp(kind, "Pod") == 0 && reason &&
            strcmp(reason, PODCOUNTER_REASON) == 0 && m && strcmp(m, msg) == 0 && type &&
            strcmp(type, "Normal") == 0 && ckube_json_get_path(e, "involvedObject.uid") != NULL)
            found = true;
    }
    json_decref(list);
    return found;
}

static bool wait_pod_event(const char *ns, const char *name, const char *msg)
{
    for (int i = 0; i < 300; i++) {
        if (pod_has_event(ns, name, msg))
            return true;
        usleep(50000);
    }
    return false;
}

static void test_counts_pods_labels_control_plane(void **state)
{
    (void)state;
    create_node("cp-1", "node-role.kubernetes.io/control-plane");
    create_node("worker-1", NULL);
    create_node("old-master", "node-role.kubernetes.io/master");
    const char *pods[] = {"pod-a", "pod-b", "pod-c"};
    for (int i = 0; i < 3; i++)
        create_pod("default", pods[i]);

    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    ckube_event_recorder *rec = ckube_event_recorder_new(
        client, &(ckube_event_recorder_opts){.component = "pod-counter", .log_verbosity = -1},
        NULL);
    assert_non_null(rec);
    podcounter *pc = podcounter_new(client, f, rec, &(podcounter_opts){.period_ns = CKUBE_MS(200)});
    assert_non_null(pc);
    assert_int_equal(podcounter_start(pc), 0);
    assert_int_equal(podcounter_start(pc), -1); /* only once */

    assert_true(wait_label("cp-1", "3"));
    assert_true(wait_label("old-master", "3"));
    for (int i = 0; i < 3; i++)
        assert_true(wait_pod_event("default", pods[i], "pod count is 3"));
    char *w = node_label("worker-1", NULL);
    assert_null(w);
    /* The run's count is set after its labels and events are sent, and
     * the events reach the server from the recorder's own thread: the
     * test may see them first (it did under TSan). */
    for (int i = 0; i < 200 && podcounter_last_count(pc) != 3; i++)
        usleep(10000);
    assert_int_equal(podcounter_last_count(pc), 3);

    /* Unchanged count: the node is not written again. */
    char *rv1 = NULL, *rv2 = NULL;
    free(node_label("cp-1", &rv1));
    uint64_t runs = podcounter_runs(pc);
    for (int i = 0; i < 200 && podcounter_runs(pc) < runs + 3; i++)
        usleep(50000);
    assert_true(podcounter_runs(pc) >= runs + 3);
    free(node_label("cp-1", &rv2));
    assert_string_equal(rv1, rv2);
    free(rv1);
    free(rv2);

    /* A fourth pod: the label and the events follow. */
    create_pod("default", "pod-d");
    assert_true(wait_label("cp-1", "4"));
    assert_true(wait_label("old-master", "4"));
    assert_true(wait_pod_event("default", "pod-d", "pod count is 4"));
    assert_true(wait_pod_event("default", "pod-a", "pod count is 4"));
    w = node_label("worker-1", NULL);
    assert_null(w);

    podcounter_stop(pc);
    podcounter_stop(pc); /* idempotent */
    uint64_t after = podcounter_runs(pc);
    usleep(500000);
    assert_int_equal(podcounter_runs(pc), after); /* really stopped */
    podcounter_free(pc);
    ckube_informer_factory_free(f);
    ckube_event_recorder_free(rec);
}

static void test_period_follows_clock(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(100));
    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    /* No recorder: counting and labelling still work. */
    podcounter *pc = podcounter_new(client, f, NULL, &(podcounter_opts){.clock = clk});
    assert_non_null(pc);
    assert_int_equal(podcounter_start(pc), 0);
    for (int i = 0; i < 400 && podcounter_runs(pc) < 1; i++)
        usleep(50000);
    assert_int_equal(podcounter_runs(pc), 1); /* the first run at once after sync */
    usleep(300000);
    assert_int_equal(podcounter_runs(pc), 1); /* then nothing until 10 s pass */
    ckube_fake_clock_advance(clk, CKUBE_SEC(9));
    usleep(200000);
    assert_int_equal(podcounter_runs(pc), 1);
    ckube_fake_clock_advance(clk, CKUBE_SEC(1));
    for (int i = 0; i < 200 && podcounter_runs(pc) < 2; i++)
        usleep(10000);
    assert_int_equal(podcounter_runs(pc), 2);
    podcounter_free(pc);
    ckube_informer_factory_free(f);
    ckube_fake_clock_free(clk);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    assert_null(podcounter_new(NULL, f, NULL, NULL));
    assert_null(podcounter_new(client, NULL, NULL, NULL));
    ckube_informer_factory_shutdown(f);
    assert_null(podcounter_new(client, f, NULL, NULL)); /* no informers after shutdown */
    ckube_informer_factory_free(f);
    podcounter_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_pods_labels_control_plane),
        cmocka_unit_test(test_period_follows_clock),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
