/* ckube/fake.h - an in-memory list-watch for controller tests.
 *
 * A ckube_fake_lw is a tiny API server for one resource: a set of objects
 * with a resourceVersion counter and an event history, served through a
 * ckube_list_watch (ckube/informer.h) that informers and reflectors use
 * exactly like the real client. Tests change the objects and misbehave on
 * purpose (fail lists, expire watches with 410, drop connections, answer
 * slowly), and check what the code under test asked for (every list and
 * watch call is recorded with its options).
 *
 * Server semantics reproduced:
 *  - every change gets the next resourceVersion (decimal strings);
 *  - a list returns the current objects sorted by key with
 *    metadata.resourceVersion = the current revision; with a limit it
 *    pages (continue tokens over a snapshot) when resourceVersion is ""
 *    (or also for "0" after ckube_fake_lw_set_page_rv0);
 *  - a watch from resourceVersion N replays the changes after N, then
 *    streams live ones; from "" or "0" it first sends the current objects
 *    as ADDED; from an N older than the compaction point it fails with 410
 *    Expired ("too old resource version");
 *  - a watch with sendInitialEvents (a watch-list: resourceVersionMatch
 *    NotOlderThan and allowWatchBookmarks required, else 422) sends the
 *    current objects as ADDED, then a bookmark annotated
 *    k8s.io/initial-events-end: "true", then live changes;
 *  - bookmarks go only to watches opened with allowWatchBookmarks;
 *  - a watch's timeoutSeconds is honoured on the fake's clock (the stream
 *    then ends cleanly);
 *  - every object a list or watch hands out is a fresh deep copy.
 *
 * Thread-safety: every function may be called from any thread at any
 * time. The fake is reference counted: ckube_fake_lw_list_watch takes a
 * reference for the list-watch it returns, so a test can keep using the
 * fake after an informer owning that list-watch is freed.
 */
#ifndef CKUBE_FAKE_H
#define CKUBE_FAKE_H

#include <ckube/client.h>
#include <ckube/clock.h>
#include <ckube/informer.h>
#include <ckube/typed.h>
#include <ckube/status.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_fake_lw ckube_fake_lw;

typedef struct ckube_fake_lw_opts {
    const char *resource;    /* description, e.g. "networks.samplecrd.k8s.io"
                                (copied); NULL = "fakes" */
    const char *api_version; /* of bookmark objects and lists; NULL = "v1" */
    const char *kind;        /* of bookmark objects; NULL = "Fake" */
    ckube_clock *clock;      /* for delays and watch timeouts; NULL = real;
                                borrowed, must outlive the fake */
    uint64_t start_rv;       /* first revision; 0 = 100 */
} ckube_fake_lw_opts;

/* Creates a fake with no objects (`opts` may be NULL). The caller holds
 * one reference; drop it with ckube_fake_lw_unref. */
ckube_fake_lw *ckube_fake_lw_new(const ckube_fake_lw_opts *opts);
void ckube_fake_lw_unref(ckube_fake_lw *f);
/* A new list-watch serving this fake (it holds its own reference). Free it
 * with ckube_list_watch_free, or hand it to an informer which owns it. */
ckube_list_watch *ckube_fake_lw_list_watch(ckube_fake_lw *f);

/* ---- objects ---- */

/* Stores a deep copy of obj with metadata.resourceVersion set to the next
 * revision (and metadata.uid / creationTimestamp filled when absent) and
 * sends ADDED to every open watch. Returns the new revision, or 0 when
 * obj has no name or already exists. */
uint64_t ckube_fake_lw_add(ckube_fake_lw *f, const json_t *obj);
/* Replaces an existing object (MODIFIED). 0 when absent. */
uint64_t ckube_fake_lw_update(ckube_fake_lw *f, const json_t *obj);
/* Adds or updates. */
uint64_t ckube_fake_lw_apply(ckube_fake_lw *f, const json_t *obj);
/* Removes ns/name (ns NULL for cluster-scoped) and sends DELETED with the
 * last state (its resourceVersion set to the deletion's revision). 0 when
 * absent. */
uint64_t ckube_fake_lw_delete(ckube_fake_lw *f, const char *ns, const char *name);
/* A new reference to a deep copy of ns/name, or NULL. */
json_t *ckube_fake_lw_get(ckube_fake_lw *f, const char *ns, const char *name);
/* Deep copies of every object, sorted by key (a JSON array; caller
 * decrefs). */
json_t *ckube_fake_lw_objects(ckube_fake_lw *f);

/* The same on typed objects (ckube/typed.h; what ckube-gen's
 * PKG_VERSION_PLURAL_fake_add() and the rest call): obj is borrowed and
 * encoded; get decodes a copy as kind t (the caller's, ckube_typed_free),
 * NULL when absent or when it does not decode. A typed object that does
 * not encode (out of memory) adds nothing (0). */
uint64_t ckube_fake_lw_add_typed(ckube_fake_lw *f, const ckube_typed *obj);
uint64_t ckube_fake_lw_update_typed(ckube_fake_lw *f, const ckube_typed *obj);
uint64_t ckube_fake_lw_apply_typed(ckube_fake_lw *f, const ckube_typed *obj);
ckube_typed *ckube_fake_lw_get_typed(ckube_fake_lw *f, const ckube_type_info *t, const char *ns,
                                     const char *name);
size_t ckube_fake_lw_count(ckube_fake_lw *f);
/* The current revision. */
uint64_t ckube_fake_lw_resource_version(ckube_fake_lw *f);
/* Advances the revision without touching these objects (as writes to
 * other resources do on a real server); returns it. */
uint64_t ckube_fake_lw_bump_rv(ckube_fake_lw *f);

/* ---- watch control ---- */

/* Sends a BOOKMARK carrying the current revision to every open watch that
 * asked for bookmarks. Returns the number of watches it went to. */
size_t ckube_fake_lw_bookmark(ckube_fake_lw *f);
/* Ends every open watch cleanly (their watch_next returns 0 once the
 * events already queued are read). Returns how many were open. */
size_t ckube_fake_lw_drop_watches(ckube_fake_lw *f);
/* Sends every open watch an ERROR event carrying a 410 Expired Status
 * ("too old resource version"), after which the stream ends. Returns how
 * many were open. */
size_t ckube_fake_lw_expire_watches(ckube_fake_lw *f);
/* Same with any Status (e.g. 500 InternalError, 429 TooManyRequests). */
size_t ckube_fake_lw_error_watches(ckube_fake_lw *f, const ckube_status *st);
/* Breaks every open watch: watch_next returns -1 with a code-0 status
 * (a transport error, like a reset connection). */
size_t ckube_fake_lw_break_watches(ckube_fake_lw *f);
/* Forgets the history up to the current revision: a watch opened from an
 * older resourceVersion now fails on open with 410 Expired. */
void ckube_fake_lw_compact(ckube_fake_lw *f);
/* Number of watches currently open (opened and not closed). */
size_t ckube_fake_lw_open_watches(ckube_fake_lw *f);
/* Waits (in real time) until at least n watches are open; returns false
 * after timeout_ms. */
bool ckube_fake_lw_wait_watches(ckube_fake_lw *f, size_t n, int timeout_ms);

/* ---- failures ---- */

/* The next `count` list calls (-1 = every one until cleared with count 0)
 * fail with a copy of `st` (e.g. code 404 "the server could not find the
 * requested resource", or 429 with retry_after_seconds). */
void ckube_fake_lw_fail_lists(ckube_fake_lw *f, const ckube_status *st, int count);
/* Same for watch opens. */
void ckube_fake_lw_fail_watches(ckube_fake_lw *f, const ckube_status *st, int count);
/* Every list and watch open waits `delay_ns` on the fake's clock before
 * answering (a slow server). Setting 0 releases calls already waiting. */
void ckube_fake_lw_set_delay(ckube_fake_lw *f, uint64_t delay_ns);
/* Whether a list with resourceVersion "0" honours limit (pages), as a
 * server without a watch cache does. Default false (the whole list). */
void ckube_fake_lw_set_page_rv0(ckube_fake_lw *f, bool page);

/* ---- call records ---- */

typedef enum ckube_fake_call_kind {
    CKUBE_FAKE_LIST = 1,
    CKUBE_FAKE_WATCH,
} ckube_fake_call_kind;

/* The options one call was made with. Strings are owned (NULL when the
 * option was absent); free with ckube_fake_call_clear. */
typedef struct ckube_fake_call {
    ckube_fake_call_kind kind;
    uint64_t at_ns; /* the fake clock's time of the call */
    char *resource_version;
    char *resource_version_match;
    char *continue_token;
    char *label_selector;
    char *field_selector;
    int64_t limit;
    ckube_opt_int timeout_seconds;
    bool allow_watch_bookmarks;
    bool send_initial_events;
} ckube_fake_call;

size_t ckube_fake_lw_list_calls(ckube_fake_lw *f);
size_t ckube_fake_lw_watch_calls(ckube_fake_lw *f);
/* Total calls recorded (lists and watches, in call order). */
size_t ckube_fake_lw_ncalls(ckube_fake_lw *f);
/* Copies call number i (0-based, in call order) into *out. Returns false
 * when there is no such call. */
bool ckube_fake_lw_call(ckube_fake_lw *f, size_t i, ckube_fake_call *out);
/* The last call of a kind; false when none. */
bool ckube_fake_lw_last_call(ckube_fake_lw *f, ckube_fake_call_kind kind, ckube_fake_call *out);
void ckube_fake_call_clear(ckube_fake_call *c);
/* Waits (in real time) until at least n calls of `kind` were made. */
bool ckube_fake_lw_wait_calls(ckube_fake_lw *f, ckube_fake_call_kind kind, size_t n,
                              int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
