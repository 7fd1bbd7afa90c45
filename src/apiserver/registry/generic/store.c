/* The generic store (store.h): create, update and delete for every type,
 * read-modify-write against the cacher with conflict retry.
 *
 * A write's life: store_write_start runs the verb (run_create,
 * run_update, run_delete) on the caller's thread; it either ends at once
 * (finish: a validation error, a no-op, a dry run) or submits one storage
 * op. The op completes on the storage thread (op_done), which hands the
 * write to w->post's thread (op_settled): success ends it; a lost race
 * runs the verb again from the newer cached object. */
#include "apiserver/registry/generic/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/xalloc.h"
#include "common/text.h"

struct store {
    storage *st;
    cacher *cache;
};

store *store_new(storage *st, cacher *c)
{
    store *s = xcalloc(1, sizeof *s);
    s->st = st;
    s->cache = c;
    return s;
}

void store_free(store *s)
{
    free(s);
}

cacher *store_cache(const store *s)
{
    return s->cache;
}

void store_object_key(const resource_type *t, const char *ns, const char *name, char *buf, size_t n)
{
    const char *g = t->storage_group ? t->storage_group : t->group;
    const char *group = *g ? g : "core";
    if (t->namespaced)
        ckube__concat(buf, n, "/registry/", group, "/", t->resource, "/", ns, "/", name, NULL);
    else
        ckube__concat(buf, n, "/registry/", group, "/", t->resource, "/", name, NULL);
}

/* ---- object helpers ----------------------------------------------------- */

static json_t *meta_of(json_t *obj)
{
    return ckube_json_object_ensure(obj, "metadata");
}

/* Sets metadata.resourceVersion. Every write does: the decimal is
 * written by hand, as vfprintf showed in a create's profile. */
static void set_rv(json_t *obj, int64_t rev)
{
    char buf[24], *p = buf + sizeof buf;
    uint64_t v = rev < 0 ? 0 : (uint64_t)rev;
    *--p = '\0';
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    json_object_set_new(meta_of(obj), "resourceVersion",
                        json_stringn(p, (size_t)(buf + sizeof buf - 1 - p)));
}

static int64_t parse_rv(const char *s, bool *ok)
{
    *ok = true;
    if (!s || !*s)
        return 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 0) {
        *ok = false;
        return 0;
    }
    return v;
}

/* Object without metadata (and status when it is a subresource) to
 * decide whether the generation moves. */
static bool spec_changed(const resource_type *t, const json_t *a, const json_t *b)
{
    json_t *x = json_copy((json_t *)a), *y = json_copy((json_t *)b);
    json_object_del(x, "metadata");
    json_object_del(y, "metadata");
    if (t->status_subresource) {
        json_object_del(x, "status");
        json_object_del(y, "status");
    }
    bool changed = !json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return changed;
}

static bool has_finalizers(const resource_type *t, const json_t *obj)
{
    if (json_array_size(ckube_json_get_path(obj, "metadata.finalizers")) > 0)
        return true;
    return t->pending_finalizers && t->pending_finalizers(obj);
}

static bool same_object(const json_t *a, const json_t *b)
{
    json_t *x = json_copy((json_t *)a), *y = json_copy((json_t *)b);
    json_t *mx = json_copy(json_object_get(x, "metadata"));
    json_t *my = json_copy(json_object_get(y, "metadata"));
    json_object_del(mx, "resourceVersion");
    json_object_del(my, "resourceVersion");
    json_object_set_new(x, "metadata", mx);
    json_object_set_new(y, "metadata", my);
    bool same = json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

/* The name a write is about, for its Status: the object's, else the
 * key's last segment. */
static const char *write_name(const store_write *w)
{
    const char *name = w->obj ? ckube_obj_name(w->obj) : NULL;
    if (name)
        return name;
    if (w->name)
        return w->name;
    const char *slash = strrchr(w->key, '/');
    return slash ? slash + 1 : w->key;
}

static ckube_status *modified_conflict(const store_write *w, const char *name)
{
    return ckube_status_conflict(w->type->group, w->type->resource, name,
                                 "the object has been modified; please apply your changes to the "
                                 "latest version and try again");
}

/* ---- ending a write -------------------------------------------------------- */

static void run_verb(store_write *w);

/* Ends the write: releases what the store holds and calls done with r
 * (whose references done takes). */
static void end(store_write *w, store_result *r)
{
    free(w->value);
    w->value = NULL;
    json_decref(w->obj);
    w->obj = NULL;
    free(w->gen_base);
    w->gen_base = NULL;
    json_decref(w->old);
    w->old = NULL;
    w->hooks->done(w, r);
}

/* Ends the write without a storage op: with `st` (taken) or with `obj`
 * (taken) unchanged. */
static void finish(store_write *w, int code, json_t *obj, ckube_status *st)
{
    store_result r = {.code = st ? 0 : code, .st = st, .obj = st ? NULL : obj};
    if (st)
        json_decref(obj);
    end(w, &r);
}

/* Ends the write whose storage op (or dry run) succeeded. */
static void finish_stored(store_write *w)
{
    set_rv(w->obj, w->op.rev);
    store_result r = {.code = w->verb == STORE_CREATE || w->creating ? 201 : 200,
                      .obj = json_incref(w->obj),
                      .deleted = w->deleting};
    if (!w->dry_run && !w->deleting) {
        r.value = w->value;
        r.value_len = w->op.value_len;
        r.rev = w->op.rev;
        w->value = NULL;
    }
    end(w, &r);
}

/* The storage op's result, on the write's thread. */
static void op_settled(void *arg)
{
    store_write *w = arg;
    const resource_type *t = w->type;
    switch (w->op.result) {
    case STORAGE_OK:
        finish_stored(w);
        return;
    case STORAGE_ERR_EXISTS:
        if (w->gen_base && ++w->attempts < 8) {
            run_verb(w); /* the generated name was taken: another */
            return;
        }
        if (w->creating && ++w->attempts < 8) {
            run_verb(w); /* created meanwhile: update it instead */
            return;
        }
        finish(w, 0, NULL,
               ckube_status_already_exists(t->group, t->resource, ckube_obj_name(w->obj)));
        return;
    case STORAGE_ERR_NOT_FOUND:
        if (w->create_on_missing && ++w->attempts < 8) {
            run_verb(w); /* deleted meanwhile: created again */
            return;
        }
        finish(w, 0, NULL, ckube_status_not_found(t->group, t->resource, write_name(w)));
        return;
    case STORAGE_ERR_CONFLICT:
        if (w->user_rv == 0 && ++w->attempts < STORE_MAX_CONFLICT_RETRIES) {
            run_verb(w);
            return;
        }
        finish(w, 0, NULL, modified_conflict(w, write_name(w)));
        return;
    case STORAGE_ERR_TOO_LARGE:
        /* etcd's limit (--max-request-bytes, 1.5 MiB by default) is below
         * the API's 3 MiB body limit. kube-apiserver answers a 500 with
         * etcd's words; a 413 says what it is, and keeps the words that
         * clients look for ("request is too large"). */
        finish(w, 0, NULL,
               ckube_status_new(413, CKUBE_REASON_TOO_LARGE, "%s",
                                w->op.message[0] ? w->op.message : "request is too large"));
        return;
    default:
        /* The backend's words when it has them, as kube-apiserver passes
         * etcd's errors on: a 500 with no reason ("Error from server:
         * etcdserver: request timed out"). */
        finish(w, 0, NULL,
               w->op.message[0]
                   ? ckube_status_new(500, NULL, "%s", w->op.message)
                   : ckube_status_internal("storage error: %s", storage_strerror(w->op.result)));
        return;
    }
}

/* Storage thread: on to the write's own thread. */
static void op_done(storage_op *op, void *arg)
{
    (void)op;
    store_write *w = arg;
    if (w->post)
        w->post(w->post_ctx, op_settled, w);
    else
        op_settled(w);
}

/* The 413 for an object too large to store, or NULL. Every stored
 * object decodes within STORE_MAX_DECODED, so a later write to it holds
 * no bigger a tree than its body may. The server adds to what a body
 * decoded into (managedFields: an empty object per field set), hence the
 * check here. Text below the bound / JCOST_MAX_PER_BYTE cannot cost
 * more: no walk. */
static ckube_status *too_large(const store_write *w)
{
    if (w->op.value_len > STORE_MAX_OBJECT)
        return ckube_status_new(413, CKUBE_REASON_TOO_LARGE,
                                "Request entity too large: object exceeds the limit of %u bytes",
                                STORE_MAX_OBJECT);
    if (w->op.value_len > STORE_MAX_DECODED / JCOST_MAX_PER_BYTE - JCOST_OBJECT &&
        ckube__json_cost(w->obj, STORE_MAX_DECODED) > STORE_MAX_DECODED)
        return ckube_status_new(413, CKUBE_REASON_TOO_LARGE,
                                "Request entity too large: the object would take more than %zu "
                                "bytes of memory to decode",
                                (size_t)STORE_MAX_DECODED);
    return NULL;
}

/* Encodes w->obj and submits the storage op. The write may end (and w be
 * freed) before this returns: callers must not touch w after it. */
static void submit(store_write *w, storage_op_type type, int64_t expect)
{
    free(w->value);
    w->value = NULL;
    memset(&w->op, 0, sizeof w->op);
    w->op.type = type;
    w->op.key = w->key;
    w->op.expect_mod_rev = expect;
    w->op.done = op_done;
    w->op.arg = w;
    w->deleting = type == STORAGE_OP_DELETE;
    if (type != STORAGE_OP_DELETE) {
        /* Stored form: no resourceVersion (it is the key's mod revision). */
        json_t *meta = meta_of(w->obj);
        json_t *rv = json_incref(json_object_get(meta, "resourceVersion"));
        json_object_del(meta, "resourceVersion");
        /* The positions the watch cache needs come with the bytes, so the
         * committer's delivery to the cache does not scan them again. */
        bool canonical;
        w->value = jscan_dump(w->obj, &w->op.value_len, &w->value_at, &canonical);
        if (rv)
            json_object_set_new(meta, "resourceVersion", rv);
        w->op.value = w->value;
        w->op.hint = canonical ? &w->value_at : NULL;
        ckube_status *st =
            w->value ? too_large(w) : ckube_status_internal("out of memory encoding the object");
        if (st) {
            finish(w, 0, NULL, st);
            return;
        }
    }
    if (w->dry_run) {
        /* Validated and admitted, never stored; a create still finds an
         * object already there (upstream's DryRunnableStorage.Create). */
        cobj *have = type == STORAGE_OP_CREATE ? cacher_get(w->store->cache, w->key) : NULL;
        w->op.result = have ? STORAGE_ERR_EXISTS : STORAGE_OK;
        w->op.rev = expect;
        cobj_unref(have);
        op_settled(w);
        return;
    }
    int rc = storage_submit(w->store->st, &w->op);
    if (rc) {
        w->op.result = rc;
        op_settled(w);
    }
}

/* ---- create ------------------------------------------------------------------ */

/* Namespace checks for creating a namespaced object (upstream's
 * NamespaceLifecycle admission): the namespace must exist and not be in
 * phase Terminating (where a delete puts it until its finalizers are
 * done). */
static ckube_status *check_namespace_open(const store_write *w, const char *name)
{
    char key[512];
    ckube__concat(key, sizeof key, "/registry/core/namespaces/", w->ns, NULL);
    cobj *ns = cacher_get(w->store->cache, key);
    if (!ns)
        return ckube_status_not_found("", "namespaces", w->ns);
    /* status.phase is a selectable field of namespaces (the server
     * configures their bucket with it, as core.c declares): the cache has
     * it at hand, no look into the bytes on every create. */
    const char *phase = cobj_field(ns, "status.phase");
    bool terminating = phase && !strcmp(phase, "Terminating");
    cobj_unref(ns);
    if (!terminating)
        return NULL;
    char qr[256];
    ckube_qualified_resource(qr, sizeof qr, w->type->group, w->type->resource);
    ckube_status *st = ckube_status_new(
        403, CKUBE_REASON_FORBIDDEN,
        "%s \"%s\" is forbidden: unable to create new content in namespace %s because it is "
        "being terminated",
        qr, name ? name : "", w->ns);
    ckube_status_set_details(st, name, w->type->group, w->type->resource);
    ckube_status_add_cause(st, "NamespaceTerminating", "metadata.namespace",
                           "namespace %s is being terminated", w->ns);
    return st;
}

/* ---- conversion through a webhook (resource_type.convert) ------------------ */

/* What a write goes on with once converted (store_write.conv_stage). */
enum { CONV_OLD, CONV_CREATE, CONV_UPDATE };

static void update_transform(store_write *w, json_t *old, int64_t cur_rev);

static void converted(void *arg, json_t *objs, ckube_status *st)
{
    store_write *w = arg;
    w->conv = NULL;
    json_t *obj = json_incref(json_array_get(objs, 0));
    json_decref(objs);
    if (!obj) {
        finish(w, 0, NULL, st ? st : ckube_status_internal("conversion returned no object"));
        return;
    }
    switch (w->conv_stage) {
    case CONV_OLD:
        update_transform(w, obj, w->cur_rev);
        return;
    case CONV_CREATE:
    case CONV_UPDATE:
        json_decref(w->obj);
        w->obj = obj;
        if (w->conv_stage == CONV_CREATE)
            submit(w, STORAGE_OP_CREATE, 0);
        else
            submit(w, STORAGE_OP_UPDATE, w->cur_rev);
        return;
    }
}

/* Converts obj (borrowed): an update's current object to the request's
 * version (CONV_OLD), or the object about to be stored to the storage
 * version; the write goes on in converted(). */
static void convert_then(store_write *w, int stage, json_t *obj)
{
    const resource_type *t = w->type;
    if (!w->out) {
        finish(w, 0, NULL,
               ckube_status_internal("%s/%s %s: converting needs a loop to call out from", t->group,
                                     t->version, t->resource));
        return;
    }
    w->conv_stage = stage;
    json_t *objs = json_pack("[O]", obj);
    w->conv = t->convert(t, w->out, w->store->cache, objs, stage != CONV_OLD, false, converted, w);
    json_decref(objs);
}

/* Asks admission at `stage`: true when the write goes on at once, false
 * when it ended (a Status) or waits (store_admit_resume continues it). */
static bool admit(store_write *w, store_admit_stage stage, json_t *obj, const json_t *old)
{
    if (!w->hooks->admit)
        return true;
    ckube_status *st = NULL;
    w->admit_stage = stage;
    if (!w->hooks->admit(w, stage, obj, old, &st))
        return false;
    if (st) {
        finish(w, 0, NULL, st);
        return false;
    }
    return true;
}

static void create_prepare(store_write *w);
static void create_submit(store_write *w);

/* Creates `obj` (taken): the namespace of the request, which must be
 * open (upstream's NamespaceLifecycle, the first of its mutating
 * admission plugins: before the webhooks and before validation), mutating
 * admission (which sees the object before the server fills anything in,
 * as upstream's create handler calls it), then create_prepare. */
static void create_object(store_write *w, json_t *obj)
{
    const resource_type *t = w->type;
    json_decref(w->obj);
    w->obj = obj;
    json_t *meta = meta_of(obj);
    if (t->namespaced) {
        const char *bns = json_string_value(json_object_get(meta, "namespace"));
        if (bns && *bns && strcmp(bns, w->ns)) {
            finish(w, 0, NULL,
                   ckube_status_bad_request("the namespace of the provided object does not "
                                            "match the namespace sent on the request"));
            return;
        }
        json_object_set_new(meta, "namespace", json_string(w->ns));
        /* the name as the request has it ("" with generateName), as
         * upstream's admission attributes */
        ckube_status *st =
            check_namespace_open(w, json_string_value(json_object_get(meta, "name")));
        if (st) {
            finish(w, 0, NULL, st);
            return;
        }
    } else {
        json_object_del(meta, "namespace");
    }
    if (admit(w, STORE_ADMIT_MUTATE, obj, NULL))
        create_prepare(w);
}

/* A generated name, the fields the server owns, the strategy,
 * validation, then validating admission and create_submit. */
static void create_prepare(store_write *w)
{
    const resource_type *t = w->type;
    json_t *obj = w->obj;
    json_t *meta = meta_of(obj);
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *gen = json_string_value(json_object_get(meta, "generateName"));
    if ((!name || !*name) && gen && *gen) {
        if (!w->gen_base)
            w->gen_base = xstrndup(gen, 58);
        char suffix[6], full[128];
        ckube_random_suffix(suffix, 5);
        snprintf(full, sizeof full, "%s%s", w->gen_base, suffix);
        json_object_set_new(meta, "name", json_string(full));
    }
    if (t->namespaced)
        json_object_set_new(meta, "namespace", json_string(w->ns));
    else
        json_object_del(meta, "namespace");
    /* Fields the server owns. */
    char uid[40], now[32];
    ckube_uuid4(uid, sizeof uid);
    ckube_now_rfc3339(now, sizeof now);
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "creationTimestamp", json_string(now));
    json_object_del(meta, "resourceVersion");
    json_object_del(meta, "deletionTimestamp");
    json_object_del(meta, "deletionGracePeriodSeconds");
    json_object_del(meta, "selfLink");
    if (t->tracks_generation)
        json_object_set_new(meta, "generation", json_integer(1));
    else
        json_object_del(meta, "generation");
    if (t->status_subresource && t->is_custom)
        json_object_del(obj, "status");
    if (t->prepare_create)
        t->prepare_create(t, obj);
    ckube_status *st = w->hooks->validate ? w->hooks->validate(w, obj, NULL) : NULL;
    if (st) {
        finish(w, 0, NULL, st);
        return;
    }
    if (admit(w, STORE_ADMIT_VALIDATE, obj, NULL))
        create_submit(w);
}

/* The object admitted: managedFields, the key, the storage create. */
static void create_submit(store_write *w)
{
    const resource_type *t = w->type;
    json_t *obj = w->obj;
    if (w->hooks->decorate)
        w->hooks->decorate(w, NULL, obj);
    /* The hooks may have set the name: read it again. */
    const char *name = json_string_value(json_object_get(meta_of(obj), "name"));
    store_object_key(t, w->ns, name ? name : "", w->key, sizeof w->key);
    if (t->to_storage)
        t->to_storage(t, obj);
    if (t->convert && !w->dry_run) {
        convert_then(w, CONV_CREATE, obj);
        return;
    }
    submit(w, STORAGE_OP_CREATE, 0);
}

static void run_create(store_write *w)
{
    ckube_status *st = NULL;
    json_t *obj = w->hooks->transform(w, NULL, &st);
    if (!obj) {
        finish(w, 0, NULL, st);
        return;
    }
    create_object(w, obj);
}

/* ---- update ------------------------------------------------------------------ */

/* /status: only .status of the new object `obj` (taken) and the
 * resourceVersion it names count; the rest is the current object's. */
static json_t *status_of(json_t *obj, const json_t *old)
{
    json_t *proj = json_deep_copy(old);
    json_t *s = json_object_get(obj, "status");
    if (s)
        json_object_set(proj, "status", s);
    else
        json_object_del(proj, "status");
    json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
    json_t *pm = meta_of(proj);
    if (rv)
        json_object_set(pm, "resourceVersion", rv);
    else
        json_object_del(pm, "resourceVersion");
    json_decref(obj);
    return proj;
}

/* The update rules common to PUT, PATCH, /status and /finalize: the
 * metadata the server owns is kept, status changes only through /status,
 * no new finalizers once deleting. */
static ckube_status *prepare_update(store_write *w, json_t *obj, const json_t *old)
{
    const resource_type *t = w->type;
    json_t *meta = meta_of(obj);
    json_t *ometa = json_object_get(old, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (name && strcmp(name, w->name))
        return ckube_status_bad_request(
            "the name of the object (%s) does not match the name on the URL (%s)", name, w->name);
    json_object_set_new(meta, "name", json_string(w->name));
    if (t->namespaced) {
        const char *bns = json_string_value(json_object_get(meta, "namespace"));
        if (bns && *bns && strcmp(bns, w->ns))
            return ckube_status_bad_request("the namespace of the provided object does not match "
                                            "the namespace sent on the request");
        json_object_set_new(meta, "namespace", json_string(w->ns));
    } else {
        json_object_del(meta, "namespace");
    }
    static const char *const kept[] = {
        "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
        NULL};
    for (const char *const *k = kept; *k; k++) {
        json_t *v = json_object_get(ometa, *k);
        if (!strcmp(*k, "uid") && json_object_get(meta, "uid") && v &&
            !json_equal(json_object_get(meta, "uid"), v))
            continue; /* caught by validation as immutable */
        if (v)
            json_object_set(meta, *k, v);
        else
            json_object_del(meta, *k);
    }
    json_object_del(meta, "selfLink");
    if (!w->status_only && t->status_subresource) {
        json_t *os = json_object_get(old, "status");
        if (os)
            json_object_set(obj, "status", os);
        else
            json_object_del(obj, "status");
    }
    if (!w->finalize && t->prepare_update)
        t->prepare_update(t, obj, old);
    if (w->status_only) {
        /* Metadata changes through /status are ignored. */
        json_t *om = json_deep_copy(ometa);
        json_object_set(om, "resourceVersion", json_object_get(meta, "resourceVersion"));
        json_object_set_new(obj, "metadata", om);
        meta = om;
    }
    /* generation is settled after validation, once pruning and
     * defaulting have shaped the object (see bump_generation). */
    if (json_object_get(ometa, "deletionTimestamp")) {
        /* No new finalizers once deletion started. */
        json_t *of = json_object_get(ometa, "finalizers");
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(meta, "finalizers"), i, f)
        {
            bool known = false;
            size_t j;
            json_t *g;
            json_array_foreach(of, j, g) known |= json_equal(f, g);
            if (!known) {
                ckube_status *st = ckube_status_invalid_begin(t->group, t->kind, w->name);
                ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_FORBIDDEN, "metadata.finalizers",
                                       "Forbidden: no new finalizers can be added if the object "
                                       "is being deleted, found new finalizers []string{\"%s\"}",
                                       json_string_value(f) ? json_string_value(f) : "");
                ckube_status_invalid_finish(st);
                return st;
            }
        }
    }
    return NULL;
}

/* generation moves when anything outside metadata (and status, when it
 * is a subresource) changed. */
static void bump_generation(const resource_type *t, json_t *obj, const json_t *old)
{
    if (!t->tracks_generation || !spec_changed(t, old, obj))
        return;
    json_int_t g = json_integer_value(ckube_json_get_path(old, "metadata.generation"));
    json_object_set_new(meta_of(obj), "generation", json_integer(g + 1));
}

/* Optimistic concurrency: a resourceVersion the caller named must be
 * the current one (then a conflict is the caller's to retry); a PUT of a
 * type that needs one must name one. */
static ckube_status *check_rv(store_write *w, const json_t *obj, int64_t cur_rev)
{
    const resource_type *t = w->type;
    const char *rvs = w->hooks->precondition_rv ? w->hooks->precondition_rv(w, obj)
                                                : ckube_obj_resource_version(obj);
    bool ok;
    int64_t rv = parse_rv(rvs, &ok);
    if (!ok)
        return ckube_status_bad_request("invalid resourceVersion \"%s\"", rvs);
    if (rv != 0) { /* "0", as "", names none (upstream's update) */
        if (rv != cur_rev)
            return modified_conflict(w, w->name);
        w->user_rv = rv;
        return NULL;
    }
    if (w->require_rv && !t->allow_unconditional_update) {
        ckube_status *st = ckube_status_invalid_begin(t->group, t->kind, w->name);
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "metadata.resourceVersion",
                               "Invalid value: 0x0: must be specified for an update");
        ckube_status_invalid_finish(st);
        return st;
    }
    return NULL;
}

static void update_prepare(store_write *w);
static void update_submit(store_write *w);
static void update_transform(store_write *w, json_t *old, int64_t cur_rev);

/* The current object, the new one from the transform, the
 * resourceVersion precondition, then mutating admission (upstream calls
 * it among the update's transformers) and update_prepare. */
static void run_update(store_write *w)
{
    const resource_type *t = w->type;
    store_object_key(t, w->ns, w->name, w->key, sizeof w->key);
    cobj *cur = cacher_get(w->store->cache, w->key);
    w->creating = !cur && w->create_on_missing;
    if (w->creating) {
        run_create(w);
        return;
    }
    if (!cur) {
        finish(w, 0, NULL, ckube_status_not_found(t->group, t->resource, w->name));
        return;
    }
    int64_t cur_rev = cur->rev;
    json_t *old = cobj_decode(cur);
    cobj_unref(cur);
    if (t->convert) {
        /* the transform and everything after it work in the request's version */
        w->cur_rev = cur_rev;
        convert_then(w, CONV_OLD, old);
        json_decref(old);
        return;
    }
    update_transform(w, old, cur_rev);
}

/* The update of `old` (taken), read at cur_rev, in the request's version. */
static void update_transform(store_write *w, json_t *old, int64_t cur_rev)
{
    const resource_type *t = w->type;
    ckube_status *st = NULL;
    json_t *obj = w->hooks->transform(w, old, &st);
    if (!obj) {
        json_decref(old);
        finish(w, 0, NULL, st);
        return;
    }
    /* A type kept in another's storage compares and prepares in its own
     * shape (the transform presented its base itself) */
    if (t->to_storage && t->present)
        t->present(t, old);
    if (w->status_only)
        obj = status_of(obj, old);
    st = check_rv(w, obj, cur_rev);
    if (st) {
        json_decref(old);
        json_decref(obj);
        finish(w, 0, NULL, st);
        return;
    }
    json_decref(w->obj);
    w->obj = obj;
    json_decref(w->old);
    w->old = old;
    w->cur_rev = cur_rev;
    if (admit(w, STORE_ADMIT_MUTATE, obj, old))
        update_prepare(w);
}

/* The strategy and validation, then validating admission. */
static void update_prepare(store_write *w)
{
    ckube_status *st = prepare_update(w, w->obj, w->old);
    if (!st && w->hooks->validate)
        st = w->hooks->validate(w, w->obj, w->old);
    if (st) {
        finish(w, 0, NULL, st);
        return;
    }
    if (admit(w, STORE_ADMIT_VALIDATE, w->obj, w->old))
        update_submit(w);
}

/* The object admitted: the generation, managedFields, then the storage
 * update (or delete, or nothing for a no-op). */
static void update_submit(store_write *w)
{
    const resource_type *t = w->type;
    json_t *obj = w->obj, *old = w->old;
    int64_t cur_rev = w->cur_rev;
    w->old = NULL;
    bump_generation(t, obj, old);
    if (w->hooks->decorate)
        w->hooks->decorate(w, old, obj);
    set_rv(obj, cur_rev);
    /* A deleting object whose last finalizer is gone is deleted now. */
    if (json_object_get(meta_of(obj), "deletionTimestamp") && !has_finalizers(t, obj)) {
        json_decref(old);
        submit(w, STORAGE_OP_DELETE, cur_rev);
        return;
    }
    if (same_object(old, obj)) {
        /* No-op: nothing is written and the resourceVersion stays. */
        json_decref(old);
        finish(w, 200, json_incref(obj), NULL);
        return;
    }
    json_decref(old);
    if (t->to_storage)
        t->to_storage(t, obj);
    if (t->convert && !w->dry_run) {
        w->cur_rev = cur_rev;
        convert_then(w, CONV_UPDATE, obj);
        return;
    }
    submit(w, STORAGE_OP_UPDATE, cur_rev);
}

/* ---- delete ------------------------------------------------------------------ */

/* The garbage collector's finalizers, as kube-apiserver sets them on a
 * delete: Orphan adds "orphan" (the GC then strips the owner's references
 * from its dependents), Foreground adds "foregroundDeletion" (the GC
 * deletes the dependents first), each removing the other; Background
 * removes both. NULL (no policy given) leaves whatever is there: every
 * type ckube serves defaults to Background. Returns true when the
 * finalizer list changed. */
static bool apply_propagation_finalizers(json_t *obj, const char *policy)
{
    if (!policy)
        return false;
    const char *add = !strcmp(policy, "Orphan")       ? "orphan"
                      : !strcmp(policy, "Foreground") ? "foregroundDeletion"
                                                      : NULL;
    json_t *meta = meta_of(obj);
    json_t *fins = json_object_get(meta, "finalizers");
    json_t *out = json_array();
    bool changed = false, present = false;
    size_t i;
    json_t *v;
    json_array_foreach(fins, i, v)
    {
        const char *f = json_string_value(v);
        bool gc = f && (!strcmp(f, "orphan") || !strcmp(f, "foregroundDeletion"));
        if (gc && (!add || strcmp(f, add))) {
            changed = true; /* the other policy's finalizer goes */
            continue;
        }
        if (f && add && !strcmp(f, add))
            present = true;
        json_array_append(out, v);
    }
    if (add && !present) {
        json_array_append_new(out, json_string(add));
        changed = true;
    }
    if (changed) {
        if (json_array_size(out))
            json_object_set(meta, "finalizers", out);
        else
            json_object_del(meta, "finalizers");
    }
    json_decref(out);
    return changed;
}

/* A 409 "Precondition failed" naming what the caller expected and what
 * the object has. */
static ckube_status *precondition_failed(const store_write *w, const char *what, const char *want,
                                         const char *have)
{
    ckube_status *st =
        ckube_status_conflict(w->type->group, w->type->resource, ckube_obj_name(w->obj), "");
    free(st->message);
    if (asprintf(&st->message, "Precondition failed: %s in precondition: %s, %s in object meta: %s",
                 what, want, what, have) < 0)
        st->message = NULL;
    return st;
}

static void delete_admitted(store_write *w);
static void delete_validate(store_write *w);

/* The current object and the preconditions, then admission
 * (delete_validate) and delete_admitted. */
static void run_delete(store_write *w)
{
    const resource_type *t = w->type;
    if (!*w->key)
        store_object_key(t, w->ns, w->name, w->key, sizeof w->key);
    cobj *cur = cacher_get(w->store->cache, w->key);
    if (!cur) {
        finish(w, 0, NULL, ckube_status_not_found(t->group, t->resource, write_name(w)));
        return;
    }
    int64_t cur_rev = cur->rev;
    json_t *obj = cobj_decode(cur);
    cobj_unref(cur);
    json_decref(w->obj);
    w->obj = obj;
    const char *uid = ckube_obj_uid(obj);
    if (w->pre_uid && (!uid || strcmp(w->pre_uid, uid))) {
        finish(w, 0, NULL, precondition_failed(w, "UID", w->pre_uid, uid ? uid : ""));
        return;
    }
    const char *rv = ckube_obj_resource_version(obj);
    if (w->pre_rv && (!rv || strcmp(w->pre_rv, rv))) {
        finish(w, 0, NULL, precondition_failed(w, "ResourceVersion", w->pre_rv, rv ? rv : ""));
        return;
    }
    w->cur_rev = cur_rev;
    /* Admission sees the object as it is (upstream's
     * AdmissionToValidateObjectDeleteFunc): mutating admission first,
     * which may refuse but has no object to change, then validating. */
    if (admit(w, STORE_ADMIT_MUTATE, NULL, obj))
        delete_validate(w);
}

/* Mutating admission let the delete go on: validating admission. */
static void delete_validate(store_write *w)
{
    if (admit(w, STORE_ADMIT_VALIDATE, NULL, w->obj))
        delete_admitted(w);
}

/* Finalizers decide: a storage delete, or a deletionTimestamp. */
static void delete_admitted(store_write *w)
{
    const resource_type *t = w->type;
    json_t *obj = w->obj;
    int64_t cur_rev = w->cur_rev;
    bool gc_changed = apply_propagation_finalizers(obj, w->propagation);
    if (!has_finalizers(t, obj)) {
        submit(w, STORAGE_OP_DELETE, cur_rev);
        return;
    }
    json_t *meta = meta_of(obj);
    if (json_object_get(meta, "deletionTimestamp")) {
        /* Already being deleted: only a changed propagation policy (its
         * finalizer) is written; otherwise nothing changes. */
        if (gc_changed)
            submit(w, STORAGE_OP_UPDATE, cur_rev);
        else
            finish(w, 200, json_incref(obj), NULL);
        return;
    }
    char now[32];
    ckube_now_rfc3339(now, sizeof now);
    json_object_set_new(meta, "deletionTimestamp", json_string(now));
    json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(0));
    if (t->prepare_delete)
        t->prepare_delete(t, obj);
    submit(w, STORAGE_OP_UPDATE, cur_rev);
}

/* ---- dispatch ---------------------------------------------------------------- */

static void run_verb(store_write *w)
{
    w->deleting = false;
    switch (w->verb) {
    case STORE_CREATE:
        run_create(w);
        break;
    case STORE_UPDATE:
        run_update(w);
        break;
    case STORE_DELETE:
        run_delete(w);
        break;
    }
}

void store_admit_resume(store_write *w, ckube_status *st)
{
    if (st) {
        finish(w, 0, NULL, st);
        return;
    }
    if (w->verb == STORE_DELETE)
        w->admit_stage == STORE_ADMIT_MUTATE ? delete_validate(w) : delete_admitted(w);
    else if (w->verb == STORE_CREATE || w->creating)
        w->admit_stage == STORE_ADMIT_MUTATE ? create_prepare(w) : create_submit(w);
    else
        w->admit_stage == STORE_ADMIT_MUTATE ? update_prepare(w) : update_submit(w);
}

void store_write_start(store_write *w)
{
    w->op = (storage_op){0};
    w->old = NULL;
    w->cur_rev = 0;
    w->value = NULL;
    w->obj = NULL;
    w->gen_base = NULL;
    w->attempts = 0;
    w->user_rv = 0;
    w->deleting = false;
    w->creating = false;
    w->conv = NULL;
    run_verb(w);
}
