/* clock.c - real and fake monotonic clocks (see ckube/clock.h). */
#include <ckube/clock.h>
#include <ckube/json.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A fake clock wakes its deadline waiters by polling: a waiter sleeps at
 * most this long in real time before re-reading the fake time. Polling
 * keeps the fake free of any knowledge of the waiters' mutexes (which
 * would invert lock order with advance()), and 1 ms is invisible in
 * tests. */
#define FAKE_POLL_NS 1000000ull

struct ckube_clock {
    bool fake;
    pthread_mutex_t mu; /* fake only: guards now and waiters */
    uint64_t now;
    size_t waiters;
};

static ckube_clock real_clock = {.fake = false};

ckube_clock *ckube_clock_real(void) { return &real_clock; }

ckube_clock *ckube_clock_or_real(ckube_clock *c) { return c ? c : &real_clock; }

uint64_t ckube_clock_now(ckube_clock *c)
{
    c = ckube_clock_or_real(c);
    if (!c->fake)
        return ckube_monotonic_ns();
    pthread_mutex_lock(&c->mu);
    uint64_t t = c->now;
    pthread_mutex_unlock(&c->mu);
    return t;
}

void ckube_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

static struct timespec ns_to_timespec(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    return ts;
}

static void fake_waiters_add(ckube_clock *c, int delta)
{
    pthread_mutex_lock(&c->mu);
    c->waiters = (size_t)((long)c->waiters + delta);
    pthread_mutex_unlock(&c->mu);
}

int ckube_clock_cond_wait(ckube_clock *c, pthread_cond_t *cond, pthread_mutex_t *mu,
                          uint64_t deadline_ns)
{
    c = ckube_clock_or_real(c);
    if (!c->fake) {
        if (deadline_ns == 0)
            return pthread_cond_wait(cond, mu);
        if (ckube_monotonic_ns() >= deadline_ns)
            return ETIMEDOUT;
        struct timespec ts = ns_to_timespec(deadline_ns);
        int rc = pthread_cond_timedwait(cond, mu, &ts);
        return rc == ETIMEDOUT ? ETIMEDOUT : 0;
    }
    if (deadline_ns == 0)
        return pthread_cond_wait(cond, mu);
    if (ckube_clock_now(c) >= deadline_ns)
        return ETIMEDOUT;
    fake_waiters_add(c, 1);
    struct timespec ts = ns_to_timespec(ckube_monotonic_ns() + FAKE_POLL_NS);
    pthread_cond_timedwait(cond, mu, &ts);
    fake_waiters_add(c, -1);
    return ckube_clock_now(c) >= deadline_ns ? ETIMEDOUT : 0;
}

void ckube_clock_sleep(ckube_clock *c, uint64_t ns)
{
    c = ckube_clock_or_real(c);
    uint64_t deadline = ckube_clock_now(c) + ns;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond;
    ckube_cond_init(&cond);
    pthread_mutex_lock(&mu);
    while (ckube_clock_cond_wait(c, &cond, &mu, deadline) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cond);
}

ckube_clock *ckube_fake_clock_new(uint64_t start_ns)
{
    ckube_clock *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fake = true;
    c->now = start_ns;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void ckube_fake_clock_set(ckube_clock *c, uint64_t now_ns)
{
    if (!c || !c->fake)
        return;
    pthread_mutex_lock(&c->mu);
    c->now = now_ns;
    pthread_mutex_unlock(&c->mu);
}

void ckube_fake_clock_advance(ckube_clock *c, uint64_t ns)
{
    if (!c || !c->fake)
        return;
    pthread_mutex_lock(&c->mu);
    c->now += ns;
    pthread_mutex_unlock(&c->mu);
}

size_t ckube_fake_clock_waiters(ckube_clock *c)
{
    if (!c || !c->fake)
        return 0;
    pthread_mutex_lock(&c->mu);
    size_t n = c->waiters;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void ckube_fake_clock_free(ckube_clock *c)
{
    if (!c || !c->fake)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

uint64_t ckube_parse_duration(const char *s)
{
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    if (!s || !*s)
        return 0;
    double total = 0;
    bool first = true;
    for (const char *p = s; *p; first = false) {
        if (*p < '0' || *p > '9') /* no sign, no space, no "inf" */
            if (*p != '.')
                return 0;
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p)
            return 0;
        p = end;
        if (!*p && first) {
            total = v * 1e9; /* the whole string is a number: seconds */
            break;
        }
        double mult = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && !mult; i++) {
            size_t n = strlen(units[i].unit);
            bool is_ms = p[0] == 'm' && p[1] == 's'; /* "m" must not take "ms" */
            if (strncmp(p, units[i].unit, n) == 0 && !(n == 1 && is_ms)) {
                mult = units[i].ns;
                p += n;
            }
        }
        if (!mult)
            return 0;
        total += v * mult;
    }
    return total < 1 || total >= 1.8e19 ? 0 : (uint64_t)total;
}
