/* registry.h - the resource types the API server serves.
 *
 * One generic REST handler serves every resource; everything that differs
 * between types lives in a `struct resource_type`: names for discovery,
 * scope, verbs, subresources, the strategy hooks (prepare, validate), the
 * strategic-merge-patch metadata, the OpenAPI schema and the printer
 * columns. Built-in types come from one static table per API group
 * (registry/core, apps, coordination, admissionregistration,
 * apiregistration, events, rbac; registry/builtin installs them);
 * CustomResourceDefinitions add types at run time.
 *
 * Types are reference counted: a request holds a reference for its whole
 * life, so a CRD deleted meanwhile frees its type only when the last
 * request ends. The registry itself is guarded by a rwlock.
 */
#ifndef CKUBE_APISERVER_REGISTRY_H
#define CKUBE_APISERVER_REGISTRY_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "apiserver/authentication/user.h"
#include "apiserver/cacher/cacher.h"
#include "ckube/patch.h"
#include "ckube/status.h"

/* Verbs, as discovery lists them. */
enum {
    VERB_GET = 1 << 0,
    VERB_LIST = 1 << 1,
    VERB_WATCH = 1 << 2,
    VERB_CREATE = 1 << 3,
    VERB_UPDATE = 1 << 4,
    VERB_PATCH = 1 << 5,
    VERB_DELETE = 1 << 6,
    VERB_DELETECOLLECTION = 1 << 7,
    VERB_ALL = 0xff,
};

/* A server-side printing column (meta/v1 TableColumnDefinition). The cell
 * comes from `fn` when set, else from `json_path` (a simple path like
 * ".spec.replicas", as CRD additionalPrinterColumns use). */
typedef struct printer_column {
    char *name;
    char *type;   /* "string", "integer", "number", "boolean", "date" */
    char *format; /* "name" for the Name column, else "" */
    char *description;
    int priority; /* > 0: only with -o wide */
    char *json_path;
    /* Returns a new reference (a string, number, bool or null). */
    json_t *(*fn)(const json_t *obj);
} printer_column;

/* Extra field-selector fields of a type beyond metadata.name and
 * metadata.namespace: the selector key and the JSON path it reads. The
 * cacher extracts them, so this is its cacher_field. */
typedef cacher_field selectable_field;

typedef struct resource_type resource_type;
struct outbound;
struct cacher;
typedef struct resource_conversion resource_conversion;
/* How a resource_type's convert ended: objs (taken) or st (taken). */
typedef void (*resource_convert_cb)(void *arg, json_t *objs, ckube_status *st);

struct resource_type {
    atomic_int refs;

    char *group;       /* "" for core */
    char *version;     /* "v1" */
    char *resource;    /* plural, lowercase: "configmaps" */
    char *kind;        /* "ConfigMap" */
    char *list_kind;   /* "ConfigMapList" */
    char *singular;    /* "configmap" */
    char *api_version; /* "v1" or "apps/v1" (derived) */
    bool namespaced;
    char **short_names; /* NULL-terminated; may be NULL */
    char **categories;  /* NULL-terminated; may be NULL */
    unsigned verbs;

    bool status_subresource;          /* /status exists; main writes keep old status */
    bool scale_subresource;           /* /scale exists (autoscaling/v1 Scale) */
    char *scale_spec_replicas_path;   /* ".spec.replicas" */
    char *scale_status_replicas_path; /* ".status.replicas" */
    char *scale_label_selector_path;  /* may be NULL */

    /* Generation is bumped when anything outside metadata (and outside
     * status when status_subresource) changes. */
    bool tracks_generation;
    /* PUT without metadata.resourceVersion is allowed (unconditional
     * update) for most built-ins, rejected with 422 for custom resources. */
    bool allow_unconditional_update;
    /* A PUT of a missing object creates it (upstream's strategy
     * AllowCreateOnUpdate); else 404. */
    bool allow_create_on_update;
    /* Deletion returns the object rather than a Success Status. */
    bool return_deleted_object;
    /* Create and update may set .status directly (no status subresource). */

    /* Strategic merge patch metadata; NULL means strategic merge patch is
     * unsupported (custom resources: 415). */
    const ckube_patch_meta_entry *patch_meta;

    /* OpenAPI v3 schema of the whole object (owned reference), used for
     * unknown-field detection/pruning, validation, defaulting and
     * /openapi. NULL: anything goes. */
    json_t *schema;

    /* Server-side printing columns, complete and in order (a Name column
     * has json_path ".metadata.name" and format "name"). ncolumns == 0
     * means the default Name and Age columns. */
    printer_column *columns;
    size_t ncolumns;

    const selectable_field *selectable_fields; /* zero-terminated; may be NULL */
    /* A custom type's selectableFields: owned with their strings, and
     * what selectable_fields points at. The cacher keeps no values for
     * them (they change with the CRD); filters read them from the bytes. */
    selectable_field *owned_selectable_fields;

    /* Strategy hooks, all optional. They run on the request's thread with
     * the object decoded. */
    /* Fills defaults and resets fields users may not set on create. */
    void (*prepare_create)(const resource_type *t, json_t *obj);
    /* Same on update; `old` is the stored object (read-only). */
    void (*prepare_update)(const resource_type *t, json_t *obj, const json_t *old);
    /* Adds causes (ckube_status_add_cause) for invalid fields. `old` is NULL
     * on create. */
    void (*validate)(const resource_type *t, const json_t *obj, const json_t *old,
                     ckube_status *st);

    /* Finalizers kept outside metadata.finalizers (namespaces keep
     * spec.finalizers): true while any is left. */
    bool (*pending_finalizers)(const json_t *obj);
    /* Runs when graceful deletion starts (namespaces: phase Terminating). */
    void (*prepare_delete)(const resource_type *t, json_t *obj);
    /* Objects are stored in one version; when this type serves another
     * shape (a v1beta1 CRD, a non-storage version of a custom resource),
     * `present` rewrites a decoded stored object in place before it is
     * served. NULL: stored bytes are served as they are. */
    void (*present)(const resource_type *t, json_t *obj);
    /* A type kept in another group's storage, as upstream keeps
     * events.k8s.io Events as core Events: storage_group names that group
     * ("" for core; static; NULL: its own), `present` converts stored
     * objects to this type's shape, and to_storage converts a validated
     * object back, in place, just before it is written. */
    const char *storage_group;
    void (*to_storage)(const resource_type *t, json_t *obj);
    /* Conversion that has to ask someone (a CRD whose
     * spec.conversion.strategy is Webhook): asynchronous, so such a type
     * has no `present` or `to_storage`, and every read and write of it
     * converts through `convert` (docs/webhooks.md, "Conversion
     * webhooks"). convert takes a reference to `objs` (a JSON array of
     * objects) and converts those not in the version wanted, t's own or,
     * when to_storage, the storage version; `list` words errors as for a
     * list (objects by index). cb runs once, later, on o's loop, unless
     * convert_cancel stops it first: with a new array of the objects in
     * order (cb takes it) or NULL and a Status (cb takes it). `cache`
     * (borrowed) resolves the webhook's Service. */
    struct resource_conversion *(*convert)(const resource_type *t, struct outbound *o,
                                           struct cacher *cache, json_t *objs, bool to_storage,
                                           bool list, resource_convert_cb cb, void *arg);
    void (*convert_cancel)(struct resource_conversion *c);
    /* Name rule (enum ckube_name_kind in ckube/validation.h). */
    int name_kind;
    /* A create-only question (reviews.c: SelfSubjectAccessReview, ...):
     * answered and never stored. Fills obj's status, or adds causes to st
     * (an Invalid status) for a malformed question; ns is the request's
     * namespace, user who asks. Other verbs get 405. review_arg is what
     * the server hands the review (TokenReview: the authenticator). */
    void (*review)(const resource_type *t, json_t *obj, const char *ns, const auth_user *user,
                   ckube_status *st);
    void *review_arg;

    bool is_custom;              /* defined by a CRD */
    char *crd_name;              /* owning CRD, for custom types */
    struct crd_serving *serving; /* what the CRD serves this type from (a
                                  * reference, owned); see crd_serving */
    bool storage_version;        /* custom: this version is the one stored */
    struct registry *registry;   /* the registry it was added to (borrowed; set by
                                  * registry_add): what hooks look other types up in */
    void *priv;                  /* owner's data (the CRD's validation state, ...) */
    void (*priv_free)(void *priv);
};

/* What a CRD serves its types from: its uid, spec and accepted names.
 * Successive registrations of a CRD's types share one while that stays
 * the same (a change of the CRD's status, or the start of its deletion,
 * re-registers the types without changing it). It is retired when the
 * CRD is deleted or changes what it serves, and the watches on any of its
 * types then end, as upstream ends them when it rebuilds or tears down a
 * CRD's storage. Reference counted; thread-safe. */
typedef struct crd_serving {
    atomic_int refs;
    atomic_int retired;
    char *what; /* compact JSON of uid, spec and acceptedNames */
} crd_serving;

/* Takes `what` (malloc'd). NULL when out of memory (what is freed). */
crd_serving *crd_serving_new(char *what);
crd_serving *crd_serving_ref(crd_serving *s);
void crd_serving_unref(crd_serving *s);

resource_type *resource_type_ref(resource_type *t);
void resource_type_unref(resource_type *t);

/* Storage key prefix of the type's objects, e.g. "/registry/core/configmaps/"
 * (core) or "/registry/apps/deployments/"; written to buf. */
void resource_type_key_prefix(const resource_type *t, char *buf, size_t n);

/* The registry: every served type, by group, version and resource. One
 * per server (apiserver owns it); the API groups add their types with
 * their install functions (core_install, apps_install,
 * coordination_install, admissionregistration_install,
 * apiregistration_install, events_install, authorization_install,
 * rbac_install, apiextensions_install) and CRDs add and remove theirs as
 * they change.
 * Thread-safe: lookups share a lock, changes take it alone. */
typedef struct registry registry;
registry *registry_new(void);
/* Drops the registry's references to its types. */
void registry_free(registry *r);

/* Looks up by group, version and plural resource name (or, for kubectl's
 * convenience, nothing else). Returns a new reference or NULL. */
resource_type *registry_lookup(registry *r, const char *group, const char *version,
                               const char *resource);
/* Looks up by group, version and kind. New reference or NULL. */
resource_type *registry_lookup_kind(registry *r, const char *group, const char *version,
                                    const char *kind);

/* Adds a type (takes the caller's reference) and sets its t->registry.
 * Fails (-1) if group/version/resource is taken. */
int registry_add(registry *r, resource_type *t);
/* Removes a type by group/version/resource; drops the registry's ref. */
void registry_remove(registry *r, const char *group, const char *version, const char *resource);

/* Snapshot of every type, sorted by group then version then resource:
 * an array of new references and its length. Free with registry_list_free. */
resource_type **registry_list(registry *r, size_t *n);
void registry_list_free(resource_type **types, size_t n);

/* A counter bumped on every add/remove, for discovery/OpenAPI caches. */
unsigned long registry_generation(registry *r);

#endif
