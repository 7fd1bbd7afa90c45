/* Reads of custom resources whose CRD converts through a webhook: the
 * cached objects (stored in the storage version) in the version the
 * request asked for; see handlers.h, read_convert. The converted bytes
 * become cobjs of their own, so what follows (tables, partial metadata,
 * plain JSON) serves them as any cached object. Nothing is kept: every
 * read asks the webhook (upstream converts each object once per version
 * into a per-version watch cache; docs/webhooks.md says what that costs
 * here). */
#include <stdlib.h>

#include "apiserver/endpoints/handlers/handlers.h"
#include "ckube/json.h"
#include "common/xalloc.h"

struct read_conv {
    req_ctx *rc;
    resource_conversion *call;
    cobj **objs;
    size_t n;
    read_convert_cb cb;
    void *arg;
};

static void converted(void *arg, json_t *out, ckube_status *st)
{
    read_conv *c = arg;
    c->call = NULL;
    if (out && json_array_size(out) != c->n) {
        st = ckube_status_internal("conversion returned %zu objects for %zu", json_array_size(out),
                                   c->n);
    }
    if (!st) {
        for (size_t i = 0; i < c->n; i++) {
            size_t len;
            char *s = ckube_json_dumps(json_array_get(out, i), &len);
            cobj *o = cobj_with_json(c->objs[i], s, len);
            free(s);
            cobj_unref(c->objs[i]);
            c->objs[i] = o;
        }
    } else {
        cacher_objs_free(c->objs, c->n);
        c->objs = NULL;
        c->n = 0;
    }
    json_decref(out);
    read_conv done = *c;
    free(c);
    done.cb(done.rc, done.objs, done.n, st, done.arg);
}

read_conv *read_convert(req_ctx *rc, cobj **objs, size_t n, bool list, read_convert_cb cb,
                        void *arg)
{
    const resource_type *t = rc->type;
    read_conv *c = xcalloc(1, sizeof *c);
    *c = (read_conv){.rc = rc, .objs = objs, .n = n, .cb = cb, .arg = arg};
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, cobj_decode(objs[i]));
    c->call = t->convert(t, rc->lp->out, rc->srv->cache, arr, false, list, converted, c);
    json_decref(arr);
    return c;
}

void read_convert_cancel(read_conv *c)
{
    if (!c)
        return;
    c->rc->type->convert_cancel(c->call);
    cacher_objs_free(c->objs, c->n);
    free(c);
}
