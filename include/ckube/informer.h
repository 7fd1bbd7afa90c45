/* ckube/informer.h - informers: list-watch, reflector, DeltaFIFO, indexed
 * store, listers, shared informers and the shared informer factory.
 *
 * The C counterpart of client-go's tools/cache and informers packages.
 * The data path of one informer:
 *
 *   list-watch --> reflector --> DeltaFIFO --> (pop) --> store + handlers
 *
 * - A ckube_list_watch lists and watches one kind of object (a vtable, so
 *   tests and unusual sources can plug in their own; ckube/fake.h has an
 *   in-memory one).
 * - A ckube_reflector lists, then watches from the list's resourceVersion,
 *   and pushes what it sees into a sink (normally a DeltaFIFO). It relists
 *   after 410 Gone/Expired, backs off on errors and survives anything the
 *   server does.
 * - A ckube_delta_fifo queues, per object key, the changes (deltas) not yet
 *   processed, and after a relist turns objects that vanished into
 *   "deleted, final state unknown" tombstones.
 * - A ckube_store is the thread-safe indexed cache the informer keeps.
 * - A ckube_shared_informer ties these together and calls any number of
 *   event handlers, each on its own thread.
 * - A ckube_informer_factory hands out one shared informer per
 *   (resource, namespace) so every controller shares one watch.
 *
 * Objects are jansson values. Objects held by a store are SHARED and
 * READ-ONLY: whoever receives one (a handler argument, a lister result)
 * may json_incref it to keep it, and must never modify it (copy with
 * json_deep_copy first). Set CKUBE_CACHE_MUTATION_DETECTOR=true to have
 * every store check this (and every informer check what it hands to
 * handlers) and abort on a violation.
 *
 * Memory: an informer's cache does not keep jansson trees. It keeps each
 * object as its JSON text in one block (about the size of the JSON; the
 * REST client's lists and watch events are decoded straight into it) and
 * builds a tree when one is asked for: each handler notification gets
 * one (shared by all handlers of that notification), and a lister or
 * store read gets the tree cached for that object, which every reader
 * shares while anyone uses it; cached trees nobody holds and nobody read
 * for a while (10 s to 20 s) are dropped again. So the same object read
 * twice is the same pointer while it is cached, but not necessarily after
 * that; compare objects by content (or resourceVersion), not by pointer.
 * Objects put into a store through the json_t calls (ckube_store_put,
 * ckube_store_replace) are kept as given. Decoding accepts duplicate
 * object keys (the last wins, as Go's decoder does).
 *
 * Time: everything that waits (backoff, resync, cache-sync timeouts) uses
 * a ckube_clock (ckube/clock.h), so tests can drive it with a fake clock.
 *
 * Errors: functions returning int return 0 (or a documented positive
 * value) on success and -1 on failure; constructors return NULL on
 * allocation failure or bad arguments.
 */
#ifndef CKUBE_INFORMER_H
#define CKUBE_INFORMER_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/selector.h>
#include <ckube/status.h>
#include <ckube/typed.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Shared objects
 * ====================================================================== */

/* json_incref / json_decref for objects shared between threads (every
 * cache object). Same effect, but every access to the count is atomic:
 * jansson's inline versions read it with a plain load first, which is a
 * data race (reported by ThreadSanitizer) when another thread changes the
 * count at the same time. The library uses these on cached objects; use
 * them in handlers and listers' callers that run under TSan. NULL-safe;
 * ckube_obj_ref returns obj. */
json_t *ckube_obj_ref(json_t *obj);
void ckube_obj_unref(json_t *obj);

/* ======================================================================
 * Keys
 * ====================================================================== */

/* The cache key of an object: "namespace/name", or "name" for an object
 * without a namespace (client-go's MetaNamespaceKeyFunc). Returns a
 * malloc'd string (caller frees), or NULL when obj has no metadata.name. */
char *ckube_meta_namespace_key(const json_t *obj);

/* Splits a key made by ckube_meta_namespace_key. *ns (NULL for a key
 * without '/') and *name are malloc'd (caller frees both). Returns -1 on
 * a malformed key (more than one '/', empty name) or allocation failure. */
int ckube_split_meta_namespace_key(const char *key, char **ns, char **name);

/* ======================================================================
 * Result lists
 * ====================================================================== */

/* An array of objects returned by stores and listers. Every item is a new
 * reference owned by the list. Free with ckube_obj_list_free (which
 * decrefs every item and frees the array; the struct itself is the
 * caller's, typically on the stack). */
typedef struct ckube_obj_list {
    json_t **items;
    size_t n;
} ckube_obj_list;
void ckube_obj_list_free(ckube_obj_list *l);

/* An array of malloc'd strings owned by the list; free with
 * ckube_key_list_free. */
typedef struct ckube_key_list {
    char **keys;
    size_t n;
} ckube_key_list;
void ckube_key_list_free(ckube_key_list *l);

/* ======================================================================
 * List-watch: where a reflector gets its objects
 * ====================================================================== */

/* The operations of a list-watch. `ctx` is the ckube_list_watch's ctx.
 * Every call except watch_stop is made from one thread at a time (the
 * reflector's); watch_stop may be called from any thread while another
 * thread is blocked in watch_next on the same stream.
 *
 * Objects returned (the list, watch event objects) are new references the
 * caller owns and MAY MODIFY (they must not be shared with anything else,
 * e.g. a cache inside the list-watch). */
typedef struct ckube_list_watch_ops {
    /* One list call (one page when opts->limit is set). *list is the List
     * object: items, metadata.resourceVersion, metadata.continue. On
     * failure returns -1 with *err (caller frees). */
    int (*list)(void *ctx, const ckube_list_opts *opts, json_t **list, ckube_status **err);
    /* Opens a watch; *stream is an opaque handle. On failure (e.g. 410
     * when opts->resource_version is too old) returns -1 with *err. */
    int (*watch_open)(void *ctx, const ckube_list_opts *opts, void **stream, ckube_status **err);
    /* Same contract as ckube_watch_next: 1 with *type and *obj (new
     * reference), 0 when the stream ended cleanly or was stopped, -1 with
     * *err on a transport or decoding error; after 0 or -1 every further
     * call returns 0. */
    int (*watch_next)(void *ctx, void *stream, ckube_watch_event_type *type, json_t **obj,
                      ckube_status **err);
    /* Makes a blocked (or the next) watch_next return 0 promptly.
     * Thread-safe; may be called any number of times until watch_close. */
    void (*watch_stop)(void *ctx, void *stream);
    /* Stops if needed and frees the stream. Not concurrently with
     * watch_next or watch_stop on the same stream. */
    void (*watch_close)(void *ctx, void *stream);
    /* Frees ctx (called by ckube_list_watch_free); may be NULL. */
    void (*free)(void *ctx);
} ckube_list_watch_ops;

typedef struct ckube_list_watch ckube_list_watch;

/* Wraps user operations. `ops` is borrowed (normally a static const
 * struct) and must outlive the list-watch; `ctx` is owned from now on
 * (ops->free(ctx) runs in ckube_list_watch_free). `description` names
 * the resource in log lines (e.g. "networks.samplecrd.k8s.io") and is
 * copied; NULL = "objects". Returns NULL on allocation failure (ctx is
 * then freed too). */
ckube_list_watch *ckube_list_watch_new(const ckube_list_watch_ops *ops, void *ctx,
                                       const char *description);
/* A list-watch over the REST client: lists and watches `gvr` in `ns`
 * (NULL = all namespaces, or cluster-scoped) with the given selectors
 * (NULL = none) added to every call. Every string and the gvr are copied;
 * the client is borrowed and must outlive the list-watch. The description
 * is "<resource>" or "<resource>.<group>". */
ckube_list_watch *ckube_list_watch_new_client(ckube_client *c, const ckube_gvr *gvr, const char *ns,
                                              const char *label_selector,
                                              const char *field_selector);
/* The description (borrowed; valid for the list-watch's lifetime). */
const char *ckube_list_watch_description(const ckube_list_watch *lw);
/* Thin wrappers over the ops (same contracts). */
int ckube_list_watch_list(ckube_list_watch *lw, const ckube_list_opts *opts, json_t **list,
                          ckube_status **err);
int ckube_list_watch_watch_open(ckube_list_watch *lw, const ckube_list_opts *opts, void **stream,
                                ckube_status **err);
int ckube_list_watch_watch_next(ckube_list_watch *lw, void *stream, ckube_watch_event_type *type,
                                json_t **obj, ckube_status **err);
void ckube_list_watch_watch_stop(ckube_list_watch *lw, void *stream);
void ckube_list_watch_watch_close(ckube_list_watch *lw, void *stream);
/* Frees the list-watch and its ctx. NULL-safe. Every stream must be
 * closed first. */
void ckube_list_watch_free(ckube_list_watch *lw);

/* ======================================================================
 * Thread-safe indexed store
 * ====================================================================== */

typedef struct ckube_store ckube_store;

/* The name of the index every store has: objects by metadata.namespace
 * (cluster-scoped objects are indexed under ""). */
#define CKUBE_INDEX_NAMESPACE "namespace"

/* Index functions emit the index values of an object with
 * ckube_index_values_add (which copies the value; duplicates are
 * ignored). `obj` is borrowed and read-only. An index function must be
 * pure (same object, same values) and must not call into the store. */
typedef struct ckube_index_values ckube_index_values;
int ckube_index_values_add(ckube_index_values *out, const char *value);
typedef void (*ckube_index_fn)(void *ud, const json_t *obj, ckube_index_values *out);

/* An index definition. `name` is copied by whoever takes the struct;
 * `ud` is borrowed and must outlive the store. */
typedef struct ckube_indexer {
    const char *name;
    ckube_index_fn fn;
    void *ud;
} ckube_indexer;

typedef struct ckube_store_opts {
    const char *name;      /* for log lines (copied); NULL = "store" */
    bool detect_mutations; /* force the mutation detector on (else from
                              $CKUBE_CACHE_MUTATION_DETECTOR == "true") */
} ckube_store_opts;

/* Every store function is thread-safe (a readers-writer lock inside).
 * `opts` may be NULL. Free with ckube_store_free. */
ckube_store *ckube_store_new(const ckube_store_opts *opts);
void ckube_store_free(ckube_store *s);

/* Adds an index and builds it over the current contents. Returns -1 with
 * *err (malloc'd message, caller frees; err may be NULL) when the name is
 * taken or empty or fn is NULL. */
int ckube_store_add_indexer(ckube_store *s, const ckube_indexer *ix, char **err);

/* Inserts or replaces the object under its key. The store takes a new
 * reference (the caller keeps its own). When `old` is not NULL it receives
 * the replaced object (a reference the caller must decref) or NULL.
 * Returns -1 when obj has no name. */
int ckube_store_put(ckube_store *s, json_t *obj, json_t **old);
/* Removes the object with that key. *old (may be NULL) receives the
 * removed object (caller decrefs) or NULL. Returns 1 when removed, 0 when
 * absent. */
int ckube_store_delete_key(ckube_store *s, const char *key, json_t **old);
/* Replaces the whole contents with the objects of a JSON array (borrowed;
 * the store takes references). Objects without a name are skipped. */
int ckube_store_replace(ckube_store *s, json_t *items);

/* A new reference to the object under `key`, or NULL. */
json_t *ckube_store_get(ckube_store *s, const char *key);
bool ckube_store_has(ckube_store *s, const char *key);
/* Every object, sorted by key (new references). Returns -1 on allocation
 * failure (out is then empty). */
int ckube_store_list(ckube_store *s, ckube_obj_list *out);
int ckube_store_list_keys(ckube_store *s, ckube_key_list *out);
/* Objects whose index `index` has the value `value`, sorted by key. Returns
 * -1 when there is no such index. */
int ckube_store_by_index(ckube_store *s, const char *index, const char *value, ckube_obj_list *out);
int ckube_store_index_keys(ckube_store *s, const char *index, const char *value,
                           ckube_key_list *out);
/* Every value index `index` currently has (sorted). */
int ckube_store_index_values(ckube_store *s, const char *index, ckube_key_list *out);

/* Memory accounting: the number of objects, and the approximate heap
 * bytes the store holds for them (each object's compact block, each tree
 * it holds, cached or put, as jansson allocates it, plus the store's own
 * key and index entries). Cheap (kept up to date on every change). */
size_t ckube_store_len(ckube_store *s);
size_t ckube_store_bytes(ckube_store *s);
/* The estimate ckube_store_bytes uses for one JSON value (for callers
 * that want to account objects the same way). */
size_t ckube_json_heap_bytes(const json_t *v);

/* Mutation detector: true when this store keeps pristine copies. The
 * check compares every cached object with its copy and, on a difference,
 * logs `cache mutation detected: ...` naming the object and abort()s.
 * Runs on every store change automatically; call it yourself at other
 * points (the shared informer also runs it on stop). No-op when off. */
bool ckube_store_detects_mutations(ckube_store *s);
void ckube_store_check_mutations(ckube_store *s);

/* ======================================================================
 * Listers: read-only queries on a store by namespace / name / selector
 * ====================================================================== */

/* A lister is a view of a store (borrowed: valid while the store is). */
typedef struct ckube_lister {
    ckube_store *store;
} ckube_lister;

/* The object ns/name (ns NULL or "" for cluster-scoped), as a new
 * reference, or NULL when absent. */
json_t *ckube_lister_get(const ckube_lister *l, const char *ns, const char *name);
/* Objects in namespace `ns` (NULL = every namespace) whose labels match
 * `sel` (NULL = everything), sorted by key, as new references. */
int ckube_lister_list(const ckube_lister *l, const char *ns, const ckube_selector *sel,
                      ckube_obj_list *out);
/* Objects whose index `index` has `value`. -1 when no such index. */
int ckube_lister_by_index(const ckube_lister *l, const char *index, const char *value,
                          ckube_obj_list *out);

/* The same reads as ckube_objects (declared below): nothing is decoded
 * until asked (ckube_object_json, or ckube_object_typed for code that
 * ckube-gen wrote, whose decoding is kept with the cached object and
 * shared by every reader of that version). New references: release with
 * ckube_object_unref / ckube_object_list_free. NULL (get) when absent;
 * -1 (lists) when out of memory or no such index. */
typedef struct ckube_object ckube_object;
ckube_object *ckube_lister_get_object(const ckube_lister *l, const char *ns, const char *name);
int ckube_lister_list_objects(const ckube_lister *l, const char *ns, const ckube_selector *sel,
                              ckube_object ***out, size_t *n);
int ckube_lister_by_index_objects(const ckube_lister *l, const char *index, const char *value,
                                  ckube_object ***out, size_t *n);
/* Releases n objects and the array. NULL-safe. */
void ckube_object_list_free(ckube_object **v, size_t n);

/* ======================================================================
 * DeltaFIFO
 * ====================================================================== */

typedef enum ckube_delta_type {
    CKUBE_DELTA_ADDED = 1,
    CKUBE_DELTA_UPDATED,
    CKUBE_DELTA_DELETED,
    CKUBE_DELTA_REPLACED, /* the object was in a relist */
    CKUBE_DELTA_SYNC,     /* a periodic resync of a cached object */
} ckube_delta_type;

const char *ckube_delta_type_name(ckube_delta_type t); /* "Added", ... */

/* One change. `obj` is a reference owned by the FIFO (borrowed by the
 * process callback). For a DELETED delta with final_state_unknown set the
 * object was missing from a relist: obj is the last state known (may be
 * NULL when nothing was known), the deletion itself was not seen. */
typedef struct ckube_delta {
    ckube_delta_type type;
    json_t *obj;
    bool final_state_unknown;
} ckube_delta;

typedef struct ckube_delta_fifo ckube_delta_fifo;

/* `known` (borrowed, may be NULL) is the store of objects already
 * processed (the informer's cache): Replace finds deletions and Resync
 * finds objects through it. `clock` (NULL = real) times pop deadlines.
 * Every function is thread-safe. */
ckube_delta_fifo *ckube_delta_fifo_new(ckube_store *known, ckube_clock *clock);
/* Frees the FIFO and every queued delta. Not while a pop is running. */
void ckube_delta_fifo_free(ckube_delta_fifo *f);

/* Queue a delta for obj (the FIFO takes a new reference). Return -1 when
 * obj has no name. Delete of an object neither queued nor known is
 * ignored (returns 0). Two consecutive deletions of a key collapse into
 * one (the one that is not a tombstone wins). */
int ckube_delta_fifo_add(ckube_delta_fifo *f, json_t *obj);
int ckube_delta_fifo_update(ckube_delta_fifo *f, json_t *obj);
int ckube_delta_fifo_delete(ckube_delta_fifo *f, json_t *obj);
/* After a (re)list: queues REPLACED for every object of `items` (a JSON
 * array, borrowed) and a final-state-unknown DELETED for every key that
 * is queued or known but not in the list. The first replace marks the
 * FIFO populated: it has synced once that many keys have been popped.
 * `resource_version` is informational (may be NULL). */
int ckube_delta_fifo_replace(ckube_delta_fifo *f, json_t *items, const char *resource_version);
/* Queues SYNC (with the known object) for every known key that has
 * nothing queued. No-op without a known store. */
int ckube_delta_fifo_resync(ckube_delta_fifo *f);

/* Called by pop with the key (borrowed), its deltas oldest first
 * (borrowed; take references to keep objects) and whether the key was
 * part of the initial list. Runs with the FIFO locked (so has_synced,
 * replace and resync observe either none or all of its effects): it must
 * not call back into this FIFO. Deltas are never requeued. */
typedef void (*ckube_delta_process_fn)(void *ud, const char *key, const ckube_delta *deltas,
                                       size_t n, bool is_in_initial_list);
/* Waits until a key is queued, removes it with all its deltas and calls
 * `process`. Returns 1 after processing, 0 when the clock reached
 * `deadline_ns` first (0 = no deadline), -1 once the FIFO is closed
 * (pending keys are then left queued and freed with the FIFO). */
int ckube_delta_fifo_pop(ckube_delta_fifo *f, uint64_t deadline_ns, ckube_delta_process_fn process,
                         void *ud);
/* Wakes every pop (they return -1 from now on). */
void ckube_delta_fifo_close(ckube_delta_fifo *f);
/* True once the first replace happened (or any add/update/delete) and
 * every key it queued has been popped and processed. */
bool ckube_delta_fifo_has_synced(ckube_delta_fifo *f);
/* Number of keys queued. */
size_t ckube_delta_fifo_len(ckube_delta_fifo *f);
/* The queued keys in pop order (malloc'd copies). */
int ckube_delta_fifo_list_keys(ckube_delta_fifo *f, ckube_key_list *out);

/* ======================================================================
 * Reflector
 * ====================================================================== */

/* Where a reflector delivers what it sees. Objects are borrowed for the
 * call; the sink takes references to keep them (and must not modify
 * them). Calls come from the reflector's thread only. Return -1 on
 * failure (logged; the reflector carries on). */
typedef struct ckube_reflector_sink {
    int (*replace)(void *ctx, json_t *items, const char *resource_version);
    int (*add)(void *ctx, json_t *obj);
    int (*update)(void *ctx, json_t *obj);
    int (*remove)(void *ctx, json_t *obj);
    void *ctx; /* borrowed */
} ckube_reflector_sink;

/* A sink that feeds a DeltaFIFO (borrowed: it must outlive the use). */
ckube_reflector_sink ckube_delta_fifo_sink(ckube_delta_fifo *f);

/* Exponential backoff: initial, doubled per failure up to max, plus a
 * random jitter of up to jitter*delay, and back to initial when no
 * backoff was needed for `reset`. Zero fields take the defaults (client-
 * go's): 800 ms, 30 s, 2 min, jitter 1.0. A negative jitter means none. */
typedef struct ckube_backoff_opts {
    uint64_t initial_ns;
    uint64_t max_ns;
    uint64_t reset_ns;
    double jitter;
} ckube_backoff_opts;

typedef struct ckube_reflector_opts {
    const char *name;         /* log prefix (copied); NULL = lw description */
    ckube_clock *clock;       /* NULL = real clock; borrowed */
    bool keep_managed_fields; /* default: strip metadata.managedFields */
    /* Keep only apiVersion, kind and metadata of each object (client-go's
     * metadata informers): for controllers that never read spec or
     * status, e.g. a garbage collector watching every resource. Lists and
     * watches ask the server for PartialObjectMetadata, so objects come
     * with kind "PartialObjectMetadata" and apiVersion "meta.k8s.io/v1"
     * (as in client-go); from a server that sends whole objects instead,
     * the object's own kind and apiVersion are kept. */
    bool metadata_only;
    int64_t page_size; /* list page size; 0 = 500 */
    /* Sync with a streaming list (client-go's WatchList, the default of
     * client-go 1.35): one watch with sendInitialEvents=true instead of a
     * list and a watch. A server that refuses it (4xx) is listed instead
     * from then on. Off by default. */
    bool use_watch_list;
    ckube_backoff_opts backoff;
    /* watch timeoutSeconds is drawn uniformly from [min, max]; 0 = 300 and
     * 600. */
    int64_t min_watch_timeout_s, max_watch_timeout_s;
} ckube_reflector_opts;

typedef struct ckube_reflector ckube_reflector;

/* Creates a reflector. `lw` is borrowed (must outlive the reflector);
 * `sink` is copied (its ctx borrowed). `opts` may be NULL.
 *
 * Behaviour (client-go's Reflector):
 *  - list with resourceVersion "0" (limit = page size; continue tokens are
 *    followed when the server pages), then watch from the list's
 *    resourceVersion with allowWatchBookmarks and a random timeoutSeconds;
 *  - a cleanly closed watch is re-opened from the last resourceVersion
 *    without a relist (after a backoff if it ended within 1 s without a
 *    single event, so a server that closes at once is not hammered);
 *  - bookmarks only advance the resourceVersion;
 *  - 410 Gone/Expired (on open, as an ERROR event, or on a list) makes
 *    the next list use resourceVersion "" (a consistent list, paged);
 *  - retriable watch errors (transport, 429, 5xx) re-open the watch from
 *    the last resourceVersion after a backoff; other failures relist after
 *    a backoff; every relist after the first waits one backoff step;
 *  - a 429 waits the server's Retry-After instead when it gave one;
 *  - list failures are logged at error severity as
 *    "failed to list <resource>: <message>" and retried forever. */
ckube_reflector *ckube_reflector_new(ckube_list_watch *lw, ckube_reflector_sink sink,
                                     const ckube_reflector_opts *opts);
/* Runs the loop on a new thread. Returns -1 when already started or the
 * thread cannot be created. */
int ckube_reflector_start(ckube_reflector *r);
/* Stops the open watch and any backoff wait and joins the thread. An
 * in-flight list call cannot be interrupted (the list-watch API has no
 * cancel), so stop waits for it. Thread-safe, idempotent. */
void ckube_reflector_stop(ckube_reflector *r);
/* Stops and frees. NULL-safe. */
void ckube_reflector_free(ckube_reflector *r);
/* The resourceVersion of the last list, event or bookmark processed
 * (malloc'd copy, caller frees), or NULL before the first list. */
char *ckube_reflector_last_sync_resource_version(ckube_reflector *r);

/* ======================================================================
 * Shared informer
 * ====================================================================== */

/* An object of a notification, as the cache holds it: immutable, shared
 * by every handler of that notification, and borrowed for the callback
 * (ckube_object_ref to keep it longer). Its key, namespace, name,
 * resourceVersion and generation are read without decoding anything;
 * ckube_object_json decodes the object into a jansson tree the first
 * time any handler asks (one tree per notification). A handler that
 * only maps objects to keys, as most controllers' handlers do, never
 * pays for a tree. All functions are thread-safe. */
/* "namespace/name" or "name" (ckube_meta_namespace_key's); "" when the
 * object has no name. Borrowed from o. */
const char *ckube_object_key(const ckube_object *o);
/* metadata.namespace, NULL for a cluster-scoped object. Borrowed. */
const char *ckube_object_namespace(const ckube_object *o);
/* metadata.name, NULL when the object has none. Borrowed. */
const char *ckube_object_name(const ckube_object *o);
/* metadata.resourceVersion, NULL when none. Borrowed. */
const char *ckube_object_resource_version(const ckube_object *o);
/* metadata.generation; 0 when absent or not an integer. */
int64_t ckube_object_generation(const ckube_object *o);
/* The object as a jansson tree, built on first use and then shared
 * (borrowed from o, read-only like every cache object; ckube_obj_ref to
 * keep it beyond o). NULL only when out of memory. */
const json_t *ckube_object_json(const ckube_object *o);
/* The object decoded as kind t (ckube/typed.h; what ckube-gen's
 * PKG_..._of() calls): built the first time any reader asks and then
 * kept with the cached object, so every handler and lister read of this
 * version shares one decoding. Borrowed from o and READ-ONLY like every
 * cache object (copy it with its _copy() to change it). NULL with *err
 * (may be NULL) when the object does not decode as t, or was decoded as
 * another kind already. */
const ckube_typed *ckube_object_typed(const ckube_object *o, const ckube_type_info *t,
                                     ckube_status **err);
/* A new reference to o (returned) / releases one. NULL-safe. */
ckube_object *ckube_object_ref(const ckube_object *o);
void ckube_object_unref(ckube_object *o);

/* Event callbacks. Every object argument is borrowed for the call and
 * read-only; json_incref (or ckube_object_ref) it to keep it. A
 * handler's callbacks run on that handler's own thread, one at a time,
 * in event order. Any callback may be NULL.
 *  - on_add: is_in_initial_list is true for objects of the first list and
 *    for the existing contents replayed to a handler added after start;
 *  - on_update: old and new; on a resync both are the same object;
 *  - on_delete: obj is the final state, or, when tombstone_key is not
 *    NULL, the last state known of an object that disappeared while the
 *    watch was down (client-go's DeletedFinalStateUnknown).
 * Each event has two forms: the json_t one, and the ckube_object one
 * (on_*_object), which decodes nothing unless the callback asks. When
 * both are set for an event, only the ckube_object one is called. */
typedef struct ckube_event_handler {
    void (*on_add)(void *ud, const json_t *obj, bool is_in_initial_list);
    void (*on_update)(void *ud, const json_t *old_obj, const json_t *new_obj);
    void (*on_delete)(void *ud, const json_t *obj, const char *tombstone_key);
    void *ud; /* borrowed; must outlive the registration */
    void (*on_add_object)(void *ud, const ckube_object *obj, bool is_in_initial_list);
    void (*on_update_object)(void *ud, const ckube_object *old_obj, const ckube_object *new_obj);
    void (*on_delete_object)(void *ud, const ckube_object *obj, const char *tombstone_key);
} ckube_event_handler;

typedef struct ckube_shared_informer ckube_shared_informer;
/* A handler registration, owned by the informer (valid until removed or
 * the informer is freed). */
typedef struct ckube_handler_reg ckube_handler_reg;

/* The minimum resync period of a handler; shorter (non-zero) ones are
 * raised to it. */
#define CKUBE_MIN_RESYNC_NS CKUBE_SEC(1)

/* A transform (client-go's SetTransform, controller-runtime's
 * cache.Options.DefaultTransform): called with every object before the
 * informer queues and caches it (listed, added, updated and deleted
 * ones), one call at a time: on the reflector's thread, or, for the
 * objects of a list past its first MiB, on the thread that builds them
 * while the reflector decodes the rest. It may change `obj` (owned by the
 * call) in place, typically to drop what the program never reads (large
 * annotations, data) so the cache holds less. It must keep
 * metadata.name, metadata.namespace and metadata.resourceVersion, and
 * must be idempotent: a relist hands the same objects again. Returns 0;
 * non-zero refuses the object (logged), as client-go's transform error:
 * a refused watch event is dropped, a refusal during a list fails the
 * list, which the reflector retries after its backoff. */
typedef int (*ckube_transform_fn)(json_t *obj, void *ud);

typedef struct ckube_informer_opts {
    const char *name;              /* for logs (copied); NULL = lw description */
    uint64_t resync_ns;            /* default resync of handlers; 0 = none */
    ckube_clock *clock;            /* NULL = real clock; borrowed */
    const ckube_indexer *indexers; /* added before start (copied) */
    size_t nindexers;
    bool keep_managed_fields; /* default: strip metadata.managedFields */
    bool metadata_only;       /* as ckube_reflector_opts.metadata_only */
    bool detect_mutations;    /* force the store's mutation detector on */
    ckube_transform_fn transform; /* NULL: objects are cached as they come */
    void *transform_ud;           /* passed to transform (borrowed) */
    bool use_watch_list;          /* as ckube_reflector_opts.use_watch_list */
    /* Advanced: reflector tuning (zero = defaults). */
    int64_t page_size;
    ckube_backoff_opts backoff;
    int64_t min_watch_timeout_s, max_watch_timeout_s;
} ckube_informer_opts;

/* Creates an informer over `lw`, which it owns from now on (freed by
 * ckube_shared_informer_free, or here on failure). `opts` may be NULL.
 * Returns NULL on failure (e.g. an invalid or duplicate indexer). */
ckube_shared_informer *ckube_shared_informer_new(ckube_list_watch *lw,
                                                 const ckube_informer_opts *opts);

/* Adds a handler with the informer's default resync period (or `resync_ns`;
 * 0 = never). Resync replays the cache to this handler as on_update(obj,
 * obj) every period, with no server call. If the informer is running the
 * handler first receives the current contents as on_add(obj, true).
 * Thread-safe; returns NULL after stop or on allocation failure. */
ckube_handler_reg *ckube_shared_informer_add_handler(ckube_shared_informer *inf,
                                                     const ckube_event_handler *h);
ckube_handler_reg *ckube_shared_informer_add_handler_with_resync(ckube_shared_informer *inf,
                                                                 const ckube_event_handler *h,
                                                                 uint64_t resync_ns);
/* Removes a handler: stops its thread (a callback in progress finishes;
 * queued events are dropped) and frees reg. Must not be called from that
 * handler's own callback (returns -1). Thread-safe. */
int ckube_shared_informer_remove_handler(ckube_shared_informer *inf, ckube_handler_reg *reg);
/* True once the informer has synced and this handler has been called for
 * every object of the initial list (or of the replay when added late). */
bool ckube_handler_reg_has_synced(ckube_handler_reg *reg);

/* Adds an index to the store (any time; built over the current contents).
 * *err as ckube_store_add_indexer. */
int ckube_shared_informer_add_indexer(ckube_shared_informer *inf, const ckube_indexer *ix,
                                      char **err);

/* Starts the reflector, the delta processing thread and every handler's
 * thread. Returns -1 when already started or stopped (an informer cannot
 * be restarted) or a thread cannot be created. Thread-safe. */
int ckube_shared_informer_start(ckube_shared_informer *inf);
/* Stops every thread and joins them (pending handler events are dropped;
 * running callbacks finish first), then runs the mutation check.
 * Idempotent, thread-safe; must not be called from a handler callback. */
void ckube_shared_informer_stop(ckube_shared_informer *inf);
/* Stops (if needed) and frees everything, including the list-watch.
 * NULL-safe. */
void ckube_shared_informer_free(ckube_shared_informer *inf);

bool ckube_shared_informer_is_started(ckube_shared_informer *inf);
/* True once the initial list has been delivered to the store. */
bool ckube_shared_informer_has_synced(ckube_shared_informer *inf);
/* Waits until every informer has synced. `timeout_ns` is measured on each
 * informer's clock (0 = no timeout). Returns false on timeout, or when an
 * informer stops (or was never started) before syncing. */
bool ckube_wait_for_cache_sync(ckube_shared_informer *const *informers, size_t n,
                               uint64_t timeout_ns);
/* The last resourceVersion the reflector synced (malloc'd copy, caller
 * frees), or NULL before the first list. */
char *ckube_shared_informer_last_sync_resource_version(ckube_shared_informer *inf);

/* The informer's store (borrowed; valid until free). Read it freely;
 * never write to it: the informer is its only writer. */
ckube_store *ckube_shared_informer_store(ckube_shared_informer *inf);
ckube_lister ckube_shared_informer_lister(ckube_shared_informer *inf);
/* Memory accounting of the cache (ckube_store_len / ckube_store_bytes). */
size_t ckube_shared_informer_object_count(ckube_shared_informer *inf);
size_t ckube_shared_informer_bytes(ckube_shared_informer *inf);
/* The name used in logs (borrowed). */
const char *ckube_shared_informer_name(ckube_shared_informer *inf);

/* ======================================================================
 * Metrics: per-informer cache size, exported to a Prometheus registry
 * ====================================================================== */

/* Exports, at every scrape of `reg` (NULL = ckube_metrics_default()),
 *   ckube_informer_objects{informer="<name>"}  objects in the cache
 *   ckube_informer_bytes{informer="<name>"}    heap bytes they hold
 *   ckube_informer_synced{informer="<name>"}   1 once synced, else 0
 * for `inf` (borrowed). Returns a handle to pass to
 * ckube_informer_metrics_unregister before the informer is freed, or NULL
 * when out of memory. The registry is declared in ckube/metrics.h. */
struct ckube_metrics_registry;
typedef struct ckube_informer_metrics ckube_informer_metrics;
ckube_informer_metrics *ckube_informer_metrics_register(struct ckube_metrics_registry *reg,
                                                        ckube_shared_informer *inf);
/* Stops exporting (the last values stay in the registry) and frees the
 * handle. NULL-safe. */
void ckube_informer_metrics_unregister(ckube_informer_metrics *m);

/* ======================================================================
 * Shared informer factory
 * ====================================================================== */

typedef struct ckube_informer_factory ckube_informer_factory;

/* Builds the list-watch of an informer; the default is
 * ckube_list_watch_new_client. `gvr` and the strings are borrowed for the
 * call. */
typedef ckube_list_watch *(*ckube_list_watch_builder)(void *ud, ckube_client *c,
                                                      const ckube_gvr *gvr, const char *ns,
                                                      const char *label_selector,
                                                      const char *field_selector);

typedef struct ckube_informer_factory_opts {
    uint64_t default_resync_ns; /* handlers' default resync; 0 = none */
    const char *namespace_;     /* NULL = all namespaces (copied) */
    const char *label_selector; /* added to every list/watch (copied) */
    const char *field_selector; /* (copied) */
    ckube_clock *clock;         /* NULL = real; borrowed */
    bool keep_managed_fields;
    ckube_transform_fn transform; /* every informer's (controller-runtime's
                                     DefaultTransform); NULL = none */
    void *transform_ud;           /* borrowed */
    bool use_watch_list;          /* every informer's: ckube_reflector_opts' */
    ckube_list_watch_builder new_list_watch; /* NULL = the REST client */
    void *new_list_watch_ud;                 /* borrowed */
} ckube_informer_factory_opts;

/* `c` is borrowed (must outlive the factory; may be NULL only with a
 * custom new_list_watch). `opts` may be NULL. Thread-safe throughout. */
ckube_informer_factory *ckube_informer_factory_new(ckube_client *c,
                                                   const ckube_informer_factory_opts *opts);
/* The one shared informer of gvr in the factory's namespace (created on
 * first use; borrowed, owned by the factory). NULL on failure or after
 * shutdown. */
ckube_shared_informer *ckube_informer_factory_for(ckube_informer_factory *f, const ckube_gvr *gvr);
/* Same for an explicit namespace (NULL = all namespaces). */
ckube_shared_informer *ckube_informer_factory_for_namespace(ckube_informer_factory *f,
                                                            const ckube_gvr *gvr, const char *ns);
/* Starts every informer not yet started; call again after adding more.
 * Returns -1 if one failed to start. */
int ckube_informer_factory_start(ckube_informer_factory *f);
/* ckube_wait_for_cache_sync over every started informer. */
bool ckube_informer_factory_wait_for_cache_sync(ckube_informer_factory *f, uint64_t timeout_ns);
/* Without waiting: true when every started informer has synced. */
bool ckube_informer_factory_has_synced(ckube_informer_factory *f);
/* Stops and joins every informer; `for` returns NULL afterwards. */
void ckube_informer_factory_shutdown(ckube_informer_factory *f);
/* Shuts down and frees every informer. NULL-safe. */
void ckube_informer_factory_free(ckube_informer_factory *f);

#ifdef __cplusplus
}
#endif
#endif
