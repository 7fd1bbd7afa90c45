/* fieldmanager.c - managedFields and server-side apply; see
 * fieldmanager.h. The operations (Update and Apply) live here; the
 * machinery they use is in the other files (internal.h). */
#include "apiserver/fieldmanager/internal.h"

#include "common/text.h"

/* Fields no manager ever owns (upstream's stripMeta): apiVersion, kind,
 * metadata itself and these fields of it. */
static const char *const strip_meta_fields[] = {
    "f:name",        "f:namespace",  "f:creationTimestamp", "f:selfLink",        "f:uid",
    "f:clusterName", "f:generation", "f:managedFields",     "f:resourceVersion",
};

static void strip_meta(fm_set *s)
{
    static const char *const top[] = {"f:apiVersion", "f:kind", "f:metadata"};
    for (size_t i = 0; i < sizeof top / sizeof *top; i++) {
        fm_set *n = fm_set_find(s, top[i]);
        if (n)
            n->member = false;
    }
    fm_set *meta = fm_set_find(s, "f:metadata");
    for (size_t i = 0; meta && i < sizeof strip_meta_fields / sizeof *strip_meta_fields; i++) {
        fm_set *n = fm_set_find(meta, strip_meta_fields[i]);
        if (n)
            n->member = false;
    }
    fm_set_compact(s);
}

/* Fields a write through `subresource` never owns (upstream's reset
 * fields): .status for the main resource of a type with a status
 * subresource, everything but .status for /status. */
static void filter_ignored(const fm_type *t, const char *subresource, fm_set *s)
{
    if (!strcmp(subresource, "status")) {
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->kids[i]->pe, "f:status"))
                fm_set_clear(s->kids[i]);
        s->member = false;
    } else if (!*subresource && t->status_subresource) {
        fm_set *st = fm_set_find(s, "f:status");
        if (st)
            fm_set_clear(st);
    }
    fm_set_compact(s);
}

/* The object without metadata.managedFields and resourceVersion: a
 * shallow copy sharing everything else (read-only). */
static json_t *without_mf(const json_t *obj)
{
    json_t *c = json_copy((json_t *)obj);
    json_t *meta = json_object_get(c, "metadata");
    if (json_is_object(meta)) {
        meta = json_copy(meta);
        json_object_del(meta, "managedFields");
        json_object_del(meta, "resourceVersion");
        json_object_set_new(c, "metadata", meta);
    }
    return c;
}

/* What an object of the type looks like before anything is set: upstream
 * compares a create with a zero Go struct, whose non-pointer struct
 * fields are present (empty) and whose non-omitempty lists are null. */
static json_t *skeleton(const fm_type *t)
{
    json_t *o = json_object();
    if (t->custom)
        return o;
    json_object_set_new(o, "metadata", json_object());
    static const struct {
        const char *path;
        bool null; /* a null list rather than an empty struct */
    } parts[] = {
        {"spec", false},
        {"status", false},
        {"spec.containers", true},
        {"spec.template", false},
        {"spec.template.metadata", false},
        {"spec.template.spec", false},
        {"spec.template.spec.containers", true},
        {"spec.strategy", false},
    };
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char buf[64];
        strcpy(buf, parts[i].path); /* all shorter than buf */
        const json_t *s = t->schema;
        json_t *cur = o;
        char *save = NULL;
        for (char *seg = strtok_r(buf, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
            s = json_object_get(json_object_get(s, "properties"), seg);
            const char *type = json_string_value(json_object_get(s, "type"));
            bool last = !save || !*save;
            if (last && parts[i].null) {
                if (type && !strcmp(type, "array"))
                    json_object_set_new(cur, seg, json_null());
                break;
            }
            if (!s || !type || strcmp(type, "object"))
                break;
            cur = ckube_json_object_ensure(cur, seg);
        }
    }
    return o;
}

/* One conflict set per manager entry (index into the managed list). */
typedef struct conflicts {
    size_t n;
    size_t *entry;
    fm_set **set;
} conflicts;

static void conflicts_free(conflicts *c)
{
    for (size_t i = 0; i < c->n; i++)
        fm_set_free(c->set[i]);
    free(c->entry);
    free(c->set);
    memset(c, 0, sizeof *c);
}

/* Skeletons of built-in types, built once per type (every create
 * compares with one). A built-in type's schema is fixed by its
 * apiVersion and kind, so that is the key (not the schema's address,
 * which a later type could reuse). Cached skeletons are shared by every
 * loop thread and never change or go away; their reference counts are
 * not touched either (jansson's incref reads the count without an
 * atomic). A custom type's skeleton is an empty object, made each time. */
#define SKELETON_CACHE 64

static pthread_mutex_t skeleton_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *gvk; /* "apiVersion/kind" */
    json_t *skeleton;
} skeleton_cache[SKELETON_CACHE];
static size_t skeleton_n;

static json_t *skeleton_find(const char *gvk)
{
    for (size_t i = 0; i < skeleton_n; i++)
        if (!strcmp(skeleton_cache[i].gvk, gvk))
            return skeleton_cache[i].skeleton;
    return NULL;
}

/* t's skeleton, read-only: a shared one (*owned false) or one the caller
 * must decref (*owned true). */
static json_t *skeleton_for(const fm_type *t, bool *owned)
{
    *owned = true;
    if (t->custom || !t->schema || !t->api_version || !t->kind)
        return skeleton(t);
    char gvk[256];
    if ((size_t)snprintf(gvk, sizeof gvk, "%s/%s", t->api_version, t->kind) >= sizeof gvk)
        return skeleton(t);
    pthread_mutex_lock(&skeleton_mu);
    json_t *sk = skeleton_find(gvk);
    if (!sk && skeleton_n < SKELETON_CACHE) {
        sk = skeleton(t); /* (built under the lock: once per type) */
        skeleton_cache[skeleton_n].gvk = xstrdup(gvk);
        skeleton_cache[skeleton_n++].skeleton = sk;
    }
    pthread_mutex_unlock(&skeleton_mu);
    if (!sk)
        return skeleton(t); /* a full cache: made each time */
    *owned = false;
    return sk;
}

/* Upstream's Updater.update: compares live and new (ignoring what the
 * write cannot own) and takes the changed fields from every entry but
 * `self` (-1: none), and the removed ones too. Without force, fields
 * another entry owns that changed are conflicts: returns 1 with *cf set
 * and changes nothing. `cmp_out` (may be NULL) receives the filtered
 * comparison. */
static int take_changes(const fm_type *t, const char *subresource, fm_managed *m, long self,
                        const json_t *live, const json_t *nobj, bool force, comparison *cmp_out,
                        conflicts *cf)
{
    comparison cm;
    fm_compare(t, live, nobj, &cm);
    filter_ignored(t, subresource, cm.added);
    filter_ignored(t, subresource, cm.modified);
    filter_ignored(t, subresource, cm.removed);
    bool others = m->n > (self >= 0 ? 1u : 0u); /* a create has none */
    fm_set *changed = others ? fm_set_copy(cm.modified) : NULL;
    if (changed)
        fm_set_union_into(changed, cm.added);
    conflicts found = {0};
    for (size_t i = 0; others && i < m->n; i++) {
        if ((long)i == self)
            continue;
        fm_set *c = fm_set_intersect(m->e[i].set, changed);
        if (fm_set_empty(c)) {
            fm_set_free(c);
            continue;
        }
        found.entry = xrealloc(found.entry, (found.n + 1) * sizeof *found.entry);
        found.set = xrealloc(found.set, (found.n + 1) * sizeof *found.set);
        found.entry[found.n] = i;
        found.set[found.n++] = c;
    }
    fm_set_free(changed);
    if (!force && found.n) {
        fm_comparison_free(&cm);
        if (cf)
            *cf = found;
        else
            conflicts_free(&found);
        return 1;
    }
    for (size_t i = 0; i < found.n; i++)
        fm_set_subtract(m->e[found.entry[i]].set, found.set[i]);
    for (size_t i = 0; i < m->n; i++)
        if ((long)i != self)
            fm_set_subtract(m->e[i].set, cm.removed);
    conflicts_free(&found);
    if (cmp_out)
        *cmp_out = cm;
    else
        fm_comparison_free(&cm);
    return 0;
}

/* Upstream's managedFieldsUpdater around Updater.Update: the writer gets
 * what it added or changed, merged into its previous entry, with a new
 * time when it got anything. */
static void record_update(const fm_type *t, const char *manager, const char *subresource,
                          const char *now, fm_managed *m, const json_t *live, const json_t *nobj)
{
    comparison cm;
    take_changes(t, subresource, m, -1, live, nobj, true, &cm, NULL);
    /* Added and modified are disjoint and a create has only the former:
     * keep one of them whole (the added set unless it is empty) and copy
     * the other into it, instead of copying both node by node. */
    fm_set *mine = cm.added, *other = cm.modified;
    if (fm_set_empty(mine)) {
        mine = cm.modified;
        other = cm.added;
    }
    cm.added = cm.modified = NULL;
    if (!fm_set_empty(other))
        fm_set_union_into(mine, other);
    fm_set_free(other);
    fm_set_compact(mine);
    fm_comparison_free(&cm);
    strip_meta(mine);
    if (fm_set_empty(mine)) {
        fm_set_free(mine);
    } else {
        long i = fm_managed_find(m, manager, false, t->api_version, subresource);
        if (i >= 0) {
            fm_set_union_into(m->e[i].set, mine);
            fm_set_free(mine);
        } else {
            i = (long)fm_managed_put(m, manager, false, t->api_version, subresource, mine);
        }
        fm_set_time(&m->e[i], now);
    }
    fm_managed_drop_empty(m);
}

/* `[]` or `[{}]` asks for managedFields to be reset. */
static bool is_reset(const json_t *mf)
{
    if (!json_is_array(mf))
        return false;
    if (json_array_size(mf) == 0)
        return true;
    if (json_array_size(mf) != 1 || !json_is_object(json_array_get(mf, 0)))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach(json_array_get(mf, 0), k, v)
    {
        bool zero = json_is_null(v) || (json_is_string(v) && !*json_string_value(v)) ||
                    (json_is_object(v) && !json_object_size(v));
        if (!zero)
            return false;
    }
    return true;
}

static const char *op_manager(const fm_op *op)
{
    return op->manager && *op->manager ? op->manager : "unknown";
}

static const char *op_sub(const fm_op *op)
{
    return op->subresource ? op->subresource : "";
}

void fm_update(const fm_type *t, const fm_op *op, const json_t *old, json_t *obj)
{
    char now[32];
    if (op->now)
        ckube__concat(now, sizeof now, op->now, NULL);
    else
        ckube_now_rfc3339(now, sizeof now);
    const char *sub = op_sub(op);
    json_t *meta = ckube_json_object_ensure(obj, "metadata");
    const json_t *sent = json_object_get(meta, "managedFields");
    /* Every set below is made and dropped within this call. */
    fm_arena arena;
    fm_arena_begin(&arena);
    const json_t *live_mf = ckube_json_get_path(old, "metadata.managedFields");
    char *err = NULL;
    fm_managed *m = NULL;
    if (*sub) {
        m = fm_managed_decode(live_mf, &err); /* a subresource cannot set them */
    } else if (is_reset(sent)) {
        m = fm_managed_new();
    } else {
        m = fm_managed_decode(sent, &err);
        if (!m || !m->n) {
            fm_managed_free(m);
            free(err);
            m = fm_managed_decode(live_mf, &err);
        }
    }
    if (!m) {
        CKUBE_V(2, "fieldmanager: ignoring undecodable managedFields: %s", err);
        m = fm_managed_new();
    }
    free(err);
    json_object_del(meta, "managedFields");
    /* An object whose managedFields are gone is not tracked again until
     * it is applied (upstream's skipNonApplied). */
    if (!m->n && old) {
        fm_managed_free(m);
        fm_arena_end(&arena);
        return;
    }
    bool live_owned = true;
    json_t *live = old ? without_mf(old) : skeleton_for(t, &live_owned);
    /* On create obj has no managedFields any more (deleted above) and its
     * resourceVersion, if any, is stripped from the result like every
     * server-owned field: no copy needed then. */
    json_t *nobj = old ? without_mf(obj) : json_incref(obj);
    record_update(t, op_manager(op), sub, now, m, live, nobj);
    fm_managed_cap(m);
    fm_managed_store(m, obj);
    if (live_owned)
        json_decref(live);
    json_decref(nobj);
    fm_managed_free(m);
    fm_arena_end(&arena);
}

/* Go's GroupVersionKind.String() of what the body names. */
static char *gvk_string(const char *api_version, const char *kind)
{
    const char *av = str_or(api_version, "");
    const char *slash = strchr(av, '/');
    if (slash && strchr(slash + 1, '/'))
        return xstrdup("/, Kind=");
    if (slash)
        return xasprintf("%.*s/%s, Kind=%s", (int)(slash - av), av, slash + 1, str_or(kind, ""));
    return xasprintf("/%s, Kind=%s", av, str_or(kind, ""));
}

static char *manager_display(const fm_entry *e)
{
    char *q = ckube_go_quote(e->manager);
    char *s;
    if (*e->subresource) {
        char *qs = ckube_go_quote(e->subresource);
        s = xasprintf("%s with subresource %s", q, qs);
        free(qs);
    } else {
        s = xstrdup(q);
    }
    free(q);
    if (!e->apply) {
        char *u = xasprintf("%s using %s", s, e->api_version);
        free(s);
        s = u;
    }
    return s;
}

typedef struct conflict_msg {
    ckube_status *st;
    const char *who;
    FILE *f;
    size_t count;
} conflict_msg;

static void add_conflict(void *ctx, const char *const *pes, size_t n)
{
    conflict_msg *c = ctx;
    char *p = fm_path_string(pes, n);
    ckube_status_add_cause(c->st, CKUBE_CAUSE_FIELD_MANAGER_CONFLICT, p, "conflict with %s",
                           c->who);
    if (c->f)
        fprintf(c->f, "\n- %s", p);
    c->count++;
    free(p);
}

/* The 409 upstream answers: "Apply failed with 1 conflict: conflict with
 * "m" using v1: .data.key", or for several a list per manager. */
static ckube_status *conflict_status(const fm_managed *m, const conflicts *cf)
{
    ckube_status *st = ckube_status_new(409, CKUBE_REASON_CONFLICT, NULL);
    st->has_details = 1;
    /* Managers by display name, as upstream sorts them. */
    size_t *order = xcalloc(cf->n, sizeof *order);
    char **names = xcalloc(cf->n, sizeof *names);
    for (size_t i = 0; i < cf->n; i++) {
        order[i] = i;
        names[i] = manager_display(&m->e[cf->entry[i]]);
    }
    for (size_t i = 1; i < cf->n; i++)
        for (size_t j = i; j > 0 && strcmp(names[order[j - 1]], names[order[j]]) > 0; j--) {
            size_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    if (!f)
        xalloc_die();
    size_t total = 0;
    for (size_t k = 0; k < cf->n; k++) {
        size_t i = order[k];
        fprintf(f, "%sconflicts with %s:", k ? "\n" : "", names[i]);
        conflict_msg c = {st, names[i], f, 0};
        fm_set_members(cf->set[i], add_conflict, &c);
        total += c.count;
    }
    fclose(f);
    if (total == 1) {
        st->message = xasprintf("Apply failed with 1 conflict: conflict with %s: %s",
                                names[order[0]], st->causes[0].field);
    } else {
        st->message = xasprintf("Apply failed with %zu conflicts: %s", total, body);
    }
    free(body);
    for (size_t i = 0; i < cf->n; i++)
        free(names[i]);
    free(names);
    free(order);
    return st;
}

/* The fields of kubectl's last-applied annotation that still hold their
 * applied value: conflicts on those are client-side apply's, which
 * "kubectl" may take over (upstream's lastAppliedManager). NULL: none. */
static fm_set *last_applied_allowed(const fm_type *t, const json_t *live)
{
    const char *la = json_string_value(
        json_object_get(ckube_json_get_path(live, "metadata.annotations"), LAST_APPLIED));
    if (!la || !*la)
        return NULL;
    /* An annotation is at most 256 KiB, but as dense as JSON gets it
     * would decode into 20 MiB: read within a body's budget. */
    size_t la_len = strlen(la);
    json_t *obj =
        ckube__json_loadb_limited(la, la_len, 0, ckube__decode_budget(la_len), NULL, NULL, NULL);
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    if (!json_is_object(obj) || !av || strcmp(av, t->api_version)) {
        json_decref(obj);
        return NULL;
    }
    char *err = NULL;
    fm_set *s = fm_fieldset(t, obj, &err);
    if (!s) {
        free(err);
        json_decref(obj);
        return NULL;
    }
    comparison cm;
    fm_compare(t, obj, live, &cm);
    fm_set_subtract(s, cm.modified);
    fm_set_subtract(s, cm.added);
    fm_set_subtract(s, cm.removed);
    fm_set_compact(s);
    fm_comparison_free(&cm);
    json_decref(obj);
    return s;
}

/* Conflicts left once the allowed ones are taken out; true when none. */
static bool conflicts_allowed(conflicts *cf, const fm_set *allowed)
{
    bool all = true;
    for (size_t i = 0; i < cf->n; i++) {
        fm_set_subtract(cf->set[i], allowed);
        fm_set_compact(cf->set[i]);
        if (!fm_set_empty(cf->set[i]))
            all = false;
    }
    /* Drop the managers whose conflicts were all allowed. */
    size_t j = 0;
    for (size_t i = 0; i < cf->n; i++) {
        if (fm_set_empty(cf->set[i])) {
            fm_set_free(cf->set[i]);
        } else {
            cf->entry[j] = cf->entry[i];
            cf->set[j++] = cf->set[i];
        }
    }
    cf->n = j;
    return all;
}

/* One apply attempt on `m` (modified): returns the merged object, or NULL
 * with *cf (conflicts) or *err (malformed configuration). */
static json_t *apply_once(const fm_type *t, const fm_op *op, const char *now, fm_managed *m,
                          const json_t *live, const json_t *config, const fm_set *cfgset,
                          bool force, conflicts *cf, char **err)
{
    const char *me = op_manager(op), *sub = op_sub(op);
    tnode root = fm_tn_root(t);
    json_t *merged = fm_merge_walk(&root, live, config, err);
    if (!merged)
        return NULL;
    long mine = fm_managed_find(m, me, true, t->api_version, sub);
    fm_set *last = mine >= 0 ? fm_set_copy(m->e[mine].set) : NULL;
    if (take_changes(t, sub, m, mine, live, merged, force, NULL, cf)) {
        fm_set_free(last);
        json_decref(merged);
        return NULL;
    }
    mine = (long)fm_managed_put(m, me, true, t->api_version, sub, fm_set_copy(cfgset));
    /* Remove what this manager applied last time, applies no more, and
     * nobody else owns (upstream's prune). */
    if (last && !fm_set_empty(last)) {
        fm_set *owned = fm_set_new();
        for (size_t i = 0; i < m->n; i++)
            fm_set_union_into(owned, m->e[i].set);
        fm_ensure_named(&root, last);
        fm_ensure_named(&root, owned);
        fm_set_subtract(last, owned);
        fm_set_compact(last);
        fm_remove_walk(&root, merged, last);
        fm_set_free(owned);
    }
    fm_set_free(last);
    /* Fields the prune removed are no one's any more. */
    take_changes(t, sub, m, mine, live, merged, true, NULL, NULL);
    strip_meta(m->e[mine].set);
    json_t *a = without_mf(live), *b = without_mf(merged);
    bool changed = !ckube_patch_json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (changed)
        fm_set_time(&m->e[mine], now);
    fm_managed_drop_empty(m);
    return merged;
}

/* Keeps kubectl's client-side-apply annotation current when "kubectl"
 * applies an object that has one (upstream's lastAppliedUpdater). */
static void update_last_applied(json_t *merged, const json_t *live, const json_t *config)
{
    const char *la = json_string_value(
        json_object_get(ckube_json_get_path(live, "metadata.annotations"), LAST_APPLIED));
    if (!la || !*la)
        return;
    json_t *c = json_deep_copy(config);
    json_t *ann = ckube_json_get_path(c, "metadata.annotations");
    if (json_is_object(ann)) {
        json_object_del(ann, LAST_APPLIED);
        if (!json_object_size(ann))
            json_object_del(json_object_get(c, "metadata"), "annotations");
    }
    char *d = dump_sorted(c);
    json_decref(c);
    char *value = xasprintf("%s\n", d);
    free(d);
    json_t *anns =
        ckube_json_object_ensure(ckube_json_object_ensure(merged, "metadata"), "annotations");
    json_object_set_new(anns, LAST_APPLIED, json_string(value));
    free(value);
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(anns, k, v) total += strlen(k) + strlen(str_or(json_string_value(v), ""));
    if (total > CKUBE_ANNOTATIONS_SIZE_MAX)
        json_object_del(anns, LAST_APPLIED);
}

json_t *fm_apply(const fm_type *t, const fm_op *op, const json_t *live, const json_t *config,
                 fm_managed **managed, ckube_status **st)
{
    *managed = NULL;
    *st = NULL;
    const char *av = json_string_value(json_object_get(config, "apiVersion"));
    const char *kind = json_string_value(json_object_get(config, "kind"));
    if (!av || !kind || strcmp(av, t->api_version) || strcmp(kind, t->kind)) {
        char *g = gvk_string(av, kind);
        *st = ckube_status_bad_request("invalid object type: %s", g);
        free(g);
        return NULL;
    }
    const json_t *cmeta = json_object_get(config, "metadata");
    if (cmeta && !json_is_object(cmeta) && !json_is_null(cmeta)) {
        *st = ckube_status_bad_request("metadata must be an object");
        return NULL;
    }
    const json_t *cmf = ckube_json_get_path(config, "metadata.managedFields");
    if (cmf && !json_is_null(cmf)) {
        *st = ckube_status_bad_request("metadata.managedFields must be nil");
        return NULL;
    }
    char now[32];
    if (op->now)
        ckube__concat(now, sizeof now, op->now, NULL);
    else
        ckube_now_rfc3339(now, sizeof now);
    const char *sub = op_sub(op);
    char *err = NULL;
    fm_set *cfgset = fm_fieldset(t, config, &err);
    if (!cfgset) {
        char *g = gvk_string(av, kind);
        const char *ns = json_string_value(ckube_json_get_path(config, "metadata.namespace"));
        const char *name = json_string_value(ckube_json_get_path(config, "metadata.name"));
        *st = ckube_status_bad_request("failed to create typed patch object (%s/%s; %s): %s",
                                       str_or(ns, ""), str_or(name, ""), g, err);
        free(g);
        free(err);
        return NULL;
    }
    filter_ignored(t, sub, cfgset);

    fm_managed *base = fm_managed_decode(ckube_json_get_path(live, "metadata.managedFields"), &err);
    if (!base)
        base = fm_managed_new();
    free(err);
    err = NULL;
    json_t *live0 = live ? without_mf(live) : json_object();
    if (live && !base->n) {
        /* Fields set before the first apply belong to "before-first-apply"
         * (upstream's skipNonApplied). */
        json_t *empty = skeleton(t);
        record_update(t, "before-first-apply", sub, now, base, empty, live0);
        json_decref(empty);
    }

    fm_managed *m = fm_managed_copy(base);
    conflicts cf = {0};
    json_t *merged = apply_once(t, op, now, m, live0, config, cfgset, op->force, &cf, &err);
    if (!merged && cf.n && !strcmp(op_manager(op), "kubectl")) {
        fm_set *allowed = last_applied_allowed(t, live0);
        if (allowed && conflicts_allowed(&cf, allowed)) {
            conflicts_free(&cf);
            fm_managed_free(m);
            m = fm_managed_copy(base);
            merged = apply_once(t, op, now, m, live0, config, cfgset, true, &cf, &err);
        }
        fm_set_free(allowed);
    }
    if (!merged) {
        if (cf.n) {
            *st = conflict_status(m, &cf);
        } else {
            char *g = gvk_string(av, kind);
            *st = ckube_status_bad_request("failed to merge config (%s): %s", g,
                                           str_or(err, "invalid configuration"));
            free(g);
        }
        conflicts_free(&cf);
        free(err);
        fm_managed_free(m);
        fm_managed_free(base);
        fm_set_free(cfgset);
        json_decref(live0);
        return NULL;
    }
    if (live && !strcmp(op_manager(op), "kubectl"))
        update_last_applied(merged, live0, config);
    fm_managed_free(base);
    fm_set_free(cfgset);
    json_decref(live0);
    json_object_del(ckube_json_object_ensure(merged, "metadata"), "managedFields");
    *managed = m;
    return merged;
}

/* Decodes one UTF-8 sequence; invalid bytes decode as U+FFFD, one byte
 * long, as Go's range over a string does. */
static size_t utf8_next(const unsigned char *p, uint32_t *r)
{
    if (p[0] < 0x80) {
        *r = p[0];
        return 1;
    }
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    uint32_t v = n == 4 ? p[0] & 0x07u : n == 3 ? p[0] & 0x0fu : p[0] & 0x1fu;
    for (size_t i = 1; n && i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            n = 0;
            break;
        }
        v = (v << 6) | (p[i] & 0x3fu);
    }
    if (!n || (n == 2 && v < 0x80) || (n == 3 && v < 0x800) || (n == 4 && v < 0x10000) ||
        v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
        *r = 0xfffd;
        return 1;
    }
    *r = v;
    return n;
}

/* Go's unicode.IsPrint, closely enough for manager names: no control
 * characters, no line/paragraph separators, no space other than ' '. */
static bool rune_printable(uint32_t r)
{
    if (r < 0x20 || (r >= 0x7f && r < 0xa0))
        return false;
    if (r == 0xad || r == 0x2028 || r == 0x2029 || r == 0xfeff)
        return false;
    if ((r >= 0x2000 && r <= 0x200f) || r == 0x3000 || r == 0x1680 || r == 0x202f || r == 0x205f ||
        r == 0xa0)
        return false;
    return true;
}

ckube_status *fm_validate_manager(const char *manager, const char *options_kind, bool apply)
{
    ckube_status *st = ckube_status_invalid_begin("meta.k8s.io", options_kind, "");
    if (apply && (!manager || !*manager))
        ckube_field_required(st, "fieldManager", "is required for apply patch");
    if (manager) {
        if (strlen(manager) > FM_MANAGER_MAX)
            ckube_field_too_long(st, "fieldManager", FM_MANAGER_MAX);
        const unsigned char *p = (const unsigned char *)manager;
        for (size_t i = 0; p[i];) {
            uint32_t r;
            size_t n = utf8_next(p + i, &r);
            if (!rune_printable(r)) {
                char detail[96];
                snprintf(detail, sizeof detail, "invalid character U+%04X (at position %zu)",
                         (unsigned)r, i);
                ckube_field_invalid(st, "fieldManager", manager, detail);
            }
            i += n;
        }
    }
    if (!st->ncauses) {
        ckube_status_free(st);
        return NULL;
    }
    ckube_status_invalid_finish(st);
    return st;
}

char *fm_manager_from_user_agent(const char *ua)
{
    const unsigned char *p = (const unsigned char *)str_or(ua, "");
    size_t end = strcspn((const char *)p, "/");
    char *out = xcalloc(FM_MANAGER_MAX + 1, 1);
    size_t len = 0;
    for (size_t i = 0; i < end;) {
        uint32_t r;
        size_t n = utf8_next(p + i, &r);
        if (i + n > end)
            break;
        if (rune_printable(r)) {
            size_t enc = r == 0xfffd && n == 1 ? 3 : n;
            if (len + enc > FM_MANAGER_MAX)
                break;
            if (r == 0xfffd && n == 1) {
                memcpy(out + len, "\xef\xbf\xbd", 3);
            } else {
                memcpy(out + len, p + i, n);
            }
            len += enc;
        }
        i += n;
    }
    out[len] = 0;
    return out;
}

static json_t *entry_without_time(const json_t *e)
{
    json_t *c = json_copy((json_t *)e);
    json_object_del(c, "time");
    return c;
}

void fm_ignore_timestamp_only_changes(const json_t *old, json_t *obj)
{
    if (!old || !obj)
        return;
    const json_t *om = ckube_json_get_path(old, "metadata.managedFields");
    json_t *nm = ckube_json_get_path(obj, "metadata.managedFields");
    if (!json_is_array(om) || !json_is_array(nm) || json_array_size(om) != json_array_size(nm))
        return;
    json_t *a = without_mf(old), *b = without_mf(obj);
    bool same = ckube_patch_json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (!same)
        return;
    /* Every new entry must match an old one but for its time. */
    size_t n = json_array_size(om);
    bool *used = xcalloc(n, sizeof *used);
    bool all = true;
    for (size_t i = 0; i < n && all; i++) {
        json_t *x = entry_without_time(json_array_get(nm, i));
        bool found = false;
        for (size_t j = 0; j < n && !found; j++) {
            if (used[j])
                continue;
            json_t *y = entry_without_time(json_array_get(om, j));
            if (ckube_patch_json_equal(x, y))
                found = used[j] = true;
            json_decref(y);
        }
        json_decref(x);
        all = found;
    }
    free(used);
    if (all)
        json_object_set_new(json_object_get(obj, "metadata"), "managedFields", json_deep_copy(om));
}
