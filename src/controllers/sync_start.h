/* sync_start.h - starting a controller once its caches have synced,
 * without blocking the caller: a manager runnable's start must return at
 * once, while ckube_controller_start blocks until the informers sync. A
 * thread of its own waits (on the controller's clock, looking every
 * 50 ms, so a stop is answered quickly), then starts the workers.
 *
 * Used by the built-in controllers that sit on a ckube_controller. Not
 * thread-safe by itself: start and stop come from the runnable's owner
 * (the manager), one at a time. */
#ifndef CKUBE_CONTROLLERS_SYNC_START_H
#define CKUBE_CONTROLLERS_SYNC_START_H

#include <ckube/clock.h>
#include <ckube/controller.h>
#include <ckube/informer.h>

#include <pthread.h>
#include <stdbool.h>

#define SYNC_START_MAX_INFORMERS 4

typedef struct sync_start {
    ckube_controller *ctl;                                /* borrowed */
    ckube_shared_informer *inf[SYNC_START_MAX_INFORMERS]; /* borrowed */
    int ninf;
    ckube_clock *clock; /* borrowed */
    const char *name;   /* static: "namespace", for logs */
    const char *thread; /* static: the waiting thread's name (top -H, gdb) */

    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stopping; /* guarded by mu */
    bool running;  /* a thread was started and not yet joined */
    pthread_t tid;
} sync_start;

/* Sets s up for `ctl` and up to SYNC_START_MAX_INFORMERS informers (the
 * rest are ignored). */
void sync_start_init(sync_start *s, ckube_controller *ctl, ckube_shared_informer *const *inf,
                     int ninf, ckube_clock *clock, const char *name, const char *thread);
/* Starts the waiting thread: 0, or -1 when already started or the
 * thread cannot start. */
int sync_start_run(sync_start *s);
/* Ends the wait (if still waiting), joins the thread, then stops the
 * controller (running reconciles finish). Idempotent. */
void sync_start_stop(sync_start *s);
/* Stops, then releases the lock and condition. */
void sync_start_destroy(sync_start *s);

#endif
