/* gc.c - the garbage collector (see gc.h).
 *
 * Data flow (upstream's design):
 *
 *   monitors (one informer per resource) --events--> graph queue
 *   graph thread: applies events to the uid graph, and on the transitions
 *     that matter enqueues uids on attempt_to_delete / attempt_to_orphan
 *   workers: decide with live reads from the server, then delete / patch
 *
 * Locks, in the only order they nest: wlock (workers read, resync write)
 * then gmu (the graph); qmu (graph queue), amu (absent cache) and mu (run
 * thread state) are leaves. No lock is held across an API call except
 * wlock in read mode by workers. */
#include "controllers/gc.h"

#include <ckube/controller.h>
#include <ckube/discovery.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/workqueue.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/tree.h>

#define ABSENT_MAX 1024

/* ====================================================================
 * Graph
 * ==================================================================== */

struct owner_ref {
    char *api_version, *kind, *name, *uid;
    bool block; /* blockOwnerDeletion */
};

struct node {
    RB_ENTRY(node) link;
    char *uid;
    char *api_version, *kind, *ns, *name; /* ns NULL: cluster-scoped (or unknown if virtual) */
    bool observed;                        /* seen by a monitor; false = virtual */
    bool being_deleted;
    bool deleting_dependents;
    struct owner_ref *owners;
    size_t nowners;
    struct node **deps;
    size_t ndeps, capdeps;
};

static int node_cmp(const struct node *a, const struct node *b)
{
    return strcmp(a->uid, b->uid);
}

RB_HEAD(nodetree, node);
/* libbsd's RB_GENERATE_STATIC marks the functions __unused but leaves the
 * macro undefined outside BSD. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
RB_GENERATE_STATIC(nodetree, node, link, node_cmp)
#undef __unused

static void owners_free(struct owner_ref *o, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(o[i].api_version);
        free(o[i].kind);
        free(o[i].name);
        free(o[i].uid);
    }
    free(o);
}

static void node_free(struct node *n)
{
    free(n->uid);
    free(n->api_version);
    free(n->kind);
    free(n->ns);
    free(n->name);
    owners_free(n->owners, n->nowners);
    free(n->deps);
    free(n);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void set_str(char **dst, const char *v)
{
    if ((*dst && v && strcmp(*dst, v) == 0) || (!*dst && !v))
        return;
    free(*dst);
    *dst = dup_or_null(v);
}

/* The ownerReferences of obj with a uid, as a new array. */
static struct owner_ref *parse_owners(const json_t *obj, size_t *n)
{
    json_t *refs = ckube_json_get_path(obj, "metadata.ownerReferences");
    *n = 0;
    size_t cnt = json_array_size(refs);
    if (!cnt)
        return NULL;
    struct owner_ref *o = calloc(cnt, sizeof(*o));
    if (!o)
        return NULL;
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r)
    {
        const char *uid = json_string_value(json_object_get(r, "uid"));
        if (!uid)
            continue;
        struct owner_ref *x = &o[(*n)++];
        x->uid = strdup(uid);
        x->api_version = dup_or_null(json_string_value(json_object_get(r, "apiVersion")));
        x->kind = dup_or_null(json_string_value(json_object_get(r, "kind")));
        x->name = dup_or_null(json_string_value(json_object_get(r, "name")));
        x->block = json_is_true(json_object_get(r, "blockOwnerDeletion"));
    }
    return o;
}

static const struct owner_ref *find_owner(const struct owner_ref *o, size_t n, const char *uid)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(o[i].uid, uid) == 0)
            return &o[i];
    }
    return NULL;
}

static void deps_add(struct node *owner, struct node *dep)
{
    for (size_t i = 0; i < owner->ndeps; i++) {
        if (owner->deps[i] == dep)
            return;
    }
    if (owner->ndeps == owner->capdeps) {
        size_t cap = owner->capdeps ? owner->capdeps * 2 : 4;
        struct node **nd = realloc(owner->deps, cap * sizeof(*nd));
        if (!nd)
            return;
        owner->deps = nd;
        owner->capdeps = cap;
    }
    owner->deps[owner->ndeps++] = dep;
}

static void deps_remove(struct node *owner, struct node *dep)
{
    for (size_t i = 0; i < owner->ndeps; i++) {
        if (owner->deps[i] == dep) {
            owner->deps[i] = owner->deps[--owner->ndeps];
            return;
        }
    }
}

/* ====================================================================
 * The collector
 * ==================================================================== */

/* One event for the graph thread. Observed events carry the object (a
 * shared cache reference, read-only) and the monitor's apiVersion/kind;
 * virtual deletes (from workers that found an object gone) carry an
 * identity instead. Every field owned. */
enum gev_type { GEV_ADD, GEV_UPDATE, GEV_DELETE, GEV_VIRTUAL_DELETE };

/* What the graph needs of an observed object, taken from it in the
 * handler: the event queue holds these rather than the objects, so an
 * initial list of 100k objects that the graph thread works through after
 * the handler does not keep 100k object trees alive meanwhile. */
struct gevent {
    struct gevent *next;
    enum gev_type type;
    char *api_version, *kind;
    char *uid;
    char *ns, *name; /* observed events */
    struct owner_ref *owners;
    size_t nowners;
    bool being_deleted, fin_orphan, fin_foreground;
};

struct monitor {
    struct monitor *next;
    gc *g;
    char *group, *version, *resource, *api_version, *kind;
    bool is_crd;
    bool seen; /* marked during a resync */
    ckube_shared_informer *inf;
    ckube_handler_reg *reg;
};

struct gc {
    ckube_client *client;
    ckube_rest_mapper *mapper;
    ckube_clock *clock;
    int ndel, norph;
    uint64_t resync_ns, sync_timeout_ns;

    /* graph (gmu) */
    pthread_mutex_t gmu;
    struct nodetree nodes;
    size_t nnodes;

    /* graph queue (qmu) */
    pthread_mutex_t qmu;
    pthread_cond_t qcond;
    struct gevent *qhead, *qtail;
    uint64_t enq_seq, done_seq;
    bool qclosed;
    pthread_t graph_thread;
    bool graph_running;

    ckube_workqueue *to_delete, *to_orphan;
    pthread_rwlock_t wlock;
    pthread_t *workers;
    int nworkers;

    /* monitors: changed by the run thread only (and by stop after joining
     * it); nmonitors is read under mu by gc_monitor_count. */
    struct monitor *monitors;
    size_t nmonitors;

    /* absent owners (amu): identities verified not to exist */
    pthread_mutex_t amu;
    char *absent[ABSENT_MAX];
    size_t absent_next;

    /* run thread (mu) */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    pthread_t run_thread;
    bool run_started;
    bool stopping;
    bool resync_requested;
    bool ready; /* workers started */
};

/* ---- absent owner cache ---- */

static char *absent_key(const char *uid, const char *ns, const char *api_version, const char *kind,
                        const char *name)
{
    /* The group only: an owner does not come back because the version in
     * a reference differs. */
    const char *slash = api_version ? strchr(api_version, '/') : NULL;
    int glen = slash ? (int)(slash - api_version) : 0;
    char *k = NULL;
    if (asprintf(&k, "%s|%s|%.*s|%s|%s", uid, ns ? ns : "", glen, slash ? api_version : "",
                 kind ? kind : "", name ? name : "") < 0)
        return NULL;
    return k;
}

static bool absent_has(gc *g, const char *key)
{
    bool found = false;
    pthread_mutex_lock(&g->amu);
    for (size_t i = 0; i < ABSENT_MAX && !found; i++)
        found = g->absent[i] && strcmp(g->absent[i], key) == 0;
    pthread_mutex_unlock(&g->amu);
    return found;
}

static void absent_add(gc *g, const char *key)
{
    if (!key || absent_has(g, key))
        return;
    char *copy = strdup(key);
    pthread_mutex_lock(&g->amu);
    free(g->absent[g->absent_next]);
    g->absent[g->absent_next] = copy;
    g->absent_next = (g->absent_next + 1) % ABSENT_MAX;
    pthread_mutex_unlock(&g->amu);
}

/* ---- graph queue ---- */

static void gevent_free(struct gevent *ev)
{
    free(ev->api_version);
    free(ev->kind);
    free(ev->uid);
    free(ev->ns);
    free(ev->name);
    owners_free(ev->owners, ev->nowners);
    free(ev);
}

static void gq_push(gc *g, struct gevent *ev)
{
    pthread_mutex_lock(&g->qmu);
    if (g->qclosed) {
        pthread_mutex_unlock(&g->qmu);
        gevent_free(ev);
        return;
    }
    if (g->qtail)
        g->qtail->next = ev;
    else
        g->qhead = ev;
    g->qtail = ev;
    g->enq_seq++;
    pthread_cond_broadcast(&g->qcond);
    pthread_mutex_unlock(&g->qmu);
}

static void push_observed(struct monitor *m, enum gev_type type, const json_t *obj)
{
    const char *uid = obj ? ckube_obj_uid(obj) : NULL;
    if (!uid)
        return; /* a tombstone with no known state, or no uid: nothing to apply */
    struct gevent *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return;
    ev->type = type;
    ev->uid = strdup(uid);
    ev->api_version = strdup(m->api_version);
    ev->kind = strdup(m->kind);
    if (type != GEV_DELETE) {
        ev->ns = dup_or_null(ckube_obj_namespace(obj));
        ev->name = dup_or_null(ckube_obj_name(obj));
        ev->owners = parse_owners(obj, &ev->nowners);
        ev->being_deleted = ckube_json_get_path(obj, "metadata.deletionTimestamp") != NULL;
        ev->fin_orphan = ckube_has_finalizer(obj, GC_FINALIZER_ORPHAN);
        ev->fin_foreground = ckube_has_finalizer(obj, GC_FINALIZER_FOREGROUND);
    }
    gq_push(m->g, ev);
}

static void push_virtual_delete(gc *g, const char *uid)
{
    struct gevent *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return;
    ev->type = GEV_VIRTUAL_DELETE;
    ev->uid = strdup(uid);
    gq_push(g, ev);
}

/* ---- graph changes (graph thread, gmu held) ---- */

static struct node *find_node(gc *g, const char *uid)
{
    struct node key = {.uid = (char *)uid};
    return RB_FIND(nodetree, &g->nodes, &key);
}

static struct node *insert_node(gc *g, const char *uid)
{
    struct node *n = calloc(1, sizeof(*n));
    if (!n || !(n->uid = strdup(uid))) {
        free(n);
        return NULL;
    }
    RB_INSERT(nodetree, &g->nodes, n);
    g->nnodes++;
    return n;
}

/* Makes dep a dependent of the owner `ref` names, creating (and queueing
 * for verification) a virtual owner when the uid is unknown. */
static void add_to_owner(gc *g, struct node *dep, const struct owner_ref *ref)
{
    struct node *o = find_node(g, ref->uid);
    if (!o) {
        o = insert_node(g, ref->uid);
        if (!o)
            return;
        o->api_version = dup_or_null(ref->api_version);
        o->kind = dup_or_null(ref->kind);
        o->name = dup_or_null(ref->name);
        /* Tentative: the worker resolves the scope from the kind. */
        o->ns = dup_or_null(dep->ns);
        ckube_workqueue_add(g->to_delete, o->uid);
    } else if (o->observed && o->ns && (!dep->ns || strcmp(o->ns, dep->ns) != 0)) {
        /* A namespaced owner lives in its dependent's namespace or not at
         * all: let the worker verify the reference where it points. */
        ckube_workqueue_add(g->to_delete, dep->uid);
    }
    deps_add(o, dep);
}

/* Removes n from the graph: its dependents are queued (their owner is
 * gone), and owners waiting for their dependents are queued (one fewer
 * now). Frees n. */
static void remove_node(gc *g, struct node *n)
{
    for (size_t i = 0; i < n->nowners; i++) {
        struct node *o = find_node(g, n->owners[i].uid);
        if (!o)
            continue;
        deps_remove(o, n);
        if (o->deleting_dependents)
            ckube_workqueue_add(g->to_delete, o->uid);
    }
    for (size_t i = 0; i < n->ndeps; i++)
        ckube_workqueue_add(g->to_delete, n->deps[i]->uid);
    RB_REMOVE(nodetree, &g->nodes, n);
    g->nnodes--;
    node_free(n);
}

/* New ownerReferences for an existing node: unlinks removed owners
 * (queueing those waiting for dependents), links added ones. Takes
 * ownership of `owners`. */
static void update_owners(gc *g, struct node *n, struct owner_ref *owners, size_t nowners)
{
    for (size_t i = 0; i < n->nowners; i++) {
        const struct owner_ref *old = &n->owners[i];
        const struct owner_ref *cur = find_owner(owners, nowners, old->uid);
        struct node *o = find_node(g, old->uid);
        if (!o)
            continue;
        if (!cur)
            deps_remove(o, n);
        /* Gone, or no longer blocking: a foreground owner may be done. */
        if ((!cur || (old->block && !cur->block)) && o->deleting_dependents)
            ckube_workqueue_add(g->to_delete, o->uid);
    }
    struct owner_ref *old = n->owners;
    size_t nold = n->nowners;
    n->owners = owners;
    n->nowners = nowners;
    for (size_t i = 0; i < nowners; i++) {
        if (!find_owner(old, nold, owners[i].uid))
            add_to_owner(g, n, &owners[i]);
    }
    owners_free(old, nold);
}

static void apply_observed(gc *g, struct gevent *ev)
{
    if (!ev->uid)
        return;
    struct node *n = find_node(g, ev->uid);
    if (ev->type == GEV_DELETE) {
        if (n)
            remove_node(g, n);
        return;
    }
    if (!n && !(n = insert_node(g, ev->uid)))
        return;
    n->observed = true;
    set_str(&n->api_version, ev->api_version);
    set_str(&n->kind, ev->kind);
    set_str(&n->ns, ev->ns);
    set_str(&n->name, ev->name);
    update_owners(g, n, ev->owners, ev->nowners); /* takes them */
    ev->owners = NULL;
    ev->nowners = 0;
    n->being_deleted = ev->being_deleted;
    if (!n->being_deleted)
        return;
    if (ev->fin_orphan)
        ckube_workqueue_add(g->to_orphan, n->uid);
    if (ev->fin_foreground && !n->deleting_dependents) {
        n->deleting_dependents = true;
        for (size_t i = 0; i < n->ndeps; i++)
            ckube_workqueue_add(g->to_delete, n->deps[i]->uid);
        ckube_workqueue_add(g->to_delete, n->uid);
    }
}

static void *graph_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gc-graph"); /* top -H, perf, gdb */
    gc *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->qmu);
        while (!g->qhead && !g->qclosed)
            pthread_cond_wait(&g->qcond, &g->qmu);
        struct gevent *ev = g->qhead;
        if (!ev) {
            pthread_mutex_unlock(&g->qmu);
            return NULL;
        }
        g->qhead = ev->next;
        if (!g->qhead)
            g->qtail = NULL;
        pthread_mutex_unlock(&g->qmu);

        pthread_mutex_lock(&g->gmu);
        if (ev->type == GEV_VIRTUAL_DELETE) {
            struct node *n = find_node(g, ev->uid);
            if (n)
                remove_node(g, n);
        } else {
            apply_observed(g, ev);
        }
        pthread_mutex_unlock(&g->gmu);
        gevent_free(ev);

        pthread_mutex_lock(&g->qmu);
        g->done_seq++;
        pthread_cond_broadcast(&g->qcond);
        pthread_mutex_unlock(&g->qmu);
    }
}

/* ====================================================================
 * Workers
 * ==================================================================== */

/* What a worker needs of a node, copied out of the graph. */
struct dep_snap {
    char *uid, *api_version, *kind, *ns, *name;
    bool blocks;              /* its reference to the item has blockOwnerDeletion */
    bool deleting_dependents; /* it waits for its own dependents */
};

struct snap {
    char *uid, *api_version, *kind, *ns, *name;
    bool observed, being_deleted, deleting_dependents;
    struct dep_snap *deps;
    size_t ndeps;
};

static void snap_free(struct snap *s)
{
    for (size_t i = 0; i < s->ndeps; i++) {
        free(s->deps[i].uid);
        free(s->deps[i].api_version);
        free(s->deps[i].kind);
        free(s->deps[i].ns);
        free(s->deps[i].name);
    }
    free(s->deps);
    free(s->uid);
    free(s->api_version);
    free(s->kind);
    free(s->ns);
    free(s->name);
}

/* Copies node `uid` out of the graph. Returns false when it is not there. */
static bool take_snap(gc *g, const char *uid, struct snap *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_lock(&g->gmu);
    struct node *n = find_node(g, uid);
    if (!n) {
        pthread_mutex_unlock(&g->gmu);
        return false;
    }
    s->uid = strdup(n->uid);
    s->api_version = dup_or_null(n->api_version);
    s->kind = dup_or_null(n->kind);
    s->ns = dup_or_null(n->ns);
    s->name = dup_or_null(n->name);
    s->observed = n->observed;
    s->being_deleted = n->being_deleted;
    s->deleting_dependents = n->deleting_dependents;
    s->deps = n->ndeps ? calloc(n->ndeps, sizeof(*s->deps)) : NULL;
    for (size_t i = 0; s->deps && i < n->ndeps; i++) {
        struct node *d = n->deps[i];
        const struct owner_ref *r = find_owner(d->owners, d->nowners, n->uid);
        s->deps[i] = (struct dep_snap){.uid = strdup(d->uid),
                                       .api_version = dup_or_null(d->api_version),
                                       .kind = dup_or_null(d->kind),
                                       .ns = dup_or_null(d->ns),
                                       .name = dup_or_null(d->name),
                                       .blocks = r && r->block,
                                       .deleting_dependents = d->deleting_dependents};
        s->ndeps++;
    }
    pthread_mutex_unlock(&g->gmu);
    return true;
}

/* Where an object of apiVersion/kind lives: *gvr points into *m (clear
 * it). `dep_ns` is the namespace of the object that names it (or its own
 * namespace). Returns 0, or -1 with a message logged at -v 4. */
static int resolve(gc *g, const char *api_version, const char *kind, ckube_rest_mapping *m)
{
    ckube_status *err = NULL;
    if (ckube_rest_mapper_kind(g->mapper, api_version, kind, m, &err) != 0) {
        CKUBE_V(4, "garbage collector: cannot map %s %s: %s", api_version ? api_version : "",
                kind ? kind : "", err && err->message ? err->message : "?");
        ckube_status_free(err);
        return -1;
    }
    return 0;
}

enum lookup { L_FOUND, L_ABSENT, L_ERROR };

/* Live GET of api_version/kind ns/name; ABSENT when not found or the uid
 * differs (recorded in the absent cache), FOUND with *out. `ns` is used
 * only if the kind is namespaced; a namespaced kind with ns NULL is an
 * invalid reference: ABSENT. */
static enum lookup live_get(gc *g, const char *api_version, const char *kind, const char *ns,
                            const char *name, const char *uid, json_t **out)
{
    *out = NULL;
    ckube_rest_mapping m;
    if (!name || resolve(g, api_version, kind, &m) != 0)
        return L_ERROR;
    const char *where = m.namespaced ? ns : NULL;
    char *key = absent_key(uid, where, api_version, kind, name);
    enum lookup res;
    if (m.namespaced && !ns) {
        res = L_ABSENT;
    } else if (key && absent_has(g, key)) {
        res = L_ABSENT;
    } else {
        ckube_status *err = NULL;
        json_t *obj = NULL;
        if (ckube_get(g->client, &m.gvr, where, name, &obj, &err) != 0) {
            res = ckube_is_not_found(err) ? L_ABSENT : L_ERROR;
            if (res == L_ERROR)
                CKUBE_V(2, "garbage collector: get %s %s/%s: %s", kind, where ? where : "", name,
                        err && err->message ? err->message : "?");
            ckube_status_free(err);
        } else if (!ckube_obj_uid(obj) || strcmp(ckube_obj_uid(obj), uid) != 0) {
            json_decref(obj);
            res = L_ABSENT;
        } else {
            *out = obj;
            res = L_FOUND;
        }
        if (res == L_ABSENT)
            absent_add(g, key);
    }
    free(key);
    ckube_rest_mapping_clear(&m);
    return res;
}

/* A merge patch of obj's ownerReferences (with its resourceVersion as a
 * precondition). `refs` is taken. Returns 0 (also when obj is gone) or -1. */
static int patch_owner_refs(gc *g, const ckube_gvr *gvr, const json_t *obj, json_t *refs)
{
    const char *rv = ckube_obj_resource_version(obj);
    json_t *patch = json_pack("{s:{s:s,s:o}}", "metadata", "resourceVersion", rv ? rv : "",
                              "ownerReferences", json_array_size(refs) ? refs : json_null());
    if (!json_array_size(refs))
        json_decref(refs);
    size_t len = 0;
    char *body = patch ? ckube_json_dumps(patch, &len) : NULL;
    json_decref(patch);
    if (!body)
        return -1;
    ckube_status *err = NULL;
    int rc = ckube_patch(g->client, gvr, ckube_obj_namespace(obj), ckube_obj_name(obj),
                         CKUBE_PATCH_MERGE, body, len, NULL, NULL, &err);
    free(body);
    if (rc != 0 && ckube_is_not_found(err))
        rc = 0;
    if (rc != 0)
        CKUBE_V(2, "garbage collector: patching ownerReferences of %s: %s", ckube_obj_name(obj),
                err && err->message ? err->message : "?");
    ckube_status_free(err);
    return rc;
}

static bool uid_in(const char *uid, char **uids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(uids[i], uid) == 0)
            return true;
    }
    return false;
}

/* obj's ownerReferences without those whose uid is in `drop`. */
static json_t *refs_without(const json_t *obj, char **drop, size_t ndrop)
{
    json_t *keep = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(ckube_json_get_path(obj, "metadata.ownerReferences"), i, r)
    {
        const char *uid = json_string_value(json_object_get(r, "uid"));
        if (!uid || !uid_in(uid, drop, ndrop))
            json_array_append(keep, r);
    }
    return keep;
}

static int delete_object(gc *g, const ckube_gvr *gvr, const char *ns, const char *name,
                         const char *uid, const char *policy)
{
    ckube_delete_opts o = {.propagation_policy = policy, .precondition_uid = uid};
    ckube_status *err = NULL;
    int rc = ckube_delete(g->client, gvr, ns, name, &o, NULL, &err);
    /* Gone already, or the name now holds another object. */
    if (rc != 0 && (ckube_is_not_found(err) || ckube_is_conflict(err)))
        rc = 0;
    else if (rc == 0)
        CKUBE_INFO("garbage collector: deleted %s %s%s%s (propagation %s)", gvr->resource,
                   ns ? ns : "", ns ? "/" : "", name, policy);
    else
        CKUBE_WARN("garbage collector: deleting %s %s: %s", gvr->resource, name,
                   err && err->message ? err->message : "?");
    ckube_status_free(err);
    return rc;
}

/* An owner waiting for its dependents (foreground): remove its finalizer
 * once no dependent blocks, else make sure the blocking ones are being
 * deleted. */
static int process_deleting_dependents(gc *g, const struct snap *s, const ckube_gvr *gvr,
                                       const json_t *latest)
{
    size_t blocking = 0;
    for (size_t i = 0; i < s->ndeps; i++) {
        if (!s->deps[i].blocks)
            continue;
        blocking++;
        if (!s->deps[i].deleting_dependents)
            ckube_workqueue_add(g->to_delete, s->deps[i].uid);
    }
    if (blocking) {
        CKUBE_V(4, "garbage collector: %s %s waits for %zu blocking dependents", s->kind, s->name,
                blocking);
        return 0;
    }
    ckube_status *err = NULL;
    int rc = ckube_finalizer_remove(g->client, gvr, latest, GC_FINALIZER_FOREGROUND, NULL, &err);
    if (rc != 0 && ckube_is_not_found(err))
        rc = 0;
    if (rc == 0)
        CKUBE_INFO("garbage collector: %s %s: dependents deleted, removed %s", s->kind, s->name,
                   GC_FINALIZER_FOREGROUND);
    ckube_status_free(err);
    return rc;
}

/* Sets blockOwnerDeletion=false on every reference of obj that blocks
 * (upstream's cycle breaker before a foreground delete). */
static int unblock_owner_refs(gc *g, const ckube_gvr *gvr, const json_t *obj)
{
    json_t *refs = json_deep_copy(ckube_json_get_path(obj, "metadata.ownerReferences"));
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r)
    {
        if (json_is_true(json_object_get(r, "blockOwnerDeletion")))
            json_object_set_new(r, "blockOwnerDeletion", json_false());
    }
    return patch_owner_refs(g, gvr, obj, refs ? refs : json_array());
}

/* Classifies latest's owners and acts (upstream's attemptToDeleteItem
 * after the item itself was read). Returns 0 or -1 (retry). */
static int collect_if_orphaned(gc *g, const struct snap *s, const ckube_gvr *gvr,
                               const json_t *latest)
{
    json_t *refs = ckube_json_get_path(latest, "metadata.ownerReferences");
    size_t n = json_array_size(refs);
    if (!n)
        return 0;
    const char *ns = ckube_obj_namespace(latest);
    char **gone = calloc(n, sizeof(char *)), **waiting = calloc(n, sizeof(char *));
    size_t ngone = 0, nwaiting = 0, nsolid = 0;
    int rc = 0;
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r)
    {
        const char *uid = json_string_value(json_object_get(r, "uid"));
        if (!uid || !gone || !waiting)
            continue;
        json_t *owner = NULL;
        enum lookup l = live_get(g, json_string_value(json_object_get(r, "apiVersion")),
                                 json_string_value(json_object_get(r, "kind")), ns,
                                 json_string_value(json_object_get(r, "name")), uid, &owner);
        if (l == L_ERROR) {
            rc = -1;
            break;
        }
        if (l == L_ABSENT) {
            gone[ngone++] = (char *)uid;
        } else if (ckube_json_get_path(owner, "metadata.deletionTimestamp") &&
                   ckube_has_finalizer(owner, GC_FINALIZER_FOREGROUND)) {
            waiting[nwaiting++] = (char *)uid;
        } else {
            nsolid++;
        }
        json_decref(owner);
    }
    if (rc == 0 && (!gone || !waiting))
        rc = -1;
    if (rc != 0) {
        /* Could not see every owner: never guess. */
    } else if (nsolid) {
        if (ngone + nwaiting) {
            /* A live owner keeps it; drop only the references to owners
             * that are gone or waiting for their dependents. */
            memcpy(gone + ngone, waiting, nwaiting * sizeof(char *));
            CKUBE_V(2, "garbage collector: %s %s has a live owner; removing %zu references",
                    s->kind, ckube_obj_name(latest), ngone + nwaiting);
            rc = patch_owner_refs(g, gvr, latest, refs_without(latest, gone, ngone + nwaiting));
        }
    } else if (nwaiting && s->ndeps) {
        /* Its owners wait for it, and it has dependents of its own: delete
         * it in the foreground, unblocking first if a dependent is itself
         * waiting (a possible cycle, as upstream does). */
        for (size_t k = 0; k < s->ndeps && rc == 0; k++) {
            if (s->deps[k].deleting_dependents) {
                rc = unblock_owner_refs(g, gvr, latest);
                break;
            }
        }
        if (rc == 0)
            rc = delete_object(g, gvr, ns, ckube_obj_name(latest), s->uid, "Foreground");
    } else {
        const char *policy = ckube_has_finalizer(latest, GC_FINALIZER_ORPHAN)       ? "Orphan"
                             : ckube_has_finalizer(latest, GC_FINALIZER_FOREGROUND) ? "Foreground"
                                                                                    : "Background";
        rc = delete_object(g, gvr, ns, ckube_obj_name(latest), s->uid, policy);
    }
    free(gone);
    free(waiting);
    return rc;
}

/* 0 = done, 1 = requeue (rate limited) without error, -1 = error. */
static int attempt_to_delete(gc *g, const char *uid)
{
    struct snap s;
    if (!take_snap(g, uid, &s))
        return 0;
    int rc = 0;
    ckube_rest_mapping m;
    memset(&m, 0, sizeof(m));
    json_t *latest = NULL;
    /* Being deleted is a one-way trip: wait for the delete event. */
    if (s.observed && s.being_deleted && !s.deleting_dependents)
        goto out;
    if (resolve(g, s.api_version, s.kind, &m) != 0) {
        rc = -1;
        goto out;
    }
    enum lookup l = live_get(g, s.api_version, s.kind, s.ns, s.name, s.uid, &latest);
    if (l == L_ERROR) {
        rc = -1;
        goto out;
    }
    if (l == L_ABSENT) {
        /* Not there (or its name holds another uid): drop the node, which
         * queues its dependents. */
        CKUBE_V(4, "garbage collector: %s %s (uid %s) is absent", s.kind, s.name ? s.name : "",
                s.uid);
        push_virtual_delete(g, s.uid);
        goto out;
    }
    if (s.deleting_dependents)
        rc = process_deleting_dependents(g, &s, &m.gvr, latest);
    else
        rc = collect_if_orphaned(g, &s, &m.gvr, latest);
    if (rc == 0 && !s.observed) {
        /* A virtual node that exists: check again later unless a monitor
         * observes it meanwhile. */
        pthread_mutex_lock(&g->gmu);
        struct node *n = find_node(g, uid);
        bool still_virtual = n && !n->observed;
        pthread_mutex_unlock(&g->gmu);
        rc = still_virtual ? 1 : 0;
    }
out:
    json_decref(latest);
    ckube_rest_mapping_clear(&m);
    snap_free(&s);
    return rc;
}

/* Removes the reference to owner_uid from one dependent. 0 or -1. */
static int orphan_one(gc *g, const struct dep_snap *d, const char *owner_uid)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        json_t *obj = NULL;
        enum lookup l = live_get(g, d->api_version, d->kind, d->ns, d->name, d->uid, &obj);
        if (l == L_ABSENT)
            return 0;
        if (l == L_ERROR)
            return -1;
        ckube_rest_mapping m;
        if (resolve(g, d->api_version, d->kind, &m) != 0) {
            json_decref(obj);
            return -1;
        }
        char *drop[1] = {(char *)owner_uid};
        json_t *keep = refs_without(obj, drop, 1);
        int rc = 0;
        if (json_array_size(keep) ==
            json_array_size(ckube_json_get_path(obj, "metadata.ownerReferences"))) {
            json_decref(keep); /* nothing to remove */
        } else {
            rc = patch_owner_refs(g, &m.gvr, obj, keep);
        }
        ckube_rest_mapping_clear(&m);
        json_decref(obj);
        if (rc == 0)
            return 0; /* (a conflict retries with a fresh read) */
    }
    return -1;
}

/* An owner deleted with the "orphan" finalizer: remove its reference
 * from every dependent, then the finalizer. 0 or -1 (retry). */
static int attempt_to_orphan(gc *g, const char *uid)
{
    struct snap s;
    if (!take_snap(g, uid, &s))
        return 0;
    json_t *owner = NULL;
    ckube_rest_mapping m;
    memset(&m, 0, sizeof(m));
    int rc = 0;
    enum lookup l = live_get(g, s.api_version, s.kind, s.ns, s.name, s.uid, &owner);
    if (l == L_ERROR || resolve(g, s.api_version, s.kind, &m) != 0) {
        rc = -1;
        goto out;
    }
    /* Only an owner still being deleted with our finalizer is orphaned
     * (its delete event handles the rest otherwise). */
    if (l == L_ABSENT || !ckube_json_get_path(owner, "metadata.deletionTimestamp") ||
        !ckube_has_finalizer(owner, GC_FINALIZER_ORPHAN))
        goto out;
    for (size_t i = 0; i < s.ndeps; i++) {
        if (orphan_one(g, &s.deps[i], s.uid) != 0)
            rc = -1;
    }
    if (rc == 0) {
        ckube_status *err = NULL;
        rc = ckube_finalizer_remove(g->client, &m.gvr, owner, GC_FINALIZER_ORPHAN, NULL, &err);
        if (rc != 0 && ckube_is_not_found(err))
            rc = 0;
        if (rc == 0)
            CKUBE_INFO("garbage collector: orphaned %zu dependents of %s %s, removed %s", s.ndeps,
                       s.kind, s.name, GC_FINALIZER_ORPHAN);
        ckube_status_free(err);
    }
out:
    json_decref(owner);
    ckube_rest_mapping_clear(&m);
    snap_free(&s);
    return rc;
}

struct worker_arg {
    gc *g;
    bool orphan;
};

static struct worker_arg *worker_args(gc *g, bool orphan)
{
    struct worker_arg *a = malloc(sizeof(*a));
    if (a)
        *a = (struct worker_arg){g, orphan};
    return a;
}

static void *worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gc-worker"); /* top -H, perf, gdb */
    struct worker_arg a = *(struct worker_arg *)arg;
    free(arg);
    gc *g = a.g;
    ckube_workqueue *q = a.orphan ? g->to_orphan : g->to_delete;
    const char *key;
    while ((key = ckube_workqueue_get_borrowed(q)) != NULL) {
        pthread_mutex_lock(&g->mu);
        bool stopping = g->stopping;
        pthread_mutex_unlock(&g->mu);
        if (stopping) {
            ckube_workqueue_done(q, key);
            continue;
        }
        pthread_rwlock_rdlock(&g->wlock);
        int rc = a.orphan ? attempt_to_orphan(g, key) : attempt_to_delete(g, key);
        pthread_rwlock_unlock(&g->wlock);
        if (rc == 0)
            ckube_workqueue_forget(q, key);
        else
            ckube_workqueue_add_rate_limited(q, key);
        ckube_workqueue_done(q, key);
    }
    return NULL;
}

/* ====================================================================
 * Monitors and the run thread
 * ==================================================================== */

static void on_add(void *ud, const json_t *obj, bool initial)
{
    struct monitor *m = ud;
    push_observed(m, GEV_ADD, obj);
    if (m->is_crd && !initial) {
        pthread_mutex_lock(&m->g->mu);
        m->g->resync_requested = true;
        pthread_cond_broadcast(&m->g->cond);
        pthread_mutex_unlock(&m->g->mu);
    }
}

static void on_update(void *ud, const json_t *old_obj, const json_t *new_obj)
{
    push_observed(ud, GEV_UPDATE, new_obj);
}

static void on_delete(void *ud, const json_t *obj, const char *tombstone_key)
{
    struct monitor *m = ud;
    push_observed(m, GEV_DELETE, obj);
    if (m->is_crd) {
        pthread_mutex_lock(&m->g->mu);
        m->g->resync_requested = true;
        pthread_cond_broadcast(&m->g->cond);
        pthread_mutex_unlock(&m->g->mu);
    }
}

static void monitor_free(struct monitor *m)
{
    ckube_shared_informer_free(m->inf); /* stops it and frees its registration */
    free(m->group);
    free(m->version);
    free(m->resource);
    free(m->api_version);
    free(m->kind);
    free(m);
}

static bool ignored(const ckube_api_resource *r)
{
    return strcmp(r->resource, "events") == 0 &&
           (strcmp(r->group, "") == 0 || strcmp(r->group, "events.k8s.io") == 0);
}

static bool monitorable(const ckube_api_resource *r)
{
    return r->preferred && !ignored(r) && ckube_api_resource_has_verb(r, "list") &&
           ckube_api_resource_has_verb(r, "watch") && ckube_api_resource_has_verb(r, "delete");
}

static struct monitor *monitor_new(gc *g, const ckube_api_resource *r)
{
    struct monitor *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->g = g;
    m->group = strdup(r->group);
    m->version = strdup(r->version);
    m->resource = strdup(r->resource);
    m->kind = strdup(r->kind);
    if (asprintf(&m->api_version, "%s%s%s", r->group, *r->group ? "/" : "", r->version) < 0)
        m->api_version = NULL;
    m->is_crd = strcmp(r->group, "apiextensions.k8s.io") == 0 &&
                strcmp(r->resource, "customresourcedefinitions") == 0;
    if (!m->group || !m->version || !m->resource || !m->kind || !m->api_version) {
        monitor_free(m);
        return NULL;
    }
    ckube_gvr gvr = {m->group, m->version, m->resource};
    ckube_list_watch *lw = ckube_list_watch_new_client(g->client, &gvr, NULL, NULL, NULL);
    char name[300];
    snprintf(name, sizeof(name), "gc:%s%s%s", m->resource, *m->group ? "." : "", m->group);
    /* The graph needs only metadata (owners, uid, finalizers, deletion):
     * caching whole objects of every resource would double the server's
     * memory when the controller-manager runs in-process. */
    ckube_informer_opts io = {.name = name, .clock = g->clock, .metadata_only = true};
    m->inf = lw ? ckube_shared_informer_new(lw, &io) : NULL;
    ckube_event_handler h = {
        .on_add = on_add, .on_update = on_update, .on_delete = on_delete, .ud = m};
    m->reg = m->inf ? ckube_shared_informer_add_handler(m->inf, &h) : NULL;
    if (!m->reg || ckube_shared_informer_start(m->inf) != 0) {
        CKUBE_ERROR("garbage collector: cannot start a monitor for %s", name);
        monitor_free(m);
        return NULL;
    }
    return m;
}

static bool is_stopping(gc *g)
{
    pthread_mutex_lock(&g->mu);
    bool s = g->stopping;
    pthread_mutex_unlock(&g->mu);
    return s;
}

/* Waits up to sync_timeout for the new monitors' handlers to have seen
 * their initial lists, then for the graph thread to have applied every
 * event queued by then. */
static bool wait_synced(gc *g, struct monitor **fresh, size_t nfresh)
{
    uint64_t deadline = ckube_clock_now(g->clock) + g->sync_timeout_ns;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < nfresh && all; i++)
            all = ckube_handler_reg_has_synced(fresh[i]->reg);
        if (all)
            break;
        if (ckube_clock_now(g->clock) >= deadline || is_stopping(g))
            return false;
        pthread_mutex_lock(&g->mu);
        if (!g->stopping)
            ckube_clock_cond_wait(g->clock, &g->cond, &g->mu,
                                  ckube_clock_now(g->clock) + CKUBE_MS(20));
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_lock(&g->qmu);
    uint64_t target = g->enq_seq;
    while (g->done_seq < target && !g->qclosed)
        pthread_cond_wait(&g->qcond, &g->qmu);
    pthread_mutex_unlock(&g->qmu);
    return true;
}

/* One rediscovery: start monitors for new resources (pausing workers
 * until they have synced), stop those of vanished ones. Returns 0 or -1
 * (discovery failed; nothing changed). */
static int resync(gc *g)
{
    ckube_api_resource_list *rl = NULL;
    ckube_status *err = NULL;
    if (ckube_discovery_resources(g->client, false, &rl, &err) != 0) {
        CKUBE_WARN("garbage collector: discovery failed: %s",
                   err && err->message ? err->message : "?");
        ckube_status_free(err);
        return -1;
    }
    for (struct monitor *m = g->monitors; m; m = m->next)
        m->seen = false;
    struct monitor **fresh = calloc(rl->n + 1, sizeof(*fresh));
    size_t nfresh = 0;
    for (size_t i = 0; i < rl->n && fresh; i++) {
        const ckube_api_resource *r = &rl->items[i];
        if (!monitorable(r))
            continue;
        struct monitor *m = g->monitors;
        while (m && !(strcmp(m->group, r->group) == 0 && strcmp(m->resource, r->resource) == 0 &&
                      strcmp(m->version, r->version) == 0))
            m = m->next;
        if (m) {
            m->seen = true;
            continue;
        }
        if (!(m = monitor_new(g, r)))
            continue;
        m->seen = true;
        fresh[nfresh++] = m;
    }
    ckube_api_resource_list_free(rl);
    /* Stop monitors whose resource (or version) is gone. No lock is held:
     * stopping joins handler threads, which take mu. */
    size_t removed = 0;
    for (struct monitor **pp = &g->monitors; *pp;) {
        struct monitor *m = *pp;
        if (m->seen) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        CKUBE_INFO("garbage collector: stopping the monitor of %s.%s", m->resource, m->group);
        monitor_free(m);
        removed++;
    }
    if (nfresh) {
        pthread_rwlock_wrlock(&g->wlock);
        for (size_t i = 0; i < nfresh; i++) {
            fresh[i]->next = g->monitors;
            g->monitors = fresh[i];
        }
        if (!wait_synced(g, fresh, nfresh))
            CKUBE_WARN("garbage collector: new monitors did not sync in time; continuing");
        pthread_rwlock_unlock(&g->wlock);
    }
    if (nfresh || removed) {
        ckube_rest_mapper_reset(g->mapper);
        pthread_mutex_lock(&g->mu);
        g->nmonitors = g->nmonitors + nfresh - removed;
        pthread_mutex_unlock(&g->mu);
        CKUBE_V(1, "garbage collector: %zu monitors (%zu new, %zu removed)", g->nmonitors, nfresh,
                removed);
    }
    free(fresh);
    return 0;
}

static int start_workers(gc *g)
{
    g->workers = calloc((size_t)(g->ndel + g->norph), sizeof(pthread_t));
    if (!g->workers)
        return -1;
    for (int i = 0; i < g->ndel + g->norph; i++) {
        struct worker_arg *a = worker_args(g, i >= g->ndel);
        if (!a || pthread_create(&g->workers[i], NULL, worker_main, a) != 0) {
            free(a);
            return -1;
        }
        g->nworkers++;
    }
    return 0;
}

static void *run_main(void *arg)
{
    pthread_setname_np(pthread_self(), "gc-run"); /* top -H, perf, gdb */
    gc *g = arg;
    /* First discovery: retried until it works. */
    while (!is_stopping(g) && resync(g) != 0) {
        pthread_mutex_lock(&g->mu);
        if (!g->stopping)
            ckube_clock_cond_wait(g->clock, &g->cond, &g->mu,
                                  ckube_clock_now(g->clock) + CKUBE_SEC(1));
        pthread_mutex_unlock(&g->mu);
    }
    if (is_stopping(g))
        return NULL;
    if (start_workers(g) != 0)
        CKUBE_ERROR("garbage collector: cannot start workers");
    CKUBE_INFO("garbage collector: synced, %d workers running", g->nworkers);
    pthread_mutex_lock(&g->mu);
    g->ready = true;
    pthread_mutex_unlock(&g->mu);
    for (;;) {
        pthread_mutex_lock(&g->mu);
        uint64_t deadline = ckube_clock_now(g->clock) + g->resync_ns;
        while (!g->stopping && !g->resync_requested && ckube_clock_now(g->clock) < deadline)
            ckube_clock_cond_wait(g->clock, &g->cond, &g->mu, deadline);
        bool stop = g->stopping;
        g->resync_requested = false;
        pthread_mutex_unlock(&g->mu);
        if (stop)
            return NULL;
        resync(g);
    }
}

/* ====================================================================
 * Public API
 * ==================================================================== */

gc *gc_new(ckube_client *c, const gc_opts *o)
{
    gc_opts defaults = {0};
    if (!o)
        o = &defaults;
    if (!c)
        return NULL;
    gc *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->client = c;
    g->clock = ckube_clock_or_real(o->clock);
    g->ndel = o->delete_workers > 0 ? o->delete_workers : 4;
    g->norph = o->orphan_workers > 0 ? o->orphan_workers : 1;
    g->resync_ns = o->resync_ns ? o->resync_ns : CKUBE_SEC(30);
    g->sync_timeout_ns = o->sync_timeout_ns ? o->sync_timeout_ns : CKUBE_SEC(30);
    RB_INIT(&g->nodes);
    pthread_mutex_init(&g->gmu, NULL);
    pthread_mutex_init(&g->qmu, NULL);
    pthread_cond_init(&g->qcond, NULL);
    pthread_mutex_init(&g->amu, NULL);
    pthread_mutex_init(&g->mu, NULL);
    ckube_cond_init(&g->cond);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* A resync must not wait behind a steady stream of workers. */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&g->wlock, &ra);
    pthread_rwlockattr_destroy(&ra);
    g->mapper = ckube_rest_mapper_new(c);
    ckube_workqueue_config qd = {
        .name = "garbage_collector_attempt_to_delete", .clock = o->clock, .metrics = o->metrics};
    ckube_workqueue_config qo = {
        .name = "garbage_collector_attempt_to_orphan", .clock = o->clock, .metrics = o->metrics};
    g->to_delete = ckube_workqueue_new(&qd);
    g->to_orphan = ckube_workqueue_new(&qo);
    if (!g->mapper || !g->to_delete || !g->to_orphan) {
        gc_free(g);
        return NULL;
    }
    return g;
}

int gc_start(gc *g)
{
    if (!g || g->run_started)
        return -1;
    if (pthread_create(&g->graph_thread, NULL, graph_main, g) != 0)
        return -1;
    g->graph_running = true;
    if (pthread_create(&g->run_thread, NULL, run_main, g) != 0)
        return -1;
    g->run_started = true;
    return 0;
}

static void *stop_one_informer(void *arg)
{
    ckube_shared_informer_stop(arg);
    return NULL;
}

static void stop_monitors_parallel(gc *g)
{
    size_t n = 0;
    for (struct monitor *m = g->monitors; m; m = m->next)
        n++;
    pthread_t *th = calloc(n ? n : 1, sizeof(*th));
    bool *ok = calloc(n ? n : 1, sizeof(*ok));
    size_t i = 0;
    for (struct monitor *m = g->monitors; m; m = m->next, i++) {
        if (th && ok && pthread_create(&th[i], NULL, stop_one_informer, m->inf) == 0)
            ok[i] = true;
        else
            ckube_shared_informer_stop(m->inf);
    }
    for (i = 0; i < n && th && ok; i++)
        if (ok[i])
            pthread_join(th[i], NULL);
    free(th);
    free(ok);
}

void gc_stop(gc *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    bool already = g->stopping;
    g->stopping = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
    if (already)
        return;
    if (g->run_started)
        pthread_join(g->run_thread, NULL);
    /* No more informer events, then no more graph changes, then no more
     * work. The informers stop in parallel: each waits for its watch to
     * end, and a controller-manager handing over leadership is waiting. */
    stop_monitors_parallel(g);
    pthread_mutex_lock(&g->qmu);
    g->qclosed = true;
    pthread_cond_broadcast(&g->qcond);
    pthread_mutex_unlock(&g->qmu);
    if (g->graph_running)
        pthread_join(g->graph_thread, NULL);
    g->graph_running = false;
    ckube_workqueue_shutdown(g->to_delete);
    ckube_workqueue_shutdown(g->to_orphan);
    for (int i = 0; i < g->nworkers; i++)
        pthread_join(g->workers[i], NULL);
    g->nworkers = 0;
}

void gc_free(gc *g)
{
    if (!g)
        return;
    gc_stop(g);
    while (g->monitors) {
        struct monitor *m = g->monitors;
        g->monitors = m->next;
        monitor_free(m);
    }
    while (g->qhead) {
        struct gevent *ev = g->qhead;
        g->qhead = ev->next;
        gevent_free(ev);
    }
    struct node *n, *tmp;
    RB_FOREACH_SAFE(n, nodetree, &g->nodes, tmp)
    {
        RB_REMOVE(nodetree, &g->nodes, n);
        node_free(n);
    }
    for (size_t i = 0; i < ABSENT_MAX; i++)
        free(g->absent[i]);
    free(g->workers);
    ckube_workqueue_free(g->to_delete);
    ckube_workqueue_free(g->to_orphan);
    ckube_rest_mapper_free(g->mapper);
    pthread_rwlock_destroy(&g->wlock);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->amu);
    pthread_cond_destroy(&g->qcond);
    pthread_mutex_destroy(&g->qmu);
    pthread_mutex_destroy(&g->gmu);
    free(g);
}

bool gc_ready(gc *g)
{
    pthread_mutex_lock(&g->mu);
    bool r = g->ready;
    pthread_mutex_unlock(&g->mu);
    return r;
}

size_t gc_graph_size(gc *g)
{
    pthread_mutex_lock(&g->gmu);
    size_t n = g->nnodes;
    pthread_mutex_unlock(&g->gmu);
    return n;
}

size_t gc_monitor_count(gc *g)
{
    pthread_mutex_lock(&g->mu);
    size_t n = g->nmonitors;
    pthread_mutex_unlock(&g->mu);
    return n;
}
