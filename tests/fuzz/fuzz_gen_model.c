/* Fuzzes ckube-gen's model of its inputs (src/gen/model.h, names.h).
 *
 * The input is YAML (one or more documents) given as a CRD file, or an
 * OpenAPI v3 document (a document with "openapi"). Whatever
 * it holds, the model is built or refused with an error and nothing
 * added. Invariants of a built model: every C name is an identifier that
 * is no C keyword, every struct has its own name, and within a struct
 * no two members share a name. The input's first line is also tried as
 * a JSON property name (gen_c_name: an identifier or NULL). A built
 * model is emitted too (header and source, to /dev/null): the emitters
 * take whatever the model holds. */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/yaml.h"
#include "gen/emit.h"
#include "gen/model.h"
#include "gen/names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ident(const char *s)
{
    if (!s || !*s || isdigit((unsigned char)s[0]) || gen_reserved(s))
        abort();
    for (const char *p = s; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
            abort();
}

static void check_type(const gen_type *t, const gen_type ***seen, size_t *nseen)
{
    if (t->kind == GEN_OBJECT && t->external) {
        if (strcmp(t->c_name, "ckube_object_meta") || t->nfields)
            abort();
        return;
    }
    if (t->kind == GEN_OBJECT) {
        check_ident(t->c_name);
        for (size_t i = 0; i < *nseen; i++)
            if (!strcmp((*seen)[i]->c_name, t->c_name) &&
                strcmp((*seen)[i]->origin, t->origin))
                abort(); /* two structs, one name (one origin may build it twice) */
        *seen = realloc(*seen, (*nseen + 1) * sizeof **seen);
        if (!*seen)
            abort();
        (*seen)[(*nseen)++] = t;
        for (size_t i = 0; i < t->nfields; i++) {
            check_ident(t->fields[i].c_name);
            for (size_t j = 0; j < i; j++)
                if (!strcmp(t->fields[i].c_name, t->fields[j].c_name))
                    abort(); /* two members, one name */
            check_type(t->fields[i].type, seen, nseen);
        }
    }
    if ((t->kind == GEN_ARRAY || t->kind == GEN_MAP) && !t->items)
        abort();
    if (t->items)
        check_type(t->items, seen, nseen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t line = 0;
    while (line < size && data[line] != '\n')
        line++;
    char *first = malloc(line + 1);
    if (!first)
        return 0;
    memcpy(first, data, line);
    first[line] = 0;
    char *c = gen_c_name(first);
    if (c)
        check_ident(c);
    free(c);
    free(first);

    json_t *docs = NULL;
    char *err = NULL;
    if (ckube_yaml_load_all((const char *)data, size, &docs, &err) != 0) {
        free(err);
        return 0;
    }
    gen_model *m = gen_model_new("pkg", &err);
    if (!m)
        abort();
    size_t i;
    json_t *doc;
    json_array_foreach(docs, i, doc)
    {
        size_t before = m->nkinds;
        int rc = json_object_get(doc, "openapi") ? gen_model_add_openapi(m, doc, "fuzz.json", &err)
                                                 : gen_model_add_crd(m, doc, "fuzz.yaml", &err);
        if (rc != 0) {
            if (!err || m->nkinds != before)
                abort(); /* refused: said why, added nothing */
            free(err);
            err = NULL;
        }
    }
    const gen_type **seen = NULL;
    size_t nseen = 0;
    for (size_t k = 0; k < m->nkinds; k++)
        check_type(m->kinds[k].root, &seen, &nseen);
    free(seen);
    if (m->nkinds) {
        FILE *null = fopen("/dev/null", "w");
        if (!null || gen_emit_header(m, null) || gen_emit_source(m, null))
            abort();
        fclose(null);
    }
    gen_model_free(m);
    json_decref(docs);
    return 0;
}
