/* list_watch.c - the list-watch vtable wrapper (see ckube/informer.h). */
#include "ckube/informer.h"
#include "informer/informer_internal.h"

#include <stdlib.h>
#include <string.h>

struct ckube_list_watch {
    const ckube_list_watch_ops *ops; /* borrowed */
    void *ctx;                       /* owned via ops->free */
    char *description;
    const ckube__lw_compact_ops *cops; /* borrowed; NULL = none */
};

ckube_list_watch *ckube_list_watch_new(const ckube_list_watch_ops *ops, void *ctx,
                                       const char *description)
{
    ckube_list_watch *lw = ops ? calloc(1, sizeof(*lw)) : NULL;
    if (lw)
        lw->description = strdup(description ? description : "objects");
    if (!lw || !lw->description) {
        free(lw);
        if (ops && ops->free)
            ops->free(ctx);
        return NULL;
    }
    lw->ops = ops;
    lw->ctx = ctx;
    return lw;
}

void ckube__list_watch_set_compact(ckube_list_watch *lw, const ckube__lw_compact_ops *ops)
{
    lw->cops = ops;
}

const ckube__lw_compact_ops *ckube__list_watch_compact(const ckube_list_watch *lw)
{
    return lw->cops;
}

void *ckube__list_watch_ctx(const ckube_list_watch *lw)
{
    return lw->ctx;
}

const char *ckube_list_watch_description(const ckube_list_watch *lw)
{
    return lw->description;
}

int ckube_list_watch_list(ckube_list_watch *lw, const ckube_list_opts *opts, json_t **list,
                          ckube_status **err)
{
    *list = NULL;
    if (err)
        *err = NULL;
    return lw->ops->list(lw->ctx, opts, list, err);
}

int ckube_list_watch_watch_open(ckube_list_watch *lw, const ckube_list_opts *opts, void **stream,
                                ckube_status **err)
{
    *stream = NULL;
    if (err)
        *err = NULL;
    return lw->ops->watch_open(lw->ctx, opts, stream, err);
}

int ckube_list_watch_watch_next(ckube_list_watch *lw, void *stream, ckube_watch_event_type *type,
                                json_t **obj, ckube_status **err)
{
    *obj = NULL;
    if (err)
        *err = NULL;
    return lw->ops->watch_next(lw->ctx, stream, type, obj, err);
}

void ckube_list_watch_watch_stop(ckube_list_watch *lw, void *stream)
{
    lw->ops->watch_stop(lw->ctx, stream);
}

void ckube_list_watch_watch_close(ckube_list_watch *lw, void *stream)
{
    lw->ops->watch_close(lw->ctx, stream);
}

void ckube_list_watch_free(ckube_list_watch *lw)
{
    if (!lw)
        return;
    if (lw->ops->free)
        lw->ops->free(lw->ctx);
    free(lw->description);
    free(lw);
}
