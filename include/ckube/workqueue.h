/* ckube/workqueue.h - the controller work queue: deduplicating, delaying,
 * rate limited, instrumented (client-go's util/workqueue, in C).
 *
 * Items are string keys, usually "namespace/name"; the queue copies them.
 *
 * Guarantees (same as client-go):
 *  - a key waiting in the queue is never queued twice (adds are merged);
 *  - a key is never handed to two workers at once: a key added again
 *    while a worker processes it is queued again when the worker calls
 *    ckube_workqueue_done;
 *  - keys come out in the order they were (first) added.
 *
 * A worker loop:
 *
 *   char *key;
 *   while ((key = ckube_workqueue_get(q)) != NULL) {
 *       if (reconcile(key) == 0)
 *           ckube_workqueue_forget(q, key);
 *       else
 *           ckube_workqueue_add_rate_limited(q, key);
 *       ckube_workqueue_done(q, key);
 *       free(key);
 *   }
 *
 * Thread-safety: every ckube_workqueue_* function except _free may be
 * called concurrently from any number of threads. Rate limiters are
 * thread-safe too (each guards its own state).
 *
 * Time: delays are nanoseconds on the queue's ckube_clock (see
 * ckube/clock.h), so tests can drive them with a fake clock.
 */
#ifndef CKUBE_WORKQUEUE_H
#define CKUBE_WORKQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include <ckube/clock.h>
#include <ckube/metrics.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Rate limiters                                                       */
/* ------------------------------------------------------------------ */

/* A rate limiter decides how long a key waits before it is retried.
 * To write your own, embed `ckube_rate_limiter` as the FIRST member of
 * your struct and point `ops` at a static table:
 *
 *   struct mine { ckube_rate_limiter base; ... };
 *   static const ckube_rate_limiter_ops mine_ops = {mine_when, ...};
 *
 * Every op may be called concurrently from several threads; the
 * implementation does its own locking. `key` is borrowed for the call. */
typedef struct ckube_rate_limiter ckube_rate_limiter;

typedef struct ckube_rate_limiter_ops {
    /* Records a failure of `key` and returns how long to wait (ns) before
     * retrying it. */
    uint64_t (*when)(ckube_rate_limiter *rl, const char *key);
    /* Stops tracking `key` (it succeeded): its backoff starts over. */
    void (*forget)(ckube_rate_limiter *rl, const char *key);
    /* How many failures of `key` are being tracked. */
    int (*num_requeues)(ckube_rate_limiter *rl, const char *key);
    /* Frees the limiter. */
    void (*free)(ckube_rate_limiter *rl);
} ckube_rate_limiter_ops;

struct ckube_rate_limiter {
    const ckube_rate_limiter_ops *ops;
};

/* Calls through the vtable; NULL rl → 0 / no-op. */
uint64_t ckube_rate_limiter_when(ckube_rate_limiter *rl, const char *key);
void ckube_rate_limiter_forget(ckube_rate_limiter *rl, const char *key);
int ckube_rate_limiter_num_requeues(ckube_rate_limiter *rl, const char *key);
void ckube_rate_limiter_free(ckube_rate_limiter *rl);

/* Per-key exponential backoff: the n-th failure (from 0) of a key waits
 * base_ns * 2^n, capped at max_ns (no overflow however many failures).
 * Returns NULL when out of memory. Caller owns the result (free with
 * ckube_rate_limiter_free, or hand it to a queue). */
ckube_rate_limiter *ckube_rate_limiter_exponential(uint64_t base_ns, uint64_t max_ns);

/* Per-key fast then slow: the first max_fast_attempts failures of a key
 * wait fast_ns, later ones slow_ns. Caller owns the result. */
ckube_rate_limiter *ckube_rate_limiter_fast_slow(uint64_t fast_ns, uint64_t slow_ns,
                                                 int max_fast_attempts);

/* Overall token bucket shared by all keys: `burst` tokens, refilled at
 * `qps` per second on `clock` (NULL = real), starting full. Each when()
 * reserves a token and returns the wait until that token exists (so a
 * burst of failures is spread out at qps, like golang.org/x/time/rate's
 * Reserve().Delay()). qps may be INFINITY (never waits). Returns NULL when
 * qps is not > 0 or burst < 1 (or out of memory). forget/num_requeues
 * do nothing / return 0. Caller owns the result; the clock must outlive
 * it. */
ckube_rate_limiter *ckube_rate_limiter_bucket(ckube_clock *clock, double qps, int burst);

/* The longest delay of several limiters (every limiter sees every call;
 * num_requeues is the maximum; forget goes to all). Takes ownership of
 * the n limiters in `limiters` (the array itself is copied), also when
 * it fails (then they are freed). NULL entries are not allowed; returns
 * NULL when n == 0, an entry is NULL, or out of memory. */
ckube_rate_limiter *ckube_rate_limiter_max_of(ckube_rate_limiter *const *limiters, size_t n);

/* Caps another limiter's delays at max_wait_ns. Takes ownership of
 * `inner` (freed on failure too). */
ckube_rate_limiter *ckube_rate_limiter_with_max_wait(ckube_rate_limiter *inner,
                                                     uint64_t max_wait_ns);

/* What controllers use unless told otherwise, as in client-go:
 * max_of(exponential 5 ms .. 1000 s, bucket 10 qps burst 100 on clock).
 * Caller owns the result. */
ckube_rate_limiter *ckube_rate_limiter_default_controller(ckube_clock *clock);

/* ------------------------------------------------------------------ */
/* The queue                                                           */
/* ------------------------------------------------------------------ */

typedef struct ckube_workqueue ckube_workqueue;

typedef struct ckube_workqueue_config {
    /* Value of the `name` label on the workqueue_* metrics (copied).
     * NULL or "" = no metrics at all. */
    const char *name;
    /* Time source for delays and metrics; NULL = the real clock. Must
     * outlive the queue. */
    ckube_clock *clock;
    /* Limiter behind add_rate_limited/forget/num_requeues. The queue
     * takes ownership (also when ckube_workqueue_new fails). NULL =
     * ckube_rate_limiter_default_controller(clock). */
    ckube_rate_limiter *rate_limiter;
    /* Registry for the metrics; NULL = ckube_metrics_default(). Must
     * outlive the queue. */
    ckube_metrics_registry *metrics;
} ckube_workqueue_config;

/* A new queue; cfg NULL = all defaults. Returns NULL only when out of
 * memory. Free with ckube_workqueue_free. */
ckube_workqueue *ckube_workqueue_new(const ckube_workqueue_config *cfg);

/* Frees the queue, its keys and its rate limiter. No other thread may be
 * using the queue (shut it down and join the workers first); borrowed
 * keys become invalid. If the queue had metrics, its gauges are set to 0
 * and its counters/histograms stay in the registry (as in Prometheus). */
void ckube_workqueue_free(ckube_workqueue *q);

/* Marks `key` (borrowed, copied if needed) as needing processing. No-op
 * when it is already queued, or when the queue is shutting down. If a
 * worker is processing it, it is queued again when that worker calls
 * done. Returns 0, or -1 when key is NULL or memory runs out. */
int ckube_workqueue_add(ckube_workqueue *q, const char *key);

/* Adds `key` after `delay_ns` (0 = now). While a key waits, adding it
 * again with a delay keeps whichever ready time is earlier. A waiting key
 * may also be added directly; the delayed add then merges as usual. Keys
 * still waiting at shutdown are dropped. Counts a retry in the metrics
 * (as client-go's AddAfter does). Returns 0 or -1 (NULL key / no
 * memory). */
int ckube_workqueue_add_after(ckube_workqueue *q, const char *key, uint64_t delay_ns);

/* add_after(key, rate_limiter.when(key)): records a failure of key. */
int ckube_workqueue_add_rate_limited(ckube_workqueue *q, const char *key);
/* The rate limiter stops tracking key (call on success). */
void ckube_workqueue_forget(ckube_workqueue *q, const char *key);
/* The rate limiter's failure count for key. */
int ckube_workqueue_num_requeues(ckube_workqueue *q, const char *key);

/* Blocks until a key is ready and returns it, now marked as processing:
 * call ckube_workqueue_done(q, key) when finished, then free(key) (the
 * caller owns the returned string). Returns NULL once the queue is
 * shutting down AND empty: keys queued before shutdown are still handed
 * out (as in client-go), so workers finish them. Also returns NULL if the
 * copy cannot be allocated; the key then stays queued and
 * ckube_workqueue_shutting_down(q) tells the two cases apart. */
char *ckube_workqueue_get(ckube_workqueue *q);

/* Like ckube_workqueue_get without the copy: the returned key belongs to
 * the queue and stays valid until this worker calls
 * ckube_workqueue_done for it (pass the same pointer). Do not free it.
 * The fastest path (no allocation per item). */
const char *ckube_workqueue_get_borrowed(ckube_workqueue *q);

/* Ends processing of `key` (the string from get, or any equal string).
 * If the key was added meanwhile it is queued again. Returns 0, or -1
 * when the key was not being processed (nothing changes). */
int ckube_workqueue_done(ckube_workqueue *q, const char *key);

/* Keys ready to be handed out now (not counting keys being processed or
 * waiting for a delay). Informational only. */
size_t ckube_workqueue_len(ckube_workqueue *q);

/* Stops the queue: later adds are ignored, delayed keys dropped, and
 * getters get the keys still queued, then NULL (blocked getters wake at
 * once when nothing is queued). Returns immediately; idempotent. Also
 * makes a concurrent ckube_workqueue_shutdown_with_drain return. */
void ckube_workqueue_shutdown(ckube_workqueue *q);

/* Like shutdown, then waits until no key is being processed (every
 * worker called done). Workers must keep calling done; a later
 * ckube_workqueue_shutdown from another thread cuts the wait short. */
void ckube_workqueue_shutdown_with_drain(ckube_workqueue *q);

/* Whether shutdown has begun (1) or not (0). */
int ckube_workqueue_shutting_down(ckube_workqueue *q);

#ifdef __cplusplus
}
#endif
#endif
