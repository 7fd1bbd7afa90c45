/* namespace.c - the namespace lifecycle controller (see namespace.h).
 *
 * Behaviour follows upstream's namespaced resources deleter: every pass
 * re-reads the namespace from the server, deletes all content of every
 * discovered namespaced resource, counts what remains, reports it in the
 * namespace's conditions and finalizes the namespace once it is empty. */
#include "controllers/namespace.h"
#include "controllers/sync_start.h"

#include "common/text.h"

#include <ckube/controller.h>
#include <ckube/discovery.h>
#include <ckube/json.h>
#include <ckube/log.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ckube_gvr NAMESPACES = {"", "v1", "namespaces"};

struct nsctl {
    ckube_client *client;            /* borrowed */
    ckube_shared_informer *informer; /* borrowed from the factory */
    ckube_controller *ctl;
    ckube_clock *clock;
    uint64_t content_requeue_ns, finalizer_requeue_ns;

    sync_start start; /* starts ctl once the cache has synced */
};

/* ---- a small "name -> count" tally, in first-seen order ---- */

struct tally_entry {
    char *name;
    long count;
};

struct tally {
    struct tally_entry *v;
    size_t n, cap;
};

static void tally_add(struct tally *t, const char *name, long count)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->v[i].name, name) == 0) {
            t->v[i].count += count;
            return;
        }
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        struct tally_entry *nv = realloc(t->v, cap * sizeof(*nv));
        if (!nv)
            return;
        t->v = nv;
        t->cap = cap;
    }
    t->v[t->n].name = strdup(name);
    if (!t->v[t->n].name)
        return;
    t->v[t->n].count = count;
    t->n++;
}

static void tally_free(struct tally *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
    memset(t, 0, sizeof(*t));
}

static int tally_cmp(const void *a, const void *b)
{
    return strcmp(((const struct tally_entry *)a)->name, ((const struct tally_entry *)b)->name);
}

/* ---- one deletion pass ---- */

/* What a pass found; every field owned. */
struct pass {
    char *discovery_error;    /* NULL = discovery succeeded */
    struct tally content_err; /* error message -> 1 */
    struct tally remaining;   /* "resource.group" -> objects left */
    struct tally finalizers;  /* finalizer -> objects carrying it */
    long total_remaining;
};

static void pass_free(struct pass *p)
{
    free(p->discovery_error);
    tally_free(&p->content_err);
    tally_free(&p->remaining);
    tally_free(&p->finalizers);
}

static bool deletable(const ckube_api_resource *r)
{
    return r->namespaced && r->preferred && ckube_api_resource_has_verb(r, "list") &&
           (ckube_api_resource_has_verb(r, "delete") ||
            ckube_api_resource_has_verb(r, "deletecollection"));
}

static void content_error(struct pass *p, const ckube_api_resource *r, const char *what,
                          const ckube_status *err)
{
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s%s%s: %s: %s", r->resource, *r->group ? "." : "", r->group, what,
             err && err->message ? err->message : "unknown error");
    tally_add(&p->content_err, msg, 1);
}

/* Deletes each listed object (for resources without deletecollection).
 * Returns 0, or -1 after recording an error. */
static int delete_each(nsctl *n, const ckube_gvr *g, const ckube_api_resource *r, const char *ns,
                       struct pass *p)
{
    json_t *list = NULL;
    ckube_status *err = NULL;
    if (ckube_list_all(n->client, g, ns, NULL, &list, &err) != 0) {
        content_error(p, r, "list", err);
        ckube_status_free(err);
        return -1;
    }
    ckube_delete_opts dopts = {.propagation_policy = "Background"};
    size_t i;
    json_t *item;
    int rc = 0;
    json_array_foreach(json_object_get(list, "items"), i, item)
    {
        const char *name = ckube_obj_name(item);
        if (!name || ckube_json_get_path(item, "metadata.deletionTimestamp"))
            continue;
        if (ckube_delete(n->client, g, ns, name, &dopts, NULL, &err) != 0 &&
            !ckube_is_not_found(err)) {
            content_error(p, r, "delete", err);
            rc = -1;
        }
        ckube_status_free(err);
        err = NULL;
    }
    json_decref(list);
    return rc;
}

/* Deletes all content of one resource in `ns`, then counts what is left
 * (and the finalizers holding it) into `p`. */
static void delete_resource(nsctl *n, const ckube_api_resource *r, const char *ns, struct pass *p)
{
    ckube_gvr g = {r->group, r->version, r->resource};
    ckube_status *err = NULL;
    bool each = !ckube_api_resource_has_verb(r, "deletecollection");
    if (!each) {
        ckube_delete_opts dopts = {.propagation_policy = "Background"};
        if (ckube_delete_collection(n->client, &g, ns, NULL, &dopts, &err) != 0) {
            /* As upstream: 405 or 404 means deletecollection is not really
             * supported; fall back to deleting one by one. */
            if (ckube_status_is(err, 405) || ckube_is_not_found(err))
                each = true;
            else
                content_error(p, r, "deletecollection", err);
            ckube_status_free(err);
            err = NULL;
        }
    }
    if (each && ckube_api_resource_has_verb(r, "delete"))
        delete_each(n, &g, r, ns, p);

    json_t *list = NULL;
    if (ckube_list_all(n->client, &g, ns, NULL, &list, &err) != 0) {
        if (!ckube_is_not_found(err))
            content_error(p, r, "list", err);
        ckube_status_free(err);
        return;
    }
    json_t *items = json_object_get(list, "items");
    if (json_array_size(items) > 0) {
        char key[512];
        /* upstream's "<resource>.<group>" (so "configmaps." for core). */
        snprintf(key, sizeof(key), "%s.%s", r->resource, r->group);
        tally_add(&p->remaining, key, (long)json_array_size(items));
        p->total_remaining += (long)json_array_size(items);
        size_t i, j;
        json_t *item, *f;
        json_array_foreach(items, i, item)
        {
            json_array_foreach(ckube_json_get_path(item, "metadata.finalizers"), j, f)
            {
                if (json_is_string(f))
                    tally_add(&p->finalizers, json_string_value(f), 1);
            }
        }
    }
    json_decref(list);
}

static void delete_all_content(nsctl *n, const char *ns, struct pass *p)
{
    ckube_api_resource_list *rl = NULL;
    ckube_status *err = NULL;
    if (ckube_discovery_resources(n->client, false, &rl, &err) != 0) {
        if (asprintf(&p->discovery_error, "Discovery failed for some groups, 1 failing: %s",
                     err && err->message ? err->message : "unknown error") < 0)
            p->discovery_error = NULL;
        ckube_status_free(err);
        return;
    }
    for (size_t i = 0; i < rl->n; i++) {
        if (deletable(&rl->items[i]))
            delete_resource(n, &rl->items[i], ns, p);
    }
    ckube_api_resource_list_free(rl);
}

/* ---- conditions ---- */

/* "a, b, c" of the sorted tally, each entry formatted with fmt (which
 * takes the name then the count; NULL = the name alone). Caller frees. */
static char *join_tally(struct tally *t, const char *fmt)
{
    qsort(t->v, t->n, sizeof(*t->v), tally_cmp);
    ckube__strbuf b = {0};
    for (size_t i = 0; i < t->n; i++) {
        if (i)
            ckube__sb_add(&b, ", ");
        if (fmt)
            ckube__sb_printf(&b, fmt, t->v[i].name, t->v[i].count);
        else
            ckube__sb_add(&b, t->v[i].name);
    }
    char *out = ckube__sb_take(&b);
    return out ? out : strdup("");
}

/* The five deletion conditions of a pass, in upstream's order, as a new
 * array of condition objects without lastTransitionTime. */
static json_t *pass_conditions(struct pass *p)
{
    json_t *conds = json_array();
#define COND(type, failed, reason, msg)                                                            \
    json_array_append_new(conds, json_pack("{s:s,s:s,s:s,s:s}", "type", type, "status",            \
                                           (failed) ? "True" : "False", "reason", reason,          \
                                           "message", msg))
    if (p->discovery_error)
        COND("NamespaceDeletionDiscoveryFailure", true, "DiscoveryFailed", p->discovery_error);
    else
        COND("NamespaceDeletionDiscoveryFailure", false, "ResourcesDiscovered",
             "All resources successfully discovered");
    /* Discovery hands out parsed group/versions: parsing cannot fail. */
    COND("NamespaceDeletionGroupVersionParsingFailure", false, "ParsedGroupVersions",
         "All legacy kube types successfully parsed");
    if (p->content_err.n) {
        char *errs = join_tally(&p->content_err, NULL);
        char *msg = NULL;
        if (asprintf(&msg, "Failed to delete all resource types, %zu remaining: %s",
                     p->content_err.n, errs) < 0)
            msg = NULL;
        COND("NamespaceDeletionContentFailure", true, "ContentDeletionFailed", msg ? msg : errs);
        free(msg);
        free(errs);
    } else {
        COND("NamespaceDeletionContentFailure", false, "ContentDeleted",
             "All content successfully deleted, may be waiting on finalization");
    }
    if (p->remaining.n) {
        char *list = join_tally(&p->remaining, "%s has %ld resource instances");
        char *msg = NULL;
        if (asprintf(&msg, "Some resources are remaining: %s", list) < 0)
            msg = NULL;
        COND("NamespaceContentRemaining", true, "SomeResourcesRemain", msg ? msg : list);
        free(msg);
        free(list);
    } else {
        COND("NamespaceContentRemaining", false, "ContentRemoved",
             "All content successfully removed");
    }
    if (p->finalizers.n) {
        char *list = join_tally(&p->finalizers, "%s in %ld resource instances");
        char *msg = NULL;
        if (asprintf(&msg, "Some content in the namespace has finalizers remaining: %s", list) < 0)
            msg = NULL;
        COND("NamespaceFinalizersRemaining", true, "SomeFinalizersRemain", msg ? msg : list);
        free(msg);
        free(list);
    } else {
        COND("NamespaceFinalizersRemaining", false, "ContentHasNoFinalizers",
             "All content-preserving finalizers finished");
    }
#undef COND
    return conds;
}

static bool str_eq(const json_t *a, const json_t *b)
{
    const char *x = json_string_value(a), *y = json_string_value(b);
    return x && y ? strcmp(x, y) == 0 : x == y;
}

static json_t *find_condition(json_t *conds, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

/* Merges the pass's conditions into a copy of `ns`'s status (other
 * condition types kept; lastTransitionTime kept unless the status
 * flips) and sets phase Terminating. Returns the new object to PUT to
 * /status, or NULL when nothing would change. */
static json_t *status_update(const json_t *ns, json_t *want)
{
    json_t *obj = json_deep_copy(ns);
    json_t *status = ckube_json_object_ensure(obj, "status");
    bool changed = false;
    const char *phase = json_string_value(json_object_get(status, "phase"));
    if (!phase || strcmp(phase, "Terminating") != 0) {
        json_object_set_new(status, "phase", json_string("Terminating"));
        changed = true;
    }
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    char now[32];
    ckube_now_rfc3339(now, sizeof(now));
    size_t i;
    json_t *w;
    json_array_foreach(want, i, w)
    {
        const char *type = json_string_value(json_object_get(w, "type"));
        json_t *have = find_condition(conds, type);
        if (!have) {
            json_t *c = json_deep_copy(w);
            json_object_set_new(c, "lastTransitionTime", json_string(now));
            json_array_append_new(conds, c);
            changed = true;
            continue;
        }
        if (!str_eq(json_object_get(have, "status"), json_object_get(w, "status"))) {
            json_object_set_new(have, "lastTransitionTime", json_string(now));
            changed = true;
        }
        const char *fields[] = {"status", "reason", "message"};
        for (size_t k = 0; k < 3; k++) {
            if (!str_eq(json_object_get(have, fields[k]), json_object_get(w, fields[k]))) {
                json_object_set(have, fields[k], json_object_get(w, fields[k]));
                changed = true;
            }
        }
    }
    if (!changed) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/* Writes the pass's conditions; *ns (a new reference the caller owns) is
 * replaced by what the server answered. Retries conflicts with a fresh
 * read. Returns 0, 1 when the namespace is gone, -1 on failure. */
static int write_conditions(nsctl *n, json_t **ns, struct pass *p)
{
    json_t *want = pass_conditions(p);
    int rc = -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        json_t *upd = status_update(*ns, want);
        if (!upd) {
            rc = 0;
            break;
        }
        json_t *out = NULL;
        ckube_status *err = NULL;
        int r = ckube_update_status(n->client, &NAMESPACES, NULL, upd, NULL, &out, &err);
        json_decref(upd);
        if (r == 0) {
            json_decref(*ns);
            *ns = out;
            rc = 0;
            break;
        }
        if (ckube_is_not_found(err)) {
            ckube_status_free(err);
            rc = 1;
            break;
        }
        if (!ckube_is_conflict(err)) {
            CKUBE_WARN("namespace %s: cannot update status: %s", ckube_obj_name(*ns),
                       err && err->message ? err->message : "?");
            ckube_status_free(err);
            break;
        }
        ckube_status_free(err);
        err = NULL;
        json_t *fresh = NULL;
        if (ckube_get(n->client, &NAMESPACES, NULL, ckube_obj_name(*ns), &fresh, &err) != 0) {
            rc = ckube_is_not_found(err) ? 1 : -1;
            ckube_status_free(err);
            break;
        }
        if (!str_eq(json_object_get(json_object_get(fresh, "metadata"), "uid"),
                    json_object_get(json_object_get(*ns, "metadata"), "uid"))) {
            json_decref(fresh);
            rc = 1; /* a new namespace with the same name: not ours to touch */
            break;
        }
        json_decref(*ns);
        *ns = fresh;
    }
    json_decref(want);
    return rc;
}

/* ---- finalize ---- */

static bool has_spec_finalizer(const json_t *ns, const char *fin)
{
    size_t i;
    json_t *v;
    json_array_foreach(ckube_json_get_path(ns, "spec.finalizers"), i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), fin) == 0)
            return true;
    }
    return false;
}

/* PUT /finalize with our token removed. Returns 0 (also when the
 * namespace is already gone) or -1. */
static int finalize(nsctl *n, const json_t *ns)
{
    json_t *obj = json_deep_copy(ns);
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    json_t *keep = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "finalizers"), i, v)
    {
        if (!json_is_string(v) || strcmp(json_string_value(v), NSCTL_FINALIZER) != 0)
            json_array_append(keep, v);
    }
    json_object_set_new(spec, "finalizers", keep);
    ckube_write_opts wo = {.subresource = "finalize"};
    ckube_status *err = NULL;
    int rc = ckube_update(n->client, &NAMESPACES, NULL, obj, &wo, NULL, &err);
    json_decref(obj);
    if (rc != 0 && ckube_is_not_found(err))
        rc = 0;
    if (rc != 0)
        CKUBE_WARN("namespace %s: finalize failed: %s", ckube_obj_name(ns),
                   err && err->message ? err->message : "?");
    ckube_status_free(err);
    return rc;
}

/* ---- reconcile ---- */

static ckube_result reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns_unused,
                              const char *name)
{
    nsctl *n = ctx;
    json_t *ns = NULL;
    ckube_status *err = NULL;
    /* Several actors change a terminating namespace: read the latest. */
    if (ckube_get(n->client, &NAMESPACES, NULL, name, &ns, &err) != 0) {
        bool gone = ckube_is_not_found(err);
        ckube_status_free(err);
        return gone ? ckube_result_ok() : ckube_result_error();
    }
    if (!ckube_json_get_path(ns, "metadata.deletionTimestamp") ||
        !has_spec_finalizer(ns, NSCTL_FINALIZER)) {
        json_decref(ns);
        return ckube_result_ok();
    }
    CKUBE_V(2, "namespace controller: deleting content of namespace %s", name);
    struct pass p = {0};
    delete_all_content(n, name, &p);
    int wr = write_conditions(n, &ns, &p);
    ckube_result res;
    if (wr == 1) {
        res = ckube_result_ok();
    } else if (p.discovery_error || p.content_err.n) {
        CKUBE_WARN("namespace %s: deletion pass failed: %s", name,
                   p.discovery_error ? p.discovery_error : p.content_err.v[0].name);
        res = ckube_result_error();
    } else if (p.total_remaining > 0) {
        CKUBE_V(2, "namespace %s: %ld objects remain", name, p.total_remaining);
        res = ckube_result_requeue_after(p.finalizers.n ? n->finalizer_requeue_ns
                                                        : n->content_requeue_ns);
    } else if (wr != 0) {
        res = ckube_result_error();
    } else {
        res = finalize(n, ns) == 0 ? ckube_result_ok() : ckube_result_error();
        if (res.kind == CKUBE_RESULT_OK)
            CKUBE_INFO("namespace %s: all content removed, finalized", name);
    }
    pass_free(&p);
    json_decref(ns);
    return res;
}

/* Only namespaces being deleted are worth a pass. */
static bool is_deleting(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    return ckube_json_get_path(new_obj, "metadata.deletionTimestamp") != NULL &&
           has_spec_finalizer(new_obj, NSCTL_FINALIZER);
}

/* ---- lifecycle ---- */

nsctl *nsctl_new(ckube_client *c, ckube_informer_factory *f, const nsctl_opts *o)
{
    nsctl_opts defaults = {0};
    if (!o)
        o = &defaults;
    if (!c || !f)
        return NULL;
    nsctl *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->client = c;
    n->clock = ckube_clock_or_real(o->clock);
    n->content_requeue_ns = o->content_requeue_ns ? o->content_requeue_ns : CKUBE_SEC(1);
    n->finalizer_requeue_ns = o->finalizer_requeue_ns ? o->finalizer_requeue_ns : CKUBE_SEC(8);
    n->informer = ckube_informer_factory_for(f, &NAMESPACES);
    ckube_controller_options co = {.name = "namespace",
                                   .max_concurrent_reconciles = o->workers > 0 ? o->workers : 2,
                                   .clock = o->clock,
                                   .metrics = o->metrics};
    n->ctl = n->informer ? ckube_controller_new(&co, reconcile, n) : NULL;
    sync_start_init(&n->start, n->ctl, &n->informer, 1, n->clock, "namespace", "ns-start");
    ckube_watch_spec ws = {.map = CKUBE_MAP_SELF, .label = "namespaces"};
    ws.predicates[0] = is_deleting;
    if (!n->ctl || ckube_controller_watch(n->ctl, n->informer, &ws) != 0) {
        CKUBE_ERROR("namespace controller: cannot set up the controller");
        nsctl_free(n);
        return NULL;
    }
    return n;
}

int nsctl_start(nsctl *n)
{
    return n ? sync_start_run(&n->start) : -1;
}

void nsctl_stop(nsctl *n)
{
    if (n)
        sync_start_stop(&n->start);
}

void nsctl_free(nsctl *n)
{
    if (!n)
        return;
    sync_start_destroy(&n->start);
    ckube_controller_free(n->ctl);
    free(n);
}

bool nsctl_namespace_active(const json_t *ns)
{
    if (ckube_json_get_path(ns, "metadata.deletionTimestamp"))
        return false;
    const char *phase = json_string_value(ckube_json_get_path(ns, "status.phase"));
    return !phase || !strcmp(phase, "Active");
}
