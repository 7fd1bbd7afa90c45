/* shared_informer.c - reflector + DeltaFIFO + store + event handlers (see
 * ckube/informer.h; client-go's sharedIndexInformer).
 *
 * Threads: the reflector's; one "controller" thread that pops the FIFO,
 * updates the store and hands notifications to the handlers; and one per
 * handler that calls its callbacks in order, so a slow handler delays
 * only itself (its queue is unbounded, as client-go's).
 *
 * Locks, always taken in this order: the FIFO's (held by pop while a
 * batch of keys is processed) -> inf->mu (handlers, resync state; held
 * while a batch's deltas reach the store and the handler queues, so a
 * handler added meanwhile sees a consistent snapshot) -> a handler's
 * queue lock. The store's lock is a leaf. Notes reach a handler's queue
 * once per batch (up to POP_BATCH keys), so a handler thread that keeps
 * up is woken once per batch, not once per object.
 *
 * Objects reach the handlers lazily: a notification holds the objects in
 * the form the cache has them (compact, informer_internal.h), and the
 * first handler thread that needs a jansson tree builds it; the other
 * handlers of that notification share it. Building trees is thus spread
 * over the handler threads and never delays the cache. The cache keeps
 * trees it built for readers (listers) while they are in use; the
 * controller thread trims the unused ones every TRIM_PERIOD. */
#include "ckube/informer.h"
#include "informer/informer_internal.h"

#include "ckube/json.h"
#include "ckube/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often cached trees nobody uses are dropped. */
#define TRIM_PERIOD CKUBE_SEC(10)
/* Keys processed per FIFO lock hold (and handed to handlers at once). */
#define POP_BATCH 64

enum note_kind { NOTE_ADD, NOTE_UPDATE, NOTE_DELETE };

/* An object of a notification (the public ckube_object), shared by the
 * notes of every handler: the tree is built by the first that needs it. */
struct ckube_object {
    size_t refcount; /* atomic */
    ckube__obj obj;  /* references */
    json_t *tree;    /* atomic: obj.j's reference, or a built one */
    /* With the mutation detector on: the informer's name (borrowed; the
     * informer outlives every note), and a built tree is checked against
     * its block when the last handler is done with it. */
    const char *detect;
    /* A tree without a compact form (from the public json_t APIs): its
     * key, computed once (malloc'd; NULL when it has no name). */
    char *tree_key;
    /* Such an object decoded as a typed struct (ckube_object_typed; a
     * compact object keeps its decoding in the block instead, shared
     * with the cache). NULL until asked. (atomic) */
    ckube_typed *typed;
};

struct note {
    struct note *next;
    enum note_kind kind;
    struct ckube_object *a; /* add: obj; update: old; delete: obj (references) */
    struct ckube_object *b; /* update: new */
    char *tombstone_key;
    bool initial;
};

struct ckube_handler_reg {
    struct ckube_handler_reg *next; /* informer's list (inf->mu) */
    ckube_shared_informer *inf;
    ckube_event_handler h;
    uint64_t resync_ns;   /* 0 = none */
    uint64_t next_resync; /* clock time (inf->mu) */
    bool syncing;         /* receives sync updates now (inf->mu) */

    /* Notes of the batch being processed, handed over at its end (one
     * lock and one wakeup per batch instead of per object). inf->mu. */
    struct note *pend_head, *pend_tail;
    uint64_t npend;

    pthread_mutex_t mu; /* the queue and what follows */
    pthread_cond_t cond;
    struct note *head, *tail;
    uint64_t enqueued, processed;
    bool stop;
    bool has_thread;
    pthread_t thread;
    bool target_set;
    uint64_t sync_target;
};

struct ckube_shared_informer {
    char *name;
    ckube_list_watch *lw; /* owned */
    ckube_clock *clock;
    uint64_t default_resync;
    ckube_store *store;
    ckube_delta_fifo *fifo;
    ckube_reflector *reflector;
    ckube__transformer *transformer; /* NULL without a transform */

    pthread_mutex_t mu;
    pthread_cond_t cond; /* stop completion */
    bool started, stopping, stopped;
    pthread_t controller;
    struct ckube_handler_reg *handlers;
    uint64_t next_trim; /* controller thread only */
};

/* ------------------------------------------------------------------------ */
/* Lazy trees.                                                              */

static struct ckube_object *lazy_new(ckube__obj o, const char *detect)
{
    struct ckube_object *l = malloc(sizeof(*l));
    if (!l)
        return NULL;
    l->refcount = 1;
    l->tree_key = NULL;
    l->typed = NULL;
    if (!o.c && o.j) {
        const char *name = ckube_obj_name(o.j);
        if (name && *name && !(l->tree_key = ckube_meta_namespace_key(o.j))) {
            free(l); /* it has a name: out of memory */
            return NULL;
        }
    }
    l->obj = ckube__obj_ref(o);
    l->tree = o.j;
    l->detect = detect;
    return l;
}

/* The mutation detector's check of a tree handed to handlers. */
static void lazy_check(const struct ckube_object *l, const json_t *t)
{
    json_t *was = ckube__cobj_tree(l->obj.c);
    if (was && !json_equal(t, was)) {
        char *now_s = json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS);
        char *was_s = json_dumps(was, JSON_COMPACT | JSON_SORT_KEYS);
        CKUBE_ERROR("cache mutation detected: object %s in cache %s was modified by an event "
                    "handler (objects handed to handlers are shared and read-only; "
                    "json_deep_copy before changing one). cached: %.2000s now: %.2000s",
                    ckube__cobj_key(l->obj.c), l->detect, was_s ? was_s : "?", now_s ? now_s : "?");
        abort();
    }
    json_decref(was);
}

static struct ckube_object *lazy_ref(struct ckube_object *l)
{
    if (l)
        __atomic_add_fetch(&l->refcount, 1, __ATOMIC_RELAXED);
    return l;
}

static void lazy_unref(struct ckube_object *l)
{
    if (!l || __atomic_sub_fetch(&l->refcount, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    json_t *t = __atomic_load_n(&l->tree, __ATOMIC_ACQUIRE);
    if (t && t != l->obj.j) {
        if (l->detect)
            lazy_check(l, t);
        ckube_obj_unref(t);
    }
    ckube__obj_unref(l->obj);
    free(l->tree_key);
    ckube_typed_free(l->typed);
    free(l);
}

/* The tree (borrowed from the lazy), built on first use; NULL when out
 * of memory. Any thread. */
static json_t *lazy_tree(struct ckube_object *l)
{
    json_t *t = __atomic_load_n(&l->tree, __ATOMIC_ACQUIRE);
    if (t)
        return t;
    json_t *built = ckube__cobj_tree(l->obj.c);
    if (!built)
        return NULL;
    json_t *expected = NULL;
    if (__atomic_compare_exchange_n(&l->tree, &expected, built, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return built;
    json_decref(built);
    return expected;
}

/* The public face of a notification's object. */

const char *ckube_object_key(const ckube_object *o)
{
    if (!o)
        return "";
    if (o->obj.c)
        return ckube__cobj_key(o->obj.c);
    return o->tree_key ? o->tree_key : "";
}

const char *ckube_object_namespace(const ckube_object *o)
{
    if (!o)
        return NULL;
    if (o->obj.c)
        return o->obj.c->ns_len ? ckube__cobj_namespace(o->obj.c) : NULL;
    const char *ns = o->obj.j ? ckube_obj_namespace(o->obj.j) : NULL;
    return ns && *ns ? ns : NULL;
}

const char *ckube_object_name(const ckube_object *o)
{
    if (!o)
        return NULL;
    const ckube__cobj *c = o->obj.c;
    if (c) {
        if (!c->key_len)
            return NULL;
        /* The key is "namespace/name", or "name" without a namespace. */
        return ckube__cobj_key(c) + (c->ns_len ? c->ns_len + 1 : 0);
    }
    return o->tree_key && o->obj.j ? ckube_obj_name(o->obj.j) : NULL;
}

const char *ckube_object_resource_version(const ckube_object *o)
{
    return o ? ckube__obj_rv(o->obj) : NULL;
}

int64_t ckube_object_generation(const ckube_object *o)
{
    if (!o)
        return 0;
    if (o->obj.c)
        return o->obj.c->generation;
    json_t *g = ckube_json_get_path(o->obj.j, "metadata.generation");
    return json_is_integer(g) ? json_integer_value(g) : 0;
}

const json_t *ckube_object_json(const ckube_object *o)
{
    /* Building the tree once for everybody is not a visible change: the
     * object stays immutable from the caller's point of view. */
    return o ? lazy_tree((ckube_object *)o) : NULL;
}

/* One object, one typed decoding: asked as another kind, the error. */
static const ckube_typed *typed_clash(const ckube_object *o, const ckube_typed *have,
                                      const ckube_type_info *t, ckube_status **err)
{
    if (err)
        *err = ckube_status_new(
            0, NULL, "%s is already decoded as %s%s%s %s, not as %s%s%s %s", ckube_object_key(o),
            have->type->group, *have->type->group ? "/" : "", have->type->version, have->type->kind,
            t->group, *t->group ? "/" : "", t->version, t->kind);
    return NULL;
}

const ckube_typed *ckube_object_typed(const ckube_object *o, const ckube_type_info *t,
                                      ckube_status **err)
{
    if (err)
        *err = NULL;
    if (!o || !t)
        return NULL;
    ckube_object *l = (ckube_object *)o;
    ckube_typed **slot = l->obj.c ? &l->obj.c->typed : &l->typed;
    ckube_typed *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (cur) {
        if (cur->type == t)
            return cur;
        return typed_clash(o, cur, t, err);
    }
    /* Decoded from a tree of its own (the compact form's trees are cheap
     * to build) rather than the notification's, which may never be
     * built; an object without a compact form is copied, since the
     * decoding keeps references into its tree (JSON-valued fields such as
     * managedFields, unknown members) and other readers share that one. */
    json_t *tree = l->obj.c ? ckube__cobj_tree(l->obj.c) : json_deep_copy(l->obj.j);
    ckube_typed *made = tree ? ckube_struct_from_json(t->object, tree, err) : NULL;
    json_decref(tree);
    if (!made)
        return NULL;
    ckube_typed *expected = NULL;
    if (__atomic_compare_exchange_n(slot, &expected, made, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return made;
    ckube_typed_free(made); /* another reader was first */
    return expected->type == t ? expected : typed_clash(o, expected, t, err);
}

ckube_object *ckube__object_new(ckube__obj o)
{
    return lazy_new(o, NULL);
}

ckube_object *ckube_object_ref(const ckube_object *o)
{
    return lazy_ref((ckube_object *)o);
}

void ckube_object_unref(ckube_object *o)
{
    lazy_unref(o);
}

/* ------------------------------------------------------------------------ */
/* Handler queues and threads.                                              */

static void note_free(struct note *n)
{
    lazy_unref(n->a);
    lazy_unref(n->b);
    free(n->tombstone_key);
    free(n);
}

static struct note *note_new(struct ckube_handler_reg *reg, enum note_kind kind,
                             struct ckube_object *a, struct ckube_object *b,
                             const char *tombstone_key, bool initial)
{
    struct note *n = calloc(1, sizeof(*n));
    if (!n || (tombstone_key && !(n->tombstone_key = strdup(tombstone_key)))) {
        free(n);
        CKUBE_ERROR("%s: out of memory: dropping an event", reg->inf->name);
        return NULL;
    }
    n->kind = kind;
    n->a = lazy_ref(a);
    n->b = lazy_ref(b);
    n->initial = initial;
    return n;
}

/* Adds a note to the handler's pending list (inf->mu held). */
static void enqueue_pending(struct ckube_handler_reg *reg, enum note_kind kind,
                            struct ckube_object *a, struct ckube_object *b,
                            const char *tombstone_key, bool initial)
{
    struct note *n = note_new(reg, kind, a, b, tombstone_key, initial);
    if (!n)
        return;
    if (reg->pend_tail)
        reg->pend_tail->next = n;
    else
        reg->pend_head = n;
    reg->pend_tail = n;
    reg->npend++;
}

/* Hands the pending notes to the handler's thread (inf->mu held). */
static void flush_pending(struct ckube_handler_reg *reg)
{
    if (!reg->pend_head)
        return;
    pthread_mutex_lock(&reg->mu);
    if (reg->tail)
        reg->tail->next = reg->pend_head;
    else
        reg->head = reg->pend_head;
    reg->tail = reg->pend_tail;
    reg->enqueued += reg->npend;
    pthread_cond_signal(&reg->cond);
    pthread_mutex_unlock(&reg->mu);
    reg->pend_head = reg->pend_tail = NULL;
    reg->npend = 0;
}

static void enqueue(struct ckube_handler_reg *reg, enum note_kind kind, struct ckube_object *a,
                    struct ckube_object *b, const char *tombstone_key, bool initial)
{
    struct note *n = note_new(reg, kind, a, b, tombstone_key, initial);
    if (!n)
        return;
    pthread_mutex_lock(&reg->mu);
    if (reg->tail)
        reg->tail->next = n;
    else
        reg->head = n;
    reg->tail = n;
    reg->enqueued++;
    pthread_cond_signal(&reg->cond);
    pthread_mutex_unlock(&reg->mu);
}

/* The ckube_object form of a note, when the handler has it for this
 * kind: true when called. */
static bool call_object_handler(const ckube_event_handler *h, const struct note *n)
{
    switch (n->kind) {
    case NOTE_ADD:
        if (!h->on_add_object)
            return false;
        h->on_add_object(h->ud, n->a, n->initial);
        return true;
    case NOTE_UPDATE:
        if (!h->on_update_object)
            return false;
        h->on_update_object(h->ud, n->a, n->b);
        return true;
    case NOTE_DELETE:
        if (!h->on_delete_object)
            return false;
        h->on_delete_object(h->ud, n->a, n->tombstone_key);
        return true;
    }
    return false;
}

static void call_handler(struct ckube_handler_reg *reg, const struct note *n)
{
    const ckube_event_handler *h = &reg->h;
    json_t *a = NULL, *b = NULL;
    if (call_object_handler(h, n))
        return;
    bool want = (n->kind == NOTE_ADD && h->on_add) || (n->kind == NOTE_UPDATE && h->on_update) ||
                (n->kind == NOTE_DELETE && h->on_delete);
    if (!want)
        return;
    if (!(a = lazy_tree(n->a)) || (n->b && !(b = lazy_tree(n->b)))) {
        CKUBE_ERROR("%s: out of memory: dropping an event", reg->inf->name);
        return;
    }
    switch (n->kind) {
    case NOTE_ADD:
        h->on_add(h->ud, a, n->initial);
        break;
    case NOTE_UPDATE:
        h->on_update(h->ud, a, b);
        break;
    case NOTE_DELETE:
        h->on_delete(h->ud, a, n->tombstone_key);
        break;
    }
}

static void *handler_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-handler"); /* top -H, perf, gdb */
    struct ckube_handler_reg *reg = arg;
    pthread_mutex_lock(&reg->mu);
    for (;;) {
        while (!reg->head && !reg->stop)
            pthread_cond_wait(&reg->cond, &reg->mu);
        if (reg->stop)
            break;
        struct note *n = reg->head;
        reg->head = n->next;
        if (!reg->head)
            reg->tail = NULL;
        pthread_mutex_unlock(&reg->mu);
        call_handler(reg, n);
        note_free(n);
        pthread_mutex_lock(&reg->mu);
        reg->processed++;
    }
    pthread_mutex_unlock(&reg->mu);
    return NULL;
}

static int handler_start(struct ckube_handler_reg *reg)
{
    int rc = pthread_create(&reg->thread, NULL, handler_main, reg);
    if (rc != 0) {
        CKUBE_ERROR("%s: cannot start a handler thread: %s", reg->inf->name, strerror(rc));
        return -1;
    }
    reg->has_thread = true;
    return 0;
}

static void handler_stop(struct ckube_handler_reg *reg)
{
    pthread_mutex_lock(&reg->mu);
    reg->stop = true;
    pthread_cond_broadcast(&reg->cond);
    bool join = reg->has_thread;
    reg->has_thread = false;
    pthread_mutex_unlock(&reg->mu);
    if (join)
        pthread_join(reg->thread, NULL);
}

static void notes_free(struct note *n)
{
    while (n) {
        struct note *next = n->next;
        note_free(n);
        n = next;
    }
}

static void handler_free(struct ckube_handler_reg *reg)
{
    notes_free(reg->head);
    notes_free(reg->pend_head);
    pthread_cond_destroy(&reg->cond);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

/* ------------------------------------------------------------------------ */
/* Delta processing (the controller thread).                                */

static bool same_rv(ckube__obj a, ckube__obj b)
{
    const char *ra = ckube__obj_rv(a), *rb = ckube__obj_rv(b);
    return ra && rb && strcmp(ra, rb) == 0;
}

/* Hands one notification to every handler (inf->mu held). Updates that
 * did not change the resourceVersion (resyncs, unchanged objects in a
 * relist) go only to handlers whose resync is due. `a` and `b` are
 * borrowed; the same object for both gives both arguments one tree. */
static void distribute(ckube_shared_informer *inf, enum note_kind kind, ckube__obj a, ckube__obj b,
                       const char *tombstone_key, bool initial, bool is_sync)
{
    struct ckube_object *la = NULL, *lb = NULL;
    const char *detect = ckube_store_detects_mutations(inf->store) ? inf->name : NULL;
    for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next) {
        if (is_sync && !reg->syncing)
            continue;
        if (!la) {
            bool same = kind == NOTE_UPDATE && (a.c ? a.c == b.c : a.j == b.j);
            la = lazy_new(same && !a.j ? b : a, detect);
            lb = kind != NOTE_UPDATE ? NULL : same ? lazy_ref(la) : lazy_new(b, detect);
            if (!la || (kind == NOTE_UPDATE && !lb)) {
                CKUBE_ERROR("%s: out of memory: dropping an event", inf->name);
                break;
            }
        }
        enqueue_pending(reg, kind, la, lb, tombstone_key, initial);
    }
    lazy_unref(la);
    lazy_unref(lb);
}

/* A batch of keys from the FIFO: inf->mu is held from begin to end, so
 * the handler list stays put while notes wait in the pending lists. */
static void batch_begin(void *ud)
{
    ckube_shared_informer *inf = ud;
    pthread_mutex_lock(&inf->mu);
}

static void batch_end(void *ud)
{
    ckube_shared_informer *inf = ud;
    for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next)
        flush_pending(reg);
    pthread_mutex_unlock(&inf->mu);
}

/* One key's deltas into the store and the pending notes (inf->mu held). */
static void process_deltas(void *ud, const char *key, const ckube__delta *d, size_t n, bool initial)
{
    ckube_shared_informer *inf = ud;
    for (size_t i = 0; i < n; i++) {
        switch (d[i].type) {
        case CKUBE_DELTA_SYNC:
        case CKUBE_DELTA_REPLACED:
        case CKUBE_DELTA_ADDED:
        case CKUBE_DELTA_UPDATED: {
            ckube__obj old = {0};
            if (ckube__store_put_obj(inf->store, d[i].obj, &old) != 0) {
                CKUBE_ERROR("%s: could not cache %s", inf->name, key);
                break;
            }
            if (!ckube__obj_none(old))
                distribute(inf, NOTE_UPDATE, old, d[i].obj, NULL, false,
                           d[i].type == CKUBE_DELTA_SYNC || same_rv(old, d[i].obj));
            else
                distribute(inf, NOTE_ADD, d[i].obj, (ckube__obj){0}, NULL, initial, false);
            ckube__obj_unref(old);
            break;
        }
        case CKUBE_DELTA_DELETED: {
            ckube__obj old = {0};
            ckube__store_delete_obj(inf->store, key, &old);
            ckube__obj last = ckube__obj_none(d[i].obj) ? old : d[i].obj;
            if (!ckube__obj_none(last))
                distribute(inf, NOTE_DELETE, last, (ckube__obj){0},
                           d[i].final_state_unknown ? key : NULL, false, false);
            ckube__obj_unref(old);
            break;
        }
        }
    }
}

/* The earliest resync due (0 = none). inf->mu held. */
static uint64_t next_resync_locked(ckube_shared_informer *inf)
{
    uint64_t next = 0;
    for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next)
        if (reg->resync_ns && (!next || reg->next_resync < next))
            next = reg->next_resync;
    return next;
}

/* When some handler's resync is due: marks exactly the due handlers as
 * syncing (the marks stay until the next due time, so the whole resync
 * reaches them) and queues a resync of the cache. */
static void maybe_resync(ckube_shared_informer *inf)
{
    uint64_t now = ckube_clock_now(inf->clock);
    pthread_mutex_lock(&inf->mu);
    uint64_t due = next_resync_locked(inf);
    bool any = due && now >= due;
    if (any) {
        for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next) {
            reg->syncing = reg->resync_ns && now >= reg->next_resync;
            if (reg->syncing)
                reg->next_resync = now + reg->resync_ns;
        }
    }
    pthread_mutex_unlock(&inf->mu);
    if (any) {
        CKUBE_V(4, "%s: resyncing", inf->name);
        ckube_delta_fifo_resync(inf->fifo);
    }
}

/* Trims the cache's unused trees when due; the next trim is due one
 * period later, or never while no tree is cached. */
static void maybe_trim(ckube_shared_informer *inf)
{
    uint64_t now = ckube_clock_now(inf->clock);
    if (inf->next_trim && now < inf->next_trim)
        return;
    bool due = inf->next_trim != 0;
    size_t left = due ? ckube__store_trim(inf->store) : ckube__store_cached_trees(inf->store);
    inf->next_trim = left ? now + TRIM_PERIOD : 0;
}

static void *controller_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-informer"); /* top -H, perf, gdb */
    ckube_shared_informer *inf = arg;
    for (;;) {
        pthread_mutex_lock(&inf->mu);
        uint64_t deadline = next_resync_locked(inf);
        pthread_mutex_unlock(&inf->mu);
        if (inf->next_trim && (!deadline || inf->next_trim < deadline))
            deadline = inf->next_trim;
        else if (!inf->next_trim && ckube__store_cached_trees(inf->store))
            deadline = ckube_clock_now(inf->clock) + TRIM_PERIOD; /* a poll, to notice them */
        ckube__delta_batch b = {
            .begin = batch_begin, .process = process_deltas, .end = batch_end, .ud = inf};
        int rc = ckube__delta_fifo_pop_objs(inf->fifo, deadline, POP_BATCH, &b);
        if (rc < 0)
            break;
        maybe_resync(inf);
        maybe_trim(inf);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle.                                                               */

ckube_shared_informer *ckube_shared_informer_new(ckube_list_watch *lw,
                                                 const ckube_informer_opts *opts)
{
    if (!lw)
        return NULL;
    ckube_informer_opts o = opts ? *opts : (ckube_informer_opts){0};
    ckube_shared_informer *inf = calloc(1, sizeof(*inf));
    if (!inf) {
        ckube_list_watch_free(lw);
        return NULL;
    }
    inf->lw = lw;
    pthread_mutex_init(&inf->mu, NULL);
    pthread_cond_init(&inf->cond, NULL);
    inf->name = strdup(o.name ? o.name : ckube_list_watch_description(lw));
    inf->clock = ckube_clock_or_real(o.clock);
    inf->default_resync = o.resync_ns;
    if (!inf->name)
        goto fail;
    ckube_store_opts so = {.name = inf->name, .detect_mutations = o.detect_mutations};
    if (!(inf->store = ckube_store_new(&so)))
        goto fail;
    for (size_t i = 0; i < o.nindexers; i++) {
        char *err = NULL;
        if (ckube_store_add_indexer(inf->store, &o.indexers[i], &err) != 0) {
            CKUBE_ERROR("%s: %s", inf->name, err ? err : "cannot add an indexer");
            free(err);
            goto fail;
        }
    }
    if (!(inf->fifo = ckube_delta_fifo_new(inf->store, inf->clock)))
        goto fail;
    ckube_reflector_opts ro = {.name = inf->name,
                               .clock = inf->clock,
                               .keep_managed_fields = o.keep_managed_fields,
                               .metadata_only = o.metadata_only,
                               .page_size = o.page_size,
                               .use_watch_list = o.use_watch_list,
                               .backoff = o.backoff,
                               .min_watch_timeout_s = o.min_watch_timeout_s,
                               .max_watch_timeout_s = o.max_watch_timeout_s};
    ckube__csink sink = ckube__delta_fifo_csink(inf->fifo);
    if (o.transform) {
        ckube__cobj_opts co = {.keep_managed_fields = o.keep_managed_fields,
                               .metadata_only = o.metadata_only};
        if (!(inf->transformer =
                  ckube__transformer_new(sink, o.transform, o.transform_ud, &co, inf->name)))
            goto fail;
        sink = ckube__transformer_csink(inf->transformer);
    }
    if (!(inf->reflector = ckube__reflector_new_compact(lw, sink, &ro)))
        goto fail;
    return inf;
fail:
    ckube_shared_informer_free(inf);
    return NULL;
}

static uint64_t clamp_resync(uint64_t ns)
{
    return ns && ns < CKUBE_MIN_RESYNC_NS ? CKUBE_MIN_RESYNC_NS : ns;
}

ckube_handler_reg *ckube_shared_informer_add_handler_with_resync(ckube_shared_informer *inf,
                                                                 const ckube_event_handler *h,
                                                                 uint64_t resync_ns)
{
    if (!inf || !h)
        return NULL;
    struct ckube_handler_reg *reg = calloc(1, sizeof(*reg));
    if (!reg)
        return NULL;
    reg->inf = inf;
    reg->h = *h;
    reg->resync_ns = clamp_resync(resync_ns);
    pthread_mutex_init(&reg->mu, NULL);
    pthread_cond_init(&reg->cond, NULL);
    pthread_mutex_lock(&inf->mu);
    if (inf->stopping) {
        pthread_mutex_unlock(&inf->mu);
        handler_free(reg);
        return NULL;
    }
    if (inf->started) {
        /* Late: replay the cache as adds (inf->mu keeps deltas out). */
        reg->next_resync = ckube_clock_now(inf->clock) + reg->resync_ns;
        ckube__obj *cur = NULL;
        size_t ncur = 0;
        if (ckube__store_snapshot(inf->store, &cur, &ncur) != 0 || handler_start(reg) != 0) {
            for (size_t i = 0; i < ncur; i++)
                ckube__obj_unref(cur[i]);
            free(cur);
            pthread_mutex_unlock(&inf->mu);
            handler_free(reg);
            return NULL;
        }
        for (size_t i = 0; i < ncur; i++) {
            struct ckube_object *l =
                lazy_new(cur[i], ckube_store_detects_mutations(inf->store) ? inf->name : NULL);
            if (l)
                enqueue(reg, NOTE_ADD, l, NULL, NULL, true);
            else
                CKUBE_ERROR("%s: out of memory: dropping an event", inf->name);
            lazy_unref(l);
            ckube__obj_unref(cur[i]);
        }
        free(cur);
    }
    bool kick = inf->started && reg->resync_ns;
    /* Append: handlers are served in registration order. */
    struct ckube_handler_reg **pp = &inf->handlers;
    while (*pp)
        pp = &(*pp)->next;
    *pp = reg;
    pthread_mutex_unlock(&inf->mu);
    /* The delta thread recomputes its resync deadline (outside inf->mu:
     * the FIFO's lock comes first). */
    if (kick)
        ckube__delta_fifo_kick(inf->fifo);
    return reg;
}

ckube_handler_reg *ckube_shared_informer_add_handler(ckube_shared_informer *inf,
                                                     const ckube_event_handler *h)
{
    if (!inf)
        return NULL;
    return ckube_shared_informer_add_handler_with_resync(inf, h, inf->default_resync);
}

int ckube_shared_informer_remove_handler(ckube_shared_informer *inf, ckube_handler_reg *reg)
{
    if (!inf || !reg)
        return -1;
    pthread_mutex_lock(&reg->mu);
    bool self = reg->has_thread && pthread_equal(reg->thread, pthread_self());
    pthread_mutex_unlock(&reg->mu);
    if (self)
        return -1;
    pthread_mutex_lock(&inf->mu);
    if (inf->stopping) {
        /* Stopped (or stopping): its thread is (being) joined already and
         * the informer frees it; the handler list stays as it is. */
        pthread_mutex_unlock(&inf->mu);
        return 0;
    }
    struct ckube_handler_reg **pp = &inf->handlers;
    while (*pp && *pp != reg)
        pp = &(*pp)->next;
    bool found = *pp != NULL;
    if (found)
        *pp = reg->next;
    pthread_mutex_unlock(&inf->mu);
    if (!found)
        return -1;
    handler_stop(reg);
    handler_free(reg);
    return 0;
}

bool ckube_handler_reg_has_synced(ckube_handler_reg *reg)
{
    if (!reg || !ckube_delta_fifo_has_synced(reg->inf->fifo))
        return false;
    pthread_mutex_lock(&reg->mu);
    if (!reg->target_set) {
        /* Everything of the initial list is queued by now. */
        reg->target_set = true;
        reg->sync_target = reg->enqueued;
    }
    bool done = reg->processed >= reg->sync_target;
    pthread_mutex_unlock(&reg->mu);
    return done;
}

int ckube_shared_informer_add_indexer(ckube_shared_informer *inf, const ckube_indexer *ix,
                                      char **err)
{
    return ckube_store_add_indexer(inf->store, ix, err);
}

int ckube_shared_informer_start(ckube_shared_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    if (inf->started || inf->stopping) {
        pthread_mutex_unlock(&inf->mu);
        return -1;
    }
    uint64_t now = ckube_clock_now(inf->clock);
    for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next) {
        reg->next_resync = now + reg->resync_ns;
        if (handler_start(reg) != 0)
            goto fail;
    }
    int rc = pthread_create(&inf->controller, NULL, controller_main, inf);
    if (rc != 0) {
        CKUBE_ERROR("%s: cannot start the informer thread: %s", inf->name, strerror(rc));
        goto fail;
    }
    inf->started = true;
    if (ckube_reflector_start(inf->reflector) != 0) {
        pthread_mutex_unlock(&inf->mu);
        ckube_shared_informer_stop(inf);
        return -1;
    }
    pthread_mutex_unlock(&inf->mu);
    CKUBE_V(2, "%s: informer started", inf->name);
    return 0;
fail:
    /* Unusable from now on (as after a stop). */
    inf->stopping = inf->stopped = true;
    pthread_mutex_unlock(&inf->mu);
    for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next)
        handler_stop(reg);
    return -1;
}

void ckube_shared_informer_stop(ckube_shared_informer *inf)
{
    if (!inf)
        return;
    pthread_mutex_lock(&inf->mu);
    if (inf->stopping) {
        /* Someone else is stopping it: wait until they are done. */
        while (!inf->stopped)
            pthread_cond_wait(&inf->cond, &inf->mu);
        pthread_mutex_unlock(&inf->mu);
        return;
    }
    inf->stopping = true;
    bool started = inf->started;
    pthread_mutex_unlock(&inf->mu);

    ckube_reflector_stop(inf->reflector);
    ckube_delta_fifo_close(inf->fifo);
    if (started)
        pthread_join(inf->controller, NULL);
    /* With `stopping` set nothing changes the handler list any more (add
     * refuses, remove leaves it), so it can be walked unlocked: a handler
     * finishing its callback may need inf->mu. */
    for (struct ckube_handler_reg *reg = inf->handlers; reg; reg = reg->next)
        handler_stop(reg);
    ckube_store_check_mutations(inf->store);

    pthread_mutex_lock(&inf->mu);
    inf->stopped = true;
    pthread_cond_broadcast(&inf->cond);
    pthread_mutex_unlock(&inf->mu);
    if (started)
        CKUBE_V(2, "%s: informer stopped", inf->name);
}

void ckube_shared_informer_free(ckube_shared_informer *inf)
{
    if (!inf)
        return;
    if (inf->reflector && inf->fifo)
        ckube_shared_informer_stop(inf);
    struct ckube_handler_reg *reg = inf->handlers;
    while (reg) {
        struct ckube_handler_reg *next = reg->next;
        handler_stop(reg);
        handler_free(reg);
        reg = next;
    }
    ckube_reflector_free(inf->reflector);
    ckube__transformer_free(inf->transformer);
    ckube_delta_fifo_free(inf->fifo);
    ckube_store_free(inf->store);
    ckube_list_watch_free(inf->lw);
    pthread_cond_destroy(&inf->cond);
    pthread_mutex_destroy(&inf->mu);
    free(inf->name);
    free(inf);
}

/* ------------------------------------------------------------------------ */
/* Queries.                                                                 */

bool ckube_shared_informer_is_started(ckube_shared_informer *inf)
{
    pthread_mutex_lock(&inf->mu);
    bool s = inf->started && !inf->stopping;
    pthread_mutex_unlock(&inf->mu);
    return s;
}

bool ckube_shared_informer_has_synced(ckube_shared_informer *inf)
{
    return ckube_delta_fifo_has_synced(inf->fifo);
}

static void sleep_real_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

bool ckube_wait_for_cache_sync(ckube_shared_informer *const *informers, size_t n,
                               uint64_t timeout_ns)
{
    uint64_t *deadline = calloc(n ? n : 1, sizeof(uint64_t));
    if (!deadline)
        return false;
    for (size_t i = 0; i < n; i++)
        deadline[i] = timeout_ns ? ckube_clock_now(informers[i]->clock) + timeout_ns : 0;
    bool ok = false;
    for (;;) {
        bool all = true, give_up = false;
        for (size_t i = 0; i < n && !give_up; i++) {
            ckube_shared_informer *inf = informers[i];
            if (ckube_shared_informer_has_synced(inf))
                continue;
            all = false;
            if (!ckube_shared_informer_is_started(inf)) {
                CKUBE_WARN("%s: waiting for a cache sync of an informer that is not running",
                           inf->name);
                give_up = true;
            } else if (deadline[i] && ckube_clock_now(inf->clock) >= deadline[i]) {
                CKUBE_ERROR("%s: timed out waiting for the cache to sync", inf->name);
                give_up = true;
            }
        }
        if (all || give_up) {
            ok = all;
            break;
        }
        /* Polling, as client-go does; the timeout itself is on the clock. */
        sleep_real_ms(2);
    }
    free(deadline);
    return ok;
}

char *ckube_shared_informer_last_sync_resource_version(ckube_shared_informer *inf)
{
    return ckube_reflector_last_sync_resource_version(inf->reflector);
}

ckube_store *ckube_shared_informer_store(ckube_shared_informer *inf)
{
    return inf->store;
}

ckube_lister ckube_shared_informer_lister(ckube_shared_informer *inf)
{
    return (ckube_lister){.store = inf->store};
}

size_t ckube_shared_informer_object_count(ckube_shared_informer *inf)
{
    return ckube_store_len(inf->store);
}

size_t ckube_shared_informer_bytes(ckube_shared_informer *inf)
{
    return ckube_store_bytes(inf->store);
}

const char *ckube_shared_informer_name(ckube_shared_informer *inf)
{
    return inf->name;
}
