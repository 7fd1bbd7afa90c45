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
#include "runtime/informer_test_util.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
