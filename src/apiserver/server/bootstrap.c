/* Objects every cluster has from its first start: the namespaces default,
 * kube-system, kube-public and kube-node-lease. Created through the
 * generic store, as a create request makes them (the namespace type's
 * prepare_create gives them their label, finalizer and phase), before
 * the loops start: bootstrap waits for each write. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/server/apiserver.h"
#include "ckube/json.h"
#include "ckube/log.h"

/* One create, waited for. */
typedef struct sync_create {
    store_write sw; /* first: the store's hooks get &c->sw */
    const char *name;
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

static int create_namespace(apiserver *srv, const resource_type *t, const char *name)
{
    char key[STORE_KEY_MAX];
    store_object_key(t, NULL, name, key, sizeof key);
    cobj *have = cacher_get(srv->cache, key);
    if (have) {
        cobj_unref(have);
        return 0;
    }
    sync_create c = {.sw = {.store = srv->store,
                            .type = t,
                            .verb = STORE_CREATE,
                            .hooks = &namespace_hooks},
                     .name = name};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    store_write_start(&c.sw);
    pthread_mutex_lock(&c.mu);
    while (!c.done)
        pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    int rc = 0;
    if (c.st && c.st->code != 409) { /* made meanwhile by another server: fine */
        CKUBE_ERROR("creating namespace %s: %s", name, c.st->message);
        rc = -1;
    }
    ckube_status_free(c.st);
    return rc;
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
    return rc;
}
