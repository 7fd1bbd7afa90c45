/* meet_util.h - a meeting point for the tests of servers that run
 * handlers on several threads: each handler call arrives and waits until
 * `want` calls have arrived (proof that they run at once), the gate is
 * opened, or `wait_ms` pass. Static inline, for tests that include
 * <cmocka.h> first: each test is its own program. */
#ifndef CKUBE_TEST_MEET_UTIL_H
#define CKUBE_TEST_MEET_UTIL_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

/* Counts under mu; read them without it only after the threads that
 * arrive are joined. */
typedef struct tu_meet {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int want, wait_ms;
    int arrived, at_once, max_at_once;
    bool open;
} tu_meet;

static inline void tu_meet_init(tu_meet *m, int want, int wait_ms)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->want = want;
    m->wait_ms = wait_ms;
}

static inline void tu_meet_free(tu_meet *m)
{
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
}

/* Lets every call waiting, and every call to come, go on. */
static inline void tu_meet_open(tu_meet *m)
{
    pthread_mutex_lock(&m->mu);
    m->open = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* A thread's body: opens the gate of the tu_meet `arg` after 200 ms, so a
 * test can block in a call that waits for the handlers and still have
 * them let go. */
static inline void *tu_meet_open_later(void *arg)
{
    poll(NULL, 0, 200);
    tu_meet_open(arg);
    return NULL;
}

/* *count (a field of m) under its lock. */
static inline int tu_meet_read(tu_meet *m, const int *count)
{
    pthread_mutex_lock(&m->mu);
    int n = *count;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* Arrives and waits. Returns the calls arrived when it went on; *alone
 * (may be NULL) says it waited in vain (neither company nor the gate). */
static inline int tu_meet_wait(tu_meet *m, bool *alone)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += m->wait_ms / 1000;
    until.tv_nsec += (long)(m->wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    m->arrived++;
    if (++m->at_once > m->max_at_once)
        m->max_at_once = m->at_once;
    pthread_cond_broadcast(&m->cv);
    int rc = 0;
    while (!m->open && m->arrived < m->want && rc == 0)
        rc = pthread_cond_timedwait(&m->cv, &m->mu, &until);
    int seen = m->arrived;
    if (alone)
        *alone = !m->open && m->arrived < m->want;
    m->at_once--;
    pthread_mutex_unlock(&m->mu);
    return seen;
}

#endif
