/* reflector.c - list, then watch, forever (see ckube/informer.h; the
 * behaviour of client-go's Reflector).
 *
 * One thread runs the loop:
 *
 *   list (paged) -> sink.replace -> watch from the list's RV -> events
 *     clean close            -> watch again from the last RV (no relist)
 *     transport error, 429,
 *     5xx, very short watch  -> backoff, watch again from the last RV
 *     410 / other errors     -> backoff, relist (from "" after a 410)
 *
 * Every wait is on the reflector's clock and ends early on stop.
 *
 * Objects travel as compact objects (informer_internal.h): a list-watch
 * with compact operations (the REST client's) decodes responses straight
 * into them; objects from any other list-watch are serialized once. What
 * the options drop (managedFields, all but the metadata) is left out on
 * the way. A reflector made with the public constructor hands its sink
 * jansson trees built from them. */
#include "ckube/informer.h"
#include "informer/informer_internal.h"

#include "ckube/json.h"
#include "ckube/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PAGE_SIZE 500
#define DEFAULT_BACKOFF_INITIAL CKUBE_MS(800)
#define DEFAULT_BACKOFF_MAX CKUBE_SEC(30)
#define DEFAULT_BACKOFF_RESET CKUBE_SEC(120)
#define DEFAULT_JITTER 1.0
#define DEFAULT_MIN_WATCH_TIMEOUT 300
#define DEFAULT_MAX_WATCH_TIMEOUT 600
/* A watch that ends this soon without a single event is treated as a
 * failure (client-go's "very short watch"). */
#define SHORT_WATCH CKUBE_SEC(1)

struct ckube_reflector {
    ckube_list_watch *lw;              /* borrowed */
    const ckube__lw_compact_ops *cops; /* lw's compact operations, or NULL */
    ckube__csink sink;
    ckube_reflector_sink jsink; /* the public constructor's (trees) */
    char *name;
    char *prefix;     /* "name: " for log lines, or "" when name == what */
    const char *what; /* the lw description (borrowed) */
    ckube_clock *clock;
    ckube__cobj_opts co; /* what to keep of each object */
    int64_t page_size;
    int64_t min_timeout_s, max_timeout_s;

    /* Backoff (reflector thread only). */
    uint64_t bo_initial, bo_max, bo_reset;
    double bo_jitter;
    uint64_t bo_current;
    uint64_t bo_last_start;
    bool bo_used;

    /* Relist state (reflector thread only). */
    bool rv_unavailable;     /* the last RV is gone: list from "" */
    bool paginated_result;   /* an RV=0 list came back paged */
    bool use_watch_list;     /* sync through a watch with initial events */
    bool watch_list_refused; /* the server refused one: list from now on */
    uint64_t rand_state;

    pthread_mutex_t mu; /* guards what follows */
    pthread_cond_t cond;
    bool started, stopping, joining, joined;
    pthread_t thread;
    void *stream;  /* the open watch, for stop */
    char *last_rv; /* owned */
};

/* ------------------------------------------------------------------------ */
/* Small helpers.                                                           */

static uint64_t next_rand(ckube_reflector *r)
{
    /* xorshift64*: plenty for jitter and timeouts. */
    uint64_t x = r->rand_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->rand_state = x;
    return x * 2685821657736338717ull;
}

static double rand_unit(ckube_reflector *r)
{
    return (double)(next_rand(r) >> 11) / (double)(1ull << 53);
}

static bool is_stopping(ckube_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    bool s = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return s;
}

static void set_last_rv(ckube_reflector *r, const char *rv)
{
    if (!rv || !*rv)
        return;
    char *copy = strdup(rv);
    if (!copy)
        return;
    pthread_mutex_lock(&r->mu);
    free(r->last_rv);
    r->last_rv = copy;
    pthread_mutex_unlock(&r->mu);
}

/* Waits `ns` on the clock; returns false when stopped meanwhile. */
static bool wait_or_stop(ckube_reflector *r, uint64_t ns)
{
    pthread_mutex_lock(&r->mu);
    uint64_t deadline = ckube_clock_now(r->clock) + ns;
    while (!r->stopping)
        if (ckube_clock_cond_wait(r->clock, &r->cond, &r->mu, deadline) == ETIMEDOUT)
            break;
    bool ok = !r->stopping;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* The next backoff step: initial, doubling up to max, back to initial when
 * none was needed for `reset`, plus up to jitter*delay at random. */
static uint64_t next_backoff(ckube_reflector *r)
{
    uint64_t now = ckube_clock_now(r->clock);
    if (!r->bo_used || now - r->bo_last_start > r->bo_reset)
        r->bo_current = r->bo_initial;
    r->bo_used = true;
    r->bo_last_start = now;
    uint64_t d = r->bo_current;
    r->bo_current = r->bo_current > r->bo_max / 2 ? r->bo_max : r->bo_current * 2;
    if (r->bo_current > r->bo_max)
        r->bo_current = r->bo_max;
    if (r->bo_jitter > 0)
        d += (uint64_t)(rand_unit(r) * r->bo_jitter * (double)d);
    return d;
}

/* Event type names for logs (not the client's function: programs using a
 * fake list-watch need not link the REST client). */
static const char *event_name(ckube_watch_event_type t)
{
    switch (t) {
    case CKUBE_WATCH_ADDED:
        return "ADDED";
    case CKUBE_WATCH_MODIFIED:
        return "MODIFIED";
    case CKUBE_WATCH_DELETED:
        return "DELETED";
    case CKUBE_WATCH_BOOKMARK:
        return "BOOKMARK";
    case CKUBE_WATCH_ERROR:
        return "ERROR";
    }
    return "UNKNOWN";
}

/* The error text for logs: the server's message, or what the code means. */
static const char *status_text(const ckube_status *st)
{
    if (!st)
        return "unknown error";
    if (st->message && *st->message)
        return st->message;
    if (st->code == 404)
        return "the server could not find the requested resource";
    if (st->code == 0)
        return "no answer from the server";
    return st->reason && *st->reason ? st->reason : "request failed";
}

static bool is_expired(const ckube_status *st)
{
    if (!st)
        return false;
    if (st->code == 410)
        return true;
    /* A resourceVersion newer than the server has: start over as well. */
    return st->code == 504 && st->message && strstr(st->message, "Too large resource version");
}

static bool is_retriable_watch_error(const ckube_status *st)
{
    return st && (st->code == 0 || st->code == 429 || st->code >= 500) && !is_expired(st);
}

static uint64_t retry_after_ns(const ckube_status *st)
{
    if (st && st->code == 429 && st->retry_after_seconds > 0)
        return CKUBE_SEC(st->retry_after_seconds);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* List.                                                                    */

/* One list call through a list-watch without compact operations: the
 * page's objects become compact objects appended to out (as the compact
 * list operation does). 0, -1 with *st, or -2 when the answer is not a
 * list. */
static int list_generic(ckube_reflector *r, const ckube_list_opts *o, ckube__clist *out,
                        ckube_status **st)
{
    json_t *page = NULL;
    if (ckube_list_watch_list(r->lw, o, &page, st) != 0)
        return -1;
    json_t *items = json_object_get(page, "items");
    if (!json_is_object(page) || (items && !json_is_array(items) && !json_is_null(items))) {
        json_decref(page);
        return -2;
    }
    size_t i;
    json_t *item;
    int rc = 0;
    json_array_foreach(items, i, item)
    {
        if (!json_is_object(item)) {
            out->skipped++;
            continue;
        }
        ckube__cobj *c = ckube__cobj_from_json(item, &r->co);
        if (!c || ckube__clist_push(out, c) != 0) {
            ckube__cobj_unref(c);
            *st = ckube_status_internal("out of memory");
            rc = -1;
            break;
        }
    }
    json_t *meta = json_object_get(page, "metadata");
    const char *prv = json_string_value(json_object_get(meta, "resourceVersion"));
    const char *next = json_string_value(json_object_get(meta, "continue"));
    free(out->resource_version);
    free(out->continue_token);
    out->resource_version = prv && *prv ? strdup(prv) : NULL;
    out->continue_token = next && *next ? strdup(next) : NULL;
    json_decref(page);
    return rc;
}

/* A list on its way to an incremental sink: objects go over in batches
 * as they are decoded (one FIFO lock per batch). */
#define FEED_BATCH 64
/* Lists smaller than this do not bother with arena_reserve. */
#define RESERVE_FROM ((size_t)1 << 20)

typedef struct feed {
    ckube_reflector *r;
    ckube__cobj *batch[FEED_BATCH];
    size_t n, total;
    bool failed;
    size_t bytes, reserved; /* of the objects so far / see arena_reserve */
    void *held;             /* see arena_reserve */
} feed;

/* glibc grows the heap of a thread's arena by what one allocation needs,
 * a page at a time, each step an mprotect call that splits and merges
 * mappings, and a page fault on the new page when the chunk header is
 * written: building a large list's blocks in fresh memory costs
 * thousands of each (a third of the thread's time at 100k objects).
 * feed_item runs on the thread that builds the blocks (the reflector's,
 * or the list decoder's builder thread, cobj.c), so the reserve is made
 * in the arena the blocks come from. arena_reserve allocates `bytes` in blocks just below the
 * mmap threshold, one mprotect each and no page touched but the blocks'
 * headers, keeps the highest one (fd->held) and frees the others in
 * address order: they coalesce into one free chunk below the held block,
 * from which the objects are carved without growing the heap. Holding
 * the top block is what keeps the freed space: freed into the top chunk,
 * it would be returned (madvise, one call per block) and, in a heap of
 * its own, unmapped. feed_release frees the held block when the list is
 * over; what the list did not use then goes back to the system. Done in
 * doubling steps as the list grows, so the reserve is never more than
 * the list itself needs. Harmless (merely useless) with other mallocs. */
static void arena_reserve(feed *fd, size_t bytes)
{
#if defined(__GLIBC__)
    enum { BLOCK = 120 * 1024 }; /* the default mmap threshold is 128 KiB */
    size_t n = bytes / BLOCK;
    void **v = n ? malloc(n * sizeof(*v)) : NULL;
    if (!v)
        return;
    size_t got = 0;
    while (got < n && (v[got] = malloc(BLOCK)))
        got++;
    if (got) {
        /* The previous held block is below the new ones now. */
        free(fd->held);
        fd->held = v[--got];
    }
    for (size_t i = 0; i < got; i++)
        free(v[i]);
    free(v);
#else
    (void)fd;
    (void)bytes;
#endif
}

static void feed_release(feed *fd)
{
    free(fd->held);
    fd->held = NULL;
}

static void feed_flush(feed *fd)
{
    if (!fd->n)
        return;
    if (fd->r->sink.replace_add(fd->r->sink.ctx, fd->batch, fd->n) != 0)
        fd->failed = true;
    for (size_t i = 0; i < fd->n; i++)
        ckube__cobj_unref(fd->batch[i]);
    fd->n = 0;
}

static int feed_item(void *ud, ckube__cobj *c)
{
    feed *fd = ud;
    fd->bytes += ckube__cobj_bytes(c);
    if (fd->bytes >= RESERVE_FROM && fd->bytes > fd->reserved) {
        size_t step = fd->reserved ? fd->reserved : RESERVE_FROM;
        arena_reserve(fd, step);
        fd->reserved += step;
    }
    fd->batch[fd->n++] = ckube__cobj_ref(c);
    fd->total++;
    if (fd->n == FEED_BATCH)
        feed_flush(fd);
    return 0;
}

/* Drops what was not handed over yet. */
static void feed_drop(feed *fd)
{
    for (size_t i = 0; i < fd->n; i++)
        ckube__cobj_unref(fd->batch[i]);
    fd->n = 0;
    feed_release(fd);
}

/* Lists every page. Returns 0 after the sink has the list, else -1 with
 * *delay set to a server-requested wait (0 = use the backoff). A sink
 * with replace_begin gets the objects while they are decoded; a failed
 * list is then aborted (what was handed over stays, nothing is deleted). */
/* Hands a complete list to the sink (ending the incremental replace fed
 * through `fd`, or whole from `all`) and makes its RV the one to watch
 * from. Returns how many objects the list had. */
static size_t store_list(ckube_reflector *r, bool inc, feed *fd, ckube__clist *all, const char *rv)
{
    size_t n = all->n;
    if (inc) {
        feed_flush(fd);
        feed_release(fd);
        n = fd->total;
        if (r->sink.replace_end(r->sink.ctx, rv) != 0 || fd->failed)
            CKUBE_ERROR("%scould not store the list of %s", r->prefix, r->what);
    } else if (r->sink.replace(r->sink.ctx, all->items, all->n, rv) != 0) {
        CKUBE_ERROR("%scould not store the list of %s", r->prefix, r->what);
    }
    set_last_rv(r, rv);
    r->rv_unavailable = false;
    return n;
}

static int do_list(ckube_reflector *r, uint64_t *delay)
{
    *delay = 0;
    bool retried_expired = false;
again:;
    pthread_mutex_lock(&r->mu);
    char *rv = r->rv_unavailable ? strdup("") : strdup(r->last_rv ? r->last_rv : "0");
    pthread_mutex_unlock(&r->mu);
    if (!rv)
        return -1;
    /* A metadata-only informer asks the server to cut the objects down
     * (the scanner still drops the rest if the server sends them whole). */
    ckube_list_opts o = {
        .resource_version = rv, .limit = r->page_size, .partial_metadata = r->co.metadata_only};
    /* An exact RV is served from the watch cache only without a limit
     * (unless this server has shown it pages anyway). */
    if (*rv && strcmp(rv, "0") != 0 && !r->paginated_result)
        o.limit = 0;
    ckube__clist all = {0};
    uint64_t list_start = ckube_monotonic_ns();
    char *list_rv = NULL;
    char *cont = NULL;
    bool paged = false;
    int rc = -1;
    bool inc = r->sink.replace_begin != NULL;
    feed fd = {.r = r};
    if (inc)
        r->sink.replace_begin(r->sink.ctx);
    for (;;) {
        ckube_status *st = NULL;
        CKUBE_V(4, "%slisting %s (resourceVersion=\"%s\"%s)", r->prefix, r->what,
                o.resource_version ? o.resource_version : "",
                o.continue_token ? ", continued" : "");
        int lrc = r->cops ? r->cops->list(ckube__list_watch_ctx(r->lw), &o, &r->co, &all,
                                          inc ? feed_item : NULL, &fd, &st)
                          : list_generic(r, &o, &all, &st);
        if (inc && lrc == 0) {
            /* A generic page arrives whole: hand it over the same way. */
            for (size_t i = 0; i < all.n; i++)
                feed_item(&fd, all.items[i]);
            ckube__clist_clear_items(&all);
            feed_flush(&fd);
        }
        if (lrc == -2) {
            /* Never mistake garbage for an empty list: that would delete
             * every cached object. */
            CKUBE_ERROR("%sfailed to list %s: the answer is not a list", r->prefix, r->what);
            ckube_status_free(st);
            break;
        }
        if (lrc != 0) {
            if (is_expired(st) && !retried_expired) {
                /* The RV (or continue token) is too old: a consistent list. */
                CKUBE_V(2, "%slist of %s expired (%s); listing from the latest version", r->prefix,
                        r->what, status_text(st));
                ckube_status_free(st);
                retried_expired = true;
                r->rv_unavailable = true;
                ckube__clist_clear(&all);
                if (inc) {
                    feed_drop(&fd);
                    r->sink.replace_abort(r->sink.ctx);
                }
                free(cont);
                free(list_rv);
                free(rv);
                if (is_stopping(r))
                    return -1;
                goto again;
            }
            if (is_expired(st))
                r->rv_unavailable = true;
            if (strcmp(r->prefix, r->what) == 0)
                CKUBE_ERROR("failed to list %s: %s", r->what, status_text(st));
            else
                CKUBE_ERROR("%sfailed to list %s: %s", r->prefix, r->what, status_text(st));
            *delay = retry_after_ns(st);
            ckube_status_free(st);
            break;
        }
        if (all.resource_version) {
            free(list_rv);
            list_rv = all.resource_version;
            all.resource_version = NULL;
        }
        free(cont);
        cont = all.continue_token;
        all.continue_token = NULL;
        if (!cont) {
            rc = 0;
            break;
        }
        paged = true;
        if (is_stopping(r))
            break;
        o.continue_token = cont;
        o.resource_version = NULL;
        if (!o.limit)
            o.limit = r->page_size;
    }
    if (rc == 0) {
        if (strcmp(rv, "0") == 0 && paged)
            r->paginated_result = true;
        if (all.skipped)
            CKUBE_WARN("%sskipping %zu listed %s that are not objects", r->prefix, all.skipped,
                       r->what);
        uint64_t t0 = ckube_monotonic_ns();
        size_t n = store_list(r, inc, &fd, &all, list_rv);
        CKUBE_V(4, "%slist of %s: %.1f ms to receive and decode, %.1f ms to queue", r->prefix,
                r->what, (double)(t0 - list_start) / 1e6,
                (double)(ckube_monotonic_ns() - t0) / 1e6);
        CKUBE_V(2, "%slisted %zu %s at resourceVersion %s", r->prefix, n, r->what,
                list_rv ? list_rv : "(none)");
    } else if (inc) {
        feed_drop(&fd);
        r->sink.replace_abort(r->sink.ctx);
    }
    ckube__clist_clear(&all);
    free(cont);
    free(list_rv);
    free(rv);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Watch.                                                                   */

enum next_step {
    REWATCH,         /* at once */
    REWATCH_BACKOFF, /* after a backoff (or Retry-After) */
    RELIST,
    STOP,
};

static void deliver(ckube_reflector *r, ckube_watch_event_type type, ckube__cobj *obj)
{
    const char *rv = ckube__cobj_rv(obj);
    int rc = 0;
    switch (type) {
    case CKUBE_WATCH_ADDED:
        rc = r->sink.add(r->sink.ctx, obj);
        break;
    case CKUBE_WATCH_MODIFIED:
        rc = r->sink.update(r->sink.ctx, obj);
        break;
    case CKUBE_WATCH_DELETED:
        rc = r->sink.remove(r->sink.ctx, obj);
        break;
    default:
        break;
    }
    if (rc != 0)
        CKUBE_ERROR("%scould not store a %s event of %s", r->prefix, event_name(type), r->what);
    set_last_rv(r, rv);
}

/* What an ERROR event (a Status) means for the loop. */
static enum next_step on_error_event(ckube_reflector *r, json_t *obj, uint64_t *delay)
{
    ckube_status *st = ckube_status_from_json(obj, 500);
    if (!st)
        st = ckube_status_internal("unrecognised ERROR event from the watch");
    enum next_step next;
    if (is_expired(st)) {
        CKUBE_V(2, "%swatch of %s closed: %s; relisting", r->prefix, r->what, status_text(st));
        r->rv_unavailable = true;
        next = RELIST;
    } else if (is_retriable_watch_error(st)) {
        CKUBE_WARN("%swatch of %s ended with: %s; retrying", r->prefix, r->what, status_text(st));
        *delay = retry_after_ns(st);
        next = REWATCH_BACKOFF;
    } else {
        CKUBE_WARN("%swatch of %s ended with: %s", r->prefix, r->what, status_text(st));
        next = RELIST;
    }
    ckube_status_free(st);
    return next;
}

/* One event through a list-watch without compact operations (the
 * contract of the compact watch_next). */
static int watch_next_generic(ckube_reflector *r, void *stream, ckube__cevent *ev,
                              ckube_status **st)
{
    json_t *obj = NULL;
    ckube_watch_event_type type = 0;
    *ev = (ckube__cevent){0};
    int rc = ckube_list_watch_watch_next(r->lw, stream, &type, &obj, st);
    if (rc <= 0) {
        ckube_obj_unref(obj);
        return rc;
    }
    ev->type = type;
    if (type == CKUBE_WATCH_ERROR)
        ev->status = obj; /* the reference moves */
    else if (json_is_object(obj) && !(ev->obj = ckube__cobj_from_json(obj, &r->co)))
        CKUBE_ERROR("%sout of memory: dropping a %s event of %s", r->prefix, event_name(type),
                    r->what);
    if (type != CKUBE_WATCH_ERROR)
        ckube_obj_unref(obj);
    return 1;
}

/* Reads events until the stream ends; says what to do next. */
static enum next_step read_events(ckube_reflector *r, void *stream, uint64_t *delay)
{
    uint64_t start = ckube_clock_now(r->clock);
    size_t events = 0;
    for (;;) {
        ckube__cevent ev = {0};
        ckube_status *st = NULL;
        int rc = r->cops
                     ? r->cops->watch_next(ckube__list_watch_ctx(r->lw), stream, &r->co, &ev, &st)
                     : watch_next_generic(r, stream, &ev, &st);
        if (rc == 0) {
            if (is_stopping(r))
                return STOP;
            if (events == 0 && ckube_clock_now(r->clock) - start < SHORT_WATCH) {
                CKUBE_WARN("%svery short watch of %s: it ended within a second without a "
                           "single event; backing off",
                           r->prefix, r->what);
                return REWATCH_BACKOFF;
            }
            CKUBE_V(4, "%swatch of %s closed after %zu events", r->prefix, r->what, events);
            return REWATCH;
        }
        if (rc < 0) {
            if (is_stopping(r)) {
                ckube_status_free(st);
                return STOP;
            }
            CKUBE_WARN("%swatch of %s failed: %s; retrying", r->prefix, r->what, status_text(st));
            ckube_status_free(st);
            return REWATCH_BACKOFF;
        }
        events++;
        enum next_step next = REWATCH;
        bool done = false;
        switch (ev.type) {
        case CKUBE_WATCH_ADDED:
        case CKUBE_WATCH_MODIFIED:
        case CKUBE_WATCH_DELETED:
            if (!ev.obj || !ev.obj->key_len) {
                CKUBE_WARN("%signoring a %s event of %s without an object name", r->prefix,
                           event_name(ev.type), r->what);
                break;
            }
            deliver(r, ev.type, ev.obj);
            break;
        case CKUBE_WATCH_BOOKMARK:
            if (ev.obj)
                set_last_rv(r, ckube__cobj_rv(ev.obj));
            break;
        case CKUBE_WATCH_ERROR:
            next = on_error_event(r, ev.status, delay);
            done = true;
            break;
        default:
            CKUBE_WARN("%signoring a watch event of unknown type %d for %s", r->prefix,
                       (int)ev.type, r->what);
            break;
        }
        ckube__cobj_unref(ev.obj);
        ckube_obj_unref(ev.status);
        if (done)
            return next;
    }
}

/* Makes an open watch the one ckube_reflector_stop interrupts. False
 * when the reflector is stopping (the caller closes the stream). */
static bool stream_attach(ckube_reflector *r, void *stream)
{
    pthread_mutex_lock(&r->mu);
    bool stopping = r->stopping;
    if (!stopping)
        r->stream = stream;
    pthread_mutex_unlock(&r->mu);
    return !stopping;
}

/* Forgets and closes the open watch. */
static void stream_detach(ckube_reflector *r, void *stream)
{
    pthread_mutex_lock(&r->mu);
    r->stream = NULL;
    pthread_mutex_unlock(&r->mu);
    ckube_list_watch_watch_close(r->lw, stream);
}

/* A watch's timeoutSeconds, drawn from [min, max]. */
static int64_t watch_timeout(ckube_reflector *r)
{
    int64_t span = r->max_timeout_s - r->min_timeout_s;
    return r->min_timeout_s + (span > 0 ? (int64_t)(next_rand(r) % (uint64_t)(span + 1)) : 0);
}

/* Opens one watch from the last RV and reads it to its end. */
static enum next_step watch_once(ckube_reflector *r, uint64_t *delay)
{
    *delay = 0;
    pthread_mutex_lock(&r->mu);
    char *rv = strdup(r->last_rv ? r->last_rv : "");
    pthread_mutex_unlock(&r->mu);
    if (!rv)
        return REWATCH_BACKOFF;
    int64_t timeout = watch_timeout(r);
    ckube_list_opts o = {.resource_version = rv,
                         .allow_watch_bookmarks = true,
                         .timeout_seconds = {.set = true, .value = timeout},
                         .partial_metadata = r->co.metadata_only};
    void *stream = NULL;
    ckube_status *st = NULL;
    CKUBE_V(4, "%swatching %s from resourceVersion %s (timeout %llds)", r->prefix, r->what, rv,
            (long long)timeout);
    int rc = ckube_list_watch_watch_open(r->lw, &o, &stream, &st);
    free(rv);
    if (rc != 0) {
        enum next_step next;
        if (is_expired(st)) {
            CKUBE_V(2, "%swatch of %s: %s; relisting", r->prefix, r->what, status_text(st));
            r->rv_unavailable = true;
            next = RELIST;
        } else if (is_retriable_watch_error(st)) {
            CKUBE_WARN("%sfailed to watch %s: %s; backing off", r->prefix, r->what,
                       status_text(st));
            *delay = retry_after_ns(st);
            next = REWATCH_BACKOFF;
        } else {
            CKUBE_ERROR("%sfailed to watch %s: %s", r->prefix, r->what, status_text(st));
            next = RELIST;
        }
        ckube_status_free(st);
        return next;
    }
    bool stopping = !stream_attach(r, stream);
    enum next_step next = stopping ? STOP : read_events(r, stream, delay);
    stream_detach(r, stream);
    return next;
}

/* Whether a bookmark is the one that ends a watch-list's initial events
 * (annotation k8s.io/initial-events-end: "true"). */
static bool initial_events_end(const ckube__cobj *bookmark)
{
    json_t *t = bookmark ? ckube__cobj_tree(bookmark) : NULL;
    const char *v = json_string_value(json_object_get(
        ckube_json_get_path(t, "metadata.annotations"), "k8s.io/initial-events-end"));
    bool end = v && !strcmp(v, "true");
    json_decref(t);
    return end;
}

/* The streaming list (client-go's WatchList): one watch with
 * sendInitialEvents=true sends every object as ADDED, then a bookmark
 * marking the end of them, then goes on as a watch. The objects reach the
 * sink as a list does; after the bookmark the stream is read as a watch
 * until it asks for what comes next, returned with *synced set. Not
 * synced: the stream failed first (nothing replaced), or the server
 * refused the request (watch_list_refused set: list from now on). */
static enum next_step watch_list_once(ckube_reflector *r, uint64_t *delay, bool *synced)
{
    *delay = 0;
    *synced = false;
    pthread_mutex_lock(&r->mu);
    char *rv = strdup(r->rv_unavailable || !r->last_rv ? "" : r->last_rv);
    pthread_mutex_unlock(&r->mu);
    if (!rv)
        return REWATCH_BACKOFF;
    ckube_list_opts o = {.resource_version = rv,
                         .resource_version_match = "NotOlderThan",
                         .send_initial_events = true,
                         .allow_watch_bookmarks = true,
                         .timeout_seconds = {.set = true, .value = watch_timeout(r)},
                         .partial_metadata = r->co.metadata_only};
    void *stream = NULL;
    ckube_status *st = NULL;
    CKUBE_V(4, "%swatch-listing %s (resourceVersion=\"%s\")", r->prefix, r->what, rv);
    int rc = ckube_list_watch_watch_open(r->lw, &o, &stream, &st);
    free(rv);
    if (rc != 0) {
        enum next_step next = REWATCH_BACKOFF;
        if (is_expired(st)) {
            r->rv_unavailable = true;
        } else if (is_retriable_watch_error(st)) {
            *delay = retry_after_ns(st);
        } else {
            CKUBE_WARN("%sthe server does not stream lists of %s (%s); listing instead", r->prefix,
                       r->what, status_text(st));
            r->watch_list_refused = true;
            next = RELIST;
        }
        ckube_status_free(st);
        return next;
    }
    bool stopping = !stream_attach(r, stream);
    uint64_t start = ckube_monotonic_ns();
    /* (stopping: nothing begun, so nothing to abort either) */
    bool inc = r->sink.replace_begin != NULL && !stopping;
    feed fd = {.r = r};
    ckube__clist all = {0};
    if (inc)
        r->sink.replace_begin(r->sink.ctx);
    enum next_step next = stopping ? STOP : REWATCH_BACKOFF;
    while (!stopping && !*synced) {
        ckube__cevent ev = {0};
        st = NULL;
        rc = r->cops ? r->cops->watch_next(ckube__list_watch_ctx(r->lw), stream, &r->co, &ev, &st)
                     : watch_next_generic(r, stream, &ev, &st);
        if (rc <= 0) {
            next = is_stopping(r) ? STOP : REWATCH_BACKOFF;
            if (rc < 0 && next != STOP)
                CKUBE_WARN("%swatch-list of %s failed: %s; retrying", r->prefix, r->what,
                           status_text(st));
            else if (next != STOP)
                CKUBE_WARN("%swatch-list of %s ended before its initial events did; retrying",
                           r->prefix, r->what);
            ckube_status_free(st);
            break;
        }
        bool stop_here = false;
        if (ev.type == CKUBE_WATCH_ADDED && ev.obj && ev.obj->key_len) {
            ckube__cobj *c = inc ? NULL : ckube__cobj_ref(ev.obj);
            if (inc ? feed_item(&fd, ev.obj) != 0 : ckube__clist_push(&all, c) != 0) {
                ckube__cobj_unref(c); /* (still ours when the push failed) */
                stop_here = true;
            }
        } else if (ev.type == CKUBE_WATCH_BOOKMARK && initial_events_end(ev.obj)) {
            const char *brv = ckube__cobj_rv(ev.obj);
            size_t n = store_list(r, inc, &fd, &all, brv);
            *synced = true;
            inc = false; /* handed over: nothing to abort */
            CKUBE_V(2, "%slisted %zu %s at resourceVersion %s (streamed, %.1f ms)", r->prefix, n,
                    r->what, brv ? brv : "(none)", (double)(ckube_monotonic_ns() - start) / 1e6);
        } else if (ev.type == CKUBE_WATCH_ERROR) {
            next = on_error_event(r, ev.status, delay);
            stop_here = true;
        } else if (ev.type != CKUBE_WATCH_BOOKMARK) {
            /* Before the end of the initial events only ADDED (and
             * bookmarks) belong: a server that sends more does not
             * implement the protocol. */
            CKUBE_WARN("%sthe server's watch-list of %s sent a %s event among its initial "
                       "events; listing instead",
                       r->prefix, r->what, event_name(ev.type));
            r->watch_list_refused = true;
            next = RELIST;
            stop_here = true;
        }
        ckube__cobj_unref(ev.obj);
        ckube_obj_unref(ev.status);
        if (stop_here)
            break;
    }
    if (inc) {
        feed_drop(&fd);
        r->sink.replace_abort(r->sink.ctx);
    }
    ckube__clist_clear(&all);
    if (*synced)
        next = is_stopping(r) ? STOP : read_events(r, stream, delay);
    stream_detach(r, stream);
    return next;
}

/* Watches until something calls for a relist; `next` is what the last
 * watch (or the watch-list) asked for. Returns the wait before the next
 * list (0 when stopping). */
static uint64_t keep_watching(ckube_reflector *r, enum next_step next, uint64_t delay)
{
    for (;;) {
        switch (next) {
        case REWATCH:
            break;
        case REWATCH_BACKOFF:
            if (!wait_or_stop(r, delay ? delay : next_backoff(r)))
                return 0;
            break;
        case RELIST:
            return next_backoff(r);
        case STOP:
            return 0;
        }
        if (is_stopping(r))
            return 0;
        delay = 0;
        next = watch_once(r, &delay);
    }
}

/* One list (or watch-list) followed by watches until something calls for
 * a relist. Returns the wait before the next list (0 when stopping). */
static uint64_t list_and_watch(ckube_reflector *r)
{
    uint64_t delay = 0;
    if (r->use_watch_list && !r->watch_list_refused) {
        bool synced;
        enum next_step next = watch_list_once(r, &delay, &synced);
        if (synced)
            return keep_watching(r, next, delay);
        if (next == STOP)
            return 0;
        if (!r->watch_list_refused)
            return delay ? delay : next_backoff(r);
        /* refused: list at once instead */
    }
    if (do_list(r, &delay) != 0)
        return delay ? delay : next_backoff(r);
    return keep_watching(r, REWATCH, 0);
}

static void *reflector_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-reflector"); /* top -H, perf, gdb */
    ckube_reflector *r = arg;
    CKUBE_V(2, "%sstarting reflector for %s", r->prefix, r->what);
    while (!is_stopping(r)) {
        uint64_t delay = list_and_watch(r);
        if (is_stopping(r) || !wait_or_stop(r, delay))
            break;
    }
    CKUBE_V(2, "%sstopped reflector for %s", r->prefix, r->what);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle.                                                               */

/* ---- the public constructor's sink adapter: trees for a json_t sink ---- */

static int jsink_replace(void *ctx, ckube__cobj *const *items, size_t n, const char *rv)
{
    ckube_reflector *r = ctx;
    json_t *arr = json_array();
    int rc = arr ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *t = ckube__cobj_tree(items[i]);
        if (!t || json_array_append_new(arr, t) != 0)
            rc = -1;
    }
    if (rc == 0)
        rc = r->jsink.replace(r->jsink.ctx, arr, rv);
    json_decref(arr);
    return rc;
}

static int jsink_call(ckube_reflector *r, int (*fn)(void *, json_t *), ckube__cobj *obj)
{
    json_t *t = ckube__cobj_tree(obj);
    int rc = t ? fn(r->jsink.ctx, t) : -1;
    json_decref(t);
    return rc;
}

static int jsink_add(void *ctx, ckube__cobj *obj)
{
    ckube_reflector *r = ctx;
    return jsink_call(r, r->jsink.add, obj);
}

static int jsink_update(void *ctx, ckube__cobj *obj)
{
    ckube_reflector *r = ctx;
    return jsink_call(r, r->jsink.update, obj);
}

static int jsink_remove(void *ctx, ckube__cobj *obj)
{
    ckube_reflector *r = ctx;
    return jsink_call(r, r->jsink.remove, obj);
}

ckube_reflector *ckube_reflector_new(ckube_list_watch *lw, ckube_reflector_sink sink,
                                     const ckube_reflector_opts *opts)
{
    if (!lw || !sink.replace || !sink.add || !sink.update || !sink.remove)
        return NULL;
    ckube__csink adapter = {
        .replace = jsink_replace, .add = jsink_add, .update = jsink_update, .remove = jsink_remove};
    ckube_reflector *r = ckube__reflector_new_compact(lw, adapter, opts);
    if (r) {
        r->jsink = sink;
        r->sink.ctx = r;
    }
    return r;
}

ckube_reflector *ckube__reflector_new_compact(ckube_list_watch *lw, ckube__csink sink,
                                              const ckube_reflector_opts *opts)
{
    if (!lw || !sink.replace || !sink.add || !sink.update || !sink.remove)
        return NULL;
    ckube_reflector *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    ckube_reflector_opts o = opts ? *opts : (ckube_reflector_opts){0};
    r->lw = lw;
    r->cops = ckube__list_watch_compact(lw);
    r->sink = sink;
    r->what = ckube_list_watch_description(lw);
    r->name = strdup(o.name ? o.name : r->what);
    if (r->name && strcmp(r->name, r->what) != 0) {
        if (asprintf(&r->prefix, "%s: ", r->name) < 0)
            r->prefix = NULL;
    } else {
        r->prefix = strdup("");
    }
    if (!r->name || !r->prefix) {
        free(r->name);
        free(r->prefix);
        free(r);
        return NULL;
    }
    r->clock = ckube_clock_or_real(o.clock);
    r->co = (ckube__cobj_opts){.keep_managed_fields = o.keep_managed_fields,
                               .metadata_only = o.metadata_only};
    r->page_size = o.page_size > 0 ? o.page_size : DEFAULT_PAGE_SIZE;
    r->use_watch_list = o.use_watch_list;
    r->min_timeout_s =
        o.min_watch_timeout_s > 0 ? o.min_watch_timeout_s : DEFAULT_MIN_WATCH_TIMEOUT;
    r->max_timeout_s =
        o.max_watch_timeout_s > 0 ? o.max_watch_timeout_s : DEFAULT_MAX_WATCH_TIMEOUT;
    if (r->max_timeout_s < r->min_timeout_s)
        r->max_timeout_s = r->min_timeout_s;
    r->bo_initial = o.backoff.initial_ns ? o.backoff.initial_ns : DEFAULT_BACKOFF_INITIAL;
    r->bo_max = o.backoff.max_ns ? o.backoff.max_ns : DEFAULT_BACKOFF_MAX;
    if (r->bo_max < r->bo_initial)
        r->bo_max = r->bo_initial;
    r->bo_reset = o.backoff.reset_ns ? o.backoff.reset_ns : DEFAULT_BACKOFF_RESET;
    r->bo_jitter = o.backoff.jitter == 0 ? DEFAULT_JITTER : o.backoff.jitter;
    r->rand_state = ckube_monotonic_ns() ^ ((uint64_t)(uintptr_t)r << 16) ^ 0x9e3779b97f4a7c15ull;
    if (!r->rand_state)
        r->rand_state = 1;
    pthread_mutex_init(&r->mu, NULL);
    ckube_cond_init(&r->cond);
    return r;
}

int ckube_reflector_start(ckube_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->started || r->stopping) {
        pthread_mutex_unlock(&r->mu);
        return -1;
    }
    int rc = pthread_create(&r->thread, NULL, reflector_main, r);
    if (rc == 0)
        r->started = true;
    pthread_mutex_unlock(&r->mu);
    if (rc != 0) {
        CKUBE_ERROR("%scannot start the reflector thread: %s", r->prefix, strerror(rc));
        return -1;
    }
    return 0;
}

void ckube_reflector_stop(ckube_reflector *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    if (r->stream)
        ckube_list_watch_watch_stop(r->lw, r->stream);
    pthread_cond_broadcast(&r->cond);
    if (!r->started || r->joined) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (r->joining) {
        /* Another thread is joining: wait for it to finish. */
        while (!r->joined)
            pthread_cond_wait(&r->cond, &r->mu);
        pthread_mutex_unlock(&r->mu);
        return;
    }
    r->joining = true;
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_mutex_lock(&r->mu);
    r->joined = true;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

void ckube_reflector_free(ckube_reflector *r)
{
    if (!r)
        return;
    ckube_reflector_stop(r);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->mu);
    free(r->last_rv);
    free(r->name);
    free(r->prefix);
    free(r);
}

char *ckube_reflector_last_sync_resource_version(ckube_reflector *r)
{
    pthread_mutex_lock(&r->mu);
    char *rv = r->last_rv ? strdup(r->last_rv) : NULL;
    pthread_mutex_unlock(&r->mu);
    return rv;
}
