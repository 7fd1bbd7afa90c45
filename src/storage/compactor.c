/* Periodic storage compaction. Reads and watches are served by the cache,
 * so storage history only serves restarts and other servers sharing an
 * etcd; like kube-apiserver, every interval we compact up to the revision
 * we saw one interval ago, so history is at least one interval deep. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "storage/compactor.h"
#include "ckube/log.h"
#include "common/xalloc.h"

struct compactor {
    storage *st;
    unsigned interval_sec;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
};

static void *compactor_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-compact"); /* top -H, perf, gdb */
    compactor *c = arg;
    int64_t seen = storage_current_rev(c->st);
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += c->interval_sec;
        int rc = 0;
        while (!c->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        int64_t now = storage_current_rev(c->st);
        if (seen > storage_compacted_rev(c->st)) {
            int err = storage_compact(c->st, seen);
            if (err)
                CKUBE_WARN("compaction to revision %" PRId64 " failed: %s", seen,
                           storage_strerror(err));
            else
                CKUBE_V(2, "compacted storage history up to revision %" PRId64, seen);
        }
        seen = now;
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

compactor *compactor_start(storage *st, unsigned interval_sec)
{
    compactor *c = xcalloc(1, sizeof *c);
    c->st = st;
    c->interval_sec = interval_sec ? interval_sec : 300;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, compactor_main, c) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void compactor_stop(compactor *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}
