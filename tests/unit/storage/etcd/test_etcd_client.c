/* test_etcd_client.c - the etcd v3 client over gRPC (storage/etcd/
 * etcd_client.h) against a real etcd member on loopback: Put and Range,
 * a Txn that compares mod_revision (etcd3 store's optimistic update) both
 * ways, DeleteRange with its previous value, Compact and a Range at a
 * compacted revision (gRPC OUT_OF_RANGE, "required revision has been
 * compacted"), a Watch stream from a revision (events, a progress
 * notification, the end after a stop), several calls from threads at
 * once on one channel; then bad endpoints, refused at once, and a member
 * that is down, whose calls fail at their deadline and succeed once it is
 * back (the channel reconnects). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "storage/etcd/etcd.h"
#include "storage/etcd/etcd_client.h"
#include "util/etcd_util.h"

static struct test_etcd ETCD;
static etcd_client *C;

#define KV_RANGE "/etcdserverpb.KV/Range"
#define KV_PUT "/etcdserverpb.KV/Put"
#define KV_DELETE "/etcdserverpb.KV/DeleteRange"
#define KV_TXN "/etcdserverpb.KV/Txn"
#define KV_COMPACT "/etcdserverpb.KV/Compact"

static ProtobufCBinaryData bytes(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

/* Put: the new revision. */
static int64_t put(const char *key, const char *value)
{
    Ckube__Etcd__PutRequest rq = CKUBE__ETCD__PUT_REQUEST__INIT;
    rq.key = bytes(key);
    rq.value = bytes(value);
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    if (etcd_call(C, KV_PUT, &rq.base, &ckube__etcd__put_response__descriptor, &m, 5000, &err))
        fail_msg("put %s: %d %s", key, err.code, err.message);
    Ckube__Etcd__PutResponse *r = (Ckube__Etcd__PutResponse *)m;
    int64_t rev = r->header->revision;
    protobuf_c_message_free_unpacked(m, NULL);
    return rev;
}

/* Range of one key (at rev, 0 = now): the answer, or NULL with *err. */
static Ckube__Etcd__RangeResponse *get(const char *key, int64_t rev, etcd_error *err)
{
    Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
    rq.key = bytes(key);
    rq.revision = rev;
    ProtobufCMessage *m = NULL;
    if (etcd_call(C, KV_RANGE, &rq.base, &ckube__etcd__range_response__descriptor, &m, 5000, err))
        return NULL;
    return (Ckube__Etcd__RangeResponse *)m;
}

static int setup(void **state)
{
    (void)state;
    if (teu_start(&ETCD) != 0)
        return -1;
    char *err = NULL;
    C = etcd_client_new(ETCD.url, NULL, &err);
    if (!C) {
        fprintf(stderr, "%s\n", err);
        free(err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    etcd_client_free(C);
    teu_stop(&ETCD, SIGTERM);
    return 0;
}

static void test_put_range(void **state)
{
    (void)state;
    int64_t r1 = put("/registry/configmaps/default/a", "{\"v\":1}");
    int64_t r2 = put("/registry/configmaps/default/b", "{\"v\":2}");
    assert_true(r2 == r1 + 1);
    etcd_error err = {0};
    Ckube__Etcd__RangeResponse *r = get("/registry/configmaps/default/a", 0, &err);
    assert_non_null(r);
    assert_int_equal(r->n_kvs, 1);
    assert_memory_equal(r->kvs[0]->value.data, "{\"v\":1}", 7);
    assert_int_equal(r->kvs[0]->mod_revision, r1);
    assert_int_equal(r->kvs[0]->create_revision, r1);
    assert_int_equal(r->header->revision, r2);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    /* a prefix: [key, key+1) */
    Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
    rq.key = bytes("/registry/configmaps/default/");
    rq.range_end = bytes("/registry/configmaps/default0");
    ProtobufCMessage *m = NULL;
    assert_int_equal(
        etcd_call(C, KV_RANGE, &rq.base, &ckube__etcd__range_response__descriptor, &m, 5000, &err),
        0);
    r = (Ckube__Etcd__RangeResponse *)m;
    assert_true(r->n_kvs >= 2);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* The etcd3 store's update: put if the key's mod_revision is still the
 * one read, else read it back. */
static void test_txn_compare_mod_revision(void **state)
{
    (void)state;
    int64_t rev = put("/registry/leases/kube-system/l", "one");
    Ckube__Etcd__Compare cmp = CKUBE__ETCD__COMPARE__INIT;
    cmp.result = CKUBE__ETCD__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = CKUBE__ETCD__COMPARE__COMPARE_TARGET__MOD;
    cmp.key = bytes("/registry/leases/kube-system/l");
    cmp.target_union_case = CKUBE__ETCD__COMPARE__TARGET_UNION_MOD_REVISION;
    cmp.mod_revision = rev;
    Ckube__Etcd__Compare *cmps[] = {&cmp};
    Ckube__Etcd__PutRequest p = CKUBE__ETCD__PUT_REQUEST__INIT;
    p.key = cmp.key;
    p.value = bytes("two");
    Ckube__Etcd__RequestOp ok = CKUBE__ETCD__REQUEST_OP__INIT;
    ok.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_PUT;
    ok.request_put = &p;
    Ckube__Etcd__RangeRequest g = CKUBE__ETCD__RANGE_REQUEST__INIT;
    g.key = cmp.key;
    Ckube__Etcd__RequestOp no = CKUBE__ETCD__REQUEST_OP__INIT;
    no.request_case = CKUBE__ETCD__REQUEST_OP__REQUEST_REQUEST_RANGE;
    no.request_range = &g;
    Ckube__Etcd__RequestOp *oks[] = {&ok}, *nos[] = {&no};
    Ckube__Etcd__TxnRequest t = CKUBE__ETCD__TXN_REQUEST__INIT;
    t.n_compare = 1;
    t.compare = cmps;
    t.n_success = 1;
    t.success = oks;
    t.n_failure = 1;
    t.failure = nos;
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    assert_int_equal(
        etcd_call(C, KV_TXN, &t.base, &ckube__etcd__txn_response__descriptor, &m, 5000, &err), 0);
    Ckube__Etcd__TxnResponse *r = (Ckube__Etcd__TxnResponse *)m;
    assert_true(r->succeeded);
    assert_int_equal(r->header->revision, rev + 1);
    protobuf_c_message_free_unpacked(m, NULL);
    /* again with the old revision: it fails and reads the current value */
    assert_int_equal(
        etcd_call(C, KV_TXN, &t.base, &ckube__etcd__txn_response__descriptor, &m, 5000, &err), 0);
    r = (Ckube__Etcd__TxnResponse *)m;
    assert_false(r->succeeded);
    assert_int_equal(r->n_responses, 1);
    assert_int_equal(r->responses[0]->response_case,
                     CKUBE__ETCD__RESPONSE_OP__RESPONSE_RESPONSE_RANGE);
    Ckube__Etcd__RangeResponse *cur = r->responses[0]->response_range;
    assert_int_equal(cur->n_kvs, 1);
    assert_memory_equal(cur->kvs[0]->value.data, "two", 3);
    assert_int_equal(cur->kvs[0]->mod_revision, rev + 1);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_delete_and_compact(void **state)
{
    (void)state;
    int64_t r1 = put("/registry/secrets/default/s", "v1");
    put("/registry/secrets/default/s", "v2");
    Ckube__Etcd__DeleteRangeRequest d = CKUBE__ETCD__DELETE_RANGE_REQUEST__INIT;
    d.key = bytes("/registry/secrets/default/s");
    d.prev_kv = true;
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    assert_int_equal(etcd_call(C, KV_DELETE, &d.base,
                               &ckube__etcd__delete_range_response__descriptor, &m, 5000, &err),
                     0);
    Ckube__Etcd__DeleteRangeResponse *dr = (Ckube__Etcd__DeleteRangeResponse *)m;
    assert_int_equal(dr->deleted, 1);
    assert_int_equal(dr->n_prev_kvs, 1);
    assert_memory_equal(dr->prev_kvs[0]->value.data, "v2", 2);
    int64_t now = dr->header->revision;
    protobuf_c_message_free_unpacked(m, NULL);
    /* the old value is still readable at its revision */
    Ckube__Etcd__RangeResponse *r = get("/registry/secrets/default/s", r1, &err);
    assert_non_null(r);
    assert_int_equal(r->n_kvs, 1);
    assert_memory_equal(r->kvs[0]->value.data, "v1", 2);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    /* until compacted: then etcd's OUT_OF_RANGE */
    Ckube__Etcd__CompactionRequest c = CKUBE__ETCD__COMPACTION_REQUEST__INIT;
    c.revision = now;
    assert_int_equal(etcd_call(C, KV_COMPACT, &c.base,
                               &ckube__etcd__compaction_response__descriptor, &m, 5000, &err),
                     0);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_null(get("/registry/secrets/default/s", r1, &err));
    assert_int_equal(err.code, ETCD_GRPC_OUT_OF_RANGE);
    assert_string_equal(err.message, "etcdserver: mvcc: required revision has been compacted");
}

/* ---- watches ---------------------------------------------------------------- */

typedef struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int events, progress, ended;
    int64_t last_rev, progress_rev;
    char last_value[64];
    etcd_error end;
} seen;

static void on_watch(void *arg, const Ckube__Etcd__WatchResponse *r, const etcd_error *err)
{
    seen *s = arg;
    pthread_mutex_lock(&s->mu);
    if (!r) {
        s->ended++;
        s->end = *err;
    } else if (r->n_events) {
        for (size_t i = 0; i < r->n_events; i++) {
            const Ckube__Etcd__KeyValue *kv = r->events[i]->kv;
            s->events++;
            s->last_rev = kv->mod_revision;
            snprintf(s->last_value, sizeof s->last_value, "%.*s", (int)kv->value.len,
                     (const char *)kv->value.data);
        }
    } else if (!r->created && r->header) {
        s->progress++;
        s->progress_rev = r->header->revision;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits (5 s at most) until *field reaches want. */
static bool wait_for(seen *s, const int *field, int want)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (*field < want && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
    }
    bool ok = *field >= want;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void test_watch(void **state)
{
    (void)state;
    int64_t r0 = put("/registry/pods/w/x", "before");
    seen s = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const char *key = "/registry/pods/w/", *end = "/registry/pods/w0";
    etcd_error err = {0};
    /* from r0: the put before the watch is replayed */
    etcd_watch *w = etcd_watch_start(C, key, strlen(key), end, strlen(end), r0, true, false,
                                     on_watch, &s, &err);
    assert_non_null(w);
    assert_true(wait_for(&s, &s.events, 1));
    int64_t r1 = put("/registry/pods/w/x", "after");
    put("/registry/pods/other/y", "not watched");
    assert_true(wait_for(&s, &s.events, 2));
    pthread_mutex_lock(&s.mu);
    assert_int_equal(s.events, 2);
    assert_int_equal(s.last_rev, r1);
    assert_string_equal(s.last_value, "after");
    pthread_mutex_unlock(&s.mu);
    /* a progress notification: no events, the current revision */
    assert_int_equal(etcd_watch_request_progress(w), 0);
    assert_true(wait_for(&s, &s.progress, 1));
    pthread_mutex_lock(&s.mu);
    assert_true(s.progress_rev >= r1 + 1);
    pthread_mutex_unlock(&s.mu);
    etcd_watch_stop(w);
    assert_int_equal(s.ended, 1);
    assert_int_equal(s.end.code, ETCD_GRPC_CANCELLED);
}

static int count_kv(void *arg, const storage_kv *kv)
{
    (void)kv;
    (*(int *)arg)++;
    return 0;
}

/* One channel, many callers at once. */
static void *putter(void *p)
{
    char key[64];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "/registry/configmaps/t%d/k%d", (int)(intptr_t)p, i);
        put(key, "x");
    }
    return NULL;
}

static void test_concurrent_calls(void **state)
{
    (void)state;
    pthread_t t[8];
    for (intptr_t i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, putter, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    Ckube__Etcd__RangeRequest rq = CKUBE__ETCD__RANGE_REQUEST__INIT;
    rq.key = bytes("/registry/configmaps/t");
    rq.range_end = bytes("/registry/configmaps/u");
    rq.count_only = true;
    ProtobufCMessage *m = NULL;
    etcd_error err = {0};
    assert_int_equal(
        etcd_call(C, KV_RANGE, &rq.base, &ckube__etcd__range_response__descriptor, &m, 5000, &err),
        0);
    assert_int_equal(((Ckube__Etcd__RangeResponse *)m)->count, 400);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Two servers' backends on one etcd compact as kube-apiserver's do: a
 * compare-and-swap on compact_rev_key's version elects one per round;
 * the other learns the new version and takes its turn next round. */
static void test_compaction_election(void **state)
{
    (void)state;
    char *err = NULL;
    storage *s1 = storage_etcd_open(ETCD.url, "/cmp/", false, NULL, &err);
    storage *s2 = storage_etcd_open(ETCD.url, "/cmp/", false, NULL, &err);
    assert_non_null(s1);
    assert_non_null(s2);
    put("/cmp/a", "1");
    int64_t r1 = put("/cmp/a", "2");
    /* round 1: both try; the first is elected and compacts */
    assert_int_equal(storage_compact(s1, r1), STORAGE_OK);
    assert_int_equal(storage_compacted_rev(s1), r1);
    assert_int_equal(storage_compact(s2, r1), STORAGE_OK);
    assert_int_equal(storage_compacted_rev(s2), 0); /* not its turn */
    etcd_error e = {0};
    Ckube__Etcd__RangeResponse *r = get("compact_rev_key", 0, &e);
    assert_non_null(r);
    assert_int_equal(r->kvs[0]->version, 1);
    char want[24];
    snprintf(want, sizeof want, "%lld", (long long)r1);
    assert_int_equal(r->kvs[0]->value.len, strlen(want));
    assert_memory_equal(r->kvs[0]->value.data, want, strlen(want));
    protobuf_c_message_free_unpacked(&r->base, NULL);
    assert_null(get("/cmp/a", r1 - 1, &e)); /* history before r1 is gone */
    assert_int_equal(e.code, ETCD_GRPC_OUT_OF_RANGE);
    /* round 2: s2 now knows the version and wins; s1 does not */
    int64_t r2 = put("/cmp/a", "3");
    assert_int_equal(storage_compact(s2, r2), STORAGE_OK);
    assert_int_equal(storage_compacted_rev(s2), r2);
    assert_int_equal(storage_compact(s1, r2 + 1), STORAGE_OK);
    assert_int_equal(storage_compacted_rev(s1), r1);
    /* the election's key is outside the backends' keys: a range of
     * everything does not hold it */
    int n = 0;
    assert_int_equal(storage_range(s1, "", count_kv, &n, NULL), STORAGE_OK);
    assert_int_equal(n, 1);
    storage_close(s1);
    storage_close(s2);
}

/* A storage watch's events, recorded by its callback. */
typedef struct swatch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int64_t revs[16];
    char keys[16][64];
} swatch;

static void on_storage_events(void *arg, const storage_event *ev, size_t n)
{
    swatch *w = arg;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < n && w->n < 16; i++) {
        w->revs[w->n] = ev[i].rev;
        snprintf(w->keys[w->n], sizeof w->keys[0], "%s",
                 ev[i].type == STORAGE_EVENT_PROGRESS ? "(progress)" : ev[i].key);
        w->n++;
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static bool swatch_wait(swatch *w, int n, int seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&w->mu);
    while (w->n < n && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0) {
    }
    bool ok = w->n >= n;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* Progress: a storage watch learns that etcd's revision moved on through
 * keys outside its prefix only from a progress event, which it gets when
 * asked (storage_request_progress), with etcd's current revision. */
static void test_progress(void **state)
{
    (void)state;
    char *serr = NULL;
    storage *st = storage_etcd_open(ETCD.url, "/prog/", false, NULL, &serr);
    assert_non_null(st);
    assert_true(storage_shared(st));
    swatch sw = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(storage_watch(st, storage_current_rev(st), on_storage_events, &sw),
                     STORAGE_OK);
    int64_t mine = put("/prog/a", "1");
    assert_true(swatch_wait(&sw, 1, 5));
    int64_t other = put("/elsewhere/b", "2"); /* not the watch's */
    assert_true(other > mine);
    assert_int_equal(storage_current_rev(st), other);
    assert_int_equal(storage_request_progress(st), STORAGE_OK);
    assert_true(swatch_wait(&sw, 2, 5));
    pthread_mutex_lock(&sw.mu);
    assert_string_equal(sw.keys[0], "/prog/a");
    assert_int_equal(sw.revs[0], mine);
    assert_string_equal(sw.keys[1], "(progress)");
    assert_int_equal(sw.revs[1], other);
    pthread_mutex_unlock(&sw.mu);
    /* nothing moved since: another request brings no second progress */
    assert_int_equal(storage_request_progress(st), STORAGE_OK);
    assert_false(swatch_wait(&sw, 3, 1));
    storage_close(st);
}

/* A watch that starts behind etcd replays history; a progress event must
 * not run ahead of that replay (etcd before 3.4.25 answers a progress
 * request with its current revision even then, etcd-io/etcd#15220). */
typedef struct replay_check {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t last_event, last_progress;
    int progress, bad;
} replay_check;

static void on_replay(void *arg, const storage_event *ev, size_t n)
{
    replay_check *c = arg;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == STORAGE_EVENT_PROGRESS) {
            c->progress++;
            c->last_progress = ev[i].rev;
            if (ev[i].rev > c->last_event)
                c->bad++; /* claims revisions whose events have not come */
        } else {
            c->last_event = ev[i].rev;
        }
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void test_progress_not_ahead_of_replay(void **state)
{
    (void)state;
    char *serr = NULL;
    storage *st = storage_etcd_open(ETCD.url, "/replay/", false, NULL, &serr);
    assert_non_null(st);
    int64_t base = storage_current_rev(st), last = 0;
    char key[64];
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "/replay/k%d", i % 50);
        last = put(key, "v");
    }
    replay_check c = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(storage_watch(st, base, on_replay, &c), STORAGE_OK);
    for (int i = 0; i < 100; i++) { /* while the replay runs */
        assert_int_equal(storage_request_progress(st), STORAGE_OK);
        usleep(1000);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&c.mu);
    while (c.last_event < last && pthread_cond_timedwait(&c.cv, &c.mu, &until) == 0) {
    }
    assert_int_equal(c.last_event, last);
    assert_int_equal(c.bad, 0); /* no progress ran ahead of the replay */
    pthread_mutex_unlock(&c.mu);
    /* caught up: progress is answered again, at the current revision */
    clock_gettime(CLOCK_REALTIME, &until); /* (the replay may have taken long: TSan) */
    until.tv_sec += 10;
    int other = c.progress;
    int64_t outside = put("/elsewhere/replay", "x");
    /* asked again every 100 ms, as the cacher asks: the stream counts as
     * caught up only once on_events has taken the last replayed event,
     * a moment after the callback saw it */
    pthread_mutex_lock(&c.mu);
    for (int i = 0; i < 100 && c.progress == other; i++) {
        pthread_mutex_unlock(&c.mu);
        assert_int_equal(storage_request_progress(st), STORAGE_OK);
        usleep(100000);
        pthread_mutex_lock(&c.mu);
    }
    assert_true(c.progress > other);
    assert_int_equal(c.last_progress, outside); /* past our keys: the other key's write */
    pthread_mutex_unlock(&c.mu);
    storage_close(st);
}

/* Last: stops the member and starts it again. A storage watch survives
 * it: its stream is started again from the revision after the last
 * delivered, so the events written meanwhile and after arrive, once. */
static void test_member_down_and_back(void **state)
{
    (void)state;
    char *serr = NULL;
    storage *st = storage_etcd_open(ETCD.url, "/down/", false, NULL, &serr);
    assert_non_null(st);
    swatch sw = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(storage_watch(st, storage_current_rev(st), on_storage_events, &sw),
                     STORAGE_OK);
    int64_t r1 = put("/down/before", "1");
    assert_true(swatch_wait(&sw, 1, 5));

    teu_stop(&ETCD, SIGKILL);
    etcd_error err = {0};
    assert_null(get("/registry/configmaps/default/a", 0, &err)); /* 5 s deadline */
    assert_true(err.code == ETCD_GRPC_DEADLINE_EXCEEDED || err.code == ETCD_GRPC_UNAVAILABLE);
    assert_int_equal(teu_start(&ETCD), 0);
    Ckube__Etcd__RangeResponse *r = get("/registry/configmaps/default/a", 0, &err);
    if (!r)
        fail_msg("after the restart: %d %s", err.code, err.message);
    assert_int_equal(r->n_kvs, 1); /* durable */
    protobuf_c_message_free_unpacked(&r->base, NULL);

    /* the watch is back: a write after the restart arrives, after the
     * one before it and without it again */
    int64_t r2 = put("/down/after", "2");
    assert_true(swatch_wait(&sw, 2, 15));
    pthread_mutex_lock(&sw.mu);
    assert_int_equal(sw.n, 2);
    assert_int_equal(sw.revs[0], r1);
    assert_string_equal(sw.keys[0], "/down/before");
    assert_int_equal(sw.revs[1], r2);
    assert_string_equal(sw.keys[1], "/down/after");
    pthread_mutex_unlock(&sw.mu);
    storage_close(st);
}

static void test_bad_endpoints(void **state)
{
    (void)state;
    static const char *const bad[] = {"",
                                      "127.0.0.1",
                                      "http://127.0.0.1:",
                                      "http://:2379",
                                      "http://127.0.0.1:2379,https://127.0.0.1:2380",
                                      "http://127.0.0.1:x",
                                      "http://etcd-a:2379,http://etcd-b:2379"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *err = NULL;
        etcd_client *c = etcd_client_new(bad[i], NULL, &err);
        if (c)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_non_null(err);
        free(err);
    }
    char *err = NULL;
    etcd_client *c = etcd_client_new("http://127.0.0.1:2379,http://127.0.0.1:22379/", NULL, &err);
    assert_non_null(c);
    etcd_client_free(c);
    etcd_tls tls = {.ca_file = "/nonexistent/ca.crt"};
    assert_null(etcd_client_new("https://127.0.0.1:2379", &tls, &err));
    assert_non_null(strstr(err, "cannot read /nonexistent/ca.crt"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_endpoints),
        cmocka_unit_test(test_put_range),
        cmocka_unit_test(test_txn_compare_mod_revision),
        cmocka_unit_test(test_delete_and_compact),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_concurrent_calls),
        cmocka_unit_test(test_compaction_election),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_progress_not_ahead_of_replay),
        cmocka_unit_test(test_member_down_and_back),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
