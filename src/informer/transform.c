/* transform.c - an informer's transform (ckube_informer_opts.transform):
 * a compact sink in front of the DeltaFIFO that hands each arriving
 * object to the user's function and queues what it returns.
 *
 * Objects arrive compact (JSON text), so each one is decoded into a tree
 * for the function and encoded again; only informers with a transform pay
 * that. Like client-go's, the transform runs for every object that reaches
 * the queue: listed (replace), added, updated and deleted ones. A refusal
 * (non-zero) fails the sink call; the reflector then does what it does for
 * any sink error, as client-go's: drops a watch event (logged), retries a
 * list after its backoff. */
#include <stdlib.h>
#include <string.h>

#include "ckube/log.h"
#include "informer/informer_internal.h"

struct ckube__transformer {
    ckube__csink inner;
    ckube_transform_fn fn;
    void *ud;
    ckube__cobj_opts co; /* to encode the result as the reflector would */
    char *name;
};

/* The transformed copy of c (a new reference), or NULL when the function
 * refused it or memory ran out (logged). */
static ckube__cobj *transform_one(ckube__transformer *t, ckube__cobj *c)
{
    json_t *tree = ckube__cobj_tree(c);
    if (!tree) {
        CKUBE_ERROR("%s: out of memory decoding %s for the transform", t->name, ckube__cobj_key(c));
        return NULL;
    }
    int rc = t->fn(tree, t->ud);
    ckube__cobj *out = NULL;
    if (rc != 0)
        CKUBE_ERROR("%s: the transform refused %s (%d)", t->name, ckube__cobj_key(c), rc);
    else if (!(out = ckube__cobj_from_json(tree, &t->co)))
        CKUBE_ERROR("%s: the transform of %s did not leave an object", t->name, ckube__cobj_key(c));
    json_decref(tree);
    return out;
}

/* Transforms items[0..n) into a new array of new references; NULL (and
 * nothing left over) when any fails. n == 0 gives a valid empty array. */
static ckube__cobj **transform_all(ckube__transformer *t, ckube__cobj *const *items, size_t n)
{
    ckube__cobj **out = calloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        if (!(out[i] = transform_one(t, items[i]))) {
            for (size_t j = 0; j < i; j++)
                ckube__cobj_unref(out[j]);
            free(out);
            return NULL;
        }
    }
    return out;
}

static void unref_all(ckube__cobj **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ckube__cobj_unref(items[i]);
    free(items);
}

static int t_replace(void *ctx, ckube__cobj *const *items, size_t n, const char *rv)
{
    ckube__transformer *t = ctx;
    ckube__cobj **out = transform_all(t, items, n);
    if (!out)
        return -1;
    int rc = t->inner.replace(t->inner.ctx, out, n, rv);
    unref_all(out, n);
    return rc;
}

static int t_replace_add(void *ctx, ckube__cobj *const *items, size_t n)
{
    ckube__transformer *t = ctx;
    ckube__cobj **out = transform_all(t, items, n);
    if (!out)
        return -1;
    int rc = t->inner.replace_add(t->inner.ctx, out, n);
    unref_all(out, n);
    return rc;
}

/* add, update and remove: one object through `op` of the inner sink. */
static int t_one(ckube__transformer *t, int (*op)(void *, ckube__cobj *), ckube__cobj *c)
{
    ckube__cobj *out = transform_one(t, c);
    if (!out)
        return -1;
    int rc = op(t->inner.ctx, out);
    ckube__cobj_unref(out);
    return rc;
}

static int t_add(void *ctx, ckube__cobj *c)
{
    ckube__transformer *t = ctx;
    return t_one(t, t->inner.add, c);
}

static int t_update(void *ctx, ckube__cobj *c)
{
    ckube__transformer *t = ctx;
    return t_one(t, t->inner.update, c);
}

static int t_remove(void *ctx, ckube__cobj *c)
{
    ckube__transformer *t = ctx;
    return t_one(t, t->inner.remove, c);
}

static int t_begin(void *ctx)
{
    ckube__transformer *t = ctx;
    return t->inner.replace_begin(t->inner.ctx);
}

static int t_end(void *ctx, const char *rv)
{
    ckube__transformer *t = ctx;
    return t->inner.replace_end(t->inner.ctx, rv);
}

static void t_abort(void *ctx)
{
    ckube__transformer *t = ctx;
    t->inner.replace_abort(t->inner.ctx);
}

ckube__transformer *ckube__transformer_new(ckube__csink inner, ckube_transform_fn fn, void *ud,
                                           const ckube__cobj_opts *co, const char *name)
{
    ckube__transformer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->inner = inner;
    t->fn = fn;
    t->ud = ud;
    t->co = co ? *co : (ckube__cobj_opts){0};
    t->name = strdup(name ? name : "informer");
    if (!t->name) {
        free(t);
        return NULL;
    }
    return t;
}

ckube__csink ckube__transformer_csink(ckube__transformer *t)
{
    /* The incremental replace is offered only when the inner sink has it
     * (the reflector falls back to one replace otherwise). */
    bool inc = t->inner.replace_begin != NULL;
    return (ckube__csink){.replace = t_replace,
                          .add = t_add,
                          .update = t_update,
                          .remove = t_remove,
                          .replace_begin = inc ? t_begin : NULL,
                          .replace_add = inc ? t_replace_add : NULL,
                          .replace_end = inc ? t_end : NULL,
                          .replace_abort = inc ? t_abort : NULL,
                          .ctx = t};
}

void ckube__transformer_free(ckube__transformer *t)
{
    if (!t)
        return;
    free(t->name);
    free(t);
}
