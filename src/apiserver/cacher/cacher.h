/* cacher.h - the in-memory watch cache every read is served from.
 *
 * The cacher lists the whole store once at start-up, then follows the
 * storage's watch. It keeps:
 *  - per resource (a "bucket", identified by its storage key prefix such as
 *    "/registry/core/configmaps/"): every live object in a key-ordered tree,
 *    and a bounded ring of recent events for resuming watches;
 *  - one global revision: the newest revision whose events are all applied.
 *
 * Objects are kept serialized (`struct cobj`): the exact JSON bytes served
 * to clients, with metadata.resourceVersion set, plus the few parsed fields
 * selectors need (namespace, name, labels, selectable fields). They are
 * immutable and reference counted, so a list response or a watch event can
 * point at the bytes without copying (each object is encoded once). The
 * strings and arrays a cobj points at live inside its own allocation(s):
 * read them, never free or modify them; cobj_unref releases everything.
 *
 * Stored values in the canonical compact form ckube writes (see jscan.h)
 * become cobjs without a JSON tree: resourceVersion is spliced into the
 * bytes and labels/fields are read by a scanner. Anything else is decoded
 * and re-encoded with jansson; both give the same bytes.
 *
 * Locking: one rwlock. Readers (get, list, watch collection) take it
 * shared; the storage watch thread takes it exclusively only to link
 * already-decoded objects in, so readers are never blocked by JSON work.
 */
#ifndef CKUBE_APISERVER_CACHER_H
#define CKUBE_APISERVER_CACHER_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* libbsd's tree.h marks generated static functions __unused, which glibc
 * does not define. */
#ifndef __unused
#define __unused __attribute__((unused))
#endif
#include <sys/tree.h>

#include "apiserver/cacher/fresh.h"
#include "ckube/selector.h"
#include "storage/storage.h"

typedef struct cobj cobj;
struct cobj {
    atomic_int refs;
    RB_ENTRY(cobj) node; /* bucket tree link; owned by the cacher's lock */
    char *key;           /* full storage key */
    const char *ns;      /* into nsname: "" for cluster-scoped */
    const char *name;    /* into nsname */
    char *nsname;
    char *json; /* the object as served; NUL-terminated, len bytes */
    size_t len;
    int64_t rev; /* metadata.resourceVersion */
    int64_t create_rev;
    char **labels; /* key0, value0, key1, value1, ...; sorted by key */
    size_t nlabels;
    char **fields; /* selectable fields: name0, value0, ... */
    size_t nfields;
};

cobj *cobj_ref(cobj *o);
void cobj_unref(cobj *o);

/* Where cached objects' blocks come from, for the whole process: malloc
 * and free unless set. The blocks are the server's long-lived memory, one
 * per object, of every size; the rest of its allocations are short-lived.
 * A server whose malloc is built for the short-lived ones (mimalloc:
 * cmd/allocator.h) gives the blocks to one that packs them (glibc's, whose
 * chunks grow by 16 bytes where mimalloc's size classes leave 12 % of
 * RSS unused at a million objects). alloc returns NULL only when out of
 * memory; release takes what alloc returned, from any thread. Call once,
 * before any cacher exists; not thread-safe. */
void cacher_set_object_allocator(void *(*alloc)(size_t), void (*release)(void *));
/* Label/field lookups for ckube_selector_matches; ctx is a cobj. */
const char *cobj_label(void *ctx, const char *key);
const char *cobj_field(void *ctx, const char *key);
/* A copy of o (key, names, revisions) serving other bytes (copied; len
 * of them): an object converted for a reader. It has no labels or
 * fields (filters ran on o). New reference. */
cobj *cobj_with_json(const cobj *o, const char *json, size_t len);
/* Parses o->json (new reference; NULL only on allocation failure). */
json_t *cobj_decode(const cobj *o);

typedef enum { CEV_ADDED = 1, CEV_MODIFIED, CEV_DELETED } cevent_type;

/* A watch filter: namespace ("" or NULL = all), label and field selectors
 * (borrowed; may be NULL). */
typedef struct cfilter {
    const char *ns;
    const char *name; /* a single object's name, or NULL/"" for all */
    const ckube_selector *labels;
    const ckube_selector *fields;
} cfilter;

bool cfilter_matches(const cfilter *f, const cobj *o);

/* A collected event for one watcher, after selector translation: `obj` is
 * the object to send (a reference the receiver must drop). */
typedef struct cevent_out {
    cevent_type type;
    cobj *obj;
} cevent_out;

typedef struct cacher cacher;

/* Configures a bucket's selectable fields before cacher_start (the array
 * must outlive the cacher): field name and the dot path it reads. A
 * bucket configured again (two types kept in one storage) extracts the
 * union; a name it has already keeps its first path. */
typedef struct cacher_field {
    const char *field;
    const char *path;
} cacher_field;

/* Creates the cacher over `st` (borrowed; must outlive the cacher). */
cacher *cacher_new(storage *st, size_t ring_capacity);
void cacher_configure_bucket(cacher *c, const char *prefix, const cacher_field *fields);
/* Lists the store, then watches it. Returns 0 or a STORAGE_ERR_*. */
int cacher_start(cacher *c);
void cacher_free(cacher *c);

/* Sets a function the cacher calls (on the storage thread, lock not held)
 * after each applied batch, e.g. to wake HTTP loops for watchers. */
void cacher_set_notify(cacher *c, void (*fn)(void *arg), void *arg);
/* And one called for every applied event of a bucket whose prefix starts
 * with `prefix_filter`, used for in-process reactions (CRD registration). */
typedef void (*cacher_event_fn)(void *arg, cevent_type type, const cobj *obj);
void cacher_add_listener(cacher *c, const char *prefix_filter, cacher_event_fn fn, void *arg);
/* As cacher_add_listener, for changes only: the objects cacher_start
 * loads are not replayed to it as ADDED. For a listener of a wide prefix
 * that only reacts to some changes (CRD finalization waits for
 * deletions under "/registry/"): a replay would visit every stored
 * object at start, a million of them at scale. */
void cacher_add_change_listener(cacher *c, const char *prefix_filter, cacher_event_fn fn,
                                void *arg);

int64_t cacher_rev(cacher *c);

/* Waits for the cache to reach revision `rev`, or with rev < 0 the
 * storage's current revision (a consistent read's), when the storage is
 * shared with other servers (fresh.h says why). Returns true when there is
 * nothing to wait for: an unshared storage (the cache is never behind a
 * write acknowledged to anybody) or a revision already reached; fn is then
 * not called. Otherwise fn(arg, FRESH_*, want, have) is called once, later,
 * on a cacher thread, within about timeout_ms. */
bool cacher_wait(cacher *c, int64_t rev, int timeout_ms, fresh_fn fn, void *arg);
/* Whether reads may have to wait (a shared storage, once started). */
bool cacher_shared(cacher *c);

/* Returns a reference to the object at `key`, or NULL. */
cobj *cacher_get(cacher *c, const char *key);

/* Snapshot of objects under `prefix` (a bucket prefix, optionally followed
 * by "ns/") with key > after_key (NULL = from the start) matching `f`, in
 * key order, at most `limit` (0 = no limit). Returns an array of references
 * (free with cacher_objs_free), its length in *n, the revision of the
 * snapshot in *rev, and in *more the number of matching objects left after
 * the last one (for remainingItemCount / continue). */
cobj **cacher_list(cacher *c, const char *prefix, const char *after_key, const cfilter *f,
                   size_t limit, size_t *n, int64_t *rev, size_t *more);
/* The same at an earlier revision at_rev (0 or the current revision: now),
 * as a paginated list's later pages need it: the live objects, with every
 * key changed since at_rev put back as it was then (from the ring of
 * events). *rev is at_rev. Returns 0 with *objs as cacher_list's, or -1
 * when the ring no longer reaches back to at_rev (*oldest: the oldest
 * revision it serves; upstream answers 410 Expired). */
int cacher_list_at(cacher *c, const char *prefix, const char *after_key, const cfilter *f,
                   size_t limit, int64_t at_rev, cobj ***objs, size_t *n, int64_t *rev,
                   size_t *more, int64_t *oldest);
void cacher_objs_free(cobj **objs, size_t n);

/* Count of objects under a prefix (any filter-less prefix). */
size_t cacher_count(cacher *c, const char *prefix);

/* Watch support. A watcher is owned by its caller (the HTTP layer); the
 * cacher only reads its fields under its lock. */
typedef struct cwatch {
    char *bucket; /* bucket prefix */
    cfilter filter;
    int64_t rev; /* newest revision delivered */
} cwatch;

/* Starts a watch at `from_rev`. If from_rev is 0 the current matching
 * objects are returned in *initial (references, ADDED) and w->rev is set
 * to the snapshot revision. Else checks that events after from_rev are
 * still in the ring: returns -1 with *oldest set when they are not (410).
 * Returns 0 on success. */
int cacher_watch_begin(cacher *c, cwatch *w, int64_t from_rev, cevent_out **initial,
                       size_t *ninitial, int64_t *oldest);

/* Collects events after w->rev that the filter selects, translated as
 * upstream does (an object that starts matching is ADDED, one that stops
 * matching is DELETED). Advances w->rev to the newest applied revision.
 * Returns 0, or -1 if the watcher fell out of the ring (410). *out is an
 * array (free with cacher_events_free) of *n events. */
int cacher_watch_collect(cacher *c, cwatch *w, cevent_out **out, size_t *n);
void cacher_events_free(cevent_out *evs, size_t n);

/* Statistics for metrics and benchmarks. */
typedef struct cacher_stats {
    size_t objects;
    size_t bytes; /* JSON bytes of live objects */
    size_t buckets;
} cacher_stats;
void cacher_get_stats(cacher *c, cacher_stats *out);

#endif
