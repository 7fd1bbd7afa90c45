/* queue.c - the work queue: dedup + processing sets, FIFO, delays, rate
 * limiting and metrics (see ckube/workqueue.h).
 *
 * Every distinct key is interned once as a wq_item (key bytes inline)
 * in an open-addressing table; "dirty", "processing" and "waiting for a
 * delay" are flags/indices on that item, so an add/get/done cycle on a
 * known key allocates nothing. Items no longer referenced are kept on an
 * idle list (up to IDLE_MAX) for reuse and freed beyond that.
 *
 * Delays need no thread of their own: the delay heap is drained lazily by
 * whoever looks at the queue (get, len, the metrics collector), and a
 * getter with nothing to do sleeps on the clock until the earliest ready
 * time. A key promoted from the heap counts as added at its ready time,
 * which is what a dedicated timer thread would have done.
 *
 * One mutex guards everything; metric updates are lock-free atomics and
 * histogram observations happen after the mutex is released.
 */
#include <ckube/log.h>
#include <ckube/workqueue.h>

#include "wq_table.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { ITEM_DIRTY = 1u, ITEM_PROCESSING = 2u, ITEM_IDLE = 4u };

/* Unreferenced items kept for reuse, so hot keys never hit malloc. */
#define IDLE_MAX 1024u
#define NOT_WAITING SIZE_MAX

typedef struct wq_item {
    uint64_t hash;
    uint64_t ready_at;   /* while in the delay heap */
    uint64_t seq;        /* heap tie-break: first delayed first out */
    uint64_t add_time;   /* metrics: when it last became dirty */
    uint64_t start_time; /* metrics: when a worker got it */
    /* Links for exactly one of: the processing list (metrics on and
     * ITEM_PROCESSING) or the idle list (ITEM_IDLE). */
    struct wq_item *prev, *next;
    size_t heap_idx; /* NOT_WAITING unless in the delay heap */
    size_t len;
    unsigned flags;
    char key[];
} wq_item;

typedef struct item_list {
    wq_item *head, *tail;
    size_t n;
} item_list;

typedef struct item_ring {
    wq_item **buf;
    size_t head, count, cap; /* cap: 0 or a power of two */
} item_ring;

struct ckube_workqueue {
    pthread_mutex_t mu;
    pthread_cond_t cond;       /* getters wait here */
    pthread_cond_t drain_cond; /* shutdown_with_drain waits here */
    ckube_clock *clock;
    wq_table items; /* key -> wq_item, every item the queue knows */
    item_ring fifo; /* dirty and not processing, in add order */
    wq_item **heap; /* delayed items, min-heap on (ready_at, seq) */
    size_t heap_len, heap_cap;
    uint64_t heap_seq;
    item_list idle;
    item_list processing; /* only maintained with metrics */
    size_t n_dirty;
    size_t n_processing;
    unsigned getters_waiting;
    unsigned drain_waiters;
    bool shutting_down;
    bool drain;
    ckube_rate_limiter *rl;

    bool metrics;
    ckube_metrics_registry *reg;
    ckube_metrics_collector *collector;
    ckube_metric *m_depth, *m_adds, *m_latency, *m_work, *m_unfinished, *m_longest, *m_retries;
};

/* ---- small containers ---- */

static void list_push(item_list *l, wq_item *it)
{
    it->prev = l->tail;
    it->next = NULL;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
    l->n++;
}

static void list_unlink(item_list *l, wq_item *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        l->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        l->tail = it->prev;
    it->prev = it->next = NULL;
    l->n--;
}

/* Makes room for `need` entries. The ring only ever holds items of the
 * table, so callers reserve items.len slots before creating an item and
 * pushes can then never fail. */
static int ring_reserve(item_ring *r, size_t need)
{
    if (need <= r->cap)
        return 0;
    size_t cap = r->cap ? r->cap : 16;
    while (cap < need)
        cap *= 2;
    wq_item **buf = malloc(cap * sizeof(*buf));
    if (!buf)
        return -1;
    for (size_t i = 0; i < r->count; i++)
        buf[i] = r->buf[(r->head + i) & (r->cap - 1)];
    free(r->buf);
    r->buf = buf;
    r->head = 0;
    r->cap = cap;
    return 0;
}

static void ring_push_back(item_ring *r, wq_item *it)
{
    r->buf[(r->head + r->count) & (r->cap - 1)] = it;
    r->count++;
}

static void ring_push_front(item_ring *r, wq_item *it)
{
    r->head = (r->head - 1) & (r->cap - 1);
    r->buf[r->head] = it;
    r->count++;
}

static wq_item *ring_pop(item_ring *r)
{
    wq_item *it = r->buf[r->head];
    r->head = (r->head + 1) & (r->cap - 1);
    r->count--;
    return it;
}

/* ---- the delay heap ---- */

static bool heap_less(const wq_item *a, const wq_item *b)
{
    return a->ready_at < b->ready_at || (a->ready_at == b->ready_at && a->seq < b->seq);
}

static void heap_set(ckube_workqueue *q, size_t i, wq_item *it)
{
    q->heap[i] = it;
    it->heap_idx = i;
}

static void heap_up(ckube_workqueue *q, size_t i)
{
    wq_item *it = q->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(it, q->heap[parent]))
            break;
        heap_set(q, i, q->heap[parent]);
        i = parent;
    }
    heap_set(q, i, it);
}

static void heap_down(ckube_workqueue *q, size_t i)
{
    wq_item *it = q->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->heap_len)
            break;
        if (c + 1 < q->heap_len && heap_less(q->heap[c + 1], q->heap[c]))
            c++;
        if (!heap_less(q->heap[c], it))
            break;
        heap_set(q, i, q->heap[c]);
        i = c;
    }
    heap_set(q, i, it);
}

static wq_item *heap_pop(ckube_workqueue *q)
{
    wq_item *top = q->heap[0];
    q->heap_len--;
    if (q->heap_len > 0) {
        q->heap[0] = q->heap[q->heap_len];
        heap_down(q, 0);
    }
    top->heap_idx = NOT_WAITING;
    return top;
}

static int heap_reserve(ckube_workqueue *q)
{
    if (q->heap_len < q->heap_cap)
        return 0;
    size_t cap = q->heap_cap ? q->heap_cap * 2 : 16;
    wq_item **h = realloc(q->heap, cap * sizeof(*h));
    if (!h)
        return -1;
    q->heap = h;
    q->heap_cap = cap;
    return 0;
}

/* ---- items ---- */

static bool item_unused(const wq_item *it)
{
    return (it->flags & (ITEM_DIRTY | ITEM_PROCESSING)) == 0 && it->heap_idx == NOT_WAITING;
}

static void item_free(ckube_workqueue *q, wq_item *it)
{
    wq_table_remove(&q->items, it->key, it->hash);
    free(it);
}

/* Called when an item may have lost its last reference: park it on the
 * idle list, evicting the oldest idle item beyond IDLE_MAX. */
static void item_release(ckube_workqueue *q, wq_item *it)
{
    if (!item_unused(it) || (it->flags & ITEM_IDLE))
        return;
    it->flags |= ITEM_IDLE;
    list_push(&q->idle, it);
    if (q->idle.n > IDLE_MAX) {
        wq_item *old = q->idle.head;
        list_unlink(&q->idle, old);
        item_free(q, old);
    }
}

/* The item for key, created if new, taken off the idle list if idle.
 * NULL when out of memory. Caller holds q->mu. */
static wq_item *item_get(ckube_workqueue *q, const char *key, size_t len, uint64_t h)
{
    wq_item *it = wq_table_get(&q->items, key, h);
    if (it) {
        if (it->flags & ITEM_IDLE) {
            it->flags &= ~ITEM_IDLE;
            list_unlink(&q->idle, it);
        }
        return it;
    }
    if (ring_reserve(&q->fifo, q->items.len + 1) != 0)
        return NULL;
    it = malloc(sizeof(*it) + len + 1);
    if (!it)
        return NULL;
    memset(it, 0, sizeof(*it));
    it->hash = h;
    it->len = len;
    it->heap_idx = NOT_WAITING;
    memcpy(it->key, key, len + 1);
    if (wq_table_insert(&q->items, it->key, h, it) != 0) {
        free(it);
        return NULL;
    }
    return it;
}

static wq_item *item_of_key(const char *key)
{
    return (wq_item *)(void *)(key - offsetof(wq_item, key));
}

/* ---- core operations (caller holds q->mu) ---- */

static void wake_getter(ckube_workqueue *q)
{
    if (q->getters_waiting)
        pthread_cond_signal(&q->cond);
}

/* Marks it dirty and queues it unless it is being processed (done will
 * queue it). `now` is the add time for the queue-latency metric. */
static void add_locked(ckube_workqueue *q, wq_item *it, uint64_t now)
{
    if (it->flags & ITEM_DIRTY)
        return;
    it->flags |= ITEM_DIRTY;
    q->n_dirty++;
    if (q->metrics) {
        ckube_counter_inc(q->m_adds);
        it->add_time = now;
    }
    if (it->flags & ITEM_PROCESSING)
        return;
    ring_push_back(&q->fifo, it);
    wake_getter(q);
}

/* Moves every delayed item whose time has come into the queue. */
static void promote_ready(ckube_workqueue *q)
{
    if (q->heap_len == 0 || q->shutting_down)
        return;
    uint64_t now = ckube_clock_now(q->clock);
    while (q->heap_len > 0 && q->heap[0]->ready_at <= now) {
        wq_item *it = heap_pop(q);
        add_locked(q, it, it->ready_at);
        item_release(q, it);
    }
}

static void processing_ended(ckube_workqueue *q, wq_item *it)
{
    it->flags &= ~ITEM_PROCESSING;
    q->n_processing--;
    if (q->metrics)
        list_unlink(&q->processing, it);
    if (q->n_processing == 0 && q->drain_waiters)
        pthread_cond_broadcast(&q->drain_cond);
}

/* ---- public API ---- */

int ckube_workqueue_add(ckube_workqueue *q, const char *key)
{
    if (!q || !key)
        return -1;
    size_t len = strlen(key);
    uint64_t h = wq_hash(key, len);
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (!q->shutting_down) {
        wq_item *it = item_get(q, key, len, h);
        if (it)
            add_locked(q, it,
                       q->metrics && !(it->flags & ITEM_DIRTY) ? ckube_clock_now(q->clock) : 0);
        else
            rc = -1;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Puts it in the delay heap, or moves its ready time earlier. */
static int delay_locked(ckube_workqueue *q, wq_item *it, uint64_t ready)
{
    if (it->heap_idx != NOT_WAITING) {
        if (ready >= it->ready_at)
            return 0;
        it->ready_at = ready;
        heap_up(q, it->heap_idx);
    } else {
        if (heap_reserve(q) != 0)
            return -1;
        it->ready_at = ready;
        it->seq = q->heap_seq++;
        q->heap[q->heap_len] = it;
        it->heap_idx = q->heap_len++;
        heap_up(q, it->heap_idx);
    }
    /* A new earliest deadline: sleeping getters must recompute theirs. */
    if (it->heap_idx == 0 && q->getters_waiting)
        pthread_cond_broadcast(&q->cond);
    return 0;
}

int ckube_workqueue_add_after(ckube_workqueue *q, const char *key, uint64_t delay_ns)
{
    if (!q || !key)
        return -1;
    size_t len = strlen(key);
    uint64_t h = wq_hash(key, len);
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (q->shutting_down)
        goto out;
    if (q->metrics)
        ckube_counter_inc(q->m_retries);
    wq_item *it = item_get(q, key, len, h);
    if (!it) {
        rc = -1;
        goto out;
    }
    uint64_t now = ckube_clock_now(q->clock);
    if (delay_ns == 0)
        add_locked(q, it, now);
    else
        rc = delay_locked(q, it, sat_add(now, delay_ns));
    item_release(q, it);
out:
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int ckube_workqueue_add_rate_limited(ckube_workqueue *q, const char *key)
{
    if (!q || !key)
        return -1;
    return ckube_workqueue_add_after(q, key, ckube_rate_limiter_when(q->rl, key));
}

void ckube_workqueue_forget(ckube_workqueue *q, const char *key)
{
    if (q)
        ckube_rate_limiter_forget(q->rl, key);
}

int ckube_workqueue_num_requeues(ckube_workqueue *q, const char *key)
{
    return q ? ckube_rate_limiter_num_requeues(q->rl, key) : 0;
}

const char *ckube_workqueue_get_borrowed(ckube_workqueue *q)
{
    if (!q)
        return NULL;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        promote_ready(q);
        if (q->fifo.count > 0)
            break;
        if (q->shutting_down) {
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        uint64_t deadline = q->heap_len ? q->heap[0]->ready_at : 0;
        q->getters_waiting++;
        ckube_clock_cond_wait(q->clock, &q->cond, &q->mu, deadline);
        q->getters_waiting--;
    }
    wq_item *it = ring_pop(&q->fifo);
    it->flags = (it->flags & ~ITEM_DIRTY) | ITEM_PROCESSING;
    q->n_dirty--;
    q->n_processing++;
    uint64_t waited = 0;
    if (q->metrics) {
        uint64_t now = ckube_clock_now(q->clock);
        waited = now > it->add_time ? now - it->add_time : 0;
        it->start_time = now;
        list_push(&q->processing, it);
    }
    /* Several keys may have become ready at once: pass the baton. */
    if (q->fifo.count > 0)
        wake_getter(q);
    bool metrics = q->metrics;
    pthread_mutex_unlock(&q->mu);
    if (metrics)
        ckube_histogram_observe(q->m_latency, (double)waited / 1e9);
    return it->key;
}

char *ckube_workqueue_get(ckube_workqueue *q)
{
    const char *key = ckube_workqueue_get_borrowed(q);
    if (!key)
        return NULL;
    /* The item cannot go away while we hold it as processing. */
    wq_item *it = item_of_key(key);
    char *copy = malloc(it->len + 1);
    if (copy) {
        memcpy(copy, key, it->len + 1);
        return copy;
    }
    CKUBE_ERROR("workqueue: out of memory copying key %s; leaving it queued", key);
    pthread_mutex_lock(&q->mu);
    processing_ended(q, it);
    if (!(it->flags & ITEM_DIRTY)) {
        it->flags |= ITEM_DIRTY;
        q->n_dirty++;
    }
    ring_push_front(&q->fifo, it);
    wake_getter(q);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int ckube_workqueue_done(ckube_workqueue *q, const char *key)
{
    if (!q || !key)
        return -1;
    size_t len = strlen(key);
    uint64_t h = wq_hash(key, len);
    /* q->metrics never changes after creation: reading it unlocked is
     * fine, and reading the clock before locking keeps the hold short. */
    uint64_t now = q->metrics ? ckube_clock_now(q->clock) : 0;
    pthread_mutex_lock(&q->mu);
    wq_item *it = wq_table_get(&q->items, key, h);
    if (!it || !(it->flags & ITEM_PROCESSING)) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    uint64_t worked = now > it->start_time ? now - it->start_time : 0;
    processing_ended(q, it);
    if (it->flags & ITEM_DIRTY) {
        ring_push_back(&q->fifo, it);
        wake_getter(q);
    } else {
        item_release(q, it);
    }
    bool metrics = q->metrics;
    pthread_mutex_unlock(&q->mu);
    if (metrics)
        ckube_histogram_observe(q->m_work, (double)worked / 1e9);
    return 0;
}

size_t ckube_workqueue_len(ckube_workqueue *q)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    promote_ready(q);
    size_t n = q->fifo.count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

void ckube_workqueue_shutdown(ckube_workqueue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->shutting_down = true;
    q->drain = false;
    pthread_cond_broadcast(&q->cond);
    pthread_cond_broadcast(&q->drain_cond);
    pthread_mutex_unlock(&q->mu);
}

void ckube_workqueue_shutdown_with_drain(ckube_workqueue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->shutting_down = true;
    q->drain = true;
    pthread_cond_broadcast(&q->cond);
    while (q->n_processing > 0 && q->drain) {
        q->drain_waiters++;
        pthread_cond_wait(&q->drain_cond, &q->mu);
        q->drain_waiters--;
    }
    pthread_mutex_unlock(&q->mu);
}

int ckube_workqueue_shutting_down(ckube_workqueue *q)
{
    if (!q)
        return 1;
    pthread_mutex_lock(&q->mu);
    int s = q->shutting_down;
    pthread_mutex_unlock(&q->mu);
    return s;
}

/* ---- metrics ---- */

/* Gauges computed at scrape time: depth, and how long the keys being
 * processed have been running (client-go updates these every 500 ms from
 * a goroutine; computing them on demand is exact and costs nothing
 * between scrapes). */
static void collect(void *ctx)
{
    ckube_workqueue *q = ctx;
    pthread_mutex_lock(&q->mu);
    promote_ready(q);
    uint64_t now = ckube_clock_now(q->clock);
    double total = 0, longest = 0;
    for (const wq_item *it = q->processing.head; it; it = it->next) {
        double age = now > it->start_time ? (double)(now - it->start_time) / 1e9 : 0;
        total += age;
        if (age > longest)
            longest = age;
    }
    size_t depth = q->n_dirty;
    pthread_mutex_unlock(&q->mu);
    ckube_gauge_set(q->m_depth, (double)depth);
    ckube_gauge_set(q->m_unfinished, total);
    ckube_gauge_set(q->m_longest, longest);
}

static ckube_metric *metric_for(ckube_metrics_registry *reg, ckube_metric_type type,
                                const char *name, const char *help, const char *queue_name)
{
    static const char *const labels[] = {"name", NULL};
    double buckets[10];
    ckube_metrics_exponential_buckets(1e-8, 10, 10, buckets);
    ckube_metric_opts o = {.name = name,
                           .help = help,
                           .type = type,
                           .label_names = labels,
                           .buckets = type == CKUBE_METRIC_HISTOGRAM ? buckets : NULL,
                           .n_buckets = type == CKUBE_METRIC_HISTOGRAM ? 10 : 0};
    char *err = NULL;
    ckube_metric_family *f = ckube_metrics_register(reg, &o, &err);
    if (!f) {
        CKUBE_WARN("workqueue %s: metrics disabled: %s", queue_name, err ? err : "no memory");
        free(err);
        return NULL;
    }
    return ckube_metric_with(f, (const char *const[]){queue_name});
}

static void setup_metrics(ckube_workqueue *q, ckube_metrics_registry *reg, const char *name)
{
    q->reg = reg;
    q->m_depth =
        metric_for(reg, CKUBE_METRIC_GAUGE, "workqueue_depth",
                   "Current number of keys in the workqueue waiting to be processed.", name);
    q->m_adds = metric_for(reg, CKUBE_METRIC_COUNTER, "workqueue_adds_total",
                           "Total number of adds handled by the workqueue.", name);
    q->m_latency =
        metric_for(reg, CKUBE_METRIC_HISTOGRAM, "workqueue_queue_duration_seconds",
                   "Seconds a key waits in the workqueue before a worker takes it.", name);
    q->m_work = metric_for(reg, CKUBE_METRIC_HISTOGRAM, "workqueue_work_duration_seconds",
                           "Seconds a worker spends processing a key from the workqueue.", name);
    q->m_unfinished =
        metric_for(reg, CKUBE_METRIC_GAUGE, "workqueue_unfinished_work_seconds",
                   "Seconds of work in progress not yet observed by work_duration. Large "
                   "values mean stuck workers; its growth rate is the number of stuck workers.",
                   name);
    q->m_longest =
        metric_for(reg, CKUBE_METRIC_GAUGE, "workqueue_longest_running_processor_seconds",
                   "Seconds the longest-running worker of the workqueue has been "
                   "processing its current key.",
                   name);
    q->m_retries =
        metric_for(reg, CKUBE_METRIC_COUNTER, "workqueue_retries_total",
                   "Total number of retries (delayed adds) handled by the workqueue.", name);
    q->metrics = true;
    q->collector = ckube_metrics_add_collector(reg, collect, q);
}

/* ---- lifecycle ---- */

ckube_workqueue *ckube_workqueue_new(const ckube_workqueue_config *cfg)
{
    ckube_workqueue_config def = {0};
    if (!cfg)
        cfg = &def;
    ckube_workqueue *q = calloc(1, sizeof(*q));
    if (!q) {
        ckube_rate_limiter_free(cfg->rate_limiter);
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    ckube_cond_init(&q->cond);
    pthread_cond_init(&q->drain_cond, NULL);
    q->clock = ckube_clock_or_real(cfg->clock);
    q->rl = cfg->rate_limiter ? cfg->rate_limiter : ckube_rate_limiter_default_controller(q->clock);
    if (!q->rl) {
        ckube_workqueue_free(q);
        return NULL;
    }
    if (cfg->name && *cfg->name) {
        ckube_metrics_registry *reg = cfg->metrics ? cfg->metrics : ckube_metrics_default();
        if (reg)
            setup_metrics(q, reg, cfg->name);
    }
    return q;
}

void ckube_workqueue_free(ckube_workqueue *q)
{
    if (!q)
        return;
    if (q->collector)
        ckube_metrics_remove_collector(q->reg, q->collector);
    if (q->metrics) {
        ckube_gauge_set(q->m_depth, 0);
        ckube_gauge_set(q->m_unfinished, 0);
        ckube_gauge_set(q->m_longest, 0);
    }
    for (size_t i = 0; i < q->items.cap; i++)
        if (q->items.slots[i].key)
            free(q->items.slots[i].val);
    wq_table_destroy(&q->items);
    free(q->fifo.buf);
    free(q->heap);
    ckube_rate_limiter_free(q->rl);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cond);
    pthread_cond_destroy(&q->drain_cond);
    free(q);
}
