/* test_clusterrole_aggregation.c - the ClusterRole aggregation controller
 * against a real `ckube server` without its own controller-manager: an
 * aggregated role gets the rules of the roles its selectors match, in
 * selector then name order, without repeats and without its own; a
 * non-matching role is ignored; a label change or a deletion of a source
 * role adds or removes its rules; matchExpressions select; a role whose
 * selectors match nothing is not written, and nothing is written while
 * the rules are already right (writes counted on the server's /metrics,
 * reconciles on the controller's). Then the controller-manager's wiring
 * (--controllers) and bad arguments. */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/metrics.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controllers/clusterrole_aggregation.h"
#include "controllers/controller_manager.h"
#include "util/server_util.h"

static const ckube_gvr CLUSTERROLES = {"rbac.authorization.k8s.io", "v1", "clusterroles"};

#define R1 "{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}"
/* R1 again, other key order and an empty list: the same rule */
#define R1_AGAIN                                                                                   \
    "{\"resources\":[\"pods\"],\"resourceNames\":[],\"apiGroups\":[\"\"],\"verbs\":[\"get\"]}"
#define R2                                                                                         \
    "{\"verbs\":[\"list\",\"watch\"],\"apiGroups\":[\"apps\"],\"resources\":[\"deployments\"]}"
#define R3 "{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/healthz\"]}"
#define RSELF "{\"verbs\":[\"delete\"],\"apiGroups\":[\"\"],\"resources\":[\"secrets\"]}"
#define RX "{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}"

static struct test_server srv;
static ckube_client *client;
static ckube_metrics_registry *reg;
static ckube_informer_factory *factory;
static cragg *ctl;

static int group_setup(void **state)
{
    (void)state;
    srv.no_controller_manager = true;
    if (tsu_start(&srv, "memory") != 0)
        return -1;
    client = tsu_client(&srv);
    reg = ckube_metrics_registry_new();
    factory = client ? ckube_informer_factory_new(client, NULL) : NULL;
    ctl = factory && reg ? cragg_new(client, factory, &(cragg_opts){.metrics = reg}) : NULL;
    if (!ctl || ckube_informer_factory_start(factory) != 0 || cragg_start(ctl) != 0)
        return -1;
    return cragg_start(ctl) == -1 ? 0 : -1; /* only once */
}

static int group_teardown(void **state)
{
    (void)state;
    cragg_stop(ctl);
    cragg_stop(ctl); /* idempotent */
    cragg_free(ctl);
    ckube_informer_factory_free(factory);
    ckube_metrics_registry_free(reg);
    ckube_client_free(client);
    return tsu_stop(&srv, SIGTERM) == 0 ? 0 : -1;
}

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v)
        fail_msg("bad JSON in the test: %s: %s", text, e.text);
    return v;
}

/* Creates ClusterRole `name`; labels, rules and aggregation are JSON text
 * or NULL (left out). */
static void create_role(const char *name, const char *labels, const char *rules,
                        const char *aggregation)
{
    json_t *obj = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "rbac.authorization.k8s.io/v1",
                            "kind", "ClusterRole", "metadata", "name", name);
    if (labels)
        json_object_set_new(json_object_get(obj, "metadata"), "labels", J(labels));
    if (rules)
        json_object_set_new(obj, "rules", J(rules));
    if (aggregation)
        json_object_set_new(obj, "aggregationRule", J(aggregation));
    ckube_status *err = NULL;
    if (ckube_create(client, &CLUSTERROLES, NULL, obj, NULL, NULL, &err) != 0)
        fail_msg("create clusterrole %s: %s", name, err && err->message ? err->message : "?");
    json_decref(obj);
}

/* Merge-patches the labels of `name` (`labels` JSON text; null drops one). */
static void set_labels(const char *name, const char *labels)
{
    char patch[512];
    snprintf(patch, sizeof patch, "{\"metadata\":{\"labels\":%s}}", labels);
    ckube_status *err = NULL;
    if (ckube_patch(client, &CLUSTERROLES, NULL, name, CKUBE_PATCH_MERGE, patch, strlen(patch),
                    NULL, NULL, &err) != 0)
        fail_msg("label clusterrole %s: %s", name, err && err->message ? err->message : "?");
}

static void delete_role(const char *name)
{
    ckube_status *err = NULL;
    if (ckube_delete(client, &CLUSTERROLES, NULL, name, NULL, NULL, &err) != 0)
        fail_msg("delete clusterrole %s: %s", name, err && err->message ? err->message : "?");
}

static json_t *get_role(const char *name)
{
    json_t *obj = NULL;
    ckube_status *err = NULL;
    if (ckube_get(client, &CLUSTERROLES, NULL, name, &obj, &err) != 0)
        fail_msg("get clusterrole %s: %s", name, err && err->message ? err->message : "?");
    return obj;
}

/* The rules of `obj`, the way the controller compares them: absent and
 * null are an empty list. */
static bool rules_are(const json_t *obj, const json_t *want)
{
    const json_t *have = json_object_get(obj, "rules");
    if (!have || json_is_null(have))
        return json_array_size(want) == 0;
    return json_equal(have, want);
}

/* Waits (up to 10 s) until `name` has exactly the rules `want` (JSON
 * text of an array); returns the role. */
static json_t *wait_rules(const char *name, const char *want)
{
    json_t *w = J(want);
    json_t *obj = NULL;
    for (int i = 0; i < 200; i++) {
        json_decref(obj);
        obj = get_role(name);
        if (rules_are(obj, w)) {
            json_decref(w);
            return obj;
        }
        usleep(50000);
    }
    char *have = json_dumps(json_object_get(obj, "rules"), JSON_COMPACT);
    fail_msg("clusterrole %s: rules %s, expected %s", name, have ? have : "(none)", want);
    return NULL;
}

/* Whether `obj`'s managedFields has an entry of `manager`; its fieldsV1
 * in *fields (borrowed) when it does. */
static bool managed_by(const json_t *obj, const char *manager, const char *operation,
                       const json_t **fields)
{
    size_t i;
    const json_t *e;
    json_array_foreach(ckube_json_get_path(obj, "metadata.managedFields"), i, e)
    {
        const char *m = json_string_value(json_object_get(e, "manager"));
        const char *op = json_string_value(json_object_get(e, "operation"));
        if (m && !strcmp(m, manager) && op && !strcmp(op, operation)) {
            if (fields)
                *fields = json_object_get(e, "fieldsV1");
            return true;
        }
    }
    return false;
}

/* Sum of the server's apiserver_request_total for writes the controller
 * makes to clusterroles: APPLY, and PUT (its fallback). The test itself
 * only POSTs, PATCHes (merge) and DELETEs. */
static double server_role_writes(void)
{
    ckube_response resp = {0};
    ckube_status *err = NULL;
    ckube_request req = {.method = "GET", .path = "/metrics", .accept = "text/plain"};
    if (ckube_client_do(client, &req, &resp, &err) != 0)
        fail_msg("GET /metrics: %s", err && err->message ? err->message : "?");
    double sum = 0;
    for (char *line = resp.body, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strncmp(line, "apiserver_request_total{", 24) != 0 ||
            !strstr(line, "resource=\"clusterroles\"") ||
            (!strstr(line, "verb=\"APPLY\"") && !strstr(line, "verb=\"PUT\"")))
            continue;
        const char *sp = strrchr(line, ' ');
        if (sp)
            sum += strtod(sp + 1, NULL);
    }
    ckube_response_free(&resp);
    return sum;
}

/* The controller's successful reconciles so far. */
static double reconciles(void)
{
    static const char *const labels[] = {"controller", "result", NULL};
    ckube_metric_family *fam =
        ckube_metrics_counter(reg, "controller_runtime_reconcile_total",
                              "Total number of reconciliations per controller", labels);
    assert_non_null(fam);
    const char *values[] = {"clusterrole-aggregation", "success"};
    return ckube_metric_value(ckube_metric_with(fam, values));
}

static char *rv_of(const char *name)
{
    json_t *obj = get_role(name);
    char *rv = strdup(ckube_obj_resource_version(obj));
    json_decref(obj);
    return rv;
}

/* Two matching roles: their rules in order of name (the one made later
 * sorts first), a rule both have kept once, the non-matching role's
 * rules and the aggregated role's own left out although it carries the
 * label too; written by a forced apply as upstream's field manager. */
static void test_aggregation(void **state)
{
    (void)state;
    create_role("src-b", "{\"agg\":\"t1\"}", "[" R2 "," R1_AGAIN "]", NULL);
    create_role("other", "{\"agg\":\"elsewhere\"}", "[" RX "]", NULL);
    /* it selects itself (same label) and has rules of its own, which
     * go: a role never aggregates itself */
    create_role("agg1", "{\"agg\":\"t1\"}", "[" RSELF "]",
                "{\"clusterRoleSelectors\":[{\"matchLabels\":{\"agg\":\"t1\"}}]}");
    create_role("src-a", "{\"agg\":\"t1\"}", "[" R1 "," R3 "]", NULL);
    json_t *obj = wait_rules("agg1", "[" R1 "," R3 "," R2 "]");
    const json_t *fields = NULL;
    assert_true(managed_by(obj, CLUSTERROLE_AGGREGATION_MANAGER, "Apply", &fields));
    json_t *want = J("{\"f:rules\":{}}");
    assert_true(json_equal(fields, want));
    json_decref(want);
    json_decref(obj);
    /* the sources are read, never written */
    obj = get_role("src-b");
    assert_false(managed_by(obj, CLUSTERROLE_AGGREGATION_MANAGER, "Apply", NULL));
    json_decref(obj);
}

/* Labels change: a source that stops matching takes its rules along,
 * one that matches again brings them back; a deleted source's rules go;
 * when none is left, the rules this manager applied go too. */
static void test_label_change_and_delete(void **state)
{
    (void)state;
    set_labels("src-b", "{\"agg\":\"none\"}");
    json_decref(wait_rules("agg1", "[" R1 "," R3 "]"));
    set_labels("src-b", "{\"agg\":\"t1\"}");
    json_decref(wait_rules("agg1", "[" R1 "," R3 "," R2 "]"));
    /* the label removed altogether */
    set_labels("src-a", "{\"agg\":null}");
    json_decref(wait_rules("agg1", "[" R2 "," R1 "]"));
    set_labels("src-a", "{\"agg\":\"t1\"}");
    json_decref(wait_rules("agg1", "[" R1 "," R3 "," R2 "]"));
    delete_role("src-a");
    json_decref(wait_rules("agg1", "[" R2 "," R1 "]"));
    delete_role("src-b");
    json_t *obj = wait_rules("agg1", "[]");
    assert_null(json_object_get(obj, "rules"));
    json_decref(obj);
}

/* matchExpressions, and several selectors: every selector's matches in
 * turn (by name within one), a role both select counted once. */
static void test_match_expressions(void **state)
{
    (void)state;
    create_role("e-gold", "{\"tier\":\"gold\"}", "[" R1 "]", NULL);
    create_role("e-silver-legacy", "{\"tier\":\"silver\",\"legacy\":\"1\"}", "[" RX "]", NULL);
    create_role("e-bronze", "{\"tier\":\"bronze\"}", "[" RSELF "]", NULL);
    create_role("e-silver", "{\"tier\":\"silver\",\"extra\":\"yes\"}", "[" R2 "]", NULL);
    create_role("a-extra", "{\"extra\":\"yes\"}", "[" R3 "]", NULL);
    create_role("agg-expr", NULL, NULL,
                "{\"clusterRoleSelectors\":["
                "{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\","
                "\"values\":[\"silver\",\"gold\"]},"
                "{\"key\":\"legacy\",\"operator\":\"DoesNotExist\"}]},"
                "{\"matchExpressions\":[{\"key\":\"extra\",\"operator\":\"Exists\"}]}]}");
    /* selector 1: e-gold, e-silver; selector 2: a-extra, e-silver (again) */
    json_decref(wait_rules("agg-expr", "[" R1 "," R2 "," R3 "]"));
    /* NotIn also matches roles without the key */
    create_role("agg-notin", NULL, NULL,
                "{\"clusterRoleSelectors\":[{\"matchLabels\":{\"extra\":\"yes\"},"
                "\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\","
                "\"values\":[\"gold\"]}]}]}");
    json_decref(wait_rules("agg-notin", "[" R3 "," R2 "]"));
}

/* Nothing matches: upstream's list of none equals a role without rules,
 * so nothing is written; a role whose rules someone else set gets the
 * apply of no rules, which leaves another manager's rules alone. */
static void test_nothing_matches(void **state)
{
    (void)state;
    const char *sel = "{\"clusterRoleSelectors\":[{\"matchLabels\":{\"nobody\":\"here\"}}]}";
    create_role("agg-none", NULL, NULL, sel);
    create_role("agg-none-kept", NULL, "[" RSELF "]", sel);
    char *rv = rv_of("agg-none");
    /* something for it to look at: any ClusterRole event requeues it */
    create_role("poke-1", NULL, "[" R1 "]", NULL);
    usleep(1000000);
    json_t *obj = get_role("agg-none");
    assert_string_equal(ckube_obj_resource_version(obj), rv);
    assert_false(managed_by(obj, CLUSTERROLE_AGGREGATION_MANAGER, "Apply", NULL));
    json_decref(obj);
    obj = get_role("agg-none-kept");
    json_t *want = J("[" RSELF "]");
    assert_true(rules_are(obj, want));
    json_decref(want);
    json_decref(obj);
    free(rv);
    /* it differs from what its selectors give, so every event applies
     * to it again (a no-op): gone, so the count of writes below is 0 */
    delete_role("agg-none-kept");
}

/* Once everything is aggregated, events make the controller look again
 * (its reconciles go up) but write nothing. */
static void test_no_write_when_equal(void **state)
{
    (void)state;
    create_role("src-c", "{\"agg\":\"t2\"}", "[" R2 "]", NULL);
    create_role("agg2", NULL, NULL,
                "{\"clusterRoleSelectors\":[{\"matchLabels\":{\"agg\":\"t2\"}}]}");
    json_decref(wait_rules("agg2", "[" R2 "]"));
    usleep(500000); /* the write's own event, reconciled */
    double writes = server_role_writes();
    assert_true(writes >= 4); /* agg1's and agg2's applies, at least: it counts */
    double runs = reconciles();
    char *rv = rv_of("agg2");
    /* a new role, relabelled, a rule added to a non-matching one, and
     * a matching role whose rules are already there */
    create_role("poke-2", NULL, "[" R3 "]", NULL);
    set_labels("poke-2", "{\"unrelated\":\"yes\"}");
    create_role("src-c-twin", "{\"agg\":\"t2\"}", "[" R2 "]", NULL);
    delete_role("poke-2");
    for (int i = 0; i < 100 && reconciles() < runs + 4; i++)
        usleep(50000);
    usleep(500000);
    assert_true(reconciles() >= runs + 4);
    assert_true(server_role_writes() == writes);
    char *rv2 = rv_of("agg2");
    assert_string_equal(rv2, rv);
    free(rv);
    free(rv2);
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

/* --controllers knows it, it is on by default and can be turned off; the
 * controller-manager with only it aggregates. */
static void test_controllers_flag(void **state)
{
    (void)state;
    assert_non_null(strstr(CM_CONTROLLERS, ",clusterrole-aggregation"));
    assert_true(cm_controller_enabled(NULL, "clusterrole-aggregation"));
    assert_true(cm_controller_enabled("*", "clusterrole-aggregation"));
    assert_false(cm_controller_enabled("*,-clusterrole-aggregation", "clusterrole-aggregation"));
    assert_false(cm_controller_enabled("namespace", "clusterrole-aggregation"));
    ckube_config *cfg = server_config();
    cm_opts o = {.config = cfg,
                 .controllers = "clusterrole-aggregation",
                 .leader_elect = false,
                 .metrics_bind_address = "0",
                 .health_bind_address = "0"};
    char *err = NULL;
    cm *c = cm_new(&o, &err);
    assert_null(err);
    assert_non_null(c);
    /* ours is stopped: the controller-manager's does the work */
    cragg_stop(ctl);
    assert_int_equal(cm_start(c), 0);
    create_role("src-d", "{\"agg\":\"t3\"}", "[" R3 "]", NULL);
    create_role("agg3", NULL, NULL,
                "{\"clusterRoleSelectors\":[{\"matchLabels\":{\"agg\":\"t3\"}}]}");
    json_decref(wait_rules("agg3", "[" R3 "]"));
    cm_free(c);
    ckube_config_free(cfg);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ckube_informer_factory *f = ckube_informer_factory_new(client, NULL);
    assert_null(cragg_new(NULL, f, NULL));
    assert_null(cragg_new(client, NULL, NULL));
    assert_int_equal(cragg_start(NULL), -1);
    cragg_stop(NULL);
    cragg_free(NULL);
    /* defaults without options; freed unstarted */
    cragg *a = cragg_new(client, f, NULL);
    assert_non_null(a);
    cragg_free(a);
    ckube_informer_factory_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aggregation),         cmocka_unit_test(test_label_change_and_delete),
        cmocka_unit_test(test_match_expressions),   cmocka_unit_test(test_nothing_matches),
        cmocka_unit_test(test_no_write_when_equal), cmocka_unit_test(test_controllers_flag),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
