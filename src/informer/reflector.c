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
 * Every wait is on the reflector's clock and ends early on stop. */
#include "ckube/informer.h"

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
    ckube_list_watch *lw; /* borrowed */
    ckube_reflector_sink sink;
    char *name;
    char *prefix;     /* "name: " for log lines, or "" when name == what */
    const char *what; /* the lw description (borrowed) */
    ckube_clock *clock;
    bool keep_managed_fields;
    bool metadata_only;
    int64_t page_size;
    int64_t min_timeout_s, max_timeout_s;

    /* Backoff (reflector thread only). */
    uint64_t bo_initial, bo_max, bo_reset;
    double bo_jitter;
    uint64_t bo_current;
    uint64_t bo_last_start;
    bool bo_used;

    /* Relist state (reflector thread only). */
    bool rv_unavailable;   /* the last RV is gone: list from "" */
    bool paginated_result; /* an RV=0 list came back paged */
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

/* apiVersion, kind and metadata of obj (the rest is released with obj,
 * which is stolen): what client-go's metadata informers keep. */
static json_t *metadata_of(json_t *obj)
{
    json_t *m = json_object();
    static const char *const keep[] = {"apiVersion", "kind", "metadata"};
    for (size_t i = 0; m && i < 3; i++) {
        json_t *v = json_object_get(obj, keep[i]);
        if (v)
            json_object_set(m, keep[i], v);
    }
    ckube_obj_unref(obj);
    return m;
}

/* Keeps only the metadata when asked; drops metadata.managedFields
 * (copying first if the object is shared). */
static json_t *prepare(ckube_reflector *r, json_t *obj)
{
    if (r->metadata_only && json_is_object(obj))
        obj = metadata_of(obj);
    if (r->keep_managed_fields || !json_is_object(obj))
        return obj;
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_object_get(meta, "managedFields"))
        return obj;
    if (__atomic_load_n(&obj->refcount, __ATOMIC_RELAXED) > 1) {
        json_t *copy = json_deep_copy(obj);
        ckube_obj_unref(obj);
        obj = copy;
        meta = json_object_get(obj, "metadata");
    }
    json_object_del(meta, "managedFields");
    return obj;
}

/* ------------------------------------------------------------------------ */
/* List.                                                                    */

/* Lists every page. Returns 0 after sink.replace, else -1 with *delay set
 * to a server-requested wait (0 = use the backoff). */
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
    ckube_list_opts o = {.resource_version = rv, .limit = r->page_size};
    /* An exact RV is served from the watch cache only without a limit
     * (unless this server has shown it pages anyway). */
    if (*rv && strcmp(rv, "0") != 0 && !r->paginated_result)
        o.limit = 0;
    json_t *all = json_array();
    char *list_rv = NULL;
    char *cont = NULL;
    bool paged = false;
    int rc = -1;
    for (;;) {
        json_t *page = NULL;
        ckube_status *st = NULL;
        CKUBE_V(4, "%slisting %s (resourceVersion=\"%s\"%s)", r->prefix, r->what,
                o.resource_version ? o.resource_version : "",
                o.continue_token ? ", continued" : "");
        if (ckube_list_watch_list(r->lw, &o, &page, &st) != 0) {
            if (is_expired(st) && !retried_expired) {
                /* The RV (or continue token) is too old: a consistent list. */
                CKUBE_V(2, "%slist of %s expired (%s); listing from the latest version", r->prefix,
                        r->what, status_text(st));
                ckube_status_free(st);
                retried_expired = true;
                r->rv_unavailable = true;
                json_decref(all);
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
        json_t *items = json_object_get(page, "items");
        if (!json_is_object(page) || (items && !json_is_array(items) && !json_is_null(items))) {
            /* Never mistake garbage for an empty list: that would delete
             * every cached object. */
            CKUBE_ERROR("%sfailed to list %s: the answer is not a list", r->prefix, r->what);
            json_decref(page);
            break;
        }
        if (json_is_array(items))
            json_array_extend(all, items);
        json_t *meta = json_object_get(page, "metadata");
        const char *prv = json_string_value(json_object_get(meta, "resourceVersion"));
        if (prv && *prv) {
            free(list_rv);
            list_rv = strdup(prv);
        }
        const char *next = json_string_value(json_object_get(meta, "continue"));
        free(cont);
        cont = next && *next ? strdup(next) : NULL;
        json_decref(page);
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
        size_t n = json_array_size(all);
        for (size_t i = 0; i < n; i++) {
            /* Take the item out of the array first, so it is not shared
             * and prepare() strips it in place instead of deep-copying
             * every object of the list. */
            json_t *obj = json_incref(json_array_get(all, i));
            json_array_set_new(all, i, json_null());
            obj = prepare(r, obj);
            json_array_set_new(all, i, obj);
        }
        if (r->sink.replace(r->sink.ctx, all, list_rv) != 0)
            CKUBE_ERROR("%scould not store the list of %s", r->prefix, r->what);
        set_last_rv(r, list_rv);
        r->rv_unavailable = false;
        CKUBE_V(2, "%slisted %zu %s at resourceVersion %s", r->prefix, n, r->what,
                list_rv ? list_rv : "(none)");
    }
    json_decref(all);
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

static void deliver(ckube_reflector *r, ckube_watch_event_type type, json_t *obj)
{
    const char *rv = ckube_obj_resource_version(obj);
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

/* Reads events until the stream ends; says what to do next. */
static enum next_step read_events(ckube_reflector *r, void *stream, uint64_t *delay)
{
    uint64_t start = ckube_clock_now(r->clock);
    size_t events = 0;
    for (;;) {
        ckube_watch_event_type type = 0;
        json_t *obj = NULL;
        ckube_status *st = NULL;
        int rc = ckube_list_watch_watch_next(r->lw, stream, &type, &obj, &st);
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
        switch (type) {
        case CKUBE_WATCH_ADDED:
        case CKUBE_WATCH_MODIFIED:
        case CKUBE_WATCH_DELETED:
            if (!json_is_object(obj) || !ckube_obj_name(obj)) {
                CKUBE_WARN("%signoring a %s event of %s without an object name", r->prefix,
                           event_name(type), r->what);
                break;
            }
            obj = prepare(r, obj);
            deliver(r, type, obj);
            break;
        case CKUBE_WATCH_BOOKMARK:
            set_last_rv(r, ckube_obj_resource_version(obj));
            break;
        case CKUBE_WATCH_ERROR:
            next = on_error_event(r, obj, delay);
            done = true;
            break;
        default:
            CKUBE_WARN("%signoring a watch event of unknown type %d for %s", r->prefix, (int)type,
                       r->what);
            break;
        }
        ckube_obj_unref(obj);
        if (done)
            return next;
    }
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
    int64_t span = r->max_timeout_s - r->min_timeout_s;
    int64_t timeout =
        r->min_timeout_s + (span > 0 ? (int64_t)(next_rand(r) % (uint64_t)(span + 1)) : 0);
    ckube_list_opts o = {.resource_version = rv,
                         .allow_watch_bookmarks = true,
                         .timeout_seconds = {.set = true, .value = timeout}};
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
    pthread_mutex_lock(&r->mu);
    bool stopping = r->stopping;
    if (!stopping)
        r->stream = stream;
    pthread_mutex_unlock(&r->mu);
    enum next_step next = stopping ? STOP : read_events(r, stream, delay);
    pthread_mutex_lock(&r->mu);
    r->stream = NULL;
    pthread_mutex_unlock(&r->mu);
    ckube_list_watch_watch_close(r->lw, stream);
    return next;
}

/* One list followed by watches until something calls for a relist.
 * Returns the wait before the next list (0 when stopping). */
static uint64_t list_and_watch(ckube_reflector *r)
{
    uint64_t delay = 0;
    if (do_list(r, &delay) != 0)
        return delay ? delay : next_backoff(r);
    while (!is_stopping(r)) {
        enum next_step next = watch_once(r, &delay);
        switch (next) {
        case REWATCH:
            continue;
        case REWATCH_BACKOFF:
            if (!wait_or_stop(r, delay ? delay : next_backoff(r)))
                return 0;
            continue;
        case RELIST:
            return next_backoff(r);
        case STOP:
            return 0;
        }
    }
    return 0;
}

static void *reflector_main(void *arg)
{
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

ckube_reflector *ckube_reflector_new(ckube_list_watch *lw, ckube_reflector_sink sink,
                                     const ckube_reflector_opts *opts)
{
    if (!lw || !sink.replace || !sink.add || !sink.update || !sink.remove)
        return NULL;
    ckube_reflector *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    ckube_reflector_opts o = opts ? *opts : (ckube_reflector_opts){0};
    r->lw = lw;
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
    r->keep_managed_fields = o.keep_managed_fields;
    r->metadata_only = o.metadata_only;
    r->page_size = o.page_size > 0 ? o.page_size : DEFAULT_PAGE_SIZE;
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
