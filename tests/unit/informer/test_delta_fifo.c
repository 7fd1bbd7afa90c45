/* DeltaFIFO: per-key ordering, deletion dedup, Replace with tombstones,
 * resync, has_synced and pop deadlines/close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>

#include "ckube/clock.h"
#include "ckube/informer.h"
#include "ckube/json.h"
#include "informer/informer_internal.h"
#include "util/informer_test_util.h"

/* What one pop delivered. */
struct popped {
    char key[64];
    size_t n;
    ckube_delta_type types[8];
    bool unknown[8];
    json_t *objs[8]; /* references */
    bool initial;
    int calls;
};

static void record(void *ud, const char *key, const ckube_delta *d, size_t n, bool initial)
{
    struct popped *p = ud;
    snprintf(p->key, sizeof(p->key), "%s", key);
    p->n = n;
    for (size_t i = 0; i < n && i < 8; i++) {
        p->types[i] = d[i].type;
        p->unknown[i] = d[i].final_state_unknown;
        p->objs[i] = d[i].obj ? json_incref(d[i].obj) : NULL;
    }
    p->initial = initial;
    p->calls++;
}

static void popped_clear(struct popped *p)
{
    for (size_t i = 0; i < p->n && i < 8; i++)
        json_decref(p->objs[i]);
    memset(p, 0, sizeof(*p));
}

/* Pops one key (it must be there) into *p. */
static void pop1(ckube_delta_fifo *f, struct popped *p)
{
    popped_clear(p);
    assert_int_equal(ckube_delta_fifo_pop(f, 0, record, p), 1);
    assert_int_equal(p->calls, 1);
}

static int value_of(const json_t *o)
{
    return (int)json_integer_value(ckube_json_get_path(o, "spec.value"));
}

static void test_order_and_coalescing(void **state)
{
    (void)state;
    ckube_delta_fifo *f = ckube_delta_fifo_new(NULL, NULL);
    json_t *a1 = tu_obj("ns", "a", NULL, NULL, 1);
    json_t *a2 = tu_obj("ns", "a", NULL, NULL, 2);
    json_t *b1 = tu_obj("ns", "b", NULL, NULL, 1);
    assert_false(ckube_delta_fifo_has_synced(f));
    assert_int_equal(ckube_delta_fifo_add(f, a1), 0);
    assert_int_equal(ckube_delta_fifo_add(f, b1), 0);
    assert_int_equal(ckube_delta_fifo_update(f, a2), 0);
    assert_int_equal(ckube_delta_fifo_delete(f, a2), 0);
    /* A key is queued once; its deltas pile up in order. */
    assert_int_equal(ckube_delta_fifo_len(f), 2);
    ckube_key_list keys;
    assert_int_equal(ckube_delta_fifo_list_keys(f, &keys), 0);
    assert_int_equal(keys.n, 2);
    assert_string_equal(keys.keys[0], "ns/a");
    assert_string_equal(keys.keys[1], "ns/b");
    ckube_key_list_free(&keys);
    /* Adds without a replace make the FIFO populated, hence synced. */
    assert_true(ckube_delta_fifo_has_synced(f));

    struct popped p = {0};
    pop1(f, &p);
    assert_string_equal(p.key, "ns/a");
    assert_int_equal(p.n, 3);
    assert_int_equal(p.types[0], CKUBE_DELTA_ADDED);
    assert_int_equal(p.types[1], CKUBE_DELTA_UPDATED);
    assert_int_equal(p.types[2], CKUBE_DELTA_DELETED);
    assert_false(p.unknown[2]);
    assert_int_equal(value_of(p.objs[0]), 1);
    assert_int_equal(value_of(p.objs[1]), 2);
    pop1(f, &p);
    assert_string_equal(p.key, "ns/b");
    assert_int_equal(p.n, 1);
    assert_int_equal(ckube_delta_fifo_len(f), 0);
    popped_clear(&p);

    /* Deleting something neither queued nor known is not news. */
    assert_int_equal(ckube_delta_fifo_delete(f, a1), 0);
    assert_int_equal(ckube_delta_fifo_len(f), 0);

    /* Bad input. */
    json_t *noname = json_pack("{s:{}}", "metadata");
    assert_int_equal(ckube_delta_fifo_add(f, noname), -1);
    assert_int_equal(ckube_delta_fifo_replace(f, noname, "1"), -1);
    json_decref(noname);

    assert_string_equal(ckube_delta_type_name(CKUBE_DELTA_REPLACED), "Replaced");
    assert_string_equal(ckube_delta_type_name(CKUBE_DELTA_SYNC), "Sync");
    json_decref(a1);
    json_decref(a2);
    json_decref(b1);
    ckube_delta_fifo_free(f);
}

static void test_delete_dedup(void **state)
{
    (void)state;
    ckube_store *known = ckube_store_new(NULL);
    ckube_delta_fifo *f = ckube_delta_fifo_new(known, NULL);
    json_t *a = tu_obj("ns", "a", NULL, NULL, 1);
    json_t *a_del = tu_obj("ns", "a", NULL, NULL, 9);
    ckube_store_put(known, a, NULL);

    /* Two real deletions: one remains (the newer). */
    ckube_delta_fifo_delete(f, a);
    ckube_delta_fifo_delete(f, a_del);
    struct popped p = {0};
    pop1(f, &p);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.types[0], CKUBE_DELTA_DELETED);
    assert_int_equal(value_of(p.objs[0]), 9);

    /* Real deletion, then a relist tombstone: the real one wins. */
    ckube_delta_fifo_delete(f, a_del);
    json_t *empty = json_array();
    ckube_delta_fifo_replace(f, empty, "10");
    pop1(f, &p);
    assert_int_equal(p.n, 1);
    assert_false(p.unknown[0]);
    assert_int_equal(value_of(p.objs[0]), 9);

    /* Tombstone first, then the real deletion: still the real one. */
    ckube_delta_fifo_replace(f, empty, "11");
    ckube_delta_fifo_delete(f, a_del);
    pop1(f, &p);
    assert_int_equal(p.n, 1);
    assert_false(p.unknown[0]);
    popped_clear(&p);
    json_decref(empty);
    json_decref(a);
    json_decref(a_del);
    ckube_delta_fifo_free(f);
    ckube_store_free(known);
}

static void test_replace_tombstones_and_sync(void **state)
{
    (void)state;
    ckube_store *known = ckube_store_new(NULL);
    ckube_delta_fifo *f = ckube_delta_fifo_new(known, NULL);
    /* The cache knows k1, k2 and k5 (say, from before a restart). */
    json_t *k1 = tu_obj("ns", "k1", NULL, NULL, 1);
    json_t *k2 = tu_obj("ns", "k2", NULL, NULL, 1);
    json_t *k3 = tu_obj("ns", "k3", NULL, NULL, 1);
    json_t *k4 = tu_obj("ns", "k4", NULL, NULL, 1);
    json_t *k5 = tu_obj("ns", "k5", NULL, NULL, 1);
    ckube_store_put(known, k1, NULL);
    ckube_store_put(known, k2, NULL);
    ckube_store_put(known, k5, NULL);

    /* First list: k1 k2 k3; k5 is gone (known only: a cached tombstone). */
    json_t *items = json_array();
    json_array_append(items, k1);
    json_array_append(items, k2);
    json_array_append(items, k3);
    assert_int_equal(ckube_delta_fifo_replace(f, items, "20"), 0);
    json_decref(items);
    assert_false(ckube_delta_fifo_has_synced(f));
    /* A relist before anything was popped holds k1 and k4: k2 and k3
     * vanished (queued only: tombstones with their newest queued state). */
    items = json_array();
    json_array_append(items, k1);
    json_array_append(items, k4);
    assert_int_equal(ckube_delta_fifo_replace(f, items, "30"), 0);
    json_decref(items);
    assert_int_equal(ckube_delta_fifo_len(f), 5);

    struct popped p = {0};
    static const char *const order[] = {"ns/k1", "ns/k2", "ns/k3", "ns/k5", "ns/k4"};
    for (int i = 0; i < 5; i++) {
        pop1(f, &p);
        assert_string_equal(p.key, order[i]);
        if (i == 0) {
            assert_int_equal(p.n, 2);
            assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
            assert_int_equal(p.types[1], CKUBE_DELTA_REPLACED);
        } else if (i == 1 || i == 2) {
            assert_int_equal(p.n, 2);
            assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
            assert_int_equal(p.types[1], CKUBE_DELTA_DELETED);
            assert_true(p.unknown[1]);
            assert_ptr_equal(p.objs[1], i == 1 ? k2 : k3);
        } else if (i == 3) {
            /* Known only in the cache: a tombstone with the cached state. */
            assert_int_equal(p.n, 1);
            assert_int_equal(p.types[0], CKUBE_DELTA_DELETED);
            assert_true(p.unknown[0]);
            assert_ptr_equal(p.objs[0], k5);
        } else {
            assert_int_equal(p.n, 1);
            assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
            assert_false(p.unknown[0]);
        }
        /* The first replace queued 4 keys (3 listed + 1 tombstone): they
         * are the initial list, and the FIFO has synced after them. */
        assert_int_equal(p.initial, i < 4);
        assert_int_equal(ckube_delta_fifo_has_synced(f), i >= 3);
    }
    json_decref(k5);

    /* Resync: a Sync per known key without queued deltas. */
    ckube_store_put(known, k4, NULL);
    ckube_store_delete_key(known, "ns/k2", NULL);
    ckube_store_delete_key(known, "ns/k5", NULL);
    json_t *k1b = tu_obj("ns", "k1", NULL, NULL, 2);
    ckube_delta_fifo_update(f, k1b);
    assert_int_equal(ckube_delta_fifo_resync(f), 0);
    assert_int_equal(ckube_delta_fifo_len(f), 2);
    pop1(f, &p);
    assert_string_equal(p.key, "ns/k1");
    assert_int_equal(p.n, 1); /* no Sync on top of the queued update */
    assert_int_equal(p.types[0], CKUBE_DELTA_UPDATED);
    assert_false(p.initial);
    pop1(f, &p);
    assert_string_equal(p.key, "ns/k4");
    assert_int_equal(p.types[0], CKUBE_DELTA_SYNC);
    assert_ptr_equal(p.objs[0], k4);
    popped_clear(&p);

    /* Without a known store, resync does nothing. */
    ckube_delta_fifo *plain = ckube_delta_fifo_new(NULL, NULL);
    assert_int_equal(ckube_delta_fifo_resync(plain), 0);
    assert_int_equal(ckube_delta_fifo_len(plain), 0);
    /* An empty first list means synced at once. */
    json_t *empty = json_array();
    ckube_delta_fifo_replace(plain, empty, "1");
    assert_true(ckube_delta_fifo_has_synced(plain));
    json_decref(empty);
    ckube_delta_fifo_free(plain);

    json_decref(k1);
    json_decref(k1b);
    json_decref(k2);
    json_decref(k3);
    json_decref(k4);
    ckube_delta_fifo_free(f);
    ckube_store_free(known);
}

/* ---- blocking pop: deadline on the (fake) clock, close ---- */

struct popper {
    ckube_delta_fifo *f;
    uint64_t deadline;
    int rc;
    bool done;
    pthread_mutex_t mu;
};

static void *popper_main(void *arg)
{
    struct popper *p = arg;
    int rc = ckube_delta_fifo_pop(p->f, p->deadline, NULL, NULL);
    pthread_mutex_lock(&p->mu);
    p->rc = rc;
    p->done = true;
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static bool popper_done(struct popper *p)
{
    pthread_mutex_lock(&p->mu);
    bool d = p->done;
    pthread_mutex_unlock(&p->mu);
    return d;
}

static void test_pop_deadline_and_close(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    ckube_delta_fifo *f = ckube_delta_fifo_new(NULL, clk);
    struct popper p = {.f = f, .deadline = CKUBE_SEC(1005), .mu = PTHREAD_MUTEX_INITIALIZER};
    pthread_t t;
    pthread_create(&t, NULL, popper_main, &p);
    /* Fake time stands still: the pop waits. */
    tu_sleep_ms(30);
    assert_false(popper_done(&p));
    ckube_fake_clock_advance(clk, CKUBE_SEC(4));
    tu_sleep_ms(20);
    assert_false(popper_done(&p));
    ckube_fake_clock_advance(clk, CKUBE_SEC(1));
    assert_true(TU_WAIT(popper_done(&p), 2000));
    pthread_join(t, NULL);
    assert_int_equal(p.rc, 0);

    /* An item wakes a pop at once. */
    p.done = false;
    p.deadline = 0;
    pthread_create(&t, NULL, popper_main, &p);
    tu_sleep_ms(10);
    json_t *a = tu_obj("ns", "a", NULL, NULL, 1);
    ckube_delta_fifo_add(f, a);
    assert_true(TU_WAIT(popper_done(&p), 2000));
    pthread_join(t, NULL);
    assert_int_equal(p.rc, 1);

    /* Close wakes a blocked pop and makes every later pop return -1, even
     * with keys queued. */
    p.done = false;
    pthread_create(&t, NULL, popper_main, &p);
    tu_sleep_ms(10);
    assert_false(popper_done(&p));
    ckube_delta_fifo_close(f);
    assert_true(TU_WAIT(popper_done(&p), 2000));
    pthread_join(t, NULL);
    assert_int_equal(p.rc, -1);
    ckube_delta_fifo_add(f, a);
    assert_int_equal(ckube_delta_fifo_pop(f, 0, NULL, NULL), -1);
    json_decref(a);
    ckube_delta_fifo_free(f); /* frees the queued key */
    ckube_fake_clock_free(clk);
}

/* ---- the reflector sink ---- */

static void test_sink(void **state)
{
    (void)state;
    ckube_store *known = ckube_store_new(NULL);
    ckube_delta_fifo *f = ckube_delta_fifo_new(known, NULL);
    ckube_reflector_sink s = ckube_delta_fifo_sink(f);
    json_t *a = tu_obj("ns", "a", NULL, NULL, 1);
    json_t *items = json_array();
    json_array_append(items, a);
    assert_int_equal(s.replace(s.ctx, items, "5"), 0);
    assert_int_equal(s.update(s.ctx, a), 0);
    assert_int_equal(s.remove(s.ctx, a), 0);
    json_t *b = tu_obj("ns", "b", NULL, NULL, 1);
    assert_int_equal(s.add(s.ctx, b), 0);
    struct popped p = {0};
    pop1(f, &p);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
    assert_int_equal(p.types[1], CKUBE_DELTA_UPDATED);
    assert_int_equal(p.types[2], CKUBE_DELTA_DELETED);
    pop1(f, &p);
    assert_int_equal(p.types[0], CKUBE_DELTA_ADDED);
    popped_clear(&p);
    json_decref(items);
    json_decref(a);
    json_decref(b);
    ckube_delta_fifo_free(f);
    ckube_store_free(known);
}

/* ---- the incremental replace (a list fed while it is decoded) ---- */

static ckube__cobj *cobj(const char *ns, const char *name, int value)
{
    json_t *o = tu_obj(ns, name, NULL, NULL, value);
    ckube__cobj *c = ckube__cobj_from_json(o, NULL);
    json_decref(o);
    assert_non_null(c);
    return c;
}

/* What the informer-side pop delivered (compact objects). */
struct cpopped {
    char key[64];
    size_t n;
    ckube_delta_type types[8];
    bool unknown[8];
    int values[8]; /* spec.value, -1 without an object */
    bool initial;
    size_t calls;
};

static void crecord(void *ud, const char *key, const ckube__delta *d, size_t n, bool initial)
{
    struct cpopped *p = ud;
    size_t calls = p->calls;
    memset(p, 0, sizeof(*p));
    p->calls = calls;
    snprintf(p->key, sizeof(p->key), "%s", key);
    p->n = n;
    for (size_t i = 0; i < n && i < 8; i++) {
        p->types[i] = d[i].type;
        p->unknown[i] = d[i].final_state_unknown;
        json_t *t = ckube__obj_none(d[i].obj) ? NULL : ckube__obj_tree(d[i].obj);
        p->values[i] = t ? value_of(t) : -1;
        json_decref(t);
    }
    p->initial = initial;
    p->calls++;
}

static void cpop1(ckube_delta_fifo *f, struct cpopped *p)
{
    ckube__delta_batch b = {.process = crecord, .ud = p};
    size_t before = p->calls;
    assert_int_equal(ckube__delta_fifo_pop_objs(f, 0, 1, &b), 1);
    assert_int_equal(p->calls, before + 1);
}

static void test_incremental_replace(void **state)
{
    (void)state;
    ckube_store *known = ckube_store_new(NULL);
    ckube_delta_fifo *f = ckube_delta_fifo_new(known, NULL);
    struct cpopped p = {0};

    /* First list: a, b, c arrive in two batches; a is popped (and
     * stored) before the list ends. */
    ckube__cobj *a = cobj("ns", "a", 1), *b = cobj("ns", "b", 2), *c = cobj("ns", "c", 3);
    json_t *empty = json_object();
    ckube__cobj *noname = ckube__cobj_from_json(empty, NULL);
    json_decref(empty);
    assert_non_null(noname);
    assert_int_equal(ckube__delta_fifo_replace_begin(f), 0);
    ckube__cobj *batch1[] = {a, noname};
    assert_int_equal(ckube__delta_fifo_replace_add(f, batch1, 2), 0);
    assert_false(ckube_delta_fifo_has_synced(f));
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/a");
    assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
    assert_true(p.initial); /* part of the initial list */
    assert_int_equal(ckube__store_put_obj(known, (ckube__obj){.c = a}, NULL), 0);
    ckube__cobj *batch2[] = {b, c, b}; /* listed twice: queued once */
    assert_int_equal(ckube__delta_fifo_replace_add(f, batch2, 3), 0);
    assert_false(ckube_delta_fifo_has_synced(f));
    assert_int_equal(ckube__delta_fifo_replace_end(f), 0);
    /* a is known and listed: not a deletion; b and c remain. */
    assert_int_equal(ckube_delta_fifo_len(f), 2);
    assert_false(ckube_delta_fifo_has_synced(f));
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/b");
    assert_int_equal(p.n, 2);
    assert_true(p.initial);
    ckube__store_put_obj(known, (ckube__obj){.c = b}, NULL);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/c");
    assert_true(p.initial);
    ckube__store_put_obj(known, (ckube__obj){.c = c}, NULL);
    assert_true(ckube_delta_fifo_has_synced(f));

    /* A relist without b and c, while an update of d is queued (d is
     * neither listed nor known) and c was popped mid-way: b and c (known)
     * and d (queued) become final-state-unknown deletions; a stays. */
    ckube__cobj *d = cobj("ns", "d", 4), *a2 = cobj("ns", "a", 10);
    assert_int_equal(ckube__delta_fifo_add_obj(f, CKUBE_DELTA_UPDATED, (ckube__obj){.c = d}), 0);
    assert_int_equal(ckube__delta_fifo_replace_begin(f), 0);
    ckube__cobj *batch3[] = {a2};
    assert_int_equal(ckube__delta_fifo_replace_add(f, batch3, 1), 0);
    assert_int_equal(ckube__delta_fifo_replace_end(f), 0);
    assert_int_equal(ckube_delta_fifo_len(f), 4);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/d");
    assert_int_equal(p.n, 2);
    assert_int_equal(p.types[1], CKUBE_DELTA_DELETED);
    assert_true(p.unknown[1]);
    assert_int_equal(p.values[1], 4); /* its last state */
    assert_false(p.initial);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/a");
    assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
    assert_int_equal(p.values[0], 10);
    for (int i = 0; i < 2; i++) {
        cpop1(f, &p);
        assert_true(strcmp(p.key, "ns/b") == 0 || strcmp(p.key, "ns/c") == 0);
        assert_int_equal(p.types[0], CKUBE_DELTA_DELETED);
        assert_true(p.unknown[0]);
        assert_int_equal(p.values[0], strcmp(p.key, "ns/b") == 0 ? 2 : 3);
        ckube__store_delete_obj(known, p.key, NULL);
    }
    assert_int_equal(ckube_delta_fifo_len(f), 0);

    /* An aborted list keeps what it queued and deletes nothing. */
    assert_int_equal(ckube__delta_fifo_replace_begin(f), 0);
    ckube__cobj *batch4[] = {d};
    assert_int_equal(ckube__delta_fifo_replace_add(f, batch4, 1), 0);
    ckube__delta_fifo_replace_abort(f);
    assert_int_equal(ckube_delta_fifo_len(f), 1);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/d");
    assert_int_equal(p.n, 1);
    assert_true(ckube_delta_fifo_has_synced(f));

    /* Popping in batches: up to `max` keys per call. */
    ckube__cobj *many[5];
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "m%d", i);
        many[i] = cobj("ns", name, i);
        ckube__delta_fifo_add_obj(f, CKUBE_DELTA_ADDED, (ckube__obj){.c = many[i]});
    }
    ckube__delta_batch bt = {.process = crecord, .ud = &p};
    size_t before = p.calls;
    assert_int_equal(ckube__delta_fifo_pop_objs(f, 0, 3, &bt), 3);
    assert_int_equal(p.calls, before + 3);
    assert_int_equal(ckube__delta_fifo_pop_objs(f, 0, 64, &bt), 2);
    assert_string_equal(p.key, "ns/m4"); /* in order */
    for (int i = 0; i < 5; i++)
        ckube__cobj_unref(many[i]);

    ckube__cobj_unref(a);
    ckube__cobj_unref(a2);
    ckube__cobj_unref(b);
    ckube__cobj_unref(c);
    ckube__cobj_unref(d);
    ckube__cobj_unref(noname);
    ckube_delta_fifo_free(f);
    ckube_store_free(known);
}

/* A replace that begins with nothing queued and nothing known (the first
 * list) takes a shortcut at its end: nothing can have vanished. One that
 * begins with something queued but nothing known must still find the
 * queued key missing from the list. */
static void test_incremental_replace_from_empty(void **state)
{
    (void)state;
    ckube_store *known = ckube_store_new(NULL);
    ckube_delta_fifo *f = ckube_delta_fifo_new(known, NULL);
    struct cpopped p = {0};
    ckube__cobj *a = cobj("ns", "a", 1), *b = cobj("ns", "b", 2), *x = cobj("ns", "x", 9);

    /* Empty start; a is popped, stored and resynced while b is listed. */
    assert_int_equal(ckube__delta_fifo_replace_begin(f), 0);
    ckube__cobj *first[] = {a};
    assert_int_equal(ckube__delta_fifo_replace_add(f, first, 1), 0);
    cpop1(f, &p);
    assert_int_equal(ckube__store_put_obj(known, (ckube__obj){.c = a}, NULL), 0);
    assert_int_equal(ckube_delta_fifo_resync(f), 0); /* a: SYNC queued */
    ckube__cobj *second[] = {b};
    assert_int_equal(ckube__delta_fifo_replace_add(f, second, 1), 0);
    assert_int_equal(ckube__delta_fifo_replace_end(f), 0);
    /* No deletion: a's SYNC and b's REPLACED (b alone counts toward the
     * initial population, which, as upstream's, any pop counts down). */
    assert_int_equal(ckube_delta_fifo_len(f), 2);
    assert_false(ckube_delta_fifo_has_synced(f));
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/a");
    assert_int_equal(p.types[0], CKUBE_DELTA_SYNC);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/b");
    assert_int_equal(p.types[0], CKUBE_DELTA_REPLACED);
    assert_true(ckube_delta_fifo_has_synced(f));
    ckube_delta_fifo_free(f);
    ckube_store_free(known);

    /* Nothing known, but x queued before the list began: the list (a
     * only) makes x a final-state-unknown deletion. */
    known = ckube_store_new(NULL);
    f = ckube_delta_fifo_new(known, NULL);
    assert_int_equal(ckube__delta_fifo_add_obj(f, CKUBE_DELTA_ADDED, (ckube__obj){.c = x}), 0);
    assert_int_equal(ckube__delta_fifo_replace_begin(f), 0);
    assert_int_equal(ckube__delta_fifo_replace_add(f, first, 1), 0);
    assert_int_equal(ckube__delta_fifo_replace_end(f), 0);
    assert_int_equal(ckube_delta_fifo_len(f), 2);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/x");
    assert_int_equal(p.n, 2);
    assert_int_equal(p.types[1], CKUBE_DELTA_DELETED);
    assert_true(p.unknown[1]);
    cpop1(f, &p);
    assert_string_equal(p.key, "ns/a");
    ckube_delta_fifo_free(f);
    ckube_store_free(known);

    ckube__cobj_unref(a);
    ckube__cobj_unref(b);
    ckube__cobj_unref(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental_replace),
        cmocka_unit_test(test_incremental_replace_from_empty),
        cmocka_unit_test(test_order_and_coalescing),
        cmocka_unit_test(test_delete_dedup),
        cmocka_unit_test(test_replace_tombstones_and_sync),
        cmocka_unit_test(test_pop_deadline_and_close),
        cmocka_unit_test(test_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
