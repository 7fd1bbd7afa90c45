/* podcounter.c - the pod counter controller (see podcounter.h). */
#include "podcounter.h"

#include <ckube/json.h>
#include <ckube/log.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PERIOD_NS CKUBE_SEC(10)
/* How often the thread looks at the caches while waiting for them to
 * sync (real time: informers sync on real time whatever our clock). */
#define SYNC_POLL_NS CKUBE_MS(20)

static const ckube_gvr PODS = {"", "v1", "pods"};
static const ckube_gvr NODES = {"", "v1", "nodes"};
static const char *const CONTROL_PLANE_LABELS[] = {"node-role.kubernetes.io/control-plane",
                                                   "node-role.kubernetes.io/master"};

struct podcounter {
    ckube_client *client;                /* borrowed */
    ckube_informer_factory *fac;         /* borrowed */
    ckube_event_recorder *rec;           /* borrowed; may be NULL */
    ckube_shared_informer *pods, *nodes; /* owned by the factory */
    ckube_clock *clock;
    uint64_t period;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started, stopping, joined;
    pthread_t thread;
    uint64_t runs;
    long last_count;
};

podcounter *podcounter_new(ckube_client *c, ckube_informer_factory *f, ckube_event_recorder *rec,
                           const podcounter_opts *o)
{
    if (!c || !f)
        return NULL;
    podcounter *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->client = c;
    p->fac = f;
    p->rec = rec;
    p->clock = ckube_clock_or_real(o ? o->clock : NULL);
    p->period = o && o->period_ns ? o->period_ns : DEFAULT_PERIOD_NS;
    p->last_count = -1;
    /* Pods in the factory's namespace (normally all); nodes are
     * cluster-scoped whatever the factory's namespace. */
    p->pods = ckube_informer_factory_for(f, &PODS);
    p->nodes = ckube_informer_factory_for_namespace(f, &NODES, NULL);
    if (!p->pods || !p->nodes) {
        CKUBE_ERROR("pod counter: cannot get the pods and nodes informers");
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    ckube_cond_init(&p->cv);
    return p;
}

static bool stopping(podcounter *p)
{
    pthread_mutex_lock(&p->mu);
    bool s = p->stopping;
    pthread_mutex_unlock(&p->mu);
    return s;
}

/* Waits on `clock` until deadline or stop. Returns false on stop. */
static bool wait_until(podcounter *p, ckube_clock *clock, uint64_t deadline)
{
    pthread_mutex_lock(&p->mu);
    while (!p->stopping && ckube_clock_cond_wait(clock, &p->cv, &p->mu, deadline) != ETIMEDOUT)
        ;
    bool go_on = !p->stopping;
    pthread_mutex_unlock(&p->mu);
    return go_on;
}

static bool is_control_plane(const json_t *node)
{
    const json_t *labels = ckube_json_get_path(node, "metadata.labels");
    for (size_t i = 0; i < sizeof(CONTROL_PLANE_LABELS) / sizeof(*CONTROL_PLANE_LABELS); i++)
        if (json_object_get(labels, CONTROL_PLANE_LABELS[i]))
            return true;
    return false;
}

/* Sets the count label on every control-plane node whose value differs.
 * Returns the number of failed patches. */
static int label_nodes(podcounter *p, const char *count)
{
    ckube_lister l = ckube_shared_informer_lister(p->nodes);
    ckube_obj_list nodes = {0};
    if (ckube_lister_list(&l, NULL, NULL, &nodes) != 0)
        return 1;
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", PODCOUNTER_LABEL, count);
    char *body = patch ? ckube_json_dumps(patch, NULL) : NULL;
    json_decref(patch);
    int failed = body ? 0 : 1;
    for (size_t i = 0; body && i < nodes.n; i++) {
        const json_t *n = nodes.items[i];
        if (!is_control_plane(n))
            continue;
        const char *cur = json_string_value(
            json_object_get(ckube_json_get_path(n, "metadata.labels"), PODCOUNTER_LABEL));
        if (cur && strcmp(cur, count) == 0)
            continue;
        ckube_status *err = NULL;
        if (ckube_patch(p->client, &NODES, NULL, ckube_obj_name(n), CKUBE_PATCH_MERGE, body,
                        strlen(body), NULL, NULL, &err) != 0) {
            CKUBE_ERROR("pod counter: labelling node %s: %s", ckube_obj_name(n),
                        err && err->message ? err->message : "unknown error");
            failed++;
        } else {
            CKUBE_V(2, "pod counter: node %s labelled %s=%s", ckube_obj_name(n), PODCOUNTER_LABEL,
                    count);
        }
        ckube_status_free(err);
    }
    free(body);
    ckube_obj_list_free(&nodes);
    return failed;
}

/* "pod count is N" on every pod, referenced as the article does (kind,
 * apiVersion, namespace, name, uid: no resourceVersion, so the event of
 * one pod stays the same event from run to run and is deduplicated). */
static void record_events(podcounter *p, const ckube_obj_list *pods)
{
    for (size_t i = 0; p->rec && i < pods->n; i++) {
        const json_t *pod = pods->items[i];
        json_t *ref = json_pack("{s:s,s:s,s:s,s:s}", "kind", "Pod", "apiVersion", "v1", "name",
                                ckube_obj_name(pod) ? ckube_obj_name(pod) : "", "namespace",
                                ckube_obj_namespace(pod) ? ckube_obj_namespace(pod) : "");
        if (!ref)
            continue;
        if (ckube_obj_uid(pod))
            json_object_set_new(ref, "uid", json_string(ckube_obj_uid(pod)));
        ckube_event_recordf(p->rec, ref, CKUBE_EVENT_NORMAL, PODCOUNTER_REASON, "pod count is %zu",
                            pods->n);
        json_decref(ref);
    }
}

static void reconcile(podcounter *p)
{
    ckube_lister l = ckube_shared_informer_lister(p->pods);
    ckube_obj_list pods = {0};
    if (ckube_lister_list(&l, NULL, NULL, &pods) != 0) {
        CKUBE_ERROR("pod counter: listing pods from the cache failed");
        return;
    }
    CKUBE_V(2, "pod counter: %zu pods", pods.n);
    for (size_t i = 0; i < pods.n; i++)
        CKUBE_V(4, "pod counter: pod %s/%s", ckube_obj_namespace(pods.items[i]),
                ckube_obj_name(pods.items[i]));
    char count[32];
    snprintf(count, sizeof(count), "%zu", pods.n);
    label_nodes(p, count);
    record_events(p, &pods);
    pthread_mutex_lock(&p->mu);
    p->runs++;
    p->last_count = (long)pods.n;
    pthread_mutex_unlock(&p->mu);
    ckube_obj_list_free(&pods);
}

static void *run(void *arg)
{
    pthread_setname_np(pthread_self(), "podcounter"); /* top -H, perf, gdb */
    podcounter *p = arg;
    CKUBE_INFO("Starting pod counter");
    while (!(ckube_shared_informer_has_synced(p->pods) &&
             ckube_shared_informer_has_synced(p->nodes))) {
        if (!wait_until(p, ckube_clock_real(), ckube_monotonic_ns() + SYNC_POLL_NS))
            goto out;
    }
    uint64_t next = ckube_clock_now(p->clock);
    while (!stopping(p)) {
        reconcile(p);
        next += p->period;
        if (!wait_until(p, p->clock, next))
            break;
    }
out:
    CKUBE_INFO("Shutting down pod counter");
    return NULL;
}

int podcounter_start(podcounter *p)
{
    if (!p)
        return -1;
    pthread_mutex_lock(&p->mu);
    if (p->started || p->stopping) {
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    p->started = true;
    pthread_mutex_unlock(&p->mu);
    if (ckube_informer_factory_start(p->fac) != 0)
        CKUBE_WARN("pod counter: an informer of the factory failed to start");
    int rc = pthread_create(&p->thread, NULL, run, p);
    if (rc != 0) {
        CKUBE_ERROR("pod counter: starting its thread: %s", strerror(rc));
        pthread_mutex_lock(&p->mu);
        p->started = false;
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    return 0;
}

void podcounter_stop(podcounter *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    bool join = p->started && !p->joined;
    p->joined = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (join)
        pthread_join(p->thread, NULL);
}

void podcounter_free(podcounter *p)
{
    if (!p)
        return;
    podcounter_stop(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

uint64_t podcounter_runs(podcounter *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->runs;
    pthread_mutex_unlock(&p->mu);
    return n;
}

long podcounter_last_count(podcounter *p)
{
    pthread_mutex_lock(&p->mu);
    long n = p->last_count;
    pthread_mutex_unlock(&p->mu);
    return n;
}
