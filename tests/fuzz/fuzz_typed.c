/* Fuzzes the typed-object codec (src/typed/typed.c, ckube/typed.h) through
 * code ckube-gen generated from tests/unit/gen/crds/kitchen.yaml (every
 * shape of value) and the Network CRD, and the scheme (scheme.c).
 *
 * The input is tried as an object of any kind (ckube_scheme_decode) and as
 * a Sink v1 whatever its kind says. Invariants when it decodes: the
 * encoding decodes again and encodes to the same bytes; a copy encodes to
 * those bytes too; defaults apply and leave an object that encodes and
 * decodes. When it does not decode, the error is a Status (400 or 422) with
 * a message, and nothing leaks (ASan). The input is also read as a
 * Quantity and a date-time (ckube_quantity_*, ckube_time_parse). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/scheme.h"
#include "kitchen.h"
#include "samplecrd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(ckube_status *err)
{
    if (!err || (err->code != 400 && err->code != 422) || !err->message)
        abort();
    ckube_status_free(err);
}

/* encode, decode, encode: the same bytes; a copy's too. */
static void check_stable(const ckube_typed *t)
{
    char *e1 = ckube_typed_encode(t);
    if (!e1)
        abort();
    ckube_typed *again = ckube_struct_decode(t->type->object, e1, strlen(e1), NULL);
    if (!again)
        abort();
    char *e2 = ckube_typed_encode(again);
    ckube_typed *copy = ckube_typed_copy(t);
    char *e3 = copy ? ckube_typed_encode(copy) : NULL;
    if (!e2 || !e3 || strcmp(e1, e2) || strcmp(e1, e3))
        abort();
    if (ckube_struct_set_defaults(t->type->object, copy))
        abort();
    char *e4 = ckube_typed_encode(copy);
    ckube_typed *defaulted = e4 ? ckube_struct_decode(t->type->object, e4, strlen(e4), NULL) : NULL;
    if (!defaulted)
        abort();
    ckube_typed_free(defaulted);
    free(e4);
    free(e1);
    free(e2);
    free(e3);
    ckube_typed_free(again);
    ckube_typed_free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ckube_scheme *scheme;
    if (!scheme) {
        scheme = ckube_scheme_new();
        if (!scheme || kitchen_add_to_scheme(scheme) || samplecrd_add_to_scheme(scheme))
            abort();
    }
    ckube_typed *t = NULL;
    ckube_status *err = NULL;
    if (ckube_scheme_decode(scheme, (const char *)data, size, &t, &err) == 0) {
        if (!t || err)
            abort();
        check_stable(t);
        ckube_typed_free(t);
    } else {
        if (t)
            abort();
        check_error(err);
    }
    /* the input as a Quantity and a date-time: an answer or -1, never a
     * crash; a milli value is the unit value scaled, when both fit */
    char *text = strndup((const char *)data, size);
    if (text) {
        int64_t m = 0, v = 0, secs = 0;
        int32_t ns = 0;
        int rm = ckube_quantity_milli(text, &m), rv = ckube_quantity_value(text, &v);
        if (rm == 0 && rv != 0)
            abort(); /* milli-units fit, units must */
        if (rm == 0 && (m > 0 ? v < 0 : m < 0 ? v > 0 : v != 0))
            abort(); /* the same sign */
        if (ckube_time_parse(text, &secs, &ns) == 0 && (ns < 0 || ns > 999999999))
            abort();
        free(text);
    }
    kitchen_v1_sink *s = kitchen_v1_sink_decode((const char *)data, size, &err);
    if (s) {
        check_stable(&s->base);
        kitchen_v1_sink_free(s);
    } else {
        check_error(err);
    }
    return 0;
}
