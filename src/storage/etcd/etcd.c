/* etcd.c - storage.h on etcd's v3 API (see etcd.h).
 *
 * Writes. storage_submit starts the op's Txn at once from the caller's
 * thread, without waiting: every write is in flight together on the one
 * multiplexed gRPC channel (so etcd batches their fsyncs), and the answers
 * come to the client's one driver thread, with no thread per write and no
 * hand-over to one (a pool of 16 blocking writers spent ~100 us of CPU per
 * create in thread switches). Each write is one Txn:
 *   CREATE  If(CreateRevision(key) == 0) Then Put Else Range(key)
 *   UPDATE  If(ModRevision(key) == N) (or, unconditional, CreateRevision
 *           != 0) Then Put(prev_kv) Else Range(key)
 *   DELETE  the same, Then DeleteRange(prev_kv)
 * so a failed comparison reads the key back in the same transaction and
 * tells NOT_FOUND from CONFLICT/EXISTS with the current mod revision, as
 * kube-apiserver's etcd3 store does.
 *
 * The ordering storage.h promises (a write's events reach every watcher
 * before its done runs) holds here too: a written op waits in `pending`
 * until every watch stream has delivered its revision; with no watcher
 * it is done at once. Every storage watch watches the whole keyspace
 * (storage_watch has no prefix), so each write's event arrives on every
 * stream.
 *
 * Reads are etcd's default linearizable Ranges; a range of many keys is
 * read in pages of RANGE_PAGE at the revision of its first page.
 *
 * Keys. With the Kubernetes layout (the server's) every key is translated
 * at this boundary by keymap.h: the server's "/registry/core/configmaps/
 * NS/NAME" is etcd's "PREFIX/configmaps/NS/NAME", as kube-apiserver lays
 * it out. An etcd key under the prefix that is not one of ours (another
 * program's, kube-apiserver's own such as PREFIX/ranges/serviceips) is
 * skipped by ranges and watches, logged with its name; a watch response
 * made only of such keys still moves the watcher's revision (a PROGRESS
 * event). Without the layout (tests, other uses) keys pass unchanged. */
#include "storage/etcd/etcd.h"

#include "storage/etcd/etcd_client.h"
#include "storage/etcd/keymap.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

/* Writes in flight at once; more wait in the storage's queue. etcd
 * refuses writes ("etcdserver: too many requests") once 5000 committed
 * entries wait to be applied, which unbounded bursts reach; 128 is as
 * many as etcd batches into one fsync under load, and below
 * kube-apiserver's 200 mutating requests in flight. */
#define MAX_INFLIGHT 128
/* Buckets of the table of writes in flight (a power of two). */
#define FLYING_BUCKETS 256
#define RANGE_PAGE 1000
#define CALL_TIMEOUT_MS 30000
/* storage_current_rev: what health checks and consistent reads ask, each
 * with a deadline of its own; an etcd that does not answer within this is
 * reported down, not waited for. */
#define CURRENT_REV_TIMEOUT_MS 5000

#define KV_RANGE "/etcdserverpb.KV/Range"
#define KV_TXN "/etcdserverpb.KV/Txn"
#define KV_PUT "/etcdserverpb.KV/Put"
#define KV_COMPACT "/etcdserverpb.KV/Compact"

typedef struct ewatcher ewatcher;

typedef struct etcd_storage {
    storage base; /* first: the interface's handle */
    etcd_client *c;
    char *prefix, *prefix_end; /* the keyspace: [prefix, prefix_end) */
    size_t prefix_len, prefix_end_len;
    int64_t compact_time;        /* under mu: compact_rev_key's version last seen */
    pthread_mutex_t mu;          /* guards everything below */
    pthread_cond_t cv;           /* state changes: watchers, close, finished writes */
    pthread_cond_t sup_cv;       /* the supervisors': a watcher broken or dead, progress, close (not
                                  * every write and event, which s->cv hears) */
    size_t running;              /* writes whose Txn is in flight */
    storage_op *q_head, *q_tail; /* writes waiting for one of MAX_INFLIGHT */
    storage_op *failed_q;        /* queued writes that could not start */
    storage_op *pending;         /* written, waiting for the watchers; by rev */
    bool closing;
    int hints_lent; /* watch callbacks running with ops' hints (lend_hints) */
    struct write_call *flying[FLYING_BUCKETS]; /* writes in flight by etcd key (lend_hints) */
    ewatcher *watchers;
    etcd_keymap *km;       /* the Kubernetes layout, or NULL: keys unchanged */
    uint64_t progress_gen; /* bumped by e_request_progress; supervisors send */
    int64_t compacted;
    atomic_uint_fast64_t ops, failed;
} etcd_storage;

/* A storage watch: an etcd watch stream, restarted by its supervisor
 * thread from the last delivered revision when it breaks (a member
 * restarting, a connection lost), so that events are neither lost nor
 * repeated. States (under s->mu): */
enum { W_DEAD = -1, W_STARTING = 0, W_RUNNING = 1, W_BROKEN = 2 };

struct ewatcher {
    ewatcher *next;
    etcd_storage *s;
    etcd_watch *w; /* under s->mu */
    pthread_t sup; /* the supervisor, once the first stream runs */
    bool has_sup;
    storage_watch_fn fn;
    void *arg;
    int64_t delivered;      /* under s->mu: the newest revision handed to fn */
    uint64_t progress_seen; /* under s->mu: s->progress_gen last sent for */
    /* Under s->mu. A stream that starts behind etcd's revision replays
     * history first; until it has caught up ("synced", in etcd's words),
     * etcd before 3.4.25/3.5.8 answers a progress request with its current
     * revision all the same (etcd-io/etcd#15220), which would skip the
     * replay still to come. So a progress notification counts only once
     * the stream has delivered an event at or after created_rev (the
     * revision its creation answer gave); to get there without waiting for
     * a write of ours, a progress request on an unsynced stream writes the
     * sync marker instead (sync_marker). */
    int64_t created_rev;
    bool synced, marker_sent;
    int state; /* under s->mu: W_* */
    int error; /* under s->mu: why it was refused or ended */
};

/* ---- small helpers ------------------------------------------------------------ */

static ProtobufCBinaryData bin(const char *s, size_t n)
{
    return (ProtobufCBinaryData){n, (uint8_t *)s};
}

/* The first key after every key that starts with prefix: etcd's
 * range_end for a prefix ("\0" for everything). Into buf. */
static size_t prefix_end(const char *prefix, size_t n, char *buf)
{
    memcpy(buf, prefix, n);
    while (n > 0) {
        if ((unsigned char)buf[n - 1] < 0xff) {
            buf[n - 1]++;
            return n;
        }
        n--;
    }
    buf[0] = 0;
    return 1;
}

static int map_error(const etcd_error *e)
{
    if (e->code == ETCD_GRPC_OUT_OF_RANGE)
        return STORAGE_ERR_COMPACTED;
    return STORAGE_ERR_IO;
}

/* Whether etcd refused a request for its size: over --max-request-bytes
 * etcd answers "etcdserver: request is too large"; over that plus gRPC's
 * margin its gRPC server refuses the message itself. */
static bool too_large(const etcd_error *e)
{
    return (e->code == ETCD_GRPC_INVALID_ARGUMENT && strstr(e->message, "request is too large")) ||
           (e->code == ETCD_GRPC_RESOURCE_EXHAUSTED && strstr(e->message, "larger than max"));
}

/* What kube-apiserver's clients read when etcd fails a request: etcd's
 * own errors pass through as its Go client reports them ("etcdserver:
 * request timed out", "etcdserver: leader changed"); an etcd that cannot
 * be reached at all is, to the Go client, a deadline that ran out. */
static void client_words(const etcd_error *e, char *buf, size_t n)
{
    /* (%.*s: a message longer than buf is cut, knowingly) */
    int room = (int)n - 7;
    if (too_large(e))
        snprintf(buf, n, "etcdserver: request is too large");
    else if (!strncmp(e->message, "etcdserver: ", 12))
        snprintf(buf, n, "%.*s", room, e->message);
    else if (e->code == ETCD_GRPC_UNAVAILABLE || e->code == ETCD_GRPC_DEADLINE_EXCEEDED)
        snprintf(buf, n, "context deadline exceeded");
    else
        snprintf(buf, n, "etcd: %.*s", room, e->message);
}

/* The sync marker: a key in the watched prefix, never one of ours, that
 * a server puts to make every stream see an event at the current revision
 * (ewatcher.synced). PREFIX + SYNC_MARKER. */
#define SYNC_MARKER "ckube-sync"

static bool is_marker(const etcd_storage *s, const ProtobufCBinaryData *k)
{
    size_t n = strlen(SYNC_MARKER);
    return s->km && k->len == s->prefix_len + n && !memcmp(k->data, s->prefix, s->prefix_len) &&
           !memcmp(k->data + s->prefix_len, SYNC_MARKER, n);
}

/* The etcd key of a key of ours, malloc'd; NULL if it has none. */
static char *to_etcd(const etcd_storage *s, const char *key)
{
    return s->km ? etcd_key_to_etcd(s->km, key) : strdup(key);
}

/* Our key for an etcd key, malloc'd; NULL (logged) for one that is not
 * ours: the caller skips it. */
static char *from_etcd(const etcd_storage *s, const ProtobufCBinaryData *k)
{
    char *key = s->km ? etcd_key_from_etcd(s->km, (const char *)k->data, k->len)
                      : strndup((const char *)k->data, k->len);
    if (!key && s->km && !is_marker(s, k))
        CKUBE_WARN("etcd: skipping key %.*s: not an object ckube serves", (int)k->len,
                   (const char *)k->data);
    return key;
}

/* ---- writes ---------------------------------------------------------------------- */

/* One Txn of the shape every conditional write here has, as the etcd3
 * store's: If(cmp) Then `then` Else Range(cmp's key), so a failed
 * comparison reads the key back in the same transaction. Filled in
 * place: t borrows cmp and then, and points into itself. */
typedef struct txn_req {
    Ckube__Etcd__RangeRequest get;
    Ckube__Etcd__RequestOp els;
    Ckube__Etcd__Compare *cmps[1];
    Ckube__Etcd__RequestOp *thens[1], *elses[1];
    Ckube__Etcd__TxnRequest t;
} txn_req;

static void txn_or_get_init(txn_req *r, Ckube__Etcd__Compare *cmp, Ckube__Etcd__RequestOp *then)
{
    ckube__etcd__range_request__init(&r->get);
    r->get.key = cmp->key;
    ckube__etcd__request_op__init(&r->els);
    r->els.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_RANGE;
    r->els.request_range = &r->get;
    r->cmps[0] = cmp;
    r->thens[0] = then;
    r->elses[0] = &r->els;
    ckube__etcd__txn_request__init(&r->t);
    r->t.n_compare = 1;
    r->t.compare = r->cmps;
    r->t.n_success = 1;
    r->t.success = r->thens;
    r->t.n_failure = 1;
    r->t.failure = r->elses;
}

/* The Txn, waited for: its answer, or NULL with *err. */
static Ckube__Etcd__TxnResponse *txn_or_get(etcd_storage *s, Ckube__Etcd__Compare *cmp,
                                            Ckube__Etcd__RequestOp *then, etcd_error *err)
{
    txn_req r;
    txn_or_get_init(&r, cmp, then);
    ProtobufCMessage *m = NULL;
    if (etcd_call(s->c, KV_TXN, &r.t.base, &ckube__etcd__txn_response__descriptor, &m,
                  CALL_TIMEOUT_MS, err) != 0)
        return NULL;
    return (Ckube__Etcd__TxnResponse *)m;
}

/* A write in flight: its Txn's answer comes to write_answered. Filed
 * in s->flying under its key from just before its Txn starts until its
 * answer, so that its event, when it comes first, finds its hint. */
typedef struct write_call {
    etcd_storage *s;
    storage_op *op;
    char *key; /* etcd's */
    size_t key_len;
    struct write_call *hnext; /* under s->mu: s->flying's chain */
} write_call;

static size_t flying_bucket(const char *key, size_t len)
{
    return (size_t)(ckube__fnv1a(CKUBE__FNV1A_INIT, key, len) & (FLYING_BUCKETS - 1));
}

/* s->mu held. */
static void fly(etcd_storage *s, write_call *wc)
{
    write_call **b = &s->flying[flying_bucket(wc->key, wc->key_len)];
    wc->hnext = *b;
    *b = wc;
}

/* s->mu held. */
static void land(etcd_storage *s, write_call *wc)
{
    write_call **p = &s->flying[flying_bucket(wc->key, wc->key_len)];
    while (*p && *p != wc)
        p = &(*p)->hnext;
    if (*p)
        *p = wc->hnext;
}

static void write_answered(void *arg, ProtobufCMessage *m, const etcd_error *err);

/* Starts op's Txn (write_answered gets the answer). 0, or a STORAGE_ERR_*
 * when it could not start. */
static int start_write(etcd_storage *s, storage_op *op)
{
    write_call *wc = malloc(sizeof *wc);
    char *key = wc ? to_etcd(s, op->key) : NULL; /* e_submit checked that it has one */
    if (!key) {
        free(wc);
        return STORAGE_ERR_NOMEM;
    }
    *wc = (write_call){.s = s, .op = op, .key = key, .key_len = strlen(key)};
    Ckube__Etcd__Compare cmp = CKUBE__ETCD__COMPARE__INIT;
    cmp.key = bin(key, strlen(key));
    if (op->type == STORAGE_OP_CREATE || !op->expect_mod_rev) {
        cmp.target = CKUBE__ETCD__COMPARE__COMPARE_TARGET__CREATE;
        cmp.result = op->type == STORAGE_OP_CREATE ? CKUBE__ETCD__COMPARE__COMPARE_RESULT__EQUAL
                                                   : CKUBE__ETCD__COMPARE__COMPARE_RESULT__GREATER;
        cmp.target_union_case = CKUBE__ETCD__COMPARE__TARGET_UNION_CREATE_REVISION;
        cmp.create_revision = 0;
    } else {
        cmp.target = CKUBE__ETCD__COMPARE__COMPARE_TARGET__MOD;
        cmp.result = CKUBE__ETCD__COMPARE__COMPARE_RESULT__EQUAL;
        cmp.target_union_case = CKUBE__ETCD__COMPARE__TARGET_UNION_MOD_REVISION;
        cmp.mod_revision = op->expect_mod_rev;
    }
    Ckube__Etcd__PutRequest put = CKUBE__ETCD__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value = bin(op->value ? op->value : "", op->value ? op->value_len : 0);
    put.prev_kv = op->type != STORAGE_OP_CREATE; /* a create has none: op->rev */
    Ckube__Etcd__DeleteRangeRequest del = CKUBE__ETCD__DELETE_RANGE_REQUEST__INIT;
    del.key = cmp.key;
    del.prev_kv = true;
    Ckube__Etcd__RequestOp then = CKUBE__ETCD__REQUEST_OP__INIT;
    if (op->type == STORAGE_OP_DELETE) {
        then.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        then.request_delete_range = &del;
    } else {
        then.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_PUT;
        then.request_put = &put;
    }
    txn_req r;
    txn_or_get_init(&r, &cmp, &then);
    etcd_error err = {0};
    if (op->hint && op->type != STORAGE_OP_DELETE) {
        pthread_mutex_lock(&s->mu);
        fly(s, wc);
        pthread_mutex_unlock(&s->mu);
    }
    if (etcd_call_async(s->c, KV_TXN, &r.t.base, &ckube__etcd__txn_response__descriptor,
                        CALL_TIMEOUT_MS, write_answered, wc, &err) != 0) {
        CKUBE_ERROR("etcd: transaction on %s failed to start: %s", key, err.message);
        pthread_mutex_lock(&s->mu);
        land(s, wc);
        pthread_mutex_unlock(&s->mu);
        free(key);
        free(wc);
        return STORAGE_ERR_IO;
    }
    return STORAGE_OK;
}

/* The Txn's answer r (or its failure, err) in op's result fields. */
static void write_outcome(storage_op *op, const char *key, const Ckube__Etcd__TxnResponse *r,
                          const etcd_error *err)
{
    if (!r) {
        op->result = too_large(err) ? STORAGE_ERR_TOO_LARGE : STORAGE_ERR_IO;
        if (op->result == STORAGE_ERR_IO)
            CKUBE_ERROR("etcd: transaction on %s failed: %s", key, err->message);
        client_words(err, op->message, sizeof op->message);
        return;
    }
    Ckube__Etcd__ResponseOp *ro = r->n_responses ? r->responses[0] : NULL;
    if (r->succeeded) {
        op->result = STORAGE_OK;
        op->rev = r->header ? r->header->revision : 0;
        const Ckube__Etcd__KeyValue *prev = NULL;
        if (ro && ro->response_case == CKUBE__ETCD__RESPONSE_OP__RESPONSE_RESPONSE_PUT)
            prev = ro->response_put->prev_kv;
        else if (ro &&
                 ro->response_case == CKUBE__ETCD__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE &&
                 ro->response_delete_range->n_prev_kvs)
            prev = ro->response_delete_range->prev_kvs[0];
        op->create_rev = prev ? prev->create_revision : op->rev;
    } else {
        const Ckube__Etcd__RangeResponse *cur =
            ro && ro->response_case == CKUBE__ETCD__RESPONSE_OP__RESPONSE_RESPONSE_RANGE
                ? ro->response_range
                : NULL;
        bool exists = cur && cur->n_kvs;
        op->current_mod_rev = exists ? cur->kvs[0]->mod_revision : 0;
        op->result = op->type == STORAGE_OP_CREATE ? STORAGE_ERR_EXISTS
                     : exists                      ? STORAGE_ERR_CONFLICT
                                                   : STORAGE_ERR_NOT_FOUND;
    }
}

/* The newest revision every watcher has delivered (INT64_MAX: none).
 * s->mu held. */
static int64_t watchers_at(const etcd_storage *s)
{
    int64_t at = INT64_MAX;
    for (const ewatcher *w = s->watchers; w; w = w->next)
        if (w->state >= 0 && w->delivered < at)
            at = w->delivered;
    return at;
}

/* Takes, from `pending`, the ops whose revision every watcher has seen
 * (all of them when closing). s->mu held. */
static storage_op *take_releasable(etcd_storage *s)
{
    int64_t at = s->closing ? INT64_MAX : watchers_at(s);
    storage_op *out = NULL, **tail = &out;
    while (s->pending && s->pending->rev <= at) {
        storage_op *op = s->pending;
        s->pending = op->next;
        op->next = NULL;
        *tail = op;
        tail = &op->next;
    }
    return out;
}

static void run_dones(etcd_storage *s, storage_op *list)
{
    while (list) {
        storage_op *op = list;
        list = op->next;
        atomic_fetch_add(&s->ops, 1);
        atomic_fetch_add(&s->failed, op->result == STORAGE_ERR_IO);
        op->done(op, op->arg);
    }
}

/* Files a written op in `pending` (by revision). s->mu held. */
static void add_pending(etcd_storage *s, storage_op *op)
{
    storage_op **p = &s->pending;
    while (*p && (*p)->rev <= op->rev)
        p = &(*p)->next;
    op->next = *p;
    *p = op;
}

/* Starts queued writes while there is room in flight; one that cannot
 * start fails (appended to s->failed_q, done by the caller). s->mu held;
 * dropped around each start. */
static void start_queued(etcd_storage *s)
{
    while (s->q_head && s->running < MAX_INFLIGHT) {
        storage_op *op = s->q_head;
        s->q_head = op->next;
        if (!s->q_head)
            s->q_tail = NULL;
        op->next = NULL;
        s->running++;
        pthread_mutex_unlock(&s->mu);
        int rc = start_write(s, op);
        pthread_mutex_lock(&s->mu);
        if (rc != STORAGE_OK) {
            s->running--;
            op->result = rc;
            op->next = s->failed_q;
            s->failed_q = op;
        }
    }
}

/* On the client's driver thread: a write's outcome; a success waits in
 * `pending` for the watchers, a failure is done at once. */
static void write_answered(void *arg, ProtobufCMessage *m, const etcd_error *err)
{
    write_call *wc = arg;
    etcd_storage *s = wc->s;
    storage_op *op = wc->op;
    write_outcome(op, wc->key, (const Ckube__Etcd__TxnResponse *)m, err);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    pthread_mutex_lock(&s->mu);
    land(s, wc);
    free(wc->key);
    free(wc);
    s->running--;
    start_queued(s);
    storage_op *ready = NULL;
    if (op->result == STORAGE_OK) {
        add_pending(s, op);
        ready = take_releasable(s);
    } else {
        op->next = ready;
        ready = op;
    }
    /* writes that failed here or could not start: done now */
    for (storage_op *f = s->failed_q; f;) {
        storage_op *next = f->next;
        f->next = ready;
        ready = f;
        f = next;
    }
    s->failed_q = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    run_dones(s, ready);
}

static int e_submit(storage *st, storage_op *op)
{
    etcd_storage *s = (etcd_storage *)st;
    if (!op || !op->key || !*op->key || !op->done ||
        (op->type != STORAGE_OP_CREATE && op->type != STORAGE_OP_UPDATE &&
         op->type != STORAGE_OP_DELETE) ||
        (op->type != STORAGE_OP_DELETE && !op->value && op->value_len) ||
        (op->type == STORAGE_OP_CREATE && op->expect_mod_rev) || op->expect_mod_rev < 0)
        return STORAGE_ERR_INVALID;
    if (s->km) { /* a key with no place in etcd's layout is refused now */
        char *key = to_etcd(s, op->key);
        if (!key)
            return STORAGE_ERR_INVALID;
        free(key);
    }
    op->result = STORAGE_OK;
    op->rev = op->create_rev = op->current_mod_rev = 0;
    op->message[0] = 0;
    op->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        return STORAGE_ERR_CLOSED;
    }
    if (s->running >= MAX_INFLIGHT) { /* write_answered starts it */
        if (s->q_tail)
            s->q_tail->next = op;
        else
            s->q_head = op;
        s->q_tail = op;
        pthread_mutex_unlock(&s->mu);
        return STORAGE_OK;
    }
    s->running++;
    pthread_mutex_unlock(&s->mu);
    /* started from the caller's thread: gRPC sends without blocking, and
     * the answer comes to the driver thread (write_answered) */
    int rc = start_write(s, op);
    if (rc != STORAGE_OK) {
        pthread_mutex_lock(&s->mu);
        s->running--;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

/* ---- reads ------------------------------------------------------------------------- */

/* One Range: NULL with *rc on failure. */
static Ckube__Etcd__RangeResponse *range_call_within(etcd_storage *s, Ckube__Etcd__RangeRequest *rq,
                                                     int *rc, int timeout_ms)
{
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    if (etcd_call(s->c, KV_RANGE, &rq->base, &ckube__etcd__range_response__descriptor, &m,
                  timeout_ms, &err) != 0) {
        *rc = map_error(&err);
        if (*rc == STORAGE_ERR_IO)
            CKUBE_ERROR("etcd: range failed: %s", err.message);
        return NULL;
    }
    return (Ckube__Etcd__RangeResponse *)m;
}

static Ckube__Etcd__RangeResponse *range_call(etcd_storage *s, Ckube__Etcd__RangeRequest *rq,
                                              int *rc)
{
    return range_call_within(s, rq, rc, CALL_TIMEOUT_MS);
}

/* A kv of ours into *out; STORAGE_ERR_NOT_FOUND for a key that is not
 * ours (skipped, logged). */
static int fill_kv(const etcd_storage *s, const Ckube__Etcd__KeyValue *kv, storage_kv *out)
{
    if (!(out->key = from_etcd(s, &kv->key)))
        return s->km ? STORAGE_ERR_NOT_FOUND : STORAGE_ERR_NOMEM;
    out->value = malloc(kv->value.len + 1);
    if (!out->key || !out->value) {
        storage_kv_release(out);
        return STORAGE_ERR_NOMEM;
    }
    if (kv->value.len) /* protobuf-c leaves an empty value's data NULL */
        memcpy(out->value, kv->value.data, kv->value.len);
    out->value[kv->value.len] = 0;
    out->value_len = kv->value.len;
    out->create_rev = kv->create_revision;
    out->mod_rev = kv->mod_revision;
    return STORAGE_OK;
}

static int e_get(storage *st, const char *key, storage_kv *out)
{
    etcd_storage *s = (etcd_storage *)st;
    if (!key || !*key || !out)
        return STORAGE_ERR_INVALID;
    memset(out, 0, sizeof *out);
    char *ekey = to_etcd(s, key);
    if (!ekey)
        return STORAGE_ERR_NOT_FOUND; /* no such key can exist */
    Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
    rq.key = bin(ekey, strlen(ekey));
    int rc = STORAGE_OK;
    Ckube__Etcd__RangeResponse *r = range_call(s, &rq, &rc);
    free(ekey);
    if (!r)
        return rc;
    rc = r->n_kvs ? fill_kv(s, r->kvs[0], out) : STORAGE_ERR_NOT_FOUND;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rc;
}

static int e_range(storage *st, const char *prefix, storage_range_fn fn, void *arg,
                   int64_t *rev_out)
{
    etcd_storage *s = (etcd_storage *)st;
    if (!prefix || !fn)
        return STORAGE_ERR_INVALID;
    /* "" is everything: the backend's keyspace */
    char *eprefix = *prefix ? to_etcd(s, prefix) : strdup(s->prefix);
    if (!eprefix)
        return s->km ? STORAGE_ERR_INVALID : STORAGE_ERR_NOMEM;
    prefix = eprefix;
    size_t plen = strlen(prefix);
    char *end = malloc(plen + 1), *from = NULL;
    if (!end) {
        free(eprefix);
        return STORAGE_ERR_NOMEM;
    }
    size_t elen = prefix_end(prefix, plen, end);
    int64_t rev = 0;
    int rc = STORAGE_OK;
    bool more = true, stopped = false;
    size_t from_len = 0;
    while (more && !stopped && rc == STORAGE_OK) {
        Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
        rq.key = from ? bin(from, from_len) : plen ? bin(prefix, plen) : bin("\0", 1);
        rq.range_end = bin(end, elen);
        rq.limit = RANGE_PAGE;
        rq.revision = rev; /* 0 the first time: now */
        Ckube__Etcd__RangeResponse *r = range_call(s, &rq, &rc);
        if (!r)
            break;
        if (!rev && r->header)
            rev = r->header->revision;
        for (size_t i = 0; i < r->n_kvs && !stopped; i++) {
            const Ckube__Etcd__KeyValue *kv = r->kvs[i];
            storage_kv k = {0};
            if ((rc = fill_kv(s, kv, &k)) == STORAGE_ERR_NOT_FOUND) {
                rc = STORAGE_OK; /* not ours: skipped */
                continue;
            }
            if (rc != STORAGE_OK)
                break;
            stopped = fn(arg, &k) != 0;
            storage_kv_release(&k);
        }
        more = r->more && r->n_kvs;
        if (more) { /* the next page starts just after the last key */
            const ProtobufCBinaryData *last = &r->kvs[r->n_kvs - 1]->key;
            free(from);
            from = malloc(last->len + 1);
            if (!from) {
                rc = STORAGE_ERR_NOMEM;
            } else {
                memcpy(from, last->data, last->len);
                from[last->len] = 0;
                from_len = last->len + 1;
            }
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    free(from);
    free(end);
    free(eprefix);
    if (rc == STORAGE_OK && rev_out)
        *rev_out = rev;
    return rc;
}

static int64_t e_current_rev(storage *st)
{
    etcd_storage *s = (etcd_storage *)st;
    /* Any read answers with the revision in its header; a read of one key
     * (the prefix itself, which is never an object) costs etcd a lookup,
     * where a count over the prefix walks every key under it (etcd 3.4:
     * 2-6 ms at 10k objects, 40-50 ms at 100k, measured by the bench).
     * kube-apiserver asks the same way (GetCurrentResourceVersionFromStorage). */
    Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
    rq.key = bin(s->prefix, s->prefix_len);
    rq.count_only = true;
    int rc = STORAGE_OK;
    Ckube__Etcd__RangeResponse *r = range_call_within(s, &rq, &rc, CURRENT_REV_TIMEOUT_MS);
    if (!r)
        return -1;
    int64_t rev = r->header ? r->header->revision : 0;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rev;
}

/* ---- watches ------------------------------------------------------------------------- */

/* The revision a progress notification may be trusted up to. etcd before
 * 3.4.25 and 3.5.8 can send one whose revision is ahead of events it has
 * not sent yet (etcd-io/etcd#15220); for this server's own writes that is
 * visible: a written op not yet delivered to this watcher caps it. s->mu
 * held. */
static int64_t progress_rev(etcd_storage *s, const ewatcher *w, int64_t rev)
{
    for (const storage_op *op = s->pending; op; op = op->next)
        if (op->rev > w->delivered && op->rev <= rev)
            return op->rev - 1; /* pending is by revision: the first is the cap */
    return rev;
}

/* Gives this server's own writes among ev[0..n) (kvs[i]: ev[i]'s etcd
 * key-value) their op's hint, as the SQLite committer does for the
 * events of its commits. A hint describes bytes, so any op that wrote
 * the event's very bytes may lend its own: an op in `pending` (its Txn
 * answered, waiting for the watchers, this one included) by its
 * revision, which names the event (one Txn, one key); an op still in
 * flight (etcd often notifies its watchers before it answers) by key and
 * equal bytes. Both stay until the caller is done: their answers and
 * dones run on this thread, after it, and e_close waits while
 * s->hints_lent. True if a hint was lent (the caller then gives it back). */
static bool lend_hints(etcd_storage *s, storage_event *ev, const Ckube__Etcd__KeyValue **kvs,
                       size_t n)
{
    bool lent = false;
    pthread_mutex_lock(&s->mu);
    const storage_op *op = s->pending; /* by revision, as the events */
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != STORAGE_EVENT_PUT)
            continue;
        while (op && op->rev < ev[i].rev)
            op = op->next;
        const void *hint = NULL;
        if (op && op->rev == ev[i].rev) {
            if (op->type != STORAGE_OP_DELETE && op->value_len == ev[i].value_len)
                hint = op->hint;
        } else {
            const Ckube__Etcd__KeyValue *kv = kvs[i];
            for (const write_call *wc =
                     s->flying[flying_bucket((const char *)kv->key.data, kv->key.len)];
                 wc && !hint; wc = wc->hnext)
                if (wc->key_len == kv->key.len && !memcmp(wc->key, kv->key.data, kv->key.len) &&
                    wc->op->value_len == ev[i].value_len &&
                    !memcmp(wc->op->value, ev[i].value, ev[i].value_len))
                    hint = wc->op->hint;
        }
        if (hint) {
            ev[i].hint = hint;
            lent = true;
        }
    }
    if (lent)
        s->hints_lent++;
    pthread_mutex_unlock(&s->mu);
    return lent;
}

static void on_events(void *arg, const Ckube__Etcd__WatchResponse *r, const etcd_error *err)
{
    ewatcher *w = arg;
    etcd_storage *s = w->s;
    if (!r) {
        pthread_mutex_lock(&s->mu);
        bool lost = w->state == W_RUNNING && !s->closing && err && err->code != ETCD_GRPC_CANCELLED;
        if (w->state == W_STARTING)
            w->error = STORAGE_ERR_IO;
        if (lost) {
            w->state = W_BROKEN; /* its supervisor starts another stream */
        } else if (w->state != W_BROKEN) {
            w->state = W_DEAD;
        }
        /* a dead watcher no longer holds writes back; a broken one does
         * until its stream is back, so that no done overtakes its event */
        storage_op *ready = take_releasable(s);
        pthread_cond_broadcast(&s->cv);
        pthread_cond_broadcast(&s->sup_cv);
        pthread_mutex_unlock(&s->mu);
        if (lost)
            CKUBE_ERROR("etcd: watch stream lost (%s); resuming from revision %" PRId64,
                        err->message, w->delivered + 1);
        run_dones(s, ready);
        return;
    }
    if (r->canceled || r->compact_revision) {
        pthread_mutex_lock(&s->mu);
        w->error = r->compact_revision ? STORAGE_ERR_COMPACTED : STORAGE_ERR_IO;
        if (r->compact_revision > s->compacted)
            s->compacted = r->compact_revision - 1;
        if (w->state == W_RUNNING)
            CKUBE_ERROR("etcd: watch canceled: %s%s", r->cancel_reason ? r->cancel_reason : "",
                        r->compact_revision ? " (compacted: the cache cannot follow)" : "");
        w->state = W_DEAD;
        storage_op *ready = take_releasable(s);
        pthread_cond_broadcast(&s->cv);
        pthread_cond_broadcast(&s->sup_cv);
        pthread_mutex_unlock(&s->mu);
        run_dones(s, ready);
        return;
    }
    if (r->n_events) {
        storage_event *ev = calloc(r->n_events, sizeof *ev);
        char **keys = calloc(r->n_events, sizeof *keys);
        const Ckube__Etcd__KeyValue **kvs = calloc(r->n_events, sizeof *kvs);
        if (!ev || !keys || !kvs)
            xalloc_die(); /* the server's policy: out of memory aborts */
        size_t n = 0;
        for (size_t i = 0; i < r->n_events; i++) {
            const Ckube__Etcd__Event *e = r->events[i];
            const Ckube__Etcd__KeyValue *kv = e->kv;
            if (!(keys[n] = from_etcd(s, &kv->key))) {
                if (!s->km)
                    xalloc_die();
                continue; /* not ours */
            }
            bool del = e->type == CKUBE__ETCD__EVENT__EVENT_TYPE__DELETE;
            ev[n] = (storage_event){.type = del ? STORAGE_EVENT_DELETE : STORAGE_EVENT_PUT,
                                    .key = keys[n],
                                    .value = del              ? NULL
                                             : kv->value.data ? (const char *)kv->value.data
                                                              : "",
                                    .value_len = del ? 0 : kv->value.len,
                                    .rev = kv->mod_revision,
                                    .create_rev = del && e->prev_kv ? e->prev_kv->create_revision
                                                                    : kv->create_revision};
            kvs[n] = kv;
            n++;
        }
        if (!n) /* only others' keys: the revision moves all the same */
            ev[n++] = (storage_event){.type = STORAGE_EVENT_PROGRESS,
                                      .rev = r->events[r->n_events - 1]->kv->mod_revision};
        bool lent = lend_hints(s, ev, kvs, n);
        w->fn(w->arg, ev, n);
        if (lent) {
            pthread_mutex_lock(&s->mu);
            s->hints_lent--;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        for (size_t i = 0; i < n; i++)
            free(keys[i]);
        free(keys);
        free(kvs);
        free(ev);
    }
    pthread_mutex_lock(&s->mu);
    if (r->created && w->state == W_STARTING)
        w->state = W_RUNNING;
    if (r->created && r->header) {
        w->created_rev = r->header->revision;
        w->synced = w->delivered >= w->created_rev; /* nothing to replay */
    }
    /* a progress notification says everything up to its header revision
     * has been sent, once the stream is synced; a creation answer does not
     * (the replay follows) */
    int64_t rev = r->n_events ? r->events[r->n_events - 1]->kv->mod_revision
                  : !r->created && r->header && w->synced ? progress_rev(s, w, r->header->revision)
                                                          : 0;
    if (r->n_events && rev >= w->created_rev)
        w->synced = true;
    if (!r->n_events && rev > w->delivered) {
        /* tell the watcher first, as for events: a write's done must not
         * overtake what its watchers know */
        pthread_mutex_unlock(&s->mu);
        storage_event pe = {.type = STORAGE_EVENT_PROGRESS, .rev = rev};
        w->fn(w->arg, &pe, 1);
        pthread_mutex_lock(&s->mu);
    }
    if (rev > w->delivered)
        w->delivered = rev;
    storage_op *ready = take_releasable(s);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    run_dones(s, ready);
}

/* Waits (s->mu held) up to `sec` seconds or until the store closes. */
static void pause_unless_closing(etcd_storage *s, int sec)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += sec;
    while (!s->closing && pthread_cond_timedwait(&s->sup_cv, &s->mu, &until) == 0) {
    }
}

/* Puts the sync marker (see ewatcher.synced): its event reaches every
 * stream at a revision after their creation. Failures are logged only: a
 * later progress request tries again (false). */
static bool sync_marker(etcd_storage *s)
{
    char *key = xasprintf("%s%s", s->prefix, SYNC_MARKER);
    Ckube__Etcd__PutRequest put = CKUBE__ETCD__PUT_REQUEST__INIT;
    put.key = bin(key, strlen(key));
    put.value = bin("", 0);
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    bool ok = etcd_call(s->c, KV_PUT, &put.base, &ckube__etcd__put_response__descriptor, &m,
                        CURRENT_REV_TIMEOUT_MS, &err) == 0;
    if (!ok)
        CKUBE_WARN("etcd: cannot put %s: %s", key, err.message);
    else
        protobuf_c_message_free_unpacked(m, NULL);
    free(key);
    return ok;
}

/* A watcher's supervisor: when its stream breaks, starts another from the
 * revision after the last delivered, once a second until one runs. */
static void *supervisor_main(void *p)
{
    ewatcher *w = p;
    etcd_storage *s = w->s;
    pthread_setname_np(pthread_self(), "ckube-etcd-sup");
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (w->state == W_RUNNING && !s->closing && w->progress_seen == s->progress_gen)
            pthread_cond_wait(&s->sup_cv, &s->mu);
        if (w->state == W_RUNNING && !s->closing) {
            /* a progress request: only this thread replaces w->w */
            w->progress_seen = s->progress_gen;
            etcd_watch *cur = w->w;
            /* (after the creation answer: the marker's revision is then
             * after created_rev, so its event proves the stream synced) */
            bool marker = !w->synced && !w->marker_sent && s->km && w->created_rev != INT64_MAX;
            w->marker_sent |= marker;
            bool synced = w->synced;
            pthread_mutex_unlock(&s->mu);
            bool marked = marker && sync_marker(s);
            if (!marker && synced)
                etcd_watch_request_progress(cur); /* a broken stream says so itself */
            pthread_mutex_lock(&s->mu);
            if (marker && !marked)
                w->marker_sent = false; /* (etcd electing a leader): the next request retries */
            continue;
        }
        etcd_watch *old = w->w;
        w->w = NULL;
        bool resume = w->state == W_BROKEN && !s->closing;
        pthread_mutex_unlock(&s->mu);
        etcd_watch_stop(old); /* its last callback has run (ended, or cancelled now) */
        pthread_mutex_lock(&s->mu);
        if (!resume)
            break;
        pause_unless_closing(s, 1);
        if (s->closing)
            break;
        int64_t from = w->delivered;
        w->state = W_RUNNING;
        w->synced = w->marker_sent = false; /* until the new stream says */
        w->created_rev = INT64_MAX;
        pthread_mutex_unlock(&s->mu);
        etcd_error err = {0};
        etcd_watch *nw =
            etcd_watch_start(s->c, s->prefix, s->prefix_len, s->prefix_end, s->prefix_end_len,
                             from + 1, true, true, on_events, w, &err);
        pthread_mutex_lock(&s->mu);
        if (!nw) {
            if (w->state == W_RUNNING)
                w->state = W_BROKEN; /* try again in a second */
            continue;
        }
        w->w = nw;
        CKUBE_INFO("etcd: watch resumed from revision %" PRId64, from + 1);
    }
    if (w->state != W_DEAD)
        w->state = W_DEAD;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int e_watch(storage *st, int64_t from_rev, storage_watch_fn fn, void *arg)
{
    etcd_storage *s = (etcd_storage *)st;
    if (from_rev < 0 || !fn)
        return STORAGE_ERR_INVALID;
    /* etcd reports a compacted start revision after the watch is created,
     * on the stream; storage_watch answers at once: a Range at from_rev
     * fails exactly when a watch from from_rev + 1 would */
    if (from_rev > 0) {
        Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
        rq.key = bin("\0", 1);
        rq.count_only = true;
        rq.revision = from_rev;
        ProtobufCMessage *m = NULL;
        etcd_error err = {0};
        if (etcd_call(s->c, KV_RANGE, &rq.base, &ckube__etcd__range_response__descriptor, &m,
                      CALL_TIMEOUT_MS, &err) != 0) {
            /* a future revision is no compaction: the watch waits for it */
            if (err.code != ETCD_GRPC_OUT_OF_RANGE || !strstr(err.message, "future revision"))
                return map_error(&err);
        }
        protobuf_c_message_free_unpacked(m, NULL);
    }
    ewatcher *w = calloc(1, sizeof *w);
    if (!w)
        return STORAGE_ERR_NOMEM;
    w->s = s;
    w->fn = fn;
    w->arg = arg;
    w->delivered = from_rev;
    w->created_rev = INT64_MAX; /* until the creation answer */
    pthread_mutex_lock(&s->mu);
    if (s->closing) {
        pthread_mutex_unlock(&s->mu);
        free(w);
        return STORAGE_ERR_CLOSED;
    }
    w->progress_seen = s->progress_gen;
    w->next = s->watchers;
    s->watchers = w;
    pthread_mutex_unlock(&s->mu);
    etcd_error err = {0};
    /* everything: from "\0" to the end of the keyspace */
    /* the keyspace; prev_kv, as kube-apiserver's etcd3 watcher asks: a
     * delete's event carries the key's create revision only there */
    w->w = etcd_watch_start(s->c, s->prefix, s->prefix_len, s->prefix_end, s->prefix_end_len,
                            from_rev + 1, true, true, on_events, w, &err);
    pthread_mutex_lock(&s->mu);
    if (!w->w) {
        w->state = W_DEAD;
        w->error = STORAGE_ERR_IO;
        CKUBE_ERROR("etcd: cannot watch: %s", err.message);
    }
    while (w->state == W_STARTING)
        pthread_cond_wait(&s->cv, &s->mu);
    int rc = w->state == W_RUNNING ? STORAGE_OK : w->error ? w->error : STORAGE_ERR_IO;
    if (rc == STORAGE_OK && pthread_create(&w->sup, NULL, supervisor_main, w) == 0)
        w->has_sup = true;
    pthread_mutex_unlock(&s->mu);
    return rc; /* a refused watcher stays listed (W_DEAD) until close */
}

static int e_request_progress(storage *st)
{
    etcd_storage *s = (etcd_storage *)st;
    pthread_mutex_lock(&s->mu);
    s->progress_gen++;
    pthread_cond_broadcast(&s->sup_cv); /* the supervisors send */
    pthread_mutex_unlock(&s->mu);
    return STORAGE_OK;
}

/* The cluster's data (storage_claim_cluster_data): one key beside the
 * objects' prefix, PREFIX without its last '/' plus CLUSTER_DATA_SUFFIX
 * ("/registry-ckube-cluster" for "/registry/"), so that it is never in a
 * range or watch of the objects and two clusters under two prefixes have
 * their own. Claimed with If(CreateRevision == 0) Then Put Else Range,
 * so the first server's value stays. */
#define CLUSTER_DATA_SUFFIX "-ckube-cluster"

static int e_claim_cluster_data(storage *st, const char *value, size_t len, char **out,
                                size_t *out_len)
{
    etcd_storage *s = (etcd_storage *)st;
    size_t plen = s->prefix_len > 1 ? s->prefix_len - 1 : s->prefix_len;
    char *key = xasprintf("%.*s%s", (int)plen, s->prefix, CLUSTER_DATA_SUFFIX);
    Ckube__Etcd__Compare cmp = CKUBE__ETCD__COMPARE__INIT;
    cmp.key = bin(key, strlen(key));
    cmp.target = CKUBE__ETCD__COMPARE__COMPARE_TARGET__CREATE;
    cmp.result = CKUBE__ETCD__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target_union_case = CKUBE__ETCD__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = value ? 0 : -1; /* never equal: only read it */
    Ckube__Etcd__PutRequest put = CKUBE__ETCD__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value = bin(value ? value : "", value ? len : 0);
    Ckube__Etcd__RequestOp then = CKUBE__ETCD__REQUEST_OP__INIT;
    then.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_PUT;
    then.request_put = &put;
    etcd_error err = {0};
    Ckube__Etcd__TxnResponse *r = txn_or_get(s, &cmp, &then, &err);
    int rc = STORAGE_OK;
    if (!r) {
        CKUBE_ERROR("etcd: reading %s failed: %s", key, err.message);
        rc = map_error(&err);
    } else if (r->succeeded) {
        *out = xmalloc(len + 1);
        memcpy(*out, value, len);
        (*out)[len] = 0;
        *out_len = len;
    } else {
        const Ckube__Etcd__ResponseOp *ro = r->n_responses ? r->responses[0] : NULL;
        const Ckube__Etcd__RangeResponse *got =
            ro && ro->response_case == CKUBE__ETCD__RESPONSE_OP__RESPONSE_RESPONSE_RANGE
                ? ro->response_range
                : NULL;
        if (!got || !got->n_kvs) {
            rc = STORAGE_ERR_NOT_FOUND;
        } else {
            const ProtobufCBinaryData *v = &got->kvs[0]->value;
            *out = xmalloc(v->len + 1);
            if (v->len)
                memcpy(*out, v->data, v->len);
            (*out)[v->len] = 0;
            *out_len = v->len;
        }
    }
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    free(key);
    return rc;
}

/* ---- compaction ------------------------------------------------------------------------ */

/* upstream's compactRevKey: its version counts the compactions */
#define COMPACT_REV_KEY "compact_rev_key"

/* kube-apiserver's etcd3 compact(): a Txn that puts compact_rev_key only
 * if its version is still the one this server last saw. The server whose
 * Txn succeeds compacts; the others learn the new version and leave it to
 * them this round, so several servers on one etcd compact once per
 * interval. 1: this server compacts; 0: another did; < 0: an error. */
static int compact_elect(etcd_storage *s, int64_t rev)
{
    Ckube__Etcd__Compare cmp = CKUBE__ETCD__COMPARE__INIT;
    cmp.key = bin(COMPACT_REV_KEY, strlen(COMPACT_REV_KEY));
    cmp.target = CKUBE__ETCD__COMPARE__COMPARE_TARGET__VERSION;
    cmp.result = CKUBE__ETCD__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target_union_case = CKUBE__ETCD__COMPARE__TARGET_UNION_VERSION;
    pthread_mutex_lock(&s->mu);
    cmp.version = s->compact_time;
    pthread_mutex_unlock(&s->mu);
    char val[24];
    snprintf(val, sizeof val, "%" PRId64, rev);
    Ckube__Etcd__PutRequest put = CKUBE__ETCD__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value = bin(val, strlen(val));
    Ckube__Etcd__RequestOp then = CKUBE__ETCD__REQUEST_OP__INIT;
    then.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_PUT;
    then.request_put = &put;
    etcd_error err = {0};
    Ckube__Etcd__TxnResponse *r = txn_or_get(s, &cmp, &then, &err);
    if (!r) {
        CKUBE_ERROR("etcd: compaction election failed: %s", err.message);
        return -1;
    }
    int elected = r->succeeded ? 1 : 0;
    pthread_mutex_lock(&s->mu);
    if (elected) {
        s->compact_time++;
    } else if (r->n_responses &&
               r->responses[0]->response_case ==
                   CKUBE__ETCD__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
               r->responses[0]->response_range->n_kvs) {
        s->compact_time = r->responses[0]->response_range->kvs[0]->version;
    }
    pthread_mutex_unlock(&s->mu);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return elected;
}

static int e_compact(storage *st, int64_t rev)
{
    etcd_storage *s = (etcd_storage *)st;
    if (rev < 0)
        return STORAGE_ERR_INVALID;
    pthread_mutex_lock(&s->mu);
    bool done = rev <= s->compacted; /* nothing new to forget */
    pthread_mutex_unlock(&s->mu);
    if (done)
        return STORAGE_OK;
    int64_t cur = e_current_rev(st);
    if (cur < 0)
        return STORAGE_ERR_IO;
    if (rev > cur)
        return STORAGE_ERR_INVALID;
    int elected = compact_elect(s, rev);
    if (elected < 0)
        return STORAGE_ERR_IO;
    if (!elected) {
        CKUBE_V(4, "etcd: another server compacts this round");
        return STORAGE_OK;
    }
    Ckube__Etcd__CompactionRequest rq = CKUBE__ETCD__COMPACTION_REQUEST__INIT;
    rq.revision = rev;
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    if (etcd_call(s->c, KV_COMPACT, &rq.base, &ckube__etcd__compaction_response__descriptor, &m,
                  CALL_TIMEOUT_MS, &err) != 0) {
        if (err.code == ETCD_GRPC_OUT_OF_RANGE && strstr(err.message, "future revision"))
            return STORAGE_ERR_INVALID;
        if (err.code != ETCD_GRPC_OUT_OF_RANGE) { /* OUT_OF_RANGE: compacted already */
            CKUBE_ERROR("etcd: compaction at %" PRId64 " failed: %s", rev, err.message);
            return STORAGE_ERR_IO;
        }
    }
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    CKUBE_V(4, "etcd: compacted rev (%" PRId64 ")", rev);
    pthread_mutex_lock(&s->mu);
    if (rev > s->compacted)
        s->compacted = rev;
    pthread_mutex_unlock(&s->mu);
    return STORAGE_OK;
}

static int64_t e_compacted_rev(storage *st)
{
    etcd_storage *s = (etcd_storage *)st;
    pthread_mutex_lock(&s->mu);
    int64_t r = s->compacted;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---- open and close ---------------------------------------------------------------------- */

static void e_stats(storage *st, storage_stats *out)
{
    etcd_storage *s = (etcd_storage *)st;
    memset(out, 0, sizeof *out);
    out->ops = atomic_load(&s->ops);
    out->commits = out->ops - atomic_load(&s->failed);
    out->failed_commits = atomic_load(&s->failed);
    out->max_batch = out->ops ? 1 : 0;
}

static void e_close(storage *st)
{
    etcd_storage *s = (etcd_storage *)st;
    pthread_mutex_lock(&s->mu);
    /* let the queued writes run and their events arrive, then stop */
    while (s->running || s->q_head)
        pthread_cond_wait(&s->cv, &s->mu);
    s->closing = true;
    /* a watch callback may still read pending ops' hints: their dones
     * (which end the ops) wait for it */
    while (s->hints_lent)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->sup_cv);
    ewatcher *ws = s->watchers;
    s->watchers = NULL;
    storage_op *ready = take_releasable(s);
    pthread_mutex_unlock(&s->mu);
    run_dones(s, ready);
    while (ws) {
        ewatcher *next = ws->next;
        if (ws->has_sup)
            pthread_join(ws->sup, NULL); /* it stops the stream */
        else
            etcd_watch_stop(ws->w);
        free(ws);
        ws = next;
    }
    etcd_client_free(s->c);
    free(s->prefix);
    free(s->prefix_end);
    etcd_keymap_free(s->km);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->sup_cv);
    free(s);
}

static const struct storage_backend_ops ETCD_OPS = {
    .name = "etcd",
    .submit = e_submit,
    .get = e_get,
    .range = e_range,
    .current_rev = e_current_rev,
    .watch = e_watch,
    .compact = e_compact,
    .compacted_rev = e_compacted_rev,
    .close = e_close,
    .stats = e_stats,
    .request_progress = e_request_progress,
    .claim_cluster_data = e_claim_cluster_data,
    .shared = true, /* several servers may share one etcd */
};

/* What gRPC's account of a failed connection most likely means, for the
 * start-up error ("" when nothing more is known). */
static const char *connect_hint(const char *endpoints, const etcd_tls *tls, const char *why)
{
    bool https = !strncmp(endpoints, "https://", 8);
    bool cert = tls && tls->cert_file;
    if (strstr(why, "certificate verify failed"))
        return " (the member's certificate is not signed by --etcd-cafile's CA)";
    /* a member that refuses the handshake's client certificate closes
     * the connection: gRPC reports the read, the reset or the close */
    if (https && (strstr(why, "Endpoint read failed") || strstr(why, "Connection reset by peer") ||
                  strstr(why, "Socket closed")))
        return cert ? " (did the member refuse the client certificate of --etcd-certfile?)"
                    : " (does the member require a client certificate? --etcd-certfile and "
                      "--etcd-keyfile)";
    if (!https && strstr(why, "Socket closed"))
        return " (does the member serve https?)";
    return "";
}

storage *storage_etcd_open(const char *endpoints, const char *prefix, bool kube_layout,
                           const etcd_tls *tls, char **err)
{
    if (!kube_layout && (!prefix || !*prefix)) {
        ckube__set_err(err, "the etcd key prefix may not be empty");
        return NULL;
    }
    etcd_keymap *km = kube_layout ? etcd_keymap_new(prefix) : NULL;
    if (km)
        prefix = km->prefix; /* normalised: "/registry" is "/registry/" */
    etcd_client *c = etcd_client_new(endpoints, tls, err);
    if (!c) {
        etcd_keymap_free(km);
        return NULL;
    }
    /* etcd answers, or the server does not start */
    Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
    rq.key = bin(prefix, strlen(prefix));
    rq.count_only = true;
    ProtobufCMessage *m = NULL;
    etcd_error e = {0};
    if (etcd_call(c, KV_RANGE, &rq.base, &ckube__etcd__range_response__descriptor, &m, 10000, &e) !=
        0) {
        /* the deadline says nothing of why: a call that does not wait for
         * a connection gets gRPC's account of the last attempt */
        etcd_error why = {0};
        if (e.code == ETCD_GRPC_DEADLINE_EXCEEDED &&
            etcd_call_now(c, KV_RANGE, &rq.base, &ckube__etcd__range_response__descriptor, &m, 2000,
                          &why) != 0 &&
            why.message[0])
            e = why;
        else if (m)
            protobuf_c_message_free_unpacked(m, NULL);
        ckube__set_err(err, "etcd at %s does not answer: %s%s", endpoints, e.message,
                       connect_hint(endpoints, tls, e.message));
        etcd_client_free(c);
        etcd_keymap_free(km);
        return NULL;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    etcd_storage *s = calloc(1, sizeof *s);
    if (!s) {
        etcd_client_free(c);
        etcd_keymap_free(km);
        ckube__set_err(err, "out of memory");
        return NULL;
    }
    s->base.ops = &ETCD_OPS;
    s->c = c;
    s->km = km;
    s->prefix_len = strlen(prefix);
    s->prefix = strdup(prefix);
    s->prefix_end = malloc(s->prefix_len + 1);
    if (!s->prefix || !s->prefix_end)
        xalloc_die();
    s->prefix_end_len = prefix_end(prefix, s->prefix_len, s->prefix_end);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->sup_cv, NULL);
    CKUBE_INFO("storage: etcd at %s, keys under %s", endpoints, s->prefix);
    return &s->base;
}
