/* The watch cache over the memory backend: reads, paging, watch resume,
 * selector transitions and 410 after the ring overflows. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apiserver/apiserver.h"
#include "apiserver/cacher.h"
#include "ckube/selector.h"

typedef struct {
    storage_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} sync_op;

static void on_done(storage_op *op, void *arg)
{
    sync_op *s = arg;
    pthread_mutex_lock(&s->mu);
    s->done = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Runs a write to completion; returns its result and revision. */
static int write_sync(storage *st, storage_op_type type, const char *key, const char *value,
                      int64_t *rev)
{
    sync_op s = {.op = {.type = type,
                        .key = key,
                        .value = value,
                        .value_len = value ? strlen(value) : 0,
                        .done = on_done}};
    s.op.arg = &s;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    assert_int_equal(storage_submit(st, &s.op), 0);
    pthread_mutex_lock(&s.mu);
    while (!s.done)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    if (rev)
        *rev = s.op.rev;
    return s.op.result;
}

static char *cm(const char *name, const char *label)
{
    char *s;
    if (asprintf(&s,
                 "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
                 "\"namespace\":\"ns\",\"labels\":{\"app\":\"%s\"}},\"data\":{\"k\":\"v\"}}",
                 name, label) < 0)
        return NULL;
    return s;
}

#define PREFIX "/registry/core/configmaps/"

typedef struct {
    storage *st;
    cacher *c;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->st = storage_memory_open();
    f->c = cacher_new(f->st, 8); /* a tiny ring so overflow is easy to test */
    assert_int_equal(cacher_start(f->c), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    storage_close(f->st);
    cacher_free(f->c);
    free(f);
    return 0;
}

static void put(fixture *f, const char *name, const char *label, storage_op_type type, int64_t *rev)
{
    char key[256];
    snprintf(key, sizeof key, PREFIX "ns/%s", name);
    char *v = cm(name, label);
    assert_int_equal(write_sync(f->st, type, key, v, rev), STORAGE_OK);
    free(v);
}

static void test_get_sets_resource_version(void **state)
{
    fixture *f = *state;
    int64_t rev;
    put(f, "a", "x", STORAGE_OP_CREATE, &rev);
    /* The write is visible as soon as it is acknowledged. */
    cobj *o = cacher_get(f->c, PREFIX "ns/a");
    assert_non_null(o);
    assert_int_equal(o->rev, rev);
    assert_string_equal(o->ns, "ns");
    assert_string_equal(o->name, "a");
    char want[64];
    snprintf(want, sizeof want, "\"resourceVersion\":\"%" PRId64 "\"", rev);
    assert_non_null(strstr(o->json, want));
    assert_string_equal(cobj_label(o, "app"), "x");
    assert_null(cobj_label(o, "nope"));
    cobj_unref(o);
    assert_null(cacher_get(f->c, PREFIX "ns/missing"));
    assert_int_equal(cacher_rev(f->c), rev);
}

static void test_list_paging_and_filters(void **state)
{
    fixture *f = *state;
    const char *names[] = {"e", "b", "d", "a", "c"};
    for (int i = 0; i < 5; i++)
        put(f, names[i], i % 2 ? "odd" : "even", STORAGE_OP_CREATE, NULL);
    size_t n, more;
    int64_t rev;
    cobj **objs = cacher_list(f->c, PREFIX "ns/", NULL, NULL, 2, &n, &rev, &more);
    assert_int_equal(n, 2);
    assert_int_equal(more, 3);
    assert_string_equal(objs[0]->name, "a"); /* key order */
    assert_string_equal(objs[1]->name, "b");
    char after[256];
    snprintf(after, sizeof after, "%s", objs[1]->key);
    cacher_objs_free(objs, n);
    objs = cacher_list(f->c, PREFIX "ns/", after, NULL, 2, &n, &rev, &more);
    assert_int_equal(n, 2);
    assert_string_equal(objs[0]->name, "c");
    assert_int_equal(more, 1);
    cacher_objs_free(objs, n);

    ckube_selector *sel;
    assert_int_equal(ckube_label_selector_parse("app=odd", &sel, NULL), 0);
    cfilter flt = {.ns = "ns", .labels = sel};
    objs = cacher_list(f->c, PREFIX, NULL, &flt, 0, &n, &rev, &more);
    assert_int_equal(n, 2); /* b and a */
    cacher_objs_free(objs, n);
    ckube_selector_free(sel);
    /* Other namespaces and buckets are not mixed in. */
    objs = cacher_list(f->c, PREFIX "other/", NULL, NULL, 0, &n, &rev, &more);
    assert_int_equal(n, 0);
    cacher_objs_free(objs, n);
    assert_int_equal(cacher_count(f->c, PREFIX), 5);
}

static void test_watch_translation(void **state)
{
    fixture *f = *state;
    int64_t r1;
    put(f, "w", "in", STORAGE_OP_CREATE, &r1);
    ckube_selector *sel;
    assert_int_equal(ckube_label_selector_parse("app=in", &sel, NULL), 0);
    cwatch w = {.bucket = PREFIX, .filter = {.ns = "ns", .labels = sel}};
    cevent_out *init;
    size_t ninit;
    int64_t oldest;
    /* From 0: the current matching object as ADDED. */
    assert_int_equal(cacher_watch_begin(f->c, &w, 0, &init, &ninit, &oldest), 0);
    assert_int_equal(ninit, 1);
    assert_int_equal(init[0].type, CEV_ADDED);
    cacher_events_free(init, ninit);
    put(f, "w", "out", STORAGE_OP_UPDATE, NULL); /* stops matching */
    put(f, "w", "in", STORAGE_OP_UPDATE, NULL);  /* matches again */
    put(f, "z", "out", STORAGE_OP_CREATE, NULL); /* never matches */
    char key[] = PREFIX "ns/w";
    int64_t rdel;
    assert_int_equal(write_sync(f->st, STORAGE_OP_DELETE, key, NULL, &rdel), STORAGE_OK);
    cevent_out *evs;
    size_t n;
    assert_int_equal(cacher_watch_collect(f->c, &w, &evs, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(evs[0].type, CEV_DELETED);
    assert_int_equal(evs[1].type, CEV_ADDED);
    assert_int_equal(evs[2].type, CEV_DELETED);
    /* A DELETED event carries the deletion revision. */
    assert_int_equal(evs[2].obj->rev, rdel);
    cacher_events_free(evs, n);
    assert_int_equal(w.rev, rdel);
    ckube_selector_free(sel);
}

static void test_resume_and_expiry(void **state)
{
    fixture *f = *state;
    int64_t r0;
    put(f, "r", "x", STORAGE_OP_CREATE, &r0);
    cwatch w = {.bucket = PREFIX, .filter = {.ns = ""}};
    cevent_out *init;
    size_t ninit;
    int64_t oldest;
    assert_int_equal(cacher_watch_begin(f->c, &w, r0, &init, &ninit, &oldest), 0);
    assert_int_equal(ninit, 0);
    put(f, "r", "y", STORAGE_OP_UPDATE, NULL);
    cevent_out *evs;
    size_t n;
    assert_int_equal(cacher_watch_collect(f->c, &w, &evs, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(evs[0].type, CEV_MODIFIED);
    cacher_events_free(evs, n);
    /* Overflow the 8-event ring: a watch from r0 is now too old. */
    for (int i = 0; i < 20; i++)
        put(f, "r", i % 2 ? "a" : "b", STORAGE_OP_UPDATE, NULL);
    cwatch old = {.bucket = PREFIX, .filter = {.ns = ""}};
    assert_int_equal(cacher_watch_begin(f->c, &old, r0, &init, &ninit, &oldest), -1);
    assert_true(oldest > r0);
    /* And the earlier watcher, which fell behind, learns it on collect. */
    assert_int_equal(cacher_watch_collect(f->c, &w, &evs, &n), -1);
    cacher_events_free(evs, n);
}

static void test_human_duration(void **state)
{
    char b[32];
    human_duration(0, b, sizeof b);
    assert_string_equal(b, "0s");
    human_duration(119, b, sizeof b);
    assert_string_equal(b, "119s");
    human_duration(125, b, sizeof b);
    assert_string_equal(b, "2m5s");
    human_duration(600, b, sizeof b);
    assert_string_equal(b, "10m");
    human_duration(3 * 3600 + 60, b, sizeof b);
    assert_string_equal(b, "3h1m");
    human_duration(9 * 3600, b, sizeof b);
    assert_string_equal(b, "9h");
    human_duration(3 * 86400 + 3600, b, sizeof b);
    assert_string_equal(b, "3d1h");
    human_duration(400 * 86400, b, sizeof b);
    assert_string_equal(b, "400d");
    human_duration(3 * 365 * 86400 + 5 * 86400, b, sizeof b);
    assert_string_equal(b, "3y5d");
    human_duration(-5, b, sizeof b);
    assert_string_equal(b, "<invalid>");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_sets_resource_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_paging_and_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_translation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_and_expiry, setup, teardown),
        cmocka_unit_test(test_human_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
