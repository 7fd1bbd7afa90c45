/* The watch cache over the memory backend: reads, paging, watch resume,
 * selector transitions and 410 after the ring overflows. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "apiserver/endpoints/request/context.h"
#include "common/text.h"
#include "apiserver/cacher/cacher.h"
#include "apiserver/codec/jscan.h"
#include "ckube/json.h"
#include "ckube/selector.h"
#include "storage/memory/memory.h"
#include "storage/sqlite/sqlite.h"

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

/* Lists at earlier revisions against a model: random creates, updates
 * and deletes of 10 objects, the state after each write remembered; then
 * every remembered revision is listed with random pages (after a key, a
 * limit) and label filters, and must show exactly that state, or, once
 * the ring (64 events) no longer reaches it, fail with the oldest
 * revision it serves. */
#define SNAP_NAMES 10
#define SNAP_WRITES 200

typedef struct snap_state {
    int64_t rev;
    int label[SNAP_NAMES]; /* -1: absent, else the label index */
    int64_t mod[SNAP_NAMES];
} snap_state;

static void test_list_at_revision(void **state)
{
    (void)state;
    storage *st = storage_memory_open();
    cacher *c = cacher_new(st, 64);
    assert_int_equal(cacher_start(c), 0);
    static const char *const labels[] = {"x", "y", "z"};
    snap_state *hist = calloc(SNAP_WRITES + 1, sizeof *hist);
    snap_state cur = {.rev = cacher_rev(c)};
    for (int i = 0; i < SNAP_NAMES; i++)
        cur.label[i] = -1;
    unsigned seed = 12345;
    for (int w = 0; w < SNAP_WRITES; w++) {
        int i = (int)(rand_r(&seed) % SNAP_NAMES);
        char key[64], name[8];
        snprintf(name, sizeof name, "n%d", i);
        snprintf(key, sizeof key, PREFIX "ns/%s", name);
        int64_t rev;
        if (cur.label[i] >= 0 && rand_r(&seed) % 3 == 0) {
            assert_int_equal(write_sync(st, STORAGE_OP_DELETE, key, NULL, &rev), STORAGE_OK);
            cur.label[i] = -1;
        } else {
            int l = (int)(rand_r(&seed) % 3);
            char *v = cm(name, labels[l]);
            assert_int_equal(write_sync(st,
                                        cur.label[i] < 0 ? STORAGE_OP_CREATE : STORAGE_OP_UPDATE,
                                        key, v, &rev),
                             STORAGE_OK);
            free(v);
            cur.label[i] = l;
            cur.mod[i] = rev;
        }
        cur.rev = rev;
        hist[w] = cur;
    }
    size_t served = 0, expired = 0;
    for (int w = 0; w < SNAP_WRITES; w++) {
        const snap_state *want = &hist[w];
        for (int trial = 0; trial < 4; trial++) {
            int after = (int)(rand_r(&seed) % (SNAP_NAMES + 1)) - 1; /* -1: from the start */
            size_t limit = rand_r(&seed) % 4;
            int lab = (int)(rand_r(&seed) % 4) - 1; /* -1: no label filter */
            char after_key[64];
            snprintf(after_key, sizeof after_key, PREFIX "ns/n%d", after);
            ckube_selector *sel = NULL;
            char expr[16];
            snprintf(expr, sizeof expr, "app=%s", lab >= 0 ? labels[lab] : "");
            if (lab >= 0)
                assert_int_equal(ckube_label_selector_parse(expr, &sel, NULL), 0);
            cfilter flt = {.ns = "ns", .labels = sel};
            cobj **objs;
            size_t n, more;
            int64_t rev, oldest = 0;
            int rc = cacher_list_at(c, PREFIX "ns/", after >= 0 ? after_key : NULL, &flt, limit,
                                    want->rev, &objs, &n, &rev, &more, &oldest);
            if (rc != 0) {
                /* only revisions the ring no longer reaches */
                assert_true(oldest > want->rev);
                assert_true(w < SNAP_WRITES - 64);
                expired++;
                ckube_selector_free(sel);
                continue;
            }
            served++;
            assert_int_equal(rev, want->rev);
            /* names sort as n0 < n1 < ... < n9 */
            size_t k = 0, left = 0;
            for (int i = after + 1; i < SNAP_NAMES; i++) {
                if (want->label[i] < 0 || (lab >= 0 && want->label[i] != lab))
                    continue;
                if (limit && k == limit) {
                    left++;
                    continue;
                }
                assert_true(k < n);
                char nm[8];
                snprintf(nm, sizeof nm, "n%d", i);
                assert_string_equal(objs[k]->name, nm);
                assert_string_equal(cobj_label(objs[k], "app"), labels[want->label[i]]);
                assert_int_equal(objs[k]->rev, want->mod[i]);
                k++;
            }
            assert_int_equal(n, k);
            assert_int_equal(more, left);
            cacher_objs_free(objs, n);
            ckube_selector_free(sel);
        }
    }
    /* both cases happened: the last 64 writes are served, older ones not */
    assert_true(served > 200 && expired > 100);
    free(hist);
    storage_close(st);
    cacher_free(c);
}

static void test_human_duration(void **state)
{
    char b[32];
    ckube__human_duration(0, b, sizeof b);
    assert_string_equal(b, "0s");
    ckube__human_duration(119, b, sizeof b);
    assert_string_equal(b, "119s");
    ckube__human_duration(125, b, sizeof b);
    assert_string_equal(b, "2m5s");
    ckube__human_duration(600, b, sizeof b);
    assert_string_equal(b, "10m");
    ckube__human_duration(3 * 3600 + 60, b, sizeof b);
    assert_string_equal(b, "3h1m");
    ckube__human_duration(9 * 3600, b, sizeof b);
    assert_string_equal(b, "9h");
    ckube__human_duration(3 * 86400 + 3600, b, sizeof b);
    assert_string_equal(b, "3d1h");
    ckube__human_duration(400 * 86400, b, sizeof b);
    assert_string_equal(b, "400d");
    ckube__human_duration(3 * 365 * 86400 + 5 * 86400, b, sizeof b);
    assert_string_equal(b, "3y5d");
    ckube__human_duration(-5, b, sizeof b);
    assert_string_equal(b, "<invalid>");
}

/* ---- objects loaded from storage: exactly what decode + encode served ---- */

/* Stored values of every shape the cacher must handle. `canonical` says
 * whether the fast path (no jansson tree) should take it. */
typedef struct stored_case {
    const char *key;
    const char *value;
    bool canonical;
    bool decodable;
} stored_case;

#define CM "/registry/core/configmaps/"
#define POD "/registry/core/pods/"

static const stored_case stored_cases[] = {
    /* As ckube writes objects: compact, no resourceVersion. */
    {CM "ns/plain",
     "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"plain\",\"namespace\":"
     "\"ns\",\"labels\":{\"app\":\"bench\",\"bench-match\":\"false\"},\"uid\":\"u-1\"},\"data\":"
     "{\"pad\":\"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\"}}",
     true, true},
    /* Escapes, control characters and non-ASCII in keys and values. */
    {CM "ns/escapes",
     "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"escapes\",\"labels\":{\"a\\\"b\":\"c\\\\d\","
     "\"x\\u0001\":\"tab\\there\\n\",\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac "
     "\xf0\x9f\x98\x80\",\"empty\":\"\"}},\"data\":{\"k\":\"line\\nbreak \\\"q\\\" \\/no\"}}",
     false, true}, /* "\/" is not how jansson writes '/' */
    {CM "ns/escapes2",
     "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"escapes2\",\"labels\":{\"a\\\"b\":"
     "\"c\\\\d\","
     "\"x\\u0001\":\"tab\\there\\n\",\"\xc3\xa9t\xc3\xa9\":\"\xe6\x97\xa5\xe6\x9c\xac "
     "\xf0\x9f\x98\x80\",\"empty\":\"\",\"odd/key.io_-~\":\"v:1,2}\"}},\"data\":{\"k\":"
     "\"\\b\\f\\r\\u001F}\"}}",
     true, true},
    /* No labels; labels that are empty or hold non-strings. */
    {CM "ns/nolabels", "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"nolabels\"},\"data\":{}}",
     true, true},
    {CM "ns/emptylabels", "{\"metadata\":{\"labels\":{},\"name\":\"emptylabels\"}}", true, true},
    {CM "ns/oddlabels",
     "{\"metadata\":{\"labels\":{\"n\":1,\"s\":\"v\",\"o\":{\"x\":\"y\"},\"z\":null}}}", true,
     true},
    /* A resourceVersion already stored: replaced where it is. */
    {CM "ns/hasrv",
     "{\"metadata\":{\"name\":\"hasrv\",\"resourceVersion\":\"3\",\"labels\":{\"a\":\"1\"}},\"x\":"
     "1}",
     true, true},
    {CM "ns/rvnumber", "{\"metadata\":{\"resourceVersion\":7}}", true, true},
    {CM "ns/emptymeta", "{\"a\":[],\"metadata\":{},\"b\":-9223372036854775808}", true, true},
    /* Not canonical: decoded and encoded as before. */
    {CM "ns/spaces",
     "{ \"kind\" : \"ConfigMap\",\n \"metadata\": {\"name\": \"spaces\", "
     "\"labels\": {\"a\": \"b\"}} }",
     false, true},
    {CM "ns/real", "{\"metadata\":{\"name\":\"real\"},\"r\":1.50,\"e\":1e3}", false, true},
    {CM "ns/dup", "{\"metadata\":{\"name\":\"dup\",\"labels\":{\"a\":\"1\",\"a\":\"2\"}}}", false,
     true},
    {CM "ns/uescape", "{\"metadata\":{\"name\":\"\\u00e9\\u0041\"}}", false, true},
    {CM "ns/nometa", "{\"kind\":\"ConfigMap\",\"data\":{\"a\":\"b\"}}", false, true},
    {CM "ns/metastring", "{\"metadata\":\"x\",\"after\":true}", false, true},
    /* Cluster-scoped. */
    {"/registry/core/namespaces/cluster1",
     "{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cluster1\","
     "\"labels\":{\"kubernetes.io/metadata.name\":\"cluster1\"}},\"spec\":{\"finalizers\":["
     "\"kubernetes\"]},\"status\":{\"phase\":\"Active\"}}",
     true, true},
    /* Selectable fields (the pods bucket is configured with some). */
    {POD "ns/p1",
     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"ns\"},\"spec\":{\"nodeName\":"
     "\"n\\\"1\",\"hostNetwork\":true,\"priority\":-12},\"status\":{\"phase\":{\"x\":1}}}",
     true, true},
    {POD "ns/p2", "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p2\"},\"spec\":{\"nodeName\":null}}",
     true, true},
    {POD "ns/p3",
     "{\"kind\": \"Pod\",\"metadata\":{\"name\":\"p3\"},\"spec\":{\"nodeName\":\"x\","
     "\"hostNetwork\":false,\"priority\":2.5}}",
     false, true},
    /* Undecodable or not an object: skipped with an error, never served. */
    {CM "ns/bad1", "{\"kind\":", false, false},
    {CM "ns/bad2", "[1,2]", false, false},
    {CM "ns/bad3", "\"str\"", false, false},
    {CM "ns/bad4", "{\"metadata\":{\"name\":\"\xc0\xaf\"}}", false, false},
    {CM "ns/bad5", "{\"metadata\":{},\"n\":99999999999999999999}", false, false},
    {CM "ns/bad6", "", false, false},
    /* After the bad ones: still loaded. */
    {CM "ns/zlast", "{\"metadata\":{\"name\":\"zlast\",\"labels\":{\"l\":\"v\"}}}", true, true},
};

static const cacher_field pod_fields[] = {{"spec.nodeName", "spec.nodeName"},
                                          {"spec.hostNetwork", "spec.hostNetwork"},
                                          {"spec.priority", "spec.priority"},
                                          {"status.phase", "status.phase"},
                                          {"metadata.resourceVersion", "metadata.resourceVersion"},
                                          {"missing", "spec.none.deeper"},
                                          {NULL, NULL}};

/* What the cacher served before the scanner: decode, set
 * metadata.resourceVersion, encode compactly. NULL if undecodable. */
static json_t *reference_tree(const char *value, int64_t rev)
{
    json_t *obj = json_loadb(value, strlen(value), 0, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return NULL;
    }
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(obj, "metadata", meta);
    }
    char rv[32];
    snprintf(rv, sizeof rv, "%" PRId64, rev);
    json_object_set_new(meta, "resourceVersion", json_string(rv));
    return obj;
}

static char *field_text(const json_t *v)
{
    char b[64];
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(b, sizeof b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return strdup(b);
    }
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "true" : "false");
    return strdup("");
}

/* The cached object at `key` is exactly the reference for `value` at `rev`. */
static void assert_served_as_before(const cobj *o, const char *value, int64_t rev)
{
    json_t *ref = reference_tree(value, rev);
    assert_non_null(ref);
    char *want = json_dumps(ref, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(o);
    assert_string_equal(o->json, want);
    assert_int_equal(o->len, strlen(want));
    assert_int_equal(o->rev, rev);
    /* Labels: every string label, nothing else. */
    json_t *labels = json_object_get(json_object_get(ref, "metadata"), "labels");
    size_t nstr = 0;
    const char *k;
    json_t *v;
    json_object_foreach(labels, k, v)
    {
        if (json_is_string(v)) {
            nstr++;
            assert_non_null(cobj_label((void *)o, k));
            assert_string_equal(cobj_label((void *)o, k), json_string_value(v));
        } else {
            assert_null(cobj_label((void *)o, k));
        }
    }
    assert_int_equal(o->nlabels, nstr);
    for (size_t i = 1; i < o->nlabels; i++)
        assert_true(strcmp(o->labels[(i - 1) * 2], o->labels[i * 2]) < 0);
    if (!strncmp(o->key, POD, strlen(POD))) {
        assert_int_equal(o->nfields, 6);
        for (const cacher_field *f = pod_fields; f->field; f++) {
            char *t = field_text(ckube_json_get_path(ref, f->path));
            assert_string_equal(cobj_field((void *)o, f->field), t);
            free(t);
        }
    } else {
        assert_int_equal(o->nfields, 0);
    }
    free(want);
    json_decref(ref);
}

static void test_load_serves_what_decoding_did(void **state)
{
    (void)state;
    storage *st = storage_memory_open();
    size_t n = sizeof stored_cases / sizeof *stored_cases;
    int64_t *revs = calloc(n, sizeof *revs);
    for (size_t i = 0; i < n; i++) {
        const stored_case *sc = &stored_cases[i];
        /* The fast path is taken where it should be (else this test would
         * only exercise the fallback). */
        jscan_meta m;
        assert_int_equal(jscan_canonical(sc->value, strlen(sc->value), &m) && m.metadata,
                         sc->canonical);
        assert_int_equal(write_sync(st, STORAGE_OP_CREATE, sc->key, sc->value, &revs[i]),
                         STORAGE_OK);
    }
    /* Loaded at start-up (the list), ... */
    cacher *c = cacher_new(st, 64);
    cacher_configure_bucket(c, POD, pod_fields);
    assert_int_equal(cacher_start(c), 0);
    for (size_t i = 0; i < n; i++) {
        cobj *o = cacher_get(c, stored_cases[i].key);
        if (!stored_cases[i].decodable) {
            assert_null(o);
            continue;
        }
        assert_served_as_before(o, stored_cases[i].value, revs[i]);
        cobj_unref(o);
    }
    size_t ncm = 0;
    for (size_t i = 0; i < n; i++)
        ncm += stored_cases[i].decodable && !strncmp(stored_cases[i].key, CM, strlen(CM));
    assert_int_equal(cacher_count(c, CM), ncm);
    cobj *ns = cacher_get(c, "/registry/core/namespaces/cluster1");
    assert_string_equal(ns->ns, "");
    assert_string_equal(ns->name, "cluster1");
    cobj_unref(ns);

    /* ... then the same values written again arrive through the watch. */
    for (size_t i = 0; i < n; i++) {
        const stored_case *sc = &stored_cases[i];
        assert_int_equal(write_sync(st, STORAGE_OP_UPDATE, sc->key, sc->value, &revs[i]),
                         STORAGE_OK);
        cobj *o = cacher_get(c, sc->key);
        if (!sc->decodable) {
            assert_null(o);
            continue;
        }
        assert_served_as_before(o, sc->value, revs[i]);
        cobj_unref(o);
    }

    /* A delete's event carries the last state at the deletion revision. */
    cwatch w = {.bucket = CM, .filter = {.ns = ""}};
    cevent_out *init;
    size_t ninit;
    int64_t oldest, rdel;
    assert_int_equal(cacher_watch_begin(c, &w, cacher_rev(c), &init, &ninit, &oldest), 0);
    assert_int_equal(write_sync(st, STORAGE_OP_DELETE, CM "ns/escapes2", NULL, &rdel), STORAGE_OK);
    cevent_out *evs;
    size_t nev;
    assert_int_equal(cacher_watch_collect(c, &w, &evs, &nev), 0);
    assert_int_equal(nev, 1);
    assert_int_equal(evs[0].type, CEV_DELETED);
    assert_served_as_before(evs[0].obj, stored_cases[2].value, rdel);
    cacher_events_free(evs, nev);
    assert_null(cacher_get(c, CM "ns/escapes2"));

    cacher_free(c);
    storage_close(st);
    free(revs);
}

/* What a listener saw: the keys of its ADDED events, in order. */
typedef struct {
    char keys[16][128];
    size_t n;
} seen_keys;

static void on_listened(void *arg, cevent_type type, const cobj *o)
{
    seen_keys *s = arg;
    assert_int_equal(type, CEV_ADDED);
    assert_true(s->n < 16);
    snprintf(s->keys[s->n++], sizeof s->keys[0], "%s", o->key);
}

static bool saw(const seen_keys *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->keys[i], key))
            return true;
    return false;
}

/* A change listener: records "TYPE key" (any type). */
static void on_changed(void *arg, cevent_type type, const cobj *o)
{
    seen_keys *s = arg;
    assert_true(s->n < 16);
    snprintf(s->keys[s->n++], sizeof s->keys[0], "%s %s",
             type == CEV_ADDED      ? "ADDED"
             : type == CEV_MODIFIED ? "MODIFIED"
                                    : "DELETED",
             o->key);
}

/* Waits (up to 5 s) until the cacher has applied revision rev. */
static bool wait_rev(cacher *c, int64_t rev)
{
    for (int i = 0; i < 5000 && cacher_rev(c) < rev; i++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    return cacher_rev(c) >= rev;
}

/* At start a listener gets every stored object its prefix covers as
 * ADDED, as it gets live events by key: a prefix spanning several
 * buckets (a whole API group, as the RBAC index listens) gets them all,
 * a prefix inside a bucket only its part. (A group-wide listener once got
 * nothing at start, so a restarted server's RBAC index was empty.) */
/* Two types kept in one bucket (core and events.k8s.io Events): a bucket
 * configured twice extracts the union, a name it has keeps its first
 * path. */
static void test_bucket_fields_union(void **state)
{
    (void)state;
    static const cacher_field core[] = {
        {"involvedObject.name", "involvedObject.name"}, {"type", "type"}, {NULL, NULL}};
    static const cacher_field other[] = {
        {"regarding.name", "involvedObject.name"}, {"type", "note"}, {NULL, NULL}};
    storage *st = storage_memory_open();
    const char *key = "/registry/core/events/ns/e1";
    assert_int_equal(write_sync(st, STORAGE_OP_CREATE, key,
                                "{\"kind\":\"Event\",\"apiVersion\":\"v1\",\"metadata\":"
                                "{\"name\":\"e1\",\"namespace\":\"ns\"},\"involvedObject\":"
                                "{\"name\":\"pod-1\"},\"type\":\"Normal\",\"note\":\"x\"}",
                                NULL),
                     STORAGE_OK);
    cacher *c = cacher_new(st, 64);
    cacher_configure_bucket(c, "/registry/core/events/", core);
    cacher_configure_bucket(c, "/registry/core/events/", other);
    assert_int_equal(cacher_start(c), 0);
    cobj *o = cacher_get(c, key);
    assert_non_null(o);
    assert_int_equal(o->nfields, 3);
    assert_string_equal(cobj_field(o, "involvedObject.name"), "pod-1");
    assert_string_equal(cobj_field(o, "regarding.name"), "pod-1");
    assert_string_equal(cobj_field(o, "type"), "Normal");
    cobj_unref(o);
    cacher_free(c);
    storage_close(st);
}

static void test_listeners_get_initial_objects(void **state)
{
    (void)state;
    storage *st = storage_memory_open();
    static const char *const keys[] = {
        "/registry/rbac.authorization.k8s.io/clusterrolebindings/b1",
        "/registry/rbac.authorization.k8s.io/clusterroles/r1",
        "/registry/rbac.authorization.k8s.io/roles/ns1/r2",
        "/registry/rbac.authorization.k8s.io/roles/ns2/r3",
        "/registry/core/configmaps/ns1/c1",
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *name = strrchr(keys[i], '/') + 1;
        char *v = NULL;
        assert_true(
            asprintf(&v, "{\"kind\":\"X\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\"}}",
                     name) > 0);
        assert_int_equal(write_sync(st, STORAGE_OP_CREATE, keys[i], v, NULL), STORAGE_OK);
        free(v);
    }
    cacher *c = cacher_new(st, 64);
    seen_keys group = {0}, part = {0}, bucket = {0}, none = {0}, changes = {0};
    cacher_add_listener(c, "/registry/rbac.authorization.k8s.io/", on_listened, &group);
    cacher_add_listener(c, "/registry/rbac.authorization.k8s.io/roles/ns1/", on_listened, &part);
    cacher_add_listener(c, "/registry/core/configmaps/", on_listened, &bucket);
    cacher_add_listener(c, "/registry/apps/", on_listened, &none);
    cacher_add_change_listener(c, "/registry/", on_changed, &changes);
    assert_int_equal(cacher_start(c), 0);
    assert_int_equal(changes.n, 0); /* the loaded objects are not replayed to it */
    assert_int_equal(group.n, 4);
    for (size_t i = 0; i < 4; i++)
        assert_true(saw(&group, keys[i]));
    assert_int_equal(part.n, 1);
    assert_true(saw(&part, keys[2]));
    assert_int_equal(bucket.n, 1);
    assert_true(saw(&bucket, keys[4]));
    assert_int_equal(none.n, 0);
    /* but it sees the changes that follow, of any resource and type */
    const char *job = "/registry/batch/jobs/ns1/j1";
    int64_t rev;
    assert_int_equal(write_sync(st, STORAGE_OP_CREATE, job,
                                "{\"kind\":\"Job\",\"metadata\":{\"name\":\"j1\"}}", NULL),
                     STORAGE_OK);
    assert_int_equal(write_sync(st, STORAGE_OP_DELETE, job, NULL, &rev), STORAGE_OK);
    assert_true(wait_rev(c, rev));
    assert_int_equal(changes.n, 2);
    assert_true(saw(&changes, "ADDED /registry/batch/jobs/ns1/j1"));
    assert_true(saw(&changes, "DELETED /registry/batch/jobs/ns1/j1"));
    assert_int_equal(none.n, 0);
    cacher_free(c);
    storage_close(st);
}

/* Enough objects for the start-up loader to cycle its batches (and wait
 * for free ones), values larger than a batch buffer, and every object
 * arrives exactly once. */
static void test_load_many(void **state)
{
    (void)state;
    storage *st = storage_memory_open();
    /* 3,000 rows of 12 KiB are 36 MB: more than the loader's batches hold
     * at once (LOAD_BATCHES of 2 MiB), and three values above 2 MiB. */
    enum { N = 3000 };
    static int64_t revs[N];
    size_t big = 2304 * 1024, small = 12 * 1024;
    char *pad = malloc(big + 1), *spad = malloc(small + 1);
    memset(pad, 'x', big);
    pad[big] = 0;
    memset(spad, 'y', small);
    spad[small] = 0;
    char key[128];
    for (int i = 0; i < N; i++) {
        char *v;
        snprintf(key, sizeof key, CM "many/o%05d", i);
        assert_true(asprintf(&v,
                             "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"o%05d\","
                             "\"labels\":{\"i\":\"%d\",\"even\":\"%s\"}},\"data\":{\"p\":\"%s\"}}",
                             i, i, i % 2 ? "no" : "yes", i % 1000 == 7 ? pad : spad) > 0);
        assert_int_equal(write_sync(st, STORAGE_OP_CREATE, key, v, &revs[i]), STORAGE_OK);
        free(v);
    }
    cacher *c = cacher_new(st, 16);
    assert_int_equal(cacher_start(c), 0);
    assert_int_equal(cacher_count(c, CM "many/"), N);
    assert_int_equal(cacher_rev(c), revs[N - 1]);
    size_t n, more;
    int64_t rev;
    cobj **objs = cacher_list(c, CM "many/", NULL, NULL, 0, &n, &rev, &more);
    assert_int_equal(n, N);
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "o%05zu", i);
        assert_string_equal(objs[i]->name, key);
        assert_int_equal(objs[i]->rev, revs[i]);
        char want[32];
        snprintf(want, sizeof want, "%zu", i);
        assert_string_equal(cobj_label(objs[i], "i"), want);
        if (i % 1000 == 7)
            assert_true(objs[i]->len > big);
    }
    cacher_objs_free(objs, n);
    ckube_selector *sel;
    assert_int_equal(ckube_label_selector_parse("even=yes", &sel, NULL), 0);
    cfilter f = {.labels = sel};
    objs = cacher_list(c, CM, NULL, &f, 0, &n, &rev, &more);
    assert_int_equal(n, N / 2);
    cacher_objs_free(objs, n);
    ckube_selector_free(sel);
    cacher_stats stats;
    cacher_get_stats(c, &stats);
    assert_int_equal(stats.objects, N);
    cacher_free(c);
    storage_close(st);
    free(pad);
    free(spad);
}

/* Writes submitted together (one group commit, not an fsync each). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
} many_ops;

static void on_many_done(storage_op *op, void *arg)
{
    many_ops *m = arg;
    assert_int_equal(op->result, STORAGE_OK);
    pthread_mutex_lock(&m->mu);
    if (!--m->left)
        pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Submits n ops (their arg and done set here) and waits for them all. */
static void write_many(storage *st, storage_op *ops, size_t n)
{
    many_ops m = {.left = n};
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    for (size_t i = 0; i < n; i++) {
        ops[i].arg = &m;
        ops[i].done = on_many_done;
        assert_int_equal(storage_submit(st, &ops[i]), 0);
    }
    pthread_mutex_lock(&m.mu);
    while (m.left)
        pthread_cond_wait(&m.cv, &m.mu);
    pthread_mutex_unlock(&m.mu);
    pthread_mutex_destroy(&m.mu);
    pthread_cond_destroy(&m.cv);
}

/* Start-up from SQLite, whose load reads rows in revision order on
 * several builder threads: thousands of objects across many batches,
 * with history (updates, deletes, re-creates) behind them, two buckets
 * (one with selectable fields), and a value that cannot be decoded
 * (skipped, the rest served) come back exactly as written. */
static void test_load_sqlite_history(void **state)
{
    (void)state;
    char dir[] = "/tmp/ckube-cacher-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *err = NULL;
    storage *st = storage_sqlite_open(dir, &err);
    assert_non_null(st);
    enum { N = 4000, P = 600 };
    static storage_op ops[N];
    static char *vals[N];
    static int64_t want_rev[N + P];
    static bool live[N];
    char key[N][80], pkey[P][80];
    /* creates: ConfigMaps and Pods interleaved in revision order */
    size_t k = 0;
    for (int i = 0; i < N; i++) {
        snprintf(key[i], sizeof key[0], CM "hist/c%05d", i);
        assert_true(asprintf(&vals[i],
                             "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c%05d\","
                             "\"labels\":{\"i\":\"%d\"}},\"data\":{\"v\":\"1\"}}",
                             i, i) > 0);
        ops[k++] = (storage_op){.type = STORAGE_OP_CREATE,
                                .key = key[i],
                                .value = vals[i],
                                .value_len = strlen(vals[i])};
        live[i] = true;
    }
    write_many(st, ops, k);
    for (size_t i = 0; i < k; i++)
        want_rev[i] = ops[i].rev;
    for (int i = 0; i < P; i++) {
        snprintf(pkey[i], sizeof pkey[0], POD "hist/p%04d", i);
        free(vals[i]);
        assert_true(
            asprintf(&vals[i],
                     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p%04d\"},"
                     "\"spec\":{\"nodeName\":\"node-%d\"},\"status\":{\"phase\":\"Running\"}}",
                     i, i % 7) > 0);
        ops[i] = (storage_op){.type = STORAGE_OP_CREATE,
                              .key = pkey[i],
                              .value = vals[i],
                              .value_len = strlen(vals[i])};
    }
    write_many(st, ops, P);
    for (int i = 0; i < P; i++)
        want_rev[N + i] = ops[i].rev;
    /* history: every third ConfigMap updated twice, every seventh
     * deleted, every fourteenth of those created again */
    for (int round = 0; round < 2; round++) {
        k = 0;
        for (int i = 0; i < N; i += 3) {
            free(vals[k]);
            assert_true(asprintf(&vals[k],
                                 "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c%05d\","
                                 "\"labels\":{\"i\":\"%d\",\"round\":\"%d\"}},\"data\":{}}",
                                 i, i, round) > 0);
            ops[k] = (storage_op){.type = STORAGE_OP_UPDATE,
                                  .key = key[i],
                                  .value = vals[k],
                                  .value_len = strlen(vals[k])};
            k++;
        }
        write_many(st, ops, k);
        k = 0;
        for (int i = 0; i < N; i += 3)
            want_rev[i] = ops[k++].rev;
    }
    k = 0;
    for (int i = 0; i < N; i += 7) {
        ops[k++] = (storage_op){.type = STORAGE_OP_DELETE, .key = key[i]};
        live[i] = false;
    }
    write_many(st, ops, k);
    k = 0;
    for (int i = 0; i < N; i += 14) {
        free(vals[k]);
        assert_true(asprintf(&vals[k], "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c%05d\"}}",
                             i) > 0);
        ops[k] = (storage_op){.type = STORAGE_OP_CREATE,
                              .key = key[i],
                              .value = vals[k],
                              .value_len = strlen(vals[k])};
        k++;
        live[i] = true;
    }
    write_many(st, ops, k);
    k = 0;
    for (int i = 0; i < N; i += 14)
        want_rev[i] = ops[k++].rev;
    int64_t bad_rev;
    assert_int_equal(write_sync(st, STORAGE_OP_CREATE, CM "hist/zz-bad", "{not json", &bad_rev),
                     STORAGE_OK);
    storage_close(st);

    st = storage_sqlite_open(dir, &err); /* what a restarted server reads */
    assert_non_null(st);
    cacher *c = cacher_new(st, 16);
    cacher_configure_bucket(c, POD, pod_fields);
    assert_int_equal(cacher_start(c), 0);
    assert_int_equal(cacher_rev(c), bad_rev);
    size_t nlive = 0;
    for (int i = 0; i < N; i++) {
        cobj *o = cacher_get(c, key[i]);
        nlive += live[i];
        if (!live[i]) {
            assert_null(o);
            continue;
        }
        assert_non_null(o);
        assert_int_equal(o->rev, want_rev[i]);
        char want[16];
        snprintf(want, sizeof want, "%d", i);
        if (i % 14 == 0) {
            assert_int_equal(o->nlabels, 0);
        } else {
            assert_string_equal(cobj_label(o, "i"), want);
            if (i % 3 == 0)
                assert_string_equal(cobj_label(o, "round"), "1");
        }
        cobj_unref(o);
    }
    assert_int_equal(cacher_count(c, CM "hist/"), nlive);
    assert_null(cacher_get(c, CM "hist/zz-bad"));
    assert_int_equal(cacher_count(c, POD), P);
    for (int i = 0; i < P; i++) {
        cobj *o = cacher_get(c, pkey[i]);
        assert_non_null(o);
        assert_int_equal(o->rev, want_rev[N + i]);
        char want[16];
        snprintf(want, sizeof want, "node-%d", i % 7);
        assert_string_equal(cobj_field(o, "spec.nodeName"), want);
        cobj_unref(o);
    }
    cacher_free(c);
    storage_close(st);
    for (int i = 0; i < N; i++)
        free(vals[i]);
    char path[128];
    snprintf(path, sizeof path, "%s/state.db", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/state.db-wal", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/state.db-shm", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/state.lock", dir);
    unlink(path);
    assert_int_equal(rmdir(dir), 0);
}

/* The scanner itself, on the shapes the fast path relies on. */
static void test_jscan_canonical_forms(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        bool ok;
    } cases[] = {
        {"{}", true},
        {"[]", true},
        {"{\"a\":[1,-1,0,true,false,null,\"s\",{}]}", true},
        {"{\"a\":9223372036854775807,\"b\":-9223372036854775808}", true},
        {"{\"a\":9223372036854775808}", false},
        {"{\"a\":-0}", false},
        {"{\"a\":01}", false},
        {"{\"a\":1.0}", false},
        {"{\"a\":1e2}", false},
        {"{\"a\":1,\"a\":2}", false},
        {"{\"a\":{\"b\":1},\"b\":{\"b\":1}}", true}, /* same key, different objects */
        {"{\"a\":\"\\u001F\\u0001\\\"\\\\\\b\\f\\n\\r\\t\"}", true},
        {"{\"a\":\"\\u001f\"}", false}, /* jansson writes uppercase hex */
        {"{\"a\":\"\\u000A\"}", false}, /* ... and \n for this */
        {"{\"a\":\"\\u0000\"}", false},
        {"{\"a\":\"\\u0041\"}", false},
        {"{\"a\":\"\\/\"}", false},
        {"{\"a\":\"\x7f\"}", true},
        {"{\"a\":\"\x01\"}", false},
        {"{\"a\":\"\xed\xa0\x80\"}", false},     /* a UTF-16 surrogate */
        {"{\"a\":\"\xe0\x80\xaf\"}", false},     /* overlong */
        {"{\"a\":\"\xf4\x90\x80\x80\"}", false}, /* above U+10FFFF */
        {"{\"a\":\"\xf4\x8f\xbf\xbf\"}", true},
        {"{\"a\":1} ", false},
        {"{\"a\" :1}", false},
        {"\"s\"", false},
        {"1", false},
        {"{\"a\":[1,]}", false},
        {"{\"a\":1,}", false},
        {"{\"a\"}", false},
        {"{\"a\":tru}", false},
        {"{\"a\":[}", false},
        {"{\"a\":1]", false},
        {"{\"a\":\"unterminated}", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool got = jscan_canonical(cases[i].in, strlen(cases[i].in), NULL);
        if (got != cases[i].ok)
            fail_msg("jscan_canonical(%s) = %d", cases[i].in, got);
        /* And jansson agrees whenever the scanner accepts. */
        if (got) {
            json_t *v = json_loadb(cases[i].in, strlen(cases[i].in), 0, NULL);
            char *d = json_dumps(v, JSON_COMPACT);
            assert_string_equal(d, cases[i].in);
            free(d);
            json_decref(v);
        }
    }
    /* Many keys (the sorted duplicate check) and deep nesting. */
    char big[4096] = "{";
    for (int i = 0; i < 100; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "%s\"k%d\":%d", i ? "," : "", i, i);
    strcat(big, "}");
    assert_true(jscan_canonical(big, strlen(big), NULL));
    memcpy(strrchr(big, '"') - 2, "10", 2); /* the last key becomes a second "k10" */
    assert_false(jscan_canonical(big, strlen(big), NULL));
    /* Either side of the pairwise check (8 keys) and keys longer than a
     * hash step, alike in their first 16 bytes: distinct ones pass, a
     * repeated one (first and last) is found. */
    for (int n = 8; n <= 9; n++) {
        char obj[1024] = "{";
        for (int i = 0; i < n; i++)
            snprintf(obj + strlen(obj), sizeof obj - strlen(obj),
                     "%s\"a-long-common-prefix-%d-tail\":%d", i ? "," : "", i, i);
        strcat(obj, "}");
        assert_true(jscan_canonical(obj, strlen(obj), NULL));
        char *last = strstr(obj, n == 8 ? "-7-tail" : "-8-tail");
        last[1] = '0'; /* the last key becomes the first one again */
        assert_false(jscan_canonical(obj, strlen(obj), NULL));
    }
    char deep[2 * JSCAN_MAX_DEPTH + 8];
    size_t d = 0;
    for (int i = 0; i < JSCAN_MAX_DEPTH; i++)
        deep[d++] = '[';
    for (int i = 0; i < JSCAN_MAX_DEPTH; i++)
        deep[d++] = ']';
    assert_true(jscan_canonical(deep, d, NULL));
    memmove(deep + 1, deep, d);
    deep[0] = '[';
    deep[++d] = ']';
    d++;
    assert_false(jscan_canonical(deep, d, NULL)); /* one level too deep: jansson's job */
}

static void test_jscan_set_rv(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"{\"metadata\":{}}", "{\"metadata\":{\"resourceVersion\":\"42\"}}"},
        {"{\"metadata\":{\"name\":\"a\"},\"x\":[]}",
         "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"42\"},\"x\":[]}"},
        {"{\"metadata\":{\"resourceVersion\":\"1\",\"name\":\"a\"}}",
         "{\"metadata\":{\"resourceVersion\":\"42\",\"name\":\"a\"}}"},
        {"{\"metadata\":{\"resourceVersion\":{\"a\":[1]},\"b\":{}}}",
         "{\"metadata\":{\"resourceVersion\":\"42\",\"b\":{}}}"},
        {"{\"x\":{\"metadata\":{}},\"metadata\":{\"y\":{\"resourceVersion\":1}}}",
         "{\"x\":{\"metadata\":{}},\"metadata\":{\"y\":{\"resourceVersion\":1},"
         "\"resourceVersion\":\"42\"}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        jscan_meta m;
        size_t len = strlen(cases[i].in);
        assert_true(jscan_canonical(cases[i].in, len, &m));
        assert_true(m.metadata != 0);
        size_t n = jscan_set_rv(cases[i].in, len, &m, "42", NULL);
        char *out = malloc(n + 1);
        assert_int_equal(jscan_set_rv(cases[i].in, len, &m, "42", out), n);
        assert_string_equal(out, cases[i].out);
        free(out);
    }
    jscan_meta m;
    assert_true(jscan_canonical("{\"metadata\":[]}", 15, &m));
    assert_int_equal(m.metadata, 0); /* not an object: the caller decodes */
    char s[16];
    assert_int_equal(jscan_str_copy("a\\\"b\\u0001\\\\", (jspan){0, 12}, s), 5);
    assert_memory_equal(s, "a\"b\x01\\", 6);
}

/* ---- cacher_set_object_allocator ------------------------------------ */

/* A counting allocator whose blocks carry a header: a block it did not
 * hand out (or one freed by free()) is caught, by the magic here or by
 * ASan's check of the pointer free() gets. */
enum { HDR = 16 };
static const uint64_t MAGIC = 0xc0b1ec7a110c0b1eULL;
static atomic_long obj_allocs, obj_releases;

static void *count_alloc(size_t n)
{
    char *p = malloc(n + HDR);
    if (!p)
        return NULL;
    memcpy(p, &MAGIC, sizeof MAGIC);
    atomic_fetch_add(&obj_allocs, 1);
    return p + HDR;
}

static void count_release(void *q)
{
    char *p = (char *)q - HDR;
    uint64_t m;
    memcpy(&m, p, sizeof m);
    assert_true(m == MAGIC);
    memset(p, 0, HDR);
    atomic_fetch_add(&obj_releases, 1);
    free(p);
}

/* Every cached object's block, whichever way it was made (loaded,
 * created, updated, converted for a reader) comes from the allocator
 * set, and goes back to it, and nothing else does. */
static void test_object_allocator(void **state)
{
    (void)state;
    cacher_set_object_allocator(count_alloc, count_release);
    storage *st = storage_memory_open();
    char key[128];
    for (int i = 0; i < 3; i++) { /* loaded at start */
        snprintf(key, sizeof key, PREFIX "ns/pre%d", i);
        char *v = cm(key + strlen(PREFIX "ns/"), "pre");
        assert_int_equal(write_sync(st, STORAGE_OP_CREATE, key, v, NULL), STORAGE_OK);
        free(v);
    }
    cacher *c = cacher_new(st, 8);
    assert_int_equal(cacher_start(c), 0);
    assert_int_equal(atomic_load(&obj_allocs), 3);
    fixture f = {.st = st, .c = c};
    int64_t rev;
    put(&f, "a", "x", STORAGE_OP_CREATE, &rev);
    put(&f, "b", "x", STORAGE_OP_CREATE, &rev);
    put(&f, "a", "y", STORAGE_OP_UPDATE, &rev);
    snprintf(key, sizeof key, PREFIX "ns/b");
    assert_int_equal(write_sync(st, STORAGE_OP_DELETE, key, NULL, &rev), STORAGE_OK);
    cobj *o = cacher_get(c, PREFIX "ns/a");
    assert_non_null(o);
    long before = atomic_load(&obj_allocs);
    cobj *conv = cobj_with_json(o, "{\"x\":1}", 7);
    assert_int_equal(atomic_load(&obj_allocs), before + 1);
    assert_string_equal(conv->json, "{\"x\":1}");
    cobj_unref(conv);
    cobj_unref(o);
    size_t n, more;
    cobj **objs = cacher_list(c, PREFIX, NULL, NULL, 0, &n, &rev, &more);
    assert_int_equal(n, 4);
    cacher_objs_free(objs, n);
    /* 3 loaded, 3 written (a's update a new block), 1 converted; the
     * delete's event may carry a block of its own */
    assert_true(atomic_load(&obj_allocs) >= 7);
    storage_close(st);
    cacher_free(c);
    assert_int_equal(atomic_load(&obj_releases), atomic_load(&obj_allocs));
}

/* Back to malloc and free even when an assertion above ended the test
 * early: the other tests' objects must not reach count_release. */
static int restore_object_allocator(void **state)
{
    (void)state;
    cacher_set_object_allocator(malloc, free);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_sets_resource_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_paging_and_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_translation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_and_expiry, setup, teardown),
        cmocka_unit_test(test_list_at_revision),
        cmocka_unit_test(test_human_duration),
        cmocka_unit_test(test_load_serves_what_decoding_did),
        cmocka_unit_test(test_load_many),
        cmocka_unit_test(test_load_sqlite_history),
        cmocka_unit_test(test_bucket_fields_union),
        cmocka_unit_test(test_listeners_get_initial_objects),
        cmocka_unit_test(test_jscan_canonical_forms),
        cmocka_unit_test(test_jscan_set_rv),
        cmocka_unit_test_teardown(test_object_allocator, restore_object_allocator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
