/* The model of what ckube-gen generates (model.h). */
#include "gen/model.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/yaml.h"
#include "client/client_internal.h"
#include "common/text.h"
#include "gen/names.h"

/* Deeper schemas than this are refused: no real CRD nests so far, and
 * the generated C would be unreadable long before. */
enum { MAX_DEPTH = 48 };

/* What building one kind's types needs: where errors say they are, the
 * package's type names (shared by every kind, so that two kinds' types
 * cannot clash either). */
typedef struct build {
    const char *where;   /* "crd.yaml: networks.samplecrd.k8s.io, version v1" */
    const char *kindver; /* "Network v1": with a path, names a type in clashes */
    gen_nameset *types;
    char **err;
    /* OpenAPI documents: their components.schemas (NULL for a CRD), the
     * package (definitions' type names), and the definitions being built,
     * innermost last (a $ref back into one of them is recursion). */
    const json_t *schemas;
    const char *package;
    const char *chain[MAX_DEPTH + 1];
    size_t nchain;
} build;

/* Where a name comes from, for clash messages and to let one origin
 * reserve a name twice: a CRD's types by kind and path; an OpenAPI
 * definition's by the definition, whichever path reached it (a shared
 * type such as Container is built once per reference, emitted once). */
static char *origin(const build *b, const char *path, const char *what);

/* Reserves `name` for `at` (its origin, origin()'s). true when new or
 * reserved by the same origin before; false with *b->err after a clash
 * ("%s: FIRST and AT would both be WHAT NAME; rename one"). */
static bool reserve(build *b, const char *name, const char *at, const char *what)
{
    const char *first = NULL;
    int rc = name && at ? gen_nameset_add(b->types, name, at, &first) : -1;
    if (rc > 0 && strcmp(first, at) == 0)
        return true;
    if (rc > 0)
        ckube__set_err(b->err, "%s: %s and %s would both be %s%s; rename one", b->where, first, at,
                       what, name);
    else if (rc < 0)
        ckube__set_err(b->err, "out of memory");
    return rc == 0;
}

static char *dupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

static char *origin(const build *b, const char *path, const char *what)
{
    if (b->nchain)
        return dupf("definition %s%s%s", b->chain[b->nchain - 1], what ? " " : "",
                    what ? what : "");
    return dupf("%s %s%s%s", b->kindver, *path ? path : ".", what ? " " : "", what ? what : "");
}

static void type_free(gen_type *t);

static void field_clear(gen_field *f)
{
    free(f->json_name);
    free(f->c_name);
    type_free(f->type);
}

static void fields_free(gen_field *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        field_clear(&f[i]);
    free(f);
}

static void type_free(gen_type *t)
{
    if (!t)
        return;
    free(t->path);
    free(t->c_name);
    free(t->origin);
    free(t->format);
    fields_free(t->fields, t->nfields);
    type_free(t->items);
    if (t->enum_values) {
        for (size_t i = 0; t->enum_values[i]; i++) {
            free(t->enum_values[i]);
            if (t->enum_macros)
                free(t->enum_macros[i]);
        }
        free(t->enum_values);
        free(t->enum_macros);
    }
    json_decref(t->default_value);
    free(t);
}

static bool flag(const json_t *schema, const char *key)
{
    return json_is_true(json_object_get(schema, key));
}

static gen_type *build_type(build *b, const json_t *schema, const char *path,
                            const char *struct_name, int depth);
static const char *schema_ref(const json_t *schema);
static gen_type *build_ref(build *b, const json_t *schema, const char *ref, const char *path,
                           int depth);

/* A struct's member names besides the field's own: what the generated
 * code adds for presence (docs/ckube-gen.md's table), which must not
 * clash with another field's name either. Into out[] (up to 3). */
static size_t companions(const gen_field *f, char out[4][300])
{
    size_t n = 0;
    gen_type_kind k = f->type->kind;
    if (k == GEN_INTEGER || k == GEN_NUMBER || k == GEN_BOOLEAN || k == GEN_ARRAY || k == GEN_MAP)
        snprintf(out[n++], sizeof out[0], "has_%s", f->c_name);
    if (k == GEN_ARRAY || k == GEN_MAP)
        snprintf(out[n++], sizeof out[0], "n_%s", f->c_name);
    if (k == GEN_MAP)
        snprintf(out[n++], sizeof out[0], "%s_keys", f->c_name);
    if (f->nullable)
        snprintf(out[n++], sizeof out[0], "%s_null", f->c_name);
    return n;
}

/* The constant of enum value `value` of field `field` in struct `st`:
 * STRUCT_FIELD_VALUE in capitals (malloc'd), or NULL when the value has
 * no letter or digit ("", "*") or out of memory. */
static char *enum_macro(const char *st, const char *field, const char *value)
{
    char *v = gen_c_part(value);
    if (!v)
        return NULL;
    char *m = dupf("%s_%s_%s", st, field, v);
    free(v);
    for (char *c = m; c && *c; c++)
        *c = (char)toupper((unsigned char)*c);
    return m;
}

/* The constants of a string field's enum (or of its elements'),
 * package-wide unique. Values that differ only in case or punctuation
 * ("replace" and "Replace", as real CRDs have) get none: neither name
 * would say which it is, and the field is a string either way. false
 * after an error. */
static bool name_enums(build *b, gen_field *f, const char *struct_name, const char *fpath)
{
    gen_type *t = f->type->kind == GEN_STRING ? f->type : f->type->items;
    if (!t || t->kind != GEN_STRING || !t->enum_values)
        return true;
    size_t n = 0;
    while (t->enum_values[n])
        n++;
    char **m = t->enum_macros = calloc(n + 1, sizeof(char *));
    bool *twin = calloc(n + 1, sizeof(bool));
    bool ok = m && twin;
    for (size_t i = 0; ok && i < n; i++)
        m[i] = enum_macro(struct_name, f->c_name, t->enum_values[i]);
    for (size_t i = 0; ok && i < n; i++)
        for (size_t k = i + 1; m[i] && k < n; k++)
            if (m[k] && !strcmp(m[i], m[k]))
                twin[i] = twin[k] = true;
    for (size_t i = 0; ok && i < n; i++) {
        if (twin[i]) {
            free(m[i]);
            m[i] = NULL;
        }
        if (!m[i])
            continue;
        char *what = dupf(".%s enum \"%s\"", f->json_name, t->enum_values[i]);
        char *at =
            what ? (b->nchain ? origin(b, fpath, what)
                              : dupf("%s %s enum \"%s\"", b->kindver, fpath, t->enum_values[i]))
                 : NULL;
        ok = reserve(b, m[i], at, "the constant ");
        free(what);
        free(at);
    }
    if (!ok)
        ckube__set_err(b->err, "out of memory"); /* (only if nothing else said why) */
    free(twin);
    return ok;
}

/* Adds the field `json_name` of the object at `path` (named `struct_name`)
 * to *t; false after an error. */
static bool add_field(build *b, gen_type *t, gen_nameset *members, const char *json_name,
                      const json_t *schema, const json_t *required, const char *path,
                      const char *struct_name, int depth)
{
    char *fpath = dupf("%s.%s", path, json_name);
    char *c = gen_c_name(json_name);
    if (!fpath || !c) {
        ckube__set_err(b->err,
                       "%s: %s.%s: the property's name has no letter or digit to name it in C",
                       b->where, path, json_name);
        free(fpath);
        free(c);
        return false;
    }
    gen_field f = {.json_name = strdup(json_name), .c_name = c};
    /* a nested struct's name: its parent's and the member's */
    char *part = gen_c_part(json_name);
    char *sub = part ? dupf("%s_%s", struct_name, part) : NULL;
    free(part);
    f.type = f.json_name && sub ? build_type(b, schema, fpath, sub, depth + 1) : NULL;
    free(sub);
    if (!f.type) {
        ckube__set_err(b->err, "out of memory");
        free(f.json_name);
        free(f.c_name);
        free(fpath);
        return false;
    }
    f.nullable = flag(schema, "nullable");
    if (!name_enums(b, &f, struct_name, fpath)) {
        field_clear(&f);
        free(fpath);
        return false;
    }
    size_t i;
    json_t *r;
    json_array_foreach(required, i, r)
    {
        if (json_is_string(r) && !strcmp(json_string_value(r), json_name))
            f.required = true;
    }
    char names[5][300];
    snprintf(names[0], sizeof names[0], "%s", f.c_name);
    size_t n = 1 + companions(&f, names + 1);
    for (size_t k = 0; k < n; k++) {
        const char *first = NULL;
        int rc = gen_nameset_add(members, names[k], fpath, &first);
        if (rc != 0) {
            if (rc > 0)
                ckube__set_err(b->err, "%s: %s and %s are both \"%s\" in C (struct %s); rename one",
                               b->where, first, fpath, names[k], struct_name);
            else
                ckube__set_err(b->err, "out of memory");
            field_clear(&f);
            free(fpath);
            return false;
        }
    }
    free(fpath);
    gen_field *nf = realloc(t->fields, (t->nfields + 1) * sizeof *nf);
    if (!nf) {
        ckube__set_err(b->err, "out of memory");
        field_clear(&f);
        return false;
    }
    t->fields = nf;
    t->fields[t->nfields++] = f;
    return true;
}

/* What the generated code names after each struct S (S_new, S_free...;
 * a kind also has S_type, S_decode...), reserved with the type names so
 * that a property named "free" or "info" is a clear error, not C that
 * does not compile. false after an error. */
static bool name_functions(build *b, const char *struct_name, const char *from, bool root)
{
    static const char *const every[] = {"info", "new", "free", "copy", "set_defaults"};
    /* (no "list": a kind whose plural is its name, Endpoints, has its
     * client's PKG_v1_endpoints_list) */
    static const char *const kind[] = {"type",      "decode",  "encode", "to_json",
                                       "from_json", "list_at", "of"};
    for (size_t i = 0; i < 12; i++) {
        if (i >= 5 && !root)
            break;
        const char *suffix = i < 5 ? every[i] : kind[i - 5];
        char *name = dupf("%s_%s", struct_name, suffix);
        char *at = dupf("%s (its function %s)", from, suffix);
        bool ok = reserve(b, name, at, "");
        free(name);
        free(at);
        if (!ok)
            return false;
    }
    return true;
}

/* The typed client's functions of a kind, PKG_VERSION_PLURAL_get...,
 * reserved with the type names. false after an error. */
static bool name_client(build *b, const char *prefix)
{
    static const char *const verbs[] = {
        "get",        "list",          "watch",    "watch_next", "create",
        "update",     "update_status", "patch",    "delete",     "delete_collection",
        "get_scale",  "update_scale",  "informer", "fake_add",   "fake_update",
        "fake_apply", "fake_get",
    };
    for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
        char *name = dupf("%s_%s", prefix, verbs[i]);
        char *at = dupf("%s (its client's %s)", b->kindver, verbs[i]);
        bool ok = reserve(b, name, at, "");
        free(name);
        free(at);
        if (!ok)
            return false;
    }
    return true;
}

/* An object with properties: a struct named struct_name. */
static bool build_struct(build *b, gen_type *t, const json_t *schema, const char *path,
                         const char *struct_name, int depth)
{
    const char *first = NULL;
    char *at = origin(b, path, NULL);
    if (!reserve(b, struct_name, at, "the C type ")) {
        free(at);
        return false;
    }
    t->origin = at;
    if (!name_functions(b, struct_name, at, depth == 0))
        return false;
    if (!(t->c_name = strdup(struct_name))) {
        ckube__set_err(b->err, "out of memory");
        return false;
    }
    gen_nameset *members = gen_nameset_new();
    if (!members) {
        ckube__set_err(b->err, "out of memory");
        return false;
    }
    bool root = depth == 0, ok = true;
    if (root) { /* every object has these, typed by the runtime */
        const char *fixed[] = {"api_version", "kind", "metadata", "has_metadata"};
        for (size_t i = 0; i < 4 && ok; i++)
            ok = gen_nameset_add(members, fixed[i], ".", &first) == 0;
    }
    const json_t *props = json_object_get(schema, "properties");
    const json_t *required = json_object_get(schema, "required");
    const char *name;
    const json_t *sub;
    json_object_foreach((json_t *)props, name, sub)
    {
        if (!ok)
            break;
        if (root &&
            (!strcmp(name, "apiVersion") || !strcmp(name, "kind") || !strcmp(name, "metadata")))
            continue;
        ok = add_field(b, t, members, name, sub, required, path, struct_name, depth);
    }
    gen_nameset_free(members);
    return ok;
}

/* Whether an element's schema makes a GEN_JSON element (model.h). */
static bool elem_as_json(const json_t *s)
{
    const char *type = json_string_value(json_object_get(s, "type"));
    bool nullable = flag(s, "nullable");
    if (flag(s, "x-kubernetes-int-or-string"))
        return nullable;
    if (!type || flag(s, "x-kubernetes-embedded-resource"))
        return false; /* (JSON already, or an error build_type reports) */
    if (!strcmp(type, "array"))
        return true;
    if (!strcmp(type, "object") && !json_object_get(s, "properties") &&
        json_is_object(json_object_get(s, "additionalProperties")))
        return true;
    return nullable && strcmp(type, "string");
}

/* An array's or map's element type. */
static gen_type *build_elem(build *b, const json_t *schema, const char *path,
                            const char *struct_name, int depth)
{
    if (!json_is_object(schema) || !elem_as_json(schema))
        return build_type(b, schema, path, struct_name, depth);
    gen_type *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(path))) {
        ckube__set_err(b->err, "out of memory");
        free(t);
        return NULL;
    }
    t->kind = GEN_JSON;
    t->nullable = flag(schema, "nullable");
    return t;
}

/* ---- OpenAPI documents ------------------------------------------------------ */

#define SCHEMAS_PREFIX "#/components/schemas/"

/* The definition a schema stands for: {"$ref": R}, or Kubernetes' way of
 * describing a field of a named type, {"allOf": [{"$ref": R}], ...}.
 * NULL when it is a schema of its own. */
static const char *schema_ref(const json_t *schema)
{
    const char *ref = json_string_value(json_object_get(schema, "$ref"));
    const json_t *all = json_object_get(schema, "allOf");
    if (!ref && json_array_size(all) == 1)
        ref = json_string_value(json_object_get(json_array_get(all, 0), "$ref"));
    return ref;
}

/* A type that is no struct of the package: made from its kind. */
static gen_type *simple_type(build *b, const char *path, gen_type_kind kind, const char *format)
{
    gen_type *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(*path ? path : ".")) ||
        (format && !(t->format = strdup(format)))) {
        ckube__set_err(b->err, "out of memory");
        if (t)
            free(t->path);
        free(t);
        return NULL;
    }
    t->kind = kind;
    return t;
}

/* Definitions held by libckube's own types, or as the API conventions
 * write them (a Quantity and a Time are strings on the wire). */
static gen_type *known_definition(build *b, const char *def, const char *path)
{
    static const char meta[] = "io.k8s.apimachinery.pkg.apis.meta.v1.";
    if (!strcmp(def, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")) {
        gen_type *t = simple_type(b, path, GEN_OBJECT, NULL);
        if (t && (!(t->c_name = strdup("ckube_object_meta")))) {
            ckube__set_err(b->err, "out of memory");
            type_free(t);
            return NULL;
        }
        if (t)
            t->external = true;
        return t;
    }
    if (!strncmp(def, meta, sizeof meta - 1) &&
        (!strcmp(def + sizeof meta - 1, "Time") || !strcmp(def + sizeof meta - 1, "MicroTime")))
        return simple_type(b, path, GEN_STRING, "date-time");
    if (!strcmp(def, "io.k8s.apimachinery.pkg.api.resource.Quantity"))
        return simple_type(b, path, GEN_STRING, "quantity");
    if (!strcmp(def, "io.k8s.apimachinery.pkg.util.intstr.IntOrString"))
        return simple_type(b, path, GEN_INT_OR_STRING, NULL);
    return NULL;
}

/* A definition's struct name: PKG_VERSION_NAME from the definition's own
 * last two segments ("io.k8s.api.core.v1.PodSpec": core_v1_pod_spec), so
 * that a type shared by many fields (Container) is one C type. */
static char *definition_name(const build *b, const char *def)
{
    const char *last = strrchr(def, '.');
    if (!last || last == def)
        return NULL;
    const char *ver = last - 1;
    while (ver > def && ver[-1] != '.')
        ver--;
    char *v = strndup(ver, (size_t)(last - ver)), *cv = v ? gen_c_part(v) : NULL;
    char *cn = gen_c_part(last + 1);
    char *name = cv && cn ? dupf("%s_%s_%s", b->package, cv, cn) : NULL;
    free(v);
    free(cv);
    free(cn);
    return name;
}

/* The type of a field that refers to definition `ref`. */
static gen_type *build_ref(build *b, const json_t *schema, const char *ref, const char *path,
                           int depth)
{
    const char *where = *path ? path : ".";
    if (strncmp(ref, SCHEMAS_PREFIX, sizeof SCHEMAS_PREFIX - 1)) {
        ckube__set_err(b->err, "%s: %s: $ref %s: only references to %s... are supported", b->where,
                       where, ref, SCHEMAS_PREFIX);
        return NULL;
    }
    const char *def = ref + sizeof SCHEMAS_PREFIX - 1;
    gen_type *t = known_definition(b, def, path);
    if (!t && !(b->err && *b->err)) {
        bool recursive = false;
        for (size_t i = 0; i < b->nchain; i++)
            recursive |= !strcmp(b->chain[i], def);
        const json_t *target = json_object_get(b->schemas, def);
        char *name = definition_name(b, def);
        if (!target) {
            ckube__set_err(b->err, "%s: %s: $ref %s: no such schema in the document", b->where,
                           where, ref);
        } else if (recursive || b->nchain > MAX_DEPTH) {
            t = simple_type(b, path, GEN_JSON, NULL); /* (JSONSchemaProps holds itself) */
        } else if (!name) {
            ckube__set_err(b->err, "%s: %s: $ref %s: no C name for it", b->where, where, ref);
        } else {
            b->chain[b->nchain++] = def;
            t = build_type(b, target, path, name, depth);
            b->nchain--;
        }
        free(name);
    }
    if (t) { /* what the referring field says of itself */
        const json_t *dflt = json_object_get(schema, "default");
        if (dflt && !t->default_value)
            t->default_value = json_incref((json_t *)dflt);
        t->nullable |= flag(schema, "nullable");
    }
    return t;
}

static gen_type *build_type(build *b, const json_t *schema, const char *path,
                            const char *struct_name, int depth)
{
    const char *where = *path ? path : ".";
    if (!json_is_object(schema)) {
        ckube__set_err(b->err, "%s: %s: the schema is not an object", b->where, where);
        return NULL;
    }
    if (depth > MAX_DEPTH) {
        ckube__set_err(b->err, "%s: %s: nested more than %d deep", b->where, where, MAX_DEPTH);
        return NULL;
    }
    const char *ref = b->schemas ? schema_ref(schema) : NULL;
    if (ref)
        return build_ref(b, schema, ref, path, depth);
    gen_type *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(where))) {
        ckube__set_err(b->err, "out of memory");
        free(t);
        return NULL;
    }
    const char *type = json_string_value(json_object_get(schema, "type"));
    if (!type && b->schemas && json_object_get(schema, "properties"))
        type = "object"; /* (OpenAPI documents leave it out at times) */
    const char *format = json_string_value(json_object_get(schema, "format"));
    const json_t *props = json_object_get(schema, "properties");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    bool preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    bool ok = true;
    if (format && !(t->format = strdup(format)))
        ok = false;
    t->nullable = flag(schema, "nullable");
    json_t *def = json_object_get(schema, "default");
    if (def)
        t->default_value = json_incref(def);
    if (flag(schema, "x-kubernetes-int-or-string")) {
        t->kind = GEN_INT_OR_STRING;
    } else if (flag(schema, "x-kubernetes-embedded-resource")) {
        t->kind = GEN_JSON; /* an object of any kind: apiVersion and kind say */
    } else if (!type && (preserve || b->schemas) && !props) {
        t->kind = GEN_JSON; /* (in an OpenAPI document: RawExtension, JSON...) */
    } else if (!type) {
        /* upstream's structural rule, in its words */
        ckube__set_err(b->err,
                       "%s: %s.type: Required value: must not be empty for specified object fields",
                       b->where, where);
        ok = false;
    } else if (!strcmp(type, "object")) {
        if (props && addl) {
            ckube__set_err(b->err,
                           "%s: %s.additionalProperties: Forbidden: additionalProperties and "
                           "properties are mutual exclusive",
                           b->where, where);
            ok = false;
        } else if (props || depth == 0) {
            t->kind = GEN_OBJECT;
            ok = build_struct(b, t, schema, path, struct_name, depth);
        } else if (json_is_object(addl)) {
            t->kind = GEN_MAP;
            char *vpath = dupf("%s[*]", where), *vname = dupf("%s_value", struct_name);
            t->items = vpath && vname ? build_elem(b, addl, vpath, vname, depth + 1) : NULL;
            ok = t->items != NULL;
            free(vpath);
            free(vname);
        } else {
            t->kind = GEN_JSON; /* a free-form object */
        }
    } else if (!strcmp(type, "array")) {
        t->kind = GEN_ARRAY;
        const json_t *items = json_object_get(schema, "items");
        if (!items) {
            ckube__set_err(b->err, "%s: %s.items: Required value: must be specified", b->where,
                           where);
            ok = false;
        } else {
            char *ipath = dupf("%s[*]", where), *iname = dupf("%s_item", struct_name);
            t->items = ipath && iname ? build_elem(b, items, ipath, iname, depth + 1) : NULL;
            ok = t->items != NULL;
            free(ipath);
            free(iname);
        }
    } else if (!strcmp(type, "string")) {
        t->kind = GEN_STRING;
        const json_t *en = json_object_get(schema, "enum");
        if (json_is_array(en) && json_array_size(en)) {
            t->enum_values = calloc(json_array_size(en) + 1, sizeof(char *));
            size_t i, n = 0;
            json_t *v;
            json_array_foreach(en, i, v)
            {
                if (json_is_string(v) && t->enum_values &&
                    !(t->enum_values[n++] = strdup(json_string_value(v))))
                    ok = false;
            }
            ok = ok && t->enum_values;
        }
    } else if (!strcmp(type, "integer")) {
        t->kind = GEN_INTEGER;
    } else if (!strcmp(type, "number")) {
        t->kind = GEN_NUMBER;
    } else if (!strcmp(type, "boolean")) {
        t->kind = GEN_BOOLEAN;
    } else {
        ckube__set_err(b->err,
                       "%s: %s.type: Unsupported value: \"%s\": supported values: \"array\", "
                       "\"boolean\", \"integer\", \"number\", \"object\", \"string\"",
                       b->where, where, type);
        ok = false;
    }
    if (!ok) {
        ckube__set_err(b->err, "out of memory"); /* (only if nothing else said why) */
        type_free(t);
        return NULL;
    }
    return t;
}

/* ---- the model ---------------------------------------------------------------- */

gen_model *gen_model_new(const char *package, char **err)
{
    char *c = package ? gen_c_name(package) : NULL;
    if (!c || strcmp(c, package)) {
        ckube__set_err(err,
                       "--package %s: a package name is a C identifier's prefix in snake case "
                       "(letters, digits, '_'; not a C keyword)%s%s",
                       package ? package : "(none)", c ? "; perhaps " : "", c ? c : "");
        free(c);
        return NULL;
    }
    gen_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(c);
        ckube__set_err(err, "out of memory");
        return NULL;
    }
    m->package = c;
    return m;
}

static void kind_clear(gen_kind *k)
{
    free(k->group);
    free(k->version);
    free(k->kind);
    free(k->plural);
    free(k->client);
    type_free(k->root);
}

void gen_model_free(gen_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nkinds; i++)
        kind_clear(&m->kinds[i]);
    free(m->kinds);
    free(m->package);
    if (m->kinds_filter)
        for (char **f = m->kinds_filter; *f; f++)
            free(*f);
    free(m->kinds_filter);
    free(m);
}

/* Adds every struct name of the tree at t to set. */
static int tree_types(build *b, const gen_type *t, const gen_kind *k)
{
    if (!t)
        return 0;
    if (t->c_name && !t->external &&
        (!reserve(b, t->c_name, t->origin, "the C type ") ||
         !name_functions(b, t->c_name, t->origin, t == k->root)))
        return -1;
    for (size_t i = 0; i < t->nfields; i++)
        if (tree_types(b, t->fields[i].type, k) < 0)
            return -1;
    return tree_types(b, t->items, k);
}

/* The type names the model has already, so that a new kind's cannot
 * clash with them (kinds Network and NetworkSpec: the first's .spec and
 * the second's root would be one name). */
static int model_types(const gen_model *m, gen_nameset *set)
{
    for (size_t i = 0; i < m->nkinds; i++) {
        const gen_kind *k = &m->kinds[i];
        char *kindver = dupf("%s %s", k->kind, k->version);
        /* (the same origins as when the kind was built: no clash here) */
        build b = {.where = "", .kindver = kindver, .types = set};
        bool ok = kindver && tree_types(&b, k->root, k) == 0 && name_client(&b, k->client);
        free(kindver);
        if (!ok)
            return -1;
    }
    return 0;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

/* One version of a CRD as a kind in `out`. */
static int add_version(gen_model *m, build *b, const json_t *spec, const char *version,
                       const json_t *schema, const json_t *subresources, gen_kind *out)
{
    const char *kind = str_at(spec, "names", "kind");
    char *cv = gen_c_part(version), *ck = gen_c_part(kind);
    char *cp = gen_c_part(str_at(spec, "names", "plural"));
    char *root = cv && ck ? dupf("%s_%s_%s", m->package, cv, ck) : NULL;
    char *client = cv && cp ? dupf("%s_%s_%s", m->package, cv, cp) : NULL;
    free(cv);
    free(ck);
    free(cp);
    if (!root || !client) {
        ckube__set_err(b->err, "%s: no C name for kind %s", b->where, kind);
        free(root);
        free(client);
        return -1;
    }
    if (!name_client(b, client)) {
        free(root);
        free(client);
        return -1;
    }
    /* no schema (v1beta1 without validation): apiVersion, kind and
     * metadata typed, everything else kept as it comes */
    json_t *none = schema ? NULL
                          : json_pack("{s:s, s:b}", "type", "object",
                                      "x-kubernetes-preserve-unknown-fields", 1);
    gen_type *t = build_type(b, schema ? schema : none, "", root, 0);
    json_decref(none);
    free(root);
    if (!t) {
        free(client);
        return -1;
    }
    *out = (gen_kind){
        .group = strdup(str_at(spec, "group", NULL)),
        .version = strdup(version),
        .kind = strdup(kind),
        .plural = strdup(str_at(spec, "names", "plural")),
        .namespaced =
            !str_at(spec, "scope", NULL) || !strcmp(str_at(spec, "scope", NULL), "Namespaced"),
        .status_subresource = json_object_get(subresources, "status") != NULL,
        .scale_subresource = json_object_get(subresources, "scale") != NULL,
        .client = client,
        .root = t,
    };
    if (!out->group || !out->version || !out->kind || !out->plural) {
        kind_clear(out);
        ckube__set_err(b->err, "out of memory");
        return -1;
    }
    return 0;
}

int gen_model_add_crd(gen_model *m, const json_t *crd, const char *source, char **err)
{
    const char *av = str_at(crd, "apiVersion", NULL), *k = str_at(crd, "kind", NULL);
    const char *name = str_at(crd, "metadata", "name");
    const json_t *spec = json_object_get(crd, "spec");
    bool v1 = av && !strcmp(av, "apiextensions.k8s.io/v1");
    if (!k || strcmp(k, "CustomResourceDefinition") ||
        !(v1 || (av && !strcmp(av, "apiextensions.k8s.io/v1beta1")))) {
        ckube__set_err(err,
                       "%s: %s%s%s is not a CustomResourceDefinition (apiextensions.k8s.io/v1 or "
                       "v1beta1)",
                       source, k ? k : "a document", name ? " " : "", name ? name : "");
        return -1;
    }
    if (!str_at(spec, "group", NULL) || !str_at(spec, "names", "kind") ||
        !str_at(spec, "names", "plural")) {
        ckube__set_err(err,
                       "%s: CRD %s: spec.group, spec.names.kind and spec.names.plural are required",
                       source, name ? name : "(no name)");
        return -1;
    }
    /* the served versions, with the schema and subresources of each
     * (v1beta1's top-level ones apply to versions without their own) */
    const json_t *versions = json_object_get(spec, "versions");
    json_t *single = NULL;
    if (!json_array_size(versions) && str_at(spec, "version", NULL)) {
        single = json_pack("[{s:s, s:b}]", "name", str_at(spec, "version", NULL), "served", 1);
        versions = single;
    }
    const json_t *top_schema =
        json_object_get(json_object_get(spec, "validation"), "openAPIV3Schema");
    const json_t *top_sub = json_object_get(spec, "subresources");
    gen_nameset *types = gen_nameset_new();
    size_t n0 = m->nkinds;
    int rc = types && model_types(m, types) == 0 ? 0 : -1;
    if (rc)
        ckube__set_err(err, "out of memory");
    size_t i;
    json_t *ver;
    json_array_foreach(versions, i, ver)
    {
        if (rc)
            break;
        const char *vname = str_at(ver, "name", NULL);
        if (!vname || !json_is_true(json_object_get(ver, "served")))
            continue;
        const json_t *schema = json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema");
        const json_t *sub = json_object_get(ver, "subresources");
        char *where = dupf("%s: CRD %s, version %s", source, name ? name : "(no name)", vname);
        char *kindver = dupf("%s %s", str_at(spec, "names", "kind"), vname);
        build b = {.where = where, .kindver = kindver, .types = types, .err = err};
        gen_kind *nk = where && kindver ? realloc(m->kinds, (m->nkinds + 1) * sizeof *nk) : NULL;
        if (!nk) {
            ckube__set_err(err, "out of memory");
            rc = -1;
        } else {
            m->kinds = nk;
            rc = add_version(m, &b, spec, vname, schema ? schema : top_schema, sub ? sub : top_sub,
                             &m->kinds[m->nkinds]);
            if (!rc)
                m->nkinds++;
        }
        free(where);
        free(kindver);
    }
    if (!rc && m->nkinds == n0) {
        ckube__set_err(err, "%s: CRD %s serves no version", source, name ? name : "(no name)");
        rc = -1;
    }
    if (rc) { /* the model as it was */
        while (m->nkinds > n0)
            kind_clear(&m->kinds[--m->nkinds]);
    }
    json_decref(single);
    gen_nameset_free(types);
    return rc;
}

/* ---- kinds of an OpenAPI document -------------------------------------------- */

/* The "get" operation of a path item, when it reads one object of a kind
 * (not a subresource): its group, version and kind. */
static const json_t *get_gvk(const char *p, const json_t *item)
{
    const json_t *get = json_object_get(item, "get");
    const char *action = json_string_value(json_object_get(get, "x-kubernetes-action"));
    size_t n = strlen(p);
    if (!action || strcmp(action, "get") || n < 7 || strcmp(p + n - 7, "/{name}"))
        return NULL;
    return json_object_get(get, "x-kubernetes-group-version-kind");
}

/* A kind that is only ever created (TokenReview, SubjectAccessReview):
 * the "post" of its collection path. */
static const json_t *post_gvk(const char *p, const json_t *item)
{
    const json_t *post = json_object_get(item, "post");
    const char *action = json_string_value(json_object_get(post, "x-kubernetes-action"));
    if (!action || strcmp(action, "post"))
        return NULL;
    /* a collection: no parameter but the namespace (not a subresource of
     * one object, such as pods/{name}/binding) */
    for (const char *b = strchr(p, '{'); b; b = strchr(b + 1, '{'))
        if (strncmp(b, "{namespace}", 11))
            return NULL;
    return json_object_get(post, "x-kubernetes-group-version-kind");
}

/* The definition an operation (get, or post) answers with. */
static const char *answer_ref(const json_t *item, const char *op)
{
    const json_t *responses = json_object_get(json_object_get(item, op), "responses");
    const json_t *ok = json_object_get(responses, "200");
    if (!ok)
        ok = json_object_get(responses, "201");
    const json_t *content = json_object_get(ok, "content");
    const char *ref = json_string_value(json_object_get(
        json_object_get(json_object_get(content, "application/json"), "schema"), "$ref"));
    return ref && !strncmp(ref, SCHEMAS_PREFIX, sizeof SCHEMAS_PREFIX - 1)
               ? ref + sizeof SCHEMAS_PREFIX - 1
               : NULL;
}

static bool wanted(const gen_model *m, const char *kind)
{
    if (!m->kinds_filter)
        return true;
    for (char **k = m->kinds_filter; *k; k++)
        if (!strcmp(*k, kind))
            return true;
    return false;
}

/* One kind of the document: the one of path p (".../PLURAL/{name}"). */
static int add_openapi_kind(gen_model *m, build *b, const json_t *paths, const char *p,
                            const json_t *gvk, const char *def, gen_kind *out)
{
    const char *group = json_string_value(json_object_get(gvk, "group"));
    const char *version = json_string_value(json_object_get(gvk, "version"));
    const char *kind = json_string_value(json_object_get(gvk, "kind"));
    size_t n = strlen(p) - 7; /* without "/{name}" */
    const char *slash = n ? memrchr(p, '/', n) : NULL;
    char *plural = slash ? strndup(slash + 1, n - (size_t)(slash + 1 - p)) : NULL;
    char *status = dupf("%s/status", p), *scale = dupf("%s/scale", p);
    char *cv = version ? gen_c_part(version) : NULL, *ck = kind ? gen_c_part(kind) : NULL;
    char *cp = plural ? gen_c_part(plural) : NULL;
    char *root = cv && ck ? dupf("%s_%s_%s", m->package, cv, ck) : NULL;
    char *client = cv && cp ? dupf("%s_%s_%s", m->package, cv, cp) : NULL;
    gen_type *t = NULL;
    int rc = -1;
    if (!group || !version || !kind || !root || !client || !status || !scale) {
        ckube__set_err(b->err, "%s: %s: no group, version, kind or plural to name it", b->where, p);
    } else if (name_client(b, client)) {
        b->chain[b->nchain++] = def;
        t = build_type(b, json_object_get(b->schemas, def), "", root, 0);
        b->nchain--;
    }
    if (t) {
        *out = (gen_kind){
            .group = strdup(group),
            .version = strdup(version),
            .kind = strdup(kind),
            .plural = plural,
            .namespaced = strstr(p, "/namespaces/{namespace}/") != NULL,
            .status_subresource = json_object_get(paths, status) != NULL,
            .scale_subresource = json_object_get(paths, scale) != NULL,
            .client = client,
            .root = t,
        };
        plural = client = NULL;
        rc = 0;
        if (!out->group || !out->version || !out->kind) {
            kind_clear(out);
            ckube__set_err(b->err, "out of memory");
            rc = -1;
        }
    }
    free(plural);
    free(client);
    free(root);
    free(status);
    free(scale);
    free(cv);
    free(ck);
    free(cp);
    return rc;
}

int gen_model_add_openapi(gen_model *m, const json_t *doc, const char *source, char **err)
{
    const json_t *schemas = json_object_get(json_object_get(doc, "components"), "schemas");
    const json_t *paths = json_object_get(doc, "paths");
    if (!json_is_object(schemas) || !json_is_object(paths)) {
        ckube__set_err(err, "%s: an OpenAPI v3 document needs paths and components.schemas",
                       source);
        return -1;
    }
    gen_nameset *types = gen_nameset_new();
    size_t n0 = m->nkinds;
    int rc = types && model_types(m, types) == 0 ? 0 : -1;
    if (rc)
        ckube__set_err(err, "out of memory");
    const char *p;
    const json_t *item;
    /* kinds read one by one (.../PLURAL/{name}); then kinds that are only
     * created, which no get path names */
    for (int pass = 0; pass < 2; pass++) {
        json_object_foreach((json_t *)paths, p, item)
        {
            const json_t *gvk = rc ? NULL : pass ? post_gvk(p, item) : get_gvk(p, item);
            const char *kind = json_string_value(json_object_get(gvk, "kind"));
            const char *version = json_string_value(json_object_get(gvk, "version"));
            const char *def = gvk ? answer_ref(item, pass ? "post" : "get") : NULL;
            /* (a group-version-kind without a kind or version names none) */
            if (!kind || !version || !def || !wanted(m, kind))
                continue;
            bool seen = false; /* (a kind's namespaced and all-namespaces paths) */
            for (size_t i = n0; i < m->nkinds; i++)
                seen |= !strcmp(m->kinds[i].kind, kind) && !strcmp(m->kinds[i].version, version);
            if (seen)
                continue;
            char *where = dupf("%s: %s", source, def);
            char *kindver = dupf("%s %s", kind, version);
            char *one = pass ? dupf("%s/{name}", p) : strdup(p); /* (the path of one) */
            build b = {.where = where,
                       .kindver = kindver,
                       .types = types,
                       .err = err,
                       .schemas = schemas,
                       .package = m->package};
            gen_kind *nk =
                where && kindver && one ? realloc(m->kinds, (m->nkinds + 1) * sizeof *nk) : NULL;
            if (!nk) {
                ckube__set_err(err, "out of memory");
                rc = -1;
            } else {
                m->kinds = nk;
                rc = add_openapi_kind(m, &b, paths, one, gvk, def, &m->kinds[m->nkinds]);
                if (!rc)
                    m->nkinds++;
            }
            free(where);
            free(kindver);
            free(one);
        }
    }
    if (!rc && m->nkinds == n0 && !m->kinds_filter) {
        ckube__set_err(err, "%s: the document serves no kind", source);
        rc = -1;
    }
    if (rc) {
        while (m->nkinds > n0)
            kind_clear(&m->kinds[--m->nkinds]);
    }
    gen_nameset_free(types);
    return rc;
}

int gen_model_check_kinds(const gen_model *m, char **err)
{
    for (char **k = m->kinds_filter; k && *k; k++) {
        bool found = false;
        for (size_t i = 0; i < m->nkinds; i++)
            found |= !strcmp(m->kinds[i].kind, *k);
        if (!found) {
            ckube__set_err(err, "--kinds: no kind %s is served by the OpenAPI documents given", *k);
            return -1;
        }
    }
    return 0;
}

int gen_model_set_kinds(gen_model *m, const char *list, char **err)
{
    size_t n = 1;
    for (const char *c = list; *c; c++)
        n += *c == ',';
    char **v = calloc(n + 1, sizeof *v);
    char *copy = strdup(list);
    size_t k = 0;
    char *save = NULL;
    for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; v && tok;
         tok = strtok_r(NULL, ",", &save))
        if (*tok && !(v[k++] = strdup(tok)))
            break;
    free(copy);
    if (!v || !copy || !k) {
        for (size_t i = 0; v && i < k; i++)
            free(v[i]);
        free(v);
        ckube__set_err(err, v && copy ? "--kinds: name at least one kind" : "out of memory");
        return -1;
    }
    if (m->kinds_filter)
        for (char **f = m->kinds_filter; *f; f++)
            free(*f);
    free(m->kinds_filter);
    m->kinds_filter = v;
    return 0;
}

int gen_model_add_file(gen_model *m, const char *path, char **err)
{
    size_t len = 0;
    char *buf = ckube__read_file(path, &len);
    if (!buf) {
        ckube__set_err(err, "%s: cannot %s: %m", path,
                       errno == ENOENT || errno == EACCES ? "open" : "read");
        return -1;
    }
    json_t *docs = NULL;
    char *yerr = NULL;
    int rc = ckube_yaml_load_all(buf, len, &docs, &yerr);
    free(buf);
    if (rc != 0) {
        ckube__set_err(err, "%s: %s", path, yerr ? yerr : "not YAML or JSON");
        free(yerr);
        return -1;
    }
    size_t n0 = m->nkinds, i;
    json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        if (json_is_null(doc))
            continue; /* an empty document ("---" at the end) */
        rc = json_object_get(doc, "openapi") ? gen_model_add_openapi(m, doc, path, err)
                                             : gen_model_add_crd(m, doc, path, err);
        if (rc != 0)
            break;
    }
    if (rc) {
        while (m->nkinds > n0)
            kind_clear(&m->kinds[--m->nkinds]);
    }
    json_decref(docs);
    return rc;
}
