/* The client-side token bucket (client-go's flowcontrol.NewTokenBucketRateLimiter):
 * `burst` tokens at most, refilled at `qps` per second; every request takes
 * one. A caller that finds no token reserves the next one (the count goes
 * negative) and sleeps until it is due, so waiting callers are served in
 * arrival order and no one spins. */
#include "client/client_internal.h"

#include "ckube/json.h"

void ckube__ratelimit_init(ckube__ratelimit *rl, double qps, int burst, bool disabled)
{
    pthread_mutex_init(&rl->mu, NULL);
    rl->disabled = disabled || qps <= 0 || burst < 1;
    rl->qps = qps;
    rl->burst = burst;
    rl->tokens = burst; /* a new client may send a burst at once */
    rl->last_ns = ckube_monotonic_ns();
}

void ckube__ratelimit_destroy(ckube__ratelimit *rl)
{
    pthread_mutex_destroy(&rl->mu);
}

uint64_t ckube__ratelimit_reserve(ckube__ratelimit *rl)
{
    if (rl->disabled)
        return 0;
    pthread_mutex_lock(&rl->mu);
    uint64_t now = ckube_monotonic_ns();
    double elapsed = (double)(now - rl->last_ns) / 1e9;
    rl->last_ns = now;
    rl->tokens += elapsed * rl->qps;
    if (rl->tokens > rl->burst)
        rl->tokens = rl->burst;
    rl->tokens -= 1;
    double wait_s = rl->tokens >= 0 ? 0 : -rl->tokens / rl->qps;
    pthread_mutex_unlock(&rl->mu);
    return (uint64_t)(wait_s * 1e9);
}
