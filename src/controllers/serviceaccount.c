/* serviceaccount.c - the service account controller (see
 * serviceaccount.h). One key per namespace (its name); a reconcile reads
 * both caches and creates "default" when it is missing. */
#include "controllers/serviceaccount.h"
#include "controllers/namespace.h"
#include "controllers/sync_start.h"

#include <ckube/controller.h>
#include <ckube/json.h>
#include <ckube/log.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SA "default"

static const ckube_gvr NAMESPACES = {"", "v1", "namespaces"};
static const ckube_gvr SERVICEACCOUNTS = {"", "v1", "serviceaccounts"};

struct sactl {
    ckube_client *client;                    /* borrowed */
    ckube_shared_informer *namespaces, *sas; /* owned by the factory */
    ckube_controller *ctl;
    sync_start start; /* starts ctl once both caches have synced */
};

static ckube_result reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns, const char *name)
{
    (void)rc;
    (void)ns; /* namespaces are cluster-scoped: the key is the name */
    sactl *s = ctx;
    ckube_lister nsl = ckube_shared_informer_lister(s->namespaces);
    json_t *namespace = ckube_lister_get(&nsl, NULL, name);
    bool active = namespace && nsctl_namespace_active(namespace);
    ckube_obj_unref(namespace); /* cache objects: shared, atomic counts */
    if (!active)
        return ckube_result_ok();
    ckube_lister sal = ckube_shared_informer_lister(s->sas);
    json_t *sa = ckube_lister_get(&sal, name, DEFAULT_SA);
    if (sa) {
        ckube_obj_unref(sa);
        return ckube_result_ok();
    }
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "ServiceAccount",
                            "metadata", "name", DEFAULT_SA);
    if (!obj)
        return ckube_result_error();
    ckube_status *err = NULL;
    int r = ckube_create(s->client, &SERVICEACCOUNTS, name, obj, NULL, NULL, &err);
    json_decref(obj);
    ckube_result res = ckube_result_ok();
    if (r == 0) {
        CKUBE_V(2, "serviceaccount controller: created %s/%s", name, DEFAULT_SA);
    } else if (err && (err->code == 409 || err->code == 403 || err->code == 404)) {
        /* it exists already, or the namespace is going or gone */
        CKUBE_V(4, "serviceaccount controller: %s/%s: %s", name, DEFAULT_SA,
                err->message ? err->message : "");
    } else {
        CKUBE_WARN("serviceaccount controller: cannot create %s/%s: %s", name, DEFAULT_SA,
                   err && err->message ? err->message : "request failed");
        res = ckube_result_error();
    }
    ckube_status_free(err);
    return res;
}

/* A deleted (or changed) "default" ServiceAccount: its namespace. */
static void map_sa(void *ctx, const json_t *obj, ckube_key_sink *out)
{
    (void)ctx;
    const char *name = ckube_obj_name(obj), *ns = ckube_obj_namespace(obj);
    if (name && ns && !strcmp(name, DEFAULT_SA))
        ckube_enqueue(out, NULL, ns);
}

/* Only a deletion makes the account missing (upstream's handler is on
 * delete only). Updates are skipped; creates and deletes look alike to a
 * predicate, so a create costs one reconcile that finds it there. */
static bool sa_created_or_deleted(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    (void)ctx;
    (void)new_obj;
    return old_obj == NULL;
}

sactl *sactl_new(ckube_client *c, ckube_informer_factory *f, const sactl_opts *o)
{
    sactl_opts defaults = {0};
    if (!o)
        o = &defaults;
    if (!c || !f)
        return NULL;
    sactl *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->client = c;
    s->namespaces = ckube_informer_factory_for(f, &NAMESPACES);
    s->sas = ckube_informer_factory_for_namespace(f, &SERVICEACCOUNTS, NULL);
    ckube_controller_options co = {.name = "serviceaccount",
                                   .max_concurrent_reconciles = o->workers > 0 ? o->workers : 1,
                                   .clock = o->clock,
                                   .metrics = o->metrics};
    s->ctl = s->namespaces && s->sas ? ckube_controller_new(&co, reconcile, s) : NULL;
    ckube_shared_informer *const infs[] = {s->namespaces, s->sas};
    sync_start_init(&s->start, s->ctl, infs, 2, ckube_clock_or_real(o->clock), "serviceaccount",
                    "sa-start");
    ckube_watch_spec nw = {.map = CKUBE_MAP_SELF, .skip_resync = true, .label = "namespaces"};
    ckube_watch_spec sw = {.map = CKUBE_MAP_FUNC, .map_fn = map_sa, .label = "serviceaccounts"};
    sw.predicates[0] = sa_created_or_deleted;
    if (!s->ctl || ckube_controller_watch(s->ctl, s->namespaces, &nw) != 0 ||
        ckube_controller_watch(s->ctl, s->sas, &sw) != 0) {
        CKUBE_ERROR("serviceaccount controller: cannot set up the controller");
        sactl_free(s);
        return NULL;
    }
    return s;
}

int sactl_start(sactl *s)
{
    return s ? sync_start_run(&s->start) : -1;
}

void sactl_stop(sactl *s)
{
    if (s)
        sync_start_stop(&s->start);
}

void sactl_free(sactl *s)
{
    if (!s)
        return;
    sync_start_destroy(&s->start);
    ckube_controller_free(s->ctl);
    free(s);
}
