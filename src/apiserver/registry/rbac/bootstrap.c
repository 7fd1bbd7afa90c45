/* The RBAC bootstrap policy (bootstrap_policy.yaml, compiled in) and
 * upstream's reconciliation of it (pkg/registry/rbac/reconciliation,
 * with the rule comparison of component-helpers' validation.Covers), as
 * functions on JSON. See bootstrap.h. */
#include "apiserver/registry/rbac/bootstrap.h"

#include <stdlib.h>
#include <string.h>

#include "apiserver/authorization/rbac/rules.h"
#include "ckube/log.h"
#include "ckube/yaml.h"
#include "common/text.h"
#include "common/xalloc.h"

/* cmake/embed.cmake's output for bootstrap_policy.yaml (upstream's) and
 * ckube_policy.yaml (ckube's own controllers'): the bytes, then a NUL. */
extern const char rbac_bootstrap_policy_yaml[];
extern const size_t rbac_bootstrap_policy_yaml_len;
extern const char rbac_ckube_policy_yaml[];
extern const size_t rbac_ckube_policy_yaml_len;

/* ---- the policy ---------------------------------------------------------- */

_Noreturn static void policy_die(const char *file, const char *why, size_t doc)
{
    ckube_log_write(CKUBE_LOG_FATAL, __FILE__, __LINE__,
                    "the embedded RBAC bootstrap policy %s is malformed (document %zu): %s", file,
                    doc, why);
    abort();
}

/* One embedded file's objects, appended to `all`. */
static void load_policy(json_t *all, const char *file, const char *data, size_t len)
{
    json_t *docs = NULL;
    char *err = NULL;
    if (ckube_yaml_load_all(data, len, &docs, &err) != 0)
        policy_die(file, err ? err : "out of memory", 0);
    size_t i;
    json_t *o;
    json_array_foreach(docs, i, o)
    {
        const json_t *meta = json_object_get(o, "metadata");
        if (!json_is_string(json_object_get(o, "apiVersion")) ||
            !json_is_string(json_object_get(o, "kind")) ||
            !json_is_string(json_object_get(meta, "name")))
            policy_die(file, "an object without apiVersion, kind or metadata.name", i + 1);
    }
    if (json_array_extend(all, docs) != 0)
        xalloc_die();
    json_decref(docs);
}

json_t *rbac_bootstrap_policy(void)
{
    json_t *all = json_array();
    if (!all)
        xalloc_die();
    load_policy(all, "bootstrap_policy.yaml", rbac_bootstrap_policy_yaml,
                rbac_bootstrap_policy_yaml_len);
    load_policy(all, "ckube_policy.yaml", rbac_ckube_policy_yaml, rbac_ckube_policy_yaml_len);
    return all;
}

/* ---- small helpers --------------------------------------------------------- */

static const char *member_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* A member that is there and not null. */
static json_t *member(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static json_t *xcopy(const json_t *v)
{
    json_t *c = json_deep_copy(v);
    if (!c)
        xalloc_die();
    return c;
}

/* Appends a copy of each of `from`'s items to `to`: what a result holds
 * shares nothing with what else the caller gets. */
static void append_copies(json_t *to, const json_t *from)
{
    size_t i;
    json_t *v;
    json_array_foreach(from, i, v) json_array_append_new(to, xcopy(v));
}

/* ---- validation.Covers ------------------------------------------------------ */

bool rbac_rules_cover(const json_t *owner, const json_t *servant, json_t **uncovered)
{
    rbac_rule *rules;
    size_t n;
    rbac_rules_compile(owner, &rules, &n);
    json_t *left = rbac_uncovered_rules(rules, n, servant);
    rbac_rules_free(rules, n);
    bool all = json_array_size(left) == 0;
    if (uncovered)
        *uncovered = left;
    else
        json_decref(left);
    return all;
}

/* ---- reconciliation ---------------------------------------------------------- */

static bool is_protected(const json_t *existing)
{
    const json_t *ann = json_object_get(json_object_get(existing, "metadata"), "annotations");
    return !strcmp(member_str(ann, RBAC_AUTOUPDATE_ANNOTATION), "false");
}

/* Upstream's merge(wanted, existing): the keys of metadata.`key` in
 * `wanted` that `obj` lacks are added; obj's own values win. Returns
 * whether anything was added. */
static bool merge_map(json_t *obj, const json_t *wanted, const char *key)
{
    const json_t *want = json_object_get(json_object_get(wanted, "metadata"), key);
    if (!json_object_size(want))
        return false;
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(obj, "metadata", meta);
    }
    json_t *have = json_object_get(meta, key);
    if (!json_is_object(have)) {
        have = json_object();
        json_object_set_new(meta, key, have);
    }
    bool added = false;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        if (!json_object_get(have, k)) {
            json_object_set_new(have, k, xcopy(v));
            added = true;
        }
    }
    return added;
}

/* Adds to `result` (a copy of the stored object) the policy's labels and
 * annotations it lacks; whether there were any. */
static bool merge_metadata(json_t *result, const json_t *wanted)
{
    bool a = merge_map(result, wanted, "annotations");
    bool l = merge_map(result, wanted, "labels");
    return a || l;
}

/* A copy of v without null members and empty arrays and objects, at any
 * depth: what apimachinery's Semantic.DeepEqual does not tell apart from
 * missing ones. */
static json_t *semantic(const json_t *v)
{
    if (json_is_object(v)) {
        json_t *out = json_object();
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m)
        {
            json_t *c = semantic(m);
            if (c)
                json_object_set_new(out, k, c);
        }
        if (!json_object_size(out)) {
            json_decref(out);
            return NULL;
        }
        return out;
    }
    if (json_is_array(v)) {
        if (!json_array_size(v))
            return NULL;
        json_t *out = json_array();
        size_t i;
        json_t *m;
        json_array_foreach(v, i, m)
        {
            json_t *c = semantic(m);
            json_array_append_new(out, c ? c : json_null());
        }
        return out;
    }
    return json_is_null(v) ? NULL : xcopy(v);
}

static bool selector_equal(const json_t *a, const json_t *b)
{
    json_t *sa = semantic(a), *sb = semantic(b);
    bool eq = (!sa && !sb) || (sa && sb && json_equal(sa, sb));
    json_decref(sa);
    json_decref(sb);
    return eq;
}

/* The aggregation rule (upstream's aggregationRuleCovers, union mode).
 * Returns whether `result` changed. */
static bool reconcile_aggregation(json_t *result, const json_t *existing, const json_t *wanted)
{
    const json_t *have = member(existing, "aggregationRule");
    const json_t *want = member(wanted, "aggregationRule");
    if (!want) {
        if (!have)
            return false;
        /* Not an aggregated role at all in the policy. */
        json_object_del(result, "aggregationRule");
        return true;
    }
    const json_t *have_sels = json_object_get(have, "clusterRoleSelectors");
    json_t *missing = json_array();
    size_t i, j;
    json_t *w, *h;
    json_array_foreach(json_object_get(want, "clusterRoleSelectors"), i, w)
    {
        bool found = false;
        json_array_foreach(have_sels, j, h)
        {
            if (selector_equal(h, w)) {
                found = true;
                break;
            }
        }
        if (!found)
            json_array_append(missing, w);
    }
    bool changed = json_array_size(missing) > 0;
    if (changed) {
        json_t *agg = json_object_get(result, "aggregationRule");
        if (!json_is_object(agg)) {
            agg = json_object();
            json_object_set_new(result, "aggregationRule", agg);
        }
        json_t *sels = json_object_get(agg, "clusterRoleSelectors");
        if (!json_is_array(sels)) {
            sels = json_array();
            json_object_set_new(agg, "clusterRoleSelectors", sels);
        }
        append_copies(sels, missing);
    }
    json_decref(missing);
    return changed;
}

/* Fills in `out` from the stored object's copy `result` (taken). */
static void finish(rbac_reconcile *out, json_t *result, bool changed)
{
    out->op = changed ? RBAC_RECONCILE_UPDATE : RBAC_RECONCILE_NONE;
    if (changed && !out->protected_)
        out->object = result;
    else
        json_decref(result);
}

void rbac_reconcile_role(const json_t *existing, const json_t *wanted, rbac_reconcile *out)
{
    memset(out, 0, sizeof *out);
    if (!existing) {
        out->op = RBAC_RECONCILE_CREATE;
        out->object = xcopy(wanted);
        const json_t *rules = json_object_get(wanted, "rules");
        out->missing = json_is_array(rules) ? xcopy(rules) : json_array();
        return;
    }
    out->protected_ = is_protected(existing);
    json_t *result = xcopy(existing);
    bool changed = merge_metadata(result, wanted);
    rbac_rules_cover(json_object_get(existing, "rules"), json_object_get(wanted, "rules"),
                     &out->missing);
    if (json_array_size(out->missing)) {
        json_t *rules = json_object_get(result, "rules");
        if (!json_is_array(rules)) {
            rules = json_array();
            json_object_set_new(result, "rules", rules);
        }
        append_copies(rules, out->missing);
        changed = true;
    }
    if (reconcile_aggregation(result, existing, wanted))
        changed = true;
    finish(out, result, changed);
}

static bool subject_equal(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"kind", "apiGroup", "name", "namespace"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (strcmp(member_str(a, keys[i]), member_str(b, keys[i])))
            return false;
    return true;
}

static bool contains_subject(const json_t *list, const json_t *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (subject_equal(v, s))
            return true;
    }
    return false;
}

void rbac_reconcile_binding(const json_t *existing, const json_t *wanted, rbac_reconcile *out)
{
    memset(out, 0, sizeof *out);
    out->binding = true;
    const json_t *want_subjects = json_object_get(wanted, "subjects");
    if (!existing) {
        out->op = RBAC_RECONCILE_CREATE;
        out->object = xcopy(wanted);
        out->missing = json_is_array(want_subjects) ? xcopy(want_subjects) : json_array();
        return;
    }
    out->protected_ = is_protected(existing);
    out->missing = json_array();
    const json_t *have_ref = json_object_get(existing, "roleRef");
    const json_t *want_ref = json_object_get(wanted, "roleRef");
    if (strcmp(member_str(have_ref, "apiGroup"), member_str(want_ref, "apiGroup")) ||
        strcmp(member_str(have_ref, "kind"), member_str(want_ref, "kind")) ||
        strcmp(member_str(have_ref, "name"), member_str(want_ref, "name"))) {
        /* A roleRef cannot change: the binding is made again, as the
         * policy has it (upstream keeps nothing of the stored one). */
        out->op = RBAC_RECONCILE_RECREATE;
        if (!out->protected_)
            out->object = xcopy(wanted);
        return;
    }
    json_t *result = xcopy(existing);
    bool changed = merge_metadata(result, wanted);
    const json_t *have_subjects = json_object_get(existing, "subjects");
    size_t i;
    json_t *s;
    json_array_foreach(want_subjects, i, s)
    {
        if (!contains_subject(have_subjects, s) && !contains_subject(out->missing, s))
            json_array_append_new(out->missing, xcopy(s));
    }
    if (json_array_size(out->missing)) {
        json_t *subjects = json_object_get(result, "subjects");
        if (!json_is_array(subjects)) {
            subjects = json_array();
            json_object_set_new(result, "subjects", subjects);
        }
        append_copies(subjects, out->missing);
        changed = true;
    }
    finish(out, result, changed);
}

void rbac_reconcile_release(rbac_reconcile *r)
{
    json_decref(r->object);
    json_decref(r->missing);
    r->object = r->missing = NULL;
}

/* ---- describing what was missing --------------------------------------------- */

/* Go's %v of a []string: [a b c]. */
static void go_strings(ckube__strbuf *b, const json_t *list)
{
    ckube__sb_addc(b, '[');
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (i)
            ckube__sb_addc(b, ' ');
        ckube__sb_add(b, json_is_string(v) ? json_string_value(v) : "");
    }
    ckube__sb_addc(b, ']');
}

char *rbac_reconcile_describe(const rbac_reconcile *r)
{
    ckube__strbuf b = {0};
    ckube__sb_addc(&b, '[');
    size_t i;
    json_t *v;
    json_array_foreach(r->missing, i, v)
    {
        ckube__sb_add(&b, i ? " {" : "{");
        if (r->binding) {
            /* rbacv1.Subject: Kind, APIGroup, Name, Namespace */
            ckube__sb_printf(&b, "%s %s %s %s", member_str(v, "kind"), member_str(v, "apiGroup"),
                             member_str(v, "name"), member_str(v, "namespace"));
        } else {
            /* rbacv1.PolicyRule: Verbs, APIGroups, Resources,
             * ResourceNames, NonResourceURLs */
            static const char *const fields[] = {"verbs", "apiGroups", "resources", "resourceNames",
                                                 "nonResourceURLs"};
            for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
                if (f)
                    ckube__sb_addc(&b, ' ');
                go_strings(&b, json_object_get(v, fields[f]));
            }
        }
        ckube__sb_addc(&b, '}');
    }
    ckube__sb_addc(&b, ']');
    char *s = ckube__sb_take(&b);
    if (!s)
        xalloc_die();
    return s;
}
