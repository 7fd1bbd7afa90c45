/* rootca.c - the root CA certificate publisher (see rootca.h). One key
 * per namespace (its name); a reconcile reads both caches, then creates
 * "kube-root-ca.crt" when it is missing or puts its data and description
 * back when they differ. */
#include "controllers/rootca.h"
#include "controllers/namespace.h"
#include "controllers/sync_start.h"

#include <ckube/controller.h>
#include <ckube/json.h>
#include <ckube/log.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const ckube_gvr NAMESPACES = {"", "v1", "namespaces"};
static const ckube_gvr CONFIGMAPS = {"", "v1", "configmaps"};

struct rootca {
    ckube_client *client;                    /* borrowed */
    ckube_shared_informer *namespaces, *cms; /* owned by the factory */
    ckube_controller *ctl;
    sync_start start; /* starts ctl once both caches have synced */
    char *ca;         /* owned copy of the bundle */
    size_t ca_len;
};

/* {"ca.crt": CA}, new; NULL when out of memory. */
static json_t *ca_data(const rootca *r)
{
    json_t *ca = json_stringn(r->ca, r->ca_len);
    json_t *data = ca ? json_object() : NULL;
    if (!data || json_object_set_new(data, ROOTCA_KEY, ca) != 0) {
        json_decref(data);
        return NULL;
    }
    return data;
}

/* Upstream's test: data is exactly {"ca.crt": CA} and the description
 * annotation is there and not empty (its value is not compared). */
static bool up_to_date(const rootca *r, const json_t *cm)
{
    const json_t *data = json_object_get(cm, "data");
    const json_t *ca = json_object_get(data, ROOTCA_KEY);
    if (!json_is_object(data) || json_object_size(data) != 1 || !json_is_string(ca) ||
        json_string_length(ca) != r->ca_len || memcmp(json_string_value(ca), r->ca, r->ca_len))
        return false;
    const json_t *ann = ckube_json_get_path(cm, "metadata.annotations");
    const char *d = json_string_value(json_object_get(ann, ROOTCA_DESCRIPTION_ANNOTATION));
    return d && *d;
}

static ckube_result create_cm(rootca *r, const char *ns)
{
    /* "o" takes the data, also when packing fails (NULL data included) */
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:o}", "apiVersion", "v1", "kind",
                            "ConfigMap", "metadata", "name", ROOTCA_CONFIGMAP, "annotations",
                            ROOTCA_DESCRIPTION_ANNOTATION, ROOTCA_DESCRIPTION, "data", ca_data(r));
    if (!obj)
        return ckube_result_error();
    ckube_status *err = NULL;
    int rc = ckube_create(r->client, &CONFIGMAPS, ns, obj, NULL, NULL, &err);
    json_decref(obj);
    ckube_result res = ckube_result_ok();
    if (rc == 0) {
        CKUBE_V(2, "root-ca-cert-publisher: created %s/%s", ns, ROOTCA_CONFIGMAP);
    } else if (err && (err->code == 409 || err->code == 403 || err->code == 404)) {
        /* it exists already (its event brings us back), or the namespace
         * is going or gone */
        CKUBE_V(4, "root-ca-cert-publisher: %s/%s: %s", ns, ROOTCA_CONFIGMAP,
                err->message ? err->message : "");
    } else {
        CKUBE_WARN("root-ca-cert-publisher: cannot create %s/%s: %s", ns, ROOTCA_CONFIGMAP,
                   err && err->message ? err->message : "request failed");
        res = ckube_result_error();
    }
    ckube_status_free(err);
    return res;
}

/* As upstream: the cached object with its data replaced and the
 * description annotation set, everything else as it is; a PUT at the
 * cached resourceVersion (a conflict is retried with the newer one). */
static ckube_result update_cm(rootca *r, const char *ns, const json_t *cached)
{
    json_t *obj = json_deep_copy(cached); /* cache objects are read-only */
    json_t *meta = obj ? ckube_json_object_ensure(obj, "metadata") : NULL;
    json_t *ann = meta ? ckube_json_object_ensure(meta, "annotations") : NULL;
    /* json_object_set_new takes the value, also when it fails */
    if (!ann || json_object_set_new(obj, "data", ca_data(r)) != 0 ||
        json_object_set_new(ann, ROOTCA_DESCRIPTION_ANNOTATION, json_string(ROOTCA_DESCRIPTION)) !=
            0 ||
        json_object_set_new(obj, "apiVersion", json_string("v1")) != 0 ||
        json_object_set_new(obj, "kind", json_string("ConfigMap")) != 0) {
        json_decref(obj);
        return ckube_result_error();
    }
    ckube_status *err = NULL;
    int rc = ckube_update(r->client, &CONFIGMAPS, ns, obj, NULL, NULL, &err);
    json_decref(obj);
    ckube_result res = ckube_result_ok();
    if (rc == 0) {
        CKUBE_V(2, "root-ca-cert-publisher: updated %s/%s", ns, ROOTCA_CONFIGMAP);
    } else if (err && (err->code == 409 || err->code == 404)) {
        /* changed or deleted meanwhile: its event brings us back too */
        CKUBE_V(4, "root-ca-cert-publisher: %s/%s: %s", ns, ROOTCA_CONFIGMAP,
                err->message ? err->message : "");
        res = ckube_result_error();
    } else {
        CKUBE_WARN("root-ca-cert-publisher: cannot update %s/%s: %s", ns, ROOTCA_CONFIGMAP,
                   err && err->message ? err->message : "request failed");
        res = ckube_result_error();
    }
    ckube_status_free(err);
    return res;
}

static ckube_result reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns, const char *name)
{
    (void)rc;
    (void)ns; /* namespaces are cluster-scoped: the key is the name */
    rootca *r = ctx;
    ckube_lister nsl = ckube_shared_informer_lister(r->namespaces);
    json_t *namespace = ckube_lister_get(&nsl, NULL, name);
    bool active = namespace && nsctl_namespace_active(namespace);
    ckube_obj_unref(namespace); /* cache objects: shared, atomic counts */
    if (!active)
        return ckube_result_ok();
    ckube_lister cml = ckube_shared_informer_lister(r->cms);
    json_t *cm = ckube_lister_get(&cml, name, ROOTCA_CONFIGMAP);
    ckube_result res;
    if (!cm)
        res = create_cm(r, name);
    else if (up_to_date(r, cm))
        res = ckube_result_ok();
    else
        res = update_cm(r, name, cm);
    ckube_obj_unref(cm);
    return res;
}

/* A "kube-root-ca.crt" made, changed or deleted: its namespace. Other
 * ConfigMaps map to nothing. */
static void map_cm(void *ctx, const json_t *obj, ckube_key_sink *out)
{
    (void)ctx;
    const char *name = ckube_obj_name(obj), *ns = ckube_obj_namespace(obj);
    if (name && ns && !strcmp(name, ROOTCA_CONFIGMAP))
        ckube_enqueue(out, NULL, ns);
}

rootca *rootca_new(ckube_client *c, ckube_informer_factory *f, const rootca_opts *o)
{
    if (!c || !f || !o || !o->ca || !o->ca_len)
        return NULL;
    /* ConfigMap data is text: UTF-8 without NULs */
    json_t *probe = memchr(o->ca, 0, o->ca_len) ? NULL : json_stringn(o->ca, o->ca_len);
    if (!probe) {
        CKUBE_ERROR("root-ca-cert-publisher: the CA bundle is not text");
        return NULL;
    }
    json_decref(probe);
    rootca *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->client = c;
    r->ca = malloc(o->ca_len);
    if (r->ca) {
        memcpy(r->ca, o->ca, o->ca_len);
        r->ca_len = o->ca_len;
    }
    r->namespaces = ckube_informer_factory_for(f, &NAMESPACES);
    r->cms = ckube_informer_factory_for_namespace(f, &CONFIGMAPS, NULL);
    ckube_controller_options co = {.name = "root-ca-cert-publisher",
                                   .max_concurrent_reconciles = o->workers > 0 ? o->workers : 1,
                                   .clock = o->clock,
                                   .metrics = o->metrics};
    r->ctl = r->ca && r->namespaces && r->cms ? ckube_controller_new(&co, reconcile, r) : NULL;
    ckube_shared_informer *const infs[] = {r->namespaces, r->cms};
    sync_start_init(&r->start, r->ctl, infs, 2, ckube_clock_or_real(o->clock),
                    "root-ca-cert-publisher", "rootca-start");
    /* Upstream enqueues every namespace added or updated (resyncs too)
     * and every change to a "kube-root-ca.crt"; the reconcile finds out
     * whether there is anything to do. */
    ckube_watch_spec nw = {.map = CKUBE_MAP_SELF, .label = "namespaces"};
    ckube_watch_spec cw = {.map = CKUBE_MAP_FUNC, .map_fn = map_cm, .label = "configmaps"};
    if (!r->ctl || ckube_controller_watch(r->ctl, r->namespaces, &nw) != 0 ||
        ckube_controller_watch(r->ctl, r->cms, &cw) != 0) {
        CKUBE_ERROR("root-ca-cert-publisher: cannot set up the controller");
        rootca_free(r);
        return NULL;
    }
    return r;
}

int rootca_start(rootca *r)
{
    return r ? sync_start_run(&r->start) : -1;
}

void rootca_stop(rootca *r)
{
    if (r)
        sync_start_stop(&r->start);
}

void rootca_free(rootca *r)
{
    if (!r)
        return;
    sync_start_destroy(&r->start);
    ckube_controller_free(r->ctl);
    free(r->ca);
    free(r);
}
