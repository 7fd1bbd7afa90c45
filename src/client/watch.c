/* Streaming watches.
 *
 * Each watch owns one curl multi handle with one easy handle, driven only
 * from inside ckube_watch_open and ckube_watch_next on the caller's thread:
 * no helper thread, so nothing runs (and nothing can race) while the
 * caller is not asking for an event, and the stream is naturally
 * back-pressured (bytes are read from the socket only when no complete
 * event is buffered). ckube_watch_stop sets an atomic flag and calls
 * curl_multi_wakeup, which libcurl documents as callable from any thread;
 * it makes a curl_multi_poll blocked in ckube_watch_next return at once,
 * and the wakeup stays pending if next is not polling yet, so a stop is
 * never lost.
 *
 * Framing: the body is a sequence of JSON objects (one per line from
 * Kubernetes servers). Rather than splitting on newlines, a small scanner
 * tracks brace depth and string state across chunks, so an event split
 * over any number of chunks, several events in one chunk, and pretty
 * printed or newline-free streams all decode the same. */
#include "client/client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"
#include "ckube/log.h"

/* How long ckube_watch_open waits for the response headers when the
 * config sets no timeout_ms. */
#define HEADER_TIMEOUT_MS 60000L

/* A single event larger than this ends the watch with an error. */
#define MAX_EVENT ((size_t)64 << 20)

struct ckube_watch {
    ckube_client *c;
    CURLM *multi;
    CURL *easy;
    struct curl_slist *slist;
    ckube__resp_headers h;
    char *path;
    char *url; /* base url + path, for messages */
    ckube__req rq;
    char errbuf[CURL_ERROR_SIZE];
    /* received, undecoded bytes: buf[start, len) */
    char *buf;
    size_t start, len, cap;
    bool overflow;
    uint64_t received; /* bytes ever received, to see progress */
    /* framing scanner: position and state inside the current value */
    size_t scan;
    int depth;
    bool in_str, esc;
    /* transfer state */
    bool transfer_done;
    CURLcode result;
    bool finished; /* next() returns 0 from now on */
    atomic_bool stop;
};

static const char *const type_names[] = {NULL, "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

const char *ckube_watch_event_type_name(ckube_watch_event_type t)
{
    if ((int)t < 1 || (int)t > CKUBE_WATCH_ERROR)
        return "UNKNOWN";
    return type_names[t];
}

ckube_watch_event_type ckube_watch_event_type_parse(const char *s)
{
    for (int i = 1; s && i <= CKUBE_WATCH_ERROR; i++)
        if (!strcmp(s, type_names[i]))
            return (ckube_watch_event_type)i;
    return 0;
}

static size_t watch_write(char *p, size_t size, size_t n, void *ud)
{
    ckube_watch *w = ud;
    size_t len = size * n;
    if (w->len - w->start + len > MAX_EVENT) {
        w->overflow = true;
        return 0;
    }
    /* Drop consumed bytes before growing. */
    if (w->start > 0 && (w->start >= w->len || w->start > w->cap / 2)) {
        memmove(w->buf, w->buf + w->start, w->len - w->start);
        w->len -= w->start;
        w->scan -= w->start;
        w->start = 0;
    }
    if (w->len + len + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 16384;
        while (cap < w->len + len + 1)
            cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) {
            w->overflow = true;
            return 0;
        }
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, len);
    w->len += len;
    w->received += len;
    w->buf[w->len] = 0;
    return len;
}

static void reset_buffer(ckube_watch *w)
{
    w->start = w->len = w->scan = 0;
    w->depth = 0;
    w->in_str = w->esc = false;
    w->overflow = false;
}

/* Finds the next complete top-level JSON object. Returns 1 with its
 * bounds, 0 when more bytes are needed, -1 on a byte that cannot start
 * an object. */
static int frame(ckube_watch *w, size_t *a, size_t *b)
{
    for (; w->scan < w->len; w->scan++) {
        char ch = w->buf[w->scan];
        if (w->depth == 0) {
            if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
                w->start = w->scan + 1;
                continue;
            }
            if (ch != '{')
                return -1;
            w->start = w->scan;
            w->depth = 1;
            continue;
        }
        if (w->in_str) {
            if (w->esc)
                w->esc = false;
            else if (ch == '\\')
                w->esc = true;
            else if (ch == '"')
                w->in_str = false;
            continue;
        }
        if (ch == '"') {
            w->in_str = true;
        } else if (ch == '{' || ch == '[') {
            w->depth++;
        } else if ((ch == '}' || ch == ']') && --w->depth == 0) {
            *a = w->start;
            *b = ++w->scan;
            w->start = w->scan;
            return 1;
        }
    }
    return 0;
}

/* One round of curl work: reads what the socket has, notes completion. */
static void perform(ckube_watch *w)
{
    int running = 0;
    curl_multi_perform(w->multi, &running);
    int q;
    CURLMsg *m;
    while ((m = curl_multi_info_read(w->multi, &q))) {
        if (m->msg == CURLMSG_DONE) {
            w->transfer_done = true;
            w->result = m->data.result;
        }
    }
}

static void detach_easy(ckube_watch *w)
{
    if (w->easy) {
        curl_multi_remove_handle(w->multi, w->easy);
        curl_easy_cleanup(w->easy);
        w->easy = NULL;
    }
    curl_slist_free_all(w->slist);
    w->slist = NULL;
}

void ckube_watch_close(ckube_watch *w)
{
    if (!w)
        return;
    detach_easy(w);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    ckube__resp_headers_clear(&w->h);
    free(w->buf);
    free(w->path);
    free(w->url);
    free(w);
}

void ckube_watch_stop(ckube_watch *w)
{
    if (!w)
        return;
    atomic_store(&w->stop, true);
    curl_multi_wakeup(w->multi);
}

/* Sends the request and drives it until the response headers are in
 * (or, for a non-2xx answer, until the whole error body is). */
static int start_once(ckube_watch *w, ckube__creds *cr, ckube_status **err)
{
    ckube_client *c = w->c;
    reset_buffer(w);
    w->transfer_done = false;
    w->errbuf[0] = 0;
    w->easy = curl_easy_init();
    if (!w->easy) {
        *err = ckube__local_error("out of memory");
        return -1;
    }
    if (ckube__easy_setup(c, w->easy, &w->rq, cr, &w->h, &w->slist, err) != 0)
        return -1;
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->errbuf);
    if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK) {
        *err = ckube__local_error("curl_multi_add_handle failed");
        return -1;
    }
    /* Watches have no total timeout, but the answer itself must come:
     * nothing could stop an open() stuck forever. */
    long limit_ms = c->cfg->timeout_ms > 0 ? c->cfg->timeout_ms : HEADER_TIMEOUT_MS;
    uint64_t deadline = ckube_monotonic_ns() + (uint64_t)limit_ms * 1000000u;
    bool want_body = false;
    while (!w->transfer_done && (!w->h.done || want_body)) {
        perform(w);
        if (w->h.done && (w->h.code < 200 || w->h.code >= 300))
            want_body = true; /* an error: read its Status body to the end */
        if (w->transfer_done || (w->h.done && !want_body))
            break;
        if (ckube_monotonic_ns() > deadline) {
            w->transfer_done = true;
            w->result = CURLE_OPERATION_TIMEDOUT;
            snprintf(w->errbuf, sizeof w->errbuf, "no answer within %ld ms", limit_ms);
            break;
        }
        curl_multi_poll(w->multi, NULL, 0, 200, NULL);
    }
    return 0;
}

int ckube_watch_open(ckube_client *c, const ckube_gvr *r, const char *ns,
                     const ckube_list_opts *opts, ckube_watch **out, ckube_status **err)
{
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    *out = NULL;
    ckube_watch *w = calloc(1, sizeof *w);
    if (!w || !(w->multi = curl_multi_init())) {
        free(w);
        *err = ckube__local_error("out of memory");
        goto fail_noclose;
    }
    w->c = c;
    atomic_init(&w->stop, false);
    ckube__resp_headers_clear(&w->h);
    w->path = ckube__watch_path(r, ns, opts);
    if (!w->path) {
        *err = ckube__local_error("resource needs a version and a resource name");
        goto fail;
    }
    if (asprintf(&w->url, "%s%s", c->base_url, w->path) < 0) {
        w->url = NULL;
        *err = ckube__local_error("out of memory");
        goto fail;
    }
    w->rq = (ckube__req){.method = "GET",
                         .path = w->path,
                         .watch = true,
                         .group = r->group,
                         .resource = r->resource,
                         .accept = opts && opts->partial_metadata ? CKUBE__ACCEPT_PARTIAL : NULL};
    int retries = 0;
    bool auth_retried = false;
    for (;;) {
        ckube__throttle(c, &w->rq);
        ckube__creds cr;
        if (ckube__auth_get(c->auth, &cr, err) != 0)
            goto fail;
        uint64_t t0 = ckube_monotonic_ns();
        int rc = start_once(w, &cr, err);
        uint64_t dt = ckube_monotonic_ns() - t0;
        if (rc != 0) {
            ckube__creds_clear(&cr);
            goto fail;
        }
        if (w->transfer_done && w->result != CURLE_OK &&
            !(w->h.done && (w->h.code < 200 || w->h.code >= 300))) {
            ckube__log_request(c, &w->rq, 0, dt, NULL, 0,
                               *w->errbuf ? w->errbuf : curl_easy_strerror(w->result));
            *err = ckube__transport_error(c, &w->rq, w->result, w->errbuf);
            ckube__creds_clear(&cr);
            goto fail;
        }
        long code = w->h.code;
        bool ok = code >= 200 && code < 300;
        ckube__log_request(c, &w->rq, code, dt, ok ? NULL : w->buf, ok ? 0 : w->len, NULL);
        ckube__emit_warnings(c, &w->h);
        if (ok) {
            ckube__creds_clear(&cr);
            break;
        }
        int secs = 0;
        bool again = false;
        if (code == 401 && !auth_retried && ckube__auth_unauthorized(c->auth, &cr)) {
            auth_retried = true;
            again = true;
        } else if (ckube__should_retry(code, &w->h, &secs) && retries < c->max_retries) {
            retries++;
            again = true;
            CKUBE_V(4, "Got a Retry-After %ds response for attempt %d to %s%s", secs, retries,
                    c->base_url, w->path);
        }
        ckube__creds_clear(&cr);
        if (!again) {
            *err = ckube__status_from_response(&w->rq, code, w->buf, w->len, &w->h);
            goto fail;
        }
        detach_easy(w);
        ckube__sleep_ns((uint64_t)secs * 1000000000u);
    }
    *out = w;
    return 0;
fail:
    ckube_watch_close(w);
fail_noclose:
    ckube_status_free(dummy);
    return -1;
}

static int decode_event(ckube_watch *w, size_t a, size_t b, ckube_watch_event_type *type,
                        json_t **obj, ckube_status **err)
{
    char *jerr = NULL;
    json_t *ev = ckube_json_loads(w->buf + a, b - a, &jerr);
    if (!ev) {
        if (err)
            *err = ckube__local_error("decoding watch event from %s%s: %s", w->c->base_url, w->path,
                                      jerr ? jerr : "invalid JSON");
        free(jerr);
        return -1;
    }
    const char *ts = json_string_value(json_object_get(ev, "type"));
    ckube_watch_event_type t = ckube_watch_event_type_parse(ts);
    json_t *o = json_object_get(ev, "object");
    if (!t || !json_is_object(o)) {
        if (err)
            *err = ckube__local_error(t ? "watch event %s without an object"
                                        : "got invalid watch event type: %s",
                                      ts ? ts : "(none)");
        json_decref(ev);
        return -1;
    }
    *type = t;
    *obj = json_incref(o);
    json_decref(ev);
    return 1;
}

/* The next complete event's bounds in w->buf: 1 with [*a, *b), 0 when
 * the stream ended cleanly or was stopped, -1 with *err. After 0 or -1
 * the watch is finished. */
static int next_frame(ckube_watch *w, size_t *a, size_t *b, ckube_status **err)
{
    if (w->finished)
        return 0;
    for (;;) {
        if (atomic_load(&w->stop)) {
            w->finished = true;
            return 0;
        }
        int fr = frame(w, a, b);
        if (fr > 0)
            return 1;
        if (fr < 0) {
            w->finished = true;
            if (err)
                *err = ckube__local_error("watch stream from %s%s is not a sequence of JSON "
                                          "objects (byte 0x%02x)",
                                          w->c->base_url, w->path, (unsigned char)w->buf[w->scan]);
            return -1;
        }
        if (w->transfer_done) {
            w->finished = true;
            if (w->overflow) {
                if (err)
                    *err = ckube__local_error("watch event from %s%s exceeds %zu bytes",
                                              w->c->base_url, w->path, MAX_EVENT);
                return -1;
            }
            if (w->result != CURLE_OK) {
                if (err)
                    *err = ckube__transport_error(w->c, &w->rq, w->result, w->errbuf);
                return -1;
            }
            if (w->depth > 0) {
                if (err)
                    *err = ckube__local_error("watch stream from %s%s ended inside an event",
                                              w->c->base_url, w->path);
                return -1;
            }
            return 0;
        }
        uint64_t before = w->received;
        perform(w);
        if (w->received != before || w->transfer_done)
            continue;
        curl_multi_poll(w->multi, NULL, 0, 60000, NULL);
    }
}

int ckube_watch_next(ckube_watch *w, ckube_watch_event_type *type, json_t **obj, ckube_status **err)
{
    *obj = NULL;
    size_t a, b;
    int rc = next_frame(w, &a, &b, err);
    if (rc <= 0)
        return rc;
    rc = decode_event(w, a, b, type, obj, err);
    if (rc < 0)
        w->finished = true;
    return rc;
}

int ckube__watch_next_raw(ckube_watch *w, const char **text, size_t *len, ckube_status **err)
{
    *text = NULL;
    *len = 0;
    size_t a, b;
    int rc = next_frame(w, &a, &b, err);
    if (rc > 0) {
        /* The bytes stay put until the next call: watch_write only moves
         * or reallocates the buffer from inside next_frame. */
        *text = w->buf + a;
        *len = b - a;
    }
    return rc;
}

const char *ckube__watch_url(ckube_watch *w)
{
    return w->url;
}
