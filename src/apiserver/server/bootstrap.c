/* Objects every cluster has from its first start: the namespaces default,
 * kube-system, kube-public and kube-node-lease. Created through storage
 * with the same shape the create handler gives them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/server/apiserver.h"
#include "ckube/json.h"
#include "ckube/log.h"

typedef struct sync_op {
    storage_op op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} sync_op;

static void sync_done(storage_op *op, void *arg)
{
    sync_op *s = arg;
    pthread_mutex_lock(&s->mu);
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int create_namespace(apiserver *srv, const char *name)
{
    char key[256];
    snprintf(key, sizeof key, "/registry/core/namespaces/%s", name);
    cobj *have = cacher_get(srv->cache, key);
    if (have) {
        cobj_unref(have);
        return 0;
    }
    char uid[40], now[32];
    ckube_uuid4(uid, sizeof uid);
    ckube_now_rfc3339(now, sizeof now);
    json_t *ns = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s}},s:{s:[s]},s:{s:s}}", "kind",
                           "Namespace", "apiVersion", "v1", "metadata", "name", name, "uid", uid,
                           "creationTimestamp", now, "labels", "kubernetes.io/metadata.name", name,
                           "spec", "finalizers", "kubernetes", "status", "phase", "Active");
    size_t len;
    char *value = ckube_json_dumps(ns, &len);
    json_decref(ns);
    sync_op s = {.op = {.type = STORAGE_OP_CREATE,
                        .key = key,
                        .value = value,
                        .value_len = len,
                        .done = sync_done}};
    s.op.arg = &s;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    int rc = storage_submit(srv->st, &s.op);
    if (rc == 0) {
        pthread_mutex_lock(&s.mu);
        while (!s.done)
            pthread_cond_wait(&s.cv, &s.mu);
        pthread_mutex_unlock(&s.mu);
        rc = s.op.result == STORAGE_ERR_EXISTS ? 0 : s.op.result;
    }
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    free(value);
    if (rc)
        CKUBE_ERROR("creating namespace %s: %s", name, storage_strerror(rc));
    return rc;
}

int apiserver_bootstrap(apiserver *s)
{
    static const char *const names[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (create_namespace(s, names[i]) != 0)
            return -1;
    }
    return 0;
}
