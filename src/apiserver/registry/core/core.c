/* core/v1 (the legacy group, "" in URLs under /api/v1): namespaces,
 * configmaps, secrets, serviceaccounts, services, endpoints, pods, nodes
 * and events, with their strategies, printer columns and selectable
 * fields, and core_install, which serves them. */
#include "apiserver/registry/core/core.h"

#include <inttypes.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

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
        return builtin_str_or_none(
            json_string_value(ckube_json_get_path(obj, "spec.externalName")));
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
    return builtin_str_or_none(buf);
}

static json_t *cell_svc_selector(const json_t *obj)
{
    return builtin_selector_map(obj, "spec.selector");
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
    return builtin_str_or_none(buf);
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
    return builtin_str_or_none(buf);
}

static json_t *cell_node_address(const json_t *obj, const char *want)
{
    size_t i;
    json_t *a;
    json_array_foreach(ckube_json_get_path(obj, "status.addresses"), i, a)
    {
        const char *t = json_string_value(json_object_get(a, "type"));
        if (t && !strcmp(t, want))
            return builtin_str_or_none(json_string_value(json_object_get(a, "address")));
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

static json_t *cell_event_first_seen(const json_t *obj)
{
    static const char *const paths[] = {"firstTimestamp", "deprecatedFirstTimestamp", "eventTime",
                                        "metadata.creationTimestamp", NULL};
    return builtin_event_age(obj, paths);
}

static json_t *cell_event_object(const json_t *obj)
{
    return builtin_event_object(obj, "involvedObject");
}

static json_t *cell_event_source(const json_t *obj)
{
    const char *c = json_string_value(ckube_json_get_path(obj, "source.component"));
    const char *h = json_string_value(ckube_json_get_path(obj, "source.host"));
    if (!c)
        c = json_string_value(json_object_get(obj, "reportingComponent"));
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", c ? c : "", h ? ", " : "", h ? h : "");
    return builtin_str_or_none(buf);
}

static json_t *cell_event_count(const json_t *obj)
{
    json_t *c = json_object_get(obj, "count");
    if (!c)
        c = ckube_json_get_path(obj, "series.count");
    return json_integer(c ? json_integer_value(c) : 1);
}

/* Every namespace carries kubernetes.io/metadata.name=<name>. */
static void ns_name_label(json_t *obj)
{
    const char *name = ckube_obj_name(obj);
    if (!name)
        return;
    json_t *labels = ckube_json_object_ensure(ckube_json_object_ensure(obj, "metadata"), "labels");
    json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
}

static void ns_prepare_create(const resource_type *t, json_t *obj)
{
    ns_name_label(obj);
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    builtin_set_if_absent(spec, "finalizers", json_pack("[s]", "kubernetes"));
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

static void pod_prepare_create(const resource_type *t, json_t *obj)
{
    json_object_set_new(obj, "status",
                        json_pack("{s:s,s:s}", "phase", "Pending", "qosClass", "BestEffort"));
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    builtin_default_pod_spec(spec);
    /* SetDefaults_Pod, not PodSpec: templates do not show it */
    builtin_set_if_absent(spec, "enableServiceLinks", json_true());
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

static void svc_prepare_create(const resource_type *t, json_t *obj)
{
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        type = "ClusterIP";
        json_object_set_new(spec, "type", json_string(type));
    }
    builtin_set_if_absent(spec, "sessionAffinity", json_string("None"));
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
        builtin_set_if_absent(p, "protocol", json_string("TCP"));
        if (!json_object_get(p, "targetPort") && json_object_get(p, "port"))
            json_object_set(p, "targetPort", json_object_get(p, "port"));
    }
    builtin_set_if_absent(obj, "status", json_pack("{s:{}}", "loadBalancer"));
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
            char *out = xmalloc(cap);
            if (b64_ntop((const unsigned char *)s, len, out, cap) >= 0)
                json_object_set_new(data, k, json_string(out));
            free(out);
        }
    }
    json_object_del(obj, "stringData");
    builtin_set_if_absent(obj, "type", json_string("Opaque"));
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
    {"Last Seen", "string", "", NULL, builtin_event_last_seen, 0, "Time since last seen."},
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

static const selectable_field fields_secret[] = {{"type", "type"}, {NULL, NULL}};

static const selectable_field fields_namespace[] = {{"status.phase", "status.phase"}, {NULL, NULL}};

static const selectable_field fields_node[] = {{"spec.unschedulable", "spec.unschedulable"},
                                               {NULL, NULL}};

static const builtin types[] = {
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
     ns_prepare_delete,
     false,
     false},
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
     NULL,
     false,
     false},
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
     NULL,
     false,
     false},
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
     NULL,
     false,
     false},
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
     NULL,
     true,
     false},
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
     NULL,
     true,
     false},
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
     NULL,
     false,
     false},
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
     NULL,
     false,
     false},
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
     NULL,
     true,
     false},
};

int core_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}
