/* store.c - the thread-safe indexed object cache and listers (see
 * ckube/informer.h).
 *
 * Objects live in a red-black tree keyed by "ns/name" (so listings come
 * out sorted). Each index maps a value to the set of keys having it: a
 * tree of values, each holding a tree of keys. A readers-writer lock
 * guards everything; readers get new references to the shared objects.
 *
 * Memory accounting walks each object's JSON tree once, at insert, with
 * the allocation sizes jansson 2.x uses on 64-bit glibc, and adds the
 * store's own nodes; the total is kept current on every change.
 *
 * The mutation detector keeps a deep copy of every cached object and
 * compares it with the shared one on every change (and on demand). */
#include "ckube/informer.h"

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
    char *key;
    json_t *obj;      /* the store's reference */
    json_t *pristine; /* mutation detector: deep copy, else NULL */
    size_t bytes;     /* accounted for this item */
};

static int item_cmp(const struct item *a, const struct item *b)
{
    return strcmp(a->key, b->key);
}
RB_HEAD(item_tree, item);
RB_GENERATE_STATIC(item_tree, item, link, item_cmp)

struct key_node {
    RB_ENTRY(key_node) link;
    char *key;
};
static int key_cmp(const struct key_node *a, const struct key_node *b)
{
    return strcmp(a->key, b->key);
}
RB_HEAD(key_tree, key_node);
RB_GENERATE_STATIC(key_tree, key_node, link, key_cmp)

struct value_node {
    RB_ENTRY(value_node) link;
    char *value;
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
    ckube_index_fn fn;
    void *ud;
    struct value_tree values;
};

struct ckube_store {
    pthread_rwlock_t lock;
    char *name;
    struct item_tree items;
    size_t count;
    size_t bytes;
    struct index *indexes;
    size_t nindexes;
    bool detect;
};

/* Rough per-allocation overhead of glibc malloc on 64-bit. */
#define MALLOC_OVERHEAD 16
/* What one index entry (a key in a value's key set) costs. */
static size_t index_entry_bytes(const char *key)
{
    return sizeof(struct key_node) + MALLOC_OVERHEAD + strlen(key) + 1 + MALLOC_OVERHEAD;
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
/* Index maintenance (callers hold the write lock).                         */

static void index_compute(struct index *ix, const json_t *obj, ckube_index_values *out)
{
    memset(out, 0, sizeof(*out));
    ix->fn(ix->ud, obj, out);
}

/* Adds `key` under `value`; returns bytes added (0 if already there or on
 * allocation failure). */
static size_t index_insert(struct index *ix, const char *value, const char *key)
{
    struct value_node find = {.value = (char *)value};
    struct value_node *vn = RB_FIND(value_tree, &ix->values, &find);
    size_t added = 0;
    if (!vn) {
        vn = calloc(1, sizeof(*vn));
        if (!vn || !(vn->value = strdup(value))) {
            free(vn);
            return 0;
        }
        RB_INIT(&vn->keys);
        RB_INSERT(value_tree, &ix->values, vn);
    }
    struct key_node kfind = {.key = (char *)key};
    if (RB_FIND(key_tree, &vn->keys, &kfind))
        return 0;
    struct key_node *kn = calloc(1, sizeof(*kn));
    if (!kn || !(kn->key = strdup(key))) {
        free(kn);
        return 0;
    }
    RB_INSERT(key_tree, &vn->keys, kn);
    added += index_entry_bytes(key);
    return added;
}

static size_t index_remove(struct index *ix, const char *value, const char *key)
{
    struct value_node find = {.value = (char *)value};
    struct value_node *vn = RB_FIND(value_tree, &ix->values, &find);
    if (!vn)
        return 0;
    struct key_node kfind = {.key = (char *)key};
    struct key_node *kn = RB_FIND(key_tree, &vn->keys, &kfind);
    if (!kn)
        return 0;
    RB_REMOVE(key_tree, &vn->keys, kn);
    size_t removed = index_entry_bytes(kn->key);
    free(kn->key);
    free(kn);
    if (RB_EMPTY(&vn->keys)) {
        RB_REMOVE(value_tree, &ix->values, vn);
        free(vn->value);
        free(vn);
    }
    return removed;
}

/* Removes `key`'s entries for old_obj and adds them for new_obj (either
 * may be NULL) in every index; adjusts item->bytes. */
static void indexes_update(ckube_store *s, struct item *it, const json_t *old_obj,
                           const json_t *new_obj)
{
    for (size_t i = 0; i < s->nindexes; i++) {
        struct index *ix = &s->indexes[i];
        if (old_obj) {
            ckube_index_values ov;
            index_compute(ix, old_obj, &ov);
            for (size_t j = 0; j < ov.n; j++)
                it->bytes -= index_remove(ix, ov.v[j], it->key);
            index_values_clear(&ov);
        }
        if (new_obj) {
            ckube_index_values nv;
            index_compute(ix, new_obj, &nv);
            if (nv.oom)
                CKUBE_ERROR("%s: out of memory computing index %s of %s", s->name, ix->name,
                            it->key);
            for (size_t j = 0; j < nv.n; j++)
                it->bytes += index_insert(ix, nv.v[j], it->key);
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
            free(kn->key);
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
/* The namespace index.                                                     */

static void namespace_index_fn(void *ud, const json_t *obj, ckube_index_values *out)
{
    (void)ud;
    const char *ns = ckube_obj_namespace(obj);
    ckube_index_values_add(out, ns ? ns : "");
}

/* ------------------------------------------------------------------------ */
/* Mutation detector.                                                       */

static bool env_detect(void)
{
    const char *e = getenv("CKUBE_CACHE_MUTATION_DETECTOR");
    return e && strcmp(e, "true") == 0;
}

static void mutation_abort(ckube_store *s, const struct item *it)
{
    char *now = json_dumps(it->obj, JSON_COMPACT | JSON_SORT_KEYS);
    char *was = json_dumps(it->pristine, JSON_COMPACT | JSON_SORT_KEYS);
    CKUBE_ERROR("cache mutation detected: object %s in cache %s was modified after it was "
                "cached (cached objects are shared and read-only; json_deep_copy before "
                "changing one). cached: %.2000s now: %.2000s",
                it->key, s->name, was ? was : "?", now ? now : "?");
    free(now);
    free(was);
    abort();
}

static void check_item(ckube_store *s, const struct item *it)
{
    if (it->pristine && !json_equal(it->obj, it->pristine))
        mutation_abort(s, it);
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

static int add_index_locked(ckube_store *s, const ckube_indexer *ix, char **err)
{
    if (!ix || !ix->name || !*ix->name || !ix->fn) {
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
    x->fn = ix->fn;
    x->ud = ix->ud;
    RB_INIT(&x->values);
    s->nindexes++;
    /* Build it over what is cached already. */
    struct item *it;
    RB_FOREACH(it, item_tree, &s->items)
    {
        ckube_index_values vals;
        index_compute(x, it->obj, &vals);
        for (size_t j = 0; j < vals.n; j++) {
            size_t b = index_insert(x, vals.v[j], it->key);
            it->bytes += b;
            s->bytes += b;
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
    ckube_indexer ns = {.name = CKUBE_INDEX_NAMESPACE, .fn = namespace_index_fn};
    if (add_index_locked(s, &ns, NULL) != 0) {
        ckube_store_free(s);
        return NULL;
    }
    if (s->detect)
        CKUBE_INFO("%s: cache mutation detector enabled (slow; for debugging)", s->name);
    return s;
}

static void item_free(struct item *it)
{
    ckube_obj_unref(it->obj);
    ckube_obj_unref(it->pristine);
    free(it->key);
    free(it);
}

void ckube_store_free(ckube_store *s)
{
    if (!s)
        return;
    struct item *it, *next;
    RB_FOREACH_SAFE(it, item_tree, &s->items, next)
    {
        RB_REMOVE(item_tree, &s->items, it);
        item_free(it);
    }
    for (size_t i = 0; i < s->nindexes; i++) {
        index_free_values(&s->indexes[i]);
        free(s->indexes[i].name);
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
    int rc = add_index_locked(s, ix, err);
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Writes.                                                                  */

/* The bytes an item accounts for besides its index entries. */
static size_t item_base_bytes(const struct item *it)
{
    size_t b = sizeof(*it) + MALLOC_OVERHEAD + strlen(it->key) + 1 + MALLOC_OVERHEAD;
    return b + ckube_json_heap_bytes(it->obj);
}

/* Inserts/replaces under `key` (which the store copies). */
static int put_locked(ckube_store *s, const char *key, json_t *obj, json_t **old)
{
    struct item find = {.key = (char *)key};
    struct item *it = RB_FIND(item_tree, &s->items, &find);
    json_t *pristine = NULL;
    if (s->detect && !(pristine = json_deep_copy(obj)))
        return -1;
    if (it) {
        check_item(s, it);
        s->bytes -= it->bytes;
        size_t idx_bytes = it->bytes - item_base_bytes(it);
        json_t *prev = it->obj;
        ckube_obj_unref(it->pristine);
        it->pristine = pristine;
        it->obj = ckube_obj_ref(obj);
        it->bytes = item_base_bytes(it) + idx_bytes;
        indexes_update(s, it, prev, obj);
        s->bytes += it->bytes;
        if (old)
            *old = prev;
        else
            ckube_obj_unref(prev);
        return 0;
    }
    it = calloc(1, sizeof(*it));
    if (!it || !(it->key = strdup(key))) {
        free(it);
        ckube_obj_unref(pristine);
        return -1;
    }
    it->obj = ckube_obj_ref(obj);
    it->pristine = pristine;
    it->bytes = item_base_bytes(it);
    RB_INSERT(item_tree, &s->items, it);
    indexes_update(s, it, NULL, obj);
    s->count++;
    s->bytes += it->bytes;
    if (old)
        *old = NULL;
    return 0;
}

static void remove_locked(ckube_store *s, struct item *it, json_t **old)
{
    check_item(s, it);
    RB_REMOVE(item_tree, &s->items, it);
    s->bytes -= it->bytes;
    indexes_update(s, it, it->obj, NULL);
    s->count--;
    if (old) {
        *old = it->obj;
        it->obj = NULL;
    }
    item_free(it);
}

int ckube_store_put(ckube_store *s, json_t *obj, json_t **old)
{
    if (old)
        *old = NULL;
    char *key = ckube_meta_namespace_key(obj);
    if (!key)
        return -1;
    pthread_rwlock_wrlock(&s->lock);
    int rc = put_locked(s, key, obj, old);
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
    free(key);
    return rc;
}

int ckube_store_delete_key(ckube_store *s, const char *key, json_t **old)
{
    if (old)
        *old = NULL;
    if (!key)
        return 0;
    pthread_rwlock_wrlock(&s->lock);
    struct item find = {.key = (char *)key};
    struct item *it = RB_FIND(item_tree, &s->items, &find);
    if (it)
        remove_locked(s, it, old);
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
    return it ? 1 : 0;
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
        if (put_locked(s, key, obj, NULL) != 0)
            rc = -1;
        free(key);
    }
    check_all_locked(s);
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Reads.                                                                   */

json_t *ckube_store_get(ckube_store *s, const char *key)
{
    if (!key)
        return NULL;
    pthread_rwlock_rdlock(&s->lock);
    struct item find = {.key = (char *)key};
    struct item *it = RB_FIND(item_tree, &s->items, &find);
    json_t *o = it ? ckube_obj_ref(it->obj) : NULL;
    pthread_rwlock_unlock(&s->lock);
    return o;
}

bool ckube_store_has(ckube_store *s, const char *key)
{
    if (!key)
        return false;
    pthread_rwlock_rdlock(&s->lock);
    struct item find = {.key = (char *)key};
    bool has = RB_FIND(item_tree, &s->items, &find) != NULL;
    pthread_rwlock_unlock(&s->lock);
    return has;
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
                out->items[out->n++] = ckube_obj_ref(it->obj);
            }
        }
    }
    pthread_rwlock_unlock(&s->lock);
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

static size_t key_tree_count(struct key_tree *t)
{
    size_t n = 0;
    struct key_node *kn;
    RB_FOREACH(kn, key_tree, t)
    {
        n++;
    }
    return n;
}

int ckube_store_by_index(ckube_store *s, const char *index, const char *value, ckube_obj_list *out)
{
    out->items = NULL;
    out->n = 0;
    if (!index || !value)
        return -1;
    pthread_rwlock_rdlock(&s->lock);
    struct index *ix = find_index(s, index);
    int rc = ix ? 0 : -1;
    struct value_node find = {.value = (char *)value};
    struct value_node *vn = ix ? RB_FIND(value_tree, &ix->values, &find) : NULL;
    if (vn) {
        size_t n = key_tree_count(&vn->keys);
        out->items = malloc(n * sizeof(json_t *));
        if (!out->items) {
            rc = -1;
        } else {
            struct key_node *kn;
            RB_FOREACH(kn, key_tree, &vn->keys)
            {
                struct item ifind = {.key = kn->key};
                struct item *it = RB_FIND(item_tree, &s->items, &ifind);
                if (it)
                    out->items[out->n++] = ckube_obj_ref(it->obj);
            }
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

static int copy_keys(struct key_tree *t, ckube_key_list *out)
{
    size_t n = key_tree_count(t);
    if (!n)
        return 0;
    out->keys = calloc(n, sizeof(char *));
    if (!out->keys)
        return -1;
    struct key_node *kn;
    RB_FOREACH(kn, key_tree, t)
    {
        if (!(out->keys[out->n] = strdup(kn->key)))
            return -1;
        out->n++;
    }
    return 0;
}

int ckube_store_index_keys(ckube_store *s, const char *index, const char *value,
                           ckube_key_list *out)
{
    out->keys = NULL;
    out->n = 0;
    if (!index || !value)
        return -1;
    pthread_rwlock_rdlock(&s->lock);
    struct index *ix = find_index(s, index);
    int rc = ix ? 0 : -1;
    struct value_node find = {.value = (char *)value};
    struct value_node *vn = ix ? RB_FIND(value_tree, &ix->values, &find) : NULL;
    if (vn)
        rc = copy_keys(&vn->keys, out);
    pthread_rwlock_unlock(&s->lock);
    if (rc != 0)
        ckube_key_list_free(out);
    return rc;
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
    if (ix) {
        size_t n = 0;
        struct value_node *vn;
        RB_FOREACH(vn, value_tree, &ix->values)
        {
            n++;
        }
        if (n && !(out->keys = calloc(n, sizeof(char *))))
            rc = -1;
        else
            RB_FOREACH(vn, value_tree, &ix->values)
            {
                if (!(out->keys[out->n] = strdup(vn->value))) {
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

size_t ckube_store_len(ckube_store *s)
{
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->count;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

size_t ckube_store_bytes(ckube_store *s)
{
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->bytes;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Listers.                                                                 */

json_t *ckube_lister_get(const ckube_lister *l, const char *ns, const char *name)
{
    if (!l || !l->store || !name || !*name)
        return NULL;
    char *key = NULL;
    if (ns && *ns) {
        if (asprintf(&key, "%s/%s", ns, name) < 0)
            return NULL;
    } else if (!(key = strdup(name))) {
        return NULL;
    }
    json_t *o = ckube_store_get(l->store, key);
    free(key);
    return o;
}

static const char *label_lookup(void *ctx, const char *key)
{
    json_t *labels = ctx;
    return json_string_value(json_object_get(labels, key));
}

int ckube_lister_list(const ckube_lister *l, const char *ns, const ckube_selector *sel,
                      ckube_obj_list *out)
{
    out->items = NULL;
    out->n = 0;
    if (!l || !l->store)
        return -1;
    int rc = ns ? ckube_store_by_index(l->store, CKUBE_INDEX_NAMESPACE, ns, out)
                : ckube_store_list(l->store, out);
    if (rc != 0 || !sel || ckube_selector_empty(sel))
        return rc;
    size_t kept = 0;
    for (size_t i = 0; i < out->n; i++) {
        json_t *labels = json_object_get(json_object_get(out->items[i], "metadata"), "labels");
        if (ckube_selector_matches(sel, label_lookup, labels))
            out->items[kept++] = out->items[i];
        else
            ckube_obj_unref(out->items[i]);
    }
    out->n = kept;
    return 0;
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
