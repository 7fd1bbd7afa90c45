/* store.h - the generic store: the one way an object is created, updated
 * or deleted, whoever writes it (the REST handlers, the CRD cleanup
 * finalizer, bootstrap), in the place of k8s.io/apiserver's
 * registry/generic/registry.Store.
 *
 * A write reads the current object from the cacher (never behind an
 * acknowledged write), builds the new one, and submits a storage op
 * conditional on the mod revision it read; when another write won the
 * race it starts again from the newer object. What the store does for
 * every type:
 *   - create: generateName (a fresh suffix on every collision), the
 *     namespace of the request, the fields the server owns (uid,
 *     creationTimestamp, generation), the type's prepare_create, the
 *     namespace being there and not terminating;
 *   - update: the resourceVersion precondition (a conflict is the
 *     caller's when it named one, else retried), the metadata the server
 *     keeps, status only through /status, no new finalizers once
 *     deleting, the generation moving with the spec, nothing written for
 *     a no-op, and the delete of a deleting object whose last finalizer
 *     went;
 *   - delete: uid and resourceVersion preconditions, the garbage
 *     collector's propagation finalizers, a deletionTimestamp instead of
 *     the delete while finalizers remain;
 *   - dry run (everything but the storage op), the object size limits.
 * What differs between callers comes through hooks: how the new object is
 * built from the current one (a PUT body, a patch, an apply), how it is
 * validated, what it records (managedFields).
 *
 * Ownership follows libuv's requests: the caller owns the store_write
 * (usually embedded in its own request struct), fills in the fields under
 * "set by the caller", and calls store_write_start. The store uses the
 * rest. Exactly one hooks->done call ends the write, on the thread `post`
 * chooses; after it the store no longer touches the store_write, so done
 * may free it. done may run before store_write_start returns.
 */
#ifndef CKUBE_APISERVER_REGISTRY_GENERIC_STORE_H
#define CKUBE_APISERVER_REGISTRY_GENERIC_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "apiserver/cacher/cacher.h"
#include "apiserver/codec/jscan.h"
#include "apiserver/registry/rest/registry.h"
#include "ckube/status.h"
#include "common/json_cost.h"
#include "storage/storage.h"

/* The largest object stored, encoded (etcd's object limit), and the most
 * memory a stored object may take to decode (common/json_cost.h): a later
 * write to it then holds no bigger a tree than a request body may. Both
 * are 413s. */
#define STORE_MAX_OBJECT (1536u * 1024)
#define STORE_MAX_DECODED JCOST_MAX_DECODED

/* Storage keys: names and namespaces come from URLs (at most 255 bytes
 * each), so a key always fits. */
#define STORE_KEY_MAX 1024

/* Retries of a write that lost a race (a PATCH, a PUT without a
 * resourceVersion, an internal write). Every round one competing write
 * wins, so progress is guaranteed; upstream retries without bound, we
 * stop at a large cap. */
#define STORE_MAX_CONFLICT_RETRIES 10000

typedef struct store store;

/* The store of one server over `st` and its cache `c` (borrowed; they
 * outlive it). */
store *store_new(storage *st, cacher *c);
void store_free(store *s);
/* The cache the store reads from (borrowed). */
cacher *store_cache(const store *s);

/* The storage key of an object: "/registry/GROUP/RESOURCE/[NS/]NAME",
 * "core" for the core group. buf should hold STORE_KEY_MAX bytes. */
void store_object_key(const resource_type *t, const char *ns, const char *name, char *buf,
                      size_t n);

typedef enum { STORE_CREATE, STORE_UPDATE, STORE_DELETE } store_verb;

typedef struct store_write store_write;

/* Where a write asks admission (store_hooks.admit). */
typedef enum {
    STORE_ADMIT_MUTATE,  /* create/update: the object as built, before the store prepares it;
                          * delete: obj NULL (nothing to change; it may refuse) */
    STORE_ADMIT_VALIDATE /* create/update: the prepared, validated object; delete: obj NULL */
} store_admit_stage;

/* How a write ended, handed to hooks->done. On success st is NULL and
 * code is 201 (created) or 200; on failure st says why and code is 0. */
typedef struct store_result {
    int code;
    ckube_status *st; /* taken by done */
    /* The object written, or left as it was (a no-op, a delete with
     * nothing to change), or deleted (`deleted`); resourceVersion set.
     * Taken by done (a reference). NULL on failure. */
    json_t *obj;
    /* The object is gone from storage (or would be: a dry run). */
    bool deleted;
    /* The bytes stored for `obj` (without resourceVersion, as
     * ckube_json_dumps writes it), at revision `rev`; taken by done.
     * NULL when nothing was stored (a dry run, a no-op, a delete). */
    char *value;
    size_t value_len;
    int64_t rev;
} store_result;

typedef struct store_hooks {
    /* The object to write (a new reference), given the current one (old,
     * borrowed; NULL for a create, and for an update of an object that is
     * not there when create_on_missing is set: the object then is
     * created). Called again on every retry. NULL fails the write with
     * *st. Required for create and update. */
    json_t *(*transform)(store_write *w, const json_t *old, ckube_status **st);
    /* Update: the resourceVersion the caller requires to be current,
     * read from the new object `obj` (borrowed); NULL or "" for none.
     * Unset: metadata.resourceVersion of obj. */
    const char *(*precondition_rv)(store_write *w, const json_t *obj);
    /* Validation of the prepared object (old is NULL on create); a
     * Status fails the write. Unset: none (internal writes). */
    ckube_status *(*validate)(store_write *w, json_t *obj, const json_t *old);
    /* Last word before the object is stored, after validation and the
     * generation (managedFields); old is NULL on create. Optional. */
    void (*decorate)(store_write *w, const json_t *old, json_t *obj);
    /* Admission (optional; upstream's mutating and validating admission,
     * in the order its create, update and delete handlers call them):
     *  - STORE_ADMIT_MUTATE on create and update, with the object as the
     *    transform built it (old: the current one, NULL on create); the
     *    hook may change obj;
     *  - STORE_ADMIT_VALIDATE on create and update after validation,
     *    before the object is stored;
     *  - on delete both, in that order, with obj NULL and old the object
     *    being deleted (upstream's AdmissionToValidateObjectDeleteFunc).
     * A create of a namespaced object asks neither when its namespace is
     * missing or terminating (the store's NamespaceLifecycle comes first).
     * Returns true when it decided at once (*st: NULL admits, a Status
     * fails the write), false when the write must wait: the hook then
     * calls store_admit_resume exactly once, later, on the write's
     * thread. Called again on every retry of a lost race. */
    bool (*admit)(store_write *w, store_admit_stage stage, json_t *obj, const json_t *old,
                  ckube_status **st);
    /* Required: the write ended (see store_result). */
    void (*done)(store_write *w, store_result *r);
} store_hooks;

/* Runs fn(arg) on the thread that should see the write end. */
typedef void (*store_post_fn)(void *ctx, void (*fn)(void *), void *arg);

struct store_write {
    /* ---- set by the caller ---- */
    store *store;
    const resource_type *type; /* borrowed for the write's life */
    store_verb verb;
    const store_hooks *hooks;
    /* The object's namespace (namespaced types) and name (update and
     * delete); borrowed for the write's life. A delete may give `key`
     * instead (filled in, e.g. from a list). */
    const char *ns;
    const char *name;
    bool dry_run;
    /* Update: a PUT, which must name a resourceVersion unless the type
     * allows unconditional updates. */
    bool require_rv;
    /* Update: only .status of the new object counts (/status). */
    bool status_only;
    /* Update: /finalize (the type's prepare_update does not run). */
    bool finalize;
    /* Update: an object that is not there is created (server-side
     * apply); the result is then 201. */
    bool create_on_missing;
    /* Delete: preconditions and the propagation policy ("Orphan",
     * "Foreground", "Background" or NULL), borrowed. */
    const char *pre_uid;
    const char *pre_rv;
    const char *propagation;
    /* Where a type that converts through a webhook (resource_type.convert)
     * calls out from: the outbound of the loop the write runs on
     * (borrowed). NULL: such types cannot be written. */
    struct outbound *out;
    /* Where done runs: post(post_ctx, ...) from the storage thread, or
     * on the storage thread itself when post is NULL. */
    store_post_fn post;
    void *post_ctx;
    char key[STORE_KEY_MAX];

    /* ---- the store's ---- */
    storage_op op;
    char *value;         /* encoded object being stored */
    jscan_meta value_at; /* where its metadata parts are (op.hint when canonical) */
    json_t *obj;    /* object being written */
    char *gen_base; /* generateName, for retries */
    int attempts;
    int64_t user_rv; /* the resourceVersion the caller named */
    bool deleting;   /* the op is a storage delete */
    bool creating;   /* an update creating its object (create_on_missing) */
    /* Waiting for admission: the stage asked, and what the write goes on
     * with (the current object and its revision; update and delete). */
    store_admit_stage admit_stage;
    json_t *old;
    int64_t cur_rev;
    /* Converting through the type's webhook: the call, and what the write
     * goes on with (CONV_*, store.c). */
    struct resource_conversion *conv;
    int conv_stage;
};

/* Starts a write (see above). The caller must not touch w until done. */
void store_write_start(store_write *w);

/* Admission answered a write that waited (store_hooks.admit returned
 * false): st NULL goes on, a Status (taken) fails the write. On the
 * write's thread; the write may end before this returns. */
void store_admit_resume(store_write *w, ckube_status *st);

#endif
