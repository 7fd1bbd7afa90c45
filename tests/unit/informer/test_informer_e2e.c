/* test_informer_e2e.c - a shared informer over configmaps on a real
 * `ckube server` stays consistent through 10,000 random creates, updates
 * and deletes with the server killed (-9) and restarted in the middle.
 *
 * Three handlers each keep their own view (name -> resourceVersion) built
 * only from the events they receive; at the end every view, and the
 * informer's store, must equal a fresh list from the server. Writers retry
 * through the outage the way a careful client does: a create that comes
 * back 409 after a lost answer, or a delete that comes back 404, had
 * already happened.
 */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/informer.h>
#include <ckube/json.h>

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

#define NS "inf-e2e"
#define NAMES 200
#define WRITERS 4
#define TOTAL_OPS 10000

static const ckube_gvr CM = {"", "v1", "configmaps"};
static const ckube_gvr NSGVR = {"", "v1", "namespaces"};

/* One handler's view: name -> resourceVersion, from events only. */
struct view {
    pthread_mutex_t mu;
    json_t *objs; /* object: name -> rv string */
    int adds, updates, deletes;
};

static void v_add(void *ud, const json_t *obj, bool initial)
{
    (void)initial;
    struct view *v = ud;
    pthread_mutex_lock(&v->mu);
    json_object_set_new(v->objs, ckube_obj_name(obj), json_string(ckube_obj_resource_version(obj)));
    v->adds++;
    pthread_mutex_unlock(&v->mu);
}

static void v_update(void *ud, const json_t *old_obj, const json_t *new_obj)
{
    (void)old_obj;
    struct view *v = ud;
    pthread_mutex_lock(&v->mu);
    json_object_set_new(v->objs, ckube_obj_name(new_obj),
                        json_string(ckube_obj_resource_version(new_obj)));
    v->updates++;
    pthread_mutex_unlock(&v->mu);
}

static void v_delete(void *ud, const json_t *obj, const char *tombstone_key)
{
    (void)tombstone_key;
    struct view *v = ud;
    pthread_mutex_lock(&v->mu);
    json_object_del(v->objs, ckube_obj_name(obj));
    v->deletes++;
    pthread_mutex_unlock(&v->mu);
}

struct shared {
    ckube_client *client;
    struct test_server srv;
    pthread_mutex_t mu;
    int ops_done;
    unsigned seed;
    int stop; /* set (atomically) when the test gives up: writers return */
};

/* Retries `op` through transport errors (code 0) and 5xx for up to 60 s.
 * Returns the final status code class: 0 = ok, else the HTTP code. */
static int with_retry(struct shared *sh,
                      int (*op)(struct shared *, const char *, int, ckube_status **),
                      const char *name, int arg)
{
    bool retried = false;
    for (int attempt = 0; attempt < 1200; attempt++) {
        if (__atomic_load_n(&sh->stop, __ATOMIC_RELAXED))
            return -1;
        ckube_status *err = NULL;
        if (op(sh, name, arg, &err) == 0)
            return 0;
        int code = err ? err->code : -1;
        ckube_status_free(err);
        if (code == 0 || code >= 500) {
            retried = true;
            usleep(50000);
            continue;
        }
        /* After a lost answer the earlier attempt may have been applied. */
        if (retried && (code == 409 || code == 404))
            return 0;
        return code;
    }
    return -1;
}

static int op_create(struct shared *sh, const char *name, int val, ckube_status **err)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", val);
    json_t *o = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                          "metadata", "name", name, "data", "v", buf);
    int rc = ckube_create(sh->client, &CM, NS, o, NULL, NULL, err);
    json_decref(o);
    return rc;
}

static int op_update(struct shared *sh, const char *name, int val, ckube_status **err)
{
    char patch[96];
    snprintf(patch, sizeof(patch), "{\"data\":{\"v\":\"%d\"}}", val);
    return ckube_patch(sh->client, &CM, NS, name, CKUBE_PATCH_MERGE, patch, strlen(patch), NULL,
                       NULL, err);
}

static int op_delete(struct shared *sh, const char *name, int val, ckube_status **err)
{
    (void)val;
    return ckube_delete(sh->client, &CM, NS, name, NULL, NULL, err);
}

struct writer {
    struct shared *sh;
    int id;
    int failures;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct shared *sh = w->sh;
    bool exists[NAMES] = {0};
    unsigned seed = 1234u + (unsigned)w->id;
    for (int i = 0; i < TOTAL_OPS / WRITERS && !__atomic_load_n(&sh->stop, __ATOMIC_RELAXED); i++) {
        /* This writer owns the names n with n % WRITERS == id. */
        int n = (int)(rand_r(&seed) % (NAMES / WRITERS)) * WRITERS + w->id;
        char name[32];
        snprintf(name, sizeof(name), "cm-%03d", n);
        int code;
        if (!exists[n]) {
            code = with_retry(sh, op_create, name, i);
            exists[n] = true;
        } else if (rand_r(&seed) % 4 == 0) {
            code = with_retry(sh, op_delete, name, 0);
            exists[n] = false;
        } else {
            code = with_retry(sh, op_update, name, i);
        }
        if (code != 0) {
            fprintf(stderr, "writer %d: op on %s failed with %d\n", w->id, name, code);
            w->failures++;
        }
        pthread_mutex_lock(&sh->mu);
        sh->ops_done++;
        pthread_mutex_unlock(&sh->mu);
    }
    return NULL;
}

/* name -> rv of a fresh list. */
static json_t *fresh_list(struct shared *sh)
{
    json_t *list = NULL;
    ckube_status *err = NULL;
    if (ckube_list_all(sh->client, &CM, NS, NULL, &list, &err) != 0) {
        fprintf(stderr, "list failed: %s\n", err && err->message ? err->message : "?");
        ckube_status_free(err);
        return NULL;
    }
    json_t *m = json_object();
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it)
        json_object_set_new(m, ckube_obj_name(it), json_string(ckube_obj_resource_version(it)));
    json_decref(list);
    return m;
}

static json_t *store_view(ckube_shared_informer *inf)
{
    ckube_obj_list l = {0};
    json_t *m = json_object();
    if (ckube_store_list(ckube_shared_informer_store(inf), &l) == 0) {
        for (size_t i = 0; i < l.n; i++)
            json_object_set_new(m, ckube_obj_name(l.items[i]),
                                json_string(ckube_obj_resource_version(l.items[i])));
    }
    ckube_obj_list_free(&l);
    return m;
}

static bool views_match(struct view *views, ckube_shared_informer *inf, json_t *want)
{
    bool ok = true;
    for (int h = 0; h < 3; h++) {
        pthread_mutex_lock(&views[h].mu);
        ok = ok && json_equal(views[h].objs, want);
        pthread_mutex_unlock(&views[h].mu);
    }
    json_t *st = store_view(inf);
    ok = ok && json_equal(st, want);
    json_decref(st);
    return ok;
}

static void test_informer_consistent_through_random_ops_and_restart(void **state)
{
    (void)state;
    struct shared sh = {0};
    pthread_mutex_init(&sh.mu, NULL);
    assert_int_equal(tsu_start(&sh.srv, "sqlite"), 0);

    ckube_config_overrides ov = {.kubeconfig = sh.srv.kubeconfig};
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_config_load(&ov, &cfg, &err), 0);
    cfg->qps = -1;           /* no client-side limit: this is a load test */
    cfg->timeout_ms = 20000; /* no request may hang the test on a lost reply */
    sh.client = ckube_client_new(cfg, &err);
    assert_non_null(sh.client);
    ckube_config_free(cfg);

    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                           "name", NS);
    assert_int_equal(ckube_create(sh.client, &NSGVR, NULL, ns, NULL, NULL, &err), 0);
    json_decref(ns);

    ckube_informer_factory *f =
        ckube_informer_factory_new(sh.client, &(ckube_informer_factory_opts){.namespace_ = NS});
    ckube_shared_informer *inf = ckube_informer_factory_for(f, &CM);
    assert_non_null(inf);
    /* The factory hands out one informer per resource. */
    assert_ptr_equal(ckube_informer_factory_for(f, &CM), inf);
    struct view views[3];
    for (int h = 0; h < 3; h++) {
        pthread_mutex_init(&views[h].mu, NULL);
        views[h].objs = json_object();
        views[h].adds = views[h].updates = views[h].deletes = 0;
        ckube_event_handler eh = {
            .on_add = v_add, .on_update = v_update, .on_delete = v_delete, .ud = &views[h]};
        assert_non_null(ckube_shared_informer_add_handler(inf, &eh));
    }
    assert_int_equal(ckube_informer_factory_start(f), 0);
    assert_true(ckube_informer_factory_wait_for_cache_sync(f, CKUBE_SEC(30)));

    pthread_t th[WRITERS];
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){.sh = &sh, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    /* Kill the server half-way through and bring it back. */
    for (;;) {
        pthread_mutex_lock(&sh.mu);
        int done = sh.ops_done;
        pthread_mutex_unlock(&sh.mu);
        if (done >= TOTAL_OPS / 2)
            break;
        usleep(10000);
    }
    tsu_stop(&sh.srv, SIGKILL);
    usleep(300000);
    int restarted = tsu_start(&sh.srv, "sqlite");
    if (restarted != 0) {
        /* Fail fast, with no writer left retrying against a dead port. */
        __atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < WRITERS; i++)
            pthread_join(th[i], NULL);
        ckube_informer_factory_free(f);
    }
    assert_int_equal(restarted, 0);
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }

    json_t *want = fresh_list(&sh);
    assert_non_null(want);
    bool ok = false;
    for (int i = 0; i < 600 && !(ok = views_match(views, inf, want)); i++)
        usleep(50000);
    if (!ok) {
        for (int h = 0; h < 3; h++) {
            char *a = json_dumps(views[h].objs, JSON_COMPACT | JSON_SORT_KEYS);
            fprintf(stderr, "view %d: %.300s\n", h, a);
            free(a);
        }
        char *b = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        fprintf(stderr, "server: %.300s\n", b);
        free(b);
    }
    assert_true(ok);
    fprintf(stderr, "objects at the end: %zu; handler 0 saw %d adds, %d updates, %d deletes\n",
            json_object_size(want), views[0].adds, views[0].updates, views[0].deletes);
    assert_true(views[0].adds + views[0].updates + views[0].deletes >= TOTAL_OPS / 2);
    json_decref(want);

    ckube_informer_factory_free(f);
    for (int h = 0; h < 3; h++) {
        json_decref(views[h].objs);
        pthread_mutex_destroy(&views[h].mu);
    }
    ckube_client_free(sh.client);
    assert_int_equal(tsu_stop(&sh.srv, SIGTERM), 0);
    pthread_mutex_destroy(&sh.mu);
}

/* A metadata-only informer on the real server: objects come as
 * PartialObjectMetadata (the server cuts them; nothing but metadata is
 * sent), and later changes arrive the same way. */
static bool meta_has_label(ckube_shared_informer *inf, const char *key, const char *label)
{
    json_t *o = ckube_store_get(ckube_shared_informer_store(inf), key);
    bool has = o && json_object_get(ckube_json_get_path(o, "metadata.labels"), label);
    ckube_obj_unref(o);
    return has;
}

/* A memory-backed server, a client of it, and namespace `ns` there. */
static ckube_client *server_with_namespace(struct test_server *srv, const char *ns)
{
    /* no controllers: kube-root-ca.crt would be one ConfigMap more */
    srv->no_controller_manager = true;
    assert_int_equal(tsu_start(srv, "memory"), 0);
    ckube_config_overrides ov = {.kubeconfig = srv->kubeconfig};
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_config_load(&ov, &cfg, &err), 0);
    ckube_client *c = ckube_client_new(cfg, &err);
    assert_non_null(c);
    ckube_config_free(cfg);
    json_t *o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                          "name", ns);
    assert_int_equal(ckube_create(c, &NSGVR, NULL, o, NULL, NULL, &err), 0);
    json_decref(o);
    return c;
}

static void test_metadata_informer(void **state)
{
    (void)state;
    struct test_server srv = {0};
    ckube_status *err = NULL;
    ckube_client *c = server_with_namespace(&srv, "meta-inf");
    for (int i = 0; i < 3; i++) {
        json_t *cm = json_pack("{s:s,s:s,s:{s:s+,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind",
                               "ConfigMap", "metadata", "name", "m",
                               i == 0   ? "0"
                               : i == 1 ? "1"
                                        : "2",
                               "labels", "app", "x", "data", "big", "0123456789abcdef");
        assert_int_equal(ckube_create(c, &CM, "meta-inf", cm, NULL, NULL, &err), 0);
        json_decref(cm);
    }
    ckube_list_watch *lw = ckube_list_watch_new_client(c, &CM, "meta-inf", NULL, NULL);
    ckube_informer_opts io = {.name = "meta", .metadata_only = true};
    ckube_shared_informer *inf = ckube_shared_informer_new(lw, &io);
    assert_non_null(inf);
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    ckube_shared_informer *infs[1] = {inf};
    assert_true(ckube_wait_for_cache_sync(infs, 1, CKUBE_SEC(10)));
    json_t *o = ckube_store_get(ckube_shared_informer_store(inf), "meta-inf/m1");
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "kind")), "PartialObjectMetadata");
    assert_string_equal(json_string_value(json_object_get(o, "apiVersion")), "meta.k8s.io/v1");
    assert_null(json_object_get(o, "data"));
    assert_string_equal(ckube_obj_name(o), "m1");
    assert_non_null(ckube_obj_uid(o));
    assert_true(meta_has_label(inf, "meta-inf/m1", "app"));
    ckube_obj_unref(o);
    assert_int_equal(ckube_shared_informer_object_count(inf), 3);

    /* Changes after the list come through the watch, in the same form. */
    const char *p = "{\"metadata\":{\"labels\":{\"later\":\"yes\"}}}";
    assert_int_equal(
        ckube_patch(c, &CM, "meta-inf", "m2", CKUBE_PATCH_MERGE, p, strlen(p), NULL, NULL, &err),
        0);
    bool seen = false;
    for (int i = 0; i < 200 && !(seen = meta_has_label(inf, "meta-inf/m2", "later")); i++)
        usleep(20000);
    assert_true(seen);
    o = ckube_store_get(ckube_shared_informer_store(inf), "meta-inf/m2");
    assert_string_equal(json_string_value(json_object_get(o, "kind")), "PartialObjectMetadata");
    assert_null(json_object_get(o, "data"));
    ckube_obj_unref(o);
    assert_int_equal(ckube_delete(c, &CM, "meta-inf", "m0", NULL, NULL, &err), 0);
    for (int i = 0; i < 200 && ckube_shared_informer_object_count(inf) != 2; i++)
        usleep(20000);
    assert_int_equal(ckube_shared_informer_object_count(inf), 2);

    ckube_shared_informer_free(inf);
    ckube_client_free(c);
    assert_int_equal(tsu_stop(&srv, SIGTERM), 0);
}

/* A streaming list against the real server: one watch with initial
 * events syncs the informer; the server's own metrics show no LIST. */
static void test_watch_list_informer(void **state)
{
    (void)state;
    struct test_server srv = {0};
    ckube_status *err = NULL;
    ckube_client *c = server_with_namespace(&srv, "wl");
    for (int i = 0; i < 50; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%02d", i);
        json_t *cm = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                               "metadata", "name", name, "data", "k", "v");
        assert_int_equal(ckube_create(c, &CM, "wl", cm, NULL, NULL, &err), 0);
        json_decref(cm);
    }
    ckube_list_watch *lw = ckube_list_watch_new_client(c, &CM, "wl", NULL, NULL);
    ckube_informer_opts io = {.name = "wl", .use_watch_list = true};
    ckube_shared_informer *inf = ckube_shared_informer_new(lw, &io);
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    ckube_shared_informer *infs[1] = {inf};
    assert_true(ckube_wait_for_cache_sync(infs, 1, CKUBE_SEC(10)));
    assert_int_equal(ckube_shared_informer_object_count(inf), 50);
    /* a change after the sync comes on the same stream */
    assert_int_equal(ckube_delete(c, &CM, "wl", "w07", NULL, NULL, &err), 0);
    for (int i = 0; i < 200 && ckube_shared_informer_object_count(inf) != 49; i++)
        usleep(20000);
    assert_int_equal(ckube_shared_informer_object_count(inf), 49);
    ckube_request rq = {.method = "GET", .path = "/metrics"};
    ckube_response resp;
    assert_int_equal(ckube_client_do(c, &rq, &resp, &err), 0);
    /* (the controller-manager child lists every resource cluster-wide) */
    assert_null(strstr(resp.body, "verb=\"LIST\",dry_run=\"\",group=\"\",version=\"v1\","
                                  "resource=\"configmaps\",subresource=\"\",scope=\"namespace\""));
    assert_non_null(strstr(resp.body, "apiserver_longrunning_requests{verb=\"WATCH\",group=\"\","
                                      "version=\"v1\",resource=\"configmaps\",subresource=\"\","
                                      "scope=\"namespace\",component=\"apiserver\"} 1"));
    ckube_response_free(&resp);
    ckube_shared_informer_free(inf);
    ckube_client_free(c);
    assert_int_equal(tsu_stop(&srv, SIGTERM), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_informer),
        cmocka_unit_test(test_watch_list_informer),
        cmocka_unit_test(test_informer_consistent_through_random_ops_and_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
