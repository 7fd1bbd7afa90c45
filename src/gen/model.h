/* model.h - what ckube-gen generates, before any C is written: the
 * kinds of its inputs and, for each, a tree of types with their C names
 * (docs/ckube-gen.md). Building the model is where bad input is found:
 * a schema that is not structural, names that clash once mangled; the
 * error names the CRD, the version and the JSON path, and nothing is
 * written. */
#ifndef CKUBE_GEN_MODEL_H
#define CKUBE_GEN_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef enum {
    GEN_STRING = 1,
    GEN_INTEGER,
    GEN_NUMBER,
    GEN_BOOLEAN,
    GEN_OBJECT,        /* properties: a struct */
    GEN_ARRAY,         /* items */
    GEN_MAP,           /* additionalProperties: string keys to items */
    GEN_INT_OR_STRING, /* x-kubernetes-int-or-string */
    GEN_JSON,          /* preserve-unknown-fields, embedded resources: a json_t */
} gen_type_kind;

/* Elements of arrays and maps are held in place (ckube/typed.h), so an
 * element that is itself an array or a map, or a nullable number,
 * boolean, object or int-or-string (C has no null of those), is a GEN_JSON
 * element: kept whole, as JSON. */

typedef struct gen_type gen_type;

typedef struct gen_field {
    char *json_name; /* as in the schema */
    char *c_name;    /* the member's name */
    gen_type *type;  /* owned */
    bool required, nullable;
} gen_field;

struct gen_type {
    gen_type_kind kind;
    char *path;        /* the JSON path from the object: ".spec.ports[*].port" */
    char *c_name;      /* GEN_OBJECT: the struct's name (PKG_VERSION_KIND...) */
    char *origin;      /* GEN_OBJECT: where the name comes from (model.c's origin()) */
    bool external;     /* GEN_OBJECT: libckube's own (ckube_object_meta), not generated */
    char *format;      /* "date-time", "quantity", "int32", ... or NULL */
    gen_field *fields; /* GEN_OBJECT, in the schema's order */
    size_t nfields;
    gen_type *items;       /* GEN_ARRAY's items, GEN_MAP's values (owned) */
    char **enum_values;    /* strings only; NULL-terminated, or NULL */
    char **enum_macros;    /* each value's constant (NULL: the value names none) */
    json_t *default_value; /* a reference, or NULL */
    bool nullable;
};

typedef struct gen_kind {
    char *group, *version, *kind, *plural;
    bool namespaced;
    bool status_subresource, scale_subresource;
    gen_type *root; /* the object (apiVersion, kind and metadata included) */
    char *client;   /* the typed client's prefix: PKG_VERSION_PLURAL */
} gen_kind;

typedef struct gen_model {
    char *package;
    gen_kind *kinds;
    size_t nkinds;
    char **kinds_filter; /* OpenAPI kinds to take (NULL-terminated), or NULL: all */
} gen_model;

/* An empty model for package `package` (a C identifier's prefix: letters,
 * digits and '_', not starting with a digit). NULL with *err (malloc'd)
 * for a bad name or out of memory. */
gen_model *gen_model_new(const char *package, char **err);
void gen_model_free(gen_model *m);

/* Adds every served version of `crd` (apiextensions.k8s.io/v1 or
 * v1beta1, decoded; borrowed) as a kind. `source` names where it came
 * from in errors ("crd.yaml"). 0, or -1 with *err (malloc'd), the model
 * unchanged. */
int gen_model_add_crd(gen_model *m, const json_t *crd, const char *source, char **err);

/* Adds the kinds an OpenAPI v3 document (a Kubernetes /openapi/v3/...
 * document, decoded; borrowed) serves: every kind with a path that gets
 * one object (.../PLURAL/{name}), or those of gen_model_set_kinds. Plural,
 * scope and the status and scale subresources come from the paths. Named
 * types ($ref) are one C type each, named after the definition
 * (io.k8s.api.core.v1.PodSpec: PKG_v1_pod_spec), shared by every field
 * that refers to it; ObjectMeta is libckube's ckube_object_meta, Quantity
 * and Time strings, IntOrString ckube_int_or_string, a definition that
 * refers back to itself JSON. 0, or -1 with *err, the model unchanged. */
int gen_model_add_openapi(gen_model *m, const json_t *doc, const char *source, char **err);

/* Restricts the kinds OpenAPI documents add to a comma-separated list
 * ("Pod,ConfigMap"). 0, or -1 with *err. */
int gen_model_set_kinds(gen_model *m, const char *list, char **err);
/* Once every input is in: each kind of gen_model_set_kinds must have been
 * found. 0, or -1 with *err naming the first missing. */
int gen_model_check_kinds(const gen_model *m, char **err);

/* Adds what the file at `path` holds: YAML or JSON documents, of which
 * the CustomResourceDefinitions and OpenAPI v3 documents are taken
 * (anything else is an error). 0, or -1 with *err. */
int gen_model_add_file(gen_model *m, const char *path, char **err);

#endif
