/* controller.c - the Network controller. See controller.h.
 *
 * The shape is the seed's controller.go: handlers enqueue
 * "namespace/name", workers take keys off a rate-limited queue, and
 * syncHandler compares desired state (the lister) with actual state (the
 * backend) and acts on the difference. libckube's controller provides the
 * queue, the workers and the handler plumbing; this file is the logic.
 *
 * Networks are read and written as the structs ckube-gen generated from
 * manifests/crd.yaml (samplecrd.h, made at build time), as the seed's
 * controller uses its generated clientset, informers and listers: the
 * lister's objects are viewed as samplecrd_v1_network (decoded once per
 * version, shared with every other reader), the status is built as a
 * samplecrd_v1_network_status. Deployments stay JSON (built-in types are
 * not generated yet).
 */
#include "controller.h"

#include "samplecrd.h"

#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/validation.h>

#include <pthread.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ckube_gvr NETCTL_NETWORKS = {NETCTL_GROUP, "v1", "networks"};
const ckube_gvr NETCTL_DEPLOYMENTS = {"apps", "v1", "deployments"};

/* Status reasons (condition Ready's reason when not Ready). */
#define REASON_SYNCED "NetworkReady"
#define REASON_INVALID "InvalidSpec"
#define REASON_CONFLICT "CIDRConflict"
#define REASON_BACKEND "BackendError"

/* CIDRs handed to Deployment networks that the Network cache may not show
 * yet (the create is in flight to the watch): kept a minute. */
#define RECENT_MAX 64
#define RECENT_NS CKUBE_SEC(60)

struct netctl {
    netctl_options o;
    ckube_lister networks, deployments;
    ckube_controller *net_ctl, *dep_ctl;
    netaddr_prefix pool;
    /* Set once a status write found no status subresource (the seed's
     * v1beta1 CRD): status is then written through the main resource. */
    bool no_status_subresource;
    pthread_mutex_t mu; /* guards recent[] and no_status_subresource */
    struct {
        netaddr_prefix p;
        uint64_t at;
    } recent[RECENT_MAX];
    size_t nrecent;
};

static const char *errtext(const ckube_status *st)
{
    return st && st->message ? st->message : "unknown error";
}

static void record(netctl *n, const json_t *obj, const char *type, const char *reason,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void record(netctl *n, const json_t *obj, const char *type, const char *reason,
                   const char *fmt, ...)
{
    if (!n->o.recorder)
        return;
    va_list ap;
    va_start(ap, fmt);
    ckube_event_vrecordf(n->o.recorder, obj, type, reason, fmt, ap);
    va_end(ap);
}

/* A Network as the Event recorder and the finalizer helper take objects:
 * its JSON (a new reference; NULL when out of memory). */
static json_t *net_json(const samplecrd_v1_network *net)
{
    return samplecrd_v1_network_to_json(net);
}

static void record_net(netctl *n, const samplecrd_v1_network *net, const char *type,
                       const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void record_net(netctl *n, const samplecrd_v1_network *net, const char *type,
                       const char *reason, const char *fmt, ...)
{
    if (!n->o.recorder)
        return;
    json_t *j = net_json(net);
    va_list ap;
    va_start(ap, fmt);
    if (j)
        ckube_event_vrecordf(n->o.recorder, j, type, reason, fmt, ap);
    va_end(ap);
    json_decref(j);
}

/* The cached Network ns/name viewed as a struct (borrowed from *hold,
 * which the caller releases with ckube_object_unref), or NULL: absent, or
 * (with *hold set) an object that does not decode, *err saying why. */
static const samplecrd_v1_network *cached_network(netctl *n, const char *ns, const char *name,
                                                  ckube_object **hold, ckube_status **err)
{
    *err = NULL;
    *hold = ckube_lister_get_object(&n->networks, ns, name);
    return *hold ? samplecrd_v1_network_of(*hold, err) : NULL;
}

/* ====================================================================
 * Status
 * ==================================================================== */

/* The status we want on `net`: Ready (or Failed with reason/message). The
 * condition's lastTransitionTime is kept from the current status when
 * the condition's status did not change, as the API conventions ask.
 * NULL when out of memory. */
static samplecrd_v1_network_status *desired_status(const samplecrd_v1_network *net, bool ready,
                                                   const char *reason, const char *message,
                                                   const char *device, bool with_generation)
{
    const char *cond_status = ready ? "True" : "False";
    char now[64];
    ckube_now_rfc3339(now, sizeof(now));
    const char *ltt = now;
    for (size_t i = 0; net->status && i < net->status->n_conditions; i++) {
        const samplecrd_v1_network_status_conditions_item *c = &net->status->conditions[i];
        if (c->type && c->status && c->last_transition_time && !strcmp(c->type, "Ready") &&
            !strcmp(c->status, cond_status))
            ltt = c->last_transition_time;
    }
    samplecrd_v1_network_status *st = samplecrd_v1_network_status_new();
    samplecrd_v1_network_status_conditions_item *cond =
        st ? calloc(1, sizeof *st->conditions) : NULL;
    if (!cond) {
        samplecrd_v1_network_status_free(st);
        return NULL;
    }
    st->conditions = cond;
    st->n_conditions = 1;
    bool oom = ckube_set_string(&cond->type, "Ready") ||
               ckube_set_string(&cond->status, cond_status) ||
               ckube_set_string(&cond->reason, reason) ||
               ckube_set_string(&cond->message, message) ||
               ckube_set_string(&cond->last_transition_time, ltt) ||
               ckube_set_string(&st->phase, ready ? SAMPLECRD_V1_NETWORK_STATUS_PHASE_READY
                                                  : SAMPLECRD_V1_NETWORK_STATUS_PHASE_FAILED) ||
               (device && *device && ckube_set_string(&st->bridge, device));
    if (with_generation) {
        cond->observed_generation = st->observed_generation = net->metadata.generation;
        cond->has_observed_generation = st->has_observed_generation = true;
    }
    if (oom) {
        samplecrd_v1_network_status_free(st);
        return NULL;
    }
    return st;
}

/* A status as JSON for comparing and writing; without observedGeneration
 * when `drop_generation`. */
static json_t *status_json(const samplecrd_v1_network_status *st, bool drop_generation)
{
    if (!st)
        return json_null();
    json_t *j = ckube_struct_to_json(&samplecrd_v1_network_status_info, st);
    if (j && drop_generation) {
        json_object_del(j, "observedGeneration");
        json_object_del(json_array_get(json_object_get(j, "conditions"), 0), "observedGeneration");
    }
    return j;
}

/* Writes `want` (taken) as net's status unless it already is. Returns 0,
 * or -1 after logging (the caller requeues). */
static int write_status(netctl *n, ckube_reconcile_ctx *rc, const samplecrd_v1_network *net,
                        samplecrd_v1_network_status *want)
{
    if (!want)
        return -1;
    pthread_mutex_lock(&n->mu);
    bool main_resource = n->no_status_subresource;
    pthread_mutex_unlock(&n->mu);
    /* Without a status subresource every write bumps the generation, so
     * observedGeneration could never catch up: leave it out of what is
     * written and of the comparison. */
    json_t *cur = status_json(net->status, main_resource);
    json_t *wantj = status_json(want, main_resource);
    samplecrd_v1_network_status_free(want);
    bool same = cur && wantj && json_equal(cur, wantj);
    json_decref(cur);
    if (same || !wantj) {
        json_decref(wantj);
        return same ? 0 : -1;
    }
    const char *ns = net->metadata.namespace_, *name = net->metadata.name;
    /* A merge patch carrying the resourceVersion: a status computed from
     * a stale object is refused (409) rather than written. */
    json_t *patch = json_pack("{s:{s:s?}, s:o}", "metadata", "resourceVersion",
                              net->metadata.resource_version, "status", wantj);
    size_t len = 0;
    char *body = patch ? ckube_json_dumps(patch, &len) : NULL;
    json_decref(patch);
    if (!body)
        return -1;
    ckube_write_opts wo = {.field_manager = NETCTL_COMPONENT,
                           .subresource = main_resource ? NULL : "status"};
    json_t *out = NULL;
    ckube_status *err = NULL;
    int r = ckube_patch(n->o.client, &NETCTL_NETWORKS, ns, name, CKUBE_PATCH_MERGE, body, len, &wo,
                        &out, &err);
    if (r != 0 && !main_resource && err && err->code == 404 &&
        (!err->name || strcmp(err->name, name) != 0)) {
        /* 404 naming no object: the resource has no /status. */
        CKUBE_INFO("networks have no status subresource (a v1beta1 CRD without "
                   "subresources?); writing status through the main resource");
        pthread_mutex_lock(&n->mu);
        n->no_status_subresource = true;
        pthread_mutex_unlock(&n->mu);
        ckube_status_free(err);
        err = NULL;
        wo.subresource = NULL;
        r = ckube_patch(n->o.client, &NETCTL_NETWORKS, ns, name, CKUBE_PATCH_MERGE, body, len, &wo,
                        &out, &err);
    }
    free(body);
    if (r != 0) {
        CKUBE_ERROR("error updating status of '%s/%s': %s", ns, name, errtext(err));
        ckube_status_free(err);
        return -1;
    }
    ckube_reconcile_wrote(rc, n->o.networks, out);
    json_decref(out);
    return 0;
}

/* ====================================================================
 * The Network sync handler
 * ==================================================================== */

struct cleanup_ctx {
    netctl *n;
    const char *key;
};

/* Finalizer clean-up: the real network must be gone before the Network
 * may be. */
static int cleanup_network(void *ctx, const json_t *net)
{
    struct cleanup_ctx *c = ctx;
    netctl_actual act;
    char *e = NULL;
    bool existed = netctl_backend_observe(c->n->o.backend, c->key, &act, NULL) == 0 && act.exists;
    if (netctl_backend_remove(c->n->o.backend, c->key, &e) != 0) {
        CKUBE_ERROR("[%s] failed to delete network %s: %s", netctl_backend_name(c->n->o.backend),
                    c->key, e ? e : "?");
        record(c->n, net, CKUBE_EVENT_WARNING, "Failed", "Failed to delete network: %s",
               e ? e : "?");
        free(e);
        return -1;
    }
    if (existed) {
        CKUBE_INFO("[%s] Deleted network %s (%s)", netctl_backend_name(c->n->o.backend), c->key,
                   act.device);
        record(c->n, net, CKUBE_EVENT_NORMAL, "Deleted", "Deleted bridge %s", act.device);
    }
    return 0;
}

/* Calls fn(ud, net, hold) for every cached Network that decodes, viewed
 * as a struct (borrowed for the call; fn returns false to stop). */
static void each_network(netctl *n, const char *ns,
                         bool (*fn)(void *ud, const samplecrd_v1_network *net), void *ud)
{
    ckube_object **all = NULL;
    size_t count = 0;
    if (ckube_lister_list_objects(&n->networks, ns, NULL, &all, &count) != 0)
        return;
    for (size_t i = 0; i < count; i++) {
        const samplecrd_v1_network *o = samplecrd_v1_network_of(all[i], NULL);
        if (o && !fn(ud, o))
            break;
    }
    ckube_object_list_free(all, count);
}

static const char *spec_cidr(const samplecrd_v1_network *net)
{
    return net->spec ? net->spec->cidr : NULL;
}

static const char *spec_gateway(const samplecrd_v1_network *net)
{
    return net->spec ? net->spec->gateway : NULL;
}

struct conflict {
    const samplecrd_v1_network *me;
    const netaddr_prefix *cidr;
    char *winner; /* "namespace/name cidr" of the winner, malloc'd */
};

static int key_cmp(const samplecrd_v1_network *a, const samplecrd_v1_network *b)
{
    int c = strcmp(a->metadata.namespace_ ? a->metadata.namespace_ : "",
                   b->metadata.namespace_ ? b->metadata.namespace_ : "");
    return c ? c : strcmp(a->metadata.name ? a->metadata.name : "", b->metadata.name ? b->metadata.name : "");
}

static bool check_conflict(void *ud, const samplecrd_v1_network *o)
{
    struct conflict *c = ud;
    netaddr_prefix p;
    netaddr gw;
    if (key_cmp(o, c->me) == 0 || o->metadata.deletion_timestamp ||
        netaddr_check_spec(spec_cidr(o), spec_gateway(o), &p, &gw, NULL) != 0 ||
        !netaddr_prefix_overlaps(&p, c->cidr))
        return true;
    const char *ts = o->metadata.creation_timestamp, *my_ts = c->me->metadata.creation_timestamp;
    int cmp = strcmp(ts ? ts : "", my_ts ? my_ts : "");
    if (cmp < 0 || (cmp == 0 && key_cmp(o, c->me) < 0)) {
        netctl_set_err(&c->winner, "%s of Network %s/%s", spec_cidr(o),
                       o->metadata.namespace_ ? o->metadata.namespace_ : "", o->metadata.name);
        return false;
    }
    return true;
}

/* When several Networks overlap, the oldest (creationTimestamp, then key)
 * keeps its CIDR and the others fail. Returns a description of the winner
 * of a conflict with `net` ("CIDR of Network ns/name", malloc'd) or NULL. */
static char *find_conflict(netctl *n, const samplecrd_v1_network *net, const netaddr_prefix *cidr)
{
    struct conflict c = {net, cidr, NULL};
    each_network(n, NULL, check_conflict, &c);
    return c.winner;
}

/* Sets status Failed and records a Warning. `terminal`: the spec itself is
 * wrong, so retrying cannot help until it changes. */
static ckube_result fail_network(netctl *n, ckube_reconcile_ctx *rc,
                                 const samplecrd_v1_network *net, const char *reason,
                                 const char *msg, bool terminal)
{
    CKUBE_ERROR("error syncing '%s/%s': %s: %s", net->metadata.namespace_, net->metadata.name,
                reason, msg);
    record_net(n, net, CKUBE_EVENT_WARNING, "Failed", "%s", msg);
    if (write_status(n, rc, net, desired_status(net, false, reason, msg, NULL, true)) != 0)
        return ckube_result_error();
    if (terminal)
        return ckube_result_terminal();
    /* A conflict clears when the other Network goes; the watch on all
     * Networks enqueues us then, and this recheck bounds it anyway. */
    return strcmp(reason, REASON_CONFLICT) == 0 ? ckube_result_requeue_after(n->o.resync_ns)
                                                : ckube_result_error();
}

static ckube_result sync_network(void *ctx, ckube_reconcile_ctx *rc, const char *ns,
                                 const char *name)
{
    netctl *n = ctx;
    const char *backend = netctl_backend_name(n->o.backend);
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
    CKUBE_V(4, "sync %s: %s", key, ckube_reconcile_reason(rc));

    ckube_object *hold = NULL;
    ckube_status *derr = NULL;
    const samplecrd_v1_network *net = cached_network(n, ns, name, &hold, &derr);
    if (hold && !net) {
        /* There, but not a Network this code can read (a schema-less
         * v1beta1 CRD lets anything in): nothing is touched. */
        CKUBE_ERROR("error syncing '%s': %s", key, errtext(derr));
        if (n->o.recorder)
            ckube_event_recordf(n->o.recorder, ckube_object_json(hold), CKUBE_EVENT_WARNING,
                                "Failed", "%s", errtext(derr));
        ckube_status_free(derr);
        ckube_object_unref(hold);
        return ckube_result_terminal();
    }
    if (!net) {
        /* The seed's NotFound branch: the Network is gone, so is its
         * network (normally the finalizer did this already). */
        netctl_actual act;
        char *e = NULL;
        if (netctl_backend_observe(n->o.backend, key, &act, &e) == 0 && !act.exists) {
            CKUBE_V(2, "Network %s does not exist anymore; nothing to delete", key);
            return ckube_result_ok();
        }
        free(e);
        e = NULL;
        CKUBE_WARN("Network: %s does not exist in local cache, will delete it from %s ...", key,
                   backend);
        if (netctl_backend_remove(n->o.backend, key, &e) != 0) {
            CKUBE_ERROR("[%s] failed to delete network %s: %s", backend, key, e ? e : "?");
            free(e);
            return ckube_result_error();
        }
        CKUBE_INFO("[%s] Deleting network: %s ...", backend, key);
        json_t *ref = json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", NETCTL_GROUP "/v1", "kind",
                                "Network", "namespace", ns ? ns : "", "name", name);
        record(n, ref, CKUBE_EVENT_NORMAL, "Deleted", "Deleted bridge %s", act.device);
        json_decref(ref);
        return ckube_result_ok();
    }

    /* Finalizer: added while the Network lives; on deletion the real
     * network is removed first. */
    struct cleanup_ctx cc = {n, key};
    json_t *updated = NULL, *netj = net_json(net);
    ckube_status *err = NULL;
    samplecrd_v1_network *owned = NULL; /* what the server answered, when it did */
    int fr = netj ? ckube_finalizer_handle(n->o.client, &NETCTL_NETWORKS, netj, NETCTL_FINALIZER,
                                           cleanup_network, &cc, &updated, &err)
                  : -1;
    json_decref(netj);
    if (updated)
        ckube_reconcile_wrote(rc, n->o.networks, updated);
    if (fr > 0 && updated) {
        /* Continue with what the server answered (it has the finalizer
         * and the resourceVersion our status patch must carry). */
        if (!(owned = samplecrd_v1_network_from_json(updated, &err)))
            fr = -1;
        else
            net = owned;
    }
    json_decref(updated);
    if (fr <= 0) {
        if (fr < 0)
            CKUBE_ERROR("error syncing '%s': %s, requeuing", key, errtext(err));
        ckube_status_free(err);
        ckube_object_unref(hold);
        return fr < 0 ? ckube_result_error() : ckube_result_ok();
    }

    /* Desired state. */
    const char *cidr_s = spec_cidr(net), *gw_s = spec_gateway(net);
    netctl_want want;
    char *verr = NULL;
    ckube_result res;
    if (netaddr_check_spec(cidr_s, gw_s, &want.cidr, &want.gateway, &verr) != 0) {
        res = fail_network(n, rc, net, REASON_INVALID, verr ? verr : "invalid spec", true);
        free(verr);
        goto out;
    }
    char *winner = find_conflict(n, net, &want.cidr);
    if (winner) {
        char *msg = NULL;
        netctl_set_err(&msg, "spec.cidr %s overlaps %s", cidr_s, winner);
        free(winner);
        res = fail_network(n, rc, net, REASON_CONFLICT, msg ? msg : "CIDR conflict", false);
        free(msg);
        goto out;
    }

    /* Actual state, and the difference. */
    CKUBE_V(2, "[%s] Try to process network: %s cidr=%s gateway=%s", backend, key, cidr_s, gw_s);
    netctl_actual act;
    char *e = NULL;
    if (netctl_backend_observe(n->o.backend, key, &act, &e) != 0 ||
        (!netctl_actual_matches(&act, &want) &&
         netctl_backend_apply(n->o.backend, key, &want, &e) != 0)) {
        char *msg = NULL;
        netctl_set_err(&msg, "%s backend: %s", backend, e ? e : "unknown error");
        free(e);
        res = fail_network(n, rc, net, REASON_BACKEND, msg ? msg : "backend error", false);
        free(msg);
        goto out;
    }
    char addr[NETADDR_STRLEN];
    netaddr_format_prefix(&want.gateway, want.cidr.len, addr, sizeof(addr));
    char dev[32];
    if (act.exists) {
        snprintf(dev, sizeof(dev), "%s", act.device);
    } else {
        char d[16];
        netctl_device_name(key, d);
        snprintf(dev, sizeof(dev), "%s", d);
    }
    if (!act.exists) {
        CKUBE_INFO("[%s] Created network %s: bridge %s with %s", backend, key, dev, addr);
        record_net(n, net, CKUBE_EVENT_NORMAL, "Created", "Created bridge %s with %s", dev, addr);
    } else if (!netctl_actual_matches(&act, &want)) {
        CKUBE_INFO("[%s] Updated network %s: bridge %s now carries %s", backend, key, dev, addr);
        record_net(n, net, CKUBE_EVENT_NORMAL, "Updated", "Updated bridge %s to %s", dev, addr);
    }
    char *msg = NULL;
    netctl_set_err(&msg, "bridge %s carries %s", dev, addr);
    if (write_status(n, rc, net,
                     desired_status(net, true, REASON_SYNCED, msg ? msg : "", dev, true)) != 0) {
        free(msg);
        res = ckube_result_error();
        goto out;
    }
    free(msg);
    CKUBE_V(1, "Successfully synced '%s'", key);
    /* Drift by hand (a deleted bridge) is repaired on the next check. */
    res = ckube_result_requeue_after(n->o.resync_ns);
out:
    samplecrd_v1_network_free(owned);
    ckube_object_unref(hold);
    return res;
}

static bool enqueue_if_conflicted(void *ud, const samplecrd_v1_network *o)
{
    const samplecrd_v1_network_status *st = o->status;
    const char *r = st && st->n_conditions ? st->conditions[0].reason : NULL;
    if (r && strcmp(r, REASON_CONFLICT) == 0)
        ckube_enqueue(ud, o->metadata.namespace_, o->metadata.name);
    return true;
}

/* Any Network event also re-checks the Networks that lost a CIDR conflict:
 * the change may be what frees their CIDR. */
static void map_network(void *ctx, const json_t *obj, ckube_key_sink *out)
{
    netctl *n = ctx;
    ckube_enqueue(out, ckube_obj_namespace(obj), ckube_obj_name(obj));
    each_network(n, NULL, enqueue_if_conflicted, out);
}

/* ====================================================================
 * The Deployment extension
 * ==================================================================== */

/* The CIDRs the cached Networks hold. */
struct taken {
    netaddr_prefix *p;
    size_t n;
};

static bool collect_taken(void *ud, const samplecrd_v1_network *o)
{
    struct taken *t = ud;
    netaddr_prefix p;
    netaddr gw;
    if (netaddr_check_spec(spec_cidr(o), spec_gateway(o), &p, &gw, NULL) != 0)
        return true;
    netaddr_prefix *np = realloc(t->p, (t->n + 1) * sizeof *np);
    if (!np)
        return false;
    t->p = np;
    t->p[t->n++] = p;
    return true;
}

/* Picks a free /auto_prefix_len of the pool: the first one overlapping no
 * Network and no CIDR handed out in the last minute. Returns 0 or -1
 * when the pool is full. */
static int allocate_cidr(netctl *n, netaddr_prefix *out)
{
    struct taken taken = {0};
    each_network(n, NULL, collect_taken, &taken);
    uint64_t now = ckube_monotonic_ns();
    int rc = -1;
    pthread_mutex_lock(&n->mu);
    /* Forget old reservations. */
    size_t w = 0;
    for (size_t i = 0; i < n->nrecent; i++)
        if (now - n->recent[i].at < RECENT_NS)
            n->recent[w++] = n->recent[i];
    n->nrecent = w;
    int bits = n->o.auto_prefix_len - n->pool.len;
    uint64_t count = bits >= 32 ? 0 : (1ull << bits);
    for (uint64_t k = 0; k < count && rc != 0; k++) {
        netaddr_prefix cand = {.net = n->pool.net, .len = n->o.auto_prefix_len};
        /* IPv4 only (the pool is validated): add k << (32 - len). */
        uint32_t base = ((uint32_t)cand.net.addr[0] << 24) | ((uint32_t)cand.net.addr[1] << 16) |
                        ((uint32_t)cand.net.addr[2] << 8) | cand.net.addr[3];
        base += (uint32_t)(k << (32 - cand.len));
        for (int b = 0; b < 4; b++)
            cand.net.addr[b] = (uint8_t)(base >> (24 - 8 * b));
        bool used = false;
        for (size_t i = 0; i < taken.n && !used; i++)
            used = netaddr_prefix_overlaps(&taken.p[i], &cand);
        for (size_t i = 0; i < n->nrecent && !used; i++)
            used = netaddr_prefix_overlaps(&n->recent[i].p, &cand);
        if (!used) {
            *out = cand;
            if (n->nrecent < RECENT_MAX) {
                n->recent[n->nrecent].p = cand;
                n->recent[n->nrecent].at = now;
                n->nrecent++;
            }
            rc = 0;
        }
    }
    pthread_mutex_unlock(&n->mu);
    free(taken.p);
    return rc;
}

static bool owned_by(const samplecrd_v1_network *net, const char *uid)
{
    for (size_t i = 0; uid && i < net->metadata.n_owner_references; i++) {
        const char *u = net->metadata.owner_references[i].uid;
        if (u && strcmp(u, uid) == 0)
            return true;
    }
    return false;
}

static json_t *owner_ref(const json_t *dep)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b}", "apiVersion", "apps/v1", "kind", "Deployment",
                     "name", ckube_obj_name(dep), "uid", ckube_obj_uid(dep), "blockOwnerDeletion",
                     1);
}

/* Creates Network `netname` for Deployment `dep`. */
static ckube_result create_network_for(netctl *n, ckube_reconcile_ctx *rc, const json_t *dep,
                                       const char *netname)
{
    const char *ns = ckube_obj_namespace(dep);
    const json_t *ann = ckube_json_get_path(dep, "metadata.annotations");
    const char *cidr = json_string_value(json_object_get(ann, NETCTL_CIDR_ANNOTATION));
    const char *gw = json_string_value(json_object_get(ann, NETCTL_GATEWAY_ANNOTATION));
    char cidr_buf[NETADDR_STRLEN], gw_buf[NETADDR_STRLEN];
    if (!cidr) {
        netaddr_prefix p;
        if (allocate_cidr(n, &p) != 0) {
            record(n, dep, CKUBE_EVENT_WARNING, "NetworkFailed",
                   "No free /%d left in %s for Network %s", n->o.auto_prefix_len,
                   n->o.auto_cidr_pool, netname);
            return ckube_result_requeue_after(n->o.resync_ns);
        }
        cidr = netaddr_format_prefix(&p.net, p.len, cidr_buf, sizeof(cidr_buf));
        if (!gw) { /* the first host address */
            netaddr g = p.net;
            g.addr[3] |= 1;
            gw = netaddr_format(&g, gw_buf, sizeof(gw_buf));
        }
    } else if (!gw) {
        netaddr_prefix p;
        if (netaddr_parse_prefix(cidr, &p, NULL) == 0) {
            netaddr g = p.net;
            g.addr[p.net.family == AF_INET ? 3 : 15] |= 1;
            gw = netaddr_format(&g, gw_buf, sizeof(gw_buf));
        } else {
            gw = "";
        }
    }
    json_t *net =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:[o]}, s:{s:s, s:s}}", "apiVersion",
                  NETCTL_GROUP "/v1", "kind", "Network", "metadata", "name", netname, "namespace",
                  ns, "annotations", NETCTL_CREATED_BY_ANNOTATION, NETCTL_COMPONENT,
                  "ownerReferences", owner_ref(dep), "spec", "cidr", cidr, "gateway", gw);
    json_t *out = NULL;
    ckube_status *err = NULL;
    ckube_write_opts wo = {.field_manager = NETCTL_COMPONENT};
    int r = ckube_create(n->o.client, &NETCTL_NETWORKS, ns, net, &wo, &out, &err);
    json_decref(net);
    if (r != 0) {
        bool exists = err && err->code == 409;
        if (!exists) {
            CKUBE_ERROR("error creating Network %s/%s for Deployment %s: %s", ns, netname,
                        ckube_obj_name(dep), errtext(err));
            record(n, dep, CKUBE_EVENT_WARNING, "NetworkFailed", "Failed to create Network %s: %s",
                   netname, errtext(err));
        }
        ckube_status_free(err);
        /* 409: it appeared meanwhile; the next run adopts it. 422 and
         * others: a bad annotation, retried with backoff. */
        return exists ? ckube_result_requeue_after(CKUBE_SEC(1)) : ckube_result_error();
    }
    CKUBE_INFO("Created Network %s/%s (%s via %s) for Deployment %s", ns, netname, cidr, gw,
               ckube_obj_name(dep));
    record(n, dep, CKUBE_EVENT_NORMAL, "NetworkCreated", "Created Network %s (%s, gateway %s)",
           netname, cidr, gw);
    ckube_reconcile_wrote(rc, n->o.networks, out);
    json_decref(out);
    return ckube_result_ok();
}

static ckube_result sync_deployment(void *ctx, ckube_reconcile_ctx *rc, const char *ns,
                                    const char *name)
{
    netctl *n = ctx;
    json_t *dep = ckube_lister_get(&n->deployments, ns, name);
    if (!dep) /* its Networks go with it: the garbage collector's job */
        return ckube_result_ok();
    const char *netname = json_string_value(
        json_object_get(ckube_json_get_path(dep, "metadata.labels"), NETCTL_DEPLOYMENT_LABEL));
    ckube_result res = ckube_result_ok();
    if (!netname || ckube_json_get_path(dep, "metadata.deletionTimestamp"))
        goto out;
    char *bad = ckube_is_dns1123_subdomain(netname);
    if (bad) {
        record(n, dep, CKUBE_EVENT_WARNING, "NetworkFailed",
               "label %s=%s is not a valid Network name: %s", NETCTL_DEPLOYMENT_LABEL, netname,
               bad);
        free(bad);
        res = ckube_result_terminal();
        goto out;
    }
    ckube_object *hold = NULL;
    ckube_status *derr = NULL;
    const samplecrd_v1_network *net = cached_network(n, ns, netname, &hold, &derr);
    ckube_status_free(derr); /* (one that does not decode is not ours to co-own) */
    if (!hold) {
        res = create_network_for(n, rc, dep, netname);
        goto out;
    }
    /* It exists. When we made it for Deployments, this one co-owns it so
     * it lives as long as any of them; a user's own Network is left alone. */
    const char *by = net ? ckube_string_map_get(net->metadata.annotations_keys,
                                                net->metadata.annotations,
                                                net->metadata.n_annotations,
                                                NETCTL_CREATED_BY_ANNOTATION)
                         : NULL;
    if (by && strcmp(by, NETCTL_COMPONENT) == 0 && !owned_by(net, ckube_obj_uid(dep)) &&
        !net->metadata.deletion_timestamp) {
        json_t *netj = net_json(net);
        json_t *refs = json_deep_copy(ckube_json_get_path(netj, "metadata.ownerReferences"));
        json_decref(netj);
        if (!json_is_array(refs)) {
            json_decref(refs);
            refs = json_array();
        }
        json_array_append_new(refs, owner_ref(dep));
        json_t *patch = json_pack("{s:{s:s?, s:o}}", "metadata", "resourceVersion",
                                  net->metadata.resource_version, "ownerReferences", refs);
        size_t len;
        char *body = ckube_json_dumps(patch, &len);
        json_decref(patch);
        json_t *out = NULL;
        ckube_status *err = NULL;
        ckube_write_opts wo = {.field_manager = NETCTL_COMPONENT};
        if (ckube_patch(n->o.client, &NETCTL_NETWORKS, ns, netname, CKUBE_PATCH_MERGE, body, len,
                        &wo, &out, &err) != 0) {
            CKUBE_ERROR("error adding Deployment %s as an owner of Network %s/%s: %s", name, ns,
                        netname, errtext(err));
            ckube_status_free(err);
            res = ckube_result_error();
        } else {
            CKUBE_INFO("Deployment %s/%s now co-owns Network %s", ns, name, netname);
            ckube_reconcile_wrote(rc, n->o.networks, out);
            json_decref(out);
        }
        free(body);
    }
    ckube_object_unref(hold);
out:
    ckube_obj_unref(dep);
    return res;
}

/* Deployment events enqueue the Deployment when it carries the label. */
static bool has_network_label(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    (void)ctx;
    (void)old_obj;
    return json_object_get(ckube_json_get_path(new_obj, "metadata.labels"),
                           NETCTL_DEPLOYMENT_LABEL) != NULL;
}

/* A Network that goes away enqueues the Deployments naming it, so a
 * Network deleted by hand while its Deployment lives is recreated. */
static void map_network_to_deployments(void *ctx, const json_t *obj, ckube_key_sink *out)
{
    netctl *n = ctx;
    ckube_obj_list deps = {0};
    if (ckube_lister_list(&n->deployments, ckube_obj_namespace(obj), NULL, &deps) != 0)
        return;
    for (size_t i = 0; i < deps.n; i++) {
        const char *v = json_string_value(json_object_get(
            ckube_json_get_path(deps.items[i], "metadata.labels"), NETCTL_DEPLOYMENT_LABEL));
        if (v && strcmp(v, ckube_obj_name(obj)) == 0)
            ckube_enqueue(out, ckube_obj_namespace(deps.items[i]), ckube_obj_name(deps.items[i]));
    }
    ckube_obj_list_free(&deps);
}

/* ====================================================================
 * Construction
 * ==================================================================== */

netctl *netctl_new(const netctl_options *o, char **err)
{
    if (!o || !o->client || !o->networks || !o->backend) {
        if (err)
            *err = strdup("client, networks informer and backend are required");
        return NULL;
    }
    netctl *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->o = *o;
    if (!n->o.workers)
        n->o.workers = 2;
    if (!n->o.resync_ns)
        n->o.resync_ns = CKUBE_SEC(30);
    if (!n->o.auto_cidr_pool)
        n->o.auto_cidr_pool = "10.200.0.0/16";
    if (!n->o.auto_prefix_len)
        n->o.auto_prefix_len = 24;
    char *e = NULL;
    if (netaddr_parse_prefix(n->o.auto_cidr_pool, &n->pool, &e) != 0 ||
        n->pool.net.family != AF_INET || n->o.auto_prefix_len < n->pool.len ||
        n->o.auto_prefix_len > 30) {
        netctl_set_err(err, "bad Deployment network pool %s /%d: %s", n->o.auto_cidr_pool,
                       n->o.auto_prefix_len,
                       e ? e : "must be IPv4, with a prefix length from the pool's to 30");
        free(e);
        free(n);
        return NULL;
    }
    pthread_mutex_init(&n->mu, NULL);
    n->networks = ckube_shared_informer_lister(o->networks);

    ckube_controller_options co = {.name = "network", .max_concurrent_reconciles = n->o.workers};
    n->net_ctl = ckube_controller_new(&co, sync_network, n);
    /* As the seed: Add, Update (skipped when the resourceVersion did not
     * change) and Delete enqueue namespace/name. */
    ckube_watch_spec ws = {.map = CKUBE_MAP_FUNC,
                           .map_fn = map_network,
                           .map_ctx = n,
                           .skip_resync = true,
                           .label = "networks"};
    ckube_controller_watch(n->net_ctl, o->networks, &ws);

    if (o->deployments) {
        n->deployments = ckube_shared_informer_lister(o->deployments);
        /* One worker: CIDR allocation stays simple and race-free. */
        ckube_controller_options dco = {.name = "network-deployments",
                                        .max_concurrent_reconciles = 1};
        n->dep_ctl = ckube_controller_new(&dco, sync_deployment, n);
        ckube_watch_spec dws = {.map = CKUBE_MAP_SELF,
                                .predicates = {has_network_label},
                                .skip_resync = true,
                                .label = "deployments"};
        ckube_controller_watch(n->dep_ctl, o->deployments, &dws);
        ckube_watch_spec nws = {.map = CKUBE_MAP_FUNC,
                                .map_fn = map_network_to_deployments,
                                .map_ctx = n,
                                .skip_resync = true,
                                .label = "networks"};
        ckube_controller_watch(n->dep_ctl, o->networks, &nws);
    }
    return n;
}

void netctl_free(netctl *n)
{
    if (!n)
        return;
    ckube_controller_free(n->dep_ctl);
    ckube_controller_free(n->net_ctl);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

ckube_controller *netctl_network_controller(netctl *n)
{
    return n->net_ctl;
}

ckube_controller *netctl_deployment_controller(netctl *n)
{
    return n->dep_ctl;
}

void netctl_cleanup_orphans(netctl *n)
{
    char **keys = NULL;
    size_t nk = 0;
    char *e = NULL;
    if (netctl_backend_list(n->o.backend, &keys, &nk, &e) != 0) {
        CKUBE_ERROR("cannot list %s networks: %s", netctl_backend_name(n->o.backend), e ? e : "?");
        free(e);
        return;
    }
    for (size_t i = 0; i < nk; i++) {
        char *ns = NULL, *name = NULL;
        if (ckube_split_meta_namespace_key(keys[i], &ns, &name) == 0) {
            ckube_object *net = ckube_lister_get_object(&n->networks, ns, name);
            if (!net) /* the sync handler's NotFound branch removes it */
                ckube_controller_enqueue(n->net_ctl, ns, name);
            ckube_object_unref(net);
        }
        free(ns);
        free(name);
    }
    netctl_free_keys(keys, nk);
}
