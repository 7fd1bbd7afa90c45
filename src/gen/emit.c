/* ckube-gen's C output (emit.h). */
#include "gen/emit.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "gen/names.h"

/* ---- the structs of a kind, in order --------------------------------------- */

typedef struct structs {
    const gen_type **v;
    size_t n;
    bool oom;
    gen_nameset *done; /* the package's structs emitted before (by name) */
} structs;

/* t's structs, pre-order: the kind's own first, then as the schema nests;
 * each name once in the package (an OpenAPI document's shared types are
 * built once per reference), libckube's own (ObjectMeta) never. */
static void collect(const gen_type *t, structs *out)
{
    if (!t || (t->kind == GEN_OBJECT && t->external))
        return;
    if (t->kind == GEN_OBJECT) {
        const char *first = NULL;
        int rc = gen_nameset_add(out->done, t->c_name, "", &first);
        if (rc < 0)
            out->oom = true;
        if (rc)
            return; /* emitted already (its fields too) */
        const gen_type **nv = realloc(out->v, (out->n + 1) * sizeof *nv);
        if (!nv) {
            out->oom = true;
            return;
        }
        out->v = nv;
        out->v[out->n++] = t;
    }
    for (size_t i = 0; i < t->nfields; i++)
        collect(t->fields[i].type, out);
    collect(t->items, out);
}

/* A kind's structs not emitted before; -1 when out of memory. */
static int collect_kind(const gen_kind *k, structs *all)
{
    collect(k->root, all);
    if (!all->oom)
        return 0;
    free(all->v);
    return -1;
}

/* ---- text ----------------------------------------------------------------- */

/* s as a C string literal: quotes, backslashes, '?' (trigraphs) and every
 * byte outside printable ASCII escaped (octal, three digits, so that a
 * following digit cannot join it). */
static void c_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\%03o", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* s inside a C comment: printable ASCII, and no end of comment. */
static void c_comment(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '*' && p[1] == '/')
            fputs("* ", f);
        else if (*p < 0x20 || *p >= 0x7f)
            fputc('?', f);
        else
            fputc(*p, f);
    }
}

static void upper(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(toupper((unsigned char)*s), f);
}

/* ---- C types -------------------------------------------------------------- */

/* An element's C type, held in place: its base name and how many '*'. */
static const char *elem_base(const gen_type *t, int *stars)
{
    *stars = 0;
    switch (t->kind) {
    case GEN_STRING:
        *stars = 1;
        return "char";
    case GEN_INTEGER:
        return "int64_t";
    case GEN_NUMBER:
        return "double";
    case GEN_BOOLEAN:
        return "bool";
    case GEN_OBJECT:
        return t->c_name;
    case GEN_INT_OR_STRING:
        return "ckube_int_or_string";
    default:
        *stars = 1;
        return "json_t";
    }
}

static void decl(FILE *f, const char *base, int stars, const char *name, const char *suffix)
{
    fprintf(f, "    %s %.*s%s%s;\n", base, stars, "****", name, suffix ? suffix : "");
}

static const char *kind_word(gen_type_kind k)
{
    switch (k) {
    case GEN_STRING:
        return "string";
    case GEN_INTEGER:
        return "integer";
    case GEN_NUMBER:
        return "number";
    case GEN_BOOLEAN:
        return "boolean";
    case GEN_OBJECT:
        return "object";
    case GEN_ARRAY:
        return "array";
    case GEN_MAP:
        return "map";
    case GEN_INT_OR_STRING:
        return "int-or-string";
    default:
        return "JSON";
    }
}

/* The comment above a member: its JSON name and what the schema says. */
static void member_comment(FILE *f, const gen_field *fl)
{
    const gen_type *t = fl->type;
    fputs("    /* \"", f);
    c_comment(f, fl->json_name);
    fprintf(f, "\": %s", kind_word(t->kind));
    if (t->kind == GEN_ARRAY || t->kind == GEN_MAP)
        fprintf(f, " of %s", kind_word(t->items->kind));
    const char *format = t->format ? t->format : t->items ? t->items->format : NULL;
    if (format) {
        fputs(", format ", f);
        c_comment(f, format);
    }
    if (fl->required)
        fputs(", required", f);
    if (fl->nullable)
        fputs(", nullable", f);
    if (t->default_value) {
        char *d = json_dumps(t->default_value, JSON_COMPACT | JSON_ENCODE_ANY);
        if (d) {
            fputs(", default ", f);
            c_comment(f, strlen(d) > 60 ? "(see set_defaults)" : d);
        }
        free(d);
    }
    fputs(" */\n", f);
}

static void member(FILE *f, const gen_field *fl)
{
    const gen_type *t = fl->type;
    int stars;
    const char *base;
    member_comment(f, fl);
    switch (t->kind) {
    case GEN_STRING:
        decl(f, "char", 1, fl->c_name, NULL);
        break;
    case GEN_OBJECT:
        decl(f, t->c_name, 1, fl->c_name, NULL);
        break;
    case GEN_INT_OR_STRING:
    case GEN_JSON:
        base = elem_base(t, &stars);
        decl(f, base, stars, fl->c_name, NULL);
        break;
    case GEN_ARRAY:
    case GEN_MAP:
        base = elem_base(t->items, &stars);
        if (t->kind == GEN_MAP)
            decl(f, "char", 2, fl->c_name, "_keys");
        decl(f, base, stars + 1, fl->c_name, NULL);
        fprintf(f, "    size_t n_%s;\n", fl->c_name);
        fprintf(f, "    bool has_%s;\n", fl->c_name);
        break;
    default: /* integer, number, boolean */
        base = elem_base(t, &stars);
        decl(f, base, stars, fl->c_name, NULL);
        fprintf(f, "    bool has_%s;\n", fl->c_name);
    }
    if (fl->nullable)
        fprintf(f, "    bool %s_null;\n", fl->c_name);
}

/* ---- the header ------------------------------------------------------------ */

static void constants(FILE *f, const gen_type *t)
{
    for (size_t i = 0; i < t->nfields; i++) {
        const gen_type *ft = t->fields[i].type;
        const gen_type *st = ft->kind == GEN_STRING ? ft : ft->items;
        if (!st || !st->enum_macros)
            continue;
        for (size_t k = 0; st->enum_values[k]; k++) {
            if (!st->enum_macros[k])
                continue;
            fprintf(f, "#define %s ", st->enum_macros[k]);
            c_string(f, st->enum_values[k]);
            fputc('\n', f);
        }
    }
}

static void struct_def(FILE *f, const gen_type *t, bool root)
{
    fputs("/* ", f);
    c_comment(f, *t->path ? t->path : "the object");
    fputs(" */\n", f);
    fprintf(f, "struct %s {\n", t->c_name);
    if (root)
        fputs("    ckube_typed base;\n"
              "    char *api_version;\n"
              "    char *kind;\n"
              "    ckube_object_meta metadata;\n"
              "    bool has_metadata;\n",
              f);
    for (size_t i = 0; i < t->nfields; i++)
        member(f, &t->fields[i]);
    fputs("    json_t *unknown; /* members the schema does not name */\n};\n\n", f);
}

static void struct_protos(FILE *f, const char *s, bool root)
{
    fprintf(f, "extern const ckube_struct_info %s_info;\n", s);
    fprintf(f, "%s *%s_new(void);\n", s, s);
    fprintf(f, "void %s_free(%s *obj);\n", s, s);
    fprintf(f, "%s *%s_copy(const %s *obj);\n", s, s, s);
    fprintf(f, "int %s_set_defaults(%s *obj);\n", s, s);
    if (!root)
        return;
    fprintf(f, "extern const ckube_type_info %s_type;\n", s);
    fprintf(f, "%s *%s_decode(const char *json, size_t len, ckube_status **err);\n", s, s);
    fprintf(f, "%s *%s_from_json(const json_t *json, ckube_status **err);\n", s, s);
    fprintf(f, "char *%s_encode(const %s *obj);\n", s, s);
    fprintf(f, "json_t *%s_to_json(const %s *obj);\n", s, s);
}

/* The parameters a kind's calls take for where the object is: a
 * namespace for a namespaced kind, nothing for a cluster-scoped one. */
static const char *ns_param(const gen_kind *k)
{
    return k->namespaced ? ", const char *ns" : "";
}

static const char *ns_arg(const gen_kind *k)
{
    return k->namespaced ? "ns" : "NULL";
}

/* The list type and the typed client's prototypes (ckube/typed_client.h). */
static void client_protos(FILE *f, const gen_kind *k)
{
    const char *s = k->root->c_name, *p = k->client, *ns = ns_param(k);
    fprintf(f,
            "\n/* Item i of a list of %s (ckube_typed_list; free it with\n"
            " * ckube_typed_list_free). */\n"
            "static inline %s *%s_list_at(const ckube_typed_list *l, size_t i)\n{\n"
            "    return (%s *)l->items[i];\n}\n\n",
            s, s, s, s);
    fprintf(f, "/* The typed client (ckube/typed_client.h). */\n");
    fprintf(f, "int %s_get(ckube_client *c%s, const char *name, %s **out, ckube_status **err);\n",
            p, ns, s);
    fprintf(f,
            "int %s_list(ckube_client *c%s, const ckube_list_opts *opts, ckube_typed_list **out,\n"
            "    ckube_status **err);\n",
            p, ns);
    fprintf(f,
            "int %s_watch(ckube_client *c%s, const ckube_list_opts *opts, ckube_watch **out,\n"
            "    ckube_status **err);\n",
            p, ns);
    fprintf(f,
            "int %s_watch_next(ckube_watch *w, ckube_watch_event_type *type, %s **obj,\n"
            "    ckube_status **err);\n",
            p, s);
    const char *writes[] = {"create", "update", "update_status"};
    for (size_t i = 0; i < 3; i++) {
        if (i == 2 && !k->status_subresource)
            break;
        fprintf(f,
                "int %s_%s(ckube_client *c%s, const %s *obj, const ckube_write_opts *wo,\n"
                "    %s **out, ckube_status **err);\n",
                p, writes[i], ns, s, s);
    }
    if (k->scale_subresource) {
        fprintf(f,
                "int %s_get_scale(ckube_client *c%s, const char *name, ckube_scale **out,\n"
                "    ckube_status **err);\n",
                p, ns);
        fprintf(f,
                "int %s_update_scale(ckube_client *c%s, const ckube_scale *scale,\n"
                "    const ckube_write_opts *wo, ckube_scale **out, ckube_status **err);\n",
                p, ns);
    }
    fprintf(f,
            "int %s_patch(ckube_client *c%s, const char *name, ckube_patch_type type,\n"
            "    const char *patch, size_t len, const ckube_write_opts *wo, %s **out,\n"
            "    ckube_status **err);\n",
            p, ns, s);
    fprintf(f,
            "int %s_delete(ckube_client *c%s, const char *name, const ckube_delete_opts *o,\n"
            "    ckube_status **err);\n",
            p, ns);
    fprintf(f,
            "int %s_delete_collection(ckube_client *c%s, const ckube_list_opts *sel,\n"
            "    const ckube_delete_opts *o, ckube_status **err);\n",
            p, ns);
    fprintf(f,
            "\n/* Informers and listers (ckube/informer.h): the factory's shared informer\n"
            " * of this kind (in the factory's namespace; a cluster-scoped kind whole),\n"
            " * and an informer's or lister's object as %s, decoded\n"
            " * once per version and shared by every reader (borrowed from obj and\n"
            " * read-only; NULL with *err when it does not decode). */\n"
            "ckube_shared_informer *%s_informer(ckube_informer_factory *f);\n"
            "static inline const %s *%s_of(const ckube_object *obj, ckube_status **err)\n{\n"
            "    return (const %s *)ckube_object_typed(obj, &%s_type, err);\n}\n",
            s, p, s, s, s, s);
    fprintf(f,
            "\n/* The fake for controller tests (ckube/fake.h): the object written as\n"
            " * the fake's add, update or apply (0: not written), or read back. */\n"
            "uint64_t %s_fake_add(ckube_fake_lw *f, const %s *obj);\n"
            "uint64_t %s_fake_update(ckube_fake_lw *f, const %s *obj);\n"
            "uint64_t %s_fake_apply(ckube_fake_lw *f, const %s *obj);\n"
            "%s *%s_fake_get(ckube_fake_lw *f%s, const char *name);\n",
            p, s, p, s, p, s, s, p, ns);
}

static int kind_header(FILE *f, const gen_kind *k, gen_nameset *done)
{
    structs all = {.done = done};
    if (collect_kind(k, &all))
        return -1;
    fputs("/* ==== ", f);
    c_comment(f, k->kind);
    fputs(", ", f);
    c_comment(f, *k->group ? k->group : "core");
    fputs("/", f);
    c_comment(f, k->version);
    fputs(" (", f);
    c_comment(f, k->plural);
    fprintf(f, ", %s%s%s) ==== */\n\n", k->namespaced ? "namespaced" : "cluster-scoped",
            k->status_subresource ? ", status" : "", k->scale_subresource ? ", scale" : "");
    for (size_t i = 0; i < all.n; i++)
        fprintf(f, "typedef struct %s %s;\n", all.v[i]->c_name, all.v[i]->c_name);
    fputc('\n', f);
    for (size_t i = 0; i < all.n; i++)
        constants(f, all.v[i]);
    for (size_t i = 0; i < all.n; i++)
        struct_def(f, all.v[i], i == 0);
    for (size_t i = 0; i < all.n; i++)
        struct_protos(f, all.v[i]->c_name, i == 0);
    client_protos(f, k);
    fputc('\n', f);
    free(all.v);
    return 0;
}

int gen_emit_header(const gen_model *m, FILE *f)
{
    fprintf(f, "/* %s.h - generated by ckube-gen from", m->package);
    for (size_t i = 0; i < m->nkinds; i++) {
        const gen_kind *k = &m->kinds[i];
        if (i && !strcmp(k->plural, m->kinds[i - 1].plural) &&
            !strcmp(k->group, m->kinds[i - 1].group))
            continue; /* another version of the same resource */
        fputs(i ? ", " : " ", f);
        c_comment(f, k->plural);
        if (*k->group) {
            fputc('.', f);
            c_comment(f, k->group);
        }
    }
    fputs(". Do not edit.\n"
          " *\n"
          " * How the values are held and who owns what: <ckube/typed.h>. */\n",
          f);
    fputs("#ifndef ", f);
    upper(f, m->package);
    fputs("_H_CKUBE_GEN\n#define ", f);
    upper(f, m->package);
    fputs("_H_CKUBE_GEN\n\n"
          "#include <ckube/fake.h>\n"
          "#include <ckube/informer.h>\n"
          "#include <ckube/scheme.h>\n"
          "#include <ckube/typed.h>\n"
          "#include <ckube/typed_client.h>\n\n"
          "#ifdef __cplusplus\n"
          "extern \"C\" {\n"
          "#endif\n\n",
          f);
    fprintf(f,
            "/* Adds this package's kinds to s: 0, or -1 (see ckube_scheme_add). */\n"
            "int %s_add_to_scheme(ckube_scheme *s);\n\n",
            m->package);
    gen_nameset *done = gen_nameset_new();
    for (size_t i = 0; done && i < m->nkinds; i++) {
        if (kind_header(f, &m->kinds[i], done)) {
            gen_nameset_free(done);
            return -1;
        }
    }
    if (!done)
        return -1;
    gen_nameset_free(done);
    fputs("#ifdef __cplusplus\n}\n#endif\n\n#endif\n", f);
    return ferror(f) ? -1 : 0;
}

/* ---- the source ------------------------------------------------------------ */

static const char *value_kind(gen_type_kind k)
{
    switch (k) {
    case GEN_STRING:
        return "CKUBE_VALUE_STRING";
    case GEN_INTEGER:
        return "CKUBE_VALUE_INT";
    case GEN_NUMBER:
        return "CKUBE_VALUE_NUMBER";
    case GEN_BOOLEAN:
        return "CKUBE_VALUE_BOOL";
    case GEN_OBJECT:
        return "CKUBE_VALUE_OBJECT";
    case GEN_ARRAY:
        return "CKUBE_VALUE_ARRAY";
    case GEN_MAP:
        return "CKUBE_VALUE_MAP";
    case GEN_INT_OR_STRING:
        return "CKUBE_VALUE_INT_OR_STRING";
    default:
        return "CKUBE_VALUE_JSON";
    }
}

/* A ckube_value_info initializer's members for t (elements are scalars,
 * objects, int-or-string or JSON: model.h). */
static void value_info(FILE *f, const gen_type *t)
{
    fprintf(f, ".kind = %s", value_kind(t->kind));
    if (t->kind == GEN_OBJECT)
        fprintf(f, ", .object = &%s_info", t->c_name);
    if (t->kind == GEN_ARRAY || t->kind == GEN_MAP) {
        fputs(", .items = &(const ckube_value_info){", f);
        value_info(f, t->items);
        fputc('}', f);
    }
}

static void offset(FILE *f, const char *label, const char *s, const char *pre, const char *name,
                   const char *post, bool has)
{
    if (has)
        fprintf(f, "         .%s = offsetof(%s, %s%s%s),\n", label, s, pre, name, post);
    else
        fprintf(f, "         .%s = CKUBE_NO_MEMBER,\n", label);
}

static void field_info(FILE *f, const char *s, const gen_field *fl)
{
    const gen_type *t = fl->type;
    bool list = t->kind == GEN_ARRAY || t->kind == GEN_MAP;
    bool flagged =
        list || t->kind == GEN_INTEGER || t->kind == GEN_NUMBER || t->kind == GEN_BOOLEAN;
    fputs("        {.json_name = ", f);
    c_string(f, fl->json_name);
    fputs(",\n         .value = {", f);
    value_info(f, t);
    fputs("},\n", f);
    offset(f, "offset", s, "", fl->c_name, "", true);
    offset(f, "has_offset", s, "has_", fl->c_name, "", flagged);
    offset(f, "n_offset", s, "n_", fl->c_name, "", list);
    offset(f, "keys_offset", s, "", fl->c_name, "_keys", t->kind == GEN_MAP);
    offset(f, "null_offset", s, "", fl->c_name, "_null", fl->nullable);
    if (t->default_value) {
        char *d = json_dumps(t->default_value, JSON_COMPACT | JSON_ENCODE_ANY);
        if (d) {
            fputs("         .default_json = ", f);
            c_string(f, d);
            fputs(",\n", f);
        }
        free(d);
    }
    fputs("        },\n", f);
}

/* apiVersion, kind and metadata, first in every kind's table. */
static void root_fields(FILE *f, const char *s)
{
    fprintf(f,
            "        {.json_name = \"apiVersion\", .value = {.kind = CKUBE_VALUE_STRING},\n"
            "         .offset = offsetof(%s, api_version), .has_offset = CKUBE_NO_MEMBER,\n"
            "         .n_offset = CKUBE_NO_MEMBER, .keys_offset = CKUBE_NO_MEMBER,\n"
            "         .null_offset = CKUBE_NO_MEMBER},\n"
            "        {.json_name = \"kind\", .value = {.kind = CKUBE_VALUE_STRING},\n"
            "         .offset = offsetof(%s, kind), .has_offset = CKUBE_NO_MEMBER,\n"
            "         .n_offset = CKUBE_NO_MEMBER, .keys_offset = CKUBE_NO_MEMBER,\n"
            "         .null_offset = CKUBE_NO_MEMBER},\n"
            "        {.json_name = \"metadata\",\n"
            "         .value = {.kind = CKUBE_VALUE_OBJECT, .object = &ckube_object_meta_info},\n"
            "         .inline_object = true, .offset = offsetof(%s, metadata),\n"
            "         .has_offset = offsetof(%s, has_metadata), .n_offset = CKUBE_NO_MEMBER,\n"
            "         .keys_offset = CKUBE_NO_MEMBER, .null_offset = CKUBE_NO_MEMBER},\n",
            s, s, s, s);
}

static void struct_info(FILE *f, const gen_type *t, bool root)
{
    const char *s = t->c_name;
    size_t n = t->nfields + (root ? 3 : 0);
    fprintf(f, "const ckube_struct_info %s_info = {\n", s);
    fprintf(f, "    .name = \"%s\",\n    .size = sizeof(%s),\n", s, s);
    if (n) {
        fputs("    .fields = (const ckube_field_info[]){\n", f);
        if (root)
            root_fields(f, s);
        for (size_t i = 0; i < t->nfields; i++)
            field_info(f, s, &t->fields[i]);
        fputs("    },\n", f);
    }
    fprintf(f, "    .nfields = %zu,\n", n);
    fprintf(f, "    .unknown_offset = offsetof(%s, unknown),\n", s);
    if (root)
        fprintf(f, "    .type = &%s_type,\n", s);
    fputs("};\n\n", f);
}

static void type_info(FILE *f, const gen_kind *k)
{
    const char *s = k->root->c_name;
    fprintf(f, "const ckube_type_info %s_type = {\n    .group = ", s);
    c_string(f, k->group);
    fputs(",\n    .version = ", f);
    c_string(f, k->version);
    fputs(",\n    .kind = ", f);
    c_string(f, k->kind);
    fputs(",\n    .plural = ", f);
    c_string(f, k->plural);
    fprintf(f, ",\n    .namespaced = %s,\n    .object = &%s_info,\n};\n\n",
            k->namespaced ? "true" : "false", s);
}

static void functions(FILE *f, const char *s, bool root)
{
    fprintf(f, "%s *%s_new(void)\n{\n    return ckube_struct_new(&%s_info);\n}\n\n", s, s, s);
    fprintf(f, "void %s_free(%s *obj)\n{\n    ckube_struct_free(&%s_info, obj);\n}\n\n", s, s, s);
    fprintf(f, "%s *%s_copy(const %s *obj)\n{\n    return ckube_struct_copy(&%s_info, obj);\n}\n\n",
            s, s, s, s);
    fprintf(f,
            "int %s_set_defaults(%s *obj)\n{\n"
            "    return ckube_struct_set_defaults(&%s_info, obj);\n}\n\n",
            s, s, s);
    if (!root)
        return;
    fprintf(f,
            "%s *%s_decode(const char *json, size_t len, ckube_status **err)\n{\n"
            "    return ckube_struct_decode(&%s_info, json, len, err);\n}\n\n",
            s, s, s);
    fprintf(f,
            "%s *%s_from_json(const json_t *json, ckube_status **err)\n{\n"
            "    return ckube_struct_from_json(&%s_info, json, err);\n}\n\n",
            s, s, s);
    fprintf(
        f,
        "char *%s_encode(const %s *obj)\n{\n    return ckube_struct_encode(&%s_info, obj);\n}\n\n",
        s, s, s);
    fprintf(f,
            "json_t *%s_to_json(const %s *obj)\n{\n"
            "    return ckube_struct_to_json(&%s_info, obj);\n}\n\n",
            s, s, s);
}

/* The typed client: each call is the runtime's, with the kind's type and
 * the object cast back (a kind's struct begins with ckube_typed). */
static void client_functions(FILE *f, const gen_kind *k)
{
    const char *s = k->root->c_name, *p = k->client, *ns = ns_param(k), *na = ns_arg(k);
    fprintf(f,
            "int %s_get(ckube_client *c%s, const char *name, %s **out, ckube_status **err)\n{\n"
            "    ckube_typed *t = NULL;\n"
            "    int rc = ckube_typed_get(c, &%s_type, %s, name, &t, err);\n"
            "    *out = (%s *)t;\n"
            "    return rc;\n}\n\n",
            p, ns, s, s, na, s);
    fprintf(f,
            "int %s_list(ckube_client *c%s, const ckube_list_opts *opts, ckube_typed_list **out,\n"
            "    ckube_status **err)\n{\n"
            "    return ckube_typed_list_page(c, &%s_type, %s, opts, out, err);\n}\n\n",
            p, ns, s, na);
    fprintf(f,
            "int %s_watch(ckube_client *c%s, const ckube_list_opts *opts, ckube_watch **out,\n"
            "    ckube_status **err)\n{\n"
            "    return ckube_typed_watch(c, &%s_type, %s, opts, out, err);\n}\n\n",
            p, ns, s, na);
    fprintf(f,
            "int %s_watch_next(ckube_watch *w, ckube_watch_event_type *type, %s **obj,\n"
            "    ckube_status **err)\n{\n"
            "    ckube_typed *t = NULL;\n"
            "    int rc = ckube_typed_watch_next(w, &%s_type, type, &t, err);\n"
            "    *obj = (%s *)t;\n"
            "    return rc;\n}\n\n",
            p, s, s, s);
    const char *writes[] = {"create", "update", "update_status"};
    for (size_t i = 0; i < 3; i++) {
        if (i == 2 && !k->status_subresource)
            break;
        fprintf(f,
                "int %s_%s(ckube_client *c%s, const %s *obj, const ckube_write_opts *wo,\n"
                "    %s **out, ckube_status **err)\n{\n"
                "    ckube_typed *t = NULL;\n"
                "    int rc = ckube_typed_%s(c, %s, &obj->base, wo, out ? &t : NULL, err);\n"
                "    if (out)\n"
                "        *out = (%s *)t;\n"
                "    return rc;\n}\n\n",
                p, writes[i], ns, s, s, writes[i], na, s);
    }
    if (k->scale_subresource) {
        fprintf(f,
                "int %s_get_scale(ckube_client *c%s, const char *name, ckube_scale **out,\n"
                "    ckube_status **err)\n{\n"
                "    return ckube_typed_get_scale(c, &%s_type, %s, name, out, err);\n}\n\n",
                p, ns, s, na);
        fprintf(f,
                "int %s_update_scale(ckube_client *c%s, const ckube_scale *scale,\n"
                "    const ckube_write_opts *wo, ckube_scale **out, ckube_status **err)\n{\n"
                "    return ckube_typed_update_scale(c, &%s_type, %s, scale, wo, out, err);\n}\n\n",
                p, ns, s, na);
    }
    fprintf(f,
            "int %s_patch(ckube_client *c%s, const char *name, ckube_patch_type type,\n"
            "    const char *patch, size_t len, const ckube_write_opts *wo, %s **out,\n"
            "    ckube_status **err)\n{\n"
            "    ckube_typed *t = NULL;\n"
            "    int rc = ckube_typed_patch(c, &%s_type, %s, name, type, patch, len, wo,\n"
            "                               out ? &t : NULL, err);\n"
            "    if (out)\n"
            "        *out = (%s *)t;\n"
            "    return rc;\n}\n\n",
            p, ns, s, s, na, s);
    fprintf(f,
            "int %s_delete(ckube_client *c%s, const char *name, const ckube_delete_opts *o,\n"
            "    ckube_status **err)\n{\n"
            "    return ckube_typed_delete(c, &%s_type, %s, name, o, err);\n}\n\n",
            p, ns, s, na);
    fprintf(f,
            "int %s_delete_collection(ckube_client *c%s, const ckube_list_opts *sel,\n"
            "    const ckube_delete_opts *o, ckube_status **err)\n{\n"
            "    return ckube_typed_delete_collection(c, &%s_type, %s, sel, o, err);\n}\n\n",
            p, ns, s, na);
    const char *verbs[] = {"add", "update", "apply"};
    for (size_t i = 0; i < 3; i++)
        fprintf(f,
                "uint64_t %s_fake_%s(ckube_fake_lw *f, const %s *obj)\n{\n"
                "    return ckube_fake_lw_%s_typed(f, &obj->base);\n}\n\n",
                p, verbs[i], s, verbs[i]);
    fprintf(f,
            "%s *%s_fake_get(ckube_fake_lw *f%s, const char *name)\n{\n"
            "    return (%s *)ckube_fake_lw_get_typed(f, &%s_type, %s, name);\n}\n\n",
            s, p, ns_param(k)[0] ? ", const char *ns" : "", s, s, na);
    /* (a cluster-scoped kind is watched whole, whatever the factory's
     * namespace) */
    fprintf(f,
            "ckube_shared_informer *%s_informer(ckube_informer_factory *f)\n{\n"
            "    const ckube_gvr r = {%s_type.group, %s_type.version, %s_type.plural};\n"
            "    return %s;\n}\n\n",
            p, s, s, s,
            k->namespaced ? "ckube_informer_factory_for(f, &r)"
                          : "ckube_informer_factory_for_namespace(f, &r, NULL)");
}

static int kind_source(FILE *f, const gen_kind *k, gen_nameset *done)
{
    structs all = {.done = done};
    if (collect_kind(k, &all))
        return -1;
    fputs("/* ==== ", f);
    c_comment(f, k->kind);
    fputs(" ", f);
    c_comment(f, k->version);
    fputs(" ==== */\n\n", f);
    type_info(f, k);
    for (size_t i = 0; i < all.n; i++)
        struct_info(f, all.v[i], i == 0);
    for (size_t i = 0; i < all.n; i++)
        functions(f, all.v[i]->c_name, i == 0);
    client_functions(f, k);
    free(all.v);
    return 0;
}

int gen_emit_source(const gen_model *m, FILE *f)
{
    fprintf(f,
            "/* %s.c - generated by ckube-gen. Do not edit. */\n"
            "#include \"%s.h\"\n\n"
            "#include <stddef.h>\n\n",
            m->package, m->package);
    gen_nameset *done = gen_nameset_new();
    for (size_t i = 0; done && i < m->nkinds; i++) {
        if (kind_source(f, &m->kinds[i], done)) {
            gen_nameset_free(done);
            return -1;
        }
    }
    if (!done)
        return -1;
    gen_nameset_free(done);
    fprintf(f, "int %s_add_to_scheme(ckube_scheme *s)\n{\n", m->package);
    for (size_t i = 0; i < m->nkinds; i++)
        fprintf(f, "    if (ckube_scheme_add(s, &%s_type))\n        return -1;\n",
                m->kinds[i].root->c_name);
    fputs("    return 0;\n}\n", f);
    return ferror(f) ? -1 : 0;
}

/* ---- files ------------------------------------------------------------------- */

/* Whether the file at path holds exactly [buf, buf+len). */
static bool same_bytes(const char *path, const char *buf, size_t len)
{
    size_t have = 0;
    char *old = ckube__read_file(path, &have);
    bool same = old && have == len && !memcmp(old, buf, len);
    free(old);
    return same;
}

static int write_one(const gen_model *m, const char *dir, const char *ext,
                     int (*emit)(const gen_model *, FILE *), char **err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        ckube__set_err(err, "out of memory");
        return -1;
    }
    int rc = emit(m, mem);
    if (fclose(mem) || rc) {
        free(buf);
        ckube__set_err(err, "out of memory");
        return -1;
    }
    char *path = NULL, *tmp = NULL;
    if (asprintf(&path, "%s/%s.%s", dir, m->package, ext) < 0)
        path = NULL;
    if (path && asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
        tmp = NULL;
    if (!path || !tmp) {
        ckube__set_err(err, "out of memory");
        rc = -1;
    } else if (!same_bytes(path, buf, len)) {
        FILE *f = fopen(tmp, "w");
        bool ok = f && fwrite(buf, 1, len, f) == len;
        if (f && fclose(f))
            ok = false;
        if (!ok || rename(tmp, path)) {
            ckube__set_err(err, "%s: cannot write: %s", ok ? path : tmp, strerror(errno));
            unlink(tmp);
            rc = -1;
        }
    }
    free(path);
    free(tmp);
    free(buf);
    return rc;
}

int gen_write(const gen_model *m, const char *dir, char **err)
{
    if (write_one(m, dir, "h", gen_emit_header, err))
        return -1;
    return write_one(m, dir, "c", gen_emit_source, err);
}
