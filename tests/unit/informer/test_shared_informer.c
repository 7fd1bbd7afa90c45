/* Shared informers over the fake list-watch: handlers stay consistent
 * with the server through random changes, drops, broken connections and
 * 410s; tombstones after a relist; resync; late handlers; slow handlers;
 * cache sync; memory accounting; listers; the factory; clean stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "ckube/clock.h"
#include "ckube/fake.h"
#include "ckube/informer.h"
#include "ckube/json.h"
#include "informer/informer_internal.h"
#include "util/informer_test_util.h"

/* ---- a handler that mirrors what it is told and checks it makes sense ---- */

struct entry {
    char *key;
    json_t *obj; /* shared cache object: atomic reference */
};

struct hrec {
    const char *name;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct entry *e;
    size_t n, cap;
    size_t adds, initial_adds, updates, syncs, deletes, tombstones;
    char err[512];
    /* a gate: while closed, on_add blocks (a slow handler) */
    bool gated, gate_open;
    /* the order of added names */
    char order[64][16];
    size_t norder;
};

static void hrec_init(struct hrec *h, const char *name)
{
    memset(h, 0, sizeof(*h));
    h->name = name;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cond, NULL);
}

static void hrec_free(struct hrec *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->e[i].key);
        ckube_obj_unref(h->e[i].obj);
    }
    free(h->e);
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->mu);
}

static struct entry *hrec_find(struct hrec *h, const char *key)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->e[i].key, key) == 0)
            return &h->e[i];
    return NULL;
}

static void hrec_error(struct hrec *h, const char *what, const char *key)
{
    if (!h->err[0])
        snprintf(h->err, sizeof(h->err), "%s: %s %s", h->name, what, key);
}

static bool same_rv(const json_t *a, const json_t *b)
{
    const char *ra = ckube_obj_resource_version(a), *rb = ckube_obj_resource_version(b);
    return ra && rb && strcmp(ra, rb) == 0;
}

static void h_add(void *ud, const json_t *obj, bool initial)
{
    struct hrec *h = ud;
    char *key = ckube_meta_namespace_key(obj);
    pthread_mutex_lock(&h->mu);
    while (h->gated && !h->gate_open)
        pthread_cond_wait(&h->cond, &h->mu);
    if (hrec_find(h, key)) {
        hrec_error(h, "add of a key it already has", key);
        free(key);
    } else {
        if (h->n == h->cap) {
            h->cap = h->cap ? h->cap * 2 : 16;
            h->e = realloc(h->e, h->cap * sizeof(*h->e));
        }
        h->e[h->n++] = (struct entry){.key = key, .obj = ckube_obj_ref((json_t *)obj)};
    }
    h->adds++;
    h->initial_adds += initial;
    if (h->norder < 64)
        snprintf(h->order[h->norder++], 16, "%s", ckube_obj_name(obj));
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mu);
}

static void h_update(void *ud, const json_t *old, const json_t *new_obj)
{
    struct hrec *h = ud;
    char *key = ckube_meta_namespace_key(new_obj);
    pthread_mutex_lock(&h->mu);
    struct entry *e = hrec_find(h, key);
    if (!e) {
        hrec_error(h, "update of an unknown key", key);
    } else {
        if (!same_rv(e->obj, old))
            hrec_error(h, "update whose old object is not the last one seen", key);
        ckube_obj_unref(e->obj);
        e->obj = ckube_obj_ref((json_t *)new_obj);
    }
    if (old == new_obj)
        h->syncs++;
    else
        h->updates++;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mu);
    free(key);
}

static void h_delete(void *ud, const json_t *obj, const char *tombstone_key)
{
    struct hrec *h = ud;
    char *key = tombstone_key ? strdup(tombstone_key) : ckube_meta_namespace_key(obj);
    pthread_mutex_lock(&h->mu);
    struct entry *e = hrec_find(h, key);
    if (!e) {
        hrec_error(h, "delete of an unknown key", key);
    } else {
        /* A tombstone carries the last state the cache had. */
        if (tombstone_key && !same_rv(e->obj, obj))
            hrec_error(h, "tombstone that is not the last state seen", key);
        free(e->key);
        ckube_obj_unref(e->obj);
        *e = h->e[--h->n];
    }
    h->deletes++;
    h->tombstones += tombstone_key != NULL;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mu);
    free(key);
}

static ckube_event_handler handler_of(struct hrec *h)
{
    return (ckube_event_handler){
        .on_add = h_add, .on_update = h_update, .on_delete = h_delete, .ud = h};
}

static size_t hget(struct hrec *h, size_t *field)
{
    pthread_mutex_lock(&h->mu);
    size_t v = *field;
    pthread_mutex_unlock(&h->mu);
    return v;
}

static void gate(struct hrec *h, bool open)
{
    pthread_mutex_lock(&h->mu);
    h->gated = true;
    h->gate_open = open;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mu);
}

/* True when the handler's view equals the fake's objects (keys and RVs). */
static bool hrec_matches(struct hrec *h, ckube_fake_lw *fake)
{
    json_t *objs = ckube_fake_lw_objects(fake);
    pthread_mutex_lock(&h->mu);
    bool ok = h->n == json_array_size(objs);
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o)
    {
        if (!ok)
            break;
        char *k = ckube_meta_namespace_key(o);
        struct entry *e = hrec_find(h, k);
        free(k);
        ok = e && same_rv(e->obj, o);
    }
    pthread_mutex_unlock(&h->mu);
    json_decref(objs);
    return ok;
}

static bool store_matches(ckube_shared_informer *inf, ckube_fake_lw *fake)
{
    json_t *objs = ckube_fake_lw_objects(fake);
    ckube_obj_list l;
    ckube_store_list(ckube_shared_informer_store(inf), &l);
    bool ok = l.n == json_array_size(objs);
    for (size_t i = 0; ok && i < l.n; i++) /* both sorted by key */
        ok = same_rv(l.items[i], json_array_get(objs, i));
    ckube_obj_list_free(&l);
    json_decref(objs);
    return ok;
}

static void assert_no_error(struct hrec *h)
{
    pthread_mutex_lock(&h->mu);
    if (h->err[0])
        fail_msg("%s", h->err);
    pthread_mutex_unlock(&h->mu);
}

static void *noop_thread(void *arg)
{
    return arg;
}

/* Threads in this process. The first thread ever created may start a
 * sanitizer's background thread, so one is created and joined first. */
static size_t thread_count(void)
{
    pthread_t t;
    pthread_create(&t, NULL, noop_thread, NULL);
    pthread_join(t, NULL);
    DIR *d = opendir("/proc/self/task");
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static ckube_fake_lw *new_fake(ckube_clock *clk, int nobjs)
{
    ckube_fake_lw_opts fo = {.clock = clk, .resource = "widgets.example.com"};
    ckube_fake_lw *f = ckube_fake_lw_new(&fo);
    for (int i = 0; i < nobjs; i++) {
        char name[16];
        snprintf(name, sizeof(name), "w%02d", i);
        json_t *o = tu_obj(i % 2 ? "ns1" : "ns2", name, "app", i % 3 ? "web" : "db", i);
        ckube_fake_lw_add(f, o);
        json_decref(o);
    }
    return f;
}

/* Reflector tuning for real-clock tests: fast retries. */
static const ckube_backoff_opts fast_backoff = {
    .initial_ns = CKUBE_MS(1), .max_ns = CKUBE_MS(5), .jitter = -1};

/* ---- random changes with failures: everyone stays consistent ---- */

static void test_consistency_under_chaos(void **state)
{
    (void)state;
    size_t threads_before = thread_count();
    ckube_fake_lw *fake = new_fake(NULL, 20);
    ckube_informer_opts o = {.backoff = fast_backoff};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    assert_non_null(inf);
    struct hrec h[3];
    hrec_init(&h[0], "h0");
    hrec_init(&h[1], "h1");
    hrec_init(&h[2], "h2 (resync)");
    ckube_event_handler eh[3] = {handler_of(&h[0]), handler_of(&h[1]), handler_of(&h[2])};
    assert_non_null(ckube_shared_informer_add_handler(inf, &eh[0]));
    assert_non_null(ckube_shared_informer_add_handler(inf, &eh[1]));
    assert_non_null(ckube_shared_informer_add_handler_with_resync(inf, &eh[2], CKUBE_MS(1)));
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    ckube_shared_informer *list[] = {inf};
    assert_true(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));

    unsigned seed = 12345;
    int next_name = 100;
    for (int i = 0; i < 600; i++) {
        int r = rand_r(&seed) % 100;
        json_t *objs = ckube_fake_lw_objects(fake);
        size_t n = json_array_size(objs);
        json_t *victim = n ? json_array_get(objs, (size_t)rand_r(&seed) % n) : NULL;
        if (r < 35 && victim) {
            json_t *c = json_deep_copy(victim);
            json_object_set_new(json_object_get(c, "spec"), "value", json_integer(i));
            ckube_fake_lw_update(fake, c);
            json_decref(c);
        } else if (r < 60) {
            char name[16];
            snprintf(name, sizeof(name), "w%03d", next_name++);
            json_t *c = tu_obj(rand_r(&seed) % 2 ? "ns1" : "ns3", name, "app", "web", i);
            ckube_fake_lw_add(fake, c);
            json_decref(c);
        } else if (r < 82 && victim) {
            ckube_fake_lw_delete(fake, ckube_obj_namespace(victim), ckube_obj_name(victim));
        } else if (r < 86) {
            ckube_fake_lw_drop_watches(fake);
        } else if (r < 90) {
            ckube_fake_lw_expire_watches(fake);
        } else if (r < 93) {
            ckube_fake_lw_break_watches(fake);
        } else if (r < 96) {
            /* Changes the informer cannot replay: it must relist. */
            ckube_fake_lw_compact(fake);
            ckube_fake_lw_drop_watches(fake);
        } else {
            ckube_fake_lw_bump_rv(fake);
            ckube_fake_lw_bookmark(fake);
        }
        json_decref(objs);
        if (rand_r(&seed) % 8 == 0)
            tu_sleep_ms(1);
    }
    for (int i = 0; i < 3; i++) {
        if (!TU_WAIT(hrec_matches(&h[i], fake), 20000))
            fail_msg("handler %s does not match the server", h[i].name);
        assert_no_error(&h[i]);
    }
    assert_true(TU_WAIT(store_matches(inf, fake), 5000));
    assert_int_equal(ckube_shared_informer_object_count(inf), ckube_fake_lw_count(fake));
    /* Something of every kind happened. */
    for (int i = 0; i < 3; i++) {
        assert_true(hget(&h[i], &h[i].updates) > 0);
        assert_true(hget(&h[i], &h[i].deletes) > 0);
        assert_int_equal(hget(&h[i], &h[i].initial_adds), 20);
    }
    /* The resync handler (1 s) got replays; the others never do. */
    assert_true(TU_WAIT(hget(&h[2], &h[2].syncs) > 0, 5000));
    assert_int_equal(hget(&h[0], &h[0].syncs), 0);
    assert_int_equal(hget(&h[1], &h[1].syncs), 0);
    assert_true(ckube_fake_lw_list_calls(fake) > 1);

    /* Stop joins every thread; nothing is called afterwards. */
    ckube_shared_informer_stop(inf);
    assert_int_equal(thread_count(), threads_before);
    size_t adds = hget(&h[0], &h[0].adds);
    json_t *late = tu_obj("ns1", "after-stop", NULL, NULL, 0);
    ckube_fake_lw_add(fake, late);
    json_decref(late);
    tu_sleep_ms(20);
    assert_int_equal(hget(&h[0], &h[0].adds), adds);
    assert_false(ckube_shared_informer_is_started(inf));
    assert_int_equal(ckube_shared_informer_start(inf), -1);
    assert_null(ckube_shared_informer_add_handler(inf, &eh[0]));
    ckube_shared_informer_free(inf);
    assert_int_equal(ckube_fake_lw_open_watches(fake), 0);
    ckube_fake_lw_unref(fake);
    for (int i = 0; i < 3; i++)
        hrec_free(&h[i]);
}

/* ---- tombstones after a relist ---- */

/* Waits until the reflector sleeps on the fake clock with no watch open.
 * `others` threads wait on the clock anyway (the informer's delta thread
 * does when a handler has a resync period). */
static void wait_sleeping(ckube_fake_lw *fake, ckube_clock *clk, size_t others)
{
    assert_true(TU_WAIT(
        ckube_fake_lw_open_watches(fake) == 0 && ckube_fake_clock_waiters(clk) > others, 5000));
}

static void test_tombstones_after_relist(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(100));
    ckube_fake_lw *fake = new_fake(clk, 0);
    json_t *a = tu_obj("ns", "a", NULL, NULL, 1);
    json_t *b = tu_obj("ns", "b", NULL, NULL, 1);
    json_t *c = tu_obj("ns", "c", NULL, NULL, 1);
    ckube_fake_lw_add(fake, a);
    uint64_t b_rv = ckube_fake_lw_add(fake, b);
    uint64_t c_rv = ckube_fake_lw_add(fake, c);
    ckube_informer_opts o = {.clock = clk, .backoff = {.jitter = -1}};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    struct hrec h;
    hrec_init(&h, "h");
    ckube_event_handler eh = handler_of(&h);
    ckube_handler_reg *reg = ckube_shared_informer_add_handler(inf, &eh);
    assert_false(ckube_handler_reg_has_synced(reg));
    ckube_shared_informer_start(inf);
    ckube_shared_informer *list[] = {inf};
    assert_true(ckube_wait_for_cache_sync(list, 1, 0));
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(reg), 5000));
    assert_int_equal(hget(&h, &h.initial_adds), 3);
    assert_true(TU_WAIT(ckube_fake_lw_open_watches(fake) == 1, 5000));

    /* The watch breaks and cannot be re-opened for a while... */
    ckube_status *unavailable = ckube_status_new(503, CKUBE_REASON_SERVICE_UNAVAILABLE, "busy");
    ckube_fake_lw_fail_watches(fake, unavailable, -1);
    ckube_status_free(unavailable);
    ckube_fake_lw_bookmark(fake);
    ckube_fake_lw_drop_watches(fake);
    assert_true(ckube_fake_lw_wait_calls(fake, CKUBE_FAKE_WATCH, 2, 5000));
    wait_sleeping(fake, clk, 0);
    /* ...meanwhile b is deleted, c changes, d appears, and the server
     * forgets the history. */
    ckube_fake_lw_delete(fake, "ns", "b");
    json_t *c2 = tu_obj("ns", "c", NULL, NULL, 2);
    ckube_fake_lw_update(fake, c2);
    json_t *d = tu_obj("ns", "d", NULL, NULL, 1);
    ckube_fake_lw_add(fake, d);
    ckube_fake_lw_compact(fake);
    ckube_fake_lw_fail_watches(fake, NULL, 0);
    ckube_fake_clock_advance(clk, CKUBE_MS(800)); /* re-watch: 410 */
    assert_true(ckube_fake_lw_wait_calls(fake, CKUBE_FAKE_WATCH, 3, 5000));
    wait_sleeping(fake, clk, 0);
    ckube_fake_clock_advance(clk, CKUBE_MS(1600)); /* relist */
    assert_true(TU_WAIT(hrec_matches(&h, fake), 5000));
    assert_no_error(&h);
    assert_int_equal(hget(&h, &h.tombstones), 1);
    assert_int_equal(hget(&h, &h.deletes), 1);
    assert_int_equal(hget(&h, &h.updates), 1); /* c; a is unchanged: nothing */
    assert_int_equal(hget(&h, &h.syncs), 0);
    assert_int_equal(hget(&h, &h.adds), 4);
    assert_int_equal(hget(&h, &h.initial_adds), 3); /* d is not initial */
    (void)b_rv;
    (void)c_rv;
    char *rv = ckube_shared_informer_last_sync_resource_version(inf);
    char want[32];
    snprintf(want, sizeof(want), "%" PRIu64, ckube_fake_lw_resource_version(fake));
    assert_string_equal(rv, want);
    free(rv);
    ckube_fake_call call;
    ckube_fake_lw_last_call(fake, CKUBE_FAKE_LIST, &call);
    assert_string_equal(call.resource_version, "");
    ckube_fake_call_clear(&call);

    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
    hrec_free(&h);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(c2);
    json_decref(d);
    ckube_fake_clock_free(clk);
}

/* ---- resync ---- */

static void test_resync(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(100));
    ckube_fake_lw *fake = new_fake(clk, 2);
    ckube_informer_opts o = {.clock = clk, .backoff = {.jitter = -1}};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    struct hrec r, n, m;
    hrec_init(&r, "r");
    hrec_init(&n, "n");
    hrec_init(&m, "m");
    ckube_event_handler er = handler_of(&r), en = handler_of(&n), em = handler_of(&m);
    ckube_shared_informer_add_handler_with_resync(inf, &er, CKUBE_SEC(1));
    ckube_shared_informer_add_handler(inf, &en); /* informer default: none */
    /* Below the minimum: raised to 1 s. */
    ckube_shared_informer_add_handler_with_resync(inf, &em, CKUBE_MS(300));
    ckube_shared_informer_start(inf);
    assert_true(
        TU_WAIT(hget(&r, &r.adds) == 2 && hget(&n, &n.adds) == 2 && hget(&m, &m.adds) == 2, 5000));
    assert_true(TU_WAIT(ckube_fake_lw_open_watches(fake) == 1, 5000));

    ckube_fake_clock_advance(clk, CKUBE_MS(999));
    tu_sleep_ms(30);
    assert_int_equal(hget(&r, &r.syncs) + hget(&m, &m.syncs), 0);
    ckube_fake_clock_advance(clk, CKUBE_MS(1));
    /* Every cached object, replayed as update(obj, obj). */
    assert_true(TU_WAIT(hget(&r, &r.syncs) == 2 && hget(&m, &m.syncs) == 2, 5000));
    ckube_fake_clock_advance(clk, CKUBE_SEC(1));
    assert_true(TU_WAIT(hget(&r, &r.syncs) == 4 && hget(&m, &m.syncs) == 4, 5000));
    tu_sleep_ms(20);
    assert_int_equal(hget(&n, &n.syncs) + hget(&n, &n.updates), 0);
    assert_int_equal(hget(&r, &r.updates), 0);
    /* No server call for a resync. */
    assert_int_equal(ckube_fake_lw_list_calls(fake), 1);
    assert_int_equal(ckube_fake_lw_watch_calls(fake), 1);

    /* A relist of unchanged objects is no news to a handler without
     * resync. */
    ckube_fake_lw_expire_watches(fake);
    wait_sleeping(fake, clk, 1);
    ckube_fake_clock_advance(clk, CKUBE_MS(800));
    assert_true(TU_WAIT(ckube_fake_lw_list_calls(fake) == 2, 5000));
    assert_true(TU_WAIT(ckube_fake_lw_open_watches(fake) == 1, 5000));
    tu_sleep_ms(20);
    assert_int_equal(hget(&n, &n.syncs) + hget(&n, &n.updates) + hget(&n, &n.adds), 2);

    /* A handler added late with a resync is resynced on time too. */
    struct hrec late;
    hrec_init(&late, "late");
    ckube_event_handler el = handler_of(&late);
    ckube_shared_informer_add_handler_with_resync(inf, &el, CKUBE_SEC(5));
    assert_true(TU_WAIT(hget(&late, &late.adds) == 2, 5000));
    ckube_fake_clock_advance(clk, CKUBE_SEC(5));
    assert_true(TU_WAIT(hget(&late, &late.syncs) == 2, 5000));
    struct hrec *all[] = {&r, &n, &m, &late};
    for (size_t i = 0; i < 4; i++)
        assert_no_error(all[i]);

    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
    hrec_free(&r);
    hrec_free(&n);
    hrec_free(&m);
    hrec_free(&late);
    ckube_fake_clock_free(clk);
}

/* ---- late and slow handlers ---- */

static void test_late_handler(void **state)
{
    (void)state;
    ckube_fake_lw *fake = new_fake(NULL, 3);
    ckube_informer_opts o = {.backoff = fast_backoff};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    ckube_shared_informer_start(inf);
    ckube_shared_informer *list[] = {inf};
    assert_true(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));
    struct hrec h;
    hrec_init(&h, "late");
    ckube_event_handler eh = handler_of(&h);
    ckube_handler_reg *reg = ckube_shared_informer_add_handler(inf, &eh);
    assert_non_null(reg);
    /* The current contents, as initial adds. */
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(reg), 5000));
    assert_int_equal(hget(&h, &h.adds), 3);
    assert_int_equal(hget(&h, &h.initial_adds), 3);
    json_t *x = tu_obj("ns1", "x", NULL, NULL, 0);
    ckube_fake_lw_add(fake, x);
    json_decref(x);
    assert_true(TU_WAIT(hget(&h, &h.adds) == 4, 5000));
    assert_int_equal(hget(&h, &h.initial_adds), 3);
    assert_true(hrec_matches(&h, fake));
    assert_no_error(&h);

    /* Removing it stops its deliveries. */
    assert_int_equal(ckube_shared_informer_remove_handler(inf, reg), 0);
    x = tu_obj("ns1", "y", NULL, NULL, 0);
    ckube_fake_lw_add(fake, x);
    json_decref(x);
    assert_true(TU_WAIT(ckube_shared_informer_object_count(inf) == 5, 5000));
    tu_sleep_ms(10);
    assert_int_equal(hget(&h, &h.adds), 4);
    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
    hrec_free(&h);
}

struct opener {
    struct hrec *h;
    int after_ms;
};

static void *open_later(void *arg)
{
    struct opener *o = arg;
    tu_sleep_ms(o->after_ms);
    gate(o->h, true);
    return NULL;
}

static void test_slow_handler(void **state)
{
    (void)state;
    ckube_fake_lw *fake = new_fake(NULL, 5);
    ckube_informer_opts o = {.backoff = fast_backoff};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    struct hrec slow, fast;
    hrec_init(&slow, "slow");
    hrec_init(&fast, "fast");
    gate(&slow, false);
    ckube_event_handler es = handler_of(&slow), ef = handler_of(&fast);
    ckube_handler_reg *sreg = ckube_shared_informer_add_handler(inf, &es);
    ckube_handler_reg *freg = ckube_shared_informer_add_handler(inf, &ef);
    ckube_shared_informer_start(inf);
    /* The fast handler gets everything while the slow one is stuck. */
    assert_true(TU_WAIT(hget(&fast, &fast.adds) == 5, 5000));
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "more%d", i);
        json_t *x = tu_obj("ns1", name, NULL, NULL, 0);
        ckube_fake_lw_add(fake, x);
        json_decref(x);
    }
    assert_true(TU_WAIT(hget(&fast, &fast.adds) == 10, 5000));
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(freg), 5000));
    assert_true(ckube_shared_informer_has_synced(inf));
    assert_int_equal(hget(&slow, &slow.adds), 0);
    assert_false(ckube_handler_reg_has_synced(sreg));
    /* Released, it catches up in order. */
    gate(&slow, true);
    assert_true(TU_WAIT(hget(&slow, &slow.adds) == 10, 5000));
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(sreg), 5000));
    pthread_mutex_lock(&slow.mu);
    pthread_mutex_lock(&fast.mu);
    for (size_t i = 0; i < 10; i++)
        assert_string_equal(slow.order[i], fast.order[i]);
    assert_string_equal(slow.order[0], "w01"); /* list order: by key, ns1/ first */
    assert_string_equal(slow.order[9], "more4");
    pthread_mutex_unlock(&fast.mu);
    pthread_mutex_unlock(&slow.mu);

    /* Stop while it is stuck again: the callback in progress finishes,
     * the queued events are dropped, and stop returns. */
    gate(&slow, false);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof(name), "last%d", i);
        json_t *x = tu_obj("ns1", name, NULL, NULL, 0);
        ckube_fake_lw_add(fake, x);
        json_decref(x);
    }
    assert_true(TU_WAIT(hget(&fast, &fast.adds) == 14, 5000));
    struct opener op = {.h = &slow, .after_ms = 200};
    pthread_t t;
    pthread_create(&t, NULL, open_later, &op);
    ckube_shared_informer_stop(inf);
    pthread_join(t, NULL);
    assert_int_equal(hget(&slow, &slow.adds), 11);
    assert_no_error(&slow);
    assert_no_error(&fast);
    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
    hrec_free(&slow);
    hrec_free(&fast);
}

/* ---- cache sync, accounting, listers ---- */

static void app_index(void *ud, const json_t *obj, ckube_index_values *out)
{
    (void)ud;
    const char *v = json_string_value(ckube_json_get_path(obj, "metadata.labels.app"));
    if (v)
        ckube_index_values_add(out, v);
}

static void test_sync_accounting_listers(void **state)
{
    (void)state;
    ckube_fake_lw *fake = new_fake(NULL, 6);
    ckube_status *st = ckube_status_new(500, CKUBE_REASON_INTERNAL, "not yet");
    ckube_fake_lw_fail_lists(fake, st, -1);
    ckube_status_free(st);
    ckube_indexer ix = {.name = "app", .fn = app_index};
    ckube_informer_opts o = {
        .backoff = fast_backoff, .indexers = &ix, .nindexers = 1, .name = "widgets"};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    assert_string_equal(ckube_shared_informer_name(inf), "widgets");
    ckube_shared_informer *list[] = {inf};
    /* Not started: no waiting. */
    assert_false(ckube_shared_informer_has_synced(inf));
    assert_false(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));
    assert_null(ckube_shared_informer_last_sync_resource_version(inf));
    ckube_shared_informer_start(inf);
    /* Failing lists: a timeout. */
    uint64_t t0 = ckube_monotonic_ns();
    assert_false(ckube_wait_for_cache_sync(list, 1, CKUBE_MS(50)));
    assert_true(ckube_monotonic_ns() - t0 >= CKUBE_MS(50));
    assert_false(ckube_shared_informer_has_synced(inf));
    ckube_fake_lw_fail_lists(fake, NULL, 0);
    assert_true(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));
    assert_true(ckube_shared_informer_has_synced(inf));

    /* Memory accounting. */
    assert_int_equal(ckube_shared_informer_object_count(inf), 6);
    size_t b6 = ckube_shared_informer_bytes(inf);
    assert_true(b6 > 6 * 200);
    json_t *big = tu_obj("ns1", "big", "app", "web", 0);
    json_t *blob = json_array();
    for (int i = 0; i < 200; i++)
        json_array_append_new(blob, json_string("a fairly long string, repeated many times"));
    json_object_set_new(json_object_get(big, "spec"), "blob", blob);
    ckube_fake_lw_add(fake, big);
    json_decref(big);
    assert_true(TU_WAIT(ckube_shared_informer_object_count(inf) == 7, 5000));
    assert_true(ckube_shared_informer_bytes(inf) > b6 + 200 * 40);

    /* Listers. */
    ckube_lister l = ckube_shared_informer_lister(inf);
    json_t *got = ckube_lister_get(&l, "ns1", "big");
    assert_non_null(got);
    /* managedFields-free, same object the store holds. */
    json_t *again = ckube_store_get(ckube_shared_informer_store(inf), "ns1/big");
    assert_ptr_equal(got, again);
    ckube_obj_unref(got);
    ckube_obj_unref(again);
    ckube_obj_list out;
    assert_int_equal(ckube_lister_list(&l, "ns1", NULL, &out), 0);
    assert_int_equal(out.n, 4); /* w01 w03 w05 big */
    ckube_obj_list_free(&out);
    ckube_selector *sel;
    assert_int_equal(ckube_label_selector_parse("app in (db)", &sel, NULL), 0);
    assert_int_equal(ckube_lister_list(&l, NULL, sel, &out), 0);
    assert_int_equal(out.n, 2); /* w00 w03 */
    ckube_obj_list_free(&out);
    ckube_selector_free(sel);
    assert_int_equal(ckube_lister_by_index(&l, "app", "web", &out), 0);
    assert_int_equal(out.n, 5);
    ckube_obj_list_free(&out);
    /* An index added to a running informer is built at once. */
    ckube_indexer ix2 = {.name = "app2", .fn = app_index};
    assert_int_equal(ckube_shared_informer_add_indexer(inf, &ix2, NULL), 0);
    assert_int_equal(ckube_lister_by_index(&l, "app2", "web", &out), 0);
    assert_int_equal(out.n, 5);
    ckube_obj_list_free(&out);

    /* Everything deleted: nothing accounted. */
    json_t *objs = ckube_fake_lw_objects(fake);
    size_t i;
    json_t *x;
    json_array_foreach(objs, i, x)
    {
        ckube_fake_lw_delete(fake, ckube_obj_namespace(x), ckube_obj_name(x));
    }
    json_decref(objs);
    assert_true(TU_WAIT(ckube_shared_informer_object_count(inf) == 0, 5000));
    assert_int_equal(ckube_shared_informer_bytes(inf), 0);
    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
}

/* metadata_only keeps apiVersion, kind and metadata (listed and watched
 * objects alike) and drops everything else, managedFields included. */
static void test_metadata_only(void **state)
{
    (void)state;
    ckube_fake_lw *fake = new_fake(NULL, 2);
    ckube_informer_opts o = {.backoff = fast_backoff, .metadata_only = true};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    ckube_shared_informer *list[] = {inf};
    ckube_shared_informer_start(inf);
    assert_true(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));
    json_t *w = tu_obj("ns1", "watched", "app", "web", 7);
    json_object_set_new(json_object_get(w, "metadata"), "managedFields",
                        json_pack("[{s:s}]", "manager", "m"));
    ckube_fake_lw_add(fake, w);
    json_decref(w);
    assert_true(TU_WAIT(ckube_shared_informer_object_count(inf) == 3, 5000));
    ckube_obj_list all;
    assert_int_equal(ckube_store_list(ckube_shared_informer_store(inf), &all), 0);
    assert_int_equal(all.n, 3);
    for (size_t i = 0; i < all.n; i++) {
        json_t *obj = all.items[i];
        assert_null(json_object_get(obj, "spec"));
        assert_int_equal(json_object_size(obj), 3);
        assert_string_equal(ckube_obj_kind(obj), "Fake");
        assert_non_null(ckube_obj_name(obj));
        assert_null(ckube_json_get_path(obj, "metadata.managedFields"));
    }
    ckube_obj_list_free(&all);
    json_t *got = ckube_store_get(ckube_shared_informer_store(inf), "ns1/watched");
    assert_string_equal(json_string_value(ckube_json_get_path(got, "metadata.labels.app")), "web");
    ckube_obj_unref(got);
    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
}

/* ---- a transform: applied to every object before it is cached ---- */

struct xform {
    pthread_mutex_t mu;
    size_t calls;
    int refuse_bad; /* how many more times to refuse "bad" */
    /* what the handler saw */
    size_t adds, updates, deletes;
    bool all_transformed;
};

static int strip_spec(json_t *obj, void *ud)
{
    struct xform *x = ud;
    pthread_mutex_lock(&x->mu);
    x->calls++;
    bool refuse = !strcmp(ckube_obj_name(obj), "bad") && x->refuse_bad > 0;
    if (refuse)
        x->refuse_bad--;
    pthread_mutex_unlock(&x->mu);
    if (refuse)
        return 7;
    /* idempotent: a second pass finds nothing more to change */
    json_object_del(obj, "spec");
    json_t *meta = json_object_get(obj, "metadata");
    json_object_set_new(meta, "annotations", json_pack("{s:s}", "transformed", "yes"));
    return 0;
}

static bool transformed(const json_t *obj)
{
    const char *a = json_string_value(ckube_json_get_path(obj, "metadata.annotations.transformed"));
    return obj && !json_object_get(obj, "spec") && a && !strcmp(a, "yes");
}

static void x_seen(struct xform *x, size_t *counter, const json_t *obj)
{
    pthread_mutex_lock(&x->mu);
    (*counter)++;
    x->all_transformed = x->all_transformed && transformed(obj);
    pthread_mutex_unlock(&x->mu);
}
static void x_add(void *ud, const json_t *obj, bool initial)
{
    (void)initial;
    x_seen(ud, &((struct xform *)ud)->adds, obj);
}
static void x_update(void *ud, const json_t *old, const json_t *obj)
{
    x_seen(ud, &((struct xform *)ud)->updates, old);
    x_seen(ud, &((struct xform *)ud)->updates, obj);
}
static void x_delete(void *ud, const json_t *obj, const char *tombstone)
{
    (void)tombstone;
    x_seen(ud, &((struct xform *)ud)->deletes, obj);
}

static size_t x_count(struct xform *x, size_t *field)
{
    pthread_mutex_lock(&x->mu);
    size_t n = *field;
    pthread_mutex_unlock(&x->mu);
    return n;
}

static int x_refusals_left(struct xform *x)
{
    pthread_mutex_lock(&x->mu);
    int n = x->refuse_bad;
    pthread_mutex_unlock(&x->mu);
    return n;
}

static bool store_has(ckube_store *st, const char *key)
{
    json_t *o = ckube_store_get(st, key);
    ckube_obj_unref(o);
    return o != NULL;
}

static void test_transform(void **state)
{
    (void)state;
    /* four objects with a 2 KiB spec the transform drops */
    ckube_fake_lw *fake = new_fake(NULL, 0);
    char pad[2048];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "w%d", i);
        json_t *big = tu_obj("ns1", name, "app", "web", i);
        json_object_set_new(json_object_get(big, "spec"), "pad", json_string(pad));
        ckube_fake_lw_add(fake, big);
        json_decref(big);
    }
    struct xform x = {.refuse_bad = 1, .all_transformed = true};
    pthread_mutex_init(&x.mu, NULL);
    ckube_informer_opts o = {.backoff = fast_backoff, .transform = strip_spec, .transform_ud = &x};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    /* the same objects, untransformed, for the memory comparison */
    ckube_informer_opts plain_o = {.backoff = fast_backoff};
    ckube_shared_informer *plain =
        ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &plain_o);
    ckube_event_handler h = {
        .on_add = x_add, .on_update = x_update, .on_delete = x_delete, .ud = &x};
    assert_non_null(ckube_shared_informer_add_handler(inf, &h));
    ckube_shared_informer *list[] = {inf, plain};
    ckube_shared_informer_start(inf);
    ckube_shared_informer_start(plain);
    assert_true(ckube_wait_for_cache_sync(list, 2, CKUBE_SEC(10)));

    /* listed objects: transformed in the store, in listers and handlers */
    assert_true(TU_WAIT(x_count(&x, &x.adds) == 4, 5000));
    ckube_obj_list all;
    assert_int_equal(ckube_store_list(ckube_shared_informer_store(inf), &all), 0);
    assert_int_equal(all.n, 4);
    for (size_t i = 0; i < all.n; i++)
        assert_true(transformed(all.items[i]));
    ckube_obj_list_free(&all);
    /* (listing caches trees: list the other store too before comparing) */
    assert_int_equal(ckube_store_list(ckube_shared_informer_store(plain), &all), 0);
    ckube_obj_list_free(&all);
    assert_true(ckube_store_bytes(ckube_shared_informer_store(inf)) * 2 <
                ckube_store_bytes(ckube_shared_informer_store(plain)));

    /* added, updated, deleted while watching */
    json_t *w = tu_obj("ns1", "late", "app", "web", 9);
    ckube_fake_lw_add(fake, w);
    json_object_set_new(json_object_get(w, "spec"), "value", json_integer(10));
    ckube_fake_lw_update(fake, w);
    json_decref(w);
    assert_true(TU_WAIT(x_count(&x, &x.updates) == 2, 5000));
    ckube_fake_lw_delete(fake, "ns1", "late");
    assert_true(TU_WAIT(x_count(&x, &x.deletes) == 1, 5000));

    /* refused: a watch event is dropped (logged), as client-go does; a
     * relist brings the object back, transformed */
    json_t *bad = tu_obj("ns2", "bad", "app", "web", 1);
    ckube_fake_lw_add(fake, bad);
    json_decref(bad);
    assert_true(TU_WAIT(x_refusals_left(&x) == 0, 5000));
    json_t *after = tu_obj("ns2", "after-bad", "app", "web", 2); /* later events still flow */
    ckube_fake_lw_add(fake, after);
    json_decref(after);
    assert_true(TU_WAIT(store_has(ckube_shared_informer_store(inf), "ns2/after-bad"), 5000));
    assert_false(store_has(ckube_shared_informer_store(inf), "ns2/bad"));
    size_t lists = ckube_fake_lw_list_calls(fake);
    ckube_fake_lw_expire_watches(fake);
    assert_true(TU_WAIT(store_has(ckube_shared_informer_store(inf), "ns2/bad"), 5000));
    json_t *got = ckube_store_get(ckube_shared_informer_store(inf), "ns2/bad");
    assert_true(transformed(got));
    ckube_obj_unref(got);
    assert_true(ckube_fake_lw_list_calls(fake) > lists);
    assert_true(x_count(&x, &x.adds) >= 6);
    pthread_mutex_lock(&x.mu);
    assert_true(x.all_transformed);
    pthread_mutex_unlock(&x.mu);

    ckube_shared_informer_free(inf);
    ckube_shared_informer_free(plain);
    ckube_fake_lw_unref(fake);
    pthread_mutex_destroy(&x.mu);
}

/* ---- a streaming list (WatchList) instead of list + watch ---- */

static void test_watch_list(void **state)
{
    (void)state;
    ckube_fake_lw *fake = new_fake(NULL, 5);
    ckube_informer_opts o = {.backoff = fast_backoff, .use_watch_list = true};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    ckube_shared_informer *list[] = {inf};
    ckube_shared_informer_start(inf);
    assert_true(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));
    assert_int_equal(ckube_shared_informer_object_count(inf), 5);
    assert_int_equal(ckube_fake_lw_list_calls(fake), 0); /* no list at all */
    ckube_fake_call call;
    assert_true(ckube_fake_lw_last_call(fake, CKUBE_FAKE_WATCH, &call));
    assert_true(call.send_initial_events && call.allow_watch_bookmarks);
    assert_string_equal(call.resource_version_match, "NotOlderThan");
    ckube_fake_call_clear(&call);
    /* the same stream goes on as a watch */
    json_t *late = tu_obj("ns1", "late", "app", "web", 1);
    ckube_fake_lw_add(fake, late);
    json_decref(late);
    assert_true(TU_WAIT(store_has(ckube_shared_informer_store(inf), "ns1/late"), 5000));
    assert_int_equal(ckube_fake_lw_watch_calls(fake), 1);
    /* a dropped stream is watched again from the last revision, plainly */
    ckube_fake_lw_drop_watches(fake);
    assert_true(TU_WAIT(ckube_fake_lw_watch_calls(fake) == 2, 5000));
    assert_true(ckube_fake_lw_last_call(fake, CKUBE_FAKE_WATCH, &call));
    assert_false(call.send_initial_events);
    ckube_fake_call_clear(&call);
    assert_int_equal(ckube_fake_lw_list_calls(fake), 0);
    ckube_shared_informer_free(inf);

    /* a server that refuses it (a 4xx on the watch): a list instead */
    ckube_status *refused =
        ckube_status_new(422, CKUBE_REASON_INVALID, "sendInitialEvents is forbidden for watch");
    ckube_fake_lw_fail_watches(fake, refused, 1);
    ckube_status_free(refused);
    inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    list[0] = inf;
    ckube_shared_informer_start(inf);
    assert_true(ckube_wait_for_cache_sync(list, 1, CKUBE_SEC(10)));
    assert_int_equal(ckube_shared_informer_object_count(inf), 6);
    assert_int_equal(ckube_fake_lw_list_calls(fake), 1);
    ckube_shared_informer_free(inf);
    ckube_fake_lw_unref(fake);
}

static void test_bad_args(void **state)
{
    (void)state;
    assert_null(ckube_shared_informer_new(NULL, NULL));
    ckube_fake_lw *fake = new_fake(NULL, 1);
    /* A duplicate indexer fails creation (and frees the list-watch). */
    ckube_indexer ix[2] = {{.name = "a", .fn = app_index}, {.name = "a", .fn = app_index}};
    ckube_informer_opts o = {.indexers = ix, .nindexers = 2};
    assert_null(ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o));
    /* Stopping or freeing a never-started informer is fine. */
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), NULL);
    ckube_shared_informer_stop(inf);
    ckube_shared_informer_stop(inf);
    assert_int_equal(ckube_shared_informer_start(inf), -1);
    ckube_shared_informer_free(inf);
    ckube_shared_informer_free(NULL);
    ckube_fake_lw_unref(fake);
}

/* ---- the factory ---- */

struct builder {
    pthread_mutex_t mu;
    ckube_fake_lw *fakes[8];
    char names[8][64];
    size_t n;
    char last_label[64];
};

static ckube_list_watch *build_fake(void *ud, ckube_client *c, const ckube_gvr *gvr, const char *ns,
                                    const char *label, const char *field)
{
    (void)c;
    (void)field;
    struct builder *b = ud;
    pthread_mutex_lock(&b->mu);
    snprintf(b->names[b->n], sizeof(b->names[0]), "%s/%s", gvr->resource, ns ? ns : "*");
    snprintf(b->last_label, sizeof(b->last_label), "%s", label ? label : "");
    ckube_fake_lw_opts fo = {.resource = b->names[b->n]};
    b->fakes[b->n] = ckube_fake_lw_new(&fo);
    json_t *o = tu_obj("ns1", "x", NULL, NULL, 0);
    ckube_fake_lw_add(b->fakes[b->n], o);
    json_decref(o);
    ckube_list_watch *lw = ckube_fake_lw_list_watch(b->fakes[b->n]);
    b->n++;
    pthread_mutex_unlock(&b->mu);
    return lw;
}

static void test_factory(void **state)
{
    (void)state;
    struct builder b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct xform x = {.all_transformed = true};
    pthread_mutex_init(&x.mu, NULL);
    ckube_informer_factory_opts fo = {.label_selector = "team=a",
                                      .new_list_watch = build_fake,
                                      .new_list_watch_ud = &b,
                                      .transform = strip_spec,
                                      .transform_ud = &x};
    assert_null(ckube_informer_factory_new(NULL, NULL));
    ckube_informer_factory *f = ckube_informer_factory_new(NULL, &fo);
    assert_non_null(f);
    ckube_gvr pods = {.group = "", .version = "v1", .resource = "pods"};
    ckube_gvr nets = {.group = "samplecrd.k8s.io", .version = "v1", .resource = "networks"};
    ckube_shared_informer *p1 = ckube_informer_factory_for(f, &pods);
    ckube_shared_informer *p2 = ckube_informer_factory_for(f, &pods);
    ckube_gvr pods_null_group = {.version = "v1", .resource = "pods"};
    /* Two controllers asking for pods share one informer (one watch). */
    assert_non_null(p1);
    assert_ptr_equal(p1, p2);
    assert_ptr_equal(ckube_informer_factory_for(f, &pods_null_group), p1);
    ckube_shared_informer *n1 = ckube_informer_factory_for(f, &nets);
    ckube_shared_informer *pns = ckube_informer_factory_for_namespace(f, &pods, "kube-system");
    assert_true(n1 != p1 && pns != p1 && pns != n1);
    assert_int_equal(b.n, 3);
    assert_string_equal(b.last_label, "team=a");
    assert_string_equal(b.names[2], "pods/kube-system");

    assert_int_equal(ckube_informer_factory_start(f), 0);
    assert_true(ckube_informer_factory_wait_for_cache_sync(f, CKUBE_SEC(10)));
    assert_true(ckube_shared_informer_has_synced(p1) && ckube_shared_informer_has_synced(n1));
    /* More after start: start again starts only the new one. */
    ckube_gvr deps = {.group = "apps", .version = "v1", .resource = "deployments"};
    ckube_shared_informer *d1 = ckube_informer_factory_for(f, &deps);
    assert_false(ckube_shared_informer_is_started(d1));
    assert_int_equal(ckube_informer_factory_start(f), 0);
    assert_true(ckube_shared_informer_is_started(d1));
    assert_true(ckube_informer_factory_wait_for_cache_sync(f, CKUBE_SEC(10)));
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(ckube_fake_lw_list_calls(b.fakes[i]), 1);
    /* the factory's transform is every informer's */
    json_t *pod = tu_obj("ns1", "p", "team", "a", 1);
    ckube_fake_lw_add(b.fakes[0], pod);
    json_decref(pod);
    assert_true(TU_WAIT(store_has(ckube_shared_informer_store(p1), "ns1/p"), 5000));
    json_t *got = ckube_store_get(ckube_shared_informer_store(p1), "ns1/p");
    assert_true(transformed(got));
    ckube_obj_unref(got);

    ckube_informer_factory_shutdown(f);
    assert_false(ckube_shared_informer_is_started(p1));
    assert_null(ckube_informer_factory_for(f, &pods));
    for (size_t i = 0; i < b.n; i++)
        assert_int_equal(ckube_fake_lw_open_watches(b.fakes[i]), 0);
    ckube_informer_factory_free(f);
    for (size_t i = 0; i < b.n; i++)
        ckube_fake_lw_unref(b.fakes[i]);
    pthread_mutex_destroy(&x.mu);
}

/* ---- the compact cache: trees built on demand, shared, trimmed ---- */

static void test_compact_cache(void **state)
{
    (void)state;
    ckube_clock *clk = ckube_fake_clock_new(CKUBE_SEC(1000));
    ckube_fake_lw *fake = new_fake(clk, 4);
    ckube_informer_opts o = {.clock = clk};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    struct hrec h;
    hrec_init(&h, "h");
    ckube_event_handler eh = {.on_add = h_add, .on_update = h_update, .ud = &h};
    ckube_handler_reg *reg = ckube_shared_informer_add_handler(inf, &eh);
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(reg), 5000));
    /* The handler holds its objects; the cache keeps only blocks. */
    size_t compact = ckube_shared_informer_bytes(inf);
    ckube_store *s = ckube_shared_informer_store(inf);
    json_t *g1 = ckube_store_get(s, "ns1/w01");
    json_t *g2 = ckube_lister_get(&(ckube_lister){.store = s}, "ns1", "w01");
    assert_ptr_equal(g1, g2);
    assert_int_equal(json_integer_value(ckube_json_get_path(g1, "spec.value")), 1);
    assert_true(ckube_shared_informer_bytes(inf) > compact);
    /* The handler got an equal object (its own tree). */
    pthread_mutex_lock(&h.mu);
    assert_true(json_equal(hrec_find(&h, "ns1/w01")->obj, g1));
    pthread_mutex_unlock(&h.mu);
    ckube_obj_unref(g1);
    ckube_obj_unref(g2);
    /* A change wakes the informer, which schedules a trim; two periods
     * later (the first trim only clears the "used" mark) the tree that
     * nobody holds is gone. */
    json_t *n = tu_obj("ns1", "new", NULL, NULL, 9);
    ckube_fake_lw_add(fake, n);
    json_decref(n);
    assert_true(TU_WAIT(hget(&h, &h.adds) == 5, 5000));
    size_t with_new = ckube_shared_informer_bytes(inf);
    for (int i = 0; i < 2; i++) {
        tu_sleep_ms(20);
        ckube_fake_clock_advance(clk, CKUBE_SEC(11));
    }
    bool trimmed = TU_WAIT(ckube_shared_informer_bytes(inf) < with_new, 5000);
    if (!trimmed) {
        ckube_fake_clock_advance(clk, CKUBE_SEC(11));
        trimmed = TU_WAIT(ckube_shared_informer_bytes(inf) < with_new, 5000);
    }
    assert_true(trimmed);
    json_t *g3 = ckube_store_get(s, "ns1/w01");
    assert_int_equal(json_integer_value(ckube_json_get_path(g3, "spec.value")), 1);
    ckube_obj_unref(g3);
    assert_string_equal(h.err, "");
    ckube_shared_informer_free(inf);
    hrec_free(&h);
    ckube_fake_lw_unref(fake);
    ckube_fake_clock_free(clk);
}

/* ---- the ckube_object callbacks: metadata without trees ---- */

/* What an object handler saw, as text (one line per call). */
struct orec {
    pthread_mutex_t mu;
    char log[4096];
    size_t calls;
    ckube_object *kept; /* a reference kept past its callback */
    const json_t *tree; /* the tree asked for in one add (borrowed) */
    bool ask_tree;      /* call ckube_object_json for ns1/w01 */
};

static void orec_line(struct orec *r, const char *what, const ckube_object *o)
{
    const char *ns = ckube_object_namespace(o), *name = ckube_object_name(o),
               *rv = ckube_object_resource_version(o);
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof(r->log) - n, "%s %s ns=%s name=%s rv=%s gen=%" PRId64 "\n", what,
             ckube_object_key(o), ns ? ns : "-", name ? name : "-", rv ? "set" : "-",
             ckube_object_generation(o));
    r->calls++;
}

static void o_add(void *ud, const ckube_object *o, bool initial)
{
    struct orec *r = ud;
    pthread_mutex_lock(&r->mu);
    orec_line(r, initial ? "add(initial)" : "add", o);
    if (r->ask_tree && strcmp(ckube_object_key(o), "ns1/w01") == 0) {
        r->tree = ckube_object_json(o);
        r->kept = ckube_object_ref(o);
    }
    pthread_mutex_unlock(&r->mu);
}

static void o_update(void *ud, const ckube_object *old_obj, const ckube_object *new_obj)
{
    struct orec *r = ud;
    pthread_mutex_lock(&r->mu);
    orec_line(r, "update-old", old_obj);
    orec_line(r, "update-new", new_obj);
    pthread_mutex_unlock(&r->mu);
}

static void o_delete(void *ud, const ckube_object *o, const char *tombstone_key)
{
    struct orec *r = ud;
    pthread_mutex_lock(&r->mu);
    orec_line(r, tombstone_key ? "tombstone" : "delete", o);
    pthread_mutex_unlock(&r->mu);
}

static size_t oget(struct orec *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->calls;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* The json_t form of a handler that also has the ckube_object form. */
static size_t json_form_calls;

static void j_never(void *ud, const json_t *obj, bool initial)
{
    (void)ud;
    (void)obj;
    (void)initial;
    __atomic_add_fetch(&json_form_calls, 1, __ATOMIC_RELAXED);
}

static void test_object_handler(void **state)
{
    (void)state;
    ckube_fake_lw_opts fo = {.resource = "widgets.example.com"};
    ckube_fake_lw *fake = ckube_fake_lw_new(&fo);
    json_t *a = tu_obj("ns1", "w01", NULL, NULL, 1), *c = tu_obj(NULL, "cluster", NULL, NULL, 2);
    json_object_set_new(json_object_get(a, "metadata"), "generation", json_integer(3));
    ckube_fake_lw_add(fake, a);
    ckube_fake_lw_add(fake, c);
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), NULL);

    /* Two handlers: one reads only metadata; one has both forms (the
     * ckube_object form wins) and asks for the tree once. */
    struct orec r1 = {.mu = PTHREAD_MUTEX_INITIALIZER}, r2 = {.mu = PTHREAD_MUTEX_INITIALIZER};
    r2.ask_tree = true;
    ckube_event_handler e1 = {.on_add_object = o_add,
                              .on_update_object = o_update,
                              .on_delete_object = o_delete,
                              .ud = &r1};
    ckube_event_handler e2 = {.on_add = j_never, .on_add_object = o_add, .ud = &r2};
    ckube_handler_reg *g1 = ckube_shared_informer_add_handler(inf, &e1);
    size_t built0 = __atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED);
    assert_int_equal(ckube_shared_informer_start(inf), 0);
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(g1), 5000));
    /* Nothing was decoded for a handler that asked for nothing. */
    assert_int_equal(__atomic_load_n(&ckube__cobj_trees_built, __ATOMIC_RELAXED), built0);
    ckube_handler_reg *g2 = ckube_shared_informer_add_handler(inf, &e2);
    assert_true(TU_WAIT(ckube_handler_reg_has_synced(g2), 5000));

    json_object_set_new(json_object_get(a, "metadata"), "generation", json_integer(4));
    ckube_fake_lw_update(fake, a);
    ckube_fake_lw_delete(fake, NULL, "cluster");
    assert_true(TU_WAIT(oget(&r1) == 5, 5000));
    tu_sleep_ms(20);
    ckube_shared_informer_stop(inf);

    pthread_mutex_lock(&r1.mu);
    const char *want1 = "add(initial) cluster ns=- name=cluster rv=set gen=0\n"
                        "add(initial) ns1/w01 ns=ns1 name=w01 rv=set gen=3\n"
                        "update-old ns1/w01 ns=ns1 name=w01 rv=set gen=3\n"
                        "update-new ns1/w01 ns=ns1 name=w01 rv=set gen=4\n"
                        "delete cluster ns=- name=cluster rv=set gen=0\n";
    assert_string_equal(r1.log, want1);
    pthread_mutex_unlock(&r1.mu);
    pthread_mutex_lock(&r2.mu);
    assert_string_equal(r2.log, "add(initial) cluster ns=- name=cluster rv=set gen=0\n"
                                "add(initial) ns1/w01 ns=ns1 name=w01 rv=set gen=3\n");
    assert_int_equal(__atomic_load_n(&json_form_calls, __ATOMIC_RELAXED), 0);
    /* The tree it asked for is the object, and outlives the callback
     * with the reference it kept. */
    assert_non_null(r2.kept);
    assert_ptr_equal(ckube_object_json(r2.kept), r2.tree);
    assert_int_equal(json_integer_value(ckube_json_get_path(r2.tree, "spec.value")), 1);
    assert_string_equal(ckube_object_key(r2.kept), "ns1/w01");
    ckube_object_unref(r2.kept);
    pthread_mutex_unlock(&r2.mu);
    /* NULL-safe accessors. */
    assert_string_equal(ckube_object_key(NULL), "");
    assert_null(ckube_object_name(NULL));
    assert_null(ckube_object_json(NULL));
    ckube_object_unref(NULL);

    ckube_shared_informer_free(inf);
    json_decref(a);
    json_decref(c);
    ckube_fake_lw_unref(fake);
}

static void mutating_add(void *ud, const json_t *obj, bool initial)
{
    (void)ud;
    (void)initial;
    json_object_set_new(json_object_get((json_t *)obj, "spec"), "value", json_integer(-1));
}

static void handler_mutates(void)
{
    ckube_fake_lw *fake = new_fake(NULL, 1);
    ckube_informer_opts o = {.detect_mutations = true, .name = "widgets"};
    ckube_shared_informer *inf = ckube_shared_informer_new(ckube_fake_lw_list_watch(fake), &o);
    ckube_event_handler eh = {.on_add = mutating_add};
    ckube_shared_informer_add_handler(inf, &eh);
    ckube_shared_informer_start(inf);
    tu_sleep_ms(5000);
    _exit(3); /* not reached: the check aborts */
}

/* The mutation detector also catches a handler changing its argument. */
static void test_handler_mutation_detected(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        handler_mutates();
    }
    close(p[1]);
    char buf[65536];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(p[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = '\0';
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    if (!strstr(buf, "cache mutation detected: object ns2/w00 in cache widgets was modified by "
                     "an event handler"))
        fail_msg("unexpected log: %s", buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_consistency_under_chaos),
        cmocka_unit_test(test_tombstones_after_relist),
        cmocka_unit_test(test_resync),
        cmocka_unit_test(test_late_handler),
        cmocka_unit_test(test_slow_handler),
        cmocka_unit_test(test_sync_accounting_listers),
        cmocka_unit_test(test_metadata_only),
        cmocka_unit_test(test_transform),
        cmocka_unit_test(test_watch_list),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_factory),
        cmocka_unit_test(test_compact_cache),
        cmocka_unit_test(test_object_handler),
        cmocka_unit_test(test_handler_mutation_detected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
