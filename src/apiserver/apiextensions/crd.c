/* CustomResourceDefinitions; see crd.h. */
#include "apiserver/apiextensions/crd.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/apiextensions/conversion.h"
#include "apiserver/apiextensions/schema/schema.h"
#include "apiserver/registry/admissionregistration/admissionregistration.h"
#include "apiserver/registry/apiregistration/apiregistration.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/validation.h"
#include "common/xalloc.h"

/* ---- v1beta1 <-> v1 --------------------------------------------------- */

static void move_into_versions(json_t *spec, const char *from, const char *to)
{
    json_t *v = json_object_get(spec, from);
    if (!v)
        return;
    size_t i;
    json_t *ver;
    json_array_foreach(json_object_get(spec, "versions"), i, ver)
    {
        if (!json_object_get(ver, to))
            json_object_set(ver, to, v);
    }
    json_object_del(spec, from);
}

/* v1beta1 printer columns spell the path "JSONPath". */
static void rename_jsonpath(json_t *cols)
{
    size_t i;
    json_t *c;
    json_array_foreach(cols, i, c)
    {
        json_t *p = json_object_get(c, "JSONPath");
        if (p) {
            json_object_set(c, "jsonPath", p);
            json_object_del(c, "JSONPath");
        }
    }
}

/* Rewrites a v1beta1 CRD body into the v1 shape we store. */
static void crd_from_v1beta1(json_t *obj)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    json_t *versions = json_object_get(spec, "versions");
    const char *version = json_string_value(json_object_get(spec, "version"));
    if (!json_array_size(versions) && version) {
        versions = json_pack("[{s:s,s:b,s:b}]", "name", version, "served", 1, "storage", 1);
        json_object_set_new(spec, "versions", versions);
    }
    json_object_del(spec, "version");
    json_t *validation = json_object_get(spec, "validation");
    if (validation) {
        json_object_set(spec, "schema", validation);
        json_object_del(spec, "validation");
    }
    move_into_versions(spec, "schema", "schema");
    move_into_versions(spec, "subresources", "subresources");
    json_t *cols = json_object_get(spec, "additionalPrinterColumns");
    if (cols)
        rename_jsonpath(cols);
    move_into_versions(spec, "additionalPrinterColumns", "additionalPrinterColumns");
    move_into_versions(spec, "selectableFields", "selectableFields");
    /* v1beta1 keeps the webhook's fields beside the strategy, and
     * defaults its review versions to v1beta1 */
    json_t *conv = json_object_get(spec, "conversion");
    if (json_is_object(conv)) {
        json_t *cc = json_object_get(conv, "webhookClientConfig");
        json_t *rv = json_object_get(conv, "conversionReviewVersions");
        const char *strategy = json_string_value(json_object_get(conv, "strategy"));
        if (!rv && strategy && !strcmp(strategy, "Webhook"))
            rv = json_pack("[s]", "v1beta1");
        else
            json_incref(rv);
        if (cc || rv) {
            json_t *hook = ckube_json_object_ensure(conv, "webhook");
            if (cc)
                json_object_set(hook, "clientConfig", cc);
            if (rv)
                json_object_set(hook, "conversionReviewVersions", rv);
        }
        json_decref(rv);
        json_object_del(conv, "webhookClientConfig");
        json_object_del(conv, "conversionReviewVersions");
    }
    size_t i;
    json_t *ver;
    json_array_foreach(versions, i, ver)
    {
        rename_jsonpath(json_object_get(ver, "additionalPrinterColumns"));
        if (!json_object_get(ver, "served"))
            json_object_set_new(ver, "served", json_true());
    }
    json_object_set_new(obj, "apiVersion", json_string("apiextensions.k8s.io/v1"));
}

/* Presents a stored (v1) CRD as v1beta1: apiVersion and the top-level
 * version/validation fields v1beta1 clients wrote. */
static void crd_present_v1beta1(const resource_type *t, json_t *obj)
{
    json_object_set_new(obj, "apiVersion", json_string("apiextensions.k8s.io/v1beta1"));
    json_t *spec = json_object_get(obj, "spec");
    json_t *conv = json_object_get(spec, "conversion");
    json_t *hook = json_object_get(conv, "webhook");
    if (json_is_object(hook)) {
        json_t *cc = json_object_get(hook, "clientConfig");
        json_t *rv = json_object_get(hook, "conversionReviewVersions");
        if (cc)
            json_object_set(conv, "webhookClientConfig", cc);
        if (rv)
            json_object_set(conv, "conversionReviewVersions", rv);
        json_object_del(conv, "webhook");
    }
    size_t i;
    json_t *ver;
    json_array_foreach(json_object_get(spec, "versions"), i, ver)
    {
        if (json_is_true(json_object_get(ver, "storage")) && !json_object_get(spec, "version"))
            json_object_set(spec, "version", json_object_get(ver, "name"));
    }
}

/* ---- names and status -------------------------------------------------- */

static char *lower(const char *s)
{
    char *out = xstrdup(s ? s : "");
    for (char *p = out; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return out;
}

/* Fills names.singular and names.listKind defaults (as upstream). */
static void default_names(json_t *obj)
{
    json_t *names = ckube_json_object_ensure(ckube_json_object_ensure(obj, "spec"), "names");
    const char *kind = json_string_value(json_object_get(names, "kind"));
    if (!kind)
        return;
    if (!json_string_value(json_object_get(names, "singular"))) {
        char *l = lower(kind);
        json_object_set_new(names, "singular", json_string(l));
        free(l);
    }
    if (!json_string_value(json_object_get(names, "listKind"))) {
        char buf[256];
        snprintf(buf, sizeof buf, "%sList", kind);
        json_object_set_new(names, "listKind", json_string(buf));
    }
}

/* Finds a served type in `group` that uses `what` (plural, singular, kind
 * or a short name) and belongs to another CRD or is built in. */
static bool name_taken(registry *reg, const char *group, const char *crd_name, const char *what,
                       const char *field)
{
    if (!what || !*what)
        return false;
    size_t n;
    resource_type **types = registry_list(reg, &n);
    bool taken = false;
    for (size_t i = 0; i < n && !taken; i++) {
        resource_type *t = types[i];
        if (strcmp(t->group, group) || (t->crd_name && !strcmp(t->crd_name, crd_name)))
            continue;
        if (!strcmp(field, "plural"))
            taken = !strcmp(t->resource, what);
        else if (!strcmp(field, "kind"))
            taken = !strcmp(t->kind, what);
        else if (!strcmp(field, "singular"))
            taken = t->singular && !strcmp(t->singular, what);
    }
    registry_list_free(types, n);
    return taken;
}

static json_t *condition(const char *type, bool ok, const char *reason, const char *message)
{
    char now[32];
    ckube_now_rfc3339(now, sizeof now);
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", type, "status", ok ? "True" : "False",
                     "lastTransitionTime", now, "reason", reason, "message", message);
}

/* Keeps lastTransitionTime of conditions whose status did not change. */
static void keep_transition_times(json_t *conds, const json_t *old_conds)
{
    size_t i, j;
    json_t *c, *o;
    json_array_foreach(conds, i, c)
    {
        json_array_foreach(old_conds, j, o)
        {
            if (json_equal(json_object_get(c, "type"), json_object_get(o, "type")) &&
                json_equal(json_object_get(c, "status"), json_object_get(o, "status")) &&
                json_object_get(o, "lastTransitionTime"))
                json_object_set(c, "lastTransitionTime", json_object_get(o, "lastTransitionTime"));
        }
    }
}

/* Computes status: acceptedNames and the NamesAccepted, Established and
 * (while deleting) Terminating conditions. */
static void compute_status(registry *reg, json_t *obj, const json_t *old)
{
    json_t *spec = json_object_get(obj, "spec");
    json_t *names = json_object_get(spec, "names");
    const char *group = json_string_value(json_object_get(spec, "group"));
    const char *name = ckube_obj_name(obj);
    if (!group || !name)
        return;
    const char *conflict = NULL;
    char msg[512] = "no conflicts found";
    if (name_taken(reg, group, name, json_string_value(json_object_get(names, "plural")), "plural"))
        conflict = "PluralConflict";
    else if (name_taken(reg, group, name, json_string_value(json_object_get(names, "singular")),
                        "singular"))
        conflict = "SingularConflict";
    else if (name_taken(reg, group, name, json_string_value(json_object_get(names, "kind")),
                        "kind"))
        conflict = "KindConflict";
    if (conflict) {
        const char *field = !strcmp(conflict, "PluralConflict")     ? "plural"
                            : !strcmp(conflict, "SingularConflict") ? "singular"
                                                                    : "kind";
        snprintf(msg, sizeof msg, "\"%s\" is already in use",
                 json_string_value(json_object_get(names, field)));
    }
    json_t *status = json_object();
    json_t *conds = json_array();
    json_t *old_status = json_object_get(old, "status");
    if (conflict) {
        /* Keep serving what was accepted before, if anything. */
        json_t *prev = json_object_get(old_status, "acceptedNames");
        json_object_set_new(status, "acceptedNames", prev ? json_deep_copy(prev) : json_object());
        json_array_append_new(conds, condition("NamesAccepted", false, conflict, msg));
        json_array_append_new(
            conds, condition("Established", false, "NotAccepted", "not all names are accepted"));
    } else {
        json_object_set_new(status, "acceptedNames", json_deep_copy(names));
        json_array_append_new(conds, condition("NamesAccepted", true, "NoConflicts", msg));
        json_array_append_new(conds, condition("Established", true, "InitialNamesAccepted",
                                               "the initial names have been accepted"));
    }
    if (ckube_json_get_path(obj, "metadata.deletionTimestamp"))
        json_array_append_new(conds, condition("Terminating", true, "InstanceDeletionInProgress",
                                               "CustomResource deletion is in progress"));
    keep_transition_times(conds, json_object_get(old_status, "conditions"));
    json_object_set_new(status, "conditions", conds);
    json_t *stored = json_array();
    size_t i;
    json_t *ver;
    json_array_foreach(json_object_get(spec, "versions"), i, ver)
    {
        if (json_is_true(json_object_get(ver, "storage")))
            json_array_append(stored, json_object_get(ver, "name"));
    }
    json_object_set_new(status, "storedVersions", stored);
    json_object_set_new(obj, "status", status);
}

static void add_cleanup_finalizer(json_t *obj)
{
    json_t *meta = ckube_json_object_ensure(obj, "metadata");
    json_t *fin = json_object_get(meta, "finalizers");
    if (!json_is_array(fin)) {
        fin = json_array();
        json_object_set_new(meta, "finalizers", fin);
    }
    size_t i;
    json_t *f;
    json_array_foreach(fin, i, f)
    {
        if (json_string_value(f) && !strcmp(json_string_value(f), CRD_CLEANUP_FINALIZER))
            return;
    }
    json_array_append_new(fin, json_string(CRD_CLEANUP_FINALIZER));
}

/* SetDefaults: the conversion strategy None, a webhook Service's port 443. */
static void default_conversion(json_t *obj)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    json_t *conv = json_object_get(spec, "conversion");
    if (!json_is_object(conv)) {
        json_object_set_new(spec, "conversion", json_pack("{s:s}", "strategy", "None"));
        return;
    }
    json_t *svc = ckube_json_get_path(conv, "webhook.clientConfig.service");
    if (json_is_object(svc) && !json_object_get(svc, "port"))
        json_object_set_new(svc, "port", json_integer(443));
}

static void crd_prepare_create(const resource_type *t, json_t *obj)
{
    if (!strcmp(t->version, "v1beta1"))
        crd_from_v1beta1(obj);
    default_conversion(obj);
    default_names(obj);
    add_cleanup_finalizer(obj);
    compute_status(t->registry, obj, NULL);
}

static void crd_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    if (!strcmp(t->version, "v1beta1"))
        crd_from_v1beta1(obj);
    default_conversion(obj);
    default_names(obj);
    compute_status(t->registry, obj, old);
}

/* A `pattern` Go's regexp would refuse, as a cause at `path`.pattern. */
static void check_pattern(const json_t *s, const char *path, ckube_status *st)
{
    const char *pattern = json_string_value(json_object_get(s, "pattern"));
    char *re_err = pattern && *pattern ? schema_re2_error(pattern) : NULL;
    if (!re_err)
        return;
    char detail[1200], field[1024];
    snprintf(detail, sizeof detail, "must be a valid regular expression, but isn't: %s", re_err);
    snprintf(field, sizeof field, "%s.pattern", path);
    ckube_field_invalid(st, field, pattern, detail);
    free(re_err);
}

/* Patterns inside allOf/anyOf/oneOf/not (value validations that the
 * structural rules do not otherwise walk), at any depth below them. */
static void check_junctor_patterns(const json_t *s, const char *path, ckube_status *st, int depth)
{
    if (!json_is_object(s) || depth > 64)
        return;
    char field[1024];
    static const char *const lists[] = {"allOf", "anyOf", "oneOf"};
    for (size_t l = 0; l < 3; l++) {
        size_t i;
        const json_t *sub;
        json_array_foreach(json_object_get(s, lists[l]), i, sub)
        {
            snprintf(field, sizeof field, "%s.%s[%zu]", path, lists[l], i);
            check_pattern(sub, field, st);
            check_junctor_patterns(sub, field, st, depth + 1);
            const char *k;
            const json_t *v;
            json_object_foreach(json_object_get(sub, "properties"), k, v)
            {
                char pf[1200];
                snprintf(pf, sizeof pf, "%s.properties[%s]", field, k);
                check_pattern(v, pf, st);
                check_junctor_patterns(v, pf, st, depth + 1);
            }
        }
    }
    const json_t *neg = json_object_get(s, "not");
    if (json_is_object(neg)) {
        snprintf(field, sizeof field, "%s.not", path);
        check_pattern(neg, field, st);
        check_junctor_patterns(neg, field, st, depth + 1);
    }
}

/* Structural schema rules v1 CRDs must follow: every node says its type
 * (unless int-or-string or preserve-unknown-fields), arrays say their
 * items, patterns compile as Go regular expressions (the errors
 * schema_re2_error knows). `path` is the field path of `s` for causes. */
static void check_structural(const json_t *s, const char *path, ckube_status *st, int depth)
{
    if (!json_is_object(s) || depth > 64)
        return;
    char field[1024];
    bool ios = json_is_true(json_object_get(s, "x-kubernetes-int-or-string"));
    bool pu = json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields"));
    const char *type = json_string_value(json_object_get(s, "type"));
    if ((!type || !*type) && !ios && !pu) {
        snprintf(field, sizeof field, "%s.type", path);
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field,
                               "Required value: must not be empty for specified object fields");
    }
    check_pattern(s, path, st);
    check_junctor_patterns(s, path, st, depth);
    if (type && !strcmp(type, "array") && !json_object_get(s, "items")) {
        snprintf(field, sizeof field, "%s.items", path);
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field,
                               "Required value: must be specified");
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(s, "properties"), k, v)
    {
        snprintf(field, sizeof field, "%s.properties[%s]", path, k);
        check_structural(v, field, st, depth + 1);
    }
    json_t *items = json_object_get(s, "items");
    if (json_is_object(items)) {
        snprintf(field, sizeof field, "%s.items", path);
        check_structural(items, field, st, depth + 1);
    }
    json_t *ap = json_object_get(s, "additionalProperties");
    if (json_is_object(ap)) {
        snprintf(field, sizeof field, "%s.additionalProperties", path);
        check_structural(ap, field, st, depth + 1);
    }
}

/* Selectable fields per version, as upstream: at most 8, each a simple
 * path (".a.b", no array notation) outside metadata, to a string, integer
 * or boolean field of the version's schema, no path twice. */
#define MAX_SELECTABLE_FIELDS 8

/* The schema of the field at a simple path, or NULL. */
static const json_t *schema_at(const json_t *schema, const char *path)
{
    const json_t *s = schema;
    char seg[256];
    for (const char *p = path; s && *p == '.';) {
        size_t n = strcspn(p + 1, ".");
        if (!n || n >= sizeof seg)
            return NULL;
        memcpy(seg, p + 1, n);
        seg[n] = '\0';
        s = json_object_get(json_object_get(s, "properties"), seg);
        p += n + 1;
    }
    return s;
}

static bool simple_path(const char *p)
{
    if (!p || *p != '.')
        return false;
    for (const char *seg = p; *seg == '.'; seg += strcspn(seg + 1, ".") + 1) {
        size_t n = strcspn(seg + 1, ".");
        if (!n || strcspn(seg + 1, "[]{}*@$'\" ") < n)
            return false;
    }
    return true;
}

static void check_selectable_fields(const json_t *ver, size_t vi, ckube_status *st)
{
    const json_t *fields = json_object_get(ver, "selectableFields");
    if (!fields)
        return;
    char field[128];
    snprintf(field, sizeof field, "spec.versions[%zu].selectableFields", vi);
    if (json_array_size(fields) > MAX_SELECTABLE_FIELDS)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_TOO_MANY, field,
                               "Too many: %zu: must have at most %d items", json_array_size(fields),
                               MAX_SELECTABLE_FIELDS);
    const json_t *schema = ckube_json_get_path(ver, "schema.openAPIV3Schema");
    size_t i;
    const json_t *f;
    json_array_foreach(fields, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "jsonPath"));
        snprintf(field, sizeof field, "spec.versions[%zu].selectableFields[%zu].jsonPath", vi, i);
        if (!path || !*path) {
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field, "Required value");
            continue;
        }
        if (!simple_path(path)) {
            ckube_field_invalid(st, field, path,
                                "must be a simple JSON path without array notation, "
                                "e.g. .spec.color");
            continue;
        }
        if (!strcmp(path, ".metadata") || !strncmp(path, ".metadata.", 10)) {
            ckube_field_invalid(st, field, path, "must not point to metadata fields");
            continue;
        }
        const json_t *fs = schema ? schema_at(schema, path) : NULL;
        const char *type = json_string_value(json_object_get(fs, "type"));
        if (!fs) {
            ckube_field_invalid(st, field, path, "is not a field of the schema");
            continue;
        }
        if (!type || (strcmp(type, "string") && strcmp(type, "integer") && strcmp(type, "boolean")))
            ckube_field_invalid(st, field, path,
                                "must point to a field of type string, boolean or integer");
        for (size_t j = 0; j < i; j++) {
            const char *prev =
                json_string_value(json_object_get(json_array_get(fields, j), "jsonPath"));
            if (prev && !strcmp(prev, path)) {
                ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_DUPLICATE, field,
                                       "Duplicate value: \"%s\"", path);
                break;
            }
        }
    }
}

/* Deletion started (deletionTimestamp is set): report Terminating. */
static void crd_prepare_delete(const resource_type *t, json_t *obj)
{
    json_t *old = json_deep_copy(obj);
    compute_status(t->registry, obj, old);
    json_decref(old);
}

/* ValidateCustomResourceConversion (v1). */
static void validate_conversion(const json_t *conv, ckube_status *st)
{
    if (!conv)
        return;
    const char *strategy = json_string_value(json_object_get(conv, "strategy"));
    const json_t *hook = json_object_get(conv, "webhook");
    bool webhook = strategy && !strcmp(strategy, "Webhook");
    if (!strategy || (strcmp(strategy, "None") && !webhook)) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, "spec.conversion.strategy",
                               "Unsupported value: \"%s\": supported values: \"None\", "
                               "\"Webhook\"",
                               strategy ? strategy : "");
        return;
    }
    if (!webhook) {
        if (hook && !json_is_null(hook))
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_FORBIDDEN, "spec.conversion.webhook",
                                   "Forbidden: should not be set when strategy is not set to "
                                   "Webhook");
        return;
    }
    const json_t *cc = json_object_get(hook, "clientConfig");
    if (!json_is_object(hook) || !json_is_object(cc)) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED,
                               json_is_object(hook) ? "spec.conversion.webhook.clientConfig"
                                                    : "spec.conversion.webhook",
                               "Required value: required when strategy is set to Webhook");
        return;
    }
    webhook_client_config_validate(cc, "spec.conversion.webhook.clientConfig", st);
    const json_t *rv = json_object_get(hook, "conversionReviewVersions");
    bool known = false;
    size_t i, j;
    json_t *v;
    json_array_foreach(rv, i, v)
    {
        const char *s = json_string_value(v);
        if (s && (!strcmp(s, "v1") || !strcmp(s, "v1beta1")))
            known = true;
        for (j = 0; j < i; j++)
            if (json_equal(json_array_get(rv, j), v))
                break;
        if (j < i) {
            char f[96];
            snprintf(f, sizeof f, "spec.conversion.webhook.conversionReviewVersions[%zu]", i);
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_DUPLICATE, f, "Duplicate value: \"%s\"",
                                   s ? s : "");
        }
    }
    if (!json_array_size(rv)) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED,
                               "spec.conversion.webhook.conversionReviewVersions",
                               "Required value: must include at least one of v1, v1beta1");
    } else if (!known) {
        char *list = xstrdup("");
        json_array_foreach(rv, i, v)
        {
            char *next = xasprintf("%s%s\"%s\"", list, i ? ", " : "",
                                   json_string_value(v) ? json_string_value(v) : "");
            free(list);
            list = next;
        }
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID,
                               "spec.conversion.webhook.conversionReviewVersions",
                               "Invalid value: []string{%s}: must include at least one of v1, "
                               "v1beta1",
                               list);
        free(list);
    }
}

static void crd_validate(const resource_type *t, const json_t *obj, const json_t *old,
                         ckube_status *st)
{
    json_t *spec = json_object_get(obj, "spec");
    const char *group = json_string_value(json_object_get(spec, "group"));
    json_t *names = json_object_get(spec, "names");
    const char *plural = json_string_value(json_object_get(names, "plural"));
    const char *kind = json_string_value(json_object_get(names, "kind"));
    const char *scope = json_string_value(json_object_get(spec, "scope"));
    const char *name = ckube_obj_name(obj);
    if (!group || !*group) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.group", "Required value");
    } else if (!strchr(group, '.')) {
        ckube_field_invalid(st, "spec.group", group, "should be a domain with at least one dot");
    }
    if (!plural || !*plural) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.names.plural",
                               "Required value");
    } else {
        char *msg = ckube_is_dns1035_label(plural);
        if (msg) {
            ckube_field_invalid(st, "spec.names.plural", plural, msg);
            free(msg);
        }
    }
    if (!kind || !*kind)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.names.kind", "Required value");
    if (!scope || (strcmp(scope, "Namespaced") && strcmp(scope, "Cluster")))
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, "spec.scope",
                               "Unsupported value: \"%s\": supported values: \"Cluster\", "
                               "\"Namespaced\"",
                               scope ? scope : "");
    if (plural && group && name) {
        char want[512];
        snprintf(want, sizeof want, "%s.%s", plural, group);
        if (strcmp(name, want))
            ckube_field_invalid(st, "metadata.name", name,
                                "must be spec.names.plural+\".\"+spec.group");
    }
    json_t *versions = json_object_get(spec, "versions");
    size_t nstorage = 0, i;
    json_t *ver;
    if (!json_array_size(versions))
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.versions",
                               "Required value: must have exactly one version marked as storage "
                               "version");
    json_array_foreach(versions, i, ver)
    {
        char field[64];
        const char *vn = json_string_value(json_object_get(ver, "name"));
        snprintf(field, sizeof field, "spec.versions[%zu].name", i);
        if (!vn || !*vn) {
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field, "Required value");
        } else {
            char *msg = ckube_is_dns1035_label(vn);
            if (msg) {
                ckube_field_invalid(st, field, vn, msg);
                free(msg);
            }
        }
        if (json_is_true(json_object_get(ver, "storage")))
            nstorage++;
        /* v1 requires a structural schema per version; v1beta1 allowed
         * none. */
        json_t *schema = ckube_json_get_path(ver, "schema.openAPIV3Schema");
        snprintf(field, sizeof field, "spec.versions[%zu].schema.openAPIV3Schema", i);
        if (!strcmp(t->version, "v1") && !schema)
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field,
                                   "Required value: schemas are required");
        else if (!strcmp(t->version, "v1"))
            check_structural(schema, field, st, 0);
        check_selectable_fields(ver, i, st);
    }
    if (json_array_size(versions) && nstorage != 1)
        ckube_field_invalid_int(st, "spec.versions", (int64_t)nstorage,
                                "must have exactly one version marked as storage version");
    validate_conversion(json_object_get(spec, "conversion"), st);
    if (old) {
        if (!json_equal(json_object_get(json_object_get(old, "spec"), "scope"),
                        json_object_get(spec, "scope")))
            ckube_field_invalid(st, "spec.scope", scope ? scope : "", "field is immutable");
        if (!json_equal(json_object_get(json_object_get(old, "spec"), "group"),
                        json_object_get(spec, "group")))
            ckube_field_invalid(st, "spec.group", group ? group : "", "field is immutable");
    }
}

static json_t *crd_cell_created(const json_t *obj)
{
    const char *ts = json_string_value(ckube_json_get_path(obj, "metadata.creationTimestamp"));
    return json_string(ts ? ts : "");
}

int apiextensions_install(registry *reg)
{
    static const char *const versions[] = {"v1", "v1beta1"};
    for (size_t i = 0; i < 2; i++) {
        resource_type *t = xcalloc(1, sizeof *t);
        atomic_init(&t->refs, 1);
        t->group = xstrdup("apiextensions.k8s.io");
        t->version = xstrdup(versions[i]);
        t->resource = xstrdup("customresourcedefinitions");
        t->kind = xstrdup("CustomResourceDefinition");
        t->singular = xstrdup("customresourcedefinition");
        t->short_names = xcalloc(3, sizeof(char *));
        t->short_names[0] = xstrdup("crd");
        t->short_names[1] = xstrdup("crds");
        t->categories = xcalloc(2, sizeof(char *));
        t->categories[0] = xstrdup("api-extensions");
        t->verbs = VERB_ALL;
        t->status_subresource = true;
        t->tracks_generation = true;
        t->allow_unconditional_update = true;
        t->name_kind = CKUBE_NAME_DNS1123_SUBDOMAIN;
        t->prepare_create = crd_prepare_create;
        t->prepare_update = crd_prepare_update;
        t->validate = crd_validate;
        t->prepare_delete = crd_prepare_delete;
        if (i == 1)
            t->present = crd_present_v1beta1;
        t->ncolumns = 2;
        t->columns = xcalloc(2, sizeof *t->columns);
        t->columns[0] = (printer_column){xstrdup("Name"),
                                         xstrdup("string"),
                                         xstrdup("name"),
                                         xstrdup("Name of the CustomResourceDefinition."),
                                         0,
                                         xstrdup(".metadata.name"),
                                         NULL};
        t->columns[1] = (printer_column){xstrdup("Created At"),
                                         xstrdup("string"),
                                         xstrdup(""),
                                         xstrdup("When it was created."),
                                         0,
                                         NULL,
                                         crd_cell_created};
        if (registry_add(reg, t) != 0) {
            resource_type_unref(t);
            return -1;
        }
    }
    return 0;
}

/* ---- custom resource types -------------------------------------------- */

static char **strv_from_json(const json_t *a)
{
    if (!json_array_size(a))
        return NULL;
    char **v = xcalloc(json_array_size(a) + 1, sizeof *v);
    size_t i, n = 0;
    json_t *s;
    json_array_foreach(a, i, s)
    {
        if (json_string_value(s))
            v[n++] = xstrdup(json_string_value(s));
    }
    return v;
}

static char *jstrdup(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? xstrdup(s) : NULL;
}

/* Custom resources are stored with the storage version's apiVersion;
 * other served versions only rewrite it (conversion strategy None). */
static void cr_present(const resource_type *t, json_t *obj)
{
    json_object_set_new(obj, "apiVersion", json_string(t->api_version));
}

/* Custom resources always carry their type's apiVersion in storage as
 * the storage version's. */
static void cr_prepare(const resource_type *t, json_t *obj)
{
    const cr_priv *p = t->priv;
    const char *stor = p ? p->stor : NULL;
    /* a webhook converts the whole object, later (the store's convert) */
    if (stor && strcmp(stor, t->version) && !p->conv) {
        char av[256];
        snprintf(av, sizeof av, "%s/%s", t->group, stor);
        json_object_set_new(obj, "apiVersion", json_string(av));
    }
}

static void cr_prepare_create(const resource_type *t, json_t *obj)
{
    cr_prepare(t, obj);
}

static void cr_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    cr_prepare(t, obj);
}

static printer_column column(const char *name, const char *type, const char *format,
                             const char *desc, int prio, const char *path)
{
    printer_column c = {xstrdup(name),
                        xstrdup(type),
                        xstrdup(format ? format : ""),
                        xstrdup(desc ? desc : ""),
                        prio,
                        path ? xstrdup(path) : NULL,
                        NULL};
    return c;
}

/* Builds the served type of one version of a CRD. */
static resource_type *cr_type(const json_t *crd, const json_t *ver, const char *stor,
                              bool terminating, crd_serving *serving, crd_conv *conv)
{
    json_t *spec = json_object_get(crd, "spec");
    json_t *names = ckube_json_get_path(crd, "status.acceptedNames");
    if (!json_string_value(json_object_get(names, "plural")))
        names = json_object_get(spec, "names");
    resource_type *t = xcalloc(1, sizeof *t);
    atomic_init(&t->refs, 1);
    t->group = jstrdup(json_object_get(spec, "group"));
    t->version = jstrdup(json_object_get(ver, "name"));
    t->resource = jstrdup(json_object_get(names, "plural"));
    t->kind = jstrdup(json_object_get(names, "kind"));
    t->singular = jstrdup(json_object_get(names, "singular"));
    t->list_kind = jstrdup(json_object_get(names, "listKind"));
    if (!t->group || !t->version || !t->resource || !t->kind) {
        resource_type_unref(t);
        return NULL;
    }
    if (!t->singular)
        t->singular = lower(t->kind);
    const char *scope = json_string_value(json_object_get(spec, "scope"));
    t->namespaced = !scope || strcmp(scope, "Cluster");
    t->short_names = strv_from_json(json_object_get(names, "shortNames"));
    t->categories = strv_from_json(json_object_get(names, "categories"));
    t->verbs = terminating ? VERB_ALL & ~VERB_CREATE : VERB_ALL;
    json_t *sub = json_object_get(ver, "subresources");
    t->status_subresource = json_object_get(sub, "status") != NULL;
    json_t *scale = json_object_get(sub, "scale");
    if (scale) {
        t->scale_subresource = true;
        t->scale_spec_replicas_path = jstrdup(json_object_get(scale, "specReplicasPath"));
        t->scale_status_replicas_path = jstrdup(json_object_get(scale, "statusReplicasPath"));
        t->scale_label_selector_path = jstrdup(json_object_get(scale, "labelSelectorPath"));
        if (!t->scale_spec_replicas_path)
            t->scale_spec_replicas_path = xstrdup(".spec.replicas");
        if (!t->scale_status_replicas_path)
            t->scale_status_replicas_path = xstrdup(".status.replicas");
    }
    t->tracks_generation = true;
    t->allow_unconditional_update = false;
    t->name_kind = CKUBE_NAME_DNS1123_SUBDOMAIN;
    json_t *schema = ckube_json_get_path(ver, "schema.openAPIV3Schema");
    if (json_is_object(schema))
        t->schema = json_deep_copy(schema);
    /* Field selectors: ".spec.color" is selected on as spec.color. */
    json_t *sel = json_object_get(ver, "selectableFields");
    if (json_array_size(sel)) {
        t->owned_selectable_fields = xcalloc(json_array_size(sel) + 1, sizeof(selectable_field));
        size_t n = 0, j;
        json_t *f;
        json_array_foreach(sel, j, f)
        {
            const char *p = json_string_value(json_object_get(f, "jsonPath"));
            if (!t->owned_selectable_fields || !p || *p != '.')
                continue;
            selectable_field *sf = &t->owned_selectable_fields[n];
            sf->field = xstrdup(p + 1);
            sf->path = xstrdup(p + 1);
            if (sf->field && sf->path) {
                n++;
            } else {
                free((char *)sf->field);
                free((char *)sf->path);
                sf->field = sf->path = NULL;
            }
        }
        t->selectable_fields = t->owned_selectable_fields;
    }
    /* Printer columns: Name, the CRD's columns, else Age. */
    json_t *cols = json_object_get(ver, "additionalPrinterColumns");
    size_t ncols = json_array_size(cols);
    t->columns = xcalloc(ncols + 2, sizeof *t->columns);
    t->columns[t->ncolumns++] = column(
        "Name", "string", "name", "Name must be unique within a namespace.", 0, ".metadata.name");
    size_t i;
    json_t *c;
    json_array_foreach(cols, i, c)
    {
        const char *n = json_string_value(json_object_get(c, "name"));
        const char *p = json_string_value(json_object_get(c, "jsonPath"));
        if (!n || !p)
            continue;
        t->columns[t->ncolumns++] =
            column(n, json_string_value(json_object_get(c, "type")) ?: "string",
                   json_string_value(json_object_get(c, "format")),
                   json_string_value(json_object_get(c, "description")),
                   (int)json_integer_value(json_object_get(c, "priority")), p);
    }
    if (!ncols)
        t->columns[t->ncolumns++] =
            column("Age", "date", "", "Time since creation.", 0, ".metadata.creationTimestamp");
    t->is_custom = true;
    t->crd_name = xstrdup(ckube_obj_name(crd));
    t->serving = crd_serving_ref(serving);
    t->storage_version = stor && !strcmp(stor, t->version);
    cr_priv *p = xcalloc(1, sizeof *p);
    p->stor = stor ? xstrdup(stor) : NULL;
    p->conv = crd_conv_ref(conv);
    t->priv = p;
    t->priv_free = cr_priv_free;
    t->prepare_create = cr_prepare_create;
    t->prepare_update = cr_prepare_update;
    if (conv)
        crd_conv_attach(t);
    else if (stor && strcmp(stor, t->version))
        t->present = cr_present;
    return t;
}

/* A deleting CRD: its name and the storage prefix of its objects. */
typedef struct active_crd {
    char *name;
    char *prefix;
    bool finalizing;
} active_crd;

/* The machinery's state: one per server (crd_attach). */
struct crd_state {
    registry *reg;
    store *store;
    cacher *cache; /* the store's */
    pthread_mutex_t mu;
    active_crd *active; /* deleting CRDs, under mu */
    size_t nactive;
    unsigned long retired_generation; /* atomic */
    crd_conv_metrics conv_metrics;    /* for every CRD's conversion webhook */
};

/* Takes every type a CRD registered out of the registry; returns them
 * (references, *n of them) for retire_types. */
static resource_type **unregister_crd(crd_state *crds, const char *crd_name, size_t *n)
{
    size_t all;
    resource_type **types = registry_list(crds->reg, &all);
    *n = 0;
    for (size_t i = 0; i < all; i++) {
        if (types[i]->crd_name && !strcmp(types[i]->crd_name, crd_name)) {
            registry_remove(crds->reg, types[i]->group, types[i]->version, types[i]->resource);
            types[(*n)++] = types[i];
        } else {
            resource_type_unref(types[i]);
        }
    }
    return types;
}

/* Releases the types unregister_crd took. Those not served from `now`
 * any more (NULL: the CRD serves nothing now) have their crd_serving
 * retired, and with it the watches on them and on the earlier types that
 * shared it. */
static void retire_types(crd_state *crds, resource_type **old, size_t n, const crd_serving *now)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        crd_serving *s = old[i]->serving;
        if (s && s != now && !atomic_exchange(&s->retired, 1))
            any = true;
        resource_type_unref(old[i]);
    }
    free(old);
    if (any)
        __atomic_add_fetch(&crds->retired_generation, 1, __ATOMIC_RELEASE);
}

unsigned long crd_retired_generation(crd_state *crds)
{
    return crds ? __atomic_load_n(&crds->retired_generation, __ATOMIC_ACQUIRE) : 0;
}

bool crd_type_retired(const resource_type *t)
{
    return t->serving && atomic_load(&t->serving->retired) != 0;
}

/* What a CRD serves its types from, as upstream compares it before it
 * rebuilds their storage: uid, spec and status.acceptedNames. Owned. */
static char *serving_of(const json_t *crd)
{
    json_t *v = json_pack("{s:O?,s:O?,s:O?}", "uid", ckube_json_get_path(crd, "metadata.uid"),
                          "spec", json_object_get(crd, "spec"), "acceptedNames",
                          ckube_json_get_path(crd, "status.acceptedNames"));
    char *out = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(v);
    return out;
}

static bool names_accepted(const json_t *crd)
{
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(crd, "status.conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        if (t && s && !strcmp(t, "NamesAccepted"))
            return !strcmp(s, "True");
    }
    return false;
}

static void register_versions(crd_state *crds, const json_t *crd, crd_serving *serving)
{
    const char *name = ckube_obj_name(crd);
    bool terminating = ckube_json_get_path(crd, "metadata.deletionTimestamp") != NULL;
    const char *stor = NULL;
    size_t i;
    json_t *ver;
    json_t *versions = ckube_json_get_path(crd, "spec.versions");
    json_array_foreach(versions, i, ver)
    {
        if (json_is_true(json_object_get(ver, "storage")))
            stor = json_string_value(json_object_get(ver, "name"));
    }
    crd_conv *conv = crd_conv_new(crd, stor, &crds->conv_metrics);
    json_array_foreach(versions, i, ver)
    {
        json_t *served = json_object_get(ver, "served");
        if (served && !json_is_true(served))
            continue;
        resource_type *t = cr_type(crd, ver, stor, terminating, serving, conv);
        if (!t)
            continue;
        if (!t->api_version && asprintf(&t->api_version, "%s/%s", t->group, t->version) < 0)
            t->api_version = NULL;
        if (registry_add(crds->reg, t) != 0) {
            CKUBE_WARN("CRD %s: %s/%s %s is already served; not registered", name, t->group,
                       t->version, t->resource);
            resource_type_unref(t);
        } else {
            CKUBE_V(2, "serving %s/%s %s for CRD %s", t->group, t->version, t->resource, name);
        }
    }
    crd_conv_unref(conv);
}

/* (Re-)registers a CRD's served versions after a change of the CRD. The
 * types are rebuilt each time (a deletion that starts, for one, refuses
 * creates from then on); the watches on the old ones end only when what
 * the CRD serves changed (retire_types). */
static void register_crd(crd_state *crds, const json_t *crd)
{
    const char *name = ckube_obj_name(crd);
    size_t nold;
    resource_type **old = unregister_crd(crds, name, &nold);
    crd_serving *now = NULL;
    if (names_accepted(crd)) {
        char *what = serving_of(crd);
        crd_serving *was = nold ? old[0]->serving : NULL;
        if (what && was && !strcmp(was->what, what)) {
            now = crd_serving_ref(was);
            free(what);
        } else {
            now = crd_serving_new(what);
        }
        register_versions(crds, crd, now);
    }
    retire_types(crds, old, nold, now);
    crd_serving_unref(now);
}

/* ---- deletion cleanup ---------------------------------------------------- */

static bool cleanup_begin(crd_state *crds, const char *name, const char *prefix)
{
    pthread_mutex_lock(&crds->mu);
    for (size_t i = 0; i < crds->nactive; i++) {
        if (!strcmp(crds->active[i].name, name)) {
            pthread_mutex_unlock(&crds->mu);
            return false;
        }
    }
    crds->active = xrealloc(crds->active, (crds->nactive + 1) * sizeof *crds->active);
    crds->active[crds->nactive++] = (active_crd){xstrdup(name), xstrdup(prefix), false};
    pthread_mutex_unlock(&crds->mu);
    return true;
}

static void cleanup_end(crd_state *crds, const char *name)
{
    pthread_mutex_lock(&crds->mu);
    for (size_t i = 0; i < crds->nactive; i++) {
        if (!strcmp(crds->active[i].name, name)) {
            free(crds->active[i].name);
            free(crds->active[i].prefix);
            crds->active[i] = crds->active[--crds->nactive];
            break;
        }
    }
    pthread_mutex_unlock(&crds->mu);
}

/* A write of the cleanup finalizer, through the generic store (so it
 * follows the rules every delete and update does, and is retried when
 * it loses a race). Runs on the storage thread: it starts from a cacher
 * listener and the store ends it where the storage op completes. */
typedef struct cleanup_write {
    store_write sw; /* first: the store's hooks get &cw->sw */
    crd_state *crds;
    resource_type *type; /* the CRD type (a reference), or &bare */
    /* A custom resource's type for its delete: its names only. Custom
     * resources have no delete hooks, and the object must go whether or
     * not a version of it is served. */
    resource_type bare;
    char *crd; /* the CRD concerned, for finalize_done */
} cleanup_write;

static void cleanup_write_free(cleanup_write *cw)
{
    if (cw->type != &cw->bare)
        resource_type_unref(cw->type);
    free(cw->bare.group);
    free(cw->bare.resource);
    free(cw->crd);
    free(cw);
}

/* Transform: the CRD without our finalizer (the store deletes it when
 * none is left). */
static json_t *drop_cleanup_finalizer(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)sw;
    (void)st;
    json_t *obj = json_deep_copy(old);
    json_t *meta = json_object_get(obj, "metadata");
    json_t *left = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(meta, "finalizers"), i, x)
    {
        if (!json_string_value(x) || strcmp(json_string_value(x), CRD_CLEANUP_FINALIZER))
            json_array_append(left, x);
    }
    json_object_set_new(meta, "finalizers", left);
    return obj;
}

static void finalize_done(store_write *sw, store_result *r)
{
    cleanup_write *cw = (cleanup_write *)sw;
    if (r->st && r->st->code != 404)
        CKUBE_ERROR("CRD %s: removing the cleanup finalizer: %s", cw->crd, r->st->message);
    cleanup_end(cw->crds, cw->crd);
    ckube_status_free(r->st);
    json_decref(r->obj);
    free(r->value);
    cleanup_write_free(cw);
}

/* An internal write names no resourceVersion: a lost race is retried. */
static const char *no_precondition(store_write *sw, const json_t *obj)
{
    (void)sw;
    (void)obj;
    return NULL;
}

static const store_hooks finalize_hooks = {
    .transform = drop_cleanup_finalizer, .precondition_rv = no_precondition, .done = finalize_done};

/* Removes our finalizer from the CRD `name`. */
static void finalize_crd(crd_state *crds, const char *name)
{
    resource_type *t =
        registry_lookup(crds->reg, "apiextensions.k8s.io", "v1", "customresourcedefinitions");
    if (!t) { /* the server installs apiextensions before it starts */
        CKUBE_ERROR("CRD %s: removing the cleanup finalizer: the CRD type is not served", name);
        cleanup_end(crds, name);
        return;
    }
    cleanup_write *cw = xcalloc(1, sizeof *cw);
    cw->crd = xstrdup(name);
    cw->crds = crds;
    cw->type = t;
    cw->sw = (store_write){.store = crds->store,
                           .type = t,
                           .verb = STORE_UPDATE,
                           .hooks = &finalize_hooks,
                           .name = cw->crd};
    store_write_start(&cw->sw);
}

static void delete_done(store_write *sw, store_result *r)
{
    cleanup_write *cw = (cleanup_write *)sw;
    if (r->st && r->st->code != 404)
        CKUBE_ERROR("deleting %s: %s", cw->sw.key, r->st->message);
    ckube_status_free(r->st);
    json_decref(r->obj);
    free(r->value);
    cleanup_write_free(cw);
}

static const store_hooks delete_hooks = {.done = delete_done};

/* Deletes one object of a deleting CRD as the REST delete does: one
 * with finalizers gets a deletionTimestamp and stays until they are gone
 * (then the update path deletes it). */
static void delete_object(crd_state *crds, const char *key, const char *group, const char *plural)
{
    cleanup_write *cw = xcalloc(1, sizeof *cw);
    cw->bare.group = xstrdup(group);
    cw->bare.resource = xstrdup(plural);
    cw->crds = crds;
    cw->type = &cw->bare;
    cw->sw = (store_write){
        .store = crds->store, .type = &cw->bare, .verb = STORE_DELETE, .hooks = &delete_hooks};
    snprintf(cw->sw.key, sizeof cw->sw.key, "%s", key);
    store_write_start(&cw->sw);
}

/* Starts removing the finalizer of the deleting CRD `name`, unless that
 * has started already. */
static void finalize_once(crd_state *crds, const char *name)
{
    pthread_mutex_lock(&crds->mu);
    bool go = false;
    for (size_t i = 0; i < crds->nactive; i++) {
        if (!strcmp(crds->active[i].name, name) && !crds->active[i].finalizing)
            go = crds->active[i].finalizing = true;
    }
    pthread_mutex_unlock(&crds->mu);
    if (go)
        finalize_crd(crds, name);
}

/* Once a deleting CRD has no objects left, its finalizer goes. */
static void maybe_finalize(crd_state *crds, const char *name, const char *prefix)
{
    if (cacher_count(crds->cache, prefix) == 0)
        finalize_once(crds, name);
}

/* Why the objects under a deleting CRD's key prefix are not its to
 * delete, or NULL when they are. As upstream's finalizer: a CRD whose
 * resource is a built-in one's (its names were never accepted, and the
 * objects there are the built-in type's), or one never established
 * (it never served anything, so nothing there is its). */
static const char *instances_not_ours(crd_state *crds, const json_t *crd, const char *group,
                                      const char *plural)
{
    size_t n;
    resource_type **types = registry_list(crds->reg, &n);
    bool builtin = false;
    for (size_t i = 0; i < n; i++)
        builtin |= !types[i]->is_custom && !strcmp(types[i]->group, group) &&
                   !strcmp(types[i]->resource, plural);
    registry_list_free(types, n);
    if (builtin)
        return "instances overlap with built-in resources in storage";
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(crd, "status.conditions"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *status = json_string_value(json_object_get(c, "status"));
        if (type && status && !strcmp(type, "Established") && !strcmp(status, "True"))
            return NULL;
    }
    return "resource was never established";
}

/* Deletes every object of a deleting CRD; the CRD itself is finalized
 * when the last one is gone (maybe_finalize, from the object listener).
 * Runs on the storage thread (a cacher listener); only queues writes. */
static void cleanup_crd(crd_state *crds, const json_t *crd)
{
    const char *name = ckube_obj_name(crd);
    const char *group = json_string_value(ckube_json_get_path(crd, "spec.group"));
    const char *plural = json_string_value(ckube_json_get_path(crd, "spec.names.plural"));
    if (!name || !group || !plural)
        return;
    char prefix[512];
    snprintf(prefix, sizeof prefix, "/registry/%s/%s/", group, plural);
    if (!cleanup_begin(crds, name, prefix))
        return;
    const char *why = instances_not_ours(crds, crd, group, plural);
    if (why) {
        CKUBE_INFO("CRD %s is being deleted: %s, so no objects are removed", name, why);
        finalize_once(crds, name);
        return;
    }
    CKUBE_INFO("CRD %s is being deleted: removing its objects", name);
    size_t n, more;
    int64_t rev;
    cobj **objs = cacher_list(crds->cache, prefix, NULL, NULL, 0, &n, &rev, &more);
    for (size_t i = 0; i < n; i++)
        delete_object(crds, objs[i]->key, group, plural);
    cacher_objs_free(objs, n);
    maybe_finalize(crds, name, prefix);
}

/* Every applied change: a deletion under a deleting CRD may finish it. */
static void on_any_event(void *arg, cevent_type type, const cobj *o)
{
    crd_state *crds = arg;
    if (type != CEV_DELETED)
        return;
    char name[512] = "", prefix[512] = "";
    pthread_mutex_lock(&crds->mu);
    for (size_t i = 0; i < crds->nactive; i++) {
        if (!strncmp(o->key, crds->active[i].prefix, strlen(crds->active[i].prefix))) {
            snprintf(name, sizeof name, "%s", crds->active[i].name);
            snprintf(prefix, sizeof prefix, "%s", crds->active[i].prefix);
        }
    }
    pthread_mutex_unlock(&crds->mu);
    if (*name)
        maybe_finalize(crds, name, prefix);
}

/* ---- following CRDs ------------------------------------------------------ */

static void on_crd_event(void *arg, cevent_type type, const cobj *o)
{
    crd_state *crds = arg;
    json_t *crd = cobj_decode(o);
    if (!crd)
        return;
    if (type == CEV_DELETED) {
        size_t nold;
        resource_type **old = unregister_crd(crds, ckube_obj_name(crd), &nold);
        retire_types(crds, old, nold, NULL);
        CKUBE_INFO("CRD %s deleted: its endpoints and watches are gone", ckube_obj_name(crd));
    } else {
        register_crd(crds, crd);
        if (ckube_json_get_path(crd, "metadata.deletionTimestamp"))
            cleanup_crd(crds, crd);
    }
    /* The group's APIServices follow what its CRDs serve, as
     * kube-apiserver's crdregistration controller keeps them. */
    apiregistration_sync_crd_group(crds->reg, crds->store,
                                   json_string_value(ckube_json_get_path(crd, "spec.group")));
    json_decref(crd);
}

crd_state *crd_attach(registry *reg, store *s, ckube_metrics_registry *metrics)
{
    crd_state *crds = xcalloc(1, sizeof *crds);
    if (metrics)
        crd_conv_metrics_init(&crds->conv_metrics, metrics);
    crds->reg = reg;
    crds->store = s;
    crds->cache = store_cache(s);
    pthread_mutex_init(&crds->mu, NULL);
    cacher_add_listener(crds->cache, CRD_KEY_PREFIX, on_crd_event, crds);
    cacher_add_change_listener(crds->cache, "/registry/", on_any_event, crds);
    return crds;
}

void crd_detach(crd_state *crds)
{
    if (!crds)
        return;
    for (size_t i = 0; i < crds->nactive; i++) {
        free(crds->active[i].name);
        free(crds->active[i].prefix);
    }
    free(crds->active);
    pthread_mutex_destroy(&crds->mu);
    free(crds);
}
