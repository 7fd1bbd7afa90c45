/* informer_internal.h - functions shared between the informer's own
 * source files (and the REST client's half of the informer fast path);
 * not part of the public API.
 *
 * Compact objects. An informer's cache does not keep jansson trees: each
 * object is one immutable, reference-counted block (ckube__cobj) holding
 * its JSON text (compact, without metadata.managedFields unless kept) and,
 * next to it, its cache key, namespace and resourceVersion. A jansson tree
 * is built from the text when somebody needs one (a handler callback, a
 * lister read), which keeps the cache at about the size of the objects'
 * JSON instead of about three times it. List responses and watch events
 * from the REST client are scanned straight into compact objects, without
 * building trees first. */
#ifndef CKUBE_INFORMER_INTERNAL_H
#define CKUBE_INFORMER_INTERNAL_H

#include "ckube/client.h"
#include "ckube/informer.h"
#include "ckube/scheme.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Makes the current (or next) ckube_delta_fifo_pop return 0 at once, so
 * its caller can recompute its deadline (e.g. a handler with a resync
 * period was added). Thread-safe. */
void ckube__delta_fifo_kick(ckube_delta_fifo *f);

/* ======================================================================
 * Compact objects (cobj.c)
 * ====================================================================== */

/* One object. Immutable after construction; shared by reference count
 * (atomic), so it may be handed between threads freely. Layout of data:
 * json NUL key NUL namespace NUL resourceVersion NUL. */
typedef struct ckube__cobj {
    size_t refcount;
    /* The object decoded as a typed struct, by the first reader that asked
     * (ckube_object_typed), then shared by every reader of this version;
     * freed with the block. NULL until then. (atomic) */
    ckube_typed *typed;
    int64_t generation; /* metadata.generation; 0 when absent or not an integer */
    uint32_t json_len;  /* the JSON text's bytes (without the NUL) */
    uint32_t key_len;   /* 0: the object has no metadata.name */
    uint32_t ns_len;    /* 0: no (or an empty) metadata.namespace */
    uint32_t rv_len;    /* 0: no metadata.resourceVersion */
    char data[];
} ckube__cobj;

/* What to keep of each object (the reflector's options). */
typedef struct ckube__cobj_opts {
    bool keep_managed_fields; /* else metadata.managedFields is dropped */
    bool metadata_only;       /* keep only apiVersion, kind and metadata */
} ckube__cobj_opts;

/* NULL-safe; ref returns c. */
ckube__cobj *ckube__cobj_ref(ckube__cobj *c);
void ckube__cobj_unref(ckube__cobj *c);

/* The JSON text (NUL-terminated; c->json_len bytes). */
static inline const char *ckube__cobj_json(const ckube__cobj *c)
{
    return c->data;
}
/* "namespace/name" or "name" (ckube_meta_namespace_key's), "" when the
 * object has no name. */
static inline const char *ckube__cobj_key(const ckube__cobj *c)
{
    return c->data + c->json_len + 1;
}
/* metadata.namespace ("" when none). */
static inline const char *ckube__cobj_namespace(const ckube__cobj *c)
{
    return ckube__cobj_key(c) + c->key_len + 1;
}
/* metadata.resourceVersion, NULL when none. */
static inline const char *ckube__cobj_rv(const ckube__cobj *c)
{
    return c->rv_len ? ckube__cobj_namespace(c) + c->ns_len + 1 : NULL;
}
/* Heap bytes the block takes (with malloc's overhead). */
size_t ckube__cobj_bytes(const ckube__cobj *c);

/* A new jansson tree of the object (refcount 1, the caller's), or NULL
 * when out of memory. Equal (json_equal) for every call. */
json_t *ckube__cobj_tree(const ckube__cobj *c);
/* How many trees ckube__cobj_tree has built in this process (atomic,
 * relaxed): lets tests check that a path decodes nothing. */
extern size_t ckube__cobj_trees_built;
/* metadata.labels as a new tree, or NULL when absent (or not built). */
json_t *ckube__cobj_labels(const ckube__cobj *c);

/* The compact form of a jansson object (borrowed, not modified), with
 * what `o` (may be NULL: keep everything but managedFields) drops left
 * out. NULL when obj is not an object or out of memory. */
ckube__cobj *ckube__cobj_from_json(const json_t *obj, const ckube__cobj_opts *o);

/* Parses one JSON object (any whitespace; validated as strictly as
 * ckube_json_loads does, except that a duplicate key is not an error:
 * the last one wins, as in Go's decoder). NULL with *err (malloc'd,
 * caller frees; err may be NULL) when the text is not a JSON object. */
ckube__cobj *ckube__cobj_parse(const char *buf, size_t len, const ckube__cobj_opts *o, char **err);

/* What a List response holds. Zero-initialise; ckube__clist_clear frees. */
typedef struct ckube__clist {
    ckube__cobj **items; /* references owned by the list */
    size_t n, cap;
    char *resource_version; /* metadata.resourceVersion, or NULL */
    char *continue_token;   /* metadata.continue, or NULL when empty */
    size_t skipped;         /* items that were not JSON objects */
} ckube__clist;
void ckube__clist_clear(ckube__clist *l);
/* Drops the items only (keeps the array, rv and continue). */
void ckube__clist_clear_items(ckube__clist *l);
/* Appends c (the reference moves to the list). -1 when out of memory (c
 * is then still the caller's). */
int ckube__clist_push(ckube__clist *l, ckube__cobj *c);
/* Scans a List response body. Items are APPENDED to out->items (so pages
 * accumulate); resource_version and continue_token are replaced by this
 * page's. Returns 0; -1 with *err when the text is not valid JSON (out
 * unchanged); -2 when it is JSON but not a list (no object, or "items"
 * neither an array nor null; out unchanged). */
int ckube__cobj_parse_list(const char *buf, size_t len, const ckube__cobj_opts *o,
                           ckube__clist *out, char **err);

/* The same, decoded while the response arrives: feed it the body in
 * chunks as they come (so the whole body is never held), then finish.
 * Only the unfinished object at the end of a chunk is kept between
 * chunks. feed returns 0, or -1 once the text is invalid (further feeds
 * do nothing); finish appends to `out` and returns as
 * ckube__cobj_parse_list does, with errors as "byte N: ...". reset
 * forgets everything fed (a retried request starts over). */
typedef struct ckube__clist_stream ckube__clist_stream;
ckube__clist_stream *ckube__clist_stream_new(const ckube__cobj_opts *o);
/* Hands each item to fn (borrowed for the call; fn takes a reference to
 * keep it; non-zero fails the decoding) as soon as it is decoded, instead
 * of collecting it for finish. Items handed over stay handed over, even
 * if the text turns out invalid later (or repeats "items"). */
void ckube__clist_stream_on_item(ckube__clist_stream *st, int (*fn)(void *ud, ckube__cobj *c),
                                 void *ud);
/* With on_item, items are built and handed to fn on a thread of the
 * stream's own once `bytes` of the body have been decoded (default 1
 * MiB; SIZE_MAX: never), overlapping the decoding: fn is then called on
 * that thread, still one item at a time and in order, and every item
 * decoded has been handed over when finish, reset or free returns. */
void ckube__clist_stream_builder_from(ckube__clist_stream *st, size_t bytes);
int ckube__clist_stream_feed(ckube__clist_stream *st, const char *p, size_t n);
int ckube__clist_stream_finish(ckube__clist_stream *st, ckube__clist *out, char **err);
void ckube__clist_stream_reset(ckube__clist_stream *st);
void ckube__clist_stream_free(ckube__clist_stream *st);

/* One decoded watch event: `obj` for ADDED, MODIFIED, DELETED and
 * BOOKMARK, `status` (the object as a tree) for ERROR. */
typedef struct ckube__cevent {
    ckube_watch_event_type type;
    ckube__cobj *obj; /* reference, or NULL */
    json_t *status;   /* reference, or NULL */
} ckube__cevent;
/* Decodes the text of one event ({"type": ..., "object": {...}}). 0; -1
 * with *err (malloc'd, "line L, column C: ...") when the text is not
 * valid JSON; -2 with *err (ckube_watch_next's messages) on an unknown
 * type or a missing object. */
int ckube__cobj_parse_event(const char *buf, size_t len, const ckube__cobj_opts *o,
                            ckube__cevent *ev, char **err);

/* An object in either form: a compact object, a jansson tree, or both
 * (then equal). Every informer structure holds one reference to each
 * part that is set. A tree without a compact form comes from the public
 * json_t APIs (ckube_store_put, ckube_delta_fifo_add, ...) and is kept
 * as given (same pointer). */
typedef struct ckube__obj {
    json_t *j;
    ckube__cobj *c;
} ckube__obj;

/* New references to the parts of o / releases them. */
ckube__obj ckube__obj_ref(ckube__obj o);
void ckube__obj_unref(ckube__obj o);
/* Whether the object is absent (neither part set). */
static inline bool ckube__obj_none(ckube__obj o)
{
    return !o.j && !o.c;
}
/* The cache key: borrowed from the compact form, or computed into
 * *tofree (caller frees) from the tree. NULL when the object has no
 * name (or on allocation failure). */
const char *ckube__obj_key(ckube__obj o, char **tofree);
/* metadata.resourceVersion (borrowed), NULL when none. */
const char *ckube__obj_rv(ckube__obj o);
/* A new reference to the tree: o.j, or one built from o.c. */
json_t *ckube__obj_tree(ckube__obj o);

/* A notification's object (ckube_object) holding new references to o's
 * parts, as handlers and lister reads get them; NULL when out of memory.
 * (shared_informer.c) */
ckube_object *ckube__object_new(ckube__obj o);

/* ======================================================================
 * Store internals (store.c)
 * ====================================================================== */

/* Inserts or replaces under the object's key; the store takes its own
 * references. *old (may be NULL) receives the replaced object (caller
 * unrefs; none when absent). -1 when the object has no name. */
int ckube__store_put_obj(ckube_store *s, ckube__obj o, ckube__obj *old);
/* Removes `key`; *old as above. Returns 1 when removed, 0 when absent. */
int ckube__store_delete_obj(ckube_store *s, const char *key, ckube__obj *old);
/* Calls fn(ud, key, obj) for every object, in key order, under the
 * store's read lock (key and obj are borrowed for the call; fn must not
 * call into the store). */
void ckube__store_foreach(ckube_store *s, void (*fn)(void *ud, const char *key, ckube__obj o),
                          void *ud);
/* Every object (new references), in key order. -1 on allocation failure
 * (*out NULL, *n 0). */
int ckube__store_snapshot(ckube_store *s, ckube__obj **out, size_t *n);
/* Drops cached jansson trees nobody else holds that were not handed out
 * since the previous call. Returns how many trees stay cached. */
size_t ckube__store_trim(ckube_store *s);
/* How many objects have a cached tree now. */
size_t ckube__store_cached_trees(ckube_store *s);

/* ======================================================================
 * DeltaFIFO internals (delta_fifo.c)
 * ====================================================================== */

/* A delta as the FIFO keeps it (see ckube_delta). */
typedef struct ckube__delta {
    ckube_delta_type type;
    ckube__obj obj;
    bool final_state_unknown;
} ckube__delta;

int ckube__delta_fifo_add_obj(ckube_delta_fifo *f, ckube_delta_type type, ckube__obj o);
/* ckube_delta_fifo_replace over compact objects (borrowed; the FIFO takes
 * references). */
int ckube__delta_fifo_replace_objs(ckube_delta_fifo *f, ckube__cobj *const *items, size_t n);
/* An incremental replace: the objects of a list arrive in batches while
 * it is decoded, and the consumer may pop them meanwhile (so a list is
 * decoded on one thread while another already stores it). replace_add
 * queues REPLACED deltas (the FIFO takes references); replace_end then
 * queues the deletions a one-shot replace would (queued or known keys the
 * list did not have) and, after the first list, counts what is still
 * queued for has_synced; replace_abort (a failed list) keeps what was
 * added and deletes nothing. Keys popped before the end of the first
 * replace are part of the initial list (is_in_initial_list). */
int ckube__delta_fifo_replace_begin(ckube_delta_fifo *f);
int ckube__delta_fifo_replace_add(ckube_delta_fifo *f, ckube__cobj *const *items, size_t n);
int ckube__delta_fifo_replace_end(ckube_delta_fifo *f);
void ckube__delta_fifo_replace_abort(ckube_delta_fifo *f);

typedef void (*ckube__delta_process_fn)(void *ud, const char *key, const ckube__delta *deltas,
                                        size_t n, bool is_in_initial_list);
/* What ckube__delta_fifo_pop_objs calls, all with the FIFO locked: begin,
 * process for each key taken, end (each may be NULL). */
typedef struct ckube__delta_batch {
    void (*begin)(void *ud);
    ckube__delta_process_fn process;
    void (*end)(void *ud);
    void *ud;
} ckube__delta_batch;
/* ckube_delta_fifo_pop for up to `max` keys at once (one lock hold, so
 * a consumer can hand on its work in batches), with the deltas as the
 * FIFO keeps them. Waits for the first key only. Returns how many keys
 * were processed (> 0), 0 at the deadline or on a kick, -1 once closed. */
int ckube__delta_fifo_pop_objs(ckube_delta_fifo *f, uint64_t deadline_ns, size_t max,
                               const ckube__delta_batch *b);

/* ======================================================================
 * Reflector internals (reflector.c)
 * ====================================================================== */

/* A reflector sink of compact objects (borrowed for the call, as
 * ckube_reflector_sink's). The replace_* operations are optional (all or
 * none): a sink that has them receives a list while it is decoded
 * (replace_begin, replace_add per batch of objects, then replace_end
 * after the last page, or replace_abort when the list fails), instead of
 * in one replace call at the end. */
typedef struct ckube__csink {
    int (*replace)(void *ctx, ckube__cobj *const *items, size_t n, const char *resource_version);
    int (*add)(void *ctx, ckube__cobj *obj);
    int (*update)(void *ctx, ckube__cobj *obj);
    int (*remove)(void *ctx, ckube__cobj *obj);
    int (*replace_begin)(void *ctx);
    int (*replace_add)(void *ctx, ckube__cobj *const *items, size_t n);
    int (*replace_end)(void *ctx, const char *resource_version);
    void (*replace_abort)(void *ctx);
    void *ctx;
} ckube__csink;

ckube__csink ckube__delta_fifo_csink(ckube_delta_fifo *f);

/* An informer's transform (transform.c): a sink that hands each object to
 * fn (see ckube_transform_fn) and passes the result, encoded with `co`, to
 * `inner`. name (copied) prefixes log lines. Free after the reflector
 * that uses its sink. */
typedef struct ckube__transformer ckube__transformer;
ckube__transformer *ckube__transformer_new(ckube__csink inner, ckube_transform_fn fn, void *ud,
                                           const ckube__cobj_opts *co, const char *name);
ckube__csink ckube__transformer_csink(ckube__transformer *t);
void ckube__transformer_free(ckube__transformer *t);
ckube_reflector *ckube__reflector_new_compact(ckube_list_watch *lw, ckube__csink sink,
                                              const ckube_reflector_opts *opts);

/* ======================================================================
 * List-watch internals (list_watch.c, client_list_watch.c)
 * ====================================================================== */

/* Optional operations of a list-watch that decode straight into compact
 * objects (the REST client's). Same contracts as ckube_list_watch_ops'
 * list and watch_next. */
typedef struct ckube__lw_compact_ops {
    /* With on_item, each object goes to it as soon as it is decoded
     * (borrowed for the call; non-zero fails the list) instead of into
     * out->items (rv and continue still go to out). */
    int (*list)(void *ctx, const ckube_list_opts *opts, const ckube__cobj_opts *co,
                ckube__clist *out, int (*on_item)(void *ud, ckube__cobj *c), void *item_ud,
                ckube_status **err);
    int (*watch_next)(void *ctx, void *stream, const ckube__cobj_opts *co, ckube__cevent *ev,
                      ckube_status **err);
} ckube__lw_compact_ops;

/* Gives lw compact operations (borrowed; must outlive it). */
void ckube__list_watch_set_compact(ckube_list_watch *lw, const ckube__lw_compact_ops *ops);
/* The compact operations, or NULL. */
const ckube__lw_compact_ops *ckube__list_watch_compact(const ckube_list_watch *lw);
void *ckube__list_watch_ctx(const ckube_list_watch *lw);

#endif
