/* ckube/clock.h - the runtime's time source: the real monotonic clock, or
 * a fake one that tests move by hand.
 *
 * Everything in libckube that waits or measures time (workqueue delays,
 * rate limiters, reflector backoff, resync periods, leader election) takes
 * a ckube_clock, so tests can check timing deterministically: with a fake
 * clock, time stands still until ckube_fake_clock_advance().
 *
 * Times are nanoseconds on a monotonic scale (not wall-clock time).
 */
#ifndef CKUBE_CLOCK_H
#define CKUBE_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_clock ckube_clock;

#define CKUBE_MS(n) ((uint64_t)(n) * 1000000ull)
#define CKUBE_SEC(n) ((uint64_t)(n) * 1000000000ull)

/* The process-wide real clock (CLOCK_MONOTONIC). Never freed. */
ckube_clock *ckube_clock_real(void);
/* `c` itself, or the real clock when c is NULL: lets every option struct
 * take "NULL = real clock". */
ckube_clock *ckube_clock_or_real(ckube_clock *c);

/* Now, in nanoseconds. */
uint64_t ckube_clock_now(ckube_clock *c);

/* Initialises a condition variable for ckube_clock_cond_wait (it must use
 * CLOCK_MONOTONIC for real-clock deadlines). Destroy with
 * pthread_cond_destroy. */
void ckube_cond_init(pthread_cond_t *cond);

/* With `mu` held, waits on `cond` until it is signalled or the clock
 * reaches `deadline_ns` (0 = no deadline). Returns 0 when woken (possibly
 * spuriously: callers re-check their condition in a loop) and ETIMEDOUT
 * when the deadline has passed. On a fake clock the wait also returns
 * (with 0) shortly after the fake time is advanced, so waiters notice
 * the new time. */
int ckube_clock_cond_wait(ckube_clock *c, pthread_cond_t *cond, pthread_mutex_t *mu,
                          uint64_t deadline_ns);

/* Sleeps for `ns` on the clock (a fake clock sleeps until advanced). */
void ckube_clock_sleep(ckube_clock *c, uint64_t ns);

/* A fake clock whose time starts at `start_ns` and changes only through
 * the two calls below. Free with ckube_fake_clock_free once nothing uses
 * it. */
ckube_clock *ckube_fake_clock_new(uint64_t start_ns);
void ckube_fake_clock_advance(ckube_clock *c, uint64_t ns);
void ckube_fake_clock_set(ckube_clock *c, uint64_t now_ns);
/* How many threads are blocked in a deadline wait on this fake clock right
 * now; lets a test wait until a worker is asleep before advancing. */
size_t ckube_fake_clock_waiters(ckube_clock *c);
void ckube_fake_clock_free(ckube_clock *c);

/* Parses a duration as Go's time.ParseDuration writes the common ones
 * ("30s", "500ms", "1m", "2m30s", "1.5h", also "us"/"ns") or a plain
 * number of seconds, into nanoseconds. Returns 0 on a malformed,
 * negative or zero duration. */
uint64_t ckube_parse_duration(const char *s);

#ifdef __cplusplus
}
#endif
#endif
