/* factory.c - one shared informer per (resource, namespace) (see
 * ckube/informer.h; client-go's SharedInformerFactory). */
#include "ckube/informer.h"

#include "ckube/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    struct entry *next;
    char *group, *version, *resource, *ns; /* ns NULL = all namespaces */
    ckube_shared_informer *inf;            /* owned */
    bool started;
};

struct ckube_informer_factory {
    pthread_mutex_t mu;
    ckube_client *client; /* borrowed */
    uint64_t default_resync;
    char *ns, *label_selector, *field_selector;
    ckube_clock *clock;
    bool keep_managed_fields;
    ckube_transform_fn transform;
    void *transform_ud;
    bool use_watch_list;
    ckube_list_watch_builder build;
    void *build_ud;
    struct entry *entries;
    bool shut;
};

static ckube_list_watch *default_builder(void *ud, ckube_client *c, const ckube_gvr *gvr,
                                         const char *ns, const char *label_selector,
                                         const char *field_selector)
{
    (void)ud;
    return ckube_list_watch_new_client(c, gvr, ns, label_selector, field_selector);
}

static char *dup_opt(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static bool str_eq(const char *a, const char *b)
{
    if (!a || !*a)
        return !b || !*b;
    return b && strcmp(a, b) == 0;
}

ckube_informer_factory *ckube_informer_factory_new(ckube_client *c,
                                                   const ckube_informer_factory_opts *opts)
{
    ckube_informer_factory_opts o = opts ? *opts : (ckube_informer_factory_opts){0};
    if (!c && !o.new_list_watch)
        return NULL;
    ckube_informer_factory *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->client = c;
    f->default_resync = o.default_resync_ns;
    f->ns = dup_opt(o.namespace_);
    f->label_selector = dup_opt(o.label_selector);
    f->field_selector = dup_opt(o.field_selector);
    f->clock = o.clock;
    f->keep_managed_fields = o.keep_managed_fields;
    f->transform = o.transform;
    f->transform_ud = o.transform_ud;
    f->use_watch_list = o.use_watch_list;
    f->build = o.new_list_watch ? o.new_list_watch : default_builder;
    f->build_ud = o.new_list_watch_ud;
    if ((o.namespace_ && *o.namespace_ && !f->ns) ||
        (o.label_selector && *o.label_selector && !f->label_selector) ||
        (o.field_selector && *o.field_selector && !f->field_selector)) {
        ckube_informer_factory_free(f);
        return NULL;
    }
    return f;
}

static void entry_free(struct entry *e)
{
    ckube_shared_informer_free(e->inf);
    free(e->group);
    free(e->version);
    free(e->resource);
    free(e->ns);
    free(e);
}

ckube_shared_informer *ckube_informer_factory_for_namespace(ckube_informer_factory *f,
                                                            const ckube_gvr *gvr, const char *ns)
{
    if (!f || !gvr || !gvr->version || !gvr->resource)
        return NULL;
    pthread_mutex_lock(&f->mu);
    ckube_shared_informer *inf = NULL;
    if (f->shut)
        goto out;
    for (struct entry *e = f->entries; e; e = e->next) {
        if (str_eq(e->group, gvr->group) && strcmp(e->version, gvr->version) == 0 &&
            strcmp(e->resource, gvr->resource) == 0 && str_eq(e->ns, ns)) {
            inf = e->inf;
            goto out;
        }
    }
    struct entry *e = calloc(1, sizeof(*e));
    if (!e)
        goto out;
    e->group = strdup(gvr->group ? gvr->group : "");
    e->version = strdup(gvr->version);
    e->resource = strdup(gvr->resource);
    e->ns = dup_opt(ns);
    if (!e->group || !e->version || !e->resource || (ns && *ns && !e->ns)) {
        entry_free(e);
        goto out;
    }
    ckube_list_watch *lw =
        f->build(f->build_ud, f->client, gvr, e->ns, f->label_selector, f->field_selector);
    if (!lw) {
        CKUBE_ERROR("informer factory: cannot make a list-watch for %s", gvr->resource);
        entry_free(e);
        goto out;
    }
    ckube_informer_opts io = {.resync_ns = f->default_resync,
                              .clock = f->clock,
                              .keep_managed_fields = f->keep_managed_fields,
                              .transform = f->transform,
                              .transform_ud = f->transform_ud,
                              .use_watch_list = f->use_watch_list};
    e->inf = ckube_shared_informer_new(lw, &io);
    if (!e->inf) {
        entry_free(e);
        goto out;
    }
    e->next = f->entries;
    f->entries = e;
    inf = e->inf;
out:
    pthread_mutex_unlock(&f->mu);
    return inf;
}

ckube_shared_informer *ckube_informer_factory_for(ckube_informer_factory *f, const ckube_gvr *gvr)
{
    return f ? ckube_informer_factory_for_namespace(f, gvr, f->ns) : NULL;
}

int ckube_informer_factory_start(ckube_informer_factory *f)
{
    int rc = 0;
    pthread_mutex_lock(&f->mu);
    for (struct entry *e = f->entries; e && !f->shut; e = e->next) {
        if (e->started)
            continue;
        if (ckube_shared_informer_start(e->inf) != 0)
            rc = -1;
        e->started = true;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

bool ckube_informer_factory_wait_for_cache_sync(ckube_informer_factory *f, uint64_t timeout_ns)
{
    pthread_mutex_lock(&f->mu);
    size_t n = 0;
    for (struct entry *e = f->entries; e; e = e->next)
        n += e->started;
    ckube_shared_informer **infs = calloc(n ? n : 1, sizeof(*infs));
    size_t i = 0;
    for (struct entry *e = f->entries; infs && e; e = e->next)
        if (e->started)
            infs[i++] = e->inf;
    pthread_mutex_unlock(&f->mu);
    if (!infs)
        return false;
    /* Informers are never freed before the factory, so waiting unlocked is
     * safe (and lets other threads add informers meanwhile). */
    bool ok = ckube_wait_for_cache_sync(infs, n, timeout_ns);
    free(infs);
    return ok;
}

bool ckube_informer_factory_has_synced(ckube_informer_factory *f)
{
    pthread_mutex_lock(&f->mu);
    bool all = true;
    for (struct entry *e = f->entries; e && all; e = e->next)
        if (e->started && !ckube_shared_informer_has_synced(e->inf))
            all = false;
    pthread_mutex_unlock(&f->mu);
    return all;
}

void ckube_informer_factory_shutdown(ckube_informer_factory *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->shut = true;
    pthread_mutex_unlock(&f->mu);
    /* After `shut` the list no longer changes. */
    for (struct entry *e = f->entries; e; e = e->next)
        ckube_shared_informer_stop(e->inf);
}

void ckube_informer_factory_free(ckube_informer_factory *f)
{
    if (!f)
        return;
    ckube_informer_factory_shutdown(f);
    struct entry *e = f->entries;
    while (e) {
        struct entry *next = e->next;
        entry_free(e);
        e = next;
    }
    pthread_mutex_destroy(&f->mu);
    free(f->ns);
    free(f->label_selector);
    free(f->field_selector);
    free(f);
}
