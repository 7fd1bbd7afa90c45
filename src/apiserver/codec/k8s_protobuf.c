/* Kubernetes protobuf request bodies -> JSON (see k8s_protobuf.h).
 *
 * The envelope and the object are unpacked with protobuf-c using the
 * descriptors generated from proto/k8s_*.proto; the object is then turned
 * into JSON generically by walking its ProtobufCMessageDescriptor:
 *  - a field's proto name is its JSON name; `inline_*` fields are embedded Go
 *    structs whose members merge into the enclosing object; repeated
 *    key/value `...Entry` messages are maps (JSON objects);
 *  - Time, MicroTime, Quantity, IntOrString, RawExtension and FieldsV1 have
 *    their own JSON forms (see convert_special);
 *  - bytes become base64, int64 stays a JSON integer.
 *
 * Presence. Go's protobuf marshaller always writes non-pointer scalars and
 * structs, zero or not, while the JSON encoder omits zero scalars
 * (omitempty). So a scalar that is zero on the wire is dropped unless the
 * Go field is a pointer (or lacks omitempty): those are listed in
 * keep_zero_fields. Message fields are the other way round: a present
 * message is kept even when empty (`emptyDir: {}` matters: Go pointers),
 * except the non-pointer structs listed in omit_empty_fields and any
 * `metadata`, `spec` or `status`, which are dropped when empty. A zero
 * Time/MicroTime (an empty message: Go's zero time, JSON null) is always
 * dropped; this is how `creationTimestamp` of a new object disappears. */
#include "apiserver/codec/k8s_protobuf.h"

#include <inttypes.h>
#include <resolv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#ifdef CKUBE_HAVE_PROTO

#include "proto/k8s_apps.pb-c.h"
#include "proto/k8s_autoscaling.pb-c.h"
#include "proto/k8s_authentication.pb-c.h"
#include "proto/k8s_authorization.pb-c.h"
#include "proto/k8s_coordination.pb-c.h"
#include "proto/k8s_core.pb-c.h"
#include "proto/k8s_events.pb-c.h"
#include "proto/k8s_meta.pb-c.h"
#include "proto/k8s_rbac.pb-c.h"
#include "common/json_cost.h"
#include "common/json_parse.h"
#include "common/text.h"
#include "common/utf8.h"
#include "common/xalloc.h"

static const unsigned char k8s_magic[4] = {'k', '8', 's', 0};

/* ---- supported types ---- */

struct pb_type {
    const char *api_version; /* NULL: any group version (DeleteOptions) */
    const char *kind;
    const ProtobufCMessageDescriptor *desc;
};

static const struct pb_type pb_types[] = {
    {"v1", "ConfigMap", &ckube__k8s__core__config_map__descriptor},
    {"v1", "Secret", &ckube__k8s__core__secret__descriptor},
    {"v1", "Namespace", &ckube__k8s__core__namespace__descriptor},
    {"v1", "ServiceAccount", &ckube__k8s__core__service_account__descriptor},
    {"v1", "Service", &ckube__k8s__core__service__descriptor},
    {"v1", "Endpoints", &ckube__k8s__core__endpoints__descriptor},
    {"v1", "Event", &ckube__k8s__core__event__descriptor},
    {"v1", "Node", &ckube__k8s__core__node__descriptor},
    {"v1", "Pod", &ckube__k8s__core__pod__descriptor},
    {"v1", "Binding", &ckube__k8s__core__binding__descriptor},
    {"apps/v1", "Deployment", &ckube__k8s__apps__deployment__descriptor},
    {"apps/v1", "ReplicaSet", &ckube__k8s__apps__replica_set__descriptor},
    {"coordination.k8s.io/v1", "Lease", &ckube__k8s__coordination__lease__descriptor},
    {"events.k8s.io/v1", "Event", &ckube__k8s__events__event__descriptor},
    {"autoscaling/v1", "Scale", &ckube__k8s__autoscaling__scale__descriptor},
    {"rbac.authorization.k8s.io/v1", "Role", &ckube__k8s__rbac__role__descriptor},
    {"rbac.authorization.k8s.io/v1", "ClusterRole", &ckube__k8s__rbac__cluster_role__descriptor},
    {"rbac.authorization.k8s.io/v1", "RoleBinding", &ckube__k8s__rbac__role_binding__descriptor},
    {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding",
     &ckube__k8s__rbac__cluster_role_binding__descriptor},
    {"authorization.k8s.io/v1", "SelfSubjectAccessReview",
     &ckube__k8s__authorization__self_subject_access_review__descriptor},
    {"authorization.k8s.io/v1", "SubjectAccessReview",
     &ckube__k8s__authorization__subject_access_review__descriptor},
    {"authorization.k8s.io/v1", "LocalSubjectAccessReview",
     &ckube__k8s__authorization__subject_access_review__descriptor},
    {"authorization.k8s.io/v1", "SelfSubjectRulesReview",
     &ckube__k8s__authorization__self_subject_rules_review__descriptor},
    {"authentication.k8s.io/v1", "SelfSubjectReview",
     &ckube__k8s__authentication__self_subject_review__descriptor},
    {"authentication.k8s.io/v1beta1", "SelfSubjectReview",
     &ckube__k8s__authentication__self_subject_review__descriptor},
    {"authentication.k8s.io/v1", "TokenRequest",
     &ckube__k8s__authentication__token_request__descriptor},
    {"authentication.k8s.io/v1", "TokenReview",
     &ckube__k8s__authentication__token_review__descriptor},
    /* client-go encodes DeleteOptions in the group version of the resource. */
    {NULL, "DeleteOptions", &ckube__k8s__meta__delete_options__descriptor},
};

static const ProtobufCMessageDescriptor *lookup_type(const char *api_version, const char *kind)
{
    if (!api_version || !kind)
        return NULL;
    for (size_t i = 0; i < sizeof pb_types / sizeof pb_types[0]; i++) {
        const struct pb_type *t = &pb_types[i];
        if (strcmp(t->kind, kind) != 0)
            continue;
        if (!t->api_version || strcmp(t->api_version, api_version) == 0)
            return t->desc;
    }
    return NULL;
}

bool k8s_protobuf_supports(const char *api_version, const char *kind)
{
    return lookup_type(api_version, kind) != NULL;
}

/* ---- presence rules (see the file comment) ---- */

struct field_ref {
    const char *msg; /* message short name */
    const char *field;
};

/* Scalars (and IntOrString) whose zero value is meaningful in JSON: Go
 * pointer fields, and a few non-omitempty fields clients rely on
 * (ContainerStatus.ready, restartCount, ...). Present on the wire => kept. */
static const struct field_ref keep_zero_fields[] = {
    /* meta */
    {"ObjectMeta", "deletionGracePeriodSeconds"},
    {"OwnerReference", "controller"},
    {"OwnerReference", "blockOwnerDeletion"},
    {"DeleteOptions", "gracePeriodSeconds"},
    {"DeleteOptions", "orphanDependents"},
    {"DeleteOptions", "propagationPolicy"},
    {"DeleteOptions", "ignoreStoreReadErrorWithClusterBreakingPotential"},
    {"Preconditions", "uid"},
    {"Preconditions", "resourceVersion"},
    {"Condition", "message"},
    /* core: config, identity */
    {"ConfigMap", "immutable"},
    {"Secret", "immutable"},
    {"ServiceAccount", "automountServiceAccountToken"},
    {"ConfigMapKeySelector", "optional"},
    {"SecretKeySelector", "optional"},
    {"ConfigMapEnvSource", "optional"},
    {"SecretEnvSource", "optional"},
    /* core: volumes */
    {"HostPathVolumeSource", "type"},
    {"SecretVolumeSource", "defaultMode"},
    {"SecretVolumeSource", "optional"},
    {"ConfigMapVolumeSource", "defaultMode"},
    {"ConfigMapVolumeSource", "optional"},
    {"SecretProjection", "optional"},
    {"ConfigMapProjection", "optional"},
    {"KeyToPath", "mode"},
    {"DownwardAPIVolumeFile", "mode"},
    {"DownwardAPIVolumeSource", "defaultMode"},
    {"ProjectedVolumeSource", "defaultMode"},
    {"ServiceAccountTokenProjection", "expirationSeconds"},
    {"CSIVolumeSource", "readOnly"},
    {"CSIVolumeSource", "fsType"},
    {"EmptyDirVolumeSource", "sizeLimit"},
    {"PersistentVolumeClaimSpec", "storageClassName"},
    {"PersistentVolumeClaimSpec", "volumeMode"},
    {"PersistentVolumeClaimSpec", "volumeAttributesClassName"},
    {"VolumeMount", "mountPropagation"},
    {"VolumeMount", "recursiveReadOnly"},
    {"VolumeMountStatus", "recursiveReadOnly"},
    /* core: containers */
    {"Container", "restartPolicy"},
    {"EphemeralContainerCommon", "restartPolicy"},
    {"Probe", "terminationGracePeriodSeconds"},
    {"GRPCAction", "port"},
    {"GRPCAction", "service"},
    {"Lifecycle", "stopSignal"},
    {"SecurityContext", "privileged"},
    {"SecurityContext", "runAsUser"},
    {"SecurityContext", "runAsNonRoot"},
    {"SecurityContext", "readOnlyRootFilesystem"},
    {"SecurityContext", "allowPrivilegeEscalation"},
    {"SecurityContext", "runAsGroup"},
    {"SecurityContext", "procMount"},
    {"PodSecurityContext", "runAsUser"},
    {"PodSecurityContext", "runAsNonRoot"},
    {"PodSecurityContext", "fsGroup"},
    {"PodSecurityContext", "runAsGroup"},
    {"PodSecurityContext", "fsGroupChangePolicy"},
    {"PodSecurityContext", "supplementalGroupsPolicy"},
    {"PodSecurityContext", "seLinuxChangePolicy"},
    {"WindowsSecurityContextOptions", "gmsaCredentialSpecName"},
    {"WindowsSecurityContextOptions", "gmsaCredentialSpec"},
    {"WindowsSecurityContextOptions", "runAsUserName"},
    {"WindowsSecurityContextOptions", "hostProcess"},
    {"SeccompProfile", "localhostProfile"},
    {"AppArmorProfile", "localhostProfile"},
    /* core: pods */
    {"PodSpec", "terminationGracePeriodSeconds"},
    {"PodSpec", "activeDeadlineSeconds"},
    {"PodSpec", "automountServiceAccountToken"},
    {"PodSpec", "shareProcessNamespace"},
    {"PodSpec", "priority"},
    {"PodSpec", "runtimeClassName"},
    {"PodSpec", "enableServiceLinks"},
    {"PodSpec", "preemptionPolicy"},
    {"PodSpec", "setHostnameAsFQDN"},
    {"PodSpec", "hostUsers"},
    {"PodSpec", "hostnameOverride"},
    {"Toleration", "tolerationSeconds"},
    {"TopologySpreadConstraint", "maxSkew"},
    {"TopologySpreadConstraint", "minDomains"},
    {"TopologySpreadConstraint", "nodeAffinityPolicy"},
    {"TopologySpreadConstraint", "nodeTaintsPolicy"},
    {"PodResourceClaim", "resourceClaimName"},
    {"PodResourceClaim", "resourceClaimTemplateName"},
    {"ContainerStatus", "ready"},
    {"ContainerStatus", "restartCount"},
    {"ContainerStatus", "started"},
    {"ContainerStatus", "stopSignal"},
    {"ContainerStateTerminated", "exitCode"},
    /* core: services, endpoints, nodes */
    {"ServicePort", "appProtocol"},
    {"ServiceSpec", "allocateLoadBalancerNodePorts"},
    {"ServiceSpec", "loadBalancerClass"},
    {"ServiceSpec", "internalTrafficPolicy"},
    {"ServiceSpec", "ipFamilyPolicy"},
    {"ServiceSpec", "trafficDistribution"},
    {"ClientIPConfig", "timeoutSeconds"},
    {"LoadBalancerIngress", "ipMode"},
    {"PortStatus", "port"},
    {"PortStatus", "error"},
    {"EndpointPort", "port"},
    {"EndpointPort", "appProtocol"},
    {"EndpointAddress", "nodeName"},
    {"EventSeries", "count"},
    {"DaemonEndpoint", "Port"},
    /* apps */
    {"DeploymentSpec", "replicas"},
    {"DeploymentSpec", "revisionHistoryLimit"},
    {"DeploymentSpec", "progressDeadlineSeconds"},
    {"DeploymentStatus", "collisionCount"},
    {"DeploymentStatus", "terminatingReplicas"},
    {"RollingUpdateDeployment", "maxUnavailable"},
    {"RollingUpdateDeployment", "maxSurge"},
    {"ReplicaSetSpec", "replicas"},
    {"ReplicaSetStatus", "replicas"},
    {"ReplicaSetStatus", "terminatingReplicas"},
    /* coordination */
    {"LeaseSpec", "holderIdentity"},
    {"LeaseSpec", "leaseDurationSeconds"},
    {"LeaseSpec", "leaseTransitions"},
    {"LeaseSpec", "strategy"},
    {"LeaseSpec", "preferredHolder"},
    /* autoscaling: spec.replicas is not a pointer, but a scale to zero must
     * not lose its spec (JSON clients send "spec":{}). */
    {"ScaleSpec", "replicas"},
    {"ScaleStatus", "replicas"},
};

/* Non-pointer Go structs (besides metadata/spec/status): always on the wire,
 * so an empty one carries no information and is dropped. */
static const struct field_ref omit_empty_fields[] = {
    {"DeploymentSpec", "template"},
    {"DeploymentSpec", "strategy"},
    {"ReplicaSetSpec", "template"},
    {"Container", "resources"},
    {"EphemeralContainerCommon", "resources"},
    {"PersistentVolumeClaimSpec", "resources"},
    {"ContainerStatus", "state"},
    {"ContainerStatus", "lastState"},
    {"ServiceStatus", "loadBalancer"},
    {"NodeStatus", "daemonEndpoints"},
    {"NodeStatus", "nodeInfo"},
    {"NodeDaemonEndpoints", "kubeletEndpoint"},
    {"Event", "involvedObject"},
    {"Event", "source"},
    {"Event", "regarding"},
    {"Event", "deprecatedSource"},
    {"Binding", "target"},
    {"WeightedPodAffinityTerm", "podAffinityTerm"},
    {"PreferredSchedulingTerm", "preference"},
};

static bool in_table(const struct field_ref *tab, size_t n, const char *msg, const char *field)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(tab[i].field, field) == 0 && strcmp(tab[i].msg, msg) == 0)
            return true;
    return false;
}

static bool keeps_zero(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f)
{
    return in_table(keep_zero_fields, sizeof keep_zero_fields / sizeof keep_zero_fields[0],
                    d->short_name, f->name);
}

static bool omits_empty(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f)
{
    if (!strcmp(f->name, "metadata") || !strcmp(f->name, "spec") || !strcmp(f->name, "status"))
        return true;
    return in_table(omit_empty_fields, sizeof omit_empty_fields / sizeof omit_empty_fields[0],
                    d->short_name, f->name);
}

/* ---- the decode's memory bound ---- */

/* One decode: where errors go, and what it built so far in estimated
 * memory (protobuf-c's structs as allocated, JSON values as json_cost.h
 * prices them) against its bound (0: none). */
struct pbconv {
    char **err;
    size_t mem, max;
    bool too_large;
};

/* Accounts `bytes` about to be (or just) allocated; false once past the
 * bound, with the error set. */
static bool pb_charge(struct pbconv *cv, size_t bytes)
{
    if (cv->max && (bytes > cv->max || cv->mem > cv->max - bytes)) {
        if (!cv->too_large)
            ckube__set_err(cv->err, "decoding it needs more than %zu bytes of memory", cv->max);
        cv->too_large = true;
        return false;
    }
    cv->mem += bytes;
    return true;
}

/* Charges a value just made (a scalar or an empty container); NULL (and
 * the value released) past the bound. */
static json_t *pb_value(struct pbconv *cv, json_t *v)
{
    if (!v)
        return NULL;
    size_t cost = 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        cost = JCOST_OBJECT;
        break;
    case JSON_ARRAY:
        cost = JCOST_ARRAY;
        break;
    case JSON_STRING:
        cost = JCOST_STRING(json_string_length(v));
        break;
    case JSON_INTEGER:
    case JSON_REAL:
        cost = JCOST_NUMBER;
        break;
    default:
        break;
    }
    if (pb_charge(cv, cost))
        return v;
    json_decref(v);
    return NULL;
}

/* protobuf-c's allocator for a decode: every struct, array and string it
 * unpacks is charged (with malloc's chunk header), so a body of empty
 * sub-messages, each a few hundred bytes unpacked, stops at the bound. */
static void *pb_alloc(void *data, size_t size)
{
    return pb_charge(data, size + 16) ? xmalloc(size) : NULL;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    free(p);
}

/* ---- leaf encodings ---- */

/* A JSON string for `s`; invalid UTF-8 bytes become U+FFFD as Go's JSON
 * encoder does (protobuf-c does not validate proto2 strings). */
static json_t *json_str(const char *s)
{
    size_t n = strlen(s);
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = ckube__utf8_decode(u + i, n - i, NULL);
        if (!l)
            break;
        i += l;
    }
    if (i == n)
        return json_stringn(s, n);
    char *buf = xmalloc(n * 3 + 1);
    size_t o = 0;
    for (i = 0; i < n;) {
        size_t l = ckube__utf8_decode(u + i, n - i, NULL);
        if (l) {
            memcpy(buf + o, s + i, l);
            o += l;
            i += l;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(buf, o);
    free(buf);
    return j;
}

/* Standard base64 with padding, as Go encodes []byte (glibc's b64_ntop
 * writes exactly that, NUL-terminated). */
static json_t *json_base64(const uint8_t *data, size_t len)
{
    size_t cap = (len + 2) / 3 * 4 + 1;
    char *out = xmalloc(cap);
    int n = b64_ntop(data, len, out, cap);
    json_t *j = n < 0 ? NULL : json_stringn(out, (size_t)n);
    free(out);
    return j;
}

/* RFC 3339 in UTC, as metav1.Time (whole seconds: Go drops the nanos when
 * unmarshalling) or, with `micro`, as metav1.MicroTime (six fraction digits;
 * nanos outside 0..999999999 carry into the seconds as time.Unix does).
 * Go refuses to marshal years outside 0..9999; so do we. */
static json_t *json_time(int64_t seconds, int32_t nanos, bool micro, struct pbconv *cv)
{
    if (!micro) {
        nanos = 0;
    } else if (nanos < 0 || nanos > 999999999) {
        int32_t carry = nanos / 1000000000 - (nanos % 1000000000 < 0);
        seconds = seconds > INT64_MAX - 2 || seconds < INT64_MIN + 3 ? seconds : seconds + carry;
        nanos -= carry * 1000000000;
    }
    if (seconds < -62167219200LL || seconds > 253402300799LL) {
        ckube__set_err(cv->err, "invalid protobuf: time %" PRId64 " out of range", seconds);
        return NULL;
    }
    time_t t = (time_t)seconds;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) {
        ckube__set_err(cv->err, "invalid protobuf: time %" PRId64 " out of range", seconds);
        return NULL;
    }
    char buf[48];
    if (micro)
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(nanos / 1000));
    else
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return pb_value(cv, json_string(buf));
}

/* Raw JSON bytes (RawExtension, FieldsV1) as a JSON value. */
static json_t *json_raw(const ProtobufCBinaryData *raw, const char *what, struct pbconv *cv)
{
    json_error_t jerr;
    size_t left = cv->max ? cv->max - cv->mem : 0, used = 0;
    bool over = false;
    json_t *v = ckube__json_loadb_limited((const char *)raw->data, raw->len, JSON_DECODE_ANY,
                                          cv->max ? (left ? left : 1) : 0, &used, &over, &jerr);
    if (over) {
        pb_charge(cv, left + 1); /* sets the error */
        return NULL;
    }
    if (!v)
        ckube__set_err(cv->err, "invalid protobuf: %s is not JSON: %s", what, jerr.text);
    else
        cv->mem += used;
    return v;
}

/* ---- generic conversion ---- */

static int message_into(json_t *obj, const ProtobufCMessage *m, struct pbconv *cv);

/* Result of converting one message value. */
struct conv {
    json_t *value; /* new reference; NULL: nothing to emit (zero Time) */
    bool zero;     /* the Go value is the zero value */
};

/* Messages with their own JSON form; returns 1 when `m` is one (result in
 * *out), 0 when it is an ordinary message, -1 on error. */
static int convert_special(const ProtobufCMessage *m, struct conv *out, struct pbconv *cv)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    out->value = NULL;
    out->zero = false;
    if (d == &ckube__k8s__meta__time__descriptor ||
        d == &ckube__k8s__meta__micro_time__descriptor) {
        /* Both layouts are identical; Go writes an empty message for the
         * zero time. */
        const Ckube__K8s__Meta__Time *t = (const Ckube__K8s__Meta__Time *)m;
        out->zero = !t->has_seconds && !t->has_nanos;
        if (out->zero)
            return 1;
        out->value =
            json_time(t->seconds, t->nanos, d == &ckube__k8s__meta__micro_time__descriptor, cv);
        return out->value ? 1 : -1;
    }
    if (d == &ckube__k8s__meta__quantity__descriptor) {
        const Ckube__K8s__Meta__Quantity *q = (const Ckube__K8s__Meta__Quantity *)m;
        out->zero = !q->string || !*q->string;
        out->value = pb_value(cv, json_str(out->zero ? "0" : q->string));
    } else if (d == &ckube__k8s__meta__int_or_string__descriptor) {
        const Ckube__K8s__Meta__IntOrString *is = (const Ckube__K8s__Meta__IntOrString *)m;
        if (is->type == 1) {
            out->zero = !is->strval || !*is->strval;
            out->value = pb_value(cv, json_str(is->strval ? is->strval : ""));
        } else if (is->type == 0) {
            out->zero = is->intval == 0;
            out->value = pb_value(cv, json_integer(is->intval));
        } else {
            ckube__set_err(cv->err, "invalid protobuf: IntOrString type %" PRId64, is->type);
            return -1;
        }
    } else if (d == &ckube__k8s__meta__raw_extension__descriptor ||
               d == &ckube__k8s__meta__fields_v1__descriptor) {
        /* Same layout: one bytes field. */
        const Ckube__K8s__Meta__RawExtension *r = (const Ckube__K8s__Meta__RawExtension *)m;
        out->zero = !r->has_raw || r->raw.len == 0;
        if (out->zero)
            return 1;
        out->value = json_raw(&r->raw, d->short_name, cv);
        return out->value ? 1 : -1;
    } else {
        return 0;
    }
    if (!out->value) {
        ckube__set_err(cv->err, "out of memory"); /* unless the bound set one */
        return -1;
    }
    return 1;
}

/* Converts any message: special forms (*special set), else a JSON object
 * (zero = no members). */
static int convert_message(const ProtobufCMessage *m, struct conv *out, bool *special,
                           struct pbconv *cv)
{
    int rc = convert_special(m, out, cv);
    *special = rc != 0;
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    json_t *obj = pb_value(cv, json_object());
    if (!obj) {
        ckube__set_err(cv->err, "out of memory");
        return -1;
    }
    if (message_into(obj, m, cv) < 0) {
        json_decref(obj);
        return -1;
    }
    out->value = obj;
    out->zero = json_object_size(obj) == 0;
    return 0;
}

/* Reads a scalar (non-string, non-bytes, non-message) at p as JSON and
 * reports whether it is zero. */
static json_t *convert_scalar(ProtobufCType type, const void *p, bool *zero)
{
    int64_t i;
    switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        i = *(const int32_t *)p;
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        i = *(const uint32_t *)p;
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        i = *(const int64_t *)p;
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: {
        uint64_t u = *(const uint64_t *)p;
        *zero = u == 0;
        return u > INT64_MAX ? json_real((double)u) : json_integer((json_int_t)u);
    }
    case PROTOBUF_C_TYPE_BOOL: {
        bool b = *(const protobuf_c_boolean *)p != 0;
        *zero = !b;
        return json_boolean(b);
    }
    case PROTOBUF_C_TYPE_FLOAT: {
        float f = *(const float *)p;
        *zero = f == 0;
        return json_real(f);
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
        double f = *(const double *)p;
        *zero = f == 0;
        return json_real(f);
    }
    default:
        *zero = true;
        return json_null();
    }
    *zero = i == 0;
    return json_integer(i);
}

/* Size in bytes of one repeated element of a scalar type. */
static size_t scalar_size(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

/* One value of field f stored at p (an element for repeated fields): the
 * JSON value (never NULL on success: a zero Time becomes null). */
static json_t *convert_element(const ProtobufCFieldDescriptor *f, const void *p, struct pbconv *cv)
{
    bool zero;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return pb_value(cv, json_str(s ? s : ""));
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        return pb_value(cv, json_base64(b->data, b->len));
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        if (!sub)
            return pb_value(cv, json_object());
        struct conv c;
        bool special;
        if (convert_message(sub, &c, &special, cv) < 0)
            return NULL;
        return c.value ? c.value : json_null();
    }
    default:
        return pb_value(cv, convert_scalar(f->type, p, &zero));
    }
}

/* A map entry message: exactly key (1) and value (2). */
static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
    return d && d->n_fields == 2 && d->fields[0].id == 1 && !strcmp(d->fields[0].name, "key") &&
           d->fields[0].type == PROTOBUF_C_TYPE_STRING && d->fields[1].id == 2 &&
           !strcmp(d->fields[1].name, "value");
}

/* The value of a map entry; an absent value is the zero value of its type
 * ("" for strings and bytes, "0" for quantities, {} for messages). */
static json_t *map_value(const ProtobufCMessage *e, struct pbconv *cv)
{
    const ProtobufCFieldDescriptor *vf = &e->descriptor->fields[1];
    const char *p = (const char *)e + vf->offset;
    switch (vf->type) {
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!*(ProtobufCMessage *const *)p)
            return pb_value(cv, vf->descriptor == &ckube__k8s__meta__quantity__descriptor
                                    ? json_string("0")
                                    : json_object());
        return convert_element(vf, p, cv);
    case PROTOBUF_C_TYPE_BYTES:
        if (vf->label == PROTOBUF_C_LABEL_OPTIONAL &&
            !*(const protobuf_c_boolean *)((const char *)e + vf->quantifier_offset))
            return pb_value(cv, json_string(""));
        return convert_element(vf, p, cv);
    default:
        return convert_element(vf, p, cv);
    }
}

static json_t *convert_map(size_t n, ProtobufCMessage *const *entries, struct pbconv *cv)
{
    json_t *obj = pb_value(cv, json_object());
    for (size_t i = 0; obj && i < n; i++) {
        const ProtobufCMessage *e = entries[i];
        const char *key = *(char *const *)((const char *)e + e->descriptor->fields[0].offset);
        json_t *k = json_str(key ? key : "");
        json_t *v =
            k && pb_charge(cv, JCOST_MEMBER(json_string_length(k))) ? map_value(e, cv) : NULL;
        /* Duplicate keys: the last one wins, as in Go. */
        if (!v || json_object_set_new(obj, json_string_value(k), v) < 0) {
            json_decref(obj);
            obj = NULL;
        }
        json_decref(k);
    }
    if (!obj)
        ckube__set_err(cv->err, "out of memory");
    return obj;
}

static json_t *convert_repeated(const ProtobufCFieldDescriptor *f, size_t n, const void *arr,
                                struct pbconv *cv)
{
    if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor))
        return convert_map(n, arr, cv);
    json_t *a = pb_value(cv, json_array());
    if (!a) {
        ckube__set_err(cv->err, "out of memory");
        return NULL;
    }
    size_t stride;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
        stride = sizeof(char *);
        break;
    case PROTOBUF_C_TYPE_MESSAGE:
        stride = sizeof(ProtobufCMessage *);
        break;
    case PROTOBUF_C_TYPE_BYTES:
        stride = sizeof(ProtobufCBinaryData);
        break;
    default:
        stride = scalar_size(f->type);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = pb_charge(cv, JCOST_ELEMENT)
                        ? convert_element(f, (const char *)arr + i * stride, cv)
                        : NULL;
        if (!v || json_array_append_new(a, v) < 0) {
            ckube__set_err(cv->err, "out of memory");
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Converts optional field f of m into *out (NULL: omit). */
static int convert_optional(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            json_t **out, struct pbconv *cv)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *p = (const char *)m + f->offset;
    *out = NULL;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        if (!sub)
            return 0;
        struct conv c;
        bool special;
        if (convert_message(sub, &c, &special, cv) < 0)
            return -1;
        /* No value: a zero Time/MicroTime or empty raw JSON. Special forms
         * behave like scalars, ordinary messages like structs. */
        bool drop = !c.value || (c.zero && (special ? !keeps_zero(d, f) : omits_empty(d, f)));
        if (drop) {
            json_decref(c.value);
            return 0;
        }
        *out = c.value;
        return 0;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = *(char *const *)p;
        if (!s || (!*s && !keeps_zero(d, f)))
            return 0;
        *out = pb_value(cv, json_str(s));
    } else {
        /* Scalars and bytes carry a has_ flag in proto2. */
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
            !*(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset))
            return 0;
        if (f->type == PROTOBUF_C_TYPE_BYTES) {
            const ProtobufCBinaryData *b = (const ProtobufCBinaryData *)p;
            if (b->len == 0 && !keeps_zero(d, f))
                return 0;
            *out = pb_value(cv, json_base64(b->data, b->len));
        } else {
            bool zero;
            json_t *v = convert_scalar(f->type, p, &zero);
            if (zero && !keeps_zero(d, f)) {
                json_decref(v);
                return 0;
            }
            *out = pb_value(cv, v);
        }
    }
    if (!*out) {
        ckube__set_err(cv->err, "out of memory");
        return -1;
    }
    return 0;
}

/* Adds the JSON members of message m to obj. */
static int message_into(json_t *obj, const ProtobufCMessage *m, struct pbconv *cv)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        json_t *v = NULL;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
            if (n == 0)
                continue;
            v = convert_repeated(f, n, *(void *const *)((const char *)m + f->offset), cv);
            if (!v)
                return -1;
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE && !strncmp(f->name, "inline_", 7)) {
            const ProtobufCMessage *sub = *(ProtobufCMessage *const *)((const char *)m + f->offset);
            if (sub && message_into(obj, sub, cv) < 0)
                return -1;
            continue;
        } else {
            if (convert_optional(m, f, &v, cv) < 0)
                return -1;
            if (!v)
                continue;
        }
        if (!pb_charge(cv, JCOST_MEMBER(strlen(f->name)))) {
            json_decref(v);
            return -1;
        }
        if (json_object_set_new(obj, f->name, v) < 0) {
            ckube__set_err(cv->err, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* ---- entry points ---- */

/* Accepts the envelope's content type: unset or the protobuf one. */
static bool envelope_content_type_ok(const char *ct)
{
    return !ct || !*ct || k8s_protobuf_is_content_type(ct);
}

json_t *k8s_protobuf_decode(const void *buf, size_t len, size_t max_memory, bool *too_large,
                            char **err)
{
    if (err)
        *err = NULL;
    if (too_large)
        *too_large = false;
    struct pbconv cv = {.err = err, .max = max_memory};
    json_t *obj = NULL;
    ProtobufCMessage *msg = NULL;
    ProtobufCAllocator alloc = {.alloc = pb_alloc, .free = pb_free, .allocator_data = &cv};
    if (!buf || len < sizeof k8s_magic || memcmp(buf, k8s_magic, sizeof k8s_magic) != 0) {
        ckube__set_err(err, "invalid protobuf: missing the k8s\\0 prefix");
        return NULL;
    }
    Ckube__K8s__Meta__Unknown *env = ckube__k8s__meta__unknown__unpack(
        &alloc, len - sizeof k8s_magic, (const uint8_t *)buf + sizeof k8s_magic);
    if (!env) {
        ckube__set_err(err, "invalid protobuf: malformed envelope");
        goto out;
    }
    const char *api_version = env->typemeta ? env->typemeta->apiversion : NULL;
    const char *kind = env->typemeta ? env->typemeta->kind : NULL;
    if (!api_version || !*api_version || !kind || !*kind) {
        ckube__set_err(err, "invalid protobuf: envelope has no apiVersion/kind");
        goto out;
    }
    if (env->contentencoding && *env->contentencoding) {
        ckube__set_err(err, "invalid protobuf: unsupported content encoding %s",
                       env->contentencoding);
        goto out;
    }
    if (!envelope_content_type_ok(env->contenttype)) {
        ckube__set_err(err, "invalid protobuf: unsupported content type %s", env->contenttype);
        goto out;
    }
    /* Go always writes the object (its metadata at least); a body without
     * one is a truncated request. */
    if (!env->has_raw) {
        ckube__set_err(err, "invalid protobuf: envelope has no object");
        goto out;
    }
    const ProtobufCMessageDescriptor *desc = lookup_type(api_version, kind);
    if (!desc) {
        ckube__set_err(err, "unsupported protobuf type %s %s", api_version, kind);
        goto out;
    }
    msg = protobuf_c_message_unpack(desc, &alloc, env->raw.len, env->raw.data);
    if (!msg) {
        ckube__set_err(err, "invalid protobuf: cannot decode %s %s", api_version, kind);
        goto out;
    }
    obj = pb_value(&cv, json_object());
    json_t *av = pb_value(&cv, json_str(api_version)), *kd = pb_value(&cv, json_str(kind));
    if (!obj || !av || !kd) {
        json_decref(av);
        json_decref(kd);
        json_decref(obj);
        obj = NULL;
        ckube__set_err(err, "out of memory"); /* unless the bound set one */
        goto out;
    }
    /* set_new takes the value even when it fails. */
    int set = json_object_set_new(obj, "apiVersion", av);
    if (set == 0)
        set = json_object_set_new(obj, "kind", kd);
    else
        json_decref(kd);
    if (set < 0) {
        ckube__set_err(err, "out of memory");
        json_decref(obj);
        obj = NULL;
        goto out;
    }
    if (message_into(obj, msg, &cv) < 0) {
        ckube__set_err(err, "invalid protobuf: cannot convert %s %s", api_version, kind);
        json_decref(obj);
        obj = NULL;
    }
out:
    if (msg)
        protobuf_c_message_free_unpacked(msg, &alloc);
    if (env)
        ckube__k8s__meta__unknown__free_unpacked(env, &alloc);
    if (too_large)
        *too_large = cv.too_large;
    return obj;
}

#else /* !CKUBE_HAVE_PROTO */

json_t *k8s_protobuf_decode(const void *buf, size_t len, size_t max_memory, bool *too_large,
                            char **err)
{
    (void)buf;
    (void)len;
    (void)max_memory;
    if (too_large)
        *too_large = false;
    if (err)
        *err = xstrdup("protobuf support is not built in");
    return NULL;
}

bool k8s_protobuf_supports(const char *api_version, const char *kind)
{
    (void)api_version;
    (void)kind;
    return false;
}

#endif

bool k8s_protobuf_is_content_type(const char *content_type)
{
    if (!content_type)
        return false;
    while (*content_type == ' ' || *content_type == '\t')
        content_type++;
    size_t n = strlen(K8S_PROTOBUF_CONTENT_TYPE);
    if (strncasecmp(content_type, K8S_PROTOBUF_CONTENT_TYPE, n) != 0)
        return false;
    char c = content_type[n];
    return c == '\0' || c == ';' || c == ' ' || c == '\t';
}
