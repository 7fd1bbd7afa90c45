/* Fuzzes how the API server reads an admission webhook's answer
 * (apiserver/admission/dispatch.c): each input is an AdmissionReview
 * body, taken as a mutating webhook's answer to a review of a ConfigMap
 * and as a validating webhook's. Nothing may crash, leak or read past
 * the input; an answer either admits (a mutating one may have patched
 * the object, which must stay an object of the same kind) or ends in a
 * Status with a code of 400 or more and a message naming the webhook. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/admission/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *configmap(void)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", "cm", "namespace", "default", "labels", "app",
                     "x", "data", "k", "v");
}

static void check(bool mutating, json_t *obj, const uint8_t *data, size_t size)
{
    ckube_status *st = NULL;
    json_t *before = obj ? json_deep_copy(obj) : NULL;
    bool changed = adm__answer(mutating, 200, (const char *)data, size, obj, &st);
    if (st) {
        if (st->code < 400 || !st->message)
            abort();
        json_t *m = json_string(st->message); /* a Status's message must be UTF-8 */
        if (!m)
            abort();
        json_decref(m);
        ckube_status_free(st);
    }
    if (obj) {
        if (!json_is_object(obj) ||
            !json_equal(json_object_get(obj, "kind"), json_object_get(before, "kind")))
            abort();
        if (!mutating && !json_equal(obj, before))
            abort(); /* a validating webhook changes nothing */
    }
    if (changed && (!mutating || !obj))
        abort();
    json_decref(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *obj = configmap();
    check(true, obj, data, size);
    json_decref(obj);
    obj = configmap();
    check(false, obj, data, size);
    json_decref(obj);
    check(true, NULL, data, size); /* a delete */
    return 0;
}
