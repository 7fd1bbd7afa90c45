/* store.c - the thread-safe indexed object cache and listers (see
 * ckube/informer.h).
 *
 * Objects live in a red-black tree keyed by "ns/name" (so listings come
 * out sorted). Each custom index maps a value to the set of items having
 * it: a tree of values, each holding a tree of items. The built-in
 * namespace index has no structure of its own: the objects of namespace
 * ns are the keys beginning "ns/", one range of the item tree, so it
 * costs nothing to keep (it was a second tree as large as the first). A
 * readers-writer lock guards everything; readers get new references to
 * the shared objects.
 *
 * An object is kept in one of two forms (informer_internal.h):
 *  - compact (what informers store): its JSON text in one block; a
 *    jansson tree is built the first time a reader asks for it and cached
 *    (installed with a compare-and-swap, readers hold only the read
 *    lock), so every reader shares one tree while it is in use; trim
 *    drops the cached trees nobody holds and nobody asked for since the
 *    previous trim. The built-in namespace index reads the namespace from
 *    the block, so only custom indexers ever need a tree at insert;
 *  - a tree (objects put through the public json_t API): kept as given.
 *
 * Memory accounting: each block's size, each cached or kept tree as
 * jansson allocates it (ckube_json_heap_bytes, with the allocation sizes
 * jansson 2.x uses on 64-bit glibc), plus the store's own nodes; the
 * total is kept current on every change (atomically: trees are cached
 * under the read lock).
 *
 * The mutation detector compares every cached tree with its block (and
 * every kept tree with a deep copy taken at insert) on every change and
 * on demand. */
#include "ckube/informer.h"
#include "informer/informer_internal.h"

#include "ckube/json.h"
#include "ckube/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
/* libbsd's RB_GENERATE_STATIC marks the functions __unused, which libbsd
 * leaves undefined on Linux; define it for the expansions below. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#define CKUBE_UNDEF_UNUSED
#endif
#include <sys/tree.h>

/* ------------------------------------------------------------------------ */
/* Shared references, keys and result lists.                                */

json_t *ckube_obj_ref(json_t *obj)
{
    if (obj && __atomic_load_n(&obj->refcount, __ATOMIC_RELAXED) != (size_t)-1)
        __atomic_add_fetch(&obj->refcount, 1, __ATOMIC_RELAXED);
    return obj;
}

void ckube_obj_unref(json_t *obj)
{
    /* acq_rel: whoever frees the object sees every other holder's
     * accesses, which happened before their own unref. */
    if (obj && __atomic_load_n(&obj->refcount, __ATOMIC_RELAXED) != (size_t)-1 &&
        __atomic_sub_fetch(&obj->refcount, 1, __ATOMIC_ACQ_REL) == 0)
        json_delete(obj);
}

char *ckube_meta_namespace_key(const json_t *obj)
{
    const char *name = ckube_obj_name(obj);
    if (!name || !*name)
        return NULL;
    const char *ns = ckube_obj_namespace(obj);
    char *key = NULL;
    if (ns && *ns) {
        if (asprintf(&key, "%s/%s", ns, name) < 0)
            return NULL;
        return key;
    }
    return strdup(name);
}

int ckube_split_meta_namespace_key(const char *key, char **ns, char **name)
{
    *ns = NULL;
    *name = NULL;
    if (!key || !*key)
        return -1;
    const char *slash = strchr(key, '/');
    if (!slash) {
        *name = strdup(key);
        return *name ? 0 : -1;
    }
    if (strchr(slash + 1, '/') || !slash[1])
        return -1;
    *ns = strndup(key, (size_t)(slash - key));
    *name = strdup(slash + 1);
    if (!*ns || !*name) {
        free(*ns);
        free(*name);
        *ns = *name = NULL;
        return -1;
    }
    return 0;
}

void ckube_obj_list_free(ckube_obj_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        ckube_obj_unref(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

void ckube_key_list_free(ckube_key_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->keys[i]);
    free(l->keys);
    l->keys = NULL;
    l->n = 0;
}

/* ------------------------------------------------------------------------ */
/* Index value collection.                                                  */

struct ckube_index_values {
    char **v;
    size_t n, cap;
    bool oom;
};

int ckube_index_values_add(ckube_index_values *out, const char *value)
{
    if (!out || !value)
        return -1;
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->v[i], value) == 0)
            return 0;
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 4;
        char **nv = realloc(out->v, cap * sizeof(*nv));
        if (!nv) {
            out->oom = true;
            return -1;
        }
        out->v = nv;
        out->cap = cap;
    }
    char *copy = strdup(value);
    if (!copy) {
        out->oom = true;
        return -1;
    }
    out->v[out->n++] = copy;
    return 0;
}

static void index_values_clear(ckube_index_values *iv)
{
    for (size_t i = 0; i < iv->n; i++)
        free(iv->v[i]);
    free(iv->v);
    memset(iv, 0, sizeof(*iv));
}

/* ------------------------------------------------------------------------ */
/* Trees.                                                                   */

struct item {
    RB_ENTRY(item) link;
    /* Compact form, or NULL for an object put as a tree. */
    ckube__cobj *c;
    /* With c: the cached tree or NULL (read and installed atomically
     * under the read lock; dropped under the write lock). Without c: the
     * object itself. Either way one reference is the store's. */
    json_t *tree;
    json_t *pristine;  /* mutation detector, for objects put as trees */
    size_t bytes;      /* accounted for the item, its block, index entries */
    size_t tree_bytes; /* accounted for tree (0 when none) */
    bool used;         /* (atomic) handed out since the last trim */
    char key[];
};

static int item_cmp(const struct item *a, const struct item *b)
{
    return strcmp(a->key, b->key);
}
RB_HEAD(item_tree, item);
RB_GENERATE_STATIC(item_tree, item, link, item_cmp)

/* An index entry: one item having a value. */
struct key_node {
    RB_ENTRY(key_node) link;
    struct item *it; /* borrowed: entries go before their item */
};
static int key_cmp(const struct key_node *a, const struct key_node *b)
{
    return strcmp(a->it->key, b->it->key);
}
RB_HEAD(key_tree, key_node);
RB_GENERATE_STATIC(key_tree, key_node, link, key_cmp)

struct value_node {
    RB_ENTRY(value_node) link;
    char *value;
    size_t n; /* entries in keys */
    struct key_tree keys;
};
static int value_cmp(const struct value_node *a, const struct value_node *b)
{
    return strcmp(a->value, b->value);
}
RB_HEAD(value_tree, value_node);
RB_GENERATE_STATIC(value_tree, value_node, link, value_cmp)
#ifdef CKUBE_UNDEF_UNUSED
#undef __unused
#undef CKUBE_UNDEF_UNUSED
#endif

struct index {
    char *name;
    ckube_index_fn fn; /* NULL for the built-in namespace index (no values) */
    void *ud;
    struct value_tree values;
};

struct ckube_store {
    pthread_rwlock_t lock;
    char *name;
    struct item_tree items;
    struct item *last; /* the item with the greatest key, NULL when empty */
    size_t count;
    size_t bytes;  /* atomic */
    size_t cached; /* atomic: compact items with a cached tree */
    struct index *indexes;
    size_t nindexes;
    bool detect;
};

/* Rough per-allocation overhead of glibc malloc on 64-bit. */
#define MALLOC_OVERHEAD 16
/* What one index entry costs. */
#define INDEX_ENTRY_BYTES (sizeof(struct key_node) + MALLOC_OVERHEAD)

static void bytes_add(ckube_store *s, size_t n)
{
    __atomic_add_fetch(&s->bytes, n, __ATOMIC_RELAXED);
}

static void bytes_sub(ckube_store *s, size_t n)
{
    __atomic_sub_fetch(&s->bytes, n, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Memory estimate of a JSON tree (jansson 2.x object layouts).             */

static size_t pow2_at_least(size_t n, size_t min)
{
    size_t p = min;
    while (p < n)
        p *= 2;
    return p;
}

size_t ckube_json_heap_bytes(const json_t *v)
{
    if (!v)
        return 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        /* json_object_t: header + hashtable (size, buckets, order, two list
         * heads); buckets of two pointers, at least 8, doubling; one pair
         * per member: hash, two list links, value, key length, key. */
        size_t n = json_object_size(v);
        size_t b = 16 + 8 + 8 + 8 + 16 + 16 + MALLOC_OVERHEAD;
        b += pow2_at_least(n, 8) * 16 + MALLOC_OVERHEAD;
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m)
        {
            b += 8 + 16 + 16 + 8 + 8 + strlen(k) + 1 + MALLOC_OVERHEAD;
            b += ckube_json_heap_bytes(m);
        }
        return b;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        size_t b = 16 + 8 + 8 + 8 + MALLOC_OVERHEAD;
        b += pow2_at_least(n, 8) * sizeof(json_t *) + MALLOC_OVERHEAD;
        for (size_t i = 0; i < n; i++)
            b += ckube_json_heap_bytes(json_array_get(v, i));
        return b;
    }
    case JSON_STRING:
        return 16 + 8 + 8 + MALLOC_OVERHEAD + json_string_length(v) + 1 + MALLOC_OVERHEAD;
    case JSON_INTEGER:
    case JSON_REAL:
        return 16 + 8 + MALLOC_OVERHEAD;
    default:
        return 0; /* true, false and null are static singletons */
    }
}

/* ------------------------------------------------------------------------ */
/* Items.                                                                   */

static json_t *tree_load(struct item *it)
{
    return __atomic_load_n(&it->tree, __ATOMIC_ACQUIRE);
}

/* The item's object, borrowed (the cached tree may be absent). */
static ckube__obj item_obj(struct item *it)
{
    return (ckube__obj){.j = tree_load(it), .c = it->c};
}

/* A new reference to the item's tree, building and caching it for a
 * compact item. Read lock held. NULL when out of memory. */
static json_t *item_tree_ref(ckube_store *s, struct item *it)
{
    json_t *t = tree_load(it);
    if (!t && it->c) {
        json_t *built = ckube__cobj_tree(it->c);
        if (!built)
            return NULL;
        size_t tb = ckube_json_heap_bytes(built);
        json_t *expected = NULL;
        if (__atomic_compare_exchange_n(&it->tree, &expected, built, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            /* Only the winner writes tree_bytes; writers read it under
             * the write lock, after this read lock is released. */
            it->tree_bytes = tb;
            bytes_add(s, tb);
            __atomic_add_fetch(&s->cached, 1, __ATOMIC_RELAXED);
            t = built;
        } else {
            json_decref(built);
            t = expected;
        }
    }
    if (it->c)
        __atomic_store_n(&it->used, true, __ATOMIC_RELAXED);
    return ckube_obj_ref(t);
}

/* Drops the cached tree of a compact item (write lock held). */
static void item_drop_tree(ckube_store *s, struct item *it)
{
    if (!it->c || !it->tree)
        return;
    ckube_obj_unref(it->tree);
    it->tree = NULL;
    bytes_sub(s, it->tree_bytes);
    it->tree_bytes = 0;
    __atomic_sub_fetch(&s->cached, 1, __ATOMIC_RELAXED);
}

/* The bytes an item accounts for besides its index entries and tree
 * (which tree_bytes holds). */
static size_t item_base_bytes(const struct item *it)
{
    size_t b = sizeof(*it) + strlen(it->key) + 1 + MALLOC_OVERHEAD;
    return b + (it->c ? ckube__cobj_bytes(it->c) : 0);
}

/* ------------------------------------------------------------------------ */
/* Index maintenance (callers hold the write lock).                         */

/* The namespace of an object, for the built-in index ("" when none). */
static const char *obj_namespace(ckube__obj o)
{
    const char *ns = o.c ? ckube__cobj_namespace(o.c) : ckube_obj_namespace(o.j);
    return ns ? ns : "";
}

/* The values of custom index ix for o: from the tree if there is one,
 * else from a tree built for the call. */
static void index_compute(struct index *ix, ckube__obj o, ckube_index_values *out)
{
    memset(out, 0, sizeof(*out));
    json_t *t = o.j ? o.j : ckube__cobj_tree(o.c);
    if (!t) {
        out->oom = true;
        return;
    }
    ix->fn(ix->ud, t, out);
    if (!o.j)
        json_decref(t);
}

/* Adds it under `value`; returns bytes added (0 if already there or on
 * allocation failure). */
static size_t index_insert(struct index *ix, const char *value, struct item *it)
{
    struct value_node find = {.value = (char *)value};
    struct value_node *vn = RB_FIND(value_tree, &ix->values, &find);
    if (!vn) {
        vn = calloc(1, sizeof(*vn));
        if (!vn || !(vn->value = strdup(value))) {
            free(vn);
            return 0;
        }
        RB_INIT(&vn->keys);
        RB_INSERT(value_tree, &ix->values, vn);
    }
    struct key_node *kn = calloc(1, sizeof(*kn));
    if (!kn)
        return 0;
    kn->it = it;
    if (RB_INSERT(key_tree, &vn->keys, kn)) {
        free(kn); /* there already */
        return 0;
    }
    vn->n++;
    return INDEX_ENTRY_BYTES;
}

static size_t index_remove(struct index *ix, const char *value, struct item *it)
{
    struct value_node find = {.value = (char *)value};
    struct value_node *vn = RB_FIND(value_tree, &ix->values, &find);
    if (!vn)
        return 0;
    struct key_node kfind = {.it = it};
    struct key_node *kn = RB_FIND(key_tree, &vn->keys, &kfind);
    if (!kn)
        return 0;
    RB_REMOVE(key_tree, &vn->keys, kn);
    vn->n--;
    free(kn);
    if (RB_EMPTY(&vn->keys)) {
        RB_REMOVE(value_tree, &ix->values, vn);
        free(vn->value);
        free(vn);
    }
    return INDEX_ENTRY_BYTES;
}

/* Removes the item's entries for old_obj and adds them for new_obj
 * (either may be none) in every index; adjusts it->bytes. */
static void indexes_update(ckube_store *s, struct item *it, ckube__obj old_obj, ckube__obj new_obj)
{
    for (size_t i = 0; i < s->nindexes; i++) {
        struct index *ix = &s->indexes[i];
        if (!ix->fn)
            continue; /* the namespace index is the key order itself */
        if (!ckube__obj_none(old_obj)) {
            ckube_index_values ov;
            index_compute(ix, old_obj, &ov);
            for (size_t j = 0; j < ov.n; j++)
                it->bytes -= index_remove(ix, ov.v[j], it);
            index_values_clear(&ov);
        }
        if (!ckube__obj_none(new_obj)) {
            ckube_index_values nv;
            index_compute(ix, new_obj, &nv);
            if (nv.oom)
                CKUBE_ERROR("%s: out of memory computing index %s of %s", s->name, ix->name,
                            it->key);
            for (size_t j = 0; j < nv.n; j++)
                it->bytes += index_insert(ix, nv.v[j], it);
            index_values_clear(&nv);
        }
    }
}

static void index_free_values(struct index *ix)
{
    struct value_node *vn, *vnext;
    RB_FOREACH_SAFE(vn, value_tree, &ix->values, vnext)
    {
        struct key_node *kn, *knext;
        RB_FOREACH_SAFE(kn, key_tree, &vn->keys, knext)
        {
            RB_REMOVE(key_tree, &vn->keys, kn);
            free(kn);
        }
        RB_REMOVE(value_tree, &ix->values, vn);
        free(vn->value);
        free(vn);
    }
}

static struct index *find_index(ckube_store *s, const char *name)
{
    for (size_t i = 0; i < s->nindexes; i++)
        if (strcmp(s->indexes[i].name, name) == 0)
            return &s->indexes[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Mutation detector.                                                       */

static bool env_detect(void)
{
    const char *e = getenv("CKUBE_CACHE_MUTATION_DETECTOR");
    return e && strcmp(e, "true") == 0;
}

static void mutation_abort(ckube_store *s, const struct item *it, const json_t *now,
                           const json_t *was)
{
    char *now_s = json_dumps(now, JSON_COMPACT | JSON_SORT_KEYS);
    char *was_s = json_dumps(was, JSON_COMPACT | JSON_SORT_KEYS);
    CKUBE_ERROR("cache mutation detected: object %s in cache %s was modified after it was "
                "cached (cached objects are shared and read-only; json_deep_copy before "
                "changing one). cached: %.2000s now: %.2000s",
                it->key, s->name, was_s ? was_s : "?", now_s ? now_s : "?");
    free(now_s);
    free(was_s);
    abort();
}

static void check_item(ckube_store *s, struct item *it)
{
    if (!s->detect)
        return;
    json_t *t = tree_load(it);
    if (it->c) {
        if (!t)
            return; /* the block itself is immutable */
        json_t *was = ckube__cobj_tree(it->c);
        if (was && !json_equal(t, was))
            mutation_abort(s, it, t, was);
        json_decref(was);
    } else if (it->pristine && !json_equal(t, it->pristine)) {
        mutation_abort(s, it, t, it->pristine);
    }
}

static void check_all_locked(ckube_store *s)
{
    if (!s->detect)
        return;
    struct item *it;
    RB_FOREACH(it, item_tree, &s->items)
    {
        check_item(s, it);
    }
}

bool ckube_store_detects_mutations(ckube_store *s)
{
    return s && s->detect;
}

void ckube_store_check_mutations(ckube_store *s)
{
    if (!s || !s->detect)
        return;
    pthread_rwlock_rdlock(&s->lock);
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
}

/* ------------------------------------------------------------------------ */
/* Store lifecycle.                                                         */

static int add_index_locked(ckube_store *s, const ckube_indexer *ix, bool builtin, char **err)
{
    if (!ix || !ix->name || !*ix->name || (!ix->fn && !builtin)) {
        if (err)
            *err = strdup("an indexer needs a name and an index function");
        return -1;
    }
    if (find_index(s, ix->name)) {
        if (err && asprintf(err, "indexer conflict: %s", ix->name) < 0)
            *err = NULL;
        return -1;
    }
    struct index *n = realloc(s->indexes, (s->nindexes + 1) * sizeof(*n));
    if (!n)
        return -1;
    s->indexes = n;
    struct index *x = &s->indexes[s->nindexes];
    memset(x, 0, sizeof(*x));
    x->name = strdup(ix->name);
    if (!x->name)
        return -1;
    x->fn = builtin ? NULL : ix->fn;
    x->ud = ix->ud;
    RB_INIT(&x->values);
    s->nindexes++;
    /* Build it over what is cached already. */
    struct item *it;
    RB_FOREACH(it, item_tree, &s->items)
    {
        if (!x->fn)
            break; /* nothing to build (see indexes_update) */
        ckube_index_values vals;
        index_compute(x, item_obj(it), &vals);
        for (size_t j = 0; j < vals.n; j++) {
            size_t b = index_insert(x, vals.v[j], it);
            it->bytes += b;
            bytes_add(s, b);
        }
        index_values_clear(&vals);
    }
    return 0;
}

ckube_store *ckube_store_new(const ckube_store_opts *opts)
{
    ckube_store *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->name = strdup(opts && opts->name ? opts->name : "store");
    if (!s->name) {
        free(s);
        return NULL;
    }
    /* Prefer the writer: many lister readers must not starve the one
     * thread that keeps the cache current (glibc prefers readers by
     * default). No reader takes the lock recursively. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    RB_INIT(&s->items);
    s->detect = (opts && opts->detect_mutations) || env_detect();
    /* The namespace index reads blocks directly (no index function). */
    ckube_indexer ns = {.name = CKUBE_INDEX_NAMESPACE};
    if (add_index_locked(s, &ns, true, NULL) != 0) {
        ckube_store_free(s);
        return NULL;
    }
    if (s->detect)
        CKUBE_INFO("%s: cache mutation detector enabled (slow; for debugging)", s->name);
    return s;
}

static void item_free(struct item *it)
{
    ckube_obj_unref(it->tree);
    ckube__cobj_unref(it->c);
    ckube_obj_unref(it->pristine);
    free(it);
}

void ckube_store_free(ckube_store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nindexes; i++) {
        index_free_values(&s->indexes[i]);
        free(s->indexes[i].name);
    }
    struct item *it, *next;
    RB_FOREACH_SAFE(it, item_tree, &s->items, next)
    {
        RB_REMOVE(item_tree, &s->items, it);
        item_free(it);
    }
    free(s->indexes);
    pthread_rwlock_destroy(&s->lock);
    free(s->name);
    free(s);
}

int ckube_store_add_indexer(ckube_store *s, const ckube_indexer *ix, char **err)
{
    if (err)
        *err = NULL;
    pthread_rwlock_wrlock(&s->lock);
    int rc = add_index_locked(s, ix, false, err);
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Writes.                                                                  */

/* The item under key[0, n) + suffix, or with nfind the first at or after
 * it (read lock held). RB_FIND needs an item; the key is all item_cmp
 * reads, so a probe with that key is built, on the stack when short. */
static struct item *tree_probe(ckube_store *s, const char *key, size_t n, const char *suffix,
                               bool nfind)
{
    size_t sn = strlen(suffix);
    _Alignas(struct item) char stackbuf[sizeof(struct item) + 256];
    struct item *probe =
        n + sn < 256 ? (struct item *)stackbuf : malloc(sizeof(struct item) + n + sn + 1);
    if (!probe)
        return NULL;
    memcpy(probe->key, key, n);
    memcpy(probe->key + n, suffix, sn + 1);
    struct item *it =
        nfind ? RB_NFIND(item_tree, &s->items, probe) : RB_FIND(item_tree, &s->items, probe);
    if (probe != (struct item *)stackbuf)
        free(probe);
    return it;
}

static struct item *find_locked(ckube_store *s, const char *key)
{
    return tree_probe(s, key, strlen(key), "", false);
}

/* Takes the object out of an item for handing to a caller: the store's
 * references move to the returned value. */
static ckube__obj item_take(ckube_store *s, struct item *it)
{
    ckube__obj o = {.j = it->tree, .c = it->c};
    bytes_sub(s, it->tree_bytes);
    it->tree_bytes = 0;
    if (it->c && it->tree)
        __atomic_sub_fetch(&s->cached, 1, __ATOMIC_RELAXED);
    it->tree = NULL;
    it->c = NULL;
    ckube_obj_unref(it->pristine);
    it->pristine = NULL;
    return o;
}

/* Sets the item's object (new references to the parts of o; `pristine`
 * is taken over). Cannot fail. */
static void item_set(ckube_store *s, struct item *it, ckube__obj o, json_t *pristine)
{
    it->c = ckube__cobj_ref(o.c);
    it->tree = ckube_obj_ref(o.j);
    it->pristine = pristine;
    it->tree_bytes = o.j ? ckube_json_heap_bytes(o.j) : 0;
    bytes_add(s, it->tree_bytes);
    /* A tree that came with its block is cached like a built one. */
    if (o.c && o.j)
        __atomic_add_fetch(&s->cached, 1, __ATOMIC_RELAXED);
}

/* Inserts `fresh` into the item tree, or returns the item already there
 * under its key. Lists come sorted by key (the server's order), so on a
 * (re)list every new key is the greatest so far: that case links the item
 * below the last one and only rebalances, instead of comparing keys all
 * the way down (a quarter of the time of putting an item, at 100k). */
static struct item *tree_insert(ckube_store *s, struct item *fresh)
{
    struct item *last = s->last;
    if (last && strcmp(fresh->key, last->key) > 0) {
        /* The greatest item has no right child: that is where the
         * descent of RB_INSERT would end. */
        RB_SET(fresh, last, link);
        RB_RIGHT(last, link) = fresh;
        item_tree_RB_INSERT_COLOR(&s->items, fresh);
        s->last = fresh;
        return NULL;
    }
    struct item *there = RB_INSERT(item_tree, &s->items, fresh);
    if (!there && !last)
        s->last = fresh;
    return there;
}

/* Inserts/replaces under `key`. *old (may be NULL) gets the replaced
 * object (references), none when new. */
static int put_locked(ckube_store *s, const char *key, ckube__obj o, ckube__obj *old)
{
    json_t *pristine = NULL;
    if (s->detect && !o.c && !(pristine = json_deep_copy(o.j)))
        return -1;
    /* One descent: insert a new item, or find the one there. */
    size_t n = strlen(key);
    struct item *fresh = calloc(1, sizeof(*fresh) + n + 1);
    if (!fresh) {
        ckube_obj_unref(pristine);
        return -1;
    }
    memcpy(fresh->key, key, n + 1);
    struct item *it = tree_insert(s, fresh);
    if (it) {
        free(fresh);
        check_item(s, it);
        size_t idx_bytes = it->bytes - item_base_bytes(it);
        bytes_sub(s, it->bytes);
        ckube__obj prev = item_take(s, it);
        item_set(s, it, o, pristine);
        it->bytes = item_base_bytes(it) + idx_bytes;
        indexes_update(s, it, prev, o);
        bytes_add(s, it->bytes);
        if (old)
            *old = prev;
        else
            ckube__obj_unref(prev);
        return 0;
    }
    it = fresh;
    item_set(s, it, o, pristine);
    it->bytes = item_base_bytes(it);
    indexes_update(s, it, (ckube__obj){0}, o);
    s->count++;
    bytes_add(s, it->bytes);
    if (old)
        *old = (ckube__obj){0};
    return 0;
}

static void remove_locked(ckube_store *s, struct item *it, ckube__obj *old)
{
    check_item(s, it);
    if (it == s->last)
        s->last = RB_PREV(item_tree, &s->items, it);
    RB_REMOVE(item_tree, &s->items, it);
    bytes_sub(s, it->bytes);
    indexes_update(s, it, item_obj(it), (ckube__obj){0});
    s->count--;
    ckube__obj o = item_take(s, it);
    if (old)
        *old = o;
    else
        ckube__obj_unref(o);
    item_free(it);
}

int ckube__store_put_obj(ckube_store *s, ckube__obj o, ckube__obj *old)
{
    if (old)
        *old = (ckube__obj){0};
    char *tofree;
    const char *key = ckube__obj_key(o, &tofree);
    if (!key)
        return -1;
    pthread_rwlock_wrlock(&s->lock);
    int rc = put_locked(s, key, o, old);
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
    free(tofree);
    return rc;
}

int ckube__store_delete_obj(ckube_store *s, const char *key, ckube__obj *old)
{
    if (old)
        *old = (ckube__obj){0};
    if (!key)
        return 0;
    pthread_rwlock_wrlock(&s->lock);
    struct item *it = find_locked(s, key);
    if (it)
        remove_locked(s, it, old);
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
    return it ? 1 : 0;
}

/* A tree for a caller of the json_t API (consumes o's references). */
static json_t *obj_to_tree(ckube__obj o)
{
    json_t *t = ckube__obj_tree(o);
    ckube__obj_unref(o);
    return t;
}

int ckube_store_put(ckube_store *s, json_t *obj, json_t **old)
{
    if (old)
        *old = NULL;
    ckube__obj prev;
    int rc = ckube__store_put_obj(s, (ckube__obj){.j = obj}, &prev);
    if (rc == 0) {
        if (old)
            *old = obj_to_tree(prev);
        else
            ckube__obj_unref(prev);
    }
    return rc;
}

int ckube_store_delete_key(ckube_store *s, const char *key, json_t **old)
{
    if (old)
        *old = NULL;
    ckube__obj prev;
    int rc = ckube__store_delete_obj(s, key, &prev);
    if (old)
        *old = obj_to_tree(prev);
    else
        ckube__obj_unref(prev);
    return rc;
}

int ckube_store_replace(ckube_store *s, json_t *items)
{
    if (!json_is_array(items))
        return -1;
    pthread_rwlock_wrlock(&s->lock);
    struct item *it, *next;
    RB_FOREACH_SAFE(it, item_tree, &s->items, next)
    {
        remove_locked(s, it, NULL);
    }
    int rc = 0;
    size_t i;
    json_t *obj;
    json_array_foreach(items, i, obj)
    {
        char *key = ckube_meta_namespace_key(obj);
        if (!key)
            continue;
        if (put_locked(s, key, (ckube__obj){.j = obj}, NULL) != 0)
            rc = -1;
        free(key);
    }
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

size_t ckube__store_trim(ckube_store *s)
{
    if (!__atomic_load_n(&s->cached, __ATOMIC_RELAXED))
        return 0;
    pthread_rwlock_wrlock(&s->lock);
    struct item *it;
    RB_FOREACH(it, item_tree, &s->items)
    {
        if (!it->c || !it->tree)
            continue;
        /* Under the write lock nobody can take a new reference through
         * the store, so a count of 1 is the store's own. */
        if (!it->used && __atomic_load_n(&it->tree->refcount, __ATOMIC_ACQUIRE) == 1) {
            check_item(s, it);
            item_drop_tree(s, it);
        } else {
            it->used = false;
        }
    }
    size_t left = s->cached;
    pthread_rwlock_unlock(&s->lock);
    return left;
}

size_t ckube__store_cached_trees(ckube_store *s)
{
    return __atomic_load_n(&s->cached, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Reads.                                                                   */

json_t *ckube_store_get(ckube_store *s, const char *key)
{
    if (!key)
        return NULL;
    pthread_rwlock_rdlock(&s->lock);
    struct item *it = find_locked(s, key);
    json_t *o = it ? item_tree_ref(s, it) : NULL;
    pthread_rwlock_unlock(&s->lock);
    return o;
}

bool ckube_store_has(ckube_store *s, const char *key)
{
    if (!key)
        return false;
    pthread_rwlock_rdlock(&s->lock);
    bool has = find_locked(s, key) != NULL;
    pthread_rwlock_unlock(&s->lock);
    return has;
}

void ckube__store_foreach(ckube_store *s, void (*fn)(void *ud, const char *key, ckube__obj o),
                          void *ud)
{
    pthread_rwlock_rdlock(&s->lock);
    struct item *it;
    RB_FOREACH(it, item_tree, &s->items)
    {
        fn(ud, it->key, item_obj(it));
    }
    pthread_rwlock_unlock(&s->lock);
}

int ckube__store_snapshot(ckube_store *s, ckube__obj **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = 0;
    pthread_rwlock_rdlock(&s->lock);
    if (s->count && !(*out = malloc(s->count * sizeof(**out)))) {
        rc = -1;
    } else {
        struct item *it;
        RB_FOREACH(it, item_tree, &s->items)
        {
            (*out)[(*n)++] = ckube__obj_ref(item_obj(it));
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

/* Appends trees of items to out (room for them is there). Read lock
 * held. -1 when a tree cannot be built. */
static int push_tree(ckube_store *s, struct item *it, ckube_obj_list *out)
{
    json_t *t = item_tree_ref(s, it);
    if (!t)
        return -1;
    out->items[out->n++] = t;
    return 0;
}

int ckube_store_list(ckube_store *s, ckube_obj_list *out)
{
    out->items = NULL;
    out->n = 0;
    pthread_rwlock_rdlock(&s->lock);
    int rc = 0;
    if (s->count) {
        out->items = malloc(s->count * sizeof(json_t *));
        if (!out->items) {
            rc = -1;
        } else {
            struct item *it;
            RB_FOREACH(it, item_tree, &s->items)
            {
                if ((rc = push_tree(s, it, out)) != 0)
                    break;
            }
        }
    }
    pthread_rwlock_unlock(&s->lock);
    if (rc != 0)
        ckube_obj_list_free(out);
    return rc;
}

int ckube_store_list_keys(ckube_store *s, ckube_key_list *out)
{
    out->keys = NULL;
    out->n = 0;
    pthread_rwlock_rdlock(&s->lock);
    int rc = 0;
    if (s->count) {
        out->keys = calloc(s->count, sizeof(char *));
        struct item *it;
        if (!out->keys)
            rc = -1;
        else
            RB_FOREACH(it, item_tree, &s->items)
            {
                if (!(out->keys[out->n] = strdup(it->key))) {
                    rc = -1;
                    break;
                }
                out->n++;
            }
    }
    pthread_rwlock_unlock(&s->lock);
    if (rc != 0)
        ckube_key_list_free(out);
    return rc;
}

/* The first item of namespace ns's key range (read lock held): the
 * first key at or after "ns/". */
static struct item *ns_range_first(ckube_store *s, const char *ns, size_t plen)
{
    return tree_probe(s, ns, plen, "/", true);
}

/* Appends it to the growing array *v (n used, cap allocated). -1 when
 * out of memory (*v unchanged). */
static int push_member(struct item ***v, size_t *n, size_t *cap, struct item *it)
{
    if (*n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 64;
        struct item **g = realloc(*v, ncap * sizeof(*g));
        if (!g)
            return -1;
        *v = g;
        *cap = ncap;
    }
    (*v)[(*n)++] = it;
    return 0;
}

/* The items having `value` in index `index`, in key order, into *items
 * (malloc'd array of borrowed items, NULL when none; read lock held and
 * kept while they are used). Returns how many; *rc -1 when there is no
 * such index or out of memory. */
static size_t index_members(ckube_store *s, const char *index, const char *value,
                            struct item ***items, int *rc)
{
    *items = NULL;
    struct index *ix = find_index(s, index);
    *rc = ix ? 0 : -1;
    if (!ix)
        return 0;
    size_t n = 0, cap = 0;
    struct item **v = NULL;
    struct item *it;
    if (ix->fn) {
        struct value_node find = {.value = (char *)value};
        struct value_node *vn = RB_FIND(value_tree, &ix->values, &find);
        if (vn && vn->n && !(v = malloc(vn->n * sizeof(*v))))
            goto oom;
        cap = vn ? vn->n : 0;
        struct key_node *kn;
        if (vn)
            RB_FOREACH(kn, key_tree, &vn->keys)
            {
                v[n++] = kn->it;
            }
    } else if (!*value) {
        /* Cluster-scoped objects: keys without a namespace, anywhere. */
        RB_FOREACH(it, item_tree, &s->items)
        {
            if (!*obj_namespace(item_obj(it)) && push_member(&v, &n, &cap, it) != 0)
                goto oom;
        }
    } else {
        size_t plen = strlen(value);
        for (it = ns_range_first(s, value, plen);
             it && strncmp(it->key, value, plen) == 0 && it->key[plen] == '/';
             it = RB_NEXT(item_tree, &s->items, it)) {
            /* A cluster-scoped object may be named "ns/x" (not a
             * Kubernetes name, but the store does not forbid it). */
            if (strcmp(obj_namespace(item_obj(it)), value) == 0 &&
                push_member(&v, &n, &cap, it) != 0)
                goto oom;
        }
    }
    *items = v;
    return n;
oom:
    free(v);
    *rc = -1;
    return 0;
}

int ckube_store_by_index(ckube_store *s, const char *index, const char *value, ckube_obj_list *out)
{
    out->items = NULL;
    out->n = 0;
    if (!index || !value)
        return -1;
    pthread_rwlock_rdlock(&s->lock);
    int rc;
    struct item **items;
    size_t n = index_members(s, index, value, &items, &rc);
    if (n && !(out->items = malloc(n * sizeof(json_t *))))
        rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = push_tree(s, items[i], out);
    pthread_rwlock_unlock(&s->lock);
    free(items);
    if (rc != 0)
        ckube_obj_list_free(out);
    return rc;
}

int ckube_store_index_keys(ckube_store *s, const char *index, const char *value,
                           ckube_key_list *out)
{
    out->keys = NULL;
    out->n = 0;
    if (!index || !value)
        return -1;
    pthread_rwlock_rdlock(&s->lock);
    int rc;
    struct item **items;
    size_t n = index_members(s, index, value, &items, &rc);
    if (n && !(out->keys = calloc(n, sizeof(char *))))
        rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!(out->keys[out->n] = strdup(items[i]->key)))
            rc = -1;
        else
            out->n++;
    }
    pthread_rwlock_unlock(&s->lock);
    free(items);
    if (rc != 0)
        ckube_key_list_free(out);
    return rc;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of v to out unless it is out's last value. -1 when out
 * of memory. */
static int push_value(ckube_key_list *out, size_t *cap, const char *v)
{
    if (out->n && strcmp(out->keys[out->n - 1], v) == 0)
        return 0;
    if (out->n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 16;
        char **g = realloc(out->keys, ncap * sizeof(*g));
        if (!g)
            return -1;
        out->keys = g;
        *cap = ncap;
    }
    if (!(out->keys[out->n] = strdup(v)))
        return -1;
    out->n++;
    return 0;
}

int ckube_store_index_values(ckube_store *s, const char *index, ckube_key_list *out)
{
    out->keys = NULL;
    out->n = 0;
    if (!index)
        return -1;
    pthread_rwlock_rdlock(&s->lock);
    struct index *ix = find_index(s, index);
    int rc = ix ? 0 : -1;
    size_t cap = 0;
    if (ix && ix->fn) {
        struct value_node *vn;
        RB_FOREACH(vn, value_tree, &ix->values)
        {
            if ((rc = push_value(out, &cap, vn->value)) != 0)
                break;
        }
    } else if (ix) {
        /* Each namespace is one key range, so consecutive duplicates go
         * on the way; but ranges are not in namespace order ("a-b/..."
         * sorts before "a/..."), so sort and drop the rest after. */
        struct item *it;
        RB_FOREACH(it, item_tree, &s->items)
        {
            if ((rc = push_value(out, &cap, obj_namespace(item_obj(it)))) != 0)
                break;
        }
        if (rc == 0 && out->n > 1) {
            qsort(out->keys, out->n, sizeof(char *), cmp_strp);
            size_t w = 1;
            for (size_t i = 1; i < out->n; i++) {
                if (strcmp(out->keys[i], out->keys[w - 1]) == 0)
                    free(out->keys[i]);
                else
                    out->keys[w++] = out->keys[i];
            }
            out->n = w;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    if (rc != 0)
        ckube_key_list_free(out);
    return rc;
}

size_t ckube_store_len(ckube_store *s)
{
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->count;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

size_t ckube_store_bytes(ckube_store *s)
{
    return __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Listers.                                                                 */

/* A lister's key: "ns/name", or "name" for cluster-scoped objects. */
static char *lister_key(const char *ns, const char *name)
{
    char *key = NULL;
    if (ns && *ns)
        return asprintf(&key, "%s/%s", ns, name) < 0 ? NULL : key;
    return strdup(name);
}

json_t *ckube_lister_get(const ckube_lister *l, const char *ns, const char *name)
{
    if (!l || !l->store || !name || !*name)
        return NULL;
    char *key = lister_key(ns, name);
    if (!key)
        return NULL;
    json_t *o = ckube_store_get(l->store, key);
    free(key);
    return o;
}

/* The item's object with new references: its compact form when it has
 * one (so that a typed decoding lands in the block, shared), else its
 * tree. */
static ckube__obj item_obj_ref(const struct item *it)
{
    ckube__obj o = {0};
    if (it->c)
        o.c = ckube__cobj_ref(it->c);
    else
        o.j = ckube_obj_ref(it->tree); /* readers share the lock: atomic counts */
    return o;
}

ckube_object *ckube_lister_get_object(const ckube_lister *l, const char *ns, const char *name)
{
    if (!l || !l->store || !name || !*name)
        return NULL;
    char *key = lister_key(ns, name);
    if (!key)
        return NULL;
    ckube__obj o = {0};
    pthread_rwlock_rdlock(&l->store->lock);
    struct item *it = find_locked(l->store, key);
    if (it) {
        o = item_obj_ref(it);
        __atomic_store_n(&it->used, true, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&l->store->lock);
    free(key);
    if (ckube__obj_none(o))
        return NULL;
    ckube_object *obj = ckube__object_new(o);
    ckube__obj_unref(o);
    return obj;
}

void ckube_object_list_free(ckube_object **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        ckube_object_unref(v[i]);
    free(v);
}

static const char *label_lookup(void *ctx, const char *key)
{
    json_t *labels = ctx;
    return json_string_value(json_object_get(labels, key));
}

/* Whether the item's labels match sel: read from its tree when it has
 * one, else from its block (without building the whole tree). */
static bool item_matches(struct item *it, const ckube_selector *sel)
{
    json_t *t = tree_load(it);
    if (t) {
        json_t *labels = json_object_get(json_object_get(t, "metadata"), "labels");
        return ckube_selector_matches(sel, label_lookup, labels);
    }
    json_t *labels = ckube__cobj_labels(it->c);
    bool m = ckube_selector_matches(sel, label_lookup, labels);
    json_decref(labels);
    return m;
}

/* Objects of namespace ns (NULL = all) matching sel, as trees. */
static int select_items(ckube_store *s, const char *ns, const ckube_selector *sel,
                        ckube_obj_list *out)
{
    pthread_rwlock_rdlock(&s->lock);
    int rc = 0;
    struct item **items = NULL;
    size_t cap = s->count;
    if (ns)
        cap = index_members(s, CKUBE_INDEX_NAMESPACE, ns, &items, &rc);
    if (rc == 0 && cap && !(out->items = malloc(cap * sizeof(json_t *))))
        rc = -1;
    if (rc == 0 && cap) {
        if (ns) {
            for (size_t i = 0; i < cap; i++)
                if (item_matches(items[i], sel) && (rc = push_tree(s, items[i], out)) != 0)
                    break;
        } else {
            struct item *it;
            RB_FOREACH(it, item_tree, &s->items)
            {
                if (item_matches(it, sel) && (rc = push_tree(s, it, out)) != 0)
                    break;
            }
        }
    }
    pthread_rwlock_unlock(&s->lock);
    free(items);
    if (rc != 0)
        ckube_obj_list_free(out);
    return rc;
}

/* The objects of index `index` = value (every object when index is
 * NULL) whose labels match sel (NULL: all), as ckube_objects: collected
 * under the read lock with references, wrapped after it. No tree is
 * built: labels are read from the blocks. */
static int collect_objects(ckube_store *s, const char *index, const char *value,
                           const ckube_selector *sel, ckube_object ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (sel && ckube_selector_empty(sel))
        sel = NULL;
    pthread_rwlock_rdlock(&s->lock);
    int rc = 0;
    struct item **items = NULL;
    size_t cap = index ? index_members(s, index, value, &items, &rc) : s->count, got = 0;
    ckube__obj *objs = rc == 0 ? calloc(cap ? cap : 1, sizeof *objs) : NULL;
    if (!objs)
        rc = -1;
    if (rc == 0 && index) {
        for (size_t i = 0; i < cap; i++)
            if (!sel || item_matches(items[i], sel))
                objs[got++] = item_obj_ref(items[i]);
    } else if (rc == 0) {
        struct item *it;
        RB_FOREACH(it, item_tree, &s->items)
        {
            if (got < cap && (!sel || item_matches(it, sel)))
                objs[got++] = item_obj_ref(it);
        }
    }
    pthread_rwlock_unlock(&s->lock);
    free(items);
    ckube_object **v = rc == 0 ? calloc(got ? got : 1, sizeof *v) : NULL;
    for (size_t i = 0; i < got; i++) {
        if (v && !(v[i] = ckube__object_new(objs[i])))
            rc = -1;
        ckube__obj_unref(objs[i]);
    }
    free(objs);
    if (rc || !v) {
        ckube_object_list_free(v, got);
        return -1;
    }
    *out = v;
    *n = got;
    return 0;
}

int ckube_lister_list_objects(const ckube_lister *l, const char *ns, const ckube_selector *sel,
                              ckube_object ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!l || !l->store)
        return -1;
    return collect_objects(l->store, ns ? CKUBE_INDEX_NAMESPACE : NULL, ns, sel, out, n);
}

int ckube_lister_by_index_objects(const ckube_lister *l, const char *index, const char *value,
                                  ckube_object ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!l || !l->store || !index || !value)
        return -1;
    return collect_objects(l->store, index, value, NULL, out, n);
}

int ckube_lister_list(const ckube_lister *l, const char *ns, const ckube_selector *sel,
                      ckube_obj_list *out)
{
    out->items = NULL;
    out->n = 0;
    if (!l || !l->store)
        return -1;
    if (sel && !ckube_selector_empty(sel))
        return select_items(l->store, ns, sel, out);
    return ns ? ckube_store_by_index(l->store, CKUBE_INDEX_NAMESPACE, ns, out)
              : ckube_store_list(l->store, out);
}

int ckube_lister_by_index(const ckube_lister *l, const char *index, const char *value,
                          ckube_obj_list *out)
{
    out->items = NULL;
    out->n = 0;
    if (!l || !l->store)
        return -1;
    return ckube_store_by_index(l->store, index, value, out);
}
