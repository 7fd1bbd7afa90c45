/* list_stream.c - large list responses written in bounded pieces.
 *
 * A full list of 100,000 objects is about 150 MB of JSON. Assembling it
 * before sending would cost that much memory per list in flight (and more:
 * one evbuffer chain per item and per separator). Instead the list is
 * sent with chunked transfer encoding from its cache snapshot (an array of
 * object references taken under the cacher's lock, 8 bytes per object),
 * one chunk of about LIST_CHUNK bytes at a time: the next chunk is built
 * only when the connection's output buffer has drained into the kernel.
 * Each object's reference is dropped as soon as its bytes are copied, so
 * objects deleted meanwhile are freed as the stream passes them.
 *
 * A Table (kubectl's human output) is streamed the same way, each row
 * rendered from its object when the stream reaches it: a table of every
 * object would otherwise be built whole, about 2 KB of tree per row.
 *
 * The snapshot fixes the list's content and resourceVersion when the
 * request arrives, as the buffered path does; only the transfer is spread
 * out. A client that goes away mid-list stops the stream (nothing more is
 * encoded), and server shutdown drops the streams still running.
 *
 * Everything here runs on the request's loop thread.
 */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/endpoints/handlers/handlers.h"
#include "apiserver/endpoints/request/partial.h"
#include "apiserver/endpoints/request/table.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/xalloc.h"

#define LIST_CHUNK (256u * 1024)
/* What an audited list (RequestResponse) keeps of its bytes for the
 * audit's responseObject; a longer list is recorded without it. */
#define LIST_AUDIT_MAX ((size_t)64 << 20)

struct list_stream {
    LIST_ENTRY(list_stream) link;
    req_ctx *rc;
    cobj **objs; /* owned array; entries owned until sent (then NULL) */
    size_t n, next;
    char *head; /* owned: everything up to "\"items\":[" (a Table's "\"rows\":[") */
    size_t head_len;
    /* A copy of the bytes sent, for the audit at RequestResponse (owned;
     * NULL: not wanted, or past LIST_AUDIT_MAX). */
    struct evbuffer *audit;
};

bool list_stream_wanted(req_ctx *rc, cobj *const *objs, size_t n)
{
    if (httpd_req_method(rc->req) != HTTPD_GET)
        return false;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += objs[i]->len + 1;
        if (total > LIST_CHUNK)
            return true;
    }
    return false;
}

static void stream_free(list_stream *ls)
{
    for (size_t i = ls->next; i < ls->n; i++)
        if (ls->objs[i])
            cobj_unref(ls->objs[i]);
    free(ls->objs);
    free(ls->head);
    if (ls->audit)
        evbuffer_free(ls->audit);
    req_ctx_free(ls->rc);
    free(ls);
}

/* Appends one item, as served: the cached bytes, or re-encoded when the
 * type is presented in another shape than it is stored. */
static void add_item(list_stream *ls, struct evbuffer *out, const cobj *o)
{
    const resource_type *t = ls->rc->type;
    if (ls->rc->want_table) {
        table_row_append(out, ls->rc, o);
        return;
    }
    if (ls->rc->want_partial) {
        partial_append(out, ls->rc, o);
        return;
    }
    if (!t->present) {
        evbuffer_add(out, o->json, o->len);
        return;
    }
    json_t *obj = cobj_decode(o);
    if (!obj)
        return;
    t->present(t, obj);
    size_t len;
    char *s = ckube_json_dumps(obj, &len);
    json_decref(obj);
    if (s)
        evbuffer_add(out, s, len);
    free(s);
}

/* Keeps a copy of `out` for the audit, up to LIST_AUDIT_MAX. */
static void audit_copy(list_stream *ls, struct evbuffer *out)
{
    if (!ls->audit)
        return;
    size_t len = evbuffer_get_length(out);
    if (evbuffer_get_length(ls->audit) + len > LIST_AUDIT_MAX) {
        evbuffer_free(ls->audit);
        ls->audit = NULL;
        return;
    }
    evbuffer_add(ls->audit, evbuffer_pullup(out, -1), len);
}

/* The whole list sent: it is the audit's reply. */
static void audit_done(list_stream *ls)
{
    if (!ls->audit)
        return;
    size_t len = evbuffer_get_length(ls->audit);
    ls->rc->audit_reply = json_loadb((const char *)evbuffer_pullup(ls->audit, -1), len, 0, NULL);
}

/* Writes the next chunk, or the end. */
static void pump(list_stream *ls)
{
    httpd_req *req = ls->rc->req;
    struct evbuffer *out = evbuffer_new();
    if (ls->head) {
        evbuffer_add(out, ls->head, ls->head_len);
        free(ls->head);
        ls->head = NULL;
    }
    while (ls->next < ls->n && evbuffer_get_length(out) < LIST_CHUNK) {
        cobj *o = ls->objs[ls->next];
        if (ls->next)
            evbuffer_add(out, ",", 1);
        add_item(ls, out, o);
        cobj_unref(o);
        ls->objs[ls->next++] = NULL;
    }
    if (ls->next < ls->n) {
        audit_copy(ls, out);
        httpd_send_chunk(req, out);
        httpd_notify_drained(req);
        evbuffer_free(out);
        return;
    }
    evbuffer_add(out, "]}", 2);
    CKUBE_V(5, "list of %s: all %zu items written", ls->rc->type->resource, ls->n);
    audit_copy(ls, out);
    audit_done(ls);
    httpd_send_chunk(req, out);
    evbuffer_free(out);
    LIST_REMOVE(ls, link);
    stream_free(ls);
    httpd_send_end(req);
}

/* The previous chunk is in the kernel: write the next one. */
static void on_drained(httpd_req *req, void *arg)
{
    (void)req;
    pump(arg);
}

/* The client went away (or its connection failed): stop; httpd frees the
 * request after this returns. */
static void on_conn_closed(httpd_req *req, void *arg)
{
    (void)req;
    list_stream *ls = arg;
    CKUBE_V(4, "list of %s: client went away after %zu of %zu items", ls->rc->type->resource,
            ls->next, ls->n);
    LIST_REMOVE(ls, link);
    stream_free(ls);
}

void list_stream_start(req_ctx *rc, char *head, size_t head_len, cobj **objs, size_t n)
{
    list_stream *ls = xcalloc(1, sizeof *ls);
    ls->rc = rc;
    ls->objs = objs;
    ls->n = n;
    ls->head = head;
    ls->head_len = head_len;
    if (rc->audit_keep_reply)
        ls->audit = evbuffer_new();
    req_add_common_headers(rc, "application/json");
    httpd_send_start(rc->req, 200, on_conn_closed, on_drained, ls);
    rc->code = 200;
    LIST_INSERT_HEAD(&rc->lp->lists, ls, link);
    CKUBE_V(4, "list of %s: streaming %zu items", rc->type->resource, n);
    pump(ls);
}

void list_stream_close_all(loop *lp)
{
    list_stream *ls;
    while ((ls = LIST_FIRST(&lp->lists))) {
        httpd_req *req = ls->rc->req;
        LIST_REMOVE(ls, link);
        CKUBE_V(4, "list of %s: dropped at shutdown after %zu of %zu items", ls->rc->type->resource,
                ls->next, ls->n);
        stream_free(ls);
        httpd_abort(req);
    }
}
