/* The local APIServices: what kube-apiserver's autoregister controller
 * keeps for the group-versions it serves itself, fed by its own list of
 * them (built-in, "onstart") and by its crdregistration controller (a
 * CRD's, "true"). Here the desired set is read from the registry and the
 * CRDs in the store's cache, compared with the APIServices in the cache,
 * and the difference written through the generic store (see
 * apiregistration.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/apiregistration/apiregistration.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/xalloc.h"

#define ONSTART "onstart"
#define CONTINUOUSLY "true"
/* What crdregistration gives a CRD's group-version: below every built-in
 * group, and versions ordered as Kubernetes versions among equals. */
#define CRD_GROUP_PRIORITY 1000
#define CRD_VERSION_PRIORITY 100

/* Bootstrap's count of writes in flight. */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending;
} waiter;

/* One write of an APIService. */
typedef struct as_write {
    store_write sw; /* first: the store's hooks get &w->sw */
    registry *reg;
    store *store;
    resource_type *type; /* apiservices (a reference) */
    json_t *want;        /* create: the object; update: the spec it gets */
    char *name;
    char *uid;   /* delete: the uid it was decided on */
    char *group; /* a CRD's APIService: its group, checked again once written */
    waiter *wait;
} as_write;

static void sync_group(registry *reg, store *s, const char *group, waiter *wait);

static const char *str_or_empty(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

static const char *managed_by(const json_t *obj)
{
    return str_or_empty(json_object_get(ckube_json_get_path(obj, "metadata.labels"),
                                        APIREGISTRATION_AUTOMANAGED_LABEL));
}

/* The spec of the local APIService of group/version: Go writes no empty
 * group. */
static json_t *local_spec(const char *group, const char *version, int gp, int vp)
{
    json_t *spec = json_pack("{s:s,s:i,s:i}", "version", version, "groupPriorityMinimum", gp,
                             "versionPriority", vp);
    if (*group)
        json_object_set_new(spec, "group", json_string(group));
    return spec;
}

static json_t *local_object(const char *name, json_t *spec, const char *managed)
{
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:o}", "apiVersion", APIREGISTRATION_GROUP "/v1",
                     "kind", "APIService", "metadata", "name", name, "labels",
                     APIREGISTRATION_AUTOMANAGED_LABEL, managed, "spec", spec);
}

/* ---- writes ----------------------------------------------------------------- */

static json_t *create_object(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)old;
    (void)st;
    return json_deep_copy(((as_write *)sw)->want);
}

/* The stored APIService with its spec replaced, as the autoregister
 * controller writes it (its labels and the rest kept). */
static json_t *update_object(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)st;
    json_t *obj = json_deep_copy(old);
    json_object_set_new(obj, "spec", json_deep_copy(((as_write *)sw)->want));
    return obj;
}

/* An internal write names no resourceVersion: a lost race is retried
 * from the newer object. */
static const char *no_precondition(store_write *sw, const json_t *obj)
{
    (void)sw;
    (void)obj;
    return NULL;
}

/* Storage thread (or the caller's, for a write that ends at once). A
 * conflict or a missing object is another writer's doing (another server
 * on the same store, a user): nothing to report. */
static void write_done(store_write *sw, store_result *r)
{
    as_write *w = (as_write *)sw;
    static const char *const verbs[] = {"creating", "updating", "deleting"};
    bool ok = !r->st;
    if (r->st && r->st->code != 409 && r->st->code != 404)
        CKUBE_ERROR("%s APIService %s: %s", verbs[w->sw.verb], w->name,
                    r->st->message ? r->st->message : "");
    else if (ok)
        CKUBE_V(2, "%s APIService %s: done", verbs[w->sw.verb], w->name);
    ckube_status_free(r->st);
    json_decref(r->obj);
    free(r->value);
    /* The CRDs may have changed while it was written. Only after a write
     * that changed something: the next look then finds it done, so this
     * ends. */
    if (ok && w->group)
        sync_group(w->reg, w->store, w->group, NULL);
    waiter *wait = w->wait;
    resource_type_unref(w->type);
    json_decref(w->want);
    free(w->name);
    free(w->uid);
    free(w->group);
    free(w);
    if (wait) {
        pthread_mutex_lock(&wait->mu);
        if (--wait->pending == 0)
            pthread_cond_signal(&wait->cv);
        pthread_mutex_unlock(&wait->mu);
    }
}

static const store_hooks create_hooks = {.transform = create_object, .done = write_done};
static const store_hooks update_hooks = {
    .transform = update_object, .precondition_rv = no_precondition, .done = write_done};
static const store_hooks delete_hooks = {.done = write_done};

/* Starts a write of the APIService `name`; takes `want`. */
static void start_write(registry *reg, store *s, resource_type *t, store_verb verb,
                        const char *name, json_t *want, const char *uid, const char *group,
                        waiter *wait)
{
    as_write *w = xcalloc(1, sizeof *w);
    w->reg = reg;
    w->store = s;
    w->type = resource_type_ref(t);
    w->want = want;
    w->name = xstrdup(name);
    w->uid = uid && *uid ? xstrdup(uid) : NULL;
    w->group = group ? xstrdup(group) : NULL;
    w->wait = wait;
    w->sw = (store_write){.store = s,
                          .type = t,
                          .verb = verb,
                          .hooks = verb == STORE_CREATE   ? &create_hooks
                                   : verb == STORE_UPDATE ? &update_hooks
                                                          : &delete_hooks,
                          .name = w->name,
                          .pre_uid = w->uid};
    if (wait) {
        pthread_mutex_lock(&wait->mu);
        wait->pending++;
        pthread_mutex_unlock(&wait->mu);
    }
    store_write_start(&w->sw);
}

/* ---- what is wanted, what is there --------------------------------------------- */

/* The stored APIService `name` (a new reference), or NULL. */
static json_t *stored(store *s, const resource_type *t, const char *name)
{
    char key[STORE_KEY_MAX];
    store_object_key(t, NULL, name, key, sizeof key);
    cobj *o = cacher_get(store_cache(s), key);
    if (!o)
        return NULL;
    json_t *obj = cobj_decode(o);
    cobj_unref(o);
    return obj;
}

/* The stored objects of the cluster-scoped type t, decoded: a JSON
 * array. With `group`, only those whose name is WORD.GROUP: a CRD's
 * (PLURAL.GROUP) or an APIService's (VERSION.GROUP) of that group, picked
 * by key without decoding the others (a CRD's change looks at its group
 * only, however many CRDs there are). */
static json_t *stored_all(store *s, const resource_type *t, const char *group)
{
    char prefix[256];
    resource_type_key_prefix(t, prefix, sizeof prefix);
    size_t plen = strlen(prefix), n, more;
    int64_t rev;
    cobj **objs = cacher_list(store_cache(s), prefix, NULL, NULL, 0, &n, &rev, &more);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++) {
        if (group) {
            const char *dot = strlen(objs[i]->key) > plen ? strchr(objs[i]->key + plen, '.') : NULL;
            if (!dot || strcmp(dot + 1, group))
                continue;
        }
        json_t *o = cobj_decode(objs[i]);
        if (o)
            json_array_append_new(out, o);
    }
    cacher_objs_free(objs, n);
    return out;
}

/* The local APIServices of the built-in group-versions of reg: name ->
 * spec. */
static json_t *builtin_wanted(registry *reg)
{
    json_t *out = json_object();
    size_t n;
    resource_type **types = registry_list(reg, &n);
    for (size_t i = 0; i < n; i++) {
        const resource_type *t = types[i];
        int gp, vp;
        if (t->is_custom || !apiregistration_builtin_priority(t->group, t->version, &gp, &vp))
            continue;
        char *name = xasprintf("%s.%s", t->version, t->group);
        if (!json_object_get(out, name))
            json_object_set_new(out, name, local_spec(t->group, t->version, gp, vp));
        free(name);
    }
    registry_list_free(types, n);
    return out;
}

/* The CRDs in the cache (of `group`, or all): a JSON array (empty when
 * CRDs are not served). */
static json_t *stored_crds(registry *reg, store *s, const char *group)
{
    resource_type *t =
        registry_lookup(reg, "apiextensions.k8s.io", "v1", "customresourcedefinitions");
    if (!t)
        return json_array();
    json_t *crds = stored_all(s, t, group);
    resource_type_unref(t);
    return crds;
}

/* The versions of `group` some CRD serves (as crd.c serves them: a
 * version not marked served false), less the built-in group-versions:
 * name -> spec. */
static json_t *crd_wanted(const json_t *crds, const json_t *builtin, const char *group)
{
    json_t *out = json_object();
    size_t i, j;
    json_t *crd, *ver;
    json_array_foreach(crds, i, crd)
    {
        if (strcmp(str_or_empty(ckube_json_get_path(crd, "spec.group")), group))
            continue;
        json_array_foreach(ckube_json_get_path(crd, "spec.versions"), j, ver)
        {
            const json_t *served = json_object_get(ver, "served");
            const char *v = str_or_empty(json_object_get(ver, "name"));
            if ((served && !json_is_true(served)) || !*v)
                continue;
            char *name = xasprintf("%s.%s", v, group);
            if (!json_object_get(builtin, name) && !json_object_get(out, name))
                json_object_set_new(out, name,
                                    local_spec(group, v, CRD_GROUP_PRIORITY, CRD_VERSION_PRIORITY));
            free(name);
        }
    }
    return out;
}

/* ---- syncing ------------------------------------------------------------------- */

/* Creates the wanted APIServices that are missing, and brings back the
 * spec of those labeled `managed` whose spec drifted. */
static void ensure(registry *reg, store *s, resource_type *t, const json_t *wanted,
                   const char *managed, const char *group, waiter *wait)
{
    const char *name;
    json_t *spec;
    json_object_foreach((json_t *)wanted, name, spec)
    {
        json_t *have = stored(s, t, name);
        if (!have)
            start_write(reg, s, t, STORE_CREATE, name,
                        local_object(name, json_deep_copy(spec), managed), NULL, group, wait);
        else if (!strcmp(managed_by(have), managed) &&
                 !json_equal(json_object_get(have, "spec"), spec))
            start_write(reg, s, t, STORE_UPDATE, name, json_deep_copy(spec), NULL, group, wait);
        json_decref(have);
    }
}

/* Deletes an APIService decided on from `have`. */
static void delete_one(registry *reg, store *s, resource_type *t, const json_t *have,
                       const char *group, waiter *wait)
{
    start_write(reg, s, t, STORE_DELETE, ckube_obj_name(have), NULL, ckube_obj_uid(have), group,
                wait);
}

static void sync_group(registry *reg, store *s, const char *group, waiter *wait)
{
    if (!group || !*group)
        return;
    resource_type *t = registry_lookup(reg, APIREGISTRATION_GROUP, "v1", "apiservices");
    if (!t)
        return;
    json_t *builtin = builtin_wanted(reg);
    json_t *crds = stored_crds(reg, s, group);
    json_t *wanted = crd_wanted(crds, builtin, group);
    json_t *all = stored_all(s, t, group);
    size_t i;
    json_t *have;
    json_array_foreach(all, i, have)
    {
        const char *name = ckube_obj_name(have);
        if (!name || strcmp(str_or_empty(ckube_json_get_path(have, "spec.group")), group) ||
            strcmp(managed_by(have), CONTINUOUSLY) || json_object_get(wanted, name) ||
            json_object_get(builtin, name))
            continue;
        delete_one(reg, s, t, have, group, wait);
    }
    ensure(reg, s, t, wanted, CONTINUOUSLY, group, wait);
    json_decref(all);
    json_decref(wanted);
    json_decref(crds);
    json_decref(builtin);
    resource_type_unref(t);
}

void apiregistration_sync_crd_group(registry *reg, store *s, const char *group)
{
    sync_group(reg, s, group, NULL);
}

void apiregistration_sync_local(registry *reg, store *s)
{
    resource_type *t = registry_lookup(reg, APIREGISTRATION_GROUP, "v1", "apiservices");
    if (!t)
        return;
    waiter wait = {.pending = 0};
    pthread_mutex_init(&wait.mu, NULL);
    pthread_cond_init(&wait.cv, NULL);

    /* The built-in group-versions, and those no longer served. */
    json_t *builtin = builtin_wanted(reg);
    ensure(reg, s, t, builtin, ONSTART, NULL, &wait);
    json_t *all = stored_all(s, t, NULL);
    json_t *groups = json_object(); /* the CRD groups to look at */
    size_t i;
    json_t *have;
    json_array_foreach(all, i, have)
    {
        const char *managed = managed_by(have);
        const char *name = ckube_obj_name(have);
        if (!name)
            continue;
        if (!strcmp(managed, ONSTART) && !json_object_get(builtin, name))
            delete_one(reg, s, t, have, NULL, &wait);
        else if (!strcmp(managed, CONTINUOUSLY))
            json_object_set_new(groups, str_or_empty(ckube_json_get_path(have, "spec.group")),
                                json_true());
    }
    /* Each CRD group, and each group of a CRD APIService whose CRDs may be
     * gone (deleted while no server ran). */
    json_t *crds = stored_crds(reg, s, NULL);
    json_array_foreach(crds, i, have)
    {
        json_object_set_new(groups, str_or_empty(ckube_json_get_path(have, "spec.group")),
                            json_true());
    }
    const char *group;
    json_t *v;
    json_object_foreach(groups, group, v) sync_group(reg, s, group, &wait);

    pthread_mutex_lock(&wait.mu);
    while (wait.pending)
        pthread_cond_wait(&wait.cv, &wait.mu);
    pthread_mutex_unlock(&wait.mu);
    pthread_mutex_destroy(&wait.mu);
    pthread_cond_destroy(&wait.cv);
    json_decref(crds);
    json_decref(groups);
    json_decref(all);
    json_decref(builtin);
    resource_type_unref(t);
}
