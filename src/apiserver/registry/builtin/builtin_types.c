/* The built-in resource types: discovery names, strategies, printer
 * columns and selectable fields. Everything type-specific about built-ins
 * lives here; the REST handler is generic. */
#include <inttypes.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/registry/builtin/builtin_types.h"
#include "apiserver/registry/rest/registry.h"
#include "common/text.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "apiserver/registry/definitions/builtin_schemas.h"
#include "ckube/json.h"
#include "ckube/validation.h"

/* ---- cell helpers ------------------------------------------------------ */

static json_t *str_or_none(const char *s)
{
    return json_string(s && *s ? s : "<none>");
}

static json_t *cell_count_data(const json_t *obj)
{
    return json_integer((json_int_t)(json_object_size(json_object_get(obj, "data")) +
                                     json_object_size(json_object_get(obj, "binaryData"))));
}

static json_t *cell_secret_data(const json_t *obj)
{
    return json_integer((json_int_t)json_object_size(json_object_get(obj, "data")));
}

static json_t *cell_sa_secrets(const json_t *obj)
{
    return json_integer((json_int_t)json_array_size(json_object_get(obj, "secrets")));
}

static json_t *cell_svc_external_ip(const json_t *obj)
{
    const char *type = json_string_value(ckube_json_get_path(obj, "spec.type"));
    json_t *ext = ckube_json_get_path(obj, "spec.externalIPs");
    json_t *ingress = ckube_json_get_path(obj, "status.loadBalancer.ingress");
    char buf[512] = "";
    size_t i;
    json_t *v;
    json_array_foreach(ingress, i, v)
    {
        const char *ip = json_string_value(json_object_get(v, "ip"));
        if (!ip)
            ip = json_string_value(json_object_get(v, "hostname"));
        if (ip)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? "," : "", ip);
    }
    json_array_foreach(ext, i, v)
    {
        if (json_is_string(v))
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? "," : "",
                     json_string_value(v));
    }
    if (*buf)
        return json_string(buf);
    if (type && !strcmp(type, "ExternalName"))
        return str_or_none(json_string_value(ckube_json_get_path(obj, "spec.externalName")));
    if (type && !strcmp(type, "LoadBalancer"))
        return json_string("<pending>");
    return json_string("<none>");
}

static json_t *cell_svc_ports(const json_t *obj)
{
    char buf[512] = "";
    size_t i;
    json_t *p;
    json_array_foreach(ckube_json_get_path(obj, "spec.ports"), i, p)
    {
        const char *proto = json_string_value(json_object_get(p, "protocol"));
        json_int_t port = json_integer_value(json_object_get(p, "port"));
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        char one[64];
        if (np)
            snprintf(one, sizeof one, "%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT "/%s", port,
                     np, proto ? proto : "TCP");
        else
            snprintf(one, sizeof one, "%" JSON_INTEGER_FORMAT "/%s", port, proto ? proto : "TCP");
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? "," : "", one);
    }
    return str_or_none(buf);
}

static json_t *cell_selector_map(const json_t *obj, const char *path)
{
    char buf[1024] = "";
    const char *k;
    json_t *v;
    json_object_foreach(ckube_json_get_path(obj, path), k, v)
    {
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", *buf ? "," : "", k,
                 json_string_value(v) ? json_string_value(v) : "");
    }
    return str_or_none(buf);
}

static json_t *cell_svc_selector(const json_t *obj)
{
    return cell_selector_map(obj, "spec.selector");
}

static json_t *cell_label_selector(const json_t *obj)
{
    return cell_selector_map(obj, "spec.selector.matchLabels");
}

static json_t *cell_endpoints(const json_t *obj)
{
    char buf[512] = "";
    int shown = 0, total = 0;
    size_t i, j, k;
    json_t *sub, *addr, *port;
    json_array_foreach(json_object_get(obj, "subsets"), i, sub)
    {
        json_array_foreach(json_object_get(sub, "addresses"), j, addr)
        {
            json_t *ports = json_object_get(sub, "ports");
            if (!json_array_size(ports)) {
                total++;
                if (shown < 3) {
                    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? "," : "",
                             json_string_value(json_object_get(addr, "ip")));
                    shown++;
                }
            }
            json_array_foreach(ports, k, port)
            {
                total++;
                if (shown < 3) {
                    snprintf(buf + strlen(buf), sizeof buf - strlen(buf),
                             "%s%s:%" JSON_INTEGER_FORMAT, *buf ? "," : "",
                             json_string_value(json_object_get(addr, "ip")),
                             json_integer_value(json_object_get(port, "port")));
                    shown++;
                }
            }
        }
    }
    if (total > shown)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), " + %d more...", total - shown);
    return str_or_none(buf);
}

static json_t *cell_pod_ready(const json_t *obj)
{
    size_t total = json_array_size(ckube_json_get_path(obj, "spec.containers"));
    size_t ready = 0, i;
    json_t *cs;
    json_array_foreach(ckube_json_get_path(obj, "status.containerStatuses"), i, cs)
    {
        if (json_is_true(json_object_get(cs, "ready")))
            ready++;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%zu/%zu", ready, total);
    return json_string(buf);
}

static json_t *cell_pod_status(const json_t *obj)
{
    if (ckube_json_get_path(obj, "metadata.deletionTimestamp"))
        return json_string("Terminating");
    const char *reason = json_string_value(ckube_json_get_path(obj, "status.reason"));
    if (reason)
        return json_string(reason);
    const char *phase = json_string_value(ckube_json_get_path(obj, "status.phase"));
    return json_string(phase ? phase : "Pending");
}

static json_t *cell_pod_restarts(const json_t *obj)
{
    json_int_t n = 0;
    size_t i;
    json_t *cs;
    json_array_foreach(ckube_json_get_path(obj, "status.containerStatuses"), i, cs) n +=
        json_integer_value(json_object_get(cs, "restartCount"));
    return json_integer(n);
}

static json_t *cell_node_status(const json_t *obj)
{
    const char *ready = "Unknown";
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(obj, "status.conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        const char *s = json_string_value(json_object_get(c, "status"));
        if (t && s && !strcmp(t, "Ready"))
            ready = !strcmp(s, "True") ? "Ready" : !strcmp(s, "False") ? "NotReady" : "Unknown";
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%s%s", ready,
             json_is_true(ckube_json_get_path(obj, "spec.unschedulable")) ? ",SchedulingDisabled"
                                                                          : "");
    return json_string(buf);
}

static json_t *cell_node_roles(const json_t *obj)
{
    char buf[256] = "";
    const char *k;
    json_t *v;
    json_object_foreach(ckube_json_get_path(obj, "metadata.labels"), k, v)
    {
        const char *role = NULL;
        if (!strncmp(k, "node-role.kubernetes.io/", 24))
            role = k + 24;
        else if (!strcmp(k, "kubernetes.io/role"))
            role = json_string_value(v);
        if (role && *role)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? "," : "", role);
    }
    return str_or_none(buf);
}

static json_t *cell_node_address(const json_t *obj, const char *want)
{
    size_t i;
    json_t *a;
    json_array_foreach(ckube_json_get_path(obj, "status.addresses"), i, a)
    {
        const char *t = json_string_value(json_object_get(a, "type"));
        if (t && !strcmp(t, want))
            return str_or_none(json_string_value(json_object_get(a, "address")));
    }
    return json_string("<none>");
}

static json_t *cell_node_internal_ip(const json_t *obj)
{
    return cell_node_address(obj, "InternalIP");
}

static json_t *cell_node_external_ip(const json_t *obj)
{
    return cell_node_address(obj, "ExternalIP");
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

static json_t *cell_int_path(const json_t *obj, const char *path)
{
    json_t *v = ckube_json_get_path(obj, path);
    return json_integer(json_is_integer(v) ? json_integer_value(v) : 0);
}

static json_t *cell_updated(const json_t *obj)
{
    return cell_int_path(obj, "status.updatedReplicas");
}
static json_t *cell_available(const json_t *obj)
{
    return cell_int_path(obj, "status.availableReplicas");
}
static json_t *cell_desired(const json_t *obj)
{
    json_t *v = ckube_json_get_path(obj, "spec.replicas");
    return json_integer(v ? json_integer_value(v) : 1);
}
static json_t *cell_current(const json_t *obj)
{
    return cell_int_path(obj, "status.replicas");
}
static json_t *cell_ready_replicas(const json_t *obj)
{
    return cell_int_path(obj, "status.readyReplicas");
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
    return str_or_none(buf);
}
static json_t *cell_containers(const json_t *obj)
{
    return join_containers(obj, "name");
}
static json_t *cell_images(const json_t *obj)
{
    return join_containers(obj, "image");
}

/* Event columns: "Last Seen" is a relative time, "Object" kind/name. */
static json_t *event_age(const json_t *obj, const char *const *paths)
{
    for (; *paths; paths++) {
        const char *ts = json_string_value(ckube_json_get_path(obj, *paths));
        int64_t t = ckube_parse_rfc3339(ts);
        if (t > 0) {
            char buf[32];
            ckube__human_duration((int64_t)time(NULL) - t, buf, sizeof buf);
            return json_string(buf);
        }
    }
    return json_string("<unknown>");
}

static json_t *cell_event_last_seen(const json_t *obj)
{
    static const char *const paths[] = {
        "lastTimestamp", "series.lastObservedTime",    "deprecatedLastTimestamp",
        "eventTime",     "metadata.creationTimestamp", NULL};
    return event_age(obj, paths);
}

static json_t *cell_event_first_seen(const json_t *obj)
{
    static const char *const paths[] = {"firstTimestamp", "deprecatedFirstTimestamp", "eventTime",
                                        "metadata.creationTimestamp", NULL};
    return event_age(obj, paths);
}

static json_t *event_object(const json_t *obj, const char *ref)
{
    json_t *io = json_object_get(obj, ref);
    const char *kind = json_string_value(json_object_get(io, "kind"));
    const char *name = json_string_value(json_object_get(io, "name"));
    char buf[512];
    char lower[128] = "";
    for (size_t i = 0; kind && kind[i] && i < sizeof lower - 1; i++)
        lower[i] = (char)((kind[i] >= 'A' && kind[i] <= 'Z') ? kind[i] + 32 : kind[i]);
    snprintf(buf, sizeof buf, "%s/%s", lower, name ? name : "");
    return json_string(buf);
}

static json_t *cell_event_object(const json_t *obj)
{
    return event_object(obj, "involvedObject");
}

static json_t *cell_events_v1_object(const json_t *obj)
{
    return event_object(obj, "regarding");
}

static json_t *cell_event_source(const json_t *obj)
{
    const char *c = json_string_value(ckube_json_get_path(obj, "source.component"));
    const char *h = json_string_value(ckube_json_get_path(obj, "source.host"));
    if (!c)
        c = json_string_value(json_object_get(obj, "reportingComponent"));
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", c ? c : "", h ? ", " : "", h ? h : "");
    return str_or_none(buf);
}

static json_t *cell_event_count(const json_t *obj)
{
    json_t *c = json_object_get(obj, "count");
    if (!c)
        c = ckube_json_get_path(obj, "series.count");
    return json_integer(c ? json_integer_value(c) : 1);
}

/* ---- strategies ------------------------------------------------------- */

/* Every namespace carries kubernetes.io/metadata.name=<name>. */
static void ns_name_label(json_t *obj)
{
    const char *name = ckube_obj_name(obj);
    if (!name)
        return;
    json_t *labels = ckube_json_object_ensure(ckube_json_object_ensure(obj, "metadata"), "labels");
    json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
}

/* Sets obj[key] = value (taken) unless obj has that key already: a
 * default. */
static void set_if_absent(json_t *obj, const char *key, json_t *value)
{
    if (json_object_get(obj, key))
        json_decref(value);
    else
        json_object_set_new(obj, key, value);
}

static void ns_prepare_create(const resource_type *t, json_t *obj)
{
    ns_name_label(obj);
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    set_if_absent(spec, "finalizers", json_pack("[s]", "kubernetes"));
    json_object_set_new(obj, "status", json_pack("{s:s}", "phase", "Active"));
}

static void ns_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    /* Only /finalize changes spec.finalizers; only /status changes status. */
    ns_name_label(obj);
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    json_t *oldfin = ckube_json_get_path(old, "spec.finalizers");
    if (oldfin)
        json_object_set_new(spec, "finalizers", json_deep_copy(oldfin));
    else
        json_object_del(spec, "finalizers");
}

static bool ns_pending_finalizers(const json_t *obj)
{
    return json_array_size(ckube_json_get_path(obj, "spec.finalizers")) > 0;
}

static void ns_prepare_delete(const resource_type *t, json_t *obj)
{
    (void)t;
    json_t *st = ckube_json_object_ensure(obj, "status");
    json_object_set_new(st, "phase", json_string("Terminating"));
}

/* Whether an image reference names the tag "latest", as the image name
 * parser upstream's defaulting uses reads it: the tag follows the last
 * ':' after the last '/' ("localhost:5000/app" has none), none means
 * "latest", and a digest means no tag. An empty or missing image parses
 * to no tag. */
static bool image_is_latest(const char *img)
{
    if (!img || !*img || strchr(img, '@'))
        return false;
    const char *slash = strrchr(img, '/');
    const char *colon = strrchr(slash ? slash : img, ':');
    return !colon || !strcmp(colon + 1, "latest");
}

/* SetDefaults_Container and SetDefaults_ContainerPort for each entry of
 * a containers or initContainers list. `resources` is a struct in the Go
 * types, so an object always shows it, empty or not. */
static void default_containers(json_t *list)
{
    size_t i, j;
    json_t *c, *port;
    json_array_foreach(list, i, c)
    {
        if (!json_is_object(c))
            continue;
        const char *img = json_string_value(json_object_get(c, "image"));
        set_if_absent(c, "imagePullPolicy",
                      json_string(image_is_latest(img) ? "Always" : "IfNotPresent"));
        set_if_absent(c, "terminationMessagePath", json_string("/dev/termination-log"));
        set_if_absent(c, "terminationMessagePolicy", json_string("File"));
        set_if_absent(c, "resources", json_object());
        json_array_foreach(json_object_get(c, "ports"), j, port)
        {
            if (json_is_object(port))
                set_if_absent(port, "protocol", json_string("TCP"));
        }
    }
}

/* SetDefaults_PodSpec: what a pod and every pod template get. */
static void default_pod_spec(json_t *spec)
{
    set_if_absent(spec, "restartPolicy", json_string("Always"));
    set_if_absent(spec, "dnsPolicy", json_string("ClusterFirst"));
    set_if_absent(spec, "schedulerName", json_string("default-scheduler"));
    set_if_absent(spec, "terminationGracePeriodSeconds", json_integer(30));
    set_if_absent(spec, "securityContext", json_object());
    default_containers(json_object_get(spec, "containers"));
    default_containers(json_object_get(spec, "initContainers"));
}

static void pod_prepare_create(const resource_type *t, json_t *obj)
{
    json_object_set_new(obj, "status",
                        json_pack("{s:s,s:s}", "phase", "Pending", "qosClass", "BestEffort"));
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    default_pod_spec(spec);
    /* SetDefaults_Pod, not PodSpec: templates do not show it */
    set_if_absent(spec, "enableServiceLinks", json_true());
}

static void pod_validate(const resource_type *t, const json_t *obj, const json_t *old,
                         ckube_status *st)
{
    json_t *cs = ckube_json_get_path(obj, "spec.containers");
    if (!json_array_size(cs)) {
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, "spec.containers", "Required value");
        return;
    }
    size_t i;
    json_t *c;
    json_array_foreach(cs, i, c)
    {
        char field[64];
        const char *name = json_string_value(json_object_get(c, "name"));
        if (!name || !*name) {
            snprintf(field, sizeof field, "spec.containers[%zu].name", i);
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field, "Required value");
        } else {
            char *msg = ckube_is_dns1123_label(name);
            if (msg) {
                snprintf(field, sizeof field, "spec.containers[%zu].name", i);
                ckube_field_invalid(st, field, name, msg);
                free(msg);
            }
        }
        if (!json_string_value(json_object_get(c, "image")) && !old) {
            snprintf(field, sizeof field, "spec.containers[%zu].image", i);
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field, "Required value");
        }
    }
}

static void default_pod_template(json_t *spec)
{
    json_t *tspec = ckube_json_get_path(spec, "template.spec");
    if (json_is_object(tspec))
        default_pod_spec(tspec);
}

static void workload_defaults(json_t *obj, bool deployment)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    set_if_absent(spec, "replicas", json_integer(1));
    if (deployment) {
        json_t *strategy = ckube_json_object_ensure(spec, "strategy");
        if (!json_string_value(json_object_get(strategy, "type")))
            json_object_set_new(strategy, "type", json_string("RollingUpdate"));
        if (!strcmp(json_string_value(json_object_get(strategy, "type")), "RollingUpdate")) {
            json_t *ru = ckube_json_object_ensure(strategy, "rollingUpdate");
            set_if_absent(ru, "maxUnavailable", json_string("25%"));
            set_if_absent(ru, "maxSurge", json_string("25%"));
        }
        set_if_absent(spec, "revisionHistoryLimit", json_integer(10));
        set_if_absent(spec, "progressDeadlineSeconds", json_integer(600));
    }
    default_pod_template(spec);
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

static void svc_prepare_create(const resource_type *t, json_t *obj)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        type = "ClusterIP";
        json_object_set_new(spec, "type", json_string(type));
    }
    set_if_absent(spec, "sessionAffinity", json_string("None"));
    if (strcmp(type, "ExternalName") && !json_object_get(spec, "clusterIP")) {
        /* No real service network: hand out a stable-looking virtual IP
         * from 10.96.0.0/16 so tools that print it have one. */
        char ip[32], r[4];
        ckube_random_suffix(r, 3);
        snprintf(ip, sizeof ip, "10.96.%u.%u", (unsigned char)r[0] % 255,
                 1 + (unsigned char)r[1] % 253);
        json_object_set_new(spec, "clusterIP", json_string(ip));
        json_object_set_new(spec, "clusterIPs", json_pack("[s]", ip));
    }
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(spec, "ports"), i, p)
    {
        if (!json_is_object(p))
            continue;
        set_if_absent(p, "protocol", json_string("TCP"));
        if (!json_object_get(p, "targetPort") && json_object_get(p, "port"))
            json_object_set(p, "targetPort", json_object_get(p, "port"));
    }
    set_if_absent(obj, "status", json_pack("{s:{}}", "loadBalancer"));
}

static void svc_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    json_t *oldip = ckube_json_get_path(old, "spec.clusterIP");
    if (oldip && !json_object_get(spec, "clusterIP")) {
        json_object_set(spec, "clusterIP", oldip);
        json_t *ips = ckube_json_get_path(old, "spec.clusterIPs");
        if (ips)
            json_object_set(spec, "clusterIPs", ips);
    }
}

/* Secrets: stringData is write-only sugar merged into data. */
static void secret_fold_string_data(json_t *obj)
{
    json_t *sd = json_object_get(obj, "stringData");
    if (json_is_object(sd)) {
        json_t *data = ckube_json_object_ensure(obj, "data");
        const char *k;
        json_t *v;
        json_object_foreach(sd, k, v)
        {
            const char *s = json_string_value(v);
            if (!s)
                continue;
            size_t len = strlen(s);
            size_t cap = 4 * ((len + 2) / 3) + 1;
            char *out = malloc(cap);
            if (!out)
                continue;
            if (b64_ntop((const unsigned char *)s, len, out, cap) >= 0)
                json_object_set_new(data, k, json_string(out));
            free(out);
        }
    }
    json_object_del(obj, "stringData");
    set_if_absent(obj, "type", json_string("Opaque"));
}

static void secret_prepare_create(const resource_type *t, json_t *obj)
{
    secret_fold_string_data(obj);
}

static void secret_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    secret_fold_string_data(obj);
}

/* Keys of data and binaryData: upstream's IsConfigMapKey. */
static void validate_config_keys(const json_t *obj, const char *field, ckube_status *st)
{
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(obj, field), k, v)
    {
        size_t n = strlen(k);
        bool ok = n > 0 && n <= 253 &&
                  strspn(k, "-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                            "QRSTUVWXYZ0123456789") == n;
        const char *detail = "a valid config key must consist of alphanumeric characters, '-', "
                             "'_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex "
                             "used for validation is '[-._a-zA-Z0-9]+')";
        if (ok && (!strcmp(k, ".") || !strcmp(k, "..")))
            ok = false, detail = "must not be '.' or '..'";
        else if (ok && !strncmp(k, "..", 2))
            ok = false, detail = "must not start with '..'";
        if (n > 253)
            detail = "must be no more than 253 characters";
        if (!ok) {
            char path[512];
            snprintf(path, sizeof path, "%s[%s]", field, k);
            ckube_field_invalid(st, path, k, detail);
        }
    }
}

/* ConfigMaps and Secrets with immutable: true keep their data. */
static void immutable_data_validate(const resource_type *t, const json_t *obj, const json_t *old,
                                    ckube_status *st)
{
    validate_config_keys(obj, "data", st);
    validate_config_keys(obj, "binaryData", st);
    if (!old || !json_is_true(json_object_get(old, "immutable")))
        return;
    if (!json_equal(json_object_get(old, "data") ? json_object_get(old, "data") : json_null(),
                    json_object_get(obj, "data") ? json_object_get(obj, "data") : json_null()) ||
        !json_equal(
            json_object_get(old, "binaryData") ? json_object_get(old, "binaryData") : json_null(),
            json_object_get(obj, "binaryData") ? json_object_get(obj, "binaryData") : json_null()))
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_FORBIDDEN, "data",
                               "Forbidden: field is immutable when `immutable` is set");
    if (!json_is_true(json_object_get(obj, "immutable")))
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_FORBIDDEN, "immutable",
                               "Forbidden: field is immutable when `immutable` is set");
}

static void lease_validate(const resource_type *t, const json_t *obj, const json_t *old,
                           ckube_status *st)
{
    json_t *d = ckube_json_get_path(obj, "spec.leaseDurationSeconds");
    if (d && (!json_is_integer(d) || json_integer_value(d) <= 0))
        ckube_field_invalid_int(st, "spec.leaseDurationSeconds", json_integer_value(d),
                                "must be greater than 0");
}

/* ---- the table -------------------------------------------------------- */

typedef struct col_def {
    const char *name, *type, *format, *path;
    json_t *(*fn)(const json_t *);
    int priority;
    const char *description;
} col_def;

#define NAME_COL                                                                                   \
    {                                                                                              \
        "Name", "string", "name", ".metadata.name", NULL, 0,                                       \
            "Name must be unique within a namespace."                                              \
    }
#define AGE_COL                                                                                    \
    {                                                                                              \
        "Age", "string", "", ".metadata.creationTimestamp", NULL, 0,                               \
            "Time since the object was created."                                                   \
    }
#define END_COL                                                                                    \
    {                                                                                              \
        NULL, NULL, NULL, NULL, NULL, 0, NULL                                                      \
    }

static const col_def cols_namespace[] = {
    NAME_COL,
    {"Status", "string", "", ".status.phase", NULL, 0, "The phase of the namespace."},
    AGE_COL,
    END_COL};
static const col_def cols_configmap[] = {
    NAME_COL,
    {"Data", "string", "", NULL, cell_count_data, 0, "Number of data keys."},
    AGE_COL,
    END_COL};
static const col_def cols_secret[] = {
    NAME_COL,
    {"Type", "string", "", ".type", NULL, 0, "The type of the secret."},
    {"Data", "string", "", NULL, cell_secret_data, 0, "Number of data keys."},
    AGE_COL,
    END_COL};
static const col_def cols_sa[] = {
    NAME_COL,
    {"Secrets", "string", "", NULL, cell_sa_secrets, 0, "Number of secrets."},
    AGE_COL,
    END_COL};
static const col_def cols_service[] = {
    NAME_COL,
    {"Type", "string", "", ".spec.type", NULL, 0, "The type of the service."},
    {"Cluster-IP", "string", "", ".spec.clusterIP", NULL, 0, "The virtual IP of the service."},
    {"External-IP", "string", "", NULL, cell_svc_external_ip, 0, "External addresses."},
    {"Port(s)", "string", "", NULL, cell_svc_ports, 0, "Ports the service exposes."},
    AGE_COL,
    {"Selector", "string", "", NULL, cell_svc_selector, 1, "Pods the service routes to."},
    END_COL};
static const col_def cols_endpoints[] = {
    NAME_COL,
    {"Endpoints", "string", "", NULL, cell_endpoints, 0, "Endpoint addresses."},
    AGE_COL,
    END_COL};
static const col_def cols_pod[] = {
    NAME_COL,
    {"Ready", "string", "", NULL, cell_pod_ready, 0, "Ready containers of all containers."},
    {"Status", "string", "", NULL, cell_pod_status, 0, "The pod's status."},
    {"Restarts", "string", "", NULL, cell_pod_restarts, 0, "Container restarts."},
    AGE_COL,
    {"IP", "string", "", ".status.podIP", NULL, 1, "The pod's IP address."},
    {"Node", "string", "", ".spec.nodeName", NULL, 1, "The node the pod runs on."},
    END_COL};
static const col_def cols_node[] = {
    NAME_COL,
    {"Status", "string", "", NULL, cell_node_status, 0, "The node's readiness."},
    {"Roles", "string", "", NULL, cell_node_roles, 0, "The node's roles."},
    AGE_COL,
    {"Version", "string", "", ".status.nodeInfo.kubeletVersion", NULL, 0, "Kubelet version."},
    {"Internal-IP", "string", "", NULL, cell_node_internal_ip, 1, "Internal address."},
    {"External-IP", "string", "", NULL, cell_node_external_ip, 1, "External address."},
    {"OS-Image", "string", "", ".status.nodeInfo.osImage", NULL, 1, "Operating system."},
    {"Kernel-Version", "string", "", ".status.nodeInfo.kernelVersion", NULL, 1, "Kernel."},
    END_COL};
static const col_def cols_event[] = {
    {"Last Seen", "string", "", NULL, cell_event_last_seen, 0, "Time since last seen."},
    {"Type", "string", "", ".type", NULL, 0, "Normal or Warning."},
    {"Reason", "string", "", ".reason", NULL, 0, "Why the event happened."},
    {"Object", "string", "", NULL, cell_event_object, 0, "The object the event is about."},
    {"Subobject", "string", "", ".involvedObject.fieldPath", NULL, 1, "Part of the object."},
    {"Source", "string", "", NULL, cell_event_source, 1, "Who reported it."},
    {"Message", "string", "", ".message", NULL, 0, "A human readable description."},
    {"First Seen", "string", "", NULL, cell_event_first_seen, 1, "Time since first seen."},
    {"Count", "string", "", NULL, cell_event_count, 1, "How often it happened."},
    {"Name", "string", "name", ".metadata.name", NULL, 1, "The event's name."},
    END_COL};
static const col_def cols_events_v1[] = {
    {"Last Seen", "string", "", NULL, cell_event_last_seen, 0, "Time since last seen."},
    {"Type", "string", "", ".type", NULL, 0, "Normal or Warning."},
    {"Reason", "string", "", ".reason", NULL, 0, "Why the event happened."},
    {"Object", "string", "", NULL, cell_events_v1_object, 0, "The object the event is about."},
    {"Message", "string", "", ".note", NULL, 0, "A human readable description."},
    {"Name", "string", "name", ".metadata.name", NULL, 1, "The event's name."},
    END_COL};
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
static const col_def cols_lease[] = {
    NAME_COL,
    {"Holder", "string", "", ".spec.holderIdentity", NULL, 0, "The current holder."},
    AGE_COL,
    END_COL};

static const selectable_field fields_pod[] = {
    {"spec.nodeName", "spec.nodeName"},
    {"spec.restartPolicy", "spec.restartPolicy"},
    {"spec.schedulerName", "spec.schedulerName"},
    {"spec.serviceAccountName", "spec.serviceAccountName"},
    {"spec.hostNetwork", "spec.hostNetwork"},
    {"status.phase", "status.phase"},
    {"status.podIP", "status.podIP"},
    {"status.nominatedNodeName", "status.nominatedNodeName"},
    {NULL, NULL}};
static const selectable_field fields_event[] = {
    {"involvedObject.kind", "involvedObject.kind"},
    {"involvedObject.namespace", "involvedObject.namespace"},
    {"involvedObject.name", "involvedObject.name"},
    {"involvedObject.uid", "involvedObject.uid"},
    {"involvedObject.apiVersion", "involvedObject.apiVersion"},
    {"involvedObject.resourceVersion", "involvedObject.resourceVersion"},
    {"involvedObject.fieldPath", "involvedObject.fieldPath"},
    {"reason", "reason"},
    {"reportingComponent", "reportingComponent"},
    {"source", "source.component"},
    {"type", "type"},
    {NULL, NULL}};
static const selectable_field fields_events_v1[] = {{"regarding.kind", "regarding.kind"},
                                                    {"regarding.namespace", "regarding.namespace"},
                                                    {"regarding.name", "regarding.name"},
                                                    {"regarding.uid", "regarding.uid"},
                                                    {"reason", "reason"},
                                                    {"reportingController", "reportingController"},
                                                    {"type", "type"},
                                                    {NULL, NULL}};
static const selectable_field fields_secret[] = {{"type", "type"}, {NULL, NULL}};
static const selectable_field fields_namespace[] = {{"status.phase", "status.phase"}, {NULL, NULL}};
static const selectable_field fields_node[] = {{"spec.unschedulable", "spec.unschedulable"},
                                               {NULL, NULL}};
static const selectable_field fields_replicaset[] = {{"status.replicas", "status.replicas"},
                                                     {NULL, NULL}};

typedef struct builtin {
    const char *group, *version, *resource, *kind, *singular;
    bool namespaced;
    const char *short_names[4];
    const char *categories[3];
    bool status_sub, scale_sub, generation;
    int name_kind;
    const ckube_patch_meta_entry *patch_meta;
    const col_def *cols;
    const selectable_field *fields;
    void (*prepare_create)(const resource_type *, json_t *);
    void (*prepare_update)(const resource_type *, json_t *, const json_t *);
    void (*validate)(const resource_type *, const json_t *, const json_t *, ckube_status *);
    bool (*pending_finalizers)(const json_t *);
    void (*prepare_delete)(const resource_type *, json_t *);
} builtin;

static const builtin builtins[] = {
    {"",
     "v1",
     "namespaces",
     "Namespace",
     "namespace",
     false,
     {"ns"},
     {NULL},
     true,
     false,
     false,
     CKUBE_NAME_DNS1123_LABEL,
     patchmeta_namespace,
     cols_namespace,
     fields_namespace,
     ns_prepare_create,
     ns_prepare_update,
     NULL,
     ns_pending_finalizers,
     ns_prepare_delete},
    {"",
     "v1",
     "configmaps",
     "ConfigMap",
     "configmap",
     true,
     {"cm"},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_configmap,
     cols_configmap,
     NULL,
     NULL,
     NULL,
     immutable_data_validate,
     NULL,
     NULL},
    {"",
     "v1",
     "secrets",
     "Secret",
     "secret",
     true,
     {NULL},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_secret,
     cols_secret,
     fields_secret,
     secret_prepare_create,
     secret_prepare_update,
     immutable_data_validate,
     NULL,
     NULL},
    {"",
     "v1",
     "serviceaccounts",
     "ServiceAccount",
     "serviceaccount",
     true,
     {"sa"},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_serviceaccount,
     cols_sa,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL},
    {"",
     "v1",
     "services",
     "Service",
     "service",
     true,
     {"svc"},
     {"all"},
     true,
     false,
     false,
     CKUBE_NAME_DNS1035_LABEL,
     patchmeta_service,
     cols_service,
     NULL,
     svc_prepare_create,
     svc_prepare_update,
     NULL,
     NULL,
     NULL},
    {"",
     "v1",
     "endpoints",
     "Endpoints",
     "endpoints",
     true,
     {"ep"},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_endpoints,
     cols_endpoints,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL},
    {"",
     "v1",
     "pods",
     "Pod",
     "pod",
     true,
     {"po"},
     {"all"},
     true,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_pod,
     cols_pod,
     fields_pod,
     pod_prepare_create,
     NULL,
     pod_validate,
     NULL,
     NULL},
    {"",
     "v1",
     "nodes",
     "Node",
     "node",
     false,
     {"no"},
     {NULL},
     true,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_node,
     cols_node,
     fields_node,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL},
    {"",
     "v1",
     "events",
     "Event",
     "event",
     true,
     {"ev"},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_event,
     cols_event,
     fields_event,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL},
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
     NULL},
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
     NULL},
    {"coordination.k8s.io",
     "v1",
     "leases",
     "Lease",
     "lease",
     true,
     {NULL},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_lease,
     cols_lease,
     NULL,
     NULL,
     NULL,
     lease_validate,
     NULL,
     NULL},
    {"events.k8s.io",
     "v1",
     "events",
     "Event",
     "event",
     true,
     {"ev"},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_events_v1_event,
     cols_events_v1,
     fields_events_v1,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL},
};

static char **strv_dup(const char *const *v, size_t max)
{
    size_t n = 0;
    while (n < max && v[n])
        n++;
    if (!n)
        return NULL;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = strdup(v[i]);
    return out;
}

static char *sdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

int builtin_types_register(registry *reg)
{
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++) {
        const builtin *b = &builtins[i];
        resource_type *t = calloc(1, sizeof *t);
        if (!t)
            return -1;
        atomic_init(&t->refs, 1);
        t->group = strdup(b->group);
        t->version = strdup(b->version);
        t->resource = strdup(b->resource);
        t->kind = strdup(b->kind);
        t->singular = strdup(b->singular);
        t->namespaced = b->namespaced;
        t->short_names = strv_dup(b->short_names, 4);
        t->categories = strv_dup(b->categories, 3);
        t->verbs = VERB_ALL;
        t->status_subresource = b->status_sub;
        t->scale_subresource = b->scale_sub;
        if (b->scale_sub) {
            t->scale_spec_replicas_path = strdup(".spec.replicas");
            t->scale_status_replicas_path = strdup(".status.replicas");
            t->scale_label_selector_path = strdup(".status.selector");
        }
        t->tracks_generation = b->generation;
        t->allow_unconditional_update = true;
        t->patch_meta = b->patch_meta;
        t->schema = builtin_schema(b->group, b->version, b->kind);
        t->selectable_fields = b->fields;
        t->prepare_create = b->prepare_create;
        t->prepare_update = b->prepare_update;
        t->validate = b->validate;
        t->pending_finalizers = b->pending_finalizers;
        t->prepare_delete = b->prepare_delete;
        t->name_kind = b->name_kind;
        size_t nc = 0;
        while (b->cols && b->cols[nc].name)
            nc++;
        t->columns = calloc(nc ? nc : 1, sizeof *t->columns);
        for (size_t c = 0; c < nc; c++) {
            const col_def *d = &b->cols[c];
            t->columns[c].name = strdup(d->name);
            t->columns[c].type = strdup(d->type);
            t->columns[c].format = strdup(d->format);
            t->columns[c].description = strdup(d->description);
            t->columns[c].priority = d->priority;
            t->columns[c].json_path = sdup(d->path);
            t->columns[c].fn = d->fn;
        }
        t->ncolumns = nc;
        if (registry_add(reg, t) != 0) {
            resource_type_unref(t);
            return -1;
        }
    }
    return 0;
}
