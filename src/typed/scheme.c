/* A scheme of typed kinds (ckube/scheme.h). A list, searched linearly: a
 * program knows tens of kinds, and decoding the object costs far more
 * than finding its type. */
#include "ckube/scheme.h"

#include <stdlib.h>
#include <string.h>

struct ckube_scheme {
    const ckube_type_info **types;
    size_t n;
};

ckube_scheme *ckube_scheme_new(void)
{
    return calloc(1, sizeof(ckube_scheme));
}

void ckube_scheme_free(ckube_scheme *s)
{
    if (!s)
        return;
    free(s->types);
    free(s);
}

/* Whether type t is served as apiVersion av: "GROUP/VERSION", or
 * "VERSION" for the core group. */
static bool matches(const ckube_type_info *t, const char *av, const char *kind)
{
    if (strcmp(t->kind, kind))
        return false;
    const char *slash = strchr(av, '/');
    if (!slash)
        return !*t->group && !strcmp(t->version, av);
    size_t gl = (size_t)(slash - av);
    return strlen(t->group) == gl && !strncmp(t->group, av, gl) && !strcmp(t->version, slash + 1);
}

static const ckube_type_info *find(const ckube_scheme *s, const char *group, const char *version,
                                   const char *kind)
{
    for (size_t i = 0; i < s->n; i++) {
        const ckube_type_info *t = s->types[i];
        if (!strcmp(t->group, group) && !strcmp(t->version, version) && !strcmp(t->kind, kind))
            return t;
    }
    return NULL;
}

int ckube_scheme_add(ckube_scheme *s, const ckube_type_info *type)
{
    const ckube_type_info *have = find(s, type->group, type->version, type->kind);
    if (have)
        return have == type ? 0 : -1;
    const ckube_type_info **n = realloc(s->types, (s->n + 1) * sizeof *n);
    if (!n)
        return -1;
    s->types = n;
    s->types[s->n++] = type;
    return 0;
}

const ckube_type_info *ckube_scheme_lookup(const ckube_scheme *s, const char *api_version,
                                           const char *kind)
{
    if (!api_version || !kind)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (matches(s->types[i], api_version, kind))
            return s->types[i];
    return NULL;
}

/* client-go quotes the object's JSON in its missing-kind errors; at most
 * this much of it, as a message should stay readable. */
enum { QUOTE_MAX = 256 };

static ckube_status *missing(const char *what, const json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = text ? strlen(text) : 0;
    ckube_status *st = ckube_status_new(
        400, CKUBE_REASON_BAD_REQUEST, "Object '%s' is missing in '%.*s%s'", what,
        (int)(n > QUOTE_MAX ? QUOTE_MAX : n), text ? text : "", n > QUOTE_MAX ? "..." : "");
    free(text);
    return st;
}

int ckube_scheme_from_json(const ckube_scheme *s, const json_t *obj, ckube_typed **out,
                           ckube_status **err)
{
    if (err)
        *err = NULL;
    *out = NULL;
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    ckube_status *st = NULL;
    const ckube_type_info *t = NULL;
    if (!json_is_object(obj))
        st = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                              "couldn't get version/kind; json parse error: not an object");
    else if (!kind || !*kind)
        st = missing("Kind", obj);
    else if (!av || !*av)
        st = missing("apiVersion", obj);
    else if (!(t = ckube_scheme_lookup(s, av, kind)))
        st = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                              "no kind \"%s\" is registered for version \"%s\" in scheme \"ckube\"",
                              kind, av);
    if (st) {
        if (err)
            *err = st;
        else
            ckube_status_free(st);
        return -1;
    }
    *out = ckube_struct_from_json(t->object, obj, err);
    return *out ? 0 : -1;
}

int ckube_scheme_decode(const ckube_scheme *s, const char *json, size_t len, ckube_typed **out,
                        ckube_status **err)
{
    *out = NULL;
    if (err)
        *err = NULL;
    json_error_t e;
    json_t *j = json_loadb(json, len, 0, &e);
    if (!j) {
        if (err)
            *err = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST,
                                    "couldn't get version/kind; json parse error: line %d, column "
                                    "%d: %s",
                                    e.line, e.column, e.text);
        return -1;
    }
    int rc = ckube_scheme_from_json(s, j, out, err);
    json_decref(j);
    return rc;
}

char *ckube_typed_encode(const ckube_typed *obj)
{
    return obj ? ckube_struct_encode(obj->type->object, obj) : NULL;
}

json_t *ckube_typed_to_json(const ckube_typed *obj)
{
    return obj ? ckube_struct_to_json(obj->type->object, obj) : NULL;
}

ckube_typed *ckube_typed_copy(const ckube_typed *obj)
{
    return obj ? ckube_struct_copy(obj->type->object, obj) : NULL;
}

void ckube_typed_free(ckube_typed *obj)
{
    if (obj)
        ckube_struct_free(obj->type->object, obj);
}
