/* Structural OpenAPI v3 schema engine: the API of schema.h; the rest is in
 * the other files of this folder (internal.h).
 *
 * Wording follows apiextensions-apiserver, which runs kube-openapi's
 * validator and converts its errors to field errors:
 *   type        TypeInvalid(value = JSON type name) "P in body must be of type T: \"t\""
 *   required    Required                             "Required value"
 *   enum        NotSupported(value)                  "supported values: \"a\", \"b\""
 *   maxLength   TooLong                              "may not be more than N bytes"
 *   maxItems    TooMany(count, max)                  "must have at most N items"
 *   maxProps    TooMany(count, max)
 *   everything else: Invalid(value, "P in body should ...")
 * where P is the field path (kube-openapi's "in body" message repeats it).
 */
#include "apiserver/apiextensions/schema/internal.h"

int schema_apply(const json_t *schema, json_t *obj, unsigned flags, ckube_status *invalid,
                 char ***unknown_fields, size_t *nunknown)
{
    if (unknown_fields)
        *unknown_fields = NULL;
    if (nunknown)
        *nunknown = 0;
    if (!json_is_object(schema) || !obj)
        return 0;
    walk w = {.flags = flags, .st = invalid, .collect_unknown = unknown_fields != NULL};
    if (flags & (SCHEMA_PRUNE | SCHEMA_DEFAULT | SCHEMA_OMITEMPTY) || unknown_fields)
        sch_prune_node(&w, schema, obj, CTX_ROOT);
    if (!w.oom && (flags & SCHEMA_VALIDATE)) {
        sch_path_pop(&w, 0);
        sch_validate_node(&w, schema, obj, CTX_ROOT);
    }
    free(w.path.s);
    if (w.oom || w.path.oom) {
        schema_free_paths(w.unknown, w.nunknown);
        return -1;
    }
    if (unknown_fields) {
        *unknown_fields = w.unknown;
        if (nunknown)
            *nunknown = w.nunknown;
    } else {
        schema_free_paths(w.unknown, w.nunknown);
    }
    return w.ncauses;
}

int schema_validate_at(const json_t *schema, const json_t *value, const char *path,
                       ckube_status *invalid)
{
    if (!json_is_object(schema) || !value)
        return 0;
    walk w = {.flags = SCHEMA_VALIDATE, .st = invalid};
    if (path && *path)
        sch_path_push_key(&w, path);
    sch_validate_node(&w, schema, value, CTX_NORMAL);
    free(w.path.s);
    return w.oom || w.path.oom ? -1 : w.ncauses;
}

void schema_free_paths(char **paths, size_t n)
{
    if (!paths)
        return;
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}
