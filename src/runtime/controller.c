/* controller.c - watches -> keys -> workqueue -> reconcile (see
 * ckube/controller.h for the contract).
 *
 * Per-key bookkeeping lives in one RB tree (`keys`) under `mu`:
 *   - why the key is queued (reasons, joined, bounded in length);
 *   - whether it is waiting out an error backoff (so events that do not
 *     change the generation do not pull it forward);
 *   - a read-your-writes hold: the resourceVersion this controller last
 *     wrote for it and the informer that must see it first.
 * Each watch's event handler records the highest resourceVersion its
 * informer has delivered; when that passes a hold, the held key is queued.
 */
#include "runtime/controller_internal.h"

#include <ckube/json.h>
#include <ckube/log.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REASON_MAX 480 /* one event description */

/* ---------------------------------------------------------------- keys */

static int keyinfo_cmp(const struct keyinfo *a, const struct keyinfo *b)
{
    return strcmp(a->key, b->key);
}
/* libbsd's RB_GENERATE_STATIC marks the functions __unused but leaves the
 * macro undefined (glibc headers use the name). */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
RB_GENERATE_STATIC(keytree, keyinfo, link, keyinfo_cmp)
#undef __unused

/* Finds (or, with create, adds) the bookkeeping of `key`. mu held. */
static struct keyinfo *keyinfo_get(ckube_controller *c, const char *key, bool create)
{
    struct keyinfo probe = {.key = (char *)key};
    struct keyinfo *ki = RB_FIND(keytree, &c->keys, &probe);
    if (ki || !create)
        return ki;
    ki = calloc(1, sizeof(*ki));
    if (!ki)
        return NULL;
    ki->key = strdup(key);
    if (!ki->key) {
        free(ki);
        return NULL;
    }
    RB_INSERT(keytree, &c->keys, ki);
    return ki;
}

/* Drops bookkeeping that carries nothing any more. mu held. */
static void keyinfo_maybe_drop(ckube_controller *c, struct keyinfo *ki)
{
    if (ki->reason || ki->in_backoff || ki->nhold)
        return;
    RB_REMOVE(keytree, &c->keys, ki);
    free(ki->holds);
    free(ki->key);
    free(ki);
}

/* Remembers the first and the latest cause of a queued key (and how many
 * came between): bounded memory however many events coalesce. */
static void reason_append(struct keyinfo *ki, const char *why)
{
    char *copy = strdup(why);
    if (!copy)
        return;
    if (!ki->reason) {
        ki->reason = copy;
    } else {
        free(ki->last_reason);
        ki->last_reason = copy;
    }
    ki->nreasons++;
}

/* The reason text of a run; moves the key's reasons out. Caller frees. */
static char *reason_take(struct keyinfo *ki)
{
    char *out = NULL;
    if (ki->nreasons <= 1 || !ki->last_reason) {
        out = ki->reason;
        ki->reason = NULL;
    } else if (ki->nreasons == 2) {
        if (asprintf(&out, "%s; %s", ki->reason, ki->last_reason) < 0)
            out = NULL;
    } else if (asprintf(&out, "%s; (%zu more); %s", ki->reason, ki->nreasons - 2, ki->last_reason) <
               0) {
        out = NULL;
    }
    free(ki->reason);
    free(ki->last_reason);
    ki->reason = ki->last_reason = NULL;
    ki->nreasons = 0;
    return out;
}

/* "ns/name" or "name". Caller frees. */
static char *make_key(const char *ns, const char *name)
{
    char *key = NULL;
    if (ns && *ns) {
        if (asprintf(&key, "%s/%s", ns, name) < 0)
            return NULL;
        return key;
    }
    return strdup(name);
}

/* ------------------------------------------------------------- enqueue */

/* Queues `key` for `why`. `bypass_backoff` is false for updates that did
 * not change the generation: a key waiting out an error backoff keeps
 * waiting (the pending retry will run it and sees the new state). */
static void enqueue_key(ckube_controller *c, const char *key, const char *why, bool bypass_backoff)
{
    bool add = true;
    pthread_mutex_lock(&c->mu);
    struct keyinfo *ki = keyinfo_get(c, key, true);
    if (ki) {
        reason_append(ki, why);
        if (ki->in_backoff && !bypass_backoff)
            add = false;
    }
    pthread_mutex_unlock(&c->mu);
    if (add)
        ckube_workqueue_add(c->queue, key);
}

/* Collects the keys one event maps to, so a key named twice (old and new
 * owner the same, or a map function repeating itself) is queued once. */
struct ckube_key_sink {
    ckube_controller *c;
    const char *why;
    bool bypass_backoff;
    char **keys;
    size_t n;
};

void ckube_enqueue(ckube_key_sink *out, const char *ns, const char *name)
{
    if (!out || !name || !*name)
        return;
    char *key = make_key(ns, name);
    if (!key)
        return;
    for (size_t i = 0; i < out->n; i++) {
        if (strcmp(out->keys[i], key) == 0) {
            free(key);
            return;
        }
    }
    char **grown = realloc(out->keys, (out->n + 1) * sizeof(*grown));
    if (!grown) {
        free(key);
        return;
    }
    out->keys = grown;
    out->keys[out->n++] = key;
}

/* Queues every collected key and empties the sink. */
static void sink_flush(ckube_key_sink *sink)
{
    for (size_t i = 0; i < sink->n; i++) {
        enqueue_key(sink->c, sink->keys[i], sink->why, sink->bypass_backoff);
        free(sink->keys[i]);
    }
    free(sink->keys);
    sink->keys = NULL;
    sink->n = 0;
}

void ckube_controller_enqueue(ckube_controller *c, const char *ns, const char *name)
{
    ckube_key_sink sink = {.c = c, .why = "enqueued by hand", .bypass_backoff = true};
    ckube_enqueue(&sink, ns, name);
    sink_flush(&sink);
}

/* ------------------------------------------------------------ glue */

/* The seen-resourceVersion slot of `inf`. mu held. */
static struct inf_seen *seen_for(ckube_controller *c, ckube_shared_informer *inf, bool create)
{
    for (size_t i = 0; i < c->nseen; i++)
        if (c->seen[i].inf == inf)
            return &c->seen[i];
    if (!create)
        return NULL;
    struct inf_seen *grown = realloc(c->seen, (c->nseen + 1) * sizeof(*grown));
    if (!grown)
        return NULL;
    c->seen = grown;
    c->seen[c->nseen] = (struct inf_seen){.inf = inf, .rv = 0};
    return &c->seen[c->nseen++];
}

static void watch_entry_free(struct watch_entry *w)
{
    if (!w)
        return;
    free((char *)w->spec.label);
    free((char *)w->spec.owner_kind);
    free((char *)w->spec.owner_group);
    free(w->resource_label);
    free(w);
}

/* ------------------------------------------------------------- metrics */

static int metrics_init(ckube_controller *c, ckube_metrics_registry *reg)
{
    if (!reg)
        reg = ckube_metrics_default();
    static const char *const ctl[] = {"controller", NULL};
    static const char *const ctl_result[] = {"controller", "result", NULL};
    static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3,  0.35,
                                     0.4,   0.45, 0.5,   0.6,  0.7, 0.8,  0.9, 1.0,  1.25, 1.5,
                                     1.75,  2.0,  2.5,   3.0,  3.5, 4.0,  4.5, 5,    6,    7,
                                     8,     9,    10,    15,   20,  25,   30,  40,   50,   60};
    ckube_metric_family *total =
        ckube_metrics_counter(reg, "controller_runtime_reconcile_total",
                              "Total number of reconciliations per controller", ctl_result);
    ckube_metric_family *errors =
        ckube_metrics_counter(reg, "controller_runtime_reconcile_errors_total",
                              "Total number of reconciliation errors per controller", ctl);
    ckube_metric_family *terminal =
        ckube_metrics_counter(reg, "controller_runtime_terminal_reconcile_errors_total",
                              "Total number of terminal reconciliation errors per controller", ctl);
    ckube_metric_family *time =
        ckube_metrics_histogram(reg, "controller_runtime_reconcile_time_seconds",
                                "Length of time per reconciliation per controller", ctl, buckets,
                                sizeof(buckets) / sizeof(buckets[0]));
    ckube_metric_family *active =
        ckube_metrics_gauge(reg, "controller_runtime_active_workers",
                            "Number of currently used workers per controller", ctl);
    ckube_metric_family *max =
        ckube_metrics_gauge(reg, "controller_runtime_max_concurrent_reconciles",
                            "Maximum number of concurrent reconciles per controller", ctl);
    if (!total || !errors || !terminal || !time || !active || !max)
        return -1;
    const char *lv[] = {c->name, NULL};
    const char *r_success[] = {c->name, "success"}, *r_error[] = {c->name, "error"},
               *r_requeue[] = {c->name, "requeue"}, *r_after[] = {c->name, "requeue_after"};
    c->m_total_success = ckube_metric_with(total, r_success);
    c->m_total_error = ckube_metric_with(total, r_error);
    c->m_total_requeue = ckube_metric_with(total, r_requeue);
    c->m_total_requeue_after = ckube_metric_with(total, r_after);
    c->m_errors = ckube_metric_with(errors, lv);
    c->m_terminal_errors = ckube_metric_with(terminal, lv);
    c->m_time = ckube_metric_with(time, lv);
    c->m_active = ckube_metric_with(active, lv);
    c->m_max = ckube_metric_with(max, lv);
    ckube_gauge_set(c->m_max, c->nworkers);
    return 0;
}

static void metrics_active(ckube_controller *c, int delta)
{
    ckube_gauge_add(c->m_active, delta);
}

/* Records one run. `result` is success, error, terminal_error, requeue or
 * requeue_after (terminal errors count as errors in the total, as in
 * controller-runtime). */
static void metrics_result(ckube_controller *c, const char *result, uint64_t took_ns)
{
    ckube_histogram_observe(c->m_time, (double)took_ns / 1e9);
    if (strcmp(result, "success") == 0) {
        ckube_counter_inc(c->m_total_success);
    } else if (strcmp(result, "requeue") == 0) {
        ckube_counter_inc(c->m_total_requeue);
    } else if (strcmp(result, "requeue_after") == 0) {
        ckube_counter_inc(c->m_total_requeue_after);
    } else {
        ckube_counter_inc(c->m_total_error);
        ckube_counter_inc(c->m_errors);
        if (strcmp(result, "terminal_error") == 0)
            ckube_counter_inc(c->m_terminal_errors);
    }
}

/* --------------------------------------------------------------- watch */

static const char *obj_group_of(const char *api_version, char *buf, size_t n)
{
    const char *slash = api_version ? strchr(api_version, '/') : NULL;
    if (!slash)
        return ""; /* core: "v1" */
    snprintf(buf, n, "%.*s", (int)(slash - api_version), api_version);
    return buf;
}

/* Maps obj (a tree) to keys per an owner or function mapping into `sink`. */
static void map_object(struct watch_entry *w, const json_t *obj, ckube_key_sink *sink)
{
    switch (w->spec.map) {
    case CKUBE_MAP_SELF: /* map_cached does these without a tree */
        break;
    case CKUBE_MAP_OWNER: {
        json_t *refs = ckube_json_get_path(obj, "metadata.ownerReferences");
        size_t i;
        json_t *ref;
        json_array_foreach(refs, i, ref)
        {
            if (!w->spec.all_owners && !json_is_true(json_object_get(ref, "controller")))
                continue;
            const char *kind = json_string_value(json_object_get(ref, "kind"));
            const char *name = json_string_value(json_object_get(ref, "name"));
            char gbuf[256];
            const char *group = obj_group_of(json_string_value(json_object_get(ref, "apiVersion")),
                                             gbuf, sizeof(gbuf));
            if (!kind || !name || strcmp(kind, w->spec.owner_kind) != 0 ||
                strcmp(group, w->spec.owner_group ? w->spec.owner_group : "") != 0)
                continue;
            ckube_enqueue(sink, w->spec.owner_cluster_scoped ? NULL : ckube_obj_namespace(obj),
                          name);
        }
        break;
    }
    case CKUBE_MAP_FUNC:
        if (w->spec.map_fn)
            w->spec.map_fn(w->spec.map_ctx, obj, sink);
        break;
    }
}

static bool predicates_pass(struct watch_entry *w, const ckube_object *old_obj,
                            const ckube_object *new_obj)
{
    if (!w->spec.predicates[0])
        return true;
    /* Predicates read trees: decode only for watches that have them. */
    const json_t *o = old_obj ? ckube_object_json(old_obj) : NULL;
    const json_t *n = ckube_object_json(new_obj);
    if (!n || (old_obj && !o)) {
        CKUBE_ERROR("controller %s: out of memory: dropping an event", w->c->name);
        return false;
    }
    for (int i = 0; i < 4 && w->spec.predicates[i]; i++)
        if (!w->spec.predicates[i](w->spec.predicate_ctx[i], o, n))
            return false;
    return true;
}

/* Maps obj to keys per the watch's spec into `sink`; only owner and
 * function mappings decode the object. */
static void map_cached(struct watch_entry *w, const ckube_object *obj, ckube_key_sink *sink)
{
    if (w->spec.map == CKUBE_MAP_SELF) {
        ckube_enqueue(sink, ckube_object_namespace(obj), ckube_object_name(obj));
        return;
    }
    const json_t *t = ckube_object_json(obj);
    if (!t) {
        CKUBE_ERROR("controller %s: out of memory: dropping an event", w->c->name);
        return;
    }
    map_object(w, t, sink);
}

/* A resourceVersion as a number; 0 when absent or opaque. */
static uint64_t rv_number(const char *rv)
{
    if (!rv || !*rv)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(rv, &end, 10);
    return (errno || *end) ? 0 : (uint64_t)v;
}

static uint64_t obj_rv(const ckube_object *obj)
{
    return rv_number(ckube_object_resource_version(obj));
}

/* Drops the holds of `ki` on `inf` that rv satisfies; true if it
 * dropped one. mu held. */
static bool holds_release(struct keyinfo *ki, ckube_shared_informer *inf, uint64_t rv)
{
    bool dropped = false;
    for (size_t i = 0; i < ki->nhold;) {
        if (ki->holds[i].inf == inf && ki->holds[i].rv <= rv) {
            ki->holds[i] = ki->holds[--ki->nhold];
            dropped = true;
        } else {
            i++;
        }
    }
    return dropped;
}

/* Records that `w`'s informer has delivered `rv` and releases every
 * read-your-writes hold it satisfies. */
static void note_seen_rv(struct watch_entry *w, uint64_t rv)
{
    ckube_controller *c = w->c;
    if (rv == 0)
        return;
    char **release = NULL;
    size_t nrelease = 0;
    pthread_mutex_lock(&c->mu);
    struct inf_seen *s = seen_for(c, w->inf, true);
    if (s && rv > s->rv)
        s->rv = rv;
    if (c->nholds) {
        struct keyinfo *ki, *tmp;
        RB_FOREACH_SAFE(ki, keytree, &c->keys, tmp)
        {
            if (!ki->nhold || !holds_release(ki, w->inf, rv) || ki->nhold)
                continue;
            c->nholds--;
            if (ki->hold_parked) {
                ki->hold_parked = false;
                char **grown = realloc(release, (nrelease + 1) * sizeof(*release));
                if (grown) {
                    release = grown;
                    release[nrelease++] = strdup(ki->key);
                }
            }
            keyinfo_maybe_drop(c, ki);
        }
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nrelease; i++) {
        if (release[i])
            ckube_workqueue_add(c->queue, release[i]);
        free(release[i]);
    }
    free(release);
}

static void describe(char *buf, size_t n, struct watch_entry *w, const char *event,
                     const ckube_object *obj)
{
    const char *ns = ckube_object_namespace(obj);
    int64_t generation = ckube_object_generation(obj);
    char gen[48] = "";
    if (generation > 0)
        snprintf(gen, sizeof(gen), "generation %" PRId64 ", ", generation);
    snprintf(buf, n, "%s %s%s%s %s (%sresourceVersion %s) via watch \"%s\"", w->resource_label,
             ns ? ns : "", ns ? "/" : "", ckube_object_name(obj) ?: "?", event, gen,
             ckube_object_resource_version(obj) ?: "?", w->spec.label);
}

static void on_add(void *ctx, const ckube_object *obj, bool initial)
{
    struct watch_entry *w = ctx;
    note_seen_rv(w, obj_rv(obj));
    if (!predicates_pass(w, NULL, obj))
        return;
    char why[REASON_MAX];
    describe(why, sizeof(why), w, initial ? "ADDED (initial list)" : "ADDED", obj);
    ckube_key_sink sink = {.c = w->c, .why = why, .bypass_backoff = true};
    map_cached(w, obj, &sink);
    sink_flush(&sink);
}

static void on_update(void *ctx, const ckube_object *old_obj, const ckube_object *new_obj)
{
    struct watch_entry *w = ctx;
    const char *orv = ckube_object_resource_version(old_obj);
    const char *nrv = ckube_object_resource_version(new_obj);
    bool resync = orv && nrv && strcmp(orv, nrv) == 0;
    if (!resync)
        note_seen_rv(w, obj_rv(new_obj));
    if (resync && w->spec.skip_resync)
        return;
    if (!predicates_pass(w, old_obj, new_obj))
        return;
    char why[REASON_MAX];
    describe(why, sizeof(why), w, resync ? "resync" : "MODIFIED", new_obj);
    bool gen_changed = ckube_object_generation(old_obj) != ckube_object_generation(new_obj);
    ckube_key_sink sink = {.c = w->c, .why = why, .bypass_backoff = gen_changed};
    map_cached(w, new_obj, &sink);
    /* An owner reference that moved: the old owner must hear of it too. */
    if (w->spec.map != CKUBE_MAP_SELF && !resync)
        map_cached(w, old_obj, &sink);
    sink_flush(&sink);
}

static void on_delete(void *ctx, const ckube_object *obj, const char *tombstone_key)
{
    bool final_state_unknown = tombstone_key != NULL;
    struct watch_entry *w = ctx;
    note_seen_rv(w, obj_rv(obj));
    if (!predicates_pass(w, NULL, obj))
        return;
    char why[REASON_MAX];
    describe(why, sizeof(why), w, final_state_unknown ? "DELETED (final state unknown)" : "DELETED",
             obj);
    ckube_key_sink sink = {.c = w->c, .why = why, .bypass_backoff = true};
    map_cached(w, obj, &sink);
    sink_flush(&sink);
}

int ckube_controller_watch(ckube_controller *c, ckube_shared_informer *inf,
                           const ckube_watch_spec *spec)
{
    if (!c || !inf || !spec || c->started)
        return -1;
    if (spec->map == CKUBE_MAP_OWNER && !spec->owner_kind)
        return -1;
    if (spec->map == CKUBE_MAP_FUNC && !spec->map_fn)
        return -1;
    struct watch_entry *w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    w->c = c;
    w->inf = inf;
    w->spec = *spec;
    char label[64];
    snprintf(label, sizeof(label), "%zu", c->nwatches);
    w->spec.label = strdup(spec->label ? spec->label : label);
    w->spec.owner_kind = spec->owner_kind ? strdup(spec->owner_kind) : NULL;
    w->spec.owner_group = spec->owner_group ? strdup(spec->owner_group) : NULL;
    w->resource_label = strdup(ckube_shared_informer_name(inf));
    struct watch_entry **grown = realloc(c->watches, (c->nwatches + 1) * sizeof(*grown));
    if (!grown || !w->spec.label || !w->resource_label) {
        watch_entry_free(w);
        free(grown == c->watches ? NULL : grown);
        return -1;
    }
    c->watches = grown;
    c->watches[c->nwatches++] = w;
    return 0;
}

/* -------------------------------------------------------------- worker */

struct ckube_reconcile_ctx {
    ckube_controller *c;
    const char *key;
    const char *reason;
    int retries;
};

const char *ckube_reconcile_reason(const ckube_reconcile_ctx *rc)
{
    return rc && rc->reason ? rc->reason : "";
}

int ckube_reconcile_retries(const ckube_reconcile_ctx *rc)
{
    return rc ? rc->retries : 0;
}

void ckube_reconcile_wrote(ckube_reconcile_ctx *rc, ckube_shared_informer *inf,
                           const json_t *written)
{
    uint64_t rv = rv_number(ckube_obj_resource_version(written));
    if (!rc || !inf || rv == 0)
        return; /* opaque (non-numeric) versions cannot be compared: no hold */
    ckube_controller *c = rc->c;
    uint64_t timeout = c->ryw_timeout_ns;
    pthread_mutex_lock(&c->mu);
    struct inf_seen *s = seen_for(c, inf, true);
    if (s && s->rv >= rv) {
        pthread_mutex_unlock(&c->mu);
        return; /* the cache is already there */
    }
    struct keyinfo *ki = keyinfo_get(c, rc->key, true);
    struct ryw_hold *h = NULL;
    for (size_t i = 0; ki && i < ki->nhold && !h; i++)
        if (ki->holds[i].inf == inf)
            h = &ki->holds[i];
    if (ki && !h && ki->nhold == ki->holdcap) {
        size_t cap = ki->holdcap ? 2 * ki->holdcap : 2;
        struct ryw_hold *grown = realloc(ki->holds, cap * sizeof(*grown));
        if (grown) {
            ki->holds = grown;
            ki->holdcap = cap;
        }
    }
    if (ki && !h && ki->nhold < ki->holdcap) {
        if (!ki->nhold)
            c->nholds++;
        h = &ki->holds[ki->nhold++];
        *h = (struct ryw_hold){.inf = inf, .rv = rv};
    }
    if (h) {
        if (h->rv < rv)
            h->rv = rv;
        ki->hold_deadline = ckube_clock_now(c->clock) + timeout;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Whether `key` must wait for the cache; if so parks it (the informer's
 * handler re-adds it) with a timed fallback. Returns true when parked. */
static bool ryw_park(ckube_controller *c, const char *key)
{
    bool park = false;
    uint64_t wait = 0;
    pthread_mutex_lock(&c->mu);
    struct keyinfo *ki = keyinfo_get(c, key, false);
    if (ki && ki->nhold) {
        for (size_t i = 0; i < ki->nhold;) {
            struct inf_seen *s = seen_for(c, ki->holds[i].inf, false);
            if (s && s->rv >= ki->holds[i].rv)
                ki->holds[i] = ki->holds[--ki->nhold];
            else
                i++;
        }
        uint64_t now = ckube_clock_now(c->clock);
        if (!ki->nhold || now >= ki->hold_deadline) {
            if (ki->nhold)
                CKUBE_V(2,
                        "controller %s: cache did not reach resourceVersion %" PRIu64
                        " for %s in time; reconciling anyway",
                        c->name, ki->holds[0].rv, key);
            ki->nhold = 0;
            ki->hold_parked = false;
            c->nholds--;
            keyinfo_maybe_drop(c, ki);
        } else {
            ki->hold_parked = true;
            park = true;
            wait = ki->hold_deadline - now;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (park) {
        CKUBE_V(4, "controller %s: holding %s until the cache catches up with its last write",
                c->name, key);
        ckube_workqueue_add_after(c->queue, key, wait);
    }
    return park;
}

/* Takes the key's accumulated reasons (caller frees) and leaves backoff. */
static char *take_reason(ckube_controller *c, const char *key)
{
    char *reason = NULL;
    pthread_mutex_lock(&c->mu);
    struct keyinfo *ki = keyinfo_get(c, key, false);
    if (ki) {
        reason = reason_take(ki);
        ki->in_backoff = false;
        keyinfo_maybe_drop(c, ki);
    }
    pthread_mutex_unlock(&c->mu);
    return reason;
}

static void set_backoff(ckube_controller *c, const char *key)
{
    pthread_mutex_lock(&c->mu);
    struct keyinfo *ki = keyinfo_get(c, key, true);
    if (ki)
        ki->in_backoff = true;
    pthread_mutex_unlock(&c->mu);
}

static void split_key(char *key, const char **ns, const char **name)
{
    char *slash = strchr(key, '/');
    if (slash) {
        *slash = '\0';
        *ns = key;
        *name = slash + 1;
    } else {
        *ns = NULL;
        *name = key;
    }
}

static void process(ckube_controller *c, const char *key)
{
    if (ryw_park(c, key))
        return;
    char *reason = take_reason(c, key);
    ckube_reconcile_ctx rc = {.c = c,
                              .key = key,
                              .reason = reason,
                              .retries = ckube_workqueue_num_requeues(c->queue, key)};
    char *kcopy = strdup(key);
    if (!kcopy) {
        free(reason);
        ckube_workqueue_add_rate_limited(c->queue, key);
        return;
    }
    const char *ns, *name;
    split_key(kcopy, &ns, &name);
    CKUBE_V(4, "controller %s: reconciling %s (%s)", c->name, key, reason ? reason : "");

    metrics_active(c, +1);
    uint64_t t0 = ckube_clock_now(c->clock);
    ckube_result res = c->fn(c->ctx, &rc, ns, name);
    uint64_t took = ckube_clock_now(c->clock) - t0;
    metrics_active(c, -1);

    switch (res.kind) {
    case CKUBE_RESULT_OK:
        ckube_workqueue_forget(c->queue, key);
        metrics_result(c, "success", took);
        break;
    case CKUBE_RESULT_REQUEUE_AFTER:
        ckube_workqueue_forget(c->queue, key);
        ckube_workqueue_add_after(c->queue, key, res.requeue_after_ns);
        metrics_result(c, "requeue_after", took);
        break;
    case CKUBE_RESULT_REQUEUE:
        set_backoff(c, key);
        ckube_workqueue_add_rate_limited(c->queue, key);
        metrics_result(c, "requeue", took);
        break;
    case CKUBE_RESULT_TERMINAL:
        ckube_workqueue_forget(c->queue, key);
        CKUBE_ERROR("controller %s: reconcile of %s failed with a terminal error; not retrying "
                    "until the next event",
                    c->name, key);
        metrics_result(c, "terminal_error", took);
        break;
    case CKUBE_RESULT_ERROR:
    default:
        set_backoff(c, key);
        ckube_workqueue_add_rate_limited(c->queue, key);
        CKUBE_V(2, "controller %s: reconcile of %s failed; retry %d with backoff", c->name, key,
                rc.retries + 1);
        metrics_result(c, "error", took);
        break;
    }
    free(kcopy);
    free(reason);
}

static void *worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-worker"); /* top -H, perf, gdb */
    ckube_controller *c = arg;
    char *key;
    while ((key = ckube_workqueue_get(c->queue)) != NULL) {
        process(c, key);
        ckube_workqueue_done(c->queue, key);
        free(key);
    }
    return NULL;
}

/* ----------------------------------------------------------- lifecycle */

ckube_controller *ckube_controller_new(const ckube_controller_options *o, ckube_reconcile_fn fn,
                                       void *ctx)
{
    if (!o || !o->name || !*o->name || !fn)
        return NULL;
    ckube_controller *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->name = strdup(o->name);
    c->fn = fn;
    c->ctx = ctx;
    c->clock = ckube_clock_or_real(o->clock);
    c->nworkers = o->max_concurrent_reconciles > 0 ? o->max_concurrent_reconciles : 1;
    c->ryw_timeout_ns = o->ryw_timeout_ns ? o->ryw_timeout_ns : CKUBE_SEC(10);
    pthread_mutex_init(&c->mu, NULL);
    RB_INIT(&c->keys);
    ckube_workqueue_config qc = {
        .name = o->name, .clock = o->clock, .rate_limiter = o->rate_limiter, .metrics = o->metrics};
    c->queue = ckube_workqueue_new(&qc);
    if (!c->name || !c->queue || metrics_init(c, o->metrics) != 0) {
        ckube_controller_free(c);
        return NULL;
    }
    return c;
}

int ckube_controller_start(ckube_controller *c, uint64_t timeout_ns)
{
    if (!c || c->started)
        return -1;
    /* Handlers first: an informer that is already running replays its
     * contents to a new handler, so no object is missed either way. */
    for (size_t i = 0; i < c->nwatches; i++) {
        struct watch_entry *w = c->watches[i];
        ckube_event_handler h = {.on_add_object = on_add,
                                 .on_update_object = on_update,
                                 .on_delete_object = on_delete,
                                 .ud = w};
        w->reg = ckube_shared_informer_add_handler(w->inf, &h);
        if (!w->reg) {
            CKUBE_ERROR("controller %s: cannot register an event handler on %s", c->name,
                        w->resource_label);
            return -1;
        }
    }
    c->started = true;
    ckube_shared_informer **infs = calloc(c->nwatches + 1, sizeof(*infs));
    if (!infs)
        return -1;
    for (size_t i = 0; i < c->nwatches; i++)
        infs[i] = c->watches[i]->inf;
    CKUBE_INFO("Waiting for caches to sync controller=\"%s\"", c->name);
    bool synced =
        ckube_wait_for_cache_sync(infs, c->nwatches, timeout_ns ? timeout_ns : CKUBE_SEC(120));
    free(infs);
    if (!synced) {
        CKUBE_ERROR("controller %s: timed out waiting for caches to sync", c->name);
        return -1;
    }
    c->workers = calloc((size_t)c->nworkers, sizeof(*c->workers));
    if (!c->workers)
        return -1;
    CKUBE_INFO("Starting workers controller=\"%s\" worker count=%d", c->name, c->nworkers);
    for (int i = 0; i < c->nworkers; i++) {
        if (pthread_create(&c->workers[i], NULL, worker_main, c) != 0)
            break;
        c->nstarted++;
    }
    return c->nstarted == c->nworkers ? 0 : -1;
}

void ckube_controller_stop(ckube_controller *c)
{
    if (!c || !c->started || c->stopped)
        return;
    c->stopped = true;
    for (size_t i = 0; i < c->nwatches; i++) {
        struct watch_entry *w = c->watches[i];
        if (w->reg)
            ckube_shared_informer_remove_handler(w->inf, w->reg);
        w->reg = NULL;
    }
    CKUBE_INFO("Shutdown signal received, waiting for all workers to finish controller=\"%s\"",
               c->name);
    ckube_workqueue_shutdown_with_drain(c->queue);
    for (int i = 0; i < c->nstarted; i++)
        pthread_join(c->workers[i], NULL);
    CKUBE_INFO("All workers finished controller=\"%s\"", c->name);
}

ckube_workqueue *ckube_controller_queue(ckube_controller *c)
{
    return c ? c->queue : NULL;
}

void ckube_controller_free(ckube_controller *c)
{
    if (!c)
        return;
    ckube_controller_stop(c);
    if (!c->started && c->queue)
        ckube_workqueue_shutdown(c->queue);
    for (size_t i = 0; i < c->nwatches; i++)
        watch_entry_free(c->watches[i]);
    free(c->watches);
    struct keyinfo *ki, *tmp;
    RB_FOREACH_SAFE(ki, keytree, &c->keys, tmp)
    {
        RB_REMOVE(keytree, &c->keys, ki);
        free(ki->reason);
        free(ki->last_reason);
        free(ki->holds);
        free(ki->key);
        free(ki);
    }
    free(c->seen);
    if (c->queue)
        ckube_workqueue_free(c->queue);
    free(c->workers);
    pthread_mutex_destroy(&c->mu);
    free(c->name);
    free(c);
}
