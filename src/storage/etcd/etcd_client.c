/* etcd_client.c - etcd's v3 API over gRPC's C core (see etcd_client.h).
 *
 * A unary call is one batch of six operations (send the metadata, the
 * message and the half-close; receive the metadata, the message and the
 * status). A synchronous call waits on a pluck completion queue of its
 * own; asynchronous calls share the client's next queue, drained by its
 * driver thread, which runs their callbacks. A watch is a bidirectional
 * stream on that queue too: the driver keeps one receive pending and hands
 * each message to the callback, so a write's answer and its watch event
 * are handled by one thread; sends (the create request, progress
 * requests) are batches of their own, one at a time as gRPC asks, each
 * waited for by its sender. */
#include "storage/etcd/etcd_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "ckube/json.h" /* ckube_monotonic_ns */
#include "ckube/log.h"
#include "common/text.h"

#define DEFAULT_TIMEOUT_MS 30000
/* Between attempts of a repeatable call (etcd_call): clientv3's first
 * backoff is 25 ms with jitter. */
#define RETRY_PAUSE_MS 50

struct etcd_client {
    grpc_channel *ch;
    grpc_completion_queue *cq; /* asynchronous calls: a next queue */
    pthread_t driver;          /* drains cq (driver_main) */
    bool has_driver;
};

static void *driver_main(void *p);
struct watch_tag;
static void watch_completed(struct watch_tag *t, int success);

/* ---- endpoints -------------------------------------------------------------- */

/* "http://HOST:PORT" (or https, or no scheme, or a trailing '/') into
 * host (an IPv6 literal without its brackets) and port. */
static int parse_endpoint(const char *s, size_t n, bool *tls, char *host, size_t hn, char *port,
                          size_t pn)
{
    *tls = false;
    if (n > 8 && !strncmp(s, "https://", 8)) {
        *tls = true;
        s += 8;
        n -= 8;
    } else if (n > 7 && !strncmp(s, "http://", 7)) {
        s += 7;
        n -= 7;
    }
    while (n && s[n - 1] == '/')
        n--;
    size_t c = n; /* just past the last ':' */
    while (c > 0 && s[c - 1] != ':')
        c--;
    if (c == 0)
        return -1;
    size_t hl = c - 1, plen = n - c;
    if (plen == 0 || plen >= pn)
        return -1;
    memcpy(port, s + c, plen);
    port[plen] = 0;
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    const char *h = s;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hn)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    return 0;
}

/* The gRPC target for the endpoints: "ipv4:a:1,b:2" (or ipv6:) when every
 * host is an IP literal of one family, so that round_robin spreads calls
 * over the members; "dns:///host:port" for one endpoint named by host.
 * *tls is whether they are https. */
static char *grpc_target(const char *endpoints, bool *tls, char **err)
{
    ckube__strbuf b = {0};
    int family = 0; /* 4, 6, or 'd' for a name */
    size_t count = 0;
    bool any_tls = false, any_plain = false;
    for (const char *p = endpoints; p && *p;) {
        size_t n = strcspn(p, ",");
        char host[256], port[8];
        bool t;
        if (n == 0 || parse_endpoint(p, n, &t, host, sizeof host, port, sizeof port) != 0) {
            ckube__set_err(err, "invalid --etcd-servers entry \"%.*s\": want http(s)://HOST:PORT",
                           (int)n, p);
            free(b.s);
            return NULL;
        }
        if (t)
            any_tls = true;
        else
            any_plain = true;
        unsigned char ip[16];
        int f = inet_pton(AF_INET, host, ip) == 1    ? 4
                : inet_pton(AF_INET6, host, ip) == 1 ? 6
                                                     : 'd';
        if (count && (f != family || f == 'd')) {
            ckube__set_err(err, "--etcd-servers: several endpoints must all be IPv4 or all IPv6 "
                                "addresses (a host name: one endpoint)");
            free(b.s);
            return NULL;
        }
        family = f;
        if (f == 'd')
            ckube__sb_printf(&b, "dns:///%s:%s", host, port);
        else if (f == 4)
            ckube__sb_printf(&b, "%s%s:%s", count ? "," : "ipv4:", host, port);
        else
            ckube__sb_printf(&b, "%s[%s]:%s", count ? "," : "ipv6:", host, port);
        count++;
        p += n + (p[n] == ',');
    }
    if (!count) {
        ckube__set_err(err, "--etcd-servers is empty");
        free(b.s);
        return NULL;
    }
    if (any_tls && any_plain) {
        ckube__set_err(err, "--etcd-servers mixes http:// and https:// endpoints");
        free(b.s);
        return NULL;
    }
    *tls = any_tls;
    return ckube__sb_take(&b);
}

static char *read_file(const char *path, char **err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ckube__set_err(err, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    ckube__strbuf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ckube__sb_addn(&b, buf, n);
    fclose(f);
    return ckube__sb_take(&b);
}

static grpc_channel_credentials *tls_credentials(const etcd_tls *tls, char **err)
{
    char *ca = NULL, *cert = NULL, *key = NULL;
    grpc_channel_credentials *cr = NULL;
    if (tls && tls->ca_file && !(ca = read_file(tls->ca_file, err)))
        goto out;
    if (tls && tls->cert_file && !(cert = read_file(tls->cert_file, err)))
        goto out;
    if (tls && tls->key_file && !(key = read_file(tls->key_file, err)))
        goto out;
    if (!cert != !key) {
        ckube__set_err(err, "--etcd-certfile and --etcd-keyfile go together");
        goto out;
    }
    grpc_ssl_pem_key_cert_pair pair = {key, cert};
    cr = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
    if (!cr)
        ckube__set_err(err, "cannot set up TLS to etcd");
out:
    free(ca);
    free(cert);
    free(key);
    return cr;
}

/* gRPC's own log lines, in klog's format: its errors (a TLS handshake
 * failing, a connection reset) as warnings, since what they mean reaches
 * the user as the failed call's error too; the rest at -v=4. */
static void grpc_log_to_klog(gpr_log_func_args *a)
{
    const char *file = a->file ? strrchr(a->file, '/') : NULL;
    file = file ? file + 1 : a->file ? a->file : "grpc";
    if (a->severity == GPR_LOG_SEVERITY_ERROR)
        ckube_log_write(CKUBE_LOG_WARNING, file, a->line, "grpc: %s", a->message);
    else if (ckube_log_v(4, file))
        ckube_log_write(CKUBE_LOG_INFO, file, a->line, "grpc: %s", a->message);
}

etcd_client *etcd_client_new(const char *endpoints, const etcd_tls *tls, char **err)
{
    bool https = false;
    char *target = grpc_target(endpoints, &https, err);
    if (!target)
        return NULL;
    bool use_tls = https || (tls && (tls->ca_file || tls->cert_file || tls->key_file));
    gpr_set_log_function(grpc_log_to_klog);
    grpc_init(); /* reference counted: grpc_shutdown in free */
    grpc_channel_credentials *cr =
        use_tls ? tls_credentials(tls, err) : grpc_insecure_credentials_create();
    if (!cr) {
        free(target);
        grpc_shutdown();
        return NULL;
    }
    /* round_robin over the members; keepalive pings so that a member that
     * vanished without a FIN (a kill -9 on another machine) is noticed on
     * an idle watch stream, as etcd's clients configure it */
    grpc_arg args[] = {
        {GRPC_ARG_STRING, GRPC_ARG_LB_POLICY_NAME, {.string = "round_robin"}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIME_MS, {.integer = 30000}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, {.integer = 10000}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, {.integer = 1}},
        /* etcd's limit for a request is 1.5 MiB; answers (a list) may be
         * large */
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}},
        /* a member back from an outage is reconnected to within 3 s: gRPC's
         * default backoff grows to 120 s, and after a minute's outage the
         * server would stay unready long after etcd is back */
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, {.integer = 3000}},
        /* no transparent retries: calls wait for a ready connection
         * (GRPC_INITIAL_METADATA_WAIT_FOR_READY) instead, and the retry
         * filter would keep a copy of every request until its answer */
        {GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_RETRIES, {.integer = 0}},
    };
    grpc_channel_args ca = {sizeof args / sizeof *args, args};
    etcd_client *c = calloc(1, sizeof *c);
    if (c) {
        c->ch = grpc_channel_create(target, cr, &ca);
    }
    grpc_channel_credentials_release(cr);
    if (c && c->ch) {
        c->cq = grpc_completion_queue_create_for_next(NULL);
        c->has_driver = c->cq && pthread_create(&c->driver, NULL, driver_main, c) == 0;
    }
    if (!c || !c->ch || !c->has_driver) {
        ckube__set_err(err, "cannot create the gRPC channel to %s", target);
        free(target);
        etcd_client_free(c);
        return NULL;
    }
    CKUBE_V(2, "etcd client: channel to %s%s", target, use_tls ? " (TLS)" : "");
    free(target);
    return c;
}

void etcd_client_free(etcd_client *c)
{
    if (!c) {
        return;
    }
    if (c->cq) {
        /* every call is over (the contract): the driver drains and ends */
        grpc_completion_queue_shutdown(c->cq);
        if (c->has_driver)
            pthread_join(c->driver, NULL);
        grpc_completion_queue_destroy(c->cq);
    }
    if (c->ch)
        grpc_channel_destroy(c->ch);
    free(c);
    grpc_shutdown();
}

/* ---- messages ------------------------------------------------------------------- */

static grpc_byte_buffer *pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

static ProtobufCMessage *unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    grpc_slice all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
    grpc_slice_unref(all);
    return m;
}

static void set_error(etcd_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(etcd_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static void status_error(etcd_error *err, grpc_status_code code, grpc_slice details)
{
    set_error(err, (int)code, "%.*s", (int)GRPC_SLICE_LENGTH(details),
              (const char *)GRPC_SLICE_START_PTR(details));
}

static gpr_timespec deadline_in(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(ms > 0 ? ms : DEFAULT_TIMEOUT_MS, GPR_TIMESPAN));
}

/* ---- unary calls ------------------------------------------------------------------ */

/* One unary call in flight: the batch's buffers and results, and for an
 * asynchronous call whom to tell. */
/* What a tag on the driver's queue is: every tag struct starts with it. */
enum { TAG_UNARY, TAG_WATCH_SEND, TAG_WATCH_RECV, TAG_WATCH_STATUS };

/* A tag's kind is stored (release) just before its batch starts and read
 * (acquire) by the driver first: gRPC's own handover is invisible to
 * ThreadSanitizer (libgrpc is not instrumented), this pairing is not, and
 * it orders everything the starter wrote before the driver's reads. */
typedef _Atomic int tag_kind;

typedef struct unary {
    tag_kind kind; /* TAG_UNARY */
    grpc_call *call;
    grpc_byte_buffer *out, *in;
    grpc_metadata_array md_in, trailers;
    grpc_status_code code;
    grpc_slice details;
    const char *method; /* static */
    const ProtobufCMessageDescriptor *resp_desc;
    etcd_call_fn fn; /* asynchronous calls */
    void *arg;
} unary;

/* Starts u's call of `method` on `cq`, completing with `tag`. 0, or -1
 * with *err and nothing to release but what unary_finish releases. */
static int unary_start(etcd_client *c, unary *u, grpc_completion_queue *cq, const char *method,
                       const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
                       int timeout_ms, bool wait_ready, void *tag, etcd_error *err)
{
    u->method = method;
    u->resp_desc = resp_desc;
    u->code = GRPC_STATUS_UNKNOWN;
    u->details = grpc_empty_slice();
    grpc_metadata_array_init(&u->md_in);
    grpc_metadata_array_init(&u->trailers);
    u->call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                       grpc_slice_from_static_string(method), NULL,
                                       deadline_in(timeout_ms), NULL);
    u->out = pack(req);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    /* wait for the connection rather than fail at once while a member
     * restarts: the deadline bounds it */
    ops[0].flags = wait_ready ? GRPC_INITIAL_METADATA_WAIT_FOR_READY : 0;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->out;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->md_in;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->in;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trailers;
    ops[5].data.recv_status_on_client.status = &u->code;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    /* from the store on, u may be the driver's (and freed): locals only */
    grpc_call *call = u->call;
    atomic_store_explicit(&u->kind, TAG_UNARY, memory_order_release);
    if (!call || grpc_call_start_batch(call, ops, 6, tag, NULL) != GRPC_CALL_OK) {
        set_error(err, GRPC_STATUS_INTERNAL, "cannot start the call %s", method);
        return -1;
    }
    return 0;
}

/* After the batch completed (`completed`: its event was OP_COMPLETE):
 * the answer in *resp (0), or -1 with *err; releases all but u itself. */
static int unary_finish(unary *u, bool completed, ProtobufCMessage **resp, etcd_error *err)
{
    int rc = -1;
    *resp = NULL;
    if (!completed)
        set_error(err, GRPC_STATUS_INTERNAL, "the call %s did not complete", u->method);
    else if (u->code != GRPC_STATUS_OK)
        status_error(err, u->code, u->details);
    else if (!u->in || !(*resp = unpack(u->in, u->resp_desc)))
        set_error(err, GRPC_STATUS_INTERNAL, "etcd's answer to %s does not decode", u->method);
    else
        rc = 0;
    if (u->in)
        grpc_byte_buffer_destroy(u->in);
    if (u->out)
        grpc_byte_buffer_destroy(u->out);
    grpc_slice_unref(u->details);
    grpc_metadata_array_destroy(&u->md_in);
    grpc_metadata_array_destroy(&u->trailers);
    if (u->call)
        grpc_call_unref(u->call);
    return rc;
}

/* etcd_call, waiting for a connection or failing at once without one. */
static int call_sync(etcd_client *c, const char *method, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                     int timeout_ms, bool wait_ready, etcd_error *err)
{
    /* A queue per call: a pluck queue serves at most six threads at once
     * (GRPC_MAX_COMPLETION_QUEUE_PLUCKERS), and the storage's callers are
     * more; creating one is an allocation, small beside the call. */
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    unary u = {0};
    int rc;
    if (unary_start(c, &u, cq, method, req, resp_desc, timeout_ms, wait_ready, &u, err) != 0) {
        unary_finish(&u, false, resp, NULL);
        rc = -1;
    } else {
        /* the batch always completes: at the latest at the call's deadline */
        grpc_event ev =
            grpc_completion_queue_pluck(cq, &u, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        rc = unary_finish(&u, ev.type == GRPC_OP_COMPLETE, resp, err);
    }
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    return rc;
}

/* A request etcd's own client retries when it meets an unavailable
 * member (clientv3's retry interceptor: "repeatable" requests, code
 * Unavailable, until the caller's deadline): a read. gRPC's transparent
 * retries, off here, would cover only calls that never left; a call sent
 * on a connection whose member has just died ("Transport closed") fails
 * with UNAVAILABLE before gRPC notices the death. Writes are not retried:
 * their answer may be lost after etcd applied them. */
static bool repeatable(const char *method)
{
    return !strcmp(method, "/etcdserverpb.KV/Range");
}

int etcd_call(etcd_client *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp, int timeout_ms,
              etcd_error *err)
{
    int ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    uint64_t end = ckube_monotonic_ns() + (uint64_t)ms * 1000000u;
    etcd_error local = {0};
    etcd_error *e = err ? err : &local;
    for (;;) {
        int rc = call_sync(c, method, req, resp_desc, resp, ms, true, e);
        if (rc == 0 || e->code != GRPC_STATUS_UNAVAILABLE || !repeatable(method))
            return rc;
        uint64_t now = ckube_monotonic_ns();
        if (now + RETRY_PAUSE_MS * 2000000u >= end)
            return rc;
        CKUBE_V(2, "etcd: %s: %s; trying again", method, e->message);
        struct timespec pause = {0, RETRY_PAUSE_MS * 1000000L};
        nanosleep(&pause, NULL);
        ms = (int)((end - ckube_monotonic_ns()) / 1000000u);
    }
}

int etcd_call_now(etcd_client *c, const char *method, const ProtobufCMessage *req,
                  const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                  int timeout_ms, etcd_error *err)
{
    return call_sync(c, method, req, resp_desc, resp, timeout_ms, false, err);
}

int etcd_call_async(etcd_client *c, const char *method, const ProtobufCMessage *req,
                    const ProtobufCMessageDescriptor *resp_desc, int timeout_ms, etcd_call_fn fn,
                    void *arg, etcd_error *err)
{
    unary *u = calloc(1, sizeof *u);
    if (!u) {
        set_error(err, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return -1;
    }
    u->fn = fn;
    u->arg = arg;
    if (unary_start(c, u, c->cq, method, req, resp_desc, timeout_ms, true, u, err) != 0) {
        ProtobufCMessage *none;
        unary_finish(u, false, &none, NULL);
        free(u);
        return -1;
    }
    return 0;
}

/* The driver: every asynchronous call's completion, in the order gRPC
 * delivers them, until the queue is shut down and drained. Polling the
 * queue from this one thread is also what reads the answers off the
 * connection, so under load an answer is decoded and handed on here
 * without a thread switch per call. */
static void *driver_main(void *p)
{
    etcd_client *c = p;
    pthread_setname_np(pthread_self(), "ckube-etcd-cq");
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (atomic_load_explicit((tag_kind *)ev.tag, memory_order_acquire) != TAG_UNARY) {
            watch_completed(ev.tag, ev.success);
            continue;
        }
        unary *u = ev.tag;
        ProtobufCMessage *resp = NULL;
        etcd_error err = {0};
        bool ok = unary_finish(u, true, &resp, &err) == 0;
        u->fn(u->arg, ok ? resp : NULL, ok ? NULL : &err);
        free(u);
    }
    return NULL;
}

/* ---- watches ------------------------------------------------------------------------- */

/* A watch's batches complete on the driver's queue, told apart by these
 * tags (each names its watch). */
typedef struct watch_tag {
    tag_kind kind; /* TAG_WATCH_* */
    etcd_watch *w;
} watch_tag;

/* Sets t before a batch with it starts (see tag_kind). */
static void tag_set(watch_tag *t, int kind, etcd_watch *w)
{
    t->w = w;
    atomic_store_explicit(&t->kind, kind, memory_order_release);
}

struct etcd_watch {
    etcd_client *c;
    grpc_call *call; /* on the driver's queue */
    watch_tag send_tag, recv_tag, status_tag;
    etcd_watch_fn fn;
    void *arg;
    /* The receive side, the driver's alone: one receive pending at a time
     * (the first also takes the initial metadata), then the status. */
    grpc_byte_buffer *in;
    grpc_metadata_array md_in, trailers;
    grpc_status_code code;
    grpc_slice details;
    bool first_recv;
    /* Under mu: the send in flight (gRPC allows one at a time: senders
     * queue on send_busy), its outcome, and the stream's state. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    grpc_byte_buffer *send_bb;
    bool send_busy, send_ok;
    bool ended; /* the receive side is over: no more sends */
    bool over;  /* the callback's last call has returned */
};

/* Starts one send (a batch of `ops`, the message last, built from rq) and
 * waits for the driver to report it. 0 or -1. Any thread but the driver. */
static int watch_send_ops(etcd_watch *w, grpc_op *ops, size_t nops,
                          const Ckube__Etcd__WatchRequest *rq)
{
    pthread_mutex_lock(&w->mu);
    while (w->send_busy)
        pthread_cond_wait(&w->cv, &w->mu);
    int rc = -1;
    if (!w->ended) {
        w->send_bb = pack(&rq->base);
        ops[nops - 1].op = GRPC_OP_SEND_MESSAGE;
        ops[nops - 1].data.send_message.send_message = w->send_bb;
        tag_set(&w->send_tag, TAG_WATCH_SEND, w);
        if (grpc_call_start_batch(w->call, ops, nops, &w->send_tag, NULL) == GRPC_CALL_OK) {
            w->send_busy = true;
            while (w->send_busy)
                pthread_cond_wait(&w->cv, &w->mu);
            rc = w->send_ok ? 0 : -1;
        } else {
            grpc_byte_buffer_destroy(w->send_bb);
            w->send_bb = NULL;
        }
        pthread_cond_broadcast(&w->cv); /* the next sender */
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int watch_send(etcd_watch *w, const Ckube__Etcd__WatchRequest *rq)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    return watch_send_ops(w, &op, 1, rq);
}

/* Starts the next receive. false when the call refuses it. */
static bool watch_recv(etcd_watch *w)
{
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_RECV_MESSAGE;
    ops[0].data.recv_message.recv_message = &w->in;
    /* the server's initial metadata comes with its first message (etcd
     * answers the create request): received with it */
    ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[1].data.recv_initial_metadata.recv_initial_metadata = &w->md_in;
    size_t n = w->first_recv ? 2 : 1;
    w->first_recv = false;
    tag_set(&w->recv_tag, TAG_WATCH_RECV, w);
    return grpc_call_start_batch(w->call, ops, n, &w->recv_tag, NULL) == GRPC_CALL_OK;
}

/* The stream's last act: the callback's last call, then `over` for
 * etcd_watch_stop. Nothing touches w after the unlock. */
static void watch_over(etcd_watch *w, const etcd_error *err)
{
    w->fn(w->arg, NULL, err);
    pthread_mutex_lock(&w->mu);
    w->over = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The receive side ended: no more sends; asks for the status (whose
 * completion ends the stream). */
static void watch_end(etcd_watch *w)
{
    pthread_mutex_lock(&w->mu);
    w->ended = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &w->trailers;
    op.data.recv_status_on_client.status = &w->code;
    op.data.recv_status_on_client.status_details = &w->details;
    tag_set(&w->status_tag, TAG_WATCH_STATUS, w);
    if (grpc_call_start_batch(w->call, &op, 1, &w->status_tag, NULL) != GRPC_CALL_OK) {
        etcd_error err = {.code = GRPC_STATUS_UNKNOWN, .message = "the watch stream ended"};
        watch_over(w, &err);
    }
}

/* On the driver thread: one of a watch's batches completed. */
static void watch_completed(watch_tag *t, int success)
{
    etcd_watch *w = t->w;
    if (t->kind == TAG_WATCH_SEND) {
        pthread_mutex_lock(&w->mu);
        grpc_byte_buffer_destroy(w->send_bb);
        w->send_bb = NULL;
        w->send_ok = success;
        w->send_busy = false;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    if (t->kind == TAG_WATCH_STATUS) {
        etcd_error err = {.code = GRPC_STATUS_UNKNOWN};
        status_error(&err, w->code, w->details);
        if (!err.message[0])
            snprintf(err.message, sizeof err.message, "the watch stream ended");
        watch_over(w, &err);
        return;
    }
    grpc_byte_buffer *in = w->in;
    w->in = NULL;
    if (!success || !in) { /* the stream is over: its status says why */
        watch_end(w);
        return;
    }
    Ckube__Etcd__WatchResponse *r =
        (Ckube__Etcd__WatchResponse *)unpack(in, &ckube__etcd__watch_response__descriptor);
    grpc_byte_buffer_destroy(in);
    if (!r) {
        CKUBE_ERROR("etcd watch: a message that does not decode; ending the stream");
        grpc_call_cancel(w->call, NULL);
        watch_end(w);
        return;
    }
    w->fn(w->arg, r, NULL);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    if (!watch_recv(w))
        watch_end(w);
}

static void watch_free(etcd_watch *w)
{
    if (w->call)
        grpc_call_unref(w->call);
    if (w->in)
        grpc_byte_buffer_destroy(w->in);
    grpc_metadata_array_destroy(&w->md_in);
    grpc_metadata_array_destroy(&w->trailers);
    grpc_slice_unref(w->details);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

etcd_watch *etcd_watch_start(etcd_client *c, const void *key, size_t key_len, const void *range_end,
                             size_t range_end_len, int64_t start_rev, bool progress_notify,
                             bool prev_kv, etcd_watch_fn fn, void *arg, etcd_error *err)
{
    etcd_watch *w = calloc(1, sizeof *w);
    if (!w) {
        set_error(err, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    grpc_metadata_array_init(&w->md_in);
    grpc_metadata_array_init(&w->trailers);
    w->details = grpc_empty_slice();
    w->code = GRPC_STATUS_UNKNOWN;
    w->c = c;
    w->fn = fn;
    w->arg = arg;
    w->first_recv = true;
    w->call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                                       grpc_slice_from_static_string("/etcdserverpb.Watch/Watch"),
                                       NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    Ckube__Etcd__WatchCreateRequest cr = CKUBE__ETCD__WATCH_CREATE_REQUEST__INIT;
    cr.key = (ProtobufCBinaryData){key_len, (uint8_t *)key};
    if (range_end)
        cr.range_end = (ProtobufCBinaryData){range_end_len, (uint8_t *)range_end};
    cr.start_revision = start_rev;
    cr.progress_notify = progress_notify;
    cr.prev_kv = prev_kv;
    Ckube__Etcd__WatchRequest rq = CKUBE__ETCD__WATCH_REQUEST__INIT;
    rq.request_union_case = CKUBE__ETCD__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    rq.create_request = &cr;
    /* the metadata and the create request in one batch; receiving starts
     * once they are sent, so that a stream that never opened ends here,
     * without a call of fn */
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
    if (!w->call || watch_send_ops(w, ops, 2, &rq) != 0) {
        set_error(err, GRPC_STATUS_UNAVAILABLE, "cannot open a watch stream");
        if (w->call)
            grpc_call_cancel(w->call, NULL);
        watch_free(w);
        return NULL;
    }
    if (!watch_recv(w)) {
        set_error(err, GRPC_STATUS_INTERNAL, "cannot receive on the watch stream");
        grpc_call_cancel(w->call, NULL);
        watch_free(w);
        return NULL;
    }
    return w;
}

int etcd_watch_request_progress(etcd_watch *w)
{
    Ckube__Etcd__WatchProgressRequest pr = CKUBE__ETCD__WATCH_PROGRESS_REQUEST__INIT;
    Ckube__Etcd__WatchRequest rq = CKUBE__ETCD__WATCH_REQUEST__INIT;
    rq.request_union_case = CKUBE__ETCD__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
    rq.progress_request = &pr;
    return watch_send(w, &rq);
}

void etcd_watch_stop(etcd_watch *w)
{
    if (!w)
        return;
    /* the pending receive fails, the driver reads the status (CANCELLED)
     * and makes the callback's last call */
    grpc_call_cancel(w->call, NULL);
    pthread_mutex_lock(&w->mu);
    while (!w->over)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    watch_free(w);
}
