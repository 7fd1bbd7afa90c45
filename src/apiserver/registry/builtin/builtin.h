/* builtin.h - what the built-in API groups (core/, apps/, coordination/,
 * events/, rbac/) share: a type is a row of a static table (struct builtin),
 * builtin_install registers a group's table, and a few printer cells and
 * defaults serve more than one group (builtin.c). */
#ifndef CKUBE_APISERVER_REGISTRY_BUILTIN_BUILTIN_H
#define CKUBE_APISERVER_REGISTRY_BUILTIN_BUILTIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "apiserver/registry/rest/registry.h"

/* A printer column of a table row (see printer_column). */
typedef struct col_def {
    const char *name, *type, *format, *path;
    json_t *(*fn)(const json_t *);
    int priority;
    const char *description;
} col_def;

#define NAME_COL                                                                                   \
    {                                                                                              \
        "Name", "string", "name", ".metadata.name", NULL, 0,                                       \
            "Name must be unique within a namespace."                                              \
    }
#define AGE_COL                                                                                    \
    {                                                                                              \
        "Age", "string", "", ".metadata.creationTimestamp", NULL, 0,                               \
            "Time since the object was created."                                                   \
    }
#define END_COL                                                                                    \
    {                                                                                              \
        NULL, NULL, NULL, NULL, NULL, 0, NULL                                                      \
    }

/* One built-in type: names, scope, subresources, strategy hooks,
 * columns (END_COL-terminated) and selectable fields. */
typedef struct builtin {
    const char *group, *version, *resource, *kind, *singular;
    bool namespaced;
    const char *short_names[4];
    const char *categories[3];
    bool status_sub, scale_sub, generation;
    int name_kind;
    const ckube_patch_meta_entry *patch_meta;
    const col_def *cols;
    const selectable_field *fields;
    void (*prepare_create)(const resource_type *, json_t *);
    void (*prepare_update)(const resource_type *, json_t *, const json_t *);
    void (*validate)(const resource_type *, const json_t *, const json_t *, ckube_status *);
    bool (*pending_finalizers)(const json_t *);
    void (*prepare_delete)(const resource_type *, json_t *);
    /* upstream's strategy AllowCreateOnUpdate: a PUT of a missing object
     * creates it (RBAC kinds, Services, Endpoints, Events, Leases). */
    bool create_on_update;
    /* upstream's strategy AllowUnconditionalUpdate false: a PUT must name
     * the resourceVersion it replaces (webhook configurations,
     * APIServices). Default (false here): unconditional updates allowed. */
    bool conditional_update;
} builtin;

/* Registers n types of a group's table in `reg` (every verb, schemas
 * from registry/definitions). 0, or -1 when one cannot be added. */
int builtin_install(registry *reg, const builtin *types, size_t n);

/* Printer cells shared between groups; each returns a new reference. */
json_t *builtin_str_or_none(const char *s); /* the string, or "<none>" if empty */
/* A LabelSelector's matchLabels at `path`, "k=v,..." ("<none>" if none). */
json_t *builtin_selector_map(const json_t *obj, const char *path);
json_t *builtin_int_path(const json_t *obj, const char *path); /* the integer, or 0 */
/* An event's age: the time since the first of `paths` (NULL-terminated)
 * that holds a timestamp, "<unknown>" if none. Its "Last Seen", and its
 * "Object" (kind/name of `ref`). */
json_t *builtin_event_age(const json_t *obj, const char *const *paths);
json_t *builtin_event_last_seen(const json_t *obj);
json_t *builtin_event_object(const json_t *obj, const char *ref);

/* Sets obj[key] = value (taken) unless obj has that key: a default. */
void builtin_set_if_absent(json_t *obj, const char *key, json_t *value);

/* SetDefaults_PodSpec on a pod's spec, and on a workload's
 * spec.template.spec (given the workload's spec). */
void builtin_default_pod_spec(json_t *spec);
void builtin_default_pod_template(json_t *spec);

#endif
