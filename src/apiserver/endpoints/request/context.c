/* context.c - a request's context and its reply writers; loops' task
 * queues. See context.h. */
#include "apiserver/endpoints/request/context.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apiserver/authentication/user.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

/* ---- tasks posted to loops ---------------------------------------------- */

void loop_post(loop *lp, void (*fn)(void *), void *arg)
{
    loop_task *t = xmalloc(sizeof *t);
    t->fn = fn;
    t->arg = arg;
    t->next = NULL;
    pthread_mutex_lock(&lp->mu);
    if (lp->tasks_tail)
        lp->tasks_tail->next = t;
    else
        lp->tasks = t;
    lp->tasks_tail = t;
    pthread_mutex_unlock(&lp->mu);
    event_active(lp->wake, 0, 0);
}

/* ---- replies ----------------------------------------------------------- */

const char *req_query(req_ctx *rc, const char *key)
{
    return evhttp_find_header(&rc->query, key);
}

bool req_query_bool(req_ctx *rc, const char *key)
{
    /* As apimachinery converts query strings to bools: absent, "0" and
     * "false" in any case are false; anything else, "" included, is true. */
    const char *v = req_query(rc, key);
    return v && strcmp(v, "0") && strcasecmp(v, "false");
}

/* Tells on_request_done, once. A whole reply does it before its bytes
 * go out, as upstream's metrics are recorded when the handler returns:
 * a client that has the reply then scrapes /metrics (on another loop)
 * finds the request counted. Streams and watches do it when they end. */
static void req_report(req_ctx *rc)
{
    if (rc->reported)
        return;
    rc->reported = true;
    if (rc->srv->on_request_done)
        rc->srv->on_request_done(rc);
}

void req_ctx_free(req_ctx *rc)
{
    if (!rc)
        return;
    req_report(rc);
    if (!rc->long_running)
        atomic_fetch_sub(&rc->srv->inflight, 1);
    evhttp_clear_headers(&rc->query);
    auth_user_unref(rc->user);
    resource_type_unref(rc->type);
    json_decref(rc->audit_reply);
    for (size_t i = 0; i < rc->warnings.n; i++)
        free(rc->warnings.texts[i]);
    free(rc->warnings.texts);
    free(rc);
}

/* Upstream's warning recorder (apiserver's filters/warning.go): a text is
 * sent once; while all of them fit in WARN_TOTAL_RUNES characters they
 * go whole, and once one would not, every text is cut to WARN_ITEM_RUNES
 * and texts are taken only until the total is reached again. So a body
 * with a hundred thousand unknown fields gets a few KiB of warnings, not
 * a header of megabytes built in quadratic time. */
#define WARN_TOTAL_RUNES 4096
#define WARN_ITEM_RUNES 256

/* Characters (UTF-8 sequences; a stray byte counts as one) in s. */
static size_t runes(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

void req_add_warning(req_ctx *rc, const char *msg)
{
    req_warnings *w = &rc->warnings;
    if (!msg || !*msg || (w->truncating && w->runes >= WARN_TOTAL_RUNES))
        return;
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->texts[i], msg))
            return;
    size_t len = runes(msg);
    if (w->truncating && len > WARN_ITEM_RUNES)
        len = WARN_ITEM_RUNES;
    if (!w->truncating && w->runes + len > WARN_TOTAL_RUNES) {
        /* From now on everything is cut, what is already kept too. */
        w->truncating = true;
        w->runes = 0;
        for (size_t i = 0; i < w->n; i++) {
            size_t r = runes(w->texts[i]);
            w->runes += r > WARN_ITEM_RUNES ? WARN_ITEM_RUNES : r;
        }
        if (len > WARN_ITEM_RUNES)
            len = WARN_ITEM_RUNES;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4;
        char **t = xrealloc(w->texts, cap * sizeof *t);
        w->texts = t;
        w->cap = cap;
    }
    char *copy = xstrdup(msg);
    w->texts[w->n++] = copy;
    w->runes += len;
}

/* The Warning header: 299 - "text" (RFC 7234) for each, joined by ", ";
 * a text is a quoted-string, so '"' and '\' are escaped. Texts are cut
 * on a character boundary once the recorder truncates. NULL if none. */
static char *warning_header(const req_ctx *rc)
{
    ckube__strbuf b = {0};
    for (size_t i = 0; i < rc->warnings.n; i++) {
        if (i)
            ckube__sb_add(&b, ", ");
        ckube__sb_add(&b, "299 - \"");
        size_t left = rc->warnings.truncating ? WARN_ITEM_RUNES : SIZE_MAX;
        for (const char *p = rc->warnings.texts[i]; *p; p++) {
            if (((unsigned char)*p & 0xC0) != 0x80 && left-- == 0)
                break;
            if (*p == '"' || *p == '\\')
                ckube__sb_addc(&b, '\\');
            ckube__sb_addc(&b, (*p == '\n' || *p == '\r') ? ' ' : *p);
        }
        ckube__sb_addc(&b, '"');
    }
    return rc->warnings.n ? ckube__sb_take(&b) : NULL;
}

void req_add_common_headers(req_ctx *rc, const char *content_type)
{
    httpd_add_header(rc->req, "Content-Type", content_type);
    httpd_add_header(rc->req, "Cache-Control",
                     rc->cache_control ? rc->cache_control : "no-cache, private");
    char *warning = warning_header(rc);
    if (warning)
        httpd_add_header(rc->req, "Warning", warning);
    free(warning);
    req_close_if_draining(rc);
}

void req_close_if_draining(req_ctx *rc)
{
    if (atomic_load(&rc->srv->draining))
        httpd_add_header(rc->req, "Connection", "close");
}

void req_long_running(req_ctx *rc)
{
    if (rc->long_running)
        return;
    rc->long_running = true;
    atomic_fetch_sub(&rc->srv->inflight, 1);
    if (rc->srv->on_watch_started)
        rc->srv->on_watch_started(rc);
}

void reply_evbuffer(req_ctx *rc, int code, struct evbuffer *buf)
{
    rc->code = code;
    if (rc->audit && (code >= 300 || rc->audit_keep_reply) && !rc->audit_reply) {
        /* (decoded again only for the audit log, which asked for it) */
        size_t len = evbuffer_get_length(buf);
        rc->audit_reply = json_loadb((const char *)evbuffer_pullup(buf, -1), len, 0, NULL);
    }
    req_add_common_headers(rc, "application/json");
    CKUBE_V(4, "%s %s -> %d", rc->ri.verb[0] ? rc->ri.verb : "request", httpd_req_target(rc->req),
            code);
    req_report(rc);
    httpd_send_reply(rc->req, code, buf);
    req_ctx_free(rc);
}

void reply_raw(req_ctx *rc, int code, const char *content_type, const char *data, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add(buf, data, len);
    rc->code = code;
    req_add_common_headers(rc, content_type);
    req_report(rc);
    httpd_send_reply(rc->req, code, buf);
    evbuffer_free(buf);
    req_ctx_free(rc);
}

/* evbuffer reference cleanup for malloc'd data. */
static void free_ref(const void *data, size_t len, void *arg)
{
    free((void *)data);
}

void reply_json_bytes(req_ctx *rc, int code, char *bytes, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    if (bytes)
        evbuffer_add_reference(buf, bytes, len, free_ref, NULL);
    reply_evbuffer(rc, code, buf);
    evbuffer_free(buf);
}

void reply_json(req_ctx *rc, int code, json_t *body)
{
    size_t len = 0;
    char *s = ckube_json_dumps(body, &len);
    json_decref(body);
    reply_json_bytes(rc, code, s, len);
}

void reply_status(req_ctx *rc, ckube_status *st)
{
    int code = st->code ? st->code : 500;
    CKUBE_V(2, "%s %s: %d %s", rc->method, httpd_req_target(rc->req), code,
            st->message ? st->message : "");
    json_t *j = ckube_status_to_json(st);
    ckube_status_free(st);
    reply_json(rc, code, j);
}
