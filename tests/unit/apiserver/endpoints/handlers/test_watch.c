/* Watches (endpoints/handlers/watch.c) over HTTP against a server run in
 * this process (util/inproc_server.h): the initial ADDED events, resuming
 * from a resourceVersion, MODIFIED/DELETED, selector transitions, the
 * initial events' BOOKMARK, timeoutSeconds, 410 Expired from a small event
 * ring, single-object watches, Tables and shutdown. Every read of a stream
 * is bounded by a deadline of a few seconds. */
#include "util/inproc_server.h"

#include <inttypes.h>
#include <unistd.h>

#define CMS "/api/v1/namespaces/default/configmaps"

static int start(void **state, size_t ring)
{
    ips *s = calloc(1, sizeof *s);
    if (!s || ips_start(s, ring) != 0) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int setup(void **state)
{
    return start(state, 0);
}

/* A ring of 8 events per resource, so that a revision expires soon. */
static int setup_small_ring(void **state)
{
    return start(state, 8);
}

static int teardown(void **state)
{
    ips *s = *state;
    ips_stop(s);
    free(s);
    return 0;
}

/* Creates a ConfigMap in ns; returns its resourceVersion. */
static long long create_cm(ips *s, const char *ns, const char *name, const char *labels)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":{%s}},\"data\":{\"k\":\"v0\"}}",
             name, labels);
    http_resp *r = HPOST(s, body, "/api/v1/namespaces/%s/configmaps", ns);
    assert_http(r, 201);
    long long rv = atoll(jstr(r->json, "metadata.resourceVersion"));
    resp_free(r);
    return rv;
}

/* Merge-patches a ConfigMap of default; returns the new resourceVersion. */
static long long patch_cm(ips *s, const char *name, const char *patch)
{
    http_resp *r = HPATCH(s, "application/merge-patch+json", patch, CMS "/%s", name);
    assert_http(r, 200);
    long long rv = atoll(jstr(r->json, "metadata.resourceVersion"));
    resp_free(r);
    return rv;
}

static void delete_cm(ips *s, const char *name)
{
    http_resp *r = HDELETE(s, CMS "/%s", name);
    assert_http(r, 200);
    resp_free(r);
}

static void create_namespace(ips *s, const char *name)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", name);
    http_resp *r = HPOST(s, body, "/api/v1/namespaces");
    assert_http(r, 201);
    resp_free(r);
}

static long long ev_rv(const json_t *ev)
{
    return atoll(jstr(ev, "object.metadata.resourceVersion"));
}

/* Checks a watch's response head (the stream may have ended already:
 * an expired watch sends its ERROR event and its end at once). */
static void assert_stream_ok(watch_stream *w, const char *content_type)
{
    assert_int_equal(w->resp.code, 200);
    char buf[256];
    assert_non_null(http_header(&w->resp, "Content-Type", buf, sizeof buf));
    assert_string_equal(buf, content_type);
    assert_non_null(http_header(&w->resp, "Transfer-Encoding", buf, sizeof buf));
    assert_string_equal(buf, "chunked");
}

/* ---- tests ------------------------------------------------------------------- */

/* Without a resourceVersion, and with 0, a watch starts with an ADDED
 * event for every object there is, then follows changes. */
static void test_initial_events(void **state)
{
    ips *s = *state;
    long long rv_a = create_cm(s, "default", "a", "");
    long long rv_b = create_cm(s, "default", "b", "");
    const char *paths[] = {CMS "?watch=true", CMS "?watch=1&resourceVersion=0"};
    for (size_t i = 0; i < 2; i++) {
        watch_stream *w = watch_open(s, NULL, "%s", paths[i]);
        assert_stream_ok(w, "application/json");
        json_t *ev = expect_event(w, "ADDED", "a");
        assert_string_equal(jstr(ev, "object.kind"), "ConfigMap");
        assert_string_equal(jstr(ev, "object.apiVersion"), "v1");
        assert_string_equal(jstr(ev, "object.metadata.namespace"), "default");
        assert_string_equal(jstr(ev, "object.data.k"), "v0");
        assert_int_equal(ev_rv(ev), rv_a);
        assert_int_equal(json_object_size(ev), 2); /* type and object only */
        json_decref(ev);
        ev = expect_event(w, "ADDED", "b");
        assert_int_equal(ev_rv(ev), rv_b);
        json_decref(ev);
        expect_no_event(w, 300);
        watch_close(w);
    }
    /* and then the changes */
    watch_stream *w = watch_open(s, NULL, CMS "?watch=true");
    json_decref(expect_event(w, "ADDED", "a"));
    json_decref(expect_event(w, "ADDED", "b"));
    long long rv_c = create_cm(s, "default", "c", "");
    json_t *ev = expect_event(w, "ADDED", "c");
    assert_int_equal(ev_rv(ev), rv_c);
    json_decref(ev);
    expect_no_event(w, 200);
    watch_close(w);
}

/* From a resourceVersion: only what happened after it, no initial list. */
static void test_resume_from_resource_version(void **state)
{
    ips *s = *state;
    long long rv1 = create_cm(s, "default", "a", "");
    long long rv2 = patch_cm(s, "a", "{\"data\":{\"k\":\"v1\"}}");
    long long rv3 = create_cm(s, "default", "b", "");
    assert_true(rv1 < rv2 && rv2 < rv3);

    watch_stream *w = watch_open(s, NULL, CMS "?watch=true&resourceVersion=%lld", rv1);
    assert_stream_ok(w, "application/json");
    json_t *ev = expect_event(w, "MODIFIED", "a");
    assert_int_equal(ev_rv(ev), rv2);
    assert_string_equal(jstr(ev, "object.data.k"), "v1");
    json_decref(ev);
    ev = expect_event(w, "ADDED", "b");
    assert_int_equal(ev_rv(ev), rv3);
    json_decref(ev);
    expect_no_event(w, 200);
    watch_close(w);

    /* From the newest revision: nothing until the next change. */
    w = watch_open(s, NULL, CMS "?watch=true&resourceVersion=%lld", rv3);
    assert_stream_ok(w, "application/json");
    expect_no_event(w, 300);
    long long rv4 = patch_cm(s, "b", "{\"data\":{\"k\":\"v2\"}}");
    ev = expect_event(w, "MODIFIED", "b");
    assert_int_equal(ev_rv(ev), rv4);
    json_decref(ev);
    watch_close(w);
}

static void test_modified_and_deleted(void **state)
{
    ips *s = *state;
    long long rv0 = create_cm(s, "default", "m", "");
    watch_stream *w = watch_open(s, NULL, CMS "?watch=true&resourceVersion=%lld", rv0);
    assert_stream_ok(w, "application/json");

    long long rv1 = patch_cm(s, "m", "{\"data\":{\"k\":\"v1\",\"extra\":\"e\"}}");
    json_t *ev = expect_event(w, "MODIFIED", "m");
    assert_int_equal(ev_rv(ev), rv1);
    assert_string_equal(jstr(ev, "object.data.k"), "v1");
    assert_string_equal(jstr(ev, "object.data.extra"), "e");
    char uid[40];
    snprintf(uid, sizeof uid, "%s", jstr(ev, "object.metadata.uid"));
    json_decref(ev);

    /* Several changes in a row arrive in order. */
    long long rv2 = patch_cm(s, "m", "{\"data\":{\"k\":\"v2\"}}");
    long long rv3 = patch_cm(s, "m", "{\"data\":{\"k\":\"v3\"}}");
    ev = expect_event(w, "MODIFIED", "m");
    assert_int_equal(ev_rv(ev), rv2);
    json_decref(ev);
    ev = expect_event(w, "MODIFIED", "m");
    assert_int_equal(ev_rv(ev), rv3);
    assert_string_equal(jstr(ev, "object.data.k"), "v3");
    json_decref(ev);

    /* A no-op patch writes nothing, so no event. */
    patch_cm(s, "m", "{\"data\":{\"k\":\"v3\"}}");
    expect_no_event(w, 200);

    delete_cm(s, "m");
    ev = expect_event(w, "DELETED", "m");
    /* The object as it was, at the deletion's revision. */
    assert_string_equal(jstr(ev, "object.metadata.uid"), uid);
    assert_string_equal(jstr(ev, "object.data.k"), "v3");
    assert_true(ev_rv(ev) > rv3);
    json_decref(ev);
    expect_no_event(w, 200);

    /* A client that goes away: the server carries on. */
    watch_close(w);
    create_cm(s, "default", "after", "");
    http_resp *r = HGET(s, CMS "/after");
    assert_http(r, 200);
    resp_free(r);
}

/* With a label selector, an object that starts matching is ADDED and one
 * that stops matching is DELETED (cacher_watch_collect's translation). */
static void test_label_selector(void **state)
{
    ips *s = *state;
    create_cm(s, "default", "in", "\"app\":\"x\"");
    create_cm(s, "default", "out", "\"app\":\"y\"");
    watch_stream *w = watch_open(s, NULL, CMS "?watch=true&labelSelector=app%%3Dx");
    assert_stream_ok(w, "application/json");
    json_decref(expect_event(w, "ADDED", "in")); /* not "out" */
    expect_no_event(w, 200);

    /* changes to objects that never match are not seen */
    patch_cm(s, "out", "{\"data\":{\"k\":\"v1\"}}");
    expect_no_event(w, 200);
    /* a change that keeps matching */
    long long rv = patch_cm(s, "in", "{\"data\":{\"k\":\"v1\"}}");
    json_t *ev = expect_event(w, "MODIFIED", "in");
    assert_int_equal(ev_rv(ev), rv);
    json_decref(ev);
    /* stops matching: DELETED, at the revision of the change */
    rv = patch_cm(s, "in", "{\"metadata\":{\"labels\":{\"app\":\"y\"}}}");
    ev = expect_event(w, "DELETED", "in");
    assert_int_equal(ev_rv(ev), rv);
    json_decref(ev);
    /* starts matching: ADDED */
    rv = patch_cm(s, "out", "{\"metadata\":{\"labels\":{\"app\":\"x\"}}}");
    ev = expect_event(w, "ADDED", "out");
    assert_int_equal(ev_rv(ev), rv);
    assert_string_equal(jstr(ev, "object.metadata.labels.app"), "x");
    json_decref(ev);
    /* deleting a non-matching object is not seen; a matching one is */
    delete_cm(s, "in");
    expect_no_event(w, 200);
    delete_cm(s, "out");
    json_decref(expect_event(w, "DELETED", "out"));
    /* a set-based selector and a new object */
    watch_close(w);
    w = watch_open(s, NULL, CMS "?watch=true&labelSelector=app%%20in%%20(x%%2Cz)");
    assert_stream_ok(w, "application/json");
    expect_no_event(w, 200);
    create_cm(s, "default", "z1", "\"app\":\"z\"");
    create_cm(s, "default", "w1", "\"app\":\"w\"");
    json_decref(expect_event(w, "ADDED", "z1"));
    expect_no_event(w, 200);
    watch_close(w);
}

/* Periodic bookmarks come every 30 s (too slow for a unit test); the
 * bookmark that ends the initial events (sendInitialEvents) comes at
 * once. */
static void test_bookmarks(void **state)
{
    ips *s = *state;
    create_cm(s, "default", "a", "");
    long long rv_b = create_cm(s, "default", "b", "");
    watch_stream *w = watch_open(s, NULL,
                                 CMS "?watch=true&allowWatchBookmarks=true&sendInitialEvents=true"
                                     "&resourceVersionMatch=NotOlderThan");
    assert_stream_ok(w, "application/json");
    json_decref(expect_event(w, "ADDED", "a"));
    json_decref(expect_event(w, "ADDED", "b"));
    json_t *ev = expect_event(w, "BOOKMARK", NULL);
    assert_string_equal(jstr(ev, "object.kind"), "ConfigMap");
    assert_string_equal(jstr(ev, "object.apiVersion"), "v1");
    assert_true(atoll(jstr(ev, "object.metadata.resourceVersion")) >= rv_b);
    json_t *ann = ckube_json_get_path(ev, "object.metadata.annotations");
    assert_string_equal(json_string_value(json_object_get(ann, "k8s.io/initial-events-end")),
                        "true");
    json_decref(ev);
    expect_no_event(w, 200);
    /* then the changes */
    patch_cm(s, "a", "{\"data\":{\"k\":\"v1\"}}");
    json_decref(expect_event(w, "MODIFIED", "a"));
    watch_close(w);

    /* allowWatchBookmarks alone sends no bookmark straight away. */
    w = watch_open(s, NULL, CMS "?watch=true&allowWatchBookmarks=true&resourceVersion=%lld", rv_b);
    assert_stream_ok(w, "application/json");
    json_decref(expect_event(w, "MODIFIED", "a"));
    expect_no_event(w, 300);
    watch_close(w);
}

/* timeoutSeconds ends the stream cleanly (a terminating chunk). */
static void test_timeout_seconds(void **state)
{
    ips *s = *state;
    create_cm(s, "default", "a", "");
    int64_t t0 = ips_now_ms();
    watch_stream *w = watch_open(s, NULL, CMS "?watch=true&timeoutSeconds=1");
    assert_stream_ok(w, "application/json");
    json_decref(expect_event(w, "ADDED", "a"));
    assert_true(watch_wait_end(w, 4000));
    int64_t took = ips_now_ms() - t0;
    assert_int_equal(w->result, CURLE_OK);
    assert_true(took >= 900);
    assert_true(took < 4000);
    assert_null(watch_next(w, 0)); /* nothing after the end */
    watch_close(w);

    /* A timeoutSeconds that is not a number: 400 before any stream. */
    w = watch_open(s, NULL, CMS "?watch=true&timeoutSeconds=soon");
    assert_true(watch_wait_end(w, 3000));
    assert_int_equal(w->resp.code, 400);
    json_t *st = json_loads(w->resp.body.p, 0, NULL);
    assert_string_equal(jstr(st, "kind"), "Status");
    assert_string_equal(jstr(st, "reason"), "BadRequest");
    assert_string_equal(jstr(st, "message"), "invalid timeoutSeconds \"soon\"");
    json_decref(st);
    watch_close(w);
}

/* A resourceVersion older than the ring reaches back to: a 200 stream
 * with one ERROR event (a 410 Expired Status), then its end. */
static void test_too_old_resource_version(void **state)
{
    ips *s = *state;
    long long rvs[11];
    rvs[0] = create_cm(s, "default", "a", "");
    for (int i = 1; i < 11; i++) {
        char patch[64];
        snprintf(patch, sizeof patch, "{\"data\":{\"k\":\"v%d\"}}", i);
        rvs[i] = patch_cm(s, "a", patch);
    }
    /* 11 events, the ring keeps 8 (rvs[3..10]): watches from rvs[2] on
     * can be served. */
    watch_stream *w = watch_open(s, NULL, CMS "?watch=true&resourceVersion=%lld", rvs[0]);
    assert_stream_ok(w, "application/json");
    json_t *ev = expect_event(w, "ERROR", NULL);
    char want[128];
    snprintf(want, sizeof want, "too old resource version: %lld (%lld)", rvs[0], rvs[2]);
    assert_string_equal(jstr(ev, "object.kind"), "Status");
    assert_string_equal(jstr(ev, "object.apiVersion"), "v1");
    assert_string_equal(jstr(ev, "object.status"), "Failure");
    assert_string_equal(jstr(ev, "object.reason"), "Expired");
    assert_int_equal(jint(ev, "object.code"), 410);
    assert_string_equal(jstr(ev, "object.message"), want);
    json_decref(ev);
    assert_true(watch_wait_end(w, 3000));
    assert_int_equal(w->result, CURLE_OK);
    assert_null(watch_next(w, 0));
    watch_close(w);

    /* The oldest revision served: the 8 events kept. */
    w = watch_open(s, NULL, CMS "?watch=true&resourceVersion=%lld", rvs[2]);
    assert_stream_ok(w, "application/json");
    for (int i = 3; i < 11; i++) {
        ev = expect_event(w, "MODIFIED", "a");
        assert_int_equal(ev_rv(ev), rvs[i]);
        json_decref(ev);
    }
    expect_no_event(w, 200);
    watch_close(w);

    /* And without a resourceVersion the watch starts from the current
     * state, whatever the ring holds. */
    w = watch_open(s, NULL, CMS "?watch=true");
    ev = expect_event(w, "ADDED", "a");
    assert_int_equal(ev_rv(ev), rvs[10]);
    json_decref(ev);
    watch_close(w);
}

/* One object: fieldSelector=metadata.name=X, and the /watch/ path. */
static void test_single_object(void **state)
{
    ips *s = *state;
    create_cm(s, "default", "one", "");
    create_cm(s, "default", "two", "");
    watch_stream *by_field =
        watch_open(s, NULL, CMS "?watch=true&fieldSelector=metadata.name%%3Done");
    assert_stream_ok(by_field, "application/json");
    watch_stream *by_path = watch_open(s, NULL, "/api/v1/watch/namespaces/default/configmaps/one");
    assert_stream_ok(by_path, "application/json");
    watch_stream *both[2] = {by_field, by_path};
    for (int i = 0; i < 2; i++) {
        json_decref(expect_event(both[i], "ADDED", "one"));
        expect_no_event(both[i], 100);
    }
    patch_cm(s, "two", "{\"data\":{\"k\":\"v1\"}}");
    long long rv = patch_cm(s, "one", "{\"data\":{\"k\":\"v1\"}}");
    patch_cm(s, "two", "{\"data\":{\"k\":\"v2\"}}");
    for (int i = 0; i < 2; i++) {
        json_t *ev = expect_event(both[i], "MODIFIED", "one");
        assert_int_equal(ev_rv(ev), rv);
        json_decref(ev);
        expect_no_event(both[i], 100);
    }
    delete_cm(s, "two");
    delete_cm(s, "one");
    for (int i = 0; i < 2; i++) {
        json_decref(expect_event(both[i], "DELETED", "one"));
        expect_no_event(both[i], 100);
    }
    /* created again: ADDED */
    create_cm(s, "default", "one", "");
    for (int i = 0; i < 2; i++) {
        json_decref(expect_event(both[i], "ADDED", "one"));
        watch_close(both[i]);
    }
    /* A field configmaps cannot be selected on: 400. */
    watch_stream *w = watch_open(s, NULL, CMS "?watch=true&fieldSelector=status.phase%%3DX");
    assert_true(watch_wait_end(w, 3000));
    assert_int_equal(w->resp.code, 400);
    json_t *st = json_loads(w->resp.body.p, 0, NULL);
    assert_string_equal(jstr(st, "message"), "field label not supported: status.phase");
    json_decref(st);
    watch_close(w);
}

/* Watches of one namespace, of all namespaces and of one name, open at
 * once (they share a flush group and take different lines of it). */
static void test_namespaces_and_shared_flush(void **state)
{
    ips *s = *state;
    create_namespace(s, "other");
    http_resp *r = HGET(s, "/api/v1/namespaces/other");
    long long rv = atoll(jstr(r->json, "metadata.resourceVersion"));
    resp_free(r);
    watch_stream *ns = watch_open(s, NULL, CMS "?watch=true&resourceVersion=%lld", rv);
    watch_stream *all =
        watch_open(s, NULL, "/api/v1/configmaps?watch=true&resourceVersion=%lld", rv);
    watch_stream *one = watch_open(s, NULL, "/api/v1/watch/namespaces/other/configmaps/x");
    assert_stream_ok(ns, "application/json");
    assert_stream_ok(all, "application/json");
    assert_stream_ok(one, "application/json");
    create_cm(s, "default", "x", "");
    create_cm(s, "other", "x", "");
    create_cm(s, "default", "y", "");
    json_t *ev = expect_event(ns, "ADDED", "x");
    assert_string_equal(jstr(ev, "object.metadata.namespace"), "default");
    json_decref(ev);
    json_decref(expect_event(ns, "ADDED", "y"));
    expect_no_event(ns, 200);

    ev = expect_event(all, "ADDED", "x");
    assert_string_equal(jstr(ev, "object.metadata.namespace"), "default");
    json_decref(ev);
    ev = expect_event(all, "ADDED", "x");
    assert_string_equal(jstr(ev, "object.metadata.namespace"), "other");
    json_decref(ev);
    json_decref(expect_event(all, "ADDED", "y"));

    ev = expect_event(one, "ADDED", "x");
    assert_string_equal(jstr(ev, "object.metadata.namespace"), "other");
    json_decref(ev);
    expect_no_event(one, 100);
    watch_close(ns);
    watch_close(all);
    watch_close(one);
}

/* kubectl get -w: Table events; the first carries the column
 * definitions, later ones none. */
static void test_table_watch(void **state)
{
    ips *s = *state;
    create_cm(s, "default", "a", "");
    watch_stream *w = watch_open(
        s, IPS_HEADERS("Accept: application/json;as=Table;v=v1;g=meta.k8s.io"), CMS "?watch=true");
    assert_stream_ok(w, "application/json;as=Table;v=v1;g=meta.k8s.io");
    json_t *ev = expect_event(w, "ADDED", NULL);
    assert_string_equal(jstr(ev, "object.kind"), "Table");
    assert_string_equal(jstr(ev, "object.apiVersion"), "meta.k8s.io/v1");
    assert_int_equal(json_array_size(ckube_json_get_path(ev, "object.columnDefinitions")), 3);
    assert_string_equal(jstr(ev, "object.rows[0].cells[0]"), "a");
    assert_int_equal(jint(ev, "object.rows[0].cells[1]"), 1);
    assert_string_equal(jstr(ev, "object.rows[0].object.kind"), "PartialObjectMetadata");
    json_decref(ev);
    long long rv = patch_cm(s, "a", "{\"data\":{\"k2\":\"v\"}}");
    ev = expect_event(w, "MODIFIED", NULL);
    assert_int_equal(json_array_size(ckube_json_get_path(ev, "object.columnDefinitions")), 0);
    assert_int_equal(jint(ev, "object.rows[0].cells[1]"), 2);
    assert_int_equal(atoll(jstr(ev, "object.metadata.resourceVersion")), rv);
    json_decref(ev);
    watch_close(w);
}

static void test_bad_requests(void **state)
{
    ips *s = *state;
    struct {
        const char *query;
        int code;
        const char *message;
    } cases[] = {
        {"watch=true&resourceVersion=abc", 400, "invalid resourceVersion \"abc\""},
        {"watch=true&resourceVersion=-1", 400, "invalid resourceVersion \"-1\""},
        {"watch=true&labelSelector=%3D%3D", 400, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        watch_stream *w = watch_open(s, NULL, CMS "?%s", cases[i].query);
        assert_true(watch_wait_end(w, 3000));
        assert_int_equal(w->resp.code, cases[i].code);
        json_t *st = json_loads(w->resp.body.p, 0, NULL);
        assert_string_equal(jstr(st, "kind"), "Status");
        assert_string_equal(jstr(st, "reason"), "BadRequest");
        if (cases[i].message)
            assert_string_equal(jstr(st, "message"), cases[i].message);
        json_decref(st);
        watch_close(w);
    }
}

/* Stopping the server ends open watches with their last chunk. */
static void test_shutdown_ends_watches(void **state)
{
    ips *s = *state;
    create_cm(s, "default", "a", "");
    watch_stream *w1 = watch_open(s, NULL, CMS "?watch=true");
    watch_stream *w2 = watch_open(s, NULL, CMS "?watch=true&labelSelector=app");
    assert_stream_ok(w1, "application/json");
    assert_stream_ok(w2, "application/json");
    json_decref(expect_event(w1, "ADDED", "a"));
    ips_stop(s); /* the teardown's stop then does nothing */
    assert_true(watch_wait_end(w1, 3000));
    assert_int_equal(w1->result, CURLE_OK);
    assert_true(watch_wait_end(w2, 3000));
    assert_int_equal(w2->result, CURLE_OK);
    assert_null(watch_next(w2, 0));
    watch_close(w1);
    watch_close(w2);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_initial_events),
        T(test_resume_from_resource_version),
        T(test_modified_and_deleted),
        T(test_label_selector),
        T(test_bookmarks),
        T(test_timeout_seconds),
        cmocka_unit_test_setup_teardown(test_too_old_resource_version, setup_small_ring, teardown),
        T(test_single_object),
        T(test_namespaces_and_shared_flush),
        T(test_table_watch),
        T(test_bad_requests),
        T(test_shutdown_ends_watches),
    };
#undef T
    return cmocka_run_group_tests(tests, ips_global_setup, ips_global_teardown);
}
