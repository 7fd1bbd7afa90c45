/* clusterrole_aggregation.c - the ClusterRole aggregation controller (see
 * clusterrole_aggregation.h). One key per aggregated ClusterRole (its
 * name); a reconcile reads only the cache, gathers the rules its
 * selectors select and applies them when they differ. */
#include "controllers/clusterrole_aggregation.h"
#include "controllers/sync_start.h"

#include <ckube/controller.h>
#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/selector.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NAME "clusterrole-aggregation"

static const ckube_gvr CLUSTERROLES = {"rbac.authorization.k8s.io", "v1", "clusterroles"};

struct cragg {
    ckube_client *client;         /* borrowed */
    ckube_shared_informer *roles; /* owned by the factory */
    ckube_controller *ctl;
    sync_start start; /* starts ctl once the cache has synced */
};

/* A PolicyRule's fields, in the Go struct's order (the order the rules
 * are written in). Anything else in a rule is not part of the type. */
static const char *const RULE_FIELDS[] = {"verbs", "apiGroups", "resources", "resourceNames",
                                          "nonResourceURLs"};
#define NRULE_FIELDS (sizeof RULE_FIELDS / sizeof *RULE_FIELDS)

/* Upstream's aggregationRule == nil: absent or null. */
static bool aggregated(const json_t *role)
{
    const json_t *agg = json_object_get(role, "aggregationRule");
    return agg && !json_is_null(agg);
}

static bool list_empty(const json_t *v)
{
    return !v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0);
}

/* equality.Semantic.DeepEqual of two PolicyRules: field by field, a nil
 * list equal to an empty one. A rule that is not an object (null) reads
 * as the zero rule, as Go decodes it. */
static bool rule_equal(const json_t *a, const json_t *b)
{
    for (size_t i = 0; i < NRULE_FIELDS; i++) {
        const json_t *x = json_object_get(a, RULE_FIELDS[i]);
        const json_t *y = json_object_get(b, RULE_FIELDS[i]);
        if (list_empty(x) && list_empty(y))
            continue;
        if (!x || !y || !json_equal(x, y))
            return false;
    }
    return true;
}

static bool rule_in(const json_t *rules, const json_t *rule)
{
    size_t i;
    const json_t *r;
    json_array_foreach(rules, i, r)
    {
        if (rule_equal(r, rule))
            return true;
    }
    return false;
}

/* Semantic equality of two rule lists (a missing or null list equal to
 * an empty one). */
static bool rules_equal(const json_t *a, const json_t *b)
{
    size_t n = json_array_size(a);
    if (n != json_array_size(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!rule_equal(json_array_get(a, i), json_array_get(b, i)))
            return false;
    return true;
}

/* The rule as upstream's apply configuration carries it: only the
 * type's fields, empty lists left out (its fields are omitempty). A new
 * tree: the cached one is shared between threads and is never
 * referenced from a tree of ours. NULL when out of memory. */
static json_t *rule_copy(const json_t *rule)
{
    json_t *out = json_object();
    for (size_t i = 0; out && i < NRULE_FIELDS; i++) {
        const json_t *v = json_object_get(rule, RULE_FIELDS[i]);
        if (list_empty(v))
            continue;
        json_t *c = json_deep_copy(v);
        if (!c || json_object_set_new(out, RULE_FIELDS[i], c) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Appends to `rules` the rules not already there of every ClusterRole
 * `sel` (a LabelSelector) matches, in order of name, `self` left out.
 * 0, -1 when out of memory, 1 when the selector is not one (logged). */
static int gather(cragg *a, const char *self, const json_t *sel, json_t *rules)
{
    ckube_selector *s = NULL;
    char *err = NULL;
    /* A null entry of clusterRoleSelectors decodes, in Go, to the zero
     * LabelSelector: it selects everything. */
    json_t *zero = json_is_null(sel) ? json_object() : NULL;
    int rc = ckube_label_selector_from_json(zero ? zero : sel, &s, &err);
    json_decref(zero);
    if (rc != 0) {
        if (!err)
            return -1;
        CKUBE_WARN(NAME ": clusterrole %s: %s", self, err);
        free(err);
        return 1;
    }
    ckube_lister l = ckube_shared_informer_lister(a->roles);
    ckube_obj_list matched = {0};
    rc = ckube_lister_list(&l, NULL, s, &matched); /* sorted by key: the name */
    ckube_selector_free(s);
    for (size_t i = 0; rc == 0 && i < matched.n; i++) {
        const json_t *role = matched.items[i];
        const char *name = ckube_obj_name(role);
        if (!name || !strcmp(name, self))
            continue;
        size_t j;
        const json_t *rule;
        json_array_foreach(json_object_get(role, "rules"), j, rule)
        {
            if (rule_in(rules, rule))
                continue;
            if (json_array_append_new(rules, rule_copy(rule)) != 0) {
                rc = -1;
                break;
            }
        }
    }
    ckube_obj_list_free(&matched);
    return rc;
}

/* The server-side apply upstream sends: the role's name and its rules,
 * no "rules" at all when there are none (its apply configuration leaves
 * an empty list out), forced, as CLUSTERROLE_AGGREGATION_MANAGER. On
 * success *out is what the server answered. */
static int apply_rules(cragg *a, const char *name, json_t *rules, json_t **out, ckube_status **err)
{
    json_t *body = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "rbac.authorization.k8s.io/v1",
                             "kind", "ClusterRole", "metadata", "name", name);
    if (body && json_array_size(rules) && json_object_set(body, "rules", rules) != 0) {
        json_decref(body);
        body = NULL;
    }
    size_t len = 0;
    char *text = body ? ckube_json_dumps(body, &len) : NULL;
    json_decref(body);
    if (!text)
        return -1;
    ckube_write_opts wo = {.field_manager = CLUSTERROLE_AGGREGATION_MANAGER, .force = true};
    int rc = ckube_patch(a->client, &CLUSTERROLES, NULL, name, CKUBE_PATCH_APPLY, text, len, &wo,
                         out, err);
    free(text);
    return rc;
}

/* Upstream's fallback for a server without server-side apply: the cached
 * role with its rules replaced (none: no "rules"), PUT at the cached
 * resourceVersion (a conflict is retried with the newer one). */
static int update_rules(cragg *a, const json_t *cached, json_t *rules, json_t **out,
                        ckube_status **err)
{
    json_t *obj = json_deep_copy(cached); /* cache objects are read-only */
    /* json_object_set_new takes the value, also when it fails */
    bool failed =
        !obj ||
        json_object_set_new(obj, "apiVersion", json_string("rbac.authorization.k8s.io/v1")) != 0 ||
        json_object_set_new(obj, "kind", json_string("ClusterRole")) != 0;
    if (!failed && json_array_size(rules))
        failed = json_object_set(obj, "rules", rules) != 0;
    else if (!failed)
        json_object_del(obj, "rules");
    if (failed) {
        json_decref(obj);
        return -1;
    }
    int rc = ckube_update(a->client, &CLUSTERROLES, NULL, obj, NULL, out, err);
    json_decref(obj);
    return rc;
}

static ckube_result reconcile(void *ctx, ckube_reconcile_ctx *rc, const char *ns, const char *name)
{
    (void)ns; /* ClusterRoles are cluster-scoped: the key is the name */
    cragg *a = ctx;
    ckube_lister l = ckube_shared_informer_lister(a->roles);
    json_t *role = ckube_lister_get(&l, NULL, name);
    if (!role || !aggregated(role)) {
        ckube_obj_unref(role); /* cache objects: shared, atomic counts */
        return ckube_result_ok();
    }
    json_t *rules = json_array();
    int bad = rules ? 0 : -1;
    size_t i;
    const json_t *sel;
    json_array_foreach(ckube_json_get_path(role, "aggregationRule.clusterRoleSelectors"), i, sel)
    {
        if ((bad = gather(a, name, sel, rules)) != 0)
            break;
    }
    ckube_result res = ckube_result_ok();
    if (bad > 0) {
        /* the server validates selectors, so this role was stored by
         * something that does not: nothing changes it but a new version
         * of the role, which enqueues it again */
        res = ckube_result_terminal();
    } else if (bad < 0) {
        CKUBE_ERROR(NAME ": clusterrole %s: out of memory", name);
        res = ckube_result_error();
    } else if (!rules_equal(rules, json_object_get(role, "rules"))) {
        json_t *out = NULL;
        ckube_status *err = NULL;
        int w = apply_rules(a, name, rules, &out, &err);
        if (w != 0 && err && err->code == 415) {
            ckube_status_free(err);
            err = NULL;
            w = update_rules(a, role, rules, &out, &err);
        }
        if (w == 0) {
            CKUBE_V(2, NAME ": clusterrole %s: %zu rules aggregated", name, json_array_size(rules));
            /* the next run of this key waits for the cache to have it */
            ckube_reconcile_wrote(rc, a->roles, out);
        } else if (err && err->code == 404) {
            CKUBE_V(4, NAME ": clusterrole %s is gone", name);
        } else {
            CKUBE_WARN(NAME ": cannot aggregate the rules of clusterrole %s: %s", name,
                       err && err->message ? err->message : "request failed");
            res = ckube_result_error();
        }
        json_decref(out);
        ckube_status_free(err);
    }
    json_decref(rules);
    ckube_obj_unref(role);
    return res;
}

/* Any ClusterRole added, changed or deleted: every aggregated ClusterRole
 * (upstream's enqueue; the queue merges what is already waiting). The
 * informer's store already holds the change when handlers hear of it. */
static void map_all_aggregated(void *ctx, const json_t *obj, ckube_key_sink *out)
{
    (void)obj;
    cragg *a = ctx;
    ckube_lister l = ckube_shared_informer_lister(a->roles);
    ckube_obj_list all = {0};
    if (ckube_lister_list(&l, NULL, NULL, &all) != 0) {
        CKUBE_ERROR(NAME ": cannot list the cached clusterroles");
        return;
    }
    for (size_t i = 0; i < all.n; i++) {
        const char *name = ckube_obj_name(all.items[i]);
        if (name && aggregated(all.items[i]))
            ckube_enqueue(out, NULL, name);
    }
    ckube_obj_list_free(&all);
}

cragg *cragg_new(ckube_client *c, ckube_informer_factory *f, const cragg_opts *o)
{
    cragg_opts defaults = {0};
    if (!o)
        o = &defaults;
    if (!c || !f)
        return NULL;
    cragg *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->client = c;
    a->roles = ckube_informer_factory_for(f, &CLUSTERROLES);
    ckube_controller_options co = {.name = NAME,
                                   .max_concurrent_reconciles = o->workers > 0 ? o->workers : 5,
                                   .clock = o->clock,
                                   .metrics = o->metrics};
    a->ctl = a->roles ? ckube_controller_new(&co, reconcile, a) : NULL;
    ckube_shared_informer *const infs[] = {a->roles};
    sync_start_init(&a->start, a->ctl, infs, 1, ckube_clock_or_real(o->clock), NAME, "cragg-start");
    ckube_watch_spec w = {
        .map = CKUBE_MAP_FUNC, .map_fn = map_all_aggregated, .map_ctx = a, .label = "clusterroles"};
    if (!a->ctl || ckube_controller_watch(a->ctl, a->roles, &w) != 0) {
        CKUBE_ERROR(NAME ": cannot set up the controller");
        cragg_free(a);
        return NULL;
    }
    return a;
}

int cragg_start(cragg *a)
{
    return a ? sync_start_run(&a->start) : -1;
}

void cragg_stop(cragg *a)
{
    if (a)
        sync_start_stop(&a->start);
}

void cragg_free(cragg *a)
{
    if (!a)
        return;
    sync_start_destroy(&a->start);
    ckube_controller_free(a->ctl);
    free(a);
}
