/* rate_limiter.c - the workqueue's rate limiters (see ckube/workqueue.h).
 *
 * Per-key limiters keep a failure count per key in a hash table under
 * their own mutex; the token bucket keeps one "theoretical arrival time"
 * (GCRA), which is exactly a token bucket that starts full and lets
 * tokens go negative for reservations, in integer nanoseconds so fake-
 * clock tests see exact delays.
 */
#include <ckube/workqueue.h>

#include "wq_table.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

uint64_t ckube_rate_limiter_when(ckube_rate_limiter *rl, const char *key)
{
    return rl && key ? rl->ops->when(rl, key) : 0;
}

void ckube_rate_limiter_forget(ckube_rate_limiter *rl, const char *key)
{
    if (rl && key)
        rl->ops->forget(rl, key);
}

int ckube_rate_limiter_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    return rl && key ? rl->ops->num_requeues(rl, key) : 0;
}

void ckube_rate_limiter_free(ckube_rate_limiter *rl)
{
    if (rl)
        rl->ops->free(rl);
}

/* ---- per-key failure counts (shared by exponential and fast/slow) ---- */

typedef struct fail_entry {
    uint64_t failures;
    char key[];
} fail_entry;

typedef struct fail_counts {
    pthread_mutex_t mu;
    wq_table table;
} fail_counts;

static void fail_counts_init(fail_counts *fc)
{
    pthread_mutex_init(&fc->mu, NULL);
    memset(&fc->table, 0, sizeof(fc->table));
}

static void fail_counts_destroy(fail_counts *fc)
{
    for (size_t i = 0; i < fc->table.cap; i++)
        if (fc->table.slots[i].key)
            free(fc->table.slots[i].val);
    wq_table_destroy(&fc->table);
    pthread_mutex_destroy(&fc->mu);
}

/* Returns the key's failure count before this call and increments it
 * (saturating). When memory runs out the count cannot be remembered;
 * the key is then treated as failing for the first time. */
static uint64_t fail_counts_bump(fail_counts *fc, const char *key)
{
    size_t len = strlen(key);
    uint64_t h = wq_hash(key, len);
    pthread_mutex_lock(&fc->mu);
    fail_entry *e = wq_table_get(&fc->table, key, h);
    if (!e) {
        e = malloc(sizeof(*e) + len + 1);
        if (e) {
            e->failures = 0;
            memcpy(e->key, key, len + 1);
            if (wq_table_insert(&fc->table, e->key, h, e) != 0) {
                free(e);
                e = NULL;
            }
        }
    }
    uint64_t before = 0;
    if (e) {
        before = e->failures;
        if (e->failures < UINT64_MAX)
            e->failures++;
    }
    pthread_mutex_unlock(&fc->mu);
    return before;
}

static void fail_counts_forget(fail_counts *fc, const char *key)
{
    uint64_t h = wq_hash(key, strlen(key));
    pthread_mutex_lock(&fc->mu);
    free(wq_table_remove(&fc->table, key, h));
    pthread_mutex_unlock(&fc->mu);
}

static int fail_counts_get(fail_counts *fc, const char *key)
{
    uint64_t h = wq_hash(key, strlen(key));
    pthread_mutex_lock(&fc->mu);
    fail_entry *e = wq_table_get(&fc->table, key, h);
    uint64_t n = e ? e->failures : 0;
    pthread_mutex_unlock(&fc->mu);
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* ---- exponential ---- */

typedef struct exp_limiter {
    ckube_rate_limiter base;
    uint64_t base_ns, max_ns;
    fail_counts fc;
} exp_limiter;

static uint64_t exp_when(ckube_rate_limiter *rl, const char *key)
{
    exp_limiter *l = (exp_limiter *)rl;
    uint64_t n = fail_counts_bump(&l->fc, key);
    if (l->base_ns == 0)
        return 0;
    /* base << n without overflow: beyond 64 bits it is certainly > max. */
    if (n >= 64 || l->base_ns > (UINT64_MAX >> n))
        return l->max_ns;
    uint64_t d = l->base_ns << n;
    return d > l->max_ns ? l->max_ns : d;
}

static void exp_forget(ckube_rate_limiter *rl, const char *key)
{
    fail_counts_forget(&((exp_limiter *)rl)->fc, key);
}

static int exp_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    return fail_counts_get(&((exp_limiter *)rl)->fc, key);
}

static void exp_free(ckube_rate_limiter *rl)
{
    exp_limiter *l = (exp_limiter *)rl;
    fail_counts_destroy(&l->fc);
    free(l);
}

static const ckube_rate_limiter_ops exp_ops = {exp_when, exp_forget, exp_num_requeues, exp_free};

ckube_rate_limiter *ckube_rate_limiter_exponential(uint64_t base_ns, uint64_t max_ns)
{
    exp_limiter *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->base.ops = &exp_ops;
    l->base_ns = base_ns;
    l->max_ns = max_ns;
    fail_counts_init(&l->fc);
    return &l->base;
}

/* ---- fast then slow ---- */

typedef struct fast_slow_limiter {
    ckube_rate_limiter base;
    uint64_t fast_ns, slow_ns;
    int max_fast;
    fail_counts fc;
} fast_slow_limiter;

static uint64_t fs_when(ckube_rate_limiter *rl, const char *key)
{
    fast_slow_limiter *l = (fast_slow_limiter *)rl;
    uint64_t attempt = fail_counts_bump(&l->fc, key) + 1; /* counting this one */
    return l->max_fast > 0 && attempt <= (uint64_t)l->max_fast ? l->fast_ns : l->slow_ns;
}

static void fs_forget(ckube_rate_limiter *rl, const char *key)
{
    fail_counts_forget(&((fast_slow_limiter *)rl)->fc, key);
}

static int fs_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    return fail_counts_get(&((fast_slow_limiter *)rl)->fc, key);
}

static void fs_free(ckube_rate_limiter *rl)
{
    fast_slow_limiter *l = (fast_slow_limiter *)rl;
    fail_counts_destroy(&l->fc);
    free(l);
}

static const ckube_rate_limiter_ops fs_ops = {fs_when, fs_forget, fs_num_requeues, fs_free};

ckube_rate_limiter *ckube_rate_limiter_fast_slow(uint64_t fast_ns, uint64_t slow_ns,
                                                 int max_fast_attempts)
{
    fast_slow_limiter *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->base.ops = &fs_ops;
    l->fast_ns = fast_ns;
    l->slow_ns = slow_ns;
    l->max_fast = max_fast_attempts;
    fail_counts_init(&l->fc);
    return &l->base;
}

/* ---- token bucket ---- */

typedef struct bucket_limiter {
    ckube_rate_limiter base;
    ckube_clock *clock;
    pthread_mutex_t mu;
    bool unlimited;
    uint64_t interval_ns; /* time to earn one token */
    uint64_t burst_ns;    /* burst * interval: how far tat may run ahead for free */
    /* Theoretical arrival time: when the bucket would be full again if no
     * more tokens were taken. tokens(now) = burst - (tat - now)/interval,
     * negative once reservations run ahead of the refill. */
    uint64_t tat;
} bucket_limiter;

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t bucket_when(ckube_rate_limiter *rl, const char *key)
{
    (void)key;
    bucket_limiter *l = (bucket_limiter *)rl;
    if (l->unlimited)
        return 0;
    pthread_mutex_lock(&l->mu);
    uint64_t now = ckube_clock_now(l->clock);
    /* Take a token: tat moves one interval past max(tat, now). The wait
     * is how long until that token would have been earned, i.e. until
     * the debt (tat - now) fits in the burst again. */
    l->tat = sat_add(l->tat > now ? l->tat : now, l->interval_ns);
    uint64_t ahead = l->tat - now;
    uint64_t wait = ahead > l->burst_ns ? ahead - l->burst_ns : 0;
    pthread_mutex_unlock(&l->mu);
    return wait;
}

static void bucket_forget(ckube_rate_limiter *rl, const char *key)
{
    (void)rl;
    (void)key;
}

static int bucket_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    (void)rl;
    (void)key;
    return 0;
}

static void bucket_free(ckube_rate_limiter *rl)
{
    bucket_limiter *l = (bucket_limiter *)rl;
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static const ckube_rate_limiter_ops bucket_ops = {bucket_when, bucket_forget, bucket_num_requeues,
                                                  bucket_free};

ckube_rate_limiter *ckube_rate_limiter_bucket(ckube_clock *clock, double qps, int burst)
{
    if (!(qps > 0) || burst < 1)
        return NULL;
    bucket_limiter *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->base.ops = &bucket_ops;
    l->clock = ckube_clock_or_real(clock);
    pthread_mutex_init(&l->mu, NULL);
    double interval = 1e9 / qps;
    if (isinf(qps) || interval < 1) {
        l->unlimited = true;
    } else {
        l->interval_ns = interval >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(interval);
        /* burst * interval, saturating. */
        l->burst_ns = l->interval_ns > UINT64_MAX / (uint64_t)burst
                          ? UINT64_MAX
                          : l->interval_ns * (uint64_t)burst;
    }
    /* tat = 0 (<= now): the bucket starts full. */
    return &l->base;
}

/* ---- max of ---- */

typedef struct max_of_limiter {
    ckube_rate_limiter base;
    size_t n;
    ckube_rate_limiter **subs;
} max_of_limiter;

static uint64_t max_when(ckube_rate_limiter *rl, const char *key)
{
    max_of_limiter *l = (max_of_limiter *)rl;
    uint64_t best = 0;
    for (size_t i = 0; i < l->n; i++) {
        uint64_t d = ckube_rate_limiter_when(l->subs[i], key);
        if (d > best)
            best = d;
    }
    return best;
}

static void max_forget(ckube_rate_limiter *rl, const char *key)
{
    max_of_limiter *l = (max_of_limiter *)rl;
    for (size_t i = 0; i < l->n; i++)
        ckube_rate_limiter_forget(l->subs[i], key);
}

static int max_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    max_of_limiter *l = (max_of_limiter *)rl;
    int best = 0;
    for (size_t i = 0; i < l->n; i++) {
        int n = ckube_rate_limiter_num_requeues(l->subs[i], key);
        if (n > best)
            best = n;
    }
    return best;
}

static void max_free(ckube_rate_limiter *rl)
{
    max_of_limiter *l = (max_of_limiter *)rl;
    for (size_t i = 0; i < l->n; i++)
        ckube_rate_limiter_free(l->subs[i]);
    free(l->subs);
    free(l);
}

static const ckube_rate_limiter_ops max_ops = {max_when, max_forget, max_num_requeues, max_free};

ckube_rate_limiter *ckube_rate_limiter_max_of(ckube_rate_limiter *const *limiters, size_t n)
{
    bool ok = limiters && n > 0;
    for (size_t i = 0; ok && i < n; i++)
        ok = limiters[i] != NULL;
    max_of_limiter *l = ok ? calloc(1, sizeof(*l)) : NULL;
    ckube_rate_limiter **subs = l ? malloc(n * sizeof(*subs)) : NULL;
    if (!subs) {
        free(l);
        for (size_t i = 0; limiters && i < n; i++)
            ckube_rate_limiter_free(limiters[i]);
        return NULL;
    }
    memcpy(subs, limiters, n * sizeof(*subs));
    l->base.ops = &max_ops;
    l->n = n;
    l->subs = subs;
    return &l->base;
}

/* ---- with max wait ---- */

typedef struct max_wait_limiter {
    ckube_rate_limiter base;
    ckube_rate_limiter *inner;
    uint64_t max_ns;
} max_wait_limiter;

static uint64_t mw_when(ckube_rate_limiter *rl, const char *key)
{
    max_wait_limiter *l = (max_wait_limiter *)rl;
    uint64_t d = ckube_rate_limiter_when(l->inner, key);
    return d > l->max_ns ? l->max_ns : d;
}

static void mw_forget(ckube_rate_limiter *rl, const char *key)
{
    ckube_rate_limiter_forget(((max_wait_limiter *)rl)->inner, key);
}

static int mw_num_requeues(ckube_rate_limiter *rl, const char *key)
{
    return ckube_rate_limiter_num_requeues(((max_wait_limiter *)rl)->inner, key);
}

static void mw_free(ckube_rate_limiter *rl)
{
    max_wait_limiter *l = (max_wait_limiter *)rl;
    ckube_rate_limiter_free(l->inner);
    free(l);
}

static const ckube_rate_limiter_ops mw_ops = {mw_when, mw_forget, mw_num_requeues, mw_free};

ckube_rate_limiter *ckube_rate_limiter_with_max_wait(ckube_rate_limiter *inner,
                                                     uint64_t max_wait_ns)
{
    if (!inner)
        return NULL;
    max_wait_limiter *l = calloc(1, sizeof(*l));
    if (!l) {
        ckube_rate_limiter_free(inner);
        return NULL;
    }
    l->base.ops = &mw_ops;
    l->inner = inner;
    l->max_ns = max_wait_ns;
    return &l->base;
}

/* ---- the controller default ---- */

ckube_rate_limiter *ckube_rate_limiter_default_controller(ckube_clock *clock)
{
    ckube_rate_limiter *subs[2] = {
        ckube_rate_limiter_exponential(CKUBE_MS(5), CKUBE_SEC(1000)),
        ckube_rate_limiter_bucket(clock, 10, 100),
    };
    if (!subs[0] || !subs[1]) {
        ckube_rate_limiter_free(subs[0]);
        ckube_rate_limiter_free(subs[1]);
        return NULL;
    }
    return ckube_rate_limiter_max_of(subs, 2);
}
