/* apps/v1: deployments and replicasets, with their strategies
 * (workload defaults, selector validation), printer columns and
 * selectable fields, and apps_install, which serves them. */
#include "apiserver/registry/apps/apps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"

static json_t *cell_label_selector(const json_t *obj)
{
    return builtin_selector_map(obj, "spec.selector.matchLabels");
}

static json_t *cell_deploy_ready(const json_t *obj)
{
    char buf[64];
    json_t *spec = ckube_json_get_path(obj, "spec.replicas");
    snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT,
             json_integer_value(ckube_json_get_path(obj, "status.readyReplicas")),
             spec ? json_integer_value(spec) : 1);
    return json_string(buf);
}

static json_t *cell_updated(const json_t *obj)
{
    return builtin_int_path(obj, "status.updatedReplicas");
}

static json_t *cell_available(const json_t *obj)
{
    return builtin_int_path(obj, "status.availableReplicas");
}

static json_t *cell_desired(const json_t *obj)
{
    json_t *v = ckube_json_get_path(obj, "spec.replicas");
    return json_integer(v ? json_integer_value(v) : 1);
}

static json_t *cell_current(const json_t *obj)
{
    return builtin_int_path(obj, "status.replicas");
}

static json_t *cell_ready_replicas(const json_t *obj)
{
    return builtin_int_path(obj, "status.readyReplicas");
}

static json_t *join_containers(const json_t *obj, const char *field)
{
    char buf[1024] = "";
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(obj, "spec.template.spec.containers"), i, c)
    {
        const char *v = json_string_value(json_object_get(c, field));
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? "," : "", v ? v : "");
    }
    return builtin_str_or_none(buf);
}

static json_t *cell_containers(const json_t *obj)
{
    return join_containers(obj, "name");
}

static json_t *cell_images(const json_t *obj)
{
    return join_containers(obj, "image");
}

static void workload_defaults(json_t *obj, bool deployment)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    builtin_set_if_absent(spec, "replicas", json_integer(1));
    if (deployment) {
        json_t *strategy = ckube_json_object_ensure(spec, "strategy");
        if (!json_string_value(json_object_get(strategy, "type")))
            json_object_set_new(strategy, "type", json_string("RollingUpdate"));
        if (!strcmp(json_string_value(json_object_get(strategy, "type")), "RollingUpdate")) {
            json_t *ru = ckube_json_object_ensure(strategy, "rollingUpdate");
            builtin_set_if_absent(ru, "maxUnavailable", json_string("25%"));
            builtin_set_if_absent(ru, "maxSurge", json_string("25%"));
        }
        builtin_set_if_absent(spec, "revisionHistoryLimit", json_integer(10));
        builtin_set_if_absent(spec, "progressDeadlineSeconds", json_integer(600));
    }
    builtin_default_pod_template(spec);
}

/* Upstream resets the status on create to the empty struct, which an
 * object always shows: `status: {}`. */
static void deploy_prepare_create(const resource_type *t, json_t *obj)
{
    workload_defaults(obj, true);
    json_object_set_new(obj, "status", json_object());
}

static void deploy_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    workload_defaults(obj, true);
}

static void rs_prepare_create(const resource_type *t, json_t *obj)
{
    workload_defaults(obj, false);
    json_object_set_new(obj, "status", json_object());
}

static void rs_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    workload_defaults(obj, false);
}

/* Deployments and ReplicaSets: a selector that selects the template. */
static void workload_validate(const resource_type *t, const json_t *obj, const json_t *old,
                              ckube_status *st)
{
    json_t *sel = ckube_json_get_path(obj, "spec.selector");
    if (!json_is_object(sel)) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.selector", "Required value");
        return;
    }
    json_t *ml = json_object_get(sel, "matchLabels");
    json_t *me = json_object_get(sel, "matchExpressions");
    if (!json_object_size(ml) && !json_array_size(me)) {
        ckube_field_invalid(st, "spec.selector", "null",
                            "empty selector is invalid for deployment");
    }
    json_t *labels = ckube_json_get_path(obj, "spec.template.metadata.labels");
    const char *k;
    json_t *v;
    json_object_foreach(ml, k, v)
    {
        json_t *have = json_object_get(labels, k);
        if (!have || !json_equal(have, v)) {
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "spec.template.metadata.labels",
                                   "Invalid value: map[string]string{...}: `selector` does not "
                                   "match template `labels`");
            break;
        }
    }
    json_t *r = ckube_json_get_path(obj, "spec.replicas");
    if (r && (!json_is_integer(r) || json_integer_value(r) < 0))
        ckube_field_invalid_int(st, "spec.replicas", json_integer_value(r),
                                "must be greater than or equal to 0");
    if (!ckube_json_get_path(obj, "spec.template.spec.containers"))
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.template.spec.containers",
                               "Required value");
    if (old && !json_equal(ckube_json_get_path(old, "spec.selector"), sel))
        ckube_field_invalid(st, "spec.selector", "{...}", "field is immutable");
}

static const col_def cols_deployment[] = {
    NAME_COL,
    {"Ready", "string", "", NULL, cell_deploy_ready, 0, "Ready of desired replicas."},
    {"Up-to-date", "integer", "", NULL, cell_updated, 0, "Replicas with the latest template."},
    {"Available", "integer", "", NULL, cell_available, 0, "Available replicas."},
    AGE_COL,
    {"Containers", "string", "", NULL, cell_containers, 1, "Container names."},
    {"Images", "string", "", NULL, cell_images, 1, "Container images."},
    {"Selector", "string", "", NULL, cell_label_selector, 1, "The label selector."},
    END_COL};

static const col_def cols_replicaset[] = {
    NAME_COL,
    {"Desired", "integer", "", NULL, cell_desired, 0, "Desired replicas."},
    {"Current", "integer", "", NULL, cell_current, 0, "Current replicas."},
    {"Ready", "integer", "", NULL, cell_ready_replicas, 0, "Ready replicas."},
    AGE_COL,
    {"Containers", "string", "", NULL, cell_containers, 1, "Container names."},
    {"Images", "string", "", NULL, cell_images, 1, "Container images."},
    {"Selector", "string", "", NULL, cell_label_selector, 1, "The label selector."},
    END_COL};

static const selectable_field fields_replicaset[] = {{"status.replicas", "status.replicas"},
                                                     {NULL, NULL}};

static const builtin types[] = {
    {"apps",
     "v1",
     "deployments",
     "Deployment",
     "deployment",
     true,
     {"deploy"},
     {"all"},
     true,
     true,
     true,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_deployment,
     cols_deployment,
     NULL,
     deploy_prepare_create,
     deploy_prepare_update,
     workload_validate,
     NULL,
     NULL,
     false,
     false},
    {"apps",
     "v1",
     "replicasets",
     "ReplicaSet",
     "replicaset",
     true,
     {"rs"},
     {"all"},
     true,
     true,
     true,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_replicaset,
     cols_replicaset,
     fields_replicaset,
     rs_prepare_create,
     rs_prepare_update,
     workload_validate,
     NULL,
     NULL,
     false,
     false},
};

int apps_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}
