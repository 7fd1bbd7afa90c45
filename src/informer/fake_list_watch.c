/* fake_list_watch.c - an in-memory list-watch for tests (see ckube/fake.h).
 *
 * One mutex guards the whole fake; one condition variable (broadcast on
 * every change) wakes watchers, delayed calls and waiters. Objects live
 * in a JSON object keyed by "ns/name"; every change is appended to a
 * history (for watches that start in the past) until compacted. */
#include "ckube/fake.h"
#include "ckube/scheme.h"

#include "ckube/json.h"
#include "ckube/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fake_event {
    ckube_watch_event_type type;
    json_t *obj; /* owned */
};

struct history {
    uint64_t rv;
    ckube_watch_event_type type;
    json_t *obj; /* owned; deep-copied again for each stream */
};

struct stream {
    struct stream *next, *prev;
    struct fake_event *ev; /* queue: ev[head..n) */
    size_t head, n, cap;
    bool bookmarks;
    bool ended;        /* no more events after the queued ones */
    bool broken;       /* watch_next returns -1 once the queue is drained */
    bool stopped;      /* watch_stop: return 0 at once */
    bool done;         /* 0 or -1 was returned */
    uint64_t deadline; /* timeoutSeconds on the clock; 0 = none */
};

struct snapshot {
    unsigned id;
    json_t *items; /* array */
    uint64_t rv;
};

struct ckube_fake_lw {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int refs;
    char *resource, *api_version, *kind;
    ckube_clock *clock;
    json_t *objects; /* key -> object */
    uint64_t rv;
    uint64_t compacted; /* watches from an older rv get 410 */
    struct history *hist;
    size_t nhist, caphist;
    struct stream streams; /* list head (sentinel) */
    size_t nstreams;
    ckube_status *list_fail;
    int list_fail_count;
    ckube_status *watch_fail;
    int watch_fail_count;
    uint64_t delay_ns;
    bool page_rv0;
    ckube_fake_call *calls;
    size_t ncalls, capcalls;
    size_t nlists, nwatches;
    struct snapshot *snaps;
    size_t nsnaps;
    unsigned next_snap;
};

/* ------------------------------------------------------------------------ */
/* Helpers.                                                                 */

static char *dupn(const char *s)
{
    return s ? strdup(s) : NULL;
}

static ckube_status *status_copy(const ckube_status *st)
{
    if (!st)
        return NULL;
    json_t *j = ckube_status_to_json(st);
    ckube_status *c = j ? ckube_status_from_json(j, st->code) : NULL;
    json_decref(j);
    if (c)
        c->retry_after_seconds = st->retry_after_seconds;
    return c;
}

static void set_rv(json_t *obj, uint64_t rv)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, rv);
    json_object_set_new(ckube_json_object_ensure(obj, "metadata"), "resourceVersion",
                        json_string(buf));
}

/* Parses a decimal resourceVersion; false when not one. */
static bool parse_rv(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-')
        return false;
    *out = v;
    return true;
}

static void stream_push(struct stream *s, ckube_watch_event_type type, json_t *obj)
{
    if (s->n == s->cap) {
        if (s->head > 0) {
            memmove(s->ev, s->ev + s->head, (s->n - s->head) * sizeof(*s->ev));
            s->n -= s->head;
            s->head = 0;
        }
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 16;
            struct fake_event *ne = realloc(s->ev, cap * sizeof(*ne));
            if (!ne) {
                json_decref(obj);
                s->broken = true;
                return;
            }
            s->ev = ne;
            s->cap = cap;
        }
    }
    s->ev[s->n++] = (struct fake_event){.type = type, .obj = obj};
}

/* Sends (a deep copy of) obj to every live stream (bookmarks only to those
 * that asked). Returns how many streams it went to. */
static size_t broadcast_locked(ckube_fake_lw *f, ckube_watch_event_type type, const json_t *obj)
{
    size_t sent = 0;
    for (struct stream *s = f->streams.next; s != &f->streams; s = s->next) {
        if (s->ended || s->stopped || s->broken || s->done)
            continue;
        if (type == CKUBE_WATCH_BOOKMARK && !s->bookmarks)
            continue;
        stream_push(s, type, json_deep_copy(obj));
        sent++;
    }
    pthread_cond_broadcast(&f->cond);
    return sent;
}

static void record_change_locked(ckube_fake_lw *f, ckube_watch_event_type type, json_t *obj)
{
    if (f->nhist == f->caphist) {
        size_t cap = f->caphist ? f->caphist * 2 : 64;
        struct history *nh = realloc(f->hist, cap * sizeof(*nh));
        if (!nh)
            abort(); /* a test fake: no graceful way on */
        f->hist = nh;
        f->caphist = cap;
    }
    f->hist[f->nhist++] = (struct history){.rv = f->rv, .type = type, .obj = json_incref(obj)};
    broadcast_locked(f, type, obj);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle.                                                               */

ckube_fake_lw *ckube_fake_lw_new(const ckube_fake_lw_opts *opts)
{
    ckube_fake_lw *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    ckube_cond_init(&f->cond);
    f->refs = 1;
    f->resource = strdup(opts && opts->resource ? opts->resource : "fakes");
    f->api_version = strdup(opts && opts->api_version ? opts->api_version : "v1");
    f->kind = strdup(opts && opts->kind ? opts->kind : "Fake");
    f->clock = ckube_clock_or_real(opts ? opts->clock : NULL);
    f->objects = json_object();
    f->rv = opts && opts->start_rv ? opts->start_rv : 100;
    f->streams.next = f->streams.prev = &f->streams;
    if (!f->resource || !f->api_version || !f->kind || !f->objects) {
        ckube_fake_lw_unref(f);
        return NULL;
    }
    return f;
}

void ckube_fake_call_clear(ckube_fake_call *c)
{
    if (!c)
        return;
    free(c->resource_version);
    free(c->resource_version_match);
    free(c->continue_token);
    free(c->label_selector);
    free(c->field_selector);
    memset(c, 0, sizeof(*c));
}

void ckube_fake_lw_unref(ckube_fake_lw *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    int left = --f->refs;
    pthread_mutex_unlock(&f->mu);
    if (left > 0)
        return;
    if (f->nstreams)
        CKUBE_ERROR("fake list-watch %s freed with %zu open watches", f->resource, f->nstreams);
    for (size_t i = 0; i < f->nhist; i++)
        json_decref(f->hist[i].obj);
    free(f->hist);
    for (size_t i = 0; i < f->ncalls; i++)
        ckube_fake_call_clear(&f->calls[i]);
    free(f->calls);
    for (size_t i = 0; i < f->nsnaps; i++)
        json_decref(f->snaps[i].items);
    free(f->snaps);
    ckube_status_free(f->list_fail);
    ckube_status_free(f->watch_fail);
    json_decref(f->objects);
    free(f->resource);
    free(f->api_version);
    free(f->kind);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* ------------------------------------------------------------------------ */
/* Objects.                                                                 */

enum put_mode { PUT_ADD, PUT_UPDATE, PUT_APPLY };

static uint64_t put(ckube_fake_lw *f, const json_t *obj, enum put_mode mode)
{
    char *key = ckube_meta_namespace_key(obj);
    if (!key)
        return 0;
    json_t *copy = json_deep_copy(obj);
    if (!copy) {
        free(key);
        return 0;
    }
    pthread_mutex_lock(&f->mu);
    json_t *cur = json_object_get(f->objects, key);
    uint64_t rv = 0;
    if ((cur && mode == PUT_ADD) || (!cur && mode == PUT_UPDATE)) {
        json_decref(copy);
        goto out;
    }
    json_t *meta = ckube_json_object_ensure(copy, "metadata");
    if (cur) {
        /* Server-owned fields survive updates. */
        json_t *cm = json_object_get(cur, "metadata");
        json_object_set(meta, "uid", json_object_get(cm, "uid"));
        json_object_set(meta, "creationTimestamp", json_object_get(cm, "creationTimestamp"));
    } else {
        if (!json_is_string(json_object_get(meta, "uid"))) {
            char uid[40];
            ckube_uuid4(uid, sizeof(uid));
            json_object_set_new(meta, "uid", json_string(uid));
        }
        if (!json_is_string(json_object_get(meta, "creationTimestamp"))) {
            char ts[32];
            ckube_now_rfc3339(ts, sizeof(ts));
            json_object_set_new(meta, "creationTimestamp", json_string(ts));
        }
    }
    rv = ++f->rv;
    set_rv(copy, rv);
    json_object_set(f->objects, key, copy);
    record_change_locked(f, cur ? CKUBE_WATCH_MODIFIED : CKUBE_WATCH_ADDED, copy);
    json_decref(copy);
out:
    pthread_mutex_unlock(&f->mu);
    free(key);
    return rv;
}

uint64_t ckube_fake_lw_add(ckube_fake_lw *f, const json_t *obj)
{
    return put(f, obj, PUT_ADD);
}

uint64_t ckube_fake_lw_update(ckube_fake_lw *f, const json_t *obj)
{
    return put(f, obj, PUT_UPDATE);
}

uint64_t ckube_fake_lw_apply(ckube_fake_lw *f, const json_t *obj)
{
    return put(f, obj, PUT_APPLY);
}

static char *make_key(const char *ns, const char *name)
{
    char *key = NULL;
    if (ns && *ns) {
        if (asprintf(&key, "%s/%s", ns, name) < 0)
            return NULL;
        return key;
    }
    return strdup(name);
}

uint64_t ckube_fake_lw_delete(ckube_fake_lw *f, const char *ns, const char *name)
{
    if (!name)
        return 0;
    char *key = make_key(ns, name);
    if (!key)
        return 0;
    pthread_mutex_lock(&f->mu);
    uint64_t rv = 0;
    json_t *cur = json_object_get(f->objects, key);
    if (cur) {
        json_t *last = json_deep_copy(cur);
        rv = ++f->rv;
        set_rv(last, rv);
        json_object_del(f->objects, key);
        record_change_locked(f, CKUBE_WATCH_DELETED, last);
        json_decref(last);
    }
    pthread_mutex_unlock(&f->mu);
    free(key);
    return rv;
}

json_t *ckube_fake_lw_get(ckube_fake_lw *f, const char *ns, const char *name)
{
    if (!name)
        return NULL;
    char *key = make_key(ns, name);
    if (!key)
        return NULL;
    pthread_mutex_lock(&f->mu);
    json_t *o = json_deep_copy(json_object_get(f->objects, key));
    pthread_mutex_unlock(&f->mu);
    free(key);
    return o;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Deep copies of the objects, sorted by key. */
static json_t *objects_sorted_locked(ckube_fake_lw *f)
{
    size_t n = json_object_size(f->objects);
    const char **keys = calloc(n ? n : 1, sizeof(char *));
    json_t *arr = json_array();
    if (!keys || !arr) {
        free(keys);
        json_decref(arr);
        return NULL;
    }
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(f->objects, k, v)
    {
        keys[i++] = k;
    }
    qsort(keys, n, sizeof(char *), cmp_key);
    for (i = 0; i < n; i++)
        json_array_append_new(arr, json_deep_copy(json_object_get(f->objects, keys[i])));
    free(keys);
    return arr;
}

json_t *ckube_fake_lw_objects(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    json_t *a = objects_sorted_locked(f);
    pthread_mutex_unlock(&f->mu);
    return a;
}

size_t ckube_fake_lw_count(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = json_object_size(f->objects);
    pthread_mutex_unlock(&f->mu);
    return n;
}

uint64_t ckube_fake_lw_resource_version(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    uint64_t rv = f->rv;
    pthread_mutex_unlock(&f->mu);
    return rv;
}

uint64_t ckube_fake_lw_bump_rv(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    uint64_t rv = ++f->rv;
    pthread_mutex_unlock(&f->mu);
    return rv;
}

/* ------------------------------------------------------------------------ */
/* Watch control.                                                           */

size_t ckube_fake_lw_bookmark(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    json_t *bm =
        json_pack("{s:s, s:s, s:{}}", "kind", f->kind, "apiVersion", f->api_version, "metadata");
    set_rv(bm, f->rv);
    size_t n = broadcast_locked(f, CKUBE_WATCH_BOOKMARK, bm);
    json_decref(bm);
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t ckube_fake_lw_drop_watches(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = 0;
    for (struct stream *s = f->streams.next; s != &f->streams; s = s->next) {
        if (!s->ended && !s->done)
            n++;
        s->ended = true;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t ckube_fake_lw_error_watches(ckube_fake_lw *f, const ckube_status *st)
{
    json_t *j = ckube_status_to_json(st);
    pthread_mutex_lock(&f->mu);
    size_t n = broadcast_locked(f, CKUBE_WATCH_ERROR, j);
    for (struct stream *s = f->streams.next; s != &f->streams; s = s->next)
        s->ended = true;
    pthread_mutex_unlock(&f->mu);
    json_decref(j);
    return n;
}

size_t ckube_fake_lw_expire_watches(ckube_fake_lw *f)
{
    uint64_t rv = ckube_fake_lw_resource_version(f);
    ckube_status *st = ckube_status_new(410, CKUBE_REASON_EXPIRED,
                                        "too old resource version: %" PRIu64 " (%" PRIu64 ")",
                                        rv > 1 ? rv - 1 : rv, rv);
    size_t n = ckube_fake_lw_error_watches(f, st);
    ckube_status_free(st);
    return n;
}

size_t ckube_fake_lw_break_watches(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = 0;
    for (struct stream *s = f->streams.next; s != &f->streams; s = s->next) {
        if (!s->ended && !s->done && !s->broken)
            n++;
        s->broken = true;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    return n;
}

void ckube_fake_lw_compact(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    f->compacted = f->rv;
    for (size_t i = 0; i < f->nhist; i++)
        json_decref(f->hist[i].obj);
    f->nhist = 0;
    pthread_mutex_unlock(&f->mu);
}

size_t ckube_fake_lw_open_watches(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->nstreams;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

bool ckube_fake_lw_wait_watches(ckube_fake_lw *f, size_t n, int timeout_ms)
{
    for (int waited = 0;; waited++) {
        if (ckube_fake_lw_open_watches(f) >= n)
            return true;
        if (waited >= timeout_ms)
            return false;
        sleep_ms(1);
    }
}

/* ------------------------------------------------------------------------ */
/* Failures.                                                                */

void ckube_fake_lw_fail_lists(ckube_fake_lw *f, const ckube_status *st, int count)
{
    ckube_status *c = status_copy(st);
    pthread_mutex_lock(&f->mu);
    ckube_status_free(f->list_fail);
    f->list_fail = count ? c : NULL;
    f->list_fail_count = count;
    pthread_mutex_unlock(&f->mu);
    if (!count)
        ckube_status_free(c);
}

void ckube_fake_lw_fail_watches(ckube_fake_lw *f, const ckube_status *st, int count)
{
    ckube_status *c = status_copy(st);
    pthread_mutex_lock(&f->mu);
    ckube_status_free(f->watch_fail);
    f->watch_fail = count ? c : NULL;
    f->watch_fail_count = count;
    pthread_mutex_unlock(&f->mu);
    if (!count)
        ckube_status_free(c);
}

void ckube_fake_lw_set_delay(ckube_fake_lw *f, uint64_t delay_ns)
{
    pthread_mutex_lock(&f->mu);
    f->delay_ns = delay_ns;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

void ckube_fake_lw_set_page_rv0(ckube_fake_lw *f, bool page)
{
    pthread_mutex_lock(&f->mu);
    f->page_rv0 = page;
    pthread_mutex_unlock(&f->mu);
}

/* Consumes one injected failure, if any: returns a copy for the caller. */
static ckube_status *take_failure(ckube_status *st, int *count)
{
    if (!st || *count == 0)
        return NULL;
    if (*count > 0)
        (*count)--;
    return status_copy(st);
}

/* ------------------------------------------------------------------------ */
/* Call records.                                                            */

static void record_call_locked(ckube_fake_lw *f, ckube_fake_call_kind kind,
                               const ckube_list_opts *o)
{
    if (f->ncalls == f->capcalls) {
        size_t cap = f->capcalls ? f->capcalls * 2 : 16;
        ckube_fake_call *nc = realloc(f->calls, cap * sizeof(*nc));
        if (!nc)
            abort();
        f->calls = nc;
        f->capcalls = cap;
    }
    ckube_fake_call *c = &f->calls[f->ncalls++];
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->at_ns = ckube_clock_now(f->clock);
    if (o) {
        c->resource_version = dupn(o->resource_version);
        c->resource_version_match = dupn(o->resource_version_match);
        c->continue_token = dupn(o->continue_token);
        c->label_selector = dupn(o->label_selector);
        c->field_selector = dupn(o->field_selector);
        c->limit = o->limit;
        c->timeout_seconds = o->timeout_seconds;
        c->allow_watch_bookmarks = o->allow_watch_bookmarks;
        c->send_initial_events = o->send_initial_events;
    }
    if (kind == CKUBE_FAKE_LIST)
        f->nlists++;
    else
        f->nwatches++;
    pthread_cond_broadcast(&f->cond);
}

static void copy_call(const ckube_fake_call *src, ckube_fake_call *out)
{
    *out = *src;
    out->resource_version = dupn(src->resource_version);
    out->resource_version_match = dupn(src->resource_version_match);
    out->continue_token = dupn(src->continue_token);
    out->label_selector = dupn(src->label_selector);
    out->field_selector = dupn(src->field_selector);
}

size_t ckube_fake_lw_list_calls(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->nlists;
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t ckube_fake_lw_watch_calls(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->nwatches;
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t ckube_fake_lw_ncalls(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->ncalls;
    pthread_mutex_unlock(&f->mu);
    return n;
}

bool ckube_fake_lw_call(ckube_fake_lw *f, size_t i, ckube_fake_call *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&f->mu);
    bool ok = i < f->ncalls;
    if (ok)
        copy_call(&f->calls[i], out);
    pthread_mutex_unlock(&f->mu);
    return ok;
}

bool ckube_fake_lw_last_call(ckube_fake_lw *f, ckube_fake_call_kind kind, ckube_fake_call *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&f->mu);
    bool ok = false;
    for (size_t i = f->ncalls; i-- > 0;) {
        if (f->calls[i].kind == kind) {
            copy_call(&f->calls[i], out);
            ok = true;
            break;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return ok;
}

bool ckube_fake_lw_wait_calls(ckube_fake_lw *f, ckube_fake_call_kind kind, size_t n, int timeout_ms)
{
    for (int waited = 0;; waited++) {
        size_t have =
            kind == CKUBE_FAKE_LIST ? ckube_fake_lw_list_calls(f) : ckube_fake_lw_watch_calls(f);
        if (have >= n)
            return true;
        if (waited >= timeout_ms)
            return false;
        sleep_ms(1);
    }
}

/* ------------------------------------------------------------------------ */
/* The list-watch operations.                                               */

/* A slow server: waits the configured delay on the clock (re-reading it,
 * so setting 0 releases waiters). Called with f->mu held. */
static void delay_locked(ckube_fake_lw *f)
{
    uint64_t start = ckube_clock_now(f->clock);
    while (f->delay_ns && ckube_clock_now(f->clock) < start + f->delay_ns)
        ckube_clock_cond_wait(f->clock, &f->cond, &f->mu, start + f->delay_ns);
}

static json_t *list_object_locked(ckube_fake_lw *f, json_t *items, uint64_t rv)
{
    char kind[256];
    snprintf(kind, sizeof(kind), "%sList", f->kind);
    json_t *l = json_pack("{s:s, s:s, s:{}, s:o}", "kind", kind, "apiVersion", f->api_version,
                          "metadata", "items", items);
    if (l)
        set_rv(l, rv);
    return l;
}

static struct snapshot *find_snap_locked(ckube_fake_lw *f, unsigned id)
{
    for (size_t i = 0; i < f->nsnaps; i++)
        if (f->snaps[i].id == id)
            return &f->snaps[i];
    return NULL;
}

/* One page of snapshot `sn` from `offset`. */
static json_t *page_locked(ckube_fake_lw *f, struct snapshot *sn, size_t offset, int64_t limit)
{
    size_t total = json_array_size(sn->items);
    json_t *items = json_array();
    size_t end = offset + (size_t)limit;
    if (end > total)
        end = total;
    for (size_t i = offset; i < end; i++)
        json_array_append_new(items, json_deep_copy(json_array_get(sn->items, i)));
    json_t *l = list_object_locked(f, items, sn->rv);
    if (l && end < total) {
        char tok[64];
        snprintf(tok, sizeof(tok), "fake:%u:%zu", sn->id, end);
        json_t *meta = json_object_get(l, "metadata");
        json_object_set_new(meta, "continue", json_string(tok));
        json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)(total - end)));
    }
    return l;
}

static int fake_list(void *ctx, const ckube_list_opts *opts, json_t **list, ckube_status **err)
{
    ckube_fake_lw *f = ctx;
    ckube_list_opts o = opts ? *opts : (ckube_list_opts){0};
    int rc = -1;
    pthread_mutex_lock(&f->mu);
    record_call_locked(f, CKUBE_FAKE_LIST, &o);
    delay_locked(f);
    ckube_status *st = take_failure(f->list_fail, &f->list_fail_count);
    if (st) {
        if (f->list_fail_count == 0) {
            ckube_status_free(f->list_fail);
            f->list_fail = NULL;
        }
        goto fail;
    }
    if (o.continue_token && *o.continue_token) {
        unsigned id;
        size_t off;
        struct snapshot *sn = NULL;
        if (sscanf(o.continue_token, "fake:%u:%zu", &id, &off) == 2)
            sn = find_snap_locked(f, id);
        if (!sn) {
            st = ckube_status_new(410, CKUBE_REASON_EXPIRED,
                                  "The provided continue parameter is too old to display a "
                                  "consistent list result.");
            goto fail;
        }
        *list = page_locked(f, sn, off, o.limit > 0 ? o.limit : INT64_MAX / 2);
        rc = 0;
        goto out;
    }
    const char *rvs = o.resource_version;
    uint64_t want = 0;
    bool any = rvs && strcmp(rvs, "0") == 0;
    if (rvs && *rvs && !any) {
        if (!parse_rv(rvs, &want)) {
            st =
                ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                                 "resourceVersion: Invalid value: \"%s\": must be an integer", rvs);
            goto fail;
        }
        if (want > f->rv) {
            st = ckube_status_new(504, CKUBE_REASON_TIMEOUT,
                                  "Too large resource version: %" PRIu64 ", current: %" PRIu64,
                                  want, f->rv);
            goto fail;
        }
    }
    json_t *items = objects_sorted_locked(f);
    if (!items) {
        st = ckube_status_internal("out of memory");
        goto fail;
    }
    bool page = o.limit > 0 && (!any || f->page_rv0) && json_array_size(items) > (size_t)o.limit;
    if (!page) {
        *list = list_object_locked(f, items, f->rv);
        rc = 0;
        goto out;
    }
    struct snapshot *ns = realloc(f->snaps, (f->nsnaps + 1) * sizeof(*ns));
    if (!ns) {
        json_decref(items);
        st = ckube_status_internal("out of memory");
        goto fail;
    }
    f->snaps = ns;
    struct snapshot *sn = &f->snaps[f->nsnaps++];
    *sn = (struct snapshot){.id = ++f->next_snap, .items = items, .rv = f->rv};
    *list = page_locked(f, sn, 0, o.limit);
    rc = 0;
    goto out;
fail:
    if (err)
        *err = st;
    else
        ckube_status_free(st);
out:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fake_watch_open(void *ctx, const ckube_list_opts *opts, void **out, ckube_status **err)
{
    ckube_fake_lw *f = ctx;
    ckube_list_opts o = opts ? *opts : (ckube_list_opts){0};
    ckube_status *st = NULL;
    *out = NULL;
    pthread_mutex_lock(&f->mu);
    record_call_locked(f, CKUBE_FAKE_WATCH, &o);
    delay_locked(f);
    st = take_failure(f->watch_fail, &f->watch_fail_count);
    if (st) {
        if (f->watch_fail_count == 0) {
            ckube_status_free(f->watch_fail);
            f->watch_fail = NULL;
        }
        goto fail;
    }
    const char *rvs = o.resource_version;
    bool from_now = !rvs || !*rvs || strcmp(rvs, "0") == 0;
    uint64_t from = 0;
    if (!from_now && !parse_rv(rvs, &from)) {
        st = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                              "resourceVersion: Invalid value: \"%s\": must be an integer", rvs);
        goto fail;
    }
    if (!from_now && from < f->compacted) {
        st = ckube_status_new(410, CKUBE_REASON_EXPIRED,
                              "too old resource version: %" PRIu64 " (%" PRIu64 ")", from,
                              f->compacted);
        goto fail;
    }
    /* A watch-list, checked as kube-apiserver does. */
    if (o.send_initial_events &&
        (!o.resource_version_match || strcmp(o.resource_version_match, "NotOlderThan"))) {
        st = ckube_status_new(422, CKUBE_REASON_INVALID,
                              "sendInitialEvents is forbidden for watch unless "
                              "resourceVersionMatch is NotOlderThan");
        goto fail;
    }
    if (o.send_initial_events && !o.allow_watch_bookmarks) {
        st = ckube_status_new(422, CKUBE_REASON_INVALID,
                              "sendInitialEvents requires setting allowWatchBookmarks to true");
        goto fail;
    }
    struct stream *s = calloc(1, sizeof(*s));
    if (!s) {
        st = ckube_status_internal("out of memory");
        goto fail;
    }
    s->bookmarks = o.allow_watch_bookmarks;
    if (o.timeout_seconds.set && o.timeout_seconds.value > 0)
        s->deadline = ckube_clock_now(f->clock) + CKUBE_SEC(o.timeout_seconds.value);
    if (o.send_initial_events || from_now) {
        /* The current state as ADDED; a watch-list then gets the bookmark
         * that ends it (annotated k8s.io/initial-events-end). Live events
         * follow. */
        json_t *items = objects_sorted_locked(f);
        size_t i;
        json_t *obj;
        json_array_foreach(items, i, obj)
        {
            stream_push(s, CKUBE_WATCH_ADDED, json_incref(obj));
        }
        json_decref(items);
        if (o.send_initial_events) {
            json_t *bm =
                json_pack("{s:s, s:s, s:{s:{s:s}}}", "kind", f->kind, "apiVersion", f->api_version,
                          "metadata", "annotations", "k8s.io/initial-events-end", "true");
            set_rv(bm, f->rv);
            stream_push(s, CKUBE_WATCH_BOOKMARK, bm);
        }
    } else {
        for (size_t i = 0; i < f->nhist; i++)
            if (f->hist[i].rv > from)
                stream_push(s, f->hist[i].type, json_deep_copy(f->hist[i].obj));
    }
    s->next = &f->streams;
    s->prev = f->streams.prev;
    f->streams.prev->next = s;
    f->streams.prev = s;
    f->nstreams++;
    *out = s;
    pthread_mutex_unlock(&f->mu);
    return 0;
fail:
    pthread_mutex_unlock(&f->mu);
    if (err)
        *err = st;
    else
        ckube_status_free(st);
    return -1;
}

static int fake_watch_next(void *ctx, void *stream, ckube_watch_event_type *type, json_t **obj,
                           ckube_status **err)
{
    ckube_fake_lw *f = ctx;
    struct stream *s = stream;
    *obj = NULL;
    pthread_mutex_lock(&f->mu);
    int rc;
    for (;;) {
        if (s->done || s->stopped) {
            rc = 0;
            break;
        }
        if (s->head < s->n) {
            struct fake_event *e = &s->ev[s->head++];
            *type = e->type;
            *obj = e->obj;
            e->obj = NULL;
            rc = 1;
            break;
        }
        if (s->broken) {
            if (err)
                *err = ckube_status_new(0, NULL, "fake watch of %s: connection reset by peer",
                                        f->resource);
            rc = -1;
            break;
        }
        if (s->ended || (s->deadline && ckube_clock_now(f->clock) >= s->deadline)) {
            rc = 0;
            break;
        }
        ckube_clock_cond_wait(f->clock, &f->cond, &f->mu, s->deadline);
    }
    if (rc != 1)
        s->done = true;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static void fake_watch_stop(void *ctx, void *stream)
{
    ckube_fake_lw *f = ctx;
    struct stream *s = stream;
    pthread_mutex_lock(&f->mu);
    s->stopped = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

static void fake_watch_close(void *ctx, void *stream)
{
    ckube_fake_lw *f = ctx;
    struct stream *s = stream;
    if (!s)
        return;
    pthread_mutex_lock(&f->mu);
    s->prev->next = s->next;
    s->next->prev = s->prev;
    f->nstreams--;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    for (size_t i = s->head; i < s->n; i++)
        json_decref(s->ev[i].obj);
    free(s->ev);
    free(s);
}

static void fake_free(void *ctx)
{
    ckube_fake_lw_unref(ctx);
}

static const ckube_list_watch_ops fake_ops = {
    .list = fake_list,
    .watch_open = fake_watch_open,
    .watch_next = fake_watch_next,
    .watch_stop = fake_watch_stop,
    .watch_close = fake_watch_close,
    .free = fake_free,
};

ckube_list_watch *ckube_fake_lw_list_watch(ckube_fake_lw *f)
{
    pthread_mutex_lock(&f->mu);
    f->refs++;
    pthread_mutex_unlock(&f->mu);
    return ckube_list_watch_new(&fake_ops, f, f->resource);
}

/* ---- typed objects ---------------------------------------------------------- */

static uint64_t typed_write(ckube_fake_lw *f, const ckube_typed *obj,
                            uint64_t (*write)(ckube_fake_lw *, const json_t *))
{
    json_t *j = obj ? ckube_typed_to_json(obj) : NULL;
    uint64_t rv = j ? write(f, j) : 0;
    json_decref(j);
    return rv;
}

uint64_t ckube_fake_lw_add_typed(ckube_fake_lw *f, const ckube_typed *obj)
{
    return typed_write(f, obj, ckube_fake_lw_add);
}

uint64_t ckube_fake_lw_update_typed(ckube_fake_lw *f, const ckube_typed *obj)
{
    return typed_write(f, obj, ckube_fake_lw_update);
}

uint64_t ckube_fake_lw_apply_typed(ckube_fake_lw *f, const ckube_typed *obj)
{
    return typed_write(f, obj, ckube_fake_lw_apply);
}

ckube_typed *ckube_fake_lw_get_typed(ckube_fake_lw *f, const ckube_type_info *t, const char *ns,
                                     const char *name)
{
    json_t *j = ckube_fake_lw_get(f, ns, name);
    ckube_typed *obj = j ? ckube_struct_from_json(t->object, j, NULL) : NULL;
    json_decref(j);
    return obj;
}
