/* fresh.h - waiting for the watch cache to reach a revision.
 *
 * With one server on its own store the cache is never behind a write the
 * server acknowledged (storage.h's ordering). When several servers share
 * one store (etcd), another server's write reaches this cache only when
 * this server's watch delivers it. kube-apiserver 1.31 then serves a read
 * that must be current (resourceVersion unset) from its cache only after
 * asking etcd for its current revision and waiting for the cache to reach
 * it (ConsistentListFromCache), and a read at resourceVersion=N after
 * waiting for N; both give up after 3 s with 504 "Too large resource
 * version". This module is those waits.
 *
 * One thread per cacher: it asks the storage for its current revision once
 * for all the waiters that arrived while the previous question was out
 * (so a burst of reads costs one round trip to etcd, not one each), then
 * wakes each waiter when the cache reaches its revision or its time runs
 * out. The cacher pokes it after every applied batch.
 *
 * Threading: fresh_wait and fresh_poke from any thread; callbacks run on
 * the module's thread, never from inside fresh_wait.
 */
#ifndef CKUBE_CACHER_FRESH_H
#define CKUBE_CACHER_FRESH_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/storage.h"

typedef struct fresh fresh;

/* How a wait ended (the callback's rc). */
enum {
    FRESH_OK = 0,          /* the cache has reached the revision */
    FRESH_TIMEOUT = 1,     /* it has not, in the time given */
    FRESH_UNAVAILABLE = 2, /* the storage could not tell its revision */
    FRESH_CLOSED = 3,      /* the cacher is going away */
};

/* want: the revision waited for; have: the cache's revision at the end. */
typedef void (*fresh_fn)(void *arg, int rc, int64_t want, int64_t have);

/* Reads the cache's current revision (the cacher's, under its lock). */
typedef int64_t (*fresh_rev_fn)(void *ctx);

/* Starts the thread. st and rev_ctx are borrowed until fresh_free. NULL if
 * no thread could be started. */
fresh *fresh_new(storage *st, fresh_rev_fn rev, void *rev_ctx);

/* Waits for the cache to reach `rev`, or, with rev < 0, the storage's
 * current revision asked after this call. fn(arg, ...) is called exactly
 * once, on the module's thread, within about timeout_ms (a storage that
 * takes longer to answer the question delays it). */
void fresh_wait(fresh *f, int64_t rev, int timeout_ms, fresh_fn fn, void *arg);

/* The cache's revision may have moved: wakes the thread if anybody waits.
 * Cheap when nobody does (one atomic load). */
void fresh_poke(fresh *f);

/* Ends every wait with FRESH_CLOSED, joins the thread, frees. NULL-safe. */
void fresh_free(fresh *f);

#endif
