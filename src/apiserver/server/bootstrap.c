/* Objects every cluster has from its first start, made before the loops
 * start, through the generic store as a create request makes them:
 *   - the namespaces default, kube-system, kube-public and
 *     kube-node-lease (the namespace type's prepare_create gives them
 *     their label, finalizer and phase);
 *   - the RBAC bootstrap policy (registry/rbac/bootstrap.h), reconciled
 *     on every start as kube-apiserver's rbac/bootstrap-roles post-start
 *     hook does: missing objects created, missing rules, subjects,
 *     labels and annotations added, a binding whose roleRef changed made
 *     again, objects annotated autoupdate "false" left alone;
 *   - the ConfigMap kube-system/extension-apiserver-authentication, whose
 *     client-ca-file holds the CAs whose client certificates this server
 *     takes, as kube-apiserver's cluster authentication trust controller
 *     publishes it: components that delegate authentication to the API
 *     server (ckube controller-manager's secure port, extension API
 *     servers) verify client certificates against it. Written at start
 *     (created, or its client-ca-file brought up to date);
 *   - the local APIServices of the built-in group-versions and the CRDs'
 *     (registry/apiregistration's apiregistration_sync_local).
 * Bootstrap waits for its writes: the server serves nothing before they
 * are done. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/apiregistration/apiregistration.h"
#include "apiserver/registry/rbac/bootstrap.h"
#include "apiserver/server/apiserver.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

/* One write, waited for. */
typedef struct sync_create {
    store_write sw; /* first: the store's hooks get &c->sw */
    const char *name;
    const json_t *want; /* a ConfigMap's wanted object (borrowed) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    ckube_status *st; /* how it failed, or NULL */
} sync_create;

static json_t *namespace_object(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)old;
    (void)st;
    sync_create *c = (sync_create *)sw;
    return json_pack("{s:s,s:s,s:{s:s}}", "kind", "Namespace", "apiVersion", "v1", "metadata",
                     "name", c->name);
}

/* Storage thread (or this one, for a write that ends at once). */
static void create_done(store_write *sw, store_result *r)
{
    sync_create *c = (sync_create *)sw;
    json_decref(r->obj);
    free(r->value);
    pthread_mutex_lock(&c->mu);
    c->st = r->st;
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static const store_hooks namespace_hooks = {.transform = namespace_object, .done = create_done};

/* Starts c's write and waits for it. Its Status, if it failed, is
 * c->st. */
static void run_sync(sync_create *c)
{
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    store_write_start(&c->sw);
    pthread_mutex_lock(&c->mu);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static int create_namespace(apiserver *srv, const resource_type *t, const char *name)
{
    char key[STORE_KEY_MAX];
    store_object_key(t, NULL, name, key, sizeof key);
    cobj *have = cacher_get(srv->cache, key);
    if (have) {
        cobj_unref(have);
        return 0;
    }
    sync_create c = {
        .sw = {.store = srv->store, .type = t, .verb = STORE_CREATE, .hooks = &namespace_hooks},
        .name = name};
    run_sync(&c);
    int rc = 0;
    if (c.st && c.st->code != 409) { /* made meanwhile by another server: fine */
        CKUBE_ERROR("creating namespace %s: %s", name, c.st->message);
        rc = -1;
    }
    ckube_status_free(c.st);
    return rc;
}

/* ---- the RBAC bootstrap policy ------------------------------------------- */

/* Rounds of writes per policy object before giving up: a write that lost
 * a race (the object created, changed or deleted meanwhile) is decided
 * again from what is stored in the next round; a recreated binding takes
 * two (delete, then create). Upstream's reconcile allows 3 attempts. */
#define POLICY_MAX_ROUNDS 5

typedef struct policy_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending; /* writes started and not done */
} policy_run;

typedef enum { ITEM_TODO, ITEM_WRITING, ITEM_DONE } item_state;

/* One policy object. All of a round's writes are in flight together, so
 * the committer puts them in few transactions (a first start writes 123
 * objects). */
typedef struct policy_item {
    store_write sw; /* first: the store's hooks get &it->sw */
    policy_run *run;
    resource_type *type;   /* a reference */
    const json_t *wanted;  /* borrowed from the policy */
    const char *ns, *name; /* wanted's, borrowed */
    bool binding;
    item_state state;
    rbac_reconcile rec;
    bool recreating;  /* the stored binding was deleted to be made again */
    bool failed;      /* and logged */
    char uid[128];    /* the uid of the binding being deleted */
    ckube_status *st; /* set by done (storage thread), read after the round */
} policy_item;

/* The store's transform: the object decided on (create, update). A copy
 * each time: the store fills it in, and may call again on a retry. */
static json_t *policy_object(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)old;
    (void)st;
    policy_item *it = (policy_item *)sw;
    return json_deep_copy(it->rec.object);
}

/* Storage thread (or this one, for a write that ends at once). */
static void policy_done(store_write *sw, store_result *r)
{
    policy_item *it = (policy_item *)sw;
    json_decref(r->obj);
    free(r->value);
    policy_run *run = it->run;
    pthread_mutex_lock(&run->mu);
    it->st = r->st;
    if (--run->pending == 0)
        pthread_cond_signal(&run->cv);
    pthread_mutex_unlock(&run->mu);
}

static const store_hooks policy_hooks = {.transform = policy_object, .done = policy_done};

/* The object as upstream's lines name it:
 * "clusterrole.rbac.authorization.k8s.io/admin",
 * "role.rbac.authorization.k8s.io/x in kube-system". */
static void item_label(const policy_item *it, char *buf, size_t n)
{
    if (it->ns)
        snprintf(buf, n, "%s.%s/%s in %s", it->type->singular, it->type->group, it->name, it->ns);
    else
        snprintf(buf, n, "%s.%s/%s", it->type->singular, it->type->group, it->name);
}

/* The stored object (new reference), or NULL. */
static json_t *stored(apiserver *s, const policy_item *it)
{
    char key[STORE_KEY_MAX];
    store_object_key(it->type, it->ns, it->name, key, sizeof key);
    cobj *o = cacher_get(s->cache, key);
    if (!o)
        return NULL;
    json_t *obj = cobj_decode(o);
    cobj_unref(o);
    return obj;
}

/* Decides what the item needs from what is stored now, and starts the
 * write (returns true) or finishes the item (false). */
static bool item_start(apiserver *s, policy_item *it)
{
    char what[512];
    item_label(it, what, sizeof what);
    rbac_reconcile_release(&it->rec);
    json_t *have = stored(s, it);
    if (it->binding)
        rbac_reconcile_binding(have, it->wanted, &it->rec);
    else
        rbac_reconcile_role(have, it->wanted, &it->rec);
    const char *uid = have ? ckube_obj_uid(have) : NULL;
    snprintf(it->uid, sizeof it->uid, "%s", uid ? uid : "");
    json_decref(have);
    it->st = NULL;
    if (it->rec.op == RBAC_RECONCILE_NONE) {
        it->state = ITEM_DONE;
        return false;
    }
    if (it->rec.protected_) {
        char *missing = rbac_reconcile_describe(&it->rec);
        CKUBE_WARN("skipped reconcile-protected %s with missing %s: %s", what,
                   it->binding ? "subjects" : "permissions", missing);
        free(missing);
        it->state = ITEM_DONE;
        return false;
    }
    store_verb verb = it->rec.op == RBAC_RECONCILE_CREATE   ? STORE_CREATE
                      : it->rec.op == RBAC_RECONCILE_UPDATE ? STORE_UPDATE
                                                            : STORE_DELETE;
    /* An update names the resourceVersion it was decided from (the
     * object's own): a change meanwhile is a conflict, decided again. */
    it->sw = (store_write){.store = s->store,
                           .type = it->type,
                           .verb = verb,
                           .hooks = &policy_hooks,
                           .ns = it->ns,
                           .name = it->name,
                           .pre_uid = verb == STORE_DELETE && *it->uid ? it->uid : NULL};
    it->state = ITEM_WRITING;
    pthread_mutex_lock(&it->run->mu);
    it->run->pending++;
    pthread_mutex_unlock(&it->run->mu);
    store_write_start(&it->sw);
    return true;
}

/* A round's write ended: logs it, or leaves the item for the next round
 * when it lost a race (409: created, changed or deleted meanwhile; 404:
 * gone before its update or delete). Counts what was done in n[]. */
static void item_finish(policy_item *it, size_t n[3])
{
    char what[512];
    item_label(it, what, sizeof what);
    ckube_status *st = it->st;
    it->st = NULL;
    it->state = ITEM_DONE;
    if (st) {
        if (st->code == 409 || st->code == 404) {
            if (it->rec.op == RBAC_RECONCILE_RECREATE && st->code == 404)
                it->recreating = true; /* gone already: made in the next round */
            it->state = ITEM_TODO;
        } else {
            CKUBE_ERROR("unable to reconcile %s: %s", what, st->message ? st->message : "");
            it->failed = true;
        }
        ckube_status_free(st);
        return;
    }
    switch (it->rec.op) {
    case RBAC_RECONCILE_CREATE:
        if (it->recreating) {
            CKUBE_V(2, "recreated %s", what);
            n[2]++;
        } else {
            CKUBE_V(2, "created %s", what);
            n[0]++;
        }
        break;
    case RBAC_RECONCILE_UPDATE: {
        char *missing = rbac_reconcile_describe(&it->rec);
        CKUBE_V(2, "updated %s with additional %s: %s", what,
                it->binding ? "subjects" : "permissions", missing);
        free(missing);
        n[1]++;
        break;
    }
    case RBAC_RECONCILE_RECREATE:
        /* Deleted: the next round creates the policy's binding. */
        it->recreating = true;
        it->state = ITEM_TODO;
        break;
    case RBAC_RECONCILE_NONE:
        break;
    }
}

/* Reconciles every object of the policy. A failure is logged and the
 * others still go on, as upstream ("try to create as many as you can");
 * the server starts either way. */
static void reconcile_policy(apiserver *s)
{
    json_t *policy = rbac_bootstrap_policy();
    size_t count = json_array_size(policy);
    policy_item *items = xcalloc(count, sizeof *items);
    policy_run run = {.pending = 0};
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    for (size_t i = 0; i < count; i++) {
        policy_item *it = &items[i];
        const json_t *o = json_array_get(policy, i);
        const char *kind = ckube_obj_kind(o);
        it->run = &run;
        it->wanted = o;
        it->name = ckube_obj_name(o);
        it->ns = ckube_obj_namespace(o);
        it->binding = kind && strstr(kind, "Binding");
        it->state = ITEM_DONE;
        it->type =
            registry_lookup_kind(s->registry, "rbac.authorization.k8s.io", "v1", kind ? kind : "");
        if (!it->type) {
            CKUBE_ERROR("unable to reconcile %s %s: the type is not served", kind ? kind : "?",
                        it->name ? it->name : "?");
            it->failed = true;
            continue;
        }
        it->state = ITEM_TODO;
    }
    size_t done[3] = {0, 0, 0}; /* created, updated, recreated */
    for (int round = 0; round < POLICY_MAX_ROUNDS; round++) {
        bool started = false;
        for (size_t i = 0; i < count; i++)
            if (items[i].state == ITEM_TODO && item_start(s, &items[i]))
                started = true;
        if (!started)
            break;
        pthread_mutex_lock(&run.mu);
        while (run.pending)
            pthread_cond_wait(&run.cv, &run.mu);
        pthread_mutex_unlock(&run.mu);
        for (size_t i = 0; i < count; i++)
            if (items[i].state == ITEM_WRITING)
                item_finish(&items[i], done);
    }
    size_t failed = 0;
    for (size_t i = 0; i < count; i++) {
        policy_item *it = &items[i];
        if (it->state == ITEM_TODO) {
            char what[512];
            item_label(it, what, sizeof what);
            CKUBE_ERROR("unable to reconcile %s: exceeded maximum attempts", what);
        }
        if (it->state != ITEM_DONE || it->failed)
            failed++;
        rbac_reconcile_release(&it->rec);
        if (it->type)
            resource_type_unref(it->type);
    }
    pthread_mutex_destroy(&run.mu);
    pthread_cond_destroy(&run.cv);
    free(items);
    json_decref(policy);
    if (done[0] || done[1] || done[2] || failed)
        CKUBE_INFO("RBAC bootstrap policy: %zu objects, %zu created, %zu updated, %zu recreated%s",
                   count, done[0], done[1], done[2], failed ? ", some failed (see above)" : "");
}

/* ---- extension-apiserver-authentication ------------------------------------ */

#define AUTH_CM_NAMESPACE "kube-system"
#define AUTH_CM_NAME "extension-apiserver-authentication"
#define AUTH_CM_KEY "client-ca-file"

/* The store's transform: the stored ConfigMap with the keys this server
 * publishes replaced (any others are kept), or the wanted one when there
 * is none. */
static json_t *auth_cm_object(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)st;
    sync_create *c = (sync_create *)sw;
    if (!old)
        return json_deep_copy(c->want);
    json_t *obj = json_deep_copy(old);
    json_t *data = json_object_get(obj, "data");
    if (!json_is_object(data))
        json_object_set_new(obj, "data", data = json_object());
    json_object_update(data, json_object_get(c->want, "data"));
    return obj;
}

static const store_hooks auth_cm_hooks = {.transform = auth_cm_object, .done = create_done};

/* Appends a PEM file's bytes to b (a newline between files). */
static int append_file(ckube__strbuf *b, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    if (b->len && b->s[b->len - 1] != '\n')
        ckube__sb_addc(b, '\n');
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ckube__sb_addn(b, buf, n);
    fclose(f);
    return 0;
}

/* The requestheader-* keys kube-apiserver publishes for extension API
 * servers (upstream's ClusterAuthenticationInfo): the front proxy's CA,
 * the names its client certificate may carry, and the headers it sets.
 * The lists are JSON arrays in strings, as upstream writes them. */
static void add_requestheader_keys(apiserver *s, json_t *data)
{
    ckube__strbuf b = {0};
    if (!s->cfg.front_proxy_ca_file || append_file(&b, s->cfg.front_proxy_ca_file) != 0) {
        free(ckube__sb_take(&b));
        return;
    }
    char *pem = ckube__sb_take(&b);
    json_object_set_new(data, "requestheader-client-ca-file", json_string(pem));
    json_object_set_new(data, "requestheader-allowed-names", json_string("[\"front-proxy-client\"]"));
    json_object_set_new(data, "requestheader-username-headers", json_string("[\"X-Remote-User\"]"));
    json_object_set_new(data, "requestheader-group-headers", json_string("[\"X-Remote-Group\"]"));
    json_object_set_new(data, "requestheader-extra-headers-prefix",
                        json_string("[\"X-Remote-Extra-\"]"));
    json_object_set_new(data, "requestheader-uid-headers", json_string("[\"X-Remote-Uid\"]"));
    free(pem);
}

static void publish_client_ca(apiserver *s)
{
    ckube__strbuf b = {0};
    const char *files[] = {s->cfg.cluster_ca_file, s->cfg.client_ca_file};
    for (size_t i = 0; i < 2; i++)
        if (files[i] && append_file(&b, files[i]) != 0)
            CKUBE_WARN("%s: cannot read %s for configmap/%s", AUTH_CM_NAME, files[i], AUTH_CM_NAME);
    char *pem = ckube__sb_take(&b);
    resource_type *t = registry_lookup(s->registry, "", "v1", "configmaps");
    if (!pem || !*pem || !t) { /* plain HTTP: no client certificates */
        free(pem);
        resource_type_unref(t);
        return;
    }
    char key[STORE_KEY_MAX];
    store_object_key(t, AUTH_CM_NAMESPACE, AUTH_CM_NAME, key, sizeof key);
    cobj *have = cacher_get(s->cache, key);
    json_t *old = have ? cobj_decode(have) : NULL;
    cobj_unref(have);
    json_t *want = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s}}", "apiVersion", "v1", "kind",
                             "ConfigMap", "metadata", "name", AUTH_CM_NAME, "namespace",
                             AUTH_CM_NAMESPACE, "data", AUTH_CM_KEY, pem);
    add_requestheader_keys(s, json_object_get(want, "data"));
    /* written when a key this server publishes differs */
    bool differs = false;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(want, "data"), k, v)
    {
        differs |= !json_equal(v, json_object_get(json_object_get(old, "data"), k));
    }
    if (differs) {
        sync_create c = {.sw = {.store = s->store,
                                .type = t,
                                .verb = old ? STORE_UPDATE : STORE_CREATE,
                                .hooks = &auth_cm_hooks,
                                .ns = AUTH_CM_NAMESPACE,
                                .name = AUTH_CM_NAME},
                         .want = want};
        run_sync(&c);
        if (c.st)
            CKUBE_ERROR("writing configmap %s/%s: %s", AUTH_CM_NAMESPACE, AUTH_CM_NAME,
                        c.st->message);
        else
            CKUBE_INFO("%s configmap/%s in %s with the client CA", old ? "updated" : "created",
                       AUTH_CM_NAME, AUTH_CM_NAMESPACE);
        ckube_status_free(c.st);
    }
    json_decref(want);
    json_decref(old);
    free(pem);
    resource_type_unref(t);
}

int apiserver_bootstrap(apiserver *s)
{
    static const char *const names[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    resource_type *t = registry_lookup(s->registry, "", "v1", "namespaces");
    if (!t) {
        CKUBE_ERROR("creating the default namespaces: the namespace type is not registered");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names && rc == 0; i++)
        rc = create_namespace(s, t, names[i]);
    resource_type_unref(t);
    if (rc == 0) {
        reconcile_policy(s);
        publish_client_ca(s);
        /* the local APIServices, as kube-apiserver's autoregister
         * controller makes them when it starts */
        apiregistration_sync_local(s->registry, s->store);
    }
    return rc;
}
