/* delta_fifo.c - the queue of not-yet-processed changes per object key
 * (see ckube/informer.h; behaviour of client-go's DeltaFIFO).
 *
 * Keys wait in FIFO order; each key holds its deltas oldest first, so a
 * consumer sees every change of an object in order while keys that change
 * often do not starve the others. A key is queued at most once. */
#include "ckube/informer.h"
#include "informer/informer_internal.h"

#include "ckube/json.h"
#include "ckube/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef __unused
#define __unused __attribute__((__unused__))
#define CKUBE_UNDEF_UNUSED
#endif
#include <sys/queue.h>
#include <sys/tree.h>

struct fitem {
    RB_ENTRY(fitem) link;
    TAILQ_ENTRY(fitem) q;
    char *key;
    ckube_delta *d; /* each d[i].obj is a reference (or NULL for an unknown
                       tombstone) */
    size_t n, cap;
};

static int fitem_cmp(const struct fitem *a, const struct fitem *b)
{
    return strcmp(a->key, b->key);
}
RB_HEAD(fitem_tree, fitem);
RB_GENERATE_STATIC(fitem_tree, fitem, link, fitem_cmp)
#ifdef CKUBE_UNDEF_UNUSED
#undef __unused
#undef CKUBE_UNDEF_UNUSED
#endif
TAILQ_HEAD(fitem_queue, fitem);

struct ckube_delta_fifo {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ckube_clock *clock;
    ckube_store *known; /* borrowed; may be NULL */
    struct fitem_tree items;
    struct fitem_queue queue;
    size_t len;
    bool populated;
    size_t initial_count; /* keys of the first replace not yet popped */
    bool closed;
    bool kicked; /* see ckube_delta_fifo_kick */
};

const char *ckube_delta_type_name(ckube_delta_type t)
{
    switch (t) {
    case CKUBE_DELTA_ADDED:
        return "Added";
    case CKUBE_DELTA_UPDATED:
        return "Updated";
    case CKUBE_DELTA_DELETED:
        return "Deleted";
    case CKUBE_DELTA_REPLACED:
        return "Replaced";
    case CKUBE_DELTA_SYNC:
        return "Sync";
    }
    return "Unknown";
}

ckube_delta_fifo *ckube_delta_fifo_new(ckube_store *known, ckube_clock *clock)
{
    ckube_delta_fifo *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    ckube_cond_init(&f->cond);
    f->clock = ckube_clock_or_real(clock);
    f->known = known;
    RB_INIT(&f->items);
    TAILQ_INIT(&f->queue);
    return f;
}

static void fitem_free(struct fitem *it)
{
    for (size_t i = 0; i < it->n; i++)
        ckube_obj_unref(it->d[i].obj);
    free(it->d);
    free(it->key);
    free(it);
}

void ckube_delta_fifo_free(ckube_delta_fifo *f)
{
    if (!f)
        return;
    struct fitem *it, *next;
    RB_FOREACH_SAFE(it, fitem_tree, &f->items, next)
    {
        RB_REMOVE(fitem_tree, &f->items, it);
        fitem_free(it);
    }
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static struct fitem *find_locked(ckube_delta_fifo *f, const char *key)
{
    struct fitem find = {.key = (char *)key};
    return RB_FIND(fitem_tree, &f->items, &find);
}

/* Drops the older of two trailing deletions, keeping the more informative
 * one (a real deletion beats a final-state-unknown tombstone). */
static void dedup_locked(struct fitem *it)
{
    if (it->n < 2)
        return;
    ckube_delta *a = &it->d[it->n - 2], *b = &it->d[it->n - 1];
    if (a->type != CKUBE_DELTA_DELETED || b->type != CKUBE_DELTA_DELETED)
        return;
    if (b->final_state_unknown) {
        ckube_obj_unref(b->obj); /* keep a */
    } else {
        ckube_obj_unref(a->obj);
        *a = *b;
    }
    it->n--;
}

/* Appends a delta (taking a new reference to obj) under `key`, queueing
 * the key if it was not. */
static int queue_locked(ckube_delta_fifo *f, const char *key, ckube_delta_type type, json_t *obj,
                        bool unknown)
{
    struct fitem *it = find_locked(f, key);
    /* A resync must not resurrect an object about to be deleted. */
    if (type == CKUBE_DELTA_SYNC && it && it->n && it->d[it->n - 1].type == CKUBE_DELTA_DELETED)
        return 0;
    if (!it) {
        it = calloc(1, sizeof(*it));
        if (!it || !(it->key = strdup(key))) {
            free(it);
            return -1;
        }
        RB_INSERT(fitem_tree, &f->items, it);
        TAILQ_INSERT_TAIL(&f->queue, it, q);
        f->len++;
    }
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 2;
        ckube_delta *nd = realloc(it->d, cap * sizeof(*nd));
        if (!nd)
            return -1;
        it->d = nd;
        it->cap = cap;
    }
    it->d[it->n++] = (ckube_delta){
        .type = type, .obj = obj ? ckube_obj_ref(obj) : NULL, .final_state_unknown = unknown};
    dedup_locked(it);
    pthread_cond_broadcast(&f->cond);
    return 0;
}

static int queue_obj(ckube_delta_fifo *f, ckube_delta_type type, json_t *obj)
{
    char *key = ckube_meta_namespace_key(obj);
    if (!key)
        return -1;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    f->populated = true;
    if (type == CKUBE_DELTA_DELETED) {
        bool queued = find_locked(f, key) != NULL;
        bool known = f->known && ckube_store_has(f->known, key);
        if (!queued && !known)
            goto out; /* never seen: nothing to tell anyone */
    }
    rc = queue_locked(f, key, type, obj, false);
out:
    pthread_mutex_unlock(&f->mu);
    free(key);
    return rc;
}

int ckube_delta_fifo_add(ckube_delta_fifo *f, json_t *obj)
{
    return queue_obj(f, CKUBE_DELTA_ADDED, obj);
}

int ckube_delta_fifo_update(ckube_delta_fifo *f, json_t *obj)
{
    return queue_obj(f, CKUBE_DELTA_UPDATED, obj);
}

int ckube_delta_fifo_delete(ckube_delta_fifo *f, json_t *obj)
{
    return queue_obj(f, CKUBE_DELTA_DELETED, obj);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool in_sorted(char **keys, size_t n, const char *key)
{
    return bsearch(&key, keys, n, sizeof(char *), cmp_str) != NULL;
}

int ckube_delta_fifo_replace(ckube_delta_fifo *f, json_t *items, const char *resource_version)
{
    (void)resource_version;
    if (!json_is_array(items))
        return -1;
    size_t n = json_array_size(items);
    char **keys = calloc(n ? n : 1, sizeof(char *));
    if (!keys)
        return -1;
    int rc = 0;
    size_t nkeys = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < n; i++) {
        json_t *obj = json_array_get(items, i);
        char *key = ckube_meta_namespace_key(obj);
        if (!key) {
            CKUBE_WARN("delta FIFO: skipping a listed object without metadata.name");
            continue;
        }
        if (queue_locked(f, key, CKUBE_DELTA_REPLACED, obj, false) != 0)
            rc = -1;
        keys[nkeys++] = key;
    }
    qsort(keys, nkeys, sizeof(char *), cmp_str);
    size_t uniq = 0;
    for (size_t i = 0; i < nkeys; i++) {
        if (uniq && strcmp(keys[uniq - 1], keys[i]) == 0) {
            free(keys[i]);
            continue;
        }
        keys[uniq++] = keys[i];
    }
    nkeys = uniq;

    /* Queued keys missing from the list: deleted while we were not
     * watching; their last known state is the newest queued one. */
    size_t deletions = 0;
    struct fitem *it;
    RB_FOREACH(it, fitem_tree, &f->items)
    {
        if (in_sorted(keys, nkeys, it->key))
            continue;
        json_t *last = it->n ? it->d[it->n - 1].obj : NULL;
        json_t *hold = last ? ckube_obj_ref(last) : NULL;
        if (queue_locked(f, it->key, CKUBE_DELTA_DELETED, hold, true) != 0)
            rc = -1;
        ckube_obj_unref(hold);
        deletions++;
    }
    /* Known (processed) keys missing from the list and not queued. */
    if (f->known) {
        ckube_key_list known;
        if (ckube_store_list_keys(f->known, &known) != 0) {
            rc = -1;
        } else {
            for (size_t i = 0; i < known.n; i++) {
                if (in_sorted(keys, nkeys, known.keys[i]) || find_locked(f, known.keys[i]))
                    continue;
                json_t *obj = ckube_store_get(f->known, known.keys[i]);
                if (!obj)
                    continue;
                if (queue_locked(f, known.keys[i], CKUBE_DELTA_DELETED, obj, true) != 0)
                    rc = -1;
                ckube_obj_unref(obj);
                deletions++;
            }
            ckube_key_list_free(&known);
        }
    }
    if (!f->populated) {
        f->populated = true;
        f->initial_count = nkeys + deletions;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    for (size_t i = 0; i < nkeys; i++)
        free(keys[i]);
    free(keys);
    return rc;
}

int ckube_delta_fifo_resync(ckube_delta_fifo *f)
{
    if (!f->known)
        return 0;
    ckube_key_list known;
    pthread_mutex_lock(&f->mu);
    int rc = ckube_store_list_keys(f->known, &known);
    for (size_t i = 0; rc == 0 && i < known.n; i++) {
        if (find_locked(f, known.keys[i]))
            continue; /* something is queued already: that will do */
        json_t *obj = ckube_store_get(f->known, known.keys[i]);
        if (!obj)
            continue;
        if (queue_locked(f, known.keys[i], CKUBE_DELTA_SYNC, obj, false) != 0)
            rc = -1;
        ckube_obj_unref(obj);
    }
    pthread_mutex_unlock(&f->mu);
    ckube_key_list_free(&known);
    return rc;
}

static bool synced_locked(ckube_delta_fifo *f)
{
    return f->populated && f->initial_count == 0;
}

int ckube_delta_fifo_pop(ckube_delta_fifo *f, uint64_t deadline_ns, ckube_delta_process_fn process,
                         void *ud)
{
    pthread_mutex_lock(&f->mu);
    while (!f->closed && TAILQ_EMPTY(&f->queue)) {
        if (f->kicked) {
            f->kicked = false;
            pthread_mutex_unlock(&f->mu);
            return 0;
        }
        int rc = ckube_clock_cond_wait(f->clock, &f->cond, &f->mu, deadline_ns);
        if (rc == ETIMEDOUT && !f->closed && TAILQ_EMPTY(&f->queue)) {
            pthread_mutex_unlock(&f->mu);
            return 0;
        }
    }
    if (f->closed) {
        pthread_mutex_unlock(&f->mu);
        return -1;
    }
    bool initial = !synced_locked(f);
    struct fitem *it = TAILQ_FIRST(&f->queue);
    TAILQ_REMOVE(&f->queue, it, q);
    RB_REMOVE(fitem_tree, &f->items, it);
    f->len--;
    if (f->initial_count > 0)
        f->initial_count--;
    if (process)
        process(ud, it->key, it->d, it->n, initial);
    pthread_mutex_unlock(&f->mu);
    fitem_free(it);
    return 1;
}

void ckube_delta_fifo_kick(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    f->kicked = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

void ckube_delta_fifo_close(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    f->closed = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

bool ckube_delta_fifo_has_synced(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    bool s = synced_locked(f);
    pthread_mutex_unlock(&f->mu);
    return s;
}

size_t ckube_delta_fifo_len(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->len;
    pthread_mutex_unlock(&f->mu);
    return n;
}

int ckube_delta_fifo_list_keys(ckube_delta_fifo *f, ckube_key_list *out)
{
    out->keys = NULL;
    out->n = 0;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    if (f->len && !(out->keys = calloc(f->len, sizeof(char *))))
        rc = -1;
    struct fitem *it;
    if (rc == 0)
        TAILQ_FOREACH(it, &f->queue, q)
        {
            if (!(out->keys[out->n] = strdup(it->key))) {
                rc = -1;
                break;
            }
            out->n++;
        }
    pthread_mutex_unlock(&f->mu);
    if (rc != 0)
        ckube_key_list_free(out);
    return rc;
}

/* ---- the reflector sink ---- */

static int sink_replace(void *ctx, json_t *items, const char *rv)
{
    return ckube_delta_fifo_replace(ctx, items, rv);
}
static int sink_add(void *ctx, json_t *obj)
{
    return ckube_delta_fifo_add(ctx, obj);
}
static int sink_update(void *ctx, json_t *obj)
{
    return ckube_delta_fifo_update(ctx, obj);
}
static int sink_remove(void *ctx, json_t *obj)
{
    return ckube_delta_fifo_delete(ctx, obj);
}

ckube_reflector_sink ckube_delta_fifo_sink(ckube_delta_fifo *f)
{
    return (ckube_reflector_sink){.replace = sink_replace,
                                  .add = sink_add,
                                  .update = sink_update,
                                  .remove = sink_remove,
                                  .ctx = f};
}
