/* Watch: chunked HTTP streams of events, one JSON object per line.
 *
 * A watch lives on its request's loop. The cacher wakes every loop after
 * each applied batch; the loop then delivers, to each of its watches, the
 * events after the watch's revision (watch_loop_flush).
 *
 * Fan-out is the cost that matters (issue 7: 1,000 watchers of one
 * resource), so a flush does as little per watcher as it can:
 *  - JSON watches whose filter only reads an object's namespace and name
 *    (no label selector, field selectors on metadata.name/namespace only)
 *    are grouped by bucket and revision; each group's events are collected
 *    from the cacher once (one shared lock, one ring scan) and each event
 *    line is encoded once into a block shared by the group (struct batch).
 *    Such a filter selects an object and its previous state alike (both
 *    have the same key), so these watches need no ADDED/DELETED
 *    translation: each only picks which of the group's lines it gets.
 *  - A chunk (framing included) is written straight to the socket, in one
 *    send or sendmsg, when nothing is queued in the connection's output
 *    (httpd_req_output), the usual case (a watch that takes all of its
 *    group's lines sends one contiguous run of the batch): no evbuffer
 *    chains, no copy. Whatever the socket does not take is queued in that
 *    output, after what is already there, so the byte order of the stream
 *    is kept, and httpd writes the rest (and reports a broken connection
 *    through on_conn_closed).
 * Other watches (label selectors, other field selectors, tables for
 * kubectl get -w, types with a present hook) are collected and encoded per
 * watch, then written the same way.
 *
 * Framing chunks here assumes a chunked reply (HTTP/1.1); otherwise
 * (HTTP/1.0) chunks go through httpd_send_chunk. On TLS httpd gives no
 * descriptor (it must encrypt): the pieces all go to the connection's
 * output, by reference, and httpd writes them a record at a time, so a
 * group still encodes each event once.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "apiserver/endpoints/handlers/handlers.h"
#include "apiserver/endpoints/request/partial.h"
#include "apiserver/endpoints/request/table.h"
#include "apiserver/apiextensions/crd.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/xalloc.h"

#define WATCH_MAX_BACKLOG (16u << 20) /* a slower reader is cut off */
#define BOOKMARK_INTERVAL_SEC 30
#define FLUSH_MAX_GROUPS 32 /* watches beyond this many (bucket, rev) groups flush alone */
#define SEND_IOV 64         /* iovecs per sendmsg */
#define FLUSH_SLICE 256     /* watches served per turn of the loop */

struct http_watch {
    LIST_ENTRY(http_watch) link;
    req_ctx *rc;
    loop *lp; /* counted in lp->nwatches while w lives */
    cwatch cw;
    ckube_selector *ls, *fs;
    bool table;
    bool table_headers_sent;
    bool bookmarks;
    bool direct; /* chunked reply: chunks framed here (to fd when it is >= 0) */
    int fd;
    struct evbuffer *out; /* the connection's output queue (borrowed), or NULL */
    bool shared;          /* may take its group's shared lines (groupable) */
    int group;            /* index into the running flush's groups, or -1 */
    uint64_t flushed;     /* the loop's flush round that last served it */
    struct event *timeout_ev;
    struct event *bookmark_ev;
    /* A type that converts through a webhook: events wait in `pend`, in
     * order, while the batch before them is converted (conv), and the
     * initial-events-end bookmark waits for the events before it. */
    cevent_out *pend;
    size_t npend, cap;
    read_conv *conv;
    cevent_type *conv_types;
    bool initial_end_pending;
    int64_t initial_end_rev;
};

static void watch_free(http_watch *w)
{
    atomic_fetch_sub(&w->lp->nwatches, 1);
    read_convert_cancel(w->conv);
    free(w->conv_types);
    cacher_events_free(w->pend, w->npend);
    if (w->timeout_ev)
        event_free(w->timeout_ev);
    if (w->bookmark_ev)
        event_free(w->bookmark_ev);
    ckube_selector_free(w->ls);
    ckube_selector_free(w->fs);
    free(w->cw.bucket);
    req_ctx_free(w->rc);
    free(w);
}

/* Ends the stream properly (terminating chunk). */
static void watch_end(http_watch *w)
{
    LIST_REMOVE(w, link);
    httpd_req *req = w->rc->req;
    watch_free(w);
    httpd_send_end(req);
}

/* Cuts the stream (a reader too slow): the client sees the connection
 * close without the terminating chunk. */
static void watch_abort(http_watch *w)
{
    LIST_REMOVE(w, link);
    httpd_req *req = w->rc->req;
    watch_free(w);
    httpd_abort(req);
}

/* The client went away, or a write failed; httpd frees the request after
 * this returns. */
static void on_conn_closed(httpd_req *req, void *arg)
{
    (void)req;
    http_watch *w = arg;
    CKUBE_V(4, "watch of %s: client went away", w->rc->type->resource);
    LIST_REMOVE(w, link);
    watch_free(w);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    http_watch *w = arg;
    watch_end(w);
}

static size_t backlog(http_watch *w)
{
    return w->out ? evbuffer_get_length(w->out) : 0;
}

static void unref_cobj(const void *data, size_t len, void *arg)
{
    cobj_unref(arg);
}

static const char *type_name(cevent_type t)
{
    return t == CEV_ADDED ? "ADDED" : t == CEV_MODIFIED ? "MODIFIED" : "DELETED";
}

/* The bytes a JSON event line starts with, up to the object. */
static const char *line_prefix(cevent_type t, size_t *len)
{
    static const char added[] = "{\"type\":\"ADDED\",\"object\":";
    static const char modified[] = "{\"type\":\"MODIFIED\",\"object\":";
    static const char deleted[] = "{\"type\":\"DELETED\",\"object\":";
    if (t == CEV_ADDED) {
        *len = sizeof added - 1;
        return added;
    }
    if (t == CEV_MODIFIED) {
        *len = sizeof modified - 1;
        return modified;
    }
    *len = sizeof deleted - 1;
    return deleted;
}

static bool is_plain(const http_watch *w)
{
    return !w->table && !w->rc->want_partial && !w->rc->type->present;
}

/* Appends one event line; takes the event's object reference. */
static void encode_event(http_watch *w, struct evbuffer *out, cevent_type type, cobj *o)
{
    const resource_type *t = w->rc->type;
    if (is_plain(w)) {
        size_t plen;
        const char *prefix = line_prefix(type, &plen);
        evbuffer_add(out, prefix, plen);
        evbuffer_add_reference(out, o->json, o->len, unref_cobj, o);
        evbuffer_add(out, "}\n", 2);
        return;
    }
    if (w->rc->want_partial) {
        /* Cut from the stored bytes, as for a get (partial.c). */
        size_t plen;
        const char *prefix = line_prefix(type, &plen);
        evbuffer_add(out, prefix, plen);
        partial_append(out, w->rc, o);
        evbuffer_add(out, "}\n", 2);
        cobj_unref(o);
        return;
    }
    json_t *obj = cobj_decode(o);
    if (t->present)
        t->present(t, obj);
    if (!w->table) {
        json_t *ev = json_pack("{s:s,s:O}", "type", type_name(type), "object", obj);
        char *s = ckube_json_dumps(ev, NULL);
        evbuffer_add_printf(out, "%s\n", s ? s : "{}");
        free(s);
        json_decref(ev);
        json_decref(obj);
        cobj_unref(o);
        return;
    }
    json_t *table = json_pack(
        "{s:s,s:s,s:{s:s},s:[o]}", "kind", "Table", "apiVersion", "meta.k8s.io/v1", "metadata",
        "resourceVersion", ckube_obj_resource_version(obj) ? ckube_obj_resource_version(obj) : "",
        "rows", table_row(w->rc, obj));
    if (!w->table_headers_sent) {
        json_object_set_new(table, "columnDefinitions", table_column_definitions(w->rc->type));
        w->table_headers_sent = true;
    } else {
        json_object_set_new(table, "columnDefinitions", json_array());
    }
    json_t *ev = json_pack("{s:s,s:o}", "type", type_name(type), "object", table);
    char *s = ckube_json_dumps(ev, NULL);
    evbuffer_add_printf(out, "%s\n", s ? s : "{}");
    free(s);
    json_decref(ev);
    json_decref(obj);
    cobj_unref(o);
}

/* ---- writing chunks ---------------------------------------------------- */

/* Event lines encoded once for a group of watches, laid out as a whole
 * chunk: data[0..BATCH_HEAD) is room for the size line (written right-
 * aligned), then the lines, then CRLF; a watch that takes every line sends
 * one contiguous run. Reference counted: the flush holds one reference,
 * and every evbuffer reference to bytes a socket did not take at once
 * holds another (dropped by libevent, on the loop thread or wherever the
 * connection is freed). */
#define BATCH_HEAD 24
typedef struct batch {
    atomic_int refs;
    size_t len;  /* bytes of lines */
    size_t head; /* offset of the whole chunk (its size line) in data */
    char data[];
} batch;

static void batch_unref(batch *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1)
        free(b);
}

static void unref_batch(const void *data, size_t len, void *arg)
{
    batch_unref(arg);
}

/* A run of bytes to write. owner == NULL: the bytes are only borrowed for
 * the call (copied if they have to be queued); else they live in owner,
 * which a queued reference keeps alive. */
typedef struct piece {
    const char *p;
    size_t len;
    batch *owner;
} piece;

/* Moves (*i, *skip), a position in pc[0..n), forward by `bytes`. */
static void advance(const piece *pc, size_t n, size_t *i, size_t *skip, size_t bytes)
{
    while (*i < n) {
        size_t rem = pc[*i].len - *skip;
        if (bytes < rem) {
            *skip += bytes;
            return;
        }
        bytes -= rem;
        (*i)++;
        *skip = 0;
    }
}

/* Writes the pieces to the socket as far as it takes them without
 * blocking, if the stream allows it (direct, nothing queued before).
 * Returns the number of bytes written; on an error other than EAGAIN it
 * stops: the caller queues the rest and httpd, writing it, meets the
 * error again and closes the connection through its usual path. */
static size_t write_now(http_watch *w, struct evbuffer *out, const piece *pc, size_t n)
{
    if (!w->direct || w->fd < 0 || evbuffer_get_length(out) != 0)
        return 0;
    size_t done = 0, i = 0, skip = 0;
    while (i < n) {
        struct iovec iov[SEND_IOV];
        size_t k = 0, want = 0;
        for (size_t j = i; j < n && k < SEND_IOV; j++) {
            size_t s = j == i ? skip : 0;
            if (pc[j].len == s)
                continue;
            iov[k].iov_base = (void *)(pc[j].p + s);
            iov[k].iov_len = pc[j].len - s;
            want += iov[k].iov_len;
            k++;
        }
        if (!want)
            break;
        ssize_t r;
        if (k == 1) {
            r = send(w->fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = k};
            r = sendmsg(w->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                CKUBE_V(4, "watch of %s: write: %s", w->rc->type->resource, strerror(errno));
            break;
        }
        done += (size_t)r;
        advance(pc, n, &i, &skip, (size_t)r);
        if ((size_t)r < want)
            break;
    }
    return done;
}

/* Queues pc[0..n) minus its first `done` bytes at the end of the
 * connection's output, and has httpd write it. */
static void queue_rest(http_watch *w, const piece *pc, size_t n, size_t done)
{
    struct evbuffer *out = w->out;
    size_t i = 0, skip = 0;
    advance(pc, n, &i, &skip, done);
    for (; i < n; i++, skip = 0) {
        const char *p = pc[i].p + skip;
        size_t len = pc[i].len - skip;
        if (!len)
            continue;
        if (pc[i].owner) {
            atomic_fetch_add(&pc[i].owner->refs, 1);
            if (evbuffer_add_reference(out, p, len, unref_batch, pc[i].owner) == 0)
                continue;
            batch_unref(pc[i].owner);
        }
        if (evbuffer_add(out, p, len) != 0)
            CKUBE_ERROR("watch: out of memory queueing %zu bytes", len);
    }
    if (evbuffer_get_length(out))
        httpd_flush(w->rc->req);
}

/* Sends one chunk whose payload is pc[1..n-1); pc[0] and pc[n-1] are
 * filled here with the chunk's size line and its closing CRLF. */
static void send_pieces(http_watch *w, piece *pc, size_t n, size_t payload)
{
    char hdr[24];
    pc[0] = (piece){hdr, httpd_chunk_line(hdr, payload), NULL};
    pc[n - 1] = (piece){"\r\n", 2, NULL};
    queue_rest(w, pc, n, write_now(w, w->out, pc, n));
}

/* Sends the contents of `buf` as one chunk (buf is left empty or
 * unchanged; the caller frees it). */
static void send_chunk(http_watch *w, struct evbuffer *buf)
{
    size_t len = evbuffer_get_length(buf);
    if (!len)
        return;
    if (!w->direct) {
        httpd_send_chunk(w->rc->req, buf);
        return;
    }
    char hdr[24];
    size_t hl = httpd_chunk_line(hdr, len);
    struct evbuffer *out = w->out;
    size_t done = 0;
    struct evbuffer_iovec v[SEND_IOV];
    /* An explicit length: with -1 evbuffer_peek fills the vectors and
     * returns at most their number, hiding that more chains follow. */
    int nv = evbuffer_peek(buf, (ev_ssize_t)len, NULL, v, SEND_IOV);
    if (nv > 0 && nv <= SEND_IOV) {
        piece pc[SEND_IOV + 2];
        pc[0] = (piece){hdr, hl, NULL};
        for (int i = 0; i < nv; i++)
            pc[i + 1] = (piece){v[i].iov_base, v[i].iov_len, NULL};
        pc[nv + 1] = (piece){"\r\n", 2, NULL};
        done = write_now(w, out, pc, (size_t)nv + 2);
    }
    /* Queue what is left: header, payload (moved, not copied), CRLF. */
    size_t h = done < hl ? done : hl;
    evbuffer_add(out, hdr + h, hl - h);
    done -= h;
    size_t p = done < len ? done : len;
    evbuffer_drain(buf, p);
    evbuffer_add_buffer(out, buf);
    done -= p;
    static const char crlf[] = "\r\n";
    evbuffer_add(out, &crlf[done], 2 - done);
    httpd_flush(w->rc->req);
}

/* A 410 ERROR event, then the end: the client must relist. */
static void send_expired(http_watch *w, int64_t asked, int64_t oldest)
{
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out,
                        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
                        "\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource "
                        "version: %" PRId64 " (%" PRId64
                        ")\",\"reason\":\"Expired\",\"code\":410}}\n",
                        asked, oldest);
    send_chunk(w, out);
    evbuffer_free(out);
}

static void send_bookmark(http_watch *w, int64_t rev, bool initial_end)
{
    struct evbuffer *out = evbuffer_new();
    /* The object is of the kind the watch serves: a PartialObjectMetadata
     * watch's decoder knows no other. */
    const char *kind, *gv;
    served_kind(w->rc, false, &kind, &gv);
    evbuffer_add_printf(out,
                        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\","
                        "\"metadata\":{\"resourceVersion\":\"%" PRId64 "\"%s}}}\n",
                        kind, gv, rev,
                        initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
                                    : "");
    send_chunk(w, out);
    evbuffer_free(out);
}

/* Cuts off a reader that lets too much pile up. Returns false if it did. */
static bool check_backlog(http_watch *w)
{
    size_t pending = backlog(w);
    if (pending <= WATCH_MAX_BACKLOG)
        return true;
    CKUBE_WARN("watch of %s: client too slow (%zu bytes pending), closing", w->rc->type->resource,
               pending);
    watch_abort(w);
    return false;
}

/* ---- types that convert through a webhook --------------------------------- */

/* Events of one watch waiting for conversion beyond this many: the
 * webhook cannot keep up, and the watch is cut as a slow reader is. */
#define WATCH_MAX_PENDING 100000

static void convert_next(http_watch *w);

/* An ERROR event with st (taken), then the end of the stream. */
static void send_error_end(http_watch *w, ckube_status *st)
{
    json_t *j = ckube_status_to_json(st);
    ckube_status_free(st);
    json_t *ev = json_pack("{s:s,s:o}", "type", "ERROR", "object", j);
    char *line = ckube_json_dumps(ev, NULL);
    json_decref(ev);
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, "%s\n", line ? line : "{}");
    free(line);
    send_chunk(w, out);
    evbuffer_free(out);
    watch_end(w);
}

static void events_converted(req_ctx *rc, cobj **objs, size_t n, ckube_status *st, void *arg)
{
    (void)rc;
    http_watch *w = arg;
    w->conv = NULL;
    cevent_type *types = w->conv_types;
    w->conv_types = NULL;
    if (st) {
        free(types);
        CKUBE_V(2, "watch of %s: %s", w->rc->type->resource, st->message ? st->message : "");
        send_error_end(w, st);
        return;
    }
    struct evbuffer *out = evbuffer_new();
    for (size_t i = 0; i < n; i++)
        encode_event(w, out, types[i], objs[i]); /* takes the reference */
    free(objs);
    free(types);
    send_chunk(w, out);
    evbuffer_free(out);
    if (check_backlog(w))
        convert_next(w);
}

/* Sends the waiting events to the webhook, all in one review, unless a
 * review is out already (its answer starts the next). */
static void convert_next(http_watch *w)
{
    if (w->conv)
        return;
    if (!w->npend) {
        if (w->initial_end_pending) {
            w->initial_end_pending = false;
            send_bookmark(w, w->initial_end_rev, true);
        }
        return;
    }
    size_t n = w->npend;
    cobj **objs = xmalloc(n * sizeof *objs);
    w->conv_types = xmalloc(n * sizeof *w->conv_types);
    for (size_t i = 0; i < n; i++) {
        objs[i] = w->pend[i].obj;
        w->conv_types[i] = w->pend[i].type;
        w->pend[i].obj = NULL;
    }
    w->npend = 0;
    w->conv = read_convert(w->rc, objs, n, n > 1, events_converted, w);
}

/* Queues collected events (taken, with the array) behind those waiting.
 * Returns false if the watch ended. */
static bool queue_events(http_watch *w, cevent_out *evs, size_t n)
{
    if (w->npend + n > WATCH_MAX_PENDING) {
        cacher_events_free(evs, n);
        CKUBE_WARN("watch of %s: conversion webhook too slow (%zu events pending), closing",
                   w->rc->type->resource, w->npend + n);
        watch_abort(w);
        return false;
    }
    if (w->npend + n > w->cap) {
        w->cap = (w->npend + n) * 2;
        w->pend = xrealloc(w->pend, w->cap * sizeof *w->pend);
    }
    for (size_t i = 0; i < n; i++) {
        w->pend[w->npend++] = evs[i];
        evs[i].obj = NULL;
    }
    cacher_events_free(evs, n);
    convert_next(w);
    return true;
}

/* ---- flushing ------------------------------------------------------------ */

/* Delivers pending events to one watch. Returns false if it ended. */
static bool flush_one(http_watch *w)
{
    cevent_out *evs;
    size_t n;
    int64_t before = w->cw.rev;
    if (cacher_watch_collect(w->rc->srv->cache, &w->cw, &evs, &n) != 0) {
        send_expired(w, before, before);
        watch_end(w);
        return false;
    }
    if (n && w->rc->type->convert)
        return queue_events(w, evs, n);
    if (n) {
        struct evbuffer *out = evbuffer_new();
        for (size_t i = 0; i < n; i++) {
            encode_event(w, out, evs[i].type, evs[i].obj);
            evs[i].obj = NULL; /* reference moved into the buffer */
        }
        send_chunk(w, out);
        evbuffer_free(out);
    }
    cacher_events_free(evs, n);
    return check_backlog(w);
}

/* Shareable watches (groupable) of one bucket at one revision, during one
 * flush. */
typedef struct group {
    const char *bucket;                      /* borrowed from a member (alive during collection) */
    int64_t rev;                             /* the members' revision before the flush */
    int64_t new_rev;                         /* after */
    enum { G_OK, G_EXPIRED, G_ALONE } state; /* G_ALONE: flush members one by one */
    cevent_out *evs;                         /* every event of the bucket after rev */
    size_t n;
    batch *lines; /* event i's line: lines->data[off[i] .. off[i + 1]) */
    size_t *off;
    piece *pc; /* scratch: at most n runs plus framing */
} group;

/* True if the field selector only reads metadata.name/namespace, which an
 * object and its previous state (same key) always share. */
static bool key_fields_only(const ckube_selector *fs)
{
    for (size_t i = 0; fs && i < fs->nreqs; i++) {
        if (strcmp(fs->reqs[i].key, "metadata.name") &&
            strcmp(fs->reqs[i].key, "metadata.namespace"))
            return false;
    }
    return true;
}

/* A watch can share its group's lines if what it selects never changes
 * between an object's states: no label selector (an empty one matches
 * everything) and no field selector beyond name and namespace. */
static bool groupable(const http_watch *w)
{
    return w->direct && is_plain(w) && !w->rc->type->convert && (!w->ls || w->ls->nreqs == 0) &&
           key_fields_only(w->fs);
}

/* Collects a group's events once, without a filter, and encodes them. */
static void group_collect(cacher *c, group *g)
{
    cwatch cw = {.bucket = (char *)g->bucket, .rev = g->rev};
    if (cacher_watch_collect(c, &cw, &g->evs, &g->n) != 0) {
        g->state = G_EXPIRED;
        return;
    }
    g->new_rev = cw.rev;
    if (!g->n)
        return;
    size_t total = 0, plen;
    for (size_t i = 0; i < g->n; i++) {
        line_prefix(g->evs[i].type, &plen);
        total += plen + g->evs[i].obj->len + 2;
    }
    g->off = xmalloc((g->n + 1) * sizeof *g->off);
    g->pc = xmalloc((g->n + 2) * sizeof *g->pc);
    g->lines = xmalloc(sizeof *g->lines + BATCH_HEAD + total + 2);
    atomic_init(&g->lines->refs, 1);
    g->lines->len = total;
    char size_line[BATCH_HEAD];
    size_t hl = httpd_chunk_line(size_line, total);
    g->lines->head = BATCH_HEAD - hl;
    memcpy(g->lines->data + g->lines->head, size_line, hl);
    char *p = g->lines->data + BATCH_HEAD;
    for (size_t i = 0; i < g->n; i++) {
        g->off[i] = (size_t)(p - g->lines->data);
        const char *prefix = line_prefix(g->evs[i].type, &plen);
        memcpy(p, prefix, plen);
        p += plen;
        memcpy(p, g->evs[i].obj->json, g->evs[i].obj->len);
        p += g->evs[i].obj->len;
        memcpy(p, "}\n", 2);
        p += 2;
    }
    g->off[g->n] = (size_t)(p - g->lines->data);
    memcpy(p, "\r\n", 2);
}

static void group_free(group *g)
{
    cacher_events_free(g->evs, g->n);
    batch_unref(g->lines);
    free(g->off);
    free(g->pc);
}

/* Delivers a group's events to one of its watches: the lines its
 * namespace/name filter selects, as one chunk. Returns false if it ended. */
static bool flush_member(http_watch *w, group *g)
{
    if (g->state == G_ALONE)
        return flush_one(w);
    if (g->state == G_EXPIRED) {
        send_expired(w, w->cw.rev, w->cw.rev);
        watch_end(w);
        return false;
    }
    w->cw.rev = g->new_rev;
    size_t np = 1, payload = 0;
    for (size_t i = 0; i < g->n;) {
        if (!cfilter_matches(&w->cw.filter, g->evs[i].obj)) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < g->n && cfilter_matches(&w->cw.filter, g->evs[j].obj))
            j++;
        size_t len = g->off[j] - g->off[i];
        g->pc[np++] = (piece){g->lines->data + g->off[i], len, g->lines};
        payload += len;
        i = j;
    }
    if (payload && payload == g->lines->len) {
        /* Every line: the batch already holds the whole chunk. */
        batch *b = g->lines;
        piece whole = {b->data + b->head, BATCH_HEAD - b->head + b->len + 2, b};
        queue_rest(w, &whole, 1, write_now(w, w->out, &whole, 1));
    } else if (payload) {
        send_pieces(w, g->pc, np + 1, payload);
    }
    return check_backlog(w);
}

static void on_bookmark(evutil_socket_t fd, short what, void *arg)
{
    http_watch *w = arg;
    /* a bookmark must not pass events still being converted: skipped */
    if (flush_one(w) && !w->conv && !w->npend)
        send_bookmark(w, w->cw.rev, false);
}

/* Ends the watches on types that CRD changes retired by generation g
 * (read before the flush that preceded this call: a deleted CRD's objects
 * were deleted before the CRD, and their DELETED events have gone out in
 * that flush). */
static void end_retired_watches(loop *lp, unsigned long g)
{
    if (g == lp->crd_retired_seen)
        return;
    lp->crd_retired_seen = g;
    http_watch *w = LIST_FIRST(&lp->watches);
    while (w) {
        http_watch *next = LIST_NEXT(w, link);
        if (crd_type_retired(w->rc->type)) {
            CKUBE_V(2, "watch of %s: the CRD %s was deleted or changed; ending the watch",
                    w->rc->type->resource, w->rc->type->crd_name);
            watch_end(w);
        }
        w = next;
    }
}

/* A flush round serves every watch of the loop once, FLUSH_SLICE watches
 * per call: with thousands of watches a round is tens of milliseconds of
 * sends, and the loop's other connections (a create, its reply) would
 * wait for all of them. Between slices the loop polls its sockets (the
 * `more` timer, zero timeout, runs after that) and runs posted tasks;
 * each slice takes the watches this round has not served, grouped anew.
 * A watch served early in a round whose next event comes before the
 * round ends gets it in the next round, which starts at once if the
 * cache moved on while this one ran. */
void watch_loop_flush(loop *lp)
{
    if (!lp->flush_active) {
        lp->flush_active = true;
        lp->flush_gen++;
        lp->flush_retired = crd_retired_generation(lp->srv->crds);
        lp->flush_rev = cacher_rev(lp->srv->cache);
    }
    uint64_t round = lp->flush_gen;
    group groups[FLUSH_MAX_GROUPS];
    size_t ng = 0;
    http_watch *w;
    LIST_FOREACH(w, &lp->watches, link)
    {
        w->group = -1;
        if (!w->shared || w->flushed == round)
            continue;
        size_t g = 0;
        while (g < ng && (groups[g].rev != w->cw.rev || strcmp(groups[g].bucket, w->cw.bucket)))
            g++;
        if (g == ng) {
            if (ng == FLUSH_MAX_GROUPS)
                continue;
            groups[ng++] = (group){.bucket = w->cw.bucket, .rev = w->cw.rev, .state = G_OK};
        }
        w->group = (int)g;
    }
    for (size_t g = 0; g < ng; g++)
        group_collect(lp->srv->cache, &groups[g]);
    size_t served = 0;
    bool more = false;
    w = LIST_FIRST(&lp->watches);
    while (w) {
        http_watch *next = LIST_NEXT(w, link);
        if (w->flushed != round) {
            if (served == FLUSH_SLICE) {
                more = true;
                break;
            }
            served++;
            w->flushed = round;
            if (w->group >= 0)
                flush_member(w, &groups[w->group]);
            else
                flush_one(w);
        }
        w = next;
    }
    for (size_t g = 0; g < ng; g++)
        group_free(&groups[g]);
    if (more) {
        evtimer_add(lp->more, &lp->flush_pause);
        return;
    }
    lp->flush_active = false;
    end_retired_watches(lp, lp->flush_retired);
    if (cacher_rev(lp->srv->cache) > lp->flush_rev)
        event_active(lp->wake, 0, 0); /* events this round began too early for */
}

void watch_loop_close_all(loop *lp)
{
    http_watch *w;
    while ((w = LIST_FIRST(&lp->watches)))
        watch_end(w);
}

void handle_watch(req_ctx *rc)
{
    const resource_type *t = rc->type;
    http_watch *w = xcalloc(1, sizeof *w);
    w->rc = rc;
    /* Counted before the cache is read (cacher_watch_begin): a batch
     * applied after that read is followed by a wake that sees the count
     * (the cache's lock orders the two). */
    w->lp = rc->lp;
    atomic_fetch_add(&w->lp->nwatches, 1);
    ckube_status *st = request_selectors(rc, &w->ls, &w->fs);
    if (st) {
        w->rc = NULL;
        watch_free(w);
        reply_status(rc, st);
        return;
    }
    const char *rvs = req_query(rc, "resourceVersion");
    int64_t from = 0;
    if (rvs && *rvs) {
        char *end;
        long long v = strtoll(rvs, &end, 10);
        if (*end || v < 0) {
            w->rc = NULL;
            watch_free(w);
            reply_status(rc, ckube_status_bad_request("invalid resourceVersion \"%s\"", rvs));
            return;
        }
        from = v;
    }
    long timeout = 1800 + (long)(ckube_monotonic_ns() % 1800);
    const char *ts = req_query(rc, "timeoutSeconds");
    if (ts && *ts) {
        char *end;
        long v = strtol(ts, &end, 10);
        if (*end || v < 0) {
            w->rc = NULL;
            watch_free(w);
            reply_status(rc, ckube_status_bad_request("invalid timeoutSeconds \"%s\"", ts));
            return;
        }
        if (v > 0)
            timeout = v;
    }
    w->bookmarks = req_query_bool(rc, "allowWatchBookmarks");
    bool initial_events = req_query_bool(rc, "sendInitialEvents");
    w->table = rc->want_table;

    char prefix[256];
    resource_type_key_prefix(t, prefix, sizeof prefix);
    w->cw.bucket = xstrdup(prefix);
    w->cw.filter.ns = t->namespaced ? rc->ri.ns : "";
    w->cw.filter.name = rc->ri.name; /* /watch/.../NAME watches one object */
    w->cw.filter.labels = w->ls;
    w->cw.filter.fields = w->fs;

    cevent_out *initial = NULL;
    size_t ninitial = 0;
    int64_t oldest = 0;
    bool expired = cacher_watch_begin(rc->srv->cache, &w->cw, initial_events ? 0 : from, &initial,
                                      &ninitial, &oldest) != 0;

    httpd_add_header(rc->req, "Content-Type",
                     w->table ? "application/json;as=Table;v=v1;g=meta.k8s.io"
                              : "application/json");
    httpd_add_header(rc->req, "Cache-Control", "no-cache, private");
    /* Counted as long-running before the 200 goes out: a client that
     * reads it and scrapes /metrics at once sees the watch. */
    rc->code = 200;
    req_long_running(rc);
    httpd_send_start(rc->req, 200, on_conn_closed, NULL, w);
    w->fd = httpd_req_fd(rc->req);
    w->out = httpd_req_output(rc->req);
    w->direct = w->out && httpd_req_chunked(rc->req);
    w->group = -1;
    w->shared = groupable(w);
    LIST_INSERT_HEAD(&rc->lp->watches, w, link);
    if (expired) {
        send_expired(w, from, oldest);
        watch_end(w);
        return;
    }
    if (t->convert) {
        /* the end of the initial events waits for them to be converted */
        w->initial_end_pending = initial_events;
        w->initial_end_rev = w->cw.rev;
        if (ninitial && !queue_events(w, initial, ninitial))
            return;
        if (!ninitial) {
            cacher_events_free(initial, ninitial);
            convert_next(w);
        }
    } else {
        if (ninitial) {
            struct evbuffer *out = evbuffer_new();
            for (size_t i = 0; i < ninitial; i++) {
                encode_event(w, out, initial[i].type, initial[i].obj);
                initial[i].obj = NULL;
            }
            send_chunk(w, out);
            evbuffer_free(out);
        }
        cacher_events_free(initial, ninitial);
        if (initial_events)
            send_bookmark(w, w->cw.rev, true);
    }

    struct event_base *base = rc->lp->base;
    struct timeval tv = {timeout, 0};
    w->timeout_ev = evtimer_new(base, on_timeout, w);
    evtimer_add(w->timeout_ev, &tv);
    if (w->bookmarks) {
        struct timeval bt = {BOOKMARK_INTERVAL_SEC, 0};
        w->bookmark_ev = event_new(base, -1, EV_PERSIST, on_bookmark, w);
        evtimer_add(w->bookmark_ev, &bt);
    }
    CKUBE_V(3, "watch %s from %" PRId64 " started", t->resource, from);
    /* Events applied between begin and now are delivered at once. */
    flush_one(w);
}
