/* The thread-safe indexed store, listers, memory accounting and the cache
 * mutation detector. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "ckube/informer.h"
#include "ckube/json.h"
#include "ckube/selector.h"

#include <inttypes.h>
#include "common/text.h"
#include "informer/informer_internal.h"
#include "util/informer_test_util.h"

/* ---- keys ---- */

static void test_keys(void **state)
{
    (void)state;
    json_t *a = tu_obj("ns1", "a", NULL, NULL, 0);
    json_t *c = tu_obj(NULL, "node-1", NULL, NULL, 0);
    json_t *bad = json_pack("{s:{s:s}}", "metadata", "namespace", "x");
    char *k = ckube_meta_namespace_key(a);
    assert_string_equal(k, "ns1/a");
    free(k);
    k = ckube_meta_namespace_key(c);
    assert_string_equal(k, "node-1");
    free(k);
    assert_null(ckube_meta_namespace_key(bad));
    assert_null(ckube_meta_namespace_key(NULL));

    char *ns, *name;
    assert_int_equal(ckube_split_meta_namespace_key("ns1/a", &ns, &name), 0);
    assert_string_equal(ns, "ns1");
    assert_string_equal(name, "a");
    free(ns);
    free(name);
    assert_int_equal(ckube_split_meta_namespace_key("node-1", &ns, &name), 0);
    assert_null(ns);
    assert_string_equal(name, "node-1");
    free(name);
    assert_int_equal(ckube_split_meta_namespace_key("a/b/c", &ns, &name), -1);
    assert_int_equal(ckube_split_meta_namespace_key("a/", &ns, &name), -1);
    assert_int_equal(ckube_split_meta_namespace_key("", &ns, &name), -1);
    assert_null(ns);
    assert_null(name);
    json_decref(a);
    json_decref(c);
    json_decref(bad);
}

/* ---- basic operations ---- */

static void test_put_get_delete(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    json_t *a = tu_obj("ns1", "a", NULL, NULL, 1);
    json_t *a2 = tu_obj("ns1", "a", NULL, NULL, 2);
    json_t *old = (json_t *)1;
    assert_int_equal(ckube_store_put(s, a, &old), 0);
    assert_null(old);
    /* The store shares the object: get hands out the same value. */
    json_t *got = ckube_store_get(s, "ns1/a");
    assert_ptr_equal(got, a);
    json_decref(got);
    assert_true(ckube_store_has(s, "ns1/a"));
    assert_false(ckube_store_has(s, "ns1/b"));
    assert_null(ckube_store_get(s, "ns1/b"));

    assert_int_equal(ckube_store_put(s, a2, &old), 0);
    assert_ptr_equal(old, a);
    json_decref(old);
    assert_int_equal(ckube_store_len(s), 1);

    assert_int_equal(ckube_store_delete_key(s, "ns1/a", &old), 1);
    assert_ptr_equal(old, a2);
    json_decref(old);
    assert_int_equal(ckube_store_delete_key(s, "ns1/a", &old), 0);
    assert_null(old);
    assert_int_equal(ckube_store_len(s), 0);

    /* Bad input. */
    json_t *noname = json_pack("{s:{}}", "metadata");
    assert_int_equal(ckube_store_put(s, noname, NULL), -1);
    assert_int_equal(ckube_store_replace(s, noname), -1);
    json_decref(noname);

    /* The store's references outlive the caller's. */
    assert_int_equal(ckube_store_put(s, a, NULL), 0);
    json_decref(a);
    json_decref(a2);
    got = ckube_store_get(s, "ns1/a");
    assert_int_equal(json_integer_value(ckube_json_get_path(got, "spec.value")), 1);
    json_decref(got);
    ckube_store_free(s);
}

static void test_replace_and_list(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof(name), "old-%d", i);
        json_t *o = tu_obj("ns", name, NULL, NULL, i);
        ckube_store_put(s, o, NULL);
        json_decref(o);
    }
    json_t *items = json_array();
    json_array_append_new(items, tu_obj("b", "x", NULL, NULL, 0));
    json_array_append_new(items, tu_obj("a", "y", NULL, NULL, 0));
    json_array_append_new(items, tu_obj(NULL, "z", NULL, NULL, 0));
    json_array_append_new(items, json_pack("{s:{}}", "metadata")); /* skipped */
    assert_int_equal(ckube_store_replace(s, items), 0);
    json_decref(items);

    ckube_key_list keys;
    assert_int_equal(ckube_store_list_keys(s, &keys), 0);
    assert_int_equal(keys.n, 3);
    /* Sorted by key. */
    assert_string_equal(keys.keys[0], "a/y");
    assert_string_equal(keys.keys[1], "b/x");
    assert_string_equal(keys.keys[2], "z");
    ckube_key_list_free(&keys);

    ckube_obj_list l;
    assert_int_equal(ckube_store_list(s, &l), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(ckube_obj_name(l.items[0]), "y");
    ckube_obj_list_free(&l);
    assert_int_equal(l.n, 0);

    /* Namespace index: cluster-scoped objects under "". */
    ckube_key_list vals;
    assert_int_equal(ckube_store_index_values(s, CKUBE_INDEX_NAMESPACE, &vals), 0);
    assert_int_equal(vals.n, 3);
    assert_string_equal(vals.keys[0], "");
    assert_string_equal(vals.keys[1], "a");
    assert_string_equal(vals.keys[2], "b");
    ckube_key_list_free(&vals);
    ckube_store_free(s);
}

/* ---- indexes ---- */

/* Indexes by the "app" label. */
static void app_index(void *ud, const json_t *obj, ckube_index_values *out)
{
    int *calls = ud;
    if (calls)
        (*calls)++;
    const char *v = json_string_value(ckube_json_get_path(obj, "metadata.labels.app"));
    if (v)
        ckube_index_values_add(out, v);
}

/* Multi-valued: every entry of spec.tags (duplicates collapse). */
static void tags_index(void *ud, const json_t *obj, ckube_index_values *out)
{
    (void)ud;
    size_t i;
    json_t *t;
    json_array_foreach(ckube_json_get_path(obj, "spec.tags"), i, t)
    {
        ckube_index_values_add(out, json_string_value(t));
    }
}

static json_t *tagged(const char *name, const char *t1, const char *t2)
{
    json_t *o = tu_obj("ns", name, NULL, NULL, 0);
    json_t *tags = json_array();
    if (t1)
        json_array_append_new(tags, json_string(t1));
    if (t2)
        json_array_append_new(tags, json_string(t2));
    json_object_set_new(json_object_get(o, "spec"), "tags", tags);
    return o;
}

static void expect_index_keys(ckube_store *s, const char *index, const char *value,
                              const char *const *want, size_t nwant)
{
    ckube_key_list keys;
    assert_int_equal(ckube_store_index_keys(s, index, value, &keys), 0);
    if (keys.n != nwant)
        fail_msg("index %s=%s: %zu keys, want %zu", index, value, keys.n, nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_string_equal(keys.keys[i], want[i]);
    ckube_key_list_free(&keys);
}

static void test_indexes(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    int calls = 0;
    ckube_indexer app = {.name = "app", .fn = app_index, .ud = &calls};
    ckube_indexer tags = {.name = "tags", .fn = tags_index};
    char *err = NULL;
    assert_int_equal(ckube_store_add_indexer(s, &app, &err), 0);
    assert_null(err);

    json_t *a = tu_obj("ns1", "a", "app", "web", 0);
    json_t *b = tu_obj("ns2", "b", "app", "web", 0);
    json_t *c = tu_obj("ns1", "c", "app", "db", 0);
    ckube_store_put(s, a, NULL);
    ckube_store_put(s, b, NULL);
    ckube_store_put(s, c, NULL);
    assert_true(calls >= 3);

    static const char *const web[] = {"ns1/a", "ns2/b"};
    expect_index_keys(s, "app", "web", web, 2);
    ckube_obj_list l;
    assert_int_equal(ckube_store_by_index(s, "app", "db", &l), 0);
    assert_int_equal(l.n, 1);
    assert_ptr_equal(l.items[0], c);
    ckube_obj_list_free(&l);
    assert_int_equal(ckube_store_by_index(s, "app", "nothing", &l), 0);
    assert_int_equal(l.n, 0);
    assert_int_equal(ckube_store_by_index(s, "no-such-index", "x", &l), -1);
    assert_int_equal(ckube_store_index_keys(s, "no-such-index", "x", &(ckube_key_list){0}), -1);

    /* An update moves the key between values; an emptied value vanishes. */
    json_t *c2 = tu_obj("ns1", "c", "app", "web", 1);
    ckube_store_put(s, c2, NULL);
    static const char *const web3[] = {"ns1/a", "ns1/c", "ns2/b"};
    expect_index_keys(s, "app", "web", web3, 3);
    ckube_key_list vals;
    assert_int_equal(ckube_store_index_values(s, "app", &vals), 0);
    assert_int_equal(vals.n, 1);
    assert_string_equal(vals.keys[0], "web");
    ckube_key_list_free(&vals);

    /* Delete removes from every index. */
    ckube_store_delete_key(s, "ns1/a", NULL);
    static const char *const web2[] = {"ns1/c", "ns2/b"};
    expect_index_keys(s, "app", "web", web2, 2);
    static const char *const ns1[] = {"ns1/c"};
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "ns1", ns1, 1);

    /* An index added later is built over the contents; multi-valued. */
    json_t *t = tagged("t", "x", "y");
    json_t *t2 = tagged("t2", "y", "y");
    ckube_store_put(s, t, NULL);
    ckube_store_put(s, t2, NULL);
    assert_int_equal(ckube_store_add_indexer(s, &tags, &err), 0);
    static const char *const y[] = {"ns/t", "ns/t2"};
    expect_index_keys(s, "tags", "y", y, 2);
    static const char *const x[] = {"ns/t"};
    expect_index_keys(s, "tags", "x", x, 1);
    json_t *t3 = tagged("t", "z", NULL);
    ckube_store_put(s, t3, NULL);
    expect_index_keys(s, "tags", "x", NULL, 0);
    expect_index_keys(s, "tags", "y", y + 1, 1);

    /* Bad indexers. */
    assert_int_equal(ckube_store_add_indexer(s, &app, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "app"));
    free(err);
    ckube_indexer nofn = {.name = "x"};
    assert_int_equal(ckube_store_add_indexer(s, &nofn, &err), -1);
    free(err);
    ckube_indexer ns_again = {.name = CKUBE_INDEX_NAMESPACE, .fn = app_index};
    assert_int_equal(ckube_store_add_indexer(s, &ns_again, NULL), -1);

    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(c2);
    json_decref(t);
    json_decref(t2);
    json_decref(t3);
    ckube_store_free(s);
}

/* ---- listers ---- */

static void test_lister(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    ckube_indexer app = {.name = "app", .fn = app_index};
    assert_int_equal(ckube_store_add_indexer(s, &app, NULL), 0);
    json_t *objs[] = {tu_obj("ns1", "a", "app", "web", 0), tu_obj("ns1", "b", "app", "db", 0),
                      tu_obj("ns2", "c", "app", "web", 0), tu_obj(NULL, "n", "app", "web", 0),
                      tu_obj("ns1", "d", NULL, NULL, 0)};
    for (size_t i = 0; i < 5; i++)
        ckube_store_put(s, objs[i], NULL);
    ckube_lister l = {.store = s};

    json_t *got = ckube_lister_get(&l, "ns1", "a");
    assert_ptr_equal(got, objs[0]);
    json_decref(got);
    got = ckube_lister_get(&l, NULL, "n");
    assert_ptr_equal(got, objs[3]);
    json_decref(got);
    got = ckube_lister_get(&l, "", "n");
    assert_ptr_equal(got, objs[3]);
    json_decref(got);
    assert_null(ckube_lister_get(&l, "ns2", "a"));
    assert_null(ckube_lister_get(&l, "ns1", NULL));

    ckube_obj_list out;
    assert_int_equal(ckube_lister_list(&l, NULL, NULL, &out), 0);
    assert_int_equal(out.n, 5);
    ckube_obj_list_free(&out);
    assert_int_equal(ckube_lister_list(&l, "ns1", NULL, &out), 0);
    assert_int_equal(out.n, 3);
    ckube_obj_list_free(&out);

    ckube_selector *sel = NULL;
    assert_int_equal(ckube_label_selector_parse("app=web", &sel, NULL), 0);
    assert_int_equal(ckube_lister_list(&l, NULL, sel, &out), 0);
    assert_int_equal(out.n, 3);
    ckube_obj_list_free(&out);
    assert_int_equal(ckube_lister_list(&l, "ns1", sel, &out), 0);
    assert_int_equal(out.n, 1);
    assert_ptr_equal(out.items[0], objs[0]);
    ckube_obj_list_free(&out);
    ckube_selector_free(sel);
    /* != also matches objects without the label. */
    assert_int_equal(ckube_label_selector_parse("app!=web", &sel, NULL), 0);
    assert_int_equal(ckube_lister_list(&l, "ns1", sel, &out), 0);
    assert_int_equal(out.n, 2);
    assert_string_equal(ckube_obj_name(out.items[0]), "b");
    assert_string_equal(ckube_obj_name(out.items[1]), "d");
    ckube_obj_list_free(&out);
    ckube_selector_free(sel);
    assert_int_equal(ckube_lister_list(&l, "nope", NULL, &out), 0);
    assert_int_equal(out.n, 0);

    assert_int_equal(ckube_lister_by_index(&l, "app", "web", &out), 0);
    assert_int_equal(out.n, 3);
    ckube_obj_list_free(&out);
    assert_int_equal(ckube_lister_by_index(&l, "missing", "web", &out), -1);

    for (size_t i = 0; i < 5; i++)
        json_decref(objs[i]);
    ckube_store_free(s);
}

/* ---- memory accounting ---- */

static void test_memory_accounting(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    ckube_indexer app = {.name = "app", .fn = app_index};
    ckube_store_add_indexer(s, &app, NULL);
    assert_int_equal(ckube_store_bytes(s), 0);

    json_t *small = tu_obj("ns", "a", "app", "web", 0);
    json_t *big = tu_obj("ns", "a", "app", "web", 0);
    json_t *blob = json_array();
    for (int i = 0; i < 100; i++)
        json_array_append_new(blob, json_string("0123456789012345678901234567890123456789"));
    json_object_set_new(json_object_get(big, "spec"), "blob", blob);
    size_t sb = ckube_json_heap_bytes(small), bb = ckube_json_heap_bytes(big);
    assert_true(sb > 100);
    /* 100 strings of 40 bytes: at least 4000 more bytes. */
    assert_true(bb > sb + 4000);
    assert_int_equal(ckube_json_heap_bytes(json_true()), 0);

    ckube_store_put(s, small, NULL);
    size_t b1 = ckube_store_bytes(s);
    assert_true(b1 > sb);
    assert_int_equal(ckube_store_len(s), 1);
    ckube_store_put(s, big, NULL);
    size_t b2 = ckube_store_bytes(s);
    assert_int_equal(b2 - b1, bb - sb);
    ckube_store_put(s, small, NULL);
    assert_int_equal(ckube_store_bytes(s), b1);

    /* Many objects, then remove them all: back to exactly zero. */
    for (int i = 0; i < 50; i++) {
        char name[16];
        snprintf(name, sizeof(name), "o%d", i);
        json_t *o = tu_obj(i % 2 ? "x" : "y", name, "app", i % 3 ? "web" : "db", i);
        ckube_store_put(s, o, NULL);
        json_decref(o);
    }
    assert_int_equal(ckube_store_len(s), 51);
    assert_true(ckube_store_bytes(s) > 51 * sb);
    json_t *empty = json_array();
    ckube_store_replace(s, empty);
    json_decref(empty);
    assert_int_equal(ckube_store_len(s), 0);
    assert_int_equal(ckube_store_bytes(s), 0);

    ckube_store_put(s, big, NULL);
    ckube_store_delete_key(s, "ns/a", NULL);
    assert_int_equal(ckube_store_bytes(s), 0);
    json_decref(small);
    json_decref(big);
    ckube_store_free(s);
}

/* ---- concurrency ---- */

#define NWRITERS 4
#define NREADERS 4
#define NOPS 3000

struct conc {
    ckube_store *s;
    int id;
    bool *stop;
    pthread_mutex_t *mu;
};

static void *writer(void *arg)
{
    struct conc *c = arg;
    unsigned seed = (unsigned)c->id * 7919u + 1;
    for (int i = 0; i < NOPS; i++) {
        char name[16], ns[16];
        snprintf(name, sizeof(name), "o%d", rand_r(&seed) % 40);
        snprintf(ns, sizeof(ns), "ns%d", rand_r(&seed) % 3);
        if (rand_r(&seed) % 4 == 0) {
            char key[32];
            snprintf(key, sizeof(key), "%s/%s", ns, name);
            ckube_store_delete_key(c->s, key, NULL);
        } else {
            json_t *o = tu_obj(ns, name, "app", rand_r(&seed) % 2 ? "web" : "db", i);
            json_t *old = NULL;
            ckube_store_put(c->s, o, &old);
            /* Readers share these objects: atomic reference counting. */
            ckube_obj_unref(old);
            ckube_obj_unref(o);
        }
    }
    return NULL;
}

static bool get_stop(struct conc *c)
{
    pthread_mutex_lock(c->mu);
    bool s = *c->stop;
    pthread_mutex_unlock(c->mu);
    return s;
}

static void *reader(void *arg)
{
    struct conc *c = arg;
    size_t reads = 0;
    while (!get_stop(c) || reads < 10) {
        ckube_obj_list l;
        assert_int_equal(ckube_store_list(c->s, &l), 0);
        for (size_t i = 0; i < l.n; i++) {
            /* Shared objects are readable while writers replace them. */
            assert_non_null(ckube_obj_name(l.items[i]));
            assert_non_null(strstr(ckube_obj_namespace(l.items[i]), "ns"));
        }
        ckube_obj_list_free(&l);
        ckube_obj_list byix;
        assert_int_equal(ckube_store_by_index(c->s, "app", "web", &byix), 0);
        for (size_t i = 0; i < byix.n; i++)
            assert_string_equal(
                json_string_value(ckube_json_get_path(byix.items[i], "metadata.labels.app")),
                "web");
        ckube_obj_list_free(&byix);
        json_t *o = ckube_store_get(c->s, "ns1/o1");
        ckube_obj_unref(o);
        (void)ckube_store_bytes(c->s);
        reads++;
    }
    return NULL;
}

static void test_concurrency(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    ckube_indexer app = {.name = "app", .fn = app_index};
    ckube_store_add_indexer(s, &app, NULL);
    bool stop = false;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_t w[NWRITERS], r[NREADERS];
    struct conc cw[NWRITERS], cr[NREADERS];
    for (int i = 0; i < NREADERS; i++) {
        cr[i] = (struct conc){.s = s, .id = i, .stop = &stop, .mu = &mu};
        pthread_create(&r[i], NULL, reader, &cr[i]);
    }
    for (int i = 0; i < NWRITERS; i++) {
        cw[i] = (struct conc){.s = s, .id = i, .stop = &stop, .mu = &mu};
        pthread_create(&w[i], NULL, writer, &cw[i]);
    }
    for (int i = 0; i < NWRITERS; i++)
        pthread_join(w[i], NULL);
    pthread_mutex_lock(&mu);
    stop = true;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < NREADERS; i++)
        pthread_join(r[i], NULL);

    /* Every index agrees with the objects. */
    ckube_obj_list all;
    ckube_store_list(s, &all);
    size_t web = 0;
    for (size_t i = 0; i < all.n; i++) {
        const char *v = json_string_value(ckube_json_get_path(all.items[i], "metadata.labels.app"));
        web += strcmp(v, "web") == 0;
    }
    ckube_obj_list byix;
    ckube_store_by_index(s, "app", "web", &byix);
    assert_int_equal(byix.n, web);
    ckube_obj_list_free(&byix);
    size_t per_ns = 0;
    for (int n = 0; n < 3; n++) {
        char ns[16];
        snprintf(ns, sizeof(ns), "ns%d", n);
        ckube_key_list keys;
        ckube_store_index_keys(s, CKUBE_INDEX_NAMESPACE, ns, &keys);
        per_ns += keys.n;
        ckube_key_list_free(&keys);
    }
    assert_int_equal(per_ns, all.n);
    assert_int_equal(ckube_store_len(s), all.n);
    /* Accounting is the sum of what is cached now. */
    size_t want = 0;
    for (size_t i = 0; i < all.n; i++)
        want += ckube_json_heap_bytes(all.items[i]);
    assert_true(ckube_store_bytes(s) >= want);
    ckube_obj_list_free(&all);
    json_t *empty = json_array();
    ckube_store_replace(s, empty);
    json_decref(empty);
    assert_int_equal(ckube_store_bytes(s), 0);
    ckube_store_free(s);
}

/* ---- mutation detector ---- */

/* Runs `fn` in a child process with stderr captured; returns the wait
 * status and the child's stderr (malloc'd) in *out. */
static int run_child(void (*fn)(void), char **out)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(p[0], buf + n, cap - n - 1)) > 0) {
        n += (size_t)r;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *out = buf;
    return status;
}

static void mutate_cached(void)
{
    ckube_store_opts o = {.name = "pods", .detect_mutations = true};
    ckube_store *s = ckube_store_new(&o);
    json_t *a = tu_obj("ns1", "victim", NULL, NULL, 1);
    ckube_store_put(s, a, NULL);
    json_decref(a);
    json_t *got = ckube_store_get(s, "ns1/victim");
    /* The bug the detector exists for: changing a cached object. */
    json_object_set_new(json_object_get(got, "spec"), "value", json_integer(2));
    json_decref(got);
    json_t *b = tu_obj("ns1", "other", NULL, NULL, 1);
    ckube_store_put(s, b, NULL); /* a store change runs the check */
    _exit(3);                    /* not reached */
}

static void mutate_then_check(void)
{
    setenv("CKUBE_CACHE_MUTATION_DETECTOR", "true", 1);
    ckube_store *s = ckube_store_new(NULL);
    if (!ckube_store_detects_mutations(s))
        _exit(4);
    json_t *a = tu_obj(NULL, "cluster-thing", NULL, NULL, 1);
    ckube_store_put(s, a, NULL);
    json_object_del(json_object_get(a, "metadata"), "name");
    ckube_store_check_mutations(s);
    _exit(3);
}

static void honest_use(void)
{
    setenv("CKUBE_CACHE_MUTATION_DETECTOR", "true", 1);
    ckube_store *s = ckube_store_new(NULL);
    json_t *a = tu_obj("ns1", "a", NULL, NULL, 1);
    ckube_store_put(s, a, NULL);
    json_t *copy = json_deep_copy(a);
    json_object_set_new(json_object_get(copy, "spec"), "value", json_integer(2));
    ckube_store_put(s, copy, NULL);
    ckube_store_delete_key(s, "ns1/a", NULL);
    ckube_store_check_mutations(s);
    json_decref(a);
    json_decref(copy);
    ckube_store_free(s);
    _exit(0);
}

static void test_mutation_detector(void **state)
{
    (void)state;
    char *log = NULL;
    int st = run_child(mutate_cached, &log);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    if (!strstr(log, "cache mutation detected: object ns1/victim in cache pods"))
        fail_msg("unexpected log: %s", log);
    free(log);

    st = run_child(mutate_then_check, &log);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    assert_non_null(strstr(log, "object cluster-thing"));
    free(log);

    st = run_child(honest_use, &log);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_null(strstr(log, "cache mutation detected"));
    free(log);

    /* Off by default. */
    unsetenv("CKUBE_CACHE_MUTATION_DETECTOR");
    ckube_store *s = ckube_store_new(NULL);
    assert_false(ckube_store_detects_mutations(s));
    ckube_store_free(s);
}

/* ---- compact objects: the scanner, trees, the serializer ---- */

/* A Kubernetes-looking object with everything the scanner must get
 * right: whitespace, escapes, non-ASCII text, numbers of every shape,
 * nesting, managedFields. */
static const char *const RICH =
    "{ \"apiVersion\" : \"v1\",\n \"kind\":\"ConfigMap\",\n"
    "  \"metadata\": {\"name\": \"caf\\u00e9-1\", \"namespace\":\"ns1\",\n"
    "    \"resourceVersion\": \"42\", \"labels\": {\"app\": \"web\", \"tier\": \"a\\\"b\"},\n"
    "    \"managedFields\": [{\"manager\": \"kubectl\", \"fieldsV1\": {\"f:data\": {}}}]},\n"
    "  \"data\": {\"s\": \"tab\\there \\ud83d\\ude00 \\u2603 \xc3\xa9\xe2\x82\xac\\/\\\\\",\n"
    "    \"i\": -9223372036854775808, \"j\": 9223372036854775807, \"z\": 0, \"n\": -0,\n"
    "    \"r\": 1.5e-3, \"e\": 2E+10, \"f\": -0.25, \"t\": true, \"F\": false, \"u\": null,\n"
    "    \"a\": [1, [2, [3, {}]], [], \"x\"], \"o\": {}}\n}\n";

static json_t *jansson(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
    if (!v)
        fail_msg("jansson rejects test input: %s: %s", e.text, text);
    return v;
}

static void expect_same_tree(const json_t *got, const json_t *want)
{
    if (!json_equal(got, want)) {
        char *a = json_dumps(got, JSON_SORT_KEYS), *b = json_dumps(want, JSON_SORT_KEYS);
        fail_msg("trees differ:\n got  %s\n want %s", a, b);
    }
}

static void test_cobj_parse(void **state)
{
    (void)state;
    char *err = NULL;
    ckube__cobj *c = ckube__cobj_parse(RICH, strlen(RICH), NULL, &err);
    if (!c)
        fail_msg("parse: %s", err);
    assert_null(err);
    assert_string_equal(ckube__cobj_key(c), "ns1/caf\xc3\xa9-1");
    assert_string_equal(ckube__cobj_namespace(c), "ns1");
    assert_string_equal(ckube__cobj_rv(c), "42");
    /* Compact, and without managedFields. */
    assert_null(strchr(ckube__cobj_json(c), '\n'));
    assert_null(strstr(ckube__cobj_json(c), "managedFields"));
    assert_int_equal(strlen(ckube__cobj_json(c)), c->json_len);
    json_t *want = jansson(RICH);
    json_object_del(json_object_get(want, "metadata"), "managedFields");
    json_t *t = ckube__cobj_tree(c);
    expect_same_tree(t, want);
    /* Every build is a new tree, equal to the others. */
    json_t *t2 = ckube__cobj_tree(c);
    assert_ptr_not_equal(t, t2);
    expect_same_tree(t2, want);
    json_decref(t2);
    /* Labels without the rest. */
    json_t *labels = ckube__cobj_labels(c);
    expect_same_tree(labels, json_object_get(json_object_get(want, "metadata"), "labels"));
    json_decref(labels);
    /* Serializing the tree gives text that builds the same tree, and
     * serializing is stable from there. */
    ckube__cobj *again = ckube__cobj_from_json(t, NULL);
    assert_non_null(again);
    json_t *t3 = ckube__cobj_tree(again);
    expect_same_tree(t3, want);
    ckube__cobj *third = ckube__cobj_from_json(t3, NULL);
    assert_string_equal(ckube__cobj_json(third), ckube__cobj_json(again));
    ckube__cobj_unref(third);
    json_decref(t3);
    assert_string_equal(ckube__cobj_key(again), ckube__cobj_key(c));
    assert_string_equal(ckube__cobj_rv(again), "42");
    assert_true(ckube__cobj_bytes(again) > again->json_len);
    ckube__cobj_unref(again);
    json_decref(t);

    /* Options: keep managedFields; metadata only. */
    ckube__cobj_opts keep = {.keep_managed_fields = true}, meta = {.metadata_only = true};
    ckube__cobj *k = ckube__cobj_parse(RICH, strlen(RICH), &keep, NULL);
    t = ckube__cobj_tree(k);
    json_t *full = jansson(RICH);
    expect_same_tree(t, full);
    json_decref(t);
    ckube__cobj_unref(k);
    ckube__cobj *m = ckube__cobj_parse(RICH, strlen(RICH), &meta, NULL);
    t = ckube__cobj_tree(m);
    json_object_del(want, "data");
    expect_same_tree(t, want);
    assert_string_equal(ckube__cobj_key(m), "ns1/caf\xc3\xa9-1");
    /* The serializer applies the same options. */
    ckube__cobj *m2 = ckube__cobj_from_json(full, &meta);
    json_t *t2m = ckube__cobj_tree(m2);
    expect_same_tree(t2m, t);
    json_decref(t2m);
    ckube__cobj_unref(m2);
    json_decref(t);
    ckube__cobj_unref(m);
    json_decref(full);
    json_decref(want);

    /* No name: no key; cluster-scoped: the name alone; no resourceVersion. */
    const char *nn = "{\"metadata\":{\"namespace\":\"a\"}}";
    ckube__cobj *x = ckube__cobj_parse(nn, strlen(nn), NULL, NULL);
    assert_non_null(x);
    assert_int_equal(x->key_len, 0);
    assert_string_equal(ckube__cobj_key(x), "");
    assert_null(ckube__cobj_rv(x));
    ckube__cobj_unref(x);
    const char *cl = "{\"metadata\":{\"name\":\"n1\",\"name\":\"n2\"}}"; /* last wins */
    x = ckube__cobj_parse(cl, strlen(cl), NULL, NULL);
    assert_string_equal(ckube__cobj_key(x), "n2");
    assert_string_equal(ckube__cobj_namespace(x), "");
    t = ckube__cobj_tree(x);
    assert_string_equal(ckube_obj_name(t), "n2");
    json_decref(t);
    ckube__cobj_unref(x);
    ckube__cobj_unref(c);
}

/* metadata.generation is read into the block on the way (for handlers
 * that need it without a tree): integers only, the last one wins, and
 * the serializer agrees with the scanner. */
static void test_cobj_generation(void **state)
{
    (void)state;
    static const struct {
        const char *meta;
        int64_t want;
    } cases[] = {
        {"\"name\":\"a\",\"generation\":7", 7},
        {"\"generation\": 3 ,\"name\":\"a\"", 3},
        {"\"name\":\"a\"", 0},
        {"\"generation\":1,\"generation\":2", 2},
        {"\"generation\":-5", -5},
        {"\"generation\":9223372036854775807", INT64_MAX},
        {"\"generation\":-9223372036854775808", INT64_MIN},
        {"\"generation\":1.5", 0},
        {"\"generation\":1e3", 0},
        {"\"generation\":\"4\"", 0},
        {"\"generation\":null", 0},
        {"\"generation\":[1]", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text), "{\"metadata\":{%s},\"spec\":{\"generation\":99}}",
                 cases[i].meta);
        char *err = NULL;
        ckube__cobj *c = ckube__cobj_parse(text, strlen(text), NULL, &err);
        if (!c)
            fail_msg("%s: %s", text, err);
        if (c->generation != cases[i].want)
            fail_msg("%s: generation %" PRId64 ", want %" PRId64, text, c->generation,
                     cases[i].want);
        json_t *t = ckube__cobj_tree(c);
        ckube__cobj *again = ckube__cobj_from_json(t, NULL);
        assert_non_null(again);
        assert_true(again->generation == cases[i].want);
        ckube__cobj_unref(again);
        json_decref(t);
        ckube__cobj_unref(c);
    }
    /* A later metadata replaces an earlier one, generation included. */
    const char *twice = "{\"metadata\":{\"generation\":4},\"metadata\":{\"name\":\"b\"}}";
    ckube__cobj *c = ckube__cobj_parse(twice, strlen(twice), NULL, NULL);
    assert_non_null(c);
    assert_true(c->generation == 0);
    ckube__cobj_unref(c);
}

/* Puts in key order take a shortcut past the greatest item: mix them
 * with puts below it, replacements and deletes (of the greatest, which
 * moves it back, and of others), and check the store against a model. */
static void expect_model(ckube_store *s, const bool *model, int n)
{
    ckube_key_list keys;
    assert_int_equal(ckube_store_list_keys(s, &keys), 0);
    size_t j = 0;
    for (int i = 0; i < n; i++) {
        if (!model[i])
            continue;
        char want[32];
        snprintf(want, sizeof(want), "ns/k%04d", i);
        if (j >= keys.n || strcmp(keys.keys[j], want) != 0)
            fail_msg("key %zu: got %s, want %s", j, j < keys.n ? keys.keys[j] : "(end)", want);
        json_t *o = ckube_store_get(s, want);
        assert_non_null(o);
        ckube_obj_unref(o);
        j++;
    }
    assert_int_equal(keys.n, j);
    assert_int_equal(ckube_store_len(s), j);
    ckube_key_list_free(&keys);
}

static void test_sorted_put_shortcut(void **state)
{
    (void)state;
    enum { N = 300 };
    ckube_store *s = ckube_store_new(NULL);
    bool model[N] = {0};
    uint32_t x = 12345;
    for (int step = 0; step < 4000; step++) {
        x = x * 1103515245u + 12345u;
        int r = (int)((x >> 8) % 100), k = (int)((x >> 16) % N);
        int top = -1;
        for (int i = N - 1; i >= 0 && top < 0; i--)
            if (model[i])
                top = i;
        bool put = true;
        if (r < 45 && top + 1 < N)
            k = top + 1; /* the next key up */
        else if (r >= 85 && top >= 0)
            k = top, put = false; /* the greatest goes */
        else if (r >= 70)
            put = false;
        char name[16];
        snprintf(name, sizeof(name), "k%04d", k);
        if (put) {
            json_t *o = tu_obj("ns", name, NULL, NULL, step);
            assert_int_equal(ckube_store_put(s, o, NULL), 0);
            json_decref(o);
        } else {
            char key[32];
            snprintf(key, sizeof(key), "ns/%s", name);
            assert_int_equal(ckube_store_delete_key(s, key, NULL), model[k] ? 1 : 0);
        }
        model[k] = put;
        if (step % 97 == 0)
            expect_model(s, model, N);
    }
    expect_model(s, model, N);
    ckube_store_free(s);
}

/* The namespace index is a key range of the item tree: check it where
 * ranges are easy to get wrong (prefixes of other namespaces, "" for
 * cluster-scoped objects, a cluster-scoped name that looks like a key). */
static void test_namespace_ranges(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    const char *objs[][2] = {{"a", "x"},   {"ab", "y"}, {"a", "z"},   {NULL, "a"},
                             {"a-b", "w"}, {"b", "v"},  {NULL, "zz"}, {"a", "a"}};
    for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
        json_t *o = tu_obj(objs[i][0], objs[i][1], "app", i % 2 ? "web" : "db", (int)i);
        assert_int_equal(ckube_store_put(s, o, NULL), 0);
        json_decref(o);
    }
    /* Not a Kubernetes name, but nothing stops a store from holding it:
     * cluster-scoped, keyed "a/q", inside namespace a's key range. */
    json_t *odd = tu_obj(NULL, "a/q", NULL, NULL, 0);
    assert_int_equal(ckube_store_put(s, odd, NULL), 0);
    json_decref(odd);

    const char *want_a[] = {"a/a", "a/x", "a/z"};
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "a", want_a, 3);
    const char *want_ab[] = {"ab/y"};
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "ab", want_ab, 1);
    const char *want_cluster[] = {"a", "a/q", "zz"};
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "", want_cluster, 3);
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "c", NULL, 0);
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "a/", NULL, 0);

    ckube_key_list vals;
    assert_int_equal(ckube_store_index_values(s, CKUBE_INDEX_NAMESPACE, &vals), 0);
    const char *want_vals[] = {"", "a", "a-b", "ab", "b"};
    assert_int_equal(vals.n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(vals.keys[i], want_vals[i]);
    ckube_key_list_free(&vals);

    /* The lister goes through the same ranges, with and without labels. */
    ckube_lister l = {.store = s};
    ckube_obj_list out;
    assert_int_equal(ckube_lister_list(&l, "a", NULL, &out), 0);
    assert_int_equal(out.n, 3);
    assert_string_equal(ckube_obj_name(out.items[0]), "a");
    ckube_obj_list_free(&out);
    ckube_selector *sel = NULL;
    assert_int_equal(ckube_label_selector_parse("app=web", &sel, NULL), 0);
    assert_int_equal(ckube_lister_list(&l, "a", sel, &out), 0);
    assert_int_equal(out.n, 1); /* a/z (i = 2) is db, a/a (7) web, a/x (0) db */
    assert_string_equal(ckube_obj_name(out.items[0]), "a");
    ckube_obj_list_free(&out);
    ckube_selector_free(sel);

    /* Removing the last object of a namespace removes the value. */
    assert_int_equal(ckube_store_delete_key(s, "ab/y", NULL), 1);
    assert_int_equal(ckube_store_index_values(s, CKUBE_INDEX_NAMESPACE, &vals), 0);
    assert_int_equal(vals.n, 4);
    assert_string_equal(vals.keys[2], "a-b");
    assert_string_equal(vals.keys[3], "b");
    ckube_key_list_free(&vals);
    ckube_store_free(s);

    /* An empty store has no values at all. */
    s = ckube_store_new(NULL);
    assert_int_equal(ckube_store_index_values(s, CKUBE_INDEX_NAMESPACE, &vals), 0);
    assert_int_equal(vals.n, 0);
    ckube_key_list_free(&vals);
    ckube_store_free(s);
}

/* The scanner accepts what jansson accepts and refuses what it refuses. */
static void test_cobj_validation(void **state)
{
    (void)state;
    static const char *const good[] = {
        "{}",
        " {\"a\":[]}\n",
        "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\ud800\\udc00\"}",
        "{\"a\":1e308,\"b\":-1E-400,\"c\":0.0,\"d\":123456789012345678}",
        "{\"\xf0\x9f\x98\x80\":\"\xe2\x82\xac\xdf\xbf\xc2\x80\"}",
        "{\"a\":{\"b\":{\"c\":[[[[null]]]]}}}",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char *err = NULL;
        ckube__cobj *c = ckube__cobj_parse(good[i], strlen(good[i]), NULL, &err);
        if (!c)
            fail_msg("rejected %s: %s", good[i], err);
        json_t *want = jansson(good[i]), *t = ckube__cobj_tree(c);
        expect_same_tree(t, want);
        json_decref(t);
        json_decref(want);
        ckube__cobj_unref(c);
    }
    static const char *const bad[] = {
        "",
        "   ",
        "[]",
        "\"s\"",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{,}",
        "{\"a\":[1,]}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":.5}",
        "{\"a\":1e}",
        "{\"a\":-}",
        "{\"a\":+1}",
        "{\"a\":9223372036854775808}",
        "{\"a\":-9223372036854775809}",
        "{\"a\":1e400}",
        "{\"a\":tru}",
        "{\"a\":nul}",
        "{\"a\":NaN}",
        "{\"a\":\"x}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"\\u12\"}",
        "{\"a\":\"\\u0000\"}",
        "{\"a\":\"\\udc00\"}",
        "{\"a\":\"\\ud800\"}",
        "{\"a\":\"\\ud800\\u0041\"}",
        "{\"a\":\"tab\there\"}",
        "{\"a\":\"\xc0\xaf\"}",         /* overlong */
        "{\"a\":\"\xed\xa0\x80\"}",     /* an encoded surrogate */
        "{\"a\":\"\xf4\x90\x80\x80\"}", /* above U+10FFFF */
        "{\"a\":\"\xe2\x82\"}",         /* truncated */
        "{\"a\":\"\x80\"}",             /* a lone continuation byte */
        "{\"a\":1} x",
        "{\"a\":1}{}",
        "{'a':1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *err = NULL;
        ckube__cobj *c = ckube__cobj_parse(bad[i], strlen(bad[i]), NULL, &err);
        if (c)
            fail_msg("accepted %s", bad[i]);
        assert_non_null(err);
        assert_non_null(strstr(err, "line "));
        free(err);
        /* Jansson agrees (the scanner must never be stricter or looser). */
        json_error_t e;
        json_t *j = json_loadb(bad[i], strlen(bad[i]), JSON_REJECT_DUPLICATES, &e);
        if (j && json_is_object(j))
            fail_msg("jansson accepts %s", bad[i]);
        json_decref(j);
    }
    /* Nesting: jansson's limit. */
    size_t depth = 3000;
    char *deep = malloc(2 * depth + 16);
    size_t n = 0;
    deep[n++] = '{';
    memcpy(deep + n, "\"a\":", 4);
    n += 4;
    for (size_t i = 0; i < depth; i++)
        deep[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    char *err = NULL;
    assert_null(ckube__cobj_parse(deep, n, NULL, &err));
    assert_non_null(strstr(err, "depth"));
    free(err);
    free(deep);
}

static void test_cobj_serializer(void **state)
{
    (void)state;
    json_t *o = tu_obj("ns1", "a", "app", "web", 7);
    json_t *spec = json_object_get(o, "spec");
    json_object_set_new(spec, "ctl", json_string("a\x01\x1f\"\\\n\r\t\b\f/\xc3\xa9"));
    json_object_set_new(spec, "real", json_real(0.1));
    json_object_set_new(spec, "whole", json_real(3.0));
    json_object_set_new(spec, "big", json_real(1e300));
    json_object_set_new(spec, "neg", json_integer(-5));
    json_object_set_new(spec, "arr", json_pack("[i,s,b,n,{}]", 1, "x", 1));
    json_t *mf = json_pack("[{s:s}]", "manager", "m");
    json_object_set_new(json_object_get(o, "metadata"), "managedFields", mf);
    json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string("9"));
    ckube__cobj *c = ckube__cobj_from_json(o, NULL);
    assert_non_null(c);
    assert_string_equal(ckube__cobj_key(c), "ns1/a");
    assert_string_equal(ckube__cobj_rv(c), "9");
    /* The text is valid JSON for jansson and for the scanner. */
    json_t *back = jansson(ckube__cobj_json(c));
    json_t *want = json_deep_copy(o);
    json_object_del(json_object_get(want, "metadata"), "managedFields");
    expect_same_tree(back, want);
    json_t *t = ckube__cobj_tree(c);
    expect_same_tree(t, want);
    ckube__cobj *re = ckube__cobj_parse(ckube__cobj_json(c), c->json_len, NULL, NULL);
    assert_non_null(re);
    assert_string_equal(ckube__cobj_json(re), ckube__cobj_json(c));
    ckube__cobj_unref(re);
    json_decref(t);
    json_decref(back);
    json_decref(want);
    /* A NUL inside a string (jansson allows it in trees) survives too. */
    json_t *nul = json_pack("{s:{s:s}, s:s%}", "metadata", "name", "n", "v", "a\0b", (size_t)3);
    ckube__cobj *cn = ckube__cobj_from_json(nul, NULL);
    t = ckube__cobj_tree(cn);
    expect_same_tree(t, nul);
    json_decref(t);
    ckube__cobj_unref(cn);
    json_decref(nul);
    /* The tree was not touched. */
    assert_non_null(json_object_get(json_object_get(o, "metadata"), "managedFields"));
    json_t *notobj = json_integer(1);
    assert_null(ckube__cobj_from_json(notobj, NULL));
    json_decref(notobj);
    ckube__cobj_unref(c);
    json_decref(o);
}

static void test_cobj_list_and_events(void **state)
{
    (void)state;
    const char *page1 =
        "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\n"
        " \"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"tok\\u0031\"},\n"
        " \"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"resourceVersion\":\"5\","
        "\"managedFields\":[]}},\n"
        "  7, {\"metadata\":{\"name\":\"b\",\"namespace\":\"n\"}}, {\"kind\":\"NoName\"}]}";
    ckube__clist l = {0};
    char *err = NULL;
    assert_int_equal(ckube__cobj_parse_list(page1, strlen(page1), NULL, &l, &err), 0);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.skipped, 1);
    assert_string_equal(ckube__cobj_key(l.items[0]), "n/a");
    assert_string_equal(ckube__cobj_json(l.items[0]),
                        "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
                        "\"resourceVersion\":\"5\"}}");
    assert_string_equal(ckube__cobj_key(l.items[1]), "n/b");
    assert_int_equal(l.items[2]->key_len, 0);
    assert_string_equal(l.resource_version, "100");
    assert_string_equal(l.continue_token, "tok1");
    /* A second page appends; its metadata replaces the first's. */
    const char *page2 = "{\"items\":[{\"metadata\":{\"name\":\"c\"}}],\"metadata\":{}}";
    assert_int_equal(ckube__cobj_parse_list(page2, strlen(page2), NULL, &l, &err), 0);
    assert_int_equal(l.n, 4);
    assert_string_equal(ckube__cobj_key(l.items[3]), "c");
    assert_null(l.resource_version);
    assert_null(l.continue_token);
    /* Garbage leaves the list alone: invalid JSON is -1, a non-list -2. */
    static const char *const invalid[] = {"{\"items\":[{\"a\":}]}", "{\"items\":[", "nope", ""};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        assert_int_equal(ckube__cobj_parse_list(invalid[i], strlen(invalid[i]), NULL, &l, &err),
                         -1);
        assert_non_null(err);
        free(err);
        err = NULL;
    }
    static const char *const not_list[] = {"[]", "{\"items\":\"x\"}", "{\"items\":{}}", "42"};
    for (size_t i = 0; i < sizeof not_list / sizeof *not_list; i++)
        assert_int_equal(ckube__cobj_parse_list(not_list[i], strlen(not_list[i]), NULL, &l, &err),
                         -2);
    assert_int_equal(l.n, 4);
    /* Empty lists. */
    ckube__clist e = {0};
    assert_int_equal(ckube__cobj_parse_list("{\"items\":null}", 14, NULL, &e, &err), 0);
    assert_int_equal(ckube__cobj_parse_list("{}", 2, NULL, &e, &err), 0);
    assert_int_equal(e.n, 0);
    ckube__clist_clear(&e);
    ckube__clist_clear(&l);
    assert_null(l.items);

    /* Watch events. */
    ckube__cevent ev;
    const char *add = "{\"object\":{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"7\","
                      "\"managedFields\":[1]},\"data\":{}},\"type\":\"ADDED\"}";
    ckube__cobj_opts meta = {.metadata_only = true};
    assert_int_equal(ckube__cobj_parse_event(add, strlen(add), &meta, &ev, &err), 0);
    assert_int_equal(ev.type, CKUBE_WATCH_ADDED);
    assert_string_equal(ckube__cobj_json(ev.obj),
                        "{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"7\"}}");
    assert_null(ev.status);
    ckube__cobj_unref(ev.obj);
    /* ERROR keeps the whole Status, whatever the options. */
    const char *er = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                     "\"reason\":\"Expired\"}}";
    assert_int_equal(ckube__cobj_parse_event(er, strlen(er), &meta, &ev, &err), 0);
    assert_int_equal(ev.type, CKUBE_WATCH_ERROR);
    assert_null(ev.obj);
    assert_int_equal(json_integer_value(json_object_get(ev.status, "code")), 410);
    json_decref(ev.status);
    const char *bm =
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}";
    assert_int_equal(ckube__cobj_parse_event(bm, strlen(bm), NULL, &ev, &err), 0);
    assert_string_equal(ckube__cobj_rv(ev.obj), "9");
    ckube__cobj_unref(ev.obj);
    assert_int_equal(ckube__cobj_parse_event("{\"type\":\"ADDED\",", 16, NULL, &ev, &err), -1);
    free(err);
    const char *badtype = "{\"type\":\"NOPE\",\"object\":{}}";
    assert_int_equal(ckube__cobj_parse_event(badtype, strlen(badtype), NULL, &ev, &err), -2);
    assert_string_equal(err, "got invalid watch event type: NOPE");
    free(err);
    const char *noobj = "{\"type\":\"MODIFIED\",\"object\":[]}";
    assert_int_equal(ckube__cobj_parse_event(noobj, strlen(noobj), NULL, &ev, &err), -2);
    assert_string_equal(err, "watch event MODIFIED without an object");
    free(err);
    assert_null(ev.obj);
    assert_null(ev.status);
}

/* ---- the store over compact objects ---- */

static ckube__cobj *cobj_of(const char *ns, const char *name, const char *lk, const char *lv,
                            int value)
{
    json_t *o = tu_obj(ns, name, lk, lv, value);
    ckube__cobj *c = ckube__cobj_from_json(o, NULL);
    json_decref(o);
    assert_non_null(c);
    return c;
}

static void test_store_compact(void **state)
{
    (void)state;
    ckube_store *s = ckube_store_new(NULL);
    int calls = 0;
    ckube_indexer ix = {.name = "app", .fn = app_index, .ud = &calls};
    assert_int_equal(ckube_store_add_indexer(s, &ix, NULL), 0);
    ckube__cobj *a = cobj_of("ns1", "a", "app", "web", 1);
    ckube__cobj *b = cobj_of("ns2", "b", "app", "db", 2);
    ckube__obj old;
    assert_int_equal(ckube__store_put_obj(s, (ckube__obj){.c = a}, &old), 0);
    assert_true(ckube__obj_none(old));
    assert_int_equal(ckube__store_put_obj(s, (ckube__obj){.c = b}, NULL), 0);
    assert_int_equal(calls, 2); /* a custom index needs a tree (built for the call) */
    assert_int_equal(ckube__store_cached_trees(s), 0);
    size_t compact_bytes = ckube_store_bytes(s);
    assert_true(compact_bytes > a->json_len + b->json_len);

    /* Readers share one cached tree. */
    json_t *g1 = ckube_store_get(s, "ns1/a");
    json_t *g2 = ckube_store_get(s, "ns1/a");
    assert_non_null(g1);
    assert_ptr_equal(g1, g2);
    assert_int_equal(json_integer_value(ckube_json_get_path(g1, "spec.value")), 1);
    assert_int_equal(ckube__store_cached_trees(s), 1);
    assert_true(ckube_store_bytes(s) > compact_bytes + 200);
    ckube_lister l = {.store = s};
    json_t *g3 = ckube_lister_get(&l, "ns1", "a");
    assert_ptr_equal(g3, g1);
    ckube_obj_unref(g3);
    ckube_obj_unref(g2);

    /* Indexes work without trees (namespace) and with them (app). */
    const char *want_ns1[] = {"ns1/a"}, *want_db[] = {"ns2/b"};
    expect_index_keys(s, CKUBE_INDEX_NAMESPACE, "ns1", want_ns1, 1);
    expect_index_keys(s, "app", "db", want_db, 1);

    /* A selector reads labels without caching non-matching trees. */
    ckube_selector *sel;
    assert_int_equal(ckube_label_selector_parse("app=db", &sel, NULL), 0);
    ckube_obj_list out;
    assert_int_equal(ckube_lister_list(&l, NULL, sel, &out), 0);
    assert_int_equal(out.n, 1);
    assert_string_equal(ckube_obj_name(out.items[0]), "b");
    ckube_obj_list_free(&out);
    assert_int_equal(ckube_lister_list(&l, "ns1", sel, &out), 0);
    assert_int_equal(out.n, 0);
    ckube_obj_list_free(&out);
    ckube_selector_free(sel);
    assert_int_equal(ckube__store_cached_trees(s), 2); /* a (held) and b (listed) */

    /* Trim: a tree somebody holds stays; one nobody used since the last
     * trim goes. */
    assert_int_equal(ckube__store_trim(s), 2); /* both used since: marks cleared */
    assert_int_equal(ckube__store_trim(s), 1); /* b dropped; a is held */
    ckube_obj_unref(g1);
    assert_int_equal(ckube__store_trim(s), 0);
    assert_int_equal(ckube_store_bytes(s), compact_bytes);
    json_t *g4 = ckube_store_get(s, "ns1/a"); /* built again, equal */
    assert_int_equal(json_integer_value(ckube_json_get_path(g4, "spec.value")), 1);
    ckube_obj_unref(g4);

    /* Replacing hands back the old object with its cached tree. */
    ckube__cobj *a2 = cobj_of("ns1", "a", "app", "db", 3);
    assert_int_equal(ckube__store_put_obj(s, (ckube__obj){.c = a2}, &old), 0);
    assert_ptr_equal(old.c, a);
    assert_non_null(old.j);
    assert_int_equal(json_integer_value(ckube_json_get_path(old.j, "spec.value")), 1);
    ckube__obj_unref(old);
    const char *want_both[] = {"ns1/a", "ns2/b"};
    expect_index_keys(s, "app", "db", want_both, 2);
    expect_index_keys(s, "app", "web", NULL, 0);
    /* The public calls see trees. */
    json_t *pub = NULL;
    assert_int_equal(ckube_store_delete_key(s, "ns2/b", &pub), 1);
    assert_int_equal(json_integer_value(ckube_json_get_path(pub, "spec.value")), 2);
    json_decref(pub);
    assert_int_equal(ckube__store_delete_obj(s, "ns1/a", &old), 1);
    assert_ptr_equal(old.c, a2);
    ckube__obj_unref(old);
    assert_int_equal(ckube_store_len(s), 0);
    assert_int_equal(ckube_store_bytes(s), 0);
    assert_int_equal(ckube__store_cached_trees(s), 0);
    ckube__cobj_unref(a);
    ckube__cobj_unref(a2);
    ckube__cobj_unref(b);
    ckube_store_free(s);
}

static void mutate_compact(void)
{
    ckube_store_opts o = {.name = "cms", .detect_mutations = true};
    ckube_store *s = ckube_store_new(&o);
    ckube__cobj *c = cobj_of("ns1", "victim", NULL, NULL, 1);
    ckube__store_put_obj(s, (ckube__obj){.c = c}, NULL);
    json_t *got = ckube_store_get(s, "ns1/victim");
    json_object_set_new(json_object_get(got, "spec"), "value", json_integer(2));
    ckube_store_check_mutations(s);
    _exit(3); /* not reached */
}

static void test_mutation_detector_compact(void **state)
{
    (void)state;
    char *log = NULL;
    int st = run_child(mutate_compact, &log);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGABRT);
    if (!strstr(log, "cache mutation detected: object ns1/victim in cache cms"))
        fail_msg("unexpected log: %s", log);
    free(log);
}

/* ---- the streaming list decoder ---- */

static int count_items(void *ud, ckube__cobj *c)
{
    ckube__clist *l = ud;
    return ckube__clist_push(l, ckube__cobj_ref(c));
}

/* The next piece's size: `chunk`, or with 0 a pseudo-random one of 1 to
 * max bytes; never more than `left`. */
static size_t next_chunk(unsigned *seed, size_t chunk, size_t max, size_t left)
{
    size_t n = chunk;
    if (!n) {
        *seed = *seed * 1103515245u + 12345u;
        n = 1 + (*seed >> 8) % max;
    }
    return n < left ? n : left;
}

/* Feeds text in chunks of `chunk` bytes (0: pseudo-random sizes). */
static int stream_parse(const char *text, size_t len, size_t chunk, ckube__clist *out,
                        ckube__clist *items_cb, char **err)
{
    ckube__clist_stream *st = ckube__clist_stream_new(NULL);
    assert_non_null(st);
    if (items_cb)
        ckube__clist_stream_on_item(st, count_items, items_cb);
    unsigned seed = 12345;
    size_t off = 0;
    int frc = 0;
    while (off < len && frc == 0) {
        size_t n = next_chunk(&seed, chunk, 97, len - off);
        /* A fresh copy per chunk: the decoder must not keep pointers into
         * what it was fed. */
        char *copy = malloc(n);
        memcpy(copy, text + off, n);
        frc = ckube__clist_stream_feed(st, copy, n);
        memset(copy, 'X', n);
        free(copy);
        off += n;
    }
    int rc = ckube__clist_stream_finish(st, out, err);
    if (frc != 0)
        assert_int_equal(rc, -1);
    ckube__clist_stream_free(st);
    return rc;
}

static void expect_same_list(const ckube__clist *a, const ckube__clist *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->skipped, b->skipped);
    for (size_t i = 0; i < a->n; i++) {
        assert_string_equal(ckube__cobj_json(a->items[i]), ckube__cobj_json(b->items[i]));
        assert_string_equal(ckube__cobj_key(a->items[i]), ckube__cobj_key(b->items[i]));
    }
    if (a->resource_version || b->resource_version)
        assert_string_equal(a->resource_version, b->resource_version);
    if (a->continue_token || b->continue_token)
        assert_string_equal(a->continue_token, b->continue_token);
}

static void test_cobj_stream(void **state)
{
    (void)state;
    /* A list with every kind of value, split everywhere. */
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "{ \"kind\" : \"ConfigMapList\", \"metadata\": {\"resourceVersion\":\"77\","
                      " \"continue\": \"c\\u0031\", \"x\": [1, {\"y\": null}]},\n\"items\" : [\n");
    for (int i = 0; i < 40; i++) {
        if (i)
            ckube__sb_add(&b, " ,\n");
        if (i == 7)
            ckube__sb_add(&b, "\"not an object\"");
        else if (i == 13)
            ckube__sb_add(&b, "-12.5e+3");
        else
            ckube__sb_printf(&b, "%s", RICH);
    }
    ckube__sb_add(&b, "], \"tail\": [true, false, null, 123456789] }  \n");
    char *text = b.s;
    size_t len = b.len;
    ckube__clist want = {0};
    char *err = NULL;
    assert_int_equal(ckube__cobj_parse_list(text, len, NULL, &want, &err), 0);
    assert_int_equal(want.n, 38);
    assert_int_equal(want.skipped, 2);
    const size_t chunks[] = {1, 2, 3, 7, 64, 1000, 4096, 1 << 20, 0};
    for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
        ckube__clist got = {0};
        if (stream_parse(text, len, chunks[i], &got, NULL, &err) != 0)
            fail_msg("chunk %zu: %s", chunks[i], err);
        expect_same_list(&got, &want);
        ckube__clist_clear(&got);
    }
    /* Items handed out as they come (only rv/continue at the end). */
    ckube__clist cb = {0}, meta = {0};
    assert_int_equal(stream_parse(text, len, 0, &meta, &cb, &err), 0);
    assert_int_equal(meta.n, 0);
    assert_string_equal(meta.resource_version, "77");
    cb.skipped = want.skipped;
    cb.resource_version = meta.resource_version;
    cb.continue_token = meta.continue_token;
    meta.resource_version = meta.continue_token = NULL;
    expect_same_list(&cb, &want);
    ckube__clist_clear(&cb);
    ckube__clist_clear(&meta);

    /* Any prefix of the text is incomplete; the results never differ
     * from the one-shot parser's verdict. */
    for (size_t cut = 0; cut < len; cut += 97) {
        ckube__clist got = {0};
        assert_int_equal(stream_parse(text, cut, 0, &got, NULL, &err), -1);
        assert_int_equal(got.n, 0);
        assert_non_null(strstr(err, "byte "));
        free(err);
        err = NULL;
    }
    /* Invalid and not-a-list bodies, streamed byte by byte. */
    static const char *const invalid[] = {"{\"items\":[{\"a\":}]}",    "{\"items\":[{}],}",
                                          "{\"items\":[1 2]}",         "{} {}",
                                          "{\"items\":[\"\\ud800\"]}", "{\"items\":[\"\xc3\x28\"]}",
                                          "{\"items\":[tru]}",         "{\"items\":[0123]}"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        ckube__clist got = {0};
        if (stream_parse(invalid[i], strlen(invalid[i]), 1, &got, NULL, &err) != -1)
            fail_msg("accepted %s", invalid[i]);
        free(err);
        err = NULL;
        ckube__clist one = {0};
        assert_int_equal(ckube__cobj_parse_list(invalid[i], strlen(invalid[i]), NULL, &one, &err),
                         -1);
        free(err);
        err = NULL;
    }
    static const char *const not_list[] = {"[1,2]", "{\"items\":\"x\"}", "\"s\"", "{\"items\":7}"};
    for (size_t i = 0; i < sizeof not_list / sizeof *not_list; i++) {
        ckube__clist got = {0};
        assert_int_equal(stream_parse(not_list[i], strlen(not_list[i]), 1, &got, NULL, &err), -2);
    }
    ckube__clist e = {0};
    assert_int_equal(stream_parse("{\"items\":null}", 14, 1, &e, NULL, &err), 0);
    assert_int_equal(stream_parse(" {} ", 4, 1, &e, NULL, &err), 0);
    assert_int_equal(e.n, 0);
    ckube__clist_clear(&e);

    /* Reset forgets a half-fed body (a retried request). */
    ckube__clist_stream *st = ckube__clist_stream_new(NULL);
    assert_int_equal(ckube__clist_stream_feed(st, text, len / 2), 0);
    ckube__clist_stream_reset(st);
    assert_int_equal(ckube__clist_stream_feed(st, text, len), 0);
    ckube__clist got = {0};
    assert_int_equal(ckube__clist_stream_finish(st, &got, &err), 0);
    expect_same_list(&got, &want);
    ckube__clist_clear(&got);
    ckube__clist_stream_free(st);
    ckube__clist_clear(&want);
    free(text);
}

/* ---- the streaming decoder's builder thread ---- */

/* What on_item saw: the items, how many calls came from a thread other
 * than the test's, and a call at which to refuse (0: never). */
typedef struct seen {
    ckube__clist items;
    pthread_t main;
    size_t calls, off_thread, refuse_at;
    size_t at_finish; /* calls when finish returned */
} seen;

static int seen_item(void *ud, ckube__cobj *c)
{
    seen *w = ud;
    w->calls++;
    if (!pthread_equal(pthread_self(), w->main))
        w->off_thread++;
    if (w->refuse_at && w->calls == w->refuse_at)
        return -1;
    return ckube__clist_push(&w->items, ckube__cobj_ref(c));
}

/* A list of n objects, about 330 bytes each, every seventh one RICH
 * (escapes in its name, whitespace, managedFields to drop). */
static char *big_list(size_t n, size_t *len)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"9\"},"
                      "\"items\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            ckube__sb_add(&b, ",");
        if (i % 7 == 3) {
            ckube__sb_add(&b, RICH);
            continue;
        }
        ckube__sb_printf(&b,
                         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":"
                         "\"o\\u00e9-%zu\",\"namespace\":\"ns%zu\",\"resourceVersion\":\"%zu\","
                         "\"generation\":%zu},\"data\":{\"pad\":\"%0200zu\"}}",
                         i, i % 5, i + 100, i, i);
    }
    ckube__sb_add(&b, "]}");
    *len = b.len;
    return b.s;
}

/* Feeds text[0, len) in pieces of `chunk` (0: pseudo-random sizes up to
 * 64 KiB) to st. Returns the last feed's result. */
static int feed_all(ckube__clist_stream *st, const char *text, size_t len, size_t chunk)
{
    unsigned seed = 777;
    int rc = 0;
    for (size_t off = 0; off < len && rc == 0;) {
        size_t n = next_chunk(&seed, chunk, 65536, len - off);
        rc = ckube__clist_stream_feed(st, text + off, n);
        off += n;
    }
    return rc;
}

/* Decodes text with on_item, starting the builder after `from` bytes. */
static int builder_parse(const char *text, size_t len, size_t chunk, size_t from, seen *w,
                         ckube__clist *meta, char **err)
{
    ckube__clist_stream *st = ckube__clist_stream_new(NULL);
    assert_non_null(st);
    w->main = pthread_self();
    ckube__clist_stream_on_item(st, seen_item, w);
    ckube__clist_stream_builder_from(st, from);
    feed_all(st, text, len, chunk);
    int rc = ckube__clist_stream_finish(st, meta, err);
    w->at_finish = w->calls;
    ckube__clist_stream_free(st);
    return rc;
}

static void test_cobj_stream_builder(void **state)
{
    (void)state;
    size_t len;
    char *text = big_list(5000, &len);
    assert_true(len > 3 * ((size_t)1 << 20) / 2); /* past the default 1 MiB */
    ckube__clist want = {0};
    char *err = NULL;
    assert_int_equal(ckube__cobj_parse_list(text, len, NULL, &want, &err), 0);
    assert_int_equal(want.n, 5000);

    /* Whenever the builder starts and however the text is cut, on_item
     * sees every object, in order, and the same blocks as the one-shot
     * parser builds (fields decoded from escapes included). */
    const size_t froms[] = {0, 1000, (size_t)1 << 20, SIZE_MAX};
    const size_t chunks[] = {1, 7, 4096, 0};
    for (size_t f = 0; f < sizeof froms / sizeof *froms; f++)
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
            if (chunks[c] == 1 && f != 0)
                continue; /* byte by byte once is enough */
            seen w = {0};
            ckube__clist meta = {0};
            if (builder_parse(text, len, chunks[c], froms[f], &w, &meta, &err) != 0)
                fail_msg("from %zu, chunk %zu: %s", froms[f], chunks[c], err);
            assert_int_equal(w.at_finish, 5000);
            assert_int_equal(meta.n, 0);
            assert_string_equal(meta.resource_version, "9");
            w.items.resource_version = meta.resource_version;
            meta.resource_version = NULL;
            expect_same_list(&w.items, &want);
            for (size_t i = 0; i < w.items.n; i++)
                assert_int_equal(w.items.items[i]->generation, want.items[i]->generation);
            /* The builder ran (or, with SIZE_MAX, never did). */
            if (froms[f] == SIZE_MAX)
                assert_int_equal(w.off_thread, 0);
            else
                assert_true(w.off_thread > 0);
            if (froms[f] == 0)
                assert_int_equal(w.off_thread, 5000);
            ckube__clist_clear(&w.items);
            ckube__clist_clear(&meta);
        }

    /* on_item refusing an object fails the decoding, on the builder as
     * inline: no call after the refused one. */
    for (size_t f = 0; f < 2; f++) {
        seen w = {.refuse_at = 2500};
        ckube__clist meta = {0};
        assert_int_equal(builder_parse(text, len, 0, f ? SIZE_MAX : 0, &w, &meta, &err), -1);
        assert_non_null(strstr(err, ": out of memory"));
        free(err);
        err = NULL;
        assert_int_equal(w.calls, 2500);
        assert_int_equal(w.items.n, 2499);
        ckube__clist_clear(&w.items);
        ckube__clist_clear(&meta);
    }

    /* Invalid text after the builder started: an error, and the objects
     * before it handed over all the same (as inline). */
    char *bad = strdup(text);
    char *colon = strstr(bad + len * 3 / 4, "\"data\":");
    assert_non_null(colon);
    colon[6] = '!';
    for (size_t f = 0; f < 2; f++) {
        seen w = {0};
        ckube__clist meta = {0};
        assert_int_equal(builder_parse(bad, len, 0, f ? SIZE_MAX : 0, &w, &meta, &err), -1);
        assert_non_null(strstr(err, "byte "));
        free(err);
        err = NULL;
        assert_true(w.items.n > 3000 && w.items.n < 5000);
        for (size_t i = 0; i < w.items.n; i++)
            assert_string_equal(ckube__cobj_json(w.items.items[i]),
                                ckube__cobj_json(want.items[i]));
        ckube__clist_clear(&w.items);
        ckube__clist_clear(&meta);
    }
    free(bad);

    /* Reset (a retried request) and free without finish: what was
     * decoded has been handed over when they return, as inline. */
    size_t counts[2][2];
    for (size_t f = 0; f < 2; f++) {
        seen w = {.main = pthread_self()};
        ckube__clist_stream *st = ckube__clist_stream_new(NULL);
        ckube__clist_stream_on_item(st, seen_item, &w);
        ckube__clist_stream_builder_from(st, f ? SIZE_MAX : 0);
        assert_int_equal(feed_all(st, text, len / 2, 4096), 0);
        ckube__clist_stream_reset(st);
        counts[f][0] = w.calls;
        assert_int_equal(feed_all(st, text, len * 2 / 3, 0), 0);
        ckube__clist_stream_free(st);
        counts[f][1] = w.calls;
        assert_int_equal(w.items.n, w.calls);
        ckube__clist_clear(&w.items);
    }
    assert_true(counts[0][0] > 2000);
    assert_int_equal(counts[0][0], counts[1][0]);
    assert_int_equal(counts[0][1], counts[1][1]);
    ckube__clist_clear(&want);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_put_get_delete),
        cmocka_unit_test(test_replace_and_list),
        cmocka_unit_test(test_indexes),
        cmocka_unit_test(test_lister),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_concurrency),
        cmocka_unit_test(test_mutation_detector),
        cmocka_unit_test(test_cobj_parse),
        cmocka_unit_test(test_cobj_generation),
        cmocka_unit_test(test_namespace_ranges),
        cmocka_unit_test(test_sorted_put_shortcut),
        cmocka_unit_test(test_cobj_validation),
        cmocka_unit_test(test_cobj_serializer),
        cmocka_unit_test(test_cobj_list_and_events),
        cmocka_unit_test(test_cobj_stream),
        cmocka_unit_test(test_cobj_stream_builder),
        cmocka_unit_test(test_store_compact),
        cmocka_unit_test(test_mutation_detector_compact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
