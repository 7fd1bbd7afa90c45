/* ckube/leaderelection.h - leader election over a Lease (client-go's
 * tools/leaderelection with the Lease resource lock).
 *
 * Several replicas run an elector on the same lock; at most one of them
 * leads at any time (given clocks that run at similar rates). The
 * algorithm is client-go's:
 *
 *   - acquire: every RetryPeriod (with jitter up to 1.2 x RetryPeriod) try
 *     to acquire the lock. The lock is free when it does not exist, its
 *     holderIdentity is "", or the record we last observed has not changed
 *     for leaseDurationSeconds as measured on OUR clock since we first saw
 *     it (observedTime + leaseDurationSeconds < now). No one else's
 *     timestamps are trusted, only changes to the record;
 *   - renew: the leader rewrites the record every RetryPeriod. When no
 *     renewal succeeds for RenewDeadline, leadership is lost;
 *   - every write is an update carrying the resourceVersion of the lease
 *     last read or written (optimistic concurrency: a concurrent writer
 *     makes it fail with 409); leaseTransitions grows by one each time the
 *     holder changes; acquireTime / renewTime are MicroTime
 *     ("2006-01-02T15:04:05.000000Z");
 *   - release on cancel: a leader stopped with release_on_cancel writes
 *     holderIdentity "" and leaseDurationSeconds 1, so another replica
 *     takes over at its next retry instead of waiting out the lease.
 *
 * The gauge leader_election_master_status{name="<name>"} is 1 while
 * leading and 0 otherwise.
 *
 * Time: every wait and every expiry decision uses the elector's
 * ckube_clock, so tests can run on a fake clock. The acquireTime /
 * renewTime written are wall-clock times derived from that clock (the
 * wall time at creation plus the clock's elapsed time).
 *
 * Threads: the elector runs on one thread of its own, started by
 * ckube_leader_elector_start and joined by ckube_leader_elector_stop.
 * Every callback runs on that thread and must return promptly (the
 * elector does not renew while a callback runs) and must not call
 * ckube_leader_elector_stop or _free on the same elector (that would
 * join the calling thread). Hand long work to another thread, as the
 * manager does.
 */
#ifndef CKUBE_LEADERELECTION_H
#define CKUBE_LEADERELECTION_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/metrics.h>
#include <ckube/status.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults (client-go's and controller-runtime's). */
#define CKUBE_LEADER_LEASE_DURATION_NS CKUBE_SEC(15)
#define CKUBE_LEADER_RENEW_DEADLINE_NS CKUBE_SEC(10)
#define CKUBE_LEADER_RETRY_PERIOD_NS CKUBE_SEC(2)
/* RetryPeriod jitter factor: renew deadline must exceed retry * this. */
#define CKUBE_LEADER_JITTER_FACTOR 1.2

/* Longest identity accepted (the record keeps it in a fixed buffer). */
#define CKUBE_LEADER_IDENTITY_MAX 253

/* ---- the record and the lock ---- */

/* The leader election record (a Lease's spec). Plain values, no
 * pointers: records are copied freely. Times are MicroTime strings, ""
 * when absent. */
typedef struct ckube_leader_record {
    char holder_identity[CKUBE_LEADER_IDENTITY_MAX + 1];
    int64_t lease_duration_seconds;
    char acquire_time[40];
    char renew_time[40];
    int64_t leader_transitions;
} ckube_leader_record;

/* A resource lock: where the record lives (client-go's
 * resourcelock.Interface). The Lease lock below is the one to use;
 * tests plug in their own (e.g. in memory on a fake clock).
 *  - get: fills *out and remembers the version read; returns 0, or -1
 *    with *err (code 404 when the lock object does not exist);
 *  - create: creates the lock object with `rec`; -1 with *err (409 when
 *    it already exists);
 *  - update: writes `rec` conditionally on the version last read or
 *    written through this lock; -1 with *err (409 on a conflict, or code
 *    0 "lock not initialized" before any get/create);
 *  - describe: "namespace/name" for logs (borrowed);
 *  - free: frees ctx (may be NULL).
 * Calls come from the elector's thread, one at a time. */
typedef struct ckube_leader_lock_ops {
    int (*get)(void *ctx, ckube_leader_record *out, ckube_status **err);
    int (*create)(void *ctx, const ckube_leader_record *rec, ckube_status **err);
    int (*update)(void *ctx, const ckube_leader_record *rec, ckube_status **err);
    const char *(*describe)(void *ctx);
    void (*free)(void *ctx);
} ckube_leader_lock_ops;

typedef struct ckube_leader_lock {
    const ckube_leader_lock_ops *ops; /* borrowed (normally static const) */
    void *ctx;                        /* owned by the lock */
} ckube_leader_lock;

/* A lock on the Lease coordination.k8s.io/v1 `ns`/`name` through `c`
 * (borrowed; must outlive the lock). Strings are copied. Returns NULL on
 * bad arguments (NULL/empty ns or name) or allocation failure. Free with
 * ckube_leader_lock_free (an elector frees the lock it was given). */
ckube_leader_lock *ckube_leader_lease_lock_new(ckube_client *c, const char *ns, const char *name);
/* Wraps custom operations; `ctx` is owned from now on (ops->free).
 * Returns NULL on allocation failure (ctx is then freed). */
ckube_leader_lock *ckube_leader_lock_new(const ckube_leader_lock_ops *ops, void *ctx);
void ckube_leader_lock_free(ckube_leader_lock *l);

/* Converts between a Lease spec (JSON object) and a record. from_json
 * tolerates missing fields (zero / ""). to_json returns a new reference. */
void ckube_leader_record_from_lease_spec(const json_t *spec, ckube_leader_record *out);
json_t *ckube_leader_record_to_lease_spec(const ckube_leader_record *rec);

/* ---- the elector ---- */

typedef struct ckube_leader_callbacks {
    /* This replica became the leader. Required. */
    void (*on_started_leading)(void *ctx);
    /* This replica stopped leading: the lease was lost (no renewal within
     * RenewDeadline) or the elector was stopped. Called once after each
     * on_started_leading, never without one (unlike client-go, which also
     * calls it when stopped before ever leading). Required. */
    void (*on_stopped_leading)(void *ctx);
    /* The observed leader changed (including to ourselves); `identity` is
     * borrowed for the call. Optional. */
    void (*on_new_leader)(void *ctx, const char *identity);
    void *ctx; /* borrowed; must outlive the elector */
} ckube_leader_callbacks;

typedef struct ckube_leader_election_config {
    /* The lock; owned by the elector from ckube_leader_elector_new on
     * (even when it fails). Required. */
    ckube_leader_lock *lock;
    /* NULL = ckube_leader_default_identity(). Copied. */
    const char *identity;
    /* 0 = defaults (15 s / 10 s / 2 s). Must satisfy lease_duration >
     * renew_deadline > 1.2 x retry_period; lease_duration >= 1 s (it is
     * written in whole seconds). */
    uint64_t lease_duration_ns;
    uint64_t renew_deadline_ns;
    uint64_t retry_period_ns;
    bool release_on_cancel;
    ckube_leader_callbacks callbacks;
    /* The label of leader_election_master_status; NULL = the lock's
     * description. Copied. */
    const char *name;
    ckube_clock *clock;              /* NULL = real; borrowed */
    ckube_metrics_registry *metrics; /* NULL = ckube_metrics_default() */
} ckube_leader_election_config;

typedef struct ckube_leader_elector ckube_leader_elector;

/* hostname + "_" + a random UUID (controller-runtime's default), into
 * buf (>= 128 bytes is always enough). Returns buf. */
char *ckube_leader_default_identity(char *buf, size_t n);

/* Validates the configuration as client-go does and creates an elector
 * (not running). Returns NULL with *err (malloc'd message, caller frees;
 * err may be NULL), e.g. "leaseDuration must be greater than
 * renewDeadline". The lock is freed on failure too. */
ckube_leader_elector *ckube_leader_elector_new(const ckube_leader_election_config *cfg, char **err);
/* Starts the election thread. Returns -1 when already started or the
 * thread cannot be created. */
int ckube_leader_elector_start(ckube_leader_elector *le);
/* Stops the election and joins its thread: a leader with
 * release_on_cancel releases the lock, then on_stopped_leading runs.
 * Idempotent; any thread but the elector's own (see the header comment). */
void ckube_leader_elector_stop(ckube_leader_elector *le);
/* Stops (if running) and frees the elector and its lock. NULL-safe. */
void ckube_leader_elector_free(ckube_leader_elector *le);

/* True while the last observed record names us as holder and we have not
 * given up (client-go's IsLeader). Any thread. */
bool ckube_leader_elector_is_leader(ckube_leader_elector *le);
/* The holder of the last observed record (malloc'd, caller frees; "" when
 * none observed). Any thread. */
char *ckube_leader_elector_get_leader(ckube_leader_elector *le);
/* Our identity (borrowed; valid for the elector's lifetime). */
const char *ckube_leader_elector_identity(const ckube_leader_elector *le);
/* The last observed record (a copy). */
void ckube_leader_elector_observed(ckube_leader_elector *le, ckube_leader_record *out);

/* Test hook: while paused, a leader skips its renewals (as if its writes
 * failed), so it loses leadership after RenewDeadline without anyone
 * touching the lock. */
void ckube_leader_elector_pause_renewals(ckube_leader_elector *le, bool paused);

#ifdef __cplusplus
}
#endif
#endif
