/* fieldmanager.h - server-side apply and metadata.managedFields.
 *
 * Every write records which field manager owns which fields, as
 * kube-apiserver does (apimachinery's managedfields on top of
 * structured-merge-diff):
 *
 *  - A field set is a trie of path elements written in the FieldsV1 form:
 *    "f:<name>" for a field or map key, "k:{...}" for an item of an
 *    associative list (its key fields as compact JSON with sorted keys),
 *    "v:<json>" for an item of a set list, "i:<n>" for a list index, and
 *    "." inside a node that is itself owned and also has owned children.
 *    Atomic lists and maps (and everything deduced without a schema that is
 *    not a map) are owned whole.
 *  - List semantics come from the type: built-in types use their
 *    strategic-merge metadata (a merge key makes an associative list, a
 *    merge of primitives a set; ports and topology constraints use
 *    upstream's compound keys), custom resources their schema's
 *    x-kubernetes-list-type / x-kubernetes-list-map-keys /
 *    x-kubernetes-map-type. Lists without either are atomic.
 *    metadata always follows ObjectMeta's rules.
 *  - An Update (create, PUT, non-apply PATCH, subresource writes) gives
 *    the writer the fields it added or changed and takes them, and the
 *    fields it removed, from every other manager. Entries left empty are
 *    dropped; there is one entry per (manager, operation, subresource,
 *    and apiVersion for updates). At most 10 update entries are kept (the
 *    oldest merge into "ancient-changes"). An object that has no
 *    managedFields (they were reset) is not tracked again until an apply.
 *  - An Apply merges the applied configuration into the live object
 *    (associative lists by key, sets by value, atomic values replaced,
 *    other maps field by field), fails with 409 on fields another manager
 *    owns with a different value unless forced (force moves them), and
 *    removes fields the manager applied last time, no longer applies, and
 *    nobody else owns. kubectl's client-side-apply history is honoured as
 *    upstream does for the "kubectl" manager (conflicts on fields still
 *    matching the last-applied annotation are forced; the annotation is
 *    kept up to date).
 *
 * apiVersion, kind and metadata.{name,namespace,uid,resourceVersion,
 * generation,creationTimestamp,selfLink,managedFields} are never owned.
 * With a status subresource, writes to the main resource never own
 * .status and writes to /status only own .status.
 *
 * The module is pure: it works on jansson values and never touches
 * storage. Objects passed in are borrowed and not modified unless said.
 */
#ifndef CKUBE_APISERVER_FIELDMANAGER_H
#define CKUBE_APISERVER_FIELDMANAGER_H

#include <jansson.h>
#include <stdbool.h>

#include "ckube/patch.h"
#include "ckube/status.h"

/* Longest fieldManager upstream accepts. */
#define FM_MANAGER_MAX 128

/* What the field manager needs to know about a resource type. Every
 * pointer is borrowed and must outlive the call. */
typedef struct fm_type {
    const json_t *schema;                     /* OpenAPI schema of the object; NULL: deduced */
    const ckube_patch_meta_entry *patch_meta; /* built-in list semantics; NULL: none */
    bool custom;                              /* lists follow x-kubernetes-list-type */
    bool status_subresource;                  /* main writes never own .status */
    const char *api_version;                  /* "apps/v1", recorded in entries */
    const char *kind;                         /* "Deployment" */
} fm_type;

/* One write. */
typedef struct fm_op {
    const char *manager;     /* field manager (NULL or "": "unknown") */
    const char *subresource; /* NULL or "" for the main resource, else "status", ... */
    bool force;              /* apply: take conflicting fields */
    const char *now;         /* RFC 3339 time to record; NULL: the current time */
} fm_op;

/* A decoded managedFields list (opaque). */
typedef struct fm_managed fm_managed;

/* A field set (opaque), exposed for tests and diagnostics. */
typedef struct fm_set fm_set;

/* ---- request options ---- */

/* Checks a fieldManager value as upstream's ValidateFieldManager does (at
 * most 128 bytes, printable characters only) and, with `apply`, that it is
 * present. `options_kind` names the options type in the error
 * ("PatchOptions", "CreateOptions", "UpdateOptions"). Returns NULL when
 * valid, else a 422 Status the caller owns. */
ckube_status *fm_validate_manager(const char *manager, const char *options_kind, bool apply);

/* The manager name of a request without fieldManager: the User-Agent up to
 * its first '/', without non-printable characters, at most 128 bytes.
 * Returns a malloc'd string (possibly empty; the caller frees). */
char *fm_manager_from_user_agent(const char *user_agent);

/* ---- writes ---- */

/* Records an Update by op->manager: sets obj's metadata.managedFields from
 * the change old -> obj (old is NULL on create). managedFields that obj
 * already carries are used when valid and non-empty (a client may write
 * them); `[]` or `[{}]` clears them; anything else falls back to old's.
 * Subresource writes always start from old's. `obj` is modified in place;
 * this never fails (an internal problem drops managedFields, as upstream's
 * UpdateNoErrors does). */
void fm_update(const fm_type *t, const fm_op *op, const json_t *old, json_t *obj);

/* Server-side apply of `config` (the decoded apply patch, already pruned of
 * unknown fields) onto `live` (NULL when the object does not exist yet).
 * Returns the merged object (a new reference) and sets *managed to the
 * managedFields to record (free with fm_managed_free; store them on the
 * final object with fm_managed_store once the object is prepared). On
 * error returns NULL and sets *st: 400 for a malformed configuration
 * (wrong apiVersion/kind, managedFields set, list items without their
 * keys, duplicate items), 409 with FieldManagerConflict causes for
 * conflicts. */
json_t *fm_apply(const fm_type *t, const fm_op *op, const json_t *live, const json_t *config,
                 fm_managed **managed, ckube_status **st);

/* Writes `m` (borrowed) as obj's metadata.managedFields (removed when m
 * is empty). */
void fm_managed_store(const fm_managed *m, json_t *obj);
void fm_managed_free(fm_managed *m);

/* Upstream ignores writes that change nothing but managedFields
 * timestamps: when obj equals old except for metadata.resourceVersion and
 * managedFields, and the managedFields differ only in their times, obj
 * gets old's managedFields back. `obj` is modified in place. */
void fm_ignore_timestamp_only_changes(const json_t *old, json_t *obj);

/* ---- field sets ---- */

/* The field set of `obj` (as an applied configuration owns it). Returns
 * NULL with *err (malloc'd) when a list item lacks its keys or repeats
 * one. Free with fm_set_free. */
fm_set *fm_set_of(const fm_type *t, const json_t *obj, char **err);
/* The FieldsV1 JSON of a set (new reference). */
json_t *fm_set_to_fields(const fm_set *s);
/* Parses FieldsV1. NULL with *err (malloc'd) when malformed. Unknown
 * path element types are ignored, as upstream does. */
fm_set *fm_set_from_fields(const json_t *fields, char **err);
/* True when the set owns nothing. */
bool fm_set_empty(const fm_set *s);
void fm_set_free(fm_set *s);

#endif
