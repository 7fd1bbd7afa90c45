/* Fuzzes libckube's webhook server's reading of reviews
 * (src/webhook/review.c): each input is a request body served on an
 * admission path (a handler that denies names starting with "deny" and
 * mutates the rest) and on a conversion path. Nothing may crash, leak or
 * read past the input; every answer is a JSON review of the right kind
 * with a response, and a mutation's patch applies to the object it was
 * computed from. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/patch.h"
#include "webhook/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void admit(void *ctx, const ckube_admission_request *req, ckube_admission_response *resp)
{
    (void)ctx;
    if (!strncmp(req->name, "deny", 4)) {
        ckube_admission_deny(resp, 0, "no %s", req->name);
        return;
    }
    ckube_admission_warn(resp, "seen %s", req->operation);
    if (req->object) {
        json_t *o = json_deep_copy(req->object);
        json_object_set_new(o, "fuzzed", json_true());
        json_object_del(o, "spec");
        ckube_admission_set_object(resp, o);
    }
}

static json_t *convert(void *ctx, const json_t *obj, const char *want, char **msg)
{
    (void)ctx;
    if (!strcmp(want, "fail/v1")) {
        *msg = strdup("cannot");
        return NULL;
    }
    return json_deep_copy(obj);
}

static void check(wh_handler *h, const uint8_t *data, size_t size, const char *kind)
{
    wh_reply out = {0};
    wh_serve(h, (const char *)data, size, &out);
    json_t *doc = out.body ? json_loadb(out.body, out.len, 0, NULL) : NULL;
    if (!json_is_object(doc) || strcmp(json_string_value(json_object_get(doc, "kind")), kind) ||
        !json_is_object(json_object_get(doc, "response")) || (out.code != 200 && out.code != 400))
        abort();
    json_decref(doc);
    free(out.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wh_handler a = {.path = "/a", .kind = WH_ADMISSION, .admission = admit};
    wh_handler c = {.path = "/c", .kind = WH_CONVERSION, .conversion = convert};
    check(&a, data, size, "AdmissionReview");
    check(&c, data, size, "ConversionReview");
    return 0;
}
