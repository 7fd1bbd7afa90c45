/* Built-in OpenAPI v3 schemas; see builtin_schemas.h.
 *
 * The schemas are written as JSON text with two conveniences so they stay
 * readable as C literals: backticks stand for double quotes, and a comma
 * right before a closing brace or bracket is dropped. The P_* macros below
 * each emit one property ending in a comma. A `$ckref` key names a shared
 * definition that is inlined at load time (keys beside it override the
 * definition's, typically the field's own description).
 *
 * Descriptions are ckube's own short wording, not upstream's.
 */
#include "apiserver/registry/definitions/builtin_schemas.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/log.h"
#include "common/xalloc.h"

#define META "io.k8s.apimachinery.pkg.apis.meta.v1."
#define CORE "io.k8s.api.core.v1."
#define APPS "io.k8s.api.apps.v1."
#define COORD "io.k8s.api.coordination.v1."
#define EVTS "io.k8s.api.events.v1."
#define INTSTR "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
#define QTY "io.k8s.apimachinery.pkg.api.resource.Quantity"
#define AUTHZ "io.k8s.api.authorization.v1."
#define AUTHN "io.k8s.api.authentication.v1."
#define RBAC "io.k8s.api.rbac.v1."
#define ADMREG "io.k8s.api.admissionregistration.v1."
#define APIREG "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1."

/* The macros and tables are laid out by hand: one property per line reads
 * better than what a formatter makes of long string concatenations. */
/* clang-format off */

/* Properties. n: name, d: description, r: definition name. */
#define P_STR(n, d) "`" n "`:{`type`:`string`,`description`:`" d "`},"
#define P_BYTES(n, d) "`" n "`:{`type`:`string`,`format`:`byte`,`description`:`" d "`},"
#define P_BOOL(n, d) "`" n "`:{`type`:`boolean`,`description`:`" d "`},"
#define P_I32(n, d) "`" n "`:{`type`:`integer`,`format`:`int32`,`description`:`" d "`},"
#define P_I64(n, d) "`" n "`:{`type`:`integer`,`format`:`int64`,`description`:`" d "`},"
#define P_TIME(n, d) "`" n "`:{`type`:`string`,`format`:`date-time`,`description`:`" d "`},"
#define P_STRMAP(n, d)                                                                             \
    "`" n "`:{`type`:`object`,`additionalProperties`:{`type`:`string`},`description`:`" d "`},"
#define P_BYTESMAP(n, d)                                                                           \
    "`" n "`:{`type`:`object`,`additionalProperties`:{`type`:`string`,`format`:`byte`},"          \
    "`description`:`" d "`},"
#define P_STRLIST(n, d) "`" n "`:{`type`:`array`,`items`:{`type`:`string`},`description`:`" d "`},"
#define P_I64LIST(n, d)                                                                            \
    "`" n "`:{`type`:`array`,`items`:{`type`:`integer`,`format`:`int64`},`description`:`" d "`},"
#define P_STRLISTMAP(n, d)                                                                         \
    "`" n "`:{`type`:`object`,`additionalProperties`:{`type`:`array`,`items`:{`type`:`string`}},"  \
    "`description`:`" d "`},"
#define P_REF(n, r, d) "`" n "`:{`$ckref`:`" r "`,`description`:`" d "`},"
#define P_REFLIST(n, r, d)                                                                         \
    "`" n "`:{`type`:`array`,`items`:{`$ckref`:`" r "`},`description`:`" d "`},"
#define P_REFMAP(n, r, d)                                                                          \
    "`" n "`:{`type`:`object`,`additionalProperties`:{`$ckref`:`" r "`},`description`:`" d "`},"
/* A list of objects keyed by their `name`: strategic merge patches merge
 * it by name, and it is published as upstream publishes it (a list-type
 * map on name). The x-ckube-list-* keys are published as the
 * x-kubernetes-list-* ones but not enforced by the schema engine: the
 * type's validation reports a name given twice, in upstream's words. */
#define P_NAMEDLIST(n, r, d)                                                                       \
    "`" n "`:{`type`:`array`,`items`:{`$ckref`:`" r "`},"                                         \
    "`x-kubernetes-patch-merge-key`:`name`,`x-kubernetes-patch-strategy`:`merge`,"                \
    "`x-ckube-list-type`:`map`,`x-ckube-list-map-keys`:[`name`],`description`:`" d "`},"
/* Subtrees ckube does not describe field by field. */
#define P_ANYOBJ(n, d)                                                                             \
    "`" n "`:{`type`:`object`,`x-kubernetes-preserve-unknown-fields`:true,`description`:`" d "`},"
#define P_ANYLIST(n, d)                                                                            \
    "`" n "`:{`type`:`array`,`items`:{`type`:`object`,`x-kubernetes-preserve-unknown-fields`:true},"  \
    "`description`:`" d "`},"

/* Objects. req: a list of backticked names, e.g. "`name`,`uid`". */
#define OBJ(d, props) "{`type`:`object`,`description`:`" d "`,`properties`:{" props "}}"
#define OBJ_REQ(d, req, props)                                                                     \
    "{`type`:`object`,`description`:`" d "`,`required`:[" req "],`properties`:{" props "}}"
/* Fields upstream's OpenAPI marks required but its validation, not
 * decoding, checks (with its own messages): published as `required`
 * (kubectl explain shows them so), not enforced by the schema engine,
 * which ignores x-ckube-* keys. */
#define OBJ_XREQ(d, req, props)                                                                    \
    "{`type`:`object`,`description`:`" d "`,`x-ckube-required`:[" req "],`properties`:{" props "}}"
/* The same for a +structType=atomic struct (server-side apply owns it
 * whole). */
#define OBJ_XREQ_ATOMIC(d, req, props)                                                             \
    "{`type`:`object`,`description`:`" d "`,`x-kubernetes-map-type`:`atomic`,"                  \
    "`x-ckube-required`:[" req "],`properties`:{" props "}}"
/* Known fields described, others kept (fields newer than ckube). */
#define OBJ_OPEN(d, props)                                                                         \
    "{`type`:`object`,`description`:`" d "`,`x-kubernetes-preserve-unknown-fields`:true,"         \
    "`properties`:{" props "}}"
#define OBJ_OPEN_REQ(d, req, props)                                                                \
    "{`type`:`object`,`description`:`" d "`,`x-kubernetes-preserve-unknown-fields`:true,"         \
    "`required`:[" req "],`properties`:{" props "}}"

#define TYPEMETA                                                                                   \
    P_STR("apiVersion", "The versioned schema of this representation of the object. Servers "     \
                        "convert recognized schemas to their latest internal value.")              \
    P_STR("kind", "The REST resource this object represents, in CamelCase. Servers infer it "      \
                  "from the endpoint the client submits requests to.")
#define OBJMETA P_REF("metadata", META "ObjectMeta", "Standard object metadata.")
/* What an access review asks about (both kinds of spec). */
#define ACCESS_ATTRS                                                                               \
    P_REF("resourceAttributes", AUTHZ "ResourceAttributes", "A request on a resource.")           \
    P_REF("nonResourceAttributes", AUTHZ "NonResourceAttributes",                                \
          "A request on a non-resource URL.")

/* What a mutating and a validating webhook share. */
#define WEBHOOK_PROPS                                                                              \
    P_STR("name", "Fully qualified name of the webhook, at least three DNS labels, such as "     \
                  "policy.example.com.")                                                         \
    P_REF("clientConfig", ADMREG "WebhookClientConfig", "How to call the webhook.")              \
    P_REFLIST("rules", ADMREG "RuleWithOperations",                                              \
              "The requests the webhook is called for: those any of the rules match. Webhook "    \
              "configurations themselves are never sent to webhooks.")                           \
    P_STR("failurePolicy", "What happens when calling the webhook fails: Fail (the default) "    \
                           "rejects the request, Ignore lets it through.")                       \
    P_STR("matchPolicy", "Exact: only requests the rules name. Equivalent (the default): also "  \
                         "requests for the same resources through another group or version.")  \
    P_REF("namespaceSelector", META "LabelSelector",                                             \
          "Which namespaces' objects the webhook is called for, by the namespace's labels (a "    \
          "Namespace by its own). Empty: all of them.")                                          \
    P_REF("objectSelector", META "LabelSelector",                                                \
          "Which objects the webhook is called for, by their labels, old or new. Empty: all of "  \
          "them.")                                                                               \
    P_STR("sideEffects", "None or NoneOnDryRun: whether calling the webhook changes anything "   \
                         "outside the request. Dry-run requests skip webhooks with side "         \
                         "effects.")                                                             \
    P_I32("timeoutSeconds", "How long a call may take, 1 to 30 seconds; 10 when not given.")     \
    P_STRLIST("admissionReviewVersions", "AdmissionReview versions the webhook understands, "    \
                                         "preferred first; one of them must be v1 or v1beta1.")  \
    P_NAMEDLIST("matchConditions", ADMREG "MatchCondition",                                      \
                "Conditions a matched request must also meet, at most 64; all of them must "     \
                "hold for the webhook to be called.")

typedef struct schema_text {
    const char *name; /* definition name */
    const char *text;
} schema_text;

/* ----------------------------------------------------------- fragments */

static const schema_text fragments[] = {
    /* --- meta/v1 --- */
    {META "ObjectMeta",
     OBJ("Metadata that every persisted resource has, including the objects users create.",
         P_STR("name", "Unique name within a namespace (or the cluster for cluster-scoped objects). "
                       "Required on create unless generateName is set; cannot be updated.")
         P_STR("generateName", "Prefix the server uses to generate a unique name when name is "
                               "not given.")
         P_STR("namespace", "Namespace the object lives in; empty for cluster-scoped objects.")
         P_STR("selfLink", "Deprecated and never set by the server.")
         P_STR("uid", "Unique identifier assigned by the server on creation.")
         P_STR("resourceVersion", "Opaque version of this object, used for optimistic "
                                  "concurrency and watches. Set by the server.")
         P_I64("generation", "Sequence number of the desired state, bumped by the server when "
                             "the spec changes.")
         P_TIME("creationTimestamp", "When the object was created (RFC 3339, UTC). Set by the "
                                     "server.")
         P_TIME("deletionTimestamp", "When the object will be deleted. Set by the server once "
                                     "deletion is requested and finalizers are pending.")
         P_I64("deletionGracePeriodSeconds", "Seconds allowed for graceful termination before "
                                             "removal.")
         P_STRMAP("labels", "Key-value pairs used to organize and select objects.")
         P_STRMAP("annotations", "Arbitrary key-value data kept with the object; not used for "
                                 "selection.")
         P_REFLIST("ownerReferences", META "OwnerReference",
                   "Objects this one depends on. It is garbage collected once all owners are gone.")
         P_STRLIST("finalizers", "Names of pending cleanup steps; the object stays until all are "
                                 "removed.")
         P_REFLIST("managedFields", META "ManagedFieldsEntry",
                   "Which field managers own which fields (server-side apply bookkeeping)."))},
    {META "OwnerReference",
     OBJ_REQ("Identifies an owning object in the same namespace.",
             "`apiVersion`,`kind`,`name`,`uid`",
             P_STR("apiVersion", "API version of the owner.")
             P_STR("kind", "Kind of the owner.")
             P_STR("name", "Name of the owner.")
             P_STR("uid", "UID of the owner.")
             P_BOOL("controller", "True if the owner is the managing controller.")
             P_BOOL("blockOwnerDeletion", "If true, foreground deletion of the owner waits for "
                                          "this object to be deleted."))},
    {META "ManagedFieldsEntry",
     OBJ("Records the fields one manager owns in an object.",
         P_STR("manager", "Name of the field manager.")
         P_STR("operation", "Apply or Update.")
         P_STR("apiVersion", "Version of the resource the fields refer to.")
         P_TIME("time", "When the fields were last changed by this manager.")
         P_STR("fieldsType", "Format of fieldsV1; always FieldsV1.")
         P_ANYOBJ("fieldsV1", "The owned fields, as a trie of field paths.")
         P_STR("subresource", "Subresource the manager wrote through, if any."))},
    {META "LabelSelector",
     OBJ("A label query over a set of objects. An empty selector matches everything.",
         P_STRMAP("matchLabels", "Labels that must all be present with these exact values.")
         P_REFLIST("matchExpressions", META "LabelSelectorRequirement",
                   "Requirements that must all hold."))},
    {META "LabelSelectorRequirement",
     OBJ_REQ("One label requirement: a key, an operator and values.", "`key`,`operator`",
             P_STR("key", "The label key.")
             P_STR("operator", "In, NotIn, Exists or DoesNotExist.")
             P_STRLIST("values", "Values for In and NotIn; empty for Exists and DoesNotExist."))},
    {META "Condition",
     OBJ_REQ("One aspect of the current state of a resource.", "`type`,`status`",
             P_STR("type", "Condition type, in CamelCase.")
             P_STR("status", "True, False or Unknown.")
             P_I64("observedGeneration", "The generation the condition was computed for.")
             P_TIME("lastTransitionTime", "When the status last changed.")
             P_STR("reason", "Machine-readable reason for the last transition, in CamelCase.")
             P_STR("message", "Human-readable details."))},
    {META "ListMeta",
     OBJ("Metadata of a list.",
         P_STR("resourceVersion", "Version of the list, for watching from it.")
         P_STR("continue", "Token to fetch the next page, if the list was limited.")
         P_I64("remainingItemCount", "Items left after this page, if known.")
         P_STR("selfLink", "Deprecated and never set by the server."))},
    {META "Status",
     OBJ("Result of an operation that returns no object, such as an error.",
         TYPEMETA P_REF("metadata", META "ListMeta", "Standard list metadata.")
         P_STR("status", "Success or Failure.")
         P_STR("message", "Human-readable description of the status.")
         P_STR("reason", "Machine-readable CamelCase reason for a failure.")
         P_REF("details", META "StatusDetails", "Extra data about the reason.")
         P_I32("code", "Suggested HTTP status code."))},
    {META "StatusDetails",
     OBJ("Details of a status.",
         P_STR("name", "Name of the object concerned.")
         P_STR("group", "API group of the object.")
         P_STR("kind", "Kind of the object.")
         P_STR("uid", "UID of the object.")
         P_REFLIST("causes", META "StatusCause", "Individual causes, e.g. invalid fields.")
         P_I32("retryAfterSeconds", "Seconds to wait before retrying."))},
    {META "StatusCause",
     OBJ("One cause of a failure.",
         P_STR("reason", "Machine-readable cause, e.g. FieldValueInvalid.")
         P_STR("message", "Human-readable description.")
         P_STR("field", "Path of the field concerned, e.g. spec.replicas."))},
    {META "DeleteOptions",
     OBJ("Options of a delete request.",
         TYPEMETA P_I64("gracePeriodSeconds", "Seconds before the object is deleted.")
         P_REF("preconditions", META "Preconditions", "Must hold for the delete to proceed.")
         P_BOOL("orphanDependents", "Deprecated: use propagationPolicy.")
         P_STR("propagationPolicy", "Orphan, Background or Foreground.")
         P_STRLIST("dryRun", "All to simulate the request without persisting it.")
         P_BOOL("ignoreStoreReadErrorWithClusterBreakingPotential",
                "Delete even if the stored object cannot be read."))},
    {META "Preconditions",
     OBJ("Conditions that must hold before an operation.",
         P_STR("uid", "Expected UID.") P_STR("resourceVersion", "Expected resourceVersion."))},
    {META "Patch", "{`type`:`object`,`description`:`The body of a PATCH request: a JSON patch, "
                   "merge patch, strategic merge patch or apply configuration.`}"},
    {"io.k8s.api.autoscaling.v1.Scale",
     OBJ("Desired and observed replica count of a scalable resource.",
         TYPEMETA OBJMETA
         P_REF("spec", "io.k8s.api.autoscaling.v1.ScaleSpec", "Desired state.")
         P_REF("status", "io.k8s.api.autoscaling.v1.ScaleStatus", "Observed state."))},
    {"io.k8s.api.autoscaling.v1.ScaleSpec",
     OBJ("Desired state of a scale.", P_I32("replicas", "Desired number of replicas."))},
    {"io.k8s.api.autoscaling.v1.ScaleStatus",
     OBJ_REQ("Observed state of a scale.", "`replicas`",
             P_I32("replicas", "Observed number of replicas.")
             P_STR("selector", "Label query over the pods, in string form."))},
    {INTSTR, "{`x-kubernetes-int-or-string`:true,`format`:`int-or-string`,"
             "`description`:`A value that is either an integer or a string.`}"},
    {QTY, "{`description`:`A fixed-point quantity such as 100m, 1.5, 2Gi or 1e3.`}"},

    /* --- core/v1: references --- */
    {CORE "ObjectReference",
     OBJ("A reference to another object.",
         P_STR("kind", "Kind of the referent.")
         P_STR("namespace", "Namespace of the referent.")
         P_STR("name", "Name of the referent.")
         P_STR("uid", "UID of the referent.")
         P_STR("apiVersion", "API version of the referent.")
         P_STR("resourceVersion", "Specific resourceVersion the reference is about.")
         P_STR("fieldPath", "A field inside the referent, e.g. spec.containers{name}."))},
    {CORE "LocalObjectReference",
     OBJ("A reference to an object by name in the same namespace.",
         P_STR("name", "Name of the referent."))},
    {CORE "KeyToPath",
     OBJ_REQ("Maps a key of a ConfigMap or Secret to a file path.", "`key`,`path`",
             P_STR("key", "The key to project.")
             P_STR("path", "Relative file path to write the value to.")
             P_I32("mode", "Permission bits of the file."))},

    /* --- core/v1: pods --- */
    {CORE "PodTemplateSpec",
     OBJ("Template of the pods a controller creates.",
         OBJMETA P_REF("spec", CORE "PodSpec", "Desired behaviour of the pods."))},
    {CORE "PodSpec",
     OBJ_REQ(
         "Desired state of a pod.", "`containers`",
         P_REFLIST("volumes", CORE "Volume", "Volumes that containers of the pod can mount.")
         P_REFLIST("initContainers", CORE "Container",
                   "Containers run to completion, in order, before the app containers start.")
         P_REFLIST("containers", CORE "Container", "The containers of the pod; at least one.")
         P_ANYLIST("ephemeralContainers", "Debugging containers added to a running pod.")
         P_STR("restartPolicy", "Always, OnFailure or Never. Default Always.")
         P_I64("terminationGracePeriodSeconds", "Seconds to wait for graceful termination.")
         P_I64("activeDeadlineSeconds", "Seconds the pod may be active before it is failed.")
         P_STR("dnsPolicy", "ClusterFirstWithHostNet, ClusterFirst, Default or None.")
         P_STRMAP("nodeSelector", "Labels a node must have for the pod to be scheduled there.")
         P_STR("serviceAccountName", "Service account the pod runs as.")
         P_STR("serviceAccount", "Deprecated alias of serviceAccountName.")
         P_BOOL("automountServiceAccountToken", "Whether to mount the service account token.")
         P_STR("nodeName", "Node the pod is bound to.")
         P_BOOL("hostNetwork", "Use the host's network namespace.")
         P_BOOL("hostPID", "Use the host's PID namespace.")
         P_BOOL("hostIPC", "Use the host's IPC namespace.")
         P_BOOL("shareProcessNamespace", "Share one PID namespace among the containers.")
         P_REF("securityContext", CORE "PodSecurityContext", "Pod-level security attributes.")
         P_REFLIST("imagePullSecrets", CORE "LocalObjectReference",
                   "Secrets used to pull the images.")
         P_STR("hostname", "Hostname of the pod; defaults to the pod name.")
         P_STR("subdomain", "Subdomain, giving the pod a FQDN under a headless service.")
         P_ANYOBJ("affinity", "Node and pod (anti-)affinity scheduling constraints.")
         P_STR("schedulerName", "Scheduler that schedules the pod.")
         P_REFLIST("tolerations", CORE "Toleration", "Taints the pod tolerates.")
         P_REFLIST("hostAliases", CORE "HostAlias", "Extra entries for the pod's hosts file.")
         P_STR("priorityClassName", "Name of the pod's PriorityClass.")
         P_I32("priority", "Priority value, resolved from priorityClassName.")
         P_REF("dnsConfig", CORE "PodDNSConfig", "DNS settings in addition to dnsPolicy.")
         P_REFLIST("readinessGates", CORE "PodReadinessGate",
                   "Extra conditions that must hold for the pod to be ready.")
         P_STR("runtimeClassName", "RuntimeClass used to run the pod.")
         P_BOOL("enableServiceLinks", "Inject service environment variables. Default true.")
         P_STR("preemptionPolicy", "Never or PreemptLowerPriority.")
         P_REFMAP("overhead", QTY, "Resource overhead of running the pod.")
         P_ANYLIST("topologySpreadConstraints", "How pods spread across topology domains.")
         P_BOOL("setHostnameAsFQDN", "Set the hostname to the pod's FQDN.")
         P_REF("os", CORE "PodOS", "Operating system of the containers.")
         P_BOOL("hostUsers", "Use the host's user namespace.")
         P_REFLIST("schedulingGates", CORE "PodSchedulingGate",
                   "Gates that block scheduling while present.")
         P_ANYLIST("resourceClaims", "Dynamic resource claims the pod uses.")
         P_REF("resources", CORE "ResourceRequirements", "Pod-level resource requirements."))},
    {CORE "Container",
     OBJ_REQ(
         "A single application container of a pod.", "`name`",
         P_STR("name", "Name of the container, a DNS label unique within the pod.")
         P_STR("image", "Container image name.")
         P_STRLIST("command", "Entrypoint array; the image's ENTRYPOINT if not set.")
         P_STRLIST("args", "Arguments to the entrypoint; the image's CMD if not set.")
         P_STR("workingDir", "Working directory of the container.")
         P_REFLIST("ports", CORE "ContainerPort", "Ports to expose from the container.")
         P_REFLIST("envFrom", CORE "EnvFromSource", "Sources of environment variables.")
         P_REFLIST("env", CORE "EnvVar", "Environment variables to set.")
         P_REF("resources", CORE "ResourceRequirements", "Compute resources required.")
         P_REFLIST("resizePolicy", CORE "ContainerResizePolicy", "Resource resize policy.")
         P_STR("restartPolicy", "Only Always, for init containers that run as sidecars.")
         P_REFLIST("volumeMounts", CORE "VolumeMount", "Volumes to mount into the filesystem.")
         P_REFLIST("volumeDevices", CORE "VolumeDevice", "Block devices to use.")
         P_REF("livenessProbe", CORE "Probe", "Restarts the container when it fails.")
         P_REF("readinessProbe", CORE "Probe", "Removes the pod from endpoints when it fails.")
         P_REF("startupProbe", CORE "Probe", "Other probes wait until this one succeeds.")
         P_REF("lifecycle", CORE "Lifecycle", "Actions run on container start and stop.")
         P_STR("terminationMessagePath", "File the termination message is read from.")
         P_STR("terminationMessagePolicy", "File or FallbackToLogsOnError.")
         P_STR("imagePullPolicy", "Always, Never or IfNotPresent.")
         P_REF("securityContext", CORE "SecurityContext", "Security options of the container.")
         P_BOOL("stdin", "Allocate a stdin buffer.")
         P_BOOL("stdinOnce", "Close stdin after the first attach disconnects.")
         P_BOOL("tty", "Allocate a TTY."))},
    {CORE "ContainerPort",
     OBJ_REQ("A network port of a container.", "`containerPort`",
             P_STR("name", "Name of the port, an IANA_SVC_NAME unique within the pod.")
             P_I32("hostPort", "Port to expose on the host.")
             P_I32("containerPort", "Port number on the pod's IP address.")
             P_STR("protocol", "UDP, TCP or SCTP. Default TCP.")
             P_STR("hostIP", "Host IP to bind the host port to."))},
    {CORE "EnvVar",
     OBJ_REQ("An environment variable.", "`name`",
             P_STR("name", "Name of the variable.")
             P_STR("value", "Value, with $(VAR) references expanded.")
             P_REF("valueFrom", CORE "EnvVarSource", "Source of the value if value is empty."))},
    {CORE "EnvVarSource",
     OBJ_OPEN("Source of an environment variable's value.",
              P_REF("fieldRef", CORE "ObjectFieldSelector", "A field of the pod.")
              P_REF("resourceFieldRef", CORE "ResourceFieldSelector",
                    "A resource limit or request of a container.")
              P_REF("configMapKeyRef", CORE "ConfigMapKeySelector", "A key of a ConfigMap.")
              P_REF("secretKeyRef", CORE "SecretKeySelector", "A key of a Secret."))},
    {CORE "ObjectFieldSelector",
     OBJ_REQ("Selects a field of an object.", "`fieldPath`",
             P_STR("apiVersion", "Version of the schema the path is written in.")
             P_STR("fieldPath", "Path of the field."))},
    {CORE "ResourceFieldSelector",
     OBJ_REQ("Selects a container resource.", "`resource`",
             P_STR("containerName", "Container name; required for volumes.")
             P_STR("resource", "The resource, e.g. limits.cpu.")
             P_REF("divisor", QTY, "Output format of the exposed value. Default 1."))},
    {CORE "ConfigMapKeySelector",
     OBJ_REQ("Selects a key of a ConfigMap.", "`key`",
             P_STR("name", "Name of the ConfigMap.")
             P_STR("key", "The key.")
             P_BOOL("optional", "Whether the ConfigMap or key may be missing."))},
    {CORE "SecretKeySelector",
     OBJ_REQ("Selects a key of a Secret.", "`key`",
             P_STR("name", "Name of the Secret.")
             P_STR("key", "The key.")
             P_BOOL("optional", "Whether the Secret or key may be missing."))},
    {CORE "EnvFromSource",
     OBJ("A source of a set of environment variables.",
         P_STR("prefix", "Prefix added to every key.")
         P_REF("configMapRef", CORE "ConfigMapEnvSource", "The ConfigMap to read.")
         P_REF("secretRef", CORE "SecretEnvSource", "The Secret to read."))},
    {CORE "ConfigMapEnvSource",
     OBJ("Selects a ConfigMap to populate environment variables.",
         P_STR("name", "Name of the ConfigMap.")
         P_BOOL("optional", "Whether the ConfigMap may be missing."))},
    {CORE "SecretEnvSource",
     OBJ("Selects a Secret to populate environment variables.",
         P_STR("name", "Name of the Secret.")
         P_BOOL("optional", "Whether the Secret may be missing."))},
    {CORE "ResourceRequirements",
     OBJ("Compute resource requirements.",
         P_REFMAP("limits", QTY, "Maximum amount of each resource allowed.")
         P_REFMAP("requests", QTY, "Minimum amount of each resource required.")
         P_REFLIST("claims", CORE "ResourceClaim", "Dynamic resource claims used."))},
    {CORE "ResourceClaim",
     OBJ_REQ("A reference to a pod resource claim.", "`name`",
             P_STR("name", "Name of the claim in the pod spec.")
             P_STR("request", "A request within the claim."))},
    {CORE "ContainerResizePolicy",
     OBJ_REQ("How a resource is resized.", "`resourceName`,`restartPolicy`",
             P_STR("resourceName", "cpu or memory.")
             P_STR("restartPolicy", "NotRequired or RestartContainer."))},
    {CORE "VolumeMount",
     OBJ_REQ("Mounts a volume into a container.", "`name`,`mountPath`",
             P_STR("name", "Name of the volume.")
             P_BOOL("readOnly", "Mount read-only.")
             P_STR("recursiveReadOnly", "Disabled, IfPossible or Enabled.")
             P_STR("mountPath", "Path in the container to mount at.")
             P_STR("subPath", "Path within the volume to mount instead of its root.")
             P_STR("mountPropagation", "None, HostToContainer or Bidirectional.")
             P_STR("subPathExpr", "Like subPath, with $(VAR) expansion."))},
    {CORE "VolumeDevice",
     OBJ_REQ("Maps a raw block device into a container.", "`name`,`devicePath`",
             P_STR("name", "Name of the persistentVolumeClaim volume.")
             P_STR("devicePath", "Path in the container to map the device to."))},
    {CORE "Probe",
     OBJ("A health check run against a container.",
         P_REF("exec", CORE "ExecAction", "Run a command.")
         P_REF("httpGet", CORE "HTTPGetAction", "Send an HTTP GET.")
         P_REF("tcpSocket", CORE "TCPSocketAction", "Open a TCP connection.")
         P_REF("grpc", CORE "GRPCAction", "Call the gRPC health service.")
         P_I32("initialDelaySeconds", "Seconds after start before probing.")
         P_I32("timeoutSeconds", "Seconds before the probe times out. Default 1.")
         P_I32("periodSeconds", "Seconds between probes. Default 10.")
         P_I32("successThreshold", "Successes needed after a failure. Default 1.")
         P_I32("failureThreshold", "Failures needed to give up. Default 3.")
         P_I64("terminationGracePeriodSeconds", "Grace period when the probe fails."))},
    {CORE "ExecAction",
     OBJ("Runs a command in the container.", P_STRLIST("command", "Command line to run."))},
    {CORE "HTTPGetAction",
     OBJ_REQ("An HTTP GET request.", "`port`",
             P_STR("path", "Path to request.")
             P_REF("port", INTSTR, "Port number or name.")
             P_STR("host", "Host name; the pod IP by default.")
             P_STR("scheme", "HTTP or HTTPS. Default HTTP.")
             P_REFLIST("httpHeaders", CORE "HTTPHeader", "Custom request headers."))},
    {CORE "HTTPHeader",
     OBJ_REQ("An HTTP header.", "`name`,`value`",
             P_STR("name", "Header name.") P_STR("value", "Header value."))},
    {CORE "TCPSocketAction",
     OBJ_REQ("A TCP connection attempt.", "`port`",
             P_REF("port", INTSTR, "Port number or name.")
             P_STR("host", "Host name; the pod IP by default."))},
    {CORE "GRPCAction",
     OBJ_REQ("A gRPC health check.", "`port`",
             P_I32("port", "Port number.")
             P_STR("service", "Service name sent in the health check request."))},
    {CORE "Lifecycle",
     OBJ_OPEN("Actions run on container lifecycle events.",
              P_REF("postStart", CORE "LifecycleHandler", "Run right after the container starts.")
              P_REF("preStop", CORE "LifecycleHandler", "Run before the container is stopped.")
              P_STR("stopSignal", "Signal used to stop the container."))},
    {CORE "LifecycleHandler",
     OBJ_OPEN("One lifecycle action.",
              P_REF("exec", CORE "ExecAction", "Run a command.")
              P_REF("httpGet", CORE "HTTPGetAction", "Send an HTTP GET.")
              P_REF("tcpSocket", CORE "TCPSocketAction", "Deprecated TCP check.")
              P_ANYOBJ("sleep", "Sleep for a number of seconds."))},
    {CORE "SecurityContext",
     OBJ_OPEN("Security options of a container.",
              P_ANYOBJ("capabilities", "Capabilities to add and drop.")
              P_BOOL("privileged", "Run in privileged mode.")
              P_ANYOBJ("seLinuxOptions", "SELinux context.")
              P_ANYOBJ("windowsOptions", "Windows-specific options.")
              P_I64("runAsUser", "UID to run the entrypoint as.")
              P_I64("runAsGroup", "GID to run the entrypoint as.")
              P_BOOL("runAsNonRoot", "Refuse to start as UID 0.")
              P_BOOL("readOnlyRootFilesystem", "Mount the root filesystem read-only.")
              P_BOOL("allowPrivilegeEscalation", "Allow gaining more privileges than the parent.")
              P_STR("procMount", "Default or Unmasked.")
              P_ANYOBJ("seccompProfile", "Seccomp options.")
              P_ANYOBJ("appArmorProfile", "AppArmor options."))},
    {CORE "PodSecurityContext",
     OBJ_OPEN("Security options that apply to all containers of a pod.",
              P_ANYOBJ("seLinuxOptions", "SELinux context.")
              P_ANYOBJ("windowsOptions", "Windows-specific options.")
              P_I64("runAsUser", "UID to run entrypoints as.")
              P_I64("runAsGroup", "GID to run entrypoints as.")
              P_BOOL("runAsNonRoot", "Refuse to start containers as UID 0.")
              P_I64LIST("supplementalGroups", "Extra groups of the first process.")
              P_STR("supplementalGroupsPolicy", "Merge or Strict.")
              P_I64("fsGroup", "Group that owns the volumes.")
              P_ANYLIST("sysctls", "Namespaced sysctls to set.")
              P_STR("fsGroupChangePolicy", "OnRootMismatch or Always.")
              P_ANYOBJ("seccompProfile", "Seccomp options.")
              P_ANYOBJ("appArmorProfile", "AppArmor options.")
              P_STR("seLinuxChangePolicy", "MountOption or Recursive."))},
    {CORE "Toleration",
     OBJ("Lets a pod schedule onto nodes with a matching taint.",
         P_STR("key", "Taint key; empty matches all keys.")
         P_STR("operator", "Exists or Equal. Default Equal.")
         P_STR("value", "Taint value to match.")
         P_STR("effect", "NoSchedule, PreferNoSchedule or NoExecute; empty matches all.")
         P_I64("tolerationSeconds", "How long a NoExecute taint is tolerated."))},
    {CORE "HostAlias",
     OBJ_REQ("An entry of the pod's hosts file.", "`ip`",
             P_STR("ip", "IP address.") P_STRLIST("hostnames", "Host names for the address."))},
    {CORE "PodDNSConfig",
     OBJ("DNS settings of a pod.",
         P_STRLIST("nameservers", "DNS server IP addresses.")
         P_STRLIST("searches", "DNS search domains.")
         P_ANYLIST("options", "Resolver options (name and value)."))},
    {CORE "PodReadinessGate",
     OBJ_REQ("A pod condition that must be true for readiness.", "`conditionType`",
             P_STR("conditionType", "The pod condition type."))},
    {CORE "PodOS",
     OBJ_REQ("The operating system of a pod.", "`name`", P_STR("name", "linux or windows."))},
    {CORE "PodSchedulingGate",
     OBJ_REQ("A gate that keeps a pod from being scheduled.", "`name`",
             P_STR("name", "Name of the gate."))},
    {CORE "Volume",
     OBJ_OPEN_REQ("A named volume that containers of the pod can mount.", "`name`",
                  P_STR("name", "Name of the volume, a DNS label unique within the pod.")
                  P_REF("hostPath", CORE "HostPathVolumeSource", "A path on the host.")
                  P_REF("emptyDir", CORE "EmptyDirVolumeSource", "A temporary directory.")
                  P_REF("secret", CORE "SecretVolumeSource", "The keys of a Secret.")
                  P_REF("configMap", CORE "ConfigMapVolumeSource", "The keys of a ConfigMap.")
                  P_REF("persistentVolumeClaim", CORE "PersistentVolumeClaimVolumeSource",
                        "A PersistentVolumeClaim in the same namespace.")
                  P_ANYOBJ("projected", "Several sources projected into one directory.")
                  P_ANYOBJ("downwardAPI", "Pod fields as files.")
                  P_ANYOBJ("nfs", "An NFS export.")
                  P_ANYOBJ("csi", "An ephemeral CSI volume.")
                  P_ANYOBJ("ephemeral", "A volume provisioned for the pod's lifetime.")
                  P_ANYOBJ("image", "An OCI image or artifact."))},
    {CORE "HostPathVolumeSource",
     OBJ_REQ("A file or directory on the host.", "`path`",
             P_STR("path", "Path on the host.")
             P_STR("type", "Expected type of the path, e.g. Directory or File."))},
    {CORE "EmptyDirVolumeSource",
     OBJ("A temporary directory sharing the pod's lifetime.",
         P_STR("medium", "Storage medium: empty for the node default, or Memory.")
         P_REF("sizeLimit", QTY, "Maximum size."))},
    {CORE "SecretVolumeSource",
     OBJ("Presents a Secret's keys as files.",
         P_STR("secretName", "Name of the Secret.")
         P_REFLIST("items", CORE "KeyToPath", "Keys to project; all keys if empty.")
         P_I32("defaultMode", "Permission bits of the files. Default 0644.")
         P_BOOL("optional", "Whether the Secret may be missing."))},
    {CORE "ConfigMapVolumeSource",
     OBJ("Presents a ConfigMap's keys as files.",
         P_STR("name", "Name of the ConfigMap.")
         P_REFLIST("items", CORE "KeyToPath", "Keys to project; all keys if empty.")
         P_I32("defaultMode", "Permission bits of the files. Default 0644.")
         P_BOOL("optional", "Whether the ConfigMap may be missing."))},
    {CORE "PersistentVolumeClaimVolumeSource",
     OBJ_REQ("Refers to a PersistentVolumeClaim.", "`claimName`",
             P_STR("claimName", "Name of the claim.")
             P_BOOL("readOnly", "Mount read-only."))},
    {CORE "PodStatus",
     OBJ_OPEN("Most recently observed state of a pod.",
              P_STR("phase", "Pending, Running, Succeeded, Failed or Unknown.")
              P_REFLIST("conditions", CORE "PodCondition", "Current service state of the pod.")
              P_STR("message", "Why the pod is in this condition.")
              P_STR("reason", "Brief CamelCase reason for the state.")
              P_STR("nominatedNodeName", "Node the pod may be scheduled on after preemption.")
              P_STR("hostIP", "IP of the node the pod runs on.")
              P_ANYLIST("hostIPs", "IPs of the node the pod runs on.")
              P_STR("podIP", "IP address of the pod.")
              P_ANYLIST("podIPs", "IP addresses of the pod.")
              P_TIME("startTime", "When the pod was acknowledged by the kubelet.")
              P_REFLIST("initContainerStatuses", CORE "ContainerStatus",
                        "Statuses of the init containers.")
              P_REFLIST("containerStatuses", CORE "ContainerStatus",
                        "Statuses of the containers.")
              P_REFLIST("ephemeralContainerStatuses", CORE "ContainerStatus",
                        "Statuses of the ephemeral containers.")
              P_STR("qosClass", "Guaranteed, Burstable or BestEffort.")
              P_STR("resize", "Status of a pending resize.")
              P_ANYLIST("resourceClaimStatuses", "Status of resource claims.")
              P_I64("observedGeneration", "Generation observed by the kubelet."))},
    {CORE "PodCondition",
     OBJ_REQ("One aspect of a pod's state.", "`type`,`status`",
             P_STR("type", "Condition type, e.g. Ready.")
             P_STR("status", "True, False or Unknown.")
             P_I64("observedGeneration", "The generation the condition was computed for.")
             P_TIME("lastProbeTime", "When the condition was last probed.")
             P_TIME("lastTransitionTime", "When the status last changed.")
             P_STR("reason", "CamelCase reason for the last transition.")
             P_STR("message", "Human-readable details."))},
    {CORE "ContainerStatus",
     OBJ_OPEN("Observed state of one container.",
              P_STR("name", "Name of the container.")
              P_ANYOBJ("state", "Current state: waiting, running or terminated.")
              P_ANYOBJ("lastState", "Previous termination state.")
              P_BOOL("ready", "Whether the container passes its readiness probe.")
              P_I32("restartCount", "Number of restarts.")
              P_STR("image", "Image the container runs.")
              P_STR("imageID", "Image ID of the container.")
              P_STR("containerID", "Runtime ID of the container.")
              P_BOOL("started", "Whether the container passed its startup probe."))},

    /* --- core/v1: namespaces, services, endpoints, nodes, events --- */
    {CORE "NamespaceSpec",
     OBJ("Desired state of a namespace.",
         P_STRLIST("finalizers", "Cleanup steps that must finish before the namespace is "
                                 "removed."))},
    {CORE "NamespaceStatus",
     OBJ("Observed state of a namespace.",
         P_STR("phase", "Active or Terminating.")
         P_REFLIST("conditions", CORE "NamespaceCondition", "Current state of the namespace."))},
    {CORE "NamespaceCondition",
     OBJ_REQ("One aspect of a namespace's state.", "`type`,`status`",
             P_STR("type", "Condition type.")
             P_STR("status", "True, False or Unknown.")
             P_TIME("lastTransitionTime", "When the status last changed.")
             P_STR("reason", "CamelCase reason for the last transition.")
             P_STR("message", "Human-readable details."))},
    {CORE "ServiceSpec",
     OBJ("Desired state of a service.",
         P_REFLIST("ports", CORE "ServicePort", "Ports the service exposes.")
         P_STRMAP("selector", "Pods with these labels receive the traffic.")
         P_STR("clusterIP", "Virtual IP of the service; None for a headless service.")
         P_STRLIST("clusterIPs", "Virtual IPs of the service, one per IP family.")
         P_STR("type", "ClusterIP, NodePort, LoadBalancer or ExternalName.")
         P_STRLIST("externalIPs", "Extra IPs nodes accept traffic for.")
         P_STR("sessionAffinity", "ClientIP or None.")
         P_STR("loadBalancerIP", "Deprecated: requested load balancer IP.")
         P_STRLIST("loadBalancerSourceRanges", "Client CIDRs allowed through the load "
                                               "balancer.")
         P_STR("externalName", "DNS name returned for an ExternalName service.")
         P_STR("externalTrafficPolicy", "Cluster or Local.")
         P_I32("healthCheckNodePort", "Health check node port for Local traffic policy.")
         P_BOOL("publishNotReadyAddresses", "Publish endpoints of pods that are not ready.")
         P_ANYOBJ("sessionAffinityConfig", "Session affinity settings.")
         P_STRLIST("ipFamilies", "IPv4 and/or IPv6.")
         P_STR("ipFamilyPolicy", "SingleStack, PreferDualStack or RequireDualStack.")
         P_BOOL("allocateLoadBalancerNodePorts", "Allocate node ports for LoadBalancer.")
         P_STR("loadBalancerClass", "Load balancer implementation to use.")
         P_STR("internalTrafficPolicy", "Cluster or Local.")
         P_STR("trafficDistribution", "Preference for how traffic is distributed."))},
    {CORE "ServicePort",
     OBJ_REQ("A port of a service.", "`port`",
             P_STR("name", "Name of the port; required when there are several.")
             P_STR("protocol", "TCP, UDP or SCTP. Default TCP.")
             P_STR("appProtocol", "Application protocol of the port.")
             P_I32("port", "Port the service exposes.")
             P_REF("targetPort", INTSTR, "Port number or name on the pods.")
             P_I32("nodePort", "Port on each node for NodePort and LoadBalancer services."))},
    {CORE "ServiceStatus",
     OBJ("Observed state of a service.",
         P_REF("loadBalancer", CORE "LoadBalancerStatus", "State of the load balancer.")
         P_REFLIST("conditions", META "Condition", "Current state of the service."))},
    {CORE "LoadBalancerStatus",
     OBJ("State of a load balancer.",
         P_REFLIST("ingress", CORE "LoadBalancerIngress", "Ingress points of the load balancer."))},
    {CORE "LoadBalancerIngress",
     OBJ("An ingress point of a load balancer.",
         P_STR("ip", "IP address.")
         P_STR("hostname", "Host name.")
         P_STR("ipMode", "VIP or Proxy.")
         P_ANYLIST("ports", "Port statuses."))},
    {CORE "EndpointSubset",
     OBJ("A group of addresses sharing a set of ports.",
         P_REFLIST("addresses", CORE "EndpointAddress", "Ready addresses.")
         P_REFLIST("notReadyAddresses", CORE "EndpointAddress", "Addresses not ready yet.")
         P_REFLIST("ports", CORE "EndpointPort", "Port numbers available."))},
    {CORE "EndpointAddress",
     OBJ_REQ("A single endpoint address.", "`ip`",
             P_STR("ip", "IP address of the endpoint.")
             P_STR("hostname", "Hostname of the endpoint.")
             P_STR("nodeName", "Node hosting the endpoint.")
             P_REF("targetRef", CORE "ObjectReference", "Object providing the endpoint."))},
    {CORE "EndpointPort",
     OBJ_REQ("A port of an endpoint.", "`port`",
             P_STR("name", "Name of the port, matching the service port's name.")
             P_I32("port", "Port number.")
             P_STR("protocol", "TCP, UDP or SCTP. Default TCP.")
             P_STR("appProtocol", "Application protocol of the port."))},
    {CORE "NodeSpec",
     OBJ("Desired state of a node.",
         P_STR("podCIDR", "Pod IP range assigned to the node.")
         P_STRLIST("podCIDRs", "Pod IP ranges assigned to the node.")
         P_STR("providerID", "ID of the node assigned by the cloud provider.")
         P_BOOL("unschedulable", "Keep new pods off the node.")
         P_REFLIST("taints", CORE "Taint", "Taints of the node.")
         P_ANYOBJ("configSource", "Deprecated dynamic kubelet configuration.")
         P_STR("externalID", "Deprecated."))},
    {CORE "Taint",
     OBJ_REQ("Repels pods that do not tolerate it.", "`key`,`effect`",
             P_STR("key", "Taint key.")
             P_STR("value", "Taint value.")
             P_STR("effect", "NoSchedule, PreferNoSchedule or NoExecute.")
             P_TIME("timeAdded", "When a NoExecute taint was added."))},
    {CORE "NodeStatus",
     OBJ_OPEN("Observed state of a node.",
              P_REFMAP("capacity", QTY, "Total resources of the node.")
              P_REFMAP("allocatable", QTY, "Resources available for scheduling.")
              P_STR("phase", "Deprecated lifecycle phase.")
              P_REFLIST("conditions", CORE "NodeCondition", "Current state of the node.")
              P_REFLIST("addresses", CORE "NodeAddress", "Addresses of the node.")
              P_ANYOBJ("daemonEndpoints", "Ports of daemons on the node.")
              P_REF("nodeInfo", CORE "NodeSystemInfo", "General information about the node.")
              P_ANYLIST("images", "Container images on the node.")
              P_STRLIST("volumesInUse", "Volumes in use by the node.")
              P_ANYLIST("volumesAttached", "Volumes attached to the node.")
              P_ANYOBJ("config", "Status of the node's configuration.")
              P_ANYLIST("runtimeHandlers", "Available runtime handlers.")
              P_ANYOBJ("features", "Features the node supports."))},
    {CORE "NodeCondition",
     OBJ_REQ("One aspect of a node's state.", "`type`,`status`",
             P_STR("type", "Condition type, e.g. Ready.")
             P_STR("status", "True, False or Unknown.")
             P_TIME("lastHeartbeatTime", "When the condition was last updated.")
             P_TIME("lastTransitionTime", "When the status last changed.")
             P_STR("reason", "CamelCase reason for the last transition.")
             P_STR("message", "Human-readable details."))},
    {CORE "NodeAddress",
     OBJ_REQ("An address of a node.", "`type`,`address`",
             P_STR("type", "Hostname, InternalIP, ExternalIP, InternalDNS or ExternalDNS.")
             P_STR("address", "The address."))},
    {CORE "NodeSystemInfo",
     OBJ_OPEN("Identifying information about a node.",
              P_STR("machineID", "Machine ID.")
              P_STR("systemUUID", "System UUID.")
              P_STR("bootID", "Boot ID.")
              P_STR("kernelVersion", "Kernel version.")
              P_STR("osImage", "OS image.")
              P_STR("containerRuntimeVersion", "Container runtime and version.")
              P_STR("kubeletVersion", "Kubelet version.")
              P_STR("kubeProxyVersion", "Deprecated kube-proxy version.")
              P_STR("operatingSystem", "Operating system.")
              P_STR("architecture", "CPU architecture.")
              P_ANYOBJ("swap", "Swap information."))},
    {CORE "EventSource",
     OBJ("The component that reported an event.",
         P_STR("component", "Component name.") P_STR("host", "Node name."))},
    {CORE "EventSeries",
     OBJ("A series of repeated events.",
         P_I32("count", "Occurrences in the series so far.")
         P_TIME("lastObservedTime", "When the last occurrence was observed."))},

    /* --- apps/v1 --- */
    {APPS "DeploymentSpec",
     OBJ_REQ("Desired state of a deployment.", "`selector`,`template`",
             P_I32("replicas", "Number of desired pods. Default 1.")
             P_REF("selector", META "LabelSelector",
                   "Label selector of the pods; must match the template's labels.")
             P_REF("template", CORE "PodTemplateSpec", "Template of the pods to create.")
             P_REF("strategy", APPS "DeploymentStrategy", "How old pods are replaced.")
             P_I32("minReadySeconds", "Seconds a new pod must be ready to count as available.")
             P_I32("revisionHistoryLimit", "Old ReplicaSets to keep for rollback. Default 10.")
             P_BOOL("paused", "Whether the deployment is paused.")
             P_I32("progressDeadlineSeconds", "Seconds before a stalled rollout is reported as "
                                              "failed. Default 600."))},
    {APPS "DeploymentStrategy",
     OBJ("How a deployment replaces pods.",
         P_STR("type", "Recreate or RollingUpdate. Default RollingUpdate.")
         P_REF("rollingUpdate", APPS "RollingUpdateDeployment", "Rolling update parameters."))},
    {APPS "RollingUpdateDeployment",
     OBJ("Parameters of a rolling update.",
         P_REF("maxUnavailable", INTSTR, "Pods that may be unavailable during the update. "
                                         "Default 25%.")
         P_REF("maxSurge", INTSTR, "Pods that may exist above the desired count. Default 25%."))},
    {APPS "DeploymentStatus",
     OBJ("Observed state of a deployment.",
         P_I64("observedGeneration", "Generation observed by the controller.")
         P_I32("replicas", "Pods targeted by the deployment.")
         P_I32("updatedReplicas", "Pods with the current template.")
         P_I32("readyReplicas", "Pods that are ready.")
         P_I32("availableReplicas", "Pods available for at least minReadySeconds.")
         P_I32("unavailableReplicas", "Pods still needed for full availability.")
         P_I32("terminatingReplicas", "Pods that are terminating.")
         P_REFLIST("conditions", APPS "DeploymentCondition", "Current state of the deployment.")
         P_I32("collisionCount", "Hash collision counter for naming ReplicaSets."))},
    {APPS "DeploymentCondition",
     OBJ_REQ("One aspect of a deployment's state.", "`type`,`status`",
             P_STR("type", "Available, Progressing or ReplicaFailure.")
             P_STR("status", "True, False or Unknown.")
             P_TIME("lastUpdateTime", "When the condition was last updated.")
             P_TIME("lastTransitionTime", "When the status last changed.")
             P_STR("reason", "CamelCase reason for the last transition.")
             P_STR("message", "Human-readable details."))},
    {APPS "ReplicaSetSpec",
     OBJ_REQ("Desired state of a ReplicaSet.", "`selector`",
             P_I32("replicas", "Number of desired pods. Default 1.")
             P_I32("minReadySeconds", "Seconds a new pod must be ready to count as available.")
             P_REF("selector", META "LabelSelector",
                   "Label selector of the pods; must match the template's labels.")
             P_REF("template", CORE "PodTemplateSpec", "Template of the pods to create."))},
    {APPS "ReplicaSetStatus",
     OBJ("Observed state of a ReplicaSet.",
         P_I32("replicas", "Most recently observed number of pods.")
         P_I32("fullyLabeledReplicas", "Pods whose labels match the template's.")
         P_I32("readyReplicas", "Pods that are ready.")
         P_I32("availableReplicas", "Pods available for at least minReadySeconds.")
         P_I32("terminatingReplicas", "Pods that are terminating.")
         P_I64("observedGeneration", "Generation observed by the controller.")
         P_REFLIST("conditions", APPS "ReplicaSetCondition", "Current state of the ReplicaSet."))},
    {APPS "ReplicaSetCondition",
     OBJ_REQ("One aspect of a ReplicaSet's state.", "`type`,`status`",
             P_STR("type", "Condition type.")
             P_STR("status", "True, False or Unknown.")
             P_TIME("lastTransitionTime", "When the status last changed.")
             P_STR("reason", "CamelCase reason for the last transition.")
             P_STR("message", "Human-readable details."))},

    /* --- coordination.k8s.io/v1, events.k8s.io/v1 --- */
    {COORD "LeaseSpec",
     OBJ("Desired state of a lease.",
         P_STR("holderIdentity", "Identity of the current holder.")
         P_I32("leaseDurationSeconds", "Seconds candidates wait before taking the lease over.")
         P_TIME("acquireTime", "When the current holder acquired the lease.")
         P_TIME("renewTime", "When the current holder last renewed the lease.")
         P_I32("leaseTransitions", "Number of holder changes.")
         P_STR("strategy", "Strategy for picking the leader in coordinated election.")
         P_STR("preferredHolder", "Holder the lease should move to."))},
    {EVTS "EventSeries",
     OBJ_REQ("A series of repeated events.", "`count`,`lastObservedTime`",
             P_I32("count", "Occurrences in the series so far.")
             P_TIME("lastObservedTime", "When the last occurrence was observed."))},

    /* --- rbac.authorization.k8s.io/v1. The lists are atomic (no patch
     * strategy upstream); what a rule or a binding must hold is the
     * types' validation's (registry/rbac). --- */
    {RBAC "PolicyRule",
     OBJ_XREQ("What a rule allows: verbs on resources of API groups, or verbs on non-resource "
              "URLs. It says nothing of who it applies to or where.",
              "`verbs`",
              P_STRLIST("verbs", "Verbs the rule allows on everything it names; '*' for all.")
              P_STRLIST("apiGroups", "API groups of the resources ('' for the core group, '*' "
                                     "for all). Any of them matches.")
              P_STRLIST("resources", "Resources the rule applies to, with subresources as "
                                     "resource/subresource; '*' for all.")
              P_STRLIST("resourceNames", "Names of the objects the rule is limited to; empty "
                                         "for all of them.")
              P_STRLIST("nonResourceURLs", "URL paths that are not resources (such as /healthz); a "
                                           "trailing '*' matches any suffix. Only for ClusterRoles "
                                           "bound by ClusterRoleBindings, and never in the same "
                                           "rule as resources."))},
    {RBAC "AggregationRule",
     OBJ("Which ClusterRoles a ClusterRole gathers its rules from.",
         P_REFLIST("clusterRoleSelectors", META "LabelSelector",
                   "Label selectors over ClusterRoles; the rules of every ClusterRole any of "
                   "them matches are added."))},
    {RBAC "Subject",
     OBJ_XREQ_ATOMIC("Who a binding grants its role to: a user, a group or a ServiceAccount.",
                     "`kind`,`name`",
                     P_STR("kind", "User, Group or ServiceAccount.")
                     P_STR("apiGroup", "API group of the subject: '' for ServiceAccount (the "
                                       "default), rbac.authorization.k8s.io for User and Group "
                                       "(their default).")
                     P_STR("name", "Name of the user, group or ServiceAccount.")
                     P_STR("namespace", "Namespace of a ServiceAccount; must be empty for users "
                                        "and groups."))},
    {RBAC "RoleRef",
     OBJ_XREQ_ATOMIC("The role a binding grants.", "`apiGroup`,`kind`,`name`",
                     P_STR("apiGroup", "API group of the role: rbac.authorization.k8s.io.")
                     P_STR("kind", "Role or ClusterRole.")
                     P_STR("name", "Name of the role."))},

    /* --- admissionregistration.k8s.io/v1. What a webhook must hold is
     * the types' validation's (registry/admissionregistration), defaults
     * included. --- */
    {ADMREG "ServiceReference",
     OBJ_XREQ("The Service in front of a webhook.", "`namespace`,`name`",
              P_STR("namespace", "Namespace of the Service.")
              P_STR("name", "Name of the Service.")
              P_STR("path", "URL path the requests are sent to.")
              P_I32("port", "Port of the Service, 1 to 65535; 443 when not given."))},
    {ADMREG "WebhookClientConfig",
     OBJ("How the API server calls a webhook: at a URL or through a Service, exactly one of "
         "the two.",
         P_STR("url", "Where to call the webhook, https://host[:port][/path]; no user "
                      "information, query or fragment.")
         P_REF("service", ADMREG "ServiceReference", "The Service to call the webhook through.")
         P_BYTES("caBundle", "PEM certificates of the CAs to trust for the webhook's serving "
                             "certificate; the system's trust roots when empty."))},
    {ADMREG "RuleWithOperations",
     OBJ("Operations on resources that a webhook is called for.",
         P_STRLIST("operations", "CREATE, UPDATE, DELETE or CONNECT; '*' alone for all of them.")
         P_STRLIST("apiGroups", "API groups of the resources ('' is the core group); '*' alone "
                                "for all.")
         P_STRLIST("apiVersions", "API versions of the resources; '*' alone for all.")
         P_STRLIST("resources", "Resources, and subresources as resource/subresource: '*' is "
                                "every resource, 'pods/*' every subresource of pods, '*/status' "
                                "every status subresource, '*/*' everything.")
         P_STR("scope", "Cluster, Namespaced or '*' (the default): the scope of the resources "
                        "the rule matches."))},
    {ADMREG "MatchCondition",
     OBJ_XREQ("A CEL condition a request must meet for the webhook to be called.",
              "`name`,`expression`",
              P_STR("name", "Name of the condition: a qualified name, unique among the webhook's "
                            "conditions.")
              P_STR("expression", "CEL expression that evaluates to a bool."))},
    {ADMREG "MutatingWebhook",
     OBJ_XREQ("A webhook that may change the objects of the requests it is called for, or "
              "reject them.",
              "`name`,`clientConfig`,`sideEffects`,`admissionReviewVersions`",
              WEBHOOK_PROPS
              P_STR("reinvocationPolicy", "Never (the default), or IfNeeded: call the webhook "
                                          "once more when a later mutation changed the "
                                          "object."))},
    {ADMREG "ValidatingWebhook",
     OBJ_XREQ("A webhook that accepts or rejects the requests it is called for, without "
              "changing them.",
              "`name`,`clientConfig`,`sideEffects`,`admissionReviewVersions`",
              WEBHOOK_PROPS)},

    /* --- apiregistration.k8s.io/v1. What an APIService must hold is the
     * type's validation's (registry/apiregistration), the service's port
     * default included. --- */
    {APIREG "ServiceReference",
     OBJ("The Service an aggregated API is reached through.",
         P_STR("namespace", "Namespace of the Service.")
         P_STR("name", "Name of the Service.")
         P_I32("port", "Port of the Service, 1 to 65535; 443 when not given."))},
    {APIREG "APIServiceSpec",
     OBJ_XREQ("Where the API of a group-version is served, and how it ranks in discovery.",
              "`groupPriorityMinimum`,`versionPriority`",
              P_REF("service", APIREG "ServiceReference",
                    "The Service that serves the API, over HTTPS. Not given: the API server "
                    "serves it itself (a local APIService).")
              P_STR("group", "The API group served; empty only for the core group's v1.")
              P_STR("version", "The API version served, such as v1.")
              P_BOOL("insecureSkipTLSVerify", "Do not verify the serving certificate of the "
                                              "service. Not advised: give a caBundle instead.")
              P_BYTES("caBundle", "PEM certificates of the CAs to trust for the service's "
                                  "serving certificate; the server's trust roots when empty.")
              P_I32("groupPriorityMinimum", "The least priority of the group in discovery, 1 to "
                                            "20000: groups are listed highest first, then by "
                                            "name. Another version may give its group a higher "
                                            "one.")
              P_I32("versionPriority", "The order of this version within its group, 1 to "
                                       "1000: highest first, then versions compared as "
                                       "Kubernetes versions (v1 before v1beta1)."))},
    {APIREG "APIServiceCondition",
     OBJ_XREQ("One aspect of an APIService's state.", "`type`,`status`",
              P_STR("type", "Condition type: Available.")
              P_STR("status", "True, False or Unknown.")
              P_TIME("lastTransitionTime", "When the status last changed.")
              P_STR("reason", "CamelCase reason for the last transition.")
              P_STR("message", "Human-readable details."))},
    {APIREG "APIServiceStatus",
     OBJ("The observed state of an APIService.",
         "`conditions`:{`type`:`array`,`items`:{`$ckref`:`" APIREG "APIServiceCondition`},"
         "`x-kubernetes-patch-merge-key`:`type`,`x-kubernetes-patch-strategy`:`merge`,"
         "`x-ckube-list-type`:`map`,`x-ckube-list-map-keys`:[`type`],"
         "`description`:`The current state of the APIService, one condition per type.`},")},

    /* --- authorization.k8s.io/v1, authentication.k8s.io/v1: the review
     * types. Nothing is marked required: as upstream, their own
     * validation (reviews.c) decides what a question must hold. --- */
    {AUTHZ "ResourceAttributes",
     OBJ("The request on a resource that an access review asks about.",
         P_STR("namespace", "Namespace of the request; empty for cluster-scoped resources, or "
                            "for all namespaces when the resource is namespaced.")
         P_STR("verb", "API verb (get, list, watch, create, update, patch, delete, "
                       "deletecollection, proxy) or '*' for all.")
         P_STR("group", "API group of the resource; '*' for all.")
         P_STR("version", "API version of the resource; '*' for all.")
         P_STR("resource", "Resource type; '*' for all.")
         P_STR("subresource", "Subresource; empty for none, '*' for all.")
         P_STR("name", "Name of the object the request is for; empty for all of them.")
         P_REF("fieldSelector", AUTHZ "FieldSelectorAttributes",
               "The field selector of a list, watch or deletecollection.")
         P_REF("labelSelector", AUTHZ "LabelSelectorAttributes",
               "The label selector of a list, watch or deletecollection."))},
    {AUTHZ "FieldSelectorAttributes",
     OBJ("A field selector in an access review: as it was sent, or parsed.",
         P_STR("rawSelector", "The selector as written in the request's query.")
         P_ANYLIST("requirements", "The parsed requirements (key, operator, values)."))},
    {AUTHZ "LabelSelectorAttributes",
     OBJ("A label selector in an access review: as it was sent, or parsed.",
         P_STR("rawSelector", "The selector as written in the request's query.")
         P_REFLIST("requirements", META "LabelSelectorRequirement",
                   "The parsed requirements."))},
    {AUTHZ "NonResourceAttributes",
     OBJ("A request on a URL that is not a resource, such as /healthz.",
         P_STR("path", "URL path of the request.")
         P_STR("verb", "HTTP verb, lower case."))},
    {AUTHZ "SubjectAccessReviewSpec",
     OBJ("The question: may this user make this request? Exactly one of "
         "resourceAttributes and nonResourceAttributes is set.",
         ACCESS_ATTRS
         P_STR("user", "User to check for. User or groups is required.")
         P_STRLIST("groups", "Groups the user belongs to.")
         P_STRLISTMAP("extra", "Extra attributes of the user, as an authenticator reports them.")
         P_STR("uid", "UID of the user."))},
    {AUTHZ "SelfSubjectAccessReviewSpec",
     OBJ("The question: may I make this request? Exactly one of resourceAttributes and "
         "nonResourceAttributes is set.",
         ACCESS_ATTRS)},
    {AUTHZ "SubjectAccessReviewStatus",
     OBJ("The answer to an access review.",
         P_BOOL("allowed", "True if the request is allowed.")
         P_BOOL("denied", "True if the request is denied outright, whatever other "
                          "authorizers say.")
         P_STR("reason", "Why the request is allowed or denied, if the authorizer says.")
         P_STR("evaluationError", "Why the authorizer could not decide, if it could not; "
                                  "allowed may still be true."))},
    {AUTHZ "SelfSubjectRulesReviewSpec",
     OBJ("The question: what may I do in this namespace?",
         P_STR("namespace", "Namespace to list the rules of."))},
    {AUTHZ "ResourceRule",
     OBJ("What the subject may do to resources. '*' in a list means all.",
         P_STRLIST("verbs", "Allowed verbs.")
         P_STRLIST("apiGroups", "API groups of the resources.")
         P_STRLIST("resources", "Resources, with subresources as resource/subresource.")
         P_STRLIST("resourceNames", "Names of the objects; empty for all."))},
    {AUTHZ "NonResourceRule",
     OBJ("What the subject may do to non-resource URLs.",
         P_STRLIST("verbs", "Allowed HTTP verbs, lower case.")
         P_STRLIST("nonResourceURLs", "URL paths; a trailing * matches any suffix."))},
    {AUTHZ "SubjectRulesReviewStatus",
     OBJ("The answer to a rules review. It may be incomplete: the list is a guide for "
         "clients, not what authorization decides.",
         P_REFLIST("resourceRules", AUTHZ "ResourceRule", "Rules on resources.")
         P_REFLIST("nonResourceRules", AUTHZ "NonResourceRule", "Rules on other URLs.")
         P_BOOL("incomplete", "True if the authorizer could not list every rule.")
         P_STR("evaluationError", "Why the list is incomplete, if it is."))},
    {AUTHN "UserInfo",
     OBJ("A user, as the authenticator saw the request.",
         P_STR("username", "Name of the user.")
         P_STR("uid", "Unique identifier of the user across time.")
         P_STRLIST("groups", "Groups the user belongs to.")
         P_STRLISTMAP("extra", "Other attributes the authenticator reports."))},
    {AUTHN "SelfSubjectReviewStatus",
     OBJ("Who the server thinks made the request.",
         P_REF("userInfo", AUTHN "UserInfo", "The authenticated user."))},
    {AUTHN "TokenReviewSpec",
     OBJ("The token to authenticate.",
         P_STR("token", "The opaque bearer token.")
         P_STRLIST("audiences", "Audiences the token must be for; empty: the API server's."))},
    {AUTHN "TokenReviewStatus",
     OBJ("Whether the token was authenticated, and as whom.",
         P_BOOL("authenticated", "True if the token is a known user's.")
         P_REF("user", AUTHN "UserInfo", "The user the token belongs to.")
         P_STRLIST("audiences", "The audiences the token is valid for that were asked for.")
         P_STR("error", "Why the token could not be checked."))},
};

/* ---------------------------------------------------------- kinds */

typedef struct root_text {
    const char *group, *version, *kind;
    schema_text s;
} root_text;

static const root_text roots[] = {
    {"", "v1", "Namespace",
     {CORE "Namespace",
      OBJ("A scope for names of namespaced objects.",
          TYPEMETA OBJMETA
          P_REF("spec", CORE "NamespaceSpec", "Desired state of the namespace.")
          P_REF("status", CORE "NamespaceStatus", "Observed state of the namespace."))}},
    {"", "v1", "ConfigMap",
     {CORE "ConfigMap",
      OBJ("Non-confidential configuration data for pods to consume.",
          TYPEMETA OBJMETA
          P_STRMAP("data", "UTF-8 configuration data. Keys must be alphanumeric, '-', '_' or "
                           "'.' and must not also appear in binaryData.")
          P_BYTESMAP("binaryData", "Binary configuration data, base64-encoded.")
          P_BOOL("immutable", "If true, data cannot be changed after creation; only "
                              "metadata can."))}},
    {"", "v1", "Secret",
     {CORE "Secret",
      OBJ("Confidential data such as passwords, tokens or keys.",
          TYPEMETA OBJMETA
          P_BYTESMAP("data", "Secret data, base64-encoded values.")
          P_STRMAP("stringData", "Write-only plain-text data, merged into data on write.")
          P_STR("type", "Type of the secret, used to validate its content, e.g. Opaque or "
                        "kubernetes.io/tls.")
          P_BOOL("immutable", "If true, data cannot be changed after creation."))}},
    {"", "v1", "ServiceAccount",
     {CORE "ServiceAccount",
      OBJ("An identity for processes running in pods.",
          TYPEMETA OBJMETA
          P_REFLIST("secrets", CORE "ObjectReference", "Secrets pods of this account may use.")
          P_REFLIST("imagePullSecrets", CORE "LocalObjectReference",
                    "Secrets used to pull images for pods of this account.")
          P_BOOL("automountServiceAccountToken", "Whether pods mount the token by default."))}},
    {"", "v1", "Service",
     {CORE "Service",
      OBJ("A named abstraction of a set of pods and how to reach them.",
          TYPEMETA OBJMETA
          P_REF("spec", CORE "ServiceSpec", "Desired behaviour of the service.")
          P_REF("status", CORE "ServiceStatus", "Observed state of the service."))}},
    {"", "v1", "Endpoints",
     {CORE "Endpoints",
      OBJ("The endpoints implementing a service.",
          TYPEMETA OBJMETA
          P_REFLIST("subsets", CORE "EndpointSubset", "Sets of addresses and ports."))}},
    {"", "v1", "Pod",
     {CORE "Pod",
      OBJ("A group of containers that run together on a node.",
          TYPEMETA OBJMETA
          P_REF("spec", CORE "PodSpec", "Desired behaviour of the pod.")
          P_REF("status", CORE "PodStatus", "Most recently observed state of the pod."))}},
    {"", "v1", "Node",
     {CORE "Node",
      OBJ("A worker machine of the cluster.",
          TYPEMETA OBJMETA
          P_REF("spec", CORE "NodeSpec", "Desired behaviour of the node.")
          P_REF("status", CORE "NodeStatus", "Most recently observed state of the node."))}},
    {"", "v1", "Event",
     {CORE "Event",
      OBJ_REQ("A report of something that happened in the cluster.", "`involvedObject`",
              TYPEMETA OBJMETA
              P_REF("involvedObject", CORE "ObjectReference", "The object the event is about.")
              P_STR("reason", "Short CamelCase reason for the event.")
              P_STR("message", "Human-readable description.")
              P_REF("source", CORE "EventSource", "Component reporting the event.")
              P_TIME("firstTimestamp", "When the event was first recorded.")
              P_TIME("lastTimestamp", "When the event last occurred.")
              P_I32("count", "Number of occurrences.")
              P_STR("type", "Normal or Warning.")
              P_TIME("eventTime", "When the event was first observed (microseconds).")
              P_REF("series", CORE "EventSeries", "Data about a series of events.")
              P_STR("action", "What was done, or failed, about the object.")
              P_REF("related", CORE "ObjectReference", "A secondary object involved.")
              P_STR("reportingComponent", "Controller that emitted the event.")
              P_STR("reportingInstance", "Instance of the controller."))}},
    {"apps", "v1", "Deployment",
     {APPS "Deployment",
      OBJ("Declarative updates for pods and ReplicaSets.",
          TYPEMETA OBJMETA
          P_REF("spec", APPS "DeploymentSpec", "Desired behaviour of the deployment.")
          P_REF("status", APPS "DeploymentStatus", "Most recently observed state."))}},
    {"apps", "v1", "ReplicaSet",
     {APPS "ReplicaSet",
      OBJ("Keeps a number of identical pods running.",
          TYPEMETA OBJMETA
          P_REF("spec", APPS "ReplicaSetSpec", "Desired behaviour of the ReplicaSet.")
          P_REF("status", APPS "ReplicaSetStatus", "Most recently observed state."))}},
    {"coordination.k8s.io", "v1", "Lease",
     {COORD "Lease",
      OBJ("A lease, used for leader election and node heartbeats.",
          TYPEMETA OBJMETA P_REF("spec", COORD "LeaseSpec", "Desired state of the lease."))}},
    {"events.k8s.io", "v1", "Event",
     {EVTS "Event",
      OBJ_REQ("A report of something that happened in the cluster.", "`eventTime`",
              TYPEMETA OBJMETA
              P_TIME("eventTime", "When the event was first observed (microseconds). Required.")
              P_REF("series", EVTS "EventSeries", "Data about a series of events.")
              P_STR("reportingController", "Controller that emitted the event.")
              P_STR("reportingInstance", "Instance of the controller.")
              P_STR("action", "What was done, or failed, about the object.")
              P_STR("reason", "Short CamelCase reason for the action.")
              P_REF("regarding", CORE "ObjectReference", "The object the event is about.")
              P_REF("related", CORE "ObjectReference", "A secondary object involved.")
              P_STR("note", "Human-readable description.")
              P_STR("type", "Normal or Warning.")
              P_REF("deprecatedSource", CORE "EventSource", "core/v1 source, for "
                                                             "compatibility.")
              P_TIME("deprecatedFirstTimestamp", "core/v1 firstTimestamp.")
              P_TIME("deprecatedLastTimestamp", "core/v1 lastTimestamp.")
              P_I32("deprecatedCount", "core/v1 count."))}},
    {"rbac.authorization.k8s.io", "v1", "Role",
     {RBAC "Role",
      OBJ("A set of rules in one namespace, granted as a unit by RoleBindings there.",
          TYPEMETA OBJMETA
          P_REFLIST("rules", RBAC "PolicyRule", "The rules of this Role."))}},
    {"rbac.authorization.k8s.io", "v1", "ClusterRole",
     {RBAC "ClusterRole",
      OBJ("A set of rules for the whole cluster, granted as a unit by RoleBindings (in their "
          "namespace) or ClusterRoleBindings (everywhere).",
          TYPEMETA OBJMETA
          P_REFLIST("rules", RBAC "PolicyRule", "The rules of this ClusterRole.")
          P_REF("aggregationRule", RBAC "AggregationRule",
                "When set, the rules are gathered from other ClusterRoles by a controller, and "
                "rules written here directly are overwritten."))}},
    {"rbac.authorization.k8s.io", "v1", "RoleBinding",
     {RBAC "RoleBinding",
      OBJ_XREQ("Grants a Role of its namespace, or a ClusterRole, to subjects, in its own "
               "namespace only.",
               "`roleRef`",
               TYPEMETA OBJMETA
               P_REFLIST("subjects", RBAC "Subject", "Who the role is granted to.")
               P_REF("roleRef", RBAC "RoleRef",
                     "The Role (of this namespace) or ClusterRole granted. It cannot change; "
                     "bind another role with another binding."))}},
    {"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
     {RBAC "ClusterRoleBinding",
      OBJ_XREQ("Grants a ClusterRole to subjects in every namespace and for cluster-scoped "
               "resources and non-resource URLs.",
               "`roleRef`",
               TYPEMETA OBJMETA
               P_REFLIST("subjects", RBAC "Subject", "Who the role is granted to.")
               P_REF("roleRef", RBAC "RoleRef",
                     "The ClusterRole granted. It cannot change; bind another role with another "
                     "binding."))}},
    {"admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
     {ADMREG "MutatingWebhookConfiguration",
      OBJ("Admission webhooks that may change objects before they are stored, or reject them.",
          TYPEMETA OBJMETA
          P_NAMEDLIST("webhooks", ADMREG "MutatingWebhook",
                      "The webhooks, with the requests each is called for."))}},
    {"admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
     {ADMREG "ValidatingWebhookConfiguration",
      OBJ("Admission webhooks that accept or reject requests without changing them.",
          TYPEMETA OBJMETA
          P_NAMEDLIST("webhooks", ADMREG "ValidatingWebhook",
                      "The webhooks, with the requests each is called for."))}},
    {"apiregistration.k8s.io", "v1", "APIService",
     {APIREG "APIService",
      OBJ("Registers where the API of one group-version is served: by this server (local), or "
          "by a Service the server forwards its requests to. Named VERSION.GROUP.",
          TYPEMETA OBJMETA
          P_REF("spec", APIREG "APIServiceSpec", "Where and how the API is served.")
          P_REF("status", APIREG "APIServiceStatus", "Whether the API is available."))}},
    {"authorization.k8s.io", "v1", "SelfSubjectAccessReview",
     {AUTHZ "SelfSubjectAccessReview",
      OBJ("Asks whether the requester may do something. Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("spec", AUTHZ "SelfSubjectAccessReviewSpec", "The question.")
          P_REF("status", AUTHZ "SubjectAccessReviewStatus", "The answer, set by the server."))}},
    {"authorization.k8s.io", "v1", "SubjectAccessReview",
     {AUTHZ "SubjectAccessReview",
      OBJ("Asks whether a user may do something. Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("spec", AUTHZ "SubjectAccessReviewSpec", "The question.")
          P_REF("status", AUTHZ "SubjectAccessReviewStatus", "The answer, set by the server."))}},
    {"authorization.k8s.io", "v1", "LocalSubjectAccessReview",
     {AUTHZ "LocalSubjectAccessReview",
      OBJ("Asks whether a user may do something in one namespace (the review's own). "
          "Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("spec", AUTHZ "SubjectAccessReviewSpec",
                "The question; its namespace must be empty or the review's.")
          P_REF("status", AUTHZ "SubjectAccessReviewStatus", "The answer, set by the server."))}},
    {"authorization.k8s.io", "v1", "SelfSubjectRulesReview",
     {AUTHZ "SelfSubjectRulesReview",
      OBJ("Lists what the requester may do in a namespace. Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("spec", AUTHZ "SelfSubjectRulesReviewSpec", "The question.")
          P_REF("status", AUTHZ "SubjectRulesReviewStatus", "The answer, set by the server."))}},
    {"authentication.k8s.io", "v1", "SelfSubjectReview",
     {AUTHN "SelfSubjectReview",
      OBJ("Asks who the server takes the requester to be. Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("status", AUTHN "SelfSubjectReviewStatus", "The answer, set by the server."))}},
    {"authentication.k8s.io", "v1", "TokenReview",
     {AUTHN "TokenReview",
      OBJ("Asks who a bearer token belongs to. Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("spec", AUTHN "TokenReviewSpec", "The token.")
          P_REF("status", AUTHN "TokenReviewStatus", "The answer, set by the server."))}},
    {"authentication.k8s.io", "v1beta1", "SelfSubjectReview",
     {"io.k8s.api.authentication.v1beta1.SelfSubjectReview",
      OBJ("Asks who the server takes the requester to be. Answered, never stored.",
          TYPEMETA OBJMETA
          P_REF("status", AUTHN "SelfSubjectReviewStatus", "The answer, set by the server."))}},
};

/* clang-format on */

#define NFRAG (sizeof fragments / sizeof fragments[0])
#define NROOT (sizeof roots / sizeof roots[0])

/* ------------------------------------------------------------ loading */

/* Turns the backtick notation into JSON: ` becomes ", and a comma
 * followed (after whitespace) by } or ] is dropped. */
static char *to_json(const char *text)
{
    size_t n = strlen(text);
    char *out = xmalloc(n + 1);
    size_t o = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (c == '`') {
            in_str = !in_str;
            out[o++] = '"';
            continue;
        }
        if (!in_str && c == ',') {
            size_t j = i + 1;
            while (j < n && (text[j] == ' ' || text[j] == '\n' || text[j] == '\t'))
                j++;
            if (j < n && (text[j] == '}' || text[j] == ']'))
                continue;
        }
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}

static json_t *parse_text(const char *name, const char *text)
{
    char *js = to_json(text);
    if (!js)
        return NULL;
    json_error_t err;
    json_t *j = json_loads(js, 0, &err);
    if (!j)
        CKUBE_ERROR("builtin schema %s: %s at column %d", name, err.text, err.column);
    free(js);
    return j;
}

static json_t *raw_frag[NFRAG];      /* parsed, with $ckref */
static json_t *expanded_frag[NFRAG]; /* inlined; NULL until computed */
static bool expanding[NFRAG];
static json_t *expanded_root[NROOT];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static long frag_index(const char *name)
{
    for (size_t i = 0; i < NFRAG; i++)
        if (!strcmp(fragments[i].name, name))
            return (long)i;
    return -1;
}

static json_t *expand(const json_t *node);

static json_t *expanded_fragment(long i)
{
    if (expanded_frag[i])
        return expanded_frag[i];
    if (expanding[i] || !raw_frag[i]) {
        /* A cycle or a broken fragment: describe nothing, reject nothing. */
        return NULL;
    }
    expanding[i] = true;
    expanded_frag[i] = expand(raw_frag[i]);
    expanding[i] = false;
    return expanded_frag[i];
}

/* Returns a new, fully inlined version of `node`. Inlined definitions are
 * shallow copies (json_copy): their children are shared with the
 * expanded fragment rather than copied, so the expanded schemas form a
 * DAG a fraction of the size of the tree (PodSpec alone appears under
 * Pod, Deployment, ReplicaSet, ...). Nothing mutates them after load:
 * builtin_schema() hands out shared references; callers that want to
 * edit one (the OpenAPI builder) deep-copy it. */
static json_t *expand(const json_t *node)
{
    if (json_is_array(node)) {
        json_t *a = json_array();
        size_t i;
        const json_t *e;
        json_array_foreach(node, i, e) json_array_append_new(a, expand(e));
        return a;
    }
    if (!json_is_object(node))
        return json_deep_copy(node);
    const char *ref = json_string_value(json_object_get(node, "$ckref"));
    json_t *out;
    if (ref) {
        long fi = frag_index(ref);
        json_t *def = fi >= 0 ? expanded_fragment(fi) : NULL;
        if (!def) {
            CKUBE_ERROR("builtin schema: unresolvable reference %s", ref);
            out =
                json_pack("{s:s,s:b}", "type", "object", "x-kubernetes-preserve-unknown-fields", 1);
        } else {
            out = json_copy(def);
            json_object_set_new(out, "x-ckube-ref", json_string(ref));
        }
    } else {
        out = json_object();
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)node, k, v)
    {
        if (!strcmp(k, "$ckref"))
            continue;
        json_object_set_new(out, k, expand(v));
    }
    return out;
}

static void load(void)
{
    for (size_t i = 0; i < NFRAG; i++)
        raw_frag[i] = parse_text(fragments[i].name, fragments[i].text);
    for (size_t i = 0; i < NFRAG; i++)
        expanded_fragment((long)i);
    for (size_t i = 0; i < NROOT; i++) {
        json_t *raw = parse_text(roots[i].s.name, roots[i].s.text);
        if (raw)
            expanded_root[i] = expand(raw);
        json_decref(raw);
    }
}

static long root_index(const char *group, const char *version, const char *kind)
{
    if (!group || !version || !kind)
        return -1;
    for (size_t i = 0; i < NROOT; i++)
        if (!strcmp(roots[i].group, group) && !strcmp(roots[i].version, version) &&
            !strcmp(roots[i].kind, kind))
            return (long)i;
    return -1;
}

json_t *builtin_schema(const char *group, const char *version, const char *kind)
{
    long i = root_index(group, version, kind);
    if (i < 0)
        return NULL;
    pthread_once(&load_once, load);
    return expanded_root[i] ? json_incref(expanded_root[i]) : NULL;
}

const char *builtin_definition_name(const char *group, const char *version, const char *kind)
{
    long i = root_index(group, version, kind);
    return i < 0 ? NULL : roots[i].s.name;
}

json_t *builtin_schema_fragment(const char *name)
{
    if (!name)
        return NULL;
    long i = frag_index(name);
    if (i < 0)
        return NULL;
    pthread_once(&load_once, load);
    return expanded_frag[i] ? json_deep_copy(expanded_frag[i]) : NULL;
}
