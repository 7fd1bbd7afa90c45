/* Fuzzes the schema engine.
 *
 * An input is JSON. An object of the form {"schema": S, "object": O} walks O
 * against S (arbitrary, possibly malformed schemas); anything else is walked
 * against the built-in Deployment, Pod and Service schemas.
 *
 * Invariants checked: no crash or leak; the returned count equals the
 * causes added and every cause has a type, field and message; against the
 * (well-formed) built-in schemas pruning and defaulting are idempotent: a
 * second walk finds no unknown field and changes nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/definitions/builtin_schemas.h"
#include "apiserver/apiextensions/schema/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_status(const ckube_status *st, int n)
{
    if (n < 0)
        return; /* out of memory */
    if ((size_t)n != st->ncauses)
        abort();
    for (size_t i = 0; i < st->ncauses; i++)
        if (!st->causes[i].type || !st->causes[i].field || !st->causes[i].message)
            abort();
}

static void walk(const json_t *schema, const json_t *input, int check_idempotent)
{
    json_t *obj = json_deep_copy(input);
    if (!obj)
        return;
    ckube_status *st = ckube_status_invalid_begin("", "Fuzz", "x");
    char **unknown = NULL;
    size_t nunknown = 0;
    int n = schema_apply(schema, obj, SCHEMA_ALL, st, &unknown, &nunknown);
    check_status(st, n);
    for (size_t i = 0; i < nunknown; i++)
        if (!unknown[i])
            abort();
    schema_free_paths(unknown, nunknown);
    ckube_status_invalid_finish(st);
    ckube_status_free(st);

    if (check_idempotent && n >= 0) {
        json_t *again = json_deep_copy(obj);
        st = ckube_status_invalid_begin("", "Fuzz", "x");
        int n2 = schema_apply(schema, again, SCHEMA_ALL, st, &unknown, &nunknown);
        check_status(st, n2);
        if (n2 >= 0 && (nunknown != 0 || !json_equal(obj, again)))
            abort();
        schema_free_paths(unknown, nunknown);
        ckube_status_free(st);
        json_decref(again);
    }
    json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!in)
        return 0;
    const json_t *schema = json_object_get(in, "schema");
    const json_t *object = json_object_get(in, "object");
    if (schema && object && json_object_size(in) == 2) {
        walk(schema, object, 0);
        /* the schema is also data, and the data a schema */
        walk(object, schema, 0);
    } else {
        static const char *const kinds[][2] = {
            {"apps", "Deployment"}, {"", "Pod"}, {"", "Service"}};
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            json_t *s = builtin_schema(kinds[i][0], "v1", kinds[i][1]);
            walk(s, in, 1);
            json_decref(s);
        }
    }
    char *text = schema_format_value(in);
    free(text);
    json_decref(in);
    return 0;
}
