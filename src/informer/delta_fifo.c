/* delta_fifo.c - the queue of not-yet-processed changes per object key
 * (see ckube/informer.h; behaviour of client-go's DeltaFIFO).
 *
 * Keys wait in FIFO order; each key holds its deltas oldest first, so a
 * consumer sees every change of an object in order while keys that change
 * often do not starve the others. A key is queued at most once.
 *
 * Deltas hold objects in either form (informer_internal.h): compact ones
 * from the shared informer's reflector, trees from the public json_t
 * calls. The public pop hands trees to its callback (built for compact
 * objects); the shared informer pops the objects as they are. */
#include "ckube/informer.h"
#include "informer/informer_internal.h"

#include "ckube/json.h"
#include "ckube/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sys/queue.h>

struct fitem {
    TAILQ_ENTRY(fitem) q;
    struct fitem *hnext; /* hash chain */
    uint64_t hash;
    uint64_t epoch;  /* the replace that last queued it as listed */
    ckube__delta *d; /* each d[i].obj holds references (none for an
                        unknown tombstone) */
    size_t n, cap;
    ckube__delta first; /* d's storage while there is only one */
    char key[];
};
TAILQ_HEAD(fitem_queue, fitem);

/* Every queued key is in the hash table (to find it) and the queue (for
 * the order); nothing else holds fitems. */
struct ckube_delta_fifo {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    ckube_clock *clock;
    ckube_store *known; /* borrowed; may be NULL */
    struct fitem **buckets;
    size_t nbuckets; /* a power of two, or 0 */
    struct fitem_queue queue;
    size_t len;
    uint64_t epoch; /* of the replace in progress */
    /* An incremental replace in progress: what was listed so far (one
     * reference each), for finding vanished known keys at its end. */
    bool replacing;
    /* The replace began with nothing queued and nothing known: then every
     * key known or queued at its end came from it (keys enter the known
     * store only from popped deltas), and nothing can have vanished. */
    bool begin_empty;
    ckube__cobj **listed;
    size_t nlisted, listed_cap;
    bool populated;
    size_t initial_count; /* keys of the first replace not yet popped */
    bool closed;
    bool kicked; /* see ckube__delta_fifo_kick */
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
    TAILQ_INIT(&f->queue);
    return f;
}

static void fitem_free(struct fitem *it)
{
    for (size_t i = 0; i < it->n; i++)
        ckube__obj_unref(it->d[i].obj);
    if (it->d != &it->first)
        free(it->d);
    free(it);
}

void ckube_delta_fifo_free(ckube_delta_fifo *f)
{
    if (!f)
        return;
    struct fitem *it, *next;
    TAILQ_FOREACH_SAFE(it, &f->queue, q, next)
    {
        fitem_free(it);
    }
    free(f->buckets);
    for (size_t i = 0; i < f->nlisted; i++)
        ckube__cobj_unref(f->listed[i]);
    free(f->listed);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* FNV-1a over the key. */
static uint64_t key_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

static struct fitem *find_hashed(ckube_delta_fifo *f, const char *key, uint64_t h)
{
    if (!f->nbuckets)
        return NULL;
    for (struct fitem *it = f->buckets[h & (f->nbuckets - 1)]; it; it = it->hnext)
        if (it->hash == h && strcmp(it->key, key) == 0)
            return it;
    return NULL;
}

static struct fitem *find_locked(ckube_delta_fifo *f, const char *key)
{
    return find_hashed(f, key, key_hash(key));
}

/* Adds it to the hash table (growing it to keep chains short). */
static int hash_insert(ckube_delta_fifo *f, struct fitem *it)
{
    if (f->len + 1 > f->nbuckets) {
        size_t nb = f->nbuckets ? f->nbuckets * 2 : 64;
        struct fitem **b = calloc(nb, sizeof(*b));
        if (!b)
            return -1;
        for (size_t i = 0; i < f->nbuckets; i++) {
            struct fitem *x = f->buckets[i], *next;
            for (; x; x = next) {
                next = x->hnext;
                x->hnext = b[x->hash & (nb - 1)];
                b[x->hash & (nb - 1)] = x;
            }
        }
        free(f->buckets);
        f->buckets = b;
        f->nbuckets = nb;
    }
    struct fitem **head = &f->buckets[it->hash & (f->nbuckets - 1)];
    it->hnext = *head;
    *head = it;
    return 0;
}

static void hash_remove(ckube_delta_fifo *f, struct fitem *it)
{
    struct fitem **pp = &f->buckets[it->hash & (f->nbuckets - 1)];
    while (*pp != it)
        pp = &(*pp)->hnext;
    *pp = it->hnext;
}

/* Drops the older of two trailing deletions, keeping the more informative
 * one (a real deletion beats a final-state-unknown tombstone). */
static void dedup_locked(struct fitem *it)
{
    if (it->n < 2)
        return;
    ckube__delta *a = &it->d[it->n - 2], *b = &it->d[it->n - 1];
    if (a->type != CKUBE_DELTA_DELETED || b->type != CKUBE_DELTA_DELETED)
        return;
    if (b->final_state_unknown) {
        ckube__obj_unref(b->obj); /* keep a */
    } else {
        ckube__obj_unref(a->obj);
        *a = *b;
    }
    it->n--;
}

/* Appends a delta (taking new references to obj) under `key`, queueing
 * the key if it was not. The caller wakes the poppers (once per batch:
 * a broadcast per object would wake the popper for each one only to
 * have it wait for the lock again). */
static struct fitem *queue_locked(ckube_delta_fifo *f, const char *key, ckube_delta_type type,
                                  ckube__obj obj, bool unknown, int *rc)
{
    uint64_t h = key_hash(key);
    struct fitem *it = find_hashed(f, key, h);
    *rc = 0;
    /* A resync must not resurrect an object about to be deleted. */
    if (type == CKUBE_DELTA_SYNC && it && it->n && it->d[it->n - 1].type == CKUBE_DELTA_DELETED)
        return it;
    if (!it) {
        size_t kn = strlen(key);
        it = calloc(1, sizeof(*it) + kn + 1);
        if (!it || (it->hash = h, hash_insert(f, it)) != 0) {
            free(it);
            *rc = -1;
            return NULL;
        }
        memcpy(it->key, key, kn + 1);
        it->d = &it->first;
        it->cap = 1;
        TAILQ_INSERT_TAIL(&f->queue, it, q);
        f->len++;
    }
    if (it->n == it->cap) {
        size_t cap = it->cap * 2;
        ckube__delta *nd =
            it->d == &it->first ? malloc(cap * sizeof(*nd)) : realloc(it->d, cap * sizeof(*nd));
        if (!nd) {
            *rc = -1;
            return it;
        }
        if (it->d == &it->first)
            nd[0] = it->first;
        it->d = nd;
        it->cap = cap;
    }
    it->d[it->n++] =
        (ckube__delta){.type = type, .obj = ckube__obj_ref(obj), .final_state_unknown = unknown};
    dedup_locked(it);
    return it;
}

static int queue_obj(ckube_delta_fifo *f, ckube_delta_type type, ckube__obj obj)
{
    char *tofree;
    const char *key = ckube__obj_key(obj, &tofree);
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
    queue_locked(f, key, type, obj, false, &rc);
    pthread_cond_broadcast(&f->cond);
out:
    pthread_mutex_unlock(&f->mu);
    free(tofree);
    return rc;
}

int ckube__delta_fifo_add_obj(ckube_delta_fifo *f, ckube_delta_type type, ckube__obj o)
{
    return queue_obj(f, type, o);
}

int ckube_delta_fifo_add(ckube_delta_fifo *f, json_t *obj)
{
    return queue_obj(f, CKUBE_DELTA_ADDED, (ckube__obj){.j = obj});
}

int ckube_delta_fifo_update(ckube_delta_fifo *f, json_t *obj)
{
    return queue_obj(f, CKUBE_DELTA_UPDATED, (ckube__obj){.j = obj});
}

int ckube_delta_fifo_delete(ckube_delta_fifo *f, json_t *obj)
{
    return queue_obj(f, CKUBE_DELTA_DELETED, (ckube__obj){.j = obj});
}

/* The keys listed by an incremental replace, as an open-addressing hash
 * set over f->listed (indexes + 1; 0 = empty). */
typedef struct listed_set {
    uint32_t *slot;
    size_t mask;
    ckube__cobj *const *objs;
} listed_set;

static bool listed_set_has(const listed_set *ls, const char *key);

/* A walk of the known store (resync, vanished keys). Known (processed)
 * keys missing from a list and not queued were deleted
 * while we were not watching. Called under the store's read lock. A whole
 * replace has queued every listed key by then, so "not queued" covers
 * both; an incremental one passes the set of what it listed. */
struct known_scan {
    ckube_delta_fifo *f;
    const listed_set *ls; /* NULL: everything listed is queued */
    size_t deletions;
    int rc;
};

static void queue_vanished(void *ud, const char *key, ckube__obj o)
{
    struct known_scan *v = ud;
    if (find_locked(v->f, key) || (v->ls && listed_set_has(v->ls, key)))
        return;
    int rc;
    queue_locked(v->f, key, CKUBE_DELTA_DELETED, o, true, &rc);
    if (rc)
        v->rc = -1;
    v->deletions++;
}

/* Queues the deletion of queued key `it`, missing from a list: final
 * state unknown, its newest queued state as the last known one. Returns
 * 0, or -1 when it could not be queued. */
static int queue_unlisted(ckube_delta_fifo *f, struct fitem *it)
{
    ckube__obj last = it->n ? ckube__obj_ref(it->d[it->n - 1].obj) : (ckube__obj){0};
    int rc;
    queue_locked(f, it->key, CKUBE_DELTA_DELETED, last, true, &rc);
    ckube__obj_unref(last);
    return rc ? -1 : 0;
}

/* Queues the deletion of every known key that is neither queued nor
 * listed (ls may be NULL; see known_scan). Returns how many, with
 * *rc = -1 when one could not be queued. */
static size_t queue_vanished_known(ckube_delta_fifo *f, const listed_set *ls, int *rc)
{
    if (!f->known)
        return 0;
    struct known_scan v = {.f = f, .ls = ls};
    ckube__store_foreach(f->known, queue_vanished, &v);
    if (v.rc)
        *rc = -1;
    return v.deletions;
}

/* The replace itself, over n objects (FIFO locked). Listed keys are
 * marked with this replace's epoch, so the queued keys without the mark
 * are the ones missing from the list. */
static int replace_locked(ckube_delta_fifo *f, const ckube__obj *objs, size_t n)
{
    int rc = 0;
    uint64_t epoch = ++f->epoch;
    size_t listed = 0;
    for (size_t i = 0; i < n; i++) {
        char *tofree;
        const char *key = ckube__obj_key(objs[i], &tofree);
        if (!key) {
            CKUBE_WARN("delta FIFO: skipping a listed object without metadata.name");
            continue;
        }
        int qrc;
        struct fitem *it = queue_locked(f, key, CKUBE_DELTA_REPLACED, objs[i], false, &qrc);
        if (qrc)
            rc = -1;
        if (it && it->epoch != epoch) {
            it->epoch = epoch;
            listed++; /* each key once, however often it is listed */
        }
        free(tofree);
    }

    /* Queued keys missing from the list: deleted while we were not
     * watching; their last known state is the newest queued one. */
    size_t deletions = 0;
    struct fitem *it;
    TAILQ_FOREACH(it, &f->queue, q)
    {
        if (it->epoch == epoch)
            continue;
        if (queue_unlisted(f, it))
            rc = -1;
        deletions++;
    }
    deletions += queue_vanished_known(f, NULL, &rc);
    if (!f->populated) {
        f->populated = true;
        f->initial_count = listed + deletions;
    }
    pthread_cond_broadcast(&f->cond);
    return rc;
}

int ckube_delta_fifo_replace(ckube_delta_fifo *f, json_t *items, const char *resource_version)
{
    (void)resource_version;
    if (!json_is_array(items))
        return -1;
    size_t n = json_array_size(items);
    ckube__obj *objs = malloc((n ? n : 1) * sizeof(*objs));
    if (!objs)
        return -1;
    for (size_t i = 0; i < n; i++)
        objs[i] = (ckube__obj){.j = json_array_get(items, i)};
    pthread_mutex_lock(&f->mu);
    int rc = replace_locked(f, objs, n);
    pthread_mutex_unlock(&f->mu);
    free(objs);
    return rc;
}

int ckube__delta_fifo_replace_objs(ckube_delta_fifo *f, ckube__cobj *const *items, size_t n)
{
    ckube__obj *objs = malloc((n ? n : 1) * sizeof(*objs));
    if (!objs)
        return -1;
    for (size_t i = 0; i < n; i++)
        objs[i] = (ckube__obj){.c = items[i]};
    pthread_mutex_lock(&f->mu);
    int rc = replace_locked(f, objs, n);
    pthread_mutex_unlock(&f->mu);
    free(objs);
    return rc;
}

/* ---- incremental replace ---- */

int ckube__delta_fifo_replace_begin(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nlisted; i++)
        ckube__cobj_unref(f->listed[i]);
    f->nlisted = 0;
    f->epoch++;
    f->replacing = true;
    f->begin_empty = TAILQ_EMPTY(&f->queue) && (!f->known || ckube_store_len(f->known) == 0);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

/* replace_end of a replace that began empty (the first list, usually):
 * no deletions, no key set to build nor known store to scan (at 100k
 * objects those were 6% of an informer's sync). Returns the keys of the
 * list still queued. FIFO locked. */
static size_t replace_end_from_empty(ckube_delta_fifo *f)
{
    size_t pending = 0;
    struct fitem *it;
    TAILQ_FOREACH(it, &f->queue, q)
    {
        /* Anything else queued now is a resync of a listed key. */
        if (it->epoch == f->epoch)
            pending++;
    }
    return pending;
}

int ckube__delta_fifo_replace_add(ckube_delta_fifo *f, ckube__cobj *const *items, size_t n)
{
    int rc = 0;
    pthread_mutex_lock(&f->mu);
    if (f->nlisted + n > f->listed_cap) {
        size_t cap = f->listed_cap ? f->listed_cap : 1024;
        while (cap < f->nlisted + n)
            cap *= 2;
        ckube__cobj **l = realloc(f->listed, cap * sizeof(*l));
        if (!l) {
            pthread_mutex_unlock(&f->mu);
            return -1;
        }
        f->listed = l;
        f->listed_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        if (!items[i]->key_len) {
            CKUBE_WARN("delta FIFO: skipping a listed object without metadata.name");
            continue;
        }
        int qrc;
        struct fitem *it = queue_locked(f, ckube__cobj_key(items[i]), CKUBE_DELTA_REPLACED,
                                        (ckube__obj){.c = items[i]}, false, &qrc);
        if (qrc)
            rc = -1;
        if (it)
            it->epoch = f->epoch;
        f->listed[f->nlisted++] = ckube__cobj_ref(items[i]);
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int listed_set_build(listed_set *ls, ckube__cobj *const *objs, size_t n)
{
    size_t size = 16;
    while (size < 2 * n)
        size *= 2;
    ls->slot = calloc(size, sizeof(*ls->slot));
    ls->mask = size - 1;
    ls->objs = objs;
    if (!ls->slot)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t j = key_hash(ckube__cobj_key(objs[i])) & ls->mask;
        while (ls->slot[j])
            j = (j + 1) & ls->mask;
        ls->slot[j] = (uint32_t)(i + 1);
    }
    return 0;
}

static bool listed_set_has(const listed_set *ls, const char *key)
{
    for (size_t j = key_hash(key) & ls->mask; ls->slot[j]; j = (j + 1) & ls->mask)
        if (strcmp(ckube__cobj_key(ls->objs[ls->slot[j] - 1]), key) == 0)
            return true;
    return false;
}

/* replace_end of any other replace: queues a deletion for every queued
 * or known key the list did not have. Counts into *deletions and
 * *pending (the keys of the list still queued). -1 when a deletion could
 * not be queued, -2 when the key set could not be built (then nothing can
 * be found missing). FIFO locked. */
static int replace_end_scan(ckube_delta_fifo *f, size_t *deletions, size_t *pending)
{
    listed_set ls = {0};
    if (f->nlisted > UINT32_MAX - 1 || listed_set_build(&ls, f->listed, f->nlisted) != 0) {
        free(ls.slot);
        return -2;
    }
    int rc = 0;
    /* Queued keys missing from the list (as replace_locked), and keys of
     * the list still queued (what a first list still has to deliver). */
    struct fitem *it;
    TAILQ_FOREACH(it, &f->queue, q)
    {
        if (it->epoch == f->epoch) {
            (*pending)++;
            continue;
        }
        if (listed_set_has(&ls, it->key))
            continue; /* queued again since (e.g. a resync) */
        if (queue_unlisted(f, it))
            rc = -1;
        (*deletions)++;
    }
    /* Known keys neither listed nor queued. */
    *deletions += queue_vanished_known(f, &ls, &rc);
    free(ls.slot);
    return rc;
}

int ckube__delta_fifo_replace_end(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    size_t deletions = 0, pending = 0;
    int rc = 0;
    if (f->begin_empty) {
        pending = replace_end_from_empty(f);
    } else if ((rc = replace_end_scan(f, &deletions, &pending)) == -2) {
        /* Without the key set nothing can be found missing: no deletions. */
        f->replacing = false;
        pthread_mutex_unlock(&f->mu);
        return -1;
    }
    for (size_t i = 0; i < f->nlisted; i++)
        ckube__cobj_unref(f->listed[i]);
    free(f->listed);
    f->listed = NULL;
    f->nlisted = f->listed_cap = 0;
    f->replacing = false;
    if (!f->populated) {
        f->populated = true;
        f->initial_count = pending + deletions;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

void ckube__delta_fifo_replace_abort(ckube_delta_fifo *f)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nlisted; i++)
        ckube__cobj_unref(f->listed[i]);
    free(f->listed);
    f->listed = NULL;
    f->nlisted = f->listed_cap = 0;
    f->replacing = false;
    pthread_mutex_unlock(&f->mu);
}

/* Queues SYNC for a known key with nothing queued (under the store's
 * read lock). */
static void queue_sync(void *ud, const char *key, ckube__obj o)
{
    struct known_scan *k = ud;
    if (find_locked(k->f, key))
        return; /* something is queued already: that will do */
    int rc;
    queue_locked(k->f, key, CKUBE_DELTA_SYNC, o, false, &rc);
    if (rc)
        k->rc = -1;
}

int ckube_delta_fifo_resync(ckube_delta_fifo *f)
{
    if (!f->known)
        return 0;
    struct known_scan k = {.f = f};
    pthread_mutex_lock(&f->mu);
    ckube__store_foreach(f->known, queue_sync, &k);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return k.rc;
}

static bool synced_locked(ckube_delta_fifo *f)
{
    return f->populated && f->initial_count == 0;
}

/* Waits until a key is queued (FIFO locked on return with 1). Returns 0
 * at the deadline or on a kick, -1 once closed (unlocked then). */
static int wait_locked(ckube_delta_fifo *f, uint64_t deadline_ns)
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
    return 1;
}

/* Takes the first queued key out (locked, queue not empty). */
static struct fitem *take_locked(ckube_delta_fifo *f, bool *initial)
{
    *initial = !synced_locked(f);
    struct fitem *it = TAILQ_FIRST(&f->queue);
    TAILQ_REMOVE(&f->queue, it, q);
    hash_remove(f, it);
    if (--f->len == 0) {
        /* Drained (a list of many keys leaves a large table behind). */
        free(f->buckets);
        f->buckets = NULL;
        f->nbuckets = 0;
    }
    if (f->initial_count > 0)
        f->initial_count--;
    return it;
}

int ckube__delta_fifo_pop_objs(ckube_delta_fifo *f, uint64_t deadline_ns, size_t max,
                               const ckube__delta_batch *b)
{
    int rc = wait_locked(f, deadline_ns);
    if (rc <= 0)
        return rc;
    struct fitem *small[64], **done = small;
    if (max > 64 && !(done = malloc(max * sizeof(*done)))) {
        done = small;
        max = 64;
    }
    if (max == 0)
        max = 1;
    size_t n = 0;
    if (b->begin)
        b->begin(b->ud);
    while (n < max && !TAILQ_EMPTY(&f->queue)) {
        bool initial;
        struct fitem *it = take_locked(f, &initial);
        if (b->process)
            b->process(b->ud, it->key, it->d, it->n, initial);
        done[n++] = it;
    }
    if (b->end)
        b->end(b->ud);
    pthread_mutex_unlock(&f->mu);
    for (size_t i = 0; i < n; i++)
        fitem_free(done[i]);
    if (done != small)
        free(done);
    return (int)n;
}

int ckube_delta_fifo_pop(ckube_delta_fifo *f, uint64_t deadline_ns, ckube_delta_process_fn process,
                         void *ud)
{
    int rc = wait_locked(f, deadline_ns);
    if (rc <= 0)
        return rc;
    bool initial;
    struct fitem *it = take_locked(f, &initial);
    /* The public form: trees (built here for compact objects). */
    ckube_delta small[4], *d = it->n <= 4 ? small : calloc(it->n, sizeof(*d));
    if (d) {
        for (size_t i = 0; i < it->n; i++)
            d[i] = (ckube_delta){.type = it->d[i].type,
                                 .obj = ckube__obj_tree(it->d[i].obj),
                                 .final_state_unknown = it->d[i].final_state_unknown};
        if (process)
            process(ud, it->key, d, it->n, initial);
        for (size_t i = 0; i < it->n; i++)
            ckube_obj_unref(d[i].obj);
        if (d != small)
            free(d);
    } else {
        CKUBE_ERROR("delta FIFO: out of memory: dropping the deltas of %s", it->key);
    }
    pthread_mutex_unlock(&f->mu);
    fitem_free(it);
    return 1;
}

void ckube__delta_fifo_kick(ckube_delta_fifo *f)
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

/* ---- the compact sink (the shared informer's reflector) ---- */

static int csink_replace(void *ctx, ckube__cobj *const *items, size_t n, const char *rv)
{
    (void)rv;
    return ckube__delta_fifo_replace_objs(ctx, items, n);
}
static int csink_add(void *ctx, ckube__cobj *obj)
{
    return queue_obj(ctx, CKUBE_DELTA_ADDED, (ckube__obj){.c = obj});
}
static int csink_update(void *ctx, ckube__cobj *obj)
{
    return queue_obj(ctx, CKUBE_DELTA_UPDATED, (ckube__obj){.c = obj});
}
static int csink_remove(void *ctx, ckube__cobj *obj)
{
    return queue_obj(ctx, CKUBE_DELTA_DELETED, (ckube__obj){.c = obj});
}

static int csink_begin(void *ctx)
{
    return ckube__delta_fifo_replace_begin(ctx);
}
static int csink_replace_add(void *ctx, ckube__cobj *const *items, size_t n)
{
    return ckube__delta_fifo_replace_add(ctx, items, n);
}
static int csink_end(void *ctx, const char *rv)
{
    (void)rv;
    return ckube__delta_fifo_replace_end(ctx);
}
static void csink_abort(void *ctx)
{
    ckube__delta_fifo_replace_abort(ctx);
}

ckube__csink ckube__delta_fifo_csink(ckube_delta_fifo *f)
{
    return (ckube__csink){.replace = csink_replace,
                          .add = csink_add,
                          .update = csink_update,
                          .remove = csink_remove,
                          .replace_begin = csink_begin,
                          .replace_add = csink_replace_add,
                          .replace_end = csink_end,
                          .replace_abort = csink_abort,
                          .ctx = f};
}
