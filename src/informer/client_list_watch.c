/* client_list_watch.c - the list-watch over the REST client (see
 * ckube/informer.h). Kept in its own file so programs that only use
 * fakes do not pull in the client.
 *
 * Besides the public operations it has compact ones (informer_internal.h)
 * that the reflector prefers: a list response or watch event is scanned
 * straight from the received bytes into compact objects, never becoming
 * a jansson tree. */
#include "ckube/informer.h"
#include "client/client_internal.h"
#include "informer/informer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct client_lw {
    ckube_client *client; /* borrowed */
    char *group, *version, *resource;
    char *ns;
    char *label_selector, *field_selector;
};

static void client_lw_free(void *ctx)
{
    struct client_lw *c = ctx;
    if (!c)
        return;
    free(c->group);
    free(c->version);
    free(c->resource);
    free(c->ns);
    free(c->label_selector);
    free(c->field_selector);
    free(c);
}

static ckube_gvr client_gvr(const struct client_lw *c)
{
    return (ckube_gvr){.group = c->group, .version = c->version, .resource = c->resource};
}

/* The caller's options with this list-watch's selectors. */
static ckube_list_opts with_selectors(const struct client_lw *c, const ckube_list_opts *opts)
{
    ckube_list_opts o = opts ? *opts : (ckube_list_opts){0};
    if (c->label_selector)
        o.label_selector = c->label_selector;
    if (c->field_selector)
        o.field_selector = c->field_selector;
    return o;
}

static int client_list(void *ctx, const ckube_list_opts *opts, json_t **list, ckube_status **err)
{
    struct client_lw *c = ctx;
    ckube_gvr gvr = client_gvr(c);
    ckube_list_opts o = with_selectors(c, opts);
    return ckube_list(c->client, &gvr, c->ns, &o, list, err);
}

static int client_watch_open(void *ctx, const ckube_list_opts *opts, void **stream,
                             ckube_status **err)
{
    struct client_lw *c = ctx;
    ckube_gvr gvr = client_gvr(c);
    ckube_list_opts o = with_selectors(c, opts);
    ckube_watch *w = NULL;
    int rc = ckube_watch_open(c->client, &gvr, c->ns, &o, &w, err);
    *stream = w;
    return rc;
}

static int client_watch_next(void *ctx, void *stream, ckube_watch_event_type *type, json_t **obj,
                             ckube_status **err)
{
    (void)ctx;
    return ckube_watch_next(stream, type, obj, err);
}

static void client_watch_stop(void *ctx, void *stream)
{
    (void)ctx;
    ckube_watch_stop(stream);
}

static void client_watch_close(void *ctx, void *stream)
{
    (void)ctx;
    ckube_watch_close(stream);
}

/* The body goes to the decoder as it arrives. */
static void stream_begin(void *ud)
{
    ckube__clist_stream_reset(ud);
}

static bool stream_feed(void *ud, const char *p, size_t n)
{
    return ckube__clist_stream_feed(ud, p, n) == 0;
}

static int client_list_compact(void *ctx, const ckube_list_opts *opts, const ckube__cobj_opts *co,
                               ckube__clist *out, int (*on_item)(void *ud, ckube__cobj *c),
                               void *item_ud, ckube_status **err)
{
    struct client_lw *c = ctx;
    ckube_gvr gvr = client_gvr(c);
    ckube_list_opts o = with_selectors(c, opts);
    ckube__clist_stream *st = ckube__clist_stream_new(co);
    if (!st) {
        if (err)
            *err = ckube__local_error("out of memory");
        return -1;
    }
    if (on_item)
        ckube__clist_stream_on_item(st, on_item, item_ud);
    ckube__body_sink sink = {.begin = stream_begin, .feed = stream_feed, .ud = st};
    char *what = NULL, *perr = NULL;
    int rc = ckube__list_stream(c->client, &gvr, c->ns, &o, &sink, &what, err);
    if (rc != -1) {
        /* Fed completely (0) or stopped by the decoder (-2): either way
         * finishing says what the body was. */
        rc = ckube__clist_stream_finish(st, out, &perr);
        if (rc == -1 && err)
            *err = ckube__local_error("decoding the answer to %s: %s", what ? what : "the list",
                                      perr ? perr : "invalid JSON");
    }
    free(perr);
    free(what);
    ckube__clist_stream_free(st);
    return rc;
}

static int client_watch_next_compact(void *ctx, void *stream, const ckube__cobj_opts *co,
                                     ckube__cevent *ev, ckube_status **err)
{
    (void)ctx;
    const char *text;
    size_t len;
    *ev = (ckube__cevent){0};
    int rc = ckube__watch_next_raw(stream, &text, &len, err);
    if (rc <= 0)
        return rc;
    char *perr = NULL;
    rc = ckube__cobj_parse_event(text, len, co, ev, &perr);
    if (rc != 0) {
        if (err && rc == -1)
            *err = ckube__local_error("decoding watch event from %s: %s", ckube__watch_url(stream),
                                      perr ? perr : "invalid JSON");
        else if (err)
            *err = ckube__local_error("%s", perr ? perr : "invalid watch event");
        free(perr);
        /* As ckube_watch_next after a bad event: the stream is over. */
        ckube_watch_stop(stream);
        return -1;
    }
    return 1;
}

static const ckube__lw_compact_ops client_compact_ops = {
    .list = client_list_compact,
    .watch_next = client_watch_next_compact,
};

static const ckube_list_watch_ops client_ops = {
    .list = client_list,
    .watch_open = client_watch_open,
    .watch_next = client_watch_next,
    .watch_stop = client_watch_stop,
    .watch_close = client_watch_close,
    .free = client_lw_free,
};

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

ckube_list_watch *ckube_list_watch_new_client(ckube_client *client, const ckube_gvr *gvr,
                                              const char *ns, const char *label_selector,
                                              const char *field_selector)
{
    if (!client || !gvr || !gvr->version || !gvr->resource)
        return NULL;
    struct client_lw *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->client = client;
    c->group = strdup(gvr->group ? gvr->group : "");
    c->version = strdup(gvr->version);
    c->resource = strdup(gvr->resource);
    c->ns = dup_or_null(ns);
    c->label_selector = dup_or_null(label_selector);
    c->field_selector = dup_or_null(field_selector);
    if (!c->group || !c->version || !c->resource || (ns && *ns && !c->ns) ||
        (label_selector && *label_selector && !c->label_selector) ||
        (field_selector && *field_selector && !c->field_selector)) {
        client_lw_free(c);
        return NULL;
    }
    char desc[512];
    if (*c->group)
        snprintf(desc, sizeof(desc), "%s.%s", c->resource, c->group);
    else
        snprintf(desc, sizeof(desc), "%s", c->resource);
    ckube_list_watch *lw = ckube_list_watch_new(&client_ops, c, desc);
    if (lw)
        ckube__list_watch_set_compact(lw, &client_compact_ops);
    return lw;
}
