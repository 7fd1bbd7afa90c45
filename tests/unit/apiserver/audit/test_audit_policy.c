/* The audit policy (apiserver/audit/policy.h): reading audit.k8s.io/v1
 * Policies as kube-apiserver does, its refusals word for word, and the
 * decisions of upstream's policy checker.
 *
 * In-memory inputs are handed over in buffers of exactly their length (no
 * terminating NUL), so a read past the end shows under ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "apiserver/audit/policy.h"
#include "ckube/log.h"

static audit_policy *parse_n(const char *s, size_t n, char **err)
{
    char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    memcpy(buf, s, n);
    audit_policy *p = audit_policy_parse(buf, n, err);
    free(buf);
    return p;
}

static audit_policy *parse_ok(const char *s)
{
    char *err = NULL;
    audit_policy *p = parse_n(s, strlen(s), &err);
    if (!p)
        fail_msg("policy refused: %s\n%s", err ? err : "(no message)", s);
    assert_null(err);
    return p;
}

static void expect_err(const char *s, const char *want)
{
    char *err = NULL;
    audit_policy *p = parse_n(s, strlen(s), &err);
    if (p)
        fail_msg("policy accepted, wanted: %s\n%s", want, s);
    assert_non_null(err);
    if (strcmp(err, want))
        fail_msg("error\n  got:  %s\n  want: %s", err, want);
    free(err);
}

#define HEAD "apiVersion: audit.k8s.io/v1\nkind: Policy\n"

/* A policy of the kinds clusters use (quiet for the noisy readers, whole
 * bodies for workload changes, metadata for the rest); the fuzz corpus
 * holds it too (tests/fuzz/corpus/audit_policy/cluster-example.yaml). */
static const char *const example_policy =
    "# An example policy for a small cluster: quiet for the noisy system\n"
    "# readers, whole bodies for workload changes, metadata for the rest.\n"
    "apiVersion: audit.k8s.io/v1\n"
    "kind: Policy\n"
    "omitStages:\n"
    "  - RequestReceived\n"
    "rules:\n"
    "  # Leader election and node heartbeats, many times a second.\n"
    "  - level: None\n"
    "    resources:\n"
    "      - group: coordination.k8s.io\n"
    "        resources: [\"leases\"]\n"
    "  - level: None\n"
    "    users: [\"system:kube-proxy\"]\n"
    "    verbs: [\"watch\"]\n"
    "    resources:\n"
    "      - group: \"\"\n"
    "        resources: [\"endpoints\", \"services\", \"services/status\"]\n"
    "  - level: None\n"
    "    userGroups: [\"system:authenticated\"]\n"
    "    nonResourceURLs:\n"
    "      - \"/healthz*\"\n"
    "      - \"/readyz\"\n"
    "      - \"/livez\"\n"
    "      - \"/version\"\n"
    "  # Never the contents of secrets or tokens.\n"
    "  - level: Metadata\n"
    "    resources:\n"
    "      - group: \"\"\n"
    "        resources: [\"secrets\", \"serviceaccounts/token\"]\n"
    "  - level: None\n"
    "    resources:\n"
    "      - group: \"\"\n"
    "        resources: [\"configmaps\"]\n"
    "        resourceNames: [\"scheduler-lock\"]\n"
    "  - level: Request\n"
    "    verbs: [\"create\", \"update\", \"patch\", \"delete\"]\n"
    "    namespaces: [\"kube-system\"]\n"
    "    resources:\n"
    "      - group: \"\"\n"
    "        resources: [\"configmaps\"]\n"
    "  - level: RequestResponse\n"
    "    verbs: [\"create\", \"update\", \"patch\", \"delete\", \"deletecollection\"]\n"
    "    resources:\n"
    "      - group: apps\n"
    "        resources: [\"deployments\", \"deployments/scale\", \"statefulsets/*\"]\n"
    "      - group: \"\"\n"
    "        resources: [\"pods\", \"*/status\"]\n"
    "    omitManagedFields: true\n"
    "  - level: Request\n"
    "    resources:\n"
    "      - group: \"\"\n"
    "      - group: \"batch\"\n"
    "  - level: Metadata\n"
    "    omitStages:\n"
    "      - RequestReceived\n"
    "      - ResponseStarted\n";

static const char *const groups_authn[] = {"system:authenticated"};

static audit_attributes res(const char *verb, const char *group, const char *resource,
                            const char *sub, const char *ns, const char *name)
{
    return (audit_attributes){.user = "alice",
                              .groups = groups_authn,
                              .ngroups = 1,
                              .verb = verb,
                              .resource_request = true,
                              .api_group = group,
                              .resource = resource,
                              .subresource = sub,
                              .namespace_ = ns,
                              .name = name};
}

static audit_attributes nonres(const char *verb, const char *path)
{
    return (audit_attributes){
        .user = "alice", .groups = groups_authn, .ngroups = 1, .verb = verb, .path = path};
}

static void test_example_policy(void **state)
{
    (void)state;
    audit_policy *p = parse_ok(example_policy);
    assert_int_equal(audit_policy_rule_count(p), 9);
    audit_decision d;
    audit_attributes at = res("update", "coordination.k8s.io", "leases", "", "kube-system", "l");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_NONE);
    /* the policy's omitStages goes with every rule, and with no rule */
    assert_int_equal(d.omit_stages, AUDIT_STAGE_BIT(AUDIT_STAGE_REQUEST_RECEIVED));
    at = res("watch", "", "endpoints", "", "", "");
    at.user = "system:kube-proxy";
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_NONE);
    at.verb = "list";
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST);
    at = nonres("get", "/healthz/etcd");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_NONE);
    at = nonres("get", "/version");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_NONE);
    at = nonres("get", "/metrics");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_METADATA);
    assert_int_equal(d.omit_stages, AUDIT_STAGE_BIT(AUDIT_STAGE_REQUEST_RECEIVED) |
                                        AUDIT_STAGE_BIT(AUDIT_STAGE_RESPONSE_STARTED));
    at = res("get", "", "secrets", "", "default", "tls");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_METADATA);
    at = res("create", "", "serviceaccounts", "token", "default", "builder");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_METADATA);
    at = res("update", "", "configmaps", "", "kube-system", "scheduler-lock");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_NONE);
    at = res("update", "", "configmaps", "", "kube-system", "other");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST);
    at = res("create", "", "pods", "", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST_RESPONSE);
    assert_true(d.omit_managed_fields);
    at = res("update", "", "pods", "status", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST_RESPONSE);
    at = res("patch", "apps", "statefulsets", "scale", "default", "db");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST_RESPONSE);
    at = res("get", "", "pods", "", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST);
    assert_false(d.omit_managed_fields);
    at = res("get", "apps", "deployments", "", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_METADATA);
    at = res("get", "batch", "jobs", "", "default", "j");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST);
    audit_policy_free(p);
}

/* The same policy as JSON, and the shapes upstream's reader takes. */
static void test_parse_forms(void **state)
{
    (void)state;
    audit_policy *p = parse_ok("  {\"apiVersion\":\"audit.k8s.io/v1\",\"kind\":\"Policy\","
                               "\"rules\":[{\"level\":\"Metadata\"}]}");
    assert_int_equal(audit_policy_rule_count(p), 1);
    audit_attributes at = nonres("get", "/x");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    audit_policy_free(p);
    /* no kind: Policy is assumed */
    audit_policy_free(parse_ok("apiVersion: audit.k8s.io/v1\nrules:\n- level: None\n"));
    /* unknown fields: decoded leniently, with a warning (upstream's
     * reader_test policyWithUnknownField) */
    audit_policy_free(parse_ok(HEAD "rules:\n"
                                    "- level: None\n"
                                    "  resources:\n"
                                    "  - group: coordination.k8s.io\n"
                                    "    resources:\n"
                                    "    - \"leases\"\n"
                                    "    verbs: [\"watch\", \"get\", \"list\"] # bad indentation\n"
                                    "  bogus: 1\n"
                                    "metadata:\n  name: x\n  colour: red\n"
                                    "omitManagedFields: true\n"));
    /* nulls read as absent values */
    audit_policy_free(parse_ok(HEAD "metadata: null\nomitStages: null\n"
                                    "rules:\n- level: Request\n  users: null\n"
                                    "  omitManagedFields: null\n"));
    /* group "*" and the resource forms */
    audit_policy_free(parse_ok(HEAD "rules:\n- level: Request\n  resources:\n  - group: \"*\"\n"
                                    "    resources: [\"*\", \"pods/*\", \"*/status\"]\n"));
    /* '*' alone is a valid non-resource URL */
    audit_policy_free(parse_ok(HEAD "rules:\n- level: Request\n  nonResourceURLs: [\"*\"]\n"));
}

static void test_refusals_version_kind(void **state)
{
    (void)state;
    expect_err("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n",
               "failed decoding: no kind \"Policy\" is registered for version "
               "\"audit.k8s.io/v1beta1\" in scheme \"k8s.io/apiserver/pkg/audit/scheme.go:30\"");
    expect_err("apiVersion: audit.k8s.io/v1alpha1\nkind: Policy\nrules:\n- level: None\n",
               "failed decoding: no kind \"Policy\" is registered for version "
               "\"audit.k8s.io/v1alpha1\" in scheme \"k8s.io/apiserver/pkg/audit/scheme.go:30\"");
    expect_err("apiVersion: v1\nkind: Policy\nrules:\n- level: None\n",
               "failed decoding: no kind \"Policy\" is registered for version \"v1\" in scheme "
               "\"k8s.io/apiserver/pkg/audit/scheme.go:30\"");
    expect_err("apiVersion: audit.k8s.io/v1\nkind: Polic\nrules:\n- level: None\n",
               "failed decoding: no kind \"Polic\" is registered for version "
               "\"audit.k8s.io/v1\" in scheme \"k8s.io/apiserver/pkg/audit/scheme.go:30\"");
    expect_err("apiVersion: audit.k8s.io/v1\nkind: Event\n",
               "failed decoding: converting (v1.Event) to (audit.Policy): unknown conversion");
    expect_err("apiVersion: a/b/c\nkind: Policy\n",
               "failed decoding: unexpected GroupVersion string: a/b/c");
    /* upstream's reader_test: no apiVersion and kind; an empty file */
    expect_err("rules:\n- level: None\n",
               "unknown group version field audit.k8s.io/__internal, Kind=Policy in policy");
    expect_err("kind: Policy\nrules:\n- level: None\n",
               "unknown group version field audit.k8s.io/__internal, Kind=Policy in policy");
    expect_err("", "unknown group version field audit.k8s.io/__internal, Kind=Policy in policy");
    expect_err(HEAD, "loaded illegal policy with 0 rules");
    expect_err(HEAD "rules: []\n", "loaded illegal policy with 0 rules");
}

static void test_refusals_decoding(void **state)
{
    (void)state;
    expect_err(HEAD "rules:\n- level: 1\n",
               "failed decoding: json: cannot unmarshal number into Go struct field "
               "PolicyRule.rules.level of type v1.Level");
    expect_err(HEAD "rules: Metadata\n",
               "failed decoding: json: cannot unmarshal string into Go struct field "
               "Policy.rules of type []v1.PolicyRule");
    expect_err(HEAD "rules:\n- Metadata\n",
               "failed decoding: json: cannot unmarshal string into Go struct field "
               "Policy.rules of type v1.PolicyRule");
    expect_err(HEAD "rules:\n- level: None\n  users: [yes]\n",
               "failed decoding: json: cannot unmarshal bool into Go struct field "
               "PolicyRule.rules.users of type string");
    expect_err(HEAD "rules:\n- level: None\n  resources:\n  - group: [a]\n",
               "failed decoding: json: cannot unmarshal array into Go struct field "
               "GroupResources.rules.resources.group of type string");
    expect_err(HEAD "rules:\n- level: None\n  omitManagedFields: \"true\"\n",
               "failed decoding: json: cannot unmarshal string into Go struct field "
               "PolicyRule.rules.omitManagedFields of type bool");
    expect_err(HEAD "omitStages: {a: b}\nrules:\n- level: None\n",
               "failed decoding: json: cannot unmarshal object into Go struct field "
               "Policy.omitStages of type []v1.Stage");
    /* the first type error in document order wins */
    expect_err(HEAD "rules:\n- level: None\n  verbs: 3\n- level: 4\n",
               "failed decoding: json: cannot unmarshal number into Go struct field "
               "PolicyRule.rules.verbs of type []string");
    expect_err("apiVersion: 1\n",
               "failed decoding: couldn't get version/kind; json parse error: json: cannot "
               "unmarshal number into Go struct field .apiVersion of type string");
    expect_err("- a\n- b\n",
               "failed decoding: couldn't get version/kind; json parse error: json: cannot "
               "unmarshal array into Go value of type struct { APIVersion string "
               "\"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
               "\"json:\\\"kind,omitempty\\\"\" }");
    char *err = NULL;
    assert_null(parse_n("a: [\n", 5, &err));
    assert_non_null(strstr(err, "failed decoding: error converting YAML to JSON: yaml: "));
    free(err);
    err = NULL;
    assert_null(parse_n("{\"apiVersion\": ", 15, &err));
    assert_non_null(strstr(err, "failed decoding: couldn't get version/kind; json parse error: "));
    free(err);
}

static void test_refusals_validation(void **state)
{
    (void)state;
    expect_err(HEAD "rules:\n- level: Everything\n",
               "rules[0].level: Unsupported value: \"Everything\": supported values: \"None\", "
               "\"Metadata\", \"Request\", \"RequestResponse\"");
    expect_err(HEAD "rules:\n- level: None\n- users: [bob]\n", "rules[1].level: Required value");
    expect_err(HEAD "rules:\n- level: None\n  omitStages: [RequestReceived, Bogus]\n",
               "rules[0].omitStages[1]: Invalid value: \"Bogus\": allowed stages are "
               "RequestReceived,ResponseStarted,ResponseComplete,Panic");
    expect_err(HEAD "omitStages: [Sent]\nrules:\n- level: None\n",
               "omitStages[0]: Invalid value: \"Sent\": allowed stages are "
               "RequestReceived,ResponseStarted,ResponseComplete,Panic");
    expect_err(HEAD "rules:\n- level: None\n  nonResourceURLs: [\"/ok\", \"healthz\"]\n",
               "rules[0].nonResourceURLs[1]: Invalid value: \"healthz\": non-resource URL rules "
               "must begin with a '/' character");
    expect_err(HEAD "rules:\n- level: None\n  nonResourceURLs: [\"/api/*/x\"]\n",
               "rules[0].nonResourceURLs[0]: Invalid value: \"/api/*/x\": non-resource URL "
               "wildcards '*' must be the final character of the rule");
    expect_err(HEAD "rules:\n- level: None\n  nonResourceURLs: [\"/metrics\"]\n"
                    "  namespaces: [default]\n",
               "rules[0].nonResourceURLs: Invalid value: []string{\"/metrics\"}: rules cannot "
               "apply to both regular resources and non-resource URLs");
    expect_err(HEAD "rules:\n- level: None\n  resources:\n  - group: \"\"\n"
                    "    resourceNames: [a, b]\n",
               "rules[0].resources.resourceNames: Invalid value: []string{\"a\", \"b\"}: using "
               "resourceNames requires at least one resource");
    expect_err(HEAD "rules:\n- level: None\n  resources:\n  - group: "
                    "rbac.authorization.k8s.io/v1\n",
               "rules[0].resources.group: Invalid value: \"rbac.authorization.k8s.io/v1\": a "
               "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
               "'-' or '.', and must start and end with an alphanumeric character (e.g. "
               "'example.com', regex used for validation is "
               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
    /* every problem at once, each once, in upstream's order */
    expect_err(
        HEAD "omitStages: [X]\nrules:\n- level: Loud\n  omitStages: [Later]\n"
             "- level: None\n  nonResourceURLs: [a]\n",
        "[omitStages[0]: Invalid value: \"X\": allowed stages are "
        "RequestReceived,ResponseStarted,ResponseComplete,Panic, rules[0].level: "
        "Unsupported value: \"Loud\": supported values: \"None\", \"Metadata\", "
        "\"Request\", \"RequestResponse\", rules[0].omitStages[0]: Invalid value: \"Later\": "
        "allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic, "
        "rules[1].nonResourceURLs[0]: Invalid value: \"a\": non-resource URL rules must "
        "begin with a '/' character]");
}

/* A policy string holding a NUL byte is kept whole: it matches nothing. */
static void test_nul_in_strings(void **state)
{
    (void)state;
    audit_policy *p = parse_ok(HEAD "rules:\n- level: None\n  users: [\"admin\\0x\"]\n"
                                    "- level: Metadata\n");
    audit_attributes at = nonres("get", "/");
    at.user = "admin";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    audit_policy_free(p);
}

/* ---- decisions: upstream's checker semantics ---- */

static void test_decide_users_groups_verbs(void **state)
{
    (void)state;
    audit_policy *p = parse_ok(HEAD "rules:\n"
                                    "- level: RequestResponse\n  users: [tim]\n"
                                    "- level: Request\n  userGroups: [testers, developers]\n"
                                    "- level: Metadata\n  verbs: [patch, delete]\n"
                                    "- level: None\n");
    audit_attributes at = nonres("get", "/x");
    at.user = "tim";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST_RESPONSE);
    static const char *const g[] = {"system:authenticated", "developers"};
    at.user = "bob";
    at.groups = g;
    at.ngroups = 2;
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at.ngroups = 1;
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    at.verb = "delete";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    /* no user at all: rules naming users or groups never match */
    at.user = NULL;
    at.ngroups = 2;
    at.verb = "get";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    /* a NULL policy: auditing off */
    audit_decision d = {AUDIT_LEVEL_REQUEST, 7, true};
    assert_int_equal(audit_policy_decide(NULL, &at, &d), AUDIT_LEVEL_NONE);
    assert_int_equal(d.omit_stages, 0);
    assert_false(d.omit_managed_fields);
    audit_policy_free(p);
}

static void test_decide_resources(void **state)
{
    (void)state;
    audit_policy *p = parse_ok(HEAD "rules:\n"
                                    "- level: RequestResponse\n  resources:\n"
                                    "  - group: \"\"\n    resources: [\"pods/log\"]\n"
                                    "- level: Request\n  resources:\n"
                                    "  - group: apps\n    resources: [\"deployments/*\"]\n"
                                    "- level: Metadata\n  resources:\n"
                                    "  - group: \"*\"\n    resources: [\"*/status\"]\n"
                                    "- level: Request\n  resources:\n"
                                    "  - group: \"\"\n    resources: [secrets]\n"
                                    "    resourceNames: [token]\n"
                                    "- level: Metadata\n  resources:\n"
                                    "  - group: \"\"\n    resources: [pods]\n"
                                    "- level: RequestResponse\n  namespaces: [\"\"]\n"
                                    "- level: Request\n  namespaces: [kube-system]\n"
                                    "  resources:\n  - group: rbac.authorization.k8s.io\n"
                                    "- level: None\n");
    audit_attributes at = res("get", "", "pods", "log", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST_RESPONSE);
    at = res("get", "", "pods", "", "default", "web"); /* "pods/log" is not "pods" */
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    at = res("get", "", "pods", "exec", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    /* "deployments/" + "*": the resource itself and its subresources */
    at = res("get", "apps", "deployments", "", "default", "d");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at = res("get", "apps", "deployments", "scale", "default", "d");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at = res("get", "", "deployments", "scale", "default", "d"); /* another group */
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    /* "*" + "/status" in any group ("*") */
    at = res("update", "batch", "jobs", "status", "default", "j");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    at = res("update", "batch", "jobs", "", "default", "j");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    /* resourceNames */
    at = res("get", "", "secrets", "", "default", "token");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at = res("get", "", "secrets", "", "default", "other");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    at = res("list", "", "secrets", "", "default", "");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    /* namespaces: "" is cluster scope */
    at = res("get", "", "nodes", "", "", "n1");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST_RESPONSE);
    at = res("get", "rbac.authorization.k8s.io", "roles", "", "kube-system", "r");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at = res("get", "rbac.authorization.k8s.io", "roles", "", "default", "r");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    /* resource rules never match a non-resource request */
    at = nonres("get", "/api/v1/pods");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    audit_policy_free(p);

    /* no group given: the core group */
    p = parse_ok(HEAD "rules:\n- level: Request\n  resources:\n  - resources: [pods]\n"
                      "- level: None\n");
    at = res("get", "", "pods", "", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at = res("get", "apps", "pods", "", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    audit_policy_free(p);

    /* "*" matches every resource and subresource of the group */
    p = parse_ok(HEAD "rules:\n- level: Metadata\n  resources:\n  - group: \"\"\n"
                      "    resources: [\"*\"]\n- level: None\n");
    at = res("get", "", "pods", "log", "default", "web");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    at = res("get", "apps", "deployments", "", "default", "d");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    audit_policy_free(p);
}

static void test_decide_nonresource(void **state)
{
    (void)state;
    audit_policy *p = parse_ok(HEAD "rules:\n"
                                    "- level: None\n  nonResourceURLs: [\"/healthz*\", /version]\n"
                                    "- level: Metadata\n  nonResourceURLs: [\"/api*\"]\n"
                                    "- level: Request\n  nonResourceURLs: [\"*\"]\n"
                                    "- level: RequestResponse\n");
    audit_attributes at = nonres("get", "/healthz");
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    at.path = "/healthz/etcd";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    at.path = "/version";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_NONE);
    at.path = "/version/x"; /* exact only */
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at.path = "/apis/apps"; /* a prefix */
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_METADATA);
    at.path = "/metrics";
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST);
    at = res("get", "", "pods", "", "default", "");
    at.path = "/healthz"; /* a resource request is no non-resource URL */
    assert_int_equal(audit_policy_decide(p, &at, NULL), AUDIT_LEVEL_REQUEST_RESPONSE);
    audit_policy_free(p);
}

static void test_decide_omit(void **state)
{
    (void)state;
    audit_policy *p = parse_ok(HEAD "omitStages: [RequestReceived]\n"
                                    "omitManagedFields: true\n"
                                    "rules:\n"
                                    "- level: Metadata\n  verbs: [watch]\n"
                                    "  omitStages: [ResponseStarted, RequestReceived]\n"
                                    "  omitManagedFields: false\n"
                                    "- level: Request\n  verbs: [get]\n"
                                    "  omitStages: [Panic]\n");
    audit_decision d;
    audit_attributes at = nonres("watch", "/x");
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_METADATA);
    assert_int_equal(d.omit_stages, AUDIT_STAGE_BIT(AUDIT_STAGE_REQUEST_RECEIVED) |
                                        AUDIT_STAGE_BIT(AUDIT_STAGE_RESPONSE_STARTED));
    assert_false(d.omit_managed_fields); /* the rule's false wins */
    at.verb = "get";
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_REQUEST);
    assert_int_equal(d.omit_stages, AUDIT_STAGE_BIT(AUDIT_STAGE_REQUEST_RECEIVED) |
                                        AUDIT_STAGE_BIT(AUDIT_STAGE_PANIC));
    assert_true(d.omit_managed_fields); /* not set: the policy's */
    assert_true(audit_decision_omits(&d, AUDIT_STAGE_PANIC));
    assert_false(audit_decision_omits(&d, AUDIT_STAGE_RESPONSE_COMPLETE));
    /* no rule matched: None with the policy's own settings */
    at.verb = "list";
    assert_int_equal(audit_policy_decide(p, &at, &d), AUDIT_LEVEL_NONE);
    assert_int_equal(d.omit_stages, AUDIT_STAGE_BIT(AUDIT_STAGE_REQUEST_RECEIVED));
    assert_true(d.omit_managed_fields);
    audit_policy_free(p);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(audit_level_name(AUDIT_LEVEL_REQUEST_RESPONSE), "RequestResponse");
    assert_string_equal(audit_level_name((audit_level)9), "");
    assert_string_equal(audit_stage_name(AUDIT_STAGE_RESPONSE_STARTED), "ResponseStarted");
    assert_string_equal(audit_stage_name(AUDIT_STAGE_PANIC), "Panic");
}

/* ---- files and the flag ---- */

static char dir[512];

static int group_setup(void **state)
{
    (void)state;
    /* The warnings of lenient decoding would clutter the test's output. */
    ckube_log_set_flag("logtostderr", "false", NULL);
    ckube_log_set_flag("log-file", "/dev/null", NULL);
    const char *tmp = getenv("CKUBE_TEST_TMP");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    mkdir(tmp, 0755);
    snprintf(dir, sizeof dir, "%s/audit-policy-XXXXXX", tmp);
    return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rmdir(dir);
    return 0;
}

static void test_load_and_flag(void **state)
{
    (void)state;
    char path[600], missing[600], sub[600];
    snprintf(path, sizeof path, "%s/policy.yaml", dir);
    snprintf(missing, sizeof missing, "%s/nope.yaml", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(example_policy, f);
    fclose(f);

    char *err = NULL;
    audit_policy *p = audit_policy_load(path, &err);
    assert_non_null(p);
    assert_null(err);
    assert_int_equal(audit_policy_rule_count(p), 9);
    audit_policy_free(p);

    assert_int_equal(audit_policy_from_flag(path, &p, &err), 0);
    assert_non_null(p);
    audit_policy_free(p);
    /* no file: auditing off */
    assert_int_equal(audit_policy_from_flag(NULL, &p, &err), 0);
    assert_null(p);
    assert_int_equal(audit_policy_from_flag("", &p, &err), 0);
    assert_null(p);

    char want[1400];
    assert_null(audit_policy_load(missing, &err));
    snprintf(want, sizeof want,
             "failed to read file path \"%s\": open %s: no such file or directory", missing,
             missing);
    assert_string_equal(err, want);
    free(err);
    assert_int_equal(audit_policy_from_flag(missing, &p, &err), -1);
    assert_null(p);
    snprintf(want, sizeof want,
             "loading audit policy file: failed to read file path \"%s\": open %s: no such file "
             "or directory",
             missing, missing);
    assert_string_equal(err, want);
    free(err);

    mkdir(sub, 0755);
    assert_null(audit_policy_load(sub, &err));
    snprintf(want, sizeof want, "failed to read file path \"%s\": read %s: is a directory", sub,
             sub);
    assert_string_equal(err, want);
    free(err);
    rmdir(sub);

    assert_null(audit_policy_load("", &err));
    assert_string_equal(err, "file path not specified");
    free(err);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs(HEAD, f);
    fclose(f);
    assert_null(audit_policy_load(path, &err));
    snprintf(want, sizeof want, "loaded illegal policy with 0 rules: from file %s", path);
    assert_string_equal(err, want);
    free(err);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_policy),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_refusals_version_kind),
        cmocka_unit_test(test_refusals_decoding),
        cmocka_unit_test(test_refusals_validation),
        cmocka_unit_test(test_nul_in_strings),
        cmocka_unit_test(test_decide_users_groups_verbs),
        cmocka_unit_test(test_decide_resources),
        cmocka_unit_test(test_decide_nonresource),
        cmocka_unit_test(test_decide_omit),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_load_and_flag),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
