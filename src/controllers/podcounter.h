/* podcounter.h - the pod counter controller (internal to the
 * controller-manager; built only on libckube's public API).
 *
 * Every period (10 s by default, first run at once once the caches have
 * synced) it counts the pods in the pods informer's cache, writes the
 * count to the label ckube.io/pod-count of every node labelled
 * node-role.kubernetes.io/control-plane or node-role.kubernetes.io/master
 * (a merge patch, only when the value differs), and records the Normal
 * event "pod count is N" (reason SuccessCalculatePod) on every pod.
 * Runs on "non-sliding" ticks: a run starts every period after the
 * previous run's start, however long the run took (a run overrunning the
 * period is followed at once by the next).
 */
#ifndef CKUBE_CONTROLLERS_PODCOUNTER_H
#define CKUBE_CONTROLLERS_PODCOUNTER_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/events.h>
#include <ckube/informer.h>

#include <stdint.h>

#define PODCOUNTER_LABEL "ckube.io/pod-count"
#define PODCOUNTER_REASON "SuccessCalculatePod"

typedef struct podcounter podcounter;

typedef struct podcounter_opts {
    uint64_t period_ns; /* 0 = 10 s */
    ckube_clock *clock; /* ticks; NULL = real; borrowed */
} podcounter_opts;

/* Builds the controller. `c` (node writes), `f` (its pods and nodes
 * informers are created in it now) and `rec` (may be NULL: no events) are
 * borrowed and must outlive the controller. `o` may be NULL. Returns NULL
 * when an informer cannot be had (factory shut down) or out of memory. */
podcounter *podcounter_new(ckube_client *c, ckube_informer_factory *f, ckube_event_recorder *rec,
                           const podcounter_opts *o);
/* Starts the factory's informers that are not running yet (as the
 * article's factory.Start) and the controller's thread, which waits for
 * the two caches to sync before the first run. Non-blocking. Returns -1
 * when already started or the thread cannot be created. */
int podcounter_start(podcounter *p);
/* Stops the thread (a run in progress finishes first) and joins it.
 * Idempotent. */
void podcounter_stop(podcounter *p);
/* Stops and frees. NULL-safe. */
void podcounter_free(podcounter *p);

/* For tests and status: completed runs, and the count of the last one
 * (-1 before the first). */
uint64_t podcounter_runs(podcounter *p);
long podcounter_last_count(podcounter *p);

#endif
