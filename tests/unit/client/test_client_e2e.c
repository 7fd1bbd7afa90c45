/* End-to-end tests of the REST client against a real `ckube server`
 * ($CKUBE_BIN, started here on a free port with in-memory storage and
 * always stopped at the end; the child also dies with this process):
 * every dynamic verb on configmaps and on a custom resource, the server's
 * Status errors (404, 409 AlreadyExists/Conflict, 422 causes, 415), dry
 * run, explicit 0/false, paging, selectors, deletecollection, watches,
 * discovery, and the RESTMapper finding a kind once its CRD exists; and
 * the client's TLS against the server's own certificates (HTTPS is the
 * server's default): CA and client certificate as files and as data,
 * server names, refusals without the cluster CA, and the in-cluster
 * config (a service account directory's token and ca.crt): with a token
 * the server made for a ServiceAccount (TokenRequest), a client built from
 * that directory alone is the ServiceAccount, an informer on it lists and
 * watches ConfigMaps, and deleting the ServiceAccount makes its requests
 * 401 with the server's Status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "ckube/client.h"
#include "ckube/config.h"
#include "ckube/discovery.h"
#include "ckube/informer.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "util/client_test_util.h"

static pid_t g_pid;
static char *g_dir;
static ckube_client *g_c;

static const ckube_gvr CM = {"", "v1", "configmaps"};
static const ckube_gvr CRD = {"apiextensions.k8s.io", "v1", "customresourcedefinitions"};
static const ckube_gvr WIDGETS = {"e2e.ckube.io", "v1", "widgets"};

static void stop_server(void)
{
    if (g_pid <= 0)
        return;
    kill(g_pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(g_pid, NULL, WNOHANG) == g_pid) {
            g_pid = 0;
            return;
        }
        ctu_sleep_ms(50);
    }
    kill(g_pid, SIGKILL);
    waitpid(g_pid, NULL, 0);
    g_pid = 0;
}

static int start_server(void **state)
{
    (void)state;
    const char *bin = getenv("CKUBE_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "CKUBE_BIN not set: end-to-end client tests skipped\n");
        return 0;
    }
    g_dir = ctu_tmpdir("client-e2e");
    char *kc = ctu_fmt("%s/kubeconfig", g_dir);
    char *log = ctu_fmt("%s/server.log", g_dir);
    /* No other thread exists yet, so fork is safe here. */
    g_pid = fork();
    if (g_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "server", "--storage", "memory", "--listen", "127.0.0.1:0", "--data-dir",
              g_dir, "--write-kubeconfig", kc, (char *)NULL);
        _exit(127);
    }
    free(log);
    int rc = -1;
    for (int i = 0; i < 400 && rc != 0; i++) { /* up to 20 s (sanitizers are slow) */
        if (access(kc, R_OK) == 0)
            rc = 0;
        else
            ctu_sleep_ms(50);
        if (waitpid(g_pid, NULL, WNOHANG) == g_pid) {
            g_pid = 0;
            break;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "ckube server did not start (see %s/server.log)\n", g_dir);
        stop_server();
        free(kc);
        return -1;
    }
    ckube_config_overrides o = {.kubeconfig = kc};
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    if (ckube_config_load(&o, &cfg, &err) != 0) {
        fprintf(stderr, "loading %s: %s\n", kc, err->message);
        ckube_status_free(err);
        stop_server();
        free(kc);
        return -1;
    }
    free(kc);
    cfg->qps = 100;
    cfg->burst = 200;
    g_c = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    if (!g_c) {
        fprintf(stderr, "client: %s\n", err->message);
        ckube_status_free(err);
        stop_server();
        return -1;
    }
    return 0;
}

static int stop_all(void **state)
{
    (void)state;
    ckube_client_free(g_c);
    g_c = NULL;
    stop_server();
    free(g_dir);
    return 0;
}

#define NEED_SERVER()                                                                              \
    do {                                                                                           \
        if (!g_c)                                                                                  \
            skip();                                                                                \
    } while (0)

static void expect_ok(int rc, ckube_status *err, const char *what)
{
    if (rc != 0)
        fail_msg("%s: %d %s: %s", what, err ? err->code : -1, err && err->reason ? err->reason : "",
                 err && err->message ? err->message : "");
}

static json_t *configmap(const char *name, const char *app)
{
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                     "metadata", "name", name, "labels", "app", app, "data", "k", "v");
}

static void test_configmap_crud(void **state)
{
    (void)state;
    NEED_SERVER();
    ckube_status *err = NULL;
    json_t *out = NULL, *cm = configmap("crud", "web");

    expect_ok(ckube_create(g_c, &CM, "default", cm, NULL, &out, &err), err, "create");
    assert_non_null(ckube_obj_uid(out));
    char *rv1 = strdup(ckube_obj_resource_version(out));
    json_decref(out);

    /* 409 AlreadyExists, the server's own Status */
    assert_int_equal(ckube_create(g_c, &CM, "default", cm, NULL, &out, &err), -1);
    assert_int_equal(err->code, 409);
    assert_string_equal(err->reason, "AlreadyExists");
    assert_string_equal(err->message, "configmaps \"crud\" already exists");
    assert_string_equal(err->name, "crud");
    assert_string_equal(err->kind, "configmaps");
    ckube_status_free(err);
    err = NULL;

    expect_ok(ckube_get(g_c, &CM, "default", "crud", &out, &err), err, "get");
    assert_string_equal(json_string_value(ckube_json_get_path(out, "data.k")), "v");
    json_decref(out);

    assert_int_equal(ckube_get(g_c, &CM, "default", "nope", &out, &err), -1);
    assert_true(ckube_is_not_found(err));
    assert_string_equal(err->reason, "NotFound");
    assert_string_equal(err->message, "configmaps \"nope\" not found");
    ckube_status_free(err);
    err = NULL;

    /* update with the current resourceVersion, then with the stale one */
    json_t *upd = json_deep_copy(cm);
    json_object_set_new(json_object_get(upd, "metadata"), "resourceVersion", json_string(rv1));
    json_object_set_new(json_object_get(upd, "data"), "k", json_string("v2"));
    expect_ok(ckube_update(g_c, &CM, "default", upd, NULL, &out, &err), err, "update");
    assert_string_not_equal(ckube_obj_resource_version(out), rv1);
    json_decref(out);
    assert_int_equal(ckube_update(g_c, &CM, "default", upd, NULL, &out, &err), -1);
    assert_true(ckube_is_conflict(err));
    assert_string_equal(err->reason, "Conflict");
    assert_string_equal(err->message,
                        "Operation cannot be fulfilled on configmaps \"crud\": the object has been "
                        "modified; please apply your changes to the latest version and try again");
    ckube_status_free(err);
    err = NULL;
    json_decref(upd);
    free(rv1);

    /* the four patch types */
    const char *merge = "{\"data\":{\"m\":\"1\"}}";
    expect_ok(ckube_patch(g_c, &CM, "default", "crud", CKUBE_PATCH_MERGE, merge, strlen(merge),
                          NULL, &out, &err),
              err, "merge patch");
    assert_string_equal(json_string_value(ckube_json_get_path(out, "data.m")), "1");
    json_decref(out);
    const char *smp = "{\"data\":{\"s\":\"2\"}}";
    expect_ok(ckube_patch(g_c, &CM, "default", "crud", CKUBE_PATCH_STRATEGIC, smp, strlen(smp),
                          NULL, &out, &err),
              err, "strategic patch");
    assert_string_equal(json_string_value(ckube_json_get_path(out, "data.s")), "2");
    json_decref(out);
    const char *jp = "[{\"op\":\"add\",\"path\":\"/data/j\",\"value\":\"3\"},"
                     "{\"op\":\"remove\",\"path\":\"/data/m\"}]";
    expect_ok(ckube_patch(g_c, &CM, "default", "crud", CKUBE_PATCH_JSON, jp, strlen(jp), NULL, &out,
                          &err),
              err, "json patch");
    assert_string_equal(json_string_value(ckube_json_get_path(out, "data.j")), "3");
    assert_null(ckube_json_get_path(out, "data.m"));
    json_decref(out);
    const char *apply = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                        "\"crud\"},\"data\":{\"a\":\"4\"}}";
    ckube_write_opts ao = {.field_manager = "e2e", .force = true};
    expect_ok(ckube_patch(g_c, &CM, "default", "crud", CKUBE_PATCH_APPLY, apply, strlen(apply), &ao,
                          &out, &err),
              err, "apply patch");
    assert_string_equal(json_string_value(ckube_json_get_path(out, "data.a")), "4");
    json_decref(out);
    /* a bad json patch: the server's 4xx comes back */
    const char *bad = "[{\"op\":\"frobnicate\"}]";
    assert_int_equal(ckube_patch(g_c, &CM, "default", "crud", CKUBE_PATCH_JSON, bad, strlen(bad),
                                 NULL, &out, &err),
                     -1);
    assert_true(err->code >= 400 && err->code < 500);
    assert_non_null(err->message);
    ckube_status_free(err);
    err = NULL;

    /* dry run: answered, not stored */
    json_t *dry = configmap("dry", "web");
    ckube_write_opts dro = {.dry_run = true};
    expect_ok(ckube_create(g_c, &CM, "default", dry, &dro, &out, &err), err, "dry-run create");
    assert_string_equal(ckube_obj_name(out), "dry");
    json_decref(out);
    assert_int_equal(ckube_get(g_c, &CM, "default", "dry", &out, &err), -1);
    assert_true(ckube_is_not_found(err));
    ckube_status_free(err);
    err = NULL;
    json_decref(dry);

    /* 422 with causes */
    json_t *invalid = configmap("Bad_Name", "web");
    assert_int_equal(ckube_create(g_c, &CM, "default", invalid, NULL, &out, &err), -1);
    assert_int_equal(err->code, 422);
    assert_string_equal(err->reason, "Invalid");
    assert_non_null(strstr(err->message, "ConfigMap \"Bad_Name\" is invalid"));
    assert_true(err->ncauses >= 1);
    assert_string_equal(err->causes[0].field, "metadata.name");
    assert_string_equal(err->causes[0].type, "FieldValueInvalid");
    ckube_status_free(err);
    err = NULL;
    json_decref(invalid);

    /* delete with options (explicit 0 grace period) */
    ckube_delete_opts dopt = {.propagation_policy = "Background",
                              .grace_period_seconds = {.set = true, .value = 0}};
    expect_ok(ckube_delete(g_c, &CM, "default", "crud", &dopt, &out, &err), err, "delete");
    assert_non_null(out);
    json_decref(out);
    assert_int_equal(ckube_get(g_c, &CM, "default", "crud", &out, &err), -1);
    assert_true(ckube_is_not_found(err));
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(ckube_delete(g_c, &CM, "default", "crud", NULL, NULL, &err), -1);
    assert_true(ckube_is_not_found(err));
    ckube_status_free(err);
    /* a precondition that does not match */
    expect_ok(ckube_create(g_c, &CM, "default", cm, NULL, NULL, &err), err, "re-create");
    ckube_delete_opts pre = {.precondition_uid = "not-the-uid"};
    assert_int_equal(ckube_delete(g_c, &CM, "default", "crud", &pre, NULL, &err), -1);
    assert_int_equal(err->code, 409);
    ckube_status_free(err);
    err = NULL;
    expect_ok(ckube_delete(g_c, &CM, "default", "crud", NULL, NULL, &err), err, "delete 2");
    json_decref(cm);
}

/* The ConfigMaps of a list but kube-root-ca.crt, which the server's
 * controller-manager child publishes in every namespace (as in a real
 * cluster) whenever it gets to it. */
static size_t own_items(const json_t *list)
{
    size_t n = 0, i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it)
    {
        const char *name = json_string_value(ckube_json_get_path(it, "metadata.name"));
        n += !name || strcmp(name, "kube-root-ca.crt");
    }
    return n;
}

static void test_list_paging_selectors(void **state)
{
    (void)state;
    NEED_SERVER();
    ckube_status *err = NULL;
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", "paging");
    ckube_gvr nsr = {"", "v1", "namespaces"};
    expect_ok(ckube_create(g_c, &nsr, NULL, ns, NULL, NULL, &err), err, "namespace");
    json_decref(ns);
    const char *apps[] = {"a", "b", "c", "a", "b", "x", "a"};
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        json_t *cm = configmap(name, apps[i]);
        if (i == 3)
            json_object_set_new(ckube_json_get_path(cm, "metadata.labels"), "tier",
                                json_string("x"));
        expect_ok(ckube_create(g_c, &CM, "paging", cm, NULL, NULL, &err), err, "create");
        json_decref(cm);
    }
    json_t *out = NULL;
    /* one page */
    ckube_list_opts lo = {.limit = 3};
    expect_ok(ckube_list(g_c, &CM, "paging", &lo, &out, &err), err, "list page");
    assert_int_equal(json_array_size(json_object_get(out, "items")), 3);
    assert_non_null(json_string_value(ckube_json_get_path(out, "metadata.continue")));
    json_decref(out);
    /* every page */
    lo.limit = 2;
    expect_ok(ckube_list_all(g_c, &CM, "paging", &lo, &out, &err), err, "list_all");
    assert_int_equal(own_items(out), 7);
    assert_null(ckube_json_get_path(out, "metadata.continue"));
    assert_non_null(json_string_value(ckube_json_get_path(out, "metadata.resourceVersion")));
    json_decref(out);
    /* selectors travel URL-encoded */
    ckube_list_opts sel = {.label_selector = "app in (a,b),tier!=x"};
    expect_ok(ckube_list_all(g_c, &CM, "paging", &sel, &out, &err), err, "selector");
    assert_int_equal(json_array_size(json_object_get(out, "items")), 4); /* p0 p1 p4 p6 */
    json_decref(out);
    ckube_list_opts fs = {.field_selector = "metadata.name=p5"};
    expect_ok(ckube_list(g_c, &CM, "paging", &fs, &out, &err), err, "field selector");
    assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
    json_decref(out);
    /* all namespaces */
    expect_ok(ckube_list(g_c, &CM, NULL, &sel, &out, &err), err, "all namespaces");
    assert_true(json_array_size(json_object_get(out, "items")) >= 4);
    json_decref(out);
    /* a bad selector: the server's 400 */
    ckube_list_opts badsel = {.label_selector = "app in (a"};
    assert_int_equal(ckube_list(g_c, &CM, "paging", &badsel, &out, &err), -1);
    assert_int_equal(err->code, 400);
    ckube_status_free(err);
    err = NULL;
    /* deletecollection by selector */
    ckube_list_opts del = {.label_selector = "app=a"};
    expect_ok(ckube_delete_collection(g_c, &CM, "paging", &del, NULL, &err), err,
              "deletecollection");
    expect_ok(ckube_list_all(g_c, &CM, "paging", NULL, &out, &err), err, "list after");
    assert_int_equal(own_items(out), 4);
    json_decref(out);
}

/* Collects watch events on a thread until stopped. */
typedef struct collector {
    ckube_watch *w;
    pthread_mutex_t mu;
    char seen[16][64]; /* "TYPE name" */
    int n;
    int rc;
} collector;

static void *collect(void *arg)
{
    collector *col = arg;
    for (;;) {
        ckube_watch_event_type t;
        json_t *o = NULL;
        int rc = ckube_watch_next(col->w, &t, &o, NULL);
        if (rc != 1) {
            col->rc = rc;
            return NULL;
        }
        pthread_mutex_lock(&col->mu);
        if (col->n < 16)
            snprintf(col->seen[col->n++], sizeof col->seen[0], "%s %s",
                     ckube_watch_event_type_name(t), ckube_obj_name(o) ? ckube_obj_name(o) : "");
        pthread_mutex_unlock(&col->mu);
        json_decref(o);
    }
}

static int seen_count(collector *col)
{
    pthread_mutex_lock(&col->mu);
    int n = col->n;
    pthread_mutex_unlock(&col->mu);
    return n;
}

static void wait_events(collector *col, int n)
{
    for (int i = 0; i < 200 && seen_count(col) < n; i++)
        ctu_sleep_ms(25);
}

static void test_watch(void **state)
{
    (void)state;
    NEED_SERVER();
    ckube_status *err = NULL;
    json_t *list = NULL;
    expect_ok(ckube_list(g_c, &CM, "default", NULL, &list, &err), err, "list");
    ckube_list_opts wo = {.resource_version = ckube_json_get_path(list, "metadata.resourceVersion")
                                                  ? json_string_value(ckube_json_get_path(
                                                        list, "metadata.resourceVersion"))
                                                  : NULL,
                          .label_selector = "app=watched",
                          .allow_watch_bookmarks = true};
    collector col = {.rc = 99};
    pthread_mutex_init(&col.mu, NULL);
    expect_ok(ckube_watch_open(g_c, &CM, "default", &wo, &col.w, &err), err, "watch");
    json_decref(list);
    pthread_t th;
    pthread_create(&th, NULL, collect, &col);

    json_t *cm = configmap("w1", "watched"), *out = NULL;
    expect_ok(ckube_create(g_c, &CM, "default", cm, NULL, &out, &err), err, "create");
    const char *mp = "{\"data\":{\"k\":\"changed\"}}";
    json_decref(out);
    expect_ok(
        ckube_patch(g_c, &CM, "default", "w1", CKUBE_PATCH_MERGE, mp, strlen(mp), NULL, NULL, &err),
        err, "patch");
    json_t *other = configmap("unwatched", "other");
    expect_ok(ckube_create(g_c, &CM, "default", other, NULL, NULL, &err), err, "create other");
    expect_ok(ckube_delete(g_c, &CM, "default", "w1", NULL, NULL, &err), err, "delete");
    wait_events(&col, 3);
    ckube_watch_stop(col.w);
    pthread_join(th, NULL);
    assert_int_equal(col.rc, 0);
    assert_int_equal(col.n, 3);
    assert_string_equal(col.seen[0], "ADDED w1");
    assert_string_equal(col.seen[1], "MODIFIED w1");
    assert_string_equal(col.seen[2], "DELETED w1");
    ckube_watch_close(col.w);
    pthread_mutex_destroy(&col.mu);
    expect_ok(ckube_delete(g_c, &CM, "default", "unwatched", NULL, NULL, &err), err, "cleanup");
    json_decref(cm);
    json_decref(other);

    /* the server's timeoutSeconds ends the stream cleanly */
    ckube_list_opts to = {.timeout_seconds = {.set = true, .value = 1},
                          .field_selector = "metadata.name=none"};
    ckube_watch *w = NULL;
    expect_ok(ckube_watch_open(g_c, &CM, "default", &to, &w, &err), err, "watch timeout");
    double t0 = ctu_now();
    ckube_watch_event_type t;
    json_t *o = NULL;
    int rc;
    while ((rc = ckube_watch_next(w, &t, &o, &err)) == 1)
        json_decref(o); /* bookmarks, if any */
    assert_int_equal(rc, 0);
    assert_null(err);
    double dt = ctu_now() - t0;
    assert_true(dt > 0.5 && dt < 10);
    ckube_watch_close(w);
}

static json_t *widget_crd(void)
{
    const char *y =
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"widgets.e2e.ckube.io\"},"
        "\"spec\":{\"group\":\"e2e.ckube.io\",\"scope\":\"Namespaced\","
        "\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\",\"kind\":\"Widget\","
        "\"shortNames\":[\"wdg\"]},"
        "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
        "\"subresources\":{\"status\":{}},"
        "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{"
        "\"spec\":{\"type\":\"object\",\"properties\":{\"replicas\":{\"type\":\"integer\"},"
        "\"enabled\":{\"type\":\"boolean\"},\"color\":{\"type\":\"string\"}}},"
        "\"status\":{\"type\":\"object\",\"properties\":{\"ready\":{\"type\":\"boolean\"}}}}}}}]}}";
    return json_loads(y, 0, NULL);
}

static void test_crd_and_mapper(void **state)
{
    (void)state;
    NEED_SERVER();
    ckube_status *err = NULL;
    ckube_rest_mapper *m = ckube_rest_mapper_new(g_c);
    ckube_rest_mapping mp;

    /* built-ins */
    expect_ok(ckube_rest_mapper_kind(m, "v1", "ConfigMap", &mp, &err), err, "ConfigMap");
    assert_string_equal(mp.gvr.resource, "configmaps");
    assert_string_equal(mp.gvr.group, "");
    assert_true(mp.namespaced);
    ckube_rest_mapping_clear(&mp);
    expect_ok(ckube_rest_mapper_kind(m, "v1", "Namespace", &mp, &err), err, "Namespace");
    assert_false(mp.namespaced);
    ckube_rest_mapping_clear(&mp);
    expect_ok(ckube_rest_mapper_kind(m, NULL, "Deployment", &mp, &err), err, "Deployment");
    assert_string_equal(mp.group, "apps");
    ckube_rest_mapping_clear(&mp);
    const char *names[][2] = {{"cm", "configmaps"},        {"configmap", "configmaps"},
                              {"ConfigMap", "configmaps"}, {"deployments.apps", "deployments"},
                              {"deploy", "deployments"},   {"deployments.v1.apps", "deployments"},
                              {"ns", "namespaces"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        expect_ok(ckube_rest_mapper_resource(m, NULL, names[i][0], &mp, &err), err, names[i][0]);
        assert_string_equal(mp.resource, names[i][1]);
        ckube_rest_mapping_clear(&mp);
    }

    /* the kind does not exist yet */
    assert_int_equal(ckube_rest_mapper_kind(m, "e2e.ckube.io/v1", "Widget", &mp, &err), -1);
    assert_int_equal(err->code, 404);
    assert_string_equal(err->message,
                        "no matches for kind \"Widget\" in version \"e2e.ckube.io/v1\"");
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(ckube_rest_mapper_resource(m, NULL, "wdg", &mp, &err), -1);
    assert_string_equal(err->message, "the server doesn't have a resource type \"wdg\"");
    ckube_status_free(err);
    err = NULL;

    json_t *crd = widget_crd();
    expect_ok(ckube_create(g_c, &CRD, NULL, crd, NULL, NULL, &err), err, "create CRD");
    json_decref(crd);
    /* found once the mapper may rediscover (1 s minimum interval) */
    ctu_sleep_ms(1100);
    expect_ok(ckube_rest_mapper_kind(m, "e2e.ckube.io/v1", "Widget", &mp, &err), err, "Widget");
    assert_string_equal(mp.gvr.resource, "widgets");
    assert_string_equal(mp.gvr.group, "e2e.ckube.io");
    assert_string_equal(mp.singular, "widget");
    assert_int_equal(mp.nshort_names, 1);
    assert_string_equal(mp.short_names[0], "wdg");
    assert_true(mp.namespaced);
    ckube_rest_mapping_clear(&mp);
    expect_ok(ckube_rest_mapper_resource(m, "e2e.ckube.io", "wdg", &mp, &err), err, "wdg");
    ckube_rest_mapping_clear(&mp);

    /* discovery lists every resource with its verbs */
    ckube_api_resource_list *all = NULL;
    expect_ok(ckube_discovery_resources(g_c, false, &all, &err), err, "discovery");
    bool cm_ok = false, widgets_ok = false, sub = false;
    for (size_t i = 0; i < all->n; i++) {
        ckube_api_resource *r = &all->items[i];
        if (!strcmp(r->resource, "configmaps") && !*r->group)
            cm_ok = ckube_api_resource_has_verb(r, "deletecollection") &&
                    ckube_api_resource_has_verb(r, "watch") && r->namespaced;
        if (!strcmp(r->resource, "widgets"))
            widgets_ok = !strcmp(r->kind, "Widget") && ckube_api_resource_has_verb(r, "list");
        if (strchr(r->resource, '/'))
            sub = true;
    }
    assert_true(cm_ok);
    assert_true(widgets_ok);
    assert_false(sub);
    ckube_api_resource_list_free(all);
    expect_ok(ckube_discovery_resources(g_c, true, &all, &err), err, "discovery+sub");
    sub = false;
    for (size_t i = 0; i < all->n; i++)
        if (!strcmp(all->items[i].resource, "widgets/status"))
            sub = true;
    assert_true(sub);
    ckube_api_resource_list_free(all);
    expect_ok(ckube_rest_mapper_resources(m, &all, &err), err, "mapper resources");
    assert_true(all->n > 10);
    ckube_api_resource_list_free(all);
    ckube_rest_mapper_free(m);
}

static void test_custom_resources(void **state)
{
    (void)state;
    NEED_SERVER();
    ckube_status *err = NULL;
    json_t *out = NULL;
    /* the CRD from test_crd_and_mapper; create it if run alone */
    json_t *crd = widget_crd();
    if (ckube_create(g_c, &CRD, NULL, crd, NULL, NULL, &err) != 0) {
        assert_int_equal(err->code, 409);
        ckube_status_free(err);
        err = NULL;
    }
    json_decref(crd);

    /* explicit zero and false survive the round trip */
    json_t *w = json_pack("{s:s,s:s,s:{s:s},s:{s:i,s:b,s:s}}", "apiVersion", "e2e.ckube.io/v1",
                          "kind", "Widget", "metadata", "name", "w0", "spec", "replicas", 0,
                          "enabled", 0, "color", "");
    int rc = -1;
    for (int i = 0; i < 40 && rc != 0; i++) { /* served "at once", but allow a moment */
        ckube_status_free(err);
        err = NULL;
        rc = ckube_create(g_c, &WIDGETS, "default", w, NULL, &out, &err);
        if (rc != 0)
            ctu_sleep_ms(50);
    }
    expect_ok(rc, err, "create widget");
    json_decref(out);
    expect_ok(ckube_get(g_c, &WIDGETS, "default", "w0", &out, &err), err, "get widget");
    json_t *r = ckube_json_get_path(out, "spec.replicas");
    assert_true(json_is_integer(r) && json_integer_value(r) == 0);
    assert_true(json_is_false(ckube_json_get_path(out, "spec.enabled")));
    assert_string_equal(json_string_value(ckube_json_get_path(out, "spec.color")), "");

    /* status subresource */
    json_object_set_new(out, "status", json_pack("{s:b}", "ready", 1));
    json_t *st = NULL;
    expect_ok(ckube_update_status(g_c, &WIDGETS, "default", out, NULL, &st, &err), err,
              "update status");
    assert_true(json_is_true(ckube_json_get_path(st, "status.ready")));
    /* a main-resource update does not touch status */
    json_object_set_new(st, "status", json_pack("{s:b}", "ready", 0));
    json_object_set_new(json_object_get(st, "spec"), "replicas", json_integer(2));
    json_t *st2 = NULL;
    expect_ok(ckube_update(g_c, &WIDGETS, "default", st, NULL, &st2, &err), err, "update");
    assert_true(json_is_true(ckube_json_get_path(st2, "status.ready")));
    assert_int_equal(json_integer_value(ckube_json_get_path(st2, "spec.replicas")), 2);
    json_decref(st);
    json_decref(st2);
    json_decref(out);

    /* custom resources need a resourceVersion on update: 422 */
    assert_int_equal(ckube_update(g_c, &WIDGETS, "default", w, NULL, &out, &err), -1);
    assert_int_equal(err->code, 422);
    assert_string_equal(err->reason, "Invalid");
    assert_true(err->ncauses >= 1);
    assert_string_equal(err->causes[0].field, "metadata.resourceVersion");
    ckube_status_free(err);
    err = NULL;

    /* merge patch works, strategic is refused with 415 */
    const char *mp = "{\"spec\":{\"color\":\"red\"}}";
    expect_ok(ckube_patch(g_c, &WIDGETS, "default", "w0", CKUBE_PATCH_MERGE, mp, strlen(mp), NULL,
                          &out, &err),
              err, "merge patch widget");
    assert_string_equal(json_string_value(ckube_json_get_path(out, "spec.color")), "red");
    json_decref(out);
    assert_int_equal(ckube_patch(g_c, &WIDGETS, "default", "w0", CKUBE_PATCH_STRATEGIC, mp,
                                 strlen(mp), NULL, &out, &err),
                     -1);
    assert_int_equal(err->code, 415);
    assert_string_equal(err->reason, "UnsupportedMediaType");
    ckube_status_free(err);
    err = NULL;

    /* a watch on the custom resource */
    json_t *list = NULL;
    expect_ok(ckube_list(g_c, &WIDGETS, "default", NULL, &list, &err), err, "list widgets");
    assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
    ckube_list_opts lo = {.resource_version = json_string_value(
                              ckube_json_get_path(list, "metadata.resourceVersion"))};
    ckube_watch *wt = NULL;
    expect_ok(ckube_watch_open(g_c, &WIDGETS, "default", &lo, &wt, &err), err, "watch widgets");
    json_decref(list);
    ckube_delete_opts dopt = {.propagation_policy = "Foreground"};
    expect_ok(ckube_delete(g_c, &WIDGETS, "default", "w0", &dopt, &out, &err), err,
              "delete widget");
    json_decref(out);
    ckube_watch_event_type t = 0;
    json_t *o = NULL;
    /* Foreground deletion may first show a MODIFIED (finalizer); wait for DELETED */
    for (int i = 0; i < 5 && t != CKUBE_WATCH_DELETED; i++) {
        assert_int_equal(ckube_watch_next(wt, &t, &o, &err), 1);
        assert_string_equal(ckube_obj_name(o), "w0");
        json_decref(o);
    }
    assert_int_equal(t, CKUBE_WATCH_DELETED);
    ckube_watch_close(wt);
    json_decref(w);

    /* deletecollection across the custom resource */
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        json_t *c = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "e2e.ckube.io/v1", "kind",
                              "Widget", "metadata", "name", name);
        expect_ok(ckube_create(g_c, &WIDGETS, "default", c, NULL, NULL, &err), err, "create c");
        json_decref(c);
    }
    expect_ok(ckube_delete_collection(g_c, &WIDGETS, "default", NULL, NULL, &err), err,
              "deletecollection widgets");
    expect_ok(ckube_list_all(g_c, &WIDGETS, NULL, NULL, &out, &err), err, "list all widgets");
    assert_int_equal(json_array_size(json_object_get(out, "items")), 0);
    json_decref(out);
}

static void test_raw_request(void **state)
{
    (void)state;
    NEED_SERVER();
    ckube_request rq = {.method = "GET", .path = "/version"};
    ckube_response resp;
    ckube_status *err = NULL;
    expect_ok(ckube_client_do(g_c, &rq, &resp, &err), err, "/version");
    assert_int_equal(resp.code, 200);
    json_t *v = json_loads(resp.body, 0, NULL);
    assert_non_null(json_string_value(json_object_get(v, "gitVersion")));
    json_decref(v);
    ckube_response_free(&resp);
    rq.path = "/healthz";
    rq.accept = "text/plain";
    expect_ok(ckube_client_do(g_c, &rq, &resp, &err), err, "/healthz");
    assert_string_equal(resp.body, "ok");
    ckube_response_free(&resp);
    assert_string_equal(ckube_client_namespace(g_c), "default");
}

/* ------------------------------------------------------------------ */
/* TLS against the server's own certificates (g_dir/pki)               */
/* ------------------------------------------------------------------ */

/* GET /version with cfg (borrowed). Returns 0, or -1 with *code (the
 * Status code; 0 for a transport error, such as a refused certificate)
 * and *msg (malloc'd) set. */
static int tls_version(const ckube_config *cfg, int *code, char **msg)
{
    *code = -1;
    *msg = NULL;
    ckube_status *err = NULL;
    ckube_client *c = ckube_client_new(cfg, &err);
    if (!c) {
        *msg = strdup(err && err->message ? err->message : "?");
        ckube_status_free(err);
        return -1;
    }
    ckube_request rq = {.method = "GET", .path = "/version"};
    ckube_response resp;
    int rc = ckube_client_do(c, &rq, &resp, &err);
    if (rc == 0) {
        *code = resp.code;
        json_t *v = json_loads(resp.body ? resp.body : "", 0, NULL);
        if (resp.code != 200 || !json_string_value(json_object_get(v, "gitVersion"))) {
            *msg = ctu_fmt("GET /version: %d %s", resp.code, resp.body ? resp.body : "");
            rc = -1;
        }
        json_decref(v);
        ckube_response_free(&resp);
    } else {
        *code = err ? err->code : -1;
        *msg = strdup(err && err->message ? err->message : "?");
        ckube_response_free(&resp); /* filled too when the server answered non-2xx */
    }
    ckube_status_free(err);
    ckube_client_free(c);
    return rc;
}

static void expect_tls_ok(const ckube_config *cfg, const char *what)
{
    int code;
    char *msg;
    if (tls_version(cfg, &code, &msg) != 0)
        fail_msg("%s: %s", what, msg ? msg : "?");
    free(msg);
}

/* The request fails before HTTP (code 0: no Status from the server),
 * with client-go's `Get "URL": ...` message. */
static void expect_tls_refused(const ckube_config *cfg, const char *url_prefix, const char *what)
{
    int code;
    char *msg;
    if (tls_version(cfg, &code, &msg) == 0)
        fail_msg("%s: the request succeeded", what);
    char *want = ctu_fmt("Get \"%s", url_prefix);
    if (code != 0 || !msg || !strstr(msg, want))
        fail_msg("%s: want a transport error naming %s, got %d \"%s\"", what, want, code,
                 msg ? msg : "");
    free(want);
    free(msg);
}

static void test_tls(void **state)
{
    (void)state;
    NEED_SERVER();
    /* The kubeconfig the server wrote (g_c's) is https:// and works: the
     * other tests ran over it. */
    const char *host = ckube_client_host(g_c);
    assert_true(strncmp(host, "https://127.0.0.1:", 18) == 0);
    int port = atoi(host + 18);
    assert_true(port > 0);
    char *ip_url = ctu_fmt("https://127.0.0.1:%d", port);
    char *name_url = ctu_fmt("https://localhost:%d", port);
    char *ca = ctu_fmt("%s/pki/ca.crt", g_dir), *crt = ctu_fmt("%s/pki/admin.crt", g_dir),
         *key = ctu_fmt("%s/pki/admin.key", g_dir);

    /* files: the cluster CA, the admin's certificate and key */
    ckube_config cfg = {
        .host = ip_url, .ca_file = ca, .cert_file = crt, .key_file = key, .qps = -1};
    expect_tls_ok(&cfg, "TLS with files");
    /* the serving certificate names localhost too */
    cfg.host = name_url;
    expect_tls_ok(&cfg, "TLS to localhost");
    /* tls_server_name: verified as that name, whatever the host */
    cfg.host = ip_url;
    cfg.tls_server_name = "localhost";
    expect_tls_ok(&cfg, "TLS with tls_server_name localhost");
    cfg.tls_server_name = "api.not-in-the-certificate.example";
    expect_tls_refused(&cfg, ip_url, "a server name the serving certificate lacks");

    /* data: the kubeconfig as the server wrote it, host changed */
    char *kc = ctu_fmt("%s/kubeconfig", g_dir);
    ckube_config_overrides o = {.kubeconfig = kc};
    ckube_config *loaded = NULL;
    ckube_status *err = NULL;
    expect_ok(ckube_config_load(&o, &loaded, &err), err, "load the kubeconfig");
    assert_non_null(loaded->ca_data);
    assert_non_null(loaded->cert_data);
    assert_non_null(loaded->key_data);
    assert_false(loaded->insecure_skip_tls_verify);
    free(loaded->host);
    loaded->host = strdup(name_url);
    loaded->qps = -1;
    expect_tls_ok(loaded, "TLS with data to localhost");
    /* no CA: the system roots do not know the cluster's */
    free(loaded->ca_data);
    loaded->ca_data = NULL;
    loaded->ca_data_len = 0;
    expect_tls_refused(loaded, name_url, "TLS without the cluster CA");
    /* ... unless verification is off */
    loaded->insecure_skip_tls_verify = true;
    expect_tls_ok(loaded, "TLS with insecure_skip_tls_verify");
    ckube_config_free(loaded);

    /* In-cluster: the service account directory's token and ca.crt, the
     * host from KUBERNETES_SERVICE_HOST/PORT. The token is not one the
     * server made: the request gets through TLS to the API, which answers
     * kube-apiserver's 401 for an unknown token (a real one is
     * test_in_cluster_service_account's). */
    char *sa = ctu_fmt("%s/serviceaccount", g_dir);
    mkdir(sa, 0700);
    char *cmd = ctu_fmt("cp '%s' '%s/ca.crt'", ca, sa);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    free(ctu_write(sa, "token", "made-up-token\n"));
    free(ctu_write(sa, "namespace", "kube-team\n"));
    char *port_s = ctu_fmt("%d", port);
    setenv("CKUBE_SERVICEACCOUNT_DIR", sa, 1);
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port_s, 1);
    ckube_config *ic = NULL;
    expect_ok(ckube_config_in_cluster(&ic, &err), err, "in-cluster config");
    assert_string_equal(ic->host, ip_url);
    assert_string_equal(ic->bearer_token, "made-up-token");
    assert_string_equal(ic->namespace_, "kube-team");
    ic->qps = -1;
    int code;
    char *msg;
    if (tls_version(ic, &code, &msg) == 0 || code != 401 || !msg || strcmp(msg, "Unauthorized"))
        fail_msg("in-cluster with a made-up token: want the server's 401, got %d \"%s\"", code,
                 msg ? msg : "");
    free(msg);
    ckube_config_free(ic);
    /* ... and its ca.crt is what verifies the server: another CA's is refused */
    if (system("command -v openssl >/dev/null 2>&1") == 0) {
        cmd = ctu_fmt("cd '%s' && openssl req -x509 -newkey ec -pkeyopt "
                      "ec_paramgen_curve:prime256v1 -nodes -keyout other.key -out ca.crt "
                      "-days 1 -subj /CN=another-ca >/dev/null 2>&1",
                      sa);
        assert_int_equal(system(cmd), 0);
        free(cmd);
        expect_ok(ckube_config_in_cluster(&ic, &err), err, "in-cluster config, another CA");
        ic->qps = -1;
        expect_tls_refused(ic, ip_url, "in-cluster with another CA's ca.crt");
        ckube_config_free(ic);
    }
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("CKUBE_SERVICEACCOUNT_DIR");

    free(port_s);
    free(sa);
    free(kc);
    free(ca);
    free(crt);
    free(key);
    free(ip_url);
    free(name_url);
}

/* ------------------------------------------------------------------ */
/* In-cluster as a ServiceAccount                                      */
/* ------------------------------------------------------------------ */

static const ckube_gvr SERVICEACCOUNTS = {"", "v1", "serviceaccounts"};
static const ckube_gvr NAMESPACES = {"", "v1", "namespaces"};
static const ckube_gvr SSR = {"authentication.k8s.io", "v1", "selfsubjectreviews"};

/* A token for ServiceAccount ns/name, asked of the TokenRequest API as
 * `kubectl create token` and the kubelet ask (malloc'd). */
static char *request_token(const char *ns, const char *name)
{
    char *path = ckube_resource_path(&SERVICEACCOUNTS, ns, name, "token");
    const char *body = "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
                       "\"spec\":{\"expirationSeconds\":3600}}";
    ckube_request rq = {.method = "POST", .path = path, .body = body, .body_len = strlen(body)};
    ckube_response resp;
    ckube_status *err = NULL;
    expect_ok(ckube_client_do(g_c, &rq, &resp, &err), err, "TokenRequest");
    assert_int_equal(resp.code, 201);
    json_t *tr = json_loads(resp.body, 0, NULL);
    const char *tok = json_string_value(ckube_json_get_path(tr, "status.token"));
    assert_non_null(tok);
    char *out = strdup(tok);
    json_decref(tr);
    ckube_response_free(&resp);
    free(path);
    return out;
}

/* Who `c` is, by a SelfSubjectReview: 0 with *info (status.userInfo, a
 * new reference), or -1 with *err. */
static int whoami(ckube_client *c, json_t **info, ckube_status **err)
{
    json_t *ssr = json_pack("{s:s,s:s}", "apiVersion", "authentication.k8s.io/v1", "kind",
                            "SelfSubjectReview");
    json_t *out = NULL;
    int rc = ckube_create(c, &SSR, NULL, ssr, NULL, &out, err);
    json_decref(ssr);
    if (rc == 0) {
        *info = json_incref(ckube_json_get_path(out, "status.userInfo"));
        json_decref(out);
    }
    return rc;
}

/* Where RBAC is served, the ServiceAccount may read ConfigMaps in its
 * namespace (a Role and a RoleBinding, as one would deploy with a
 * controller); where it is not, every request is allowed already. */
static void grant_configmaps(const char *ns, const char *sa)
{
    static const ckube_gvr roles = {"rbac.authorization.k8s.io", "v1", "roles"};
    static const ckube_gvr bindings = {"rbac.authorization.k8s.io", "v1", "rolebindings"};
    json_t *role = json_pack("{s:s,s:s,s:{s:s},s:[{s:[s],s:[s],s:[s,s,s]}]}", "apiVersion",
                             "rbac.authorization.k8s.io/v1", "kind", "Role", "metadata", "name",
                             "configmap-reader", "rules", "apiGroups", "", "resources",
                             "configmaps", "verbs", "get", "list", "watch");
    json_t *rb = json_pack("{s:s,s:s,s:{s:s},s:[{s:s,s:s,s:s}],s:{s:s,s:s,s:s}}", "apiVersion",
                           "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata",
                           "name", "configmap-reader", "subjects", "kind", "ServiceAccount", "name",
                           sa, "namespace", ns, "roleRef", "apiGroup", "rbac.authorization.k8s.io",
                           "kind", "Role", "name", "configmap-reader");
    ckube_status *err = NULL;
    if (ckube_create(g_c, &roles, ns, role, NULL, NULL, &err) == 0)
        expect_ok(ckube_create(g_c, &bindings, ns, rb, NULL, NULL, &err), err, "RoleBinding");
    else if (!ckube_is_not_found(err))
        expect_ok(-1, err, "Role");
    ckube_status_free(err);
    json_decref(role);
    json_decref(rb);
}

/* ConfigMap names an informer's handler saw, with how. */
struct seen {
    pthread_mutex_t mu;
    json_t *added; /* name -> true: in the initial list, false: watched */
    json_t *updated;
};

static void seen_add(void *ud, const json_t *obj, bool initial)
{
    struct seen *s = ud;
    pthread_mutex_lock(&s->mu);
    json_object_set_new(s->added, ckube_obj_name(obj), json_boolean(initial));
    pthread_mutex_unlock(&s->mu);
}

static void seen_update(void *ud, const json_t *old_obj, const json_t *new_obj)
{
    (void)old_obj;
    struct seen *s = ud;
    pthread_mutex_lock(&s->mu);
    json_object_set_new(s->updated, ckube_obj_name(new_obj),
                        json_incref(ckube_json_get_path(new_obj, "data.k")));
    pthread_mutex_unlock(&s->mu);
}

/* What `s` has for name in `which` (a new reference, or NULL), waiting up
 * to 10 s for it. */
static json_t *wait_seen(struct seen *s, json_t *const *which, const char *name)
{
    json_t *v = NULL;
    for (int i = 0; i < 400 && !v; i++) {
        pthread_mutex_lock(&s->mu);
        v = json_incref(json_object_get(*which, name));
        pthread_mutex_unlock(&s->mu);
        if (!v)
            ctu_sleep_ms(25);
    }
    return v;
}

static char *saved_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    free(value);
}

static void test_in_cluster_service_account(void **state)
{
    (void)state;
    NEED_SERVER();
    const char *ns = "incluster";
    ckube_status *err = NULL;
    json_t *out = NULL;
    json_t *nso = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                            "metadata", "name", ns);
    expect_ok(ckube_create(g_c, &NAMESPACES, NULL, nso, NULL, NULL, &err), err, "namespace");
    json_decref(nso);
    json_t *sa = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ServiceAccount",
                           "metadata", "name", "ic-bot");
    expect_ok(ckube_create(g_c, &SERVICEACCOUNTS, ns, sa, NULL, &out, &err), err, "ServiceAccount");
    json_decref(sa);
    char *sa_uid = strdup(ckube_obj_uid(out));
    json_decref(out);
    grant_configmaps(ns, "ic-bot");
    char *token = request_token(ns, "ic-bot");

    /* The pod's view: /var/run/secrets/kubernetes.io/serviceaccount as
     * the kubelet lays it out, and the service's host and port. */
    const char *host = ckube_client_host(g_c);
    int port = atoi(host + strlen("https://127.0.0.1:"));
    char *dir = ctu_fmt("%s/sa-incluster", g_dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    char *cmd = ctu_fmt("cp '%s/pki/ca.crt' '%s/ca.crt'", g_dir, dir);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    free(ctu_write(dir, "token", token));
    free(ctu_write(dir, "namespace", ns));
    char *home = ctu_fmt("%s/empty-home", g_dir);
    assert_int_equal(mkdir(home, 0700), 0);
    char *port_s = ctu_fmt("%d", port);
    char *old_kc = saved_env("KUBECONFIG"), *old_home = saved_env("HOME");
    setenv("CKUBE_SERVICEACCOUNT_DIR", dir, 1);
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port_s, 1);
    unsetenv("KUBECONFIG");
    setenv("HOME", home, 1);

    /* Nothing configured but the pod's files: ckube_config_load (what a
     * controller's main calls) falls back to them, as client-go's
     * deferred loader does. */
    ckube_config_overrides none = {0};
    ckube_config *cfg = NULL;
    expect_ok(ckube_config_load(&none, &cfg, &err), err, "in-cluster config");
    char *want_host = ctu_fmt("https://127.0.0.1:%d", port);
    assert_string_equal(cfg->host, want_host);
    assert_string_equal(cfg->bearer_token, token);
    assert_null(cfg->cert_file);
    assert_null(cfg->cert_data);
    assert_string_equal(cfg->namespace_, ns);
    cfg->qps = -1;
    ckube_client *ic = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    assert_non_null(ic);
    assert_string_equal(ckube_client_namespace(ic), ns);

    /* The server says who the client is: the ServiceAccount. */
    json_t *info = NULL;
    expect_ok(whoami(ic, &info, &err), err, "SelfSubjectReview as the ServiceAccount");
    assert_string_equal(json_string_value(json_object_get(info, "username")),
                        "system:serviceaccount:incluster:ic-bot");
    assert_string_equal(json_string_value(json_object_get(info, "uid")), sa_uid);
    json_t *groups = json_pack("[s,s,s]", "system:serviceaccounts",
                               "system:serviceaccounts:incluster", "system:authenticated");
    assert_true(json_equal(json_object_get(info, "groups"), groups));
    json_decref(groups);
    json_t *cid = ckube_json_get_path(info, "extra");
    cid = json_array_get(json_object_get(cid, "authentication.kubernetes.io/credential-id"), 0);
    assert_non_null(json_string_value(cid));
    assert_int_equal(strncmp(json_string_value(cid), "JTI=", 4), 0);
    json_decref(info);

    /* An informer on the in-cluster client, in its namespace: a ConfigMap
     * made before it starts comes in its first list, one made after by
     * its watch, a change as an update. */
    json_t *listed = configmap("listed", "ic"), *watched = configmap("watched", "ic");
    expect_ok(ckube_create(g_c, &CM, ns, listed, NULL, NULL, &err), err, "ConfigMap listed");
    struct seen seen = {.added = json_object(), .updated = json_object()};
    pthread_mutex_init(&seen.mu, NULL);
    ckube_informer_factory_opts fo = {.namespace_ = ckube_client_namespace(ic)};
    ckube_informer_factory *factory = ckube_informer_factory_new(ic, &fo);
    ckube_shared_informer *inf = ckube_informer_factory_for(factory, &CM);
    assert_non_null(inf);
    ckube_event_handler h = {.on_add = seen_add, .on_update = seen_update, .ud = &seen};
    assert_non_null(ckube_shared_informer_add_handler(inf, &h));
    assert_int_equal(ckube_informer_factory_start(factory), 0);
    assert_true(ckube_informer_factory_wait_for_cache_sync(factory, CKUBE_SEC(10)));
    json_t *v = wait_seen(&seen, &seen.added, "listed");
    assert_true(json_is_true(v)); /* in the initial list */
    json_decref(v);
    expect_ok(ckube_create(g_c, &CM, ns, watched, NULL, NULL, &err), err, "ConfigMap watched");
    v = wait_seen(&seen, &seen.added, "watched");
    assert_true(json_is_false(v)); /* from the watch */
    json_decref(v);
    const char *mp = "{\"data\":{\"k\":\"changed\"}}";
    expect_ok(
        ckube_patch(g_c, &CM, ns, "watched", CKUBE_PATCH_MERGE, mp, strlen(mp), NULL, NULL, &err),
        err, "patch");
    v = wait_seen(&seen, &seen.updated, "watched");
    assert_string_equal(json_string_value(v), "changed");
    json_decref(v);
    ckube_lister lister = ckube_shared_informer_lister(inf);
    json_t *got = ckube_lister_get(&lister, ns, "watched");
    assert_non_null(got);
    ckube_obj_unref(got);
    ckube_informer_factory_free(factory);
    pthread_mutex_destroy(&seen.mu);
    json_decref(seen.added);
    json_decref(seen.updated);
    json_decref(listed);
    json_decref(watched);

    /* The ServiceAccount deleted: its token is refused with the server's
     * own Status, on every request. */
    expect_ok(ckube_delete(g_c, &SERVICEACCOUNTS, ns, "ic-bot", NULL, NULL, &err), err,
              "delete the ServiceAccount");
    info = NULL;
    assert_int_equal(whoami(ic, &info, &err), -1);
    assert_null(info);
    assert_int_equal(err->code, 401);
    assert_string_equal(err->reason, "Unauthorized");
    assert_string_equal(err->message, "Unauthorized");
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(ckube_get(ic, &CM, ns, "watched", &out, &err), -1);
    assert_int_equal(err->code, 401);
    assert_string_equal(err->reason, "Unauthorized");
    ckube_status_free(err);
    err = NULL;
    ckube_client_free(ic);

    restore_env("KUBECONFIG", old_kc);
    restore_env("HOME", old_home);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("CKUBE_SERVICEACCOUNT_DIR");
    free(want_host);
    free(port_s);
    free(home);
    free(dir);
    free(token);
    free(sa_uid);
}

int main(void)
{
    if (getenv("CKUBE_TEST_V"))
        ckube_log_set_verbosity(atoi(getenv("CKUBE_TEST_V")));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raw_request),
        cmocka_unit_test(test_configmap_crud),
        cmocka_unit_test(test_list_paging_selectors),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_crd_and_mapper),
        cmocka_unit_test(test_custom_resources),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_in_cluster_service_account),
    };
    return cmocka_run_group_tests(tests, start_server, stop_all);
}
