/* Watch: chunked HTTP streams of events, one JSON object per line.
 *
 * A watch lives on its request's loop. The cacher wakes every loop after
 * each applied batch; the loop then collects, for each of its watches, the
 * events after the watch's revision and writes them. An event's object
 * bytes are shared with the cache (evbuffer references), so an event is
 * encoded once however many watchers receive it. Table-formatted watches
 * (kubectl get -w) are the exception: their rows are rendered per watch.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "apiserver/apiserver.h"
#include "ckube/json.h"
#include "ckube/log.h"

#define WATCH_MAX_BACKLOG (16u << 20) /* a slower reader is cut off */
#define BOOKMARK_INTERVAL_SEC 30

struct http_watch {
    LIST_ENTRY(http_watch) link;
    req_ctx *rc;
    cwatch cw;
    ckube_selector *ls, *fs;
    bool table;
    bool table_headers_sent;
    bool bookmarks;
    struct evhttp_connection *conn;
    struct event *timeout_ev;
    struct event *bookmark_ev;
    struct event *close_ev;
};

static void watch_free(http_watch *w)
{
    if (w->timeout_ev)
        event_free(w->timeout_ev);
    if (w->bookmark_ev)
        event_free(w->bookmark_ev);
    if (w->close_ev)
        event_free(w->close_ev);
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
    evhttp_connection_set_closecb(w->conn, NULL, NULL);
    struct evhttp_request *req = w->rc->req;
    watch_free(w);
    evhttp_send_reply_end(req);
}

/* The peer is gone: drop the connection without writing. */
static void watch_abort(http_watch *w)
{
    LIST_REMOVE(w, link);
    struct evhttp_connection *conn = w->conn;
    evhttp_connection_set_closecb(conn, NULL, NULL);
    CKUBE_V(4, "watch of %s: client went away", w->rc->type->resource);
    watch_free(w);
    evhttp_connection_free(conn);
}

/* libevent noticed the connection failed (a write error). The request has
 * been detached from the connection; ending the reply frees it. */
static void on_conn_closed(struct evhttp_connection *conn, void *arg)
{
    http_watch *w = arg;
    LIST_REMOVE(w, link);
    struct evhttp_request *req = w->rc->req;
    watch_free(w);
    evhttp_send_reply_end(req);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    http_watch *w = arg;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        watch_abort(w);
        return;
    }
    if (n > 0) {
        /* The client sent more (a pipelined request); stop polling, a
         * failed write will tell us when it leaves. */
        event_del(w->close_ev);
    }
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    http_watch *w = arg;
    watch_end(w);
}

static size_t backlog(http_watch *w)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(w->conn);
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void unref_cobj(const void *data, size_t len, void *arg)
{
    cobj_unref(arg);
}

static const char *type_name(cevent_type t)
{
    return t == CEV_ADDED ? "ADDED" : t == CEV_MODIFIED ? "MODIFIED" : "DELETED";
}

/* Appends one event line; takes the event's object reference. */
static void encode_event(http_watch *w, struct evbuffer *out, cevent_type type, cobj *o)
{
    const resource_type *t = w->rc->type;
    if (!w->table && !t->present) {
        evbuffer_add_printf(out, "{\"type\":\"%s\",\"object\":", type_name(type));
        evbuffer_add_reference(out, o->json, o->len, unref_cobj, o);
        evbuffer_add(out, "}\n", 2);
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

static void send_chunk(http_watch *w, struct evbuffer *out)
{
    if (evbuffer_get_length(out))
        evhttp_send_reply_chunk(w->rc->req, out);
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
    const resource_type *t = w->rc->type;
    evbuffer_add_printf(out,
                        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\","
                        "\"metadata\":{\"resourceVersion\":\"%" PRId64 "\"%s}}}\n",
                        t->kind, t->api_version, rev,
                        initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
                                    : "");
    send_chunk(w, out);
    evbuffer_free(out);
}

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
    if (backlog(w) > WATCH_MAX_BACKLOG) {
        CKUBE_WARN("watch of %s: client too slow (%zu bytes pending), closing",
                   w->rc->type->resource, backlog(w));
        watch_abort(w);
        return false;
    }
    return true;
}

static void on_bookmark(evutil_socket_t fd, short what, void *arg)
{
    http_watch *w = arg;
    if (flush_one(w))
        send_bookmark(w, w->cw.rev, false);
}

void watch_loop_flush(loop *lp)
{
    http_watch *w = LIST_FIRST(&lp->watches);
    while (w) {
        http_watch *next = LIST_NEXT(w, link);
        flush_one(w);
        w = next;
    }
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
    http_watch *w = calloc(1, sizeof *w);
    w->rc = rc;
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
    w->cw.bucket = strdup(prefix);
    w->cw.filter.ns = t->namespaced ? rc->ri.ns : "";
    w->cw.filter.name = rc->ri.name; /* /watch/.../NAME watches one object */
    w->cw.filter.labels = w->ls;
    w->cw.filter.fields = w->fs;

    cevent_out *initial = NULL;
    size_t ninitial = 0;
    int64_t oldest = 0;
    bool expired = cacher_watch_begin(rc->srv->cache, &w->cw, initial_events ? 0 : from, &initial,
                                      &ninitial, &oldest) != 0;

    struct evkeyvalq *h = evhttp_request_get_output_headers(rc->req);
    evhttp_add_header(h, "Content-Type",
                      w->table ? "application/json;as=Table;v=v1;g=meta.k8s.io"
                               : "application/json");
    evhttp_add_header(h, "Cache-Control", "no-cache, private");
    evhttp_send_reply_start(rc->req, 200, "OK");
    w->conn = evhttp_request_get_connection(rc->req);
    LIST_INSERT_HEAD(&rc->lp->watches, w, link);
    evhttp_connection_set_closecb(w->conn, on_conn_closed, w);
    if (expired) {
        send_expired(w, from, oldest);
        watch_end(w);
        return;
    }
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

    struct event_base *base = rc->lp->base;
    struct timeval tv = {timeout, 0};
    w->timeout_ev = evtimer_new(base, on_timeout, w);
    evtimer_add(w->timeout_ev, &tv);
    if (w->bookmarks) {
        struct timeval bt = {BOOKMARK_INTERVAL_SEC, 0};
        w->bookmark_ev = event_new(base, -1, EV_PERSIST, on_bookmark, w);
        evtimer_add(w->bookmark_ev, &bt);
    }
    struct bufferevent *bev = evhttp_connection_get_bufferevent(w->conn);
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd >= 0) {
        w->close_ev = event_new(base, fd, EV_READ | EV_PERSIST, on_readable, w);
        event_add(w->close_ev, NULL);
    }
    CKUBE_V(3, "watch %s from %" PRId64 " started", t->resource, from);
    /* Events applied between begin and now are delivered at once. */
    flush_one(w);
}
