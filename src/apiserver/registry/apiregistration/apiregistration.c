/* apiregistration.k8s.io/v1: apiservices, with kube-aggregator's v1
 * defaulting (a service's port), its strategy (status only through
 * /status, a local APIService marked Available on create, no generation,
 * a PUT names its resourceVersion), its validation in its words and at its
 * field paths, the SERVICE and AVAILABLE printer columns, and
 * kube-apiserver's priority table of the group-versions it serves itself
 * (local.c makes their APIServices). */
#include "apiserver/registry/apiregistration/apiregistration.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

/* ---- small helpers ---------------------------------------------------- */

/* A field path into buf, as admissionregistration's: a function, not
 * snprintf, so GCC's truncation check stays quiet about nested paths. */
static void fpath(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fpath(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

static const char *str_or_empty(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* A member Go decodes into a nil pointer: missing or null. */
static const json_t *member(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* How many bytes a base64 text (schema-checked already) decodes to. */
static size_t base64_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (*s != '=' && *s != '\n' && *s != '\r')
            n++;
    return n * 6 / 8;
}

/* One Invalid cause per message of `msgs` (the "; "-joined list the
 * ckube_is_* checks return; taken). */
static void invalid_each(ckube_status *st, const char *field, const char *value, char *msgs)
{
    for (char *m = msgs; m && *m;) {
        char *end = strstr(m, "; ");
        if (end)
            *end = 0;
        ckube_field_invalid(st, field, value, m);
        m = end ? end + 2 : NULL;
    }
    free(msgs);
}

static void invalid_bool(ckube_status *st, const char *field, bool value, const char *detail)
{
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field, "Invalid value: %s: %s",
                           value ? "true" : "false", detail);
}

/* ---- defaulting and the strategy -------------------------------------- */

/* SetDefaults_ServiceReference: port 443. A null service is no service
 * (Go's nil pointer, which it never writes). */
static void default_spec(json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec))
        return;
    json_t *svc = json_object_get(spec, "service");
    if (json_is_null(svc))
        json_object_del(spec, "service");
    else if (json_is_object(svc) && !member(svc, "port"))
        json_object_set_new(svc, "port", json_integer(443));
}

/* PrepareForCreate: no status but the server's; a local APIService (no
 * service) is available at once. */
static void apiservice_prepare_create(const resource_type *t, json_t *obj)
{
    (void)t;
    default_spec(obj);
    json_t *status = json_object();
    if (!member(json_object_get(obj, "spec"), "service")) {
        char now[32];
        ckube_now_rfc3339(now, sizeof now);
        json_object_set_new(status, "conditions",
                            json_pack("[{s:s,s:s,s:s,s:s,s:s}]", "type", "Available", "status",
                                      "True", "lastTransitionTime", now, "reason", "Local",
                                      "message", "Local APIServices are always available"));
    }
    json_object_set_new(obj, "status", status);
}

/* PrepareForUpdate: the store keeps the stored status on a write to the
 * main resource and the stored spec on one to /status already. */
static void apiservice_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    (void)t;
    (void)old;
    default_spec(obj);
}

/* ---- validation --------------------------------------------------------- */

/* The name rule beyond a path segment's (name_kind): VERSION.GROUP. */
static void validate_name(const json_t *obj, const char *required, ckube_status *st)
{
    static const char *const fields[][2] = {{"generateName", "metadata.generateName"},
                                            {"name", "metadata.name"}};
    const json_t *meta = json_object_get(obj, "metadata");
    for (size_t i = 0; i < 2; i++) {
        const char *v = str_or_empty(json_object_get(meta, fields[i][0]));
        if (!*v || strcmp(v, required) == 0)
            continue;
        char *bad = ckube_is_path_segment_name(v, i == 0);
        if (bad) { /* reported by the metadata's validation */
            free(bad);
            continue;
        }
        char *q = ckube_go_quote(required);
        char *detail = xasprintf("must be `spec.version+\".\"+spec.group`: %s", q ? q : "\"\"");
        ckube_field_invalid(st, fields[i][1], v, detail);
        free(detail);
        free(q);
    }
}

/* ValidateAPIService, less the metadata (the handlers' part). */
static void validate_spec(const json_t *obj, ckube_status *st)
{
    const json_t *spec = json_object_get(obj, "spec");
    const char *group = str_or_empty(json_object_get(spec, "group"));
    const char *version = str_or_empty(json_object_get(spec, "version"));
    char *required = xasprintf("%s.%s", version, group);
    validate_name(obj, required, st);
    free(required);

    if (!*group && strcmp(version, "v1"))
        ckube_field_required(st, "spec.group",
                             "only v1 may have an empty group and it better be legacy kube");
    if (*group)
        invalid_each(st, "spec.group", group, ckube_is_dns1123_subdomain(group));
    invalid_each(st, "spec.version", version, ckube_is_dns1035_label(version));

    json_int_t gp = json_integer_value(json_object_get(spec, "groupPriorityMinimum"));
    if (gp <= 0 || gp > 20000)
        ckube_field_invalid_int(st, "spec.groupPriorityMinimum", gp,
                                "must be positive and less than 20000");
    json_int_t vp = json_integer_value(json_object_get(spec, "versionPriority"));
    if (vp <= 0 || vp > 1000)
        ckube_field_invalid_int(st, "spec.versionPriority", vp,
                                "must be positive and less than 1000");

    size_t ca = base64_len(str_or_empty(json_object_get(spec, "caBundle")));
    bool insecure = json_is_true(json_object_get(spec, "insecureSkipTLSVerify"));
    const json_t *svc = member(spec, "service");
    if (!svc) {
        if (ca) {
            char bytes[32];
            snprintf(bytes, sizeof bytes, "%zu bytes", ca);
            ckube_field_invalid(st, "spec.caBundle", bytes,
                                "local APIServices may not have a caBundle");
        }
        if (insecure)
            invalid_bool(st, "spec.insecureSkipTLSVerify", true,
                         "local APIServices may not have insecureSkipTLSVerify");
        return;
    }
    if (!*str_or_empty(json_object_get(svc, "namespace")))
        ckube_field_required(st, "spec.service.namespace", NULL);
    if (!*str_or_empty(json_object_get(svc, "name")))
        ckube_field_required(st, "spec.service.name", NULL);
    json_int_t port = json_integer_value(json_object_get(svc, "port"));
    if (port < 1 || port > 65535)
        ckube_field_invalid_int(st, "spec.service.port", port,
                                "port is not valid: must be between 1 and 65535, inclusive");
    if (insecure && ca)
        invalid_bool(st, "spec.insecureSkipTLSVerify", true,
                     "may not be true if caBundle is present");
}

/* ValidateAPIServiceStatus: each condition's status is one of three. */
static void validate_status(const json_t *obj, ckube_status *st)
{
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(obj, "status.conditions"), i, c)
    {
        const char *s = str_or_empty(json_object_get(c, "status"));
        if (!strcmp(s, "True") || !strcmp(s, "False") || !strcmp(s, "Unknown"))
            continue;
        char field[64];
        fpath(field, sizeof field, "status.conditions[%zu].status", i);
        char *q = ckube_go_quote(s);
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, field,
                               "Unsupported value: %s: supported values: \"True\", \"False\", "
                               "\"Unknown\"",
                               q ? q : "\"\"");
        free(q);
    }
}

/* The main resource's rules and the status's: a write to the main
 * resource carries the stored status, one to /status the stored spec. */
static void apiservice_validate(const resource_type *t, const json_t *obj, const json_t *old,
                                ckube_status *st)
{
    (void)t;
    (void)old;
    validate_spec(obj, st);
    validate_status(obj, st);
}

/* ---- printing ------------------------------------------------------------- */

/* "Local", or the service's namespace/name. */
static json_t *cell_service(const json_t *obj)
{
    const json_t *svc = member(json_object_get(obj, "spec"), "service");
    if (!svc)
        return json_string("Local");
    char *s = xasprintf("%s/%s", str_or_empty(json_object_get(svc, "namespace")),
                        str_or_empty(json_object_get(svc, "name")));
    json_t *out = json_string(s);
    free(s);
    return out;
}

/* The Available condition's status, with its reason when not True;
 * Unknown without one. */
static json_t *cell_available(const json_t *obj)
{
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(obj, "status.conditions"), i, c)
    {
        if (strcmp(str_or_empty(json_object_get(c, "type")), "Available"))
            continue;
        const char *status = str_or_empty(json_object_get(c, "status"));
        const char *reason = str_or_empty(json_object_get(c, "reason"));
        if (!strcmp(status, "True") || !*reason)
            return json_string(status);
        char *s = xasprintf("%s (%s)", status, reason);
        json_t *out = json_string(s);
        free(s);
        return out;
    }
    return json_string("Unknown");
}

static const col_def cols_apiservice[] = {
    NAME_COL,
    {"Service", "string", "", NULL, cell_service, 0,
     "The Service the API is served by (namespace/name), or Local when this server serves it."},
    {"Available", "string", "", NULL, cell_available, 0,
     "Whether the API can be reached: the Available condition, with its reason when not True."},
    AGE_COL,
    END_COL};

/* Cluster-scoped, in the api-extensions category, with /status; no
 * generation and no create on update, as upstream's strategy, whose
 * AllowUnconditionalUpdate is false (the main resource and /status): a
 * PUT names the resourceVersion it replaces. */
static const builtin types[] = {
    {.group = APIREGISTRATION_GROUP,
     .version = "v1",
     .resource = "apiservices",
     .kind = "APIService",
     .singular = "apiservice",
     .categories = {"api-extensions"},
     .status_sub = true,
     .name_kind = CKUBE_NAME_PATH_SEGMENT,
     .patch_meta = patchmeta_apiservice,
     .cols = cols_apiservice,
     .prepare_create = apiservice_prepare_create,
     .prepare_update = apiservice_prepare_update,
     .validate = apiservice_validate,
     .conditional_update = true},
};

int apiregistration_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}

/* ---- kube-apiserver's priorities ------------------------------------------ */

bool apiregistration_builtin_priority(const char *group, const char *version, int *group_priority,
                                      int *version_priority)
{
    /* kube-apiserver's apiVersionPriorities: the generic control plane's
     * defaults with its own groups merged in (upstream's data). */
    static const struct {
        const char *group, *version;
        int group_priority, version_priority;
    } table[] = {
        {"", "v1", 18000, 1},
        {"apps", "v1", 17800, 15},
        {"events.k8s.io", "v1", 17750, 15},
        {"events.k8s.io", "v1beta1", 17750, 5},
        {"authentication.k8s.io", "v1", 17700, 15},
        {"authentication.k8s.io", "v1beta1", 17700, 9},
        {"authentication.k8s.io", "v1alpha1", 17700, 1},
        {"authorization.k8s.io", "v1", 17600, 15},
        {"autoscaling", "v1", 17500, 15},
        {"autoscaling", "v2", 17500, 30},
        {"autoscaling", "v2beta1", 17500, 9},
        {"autoscaling", "v2beta2", 17500, 1},
        {"batch", "v1", 17400, 15},
        {"batch", "v1beta1", 17400, 9},
        {"batch", "v2alpha1", 17400, 9},
        {"certificates.k8s.io", "v1", 17300, 15},
        {"certificates.k8s.io", "v1alpha1", 17300, 1},
        {"networking.k8s.io", "v1", 17200, 15},
        {"networking.k8s.io", "v1beta1", 17200, 9},
        {"policy", "v1", 17100, 15},
        {"policy", "v1beta1", 17100, 9},
        {"rbac.authorization.k8s.io", "v1", 17000, 15},
        {"storage.k8s.io", "v1", 16800, 15},
        {"storage.k8s.io", "v1beta1", 16800, 9},
        {"storage.k8s.io", "v1alpha1", 16800, 1},
        {"apiextensions.k8s.io", "v1", 16700, 15},
        {"admissionregistration.k8s.io", "v1", 16700, 15},
        {"admissionregistration.k8s.io", "v1beta1", 16700, 12},
        {"admissionregistration.k8s.io", "v1alpha1", 16700, 9},
        {"scheduling.k8s.io", "v1", 16600, 15},
        {"coordination.k8s.io", "v1", 16500, 15},
        {"node.k8s.io", "v1", 16300, 15},
        {"node.k8s.io", "v1beta1", 16300, 9},
        {"node.k8s.io", "v1alpha1", 16300, 1},
        {"discovery.k8s.io", "v1", 16200, 15},
        {"discovery.k8s.io", "v1beta1", 16200, 12},
        {"resource.k8s.io", "v1beta2", 16200, 15},
        {"resource.k8s.io", "v1beta1", 16200, 9},
        {"resource.k8s.io", "v1alpha3", 16200, 1},
        {"flowcontrol.apiserver.k8s.io", "v1", 16100, 21},
        {"flowcontrol.apiserver.k8s.io", "v1beta3", 16100, 18},
        {"flowcontrol.apiserver.k8s.io", "v1beta2", 16100, 15},
        {"flowcontrol.apiserver.k8s.io", "v1beta1", 16100, 12},
        {"flowcontrol.apiserver.k8s.io", "v1alpha1", 16100, 9},
        {"internal.apiserver.k8s.io", "v1alpha1", 16000, 9},
        {"storagemigration.k8s.io", "v1alpha1", 15800, 9},
    };
    if (!group || !version)
        return false;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        if (!strcmp(table[i].group, group) && !strcmp(table[i].version, version)) {
            *group_priority = table[i].group_priority;
            *version_priority = table[i].version_priority;
            return true;
        }
    }
    return false;
}
